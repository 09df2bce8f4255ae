"""The benchmark's results as marl-eval reads them: ``ensemble-env benchmark --format marl-eval`` writes
``OUT/marl_eval.json``.

marl-eval (github.com/instadeepai/marl-eval, package ``id-marl-eval``) reads one JSON object of
``{environment: {task: {algorithm: {run: {"step_K": {...}, "absolute_metrics": {...}}}}}}`` (its README, "Data
Structure for Raw Experiment data"); BenchMARL's ``JsonWriter`` and marl-eval's own ``JsonLogger`` write the same
layout, naming each run ``seed_S`` and each step ``step_K``. A step holds ``step_count`` (an integer: environment
steps when it was logged) and each metric as a list of numbers; ``absolute_metrics`` holds each metric as a list,
without ``step_count``. ``data_process_pipeline`` lowercases every key, treats a run's key holding ``absolute`` as
its absolute metrics and every other key as a step, needs at least one step (its evaluation interval is the mean of
the steps' ``step_count`` differences), refuses commas in algorithm names and adds its own summary under the
top-level key ``extra``. Every environment must hold the same algorithms, runs, steps and metrics throughout.

What the benchmark writes (:func:`export`):

- environment: each cache, named as in ``results.json`` (``bbh5``; with ``--eval-cache``, the scored cache);
- task: each task with scored questions (the test split; every question of the scored cache under the
  unseen-tasks protocol);
- algorithm: each benchmarked algorithm, named as in ``results.json``;
- run: ``seed_S`` for each seed;
- one step, ``step_0`` with ``step_count`` 0, and ``absolute_metrics``: the same numbers, the one scoring of the
  algorithm's test answers (the benchmark stores no learning curve on test; the learners' validation curves are in
  ``results.json``, and marl-eval needs the same steps for every algorithm);
- metrics (:data:`METRICS`), one number each, over the task's scored questions: ``accuracy`` (share of right
  answers), ``reward`` (the environment's mean reward per question at the benchmark's alpha), ``team_size`` (mean
  models consulted per question) and ``cost`` (mean cost per question: the team size on a cache without costs).

:data:`SCHEMA` is marl-eval's layout as a JSON Schema (draft 2020-12); ``tests/learner/test_benchmark_marl_eval.py``
checks the file against it and, where marl-eval is installed, loads it with marl-eval itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_mappo.benchmark.stats import METRICS, task_scores

__all__ = [
    "ABSOLUTE",
    "FILE",
    "FORMATS",
    "METRICS",
    "SCHEMA",
    "STEP",
    "check_names",
    "dumps",
    "export",
    "run_name",
    "scored_tasks",
]

#: the formats ``--format`` adds to results.json and results.md
FORMATS = ("marl-eval",)
#: the file ``--format marl-eval`` writes in the results folder
FILE = "marl_eval.json"
#: the one evaluation step of each run
STEP = "step_0"
#: the key of a run's absolute metrics
ABSOLUTE = "absolute_metrics"
#: the top-level key marl-eval's ``data_process_pipeline`` adds to the data (its summary): no environment may have it
RESERVED_ENVIRONMENT = "extra"

_VALUES = {"type": "array", "minItems": 1, "items": {"type": "number"}}

#: marl-eval's raw-data layout (its README's "Data Structure for Raw Experiment data", the keys its loaders read)
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "marl-eval raw experiment data",
    "type": "object",
    "minProperties": 1,
    "propertyNames": {"not": {"pattern": "^[Ee][Xx][Tt][Rr][Aa]$"}},
    "additionalProperties": {"$ref": "#/$defs/environment"},
    "$defs": {
        "environment": {"type": "object", "minProperties": 1, "additionalProperties": {"$ref": "#/$defs/task"}},
        "task": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": "^[^,]+$"},
            "additionalProperties": {"$ref": "#/$defs/algorithm"},
        },
        "algorithm": {"type": "object", "minProperties": 1, "additionalProperties": {"$ref": "#/$defs/run"}},
        "run": {
            "type": "object",
            "required": [ABSOLUTE],
            "minProperties": 2,
            "properties": {ABSOLUTE: {"$ref": "#/$defs/absolute_metrics"}},
            "patternProperties": {"^step_[0-9]+$": {"$ref": "#/$defs/step"}},
            "additionalProperties": False,
        },
        "step": {
            "type": "object",
            "required": ["step_count"],
            "minProperties": 2,
            "properties": {"step_count": {"type": "integer", "minimum": 0}},
            "additionalProperties": _VALUES,
        },
        "absolute_metrics": {
            "type": "object",
            "minProperties": 1,
            "not": {"required": ["step_count"]},
            "additionalProperties": _VALUES,
        },
    },
}


def run_name(seed: int) -> str:
    """The key of the run of ``seed``: ``seed_S``, as BenchMARL and marl-eval's ``JsonLogger`` name runs."""
    return f"seed_{seed}"


def scored_tasks(cache: LogitCache) -> list[str]:
    """The names of the tasks with scored (test) questions, in the cache's task order."""
    tasks = sorted({int(task) for task in cache.tasks[cache.select("test")]})
    return [cache.task_names[task] for task in tasks]


def _clash(kind: str, names: Sequence[str], where: str) -> None:
    seen: dict[str, str] = {}
    for name in names:
        first = seen.setdefault(name.lower(), name)
        if first != name:
            raise ValueError(
                f"--format marl-eval: {kind} {first!r} and {name!r}{where} are one name to marl-eval, which lowercases "
                "every key; rename one"
            )


def check_names(environments: Mapping[str, LogitCache], algorithms: Sequence[str]) -> None:
    """ValueError naming the name when marl-eval cannot keep the results apart: an algorithm name with a comma
    (marl-eval refuses them), two algorithms, caches or tasks of a cache equal but for case (marl-eval lowercases
    every key), a cache named ``extra`` (marl-eval's own top-level key). Checked before the benchmark runs."""
    for name in algorithms:
        if "," in name:
            raise ValueError(f"--format marl-eval: algorithm {name!r} has a comma; marl-eval refuses them in names")
    _clash("algorithms", algorithms, "")
    _clash("caches", list(environments), "")
    for environment, cache in environments.items():
        if environment.lower() == RESERVED_ENVIRONMENT:
            raise ValueError(
                f"--format marl-eval: cache {environment!r} would be the top-level key {RESERVED_ENVIRONMENT!r}, "
                "which marl-eval keeps for its own summary; give the cache another name"
            )
        _clash("tasks", scored_tasks(cache), f" (cache {environment})")


def export(
    scored: Mapping[str, LogitCache],
    algorithms: Sequence[str],
    runs: Mapping[tuple[str, str], Sequence[dict[str, Any]]],
    alpha: float,
) -> dict[str, Any]:
    """marl-eval's JSON object of the benchmark (see the module docstring): ``scored`` maps each environment (as
    named in ``results.json``) to the cache its answers are scored on, ``runs[(environment, algorithm)]`` holds the
    algorithm's runs (one per seed, with ``seed``), ``alpha`` the reward's size penalty."""
    check_names(scored, algorithms)
    data: dict[str, Any] = {}
    for environment, cache in scored.items():
        tasks: dict[str, Any] = {name: {} for name in scored_tasks(cache)}
        for algorithm in algorithms:
            group = runs[(environment, algorithm)]
            scores = task_scores(cache, group, alpha)
            for task, per_metric in scores.items():
                tasks[task][algorithm] = {
                    run_name(run["seed"]): {
                        STEP: {"step_count": 0, **{key: [per_metric[key][index]] for key in METRICS}},
                        ABSOLUTE: {key: [per_metric[key][index]] for key in METRICS},
                    }
                    for index, run in enumerate(group)
                }
        data[environment] = tasks
    return data


def dumps(data: Mapping[str, Any]) -> str:
    """The text of ``marl_eval.json``: indented JSON without NaN or infinities."""
    return json.dumps(data, indent=1, allow_nan=False) + "\n"
