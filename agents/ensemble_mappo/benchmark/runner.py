"""The benchmark's one loop: every algorithm x seed x cache, each run read back when it is stored
(:mod:`ensemble_mappo.benchmark.store`), redone when it is missing or refused, then scored
(:mod:`ensemble_mappo.benchmark.stats`) and reported (:mod:`ensemble_mappo.benchmark.report`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache.datasets import cost_unit
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import make_folder
from ensemble_env.game.reward import check_alpha
from ensemble_env.text import show
from ensemble_mappo.benchmark import curves, marl_eval, protocols
from ensemble_mappo.benchmark.answers import answers_to_json, check_answers
from ensemble_mappo.benchmark.learners import BUDGETS
from ensemble_mappo.benchmark.registry import canonical, reference_reason, resolve, uses_test_labels
from ensemble_mappo.benchmark.report import format_markdown, plot_skipped, write_plots
from ensemble_mappo.benchmark.stats import REFERENCES, aggregate, paired_differences, routing, run_summary
from ensemble_mappo.benchmark.store import (
    RESULT,
    RunError,
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
    protocol: str = "standard",
    folds: int = 4,
    fold_seed: int = 0,
    eval_cache: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    formats: Sequence[str] = (),
    feedback: str = "all",
) -> dict[str, Any]:
    """Run every algorithm x seed x cache (finished runs are read back, not redone); write ``results.json``,
    ``results.md`` and the frontier plot in ``out``; return the results.

    ``protocol="unseen-tasks"`` (:mod:`ensemble_mappo.benchmark.protocols`): every algorithm fits and chooses on
    some tasks and answers every question of the others, each task streamed from an empty history: ``folds`` folds
    of each cache's tasks dealt with ``fold_seed`` (printed), or, with ``eval_cache``, training on all tasks of each
    cache and scoring all tasks of ``eval_cache``; ``feedback="team"`` poses it under partial feedback (the learners
    play ``ensemble_env/EnsembleUnseen-v2``: only the answering team's outputs are revealed). ``jobs`` > 1 runs the
    missing runs in that many processes
    (each run is seeded on its own: the results are those of a serial run). ``formats`` adds files in other
    formats: ``"marl-eval"`` writes ``marl_eval.json`` (:mod:`ensemble_mappo.benchmark.marl_eval`; names marl-eval
    cannot keep apart are refused before any run).

    An algorithm or a cache given twice (an alias, another path to the same file) runs once, with a note on
    stderr. A stored run that fails the checks of :func:`~ensemble_mappo.benchmark.store.read_run` is redone, with
    a note on stderr naming the file, the field and the value; it is never scored. Ctrl-C raises
    :class:`Interrupted` (a KeyboardInterrupt) saying how many runs are stored.
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget={budget!r} is not one of {', '.join(BUDGETS)}")
    if protocol not in protocols.PROTOCOLS:
        raise ValueError(f"--protocol {protocol!r} is not one of {', '.join(protocols.PROTOCOLS)}")
    if eval_cache is not None and protocol != "unseen-tasks":
        raise ValueError("--eval-cache scores tasks never seen: it goes with --protocol unseen-tasks")
    if feedback not in protocols.FEEDBACKS:
        raise ValueError(f"--feedback {feedback!r} is not one of {', '.join(protocols.FEEDBACKS)}")
    if feedback != "all" and protocol != "unseen-tasks":
        raise ValueError(f"--feedback {feedback} poses tasks never seen under partial feedback: it goes with "
                         "--protocol unseen-tasks")  # fmt: skip
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"--jobs must be an integer from 1 to {MAX_JOBS}, got {show(jobs)}")
    formats = list(dict.fromkeys([formats] if isinstance(formats, str) else formats))
    unknown = [name for name in formats if name not in marl_eval.FORMATS]
    if unknown:
        raise ValueError(f"--format {unknown[0]!r} is not one of {', '.join(marl_eval.FORMATS)}")
    rate = checked_alpha(alpha)
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: give at least one seed (the means and intervals are over seeds)")
    if not all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in seeds):
        raise ValueError(f"seeds must be integers >= 0, got {show(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {show(seeds)}")
    names = _unique_algorithms(algorithms)
    resolved = {name: resolve(name, budget, protocol, feedback) for name in names}
    loaded, digests = _unique_caches([os.fspath(cache) for cache in caches])
    evaluation = resolve_cache(os.fspath(eval_cache)) if eval_cache is not None else None
    inputs = [*loaded, *(cache.path for cache in loaded.values())]
    inputs += [os.fspath(eval_cache), evaluation.path] if evaluation is not None else []
    plans = {name: _units(cache, protocol, folds, fold_seed, evaluation) for name, cache in loaded.items()}
    scored = {_scored_name(cache_name, loaded, eval_cache): plans[cache_name][1] for cache_name in loaded}
    if "marl-eval" in formats:
        marl_eval.check_names(scored, list(names))
    outputs = ["results.json", "results.md", *([marl_eval.FILE] if "marl-eval" in formats else [])]
    folder = prepare_out(out, outputs, inputs)
    unit_digests = {(name, k): cache_digest(unit.cache) for name, (units, _) in plans.items() for k, unit in
                    enumerate(units)}  # fmt: skip
    plan = [
        (cache_name, name, seed, k)
        for cache_name, (units, _) in plans.items()
        for name in names
        for seed in seeds
        for k in range(len(units))
    ]
    records: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    reused = finished = 0
    bar = _bar(len(plan), progress)
    try:
        pending = []
        for item in plan:
            cache_name, name, seed, k = item
            key = run_key(names[name], seed, unit_digests[(cache_name, k)], rate, resolved[name][1])
            place = run_folder(folder, key, cache_name)
            try:
                record = read_run(place / RESULT, key, plans[cache_name][0][k].cache, root=folder / "runs")
            except RunError as error:
                _note(f"refused the stored run {error}; the run is redone")
                record = None
            if record is None:
                pending.append((item, key, place))
            else:
                records[item], reused, finished = record, reused + 1, finished + 1
                if bar is not None:
                    bar.update()
        context = _Context(plans, resolved, rate, inputs)
        for item, record in _execute(context, pending, jobs):
            records[item], finished = record, finished + 1
            if bar is not None:
                bar.set_postfix_str(f"{item[1]} seed {item[2]} on {item[0]}")
                bar.update()
        if bar is not None:
            bar.close()
            bar = None
        lines: dict[str, list[dict[str, float]]] = {}
        if protocol != "standard":  # the hand rules on each fold's validation tasks, and the best of them per fold
            lines = {cache_name: curves.validation_lines(units, list(names), rate)
                     for cache_name, (units, _) in plans.items()}  # fmt: skip
            names = _with_best_rule(names, lines, feedback, records, seeds)
        runs = {
            (cache_name, name): [
                {**_merged(plans[cache_name], [records[(cache_name, name, seed, k)] for k in range(len(units))]),
                 "algorithm": name, "seed": seed}
                for seed in seeds
            ]
            for cache_name, (units, _) in plans.items()
            for name in names
        }  # fmt: skip
        runs = {(_scored_name(key, loaded, eval_cache), name): group for (key, name), group in runs.items()}
        trained = {_scored_name(name, loaded, eval_cache): digests[name] for name in loaded}
        results = _results(scored, list(names), runs, alpha, budget, seeds, reused, trained, feedback)
        if protocol != "standard":
            results["protocol"] = {
                "name": protocol,
                "feedback": feedback,
                "fold_seed": fold_seed,
                "trained_on": {_scored_name(name, loaded, eval_cache): name for name in loaded},
                "folds": {
                    cache_name: [
                        {"label": u.label, "held_out": list(u.held_out), "validation_tasks": list(u.validation_tasks)}
                        for u in units
                    ]
                    for cache_name, (units, _) in plans.items()
                },
                # the hand rules on each fold's validation tasks: the lines of the learning curves, and the rule
                # best_rule(validation) plays on each fold
                "validation_lines": {_scored_name(name, loaded, eval_cache): line for name, line in lines.items()},
                "best_rules": {
                    _scored_name(name, loaded, eval_cache): curves.best_rules(line, feedback)
                    for name, line in lines.items()
                },
            }
        write_output(folder / "results.json", _json(results), inputs)
        write_output(folder / "results.md", format_markdown(results), inputs)
        if "marl-eval" in formats:
            data = marl_eval.export(scored, list(names), runs, alpha)
            write_output(folder / marl_eval.FILE, marl_eval.dumps(data), inputs)
        if plot and write_plots(results, folder, inputs) is None:
            _note(plot_skipped())
    except KeyboardInterrupt:
        raise Interrupted(finished, len(plan), folder / "runs") from None
    finally:
        if bar is not None:
            bar.close()
    return results


def _with_best_rule(
    names: dict[str, str],
    lines: Mapping[str, list[dict[str, float]]],
    feedback: str,
    records: dict[tuple[str, str, int, int], dict[str, Any]],
    seeds: Sequence[int],
) -> dict[str, str]:
    """``names`` with :data:`curves.BEST_RULE` added when some fold has a playable hand rule: its record on each fold
    and seed is the record of the rule best on that fold's validation tasks (``records`` gains them)."""
    chosen = {cache_name: curves.best_rules(line, feedback) for cache_name, line in lines.items()}
    if not chosen or any(rule is None for rules in chosen.values() for rule in rules):
        return names
    for cache_name, rules in chosen.items():
        for seed in seeds:
            for k, rule in enumerate(rules):
                record = records[(cache_name, str(rule), seed, k)]
                records[(cache_name, curves.BEST_RULE, seed, k)] = {**record, "info": {**record.get("info", {}),
                                                                                     "rule": rule}}  # fmt: skip
    return {**names, curves.BEST_RULE: curves.BEST_RULE}


def _scored_name(cache_name: str, loaded: Mapping[str, Any], eval_cache: Any) -> str:
    """The key of a training cache's results: the cache itself; with ``--eval-cache``, the scored cache (the
    evaluation cache as given), or ``"TRAIN -> EVAL"`` when several training caches score it."""
    if eval_cache is None:
        return cache_name
    return os.fspath(eval_cache) if len(loaded) == 1 else f"{cache_name} -> {os.fspath(eval_cache)}"


#: the most processes ``--jobs`` starts
MAX_JOBS = 64


def _units(
    cache: LogitCache, protocol: str, folds: int, fold_seed: int, evaluation: LogitCache | None
) -> tuple[list[protocols.Unit], LogitCache]:
    """The units a cache's runs run on, and the cache their merged answers are scored on; the folds are said on
    stderr."""
    if protocol == "standard":
        test = cache.select("test")
        return [protocols.Unit("all", cache, test, (), ())], cache
    units, scored = protocols.units(cache, k=folds, seed=fold_seed, eval_cache=evaluation)
    for unit in units:
        _note(
            f"{protocol} {unit.label} (fold seed {fold_seed}): held out {', '.join(unit.held_out)}; "
            f"validation tasks {', '.join(unit.validation_tasks)}"
        )
    return units, scored


def _merged(plan: tuple[list[protocols.Unit], LogitCache], records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record of answers to every scored question from the units' records (each unit's test questions mapped
    to the scored cache), in the scored cache's order; a single unit's record is kept as it is."""
    units, _ = plan
    if len(units) == 1 and units[0].label == "all":
        return records[0]
    questions = np.concatenate([unit.scored_questions for unit in units])
    order = np.argsort(questions, kind="stable")
    predictions = np.concatenate([np.asarray(r["predictions"]) for r in records])[order]
    teams = np.concatenate([np.asarray(r["teams"]) for r in records])[order]
    info = {"folds": [{"unit": unit.label, **r.get("info", {})} for unit, r in zip(units, records, strict=True)]}
    return {"questions": questions[order].tolist(), "predictions": predictions.tolist(), "teams": teams.tolist(),
            "info": info}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Context:
    """What a run needs: the units, the algorithms, alpha, the inputs no output may overwrite."""

    plans: dict[str, tuple[list[protocols.Unit], LogitCache]]
    resolved: dict[str, tuple[Any, dict[str, Any]]]
    rate: float
    inputs: list[Any]


#: the context of the runs a forked worker process executes (set before the pool forks)
_WORK: list[tuple[_Context, tuple[str, str, int, int], dict[str, Any], Path]] = []


def _run_one(index: int) -> dict[str, Any]:
    """Run the ``index``-th pending run of :data:`_WORK` and store its record."""
    context, (cache_name, name, seed, k), key, place = _WORK[index]
    unit = context.plans[cache_name][0][k]
    function = context.resolved[name][0]
    answers = function(unit.cache, seed, context.rate, make_folder(place))
    check_answers(answers, unit.cache, name)
    record = {"key": key, **answers_to_json(answers)}
    write_run(place / RESULT, record, unit.cache, context.inputs, name)
    return record


def _execute(context: _Context, pending: list[Any], jobs: int) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Run the pending runs, serially or in ``jobs`` forked processes, yielding (item, record) as each ends."""
    _WORK[:] = [(context, item, key, place) for item, key, place in pending]
    if jobs == 1 or len(pending) <= 1:
        for index, (item, _, _) in enumerate(pending):
            yield item, _run_one(index)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(_run_one, index): item for index, (item, _, _) in enumerate(pending)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


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
    feedback: str = "all",
) -> dict[str, Any]:
    """What ``results.json`` holds: per cache and algorithm, the runs, the aggregate, the routing and the paired
    differences to the references; per cache, its content digest (``cache_digests``; with ``--eval-cache``, the
    training cache's, under the key of its results) and the unit of its costs (``cost_units``: None for a cache
    without costs or of unknown unit, :func:`ensemble_env.cache.datasets.cost_unit`)."""
    results: dict[str, Any] = {"alpha": alpha, "budget": budget, "seeds": seeds, "reused_runs": reused, "caches": {}}
    for cache_name, cache in loaded.items():
        per_algorithm = {}
        for name in names:
            group = runs[(cache_name, name)]
            per_algorithm[name] = {
                "uses_test_labels": uses_test_labels(name),
                "reference": reference_reason(name, feedback),
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
    results["cost_units"] = {cache_name: cost_unit(cache) for cache_name, cache in loaded.items()}
    return results


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="benchmark", unit="run")
