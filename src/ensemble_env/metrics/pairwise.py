"""Pairwise statistics of the members' correctness (Kuncheva & Whitaker 2003), each the mean over every pair
of members of a value of the pair's 2x2 contingency table: Yule's Q, correlation, disagreement, Cohen's kappa.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ensemble_env.metrics.validation import as_correct

__all__ = ["correlation", "disagreement", "pairwise_kappa", "q_statistic"]


def _pair_tables(
    is_right: NDArray[np.bool_],
) -> tuple[NDArray[np.float64], ...]:
    """2x2 contingency counts ``(N11, N00, N10, N01)`` for every pair j < k.

    Each returned array has shape ``(M (M - 1) / 2,)`` ordered like
    ``np.triu_indices(M, 1)``.
    """
    right = is_right.astype(np.float64)  # (W, M); 0/1 products are exact
    wrong = 1.0 - right
    both_right = right.T @ right  # (M, M)
    both_wrong = wrong.T @ wrong
    right_wrong = right.T @ wrong  # [j, k]: j right and k wrong
    first, second = np.triu_indices(is_right.shape[1], 1)
    return (
        both_right[first, second],
        both_wrong[first, second],
        right_wrong[first, second],  # N10
        right_wrong[second, first],  # N01: j wrong and k right
    )


def _mean_ratio(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> float:
    """Mean of ``numerator / denominator`` with 0 for zero denominators."""
    ratios = np.divide(
        numerator,
        denominator,
        out=np.zeros_like(numerator),
        where=denominator != 0,
    )
    return float(ratios.mean())


def q_statistic(correct: ArrayLike) -> float:
    """Yule's Q statistic averaged over all member pairs.

    ``Q = (N11 N00 - N01 N10) / (N11 N00 + N01 N10)`` for each unordered pair
    ``j < k``, where ``N11`` counts rows both are right, ``N00`` both wrong,
    ``N10`` ``j`` right and ``k`` wrong, ``N01`` ``j`` wrong and ``k`` right.

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        Mean Q in ``[-1, 1]`` (clipped, which only removes round-off).
        ``M < 2`` or ``W == 0`` -> 0.0; a pair with a zero denominator
        contributes 0.0 (no measurable dependence).

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    ``N11 = 2, N00 = 1, N10 = 1, N01 = 0``: ``Q = (2 - 0) / (2 + 0) = 1``.

    >>> q_statistic([[1, 1], [1, 1], [0, 0], [1, 0]])
    1.0
    """
    is_right = as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_members < 2 or n_rows == 0:
        return 0.0
    n11, n00, n10, n01 = _pair_tables(is_right)
    value = _mean_ratio(n11 * n00 - n01 * n10, n11 * n00 + n01 * n10)
    return float(np.clip(value, -1.0, 1.0))


def correlation(correct: ArrayLike) -> float:
    """Correlation (phi coefficient) of correctness, averaged over pairs.

    ``rho = (N11 N00 - N01 N10) /
    sqrt((N11 + N10) (N01 + N00) (N11 + N01) (N10 + N00))`` for each pair
    ``j < k`` (counts as in :func:`q_statistic`).

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        Mean rho in ``[-1, 1]`` (clipped, which only removes round-off).
        ``M < 2`` or ``W == 0`` -> 0.0; a pair with a zero denominator (a
        member always right or always wrong) contributes 0.0.

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    ``N11 = 1, N00 = 1, N10 = 1, N01 = 1``: numerator ``1 - 1 = 0``.

    >>> correlation([[1, 1], [0, 0], [1, 0], [0, 1]])
    0.0
    >>> correlation([[1, 0], [0, 1]])
    -1.0
    """
    is_right = as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_members < 2 or n_rows == 0:
        return 0.0
    n11, n00, n10, n01 = _pair_tables(is_right)
    denominator = np.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00))
    value = _mean_ratio(n11 * n00 - n01 * n10, denominator)
    return float(np.clip(value, -1.0, 1.0))


def disagreement(correct: ArrayLike) -> float:
    """Disagreement measure averaged over pairs.

    ``(N01 + N10) / W`` for each pair ``j < k``: the fraction of rows on
    which exactly one of the two members is right.

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        Mean disagreement in ``[0, 1]``.  ``M < 2`` or ``W == 0`` -> 0.0.

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    Pairs (0,1): 1 of 4 rows differ; (0,2): 3; (1,2): 2; mean
    ``(1/4 + 3/4 + 2/4) / 3 = 1/2``.

    >>> disagreement([[1, 1, 0], [1, 1, 1], [0, 1, 1], [1, 1, 0]])
    0.5
    """
    is_right = as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_members < 2 or n_rows == 0:
        return 0.0
    _, _, n10, n01 = _pair_tables(is_right)
    value = float(((n01 + n10) / n_rows).mean())
    return float(np.clip(value, 0.0, 1.0))


def pairwise_kappa(correct: ArrayLike) -> float:
    """Cohen's kappa of two members' correctness, averaged over pairs.

    ``kappa = 2 (N11 N00 - N01 N10) /
    ((N11 + N10) (N01 + N00) + (N11 + N01) (N10 + N00))`` for each pair
    ``j < k`` (counts as in :func:`q_statistic`).

    Parameters
    ----------
    correct : array_like of bool or {0, 1}, shape (W, M)
        ``correct[r, m]`` is true when member ``m`` was right on row ``r``.

    Returns
    -------
    float
        Mean kappa in ``[-1, 1]`` (clipped, which only removes round-off).
        ``M < 2`` or ``W == 0`` -> 0.0; a pair with a zero denominator
        (both members always right, or both always wrong) contributes 0.0.

    Raises
    ------
    ValueError
        If ``correct`` is not 2-D or holds values other than 0/1.

    Examples
    --------
    ``N11 = 2, N00 = 1, N10 = 1, N01 = 0``: ``2 (2 - 0) / (3 * 1 + 2 * 2)
    = 4/7``.

    >>> round(pairwise_kappa([[1, 1], [1, 1], [0, 0], [1, 0]]), 6)
    0.571429
    """
    is_right = as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_members < 2 or n_rows == 0:
        return 0.0
    n11, n00, n10, n01 = _pair_tables(is_right)
    denominator = (n11 + n10) * (n01 + n00) + (n11 + n01) * (n10 + n00)
    value = _mean_ratio(2.0 * (n11 * n00 - n01 * n10), denominator)
    return float(np.clip(value, -1.0, 1.0))
