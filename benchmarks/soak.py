"""Memory over time: step the batched engine for 10 million env steps and report resident memory.

    python benchmarks/soak.py                      # 10M env steps (B=1024, N=12, T=500), about a minute
    python benchmarks/soak.py --env-steps 1000000  # shorter

Episodes of 2,000 questions end and auto-reset throughout, so every allocation path of the engine (steps,
observations, infos, resets, final observations) runs thousands of times. Prints RSS at the start (after
the first steps), at every tenth of the run, and at the end; memory is flat when start and end agree.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ensemble_env
from ensemble_env.errors import command
from ensemble_env.synthetic import make_cache


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@command("soak.py")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-steps", type=int, default=10_000_000)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--models", type=int, default=12)
    args = parser.parse_args()

    cache = make_cache(n_models=args.models, n_questions=14_000, n_choices=4, seed=0)
    venv = ensemble_env.vector_env(
        args.num_envs, cache, split="all", window=500, order="shuffled", episode_length=2_000
    )
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = [
        {
            "decider": rng.integers(0, 2, (args.num_envs, args.models)).astype(np.int8),
            "fusion": rng.integers(0, 4, args.num_envs),
        }
        for _ in range(32)
    ]
    batches = args.env_steps // args.num_envs
    for i in range(50):  # warm up: compile, allocator pools
        venv.step(actions[i % 32])
    start_rss, start = rss_mib(), time.perf_counter()
    print(f"start: RSS {start_rss:.1f} MiB", flush=True)
    episodes = 0
    for i in range(batches):
        _, _, _, truncations, _ = venv.step(actions[i % 32])
        episodes += int(truncations["fusion"].sum())
        if (i + 1) % max(batches // 10, 1) == 0:
            print(f"  {(i + 1) * args.num_envs:>12,} env steps: RSS {rss_mib():.1f} MiB", flush=True)
    elapsed = time.perf_counter() - start
    end_rss = rss_mib()
    print(
        f"end: {batches * args.num_envs:,} env steps, {episodes:,} episodes ended, {elapsed:.0f} s; "
        f"RSS {start_rss:.1f} -> {end_rss:.1f} MiB (change {end_rss - start_rss:+.1f} MiB)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
