"""Tests of ensemble_env.cache.features: text features fitted on train only, feature files, features in caches.

The texts are small synthetic questions of three kinds (arithmetic, colours, travel), built below.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble_env.cache import LogitCache, load_cache, save_cache
from ensemble_env.cache.convert import ConversionError
from ensemble_env.cache.features import (
    TEXT_FEATURE_KIND,
    load_feature_file,
    text_feature_names,
    text_features,
    with_features,
    with_text_features,
)

_TEMPLATES = (
    "What is {a} plus {b}? Options: (A) {c} (B) {d}",
    "The {x} ball is left of the {y} cube. Which object is {x}? Options: (A) ball (B) cube",
    "If you take {a} steps north and {b} steps south, do you return? Options: - Yes - No",
)
_COLOURS = ("red", "blue", "green", "purple", "orange", "grey")


def questions(n: int, offset: int = 0) -> list[str]:
    """``n`` synthetic questions, cycling through the three templates."""
    texts = []
    for i in range(offset, offset + n):
        a, b = i % 7 + 1, i % 5 + 2
        fields = {"a": a, "b": b, "c": a + b, "d": a * b, "x": _COLOURS[i % 6], "y": _COLOURS[(i + 2) % 6]}
        texts.append(_TEMPLATES[i % 3].format(**fields))
    return texts


# 30 questions: 18 train, 6 validation, 6 test
SPLIT = np.array([0] * 18 + [2] * 6 + [1] * 6)
TRAIN = SPLIT == 0


def tiny_text_cache(texts: list[str] | None = None) -> LogitCache:
    texts = questions(30) if texts is None else texts
    rng = np.random.default_rng(0)
    return LogitCache(
        scores=rng.normal(size=(30, 2, 3)),
        labels=np.arange(30) % 3,
        models=("a", "b"),
        score_kind="logit",
        split=SPLIT,
        question_text=tuple(texts),
        source="synthetic",
    )


@pytest.fixture
def sklearn_available() -> None:
    pytest.importorskip("sklearn")


# the tests of text features need scikit-learn; those of feature files do not
needs_sklearn = pytest.mark.usefixtures("sklearn_available")


@needs_sklearn
def test_text_features_shape_scale_and_determinism() -> None:
    texts = questions(30)
    features = text_features(texts, TRAIN, n_features=5)
    assert features.shape == (30, 5) and features.dtype == np.float32 and np.isfinite(features).all()
    # standardised on the train questions: mean 0, standard deviation 1 per dimension
    np.testing.assert_allclose(features[TRAIN].mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(features[TRAIN].std(axis=0), 1.0, rtol=1e-4)
    np.testing.assert_array_equal(features, text_features(list(texts), np.flatnonzero(TRAIN), n_features=5))
    # the three kinds of question are told apart: nearest train centroid of the kind, on the other questions
    kinds = np.arange(30) % 3
    centroids = np.stack([features[TRAIN & (kinds == k)].mean(axis=0) for k in range(3)])
    nearest = np.argmin(((features[~TRAIN, None, :] - centroids[None]) ** 2).sum(axis=2), axis=1)
    assert nearest.tolist() == kinds[~TRAIN].tolist()


@needs_sklearn
def test_features_of_fitted_questions_do_not_depend_on_the_test_texts() -> None:
    texts = questions(30)
    changed = texts[:24] + [f"completely different test text number {i} about dragons" for i in range(6)]
    before = text_features(texts, TRAIN, n_features=4)
    after = text_features(changed, TRAIN, n_features=4)
    np.testing.assert_array_equal(before[:24], after[:24])  # train and validation: bit for bit
    assert not np.allclose(before[24:], after[24:])  # the test questions' own features follow their text
    # but the features do depend on the train texts they are fitted on
    refitted = text_features(questions(18, offset=100) + texts[18:], TRAIN, n_features=4)
    assert not np.allclose(refitted[18:24], before[18:24])


@needs_sklearn
def test_validation_texts_do_not_change_the_fit() -> None:
    texts = questions(30)
    changed = texts[:18] + ["a validation question about the weather"] * 6 + texts[24:]
    np.testing.assert_array_equal(
        text_features(texts, TRAIN, n_features=4)[:18], text_features(changed, TRAIN, n_features=4)[:18]
    )


@needs_sklearn
@pytest.mark.parametrize(
    ("n_features", "fit_on", "message"),
    [
        (18, TRAIN, "needs more questions to fit on than features, got 18"),
        (0, TRAIN, "n_features must be a positive integer, got 0"),
        (True, TRAIN, "n_features must be a positive integer"),
        (2.5, TRAIN, "n_features must be a positive integer"),
        (3, TRAIN[:10], r"fit_on: boolean mask of shape \(10,\), expected \(30,\)"),
        (3, np.array([0, 40]), r"fit_on: question index outside 0\.\.29"),
        (3, np.array([0.5, 1.0]), "fit_on must be a boolean mask or question indices"),
    ],
)
def test_bad_arguments_are_refused(n_features: object, fit_on: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        text_features(questions(30), fit_on, n_features=n_features)  # type: ignore[arg-type]


@needs_sklearn
def test_texts_must_be_strings() -> None:
    with pytest.raises(ValueError, match="single string"):
        text_features("one text", [0], 1)
    with pytest.raises(ValueError, match="question 2 is int 7, not a string"):
        text_features(["a", "b", 7, "d"], [0, 1, 3], 1)  # type: ignore[list-item]


def test_without_scikit_learn_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("sklearn", "sklearn.decomposition", "sklearn.feature_extraction.text"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ModuleNotFoundError, match=r'needs scikit-learn, .*: pip install -e "\.\[data\]"'):
        text_features(questions(30), TRAIN, n_features=3)


@needs_sklearn
def test_with_text_features_fits_on_the_train_split(tmp_path: Path) -> None:
    cache = tiny_text_cache()
    featured = with_text_features(cache, n_features=4)
    np.testing.assert_array_equal(featured.features, text_features(questions(30), TRAIN, n_features=4))
    assert featured.feature_kind == TEXT_FEATURE_KIND
    assert featured.feature_names == text_feature_names(4) == ("text_svd_0", "text_svd_1", "text_svd_2", "text_svd_3")
    assert featured.source.startswith("synthetic; features: text-tfidf-svd, 4 dimensions")
    assert "fitted on the train split only" in featured.source
    assert cache.features is None  # the input is not modified
    loaded = load_cache(save_cache(tmp_path / "f.h5", featured))
    np.testing.assert_array_equal(loaded.features, featured.features)
    assert loaded.features.dtype == np.float32 and loaded.feature_kind == TEXT_FEATURE_KIND


@needs_sklearn
def test_with_text_features_needs_question_text_and_train_questions(tiny_cache: LogitCache) -> None:
    with pytest.raises(ValueError, match="field 'question_text': missing"):
        with_text_features(tiny_cache, n_features=2)
    everything_test = LogitCache(
        scores=np.zeros((4, 1, 2)), labels=np.zeros(4, dtype=int), models=("a",), score_kind="logit",
        split=np.ones(4, dtype=int), question_text=("w", "x", "y", "z"),
    )  # fmt: skip
    with pytest.raises(ValueError, match="no question is in the train split"):
        with_text_features(everything_test, n_features=2)


# -- feature files (no scikit-learn needed) ------------------------------------------------------------------


def test_feature_file_is_read_as_float32(tmp_path: Path) -> None:
    np.save(tmp_path / "f.npy", np.arange(12, dtype=np.float64).reshape(6, 2) / 4)
    features = load_feature_file(tmp_path / "f.npy", 6)
    assert features.dtype == np.float32 and features.tolist()[1] == [0.5, 0.75]
    np.save(tmp_path / "ints.npy", np.arange(6, dtype=np.int16).reshape(6, 1))
    assert load_feature_file(tmp_path / "ints.npy", 6).dtype == np.float32


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((5, 2)), r"shape \(5, 2\) is not \(Q, F\) with Q=6"),
        (np.zeros(6), r"shape \(6,\) is not \(Q, F\)"),
        (np.zeros((6, 0)), r"shape \(6, 0\) is not \(Q, F\)"),
        (np.zeros((6, 2, 1)), r"shape \(6, 2, 1\)"),
        (np.where(np.arange(12).reshape(6, 2) == 7, np.nan, 0.0), "question 3, column 1: the value nan is not finite"),
        (np.where(np.arange(12).reshape(6, 2) == 4, -np.inf, 0.0), "question 2, column 0: the value -inf is not"),
        (np.where(np.arange(12).reshape(6, 2) == 1, 1e300, 0.0), "question 0, column 1: the value 1e[+]300 overflows"),
        (np.ones((6, 2), dtype=bool), "must hold numbers, got dtype bool"),
        (np.array([["a", "b"]] * 6), "must hold numbers"),
    ],
)
def test_bad_feature_files_are_refused(tmp_path: Path, array: np.ndarray, message: str) -> None:
    path = tmp_path / "bad.npy"
    np.save(path, array)
    with pytest.raises(ConversionError, match=f"{path}: .*{message}"):
        load_feature_file(path, 6)


def test_feature_files_that_need_pickle_or_are_not_npy(tmp_path: Path) -> None:
    np.save(tmp_path / "objects.npy", np.array([[1.0, None]] * 6, dtype=object), allow_pickle=True)
    with pytest.raises(ConversionError, match="without pickle"):
        load_feature_file(tmp_path / "objects.npy", 6)
    (tmp_path / "text.npy").write_text("1,2\n3,4\n", encoding="utf-8")
    with pytest.raises(ConversionError, match=r"cannot be read as a \.npy array"):
        load_feature_file(tmp_path / "text.npy", 2)
    np.savez(tmp_path / "two.npz", a=np.zeros((2, 1)))
    with pytest.raises(ConversionError, match=r"a \.npz archive"):
        load_feature_file(tmp_path / "two.npz", 2)
    with pytest.raises(FileNotFoundError, match=r"absent\.npy: no such file"):
        load_feature_file(tmp_path / "absent.npy", 2)
    os.mkfifo(tmp_path / "pipe.npy")  # a FIFO is refused, never waited on
    with pytest.raises(ConversionError, match=r"pipe\.npy: .*FIFO"):
        load_feature_file(tmp_path / "pipe.npy", 2)


def test_with_features_replaces_names_and_kind(tiny_cache: LogitCache) -> None:
    named = with_features(tiny_cache, np.ones((6, 3), np.float32), names=("x", "y", "z"), kind="k", note="n")
    assert named.features.shape == (6, 3) and named.feature_names == ("x", "y", "z") and named.feature_kind == "k"
    assert named.source == f"{tiny_cache.source}; n"
    plain = with_features(named, np.zeros((6, 1), np.float32))
    assert plain.feature_names is None and plain.feature_kind == "" and plain.source == named.source
    with pytest.raises(ValueError, match="field 'features': question 1 has a non-finite feature"):
        with_features(tiny_cache, np.where(np.arange(6)[:, None] == 1, np.inf, 0.0))
