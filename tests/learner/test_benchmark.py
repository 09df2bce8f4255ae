"""ensemble-env benchmark: the table, resumption, validation-only selection, bootstrap intervals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from testing.caches import flip_labels

from ensemble_env.baselines import comparison
from ensemble_env.synthetic import make_cache
from ensemble_mappo import benchmark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "register_algorithm.py"


def small_cache(n_questions: int = 600):
    """Two tasks, four models; a quarter of the train questions moved to a validation split."""
    cache = make_cache(n_models=4, n_questions=n_questions, n_tasks=2, accuracy=[0.5, 0.6, 0.7, 0.8], seed=1)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2
    return dataclasses.replace(cache, split=split)


@pytest.fixture
def cache_file(tmp_path: Path) -> str:
    from ensemble_env.cache import save_cache

    path = tmp_path / "small.h5"
    save_cache(path, small_cache())
    return str(path)


def test_interval_of_a_known_input():
    tasks = np.zeros(1, dtype=np.int64)
    assert benchmark.bootstrap_interval(np.array([[0.0], [1.0]]), tasks, macro=False) == (0.5, 0.0, 1.0)
    constant = np.full((3, 4), 0.25)
    assert benchmark.bootstrap_interval(constant, np.array([0, 0, 1, 1]), macro=True) == (0.25, 0.25, 0.25)
    # macro averages the task means (1 and 0: 0.5); micro the questions (3 of 4: 0.75)
    values, tasks = np.array([[1.0, 1.0, 1.0, 0.0]]), np.array([0, 0, 0, 1])
    assert benchmark.bootstrap_interval(values, tasks, macro=True)[0] == 0.5
    assert benchmark.bootstrap_interval(values, tasks, macro=False)[0] == 0.75
    low, high = benchmark.bootstrap_interval(np.array([[0.0, 1.0] * 50]), np.zeros(100), macro=False)[1:]
    assert 0.38 < low < 0.42 and 0.58 < high < 0.62  # +- 1.96 x sqrt(0.25 / 100)


def _resampled_means(values, tasks, macro, resample, n_resamples, seed):
    """The resamples of bootstrap_interval written out one by one (the same draws from the same generator): each
    draws S seeds with replacement, then per task its questions (or the tasks, each whole), and averages the drawn
    values themselves."""
    rng = np.random.default_rng(seed)
    n_seeds = values.shape[0]
    draws = rng.integers(0, n_seeds, (n_resamples, n_seeds))
    ids = np.unique(tasks)
    rows = [np.flatnonzero(tasks == task) for task in ids]
    if resample == "tasks":
        picks = rng.integers(0, ids.size, (n_resamples, ids.size))
        samples = []
        for r in range(n_resamples):
            chosen = [values[draws[r]][:, rows[t]] for t in picks[r]]  # each (S, questions of task t)
            if macro:
                samples.append(np.mean([block.mean() for block in chosen]))
            else:
                samples.append(sum(block.sum() for block in chosen) / (n_seeds * sum(b.shape[1] for b in chosen)))
        return np.array(samples)
    picks = [rng.integers(0, part.size, (n_resamples, part.size)) for part in rows]
    samples = []
    for r in range(n_resamples):
        chosen = [values[draws[r]][:, part[pick[r]]] for part, pick in zip(rows, picks, strict=True)]
        if macro:
            samples.append(np.mean([block.mean() for block in chosen]))
        else:
            samples.append(np.concatenate(chosen, axis=1).mean())
    return np.array(samples)


@pytest.mark.parametrize("resample", ["questions", "tasks"])
@pytest.mark.parametrize("macro", [True, False])
def test_interval_equals_its_resamples_written_out(resample: str, macro: bool):
    """The interval's quantiles are those of the resamples computed one by one (the vectorised sums are the same
    numbers), a NaN in a drawn seed's value making its resample NaN as the mean of the drawn values would."""
    rng = np.random.default_rng(5)
    for trial in range(6):
        n_seeds, sizes = int(rng.integers(1, 5)), rng.integers(1, 9, int(rng.integers(1, 6)))
        tasks = rng.permutation(np.repeat(np.arange(sizes.size), sizes))
        values = rng.choice([-1.0, 1.0, -1.25, 0.0], size=(n_seeds, tasks.size))
        samples = _resampled_means(values, tasks, macro, resample, 64, trial)
        low, high = np.quantile(samples, [0.025, 0.975])
        found = benchmark.bootstrap_interval(values, tasks, macro=macro, n_resamples=64, seed=trial, resample=resample)
        assert found[1:] == pytest.approx((low, high), abs=1e-12)
    values[0, 0] = np.nan
    samples = _resampled_means(values, tasks, macro, "questions", 64, 0)
    found = benchmark.bootstrap_interval(values, tasks, macro=macro, n_resamples=64, seed=0)
    assert np.isnan(found[1]) == np.isnan(np.quantile(samples, 0.025))


def test_table_has_every_algorithm_and_resume_skips_finished_runs(cache_file: str, tmp_path: Path):
    benchmark.load_plugins([str(EXAMPLE)])
    calls: list[int] = []

    @benchmark.register_algorithm("counted", config={"v": 1})
    def counted(cache, seed, alpha, out_dir):
        calls.append(seed)
        test = cache.select("test")
        teams = np.zeros((test.size, cache.n_models), dtype=bool)
        teams[:, 0] = True
        return benchmark.Answers(test, cache.probs[test, 0].argmax(-1), teams)

    names = ["mappo", "ippo", "static_team", "router", "stacking", "best_single", "per_task_vote", "counted"]
    out = tmp_path / "bench"
    results = benchmark.benchmark(names, range(2), [cache_file], out, budget="tiny", progress=False)
    table = (out / "results.md").read_text(encoding="utf-8")
    for name in names:
        assert f"| {name} |" in table
    assert (out / "frontier.png").stat().st_size > 0
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    entry = saved["caches"][cache_file]["counted"]
    assert [run["seed"] for run in entry["runs"]] == [0, 1] and entry["aggregate"]["team_size"]["mean"] == 1.0
    assert calls == [0, 1] and results["reused_runs"] == 0
    assert set(entry["versus"]) == {"static_team", "best_single"}
    assert set(saved["caches"][cache_file]["static_team"]["versus"]) == {"best_single"}
    same = benchmark.paired_differences(small_cache(), results_runs(out), results_runs(out), 1.0)
    assert same == {key: {"mean": 0.0, "low": 0.0, "high": 0.0} for key in ("accuracy", "reward")}
    assert "| counted | static_team |" in table
    assert "| static_team | 100% | 1.0 | 0% | 0% |" in table  # the routing table: one team per task
    assert "| stacking | 100% |" not in table  # every model on every question: nothing routed

    again = benchmark.benchmark(names, range(3), [cache_file], out, budget="tiny", progress=False, plot=False)
    assert calls == [0, 1, 2]  # only the new seed ran
    assert again["reused_runs"] == 2 * len(names)
    redone = benchmark.benchmark(["counted"], range(1), [cache_file], out, alpha=0.5, progress=False, plot=False)
    assert calls == [0, 1, 2, 0] and redone["reused_runs"] == 0  # another alpha is another run


def results_runs(out: Path) -> list[dict]:
    """The stored runs of the "counted" algorithm, as benchmark() passes them to paired_differences."""
    runs = []
    for path in sorted((out / "runs").glob("*/counted-seed*/result.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        runs.append({**record, "algorithm": "counted", "seed": record["key"]["seed"]})
    return runs


#: the learner's options the label-flip test covers: the defaults (the expected credit, the offline start from the
#: train outcomes, its KL trust region), and every decider option away from them (the other credits, the size
#: prior, the offline start's temperature, the decider's own entropy bonus, the window)
LEARNER_OPTIONS = {
    "defaults": {},
    "per-task mean start": {"offline_estimator": "mean"},
    "pooled start": {"offline_estimator": "pooled"},
    "greedy credit, size prior": {
        "decider_credit": "greedy",
        "decider_start": "prior",
        "decider_initial_prob": 0.25,
        "decider_kl_coef": 0.0,
    },
    "sampled credit, offline start, entropy, window": {
        "decider_credit": "sampled",
        "offline_temperature": 0.1,
        "decider_kl_coef": 0.2,
        "decider_ent_coef": 0.0,
        "env": {"window": 32},
    },
}


#: ... each under the benchmark's checkpoint rule (the safe one), and the defaults under the other rule too
LABEL_FLIP_CASES = {
    **{f"{name}, safe": (options, "safe") for name, options in LEARNER_OPTIONS.items()},
    "defaults, best": ({}, "best"),
}


@pytest.mark.parametrize(("options", "selection"), list(LABEL_FLIP_CASES.values()), ids=list(LABEL_FLIP_CASES))
def test_test_labels_do_not_influence_the_selected_checkpoint(tmp_path: Path, options: dict, selection: str):
    cache = small_cache()
    test = cache.select("test")
    flipped = flip_labels(cache, test)
    chosen = []
    for index, which in enumerate((cache, flipped)):
        answers = benchmark.learner_answers(
            which, 0, 1.0, tmp_path / str(index), passes=30.0, checkpoints=3, overrides=options, selection=selection
        )
        chosen.append((answers.info["selected_iteration"], answers.info["validation"], answers.predictions.tolist()))
        chosen[-1] += (answers.teams.tolist(), answers.info["checkpoint"])
    # the candidates: the start (update 0) and the 3 checkpoints, each with its paired gain over the start
    assert chosen[0][1][0]["iteration"] == 0 and len(chosen[0][1]) == 4
    assert chosen[0][1][0]["gain_over_start"] == 0.0
    assert chosen[0] == chosen[1]
    if not options:
        scores = [benchmark.registry.baseline("router")(which, 0, 1.0, tmp_path).teams for which in (cache, flipped)]
        assert np.array_equal(*scores)


def test_the_headroom_is_in_every_table_and_the_oracles_are_marked(cache_file: str, tmp_path: Path):
    """static_team fitted on train + validation (a competitor) and the best fixed team per task on test (it reads
    the test labels: a reference), in the default algorithms and marked in the tables."""
    from ensemble_env.baselines import routing

    assert {"static_team(train+val)", "oracle_team(test)"} <= set(benchmark.DEFAULT_ALGORITHMS)
    assert [benchmark.uses_test_labels(name) for name in ("mappo", "static_team", "static_team(train+val)")] == [
        False,
        False,
        False,
    ]
    assert benchmark.uses_test_labels("oracle_team(test)") and benchmark.uses_test_labels("oracle")
    names = ["static_team", "static_team(train+val)", "oracle_team(test)", "best_single", "oracle"]
    results = benchmark.benchmark(names, range(1), [cache_file], tmp_path, progress=False, plot=False)
    table = (tmp_path / "results.md").read_text(encoding="utf-8")
    for name in names:
        role = benchmark.TEST_LABELS_ROLE if name in ("oracle_team(test)", "oracle") else "competitor"
        assert f"| {name} | {role} |" in table
    assert "| best_single | static_team(train+val) |" in table  # every competitor paired with it
    # what the two fit on
    cache = small_cache()
    train, validation, test = (cache.select(split) for split in ("train", "validation", "test"))
    both = routing.static_team(cache, np.concatenate([train, validation]), test)
    hindsight = routing.static_team(cache, test, test)
    per = results["caches"][cache_file]
    stored = [json.loads(path.read_text()) for path in (tmp_path / "runs").glob("*/*/result.json")]
    for name, expected in (("static_team(train+val)", both), ("oracle_team(test)", hindsight)):
        (run,) = [record for record in stored if record["key"]["algorithm"] == name]
        assert np.array_equal(np.asarray(run["teams"], dtype=bool), expected.teams), name
        assert per[name]["uses_test_labels"] == (name == "oracle_team(test)")
    rewards = {name: per[name]["aggregate"]["reward"]["mean"] for name in names}
    assert rewards["oracle_team(test)"] >= max(rewards["static_team"], rewards["static_team(train+val)"])
    # flipping the test labels moves the oracle, never the competitor
    flipped = flip_labels(cache, test)
    teams = {which: {name: benchmark.registry.baseline(name)(c, 0, 1.0, tmp_path).teams for name in names[1:3]}
             for which, c in (("same", cache), ("flipped", flipped))}  # fmt: skip
    assert np.array_equal(teams["same"]["static_team(train+val)"], teams["flipped"]["static_team(train+val)"])
    assert not np.array_equal(teams["same"]["oracle_team(test)"], teams["flipped"]["oracle_team(test)"])


def test_registration_and_answers_are_checked(cache_file: str, tmp_path: Path):
    with pytest.raises(ValueError, match="built-in"):
        benchmark.register_algorithm("mappo")

    @benchmark.register_algorithm("empty_team")
    def empty_team(cache, seed, alpha, out_dir):
        test = cache.select("test")
        return benchmark.Answers(test, np.zeros(test.size, dtype=np.int64), np.zeros((test.size, 4), dtype=bool))

    with pytest.raises(ValueError, match=r"empty_team.*a model in every row"):
        benchmark.benchmark(["empty_team"], range(1), [cache_file], tmp_path, progress=False, plot=False)
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        benchmark.benchmark(["nope"], range(1), [cache_file], tmp_path, progress=False, plot=False)


def test_ippo_critics_read_only_their_own_observation():
    import torch

    from ensemble_mappo.networks import VALUE_HEADS, LocalCritics

    torch.manual_seed(0)
    critics = LocalCritics(decider_size=5, fusion_size=3, hidden=8)
    state = torch.randn(4, 8)
    changed = state.clone()
    changed[:, 5:] += 1.0  # only the fusion agent's observation
    before, after = critics(state), critics(changed)
    fusion = VALUE_HEADS.index("fusion")
    others = [index for index in range(len(VALUE_HEADS)) if index != fusion]
    assert torch.equal(before[:, others], after[:, others])
    assert not torch.equal(before[:, fusion], after[:, fusion])


def test_team_changes_counts_modes_changes_and_flip_flops():
    a, b, c = [True, False, False], [False, True, False], [False, False, True]
    teams = np.array([a, b, a, a, c, c, c, c])  # task 0: a b a a (2 changes, one A-B-A); task 1: c c c c
    tasks = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    stats = benchmark.team_changes(teams, tasks)
    assert stats == {"mode_share": 7 / 8, "teams_per_task": 1.5, "change_rate": 2 / 6, "flip_flops": 1 / 2}
    assert benchmark.stats.mode_teams(teams, tasks).tolist() == [a, a, a, a, c, c, c, c]


def test_team_changes_and_mode_teams_match_a_loop_over_each_task_s_sequence():
    """The whole-array forms against the per-task loop they replace, on interleaved tasks (a task's questions need
    not be contiguous), tasks of one question, and ties between most used teams (the team first used wins)."""
    rng = np.random.default_rng(3)
    tasks = rng.integers(0, 40, 900) * 7  # ids with gaps, interleaved
    tasks[:3] = [1000, 1001, 1002]  # tasks of one question
    teams = rng.random((900, 4)) < 0.3
    teams[~teams.any(axis=1), 0] = True
    codes = teams.astype(int) @ (1 << np.arange(4))
    on_mode, distinct, changes, pairs, flips = 0, [], 0, 0, 0
    expected_modes = np.empty_like(teams)
    for task in np.unique(tasks):
        rows = np.flatnonzero(tasks == task)
        sequence = codes[rows]
        values, first, counts = np.unique(sequence, return_index=True, return_counts=True)
        on_mode += counts.max()
        distinct.append(values.size)
        changed = sequence[1:] != sequence[:-1]
        changes, pairs = changes + changed.sum(), pairs + rows.size - 1
        flips += (changed[1:] & (sequence[2:] == sequence[:-2])).sum()
        best = max(range(values.size), key=lambda k: (counts[k], -first[k]))
        expected_modes[rows] = teams[rows[first[best]]]
    assert benchmark.team_changes(teams, tasks) == {
        "mode_share": on_mode / 900,
        "teams_per_task": float(np.mean(distinct)),
        "change_rate": changes / pairs,
        "flip_flops": flips / changes,
    }
    np.testing.assert_array_equal(benchmark.stats.mode_teams(teams, tasks), expected_modes)


def test_routing_counterfactuals_of_a_vote_of_fixed_teams_are_the_algorithm_itself(tmp_path: Path):
    """static_team answers by its team's vote with one team per task: both counterfactuals reproduce its
    scores exactly; a team that changes every question is counted as such."""
    cache = small_cache()
    test = cache.select("test")
    tasks = np.asarray(cache.tasks)[test]
    (result,) = comparison.compare(cache, split="test", train_split="train", names=["static_team"])
    run = {
        "algorithm": "static_team",
        "seed": 0,
        **benchmark.answers.answers_to_json(benchmark.registry.baseline("static_team")(cache, 0, 1.0, tmp_path)),
    }
    summary = benchmark.routing(cache, [run], 1.0)
    assert summary["mode_share"] == 1.0 and summary["change_rate"] == 0.0 and summary["teams_per_task"] == 1.0
    for label in ("teams_by_vote", "task_team_by_vote"):
        assert summary[label]["accuracy"]["mean"] == pytest.approx(np.mean(list(result.task_accuracy(cache).values())))
    alternating = np.zeros((test.size, cache.n_models), dtype=bool)
    for task in np.unique(tasks):  # within each task (in playing order): models 0, 1, 0, 1, ...
        rows = np.flatnonzero(tasks == task)
        alternating[rows, np.arange(rows.size) % 2] = True
    flipping = {**run, "teams": alternating.astype(np.int8).tolist()}
    stats = benchmark.routing(cache, [flipping], 1.0)
    sizes = np.bincount(tasks)
    assert stats["change_rate"] == 1.0 and stats["teams_per_task"] == 2.0
    assert stats["flip_flops"] == pytest.approx((sizes - 2).sum() / (sizes - 1).sum())  # all but each first change
    # without per-question routing each task keeps its most used team: model 0 (the first used of the tie)
    right = np.asarray(cache.probs)[test, 0].argmax(-1) == np.asarray(cache.labels)[test]
    model_0 = np.mean([right[tasks == task].mean() for task in np.unique(tasks)])
    assert stats["task_team_by_vote"]["accuracy"]["mean"] == pytest.approx(model_0)
    assert stats["task_team_by_vote"]["team_size"]["mean"] == 1.0


def test_a_learner_on_a_cache_without_validation_names_the_fix(tmp_path: Path):
    cache = make_cache(n_models=3, n_questions=200, n_tasks=2, seed=0)  # train and test only
    with pytest.raises(ValueError, match=r"split 'validation'.*cache split CACHE -o OUT\.h5 --validation-fraction"):
        benchmark.learner_answers(cache, 0, 1.0, tmp_path, passes=1.0, checkpoints=1)


def test_the_benchmark_runs_with_one_blas_thread_and_restores_the_count_after():
    """``benchmark`` runs under one BLAS thread per process (the scoring's small matrices spun a second thread for
    nothing: docs/benchmark.md, cost), and the caller's thread count is back when it returns."""
    from threadpoolctl import threadpool_info

    from ensemble_mappo.benchmark import runner

    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas_threads()
    assert before, "numpy's BLAS is not visible to threadpoolctl"
    assert runner._one_blas_thread(blas_threads)() == [1] * len(before)
    assert blas_threads() == before
    assert runner.benchmark.__wrapped__.__name__ == "benchmark"  # the public entry is the wrapped one


def test_a_bootstrap_draws_the_same_whether_its_draws_are_kept_or_drawn_anew(monkeypatch: pytest.MonkeyPatch):
    """The question bootstrap keeps small draws for the next interval and draws large ones anew: the interval is
    the same either way, and the same on a second call."""
    rng = np.random.default_rng(5)
    values, tasks = rng.random((3, 60)), np.repeat([4, 1, 9], [25, 15, 20])
    kept = benchmark.bootstrap_interval(values, tasks, macro=True, n_resamples=300)
    assert benchmark.bootstrap_interval(values, tasks, macro=True, n_resamples=300) == kept
    monkeypatch.setattr(benchmark.stats, "_KEPT_DRAWS", 0)
    assert benchmark.bootstrap_interval(values, tasks, macro=True, n_resamples=300) == kept
