"""Tests of the task generator (ensemble_env.cache.generator, task_model, generator_file) and its commands.

Fidelity is checked on bbh5 against thresholds measured when the generator was written (docs/generated-tasks.md):
replicas of each task (jitter 0, 4 x 250 questions, seed 0) reproduce the task's 31 team mean-vote accuracies with a
mean absolute error of 0.016 over the 16 tasks (0.033 at most; median correlation 0.97); the thresholds below leave a
margin.
"""

from __future__ import annotations

import dataclasses
import doctest
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ensemble_env
from ensemble_env.baselines import fidelity
from ensemble_env.baselines.routing import all_teams, team_correct
from ensemble_env.cache import (
    CacheError,
    LogitCache,
    TaskGenerator,
    fit_generator,
    generator_file,
    load_cache,
    load_generator,
    save_cache,
    save_generator,
    synthetic,
    task_draw,
    task_fit,
    task_model,
)
from ensemble_env.cache import generator as generator_module
from ensemble_env.cache.logit_cache import SPLITS
from ensemble_env.cli import main

#: bbh5's replicas against bbh5 (seed 0, 4 replicas of 250 questions per task): measured 0.016 mean, 0.033 worst
FIDELITY_MEAN_MAE, FIDELITY_WORST_MAE = 0.025, 0.05


@pytest.fixture(scope="module")
def bbh5() -> LogitCache:
    return ensemble_env.load_cache("bbh5")


@pytest.fixture(scope="module")
def fitted(bbh5: LogitCache) -> TaskGenerator:
    return fit_generator(bbh5)


@pytest.fixture(scope="module")
def small() -> LogitCache:
    """Three tasks of 3, 4 and 2 choices, 4 models, a validation split."""
    cache = synthetic.make_cache(
        n_models=4, n_questions=900, n_tasks=3, n_choices=[3, 4, 2], accuracy=[0.4, 0.55, 0.7, 0.8], seed=3
    )
    split = cache.split.copy()
    split[::7] = SPLITS["validation"]
    return dataclasses.replace(cache, split=split)


@pytest.fixture(scope="module")
def small_fit(small: LogitCache) -> TaskGenerator:
    return fit_generator(small)


def saved_text(generator: TaskGenerator, folder: Path) -> str:
    return save_generator(folder / "g.json", generator).read_text(encoding="utf-8")


# -- the modules' own examples ----------------------------------------------------------------------------------
@pytest.mark.parametrize("module", [generator_module, task_model, task_fit, task_draw, generator_file])
def test_docstring_examples(module: Any) -> None:
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_public_names() -> None:
    for name in ("TaskGenerator", "fit_generator", "load_generator", "save_generator"):
        assert name in ensemble_env.__all__ and name in ensemble_env.cache.__all__
        assert getattr(ensemble_env, name) is getattr(ensemble_env.cache, name)


# -- fitting ----------------------------------------------------------------------------------------------------
def test_fit_is_deterministic_and_reads_only_the_named_tasks(small: LogitCache, tmp_path: Path) -> None:
    assert saved_text(fit_generator(small), tmp_path) == saved_text(fit_generator(small), tmp_path)
    named = fit_generator(small, tasks=["task_0", 2])
    assert named.task_names == ("task_0", "task_2")
    changed = small.labels.copy()
    other = small.tasks == 1  # another task's labels (and so its correctness) change: the fit must not
    changed[other] = (changed[other] + 1) % small.n_choices[other]
    again = fit_generator(dataclasses.replace(small, labels=changed), tasks=["task_0", 2])
    assert saved_text(named, tmp_path) == saved_text(again, tmp_path)
    for bad in (["nope"], [7], "task_0", ["task_0", 0]):
        with pytest.raises(ValueError, match="task"):
            fit_generator(small, tasks=bad)


def test_fit_recovers_what_it_measures(small: LogitCache, small_fit: TaskGenerator) -> None:
    for name, fit in zip(small_fit.task_names, small_fit.tasks, strict=True):
        rows = small.select(tasks=[name])
        assert fit.n_questions == rows.size and fit.max_choices == int(small.n_choices[rows].max())
        label_share = np.exp(fit.label_logits) / np.exp(fit.label_logits).sum()
        expected = (label_share * task_model.norm_cdf(fit.skill[:, None] + fit.label_bias)).sum(axis=1)
        np.testing.assert_allclose(expected, small.correct[rows].mean(axis=0), atol=1e-6)  # calibrated skills
    assert small_fit.split_fractions == pytest.approx(
        (np.mean(small.split == SPLITS["validation"]), np.mean(small.split == SPLITS["test"]))
    )


# -- sampling ---------------------------------------------------------------------------------------------------
def test_sample_is_deterministic_and_streams_are_disjoint(small_fit: TaskGenerator) -> None:
    one, two = small_fit.sample(6, seed=4, questions=(20, 40)), small_fit.sample(6, seed=4, questions=(20, 40))
    for name in ("scores", "labels", "n_choices", "tasks", "split"):
        assert np.array_equal(getattr(one, name), getattr(two, name))
    longer = small_fit.sample(9, seed=4, questions=(20, 40))  # task i does not depend on n_tasks
    width = one.max_choices
    assert np.array_equal(longer.scores[: one.n_questions, :, :width], one.scores)
    assert np.array_equal(longer.labels[: one.n_questions], one.labels)
    rest = small_fit.sample(3, seed=4, first=6, questions=(20, 40))  # tasks 6..8 of the same stream
    assert rest.task_names == ("gen-000006", "gen-000007", "gen-000008")
    assert np.array_equal(longer.labels[one.n_questions :], rest.labels)
    assert not np.array_equal(small_fit.sample(6, seed=5, questions=(20, 40)).labels[:20], one.labels[:20])


def test_sample_shape_validity_and_round_trip(small_fit: TaskGenerator, tmp_path: Path) -> None:
    cache = small_fit.sample(8, seed=0, questions=(30, 50))
    assert cache.task_names == tuple(f"gen-{i:06d}" for i in range(8)) and cache.models == small_fit.models
    assert cache.score_kind == "logit" and cache.costs is None and cache.features is None
    sizes = np.bincount(cache.tasks)
    assert sizes.size == 8 and sizes.min() >= 30 and sizes.max() <= 50
    assert np.all(np.diff(cache.tasks) >= 0)  # each task's questions contiguous
    validation, test = small_fit.split_fractions
    for task, size in enumerate(sizes):
        split = cache.split[cache.tasks == task]
        assert (split == SPLITS["test"]).sum() == int(np.floor(test * size + 0.5))
        assert (split == SPLITS["validation"]).sum() == int(np.floor(validation * size + 0.5))
        assert np.all(np.diff(split[split != SPLITS["train"]]) <= 0)  # validation, then test, at the end
    probs = cache.probs.sum(axis=2)
    np.testing.assert_allclose(probs, 1.0, atol=1e-5)
    save_cache(tmp_path / "gen.h5", cache)
    back = load_cache(tmp_path / "gen.h5")
    assert back.task_names == cache.task_names and np.array_equal(back.scores, cache.scores)
    assert np.array_equal(back.correct, cache.correct)


def test_replicas_keep_the_parents_accuracy_and_jitter_moves_it(bbh5: LogitCache, fitted: TaskGenerator) -> None:
    rows = bbh5.select(tasks=["navigate"])
    replica = fitted.sample(20, seed=1, parents=["navigate"], jitter=0.0, questions=(200, 200))
    assert np.abs(replica.model_accuracy() - bbh5.model_accuracy(rows)).max() < 0.03
    assert set(np.unique(replica.n_choices)) == {2}

    def spread_across_tasks(cache: LogitCache) -> float:
        accuracy = [cache.model_accuracy(np.flatnonzero(cache.tasks == task)) for task in range(cache.n_tasks)]
        return float(np.std(accuracy, axis=0).mean())

    jittered = fitted.sample(20, seed=1, parents=["navigate"], questions=(200, 200))
    assert spread_across_tasks(jittered) > 2 * spread_across_tasks(replica)  # beyond the sampling noise


def test_more_models_are_drawn_fewer_are_the_first(fitted: TaskGenerator) -> None:
    cache = fitted.sample(6, seed=2, n_models=10, questions=(60, 60))
    assert cache.n_models == 10 and cache.models[:5] == fitted.models
    assert cache.models[5:] == tuple(f"gen-model-{k:02d}" for k in range(5, 10))
    accuracy = cache.model_accuracy()
    assert np.all((accuracy > 0.05) & (accuracy < 0.95))
    again = fitted.sample(6, seed=2, n_models=10, questions=(60, 60))
    assert np.array_equal(again.scores, cache.scores)
    teams = all_teams(10)  # 1023 teams: the enumeration the baselines use still works
    assert team_correct(cache, np.arange(60), teams[:40]).shape == (40, 60)
    fewer = fitted.sample(2, seed=2, n_models=3, questions=(40, 40))
    assert fewer.models == fitted.models[:3]


def test_unseen_protocol_and_environments_run_on_a_sample(fitted: TaskGenerator, bbh5: LogitCache) -> None:
    cache = fitted.sample(6, seed=0, questions=(30, 40))
    env = ensemble_env.unseen_parallel_env(cache=cache, split="test")
    _, infos = env.reset(seed=0)
    steps = 0
    while env.agents:
        actions = {agent: env.action_space(agent).sample(mask=infos[agent].get("action_mask")) for agent in env.agents}
        _, _, _, _, infos = env.step(actions)
        steps += 1
    assert steps == int(np.sum(cache.split[cache.tasks == cache.tasks[cache.select("test")[0]]] == SPLITS["test"]))
    venv = ensemble_env.vector_env(4, cache, episodes="task")
    venv.reset(seed=0)
    for _ in range(50):
        venv.step({agent: venv.action_space(agent).sample() for agent in venv.agents})
    other = fitted.sample(3, seed=0, first=6, questions=(30, 40))  # a disjoint stream: never training questions
    protocols = pytest.importorskip("ensemble_mappo.benchmark.protocols")
    protocols.check_unseen(cache, other)
    combined = protocols.combined_cache(bbh5, other, ("boolean_expressions",))
    assert combined.n_tasks == bbh5.n_tasks + 3
    folded = protocols.fold_cache(cache, cache.task_names[:2], cache.task_names[2:3])
    assert set(np.unique(folded.split)) == {0, 1, 2}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"n_tasks": 0}, "n_tasks"),
        ({"n_tasks": True}, "n_tasks"),
        ({"seed": -1}, "seed"),
        ({"n_models": 0}, "n_models"),
        ({"questions": (5, 2)}, "questions"),
        ({"questions": "12"}, "questions"),
        ({"jitter": float("nan")}, "jitter"),
        ({"parents": ["nope"]}, "parents"),
        ({"split_fractions": (0.6, 0.5)}, "split_fractions"),
        ({"n_tasks": 10**6, "questions": (10**5, 10**5)}, "scores"),
    ],
)
def test_sample_refuses_bad_arguments(small_fit: TaskGenerator, arguments: dict[str, Any], message: str) -> None:
    call = {"n_tasks": 2, "seed": 0} | arguments
    with pytest.raises(ValueError, match=message):
        small_fit.sample(call.pop("n_tasks"), call.pop("seed"), **call)


# -- fidelity on bbh5 -------------------------------------------------------------------------------------------
def test_replicas_reproduce_bbh5_team_votes(bbh5: LogitCache, fitted: TaskGenerator) -> None:
    teams = all_teams(bbh5.n_models)
    errors, correlations = [], []
    for name in bbh5.task_names:
        real = team_correct(bbh5, bbh5.select(tasks=[name]), teams).mean(axis=1)
        replica = fitted.sample(4, seed=0, parents=[name], jitter=0.0, questions=(250, 250))
        drawn = team_correct(replica, np.arange(replica.n_questions), teams).mean(axis=1)
        errors.append(np.abs(real - drawn).mean())
        correlations.append(np.corrcoef(real, drawn)[0, 1])
    assert np.mean(errors) < FIDELITY_MEAN_MAE and np.max(errors) < FIDELITY_WORST_MAE, errors
    assert np.median(correlations) > 0.9, correlations


# -- files ------------------------------------------------------------------------------------------------------
def test_file_round_trip(fitted: TaskGenerator, tmp_path: Path) -> None:
    path = save_generator(tmp_path / "bbh5.json", fitted)
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["format"] == "ensemble-task-generator" and record["format_version"] == 1
    assert path.stat().st_size < 400_000
    loaded = load_generator(path)
    assert loaded.task_names == fitted.task_names and loaded.spread == fitted.spread
    assert np.array_equal(loaded.sample(3, seed=9).scores, fitted.sample(3, seed=9).scores)
    assert [name for name in os.listdir(tmp_path) if name.endswith(".tmp")] == []  # written atomically


def _mutated(record: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy = json.loads(json.dumps(record))
    change(copy)
    return copy


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        node = record
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


HOSTILE = [
    ("wrong type", _set(("tasks", 0, "skill"), "high"), "tasks['task_0'].skill"),
    ("a number as text", _set(("tasks", 0, "loading", 1), "0.5"), "tasks['task_0'].loading"),
    ("NaN", _set(("tasks", 1, "margin_right", 0, 3), float("nan")), "tasks['task_1'].margin_right"),
    ("infinity", _set(("spread", "skill"), float("inf")), "spread.skill"),
    ("negative size", _set(("tasks", 0, "n_questions"), -5), "tasks['task_0'].n_questions"),
    ("huge size", _set(("tasks", 0, "n_questions"), 10**30), "tasks['task_0'].n_questions"),
    ("huge choice count", _set(("tasks", 0, "choice_counts"), [10**6]), "tasks['task_0'].choice_counts"),
    ("wrong shape", _set(("tasks", 2, "label_bias"), [[0.0, 0.1]]), "tasks['task_2'].label_bias"),
    ("a bool for a number", _set(("tasks", 0, "distractor_boost"), True), "tasks['task_0'].distractor_boost"),
    ("decreasing quantiles", _set(("tasks", 0, "rest_gap", 0), list(range(11, 0, -1))), "tasks['task_0'].rest_gap"),
    ("loading out of range", _set(("tasks", 0, "loading", 0), 1.5), "tasks['task_0'].loading"),
    ("another format", _set(("format",), "pickle"), "'format'"),
    ("another version", _set(("format_version",), 2), "'format_version'"),
    ("a missing field", lambda r: r["tasks"][0].pop("skill"), "tasks[0]"),
    ("an unknown field", _set(("tasks", 0, "exec"), "rm -rf"), "tasks[0]"),
    ("models of another pool", _set(("models",), ["a", "b"]), "skill"),
    ("duplicate models", _set(("models",), ["a", "a", "b", "c"]), "'models'"),
    ("no task", _set(("tasks",), []), "'tasks'"),
    ("split fractions", _set(("split_fractions",), [0.7, 0.6]), "'split_fractions'"),
    ("a name too long", _set(("tasks", 0, "name"), "x" * 5000), ".name"),
]


@pytest.mark.parametrize(("change", "field"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE])
def test_hostile_generator_files_are_refused_naming_the_field(
    small_fit: TaskGenerator, tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str
) -> None:
    record = json.loads(saved_text(small_fit, tmp_path))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_mutated(record, change)), encoding="utf-8")
    with pytest.raises(CacheError) as caught:
        load_generator(bad)
    assert str(bad) in str(caught.value) and field in str(caught.value)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xfe not text", "not UTF-8"),
        (b"{not json", "not valid JSON"),
        (b'{"format": 1e999}', "format"),
        (b'{"format": "a", "format": "b"}', "twice"),
        (b"[" * 50 + b"]" * 50, "nested"),
        (b"[]", "JSON object"),
    ],
)
def test_files_that_are_not_generators_are_refused(tmp_path: Path, content: bytes, expected: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(CacheError, match=expected) as caught:
        load_generator(bad)
    assert str(bad) in str(caught.value)


def test_special_files_are_refused_without_blocking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError):
        load_generator(tmp_path / "missing.json")
    with pytest.raises(CacheError, match="folder"):
        load_generator(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(CacheError, match="FIFO"):
        load_generator(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    with pytest.raises(CacheError, match="FIFO"):
        load_generator(link)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(CacheError, match="socket"):
            load_generator(tmp_path / "sock")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    monkeypatch.setattr(generator_file, "MAX_GENERATOR_BYTES", 1024)
    with pytest.raises(CacheError, match="2048 bytes"):
        load_generator(big)


# -- the commands -----------------------------------------------------------------------------------------------
def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_generator_and_generate_commands(
    small: LogitCache, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = save_cache(tmp_path / "real.h5", small)
    generator, out = tmp_path / "gen.json", tmp_path / "tasks.h5"
    code, text, _ = run(capsys, "cache", "fit-generator", real, "-o", generator, "--tasks", "task_0,task_1")
    assert code == 0 and "a generator of 2 tasks (task_0, task_1)" in text
    assert load_generator(generator).task_names == ("task_0", "task_1")
    code, text, _ = run(capsys, "cache", "generate", generator, "-o", out, "--tasks", "5", "--seed", "3",
                        "--questions", "20", "30", "--models", "6", "--first", "10")  # fmt: skip
    assert code == 0 and "5 tasks" in text and "gen-000010 .. gen-000014" in text
    cache = load_cache(out)
    expected = load_generator(generator).sample(5, 3, n_models=6, questions=(20, 30), first=10)
    assert np.array_equal(cache.scores, expected.scores) and cache.task_names == expected.task_names
    code, _, err = run(capsys, "cache", "generate", generator, "-o", out, "--tasks", "2", "--seed", "0")
    assert code == 2 and "exists; --overwrite replaces it" in err and load_cache(out).n_tasks == 5
    code, _, _ = run(capsys, "cache", "generate", generator, "-o", out, "--tasks", "2", "--seed", "0", "--overwrite")
    assert code == 0 and load_cache(out).n_tasks == 2
    code, _, err = run(capsys, "cache", "generate", generator, "-o", generator, "--tasks", "2", "--seed", "0",
                       "--overwrite")  # fmt: skip
    assert code == 2 and "would overwrite the input" in err
    code, _, err = run(capsys, "cache", "generate", generator, "-o", out, "--tasks", "2", "--seed", "0",
                       "--questions", "30", "20", "--overwrite")  # fmt: skip
    assert code == 2 and "questions" in err
    broken = tmp_path / "broken.json"
    broken.write_text(generator.read_text(encoding="utf-8").replace('"loading"', '"loadings"'), encoding="utf-8")
    code, _, err = run(capsys, "cache", "generate", broken, "-o", tmp_path / "b.h5", "--tasks", "2", "--seed", "0")
    assert code == 2 and str(broken) in err and "tasks[0]" in err and "loading" in err


def test_fit_generator_writes_the_fidelity_report(
    small: LogitCache, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    real = save_cache(tmp_path / "real.h5", small)
    report = tmp_path / "report"
    code, text, _ = run(capsys, "cache", "fit-generator", real, "-o", tmp_path / "g.json", "--report", report,
                        "--replicas", "2", "--holdout", "1", "--draws", "12")  # fmt: skip
    assert code == 0 and "MAE" in text
    assert sorted(path.name for path in report.iterdir()) == sorted(fidelity.REPORT_FILES)
    record = json.loads((report / "fidelity.json").read_text(encoding="utf-8"))
    assert [task["name"] for task in record["tasks"]] == list(small.task_names)
    assert len(record["held_out"]) == 1 and len(record["training_tasks"]) == 2 and record["n_generated"] == 12
    assert len(record["tasks"][0]["real"]["mean_vote"]) == 15  # 4 models: 15 teams
    assert "## Held-out tasks" in (report / "fidelity.md").read_text(encoding="utf-8")
    code, _, err = run(capsys, "cache", "fit-generator", real, "-o", tmp_path / "h.json", "--report", report)
    assert code == 2 and "fidelity.md: exists" in err and not (tmp_path / "h.json").exists()
