"""Caches in the tests: the tiny hand-built cache's fields (the ``tiny_cache`` fixture and the raw HDF5 writer
``write_cache`` of tests/conftest.py start from them), label flips, and rebuilding or comparing caches field by
field."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache import LogitCache

# -- the tiny cache ------------------------------------------------------------------------------------------------
# 6 questions, 3 models ("m0", "m1", "m2"), C = 3 choices, score_kind "loglik".
# Question 3 has only 2 choices: its third score (5.0, the largest of the row) is padding that must be ignored.
#
#   question | task  | split | n_choices | label | pred m0 | pred m1 | pred m2
#   ---------+-------+-------+-----------+-------+---------+---------+--------
#       0    | alpha | train |     3     |   0   |  0  ok  |  0  ok  |  1
#       1    | alpha | train |     3     |   1   |  1  ok  |  2      |  1  ok
#       2    | beta  | train |     3     |   2   |  2  ok  |  2  ok  |  0
#       3    | beta  | train |     2     |   1   |  1  ok  |  0      |  1  ok
#       4    | alpha | test  |     3     |   0   |  0  ok  |  1      |  2
#       5    | beta  | test  |     3     |   2   |  1      |  2  ok  |  0
#
# Correct on: m0 every question but 5 (5/6), m1 questions 0, 2, 5 (3/6), m2 questions 1, 3 (2/6).
TINY_SCORES = [
    [[-0.5, -1.5, -2.5], [-1.0, -2.0, -3.0], [-2.0, -0.5, -1.0]],
    [[-2.0, -0.2, -3.0], [-1.0, -1.5, -0.5], [-3.0, -1.0, -2.0]],
    [[-1.0, -2.0, -0.1], [-2.0, -2.0, -1.0], [-0.3, -1.3, -2.3]],
    [[-2.0, -1.0, 5.0], [-0.5, -1.5, 5.0], [-1.2, -0.2, 5.0]],
    [[-0.1, -1.0, -2.0], [-1.0, -0.1, -2.0], [-2.0, -1.0, -0.1]],
    [[-1.0, -0.5, -2.0], [-3.0, -2.0, -1.0], [0.0, -1.0, -2.0]],
]


def tiny_fields() -> dict[str, Any]:
    """Fresh (writable) constructor arguments of the tiny cache; also the baseline of ``write_cache``."""
    return {
        "scores": np.array(TINY_SCORES, dtype=np.float64),
        "labels": np.array([0, 1, 2, 1, 0, 2], dtype=np.int64),
        "models": ("m0", "m1", "m2"),
        "score_kind": "loglik",
        "n_choices": np.array([3, 3, 3, 2, 3, 3], dtype=np.int64),
        "tasks": np.array([0, 0, 1, 1, 0, 1], dtype=np.int64),
        "task_names": ("alpha", "beta"),
        "split": np.array([0, 0, 0, 0, 1, 1], dtype=np.int64),
        "question_ids": tuple(f"q{i}" for i in range(6)),
        "costs": np.array([1.0, 2.0, 4.0]),
        "features": np.arange(12, dtype=np.float64).reshape(6, 2) / 10,
        "source": "hand-built tiny cache (tests/testing/caches.py)",
    }


# -- label flips -----------------------------------------------------------------------------------------------------


def flip_labels(cache: LogitCache, questions: Any) -> LogitCache:
    """``cache`` with the label of each of ``questions`` moved to the next valid choice (every answer that was right
    there is now wrong): the label-flip checks' one way of hiding what a fit or a choice must not read."""
    labels = np.asarray(cache.labels).copy()
    questions = np.asarray(questions)
    labels[questions] = (labels[questions] + 1) % np.asarray(cache.n_choices)[questions]
    return dataclasses.replace(cache, labels=labels)


# -- rebuilding and comparing caches -----------------------------------------------------------------------------------

ARRAY_FIELDS = ("scores", "labels", "n_choices", "tasks", "split", "costs", "features")
NAME_FIELDS = ("models", "task_names", "question_ids", "feature_names", "question_text")
COMPUTED_FIELDS = ("probs", "preds", "correct")
#: texts with what a writer must keep: non-ASCII, newlines, an empty text, trailing spaces, a long text
TEXTS = ("Was ist 2 + 2?\nOptions: (A) 4 (B) 5", "¿Qué?", "", "trailing  ", "x" * 3000, "q5 \u00e9t\u00e9 \U0001f600")


def cache_fields(cache: LogitCache) -> dict[str, Any]:
    """Constructor arguments that rebuild ``cache`` in memory (path left to its default)."""
    return {f.name: getattr(cache, f.name) for f in dataclasses.fields(cache) if f.init and f.name != "path"}


def rebuild(cache: LogitCache, **changes: Any) -> LogitCache:
    """``cache`` built again in memory with ``changes`` to its constructor arguments."""
    return LogitCache(**{**cache_fields(cache), **changes})


def names_field(path: Path | str, field: str) -> str:
    """Regex: the message names the file and the field."""
    return re.escape(f"{path}: field '{field}'")


def assert_same_cache(actual: LogitCache, expected: LogitCache) -> None:
    """Every array (dtype included), name, kind and source of the two caches are equal."""
    for name in ARRAY_FIELDS + COMPUTED_FIELDS:
        got, want = getattr(actual, name), getattr(expected, name)
        if want is None:
            assert got is None, name
            continue
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    for name in NAME_FIELDS:
        assert getattr(actual, name) == getattr(expected, name), name
    assert actual.score_kind == expected.score_kind
    assert actual.feature_kind == expected.feature_kind
    assert actual.source == expected.source
