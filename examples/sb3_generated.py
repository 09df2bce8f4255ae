"""Stable-Baselines3's PPO on generated tasks (``ensemble_env/EnsembleGen-v0``), scored on held-out generated tasks.

    pip install -e ".[sb3]"
    python examples/sb3_generated.py              # a few CPU minutes
    python examples/sb3_generated.py --smoke      # about a minute

The decider learns with SB3's PPO (one Bernoulli per model, ``MultiBinary(N)``) on a deck of generated tasks
(``sb3_env("decider", env_id="ensemble_env/EnsembleGen-v0")``: every episode a whole task drawn by the generator
fitted to bbh5, partial feedback: its observation is the task's record of what its own teams revealed) while the
mean-probability vote of its team answers; it is credited with the reward of the question its team answers
(``credit="aligned"``, gamma 0). Then it plays, greedily, each task of ``--held-out`` tasks of the held-out stream
(``first=HELD_OUT_FIRST``: never in a training deck) exactly once, as do the untrained policy and the global team
(the one team with the best mean reward over the training deck, answering every question). It prints each one's
reward per question, accuracy and team size over the held-out questions, and the paired difference of the trained
decider to the global team and to its start: the mean over the held-out tasks of the per-task difference of reward
per question, with its standard error.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO

from ensemble_env import GEN_ENV_ID, HELD_OUT_FIRST
from ensemble_env.adapters.sb3 import SingleRoleEnv, sb3_env
from ensemble_env.baselines.outcomes import team_outcomes
from ensemble_env.game.actions import encode_team
from ensemble_env.views.generated import gen_deck

#: PPO's settings: those of examples/sb3_ppo.py's decider stage (chosen there on bbh5's validation split; a contextual
#: bandit once the credit is aligned, gamma 0), not swept on generated tasks
PPO_SETTINGS = {"n_steps": 256, "batch_size": 64, "n_epochs": 10, "gamma": 0.0, "ent_coef": 0.01,
                "learning_rate": 1e-3, "device": "cpu"}  # fmt: skip


def held_out_scores(policy: Any, held_out: dict[str, Any], n_tasks: int) -> np.ndarray:
    """(tasks, 3): each held-out task's reward per question, accuracy and mean team size, ``policy`` (decider
    observation -> team mask) deciding and the mean vote fusing; each task played once (a seeded reset deals the
    deck's first task, each reset after it the next one)."""
    env = SingleRoleEnv("decider", env_id=GEN_ENV_ID, **held_out)
    rows = []
    for task in range(n_tasks):
        obs, info = env.reset(seed=0 if task == 0 else None)
        rewards, right, sizes, done = [], [], [], False
        while not done:
            obs, _, terminated, truncated, info = env.step(policy(obs))
            rewards.append(info["reward"])
            right.append(info["correct"])
            sizes.append(info["team_size"])
            done = terminated or truncated
        rows.append((np.mean(rewards), np.mean(right), np.mean(sizes)))
    return np.array(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=204_800, help="PPO's training steps (default 204,800)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deck-size", type=int, default=2048, help="training tasks in the deck")
    parser.add_argument("--held-out", type=int, default=300, help="held-out tasks scored (each once)")
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="20,480 steps, 100 held-out tasks")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.held_out = 20_480, 100
    torch.set_num_threads(1)
    start = time.process_time()
    train = {"deck_size": args.deck_size, "task_seed": 0}
    held_out = {"deck_size": args.held_out, "task_seed": 0, "first": HELD_OUT_FIRST}
    print(f"settings: {PPO_SETTINGS}, {args.steps:,} steps, {args.copies} copies, seed {args.seed}, "
          f"deck of {args.deck_size:,} training tasks, {args.held_out} held-out tasks", flush=True)  # fmt: skip

    venv = sb3_env("decider", num_envs=args.copies, seed=args.seed, env_id=GEN_ENV_ID, credit="aligned", **train)
    model = PPO("MlpPolicy", venv, seed=args.seed, **PPO_SETTINGS)
    untrained = {key: value.clone() for key, value in model.policy.state_dict().items()}

    def greedy(obs: np.ndarray) -> np.ndarray:
        return model.predict(obs, deterministic=True)[0]

    model.learn(args.steps)
    trained = held_out_scores(greedy, held_out, args.held_out)
    model.policy.load_state_dict(untrained)
    before = held_out_scores(greedy, held_out, args.held_out)

    deck = gen_deck(**train)  # the global team: the best mean reward over the training deck's questions
    outcomes = team_outcomes(deck)
    best = int(np.argmax(outcomes.rewards.mean(axis=1)))
    team = outcomes.teams[best]
    mask = encode_team(team[None, :], "multibinary")[0]
    fixed = held_out_scores(lambda obs: mask, held_out, args.held_out)
    members = "+".join(deck.models[m] for m in np.flatnonzero(team))

    print(f"held-out generated tasks ({args.held_out}, each once), mean over the tasks of reward per question / "
          "accuracy / models")  # fmt: skip
    for name, scores in (("PPO decider (trained)", trained), ("PPO decider (untrained start)", before),
                         (f"global team ({members})", fixed)):  # fmt: skip
        print(f"  {name:<60s} {scores[:, 0].mean():+.3f} / {scores[:, 1].mean():.3f} / {scores[:, 2].mean():.2f}")
    for name, other in (("global team", fixed), ("untrained start", before)):
        difference = trained[:, 0] - other[:, 0]
        error = difference.std(ddof=1) / np.sqrt(difference.size)
        print(f"  trained minus {name}: {difference.mean():+.4f} +- {error:.4f} (paired over the tasks, one standard "
              f"error; {np.mean(difference > 0):.0%} of the tasks above)")  # fmt: skip
    print(f"CPU time {time.process_time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
