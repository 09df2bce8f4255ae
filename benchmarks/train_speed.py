"""Training speed of the reference MAPPO, and where the time goes (environment or torch).

    python benchmarks/train_speed.py            # 15 passes over 14,000 questions (~210k env steps), defaults
    python benchmarks/train_speed.py --write    # ... and update the speed block of benchmarks/README.md
    python benchmarks/train_speed.py --passes 1 # a quick check

The cache is ``ensemble_env.synthetic.make_cache(n_models=12, n_questions=14000, n_choices=4, seed=0)``; the
budget is ``passes x 14,000`` env steps (questions answered, summed over the parallel copies) on its train
split, with every other setting at its default (``ensemble_mappo.TrainConfig()``). One timed run reports the
wall time, then the split of that time between the environment (``step``, ``reset``, ``state``), the
networks while collecting (acting, values), the PPO updates, and the rest (setup, logging, checkpoints).
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

import ensemble_mappo.training as training
import torch
from ensemble_mappo.config import config_from_dict
from reporting import write_block

from ensemble_env.engine import EnsembleVectorEnv
from ensemble_env.synthetic import make_cache

README = Path(__file__).resolve().parent / "README.md"
TIMERS: dict[str, float] = {}


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            TIMERS[name] = TIMERS.get(name, 0.0) + time.perf_counter() - start

    return wrapper


def _instrument() -> None:
    """Accumulate the time of the environment's methods, of collection and of the updates."""
    for method in ("step", "reset", "state"):
        setattr(EnsembleVectorEnv, method, _timed("env", getattr(EnsembleVectorEnv, method)))
    training.collect = _timed("collect", training.collect)  # type: ignore[assignment]
    training.update = _timed("update", training.update)  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=float, default=15.0, help="passes over the 14,000 questions")
    parser.add_argument("--questions", type=int, default=14_000)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--threads", type=int, default=None, help="override TrainConfig.threads")
    parser.add_argument("--write", action="store_true", help="update the speed block of benchmarks/README.md")
    args = parser.parse_args()

    cache = make_cache(n_models=args.models, n_questions=args.questions, n_choices=4, seed=0)
    total_steps = round(args.passes * args.questions)
    options: dict[str, Any] = {"total_steps": total_steps}
    if args.threads is not None:
        options["threads"] = args.threads
    config = config_from_dict(options)
    _instrument()
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        row = training.train(config, cache, out, progress=False)
        wall = time.perf_counter() - start
    steps = int(row["global_step"])
    env = TIMERS.get("env", 0.0)
    networks = TIMERS.get("collect", 0.0) - env
    update = TIMERS.get("update", 0.0)
    other = wall - env - networks - update
    lines = [
        f"MAPPO training speed: {args.passes:g} passes x {args.questions:,} questions = {steps:,} env steps "
        f"({args.models} models, 4 choices; {config.num_envs} copies x {config.num_steps} steps per rollout, "
        f"{config.update_epochs} epochs x {config.num_minibatches} minibatches, {config.threads} torch thread(s))",
        "",
        "| | seconds | share |",
        "|---|---:|---:|",
        f"| **total (wall)** | **{wall:.1f}** | 100% |",
        f"| environment (`step`, `reset`, `state`) | {env:.1f} | {100 * env / wall:.0f}% |",
        f"| networks while collecting (acting, values) | {networks:.1f} | {100 * networks / wall:.0f}% |",
        f"| PPO updates (GAE, {config.update_epochs} epochs) | {update:.1f} | {100 * update / wall:.0f}% |",
        f"| setup, logging, checkpoints | {other:.1f} | {100 * other / wall:.0f}% |",
        "",
        f"{steps / wall:,.0f} env steps/s overall; the environment alone ran at {steps / max(env, 1e-9):,.0f} "
        f"steps/s. Machine: {platform.processor() or platform.machine()}, torch {torch.__version__}. "
        "Regenerate: `python benchmarks/train_speed.py --write`.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_block(README, "speed", "### Training speed\n\n" + text)
        print(f"\nwrote the speed block of {README}")


if __name__ == "__main__":
    main()
