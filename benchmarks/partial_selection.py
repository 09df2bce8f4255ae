"""Choose the partial-feedback learner's settings on every fold's training tasks, never on a fold's test tasks.

Under ``--protocol unseen-tasks --feedback team`` each fold chooses on 3 validation tasks, too few to tell learner
settings apart: on bbh5 they favour the training tasks' best team, which the rules beat on the test tasks
(docs/benchmark.md). This script scores a setting on all 12 training tasks of each fold instead. For each fold of
the protocol (``protocols.units``), the fold's test tasks are dropped and the other tasks are cut by the same
protocol into inner folds; on each inner fold the learner trains with the setting (choosing its checkpoint on the
inner fold's validation tasks, as the benchmark does) and plays the inner held-out tasks, from an empty history,
and the hand rules play the same tasks. No question of a fold's test tasks is read.

Printed per setting: the reward per question on the inner held-out tasks (the mean over every inner fold of every
fold), per seed and over the seeds, and its paired difference to ``global_team`` (the training tasks' best team) on
the same tasks; then each rule's. ``OUT/selection.json`` keeps every value; runs are kept under ``OUT/runs``.

    python benchmarks/partial_selection.py --out sel --seeds 2 --jobs 2 \\
        --set 'index: decider_policy="index", total_steps=262144' \\
        --set 'index, 65,536 steps: decider_policy="index", total_steps=65536' \\
        --set 'scorer: decider_policy="scorer", total_steps=65536'

A setting is ``NAME: FIELD=VALUE, ...`` as in validation_sweep.py, on top of the learner's partial-feedback
settings (``protocols.learner_overrides(..., "team")`` at the default budget): a field it gives is what the runs use
(``passes`` without ``total_steps`` replaces the default budget of steps; ``checkpoints`` the checkpoints kept), and
``seed`` (the script's ``--seeds``) and ``env.alpha`` (the reward of the rules' comparison, 1) are refused.

With ``--protocol generated`` (issue 48) the units are the folds of ``benchmark --protocol generated`` (fold seed 0,
the default :class:`~ensemble_mappo.benchmark.protocols.GeneratedPlan`): a fold's generator is fitted on its
training tasks, the learner trains on the plan's generated train tasks and chooses its checkpoint on the generated
validation tasks, and what is scored are ``--selection-tasks`` *further tasks of the validation stream* (drawn after
the plan's validation tasks: never a task of the protocol's test stream, nor a real held-out task). The rules (with
``bayes_team``) choose their constants on the generated validation tasks, the train tasks their prior, as the
protocol's do, and play the same selection tasks; the settings are paired against the best of them too.

    python benchmarks/partial_selection.py --protocol generated --out gsel --seeds 2 --jobs 2 \\
        --set 'residual 0.99 (the defaults):' --set 'index 0.9: decider_policy="index", gamma=0.9'

``--out`` is a new or empty folder, or one this script made (``ensemble_env.files.output_folder``): never a folder
of another command's files (a ``train`` run, whose ``selection.json`` would be overwritten).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from validation_sweep import parse_setting

from ensemble_env.baselines import registry
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.errors import command
from ensemble_env.files import RunLock, output_folder, write_text
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo import algorithms
from ensemble_mappo.benchmark import protocols
from ensemble_mappo.benchmark import registry as benchmark_registry
from ensemble_mappo.benchmark.answers import check_answers
from ensemble_mappo.benchmark.learners import learner_answers, learner_config

#: the hand rules played on the same inner held-out tasks (global_team first: the settings are paired against it)
RULES = ("global_team", "greedy_team", "ucb_team(partial)", "thompson_team", "etc_team")
#: the rules of ``--protocol generated``: the rules above and the Bayesian one, each choosing its constants on the
#: generated validation tasks
GENERATED_RULES = (*RULES, "bayes_team")
#: the folds of the protocol and of each fold's training tasks
FOLDS = 4
#: the generated tasks scored per fold under ``--protocol generated`` (``--selection-tasks``)
SELECTION_TASKS = 400
#: the script's name: its error messages and the mark of its output folder
PROG = "partial_selection.py"
#: the fields a setting may not give, and why (``validation_sweep.parse_setting``'s ``fixed``)
FIXED_FIELDS = {
    "seed": "the seeds are --seeds's 0..S-1, the same for every setting",
    "env.alpha": "the reward's alpha is the script's, the rules' and the settings' alike",
}


def inner_units(cache: LogitCache, folds: int = FOLDS) -> list[tuple[int, protocols.Unit]]:
    """(fold, inner unit) for every inner fold of every fold of the unseen-task protocol on ``cache`` (fold seed 0):
    the inner units are the protocol's folds on the fold's cache without its test tasks."""
    found = []
    for k, unit in enumerate(protocols.units(cache, k=folds, seed=0)[0]):
        training = unit.cache.subset(np.setdiff1d(np.arange(unit.cache.n_questions), unit.cache.select("test")))
        found.extend((k, inner) for inner in protocols.units(training, k=folds, seed=0)[0])
    return found


def generated_units(
    cache: LogitCache, selection_tasks: int = SELECTION_TASKS, plan: protocols.GeneratedPlan | None = None
) -> list[tuple[int, protocols.Unit]]:
    """(fold, unit) for every fold of ``--protocol generated`` on ``cache`` (fold seed 0, ``plan``: default the
    protocol's): the fold's generated train and validation tasks as the protocol draws them, and as ``test``
    ``selection_tasks`` further tasks of the fold's validation stream (after the plan's validation tasks), never a
    task of the test stream nor a real held-out task."""
    plan = protocols.GeneratedPlan() if plan is None else plan
    first = protocols.GENERATED_FIRST["validation"] + plan.validation_tasks
    if not 1 <= selection_tasks <= protocols.GENERATED_FIRST["test"] - first:
        raise ValueError(f"--selection-tasks must be in 1..{protocols.GENERATED_FIRST['test'] - first}, "
                         f"got {selection_tasks}")  # fmt: skip
    found = []
    for fold, unit in enumerate(protocols.units(cache, k=FOLDS, seed=0)[0]):
        training = tuple(name for name in protocols.tasks_with_questions(cache) if name not in unit.held_out)
        generator = protocols.fold_generator(cache, training)
        stream = protocols.fold_stream_seed(0, fold)
        drawn = protocols.generated_tasks(generator, dataclasses.replace(plan, test_tasks=1), stream)
        chosen = generator.sample(selection_tasks, stream, first=first, questions=plan.questions, model_seed=stream)
        parts = [drawn["train"], drawn["validation"], chosen]
        splits = [drawn["train"].split, drawn["validation"].split, np.full(chosen.n_questions, protocols.TEST)]
        joined = protocols.joined_cache(parts, splits)
        found.append((fold, protocols.Unit(f"fold {fold + 1}", joined, np.arange(chosen.n_questions), unit.held_out,
                                           unit.validation_tasks)))  # fmt: skip
    return found


#: the learner runs, set before the pool forks (a forked worker reads its run here: no cache is pickled per run)
_WORK: list[tuple[LogitCache, int, dict[str, Any], float, Path]] = []


def _learner(index: int) -> float:
    """The ``index``-th run of :data:`_WORK` (an inner fold, a seed, a setting): its reward per question on the
    inner held-out tasks, scored as the benchmark scores answers."""
    cache, seed, overrides, alpha, out_dir = _WORK[index]
    fields = dict(overrides)
    passes, checkpoints = fields.pop("passes"), fields.pop("checkpoints")
    answers = learner_answers(
        cache, seed, alpha, out_dir, algorithm="mappo", passes=passes, checkpoints=checkpoints, overrides=fields
    )
    return float(check_answers(answers, cache, "mappo").rewards(cache, RewardSettings(alpha=alpha)).mean())


def _run_all(jobs: int) -> list[float]:
    """Every run of :data:`_WORK`, serially or in ``jobs`` forked processes (cancelled on the first failure), with a
    progress line on stderr; the rewards in :data:`_WORK`'s order."""
    total = len(_WORK)

    def progress(done: int) -> None:
        print(f"partial_selection: {done} of {total} learner runs", end="\r", file=sys.stderr, flush=True)

    if jobs == 1:
        values = []
        for index in range(total):
            values.append(_learner(index))
            progress(index + 1)
        return values
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [pool.submit(_learner, index) for index in range(total)]
        try:
            for done, _ in enumerate(as_completed(futures), 1):
                progress(done)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return [future.result() for future in futures]


def _rules(cache: LogitCache, alpha: float, generated: bool = False) -> dict[str, float]:
    reward = RewardSettings(alpha=alpha)
    if generated:  # as the protocol plays them: constants chosen on the validation tasks, the train tasks the prior
        found = {}
        for name in GENERATED_RULES:
            answers = benchmark_registry.baseline(name, choose_on="validation")(cache, 0, alpha, Path("."))
            found[name] = float(check_answers(answers, cache, name).rewards(cache, reward).mean())
        return found
    fit = np.union1d(cache.select("train"), cache.select("validation"))
    setting = registry.Setting(cache, fit, cache.select("test"), reward=reward)
    return {name: float(registry.lookup(name).run(setting).rewards(cache, reward).mean()) for name in RULES}


def selection(
    cache: LogitCache,
    settings: dict[str, dict[str, Any]],
    seeds: int,
    out: Path,
    *,
    jobs: int = 1,
    alpha: float = 1.0,
    protocol: str = "unseen-tasks",
    selection_tasks: int = SELECTION_TASKS,
) -> dict[str, Any]:
    """Every setting's and rule's reward per question on every inner fold (see the module's text), written to
    ``out/selection.json`` and returned:
    ``{"units": [[fold, held-out tasks]], "rules": {rule: [per unit]}, "settings": {name: [[per unit] per seed]}}``.

    The settings are checked first; then ``out`` is taken (:func:`~ensemble_env.files.output_folder`: new, empty or
    made by this script, and without an earlier selection's runs) and held (:class:`~ensemble_env.files.RunLock`).
    ``protocol="generated"``: the units of :func:`generated_units`."""
    generated = protocol == "generated"
    units = generated_units(cache, selection_tasks) if generated else inner_units(cache)
    config_class = algorithms.get("mappo").config_class
    base = protocols.learner_overrides("mappo", config_class, cache.n_models, "team", protocol=protocol)
    budget = protocols.GENERATED_BUDGET_STEPS if generated else protocols.PARTIAL_BUDGET_STEPS
    base["total_steps"] = budget["default"]
    base["passes"], base["checkpoints"] = algorithms.get("mappo").budget("default")
    runs = [_overrides(name, base, fields) for name, fields in settings.items()]  # refused now, not in a run
    out = output_folder(out, PROG)
    with RunLock(out, command=PROG):  # one writer per folder
        if (out / "runs").exists():
            raise ValueError(f"{out / 'runs'} holds the runs of an earlier selection: give another --out")
        _WORK.clear()
        for overrides in runs:
            for seed in range(seeds):
                for _, unit in units:
                    _WORK.append((unit.cache, seed, overrides, alpha, out / "runs" / f"{len(_WORK):04d}"))
        per_setting = np.asarray(_run_all(jobs)).reshape(len(settings), seeds, len(units)).tolist()
        rules = [_rules(unit.cache, alpha, generated) for _, unit in units]
        found = {
            "protocol": protocol,
            "units": [[k, list(unit.held_out)] for k, unit in units],
            "rules": {name: [row[name] for row in rules] for name in rules[0]},
            "settings": dict(zip(settings, per_setting, strict=True)),
        }
        write_text(out / "selection.json", json.dumps(found, indent=1) + "\n")
    return found


def _overrides(name: str, base: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of setting ``name``'s runs: ``base`` with the setting's ``fields`` on top, each one honoured (a
    ``passes`` without ``total_steps`` drops the default budget of steps), checked now; ValueError naming the
    setting for a field of :data:`FIXED_FIELDS`, an unknown field or a bad value."""
    fixed = [key for key in FIXED_FIELDS if key in fields or key.removeprefix("env.") in fields.get("env", {})]
    if fixed:
        raise ValueError(f"--set {name!r}: {fixed[0]} is set by the script ({FIXED_FIELDS[fixed[0]]}); drop it")
    overrides = {**base, **{key: value for key, value in fields.items() if key != "env"}}
    overrides["env"] = {**base["env"], **fields.get("env", {})}
    if "passes" in fields and "total_steps" not in fields:
        overrides["total_steps"] = 0  # the setting's passes are the budget
    checked = {key: value for key, value in overrides.items() if key not in ("passes", "checkpoints")}
    try:
        config = learner_config(
            "mappo", 0, alpha=1.0, passes=overrides["passes"], checkpoints=overrides["checkpoints"], overrides=checked
        )
    except (TypeError, ValueError) as error:  # an unknown field, a bad value
        raise ValueError(f"--set {name!r}: {error}") from None
    given = {key: value for key, value in fields.items() if key != "env"}
    lost = [key for key, value in given.items() if getattr(config, key, value) != value]
    if lost:  # a field the run would not use as given (learner_config sets it): refused, never silently replaced
        raise ValueError(f"--set {name!r}: {lost[0]}={given[lost[0]]!r} would not be the runs' value; drop it")
    return overrides


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="bbh5", help="a built-in cache name or an HDF5 file (default: bbh5)")
    parser.add_argument("--set", action="append", required=True, metavar="SETTING", help="NAME: FIELD=VALUE, ...")
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..S-1 per setting (default: 2)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the learner runs (default: 1)")
    parser.add_argument("--out", required=True, type=Path, help="folder of the runs and selection.json")
    parser.add_argument("--protocol", choices=("unseen-tasks", "generated"), default="unseen-tasks",
                        help="the inner folds of the real training tasks (default), or generated tasks")  # fmt: skip
    parser.add_argument("--selection-tasks", type=int, default=SELECTION_TASKS,
                        help=f"--protocol generated: scored tasks per fold (default: {SELECTION_TASKS})")  # fmt: skip
    args = parser.parse_args(argv)
    if args.seeds < 1 or not 1 <= args.jobs <= 64:
        parser.error(f"--seeds must be >= 1 and --jobs in 1..64, got {args.seeds} and {args.jobs}")
    settings = dict(parse_setting(text) for text in args.set)  # FIXED_FIELDS: refused by selection
    if len(settings) != len(args.set):
        parser.error("--set: two settings share a name")
    found = selection(resolve_cache(args.cache), settings, args.seeds, args.out, jobs=args.jobs,
                      protocol=args.protocol, selection_tasks=args.selection_tasks)  # fmt: skip
    rules = {name: np.asarray(row) for name, row in found["rules"].items()}
    global_team = rules["global_team"]
    best = max((name for name in rules if name != "global_team"), key=lambda name: rules[name].mean())
    if args.protocol == "generated":
        print(f"\n{len(found['units'])} folds of {args.cache}, {args.selection_tasks} generated selection tasks each: "
              "reward per question (mean over the folds)")  # fmt: skip
    else:
        print(f"\n{len(found['units'])} inner folds of {args.cache}'s {FOLDS} folds: reward per question on the inner")
        print("held-out tasks (mean over the inner folds)")
    print(f"settings: per seed, their mean, and minus global_team and minus the best rule here ({best})")
    print(f"| setting or rule | reward | per seed | - global_team | - {best} |")
    print("|---|---|---|---|---|")
    for name, rows in found["settings"].items():
        values = np.asarray(rows)
        seeds = ", ".join(f"{row.mean():+.4f}" for row in values)
        print(f"| {name} | {values.mean():+.4f} | {seeds} | {(values - global_team).mean():+.4f} "
              f"| {(values - rules[best]).mean():+.4f} |")  # fmt: skip
    for name, row in rules.items():
        gaps = f"{(row - global_team).mean():+.4f} | {(row - rules[best]).mean():+.4f}"
        print(f"| {name} | {row.mean():+.4f} | | {gaps} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
