"""The benchmark's one loop: every algorithm x seed x cache, each run read back when it is stored
(:mod:`ensemble_mappo.benchmark.store`), redone when it is missing or refused, then scored
(:mod:`ensemble_mappo.benchmark.stats`) and reported (:mod:`ensemble_mappo.benchmark.report`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ensemble_env.cache.datasets import cost_unit
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import make_folder
from ensemble_env.game.reward import RewardSettings, check_alpha
from ensemble_env.text import show
from ensemble_mappo.benchmark import curves, marl_eval, protocols
from ensemble_mappo.benchmark.answers import answers_to_json, check_answers
from ensemble_mappo.benchmark.learners import ABLATIONS, BUDGETS, RESIDUAL_OFF, ablation_name
from ensemble_mappo.benchmark.registry import (
    canonical,
    draws,
    forget_outcomes,
    reference_reason,
    resolve,
    streams,
    unit_outcomes,
    uses_test_labels,
)
from ensemble_mappo.benchmark.report import format_markdown, plot_skipped, write_plots
from ensemble_mappo.benchmark.stats import (
    REFERENCES,
    aggregate,
    paired_differences,
    question_scores,
    routing,
    run_summary,
)
from ensemble_mappo.benchmark.store import (
    EVERY_SEED,
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


def _one_blas_thread(function: Any) -> Any:
    """Run ``function`` with one BLAS thread in this process and the run processes it forks (threadpoolctl). The
    benchmark's parallelism is ``--jobs``; its matrices are small (the scoring's bootstrap, ``bayes_team``'s 31 x 31
    solves), and a second OpenBLAS thread per process spun without speeding them up: the scoring of a generated run
    took 92 CPU s with two threads against 50 with one, in the same wall time (docs/benchmark.md, cost)."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return wrapped


@_one_blas_thread
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
    generated: protocols.GeneratedPlan | None = None,
) -> dict[str, Any]:
    """Run every algorithm x seed x cache (finished runs are read back, not redone); write ``results.json``,
    ``results.md`` and the frontier plot in ``out``; return the results.

    ``protocol="unseen-tasks"`` (:mod:`ensemble_mappo.benchmark.protocols`): every algorithm fits and chooses on
    some tasks and answers every question of the others, each task streamed from an empty history: ``folds`` folds
    of each cache's tasks dealt with ``fold_seed`` (printed), or, with ``eval_cache``, training on all tasks of each
    cache and scoring all tasks of ``eval_cache``; ``feedback="team"`` poses it under partial feedback (the learners
    play ``ensemble_env/EnsembleUnseen-v2``: only the answering team's outputs are revealed).
    ``protocol="generated"`` keeps those folds but fits and chooses on tasks drawn from a generator fitted on each
    fold's training tasks (``generated``, a :class:`~ensemble_mappo.benchmark.protocols.GeneratedPlan`: how many,
    of how many questions and models; default its defaults) and scores each algorithm twice, on the generated test
    tasks (``generated(CACHE)`` in the results) and on the real held-out tasks (``CACHE``); a baseline that draws
    nothing runs once per fold for every seed (its run key's seed ``"all"``). ``jobs`` > 1 runs the missing runs in
    that many processes
    (each run is seeded on its own: the results are those of a serial run). ``formats`` adds files in other
    formats: ``"marl-eval"`` writes ``marl_eval.json`` (:mod:`ensemble_mappo.benchmark.marl_eval`; names marl-eval
    cannot keep apart are refused before any run).

    An algorithm or a cache given twice (an alias, another path to the same file) runs once, with a note on
    stderr. A stored run that fails the checks of :func:`~ensemble_mappo.benchmark.store.read_run` is redone, with
    a note on stderr naming the file, the field and the value; it is never scored. Ctrl-C raises
    :class:`Interrupted` (a KeyboardInterrupt) saying how many runs are stored. The CPU time of the runs done is
    said on stderr, per algorithm.
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget={budget!r} is not one of {', '.join(BUDGETS)}")
    if protocol not in protocols.PROTOCOLS:
        raise ValueError(f"--protocol {protocol!r} is not one of {', '.join(protocols.PROTOCOLS)}")
    if eval_cache is not None and protocol == "standard":
        raise ValueError("--eval-cache scores tasks never seen: it goes with --protocol unseen-tasks or generated")
    if feedback not in protocols.FEEDBACKS:
        raise ValueError(f"--feedback {feedback!r} is not one of {', '.join(protocols.FEEDBACKS)}")
    if feedback != "all" and protocol == "standard":
        raise ValueError(f"--feedback {feedback} poses tasks never seen under partial feedback: it goes with "
                         "--protocol unseen-tasks or generated")  # fmt: skip
    if generated is not None and protocol != "generated":
        raise ValueError("--generated-models (a plan of generated tasks) goes with --protocol generated")
    if protocol == "generated":
        generated = protocols.GeneratedPlan() if generated is None else generated
        if not isinstance(generated, protocols.GeneratedPlan):
            raise ValueError(f"generated must be a GeneratedPlan, got {type(generated).__name__}")
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
    plans = {
        name: _plan(name, cache, protocol, folds, fold_seed, evaluation, _scored_name(name, loaded, eval_cache),
                    generated)
        for name, cache in loaded.items()
    }  # fmt: skip
    scored = {key: cache for plan in plans.values() for key, cache in plan.scored.items()}
    if "marl-eval" in formats:
        marl_eval.check_names(scored, list(names))
    outputs = ["results.json", "results.md", *([marl_eval.FILE] if "marl-eval" in formats else [])]
    folder = prepare_out(out, outputs, inputs)
    unit_digests = {(name, k): cache_digest(unit.cache) for name, plan in plans.items() for k, unit in
                    enumerate(plan.units)}  # fmt: skip
    plan = [
        (cache_name, name, seed, k)
        for cache_name, cache_plan in plans.items()
        for name in names
        for seed in seeds
        for k in range(len(cache_plan.units))
    ]
    shared = protocol == "generated"  # a baseline that draws nothing runs once per unit, for every seed
    places: dict[Path, list[tuple[str, str, int, int]]] = {}
    keys = {}
    for item in plan:
        cache_name, name, seed, k = item
        seed_key = EVERY_SEED if shared and not draws(name) else seed
        key = run_key(names[name], seed_key, unit_digests[(cache_name, k)], rate, resolved[name][1])
        place = run_folder(folder, key, cache_name)
        places.setdefault(place, []).append(item)
        keys[place] = key
    records: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    reused = finished = 0
    bar = _bar(len(places), progress)
    forget_outcomes()  # then filled with the folds' own (_share_outcomes), before the workers fork
    try:
        pending = []
        for place, items in places.items():
            cache_name, _, _, k = items[0]
            try:
                record = read_run(place / RESULT, keys[place], plans[cache_name].units[k].cache, root=folder / "runs")
            except RunError as error:
                _note(f"refused the stored run {error}; the run is redone")
                record = None
            if record is None:
                pending.append((items[0], keys[place], place))
            else:
                records.update(dict.fromkeys(items, _compact(record)))
                reused, finished = reused + 1, finished + 1
                if bar is not None:
                    bar.update()
        if protocol != "standard" and any(streams(name) for name in names):
            _share_outcomes(plans, rate)
        context = _Context(plans, resolved, rate, inputs)
        spent: dict[str, list[float]] = {}
        for item, place, record, seconds in _execute(context, pending, jobs):
            records.update(dict.fromkeys(places[place], _compact(record)))
            finished += 1
            spent.setdefault(item[1], []).append(seconds)
            if bar is not None:
                bar.set_postfix_str(f"{item[1]} seed {item[2]} on {item[0]}")
                bar.update()
        if bar is not None:
            bar.close()
            bar = None
        if spent:
            _note("CPU time of the runs done now: " + ", ".join(
                f"{name} {sum(times):.0f} s ({len(times)} run{'s' if len(times) > 1 else ''})"
                for name, times in spent.items()))  # fmt: skip
        lines: dict[str, list[dict[str, float]]] = {}
        if protocol != "standard":  # the hand rules on each fold's validation tasks, and the best of them per fold
            started = time.process_time()
            lines = {
                cache_name: curves.validation_lines(
                    cache_plan.units, list(names), rate, _recorded_lines(cache_name, cache_plan, names, records, seeds)
                )
                for cache_name, cache_plan in plans.items()
            }
            _note(f"the hand rules' validation lines: {time.process_time() - started:.0f} CPU s")
            names = _with_best_rule(names, lines, feedback, records, seeds)
        names = _with_ablations(names, records, {name: len(plan.units) for name, plan in plans.items()}, seeds)
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for cache_name, cache_plan in plans.items():
            for name in names:
                for seed in seeds:
                    group = [records[(cache_name, name, seed, k)] for k in range(len(cache_plan.units))]
                    for key, record in _merged(cache_plan, group).items():
                        runs.setdefault((key, name), []).append({**record, "algorithm": name, "seed": seed})
        trained = {key: digests[name] for name, cache_plan in plans.items() for key in cache_plan.scored}
        resampling = {key: "tasks" for plan in plans.values() for key in plan.generated_keys}
        started = time.process_time()
        results = _results(scored, list(names), runs, alpha, budget, seeds, reused, trained, feedback, resampling)
        _note(f"scoring (aggregates, routing, paired differences): {time.process_time() - started:.0f} CPU s")
        if protocol != "standard":
            results["protocol"] = _protocol_record(protocol, feedback, fold_seed, plans, lines, generated)
        write_output(folder / "results.json", _json(results), inputs)
        write_output(folder / "results.md", format_markdown(results), inputs)
        if "marl-eval" in formats:
            data = marl_eval.export(scored, list(names), runs, alpha)
            write_output(folder / marl_eval.FILE, marl_eval.dumps(data), inputs)
        if plot and write_plots(results, folder, inputs) is None:
            _note(plot_skipped())
    except KeyboardInterrupt:
        raise Interrupted(finished, len(places), folder / "runs") from None
    finally:
        forget_outcomes()
        if bar is not None:
            bar.close()
    return results


def _share_outcomes(plans: Mapping[str, _Plan], rate: float) -> None:
    """Compute every unit's team outcomes (:func:`~ensemble_mappo.benchmark.registry.unit_outcomes`) in this process
    before the runs: the forked workers inherit them, and the validation lines read them after the runs, so each
    fold's are computed once (seconds each on a fold of generated tasks); the CPU time is said on stderr."""
    started = time.process_time()
    for plan in plans.values():
        for unit in plan.units:
            unit_outcomes(unit.cache, RewardSettings(alpha=rate))
    _note(f"the folds' team outcomes, shared by the hand rules: {time.process_time() - started:.0f} CPU s")


def _protocol_record(
    protocol: str,
    feedback: str,
    fold_seed: int,
    plans: Mapping[str, _Plan],
    lines: Mapping[str, list[dict[str, float]]],
    generated: protocols.GeneratedPlan | None,
) -> dict[str, Any]:
    """``results.json``'s ``protocol``: the folds, each fold's hand rules on its validation tasks (under the key of
    the results whose learning curves they go with) and the best of them; under ``generated``, the plan, each fold's
    generator and seed, and whether the real held-out tasks were scored."""
    record = {
        "name": protocol,
        "feedback": feedback,
        "fold_seed": fold_seed,
        "trained_on": {key: name for name, plan in plans.items() for key in plan.scored},
        "folds": {name: [_fold_record(unit) for unit in plan.units] for name, plan in plans.items()},
        # the hand rules on each fold's validation tasks: the lines of the learning curves, and the rule
        # best_rule(validation) plays on each fold
        "validation_lines": {plans[name].lines_key: line for name, line in lines.items()},
        "best_rules": {plans[name].lines_key: curves.best_rules(line, feedback) for name, line in lines.items()},
    }
    if generated is not None:
        record["generated"] = {
            "plan": {**dataclasses.asdict(generated), "questions": list(generated.questions)},
            "scored": {name: list(plan.scored) for name, plan in plans.items()},
            "real_tasks": {name: plan.real_tasks for name, plan in plans.items()},
        }
    return record


def _fold_record(unit: protocols.Unit) -> dict[str, Any]:
    """A fold as ``results.json`` keeps it: its label, held-out and validation tasks (and its generated tasks)."""
    record = {"label": unit.label, "held_out": list(unit.held_out), "validation_tasks": list(unit.validation_tasks)}
    return record if unit.generated is None else {**record, "generated": unit.generated}


def _recorded_lines(
    cache_name: str,
    plan: _Plan,
    names: Mapping[str, str],
    records: Mapping[tuple[str, str, int, int], dict[str, Any]],
    seeds: Sequence[int],
) -> list[dict[str, float]]:
    """Per unit, the validation reward each run recorded at the constants it chose on the validation tasks (the rules
    under ``--protocol generated``: ``info["validation_reward"]``), the mean over seeds: the rule's validation line,
    which :func:`curves.validation_lines` then does not recompute."""
    found: list[dict[str, float]] = []
    for k in range(len(plan.units)):
        line = {}
        for name in names:
            values = [records[(cache_name, name, seed, k)].get("info", {}).get("validation_reward") for seed in seeds]
            if all(isinstance(value, float | int) for value in values):
                line[names[name]] = float(np.mean(values))
        found.append(line)
    return found


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


def _with_ablations(
    names: dict[str, str],
    records: dict[tuple[str, str, int, int], dict[str, Any]],
    units: Mapping[str, int],
    seeds: Sequence[int],
) -> dict[str, str]:
    """``names`` with an entry per ablation every run of a learner played (:data:`~ensemble_mappo.benchmark.learners.
    ABLATIONS` in its info, e.g. the residual decider's checkpoint with its network off: ``mappo(residual off)``),
    whose records are the learner's with the ablation's answers (``records`` gains them; the learner's own records
    lose the ablations' answers, which ``results.json`` need not hold twice)."""
    found = dict(names)
    for name in names:
        keys = [(cache_name, name, seed, k) for cache_name, count in units.items() for seed in seeds
                for k in range(count)]  # fmt: skip
        played = [records[key].get("info", {}).get(ABLATIONS) for key in keys]
        if not played or not all(isinstance(ablations, dict) for ablations in played):
            continue
        for ablation in played[0]:
            if not all(ablation in ablations for ablations in played):
                continue
            derived = ablation_name(name, ablation)
            for key, ablations in zip(keys, played, strict=True):
                record = records[key]
                info = {k: v for k, v in record.get("info", {}).items() if k != ABLATIONS}
                answers = ablations[ablation]
                records[(key[0], derived, key[2], key[3])] = _compact(
                    {**record, "predictions": answers["predictions"], "teams": answers["teams"],
                     "info": {**info, "ablation_of": name, "ablation": ablation}}
                )  # fmt: skip
            found[derived] = derived
        for key in keys:
            records[key] = {**records[key], "info": {k: v for k, v in records[key]["info"].items() if k != ABLATIONS}}
    return found


def _scored_name(cache_name: str, loaded: Mapping[str, Any], eval_cache: Any) -> str:
    """The key of a training cache's results: the cache itself; with ``--eval-cache``, the scored cache (the
    evaluation cache as given), or ``"TRAIN -> EVAL"`` when several training caches score it."""
    if eval_cache is None:
        return cache_name
    return os.fspath(eval_cache) if len(loaded) == 1 else f"{cache_name} -> {os.fspath(eval_cache)}"


#: the most processes ``--jobs`` starts
MAX_JOBS = 64


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The units an input cache's runs run on, and the caches their answers are scored in, by their key in the
    results (a unit's ``i``-th test question is scored in the ``unit.parts()[i]``-th of ``scored``)."""

    units: list[protocols.Unit]
    scored: dict[str, LogitCache]
    real_tasks: str = "scored"
    """Under ``--protocol generated``: whether the real held-out tasks were scored, and if not, why."""

    @property
    def generated_keys(self) -> tuple[str, ...]:
        """The keys of the scored caches of generated tasks, whose intervals resample tasks (``--protocol
        generated``: the first)."""
        return (self.lines_key,) if self.units and self.units[0].generated is not None else ()

    @property
    def lines_key(self) -> str:
        """The key of the results the hand rules' validation lines go with: the first scored cache's (under
        ``--protocol generated``, the generated tasks': the validation tasks are generated too)."""
        return next(iter(self.scored))


def _plan(
    name: str,
    cache: LogitCache,
    protocol: str,
    folds: int,
    fold_seed: int,
    evaluation: LogitCache | None,
    scored_name: str,
    generated: protocols.GeneratedPlan | None,
) -> _Plan:
    """The units the runs of the cache ``name`` run on and the caches their answers are scored in; the folds are said
    on stderr (under ``--protocol generated`` with the generator's cost, and why the real tasks are not scored when
    the generated tasks hold another number of models)."""
    if protocol == "standard":
        test = cache.select("test")
        return _Plan([protocols.Unit("all", cache, test, (), ())], {scored_name: cache})
    if protocol == "unseen-tasks":
        units, whole = protocols.units(cache, k=folds, seed=fold_seed, eval_cache=evaluation)
        scored = {scored_name: whole}
    else:
        assert generated is not None
        started = time.process_time()
        units, caches = protocols.generated_units(cache, generated, k=folds, seed=fold_seed, eval_cache=evaluation)
        scored = dict(zip((protocols.generated_name(name), scored_name), caches, strict=False))
    for unit in units:
        _note(
            f"{protocol} {unit.label} (fold seed {fold_seed}): held out {', '.join(unit.held_out)}; "
            f"validation tasks {', '.join(unit.validation_tasks)}"
        )
    if protocol != "generated":
        return _Plan(units, scored)
    counts = generated.counts()
    n_models = units[0].cache.n_models
    _note(
        f"generated: per fold a generator fitted on its training tasks draws {counts['train']:,} train, "
        f"{counts['validation']:,} validation and {counts['test']:,} test tasks of {generated.questions[0]}-"
        f"{generated.questions[1]} questions and {n_models} models ({time.process_time() - started:.1f} CPU s for "
        f"{len(units)} fold{'s' if len(units) > 1 else ''})"
    )
    if len(caches) > 1:
        return _Plan(units, scored)
    real = "not scored: the generated tasks hold {0} models, the real tasks {1}'s {2} (--generated-models {0})"
    real = real.format(n_models, scored_name, cache.n_models)
    _note(f"{scored_name}: the real held-out tasks are {real}; only {protocols.generated_name(name)} is scored")
    return _Plan(units, scored, real)


def _merged(plan: _Plan, records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scored cache of ``plan``, one record of answers to every scored question from the units' records (each
    unit's test questions mapped to the scored caches), in the scored cache's order; a single unit's record is kept
    as it is."""
    units = plan.units
    if len(units) == 1 and units[0].label == "all":
        return {plan.lines_key: records[0]}
    merged = {}
    for part, key in enumerate(plan.scored):
        chosen = [unit.parts() == part for unit in units]
        questions = np.concatenate([unit.scored_questions[mask] for unit, mask in zip(units, chosen, strict=True)])
        order = np.argsort(questions, kind="stable")
        predictions = np.concatenate(
            [np.asarray(r["predictions"])[mask] for r, mask in zip(records, chosen, strict=True)]
        )[order]
        teams = np.concatenate([np.asarray(r["teams"])[mask] for r, mask in zip(records, chosen, strict=True)])[order]
        info = {"folds": [{"unit": unit.label, **r.get("info", {})} for unit, r in zip(units, records, strict=True)]}
        merged[key] = {"questions": questions[order], "predictions": predictions, "teams": teams, "info": info}
    return merged


def _compact(record: dict[str, Any]) -> dict[str, Any]:
    """A stored run's record with its answers as arrays (int64 questions and predictions, 0/1 int8 teams) instead of
    lists of Python numbers: a fold of generated tasks holds 100,000 test questions, and a benchmark hundreds of
    runs."""
    arrays = {"questions": np.int64, "predictions": np.int64, "teams": np.int8}
    return {**record, **{key: np.asarray(record[key], dtype=dtype) for key, dtype in arrays.items()}}


@dataclasses.dataclass(frozen=True)
class _Context:
    """What a run needs: the plans, the algorithms, alpha, the inputs no output may overwrite."""

    plans: dict[str, _Plan]
    resolved: dict[str, tuple[Any, dict[str, Any]]]
    rate: float
    inputs: list[Any]


#: the context of the runs a forked worker process executes (set before the pool forks)
_WORK: list[tuple[_Context, tuple[str, str, int, int], dict[str, Any], Path]] = []


def _run_one(index: int) -> tuple[dict[str, Any], float]:
    """Run the ``index``-th pending run of :data:`_WORK`, store its record; the record and the CPU seconds the run
    took (its process's, every thread's)."""
    context, (cache_name, name, seed, k), key, place = _WORK[index]
    started = time.process_time()
    unit = context.plans[cache_name].units[k]
    function = context.resolved[name][0]
    answers = function(unit.cache, seed, context.rate, make_folder(place))
    check_answers(answers, unit.cache, name)
    record = {"key": key, **answers_to_json(answers)}
    write_run(place / RESULT, record, unit.cache, context.inputs, name)
    return record, time.process_time() - started


def _execute(context: _Context, pending: list[Any], jobs: int) -> Iterator[tuple[Any, Path, dict[str, Any], float]]:
    """Run the pending runs, serially or in ``jobs`` forked processes, yielding (item, folder, record, CPU seconds)
    as each ends."""
    _WORK[:] = [(context, item, key, place) for item, key, place in pending]
    if jobs == 1 or len(pending) <= 1:
        for index, (item, _, place) in enumerate(pending):
            yield item, place, *_run_one(index)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(_run_one, index): (item, place) for index, (item, _, place) in enumerate(pending)}
        try:
            for future in as_completed(futures):
                yield *futures[future], *future.result()
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
    resampling: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What ``results.json`` holds: per cache and algorithm, the runs, the aggregate, the routing and the paired
    differences to the references; per cache, its content digest (``cache_digests``; with ``--eval-cache``, the
    training cache's, under the key of its results), the unit of its costs (``cost_units``: None for a cache
    without costs or of unknown unit, :func:`ensemble_env.cache.datasets.cost_unit`) and what its intervals resample
    besides the seeds (``resampling``: :data:`~ensemble_mappo.benchmark.stats.RESAMPLING`, ``"questions"`` unless
    ``resampling`` says otherwise). Each algorithm's per-question scores are computed once per cache."""
    results: dict[str, Any] = {"alpha": alpha, "budget": budget, "seeds": seeds, "reused_runs": reused, "caches": {}}
    units = {cache_name: (resampling or {}).get(cache_name, "questions") for cache_name in loaded}
    for cache_name, cache in loaded.items():
        unit = units[cache_name]
        scores = {name: question_scores(cache, runs[(cache_name, name)], alpha) for name in names}
        per_algorithm = {}
        for name in names:
            group = runs[(cache_name, name)]
            per_algorithm[name] = {
                "uses_test_labels": uses_test_labels(name),
                "reference": reference_reason(name, feedback),
                "aggregate": aggregate(cache, group, alpha, resample=unit, scores=scores[name]),
                "runs": [run_summary(cache, run, alpha) for run in group],
                "routing": routing(cache, group, alpha, resample=unit),
                "n_models": cache.n_models,
                "versus": {
                    reference: paired_differences(cache, group, runs[(cache_name, reference)], alpha, resample=unit,
                                                  scores=(scores[name], scores[reference]))
                    for reference in (*REFERENCES, *(ablation_name(name, a) for a in (RESIDUAL_OFF,)))
                    if reference in names and reference != name
                },
            }  # fmt: skip
        results["caches"][cache_name] = per_algorithm
    results["cache_digests"] = digests
    results["cost_units"] = {cache_name: cost_unit(cache) for cache_name, cache in loaded.items()}
    results["resampling"] = units
    return results


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="benchmark", unit="run")
