"""Stable-Baselines3 on the ensemble game: the paper's two stages, or one shared policy (SuperSuit + MaskablePPO).

    pip install -e ".[sb3]"                       # stable-baselines3, sb3-contrib (MaskablePPO), SuperSuit
    python examples/sb3_ppo.py                    # toy8: 1. decider (mean vote fuses), 2. fuser, decider frozen
    python examples/sb3_ppo.py --cache bbh5       # the 5 LLMs on BIG-Bench-Hard
    python examples/sb3_ppo.py --train shared     # both roles through one parameter-shared MaskablePPO policy
    python examples/sb3_ppo.py --smoke            # both paths, short (about a minute)

Stage 1 trains the decider with SB3's PPO (one Bernoulli per model, ``MultiBinary(N)``) while the
mean-probability vote of its team answers; stage 2 trains the fuser with sb3-contrib's MaskablePPO (only the
question's valid choices can be sampled) while the stage-1 decider, frozen and greedy, picks the teams. The
shared path trains one MaskablePPO policy for both roles over SuperSuit's padded spaces; its action masks keep
each role to its own actions, so no padded action reaches the environment.

Each stage prints a progress line per rollout; at the end the script prints the greedy test-split accuracy,
reward per question and team size of both agents before and after training, next to the fixed baselines, and
the teams the decider committed.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

import ensemble_env
from ensemble_env.adapters.sb3 import sb3_env
from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.cache.datasets import resolve as resolve_cache

ENV_OPTIONS = {"split": "train", "order": "shuffled", "episode_length": 256}
PPO_SETTINGS = {"n_steps": 256, "batch_size": 64, "n_epochs": 10, "learning_rate": 1e-3, "device": "cpu"}


class PrintProgress(BaseCallback):
    """A progress line after every ``every``-th rollout: steps done, mean episode return, time left."""

    def __init__(self, label: str, total: int, every: int = 10) -> None:
        super().__init__()
        self.progress = Progress(label, total)
        self.every, self.rollouts = every, 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        if self.rollouts % self.every == 0:
            returns = [episode["r"] for episode in self.model.ep_info_buffer]
            self.progress.update(self.num_timesteps, episode_return=float(np.mean(returns)) if returns else np.nan)


def evaluate_pair(decider: Any, fuser: Any, cache: str) -> EpisodeTally:
    """Greedy play of a decider model and a fusion model over the whole test stream."""
    env = ensemble_env.parallel_env(cache, split="test")
    layout = env.engine.layout
    tally = EpisodeTally(env.cache.models)
    obs, infos = env.reset(seed=0)
    while env.agents:
        team, _ = decider.predict(obs["decider"][None], deterministic=True)
        mask = infos["fusion"]["action_mask"][None].astype(bool)
        answer, _ = fuser.predict(obs["fusion"][None], deterministic=True, action_masks=mask)
        used = team_mask_of(obs["fusion"], layout, "fusion")
        obs, _, _, _, infos = env.step({"decider": team[0], "fusion": int(answer[0])})
        tally.add(used, infos["fusion"])
    return tally


def evaluate_shared(model: Any, cache: str) -> EpisodeTally:
    """Greedy play of the shared policy over the whole test stream (rows: decider, fusion)."""
    venv = sb3_env("shared", cache=cache, split="test", seed=0)
    models = resolve_cache(cache).models
    tally = EpisodeTally(models)
    obs = venv.reset()
    while True:
        actions, _ = model.predict(obs, deterministic=True, action_masks=get_action_masks(venv))
        team = obs[0, : len(models)]  # the decider's observation starts with the team answering now
        obs, _, dones, infos = venv.step(actions)
        tally.add(team, infos[1])
        if dones.all():  # the test stream is exhausted
            return tally


def train(model: Any, label: str, timesteps: int) -> Any:
    start = time.monotonic()
    model.learn(timesteps, callback=PrintProgress(label, timesteps))
    print(f"{label}: {timesteps} steps in {time.monotonic() - start:.0f} s", flush=True)
    return model


def report(label: str, cache: str, before: EpisodeTally, after: EpisodeTally, detail: str) -> None:
    title = f"[{label}] {cache}: {detail}"
    print(
        comparison(
            title, before.figures(), after.figures(), baseline_figures(resolve_cache(cache)), questions=len(after)
        )
    )
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line(label, before.figures(), after.figures()), flush=True)


def two_stage(args: argparse.Namespace) -> None:
    options = {"cache": args.cache, "num_envs": args.num_envs, "seed": args.seed, **ENV_OPTIONS}
    decider = PPO("MlpPolicy", sb3_env("decider", **options), seed=args.seed, **PPO_SETTINGS)
    # the stage-2 fuser, built now so that "before" is the untrained pair
    fuser = MaskablePPO("MlpPolicy", sb3_env("fusion", **options), seed=args.seed, **PPO_SETTINGS)
    before = evaluate_pair(decider, fuser, args.cache)
    train(decider, "sb3 decider", args.decider_steps)  # stage 1: the mean-probability vote fuses
    fuser.set_env(sb3_env("fusion", other=decider, **options))  # stage 2: the trained decider, frozen
    train(fuser, "sb3 fusion", args.fusion_steps)
    after = evaluate_pair(decider, fuser, args.cache)
    detail = f"decider {args.decider_steps} steps, then fuser {args.fusion_steps} steps, seed {args.seed}"
    report("sb3 two-stage", args.cache, before, after, detail)


def shared(args: argparse.Namespace) -> None:
    venv = sb3_env("shared", cache=args.cache, num_envs=args.num_envs, seed=args.seed, **ENV_OPTIONS)
    model = MaskablePPO("MlpPolicy", venv, seed=args.seed, **PPO_SETTINGS)
    before = evaluate_shared(model, args.cache)
    train(model, "sb3 shared", args.shared_steps)
    after = evaluate_shared(model, args.cache)
    report(
        "sb3 shared", args.cache, before, after, f"one MaskablePPO policy, {args.shared_steps} steps, seed {args.seed}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="toy8", help="a built-in cache (toy8, bbh5) or a cache file")
    parser.add_argument("--train", choices=("two-stage", "shared"), default="two-stage")
    parser.add_argument("--decider-steps", type=int, default=50_000, help="environment steps of stage 1")
    parser.add_argument("--fusion-steps", type=int, default=100_000, help="environment steps of stage 2")
    parser.add_argument("--shared-steps", type=int, default=150_000, help="environment steps of the shared policy")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="both paths, short: about a minute")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    if args.smoke:
        args.decider_steps, args.fusion_steps, args.shared_steps = 8192, 16_384, 16_384
        two_stage(args)
        shared(args)
    elif args.train == "two-stage":
        two_stage(args)
    else:
        shared(args)


if __name__ == "__main__":
    main()
