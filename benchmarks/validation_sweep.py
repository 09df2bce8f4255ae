"""Compare MAPPO settings on a cache's validation split (never test), against static_team on the same questions.

Each setting trains with ``ensemble_mappo.train`` on the train split for every seed; the final policy plays the
validation split greedily (``evaluate_agents``). Printed per setting: macro accuracy, macro reward (mean reward
per question, averaged over tasks) and models per question, mean ± standard deviation over the seeds, and the
reward difference to static_team (the best fixed team per task, chosen on train) on the same questions.

    python benchmarks/validation_sweep.py                                  # the settings below, 3 seeds, bbh5
    python benchmarks/validation_sweep.py --set "lr 2.5e-4: learning_rate=2.5e-4" --set "defaults:" --seeds 5

A setting is ``NAME: FIELD=VALUE, FIELD=VALUE`` (fields of ``TrainConfig``; values are JSON, else strings).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import datasets
from ensemble_env.baselines import comparison
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.game.reward import RewardSettings

#: what the sweep compares by default: the defaults, and the decider's inputs and exploration
SETTINGS = (
    "defaults:",
    "no question features: question_features=false",
    "entropy 0: ent_coef=0",
    "entropy 0.003: ent_coef=0.003",
    "200 passes: passes=200",
)


def parse_setting(text: str) -> tuple[str, dict[str, Any]]:
    """``"NAME: a=1, b=x"`` -> ``("NAME", {"a": 1, "b": "x"})``; the fields are checked by TrainConfig."""
    name, _, body = text.partition(":")
    if not name.strip():
        raise ValueError(f"--set {text!r}: expected NAME: FIELD=VALUE, ...")
    fields: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"--set {text!r}: {item!r} is not FIELD=VALUE")
        try:
            fields[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            fields[key.strip()] = value.strip()
    return name.strip(), fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=datasets.DEFAULT, help="built-in name or cache file (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..S-1 per setting (default: %(default)s)")
    parser.add_argument("--set", action="append", metavar="SETTING", help="NAME: FIELD=VALUE, ... (repeatable)")
    args = parser.parse_args(argv)

    import torch  # noqa: F401  (the mappo extra)

    from ensemble_mappo.checkpoint import load_checkpoint
    from ensemble_mappo.config import TrainConfig
    from ensemble_mappo.evaluation import baseline_summary, evaluate_agents
    from ensemble_mappo.training import train

    cache = resolve_cache(args.cache)
    settings = [parse_setting(text) for text in (args.set or SETTINGS)]
    (static,) = comparison.compare(cache, split="validation", train_split="train", names=["static_team"])
    reference = baseline_summary(cache, [static], RewardSettings(alpha=1.0))["static_team"]
    print(
        f"{args.cache}: validation split, {static.n_questions} questions, {len(static.task_accuracy(cache))} tasks; "
        f"alpha = 1; static_team: macro accuracy {reference['macro_accuracy']:.3f}, macro reward "
        f"{reference['macro_reward']:+.3f}, {reference['mean_team_size']:.2f} models",
        flush=True,
    )
    for name, fields in settings:
        scores = []
        started = time.process_time()
        for seed in range(args.seeds):
            config = dataclasses.replace(TrainConfig(seed=seed), **fields)
            with tempfile.TemporaryDirectory() as folder:
                train(config, cache, Path(folder), progress=False)
                networks = load_checkpoint(Path(folder))["networks"]
            summary = evaluate_agents(networks, config, cache, split="validation", seed=seed).summary(cache)
            scores.append((summary["macro_accuracy"], summary["macro_reward"], summary["mean_team_size"]))
        mean, spread = np.mean(scores, axis=0), np.std(scores, axis=0)
        print(
            f"{name:<28} macro accuracy {mean[0]:.3f} ± {spread[0]:.3f}   macro reward {mean[1]:+.3f} ± "
            f"{spread[1]:.3f} (static_team {mean[1] - reference['macro_reward']:+.3f})   models {mean[2]:.2f}   "
            f"CPU {time.process_time() - started:.0f} s for {args.seeds} seeds",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
