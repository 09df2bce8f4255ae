"""Training speed of the reference MAPPO on the default BBH run, and where the CPU time goes.

    python benchmarks/train_speed.py              # the default run, and the partial-feedback learner's
    python benchmarks/train_speed.py --write      # ... and update the speed block of benchmarks/README.md
    python benchmarks/train_speed.py --passes 10  # a quick look (10 passes over the 2,560 train questions)
    python benchmarks/train_speed.py --standard-only

Two runs, each ``ensemble_mappo.train`` with every setting at its default:
- **standard**: ``TrainConfig()`` on bbh5 (as ``ensemble-env train --cache bbh5`` runs it);
- **partial feedback**: the learner of ``ensemble-env benchmark --protocol unseen-tasks --feedback team`` (the index
  decider, :data:`ensemble_mappo.benchmark.protocols.PARTIAL_LEARNER`, at its default budget) on the first fold of
  bbh5's tasks, as the benchmark trains it.
Each is timed in this process's CPU time (user + system; torch uses one thread), so that other jobs on the shared
machine do not count. The time is split between the environment (``step``, ``reset``, ``state``), the networks while
collecting (acting, preparing the fusion features, the critic's values; the validation plays that choose the
deployed checkpoint included), the advantages (GAE), the PPO epochs, and the rest (setup, logging, checkpoints).
The line ``**N env steps per CPU second**`` is the standard run's (``compare_builds.py`` reads it). The
before/after comparison of two builds: ``python benchmarks/compare_builds.py --before REV --command "python
{tree}/benchmarks/train_speed.py"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from reporting import write_block

import ensemble_mappo.mappo as mappo
import ensemble_mappo.training as training
from ensemble_env import datasets
from ensemble_env.errors import command
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_mappo.config import TrainConfig, config_from_dict

README = Path(__file__).resolve().parent / "README.md"
TIMERS: dict[str, float] = {}


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            TIMERS[name] = TIMERS.get(name, 0.0) + time.process_time() - start

    return wrapper


def _instrument() -> None:
    """Accumulate the CPU time of the environment's methods, of collection, of GAE and of the PPO epochs."""
    for method in ("step", "reset", "state"):
        setattr(EnsembleVectorEnv, method, _timed("env", getattr(EnsembleVectorEnv, method)))
    learner = mappo.MAPPOLearner
    learner.collect = _timed("collect", learner.collect)  # type: ignore[method-assign]
    learner.batch = _timed("gae", learner.batch)  # type: ignore[method-assign]
    training.update = _timed("epochs", training.update)  # type: ignore[assignment]


#: the parts of a run's CPU time, in the table's order
PARTS = (
    ("environment (`step`, `reset`, `state`)", "env"),
    ("networks while collecting (acting, fusion features, critic values; validation plays)", "networks"),
    ("advantages (GAE)", "gae"),
    ("PPO epochs", "epochs"),
    ("setup, logging, checkpoints", "other"),
)


def measure(config: Any, cache: Any) -> dict[str, float]:
    """Train ``config`` on ``cache`` in a temporary folder; the CPU seconds of each part of :data:`PARTS`, the total,
    the wall time and the env steps. A run of one rollout first, not timed, compiles (or loads) the game's kernels for
    this game's options, so that a cold numba cache is not counted."""
    with tempfile.TemporaryDirectory() as out:
        warm = dataclasses.replace(config, total_steps=config.num_envs * config.num_steps, checkpoints=0)
        training.train(warm, cache, out, progress=False)
    TIMERS.clear()
    with tempfile.TemporaryDirectory() as out:
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        row = training.train(config, cache, out, progress=False)
        cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    env, gae, epochs = TIMERS.get("env", 0.0), TIMERS.get("gae", 0.0), TIMERS.get("epochs", 0.0)
    parts = {"env": env, "gae": gae, "epochs": epochs - gae, "networks": TIMERS.get("collect", 0.0) - env}
    parts["other"] = cpu - sum(parts.values())
    return {**parts, "total": cpu, "wall": wall, "steps": float(row["global_step"])}


def partial_run(cache_name: str) -> tuple[Any, Any, str]:
    """The partial-feedback learner's default run: its config and the first fold's cache, as the benchmark's
    ``--protocol unseen-tasks --feedback team`` trains it (seed 0, alpha 1), and a description."""
    from ensemble_mappo import algorithms
    from ensemble_mappo.benchmark import learners, protocols

    folds, _ = protocols.units(datasets.resolve(cache_name), k=4, seed=0)
    fold = folds[0]
    passes, checkpoints = algorithms.get("mappo").budget("default")
    overrides = {
        **protocols.learner_overrides("mappo", TrainConfig, fold.cache.n_models, "team"),
        "total_steps": protocols.PARTIAL_BUDGET_STEPS["default"],
    }
    config = learners.learner_config("mappo", 0, 1.0, passes=passes, checkpoints=checkpoints, overrides=overrides)
    return config, fold.cache, f"{cache_name} {fold.label}, `--protocol unseen-tasks --feedback team`"


@command("train_speed.py")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="bbh5", help="a built-in cache name or a cache file (default bbh5)")
    parser.add_argument("--passes", type=float, default=None, help="override TrainConfig.passes (default 160)")
    parser.add_argument("--standard-only", action="store_true", help="skip the partial-feedback learner's run")
    parser.add_argument("--write", action="store_true", help="update the speed block of benchmarks/README.md")
    args = parser.parse_args()

    cache = datasets.resolve(args.cache)
    config = config_from_dict({} if args.passes is None else {"passes": args.passes})
    _instrument()
    runs = {"standard": measure(config, cache)}
    n_train = int(cache.select("train", None).size)
    shape = (
        f"{config.num_envs} copies x {config.num_steps} steps per rollout, {config.update_epochs} epochs x "
        f"{config.num_minibatches} minibatches, {config.threads} torch thread(s)"
    )
    described = [
        f"standard: the default run on {args.cache}, {config.passes:g} passes x {n_train:,} train questions = "
        f"{int(runs['standard']['steps']):,} env steps ({cache.n_models} models; {shape})"
    ]
    if not args.standard_only:
        partial_config, fold_cache, where = partial_run(args.cache)
        runs["partial feedback"] = measure(partial_config, fold_cache)
        described.append(
            f"partial feedback: the index decider on {where}, {int(runs['partial feedback']['steps']):,} env steps "
            f"({partial_config.num_envs} x {partial_config.num_steps} per rollout, {partial_config.update_epochs} x "
            f"{partial_config.num_minibatches} minibatches, {partial_config.model_permutations} model-permuted copies "
            "of each training task)"
        )
    names = list(runs)
    lines = [
        "MAPPO training speed, process CPU time. " + "; ".join(described) + ".",
        "",
        "| | " + " | ".join(f"{name}: CPU seconds | share" for name in names) + " |",
        "|---|" + "---:|---:|" * len(names),
        "| **total** | " + " | ".join(f"**{runs[n]['total']:.1f}** | 100%" for n in names) + " |",
    ]
    for label, key in PARTS:
        cells = (f"{runs[n][key]:.1f} | {100 * runs[n][key] / runs[n]['total']:.0f}%" for n in names)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    standard = runs["standard"]
    lines += [
        "",
        f"**{standard['steps'] / standard['total']:,.0f} env steps per CPU second** end to end, the standard run "
        f"(wall {standard['wall']:.1f} s on the shared machine); the environment alone ran at "
        f"{standard['steps'] / max(standard['env'], 1e-9):,.0f} steps/s.",
    ]
    if "partial feedback" in runs:
        partial = runs["partial feedback"]
        lines.append(
            f"The partial-feedback learner: {partial['steps'] / partial['total']:,.0f} env steps per CPU second "
            f"(wall {partial['wall']:.1f} s)."
        )
    lines.append(
        f"Machine: {platform.processor() or platform.machine()}, torch {torch.__version__}. "
        "Regenerate: `python benchmarks/train_speed.py --write`."
    )
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_block(README, "speed", "### Training speed\n\n" + text)
        print(f"\nwrote the speed block of {README}")


if __name__ == "__main__":
    raise SystemExit(main())
