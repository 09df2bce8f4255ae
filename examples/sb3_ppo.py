"""Stable-Baselines3 on the ensemble game: the paper's two stages, or one shared policy (SuperSuit + MaskablePPO).

    pip install -e ".[sb3]"                       # stable-baselines3, sb3-contrib (MaskablePPO), SuperSuit
    python examples/sb3_ppo.py                    # toy8: 1. decider (mean vote fuses), 2. fuser, decider frozen
    python examples/sb3_ppo.py --cache bbh5       # the 5 LLMs on BIG-Bench-Hard
    python examples/sb3_ppo.py --train shared     # both roles through one parameter-shared MaskablePPO policy
    python examples/sb3_ppo.py --smoke            # both paths, short: two stages on bbh5, shared on toy8

Stage 1 trains the decider with SB3's PPO (one Bernoulli per model, ``MultiBinary(N)``) while the
mean-probability vote of its team answers. The decider sees the task of the question its team answers
(``decider_extras=("task",)``) and is credited with that question's reward (``credit="aligned"``: the game pays
a team one step after the decider chose it). Stage 2 trains the fuser with sb3-contrib's MaskablePPO (only the
question's valid choices can be sampled) while the stage-1 decider, frozen and greedy, picks the teams; the fuser
reads the per-choice view of its observation (``fusion_view="per_choice"``) through a scorer shared over the
choices that starts as the mean vote (``ensemble_env.adapters.networks``). The shared path trains one
MaskablePPO policy for both roles over SuperSuit's padded spaces, with SB3's generic MLP; its action masks keep
each role to its own actions, so no padded action reaches the environment.

The settings (``SETTINGS``: the decider's gamma and entropy bonus, the fuser's learning rate) were chosen on
bbh5's validation split (``--eval-split validation``), never on its test split; the script prints them.

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
from ensemble_env.adapters.networks import sb3_policy, sb3_policy_kwargs
from ensemble_env.adapters.sb3 import sb3_env
from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.adapters.wrappers import PerChoiceLayout, per_choice_observation
from ensemble_env.cache.datasets import resolve as resolve_cache

#: the game as every stage plays it: the task extras for both roles, a shuffled train stream
ENV_OPTIONS = {
    "split": "train",
    "order": "shuffled",
    "episode_length": 256,
    "decider_extras": ("task",),
    "fusion_extras": ("task",),
}
#: the shared SuperSuit path: both roles in one padded space, no extras (a generic MLP, the baseline)
SHARED_OPTIONS = {"split": "train", "order": "shuffled", "episode_length": 256}
PPO_SETTINGS = {"n_steps": 256, "batch_size": 64, "n_epochs": 10, "device": "cpu"}
#: chosen on bbh5's validation split (docs/adapters.md, "Stable-Baselines3"): the decider is a contextual bandit
#: once its credit is aligned (gamma 0), the fuser starts as the mean vote and moves slowly from there
SETTINGS = {
    "decider": {"gamma": 0.0, "ent_coef": 0.01, "learning_rate": 1e-3},
    "fusion": {"gamma": 0.0, "ent_coef": 0.0, "learning_rate": 3e-4},
    "shared": {"gamma": 0.99, "ent_coef": 0.0, "learning_rate": 1e-3},
}


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


def evaluate_pair(decider: Any, fuser: Any, cache: str, split: str = "test") -> EpisodeTally:
    """Greedy play of a decider model and a per-choice fusion model over the whole ``split`` stream."""
    options = {key: ENV_OPTIONS[key] for key in ("decider_extras", "fusion_extras")}
    env = ensemble_env.parallel_env(cache, split=split, **options)
    layout, per_choice = env.engine.layout, PerChoiceLayout.from_env(env)
    tally = EpisodeTally(env.cache.models)
    obs, infos = env.reset(seed=0)
    while env.agents:
        team, _ = decider.predict(obs["decider"][None], deterministic=True)
        mask = infos["fusion"]["action_mask"][None].astype(bool)
        view = per_choice_observation(obs["fusion"][None], layout, per_choice)
        answer, _ = fuser.predict(view, deterministic=True, action_masks=mask)
        used = team_mask_of(obs["fusion"], layout, "fusion")
        obs, _, _, _, infos = env.step({"decider": team[0], "fusion": int(answer[0])})
        tally.add(used, infos["fusion"])
    return tally


def evaluate_shared(model: Any, cache: str, split: str = "test") -> EpisodeTally:
    """Greedy play of the shared policy over the whole ``split`` stream (rows: decider, fusion)."""
    venv = sb3_env("shared", cache=cache, split=split, seed=0)
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


def report(label: str, cache: str, before: EpisodeTally, after: EpisodeTally, detail: str, split: str) -> None:
    title = f"[{label}] {cache}: {detail}"
    reference = baseline_figures(resolve_cache(cache), split)
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after), split=split))
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line(label, before.figures(), after.figures(), split), flush=True)


def two_stage(args: argparse.Namespace) -> None:
    options = {"cache": args.cache, "num_envs": args.num_envs, "seed": args.seed, **ENV_OPTIONS}
    print(f"settings: decider {SETTINGS['decider']}, fusion {SETTINGS['fusion']}, {PPO_SETTINGS}", flush=True)
    decider_env = sb3_env("decider", credit="aligned", **options)
    decider = PPO("MlpPolicy", decider_env, seed=args.seed, **PPO_SETTINGS, **SETTINGS["decider"])
    # the stage-2 fuser, built now so that "before" is the untrained pair; a per-choice scorer (the mean vote)
    fusion_env = sb3_env("fusion", fusion_view="per_choice", **options)
    layout = PerChoiceLayout.from_env(fusion_env.envs[0].parallel)
    fuser = MaskablePPO(
        sb3_policy(),
        fusion_env,
        policy_kwargs=sb3_policy_kwargs(layout),
        seed=args.seed,
        **PPO_SETTINGS,
        **SETTINGS["fusion"],
    )
    before = evaluate_pair(decider, fuser, args.cache, args.eval_split)
    train(decider, "sb3 decider", args.decider_steps)  # stage 1: the mean-probability vote fuses
    fuser.set_env(sb3_env("fusion", other=decider, fusion_view="per_choice", **options))  # stage 2: decider frozen
    train(fuser, "sb3 fusion", args.fusion_steps)
    after = evaluate_pair(decider, fuser, args.cache, args.eval_split)
    detail = f"decider {args.decider_steps} steps, then fuser {args.fusion_steps} steps, seed {args.seed}"
    report("sb3 two-stage", args.cache, before, after, detail, args.eval_split)


def shared(args: argparse.Namespace) -> None:
    venv = sb3_env("shared", cache=args.cache, num_envs=args.num_envs, seed=args.seed, **SHARED_OPTIONS)
    model = MaskablePPO("MlpPolicy", venv, seed=args.seed, **PPO_SETTINGS, **SETTINGS["shared"])
    before = evaluate_shared(model, args.cache, args.eval_split)
    train(model, "sb3 shared", args.shared_steps)
    after = evaluate_shared(model, args.cache, args.eval_split)
    detail = f"one MaskablePPO policy, {args.shared_steps} steps, seed {args.seed}"
    report("sb3 shared", args.cache, before, after, detail, args.eval_split)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="a built-in cache (toy8, bbh5) or a cache file; default toy8")
    parser.add_argument("--train", choices=("two-stage", "shared"), default="two-stage")
    parser.add_argument("--decider-steps", type=int, default=60_000, help="environment steps of stage 1")
    parser.add_argument("--fusion-steps", type=int, default=20_000, help="environment steps of stage 2")
    parser.add_argument("--shared-steps", type=int, default=150_000, help="environment steps of the shared policy")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument("--smoke", action="store_true", help="both paths, short: about a minute")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    if not args.smoke:
        args.cache = args.cache or "toy8"
    if args.smoke:  # the two stages on bbh5 (the shared policy, a generic MLP, learns on toy8 only)
        args.decider_steps, args.fusion_steps, args.shared_steps = 20_480, 4096, 16_384
        args.cache = args.cache or "bbh5"
        two_stage(args)
        args.cache = "toy8"
        shared(args)
    elif args.train == "two-stage":
        two_stage(args)
    else:
        shared(args)


if __name__ == "__main__":
    main()
