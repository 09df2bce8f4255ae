"""Tests of ensemble_env.synthetic: the seeded model-pool simulator and the planted pools."""

from __future__ import annotations

import doctest
import itertools
import statistics
from typing import Any

import numpy as np
import pytest

from ensemble_env import synthetic
from ensemble_env.cache import LogitCache, load_cache, save_cache
from ensemble_env.synthetic import PLANTED_KINDS, make_cache, norm_ppf, planted_cache


def mean_pairwise_phi(correct: np.ndarray) -> float:
    """Mean over model pairs of the phi (Pearson) correlation of their (Q,) correctness vectors."""
    corr = np.corrcoef(correct.T.astype(np.float64))
    upper = np.triu_indices(correct.shape[1], k=1)
    return float(corr[upper].mean())


def fused_accuracy(cache: LogitCache, team: tuple[int, ...]) -> float:
    """Accuracy of the team's mean-probability vote (ties to the lowest choice)."""
    fused = cache.probs[:, list(team)].mean(axis=1).argmax(axis=1)
    return float((fused == cache.labels).mean())


def wrong_agreement(cache: LogitCache) -> float:
    """Among pairs of models that are both wrong on a question, the fraction giving the same answer."""
    wrong = ~cache.correct
    same = pairs = 0
    for a, b in itertools.combinations(range(cache.n_models), 2):
        both = wrong[:, a] & wrong[:, b]
        pairs += int(both.sum())
        same += int((both & (cache.preds[:, a] == cache.preds[:, b])).sum())
    return same / pairs


# -- the module's own examples ------------------------------------------------------------------------------
def test_docstring_examples() -> None:
    result = doctest.testmod(synthetic, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0


def test_norm_ppf_matches_statistics() -> None:
    p = np.concatenate([np.logspace(-12, -1, 60), np.linspace(0.01, 0.99, 199), 1 - np.logspace(-12, -1, 60)])
    exact = np.array([statistics.NormalDist().inv_cdf(float(x)) for x in p])
    np.testing.assert_allclose(norm_ppf(p), exact, rtol=2e-9, atol=1e-9)
    assert norm_ppf(np.array([[0.5]])).shape == (1, 1)
    with pytest.raises(ValueError, match="p must be"):
        norm_ppf([0.0, 0.5])


# -- make_cache: structure ----------------------------------------------------------------------------------
def test_default_cache_is_valid_and_shaped() -> None:
    cache = make_cache()
    assert isinstance(cache, LogitCache)
    assert cache.scores.shape == (2000, 8, 4)
    assert cache.scores.dtype == np.float32
    assert cache.score_kind == "logit"
    assert cache.models == tuple(f"model_{i}" for i in range(8))
    assert cache.task_names == ("task_0",)
    assert cache.costs is None
    assert cache.source.startswith("ensemble_env.synthetic.make_cache(seed=0, n_models=8, n_questions=2000")
    assert "error_correlation=0.3" in cache.source
    # the margin makes every argmax unique: no model has a tie at its top choice
    top_two = np.sort(cache.scores, axis=2)[:, :, -2:]
    assert np.all(top_two[..., 1] - top_two[..., 0] >= 1e-3 * 0.99)


def test_mixed_choice_counts_per_task() -> None:
    cache = make_cache(n_models=3, n_questions=3000, n_tasks=3, n_choices=[2, 5, 3], seed=4)
    assert cache.n_choices is not None and cache.tasks is not None
    assert cache.scores.shape == (3000, 3, 5)
    np.testing.assert_array_equal(cache.n_choices, np.array([2, 5, 3])[cache.tasks])
    valid = np.arange(5)[None, :] < cache.n_choices[:, None]
    assert np.all(cache.scores[np.broadcast_to(~valid[:, None, :], cache.scores.shape)] == 0.0)
    assert np.all(cache.labels < cache.n_choices)
    assert np.all(cache.preds < cache.n_choices[:, None])
    # tasks are balanced and mixed along the stream; labels are uniform over each task's choices
    np.testing.assert_array_equal(np.bincount(cache.tasks), [1000, 1000, 1000])
    assert len(set(cache.tasks[:30].tolist())) == 3
    for task, count in enumerate((2, 5, 3)):
        frequencies = np.bincount(cache.labels[cache.tasks == task], minlength=count) / 1000
        np.testing.assert_allclose(frequencies, 1 / count, atol=0.05)


def test_round_trip_through_hdf5(tmp_path: Any) -> None:
    cache = make_cache(
        n_models=3,
        n_questions=400,
        n_tasks=2,
        n_choices=(3, 4),
        costs=[0.5, 1.0, 0.0],
        model_names=["a", "b", "c"],
        task_names=["math", "law"],
        seed=3,
    )
    path = save_cache(tmp_path / "synthetic.h5", cache)
    loaded = load_cache(path)
    for name in ("scores", "labels", "n_choices", "tasks", "split", "costs", "probs", "preds", "correct"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(cache, name), err_msg=name)
    assert loaded.models == ("a", "b", "c")
    assert loaded.task_names == ("math", "law")
    assert loaded.score_kind == "logit"
    assert loaded.source == cache.source


def test_same_seed_same_arrays_and_different_seed_differs() -> None:
    kwargs: dict[str, Any] = {"n_models": 5, "n_questions": 1000, "n_tasks": 2, "drift": 0.2}
    first, again, other = make_cache(seed=11, **kwargs), make_cache(seed=11, **kwargs), make_cache(seed=12, **kwargs)
    for name in ("scores", "labels", "tasks", "split", "n_choices"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name), err_msg=name)
    assert first.source == again.source
    assert first.tasks is not None and other.tasks is not None
    assert not np.array_equal(first.scores, other.scores)
    assert not np.array_equal(first.labels, other.labels)
    assert not np.array_equal(first.tasks, other.tasks)
    assert "seed=12" in other.source
    a, b = planted_cache("dominant", seed=5), planted_cache("dominant", seed=5)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert not np.array_equal(a.scores, planted_cache("dominant", seed=6).scores)


def test_split_is_the_last_fraction_of_each_task() -> None:
    cache = make_cache(n_models=2, n_questions=2001, n_tasks=3, test_fraction=0.25, seed=2)
    assert cache.tasks is not None and cache.split is not None
    for task in range(3):
        index = np.flatnonzero(cache.tasks == task)
        split = cache.split[index]
        assert split.sum() == int(np.floor(0.25 * index.size + 0.5))
        assert set(split.tolist()) == {0, 1}
        assert index[split == 0].max() < index[split == 1].min()  # test questions come last in the stream
    np.testing.assert_array_equal(make_cache(n_questions=100, test_fraction=0.0).split, 0)
    np.testing.assert_array_equal(make_cache(n_questions=100, test_fraction=1.0).split, 1)
    assert cache.select("test").size == int(np.sum(cache.split))


# -- make_cache: the statistical knobs ----------------------------------------------------------------------
def test_accuracy_per_model_and_task_hits_target() -> None:
    target = np.array([[0.2, 0.55], [0.5, 0.7], [0.75, 0.9], [0.95, 0.35]])  # 0.2 is below chance for 4 choices
    cache = make_cache(
        n_models=4, n_questions=20000, n_tasks=2, n_choices=[4, 3], accuracy=target, error_correlation=0.3, seed=0
    )
    for task in range(2):
        measured = cache.correct[cache.tasks == task].mean(axis=0)
        np.testing.assert_allclose(measured, target[:, task], atol=0.03)
    per_model = make_cache(n_models=3, n_questions=20000, accuracy=[0.3, 0.6, 0.85], seed=1)
    np.testing.assert_allclose(per_model.model_accuracy(), [0.3, 0.6, 0.85], atol=0.03)


def test_error_correlation_increases_with_rho() -> None:
    phis = [
        mean_pairwise_phi(make_cache(n_models=6, n_questions=20000, error_correlation=rho, seed=0).correct)
        for rho in (0.0, 0.3, 0.7)
    ]
    assert abs(phis[0]) < 0.02
    assert phis[0] + 0.1 < phis[1] < phis[2] - 0.1
    # the marginal accuracy does not move with rho
    for rho in (0.0, 0.7):
        cache = make_cache(n_models=6, n_questions=20000, error_correlation=rho, seed=0)
        np.testing.assert_allclose(cache.model_accuracy(), 0.7, atol=0.03)


def test_shared_wrong_answer_increases_agreement_of_wrong_models() -> None:
    agreement = {}
    for shared in (0.0, 0.5, 1.0):
        cache = make_cache(n_models=6, n_questions=10000, accuracy=0.5, shared_wrong_answer=shared, seed=0)
        agreement[shared] = wrong_agreement(cache)
    # with 4 choices a wrong model gives the distractor with p = s + (1 - s) / 3, another class (1 - p) / 2
    for shared, value in agreement.items():
        p = shared + (1 - shared) / 3
        assert value == pytest.approx(p**2 + 2 * ((1 - p) / 2) ** 2, abs=0.02)
    assert agreement[0.0] < agreement[0.5] < agreement[1.0] == 1.0


def test_drift_changes_accuracy_along_the_stream() -> None:
    drift = np.array([0.3, -0.4, 0.0])
    cache = make_cache(n_models=3, n_questions=20000, accuracy=0.6, drift=drift, error_correlation=0.0, seed=0)
    fifth = cache.n_questions // 5
    first = cache.correct[:fifth].mean(axis=0)
    last = cache.correct[-fifth:].mean(axis=0)
    # the mean positions of the first and last fifths are 0.1 and 0.9: the change is 0.8 * drift
    np.testing.assert_allclose(last - first, 0.8 * drift, atol=0.04)
    np.testing.assert_allclose(cache.model_accuracy(), 0.6, atol=0.02)
    # drifted accuracy is clipped to [0.01, 0.99]
    clipped = make_cache(n_models=1, n_questions=20000, accuracy=0.9, drift=1.0, error_correlation=0.0, seed=0)
    assert clipped.correct[-fifth:].mean() == pytest.approx(0.99, abs=0.01)


def test_confidence_sharpens_probabilities() -> None:
    peaks = [float(make_cache(n_questions=2000, confidence=c, seed=0).probs.max(axis=2).mean()) for c in (0.5, 2, 8)]
    assert peaks[0] < peaks[1] < peaks[2]
    low = make_cache(n_questions=2000, confidence=0.5, seed=0)
    high = make_cache(n_questions=2000, confidence=8, seed=0)
    np.testing.assert_array_equal(low.correct, high.correct)  # common random numbers: same answers


def test_large_pool_shapes() -> None:
    cache = make_cache(n_models=12, n_questions=100_000, n_choices=4, drift=0.1, seed=0)
    assert cache.scores.shape == (100_000, 12, 4)
    assert cache.correct.mean() == pytest.approx(0.7, abs=0.02)


# -- make_cache: validation ---------------------------------------------------------------------------------
INVALID: list[tuple[dict[str, Any], str]] = [
    ({"n_models": 0}, "n_models"),
    ({"n_models": 2.0}, "n_models"),
    ({"n_models": True}, "n_models"),
    ({"n_questions": 0}, "n_questions"),
    ({"n_questions": 2, "n_tasks": 3}, "n_questions"),
    ({"n_tasks": 0}, "n_tasks"),
    ({"n_choices": 1}, "n_choices"),
    ({"n_choices": 4.0}, "n_choices"),
    ({"n_choices": [4, 4]}, "n_choices"),
    ({"n_tasks": 2, "n_choices": [4, 1]}, "n_choices"),
    ({"n_choices": "4"}, "n_choices"),
    ({"accuracy": 0.0}, "accuracy"),
    ({"accuracy": 1.0}, "accuracy"),
    ({"accuracy": float("nan")}, "accuracy"),
    ({"accuracy": [0.5, 0.6]}, "accuracy"),
    ({"n_models": 2, "accuracy": [[0.5, 0.6]]}, "accuracy"),
    ({"n_models": 2, "accuracy": [0.5, 1.5]}, "accuracy"),
    ({"accuracy": "high"}, "accuracy"),
    ({"error_correlation": 1.0}, "error_correlation"),
    ({"error_correlation": -0.1}, "error_correlation"),
    ({"error_correlation": "0.3"}, "error_correlation"),
    ({"shared_wrong_answer": 1.5}, "shared_wrong_answer"),
    ({"shared_wrong_answer": -0.5}, "shared_wrong_answer"),
    ({"drift": [0.1, 0.2]}, "drift"),
    ({"drift": float("inf")}, "drift"),
    ({"confidence": 0.0}, "confidence"),
    ({"confidence": -1.0}, "confidence"),
    ({"confidence": float("inf")}, "confidence"),
    ({"test_fraction": 1.5}, "test_fraction"),
    ({"test_fraction": -0.1}, "test_fraction"),
    ({"costs": [1.0, 2.0]}, "costs"),
    ({"n_models": 2, "costs": [1.0, -2.0]}, "costs"),
    ({"n_models": 2, "costs": [1.0, float("nan")]}, "costs"),
    ({"n_models": 2, "model_names": ["a"]}, "model_names"),
    ({"n_models": 2, "model_names": ["a", "a"]}, "model_names"),
    ({"n_models": 2, "model_names": ["a", ""]}, "model_names"),
    ({"n_models": 2, "model_names": "ab"}, "model_names"),
    ({"n_models": 2, "model_names": ["a", 3]}, "model_names"),
    ({"n_tasks": 2, "task_names": ["x"]}, "task_names"),
    ({"n_tasks": 2, "task_names": ["x", "x"]}, "task_names"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"seed": None}, "seed"),
]


@pytest.mark.parametrize(("kwargs", "name"), INVALID, ids=[f"{n}-{i}" for i, (_, n) in enumerate(INVALID)])
def test_invalid_arguments_raise_value_error_naming_them(kwargs: dict[str, Any], name: str) -> None:
    base: dict[str, Any] = {"n_models": 3, "n_questions": 50}
    with pytest.raises(ValueError, match=name):
        make_cache(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("args", "name"),
    [(("diverse",), "kind"), (("dominant", 5), "n_questions"), (("dominant", 100, -3), "seed")],
)
def test_planted_invalid_arguments(args: tuple[Any, ...], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        planted_cache(*args)


# -- planted pools ------------------------------------------------------------------------------------------
def all_teams(n_models: int) -> list[tuple[int, ...]]:
    return [team for size in range(1, n_models + 1) for team in itertools.combinations(range(n_models), size)]


def test_planted_complementary_facts() -> None:
    cache = planted_cache("complementary", n_questions=3000, seed=0)
    assert cache.scores.shape == (3000, 6, 4)
    assert cache.task_names == ("complementary",)
    accuracy = cache.model_accuracy()
    np.testing.assert_allclose(accuracy[:2], 0.6, atol=0.01)
    np.testing.assert_allclose(accuracy[2:], 0.7, atol=0.03)
    corr = np.corrcoef(cache.correct.T.astype(np.float64))
    assert corr[0, 1] == pytest.approx(-0.25, abs=0.03)  # anti-correlated errors
    assert corr[2:, 2:][np.triu_indices(4, k=1)].min() > 0.75  # redundant copies
    pair = fused_accuracy(cache, (0, 1))
    assert pair >= 0.87
    assert pair >= max(fused_accuracy(cache, (m,)) for m in range(6)) + 0.15
    # {0, 1} is the best team of all 63, by a clear margin
    scores = {team: fused_accuracy(cache, team) for team in all_teams(6)}
    runner_up = max(value for team, value in scores.items() if team != (0, 1))
    assert max(scores, key=scores.__getitem__) == (0, 1)
    assert pair > runner_up + 0.01
    np.testing.assert_array_equal(cache.split, np.arange(3000) >= 2400)


def test_planted_dominant_facts() -> None:
    cache = planted_cache("dominant", n_questions=3000, seed=0)
    assert cache.models[0] == "strong"
    accuracy = cache.model_accuracy()
    assert accuracy[0] == pytest.approx(0.95, abs=0.015)
    np.testing.assert_allclose(accuracy[1:], 0.55, atol=0.03)
    weak_phi = mean_pairwise_phi(cache.correct[:, 1:])
    assert weak_phi > 0.3  # the weak models err together
    scores = {team: fused_accuracy(cache, team) for team in all_teams(6)}
    best = max(scores, key=scores.__getitem__)
    assert best == (0,)
    assert scores[(0,)] > max(value for team, value in scores.items() if team != (0,)) + 0.1


@pytest.mark.parametrize("kind", PLANTED_KINDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_planted_structure_holds_across_seeds(kind: str, seed: int) -> None:
    cache = planted_cache(kind, n_questions=2000, seed=seed)
    best = (0, 1) if kind == "complementary" else (0,)
    scores = {team: fused_accuracy(cache, team) for team in all_teams(6)}
    assert max(scores, key=scores.__getitem__) == best
    assert cache.source == f"ensemble_env.synthetic.planted_cache({kind!r}, n_questions=2000, seed={seed})"
