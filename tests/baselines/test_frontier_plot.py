"""The frontier plot does not mislead: references (points that read the test labels) are hollow grey markers
labelled "(uses test labels)", intervals are error bars, markers that would hide one another are spread sideways
(and the axis says so), and each panel's title names what it plots. The benchmark's figure passes its 95% intervals
and its references through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ensemble_env import datasets
from ensemble_env.baselines import frontier, frontier_plot
from ensemble_env.baselines.frontier import FrontierPoint

pytest.importorskip("matplotlib")


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures :func:`plot_frontier` draws, kept instead of written."""
    figures: list[Any] = []

    def keep(figure: Any, path: Any, **options: Any) -> Path:
        figures.append(figure)
        return Path(path)

    monkeypatch.setattr(frontier_plot, "save_figure", keep)
    return figures


def _scatters(axes: Any) -> dict[str, Any]:
    from matplotlib.collections import PathCollection

    return {item.get_label(): item for item in axes.collections if isinstance(item, PathCollection)}


def _bars(axes: Any) -> list[Any]:
    from matplotlib.collections import LineCollection

    return [item for item in axes.collections if isinstance(item, LineCollection)]


def test_the_frontier_marks_the_baselines_that_read_the_test_labels() -> None:
    points = frontier.frontier(datasets.load("toy8"), (1.0,), names=["best_single", "oracle"], progress=False)
    assert {point.name: point.uses_test_labels for point in points} == {"best_single": False, "oracle": True}


def test_references_are_hollow_grey_and_say_they_use_the_test_labels(drawn: list[Any], tmp_path: Path) -> None:
    points = [
        FrontierPoint("static_team", 1.0, 0.58, 0.06, 1.3, 5.8),
        FrontierPoint("oracle_team(test)", 1.0, 0.60, 0.10, 1.6, 4.0, uses_test_labels=True),
        FrontierPoint("my_policy", 1.0, 0.59, 0.07, 2.2, 9.0),
    ]
    frontier_plot.plot_frontier(points, tmp_path / "f.png", x="team_size")
    (axes,) = drawn[0].axes
    scatters = _scatters(axes)
    assert set(scatters) == {"static_team (alpha 1)", "oracle_team(test) (alpha 1) (uses test labels)", "my_policy"}
    reference = scatters["oracle_team(test) (alpha 1) (uses test labels)"]
    assert reference.get_facecolors().size == 0 or reference.get_facecolors()[0][3] == 0  # hollow
    assert np.allclose(reference.get_edgecolors()[0][:3], 0.45)  # grey
    for name in ("static_team (alpha 1)", "my_policy"):  # the others are filled, never in the references' grey
        face = scatters[name].get_facecolors()[0]
        assert face[3] > 0 and not np.allclose(face[:3], 0.45, atol=0.1)
    assert axes.get_title() == "accuracy against team size"
    assert "spread" not in axes.get_xlabel()  # nothing overlaps
    assert not _bars(axes)  # no intervals, no error bars


def test_an_oracle_far_above_is_a_reference_too(drawn: list[Any], tmp_path: Path) -> None:
    points = frontier.frontier(datasets.load("bbh5"), (1.0,), names=["best_single", "oracle"], progress=False)
    frontier_plot.plot_frontier(points, tmp_path / "f.png")
    labels = [text.get_text() for text in drawn[0].legends[0].get_texts()]
    assert labels[-1].startswith("oracle (0.830, above)") and labels[-1].endswith("(uses test labels)")


def test_intervals_are_error_bars(drawn: list[Any], tmp_path: Path) -> None:
    points = [
        FrontierPoint("a", 1.0, 0.5, 0.0, 1.0, 2.0, accuracy_interval=(0.45, 0.56), cost_interval=(1.8, 2.3)),
        FrontierPoint("b", 1.0, 0.7, 0.0, 3.0, 9.0, team_size_interval=(2.9, 3.2)),
    ]
    frontier_plot.plot_frontier(points, tmp_path / "f.png")
    team, cost = drawn[0].axes
    assert [team.get_title(), cost.get_title()] == ["accuracy against team size", "accuracy against cost"]
    segments = [segment for bars in _bars(team) for segment in bars.get_segments()]
    ends = {(round(float(s[0][0]), 3), round(float(s[0][1]), 3), round(float(s[1][0]), 3), round(float(s[1][1]), 3))
            for s in segments}  # fmt: skip
    assert (1.0, 0.45, 1.0, 0.56) in ends  # a's accuracy interval, vertical
    assert (2.9, 0.7, 3.2, 0.7) in ends  # b's team size interval, horizontal
    cost_segments = [segment for bars in _bars(cost) for segment in bars.get_segments()]
    assert any(np.allclose(s, [[1.8, 0.5], [2.3, 0.5]]) for s in cost_segments)  # a's cost interval
    with pytest.raises(ValueError, match=r"accuracy_interval must be \(low, high\) with low <= high"):
        FrontierPoint("c", 1.0, 0.5, 0.0, 1.0, 1.0, accuracy_interval=(0.6, 0.4))


def test_points_that_overlap_are_spread_apart_in_their_order(drawn: list[Any], tmp_path: Path) -> None:
    same = [FrontierPoint(name, 1.0, 0.58, 0.0, 1.25, 1.25) for name in ("mappo", "ippo", "static_team")]
    points = [
        *same,
        FrontierPoint("best_single", 1.0, 0.51, 0.0, 1.0, 1.0),
        FrontierPoint("stacking", 1.0, 0.6, 0, 5, 5),
    ]
    frontier_plot.plot_frontier(points, tmp_path / "f.png")
    (axes,) = drawn[0].axes
    scatters = _scatters(axes)
    xs = {label: float(item.get_offsets()[0][0]) for label, item in scatters.items()}
    together = [xs["mappo"], xs["ippo"], xs["static_team (alpha 1)"]]
    assert together == sorted(together) and len(set(together)) == 3  # each seen, in drawing order
    assert np.mean(together) == pytest.approx(1.25)  # centred on their place
    assert min(np.diff(together)) == pytest.approx(frontier_plot._DODGE * 4.0)  # a marker's width apart, no more
    assert xs["best_single"] == 1.0 and xs["stacking"] == 5.0  # the others stay where they are
    assert axes.get_xlabel().endswith("(overlapping points spread sideways)")


def test_the_spread_keeps_the_order_of_x_and_moves_each_marker_little() -> None:
    offsets = frontier_plot._dodge([(1.31, 0.579), (1.25, 0.583), (3.0, 0.5), (1.25, 0.583)], width=4.0, height=1.0)
    places = [x + offset for x, offset in zip([1.31, 1.25, 3.0, 1.25], offsets, strict=True)]
    assert places[1] < places[3] < places[0] and offsets[2] == 0.0
    assert np.diff(sorted([places[0], places[1], places[3]])).min() == pytest.approx(0.1)
    assert sum(offsets) == pytest.approx(0.0)


def test_the_benchmark_figure_passes_the_intervals_and_the_references(drawn: list[Any], tmp_path: Path) -> None:
    from ensemble_mappo.benchmark import report

    def interval(mean: float, half: float) -> dict[str, float]:
        return {"mean": mean, "low": mean - half, "high": mean + half}

    def entry(accuracy: float, size: float, cost: float | None, test_labels: bool = False) -> dict[str, Any]:
        scores = {"accuracy": interval(accuracy, 0.03), "reward": interval(0.0, 0.05)}
        scores |= {"team_size": interval(size, 0.01), "cost": None if cost is None else interval(cost, 0.2)}
        return {"aggregate": scores, "uses_test_labels": test_labels}

    results = {
        "alpha": 1.0,
        "seeds": [0, 1],
        "caches": {"pool": {"mappo": entry(0.58, 1.3, 6.0), "oracle_team(test)": entry(0.6, 1.6, 4.0, True)}},
        "cache_digests": {"pool": "0" * 64},
    }
    points = [report._frontier_point(name, e, 1.0) for name, e in results["caches"]["pool"].items()]
    assert points[0].accuracy_interval == pytest.approx((0.55, 0.61)) and not points[0].uses_test_labels
    assert points[0].team_size_interval == pytest.approx((1.29, 1.31))
    assert points[1].cost_interval == pytest.approx((3.8, 4.2)) and points[1].uses_test_labels
    assert points[1].name == "oracle_team(test)"  # the plot adds "(uses test labels)" itself
    assert report.write_plots(results, tmp_path, []) == [tmp_path / "frontier.png"]
    figure = drawn[-1]
    assert figure.get_suptitle() == (
        "pool: test accuracy against team size and cost (alpha 1); mean over 2 seeds, bars: 95% intervals"
    )
    assert [axes.get_title() for axes in figure.axes] == ["accuracy against team size", "accuracy against cost"]
    labels = [text.get_text() for text in figure.legends[0].get_texts()]
    assert labels == ["mappo", "oracle_team(test) (alpha 1) (uses test labels)"]
    assert all(_bars(axes) for axes in figure.axes)
    results["caches"]["pool"] = {"mappo": entry(0.58, 1.3, None)}  # a cache without costs: one panel
    report.write_plots(results, tmp_path, [])
    assert drawn[-1].get_suptitle().startswith("pool: test accuracy against team size (alpha 1)")
    assert [axes.get_title() for axes in drawn[-1].axes] == ["accuracy against team size"]
