"""Every baseline on one cache, scored on the environment's own axes, and the cost-accuracy frontier.

What ``ensemble-env baselines`` runs (see ``docs/baselines.md``):

- :func:`compare`: the baselines of the registry (:mod:`ensemble_env.baselines.registry`) fitted on a train split and
  scored on an eval split, the routing ones (:mod:`ensemble_env.baselines.routing`) choosing teams by the reward
  (:class:`~ensemble_env.game.reward.RewardSettings`: the environment's, at a size penalty alpha);
- :func:`scores`: their accuracy (macro over tasks), mean reward, mean team size and mean cost, overall and
  per task, as the JSON of ``ensemble-env baselines --json``;
- :func:`bootstrap_difference`: a paired bootstrap interval of the difference between two of them;
- :func:`frontier` sweeps ``alpha`` (the baselines that choose their teams by reward move along it, the
  others stay put) and :func:`plot_frontier` draws accuracy against mean team size or cost (matplotlib, the
  ``plot`` or ``mappo`` extra);
- :func:`format_table`: every command's tables (``demo``, ``baselines``, ``evaluate``), the baselines numbered
  ``b1``, ``b2``, ... in the order of the table; :func:`evaluate_baselines`: the short list ``demo`` and
  ``evaluate`` show.

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

import dataclasses
import itertools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.baselines import routing, simple
from ensemble_env.baselines.registry import BASELINES, Setting, lookup
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import make_folder, save_figure
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings, check_alpha
from ensemble_env.seeds import check_seed
from ensemble_env.text import align_table

__all__ = [
    "DEFAULT_ALPHAS",
    "FrontierPoint",
    "baseline_names",
    "bootstrap_difference",
    "compare",
    "default_baselines",
    "evaluate_baselines",
    "fit_routers",
    "format_frontier",
    "format_table",
    "frontier",
    "is_baseline",
    "plot_frontier",
    "priced",
    "scores",
]

#: the size penalties :func:`frontier` sweeps by default
DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


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
    try:
        lookup(_base(name))
    except ValueError:
        return False
    return True


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
    made as :func:`compare` makes them, to pass to :func:`compare` and :func:`frontier` (``routers=``) so that
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


# -- frontier ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FrontierPoint:
    """One baseline (or algorithm) at one size penalty: macro accuracy, mean reward at ``alpha``, mean team size and
    cost.

    ``uses_test_labels``: it chooses with the labels of the questions it is scored on (an oracle), a reference that
    :func:`plot_frontier` draws hollow and grey, labelled "(uses test labels)", never as a competitor. The
    intervals, (low, high) each, where the result carries them (the benchmark's 95% intervals), are drawn as error
    bars: ``accuracy_interval`` vertical, ``team_size_interval`` or ``cost_interval`` horizontal.
    """

    name: str
    alpha: float
    accuracy: float
    reward: float
    team_size: float
    cost: float | None
    uses_test_labels: bool = False
    accuracy_interval: tuple[float, float] | None = None
    team_size_interval: tuple[float, float] | None = None
    cost_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for field in ("accuracy_interval", "team_size_interval", "cost_interval"):
            interval = getattr(self, field)
            if interval is not None and not (len(interval) == 2 and float(interval[0]) <= float(interval[1])):
                raise ValueError(f"FrontierPoint {self.name!r}: {field} must be (low, high) with low <= high")


def _progress(total: int, enabled: bool) -> Any:
    """A tqdm bar (shown after 2 s) when tqdm is installed and ``enabled``, else None."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="frontier", unit="step", delay=2.0, leave=False)


def frontier(
    cache: LogitCache,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    *,
    split: str = "test",
    train_split: str = "train",
    reward: RewardSettings = DEFAULT_REWARD,
    k: int = 3,
    seed: int | None = 0,
    names: Iterable[str] | None = None,
    routers: dict[str, routing.RouterFit] | None = None,
    progress: bool = True,
) -> list[FrontierPoint]:
    """The baselines ``names`` at every size penalty of ``alphas`` (each >= 0), as :func:`compare` runs them
    with ``reward`` at that alpha.

    The routers are fitted once (their fit does not depend on alpha; ``routers`` may hold them already, as
    :func:`fit_routers` returns them); the baselines of
    the registry that depend on alpha (:attr:`~ensemble_env.baselines.registry.Baseline.alpha_dependent`) choose their
    teams anew at each alpha, the others are run once and only their reward is recomputed. Points come alpha by alpha,
    in the order of :data:`~ensemble_env.baselines.registry.BASELINES`. A progress bar (tqdm, when installed and
    ``progress``) shows after two seconds.
    """
    values = [check_alpha(alpha) for alpha in alphas]
    if not values:
        raise ValueError("alphas is empty: give at least one size penalty to sweep")
    chosen = baseline_names(cache, names)
    moving = [name for name in chosen if BASELINES[name].alpha_dependent]
    fitted = dict(routers or {})
    fitting = [name for name in moving if BASELINES[name].fit is not None and name not in fitted]
    bar = _progress(len(fitting) + 1 + len(values), progress)
    common: dict[str, Any] = {"split": split, "train_split": train_split, "k": k, "seed": seed}
    for name in fitting:
        fitted.update(fit_routers(cache, split=split, train_split=train_split, names=[name]))
        if bar is not None:
            bar.update()
    fixed = [name for name in chosen if name not in moving]
    still = compare(cache, **common, names=fixed) if fixed else []
    if bar is not None:
        bar.update()
    points = []
    for alpha in values:
        at_alpha = dataclasses.replace(reward, alpha=alpha)
        moved = compare(cache, **common, reward=at_alpha, names=moving, routers=fitted) if moving else []
        by_name = {result.name: result for result in [*still, *moved]}
        for result in sorted(by_name.values(), key=lambda result: _order(result.name)):
            score = result.scores(cache, at_alpha)
            reference = _uses_test_labels(result.name)
            points.append(
                FrontierPoint(
                    result.name, alpha, score["accuracy"], score["reward"], score["team_size"], score["cost"], reference
                )
            )
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return points


def _base(name: str) -> str:
    """The registered baseline of a result name (``random_team(k=3)`` is ``random_team``; an alias, ``stacking``,
    is ``stacking(per_task)``)."""
    if name in BASELINES:
        return name
    for entry in BASELINES.values():
        if name in entry.aliases:
            return entry.name
    return name.split("(")[0]


def _order(name: str) -> int:
    """Position of a result name in :data:`~ensemble_env.baselines.registry.BASELINES`."""
    return list(BASELINES).index(_base(name))


def _uses_test_labels(name: str) -> bool:
    """Whether the result ``name`` is a baseline of the registry that reads the test labels (an oracle)."""
    entry = BASELINES.get(_base(name))
    return entry is not None and entry.uses_test_labels


def _moves(name: str) -> bool:
    """Whether the result ``name`` is a baseline that chooses its teams by the reward at alpha (a learned
    policy's points, drawn beside them, are not)."""
    entry = BASELINES.get(_base(name))
    return entry is not None and entry.alpha_dependent


def format_frontier(points: Sequence[FrontierPoint], cost_format: str = "{:.2f}") -> str:
    """A plain-text table of :func:`frontier`'s points: a row per alpha for the baselines of
    the registry that depend on alpha (:attr:`~ensemble_env.baselines.registry.Baseline.alpha_dependent`), then one row
    for each other baseline (alpha ``any``: its answers do not depend on it; reward ``-``: that does). ``cost_format``
    formats the costs (``baselines.cost_format(cache)``)."""

    rows, seen = [], set()
    for point in sorted(points, key=lambda point: (not _moves(point.name), _order(point.name))):
        moving = _moves(point.name)
        if not moving and point.name in seen:
            continue
        seen.add(point.name)
        rows.append(
            [
                point.name,
                f"{point.alpha:g}" if moving else "any",
                f"{point.accuracy:.4f}",
                f"{point.reward:.4f}" if moving else "-",
                f"{point.team_size:.2f}",
                "-" if point.cost is None else cost_format.format(point.cost),
            ]
        )
    return "\n".join(align_table(["baseline", "alpha", "accuracy", "reward", "team", "cost"], rows))


#: how the plot marks a point that reads the test labels (an oracle: a reference, never a competitor)
REFERENCE_LABEL = "(uses test labels)"
_REFERENCE_COLOR = "0.45"  # grey: the references are hollow grey markers
_DODGE = 0.025  # overlapping markers are spread sideways to this share of the panel's width apart (a marker's width)


def _x_interval(point: FrontierPoint, x: str) -> tuple[float, float] | None:
    return point.team_size_interval if x == "team_size" else point.cost_interval


def _errors(values: Sequence[float], intervals: Sequence[tuple[float, float] | None]) -> np.ndarray | None:
    """The (2, n) distances below and above each value to its interval's ends (0 where it has none), or None
    when no value has one."""
    if all(interval is None for interval in intervals):
        return None
    errors = np.zeros((2, len(values)))
    for i, (value, interval) in enumerate(zip(values, intervals, strict=True)):
        if interval is not None:
            errors[:, i] = max(0.0, value - interval[0]), max(0.0, interval[1] - value)
    return errors


def _dodge(spots: Sequence[tuple[float, float]], width: float, height: float) -> list[float]:
    """Deterministic sideways offsets that keep overlapping markers apart, each moved as little as it can be.

    Markers closer than ``_DODGE`` of the panel's ``width`` and 3% of its ``height`` (chained) form a group; a
    group's markers keep the order of their x (then of their y and drawing order), are placed at least
    ``_DODGE * width`` apart, and the group is centred where its markers are (their mean offset is 0). A marker
    that overlaps no other stays where it is.
    """
    step = _DODGE * width
    group = list(range(len(spots)))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i, j in itertools.combinations(range(len(spots)), 2):
        if abs(spots[i][0] - spots[j][0]) < step and abs(spots[i][1] - spots[j][1]) < 0.03 * height:
            group[root(j)] = root(i)
    offsets = [0.0] * len(spots)
    for leader in sorted({root(i) for i in range(len(spots))}):
        members = sorted((i for i in range(len(spots)) if root(i) == leader), key=lambda i: (spots[i], i))
        if len(members) < 2:
            continue
        places = [spots[members[0]][0]]
        for i in members[1:]:
            places.append(max(spots[i][0], places[-1] + step))
        centre = float(np.mean([place - spots[i][0] for place, i in zip(places, members, strict=True)]))
        for place, i in zip(places, members, strict=True):
            offsets[i] = place - spots[i][0] - centre
    return offsets


def _draw_frontier(axes: Any, points: Sequence[FrontierPoint], x: str, cost_unit: str | None = None) -> None:
    """One panel of :func:`plot_frontier`: accuracy against ``x`` (``"team_size"`` or ``"cost"``)."""
    names = list(dict.fromkeys(point.name for point in points))
    reference = {name: any(p.uses_test_labels for p in points if p.name == name) for name in names}
    ranges = [p.accuracy_interval or (p.accuracy, p.accuracy) for p in points if p.name != "oracle"]
    lows, highs = [low for low, _ in ranges], [high for _, high in ranges]
    top = max(highs) + 0.03 if highs else None  # the oracle, far above, is drawn at the top edge
    # the alpha labels go where there is room: a label closer than 4% of the plot's width and height to one
    # already placed (e.g. two baselines through the same points) is left out
    span_x = [float(getattr(point, x)) for point in points if point.name != "oracle"] or [0.0, 1.0]
    span_y = [*lows, *highs] or [0.0, 1.0]
    width, height = (max(span_x) - min(span_x)) or 1.0, (max(span_y) - min(span_y)) or 1.0
    placed: list[tuple[float, float]] = []

    def room(position: tuple[float, float]) -> bool:
        spot = (position[0] / width, position[1] / height)
        if any(abs(spot[0] - p[0]) < 0.04 and abs(spot[1] - p[1]) < 0.04 for p in placed):
            return False
        placed.append(spot)
        return True

    # each series: how it is drawn, and (for markers) its points; markers that overlap are spread sideways. Grey
    # is the references' alone (no C7 in the palette)
    markers = itertools.cycle("sDv^PXhp<>d8H")
    references = itertools.cycle("oDsv^h")
    policies = itertools.cycle(["black", "deepskyblue", "gold", "lime", "magenta"])  # none of the palette's
    palette = [f"C{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)] + ["olive", "teal", "navy", "maroon", "khaki", "orchid"]
    series: list[tuple[str, str, list[FrontierPoint]]] = []
    for name in names:
        mine = [point for point in points if point.name == name]
        alphas = {point.alpha for point in mine}
        if name == "oracle" and top is not None and mine[0].accuracy > top:
            kind = "above"
        elif _moves(name) and len(alphas) > 1:
            kind = "swept"
        elif name in BASELINES or _base(name) in BASELINES or reference[name]:
            kind = "baseline"
            mine = list({(float(getattr(p, x)), p.accuracy): p for p in mine}.values())  # one point per place
        else:
            kind = "policy"  # a learned policy (every run of it), drawn over the baselines
        series.append((name, kind, mine))
    drawn = [(index, p) for index, (_, kind, mine) in enumerate(series) if kind in ("baseline", "policy") for p in mine]
    offsets = _dodge([(float(getattr(p, x)), p.accuracy) for _, p in drawn], width, height)
    shift: dict[int, list[float]] = {}
    for (index, _), offset in zip(drawn, offsets, strict=True):
        shift.setdefault(index, []).append(offset)

    moving_index = 0
    for index, (name, kind, mine) in enumerate(series):
        xs = [float(getattr(point, x)) for point in mine]
        ys = [point.accuracy for point in mine]
        if reference[name]:
            color = _REFERENCE_COLOR
        else:
            color = next(policies) if kind == "policy" else palette[index % len(palette)]
        suffix = f" {REFERENCE_LABEL}" if reference[name] else ""
        hollow = {"facecolor": "none", "edgecolor": _REFERENCE_COLOR, "linewidth": 1.3} if reference[name] else {}
        if kind == "above":
            label = f"oracle ({ys[0]:.3f}, above){suffix}"
            style = hollow or {"color": "black"}
            axes.scatter(xs[:1], [top], marker="^", s=50, label=label, zorder=3, clip_on=False, **style)
            continue
        if kind == "swept":
            style = {"markerfacecolor": "none"} if reference[name] else {}
            axes.plot(xs, ys, marker="o", markersize=4, color=color, label=f"{name} (alpha swept){suffix}", **style)
            groups: list[list[int]] = []  # runs of alphas that land on the same point share one label
            for i in range(len(mine)):
                if groups and (xs[i], ys[i]) == (xs[groups[-1][0]], ys[groups[-1][0]]):
                    groups[-1].append(i)
                else:
                    groups.append([i])
            # alternate the labels' side by series, so that series through the same points do not overprint
            nudge = ((3, 3), (3, -9), (-14, 3), (-14, -9))[moving_index % 4]
            moving_index += 1
            for group in groups:
                first, last = mine[group[0]].alpha, mine[group[-1]].alpha
                text = f"{first:g}" if len(group) == 1 else f"{first:g}-{last:g}"
                position = (xs[group[0]], ys[group[0]])
                if room(position):
                    axes.annotate(text, position, textcoords="offset points", xytext=nudge, fontsize=6, color=color)
            continue
        placed_xs = [value + step for value, step in zip(xs, shift[index], strict=True)]
        xerr = _errors(xs, [_x_interval(point, x) for point in mine])
        yerr = _errors(ys, [point.accuracy_interval for point in mine])
        if xerr is not None or yerr is not None:
            axes.errorbar(
                placed_xs, ys, xerr=xerr, yerr=yerr, fmt="none", ecolor=color, elinewidth=1.0, capsize=2.5,
                alpha=0.7, zorder=2,
            )  # fmt: skip
        if kind == "baseline":
            label = f"{name} (alpha {mine[0].alpha:g})" if _moves(name) else name
            style = hollow or {"color": color, "alpha": 0.9}
            marker = next(references if reference[name] else markers)
            axes.scatter(placed_xs, ys, marker=marker, s=40, label=label + suffix, zorder=3, **style)
        else:
            axes.scatter(
                placed_xs, ys, marker="*", s=120, color=color, edgecolor="black", linewidth=0.5, alpha=0.9,
                label=name, zorder=4,
            )  # fmt: skip
    if top is not None:
        axes.set_ylim(top=top)
    spread = any(offset != 0.0 for offset in offsets)
    axis = "mean team size (models per question)" if x == "team_size" else "mean cost per question"
    if x == "cost" and cost_unit:
        axis += f"\n({cost_unit})"
    axes.set_xlabel(axis + ("\n(overlapping points spread sideways)" if spread else ""))
    axes.set_ylabel("accuracy (macro over tasks)")
    axes.set_title(f"accuracy against {'team size' if x == 'team_size' else 'cost'}", fontsize=9)
    axes.grid(alpha=0.3)


def priced(points: Sequence[FrontierPoint]) -> bool:
    """Whether ``points`` come from a cache with costs: every point has a cost and some cost is not the team size
    (without costs every model costs 1)."""
    return all(point.cost is not None for point in points) and any(
        not np.isclose(point.cost, point.team_size) for point in points if point.cost is not None
    )


def plot_frontier(
    points: Sequence[FrontierPoint],
    out: str | os.PathLike[str],
    *,
    x: str = "auto",
    title: str = "",
    dpi: int = 100,
    cost_unit: str | None = None,
) -> Path:
    """Draw accuracy against mean team size (``x="team_size"``), mean cost (``"cost"``) or, by default
    (``"auto"``), against team size and, in a second panel, against cost when the points' costs are not their team
    sizes (a cache with ``costs``); write it as a PNG and return its path.

    ``out`` is the PNG file (a name ending in ``.png``) or a folder (created if missing) that receives
    ``frontier.png``. The baselines of the registry that depend on alpha
    (:attr:`~ensemble_env.baselines.registry.Baseline.alpha_dependent`) are lines through their alphas (the numbers
    beside them, where there is room: never one over another), or a marker when there is one alpha; the other
    baselines are markers, each series its own shape and colour; names that are no baseline (a learned policy, one
    point per run) are stars drawn over them; a point that reads the test labels (``uses_test_labels``: an oracle, a
    reference) is a hollow grey marker labelled "(uses test labels)"; an oracle far above the rest is drawn at the
    top edge with its accuracy in the legend. A point's intervals, where it carries them, are error bars. Markers
    that would hide one another are spread sideways by a fixed step (the axis label says so when it happens). Each
    panel's title names what it plots (team size or cost); ``title`` is the figure's; ``cost_unit`` (e.g.
    :func:`ensemble_env.cache.datasets.cost_unit`) is said under the cost axis. Names are in the
    legend, never on the plot. Needs matplotlib (the ``plot`` or ``mappo`` extra); ModuleNotFoundError saying so
    (:func:`ensemble_env.extras.message`) otherwise. Written atomically.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise extras.missing_error("the frontier plot", "plot", ["matplotlib"]) from error

    if x not in ("auto", "team_size", "cost"):
        raise ValueError(f"x={x!r} is not one of auto, team_size, cost")
    if not points:
        raise ValueError("points is empty: nothing to plot")
    if x == "cost" and any(point.cost is None for point in points):
        raise ValueError("x='cost' needs a cost in every point")
    if x == "auto":
        panels = ["team_size", "cost"] if priced(points) else ["team_size"]
    else:
        panels = [x]
    path = Path(out)
    if path.suffix.lower() != ".png":
        path = path / "frontier.png"
    make_folder(path.parent)
    figure = Figure(figsize=(4.2 * len(panels) + 3.3, 4.8), layout="constrained")
    all_axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for axes, panel in zip(all_axes, panels, strict=True):
        _draw_frontier(axes, points, panel, cost_unit)
    handles, labels = all_axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=7, loc="outside right center")
    figure.suptitle(title or "Cost-accuracy frontier (numbers: alpha)", fontsize=10)
    return save_figure(figure, path, dpi=dpi)  # (Figure.set_dpi would not reach savefig: it keeps the first dpi)
