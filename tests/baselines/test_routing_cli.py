"""Tests of ``ensemble-env baselines`` and ensemble_env.baselines.comparison: the JSON schema, the table, the frontier
and bad input."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble_env.baselines import comparison, frontier, frontier_plot, mean_probability_vote
from ensemble_env.cache import LogitCache, save_cache
from ensemble_env.cli import main
from ensemble_env.game.reward import RewardSettings, question_rewards

TRAIN, TEST, VALIDATION = 0, 1, 2


def small_cache(n_models: int = 3, seed: int = 0, features: bool = True) -> LogitCache:
    """Two tasks (one with a long name), features, train/validation/test splits; skills differ by task."""
    rng = np.random.default_rng(seed)
    n_questions = 240
    tasks = rng.integers(0, 2, n_questions)
    labels = rng.integers(0, 3, n_questions)
    skill = rng.uniform(0.0, 2.0, (2, n_models))
    scores = rng.normal(size=(n_questions, n_models, 3))
    scores[np.arange(n_questions), :, labels] += skill[tasks]
    return LogitCache(
        scores=scores,
        labels=labels,
        models=tuple(f"model_{n}" for n in range(n_models)),
        score_kind="logit",
        tasks=tasks,
        task_names=("short", "a_task_with_a_rather_long_name_that_must_not_be_cut"),
        split=rng.choice([TRAIN, VALIDATION, TEST], n_questions, p=[0.6, 0.2, 0.2]),
        features=rng.normal(size=(n_questions, 4)) if features else None,
    )


@pytest.fixture
def cache_file(tmp_path: Path) -> Path:
    return save_cache(tmp_path / "small.h5", small_cache())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["baselines", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_lists_every_baseline_with_the_schema(cache_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(cache_file), "--alpha", "0.5", "--json")
    assert code == 0
    data = json.loads(out)
    assert list(data) == [
        "best_single",
        "best_single(per_task)",
        "static_team",
        "static_team_acc",
        "router",
        "router(tasks)",
        "stacking(per_task)",
        "plurality_vote",
        "mean_probability_vote",
        "random_team(k=3)",
        "greedy_focal_team(k=3)",
        "oracle",
    ]
    cache = small_cache()
    for name, entry in data.items():
        assert set(entry) == {"accuracy", "reward", "team_size", "cost", "tasks"}, name
        assert list(entry["tasks"]) == list(cache.task_names)
        for values in [entry, *entry["tasks"].values()]:
            assert all(isinstance(values[key], float) for key in ("accuracy", "reward", "team_size", "cost"))
            assert 0.0 <= values["accuracy"] <= 1.0 and 1.0 <= values["team_size"] <= 3.0
            assert values["cost"] == values["team_size"]  # no costs: a question costs its team size
        assert entry["accuracy"] == pytest.approx(np.mean([t["accuracy"] for t in entry["tasks"].values()]))
    # the reward is the environment's: for the full-pool vote, share 1 on every question
    test = cache.select("test")
    full = data["mean_probability_vote"]
    right = mean_probability_vote(cache, cache.select("train"), test).correct
    assert full["reward"] == pytest.approx(question_rewards(right, np.ones(test.size), alpha=0.5).mean())
    assert data["oracle"]["accuracy"] >= max(entry["accuracy"] for entry in data.values())


def test_table_prints_full_task_names_and_the_same_numbers(
    cache_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, str(cache_file), "--alpha", "2")
    assert code == 0
    assert "a_task_with_a_rather_long_name_that_must_not_be_cut" in out
    assert "reward(alpha=2)" in out
    _, json_out, _ = run(capsys, str(cache_file), "--alpha", "2", "--json")
    data = json.loads(json_out)
    row = next(line for line in out.splitlines() if " static_team " in line).split()
    assert row[2:] == [
        f"{data['static_team']['accuracy']:.4f}",
        row[3],
        f"{data['static_team']['reward']:.4f}",
        f"{data['static_team']['team_size']:.2f}",
    ]  # no cost column: the cache has no costs, so a team costs its size (the JSON keeps the cost)
    assert data["static_team"]["cost"] == data["static_team"]["team_size"] and "no cost column" in out


def test_only_and_built_in_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "toy8", "--only", "best_single,oracle", "--json")
    assert code == 0 and list(json.loads(out)) == ["best_single", "oracle"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "best_single,magic"], "unknown baseline 'magic'"),
        (["--alpha", "-1"], "alpha must be a finite number in [0, 1e+06], got -1.0"),
        (["--frontier", "x.png", "--alphas", "0,one"], "--alphas"),
        (["--frontier", "x.png", "--alphas", "0,-1"], "--alphas"),
        (["--split", "validation", "--only", "router", "--train-split", "validation"], None),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(
    cache_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str | None
) -> None:
    argv = [arg if arg != "x.png" else str(tmp_path / "x.png") for arg in argv]
    code, _, err = run(capsys, str(cache_file), *argv)
    if message is None:  # tuning on the eval split is not possible: the router falls back to its default penalty
        assert code == 0
        return
    assert code == 2 and message in err and err.startswith("ensemble-env baselines: error:")
    assert not (tmp_path / "x.png").exists()


def test_more_than_twelve_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wide = save_cache(tmp_path / "wide.h5", small_cache(n_models=13, features=False))
    code, _, err = run(capsys, str(wide), "--only", "static_team")
    assert code == 2 and "12 models" in err
    code, out, _ = run(capsys, str(wide))
    assert code == 0 and "not run: static_team, static_team_acc and router" in out
    assert " stacking(per_task) " in out
    assert comparison.default_baselines(small_cache(n_models=13))[:3] == (
        "best_single",
        "best_single(per_task)",
        "stacking(per_task)",
    )


def test_missing_cache_names_the_built_ins(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.h5"))
    assert code == 2 and "toy8" in err and "bbh5" in err


# -- frontier ------------------------------------------------------------------------------------


def test_frontier_sweeps_alpha_and_plots(cache_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    code, out, _ = run(capsys, str(cache_file), "--frontier", str(tmp_path / "plots"), "--alphas", "0,1,50")
    assert code == 0
    png = tmp_path / "plots" / "frontier.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"frontier plot written to {png}" in out
    assert [path.name for path in png.parent.iterdir()] == ["frontier.png"]  # no temporary file left
    points = frontier.frontier(small_cache(), (0.0, 1.0, 50.0), progress=False)
    static = [point for point in points if point.name == "static_team"]
    assert [point.alpha for point in static] == [0.0, 1.0, 50.0]
    assert static[0].team_size >= static[-1].team_size and static[-1].team_size == 1.0
    fixed = [point for point in points if point.name == "oracle"]
    assert len({(point.accuracy, point.team_size) for point in fixed}) == 1  # does not move with alpha
    table = frontier.format_frontier(points)
    assert sum(line.startswith("static_team ") for line in table.splitlines()) == 3
    assert sum(line.startswith("oracle ") for line in table.splitlines()) == 1
    # the points at an alpha are those compare() gives at that alpha
    at_one = comparison.scores(small_cache(), comparison.compare(small_cache(), reward=RewardSettings(1.0)))
    for point in points:
        if point.alpha == 1.0:
            assert point.accuracy == pytest.approx(at_one[point.name]["accuracy"])
            assert point.reward == pytest.approx(at_one[point.name]["reward"])
    code, _, _ = run(capsys, str(cache_file), "--json", "--only", "oracle", "--frontier", str(tmp_path / "f.png"))
    assert code == 0 and (tmp_path / "f.png").is_file()


def test_the_frontier_adds_a_cost_panel_on_a_cache_with_costs_and_draws_every_point(tmp_path: Path) -> None:
    """Against team size always, against cost too when costs are not model counts; a name that is no baseline (a
    learned policy) is drawn at each of its points; every name is in the legend."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    points = frontier.frontier(small_cache(), (0.5, 1.0), names=["static_team", "oracle"], progress=False)
    counted = [dataclasses.replace(point, cost=point.team_size) for point in points]  # a cache without costs
    priced = [dataclasses.replace(point, cost=2.5 * point.team_size) for point in points]
    runs = [frontier.FrontierPoint("policy", 1.0, 0.6, 0.0, size, 2.5 * size) for size in (1.5, 2.0)]
    one = frontier_plot.plot_frontier([*counted, dataclasses.replace(runs[0], cost=1.5)], tmp_path / "one.png")
    two = frontier_plot.plot_frontier([*priced, *runs], tmp_path / "two.png")
    assert imread(two).shape[1] > 1.5 * imread(one).shape[1]  # a second panel
    assert frontier_plot.plot_frontier(priced, tmp_path / "cost.png", x="cost").is_file()
    with pytest.raises(ValueError, match="x='cost' needs a cost in every point"):
        frontier_plot.plot_frontier([dataclasses.replace(counted[0], cost=None)], tmp_path / "x.png", x="cost")


def test_frontier_without_matplotlib_says_which_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    points = frontier.frontier(small_cache(), (1.0,), names=["oracle"], progress=False)
    with pytest.raises(ModuleNotFoundError, match=r'the frontier plot needs matplotlib, .*"\.\[plot\]"'):
        frontier_plot.plot_frontier(points, tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()
    with pytest.raises(ValueError, match="alpha"):
        frontier.frontier(small_cache(), (1.0, -2.0))
    with pytest.raises(ValueError, match="alphas is empty"):
        frontier.frontier(small_cache(), ())


def test_bootstrap_difference_is_paired_and_reproducible() -> None:
    cache = small_cache()
    results = {result.name: result for result in comparison.compare(cache)}
    oracle, single = results["oracle"], results["best_single"]
    same = comparison.bootstrap_difference(cache, single, single)
    assert same == {"accuracy": (0.0, 0.0, 0.0), "reward": (0.0, 0.0, 0.0)}
    gap = comparison.bootstrap_difference(cache, oracle, single, RewardSettings(0.0), n_resamples=500, seed=3)
    difference, low, high = gap["accuracy"]
    assert difference == pytest.approx(oracle.macro_accuracy(cache) - single.macro_accuracy(cache))
    assert 0.0 < low <= difference <= high
    # alpha 0: reward = 2 * right - 1 on every question, so the reward gap is twice the overall accuracy gap
    assert gap["reward"][0] == pytest.approx(2 * (oracle.accuracy - single.accuracy))
    assert comparison.bootstrap_difference(cache, oracle, single, RewardSettings(0.0), n_resamples=500, seed=3) == gap
    assert comparison.bootstrap_difference(cache, oracle, single, n_resamples=500, seed=4) != gap
    on_train = comparison.compare(cache, split="train", names=["oracle"])[0]
    with pytest.raises(ValueError, match="same eval questions"):
        comparison.bootstrap_difference(cache, single, on_train)
    with pytest.raises(ValueError, match="n_resamples"):
        comparison.bootstrap_difference(cache, single, oracle, n_resamples=0)
