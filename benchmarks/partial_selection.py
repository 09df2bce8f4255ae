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

``--out`` is a new or empty folder, or one this script made (``ensemble_env.files.output_folder``): never a folder
of another command's files (a ``train`` run, whose ``selection.json`` would be overwritten).
"""

from __future__ import annotations

import argparse
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
from ensemble_mappo.benchmark.answers import check_answers
from ensemble_mappo.benchmark.learners import learner_answers, learner_config

#: the hand rules played on the same inner held-out tasks (global_team first: the settings are paired against it)
RULES = ("global_team", "greedy_team", "ucb_team(partial)", "thompson_team", "etc_team")
#: the folds of the protocol and of each fold's training tasks
FOLDS = 4
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


def _rules(cache: LogitCache, alpha: float) -> dict[str, float]:
    reward = RewardSettings(alpha=alpha)
    fit = np.union1d(cache.select("train"), cache.select("validation"))
    setting = registry.Setting(cache, fit, cache.select("test"), reward=reward)
    return {name: float(registry.lookup(name).run(setting).rewards(cache, reward).mean()) for name in RULES}


def selection(
    cache: LogitCache, settings: dict[str, dict[str, Any]], seeds: int, out: Path, *, jobs: int = 1, alpha: float = 1.0
) -> dict[str, Any]:
    """Every setting's and rule's reward per question on every inner fold (see the module's text), written to
    ``out/selection.json`` and returned:
    ``{"units": [[fold, held-out tasks]], "rules": {rule: [per unit]}, "settings": {name: [[per unit] per seed]}}``.

    The settings are checked first; then ``out`` is taken (:func:`~ensemble_env.files.output_folder`: new, empty or
    made by this script, and without an earlier selection's runs) and held (:class:`~ensemble_env.files.RunLock`)."""
    units = inner_units(cache)
    base = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, cache.n_models, "team")
    base["total_steps"] = protocols.PARTIAL_BUDGET_STEPS["default"]
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
        rules = [_rules(unit.cache, alpha) for _, unit in units]
        found = {
            "units": [[k, list(unit.held_out)] for k, unit in units],
            "rules": {name: [row[name] for row in rules] for name in RULES},
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
    args = parser.parse_args(argv)
    if args.seeds < 1 or not 1 <= args.jobs <= 64:
        parser.error(f"--seeds must be >= 1 and --jobs in 1..64, got {args.seeds} and {args.jobs}")
    settings = dict(parse_setting(text) for text in args.set)  # FIXED_FIELDS: refused by selection
    if len(settings) != len(args.set):
        parser.error("--set: two settings share a name")
    found = selection(resolve_cache(args.cache), settings, args.seeds, args.out, jobs=args.jobs)
    global_team = np.asarray(found["rules"]["global_team"])
    print(f"\n{len(found['units'])} inner folds of {args.cache}'s {FOLDS} folds: reward per question on the inner")
    print("held-out tasks (mean over the inner folds); settings: per seed, their mean, and minus global_team")
    print("| setting or rule | reward | per seed | - global_team |")
    print("|---|---|---|---|")
    for name, rows in found["settings"].items():
        values = np.asarray(rows)
        seeds = ", ".join(f"{row.mean():+.4f}" for row in values)
        print(f"| {name} | {values.mean():+.4f} | {seeds} | {(values - global_team).mean():+.4f} |")
    for name, row in found["rules"].items():
        print(f"| {name} | {np.mean(row):+.4f} | | {np.mean(np.asarray(row) - global_team):+.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
