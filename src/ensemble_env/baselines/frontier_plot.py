"""The plot of the cost-accuracy frontier: :func:`plot_frontier` draws the points of
:func:`~ensemble_env.baselines.frontier.frontier` (and a learned policy's beside them) as accuracy against mean team
size and, on a cache with costs (:func:`priced`), against mean cost; matplotlib, the ``plot`` or ``mappo`` extra.

The baselines that sweep alpha are lines through their alphas, the others markers; a point that reads the test
labels (an oracle) is a reference, drawn hollow and grey (:data:`REFERENCE_LABEL`); markers that would hide one
another are spread sideways.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.baselines.frontier import FrontierPoint, sweeps
from ensemble_env.baselines.registry import baseline_of
from ensemble_env.files import make_folder, save_figure

__all__ = ["REFERENCE_LABEL", "plot_frontier", "priced"]

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
        elif sweeps(name) and len(alphas) > 1:
            kind = "swept"
        elif baseline_of(name) is not None or reference[name]:
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
            label = f"{name} (alpha {mine[0].alpha:g})" if sweeps(name) else name
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
