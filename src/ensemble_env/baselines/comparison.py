"""Every baseline on one cache, scored on the environment's own axes, and their table.

What ``ensemble-env baselines`` runs (see ``docs/baselines.md``):

- :func:`compare`: the baselines of the registry (:mod:`ensemble_env.baselines.registry`) fitted on a train split and
  scored on an eval split, the routing ones (:mod:`ensemble_env.baselines.routing`) choosing teams by the reward
  (:class:`~ensemble_env.game.reward.RewardSettings`: the environment's, at a size penalty alpha);
- :func:`scores`: their accuracy (macro over tasks), mean reward, mean team size and mean cost, overall and
  per task, as the JSON of ``ensemble-env baselines --json``;
- :func:`bootstrap_difference`: a paired bootstrap interval of the difference between two of them;
- :func:`format_table`: every command's tables (``demo``, ``baselines``, ``evaluate``), the baselines numbered
  ``b1``, ``b2``, ... in the order of the table; :func:`evaluate_baselines`: the short list ``demo`` and
  ``evaluate`` show.

The cost-accuracy frontier, the same baselines over a sweep of ``alpha``, is :mod:`ensemble_env.baselines.frontier`'s;
its plot :mod:`ensemble_env.baselines.frontier_plot`'s.

>>> from ensemble_env import datasets
>>> cache = datasets.load("toy8")
>>> results = compare(cache, names=["best_single", "static_team", "oracle"])
>>> [result.name for result in results]
['best_single', 'static_team', 'oracle']
>>> list(scores(cache, results)["static_team"])
['accuracy', 'reward', 'team_size', 'cost', 'tasks']
>>> [is_baseline(result.name) for result in results], is_baseline("mappo")
([True, True, True], False)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ensemble_env.baselines import routing, simple
from ensemble_env.baselines.registry import BASELINES, Setting, baseline_of, lookup
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings
from ensemble_env.seeds import check_seed

__all__ = [
    "baseline_names",
    "bootstrap_difference",
    "compare",
    "default_baselines",
    "evaluate_baselines",
    "fit_routers",
    "format_table",
    "is_baseline",
    "scores",
]


def default_baselines(cache: LogitCache) -> tuple[str, ...]:
    """The baselines :func:`compare` runs by default on ``cache``: every one of
    :data:`~ensemble_env.baselines.registry.BASELINES` marked ``by_default``, except those that need text features
    when the cache has none (``router`` then reads the task one-hots itself) and the team-enumerating ones when
    N > :data:`ensemble_env.baselines.routing.MAX_TEAM_MODELS`."""
    too_many = cache.n_models > routing.MAX_TEAM_MODELS
    return tuple(
        name
        for name, entry in BASELINES.items()
        if entry.by_default
        and not (entry.needs_features and cache.features is None)
        and not (entry.enumerates_teams and too_many)
    )


def evaluate_baselines(cache: LogitCache) -> tuple[str, ...]:
    """The baselines ``ensemble-env demo`` and ``evaluate`` list: those of :func:`default_baselines` marked
    :attr:`~ensemble_env.baselines.registry.Baseline.in_evaluate` (``static_team`` among them), in registry order."""
    return tuple(name for name in default_baselines(cache) if BASELINES[name].in_evaluate)


def is_baseline(name: str) -> bool:
    """Whether a result ``name`` comes from a baseline of the registry (``random_team(k=3)``: ``random_team``; an
    alias: its baseline), not from a learned policy such as ``mappo``."""
    return baseline_of(name) is not None


def format_table(cache: LogitCache, results: Sequence[BaselineResult], reward: RewardSettings = DEFAULT_REWARD) -> str:
    """:func:`ensemble_env.baselines.simple.format_table` with the baselines numbered in the order of the table
    (``b1``, ``b2``, ...: the per-task table's columns) and a result that is no baseline, such as a learned policy,
    under its name."""
    ids, number = [], 0
    for result in results:
        if is_baseline(result.name):
            number += 1
            ids.append(f"b{number}")
        else:
            ids.append(result.name)
    return simple.format_table(cache, results, reward, ids=ids)


def baseline_names(cache: LogitCache, names: Iterable[str] | None) -> tuple[str, ...]:
    """The baselines ``names`` stand for on ``cache`` (None: :func:`default_baselines`), each once, under its own
    name (an alias: its baseline's); ValueError for an unknown name, no name, or a baseline that enumerates every
    team on a pool of more than :data:`~ensemble_env.baselines.routing.MAX_TEAM_MODELS` models. Commands call it
    before any work, so that bad names are one error line."""
    if names is None:
        return default_baselines(cache)
    chosen = tuple(dict.fromkeys(lookup(name).name for name in names))
    if not chosen:
        raise ValueError("no baseline named: give at least one of " + ", ".join(BASELINES))
    too_big = [name for name in chosen if BASELINES[name].enumerates_teams and cache.n_models > routing.MAX_TEAM_MODELS]
    if too_big:
        raise ValueError(
            f"{', '.join(too_big)} enumerate{'s' if len(too_big) == 1 else ''} every team: at most "
            f"{routing.MAX_TEAM_MODELS} models, and this cache has {cache.n_models}"
        )
    return chosen


def _validation(cache: LogitCache, split: str, train_split: str) -> np.ndarray | None:
    """The validation questions the router may tune on: none when they are (part of) the train or eval ones."""
    if {"validation", "all"} & {split, train_split}:
        return None
    try:
        return cache.select("validation")
    except ValueError:  # the cache has no validation question
        return None


def fit_routers(
    cache: LogitCache, *, split: str = "test", train_split: str = "train", names: Iterable[str] | None = None
) -> dict[str, routing.RouterFit]:
    """The fits of the baselines among ``names`` (default :func:`default_baselines`) that have one (the routers),
    made as :func:`compare` makes them, to pass to :func:`compare` and
    :func:`~ensemble_env.baselines.frontier.frontier` (``routers=``) so that
    they are made once."""
    validation = _validation(cache, split, train_split)
    train = cache.select(train_split)
    return {
        name: fit(cache, train, validation)
        for name in baseline_names(cache, names)
        if (fit := BASELINES[name].fit) is not None
    }


def compare(
    cache: LogitCache,
    *,
    split: str = "test",
    train_split: str = "train",
    reward: RewardSettings = DEFAULT_REWARD,
    k: int = 3,
    seed: int | None = 0,
    names: Iterable[str] | None = None,
    routers: dict[str, routing.RouterFit] | None = None,
    choose_on: str = "training",
    outcomes: Any = None,
) -> list[BaselineResult]:
    """The baselines ``names`` (default :func:`default_baselines`), fitted on ``train_split``, scored on ``split``.

    The routing baselines choose their teams by ``reward`` (the environment's, at its alpha); the router's
    penalty is chosen on the cache's validation questions when it has some that are neither train nor eval
    questions. ``k`` and ``seed`` set the random and greedy-focal teams. ``routers`` maps ``"router"`` /
    ``"router(tasks)"`` to an already fitted router (:func:`fit_routers`). ``choose_on`` is
    :attr:`~ensemble_env.baselines.registry.Setting.choose_on` (where the partial-feedback rules and ``bayes_team``
    choose their constants), ``outcomes`` :attr:`~ensemble_env.baselines.registry.Setting.outcomes` (the teams'
    outcomes on the cache's questions, computed once for several baselines of the unseen-task protocol). Results
    come in the order of
    :data:`~ensemble_env.baselines.registry.BASELINES`. ValueError for an unknown name, a bad split, or a
    routing baseline on more than :data:`ensemble_env.baselines.routing.MAX_TEAM_MODELS` models.
    """
    chosen = baseline_names(cache, names)
    setting = Setting(
        cache,
        cache.select(train_split),
        cache.select(split),
        reward=reward,
        validation=_validation(cache, split, train_split),
        k=k,
        seed=seed,
        fitted=dict(routers or {}),
        choose_on=choose_on,
        outcomes=outcomes,
    )
    return [entry.run(setting) for name, entry in BASELINES.items() if name in chosen]


def scores(
    cache: LogitCache,
    results: Sequence[BaselineResult],
    reward: RewardSettings = DEFAULT_REWARD,
) -> dict[str, dict[str, Any]]:
    """``{name: BaselineResult.scores(cache, reward)}``: the JSON object of ``ensemble-env baselines --json``."""
    return {result.name: result.scores(cache, reward) for result in results}


def bootstrap_difference(
    cache: LogitCache,
    first: BaselineResult,
    second: BaselineResult,
    reward: RewardSettings = DEFAULT_REWARD,
    *,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[float, float, float]]:
    """How much ``first`` beats ``second`` on the same eval questions, with a paired bootstrap interval.

    Returns ``{"accuracy": (difference, low, high), "reward": (...)}``: the difference of macro accuracy and
    of mean ``reward`` (first minus second) and the central ``level`` interval of that difference over
    ``n_resamples`` resamples of the eval questions, drawn with replacement within each task (so every task
    keeps its size) from ``np.random.default_rng(seed)``; both results are resampled together (paired).
    """
    if not np.array_equal(first.questions, second.questions):
        raise ValueError(f"results {first.name!r} and {second.name!r} are not on the same eval questions")
    if not (isinstance(n_resamples, int) and n_resamples >= 1 and 0.0 < level < 1.0):
        raise ValueError(f"n_resamples must be an integer >= 1 and level in (0, 1), got {n_resamples!r}, {level!r}")
    correct = first.correct.astype(np.float64) - second.correct
    rewards = first.rewards(cache, reward) - second.rewards(cache, reward)
    tasks = np.asarray(cache.tasks)[first.questions]
    rng = np.random.default_rng(check_seed(seed, "bootstrap_difference", optional=False))
    accuracy, total = [], np.zeros(n_resamples)
    for task in np.unique(tasks):
        rows = np.flatnonzero(tasks == task)
        draw = rows[rng.integers(0, rows.size, (n_resamples, rows.size))]
        accuracy.append(correct[draw].mean(axis=1))
        total += rewards[draw].sum(axis=1)
    samples = {"accuracy": np.mean(accuracy, axis=0), "reward": total / first.n_questions}
    point = {"accuracy": first.macro_accuracy(cache) - second.macro_accuracy(cache), "reward": rewards.mean()}
    tail = (1.0 - level) / 2.0
    bounds = {key: np.quantile(samples[key], [tail, 1.0 - tail]) for key in samples}
    return {key: (float(point[key]), float(bounds[key][0]), float(bounds[key][1])) for key in samples}
