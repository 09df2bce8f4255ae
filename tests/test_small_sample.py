"""benchmarks/small_sample.py, the small-sample stress of the learner's start (issue 39): the cut of the fitting
questions and the start played over many cuts without the learner."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
from testing.benchmarks import import_benchmark

from ensemble_env.baselines.comparison import compare
from ensemble_env.cache.logit_cache import SPLITS
from ensemble_env.game.reward import RewardSettings
from ensemble_env.synthetic import make_cache

pytest.importorskip("torch")  # the script runs the learner too


@pytest.fixture
def small_sample(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The script as a module (a sibling on ``sys.path``, forgotten afterwards)."""
    yield import_benchmark(monkeypatch, "small_sample")
    sys.modules.pop("small_sample", None)


def _cache():
    cache = make_cache(n_models=4, n_questions=600, n_tasks=3, accuracy=[0.45, 0.5, 0.6, 0.65], seed=5)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == SPLITS["train"])[::5]] = SPLITS["validation"]  # a validation split, 1 in 5
    return dataclasses.replace(cache, split=split)


def test_a_cut_keeps_n_fitting_questions_per_task_in_the_ratio_and_every_test_question(small_sample) -> None:
    cache = _cache()
    split, tasks = np.asarray(cache.split), np.asarray(cache.tasks)
    before = (split.copy(), np.asarray(cache.labels).copy())
    cut = small_sample.cut_cache(cache, 40, seed=3)
    cut_split, cut_tasks = np.asarray(cut.split), np.asarray(cut.tasks)
    assert (cut_split == SPLITS["test"]).sum() == (split == SPLITS["test"]).sum()
    for task in range(cache.n_tasks):
        mine = cut_tasks == task
        assert (mine & (cut_split != SPLITS["test"])).sum() == 40
        n_validation = ((tasks == task) & (split == SPLITS["validation"])).sum()
        n_fitting = ((tasks == task) & (split != SPLITS["test"])).sum()
        assert 5 <= n_validation * 40 / n_fitting <= 11  # about 1 in 5
        assert (mine & (cut_split == SPLITS["validation"])).sum() == round(40 * n_validation / n_fitting)
    again, other = small_sample.cut_cache(cache, 40, seed=3), small_sample.cut_cache(cache, 40, seed=4)
    assert np.array_equal(again.scores, cut.scores) and not np.array_equal(other.scores, cut.scores)
    assert np.array_equal(split, before[0]) and np.array_equal(cache.labels, before[1])  # the input is untouched
    whole = small_sample.cut_cache(cache, 10_000, seed=0)  # more than a task holds: every question kept
    assert whole.n_questions == cache.n_questions
    assert np.array_equal(np.sort(np.asarray(tasks)), np.sort(np.asarray(whole.tasks)))


def test_the_start_over_cuts_is_the_start_minus_each_reference_on_each_cut(small_sample) -> None:
    cache = _cache()
    rows = small_sample.start_over_cuts(cache, [30, 10_000], 3)
    assert [row["size"] for row in rows] == [30, 10_000]
    reward = RewardSettings(alpha=1.0)
    for row in rows:
        assert set(row["differences"]) == set(small_sample.REFERENCES)
        for reference, values in row["differences"].items():
            assert len(values) == 3
            cut = small_sample.cut_cache(cache, row["size"], 2)
            results = {r.name: r for r in compare(cut, names=[small_sample.START, reference], reward=reward)}
            expected = results[small_sample.START].rewards(cut, reward).mean()
            expected -= results[reference].rewards(cut, reward).mean()
            assert values[2] == pytest.approx(expected)
    # a size above every task's fitting questions cuts nothing: every cut is the whole cache, one value
    for values in rows[1]["differences"].values():
        assert values[0] == values[1] == values[2]
    # on 30 questions a task the cuts differ, so do the differences
    assert len(set(rows[0]["differences"]["best_single(per_task)"])) > 1


def test_the_command_refuses_nothing_to_run(small_sample, capsys) -> None:
    with pytest.raises(SystemExit):
        small_sample.main(["--out", "unused", "--seeds", "0", "--cut-seeds", "0"])
    assert "--seeds and --cut-seeds must be >= 0 and not both 0, got 0 and 0" in capsys.readouterr().err
