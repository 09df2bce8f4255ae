"""The small-sample stress of the learner's start (issue 39): does what ``train`` deploys ever lose to one model?

For each size n, the cache (bbh5 by default) is cut so that every task keeps n of its fitting questions (train +
validation, in the cache's train:validation ratio, drawn with ``--cut-seed``; the test questions are all kept),
written to ``OUT/cut{n}.h5``, and ``ensemble-env benchmark`` runs on it (``OUT/size{n}/``): MAPPO at the default
budget (what ``train`` deploys: a trained checkpoint only where validation certifies its gain over the start, else
the start refitted on train + validation), ``best_single(per_task)`` and ``static_team(train+val)``, over
``--seeds`` seeds. Printed per size: MAPPO's test reward and its paired differences to both, mean [95% interval
over seeds and test questions], and how many runs deployed their start. Finished runs are read back, not redone.

One cut is one draw of the fitting questions, and the learner's seeds share it: with ``--cut-seeds K`` the script
also plays, without the learner, the start itself (``static_team(certified)`` on train + validation, what ``train``
deploys when no checkpoint is certified) on the cuts of seeds 0..K-1 at each size, and prints its test reward minus
each reference's: the mean over the cuts, its standard error and how many cuts it is below 0. That separates what the
draw of the questions does from what the learner does (a few seconds a cut).

    python benchmarks/small_sample.py --out stress                 # sizes 40, 80, 120; 5 seeds; bbh5
    python benchmarks/small_sample.py --out stress --sizes 40 --seeds 3 --jobs 2
    python benchmarks/small_sample.py --out stress --seeds 0 --cut-seeds 20   # the start over 20 cuts only

``--out`` is a new or empty folder, or one this script made (``ensemble_env.files.output_folder``): never a folder of
another command's files. Each cut is kept with the arguments it was cut with (``OUT/cut{n}.json``: the cache's
content digest, the size and ``--cut-seed``); a rerun reuses a cut only when they are the same, and refuses a cut of
another cache or seed, naming the argument that differs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.baselines import arguments
from ensemble_env.baselines.comparison import compare
from ensemble_env.cache.convert.common import decode_text, read_input
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.io import save_cache
from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.errors import command
from ensemble_env.files import output_folder, write_text
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo.benchmark import benchmark

#: the opponents of the stress: the best single model per task (on train) and the best fixed team per task (on
#: train + validation)
REFERENCES = ("best_single(per_task)", "static_team(train+val)")
ALGORITHM = "mappo"
#: the learner's start as a baseline: what ``train`` deploys when validation certifies no checkpoint
START = "static_team(certified)"
#: the script's name: its error messages and the mark of its output folder
PROG = "small_sample.py"
#: the most bytes of a cut's record (``cut{n}.json``)
RECORD_BYTES = 4096


def cut_cache(cache: LogitCache, n: int, seed: int) -> LogitCache:
    """``cache`` with each task's fitting questions (train + validation) cut to ``n`` (all of them where the task has
    fewer), drawn at random from ``seed`` in the task's train:validation ratio (at least one of each where the task
    has both); the test questions are kept."""
    rng = np.random.default_rng(arguments.seed(seed, "cut seed"))
    split, tasks = np.asarray(cache.split), np.asarray(cache.tasks)
    keep = split == SPLITS["test"]
    for task in range(cache.n_tasks):
        train = np.flatnonzero((tasks == task) & (split == SPLITS["train"]))
        validation = np.flatnonzero((tasks == task) & (split == SPLITS["validation"]))
        total = train.size + validation.size
        if total <= n:
            keep[train] = keep[validation] = True
            continue
        n_validation = round(n * validation.size / total) if validation.size else 0
        n_validation = min(max(n_validation, 1 if validation.size else 0), n - 1, validation.size)
        keep[rng.choice(train, n - n_validation, replace=False)] = True
        if n_validation:
            keep[rng.choice(validation, n_validation, replace=False)] = True
    return cache.subset(keep)


def _interval(entry: dict[str, float]) -> str:
    return f"{entry['mean']:+.4f} [{entry['low']:+.4f}, {entry['high']:+.4f}]"


def stress(
    cache: str, sizes: list[int], seeds: int, out: Path, *, jobs: int = 1, cut_seed: int = 0, budget: str = "default"
) -> list[dict[str, Any]]:
    """Run the stress in ``out`` (new, empty or made by this script); return one row per size (MAPPO's reward, its
    paired differences, the starts deployed)."""
    loaded = resolve_cache(cache)
    out = output_folder(out, PROG)
    rows = []
    for n in sizes:
        path = cut_file(loaded, cache, n, cut_seed, out)
        results = benchmark(
            [ALGORITHM, *REFERENCES], range(seeds), [str(path)], out / f"size{n}", budget=budget, jobs=jobs, plot=False
        )
        (scored,) = results["caches"].values()
        mine = scored[ALGORITHM]
        starts = sum(int(run["info"].get("selected_iteration", -1) == 0) for run in mine["runs"])
        rows.append(
            {
                "size": n,
                "reward": mine["aggregate"]["reward"],
                "versus": {reference: mine["versus"][reference]["reward"] for reference in REFERENCES},
                "starts": starts,
                "runs": len(mine["runs"]),
            }
        )
    return rows


def cut_file(loaded: LogitCache, cache: str, n: int, cut_seed: int, out: Path) -> Path:
    """``out/cut{n}.h5``, the cut of ``loaded`` (the cache ``cache`` names) to ``n`` fitting questions per task with
    ``cut_seed``, recorded with its arguments in ``out/cut{n}.json`` (written first); an existing cut is reused only
    when its record holds the same arguments (the cache by its content digest), else a ValueError names the file and
    the arguments that differ (a cut without a record is refused too)."""
    path, record_path = out / f"cut{n}.h5", out / f"cut{n}.json"
    cut_seed = arguments.seed(cut_seed, "cut_seed")
    wanted = {"cache": cache, "digest": cache_digest(loaded), "size": n, "cut_seed": cut_seed}
    if os.path.lexists(record_path):
        recorded = _read_record(record_path)
        differ = [key for key in ("digest", "size", "cut_seed") if recorded.get(key) != wanted[key]]
        if differ:
            was = {
                "digest": f"cache {recorded.get('cache')!r} (digest {str(recorded.get('digest'))[:12]})",
                "size": f"size {recorded.get('size')!r}",
                "cut_seed": f"--cut-seed {recorded.get('cut_seed')!r}",
            }
            now = {"digest": f"cache {cache!r} (digest {wanted['digest'][:12]})", "size": f"size {n}",
                   "cut_seed": f"--cut-seed {cut_seed}"}  # fmt: skip
            then, asked = (", ".join(words[key] for key in differ) for words in (was, now))
            raise ValueError(
                f"{path} was cut with {then}, not {asked} ({record_path}); its runs are another experiment's: give "
                "another --out"
            )
    elif os.path.lexists(path):
        raise ValueError(f"{path} has no record of the arguments it was cut with ({record_path}): give another --out")
    else:
        write_text(record_path, json.dumps(wanted, indent=1) + "\n")
    if not os.path.lexists(path):
        save_cache(path, cut_cache(loaded, n, cut_seed))
    return path


def _read_record(path: Path) -> dict[str, Any]:
    """A cut's record: a regular JSON file of at most :data:`RECORD_BYTES` holding an object, else a ValueError."""
    try:
        record = json.loads(decode_text(path, read_input(path, limit=RECORD_BYTES)))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not the record of a cut ({error.msg}): give another --out") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not the record of a cut (a JSON object): give another --out")
    return record


def start_over_cuts(
    cache: LogitCache, sizes: list[int], cut_seeds: int, *, alpha: float = 1.0, verbose: bool = False
) -> list[dict[str, Any]]:
    """The stress without the learner, over ``cut_seeds`` cuts: per size n, the test reward per question of
    :data:`START` minus each of :data:`REFERENCES`'s, on the cut of each seed 0..cut_seeds-1 (:func:`cut_cache`);
    one row per size, ``{"size": n, "differences": {reference: [one value per cut]}}``. ``verbose``: a progress
    line on stderr."""
    reward = RewardSettings(alpha=alpha)
    rows = []
    for n in sizes:
        differences: dict[str, list[float]] = {reference: [] for reference in REFERENCES}
        for seed in range(cut_seeds):
            cut = cut_cache(cache, n, seed)
            results = {result.name: result for result in compare(cut, names=[START, *REFERENCES], reward=reward)}
            start = float(results[START].rewards(cut, reward).mean())
            for reference in REFERENCES:
                differences[reference].append(start - float(results[reference].rewards(cut, reward).mean()))
            if verbose:
                print(f"size {n}: cut {seed + 1} of {cut_seeds}", end="\r", file=sys.stderr, flush=True)
        rows.append({"size": n, "differences": differences})
    return rows


def _over_cuts(values: list[float]) -> str:
    spread = np.std(values, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    below = sum(value < -1e-12 for value in values)
    return f"{np.mean(values):+.4f} ({spread:.4f}), {below} of {len(values)} below 0"


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="bbh5", help="a built-in cache name or an HDF5 file (default: bbh5)")
    parser.add_argument("--sizes", default="40,80,120", help="fitting questions kept per task (default: 40,80,120)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..S-1 of the learner; 0: no learner (default: 5)")
    parser.add_argument("--out", required=True, type=Path, help="folder of the cut caches and the benchmarks")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the runs (default: 1)")
    parser.add_argument("--cut-seed", type=int, default=0, help="seed of the questions kept (default: 0)")
    parser.add_argument("--budget", default="default", help="the learners' budget (default: default)")
    parser.add_argument(
        "--cut-seeds", type=int, default=0, help="also the start alone on the cuts of seeds 0..K-1 (default: 0, none)"
    )
    args = parser.parse_args(argv)
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes must be whole numbers separated by commas, got {args.sizes!r}")
    if not sizes or min(sizes) < 2:
        parser.error(f"--sizes must be whole numbers >= 2, got {args.sizes!r}")
    if args.seeds < 0 or args.cut_seeds < 0 or args.seeds == args.cut_seeds == 0:
        parser.error(f"--seeds and --cut-seeds must be >= 0 and not both 0, got {args.seeds} and {args.cut_seeds}")
    arguments.seed(args.cut_seed, "--cut-seed")
    if args.cut_seeds:
        cut_rows = start_over_cuts(resolve_cache(args.cache), sizes, args.cut_seeds, verbose=sys.stderr.isatty())
        print(f"\nthe start ({START}) alone over {args.cut_seeds} cuts of {args.cache}: test reward per question minus")
        print("each reference, mean over the cuts (standard error), cuts below 0")
        print("| fitting questions per task | start - " + " | start - ".join(REFERENCES) + " |")
        print("|---|" + "---|" * len(REFERENCES))
        for row in cut_rows:
            cells = " | ".join(_over_cuts(row["differences"][reference]) for reference in REFERENCES)
            print(f"| {row['size']} | {cells} |")
    if not args.seeds:
        return 0
    rows = stress(args.cache, sizes, args.seeds, args.out, jobs=args.jobs, cut_seed=args.cut_seed, budget=args.budget)
    print(f"\nsmall-sample stress on {args.cache}: test reward per question, mean [95% interval], {args.seeds} seeds")
    print("| fitting questions per task | mappo | mappo - " + " | mappo - ".join(REFERENCES) + " | start deployed |")
    print("|---|---|" + "---|" * len(REFERENCES) + "---|")
    for row in rows:
        versus = " | ".join(_interval(row["versus"][reference]) for reference in REFERENCES)
        print(f"| {row['size']} | {_interval(row['reward'])} | {versus} | {row['starts']} of {row['runs']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
