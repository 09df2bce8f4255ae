"""Before/after speed of two builds of the package, measured in one interleaved run (the machines are noisy).

    python benchmarks/compare_builds.py --before HEAD~3                 # environment throughput, N = 8 and 12
    python benchmarks/compare_builds.py --before HEAD~3 --command "ensemble-env train --passes 5 --out {out}"
    python benchmarks/compare_builds.py --before 26cd920 --command "python {tree}/benchmarks/train_speed.py" --repeats 3

``--before`` is a git revision of this repository (its tree is checked out in a temporary git worktree,
removed afterwards) or the folder of another checkout; the current checkout is the "after" build. Both builds use the
same Python environment (so dependencies must match) and their own numba cache directories, warmed before
timing.

Throughput mode (default): one long-lived worker process per build measures blocks of steps of
``parallel_env`` and ``vector_env(1024)`` (the runners of ``throughput.py``); the driver asks the two workers
for a block in turn, ``--repeats`` rounds, and prints each build's median and the after/before ratio.
Command mode (``--command``): runs the command for each build in turn, ``--repeats`` rounds, and prints
each build's median CPU time (user + system of the command's processes) and wall time. ``{out}`` in the
command becomes a fresh temporary directory, ``{tree}`` the build's own checkout (so that each build runs its own
script, e.g. its ``benchmarks/train_speed.py``); ``ensemble-env`` and ``python`` run as this interpreter. A command
that prints a figure ``**N env steps per CPU second**`` (``train_speed.py``) has that figure's median and ratio
printed too: the rate the build measured of its own training loop, without process start-up and imports.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: the rate ``train_speed.py`` prints, read from a command's output
RATE = re.compile(r"\*\*([0-9,]+) env steps per CPU second\*\*")

WORKER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import ensemble_env
from throughput import N_CHOICES, N_QUESTIONS, WINDOW, parallel_runner, vector_runner
from ensemble_env.synthetic import make_cache
runners = {}
for n_models in (8, 12):
    cache = make_cache(n_models=n_models, n_questions=N_QUESTIONS, n_choices=N_CHOICES, seed=0)
    runners[f"parallel_env N={n_models}"] = parallel_runner(cache, WINDOW, int(sys.argv[2]))
    runners[f"vector_env(1024) N={n_models}"] = vector_runner(cache, WINDOW, int(sys.argv[3]))
for run, steps, _ in runners.values():
    run(max(steps // 10, 1))
print(json.dumps(sorted(runners)), flush=True)
for line in sys.stdin:
    run, steps, per_step = runners[line.strip()]
    start = time.process_time()
    run(steps)
    print(steps * per_step / (time.process_time() - start), flush=True)
"""


def _environment(tree: Path, cache_dir: str) -> dict[str, str]:
    paths = [str(tree / "src"), str(tree / "agents")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "NUMBA_CACHE_DIR": cache_dir}


def _worktree(revision: str, folder: Path) -> Path:
    if Path(revision, "src", "ensemble_env").is_dir():  # a checkout of the repository
        return Path(revision)
    tree = folder / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True,
                   capture_output=True)  # fmt: skip
    return tree


def throughput(trees: dict[str, Path], folder: Path, repeats: int, quick: bool) -> None:
    steps, batch_steps = (2_000, 20) if quick else (20_000, 200)
    workers = {}
    for name, tree in trees.items():
        env = _environment(tree, str(folder / f"numba-{name}"))
        workers[name] = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(HERE), str(steps), str(batch_steps)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=folder,
        )  # fmt: skip
    announced = [json.loads(worker.stdout.readline()) for worker in workers.values()]  # type: ignore[union-attr]
    names = announced[0]  # every worker announces its measurement names first; read them all
    rates: dict[tuple[str, str], list[float]] = {(build, name): [] for build in trees for name in names}
    for _ in range(repeats):
        for name in names:
            for build, worker in workers.items():
                worker.stdin.write(name + "\n")  # type: ignore[union-attr]
                worker.stdin.flush()  # type: ignore[union-attr]
                rates[build, name].append(float(worker.stdout.readline()))  # type: ignore[union-attr]
    for worker in workers.values():
        worker.stdin.close()  # type: ignore[union-attr]
        worker.wait()
    print(f"env-steps/s, process CPU time, median of {repeats} interleaved blocks")
    for name in names:
        before, after = (statistics.median(rates[build, name]) for build in ("before", "after"))
        print(f"  {name:<22} before {before:>12,.0f}   after {after:>12,.0f}   after/before {after / before:.2f}")


def command(trees: dict[str, Path], folder: Path, repeats: int, template: str) -> None:
    times: dict[str, list[tuple[float, float]]] = {build: [] for build in trees}
    for round_index in range(repeats + 1):  # round 0 warms the numba caches and is not counted
        for build, tree in trees.items():
            out = folder / f"out-{build}-{round_index}"
            words = shlex.split(template.replace("{out}", str(out)).replace("{tree}", str(tree)))
            if words[0] == "ensemble-env":
                words = [sys.executable, "-m", "ensemble_env.cli", *words[1:]]
            elif words[0] == "python":
                words = [sys.executable, *words[1:]]
            env = _environment(tree, str(folder / f"numba-{build}"))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            printed = subprocess.run(words, check=True, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True).stdout
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            found = RATE.search(printed)
            rate = float(found.group(1).replace(",", "")) if found else math.nan
            if round_index:
                times[build].append((cpu, wall, rate))
            shown = f", {rate:,.0f} env steps per CPU second" if found else ""
            print(f"  round {round_index} {build}: CPU {cpu:.1f} s, wall {wall:.1f} s{shown}", flush=True)
    print(f"median of {repeats} interleaved runs: {template}")
    medians = {
        build: tuple(statistics.median(v[i] for v in values) for i in (0, 1, 2)) for build, values in times.items()
    }
    for build, (cpu, wall, rate) in medians.items():
        shown = f"   {rate:>10,.0f} env steps per CPU second" if not math.isnan(rate) else ""
        print(f"  {build:<6} CPU {cpu:8.1f} s   wall {wall:8.1f} s{shown}")
    print(f"  before/after CPU time: {medians['before'][0] / medians['after'][0]:.2f}x")
    if not math.isnan(medians["after"][2]):
        print(f"  after/before env steps per CPU second: {medians['after'][2] / medians['before'][2]:.2f}x")


def main(argv: list[str] | None = None) -> int:
    """The command line; its errors go through the project's one error handler (``compare_builds.py: error: ...``)."""
    sys.path.insert(0, str(ROOT / "src"))  # the handler of this checkout (the "after" build)
    from ensemble_env.errors import run_command

    return run_command("compare_builds.py", lambda: _compare(argv))


def _compare(argv: list[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="git revision of the 'before' build (e.g. HEAD~3, a tag)")
    parser.add_argument("--command", default=None, help="time this command per build instead of the throughput")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--quick", action="store_true", help="throughput: shorter blocks (noisier)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        trees = {"before": _worktree(args.before, folder), "after": ROOT}
        try:
            if args.command:
                command(trees, folder, args.repeats, args.command)
            else:
                throughput(trees, folder, args.repeats, args.quick)
        finally:
            if trees["before"].is_relative_to(folder):
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees["before"])],
                               check=False, capture_output=True)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
