"""benchmarks/partial_selection.py, the choice of the partial-feedback learner's settings on every fold's training
tasks (issue 40): the inner folds never hold a fold's test tasks, cover its training tasks, and the script reports
each setting against the rules on them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from testing.benchmarks import import_benchmark
from testing.caches import flip_labels

from ensemble_env.cache import save_cache
from ensemble_env.files import output_folder
from ensemble_env.synthetic import make_cache
from ensemble_mappo.benchmark import protocols

pytest.importorskip("torch")  # the script runs the learner


@pytest.fixture
def partial_selection(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The script as a module (a sibling on ``sys.path``, forgotten afterwards)."""
    yield import_benchmark(monkeypatch, "partial_selection")
    sys.modules.pop("partial_selection", None)


def _cache(n_tasks: int = 8):
    return make_cache(n_models=3, n_questions=40 * n_tasks, n_tasks=n_tasks, accuracy=[0.5, 0.6, 0.7], seed=3)


def _held_out(unit) -> set[str]:
    return set(unit.held_out)


def _with_questions(cache) -> set[str]:
    return {cache.task_names[t] for t in np.unique(np.asarray(cache.tasks))}


def test_each_fold_s_inner_folds_hold_out_every_training_task_once_and_never_its_test_tasks(partial_selection) -> None:
    cache = _cache()
    outer, _ = protocols.units(cache, k=4, seed=0)
    found = partial_selection.inner_units(cache)
    assert [k for k, _ in found] == [k for k in range(4) for _ in range(4)]
    for k, unit in enumerate(outer):
        inner = [u for j, u in found if j == k]
        training = _with_questions(unit.cache) - set(unit.held_out)
        held = [task for u in inner for task in u.held_out]
        assert sorted(held) == sorted(training)  # every training task is held out once
        for u in inner:
            assert _with_questions(u.cache) == training  # the fold's test tasks are not in the inner caches
            assert set(u.validation_tasks) <= training - set(u.held_out)


def test_the_inner_folds_of_a_fold_do_not_change_with_the_labels_of_its_test_tasks(partial_selection) -> None:
    cache = _cache()
    outer, _ = protocols.units(cache, k=4, seed=0)
    before = partial_selection.inner_units(cache)
    flipped = partial_selection.inner_units(flip_labels(cache, outer[0].cache.select("test")))
    changed = []
    for (k, a), (_, b) in zip(before, flipped, strict=True):
        same = np.array_equal(np.asarray(a.cache.labels), np.asarray(b.cache.labels))
        if k == 0:
            assert same
            np.testing.assert_array_equal(np.asarray(a.cache.scores), np.asarray(b.cache.scores))
        else:
            changed.append(not same)
    assert all(changed)  # the other folds train on fold 1's test tasks: the flip reaches them


def test_a_bad_setting_or_count_is_refused_before_any_run(partial_selection, tmp_path: Path, capsys) -> None:
    path = save_cache(tmp_path / "c.h5", _cache())
    for argv, message in (
        (["--set", 'a: decider_policy="index"', "--seeds", "0"], "--seeds"),
        (["--set", "a: gamma=0.5", "--set", "a: gamma=0.9"], "share a name"),
        (["--set", "a: nonsense"], "FIELD=VALUE"),
        (["--set", "a: no_such_field=1"], "no_such_field"),
    ):
        try:
            code = partial_selection.main([*argv, "--cache", str(path), "--out", str(tmp_path / "out")])
        except SystemExit as stop:
            code = stop.code
        assert code != 0
        shown = capsys.readouterr().err
        assert message in shown, shown
        assert not (tmp_path / "out" / "runs").exists()
    output_folder(tmp_path / "out", "partial_selection.py")  # the script's folder, with an earlier selection's runs:
    (tmp_path / "out" / "runs").mkdir()  # never overwritten
    code = partial_selection.main(["--set", "a: gamma=0.5", "--cache", str(path), "--out", str(tmp_path / "out")])
    assert code != 0 and "earlier selection" in capsys.readouterr().err


@pytest.mark.slow
def test_the_script_scores_each_setting_and_each_rule_on_the_inner_held_out_tasks(
    partial_selection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setitem(protocols.PARTIAL_BUDGET_STEPS, "default", 2048)  # a tiny budget for the test
    path = save_cache(tmp_path / "c.h5", _cache())
    argv = ["--cache", str(path), "--out", str(tmp_path / "out"), "--seeds", "1", "--jobs", "2"]
    assert partial_selection.main([*argv, "--set", 'index: decider_policy="index"']) == 0
    printed = capsys.readouterr().out
    found = json.loads((tmp_path / "out" / "selection.json").read_text(encoding="utf-8"))
    assert len(found["units"]) == 16
    (rows,) = found["settings"]["index"]
    assert len(rows) == 16 and all(-2.0 <= value <= 1.0 for value in rows)
    assert set(found["rules"]) == set(partial_selection.RULES)
    assert all(len(values) == 16 for values in found["rules"].values())
    assert f"| index | {np.mean(rows):+.4f} |" in printed
    assert f"| global_team | {np.mean(found['rules']['global_team']):+.4f} | | +0.0000 |" in printed


def test_generated_selection_tasks_come_after_the_validation_tasks_and_never_from_the_test_stream(
    partial_selection,
) -> None:
    """``--protocol generated``: per fold, the protocol's generated train and validation tasks, and as the scored
    tasks further draws of the validation stream: none is a task of the protocol's test stream or a real task."""
    cache = _cache()
    plan = protocols.GeneratedPlan(train_tasks=4, validation_tasks=2, test_tasks=3, questions=(20, 30))
    found = partial_selection.generated_units(cache, 3, plan)
    assert [fold for fold, _ in found] == [0, 1, 2, 3]
    protocol, _ = protocols.generated_units(cache, plan, k=4, seed=0)
    for (_, unit), theirs in zip(found, protocol, strict=True):
        names = np.asarray(unit.cache.task_names)[np.asarray(unit.cache.tasks)]
        tested = set(names[unit.cache.select("test")])
        assert len(tested) == 3 and not tested & set(cache.task_names)
        for split in ("train", "validation"):  # the protocol's own generated tasks
            mine, same = unit.cache.subset(unit.cache.select(split)), theirs.cache.subset(theirs.cache.select(split))
            np.testing.assert_array_equal(mine.scores, same.scores)
        their_names = np.asarray(theirs.cache.task_names)[np.asarray(theirs.cache.tasks)]
        their_test = theirs.cache.subset(theirs.cache.select("test"))
        assert not tested & set(their_names[theirs.cache.select("test")])
        drawn = unit.cache.subset(unit.cache.select("test"))
        assert not np.isin(drawn.scores[:, :, 0], their_test.scores[:, :, 0]).all(axis=1).any()  # other draws
        first = protocols.GENERATED_FIRST["validation"] + plan.validation_tasks
        assert min(int(name.rsplit("-", 1)[1]) for name in tested) == first
