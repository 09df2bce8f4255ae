"""Entropy of the team's correctness on a window: the row mean of the binary entropy of the share right."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.metrics.validation import as_correct

__all__ = ["binary_entropy"]


def binary_entropy(correct: ArrayLike) -> float:
    """Mean binary entropy (bits) of the team's correctness on each row.

    For row ``r`` with ``l_r`` members right, ``H2(l_r / M)`` with
    ``H2(p) = -p log2 p - (1 - p) log2 (1 - p)`` and ``0 log 0 = 0``; the
    result is the mean over rows.  0 when the team is unanimous (all right or
    all wrong) on every row, 1 when it is split evenly on every row.

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        Mean entropy in ``[0, 1]`` (clipped, which only removes round-off).
        ``W == 0`` or ``M == 0`` -> 0.0.

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    Rows split 1-1 (H2 = 1) and 2-0 (H2 = 0): mean 1/2.

    >>> binary_entropy([[1, 0], [1, 1]])
    0.5
    """
    is_right = as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_rows == 0 or n_members == 0:
        return 0.0
    share_right = is_right.sum(axis=1) / n_members  # (W,)
    mixed = (share_right > 0.0) & (share_right < 1.0)  # 0 log 0 = 0 elsewhere
    p = share_right[mixed]
    entropy = -(p * np.log2(p) + (1.0 - p) * np.log2(1.0 - p))
    value = float(entropy.sum() / n_rows)
    return float(np.clip(value, 0.0, 1.0))
