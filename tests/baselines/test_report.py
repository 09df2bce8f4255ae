"""Tests of ensemble_env.baselines.report: the ``cache info`` summary, error correlations, team statistics and plots.

Expected values come from the table of the tiny cache in tests/testing/caches.py (who is right on which question):
m0 is right on questions 0-4, m1 on 0, 2, 5, m2 on 1, 3; alpha holds questions 0, 1, 4, beta 2, 3, 5;
questions 0-3 are train, 4-5 test.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble_env import baselines
from ensemble_env.baselines.report import (
    PLOT_FILES,
    error_correlation,
    format_summary,
    plot_cache,
    summarize,
    team_stats,
)
from ensemble_env.cache import LogitCache
from ensemble_env.metrics import focal_diversity
from ensemble_env.synthetic import make_cache


def test_summary_sizes_and_counts(tiny_cache: LogitCache) -> None:
    summary = summarize(tiny_cache)
    assert summary["n_questions"] == 6 and summary["n_models"] == 3 and summary["n_tasks"] == 2
    assert summary["models"] == ["m0", "m1", "m2"] and summary["max_choices"] == 3
    assert summary["splits"] == {"train": 4, "test": 2, "validation": 0}
    assert summary["choice_counts"] == {"2": 1, "3": 5}
    assert [(t["name"], t["n_questions"], t["n_eval"], t["n_choices"]) for t in summary["tasks"]] == [
        ("alpha", 3, 3, [3, 3]),
        ("beta", 3, 3, [2, 3]),
    ]
    assert summary["tasks"][1]["splits"] == {"train": 2, "test": 1, "validation": 0}
    json.dumps(summary)  # JSON-ready


def test_summary_accuracies_by_hand(tiny_cache: LogitCache) -> None:
    summary = summarize(tiny_cache)
    alpha, beta = summary["tasks"]
    assert alpha["models"] == {"m0": 1.0, "m1": 1 / 3, "m2": 1 / 3}
    assert beta["models"] == {"m0": 2 / 3, "m1": 2 / 3, "m2": 1 / 3}
    # plurality: question 4 votes (0, 1, 2): tie to choice 0, right; question 5 votes (1, 2, 0): 0, wrong
    assert (alpha["baselines"]["plurality_vote"], beta["baselines"]["plurality_vote"]) == (1.0, 2 / 3)
    # oracle: some model is right on every question; best single: m0 (4 of 4 on train)
    assert alpha["baselines"]["oracle"] == beta["baselines"]["oracle"] == 1.0
    assert summary["best_single_model"] == "m0"
    assert (alpha["baselines"]["best_single"], beta["baselines"]["best_single"]) == (1.0, 2 / 3)
    everything = np.arange(6)
    mean_vote = baselines.mean_probability_vote(tiny_cache, everything, everything).task_accuracy(tiny_cache)
    assert (alpha["baselines"]["mean_probability_vote"], beta["baselines"]["mean_probability_vote"]) == (
        mean_vote["alpha"],
        mean_vote["beta"],
    )
    assert summary["overall"]["models"]["m0"] == 5 / 6 and summary["macro"]["models"]["m2"] == 1 / 3
    assert list(summary["overall"]["baselines"]) == [
        "plurality_vote",
        "mean_probability_vote",
        "best_single",
        "oracle",
    ]


def test_summary_on_the_test_split(tiny_cache: LogitCache) -> None:
    summary = summarize(tiny_cache, "test")
    assert summary["n_eval"] == 2 and [t["n_eval"] for t in summary["tasks"]] == [1, 1]
    alpha, beta = summary["tasks"]
    assert alpha["models"] == {"m0": 1.0, "m1": 0.0, "m2": 0.0}
    assert beta["models"] == {"m0": 0.0, "m1": 1.0, "m2": 0.0}
    assert summary["overall"]["baselines"]["plurality_vote"] == 0.5


def test_no_best_single_without_train_questions(tiny_cache: LogitCache) -> None:
    summary = summarize(tiny_cache, "all", train_split="validation")
    assert summary["best_single_model"] is None
    assert "best_single" not in summary["overall"]["baselines"]
    text = format_summary(summary)
    assert "no best_single: no train question" in text and "best_single " not in text.split("\n")[-1]
    with pytest.raises(ValueError, match="no question of <memory> is in split 'validation'"):
        summarize(tiny_cache, "validation")


def test_format_summary_table(tiny_cache: LogitCache) -> None:
    text = format_summary(summarize(tiny_cache))
    assert "6 questions, 3 models, 2 tasks, score_kind 'loglik', splits: 4 train, 2 test" in text
    assert "questions per choice count: 2: 1, 3: 5" in text
    assert "m0 m0 (accuracy 0.833)" in text
    lines = text.split("\n")
    header = next(line for line in lines if line.startswith("task "))
    assert header.split() == ["task", "n", "C", "m0", "m1", "m2", "plurality", "mean_prob", "best_single", "oracle"]
    alpha = next(line for line in lines if line.startswith("alpha"))
    cells = alpha.split()
    assert cells[:6] == ["alpha", "3", "3", "1.000", "0.333", "0.333"]
    assert cells[6] == "1.000" and cells[8:] == ["1.000", "1.000"]
    beta = next(line for line in lines if line.startswith("beta"))
    assert beta.split()[:3] == ["beta", "3", "2-3"]
    # two tasks of 3 questions: the mean of the tasks is the accuracy over all questions, one row says both
    assert lines[-1].split()[:8] == ["all", "questions", "=", "mean", "of", "tasks", "6", "0.833"]
    assert not any(line.startswith("macro") for line in lines)
    widths = {len(line) for line in lines[lines.index(header) + 2 :]}
    assert max(widths) <= len(header)  # aligned columns
    # tasks of 3 and 2 questions: the two differ, and each has its row
    lines = format_summary(summarize(tiny_cache.subset(np.arange(5)))).split("\n")
    assert lines[-2].split()[:4] == ["macro", "(mean", "of", "tasks)"] and lines[-1].split()[:3] == [
        "all",
        "questions",
        "5",
    ]


def test_error_correlation_by_hand(tiny_cache: LogitCache) -> None:
    matrix = error_correlation(tiny_cache)
    # m0 vs m1: n11=2, n00=0, n10=3, n01=1 -> -3 / sqrt(5 * 1 * 3 * 3); m1 vs m2: -6 / sqrt(3 * 3 * 2 * 4)
    assert matrix[0, 1] == pytest.approx(-3 / math.sqrt(45)) and matrix[1, 0] == matrix[0, 1]
    assert matrix[1, 2] == pytest.approx(-6 / math.sqrt(72))
    assert np.diag(matrix).tolist() == [1.0, 1.0, 1.0]
    # on the test questions m2 is always wrong: its pairs have a zero denominator and score 0
    assert error_correlation(tiny_cache, np.array([4, 5]))[:, 2].tolist() == [0.0, 0.0, 1.0]


def test_team_stats_every_team(tiny_cache: LogitCache) -> None:
    stats = team_stats(tiny_cache)
    assert [stat.members for stat in stats] == [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    assert [stat.accuracy for stat in stats[:3]] == [5 / 6, 3 / 6, 2 / 6]
    # m0 + m1: ties go to the lower choice, so questions 3 (votes 1, 0) and 5 (1, 2) are wrong
    assert stats[3].accuracy == 4 / 6
    assert stats[3].focal_diversity == focal_diversity(tiny_cache.correct[:, [0, 1]])
    assert stats[6].size == 3 and stats[6].accuracy == 5 / 6
    assert [stat.accuracy for stat in team_stats(tiny_cache, np.array([4, 5]))[:3]] == [0.5, 0.5, 0.0]


def test_team_stats_samples_large_pools_with_a_seed() -> None:
    cache = make_cache(n_models=8, n_questions=60, seed=0)
    stats = team_stats(cache, max_teams_per_size=5, seed=1)
    sizes = [stat.size for stat in stats]
    assert [sizes.count(k) for k in range(1, 9)] == [min(math.comb(8, k), 5) for k in range(1, 9)]
    teams = [stat.members for stat in stats]
    assert len(set(teams)) == len(teams) and all(list(team) == sorted(team) for team in teams)
    assert teams == [stat.members for stat in team_stats(cache, max_teams_per_size=5, seed=1)]
    assert teams != [stat.members for stat in team_stats(cache, max_teams_per_size=5, seed=2)]
    with pytest.raises(ValueError, match="max_teams_per_size must be an integer >= 1, got 0"):
        team_stats(cache, max_teams_per_size=0)


def test_plots_are_small_pngs_written_atomically(tiny_cache: LogitCache, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "new" / "plots"
    written = plot_cache(tiny_cache, out)
    assert [path.name for path in written] == list(PLOT_FILES)
    assert sorted(path.name for path in out.iterdir()) == sorted(PLOT_FILES)  # no temporary file left
    for path in written:
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < 200_000
    again = plot_cache(tiny_cache, tmp_path / "again")
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in written]  # deterministic


def test_plot_without_matplotlib_says_how_to_install(
    tiny_cache: LogitCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ModuleNotFoundError, match=r'needs matplotlib, .*: pip install -e "\.\[plot\]"'):
        plot_cache(tiny_cache, tmp_path / "plots")
    assert not (tmp_path / "plots").exists()
