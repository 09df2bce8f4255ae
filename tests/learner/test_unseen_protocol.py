"""The benchmark's unseen-task protocol (ensemble_mappo.benchmark.protocols): folds of tasks, caches redrawn by
task, a learner on tasks never seen whose held-out labels reach it only online, and parallel runs equal to serial."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from testing.caches import flip_labels  # noqa: E402

import ensemble_env  # noqa: E402
from ensemble_env.cache import LogitCache, save_cache  # noqa: E402
from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo import benchmark  # noqa: E402
from ensemble_mappo.benchmark import protocols  # noqa: E402


def small_cache(n_tasks: int = 6, seed: int = 1):
    return make_cache(n_models=3, n_questions=60 * n_tasks, n_tasks=n_tasks, accuracy=[0.5, 0.6, 0.7], seed=seed)


def test_folds_deal_every_task_once_and_redraw_the_splits_by_task() -> None:
    cache = small_cache()
    folds = protocols.task_folds(cache.task_names, 3, seed=0)
    assert sorted(task for fold in folds for task in fold) == sorted(cache.task_names)
    assert protocols.task_folds(cache.task_names, 3, seed=0) == folds  # seeded
    units, scored = protocols.units(cache, k=3, seed=0)
    assert scored.select("test").size == cache.n_questions
    covered = np.sort(np.concatenate([unit.scored_questions for unit in units]))
    np.testing.assert_array_equal(covered, np.arange(cache.n_questions))  # every question scored once
    names = np.asarray(cache.task_names)[np.asarray(cache.tasks)]
    for unit in units:
        test_tasks = set(names[unit.cache.select("test")])
        validation_tasks = set(names[unit.cache.select("validation")])
        assert test_tasks == set(unit.held_out) and validation_tasks == set(unit.validation_tasks)
        assert not test_tasks & set(names[unit.cache.select("train")]) and not test_tasks & validation_tasks
    with pytest.raises(ValueError, match="--folds"):
        protocols.task_folds(cache.task_names, 1, seed=0)


def test_an_eval_cache_must_hold_the_same_models() -> None:
    train, other = small_cache(), small_cache(seed=2)
    units, scored = protocols.units(train, k=4, seed=0, eval_cache=other)
    assert len(units) == 1 and scored.n_questions == other.n_questions
    combined = units[0].cache
    assert combined.select("test").size == other.n_questions
    assert set(np.asarray(combined.task_names)[np.asarray(combined.tasks)[combined.select("test")]]) == {
        f"eval:{name}" for name in other.task_names
    }
    renamed = dataclasses.replace(other, models=("x", "y", "z"))
    with pytest.raises(ValueError, match="same models"):
        protocols.units(train, k=4, seed=0, eval_cache=renamed)


@pytest.mark.parametrize("algorithm", ["mappo", "rlae_ppo"])
def test_the_learner_reads_held_out_labels_only_online(algorithm: str, tmp_path: Path) -> None:
    """Flipping every label of the held-out tasks leaves the deployed policy (its networks) and every choice
    unchanged: the held-out labels reach the agents only online, through the outcomes an episode reveals after each
    answer (the teams played on the held-out tasks do change: they follow what is revealed)."""
    cache = small_cache()
    (unit, *_), _ = protocols.units(cache, k=3, seed=0)
    test = unit.cache.select("test")
    flipped = flip_labels(unit.cache, test)
    chosen = []
    config_class = benchmark.learners.algorithms.get(algorithm).config_class
    for index, which in enumerate((unit.cache, flipped)):
        overrides = protocols.learner_overrides(algorithm, config_class, 3)
        answers = benchmark.learner_answers(
            which, 0, 1.0, tmp_path / str(index), algorithm=algorithm, passes=4.0, checkpoints=2,
            overrides={**overrides, "num_envs": 8, "num_steps": 16},
        )  # fmt: skip
        chosen.append((answers.info["selected_iteration"], answers.info["checkpoint"], answers.info["validation"]))
    assert chosen[0] == chosen[1]
    first, second = (
        torch.load(tmp_path / str(index) / "checkpoints" / f"{chosen[0][1]}.pt", weights_only=True)["networks"]
        for index in (0, 1)
    )
    for name, state in first.items():
        for key, tensor in state.items():
            assert torch.equal(tensor, second[name][key]), (name, key)
    with pytest.raises(ValueError, match="rlae_mappo's per-model agents observe the task one-hot"):
        benchmark.learners.learner("rlae_mappo", "tiny", "unseen-tasks")


def test_rlae_plays_the_scenario_without_the_task() -> None:
    """rlae_ppo under the protocol: task episodes, and the fusion agent's observation holds each model's record on
    the task instead of the task one-hot (the layout has no task block)."""
    config_class = benchmark.learners.algorithms.get("rlae_ppo").config_class
    overrides = protocols.learner_overrides("rlae_ppo", config_class, 3)
    assert overrides == {"env": {"episodes": "task", "fusion_extras": ["member_record"]}}
    config = config_class(env=overrides["env"])
    options = config.env_options(has_features=True)
    assert options["fusion_extras"] == ["member_record"] and options["decider"] is False
    venv = ensemble_env.vector_env(2, small_cache(), **options)
    assert "task" not in venv.layout.fusion and "member_record" in venv.layout.fusion


def test_parallel_runs_equal_serial_ones_and_the_folds_are_reported(tmp_path: Path) -> None:
    cache_file = tmp_path / "pool.h5"
    save_cache(cache_file, small_cache())
    names = ["global_team", "ftl_team", "hindsight_team"]
    serial = benchmark.benchmark(
        names, range(2), [str(cache_file)], tmp_path / "serial", protocol="unseen-tasks", folds=3, progress=False,
        plot=False,
    )  # fmt: skip
    parallel = benchmark.benchmark(
        names, range(2), [str(cache_file)], tmp_path / "parallel", protocol="unseen-tasks", folds=3, jobs=2,
        progress=False, plot=False,
    )  # fmt: skip
    assert serial["caches"] == parallel["caches"]
    assert (tmp_path / "serial" / "results.md").read_text() == (tmp_path / "parallel" / "results.md").read_text()
    folds = json.loads((tmp_path / "serial" / "results.json").read_text())["protocol"]["folds"][str(cache_file)]
    assert len(folds) == 3 and all(fold["held_out"] and fold["validation_tasks"] for fold in folds)
    assert serial["caches"][str(cache_file)]["hindsight_team"]["uses_test_labels"]
    with pytest.raises(ValueError, match="--eval-cache"):
        benchmark.benchmark(names, [0], [str(cache_file)], tmp_path / "x", eval_cache=str(cache_file), plot=False)


def write_lm_eval_pool(root: Path, tasks: dict[str, int], seed: int) -> Path:
    """An lm-evaluation-harness ``--output_path`` folder of three models on ``tasks`` ({name: questions}): random
    log-likelihoods over 2-4 choices, the models of differing skill (the first right most often)."""
    from testing.conversions import new_record, write_samples

    rng = np.random.default_rng(seed)
    models = ("org__strong", "org__middle", "org__weak")
    for name, count in tasks.items():
        n_choices = rng.integers(2, 5, size=count)
        targets = [int(rng.integers(n)) for n in n_choices]
        for skill, model in zip((0.8, 0.6, 0.4), models, strict=True):
            rows = []
            for doc_id, (n, target) in enumerate(zip(n_choices, targets, strict=True)):
                logliks = np.round(-rng.random(n) * 4 * 8) / 8  # exact as text
                if rng.random() < skill:
                    logliks[target] = 0.125
                choices = tuple(f"c{i}" for i in range(n))
                rows.append(new_record(name, doc_id, choices, choices[target], logliks.tolist()))
            write_samples(root / model, model, name, rows)
    return root


@pytest.mark.slow
def test_eval_cache_converted_from_lm_eval_runs_through_the_command(tmp_path: Path, capsys) -> None:
    """The acceptance's other half: train and choose on every task of one cache, score every task of another, both
    converted with ``ensemble-env cache from-lm-eval`` from samples of the same models (other tasks); through the
    command, as a user runs it, with the learner and the protocol's baselines."""
    from ensemble_env.cli import main

    train_run = write_lm_eval_pool(tmp_path / "train_run", {"alpha": 60, "beta": 60, "gamma": 60, "delta": 60}, 0)
    eval_run = write_lm_eval_pool(tmp_path / "eval_run", {"ruin_names": 50, "hyperbaton": 40}, 1)
    for run, name in ((train_run, "train.h5"), (eval_run, "eval.h5")):
        assert main(["cache", "from-lm-eval", str(run), "-o", str(tmp_path / name), "--no-progress"]) == 0
    out = tmp_path / "bench"
    argv = ["benchmark", "--protocol", "unseen-tasks", "--cache", str(tmp_path / "train.h5"), "--eval-cache",
            str(tmp_path / "eval.h5"), "--algorithms", "mappo,global_team,ftl_team,hindsight_team", "--seeds", "2",
            "--budget", "tiny", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "held out hyperbaton, ruin_names;" in printed.err
    results = json.loads((out / "results.json").read_text())
    (scored,) = results["caches"]
    assert scored == str(tmp_path / "eval.h5")
    for name in ("mappo", "global_team", "ftl_team", "hindsight_team"):
        aggregate = results["caches"][scored][name]["aggregate"]
        assert np.isfinite(aggregate["reward"]["mean"]) and 0.0 <= aggregate["accuracy"]["mean"] <= 1.0
    mappo = results["caches"][scored]["mappo"]
    assert sorted(run["seed"] for run in mappo["runs"]) == [0, 1]
    # a cache of other models is refused, naming both lists
    other = write_lm_eval_pool(tmp_path / "other_run", {"ruin_names": 20}, 2)
    for model in ("org__middle", "org__weak"):
        (other / model).rename(other / model.replace("org__", "lab__"))
    assert main(["cache", "from-lm-eval", str(other), "-o", str(tmp_path / "other.h5"), "--no-progress"]) == 0
    with pytest.raises(ValueError, match="same models"):
        benchmark.benchmark(["ftl_team"], [0], [str(tmp_path / "train.h5")], tmp_path / "x", protocol="unseen-tasks",
                            eval_cache=str(tmp_path / "other.h5"), plot=False, progress=False)  # fmt: skip


def test_task_names_without_questions_are_never_held_out() -> None:
    """A cache cut by ``subset`` keeps every task name: the folds deal only the tasks that hold questions."""
    cache = small_cache(n_tasks=6)
    kept = np.isin(np.asarray(cache.tasks), [0, 2, 3, 5])
    part = cache.subset(kept)
    assert len(part.task_names) == 6
    units, _ = protocols.units(part, k=2, seed=0)
    dealt = sorted(name for unit in units for name in unit.held_out)
    assert dealt == sorted(protocols.tasks_with_questions(part)) == sorted(np.take(cache.task_names, [0, 2, 3, 5]))
    for unit in units:
        assert set(unit.validation_tasks) <= set(dealt) and unit.cache.select("test").size > 0
    (unit,), _ = protocols.units(small_cache(seed=2), k=2, seed=0, eval_cache=part)
    assert sorted(unit.held_out) == dealt


# -- an evaluation cache must hold tasks never seen (issue 41, class 1) ------------------------------------------------
def _training_copies(train: LogitCache) -> dict[str, LogitCache]:
    """Caches holding training questions, each a way a user could make one by mistake (or on purpose)."""
    rng = np.random.default_rng(0)
    scores, labels, tasks = train.scores.copy(), train.labels.copy(), train.tasks.copy()
    other = small_cache(seed=5)
    mixed_scores, mixed_labels, mixed_tasks = other.scores.copy(), other.labels.copy(), other.tasks.copy()
    mixed_scores[7], mixed_labels[7], mixed_tasks[7] = scores[7], labels[7], tasks[7]  # one training question
    return {
        "re-split": dataclasses.replace(train, split=rng.integers(0, 3, train.n_questions)),
        "a part": train.subset(np.arange(train.n_questions) % 5 == 0),
        "tasks renamed": dataclasses.replace(train, task_names=tuple(f"new_{name}" for name in train.task_names)),
        "one shared question": dataclasses.replace(other, scores=mixed_scores, labels=mixed_labels, tasks=mixed_tasks),
        "same ids": dataclasses.replace(
            other,
            question_ids=tuple(f"q{i}" for i in range(other.n_questions)),
            task_names=train.task_names,
        ),
    }


def test_an_eval_cache_holding_training_questions_is_refused(tmp_path: Path) -> None:
    """The cache itself, a byte-identical copy, and caches holding some of its questions (re-split, a part of it, its
    tasks renamed, one question copied in, the same ids in tasks of the same names) are refused naming both caches and
    the first shared question; a cache of other questions is scored."""
    import shutil

    train = small_cache()
    named = dataclasses.replace(train, question_ids=tuple(f"q{i}" for i in range(train.n_questions)))
    train_file = save_cache(tmp_path / "train.h5", named)
    shutil.copy(train_file, tmp_path / "copy.h5")
    for name, path in (("itself", train_file), ("a copy", tmp_path / "copy.h5")):
        with pytest.raises(ValueError, match=r"holds the same cache as --cache .*train\.h5 \(the same content digest"):
            benchmark.benchmark(["global_team"], [0], [str(train_file)], tmp_path / "x", protocol="unseen-tasks",
                                eval_cache=str(path), plot=False, progress=False)  # fmt: skip
        assert not (tmp_path / "x").exists(), name  # refused before the results folder is made
    loaded = dataclasses.replace(named, path=str(train_file))
    for name, cache in _training_copies(named).items():
        shared = protocols.training_questions(loaded, cache)
        assert shared.size > 0, name
        expected = rf"{shared.size:,} of its {cache.n_questions:,} questions are questions of --cache .*train\.h5 "
        with pytest.raises(ValueError, match=expected + rf"\(the first: question {shared[0]},"):
            protocols.units(loaded, k=2, seed=0, eval_cache=cache)
    assert protocols.training_questions(loaded, _training_copies(named)["one shared question"]).tolist() == [7]
    other = small_cache(seed=5)  # other questions of tasks of the same names: tasks never seen, scored
    assert protocols.training_questions(loaded, other).size == 0
    units, scored = protocols.units(loaded, k=2, seed=0, eval_cache=other)
    assert len(units) == 1 and scored.n_questions == other.n_questions


def test_the_command_refuses_the_training_cache_as_eval_cache_in_one_line(tmp_path: Path, capsys) -> None:
    from ensemble_env.cli import main

    train_file = save_cache(tmp_path / "train.h5", small_cache())
    argv = ["benchmark", "--protocol", "unseen-tasks", "--cache", str(train_file), "--eval-cache", str(train_file),
            "--algorithms", "global_team", "--seeds", "1", "--out", str(tmp_path / "out"), "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"ensemble-env benchmark: error: --eval-cache {train_file} holds the same cache as --cache")


def test_several_training_caches_score_one_eval_cache(tmp_path: Path, capsys) -> None:
    """``--cache a.h5,b.h5 --eval-cache e.h5``: each training cache is scored on e.h5 as it is alone (the same
    numbers), under the key ``a.h5 -> e.h5``, with its digest and a frontier plot of its own."""
    from ensemble_env.cache.digest import cache_digest
    from ensemble_env.cli import main

    files = {name: save_cache(tmp_path / f"{name}.h5", small_cache(seed=seed)) for name, seed in
             (("a", 1), ("b", 2), ("e", 3))}  # fmt: skip
    out = tmp_path / "out"
    argv = ["benchmark", "--protocol", "unseen-tasks", "--cache", f"{files['a']},{files['b']}", "--eval-cache",
            str(files["e"]), "--algorithms", "global_team,ftl_team", "--seeds", "2", "--out", str(out),
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    keys = [f"{files[name]} -> {files['e']}" for name in ("a", "b")]
    assert list(results["caches"]) == keys and list(results["cache_digests"]) == keys
    assert results["cache_digests"][keys[0]] == cache_digest(small_cache(seed=1))
    assert results["protocol"]["trained_on"] == {keys[0]: str(files["a"]), keys[1]: str(files["b"])}
    alone = benchmark.benchmark(["global_team", "ftl_team"], range(2), [str(files["a"])], tmp_path / "alone",
                                protocol="unseen-tasks", eval_cache=str(files["e"]), plot=False,
                                progress=False)  # fmt: skip
    assert json.loads(json.dumps(alone["caches"][str(files["e"])])) == results["caches"][keys[0]]
    if importlib.util.find_spec("matplotlib") is not None:
        assert sorted(path.name for path in out.glob("frontier*.png")) == ["frontier_a-to-e.png", "frontier_b-to-e.png"]


def test_the_first_team_is_computed_once_per_cache_and_options() -> None:
    """``first_team`` answers from its memo what it computed: the same team as a fresh computation, per options
    (another reward's best team may differ), and a new cache object is computed afresh."""
    from ensemble_mappo import mappo

    cache = make_cache(n_models=4, n_questions=120, n_choices=3, n_tasks=3, seed=5)
    plain = {"episodes": "task", "alpha": 1.0}
    steep = {"episodes": "task", "alpha": 4.0}
    first = mappo.first_team(cache, plain)
    assert first == mappo._first_team(cache, plain)
    assert mappo.first_team(cache, steep) == mappo._first_team(cache, steep)
    assert len(mappo._FIRST_TEAMS[cache]) == 2  # one answer per options
    first.append(99)  # a caller's copy: the memo is not changed through it
    assert mappo.first_team(cache, plain) == mappo._first_team(cache, plain)
    other = dataclasses.replace(cache)
    assert other not in mappo._FIRST_TEAMS
    mappo.first_team(other, plain)
    assert other in mappo._FIRST_TEAMS
