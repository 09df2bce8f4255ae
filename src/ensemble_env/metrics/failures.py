"""Failure-coincidence diversity of a team on a window: generalized diversity (Partridge & Krzanowski) and
focal diversity (Wu & Liu), both from the number of members that fail on each row.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.metrics.validation import as_correct

__all__ = ["focal_diversity", "generalized_diversity"]


def generalized_diversity(correct: ArrayLike) -> float:
    """Generalized diversity of Partridge & Krzanowski (1997).

    With ``p_i`` the fraction of rows on which exactly ``i`` of the ``M``
    members fail, ``p1 = sum_i (i / M) p_i`` is the probability that a random
    member fails on a random row and ``p2 = sum_i i (i - 1) / (M (M - 1)) p_i``
    the probability that two distinct random members both fail;
    ``GD = 1 - p2 / p1``.  1 means failures never coincide, 0 means the
    members always fail together.

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        GD in ``[0, 1]``.  Degenerate cases, applied in this order:
        ``M == 0`` -> 0.0; no failure in the window (``p1 == 0``, including
        ``W == 0``) -> 1.0; ``M == 1`` -> 0.0 (a lone model's failures always
        coincide with themselves).

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    Rows with 0, 1, 2 and 3 failures: ``p_i = 1/4`` each, ``p1 = 1/2``,
    ``p2 = 1/3`` and ``GD = 1 - (1/3) / (1/2) = 1/3``.

    >>> correct = [[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]]
    >>> round(generalized_diversity(correct), 6)
    0.333333
    >>> generalized_diversity([[1, 1], [1, 1]])  # no failure
    1.0
    """
    is_right = as_correct(correct)
    n_members = is_right.shape[1]
    if n_members == 0:
        return 0.0
    failures_per_row = n_members - is_right.sum(axis=1, dtype=np.int64)
    total_failures = int(failures_per_row.sum())
    if total_failures == 0:
        return 1.0
    if n_members == 1:
        return 0.0
    # p2 / p1 = sum f (f - 1) / ((M - 1) sum f): exact integer ratio <= 1.
    coincident = int((failures_per_row * (failures_per_row - 1)).sum())
    ratio = coincident / ((n_members - 1) * total_failures)
    return float(np.clip(1.0 - ratio, 0.0, 1.0))


def focal_diversity(correct: ArrayLike) -> float:
    """Focal diversity (Wu & Liu, CVPR 2021; RL-Focal).

    For each member ``F`` (the *focal* model), the generalized diversity of
    the whole team is computed on the rows where ``F`` is wrong; the result is
    the mean over members.  Computed fully vectorised: with ``f_r`` the number
    of failures on row ``r`` and ``w_rF`` the indicator that ``F`` fails on
    ``r``, ``GD_F = 1 - (sum_r w_rF f_r (f_r - 1)) / ((M - 1) sum_r w_rF f_r)``.

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        Focal diversity in ``[0, 1]``.  ``M == 0`` -> 0.0.  A member that never
        fails in the window contributes the GD of an empty window, 1.0.  Hence
        a single-member team scores 0.0 if it failed at least once and 1.0 if
        it never failed; ``W == 0`` gives 1.0 for ``M >= 1``.

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    Member 0 fails on rows with 1, 2, 3 failures (GD 1/3), member 1 on rows
    with 2, 3 failures (GD 1 - 8/10 = 1/5), member 2 only on the row where
    all fail (GD 0): mean ``(1/3 + 1/5 + 0) / 3 = 8/45``.

    >>> correct = [[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]]
    >>> round(focal_diversity(correct), 6)
    0.177778
    >>> focal_diversity([[True], [False]]), focal_diversity([[True], [True]])
    (0.0, 1.0)
    """
    is_right = as_correct(correct)
    n_members = is_right.shape[1]
    if n_members == 0:
        return 0.0
    is_wrong = (~is_right).astype(np.int64)  # (W, M)
    failures_per_row = is_wrong.sum(axis=1)  # (W,)
    # Per focal member: sum over its failed rows of f and of f (f - 1).
    failures_seen = is_wrong.T @ failures_per_row  # (M,)
    coincident_seen = is_wrong.T @ (failures_per_row * (failures_per_row - 1))
    never_fails = failures_seen == 0  # GD of an empty window: 1.0
    if n_members == 1:
        per_member = np.where(never_fails, 1.0, 0.0)
    else:
        denominator = (n_members - 1) * failures_seen
        ratio = np.divide(
            coincident_seen,
            denominator,
            out=np.zeros(n_members, dtype=np.float64),
            where=~never_fails,
        )
        per_member = 1.0 - ratio  # equals 1.0 where the member never fails
    return float(np.clip(per_member.mean(), 0.0, 1.0))
