"""Stable-Baselines3 PPO on RLAE's game: one agent sets a weight per model for every question (arXiv 2506.00439).

    pip install -e ".[sb3]"                       # stable-baselines3 (and the extra's sb3-contrib, SuperSuit)
    python examples/sb3_rlae.py                   # bbh5: the 5 LLMs on BIG-Bench-Hard
    python examples/sb3_rlae.py --cache toy8      # the 8 scikit-learn models
    python examples/sb3_rlae.py --smoke           # short: a fifth of the budget

RLAE as published: no decider, every model answers every question, and one agent reads the question (every
model's probabilities, the task one-hot and, on bbh5, its text features) and sets a weight per model, a
``Box(0, 1, (N,))`` action; the answer is the argmax over the valid choices of sum_i w_i p_i(c), the reward +1
if right, else -1 - alpha. It is ``sb3_env("weights")`` (``ensemble_env.adapters.sb3``), the single-agent view of
``parallel_env(decider=False, fusion_action="weights", fusion_extras=("task", "features"), reward_history=0)``,
trained with SB3's plain PPO: a Gaussian per weight, its samples clipped into [0, 1] by SB3. A question is a
one-step bandit (the weights change nothing later), so gamma is 0.

The policy starts where SB3 starts it (``--start sb3``, the default): the Gaussian's mean near 0, which SB3's
clipping makes a vote of a few models with tiny weights, a little below the mean vote. ``--start uniform``
(``start_at_uniform``: the mean action 1/2 for every model whatever the question) starts at the mean vote, the
conventional ensemble, as the reference learner ``rlae_ppo`` does; on bbh5's validation split it ended lower
(docs/adapters.md): the answer depends only on the weights' ratios, and the same Gaussian spread explores the
ratios far more widely around weights near 0 than around 1/2 (a wider spread from the uniform start closed part
of the gap). Evaluation plays the policy's mean action.

The settings (``SETTINGS``) were chosen on bbh5's validation split (``--eval-split validation``), never on its
test split; the script prints them. It prints a progress line every 10 rollouts; at the end the greedy (mean
action) accuracy and reward per question on the test split before and after training, next to the best single
model, the mean vote, the per-task weights fitted on train (``per_task_weights``) and stacking, and the mean
weights the trained agent gave each model.

``--smoke`` is the default run at a fifth of its budget (40,960 steps, bbh5, seed 0): about 15 s of CPU.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch
from sb3_ppo import PrintProgress  # the sibling example's progress callback (examples/ is on sys.path)
from stable_baselines3 import PPO

from ensemble_env.adapters.sb3 import SingleRoleEnv, sb3_env, start_at_uniform, weights_options
from ensemble_env.adapters.scoring import EpisodeTally, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.baselines.weights import per_task_weights
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.game.reward import question_rewards

#: the training stream: the train split, shuffled, cut into episodes (truncations: SB3 bootstraps, gamma 0 here)
ENV_OPTIONS = {"split": "train", "order": "shuffled", "episode_length": 256}
#: chosen on bbh5's validation split (docs/adapters.md, "RLAE's weights with SB3"): a bandit (gamma 0), SB3's own
#: start (the mean action near 0) with a spread of 0.2 (log_std_init), no entropy bonus, 80 passes of the train split
SETTINGS: dict[str, Any] = {
    "learning_rate": 1e-3,
    "n_steps": 256,
    "batch_size": 256,
    "n_epochs": 4,
    "gamma": 0.0,
    "ent_coef": 0.0,
    "log_std_init": -1.6,
    "start": "sb3",
    "steps": 204_800,
}
NUM_ENVS = 8  # copies per rollout: 8 x 256 = 2048 steps
STARTS = ("uniform", "sb3")


def build(cache: LogitCache, seed: int, start: str) -> PPO:
    """SB3's PPO on the weights game of ``cache``'s train split, starting at the uniform weights or SB3's start."""
    venv = sb3_env("weights", cache=cache, num_envs=NUM_ENVS, seed=seed, **ENV_OPTIONS)
    ppo = {key: SETTINGS[key] for key in ("learning_rate", "n_steps", "batch_size", "n_epochs", "gamma", "ent_coef")}
    model = PPO(
        "MlpPolicy", venv, seed=seed, device="cpu", policy_kwargs={"log_std_init": SETTINGS["log_std_init"]}, **ppo
    )
    return start_at_uniform(model) if start == "uniform" else model


def evaluate(model: PPO, cache: LogitCache, split: str) -> tuple[EpisodeTally, np.ndarray]:
    """The mean action's play of the whole ``split`` stream (the cache's order); the tally and the mean weights."""
    env = SingleRoleEnv("fusion", cache=cache, **weights_options(cache, split=split))
    layout = env.parallel.engine.layout
    tally, weights = EpisodeTally(cache.models), []
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        action, _ = model.predict(obs, deterministic=True)  # the Gaussian's mean, clipped into [0, 1] by SB3
        team = team_mask_of(obs, layout, "fusion")  # every model: no decider
        obs, _, terminated, truncated, info = env.step(action)
        tally.add(team, info)
        weights.append(action)
        done = terminated or truncated
    return tally, np.mean(weights, axis=0)


def has_validation(cache: LogitCache) -> bool:
    return bool(np.any(cache.split == SPLITS["validation"]))


def references(cache: LogitCache, split: str) -> dict[str, dict[str, float]]:
    """The fixed baselines on ``split`` (no static_team: without a decider every model answers), and the per-task
    weights fitted on train, their shrink chosen on validation when the cache has one."""
    figures = baseline_figures(cache, split)
    figures.pop("static_team", None)
    train, questions = cache.select("train"), cache.select(split)
    validation = cache.select("validation") if has_validation(cache) else None
    result = per_task_weights(cache, train, questions, validation=validation)
    share = result.team_size / cache.n_models  # 1: every model
    rewards = question_rewards(result.correct, share, alpha=1.0, size_penalty_mode="on_error")
    figures["per_task_weights"] = {
        "accuracy": result.accuracy,
        "reward_per_question": float(rewards.mean()),
        "team_size": result.mean_team_size,
    }
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="bbh5", help="a built-in cache (bbh5, toy8) or a cache file; default bbh5")
    parser.add_argument("--steps", type=int, default=None, help=f"environment steps (default {SETTINGS['steps']})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument(
        "--start", choices=STARTS, default=SETTINGS["start"], help="sb3: SB3's own start; uniform: the mean vote"
    )
    parser.add_argument("--smoke", action="store_true", help="a fifth of the budget: about 15 s of CPU")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    steps = args.steps if args.steps is not None else 40_960 if args.smoke else SETTINGS["steps"]
    if steps < 1:
        parser.error(f"--steps must be >= 1, got {steps}")
    start = args.start
    cache = resolve_cache(args.cache)
    if args.eval_split == "validation" and not has_validation(cache):
        parser.error(f"--eval-split validation: the cache {args.cache!r} has no validation questions")
    print(f"settings: {SETTINGS}, {NUM_ENVS} copies, {ENV_OPTIONS}, start {start}", flush=True)
    model = build(cache, args.seed, start)
    before, _ = evaluate(model, cache, args.eval_split)
    label = "sb3 rlae"
    began = time.monotonic()
    model.learn(steps, callback=PrintProgress(label, steps, every=10))
    print(f"{label}: {steps} steps in {time.monotonic() - began:.0f} s", flush=True)
    after, weights = evaluate(model, cache, args.eval_split)
    title = f"[{label}] {args.cache}: PPO on the weights game, {steps} steps, seed {args.seed}, start {start}"
    reference = references(cache, args.eval_split)
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after), split=args.eval_split))
    shown = ", ".join(
        f"{name.split('__')[-1]} {weight:.2f}" for name, weight in zip(cache.models, weights, strict=True)
    )
    print(f"  mean weights after: {shown}")
    print(gain_line(label, before.figures(), after.figures(), args.eval_split), flush=True)


if __name__ == "__main__":
    main()
