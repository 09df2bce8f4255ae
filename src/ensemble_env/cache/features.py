"""Per-question features for routing: computed from the question texts, or read from a file.

- :func:`text_features` turns texts into (Q, F) float32 features: hashed word and character n-grams
  (scikit-learn ``HashingVectorizer``, stateless), TF-IDF weights (``TfidfTransformer``), ``TruncatedSVD`` to F
  dimensions, then each dimension centred and scaled to unit variance. The TF-IDF weights, the SVD and the
  scaling are fitted on the given questions only (the train split: never validation or test), with a fixed
  ``random_state``, so the features of the fitted questions do not depend on the other questions' texts,
  and two runs give the same features.
- :func:`with_text_features` adds them to a cache from its ``question_text``, fitted on its train split.
- :func:`load_feature_file` reads a (Q, F) ``.npy`` file (without pickle) and :func:`with_features` puts any
  features into a cache.

scikit-learn (the ``data`` extra: ``pip install -e ".[data]"``) is imported only by
:func:`text_features`.

>>> import numpy as np
>>> texts = [f"question {i}: is {i} even or odd?" for i in range(12)]
>>> features = text_features(texts, fit_on=np.arange(12) < 8, n_features=3)
>>> features.shape, features.dtype.name
((12, 3), 'float32')
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.cache.convert.common import ConversionError, read_input
from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.text import show

__all__ = [
    "DEFAULT_N_FEATURES",
    "INSTALL_HINT",
    "TEXT_FEATURE_KIND",
    "load_feature_file",
    "text_feature_names",
    "text_features",
    "with_features",
    "with_text_features",
]

#: the ``feature_kind`` of :func:`text_features`
TEXT_FEATURE_KIND = "text-tfidf-svd"
#: F of :func:`text_features` unless told otherwise
DEFAULT_N_FEATURES = 64
#: how to install what :func:`text_features` needs
INSTALL_HINT = extras.install_line("data")
_HASH_BUCKETS = 2**15  # per vectorizer (words, characters): small enough for a dense SVD basis
_WORD_NGRAMS = (1, 2)
_CHAR_NGRAMS = (3, 5)
_SVD_ITERATIONS = 5


def _sklearn() -> tuple[Any, Any, Any, Any]:
    """``HashingVectorizer``, ``TfidfTransformer``, ``TruncatedSVD`` and ``scipy.sparse``, or a clear error."""
    try:
        from scipy import sparse
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer
    except ModuleNotFoundError as error:
        raise extras.missing_error("computing text features", "data", ["sklearn"]) from error
    return HashingVectorizer, TfidfTransformer, TruncatedSVD, sparse


def _fit_rows(fit_on: Any, n_questions: int) -> np.ndarray:
    """Indices of the questions to fit on, from a boolean mask of length Q or an array of indices."""
    rows = np.asarray(fit_on)
    if rows.dtype == bool:
        if rows.shape != (n_questions,):
            raise ValueError(f"fit_on: boolean mask of shape {rows.shape}, expected ({n_questions},)")
        rows = np.flatnonzero(rows)
    elif rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise ValueError(f"fit_on must be a boolean mask or question indices, got dtype {rows.dtype}")
    if rows.size and (rows.min() < 0 or rows.max() >= n_questions):
        raise ValueError(f"fit_on: question index outside 0..{n_questions - 1}")
    return np.unique(rows.astype(np.int64))


def text_feature_names(n_features: int) -> tuple[str, ...]:
    """The names of the columns of :func:`text_features`: ``text_svd_0``, ``text_svd_1``, ..."""
    return tuple(f"text_svd_{i}" for i in range(n_features))


def text_features(
    texts: Sequence[str], fit_on: Any, n_features: int = DEFAULT_N_FEATURES, *, seed: int = 0
) -> np.ndarray:
    """(Q, F) float32 features of the texts, fitted on the questions ``fit_on`` (mask or indices) only.

    Each text becomes hashed counts of its word 1-2-grams and character 3-5-grams (within word boundaries,
    lower-cased; :data:`_HASH_BUCKETS` buckets each), weighted by TF-IDF (sublinear term frequency, L2
    normalised per question), projected on the top ``n_features`` singular directions (randomised
    ``TruncatedSVD``, ``random_state=seed``), then centred and scaled per dimension (a dimension constant on the
    fitted questions is only centred). The IDF weights, the SVD and the scaling are fitted on ``fit_on``; every
    question is then transformed, each independently of the others.

    Raises ValueError when ``n_features`` is not an integer from 1 to the number of questions fitted on minus
    one, and ModuleNotFoundError (saying what to install) without scikit-learn.
    """
    if isinstance(texts, str):
        raise ValueError(f"texts must be a sequence of strings, got the single string {show(texts)}")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"texts: question {index} is {type(text).__name__} {text!r}, not a string")
    rows = _fit_rows(fit_on, len(texts))
    if isinstance(n_features, bool) or not isinstance(n_features, int | np.integer) or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    if n_features >= rows.size:
        raise ValueError(
            f"n_features={n_features} needs more questions to fit on than features, got {rows.size} "
            f"(choose n_features below {rows.size})"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    hashing, tfidf, svd_class, sparse = _sklearn()
    common = {"n_features": _HASH_BUCKETS, "alternate_sign": False, "norm": None, "lowercase": True}
    words = hashing(analyzer="word", ngram_range=_WORD_NGRAMS, token_pattern=r"(?u)\b\w+\b", **common)
    chars = hashing(analyzer="char_wb", ngram_range=_CHAR_NGRAMS, **common)
    counts = sparse.hstack([words.transform(texts), chars.transform(texts)], format="csr")
    weights = tfidf(sublinear_tf=True).fit(counts[rows])
    weighted = weights.transform(counts)
    svd = svd_class(n_components=int(n_features), n_iter=_SVD_ITERATIONS, random_state=int(seed))
    svd.fit(weighted[rows])
    projected = np.asarray(svd.transform(weighted), dtype=np.float64)
    mean = projected[rows].mean(axis=0)
    scale = projected[rows].std(axis=0)
    scale[scale == 0] = 1.0
    return ((projected - mean) / scale).astype(np.float32)


def with_features(
    cache: LogitCache,
    features: np.ndarray,
    *,
    names: Sequence[str] | None = None,
    kind: str = "",
    note: str = "",
) -> LogitCache:
    """A copy of ``cache`` whose features (with their names and kind) are replaced; ``note`` is added to its
    ``source``. The features are validated by :class:`~ensemble_env.cache.LogitCache` (shape, finiteness)."""
    source = "; ".join(part for part in (cache.source, note) if part)
    return dataclasses.replace(
        cache,
        features=features,
        feature_names=None if names is None else tuple(names),
        feature_kind=kind,
        source=source,
        path="<memory>",
    )


def with_text_features(cache: LogitCache, n_features: int = DEFAULT_N_FEATURES, *, seed: int = 0) -> LogitCache:
    """``cache`` with :func:`text_features` of its ``question_text``, fitted on its train split.

    Raises ValueError when the cache has no ``question_text`` or no train question.
    """
    if cache.question_text is None:
        raise ValueError(
            f"{cache.path}: field 'question_text': missing, and text features are computed from it "
            "(caches converted with 'ensemble-env cache from-lm-eval' have it)"
        )
    train = cache.split == SPLITS["train"]
    if not train.any():
        raise ValueError(f"{cache.path}: no question is in the train split, which the text features are fitted on")
    features = text_features(cache.question_text, train, n_features, seed=seed)
    note = (
        f"features: {TEXT_FEATURE_KIND}, {n_features} dimensions from question_text (hashed word 1-2-grams and "
        f"char 3-5-grams, TF-IDF, TruncatedSVD seed {seed}, standardised; fitted on the train split only)"
    )
    return with_features(cache, features, names=text_feature_names(n_features), kind=TEXT_FEATURE_KIND, note=note)


def load_feature_file(path: str | Path, n_questions: int) -> np.ndarray:
    """(Q, F) float32 features from a ``.npy`` file holding numbers, read without pickle.

    The file is read as the converters read theirs (:func:`~ensemble_env.cache.convert.common.read_input`).
    Raises FileNotFoundError, or :class:`~ensemble_env.cache.convert.ConversionError` naming the file when it is not
    a ``.npy`` array of numbers of shape (``n_questions``, F >= 1), or holds a value that is not finite (also
    after the conversion to float32), naming the first such question.
    """
    data = read_input(path)  # a regular file only, within the size limit: never a FIFO or a device
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ConversionError(f"{path}: cannot be read as a .npy array without pickle ({error})") from None
    if not isinstance(loaded, np.ndarray):
        loaded.close()
        raise ConversionError(f"{path}: holds several arrays (a .npz archive); expected one (Q, F) .npy array")
    if loaded.dtype.kind not in "fiu":
        raise ConversionError(f"{path}: must hold numbers, got dtype {loaded.dtype}")
    if loaded.ndim != 2 or loaded.shape[0] != n_questions or loaded.shape[1] < 1:
        raise ConversionError(
            f"{path}: shape {loaded.shape} is not (Q, F) with Q={n_questions} questions (one row per question) "
            "and F >= 1"
        )
    if loaded.dtype.kind == "f":
        for bad, problem in (
            (~np.isfinite(loaded), "is not finite"),
            (np.abs(loaded) > np.finfo(np.float32).max, "overflows float32"),
        ):
            if bad.any():
                q, f = (int(i) for i in np.argwhere(bad)[0])
                raise ConversionError(f"{path}: question {q}, column {f}: the value {loaded[q, f]} {problem}")
    return loaded.astype(np.float32)
