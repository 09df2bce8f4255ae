"""Plain-text tables of baseline results (:func:`format_table`) and how they print costs.

A table shows each result's scores (:meth:`~ensemble_env.baselines.result.BaselineResult.scores`) under an id, a
note on what the columns mean and the costs' unit, then each result's accuracy per task.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import numpy as np

from ensemble_env.baselines.result import BaselineResult, task_names
from ensemble_env.cache.datasets import cost_unit
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings
from ensemble_env.text import align_table

__all__ = ["cost_format", "cost_note", "describe_costs", "fixed_decimals", "format_table"]


def fixed_decimals(scale: float) -> int:
    """The decimals that show numbers of about ``scale`` in fixed notation (never ``5.027e+00``) with 3 significant
    digits, and 2 at least.

    >>> [f"{value:.{fixed_decimals(value)}f}" for value in (39.47, 1.0563, 0.03125, 0.0003)]
    ['39.47', '1.06', '0.0312', '0.000300']
    """
    if not (math.isfinite(scale) and scale > 0):
        return 2
    return max(2, 2 - math.floor(math.log10(scale)))


def cost_format(cache: LogitCache) -> str:
    """How tables print a mean cost: in fixed notation, 2 decimals (a count of models when the cache has no
    ``costs``; bbh5's 1.06 to 39.47), more for caches whose models cost less than 1 (:func:`fixed_decimals` of the
    cheapest model's mean cost per question: 0.0003 prints 0.000300)."""
    if cache.costs is None:
        return "{:.2f}"
    per_model = np.asarray(cache.costs, dtype=np.float64).reshape(-1, cache.n_models).mean(axis=0)
    positive = per_model[per_model > 0]
    return f"{{:.{fixed_decimals(float(positive.min()) if positive.size else 1.0)}f}}"


def cost_note(cache: LogitCache) -> str:
    """What a table's costs are, in words: the unit of the cache's costs (:func:`ensemble_env.cache.datasets.cost_unit`:
    a built-in cache's, else the cache maker's), or that a cache without costs counts models.

    >>> from ensemble_env import datasets
    >>> cost_note(datasets.load("bbh5"))
    'cost unit: billion active parameters x thousand prompt characters'
    """
    return describe_costs(cache.costs is not None, cost_unit(cache))


def describe_costs(priced: bool, unit: str | None) -> str:
    """:func:`cost_note` of a cache known by whether it has costs (``priced``) and their unit (None: unknown), as
    ``results.json`` of ``ensemble-env benchmark`` keeps it."""
    if not priced:
        return "the cache has no costs (every model costs 1, so a team's cost is its size)"
    unknown = "the cache maker's (a cache may give its costs in any unit: docs/cache-format.md)"
    return f"cost unit: {unit or unknown}"


def format_table(
    cache: LogitCache,
    results: Sequence[BaselineResult],
    reward: RewardSettings = DEFAULT_REWARD,
    ids: Sequence[str] | None = None,
) -> str:
    """Two plain-text tables of results (:meth:`BaselineResult.scores`), columns aligned, and what they mean.

    The first has one row per result, under its id (``ids``, one per result; default ``b1``, ``b2``, ... in
    order; a result whose id is its name shows the name alone): macro accuracy (the mean of the per-task
    accuracies), the accuracy over all questions (only when it differs from the macro one for some result: with
    tasks of one size the two are equal), the environment's mean reward (``reward``), mean team size and mean cost
    (only on a cache with costs: without, it is the team size; ``-`` when unknown). Under it, a note says what the
    columns are and the costs' unit (:func:`cost_note`). The second has one row per task that any result was
    evaluated on (full task names) and each result's accuracy under its id (``-`` where it has no question of the
    task). Accuracies and rewards have 4 decimals, team sizes 2, costs :func:`cost_format` (fixed notation).
    """
    if not results:
        raise ValueError("results is empty: nothing to tabulate")
    if ids is None:
        ids = [f"b{number}" for number in range(1, len(results) + 1)]
    if len(ids) != len(results):
        raise ValueError(f"format_table: {len(ids)} ids for {len(results)} results")
    scores = [result.scores(cache, reward) for result in results]
    costs = cost_format(cache)
    pooled = any(abs(score["accuracy"] - result.accuracy) > 1e-9 for result, score in zip(results, scores, strict=True))
    priced = cache.costs is not None
    rows = [
        [
            result.name if label == result.name else f"{label} {result.name}",
            f"{score['accuracy']:.4f}",
            *([f"{result.accuracy:.4f}"] if pooled else []),
            f"{score['reward']:.4f}",
            f"{score['team_size']:.2f}",
            *([("-" if score["cost"] is None else costs.format(score["cost"]))] if priced else []),
        ]
        for label, result, score in zip(ids, results, scores, strict=True)
    ]
    header = ["baseline", "accuracy", *(["accuracy(all questions)"] if pooled else [])]
    header += [f"reward(alpha={reward.alpha:g})", "team", *(["cost"] if priced else [])]
    accuracy = "accuracy: mean over tasks" + (
        "; accuracy(all questions): over every question" if pooled else " (here also over all questions)"
    )
    notes = [f"{accuracy}; reward, team (models){', cost' if priced else ''}: means per question"]
    notes.append(cost_note(cache) if priced else f"no cost column: {cost_note(cache)}")
    tasks = [name for name in task_names(cache) if any(name in score["tasks"] for score in scores)]
    task_rows = [
        [name, *(f"{score['tasks'][name]['accuracy']:.4f}" if name in score["tasks"] else "-" for score in scores)]
        for name in tasks
    ]
    return "\n".join(
        [
            *align_table(header, rows),
            *(line for note in notes for line in textwrap.wrap(note, width=120)),
            "",
            "accuracy per task (columns: the ids above)",
            *align_table(["task", *ids], task_rows),
        ]
    )
