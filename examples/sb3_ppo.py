"""Stable-Baselines3 PPO on the ensemble game: the paper's two stages, or one shared policy (SuperSuit).

    pip install -e ".[sb3]"
    python examples/sb3_ppo.py                    # stage 1: decider (plurality vote fuses); 2: fusion, decider frozen
    python examples/sb3_ppo.py --smoke            # the fusion stage alone (team = every model), under a minute
    python examples/sb3_ppo.py --train shared     # both roles through one parameter-shared policy (SuperSuit)

Each stage prints the test-split accuracy and reward per question before and after training (greedy actions,
the whole test stream in order).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

from ensemble_env.adapters.sb3 import sb3_env
from ensemble_env.policies import PluralityVote


def evaluate(model: Any, train: str, other: Any = None, seed: int = 0) -> dict[str, float]:
    """Greedy play of ``model`` over the whole test stream: accuracy, reward per question, mean team size."""
    venv = sb3_env(train, other=other, split="test", seed=seed)
    obs = venv.reset()
    team_sizes: list[float] = []
    while True:
        actions, _ = model.predict(obs, deterministic=True)
        obs, _, dones, infos = venv.step(actions)
        team_sizes.append(infos[-1]["team_size"])
        if dones.any():  # every copy ends together; the last one is the fusion agent in the shared env
            info = infos[-1]
            return {
                "accuracy": info["accuracy"],
                "reward_per_question": info["episode_return"] / info["step"],
                "team_size": float(np.mean(team_sizes)),
            }


def train_stage(train: str, timesteps: int, args: argparse.Namespace, other: Any = None) -> Any:
    from stable_baselines3 import PPO

    env = sb3_env(train, other=other, num_envs=args.num_envs, seed=args.seed, **_env_options(args))
    model = PPO(
        "MlpPolicy", env, n_steps=256, batch_size=256, n_epochs=4, learning_rate=1e-3, seed=args.seed, device="cpu"
    )
    before = evaluate(model, train, other, args.seed)
    model.learn(timesteps)
    after = evaluate(model, train, other, args.seed)
    print(f"[{train}] {timesteps} steps")
    for key in before:
        print(f"  test {key:<20s} before {before[key]:7.3f}   after {after[key]:7.3f}")
    return model


def _env_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"split": "train", "order": "shuffled", "episode_length": args.episode_length}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", choices=("two-stage", "fusion", "decider", "shared"), default="two-stage")
    parser.add_argument("--timesteps", type=int, default=100_000, help="environment steps per stage")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--episode-length", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="80k steps of the fusion stage (under a minute)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    if args.smoke:
        args.train, args.timesteps = "fusion", 80_000

    if args.train == "shared":
        train_stage("shared", args.timesteps, args)
        return
    decider = None
    if args.train in ("two-stage", "decider"):  # the paper's stage 1: a scripted fuser
        decider = train_stage("decider", args.timesteps, args, other=PluralityVote)
    if args.train in ("two-stage", "fusion"):  # stage 2: the decider frozen (alone: every model is the team)
        train_stage("fusion", args.timesteps, args, other=decider)


if __name__ == "__main__":
    main()
