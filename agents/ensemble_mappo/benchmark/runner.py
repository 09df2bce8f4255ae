"""The benchmark's one loop: every algorithm x seed x cache, each run read back when it is stored
(:mod:`ensemble_mappo.benchmark.store`), redone when it is missing or refused, then scored
(:mod:`ensemble_mappo.benchmark.stats`) and reported (:mod:`ensemble_mappo.benchmark.report`).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import check_alpha
from ensemble_env.text import show
from ensemble_mappo.benchmark.answers import answers_to_json, check_answers
from ensemble_mappo.benchmark.learners import BUDGETS
from ensemble_mappo.benchmark.registry import canonical, resolve, uses_test_labels
from ensemble_mappo.benchmark.report import PLOT_EXTRA, format_markdown, write_plots
from ensemble_mappo.benchmark.stats import REFERENCES, aggregate, paired_differences, routing, run_summary
from ensemble_mappo.benchmark.store import (
    RESULT,
    RunError,
    make_folder,
    prepare_out,
    read_run,
    run_folder,
    run_key,
    write_output,
    write_run,
)

__all__ = ["Interrupted", "benchmark", "checked_alpha"]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`benchmark`: ``finished`` of the ``total`` runs are stored in ``folder`` (and are read
    back, not redone, by the next benchmark into the same folder)."""

    def __init__(self, finished: int, total: int, folder: Path) -> None:
        super().__init__(f"interrupted after {finished} of {total} runs")
        self.finished, self.total, self.folder = finished, total, folder


def checked_alpha(alpha: Any) -> float:
    """``alpha`` as a float, or ValueError naming it: a finite number in [0, 1e6], not NaN, not a negative zero
    (which would be a run key of its own and print as ``-0``)."""
    value = check_alpha(alpha)
    if value == 0.0 and math.copysign(1.0, value) < 0:
        raise ValueError(f"alpha must be a finite number in [0, 1e+06], got {alpha!r}: a negative zero (write 0)")
    return value


def _note(message: str) -> None:
    print(f"benchmark: {message}", file=sys.stderr)


def _unique_algorithms(algorithms: Sequence[str]) -> dict[str, str]:
    """Given name -> canonical name, the first of the names of each algorithm (an alias, the same name again)."""
    chosen: dict[str, str] = {}
    for name in algorithms:
        same = canonical(name)
        first = next((given for given, known in chosen.items() if known == same), None)
        if first is None:
            chosen[name] = same
        else:
            _note(f"--algorithms: {name!r} is {first!r} again (the same algorithm); it is run and counted once")
    return chosen


def _unique_caches(caches: Sequence[str]) -> tuple[dict[str, LogitCache], dict[str, str]]:
    """The caches loaded and their content digests, the first of the names of each content (a file named twice,
    another path to it, a copy)."""
    loaded: dict[str, LogitCache] = {}
    digests: dict[str, str] = {}
    for name in caches:
        cache = resolve_cache(name)
        digest = cache_digest(cache)
        first = next((given for given, known in digests.items() if known == digest), None)
        if first is None:
            loaded[name], digests[name] = cache, digest
        else:
            _note(f"--cache: {name} holds the same cache as {first} (same content); it is run and counted once")
    return loaded, digests


def benchmark(
    algorithms: Sequence[str],
    seeds: Iterable[int],
    caches: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    alpha: float = 1.0,
    budget: str = "default",
    progress: bool = True,
    plot: bool = True,
) -> dict[str, Any]:
    """Run every algorithm x seed x cache (finished runs are read back, not redone); write ``results.json``,
    ``results.md`` and the frontier plot in ``out``; return the results.

    An algorithm or a cache given twice (an alias, another path to the same file) runs once, with a note on
    stderr. A stored run that fails the checks of :func:`~ensemble_mappo.benchmark.store.read_run` is redone, with
    a note on stderr naming the file, the field and the value; it is never scored. Ctrl-C raises
    :class:`Interrupted` (a KeyboardInterrupt) saying how many runs are stored.
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget={budget!r} is not one of {', '.join(BUDGETS)}")
    rate = checked_alpha(alpha)
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: give at least one seed (the means and intervals are over seeds)")
    if not all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in seeds):
        raise ValueError(f"seeds must be integers >= 0, got {show(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {show(seeds)}")
    names = _unique_algorithms(algorithms)
    resolved = {name: resolve(name, budget) for name in names}
    loaded, digests = _unique_caches([os.fspath(cache) for cache in caches])
    inputs = [*loaded, *(cache.path for cache in loaded.values())]
    folder = prepare_out(out, ["results.json", "results.md"], inputs)
    plan = [(cache_name, name, seed) for cache_name in loaded for name in names for seed in seeds]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    reused = finished = 0
    bar = _bar(len(plan), progress)
    try:
        for cache_name, name, seed in plan:
            cache, (function, config) = loaded[cache_name], resolved[name]
            key = run_key(names[name], seed, digests[cache_name], rate, config)
            place = run_folder(folder, key, cache_name)
            try:
                record = read_run(place / RESULT, key, cache, root=folder / "runs")
            except RunError as error:
                _note(f"refused the stored run {error}; the run is redone")
                record = None
            if record is None:
                if bar is not None:
                    bar.set_postfix_str(f"{name} seed {seed} on {cache_name}")
                answers = function(cache, seed, rate, make_folder(place))
                check_answers(answers, cache, name)
                record = {"key": key, **answers_to_json(answers)}
                write_run(place / RESULT, record, cache, inputs, name)
            else:
                reused += 1
            finished += 1
            runs.setdefault((cache_name, name), []).append({**record, "algorithm": name, "seed": seed})
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
            bar = None
        results = _results(loaded, list(names), runs, alpha, budget, seeds, reused, digests)
        write_output(folder / "results.json", _json(results), inputs)
        write_output(folder / "results.md", format_markdown(results), inputs)
        if plot and write_plots(results, folder, inputs) is None:
            _note(f"skipped the frontier plot: it needs matplotlib ({PLOT_EXTRA})")
    except KeyboardInterrupt:
        raise Interrupted(finished, len(plan), folder / "runs") from None
    finally:
        if bar is not None:
            bar.close()
    return results


def _json(data: Any) -> str:
    return json.dumps(data, indent=1) + "\n"


def _results(
    loaded: dict[str, LogitCache],
    names: list[str],
    runs: dict[tuple[str, str], list[dict[str, Any]]],
    alpha: float,
    budget: str,
    seeds: list[int],
    reused: int,
    digests: dict[str, str],
) -> dict[str, Any]:
    """What ``results.json`` holds: per cache and algorithm, the runs, the aggregate, the routing and the paired
    differences to the references."""
    results: dict[str, Any] = {"alpha": alpha, "budget": budget, "seeds": seeds, "reused_runs": reused, "caches": {}}
    for cache_name, cache in loaded.items():
        per_algorithm = {}
        for name in names:
            group = runs[(cache_name, name)]
            per_algorithm[name] = {
                "uses_test_labels": uses_test_labels(name),
                "aggregate": aggregate(cache, group, alpha),
                "runs": [run_summary(cache, run, alpha) for run in group],
                "routing": routing(cache, group, alpha),
                "n_models": cache.n_models,
                "versus": {
                    reference: paired_differences(cache, group, runs[(cache_name, reference)], alpha)
                    for reference in REFERENCES
                    if reference in names and reference != name
                },
            }
        results["caches"][cache_name] = per_algorithm
    results["cache_digests"] = digests
    return results


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="benchmark", unit="run")
