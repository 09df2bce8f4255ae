"""The benchmark's generated-task protocol (``ensemble-env benchmark --protocol generated``): each fold's generator
fitted on its training tasks alone, the units (generated train, validation and test tasks, then the real held-out
tasks), two scored entries per cache, the rules choosing on generated validation tasks, deterministic baselines run
once for every seed, the learners' settings, and the refusals."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from testing.benchmarks import import_benchmark  # noqa: E402

from ensemble_env.cache import save_cache, save_generator  # noqa: E402
from ensemble_env.cache.digest import cache_digest  # noqa: E402
from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo import algorithms, benchmark  # noqa: E402
from ensemble_mappo.benchmark import curves, protocols, stats  # noqa: E402
from ensemble_mappo.benchmark.registry import default_algorithms, resolve  # noqa: E402

#: a plan small enough for tests: a few generated tasks of few questions
SMALL = protocols.GeneratedPlan(train_tasks=6, validation_tasks=3, test_tasks=4, questions=(20, 30))


def small_cache(n_tasks: int = 8, seed: int = 1, per_task: int = 60):
    return make_cache(n_models=3, n_questions=per_task * n_tasks, n_tasks=n_tasks, accuracy=[0.5, 0.6, 0.7], seed=seed)


def task_of_each(cache) -> np.ndarray:
    return np.asarray(cache.task_names)[np.asarray(cache.tasks)]


def test_the_plan_holds_the_protocol_s_numbers_and_refuses_others() -> None:
    plan = protocols.GeneratedPlan()
    assert (plan.train_tasks, plan.validation_tasks, plan.test_tasks, plan.questions, plan.n_models) == (
        800, 200, 500, (150, 250), None
    )  # fmt: skip
    assert plan.counts() == {"train": 800, "validation": 200, "test": 500}
    for change, field in (({"train_tasks": 1}, "train_tasks"), ({"test_tasks": True}, "test_tasks"),
                          ({"questions": (30, 20)}, "questions"), ({"n_models": 0}, "n_models")):  # fmt: skip
        with pytest.raises(ValueError, match=rf"GeneratedPlan\.{field} must be"):
            protocols.GeneratedPlan(**change)
    assert protocols.GENERATED_BUDGET_STEPS["default"] == protocols.PARTIAL_BUDGET_STEPS["default"]
    assert default_algorithms("generated", "team") == default_algorithms("unseen-tasks", "team")


def test_the_learners_play_the_unseen_game_without_permuted_copies() -> None:
    config_class = algorithms.get("mappo").config_class
    for feedback in ("team", "all"):
        unseen = protocols.learner_overrides("mappo", config_class, 5, feedback)
        generated = protocols.learner_overrides("mappo", config_class, 5, feedback, "generated")
        assert generated == {**unseen, **protocols.GENERATED_LEARNER} and generated["decider_policy"] == "residual"
    _, key = resolve("mappo", "tiny", "generated", "team")
    assert key["protocol"] == "generated" and key["total_steps"] == protocols.GENERATED_BUDGET_STEPS["tiny"]
    assert key["generated"] == protocols.GENERATED_LEARNER and key["learner"] == protocols.PARTIAL_LEARNER
    # the key holds what each learner's config takes: RLAE keeps its own width, so a run of another width is not reused
    rlae_key = resolve("rlae_ppo", "tiny", "generated", "all")[1]["generated"]
    assert "hidden_size" not in rlae_key and "decider_policy" not in rlae_key and rlae_key["num_envs"] == 64
    assert resolve("bayes_team", "tiny", "generated", "team")[1] == {"choose_on": "validation"}
    assert resolve("bayes_team", "tiny", "unseen-tasks", "team")[1] == {}


def test_each_fold_is_generated_tasks_then_its_real_held_out_tasks_each_scored_once() -> None:
    cache = small_cache()
    units, scored = protocols.generated_units(cache, SMALL, k=2, seed=0)
    generated, real = scored
    assert generated.n_questions == sum(int((unit.parts() == 0).sum()) for unit in units)
    assert real.n_questions == cache.n_questions and real.select("test").size == cache.n_questions
    assert len(set(generated.task_names)) == len(units) * SMALL.test_tasks
    seen = {0: [], 1: []}
    folds = protocols.task_folds(protocols.tasks_with_questions(cache), 2, 0)
    for fold, unit in enumerate(units):
        names = task_of_each(unit.cache)
        counts = {split: np.unique(names[unit.cache.select(split)]).size for split in ("train", "validation")}
        assert counts == {"train": SMALL.train_tasks, "validation": SMALL.validation_tasks}
        test = unit.cache.select("test")
        assert set(names[test]) >= set(unit.held_out) and unit.held_out == folds[fold]
        assert unit.generated["fitted_on"] == [name for name in cache.task_names if name not in unit.held_out]
        assert unit.generated["seed"] == protocols.fold_stream_seed(0, fold)
        assert set(unit.validation_tasks) <= set(unit.generated["fitted_on"])  # real validation tasks: fitted on
        for part in (0, 1):
            mine = unit.parts() == part
            seen[part].append(unit.scored_questions[mine])
            scored_cache = scored[part]
            np.testing.assert_array_equal(scored_cache.labels[unit.scored_questions[mine]],
                                          unit.cache.labels[test[mine]])  # fmt: skip
            np.testing.assert_array_equal(scored_cache.correct[unit.scored_questions[mine]],
                                          unit.cache.correct[test[mine]])  # fmt: skip
        assert set(names[test[unit.parts() == 1]]) == set(unit.held_out)  # the real tail: the held-out tasks
        assert all(name.startswith("gen-") for name in names[test[unit.parts() == 0]])
    for part, cache_part in ((0, generated), (1, real)):
        np.testing.assert_array_equal(np.sort(np.concatenate(seen[part])), np.arange(cache_part.n_questions))
    again, _ = protocols.generated_units(cache, SMALL, k=2, seed=0)
    assert [cache_digest(u.cache) for u in again] == [cache_digest(u.cache) for u in units]  # seeded
    other, _ = protocols.generated_units(cache, SMALL, k=2, seed=1)
    assert cache_digest(other[0].cache) != cache_digest(units[0].cache)


def _changed_task(cache, task: str):
    """``cache`` with every label of ``task`` moved to another choice and its scores scrambled."""
    rows = task_of_each(cache) == task
    labels = np.array(cache.labels)
    labels[rows] = (labels[rows] + 1) % np.asarray(cache.n_choices)[rows]
    scores = np.array(cache.scores)
    scores[rows] = np.random.default_rng(0).permutation(scores[rows])
    return dataclasses.replace(cache, labels=labels, scores=scores)


def test_the_generator_of_a_fold_never_reads_its_held_out_tasks(tmp_path: Path) -> None:
    """Changing a held-out task's labels and scores leaves the fold's fitted generator (its file, byte for byte) and
    every generated task identical; changing a training task changes them (the check can fail)."""
    cache = small_cache()
    units, _ = protocols.generated_units(cache, SMALL, k=2, seed=0)
    held, trained = units[0].held_out[0], units[0].generated["fitted_on"][0]

    def generated_parts(source) -> tuple[bytes, list[str]]:
        found, _ = protocols.generated_units(source, SMALL, k=2, seed=0)
        unit = found[0]
        path = save_generator(tmp_path / "g.json", protocols.fold_generator(source, tuple(unit.generated["fitted_on"])))
        mine = np.zeros(unit.cache.n_questions, dtype=bool)
        mine[unit.cache.select("train")] = mine[unit.cache.select("validation")] = True
        mine[unit.cache.select("test")[unit.parts() == 0]] = True
        return path.read_bytes(), [cache_digest(unit.cache.subset(mine))]

    before = generated_parts(cache)
    assert generated_parts(_changed_task(cache, held)) == before
    assert generated_parts(_changed_task(cache, trained)) != before


def test_more_generated_models_than_the_pool_score_the_generated_tasks_alone(tmp_path: Path, capsys) -> None:
    cache = small_cache()
    plan = dataclasses.replace(SMALL, n_models=4)
    units, scored = protocols.generated_units(cache, plan, k=2, seed=0)
    assert len(scored) == 1 and all(unit.cache.n_models == 4 and (unit.parts() == 0).all() for unit in units)
    assert units[0].cache.models[:3] == cache.models and scored[0].n_models == 4
    path = save_cache(tmp_path / "small.h5", cache)
    results = benchmark.benchmark(["global_team", "greedy_team"], [0], [path], tmp_path / "out", protocol="generated",
                                  feedback="team", folds=2, generated=plan, progress=False, plot=False)  # fmt: skip
    assert list(results["caches"]) == [f"generated({path})"]
    real = results["protocol"]["generated"]["real_tasks"][str(path)]
    assert real.startswith("not scored: the generated tasks hold 4")
    assert "the real held-out tasks are not scored" in capsys.readouterr().err


#: questions per real task of the tiny generated benchmark below (issue 47: half of small_cache's 60; its intervals
#: resample each real task's questions, 2,000 times per interval, and cost in proportion)
PER_TASK = 30
#: the tiny generated benchmark of the two tests below: mappo (the residual decider) at the tiny budget, the rules, the
#: references, 2 folds x 2 seeds
GENERATED_NAMES = ["mappo", "global_team", "greedy_team", "thompson_team", "bayes_team", "ftl_team", "hindsight_team"]


@pytest.fixture(scope="module")
def generated_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict, str]:
    """The tiny generated benchmark, run once for the tests that read it (issue 47: the residual decider's test
    trained its own mappo runs, the same ones): the cache's path, the output folder, the results and what it said on
    stderr."""
    folder = tmp_path_factory.mktemp("generated")
    path = save_cache(folder / "small.h5", small_cache(per_task=PER_TASK))
    out = folder / "out"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results = benchmark.benchmark(GENERATED_NAMES, [0, 1], [path], out, protocol="generated", feedback="team",
                                      folds=2, budget="tiny", generated=SMALL, progress=False)  # fmt: skip
    return path, out, results, err.getvalue()


def test_a_generated_benchmark_scores_each_algorithm_on_generated_and_real_tasks(
    generated_run: tuple[Path, Path, dict, str],
) -> None:
    """A tiny run: mappo at the tiny budget, the rules, the references, 2 folds x 2 seeds. Two entries in
    results.json with paired differences to every reference run; the learner trained once per fold and seed (its
    one answer set split in two); the deterministic rules run once per fold for both seeds; the rules chose on the
    generated validation tasks; the learning curves drawn once, with the generated tasks."""
    path, out, results, err = generated_run
    names = GENERATED_NAMES
    generated, real = f"generated({path})", str(path)
    assert list(results["caches"]) == [generated, real]
    stored = json.loads((out / "results.json").read_text(encoding="utf-8"))
    references = {"global_team", "greedy_team", "thompson_team", "bayes_team", "ftl_team", curves.BEST_RULE}
    for key in (generated, real):
        entry = stored["caches"][key]
        assert set(entry["mappo"]["versus"]) == references & set(stats.REFERENCES) | {"mappo(residual off)"}
        assert set(entry["hindsight_team"]["versus"]) == references
        for run in entry["mappo"]["runs"]:
            assert [fold["unit"] for fold in run["info"]["folds"]] == ["fold 1", "fold 2"]
            assert all(fold["selected_iteration"] >= 0 and fold["validation"] for fold in run["info"]["folds"])
        greedy = entry["greedy_team"]["runs"][0]["info"]["folds"][0]
        assert greedy["fitted_on"].startswith("validation tasks'") and "validation_reward" in greedy
    assert stored["caches"][real]["mappo"]["runs"][0]["info"] == stored["caches"][generated]["mappo"]["runs"][0]["info"]
    assert len(stored["caches"][generated]["global_team"]["aggregate"]["tasks"]) == 2 * SMALL.test_tasks
    assert set(stored["caches"][real]["global_team"]["aggregate"]["tasks"]) == set(
        small_cache(per_task=PER_TASK).task_names
    )
    protocol = stored["protocol"]
    assert protocol["name"] == "generated" and list(protocol["validation_lines"]) == [generated]
    assert protocol["generated"]["plan"]["train_tasks"] == SMALL.train_tasks
    assert protocol["generated"]["real_tasks"] == {real: "scored"}
    assert all(fold["generated"]["fitted_on"] for fold in protocol["folds"][real])
    lines = protocol["validation_lines"][generated]
    greedy_recorded = [fold["validation_reward"] for fold in
                       stored["caches"][generated]["greedy_team"]["runs"][0]["info"]["folds"]]  # fmt: skip
    assert [line["greedy_team"] for line in lines] == greedy_recorded  # read from the runs, not replayed
    runs = sorted(path.parent.name.rsplit("-", 1)[0] for path in (out / "runs").glob("*/*/result.json"))
    assert runs.count("mappo-seed0") == runs.count("mappo-seed1") == 2  # once per fold and seed
    assert runs.count("greedy_team-seedall") == runs.count("bayes_team-seedall") == 2  # once per fold, every seed
    assert runs.count("thompson_team-seed0") == runs.count("thompson_team-seed1") == 2  # it draws: per seed
    for key in (generated, real):
        seeds = stored["caches"][key]["bayes_team"]["runs"]
        assert [run["seed"] for run in seeds] == [0, 1] and seeds[0]["reward"] == seeds[1]["reward"]
    text = (out / "results.md").read_text(encoding="utf-8")
    assert f"## {generated}" in text and f"## {real}" in text and "| mappo | bayes_team |" in text
    assert "CPU time of the runs done now: mappo" in err
    if importlib.util.find_spec("matplotlib") is not None:
        assert sorted(p.name for p in out.glob("*.png")) == [
            "frontier_generated-small.png", "frontier_small.png", "learning_curves_generated-small.png"
        ]  # fmt: skip
    again = benchmark.benchmark(names, [0, 1], [path], out, protocol="generated", feedback="team", folds=2,
                                budget="tiny", generated=SMALL, progress=False, plot=False)  # fmt: skip
    assert again["reused_runs"] == len(runs) and again["caches"] == results["caches"]


def test_with_an_eval_cache_the_generator_fits_every_task_and_the_eval_cache_is_scored(tmp_path: Path) -> None:
    """One unit: the generator fitted on all of --cache, the eval cache's tasks held out; serial and parallel runs
    (the deterministic rules shared across seeds) give the same results."""
    train = save_cache(tmp_path / "train.h5", small_cache(n_tasks=4))
    other = save_cache(tmp_path / "other.h5", small_cache(n_tasks=3, seed=7))
    names = ["global_team", "greedy_team", "thompson_team", "ftl_team"]
    serial = benchmark.benchmark(names, [0, 1], [train], tmp_path / "serial", protocol="generated", feedback="team",
                                 eval_cache=other, generated=SMALL, progress=False, plot=False)  # fmt: skip
    parallel = benchmark.benchmark(names, [0, 1], [train], tmp_path / "parallel", protocol="generated",
                                   feedback="team", eval_cache=other, generated=SMALL, progress=False, plot=False,
                                   jobs=2)  # fmt: skip
    assert serial["caches"] == parallel["caches"]
    assert list(serial["caches"]) == [f"generated({train})", str(other)]
    (fold,) = serial["protocol"]["folds"][str(train)]
    assert fold["label"] == "all tasks" and fold["generated"]["fitted_on"] == list(small_cache(n_tasks=4).task_names)
    assert set(serial["caches"][str(other)]["global_team"]["aggregate"]["tasks"]) == set(
        small_cache(n_tasks=3, seed=7).task_names
    )
    with pytest.raises(ValueError, match="holds the same cache as --cache"):
        benchmark.benchmark(names, [0], [train], tmp_path / "x", protocol="generated", eval_cache=train,
                            generated=SMALL, progress=False, plot=False)  # fmt: skip


def test_the_refusals_name_the_option(tmp_path: Path, capsys) -> None:
    from ensemble_env.cli import main

    path = save_cache(tmp_path / "small.h5", small_cache())
    with pytest.raises(ValueError, match=r"--generated-models .* goes with --protocol generated"):
        benchmark.benchmark(["global_team"], [0], [path], tmp_path / "a", generated=SMALL, progress=False)
    base = ["benchmark", "--cache", str(path), "--algorithms", "global_team", "--seeds", "1", "--out",
            str(tmp_path / "b"), "--no-progress"]  # fmt: skip
    for extra, message in (
        (["--generated-models", "4"], "--generated-models 4 goes with --protocol generated"),
        (["--protocol", "generated", "--generated-models", "0"], "--generated-models: must be a whole number in 1.."),
    ):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_the_task_bootstrap_resamples_seeds_and_whole_tasks() -> None:
    """``resample="tasks"`` against a direct computation on the same draws: each resample is the mean over its
    drawn seeds of the total over its drawn tasks, per question (macro: the mean of the drawn tasks' means)."""
    rng = np.random.default_rng(3)
    tasks = np.repeat([4, 1, 7], [3, 5, 2])
    values = rng.normal(size=(2, tasks.size))
    for macro in (False, True):
        point, low, high = stats.bootstrap_interval(values, tasks, macro=macro, n_resamples=50, resample="tasks")
        draws_rng = np.random.default_rng(0)
        draws = draws_rng.integers(0, 2, (50, 2))
        picks = draws_rng.integers(0, 3, (50, 3))
        ids = np.unique(tasks)
        samples = []
        for r in range(50):
            chosen = [values[draws[r]][:, tasks == ids[t]] for t in picks[r]]  # (seeds, questions of the task)
            if macro:
                samples.append(np.mean([part.mean() for part in chosen]))
            else:
                samples.append(sum(part.sum(axis=1).mean() for part in chosen) / sum(part.shape[1] for part in chosen))
        np.testing.assert_allclose([low, high], np.quantile(samples, [0.025, 0.975]), rtol=1e-12)
        expected = np.mean([values[:, tasks == task].mean() for task in ids]) if macro else values.mean()
        assert point == pytest.approx(expected)
    with pytest.raises(ValueError, match="resample must be one of questions, tasks"):
        stats.bootstrap_interval(values, tasks, macro=False, resample="seeds")


def test_a_residual_decider_is_also_scored_with_its_network_off(generated_run: tuple[Path, Path, dict, str]) -> None:
    """With the residual decider, each run's deployed checkpoint also plays the test tasks with its network off:
    ``mappo(residual off)`` in results.json, paired with mappo (``versus``), the same checkpoint (its
    selected_iteration), other answers; the learner's own records do not keep the ablation's answers twice. On the
    tiny generated benchmark above (``generated_run``)."""
    assert protocols.GENERATED_LEARNER["decider_policy"] == "residual"  # the generated protocol's decider
    _, out, results, _ = generated_run
    for entry in results["caches"].values():
        assert "mappo(residual off)" in entry["mappo"]["versus"] and "global_team" in entry["mappo"]["versus"]
        on, off = entry["mappo"]["runs"][0], entry["mappo(residual off)"]["runs"][0]
        assert [f["selected_iteration"] for f in on["info"]["folds"]] == [
            f["selected_iteration"] for f in off["info"]["folds"]
        ]
        assert all("ablations" not in f for f in on["info"]["folds"])
        assert all(f["ablation"] == "residual off" for f in off["info"]["folds"])
    text = (out / "results.md").read_text(encoding="utf-8")
    assert "mappo(residual off)" in text


def test_an_ablation_draws_no_learning_curve_of_its_own() -> None:
    play = {"unit": "fold 1", "steps_per_iteration": 4, "validation": [{"iteration": 0, "validation_reward": -0.1}]}
    results = {
        "mappo": {"runs": [{"info": {"folds": [play]}}]},
        "mappo(residual off)": {"runs": [{"info": {"folds": [{**play, "ablation_of": "mappo"}]}}]},
    }
    assert list(curves.learner_curves(results)) == ["mappo"]


def test_first_questions_replays_each_run_and_answers_a_learner_s_teams_by_their_mean_vote(
    generated_run: tuple[Path, Path, dict, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """benchmarks/first_questions.py on the tiny generated benchmark above: per algorithm one row per generated test
    question of every fold (and seed, for a learner), whose rewards are the ones results.json scored; with
    ``mean_vote`` a learner's teams answered by their members' mean vote, the rules' fuser (a rule gets no such
    row), whose rewards are those of ``mean_vote`` on the same teams."""
    path, out, results, _ = generated_run
    script = import_benchmark(monkeypatch, "first_questions")
    sys.modules.pop("first_questions")  # the module object is all the test needs: forgotten now
    found = script.positions(out, str(path), 0, 1.0, mean_vote=True, plan=SMALL, folds=2)
    assert "mappo(mean vote)" in found and "greedy_team(mean vote)" not in found
    scored = results["caches"][f"generated({path})"]
    for name in ("mappo", "greedy_team", "mappo(residual off)"):
        assert found[name][:, 2].mean() == pytest.approx(scored[name]["aggregate"]["reward"]["mean"], abs=1e-9)
    # a rule answers by its members' mean vote: taken for a learner, its mean-vote rows are its own rows
    monkeypatch.setitem(script.algorithms.ALGORITHMS, "greedy_team", script.algorithms.ALGORITHMS["mappo"])
    again = script.positions(out, str(path), 0, 1.0, mean_vote=True, plan=SMALL, folds=2)
    assert np.array_equal(again["greedy_team(mean vote)"], again["greedy_team"])
    mine, voted = found["mappo"], found["mappo(mean vote)"]
    assert np.array_equal(mine[:, :2], voted[:, :2])  # the same questions and teams, answered otherwise
    assert (mine[:, 0] >= 1).all() and (mine[:, 0] == 1).sum() == 2 * 2 * SMALL.test_tasks  # 2 folds x 2 seeds
    # per seed: each seed of the learner its own rows, the pooled rows together; a rule run for all seeds keeps its name
    split = script.positions(out, str(path), 0, 1.0, plan=SMALL, folds=2, per_seed=True)
    seeds = [split["mappo (seed 0)"], split["mappo (seed 1)"]]
    assert "mappo" not in split and np.array_equal(split["greedy_team"], found["greedy_team"])
    assert sorted(map(tuple, np.concatenate(seeds))) == sorted(map(tuple, mine))
    assert all((rows[:, 0] == 1).sum() == 2 * SMALL.test_tasks for rows in seeds)  # 2 folds each
