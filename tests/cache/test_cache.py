"""Tests of ensemble_env.cache: LogitCache, load_cache, save_cache and the rules of docs/cache-format.md.

The tiny cache (tests/testing/caches.py) has a table of which model is right on which question; the expected
values below are written by hand from that table and from the scores, not computed with the module.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from testing.caches import (
    ARRAY_FIELDS,
    COMPUTED_FIELDS,
    TEXTS,
    assert_same_cache,
    cache_fields,
    names_field,
    rebuild,
)

from ensemble_env.cache import (
    CacheError,
    LogitCache,
    default_cache_path,
    load_cache,
    load_default_cache,
    save_cache,
)

# from the table in testing/caches.py
EXPECTED_PREDS = np.array([[0, 0, 1], [1, 2, 1], [2, 2, 0], [1, 0, 1], [0, 1, 2], [1, 2, 0]])
EXPECTED_CORRECT = np.array(
    [
        [True, True, False],
        [True, False, True],
        [True, True, False],
        [True, False, True],
        [True, False, False],
        [False, True, False],
    ]
)


def _changed(array: np.ndarray, index: Any, value: Any) -> np.ndarray:
    copy = np.array(array)
    copy[index] = value
    return copy


# -- the tiny cache itself ---------------------------------------------------------------------------


def test_tiny_cache_sizes_preds_and_correct(tiny_cache: LogitCache) -> None:
    assert (tiny_cache.n_questions, tiny_cache.n_models, tiny_cache.max_choices, tiny_cache.n_tasks) == (6, 3, 3, 2)
    assert tiny_cache.path == "<memory>"
    assert tiny_cache.preds.dtype == np.int64
    assert tiny_cache.correct.dtype == np.bool_
    np.testing.assert_array_equal(tiny_cache.preds, EXPECTED_PREDS)
    np.testing.assert_array_equal(tiny_cache.correct, EXPECTED_CORRECT)
    # the padding score 5.0 of question 3 (beyond its 2 choices) never wins
    assert not np.any(tiny_cache.preds[3] == 2)


def test_defaults_when_optional_fields_are_absent() -> None:
    cache = LogitCache(scores=np.zeros((2, 2, 3)), labels=np.array([0, 2]), models=["a", "b"], score_kind="logit")
    np.testing.assert_array_equal(cache.n_choices, [3, 3])
    np.testing.assert_array_equal(cache.tasks, [0, 0])
    np.testing.assert_array_equal(cache.split, [0, 0])
    assert cache.task_names == ("default",)
    assert cache.models == ("a", "b")
    assert cache.question_ids is None and cache.costs is None and cache.features is None
    assert cache.question_text is None and cache.feature_names is None and cache.feature_kind == ""


# -- round trip --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_round_trip_preserves_every_field(tiny_cache: LogitCache, tmp_path: Path, dtype: type) -> None:
    cache = rebuild(tiny_cache, scores=tiny_cache.scores.astype(dtype))
    target = tmp_path / "cache.h5"
    assert save_cache(target, cache) == target
    loaded = load_cache(target)
    assert loaded.scores.dtype == np.dtype(dtype)
    assert loaded.path == str(target)
    assert_same_cache(loaded, cache)
    np.testing.assert_array_equal(loaded.correct, EXPECTED_CORRECT)


def test_round_trip_without_optional_fields_and_without_compression(tmp_path: Path) -> None:
    cache = LogitCache(
        scores=np.array([[[0.2, 0.8], [0.6, 0.4]]]), labels=np.array([1]), models=("a", "b"), score_kind="prob"
    )
    loaded = load_cache(save_cache(tmp_path / "plain.h5", cache, compression=None))
    assert_same_cache(loaded, cache)
    assert loaded.question_ids is None and loaded.costs is None and loaded.features is None
    assert loaded.source == ""


@pytest.mark.parametrize("compression", ["gzip", None])
def test_round_trip_of_question_text_and_feature_metadata(
    tiny_cache: LogitCache, tmp_path: Path, compression: str | None
) -> None:
    features = np.linspace(-1, 1, 18, dtype=np.float32).reshape(6, 3)
    cache = rebuild(
        tiny_cache, question_text=TEXTS, features=features, feature_names=("f0", "f1", "f2"), feature_kind="test-kind"
    )
    target = save_cache(tmp_path / "text.h5", cache, compression=compression)
    loaded = load_cache(target)
    assert_same_cache(loaded, cache)
    assert loaded.question_text == TEXTS and loaded.features.dtype == np.float32
    with h5py.File(target, "r") as h5file:
        assert h5py.check_string_dtype(h5file["question_text"].dtype).length is not None  # fixed-length strings
        assert h5file["features"].attrs["feature_kind"] == b"test-kind"
        assert [h5file[name].compression for name in ("scores", "labels")] == [compression] * 2
    plain = load_cache(save_cache(tmp_path / "none.h5", tiny_cache))
    assert plain.question_text is None and plain.feature_names is None and plain.feature_kind == ""


def test_hand_written_question_text_and_feature_attributes(write_cache: Callable[..., Path]) -> None:
    def features_with_attributes(h5file: h5py.File, name: str) -> None:
        node = h5file.create_dataset(name, data=np.zeros((6, 2), dtype=np.float32))
        node.attrs["feature_names"] = np.array([b"a", b"b"])  # fixed-length bytes, as other writers may store
        node.attrs["feature_kind"] = np.bytes_(b"embedding")

    path = write_cache(datasets={"features": features_with_attributes, "question_text": [f"q {i}" for i in range(6)]})
    loaded = load_cache(path)
    assert loaded.feature_names == ("a", "b") and loaded.feature_kind == "embedding"
    assert loaded.question_text == tuple(f"q {i}" for i in range(6))


def test_round_trip_of_per_question_costs(tiny_cache: LogitCache, tmp_path: Path) -> None:
    costs = np.arange(18, dtype=np.float32).reshape(6, 3)
    loaded = load_cache(save_cache(tmp_path / "c.h5", rebuild(tiny_cache, costs=costs)))
    assert loaded.costs.dtype == np.float32
    np.testing.assert_array_equal(loaded.costs, costs)


def test_hand_written_file_loads_like_the_tiny_cache(tiny_cache: LogitCache, write_cache: Callable[..., Path]) -> None:
    path = write_cache()
    loaded = load_cache(path)
    assert loaded.path == str(path)
    assert_same_cache(loaded, tiny_cache)


def test_loads_names_given_as_str_path(write_cache: Callable[..., Path]) -> None:
    path = write_cache()
    assert load_cache(str(path)).path == str(path)


def test_unknown_attributes_and_datasets_are_ignored(write_cache: Callable[..., Path]) -> None:
    path = write_cache(attrs={"creator": "someone"}, datasets={"extra": np.arange(4), "notes": ["a", "b"]})
    assert load_cache(path).n_questions == 6


def test_fixed_length_byte_strings_are_read_as_names(write_cache: Callable[..., Path]) -> None:
    path = write_cache(models=np.array([b"m0", b"m1", b"m2"]), format=np.bytes_(b"ensemble-logit-cache"))
    assert load_cache(path).models == ("m0", "m1", "m2")


# -- probabilities, predictions ----------------------------------------------------------------------


def test_loglik_probs_softmax_over_valid_choices(tiny_cache: LogitCache) -> None:
    probs = tiny_cache.probs
    assert probs.dtype == np.float32
    # question 0, model m0: scores (-0.5, -1.5, -2.5) -> e^0, e^-1, e^-2 over 1 + e^-1 + e^-2
    np.testing.assert_allclose(probs[0, 0], [0.66524096, 0.24472847, 0.09003057], rtol=1e-6)
    # question 3, model m0: scores (-2, -1) plus padding 5.0 -> softmax over 2 choices only
    np.testing.assert_allclose(probs[3, 0], [0.26894142, 0.73105858, 0.0], rtol=1e-6)
    # question 1, model m1: scores (-1, -1.5, -0.5)
    np.testing.assert_allclose(probs[1, 1], [0.30719589, 0.18632372, 0.50648039], rtol=1e-6)


def test_probs_are_zero_beyond_n_choices(tiny_cache: LogitCache) -> None:
    assert np.all(tiny_cache.probs[3, :, 2] == 0.0)
    assert np.all(tiny_cache.probs[np.arange(6) != 3] > 0.0)


@pytest.mark.parametrize("kind", ["loglik", "logit"])
def test_softmax_rows_sum_to_one(tiny_cache: LogitCache, kind: str) -> None:
    cache = rebuild(tiny_cache, score_kind=kind)
    np.testing.assert_allclose(cache.probs.sum(axis=2), 1.0, rtol=1e-6)


def test_logit_probs_by_hand() -> None:
    cache = LogitCache(
        scores=np.array([[[2.0, 0.0], [0.0, 1.0]]]), labels=np.array([0]), models=("a", "b"), score_kind="logit"
    )
    np.testing.assert_allclose(cache.probs[0], [[0.88079708, 0.11920292], [0.26894142, 0.73105858]], rtol=1e-6)
    assert cache.correct.tolist() == [[True, False]]


def test_softmax_is_stable_for_large_scores() -> None:
    cache = LogitCache(
        scores=np.array([[[1000.0, 999.0], [-1000.0, -999.0]]]),
        labels=np.array([0]),
        models=("a", "b"),
        score_kind="logit",
    )
    np.testing.assert_allclose(cache.probs[0], [[0.73105858, 0.26894142], [0.26894142, 0.73105858]], rtol=1e-6)


def test_logprob_probs_are_exp_without_renormalising() -> None:
    scores = np.array([[[-1.0, -2.0, -0.5]], [[math.log(0.5), math.log(0.25), math.log(0.25)]]])
    cache = LogitCache(
        scores=scores, labels=np.array([0, 0]), models=("a",), score_kind="logprob", n_choices=np.array([2, 3])
    )
    # question 0 has 2 choices: exp(-1), exp(-2) and zero for the ignored third (whose exp(-0.5) would win)
    np.testing.assert_allclose(cache.probs[:, 0], [[0.36787944, 0.13533528, 0.0], [0.5, 0.25, 0.25]], rtol=1e-6)
    np.testing.assert_array_equal(cache.preds[:, 0], [0, 0])


def test_prob_scores_are_used_as_is() -> None:
    scores = np.array([[[0.2, 0.7, 0.9], [0.5, 0.1, 0.1]]])
    cache = LogitCache(
        scores=scores, labels=np.array([1]), models=("a", "b"), score_kind="prob", n_choices=np.array([2])
    )
    np.testing.assert_allclose(cache.probs[0], [[0.2, 0.7, 0.0], [0.5, 0.1, 0.0]], rtol=1e-6)
    assert cache.preds.tolist() == [[1, 0]]
    assert cache.correct.tolist() == [[True, False]]


@pytest.mark.parametrize("kind", ["loglik", "logit", "logprob", "prob"])
def test_ties_go_to_the_lowest_index(kind: str) -> None:
    # rows: tie on 0/1; tie on 1/2; a larger value beyond n_choices (question 1) is ignored
    scores = np.array([[[0.5, 0.5, 0.1], [0.1, 0.5, 0.5]], [[0.3, 0.3, 0.9], [0.2, 0.2, 0.2]]])
    if kind == "logprob":
        scores = np.log(scores)
    cache = LogitCache(
        scores=scores, labels=np.array([1, 0]), models=("a", "b"), score_kind=kind, n_choices=np.array([3, 2])
    )
    assert cache.preds.tolist() == [[0, 1], [0, 0]]
    assert cache.correct.tolist() == [[False, True], [True, True]]


def test_scores_kinds_from_file(write_cache: Callable[..., Path], tiny_cache: LogitCache) -> None:
    # the tiny scores are valid log-probabilities on their valid choices (the padding 5.0 is ignored)
    as_logprob = load_cache(write_cache("logprob.h5", score_kind="logprob"))
    np.testing.assert_allclose(as_logprob.probs[0, 0], np.exp([-0.5, -1.5, -2.5]), rtol=1e-6)
    assert as_logprob.probs[3, 0, 2] == 0.0
    as_prob = load_cache(write_cache("prob.h5", score_kind="prob", scores=np.exp(tiny_cache.scores)))
    np.testing.assert_allclose(as_prob.probs[0, 0], np.exp([-0.5, -1.5, -2.5]), rtol=1e-6)
    np.testing.assert_array_equal(as_prob.preds, EXPECTED_PREDS)


# -- invalid files -----------------------------------------------------------------------------------

Overrides = Callable[[dict[str, Any]], dict[str, Any]]
_SHAPE_MISMATCH = [
    pytest.param(lambda f: {"labels": f["labels"][:5]}, "labels", "shape", id="labels-shape"),
    pytest.param(lambda f: {"tasks": np.zeros(7, dtype=np.int64)}, "tasks", "shape", id="tasks-shape"),
    pytest.param(lambda f: {"split": f["split"][:5]}, "split", "shape", id="split-shape"),
    pytest.param(lambda f: {"n_choices": f["n_choices"][:5]}, "n_choices", "shape", id="n_choices-shape"),
    pytest.param(
        lambda f: {"question_ids": list(f["question_ids"][:5])}, "question_ids", "5 entries", id="question_ids-count"
    ),
    pytest.param(lambda f: {"costs": f["costs"][:2]}, "costs", "shape", id="costs-shape"),
    pytest.param(lambda f: {"costs": np.ones((5, 3))}, "costs", "shape", id="costs-2d-shape"),
    pytest.param(lambda f: {"features": f["features"][:5]}, "features", "shape", id="features-shape"),
    pytest.param(lambda f: {"question_text": ["a"] * 5}, "question_text", "5 entries", id="question_text-count"),
    pytest.param(lambda f: {"scores": f["scores"][:, :, 0]}, "scores", "shape", id="scores-2d"),
    pytest.param(lambda f: {"labels": f["labels"].reshape(2, 3)}, "labels", "shape", id="labels-2d"),
]
INVALID_FILES = [
    pytest.param(lambda f: {"drop": ("labels",)}, "labels", "missing", id="missing-labels"),
    pytest.param(lambda f: {"drop": ("scores",)}, "scores", "missing", id="missing-scores"),
    pytest.param(lambda f: {"drop": ("models",)}, "models", "missing", id="missing-models"),
    pytest.param(lambda f: {"drop": ("format",)}, "format", "missing", id="missing-format"),
    pytest.param(lambda f: {"format": "some-other-format"}, "format", "some-other-format", id="wrong-format"),
    pytest.param(lambda f: {"format_version": 2}, "format_version", "2", id="format_version-2"),
    pytest.param(lambda f: {"format_version": "1"}, "format_version", "'1'", id="format_version-str"),
    pytest.param(lambda f: {"drop": ("format_version",)}, "format_version", "missing", id="missing-format_version"),
    pytest.param(lambda f: {"drop": ("score_kind",)}, "score_kind", "missing", id="missing-score_kind"),
    pytest.param(lambda f: {"score_kind": "softmax"}, "score_kind", "'softmax'", id="bad-score_kind"),
    pytest.param(
        lambda f: {"labels": _changed(f["labels"], 3, 2)},
        "labels",
        "question 3 has label 2",
        id="label-beyond-n_choices",
    ),
    pytest.param(
        lambda f: {"labels": _changed(f["labels"], 0, 3)}, "labels", "question 0 has label 3", id="label-beyond-C"
    ),
    pytest.param(
        lambda f: {"labels": _changed(f["labels"], 1, -1)}, "labels", "question 1 has label -1", id="label-negative"
    ),
    pytest.param(
        lambda f: {"n_choices": _changed(f["n_choices"], 2, 1)},
        "n_choices",
        "question 2 has n_choices=1",
        id="n_choices-1",
    ),
    pytest.param(
        lambda f: {"n_choices": _changed(f["n_choices"], 4, 4)},
        "n_choices",
        "question 4 has n_choices=4",
        id="n_choices-above-C",
    ),
    pytest.param(
        lambda f: {"scores": _changed(f["scores"], (4, 1, 0), np.nan)},
        "scores",
        "question 4, model 'm1'",
        id="nan-score",
    ),
    pytest.param(
        lambda f: {"scores": _changed(f["scores"], (1, 2, 2), np.inf)},
        "scores",
        "question 1, model 'm2'",
        id="inf-score",
    ),
    pytest.param(
        lambda f: {"scores": _changed(f["scores"], (3, 0, 1), -np.inf)},
        "scores",
        "question 3, model 'm0'",
        id="minus-inf-score",
    ),
    pytest.param(lambda f: {"models": ["m0", "m1", "m0"]}, "models", "'m0'", id="duplicate-models"),
    pytest.param(lambda f: {"models": ["m0", "m1"]}, "models", "2 entries, expected 3", id="too-few-models"),
    pytest.param(lambda f: {"models": ["m0", "m1", "m2", "m3"]}, "models", "4 entries", id="too-many-models"),
    pytest.param(lambda f: {"models": np.arange(3)}, "models", "strings", id="numeric-models"),
    *_SHAPE_MISMATCH,
    pytest.param(
        lambda f: {"tasks": _changed(f["tasks"], 5, 2)},
        "tasks",
        "question 5 has task index 2",
        id="task-index-out-of-range",
    ),
    pytest.param(
        lambda f: {"task_names": ["alpha"]}, "tasks", "question 2 has task index 1", id="task-names-too-short"
    ),
    pytest.param(lambda f: {"task_names": ["alpha", "alpha"]}, "task_names", "'alpha'", id="duplicate-task-names"),
    pytest.param(lambda f: {"split": _changed(f["split"], 5, 3)}, "split", "question 5 has split 3", id="split-3"),
    pytest.param(lambda f: {"labels": f["labels"].astype(np.float64)}, "labels", "integers", id="float-labels"),
    pytest.param(lambda f: {"scores": f["scores"].astype(np.int64)}, "scores", "floating", id="integer-scores"),
    pytest.param(lambda f: {"costs": _changed(f["costs"], 1, -1.0)}, "costs", "non-negative", id="negative-cost"),
    pytest.param(
        lambda f: {"features": _changed(f["features"], (2, 1), np.nan)}, "features", "question 2", id="nan-feature"
    ),
    pytest.param(
        lambda f: {"features": _changed(f["features"], (4, 0), -np.inf)}, "features", "question 4", id="inf-feature"
    ),
    pytest.param(lambda f: {"question_text": np.arange(6)}, "question_text", "strings", id="numeric-question_text"),
    pytest.param(
        lambda f: {"datasets": {"features": _features_with_names(["a", "b", "c"])}},
        "feature_names",
        "3 entries, expected 2",
        id="feature_names-count",
    ),
    pytest.param(
        lambda f: {"datasets": {"features": _features_with_names(["a", "a"])}},
        "feature_names",
        "'a' appears more than once",
        id="feature_names-duplicate",
    ),
    pytest.param(
        lambda f: {"datasets": {"features": _features_with_kind(np.array([1, 2]))}},
        "feature_kind",
        "must be a string",
        id="feature_kind-array",
    ),
    pytest.param(
        lambda f: {"datasets": {"labels": lambda h5, name: h5.create_group(name)}},
        "labels",
        "Group",
        id="labels-is-a-group",
    ),
    pytest.param(
        lambda f: {"datasets": {"models": lambda h5, name: h5.create_group(name)}},
        "models",
        "Group",
        id="models-is-a-group",
    ),
    pytest.param(
        lambda f: {"score_kind": "prob", "scores": _changed(np.full((6, 3, 3), 0.3), (2, 0, 1), 1.5)},
        "scores",
        "question 2, model 'm0', choice 1",
        id="prob-above-1",
    ),
    pytest.param(
        lambda f: {"score_kind": "prob", "scores": _changed(np.full((6, 3, 3), 0.3), (5, 2, 0), -0.2)},
        "scores",
        "question 5, model 'm2', choice 0",
        id="prob-negative",
    ),
    pytest.param(
        lambda f: {"score_kind": "logprob", "scores": _changed(f["scores"], (0, 2, 1), 0.5)},
        "scores",
        "question 0, model 'm2', choice 1",
        id="logprob-positive",
    ),
]


def _features_with_names(names: list[str]) -> Callable[[h5py.File, str], None]:
    def create(h5file: h5py.File, name: str) -> None:
        node = h5file.create_dataset(name, data=np.zeros((6, 2)))
        node.attrs.create("feature_names", names, dtype=h5py.string_dtype("utf-8"))

    return create


def _features_with_kind(kind: Any) -> Callable[[h5py.File, str], None]:
    def create(h5file: h5py.File, name: str) -> None:
        h5file.create_dataset(name, data=np.zeros((6, 2))).attrs["feature_kind"] = kind

    return create


@pytest.mark.parametrize(("make", "field", "fragment"), INVALID_FILES)
def test_invalid_file_is_refused_at_load(
    make: Overrides, field: str, fragment: str, write_cache: Callable[..., Path], tiny_cache: LogitCache
) -> None:
    path = write_cache(**make(cache_fields(tiny_cache)))
    with pytest.raises(CacheError, match=names_field(path, field)) as excinfo:
        load_cache(path)
    assert isinstance(excinfo.value, ValueError)
    assert fragment in str(excinfo.value)


def test_nan_beyond_n_choices_is_ignored(write_cache: Callable[..., Path], tiny_cache: LogitCache) -> None:
    scores = _changed(tiny_cache.scores, (3, slice(None), 2), np.nan)
    loaded = load_cache(write_cache(scores=scores))
    assert np.isnan(loaded.scores[3, :, 2]).all()
    np.testing.assert_array_equal(loaded.preds, EXPECTED_PREDS)
    np.testing.assert_array_equal(loaded.probs, tiny_cache.probs)


def test_out_of_range_probabilities_beyond_n_choices_are_ignored(write_cache: Callable[..., Path]) -> None:
    scores = _changed(np.full((6, 3, 3), 0.3), (3, slice(None), 2), 7.0)
    loaded = load_cache(write_cache(score_kind="prob", scores=scores))
    assert np.all(loaded.probs[3, :, 2] == 0.0)


@pytest.mark.parametrize("content", [b"scores,labels\n0.1,0\n", b""], ids=["text", "empty"])
def test_file_that_is_not_hdf5_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "cache.h5"
    path.write_bytes(content)
    with pytest.raises(CacheError, match=re.escape(f"{path}: not an HDF5 file")):
        load_cache(path)


def test_truncated_hdf5_file_is_refused(write_cache: Callable[..., Path]) -> None:
    path = write_cache()
    path.write_bytes(path.read_bytes()[:1024])
    with pytest.raises(CacheError, match=re.escape(str(path))):
        load_cache(path)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / "absent.h5"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        load_cache(path)


# -- invalid caches built in memory ------------------------------------------------------------------

INVALID_IN_MEMORY = [
    pytest.param({"scores": np.zeros((6, 3))}, "scores", id="scores-2d"),
    pytest.param({"scores": np.zeros((6, 3, 3), dtype=np.int64)}, "scores", id="scores-int"),
    pytest.param({"scores": np.zeros((6, 3, 1))}, "scores", id="scores-one-choice"),
    pytest.param({"labels": np.zeros(5, dtype=np.int64)}, "labels", id="labels-shape"),
    pytest.param({"labels": np.array([0, 1, 2, 2, 0, 2])}, "labels", id="labels-range"),
    pytest.param({"models": ("m0", "m1", "m1")}, "models", id="models-duplicate"),
    pytest.param({"models": ("m0", "m1")}, "models", id="models-count"),
    pytest.param({"models": "m0m1m2"}, "models", id="models-single-string"),
    pytest.param({"models": ("m0", "", "m2")}, "models", id="models-empty-name"),
    pytest.param({"score_kind": "probability"}, "score_kind", id="score_kind"),
    pytest.param({"n_choices": np.array([3, 3, 3, 4, 3, 3])}, "n_choices", id="n_choices-range"),
    pytest.param({"tasks": np.array([0, 0, 1, 1, 0, 7])}, "tasks", id="tasks-range"),
    pytest.param({"task_names": ()}, "task_names", id="task_names-empty"),
    pytest.param({"split": np.array([0, 0, 0, 0, 1, 3])}, "split", id="split-3"),
    pytest.param({"split": np.array([0, 0, 0, 0, 1, 1], dtype=bool)}, "split", id="split-bool"),
    pytest.param({"question_ids": ("a", "b")}, "question_ids", id="question_ids-count"),
    pytest.param({"costs": np.array([1.0, -2.0, 3.0])}, "costs", id="costs-negative"),
    pytest.param({"costs": np.array([1.0, np.inf, 3.0])}, "costs", id="costs-inf"),
    pytest.param({"features": np.zeros(6)}, "features", id="features-1d"),
    pytest.param({"features": np.full((6, 2), np.nan)}, "features", id="features-nan"),
    pytest.param({"features": np.zeros((6, 0))}, "features", id="features-no-column"),
    pytest.param({"feature_names": ("a",)}, "feature_names", id="feature_names-count"),
    pytest.param({"feature_names": ("a", "")}, "feature_names", id="feature_names-empty"),
    pytest.param({"features": None, "feature_names": ("a", "b")}, "feature_names", id="feature_names-alone"),
    pytest.param({"features": None, "feature_kind": "k"}, "feature_kind", id="feature_kind-alone"),
    pytest.param({"feature_kind": 3}, "feature_kind", id="feature_kind-not-str"),
    pytest.param({"question_text": ("a", "b")}, "question_text", id="question_text-count"),
    pytest.param({"question_text": "abcdef"}, "question_text", id="question_text-single-string"),
]


@pytest.mark.parametrize(("change", "field"), INVALID_IN_MEMORY)
def test_invalid_in_memory_cache_is_refused_at_construction(
    tiny_cache: LogitCache, change: dict[str, Any], field: str
) -> None:
    with pytest.raises(CacheError, match=names_field("<memory>", field)):
        rebuild(tiny_cache, **change)


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (("a", "b", 3, "d", "e", "f"), "entries must be strings, question 2 is int 3"),
        (("a", "b", "c", "d", b"\xff", "f"), "question 4: b'\\xff' is not valid UTF-8"),
        (("a", "b", "c", "nul\x00", "e", "f"), "question 3: 'nul\\x00' holds a NUL character"),
    ],
)
def test_bad_question_text_names_the_question(tiny_cache: LogitCache, texts: tuple[Any, ...], message: str) -> None:
    with pytest.raises(CacheError, match=names_field("<memory>", "question_text") + ": " + re.escape(message)):
        rebuild(tiny_cache, question_text=texts)


def test_non_finite_feature_names_question_and_column(tiny_cache: LogitCache) -> None:
    features = _changed(tiny_cache.features, (3, 1), np.inf)
    with pytest.raises(
        CacheError, match=names_field("<memory>", "features") + ": question 3 has a non-finite feature inf"
    ):
        rebuild(tiny_cache, features=features)


def test_nan_in_memory_names_question_and_model(tiny_cache: LogitCache) -> None:
    scores = _changed(tiny_cache.scores, (2, 1, 2), np.nan)
    with pytest.raises(CacheError, match=names_field("<memory>", "scores") + ".*question 2, model 'm1', choice 2"):
        rebuild(tiny_cache, scores=scores)


def test_custom_path_is_named_in_errors(tiny_cache: LogitCache) -> None:
    with pytest.raises(CacheError, match=names_field("from/somewhere.h5", "labels")):
        rebuild(tiny_cache, labels=np.full(6, 9), path=Path("from/somewhere.h5"))


# -- atomic write, read-only arrays ------------------------------------------------------------------


def test_save_leaves_no_temporary_file(tiny_cache: LogitCache, tmp_path: Path) -> None:
    save_cache(tmp_path / "cache.h5", tiny_cache)
    save_cache(tmp_path / "cache.h5", tiny_cache)  # replacing an existing file
    assert sorted(os.listdir(tmp_path)) == ["cache.h5"]


def test_save_replaces_an_existing_file(tiny_cache: LogitCache, tmp_path: Path) -> None:
    target = tmp_path / "cache.h5"
    save_cache(target, tiny_cache.subset(np.array([0, 1])))
    save_cache(target, tiny_cache)
    assert_same_cache(load_cache(target), tiny_cache)


def test_save_into_missing_folder_raises(tiny_cache: LogitCache, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save_cache(tmp_path / "nope" / "cache.h5", tiny_cache)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("existing", [True, False], ids=["over-existing", "new-file"])
def test_failed_save_keeps_previous_file_and_leaves_no_temporary(
    tiny_cache: LogitCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    target = tmp_path / "cache.h5"
    previous = tiny_cache.subset(np.array([4, 5]))
    if existing:
        save_cache(target, previous)
        before = target.read_bytes()
    original = h5py.File.create_dataset

    def create_dataset(self: h5py.Group, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "labels":
            raise RuntimeError("simulated failure while writing labels")
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(h5py.File, "create_dataset", create_dataset)
    with pytest.raises(RuntimeError, match="simulated failure"):
        save_cache(target, tiny_cache)
    monkeypatch.undo()
    if existing:
        assert sorted(os.listdir(tmp_path)) == ["cache.h5"]
        assert target.read_bytes() == before
        assert_same_cache(load_cache(target), previous)
    else:
        assert os.listdir(tmp_path) == []


def test_cache_arrays_are_read_only(tiny_cache: LogitCache) -> None:
    for name in ARRAY_FIELDS + COMPUTED_FIELDS:
        array = getattr(tiny_cache, name)
        assert not array.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            array[0] = array[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tiny_cache.labels = np.zeros(6, dtype=np.int64)  # type: ignore[misc]


def test_save_does_not_modify_the_cache(tiny_cache: LogitCache, tmp_path: Path) -> None:
    before = {name: np.array(getattr(tiny_cache, name)) for name in ARRAY_FIELDS + COMPUTED_FIELDS}
    save_cache(tmp_path / "cache.h5", tiny_cache)
    for name, array in before.items():
        np.testing.assert_array_equal(getattr(tiny_cache, name), array, err_msg=name)
    with pytest.raises(ValueError, match="read-only"):
        tiny_cache.scores[0, 0, 0] = 1.0


def test_construction_leaves_caller_arrays_writable_and_unchanged(tiny_cache: LogitCache) -> None:
    inputs = {name: np.array(getattr(tiny_cache, name)) for name in ARRAY_FIELDS}
    copies = {name: array.copy() for name, array in inputs.items()}
    cache = rebuild(tiny_cache, **inputs)
    for name, array in inputs.items():
        assert array.flags.writeable, name
        np.testing.assert_array_equal(array, copies[name], err_msg=name)
    assert not cache.scores.flags.writeable


def test_int32_inputs_are_converted_without_touching_the_caller() -> None:
    labels = np.array([1, 0], dtype=np.int32)
    cache = LogitCache(scores=np.zeros((2, 1, 2)), labels=labels, models=("a",), score_kind="logit")
    assert cache.labels.dtype == np.int64
    assert labels.dtype == np.int32 and labels.flags.writeable


# -- lookups and selections --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "tasks", "expected"),
    [
        ("all", None, [0, 1, 2, 3, 4, 5]),
        ("train", None, [0, 1, 2, 3]),
        ("test", None, [4, 5]),
        ("all", ["alpha"], [0, 1, 4]),
        ("all", ("beta",), [2, 3, 5]),
        ("train", ["beta"], [2, 3]),
        ("test", ["alpha"], [4]),
        ("test", ["beta", "alpha"], [4, 5]),
    ],
)
def test_select(tiny_cache: LogitCache, split: str, tasks: list[str] | None, expected: list[int]) -> None:
    indices = tiny_cache.select(split, tasks)
    assert indices.tolist() == expected


@pytest.mark.parametrize(
    ("split", "tasks", "match"),
    [
        ("validation", None, "no question"),
        ("train", [], "no question"),
        ("dev", None, "'dev'"),
        ("all", ["gamma"], "'gamma'"),
        ("all", "alpha", "sequence of task names"),
    ],
)
def test_select_errors(tiny_cache: LogitCache, split: str, tasks: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tiny_cache.select(split, tasks)


def test_subset_keeps_the_given_questions_in_order(tiny_cache: LogitCache) -> None:
    sub = tiny_cache.subset(np.array([4, 1]))
    assert sub.n_questions == 2
    assert sub.question_ids == ("q4", "q1")
    assert sub.models == tiny_cache.models and sub.task_names == tiny_cache.task_names
    np.testing.assert_array_equal(sub.labels, [0, 1])
    np.testing.assert_array_equal(sub.split, [1, 0])
    np.testing.assert_array_equal(sub.tasks, [0, 0])
    np.testing.assert_array_equal(sub.scores, tiny_cache.scores[[4, 1]])
    np.testing.assert_array_equal(sub.probs, tiny_cache.probs[[4, 1]])
    np.testing.assert_array_equal(sub.correct, EXPECTED_CORRECT[[4, 1]])
    np.testing.assert_array_equal(sub.features, tiny_cache.features[[4, 1]])
    np.testing.assert_array_equal(sub.costs, tiny_cache.costs)  # per-model costs are kept whole
    assert sub.source == tiny_cache.source
    assert tiny_cache.n_questions == 6


def test_subset_keeps_question_text_and_feature_metadata(tiny_cache: LogitCache) -> None:
    cache = rebuild(tiny_cache, question_text=TEXTS, feature_names=("x", "y"), feature_kind="k")
    sub = cache.subset(np.array([5, 0]))
    assert sub.question_text == (TEXTS[5], TEXTS[0])
    assert sub.feature_names == ("x", "y") and sub.feature_kind == "k"
    np.testing.assert_array_equal(sub.features, cache.features[[5, 0]])


def test_subset_with_boolean_mask_and_per_question_costs(tiny_cache: LogitCache) -> None:
    costs = np.arange(18, dtype=np.float64).reshape(6, 3)
    cache = rebuild(tiny_cache, costs=costs)
    sub = cache.subset(cache.split == 1)
    assert sub.question_ids == ("q4", "q5")
    np.testing.assert_array_equal(sub.costs, costs[[4, 5]])
    np.testing.assert_array_equal(sub.n_choices, [3, 3])


def test_subset_keeps_n_choices(tiny_cache: LogitCache) -> None:
    sub = tiny_cache.subset(tiny_cache.select("train", ["beta"]))
    np.testing.assert_array_equal(sub.n_choices, [3, 2])
    assert np.all(sub.probs[1, :, 2] == 0.0)


def test_model_index(tiny_cache: LogitCache) -> None:
    assert tiny_cache.model_index("m1") == 1
    assert tiny_cache.model_index(2) == 2
    assert tiny_cache.model_index(np.int64(0)) == 0


@pytest.mark.parametrize(("model", "match"), [("m9", "'m9'"), (3, "3"), (-1, "-1"), (1.5, "1.5")])
def test_model_index_errors(tiny_cache: LogitCache, model: Any, match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        tiny_cache.model_index(model)


def test_task_index(tiny_cache: LogitCache) -> None:
    assert tiny_cache.task_index("alpha") == 0
    assert tiny_cache.task_index("beta") == 1
    with pytest.raises(ValueError, match=r"'gamma'.*alpha, beta"):
        tiny_cache.task_index("gamma")


def test_model_accuracy(tiny_cache: LogitCache) -> None:
    np.testing.assert_allclose(tiny_cache.model_accuracy(), [5 / 6, 3 / 6, 2 / 6])
    np.testing.assert_allclose(tiny_cache.model_accuracy(tiny_cache.select("train")), [1.0, 0.5, 0.5])
    np.testing.assert_allclose(tiny_cache.model_accuracy(tiny_cache.select("test")), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(tiny_cache.model_accuracy(tiny_cache.tasks == 1), [2 / 3, 2 / 3, 1 / 3])


# -- embedded default cache --------------------------------------------------------------------------


@pytest.mark.skipif(not default_cache_path().exists(), reason="the embedded default cache is not built yet")
def test_default_cache_loads_validates_and_is_small() -> None:
    path = default_cache_path()
    assert path.stat().st_size < 4_000_000  # "a few MB at most"
    cache = load_cache(path)
    assert cache.path == str(path)
    assert cache.n_questions > 0 and cache.n_models >= 2
    assert np.isfinite(cache.probs).all()
    valid = (np.arange(cache.max_choices) < cache.n_choices[:, None])[:, None, :]
    assert np.all(np.where(valid, True, cache.probs == 0.0))
    if cache.score_kind in ("loglik", "logit"):
        np.testing.assert_allclose(cache.probs.sum(axis=2), 1.0, rtol=1e-5)
    default = load_default_cache()
    assert default is load_default_cache()
    assert_same_cache(default, cache)


# -- regressions: malformed files and aliasing that once escaped the validation ----------------------------


def _string_dataset_of_references(h5file: h5py.File, name: str) -> None:
    h5file.create_dataset(name, data=[h5file.ref] * 3, dtype=h5py.ref_dtype)


def _broken_link(h5file: h5py.File, name: str) -> None:
    h5file[name] = h5py.SoftLink("/nowhere")


def _empty_dataspace(h5file: h5py.File, name: str) -> None:
    h5file.create_dataset(name, data=h5py.Empty(h5py.string_dtype("utf-8")))


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"datasets": {"models": _string_dataset_of_references}}, "models", id="models-references"),
        pytest.param({"datasets": {"labels": _broken_link}}, "labels", id="labels-broken-link"),
        pytest.param({"datasets": {"models": _empty_dataspace}}, "models", id="models-empty-dataspace"),
        pytest.param({"format": ["ensemble-logit-cache", "x"]}, "format", id="format-array"),
    ],
)
def test_regression_crash_instead_of_cache_error(
    write_cache: Callable[..., Path], overrides: dict[str, Any], field: str
) -> None:
    path = write_cache(**overrides)
    with pytest.raises(CacheError, match=names_field(path, field)):
        load_cache(path)


def test_regression_models_none_in_memory(tiny_cache: LogitCache) -> None:
    with pytest.raises(CacheError, match=names_field("<memory>", "models")):
        rebuild(tiny_cache, models=None)


def test_regression_cache_aliases_caller_arrays(tiny_cache: LogitCache) -> None:
    scores = np.array(tiny_cache.scores)
    cache = rebuild(tiny_cache, scores=scores)
    scores[0, 0, 0] = np.nan  # after validation
    assert not np.isnan(cache.scores[0, 0, 0])


def test_regression_saved_file_ignores_umask(tiny_cache: LogitCache, tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        save_cache(tmp_path / "cache.h5", tiny_cache)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "cache.h5").stat().st_mode) == 0o644
