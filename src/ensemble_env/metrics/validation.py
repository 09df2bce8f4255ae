"""Validation of the statistics' inputs: a window's ``correct``, ``preds`` and ``labels`` arrays and
``n_choices``, each checked and converted (bool or int64), with a :class:`ValueError` naming the argument.
"""

from __future__ import annotations

import operator

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["as_class_indices", "as_correct", "as_labels", "as_n_choices", "as_preds", "to_array"]


def to_array(values: ArrayLike, name: str) -> np.ndarray:
    """Convert ``values`` to an ndarray, naming ``name`` on failure."""
    if values is None:
        raise ValueError(f"{name} is required, got None")
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} could not be converted to an array: {err}") from err


def as_correct(correct: ArrayLike) -> NDArray[np.bool_]:
    """Validate a ``(W, M)`` correctness matrix and return it as bool."""
    array = to_array(correct, "correct")
    if array.ndim != 2:
        raise ValueError(f"correct must be 2-D (W, M), got shape {array.shape}")
    if array.dtype == np.bool_:
        return array
    if array.dtype.kind not in "iuf":
        raise ValueError(f"correct must be a bool or 0/1 numeric array, got dtype {array.dtype}")
    invalid = (array != 0) & (array != 1)
    if invalid.any():
        raise ValueError(f"correct must contain only 0/1 (or bool) values, got {array[invalid][0].item()!r}")
    return array == 1


def as_class_indices(values: np.ndarray, name: str) -> NDArray[np.int64]:
    """Check that ``values`` holds non-negative integers; return them as int64."""
    kind = values.dtype.kind
    if kind == "b":
        return values.astype(np.int64)
    if kind == "f":
        non_integral = ~np.isfinite(values) | (values != np.round(values))
        if non_integral.any():
            raise ValueError(f"{name} must hold integer class indices, got {values[non_integral][0].item()!r}")
    elif kind not in "iu":
        raise ValueError(f"{name} must be an integer array of class indices, got dtype {values.dtype}")
    if values.size and values.min() < 0:
        raise ValueError(f"{name} must hold non-negative class indices, got {values.min().item()!r}")
    if values.size and values.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds a class index too large for int64")
    return values.astype(np.int64)


def as_preds(preds: ArrayLike) -> NDArray[np.int64]:
    """Validate a ``(W, M)`` matrix of predicted classes."""
    array = to_array(preds, "preds")
    if array.ndim != 2:
        raise ValueError(f"preds must be 2-D (W, M), got shape {array.shape}")
    return as_class_indices(array, "preds")


def as_labels(labels: ArrayLike, n_rows: int) -> NDArray[np.int64]:
    """Validate a ``(W,)`` vector of true classes matching ``n_rows`` rows."""
    array = to_array(labels, "labels")
    if array.shape != (n_rows,):
        raise ValueError(f"labels must be 1-D with shape (W,) = ({n_rows},) to match preds, got shape {array.shape}")
    return as_class_indices(array, "labels")


def as_n_choices(n_choices: int) -> int:
    """Validate the number of answer categories."""
    try:
        n_categories = operator.index(n_choices)
    except TypeError as err:
        raise ValueError(f"n_choices must be an int >= 1, got {n_choices!r}") from err
    if n_categories < 1:
        raise ValueError(f"n_choices must be an int >= 1, got {n_choices!r}")
    return n_categories
