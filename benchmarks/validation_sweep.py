"""Compare MAPPO settings on a cache's validation split (never test), against static_team on the same questions.

Each setting trains with ``ensemble_mappo.train`` on the train split for every seed; the policy plays the
validation split greedily (``evaluate_agents``) at ``--checkpoints`` evenly spaced checkpoints (the run is
stopped there and resumed, which gives the same numbers as a run straight through), the last one being the
final policy. Printed per setting: the macro reward at each checkpoint (mean over the seeds: is validation
flat at the end?), then for the final policy the macro accuracy, macro reward (mean reward per question,
averaged over tasks) and models per question, mean ± standard deviation over the seeds, the reward difference
to static_team (the best fixed team per task, chosen on train) on the same questions, the share of the tasks
on which the policy's most used team is static_team's ("same team"), and the mean over seeds of the best
checkpoint's reward (what the benchmark's checkpoint choice can reach).

    python benchmarks/validation_sweep.py                                  # the settings below, 3 seeds, bbh5
    python benchmarks/validation_sweep.py --set "lr 2.5e-4: learning_rate=2.5e-4" --set "defaults:" --seeds 5

A setting is ``NAME: FIELD=VALUE, FIELD=VALUE`` (fields of ``TrainConfig``; values are JSON, else strings;
``env.KEY=VALUE`` sets an environment option, e.g. ``env.window=32``); a setting without its colon, a field given twice
and ``seed`` (the script's ``--seeds``) are refused.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import datasets
from ensemble_env.baselines import comparison
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.errors import command
from ensemble_env.game.reward import RewardSettings

#: what the sweep compares by default: the defaults, and each of the decider's mechanisms switched back
SETTINGS = (
    "defaults:",
    "sampled credit: decider_credit=sampled",
    "greedy credit: decider_credit=greedy",
    "prior start: decider_start=prior",
    "no trust region: decider_kl_coef=0",
    "window 500: env.window=500",
)


#: the fields a setting may not give: this script sets them itself (the seeds of --seeds)
FIXED_FIELDS = {"seed": "the seeds are --seeds's 0..S-1, the same for every setting"}


def parse_setting(text: str, fixed: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """``"NAME: a=1, b=x"`` -> ``("NAME", {"a": 1, "b": "x"})``; the fields are checked by TrainConfig. A ValueError
    naming the setting for a text without its colon (``"NAME:"`` is the defaults), a field given twice, and a field
    of ``fixed`` (``{field: why the script sets it}``, ``env.KEY`` for an environment option): the script would
    replace it.

    >>> parse_setting('index: decider_policy="index", env.window=32')
    ('index', {'decider_policy': 'index', 'env': {'window': 32}})
    >>> parse_setting("index")
    Traceback (most recent call last):
    ...
    ValueError: --set 'index': expected NAME: FIELD=VALUE, ... (a colon after the name; 'NAME:' is the defaults)
    """
    name, colon, body = text.partition(":")
    if not name.strip() or not colon:
        raise ValueError(f"--set {text!r}: expected NAME: FIELD=VALUE, ... (a colon after the name; 'NAME:' is the "
                         "defaults)")  # fmt: skip
    fields: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"--set {text!r}: {item!r} is not FIELD=VALUE")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value.strip()
        key = key.strip()
        if key in (fixed or {}):
            raise ValueError(f"--set {text!r}: {key} is set by the script ({(fixed or {})[key]}); drop it")
        table = fields.setdefault("env", {}) if key.startswith("env.") else fields
        field = key.removeprefix("env.")
        if field in table:
            raise ValueError(f"--set {text!r}: {key} is given twice")
        table[field] = parsed
    return name.strip(), fields


@command("validation_sweep.py")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=datasets.DEFAULT, help="built-in name or cache file (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..S-1 per setting (default: %(default)s)")
    parser.add_argument("--set", action="append", metavar="SETTING", help="NAME: FIELD=VALUE, ... (repeatable)")
    parser.add_argument(
        "--checkpoints",
        type=int,
        default=5,
        help="evaluations on validation per run, evenly spaced (default: %(default)s)",
    )
    args = parser.parse_args(argv)

    import torch  # noqa: F401  (the mappo extra)

    from ensemble_mappo.checkpoint import load_checkpoint
    from ensemble_mappo.config import TrainConfig, config_from_dict
    from ensemble_mappo.evaluation import baseline_summary, evaluate_agents
    from ensemble_mappo.training import run_budget, train

    cache = resolve_cache(args.cache)
    settings = [parse_setting(text, FIXED_FIELDS) for text in (args.set or SETTINGS)]
    (static,) = comparison.compare(cache, split="validation", train_split="train", names=["static_team"])
    reference = baseline_summary(cache, [static], RewardSettings(alpha=1.0))["static_team"]
    print(
        f"{args.cache}: validation split, {static.n_questions} questions, {len(static.task_accuracy(cache))} tasks; "
        f"alpha = 1; static_team: macro accuracy {reference['macro_accuracy']:.3f}, macro reward "
        f"{reference['macro_reward']:+.3f}, {reference['mean_team_size']:.2f} models",
        flush=True,
    )
    tasks = np.asarray(cache.tasks)[static.questions]
    static_codes = _team_codes(np.asarray(static.teams))
    for name, fields in settings:
        scores, curves = [], []
        started = time.process_time()
        for seed in range(args.seeds):
            config = config_from_dict({**TrainConfig(seed=seed).to_dict(), **fields, "seed": seed})
            iterations = run_budget(config, cache).iterations  # the plan that runs (model-permuted copies too)
            stops = sorted({max(1, round(iterations * (k + 1) / args.checkpoints)) for k in range(args.checkpoints)})
            curve = []
            with tempfile.TemporaryDirectory() as folder:
                for index, stop in enumerate(stops):
                    train(config, cache, Path(folder), progress=False, resume=index > 0, stop_after=stop)
                    networks = load_checkpoint(Path(folder))["networks"]
                    evaluation = evaluate_agents(networks, config, cache, split="validation", seed=seed)
                    curve.append(evaluation.summary(cache)["macro_reward"])
            summary = evaluation.summary(cache)
            codes = _team_codes(evaluation.teams)
            same = np.mean([_mode(codes[tasks == t]) == _mode(static_codes[tasks == t]) for t in np.unique(tasks)])
            scores.append((summary["macro_accuracy"], summary["macro_reward"], summary["mean_team_size"], same))
            curves.append(curve)
        mean, spread = np.mean(scores, axis=0), np.std(scores, axis=0)
        print(
            f"{name:<28} " + " ".join(f"{value:+.3f}" for value in np.mean(curves, axis=0)) + " | "
            f"macro accuracy {mean[0]:.3f} ± {spread[0]:.3f}   macro reward {mean[1]:+.3f} ± "
            f"{spread[1]:.3f} (static_team {mean[1] - reference['macro_reward']:+.3f})   models {mean[2]:.2f}   "
            f"same team {mean[3]:.2f}   best checkpoint {np.mean(np.max(curves, axis=1)):+.3f}   "
            f"CPU {time.process_time() - started:.0f} s for {args.seeds} seeds",
            flush=True,
        )
    return 0


def _team_codes(teams: np.ndarray) -> np.ndarray:
    """(Q,) one integer per team mask (Q, N)."""
    return np.asarray(teams, dtype=np.int64) @ (1 << np.arange(np.asarray(teams).shape[1], dtype=np.int64))


def _mode(codes: np.ndarray) -> int:
    values, counts = np.unique(codes, return_counts=True)
    return int(values[np.argmax(counts)])


if __name__ == "__main__":
    raise SystemExit(main())
