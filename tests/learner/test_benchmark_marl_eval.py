"""``ensemble-env benchmark --format marl-eval``: ``OUT/marl_eval.json`` holds marl-eval's layout (checked against
:data:`ensemble_mappo.benchmark.marl_eval.SCHEMA`, a JSON Schema of marl-eval's documented format), the numbers the
benchmark scored (per task and seed, equal to the stored answers and to results.json), the same algorithms, runs,
steps and metrics everywhere (marl-eval needs them), and loads with marl-eval's own tools where it is installed.

Fast: a tiny synthetic cache, baselines and a registered seeded algorithm, no learner.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from ensemble_env.cache import load_cache, save_cache
from ensemble_env.cli import main
from ensemble_env.synthetic import make_cache
from ensemble_mappo import benchmark
from ensemble_mappo.benchmark import marl_eval, registry

ALGORITHMS = ["best_single", "mean_vote", "seeded_single"]
SEEDS = [0, 1, 2]
METRICS = ["accuracy", "reward", "team_size", "cost"]


def tiny_cache(n_tasks: int = 2, seed: int = 1, task_names: tuple[str, ...] | None = None):
    """Three models with costs, ``n_tasks`` tasks, train/validation/test."""
    cache = make_cache(n_models=3, n_questions=60 * n_tasks, n_tasks=n_tasks, accuracy=[0.5, 0.6, 0.8], seed=seed)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2
    names = task_names or tuple(f"Task {chr(65 + k)}" for k in range(n_tasks))
    return dataclasses.replace(cache, split=split, task_names=names, costs=np.array([1.0, 2.5, 4.0]))


def seeded_single(cache, seed, alpha, out_dir):
    """A model drawn with the seed answers every test question alone: other answers for each seed."""
    test = cache.select("test")
    model = int(np.random.default_rng(seed).integers(cache.n_models))
    teams = np.zeros((test.size, cache.n_models), dtype=bool)
    teams[:, model] = True
    return benchmark.Answers(test, cache.preds[test, model], teams, {"model": model})


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.ALGORITHMS, "seeded_single", (seeded_single, {"version": 1}))


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """A finished benchmark with the export: (cache file, results folder, what benchmark() returned)."""
    path, out = tmp_path / "pool.h5", tmp_path / "bench"
    save_cache(path, tiny_cache())
    results = benchmark.benchmark(
        ALGORITHMS, SEEDS, [str(path)], out, progress=False, plot=False, formats=["marl-eval"]
    )
    return path, out, results


def read(out: Path) -> dict[str, Any]:
    return json.loads((out / marl_eval.FILE).read_text(encoding="utf-8"))


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(marl_eval.SCHEMA)


def test_the_export_matches_marl_evals_schema(finished: tuple[Path, Path, dict[str, Any]]) -> None:
    path, out, _ = finished
    data = read(out)
    jsonschema.Draft202012Validator(marl_eval.SCHEMA).validate(data)
    assert list(data) == [str(path)]
    (tasks,) = data.values()
    assert list(tasks) == ["Task A", "Task B"]
    for per_algorithm in tasks.values():
        assert list(per_algorithm) == ALGORITHMS
        for runs in per_algorithm.values():
            assert list(runs) == [f"seed_{seed}" for seed in SEEDS]
            for run in runs.values():
                assert list(run) == ["step_0", "absolute_metrics"]
                assert run["step_0"] == {"step_count": 0, **run["absolute_metrics"]}  # one scoring of the test answers
                assert list(run["absolute_metrics"]) == METRICS
                assert all(len(values) == 1 for values in run["absolute_metrics"].values())


def test_the_numbers_are_the_stored_answers_scored_per_task(finished: tuple[Path, Path, dict[str, Any]]) -> None:
    path, out, results = finished
    cache = load_cache(path)
    test = cache.select("test")
    (tasks,) = read(out).values()
    for result in sorted((out / "runs").glob("*/*/result.json")):
        run = json.loads(result.read_text(encoding="utf-8"))
        given = {registry.canonical(name): name for name in ALGORITHMS}  # mean_vote is mean_probability_vote
        algorithm, seed = given[run["key"]["algorithm"]], run["key"]["seed"]
        predictions, teams = np.asarray(run["predictions"]), np.asarray(run["teams"])
        right = predictions == np.asarray(cache.labels)[test]
        costs = (teams * np.array([1.0, 2.5, 4.0])).sum(axis=1)
        rewards = np.where(right, 1.0, -1.0 - teams.sum(axis=1) / cache.n_models)  # alpha 1, the penalty on errors
        for k, name in enumerate(cache.task_names):
            rows = np.asarray(cache.tasks)[test] == k
            scores = tasks[name][algorithm][f"seed_{seed}"]["absolute_metrics"]
            assert scores["accuracy"] == [pytest.approx(right[rows].mean())]
            assert scores["reward"] == [pytest.approx(rewards[rows].mean())]
            assert scores["team_size"] == [pytest.approx(teams[rows].sum(axis=1).mean())]
            assert scores["cost"] == [pytest.approx(costs[rows].mean())]
    # results.json: each seed's macro accuracy is the mean of its tasks', each task's mean over seeds the aggregate's
    for algorithm in ALGORITHMS:
        entry = results["caches"][str(path)][algorithm]
        for index, seed in enumerate(SEEDS):
            per_task = [tasks[name][algorithm][f"seed_{seed}"]["absolute_metrics"]["accuracy"][0] for name in tasks]
            assert np.mean(per_task) == pytest.approx(entry["runs"][index]["accuracy"])
        for name in tasks:
            for metric in METRICS:
                values = [tasks[name][algorithm][f"seed_{seed}"]["absolute_metrics"][metric][0] for seed in SEEDS]
                assert np.mean(values) == pytest.approx(entry["aggregate"]["tasks"][name][metric]["mean"])
    seeded = [tasks["Task A"]["seeded_single"][f"seed_{seed}"]["absolute_metrics"]["cost"][0] for seed in SEEDS]
    assert len(set(seeded)) > 1  # the seeds' runs are kept apart


def test_every_task_holds_the_same_algorithms_runs_steps_and_metrics(
    finished: tuple[Path, Path, dict[str, Any]],
) -> None:
    """marl-eval stacks runs x tasks arrays: one shape throughout an environment (its DiagnoseData's checks)."""
    _, out, _ = finished
    for tasks in read(out).values():
        shapes = {
            (algorithm, run, step, tuple(metrics))
            for per_algorithm in tasks.values()
            for algorithm, runs in per_algorithm.items()
            for run, steps in runs.items()
            for step, metrics in steps.items()
        }
        per_task = [
            {(a, r, s, tuple(m)) for a, runs in per.items() for r, steps in runs.items() for s, m in steps.items()}
            for per in tasks.values()
        ]
        assert all(shape == shapes for shape in per_task)


def valid_export() -> dict[str, Any]:
    values = {"accuracy": [0.5], "reward": [-0.25]}
    run = {"step_0": {"step_count": 0, **values}, "absolute_metrics": dict(values)}
    return {"bbh5": {"boolean_expressions": {"static_team": {"seed_0": run, "seed_1": copy.deepcopy(run)}}}}


def _run(data: dict[str, Any]) -> dict[str, Any]:
    return data["bbh5"]["boolean_expressions"]["static_team"]["seed_0"]


def _renamed(data: dict[str, Any], keys: tuple[str, ...], name: str) -> None:
    for key in keys[:-1]:
        data = data[key]
    data[name] = data.pop(keys[-1])


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: _run(d)["step_0"].pop("step_count"),  # every step says when it was logged
        lambda d: _run(d)["step_0"].update(step_count=1.5),
        lambda d: _run(d)["step_0"].update(step_count=-1),
        lambda d: _run(d)["step_0"].update(step_count="0"),
        lambda d: _run(d)["step_0"].update(accuracy=0.5),  # values are lists of numbers
        lambda d: _run(d)["step_0"].update(accuracy=[]),
        lambda d: _run(d)["step_0"].update(accuracy=["0.5"]),
        lambda d: _run(d)["absolute_metrics"].update(reward=None),
        lambda d: _run(d).pop("absolute_metrics"),
        lambda d: _run(d)["absolute_metrics"].update(step_count=0),
        lambda d: _run(d).pop("step_0"),  # a run needs a step (marl-eval's evaluation interval)
        lambda d: _renamed(d, ("bbh5", "boolean_expressions", "static_team", "seed_0", "step_0"), "epoch_0"),
        lambda d: _renamed(d, ("bbh5", "boolean_expressions", "static_team"), "static_team,v2"),  # no commas
        lambda d: _renamed(d, ("bbh5",), "Extra"),  # marl-eval's own top-level key
        lambda d: d["bbh5"]["boolean_expressions"].update(static_team={}),
        lambda d: d.update(bbh5={}),
        lambda d: d.clear(),
    ],
)
def test_the_schema_refuses_what_marl_eval_cannot_read(spoil: Any) -> None:
    validator = jsonschema.Draft202012Validator(marl_eval.SCHEMA)
    data = valid_export()
    validator.validate(data)
    spoil(data)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(data)


def test_the_command_writes_the_export_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pool.h5"
    save_cache(path, tiny_cache())
    argv = ["benchmark", "--algorithms", "best_single", "--seeds", "2", "--cache", str(path), "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "plain")]) == 0
    assert not (tmp_path / "plain" / marl_eval.FILE).exists()
    assert main([*argv, "--out", str(tmp_path / "plain"), "--format", "marl-eval"]) == 0  # a finished benchmark
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'plain' / 'results.json'}, results.md, marl_eval.json" in out
    data = read(tmp_path / "plain")
    jsonschema.Draft202012Validator(marl_eval.SCHEMA).validate(data)
    assert list(data[str(path)]["Task A"]["best_single"]) == ["seed_0", "seed_1"]
    stored = json.loads((tmp_path / "plain" / "results.json").read_text(encoding="utf-8"))
    assert stored["reused_runs"] == 2  # the export read the stored runs back, nothing was redone


def test_an_unknown_format_is_one_error_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pool.h5"
    save_cache(path, tiny_cache())
    argv = ["benchmark", "--algorithms", "best_single", "--seeds", "1", "--cache", str(path), "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "b"), "--format", "csv"]) == 2
    err = capsys.readouterr().err
    assert err == "ensemble-env benchmark: error: --format 'csv' is not one of marl-eval\n"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("names", "task_names", "message"),
    [
        (["best_single", "seeded,single"], None, "algorithm 'seeded,single' has a comma"),
        (["seeded_single", "Seeded_Single"], None, "algorithms 'seeded_single' and 'Seeded_Single'"),
        (["best_single"], ("math", "Math"), "tasks 'math' and 'Math' (cache "),
    ],
)
def test_names_marl_eval_cannot_keep_apart_are_refused_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: list[str], task_names: Any, message: str
) -> None:
    for name in names[1:]:
        monkeypatch.setitem(registry.ALGORITHMS, name, (seeded_single, {}))
    path = tmp_path / "pool.h5"
    save_cache(path, tiny_cache(task_names=task_names))
    with pytest.raises(ValueError, match=r"^--format marl-eval: ") as error:
        benchmark.benchmark(names, [0], [str(path)], tmp_path / "b", progress=False, plot=False, formats=["marl-eval"])
    assert message in str(error.value)
    assert not (tmp_path / "b").exists()
    results = benchmark.benchmark(names, [0], [str(path)], tmp_path / "b", progress=False, plot=False)
    assert list(results["caches"][str(path)]) == names  # without the export the names are fine


def test_the_unseen_tasks_protocol_exports_every_scored_task(tmp_path: Path) -> None:
    path = tmp_path / "pool.h5"
    save_cache(path, tiny_cache(n_tasks=4))
    out = tmp_path / "unseen"
    benchmark.benchmark(["global_team", "mean_vote"], [0, 1], [str(path)], out, progress=False, plot=False,
                        protocol="unseen-tasks", folds=2, formats=["marl-eval"])  # fmt: skip
    data = read(out)
    jsonschema.Draft202012Validator(marl_eval.SCHEMA).validate(data)
    assert list(data[str(path)]) == ["Task A", "Task B", "Task C", "Task D"]  # every task held out once


def test_marl_evals_own_tools_load_the_export(finished: tuple[Path, Path, dict[str, Any]]) -> None:
    processing = pytest.importorskip("marl_eval.utils.data_processing_utils")
    diagnose = pytest.importorskip("marl_eval.utils.diagnose_data_errors")
    path, out, _ = finished
    raw = read(out)
    environment = str(path).lower()  # marl-eval lowercases every key
    checks = diagnose.DiagnoseData(copy.deepcopy(raw)).check_data()
    assert checks == {environment: dict.fromkeys(next(iter(checks.values())), True)}
    processed = processing.data_process_pipeline(raw_data=copy.deepcopy(raw), metrics_to_normalize=["reward"])
    assert "extra" in processed, "marl-eval's pipeline refused the file (it returns the raw data then)"
    extra = processed["extra"]
    assert (extra["number_of_runs"], extra["number_of_steps"]) == (len(SEEDS), 1)
    assert extra["environment_list"] == {environment: ["task a", "task b"]}
    assert extra["algorithm_list"] == ALGORITHMS
    scores, curves = processing.create_matrices_for_rliable(
        data_dictionary=processed, environment_name=environment, metrics_to_normalize=["reward"]
    )
    assert sorted(scores) == ["mean_accuracy", "mean_cost", "mean_norm_reward", "mean_team_size"]
    (tasks,) = raw.values()
    for algorithm in ALGORITHMS:
        expected = [[tasks[name][algorithm][f"seed_{seed}"]["absolute_metrics"]["accuracy"][0] for name in tasks]
                    for seed in SEEDS]  # fmt: skip
        np.testing.assert_allclose(scores["mean_accuracy"][algorithm], expected)
        assert curves["mean_accuracy"][algorithm].shape == (len(SEEDS), len(tasks), 1)
