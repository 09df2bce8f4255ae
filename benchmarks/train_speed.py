"""Training speed of the reference MAPPO on the default BBH run, and where the CPU time goes.

    python benchmarks/train_speed.py              # the default run: `ensemble-env train` on bbh5 (258k env steps)
    python benchmarks/train_speed.py --write      # ... and update the speed block of benchmarks/README.md
    python benchmarks/train_speed.py --passes 10  # a quick look (10 passes over the 2,560 train questions)

The run is ``ensemble_mappo.train(TrainConfig(), bbh5)`` (every setting at its default, as
``ensemble-env train --cache bbh5`` runs it), timed in this process's CPU time (user + system; torch uses
one thread), so that other jobs on the shared machine do not count. The time is split between the
environment (``step``, ``reset``, ``state``), the networks while collecting (acting, preparing the fusion
features, the critic's values), the advantages (GAE), the PPO epochs, and the rest (setup, logging,
checkpoints). The before/after comparison of two builds is ``benchmarks/compare_builds.py --command``.
"""

from __future__ import annotations

import argparse
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
from ensemble_mappo.config import config_from_dict

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


@command("train_speed.py")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="bbh5", help="a built-in cache name or a cache file (default bbh5)")
    parser.add_argument("--passes", type=float, default=None, help="override TrainConfig.passes (default 100)")
    parser.add_argument("--write", action="store_true", help="update the speed block of benchmarks/README.md")
    args = parser.parse_args()

    cache = datasets.resolve(args.cache)
    config = config_from_dict({} if args.passes is None else {"passes": args.passes})
    _instrument()
    with tempfile.TemporaryDirectory() as out:
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        row = training.train(config, cache, out, progress=False)
        cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    steps = int(row["global_step"])
    env, gae, epochs = TIMERS.get("env", 0.0), TIMERS.get("gae", 0.0), TIMERS.get("epochs", 0.0)
    epochs -= gae  # the update's time holds its advantages
    networks = TIMERS.get("collect", 0.0) - env
    other = cpu - env - networks - gae - epochs
    n_train = int(cache.select("train", None).size)
    lines = [
        f"MAPPO training speed, the default run on {args.cache}: {config.passes:g} passes x {n_train:,} train "
        f"questions = {steps:,} env steps ({cache.n_models} models; {config.num_envs} copies x "
        f"{config.num_steps} steps per rollout, {config.update_epochs} epochs x {config.num_minibatches} "
        f"minibatches, {config.threads} torch thread(s)); process CPU time",
        "",
        "| | CPU seconds | share |",
        "|---|---:|---:|",
        f"| **total** | **{cpu:.1f}** | 100% |",
        f"| environment (`step`, `reset`, `state`) | {env:.1f} | {100 * env / cpu:.0f}% |",
        f"| networks while collecting (acting, fusion features, critic values) | {networks:.1f} | "
        f"{100 * networks / cpu:.0f}% |",
        f"| advantages (GAE) | {gae:.1f} | {100 * gae / cpu:.0f}% |",
        f"| PPO epochs ({config.update_epochs} x {config.num_minibatches} minibatches) | {epochs:.1f} | "
        f"{100 * epochs / cpu:.0f}% |",
        f"| setup, logging, checkpoints | {other:.1f} | {100 * other / cpu:.0f}% |",
        "",
        f"**{steps / cpu:,.0f} env steps per CPU second** end to end (wall {wall:.1f} s on the shared machine); "
        f"the environment alone ran at {steps / max(env, 1e-9):,.0f} steps/s. Machine: "
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}. "
        "Regenerate: `python benchmarks/train_speed.py --write`.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_block(README, "speed", "### Training speed\n\n" + text)
        print(f"\nwrote the speed block of {README}")


if __name__ == "__main__":
    raise SystemExit(main())
