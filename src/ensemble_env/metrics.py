"""Diversity and agreement statistics of a team over a window of questions.

A *team* is a subset of ``M`` ensemble members.  The decider observes the
team's behaviour on the last ``W`` answered questions (the *window*):

* ``correct`` -- ``(W, M)`` bool (or 0/1 integer) array, ``True`` where a
  member answered the row's question correctly;
* ``preds`` -- ``(W, M)`` non-negative integer array of predicted classes;
* ``labels`` -- ``(W,)`` non-negative integer array of true classes.

Every function here is pure numpy, returns a Python ``float``, and is finite
and inside its stated range for *every* valid input, including empty windows
(``W == 0``), empty teams (``M == 0``), single-member teams (``M == 1``) and
``0/0`` cases:

=========================  =========  ==========================================
statistic                  range      degenerate-case convention
=========================  =========  ==========================================
``generalized_diversity``  [0, 1]     M == 0 -> 0; no failure (incl. W == 0)
                                      -> 1; else M == 1 -> 0
``focal_diversity``        [0, 1]     M == 0 -> 0; a member that never fails
                                      contributes 1; M == 1 -> 0 if it failed
                                      at least once, else 1
``plurality_accuracy``     [0, 1]     W == 0 -> 0; M == 0 -> 0 (no votes)
``fleiss_kappa``           [-1, 1]    W == 0 or M < 2 -> 0; all votes in one
                                      category (Pe == 1) -> 1
``q_statistic``            [-1, 1]    M < 2 or W == 0 -> 0; a pair with a zero
``correlation``            [-1, 1]    denominator contributes 0 ("no
``pairwise_kappa``         [-1, 1]    measurable dependence")
``disagreement``           [0, 1]     M < 2 or W == 0 -> 0
``binary_entropy``         [0, 1]     W == 0 or M == 0 -> 0
=========================  =========  ==========================================

The code released with the RL-Focal paper (Wu & Liu) scores a team of fewer
than two models as ``-99`` and maps ``NaN`` results to ``0``; here no sentinel
is used: every value is finite and lies in the range above, so it can be used
directly in a bounded observation space (see :data:`METRICS`).  Ratio
statistics are clipped to their range as a last step, which only removes
floating-point round-off (the exact values are already in range).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "METRICS",
    "MetricSpec",
    "binary_entropy",
    "correlation",
    "disagreement",
    "fleiss_kappa",
    "focal_diversity",
    "generalized_diversity",
    "pairwise_kappa",
    "plurality_accuracy",
    "q_statistic",
    "window_statistic",
]


# --------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------


def _to_array(values: ArrayLike, name: str) -> np.ndarray:
    """Convert ``values`` to an ndarray, naming ``name`` on failure."""
    if values is None:
        raise ValueError(f"{name} is required, got None")
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} could not be converted to an array: {err}") from err


def _as_correct(correct: ArrayLike) -> NDArray[np.bool_]:
    """Validate a ``(W, M)`` correctness matrix and return it as bool."""
    array = _to_array(correct, "correct")
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


def _as_class_indices(values: np.ndarray, name: str) -> NDArray[np.int64]:
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


def _as_preds(preds: ArrayLike) -> NDArray[np.int64]:
    """Validate a ``(W, M)`` matrix of predicted classes."""
    array = _to_array(preds, "preds")
    if array.ndim != 2:
        raise ValueError(f"preds must be 2-D (W, M), got shape {array.shape}")
    return _as_class_indices(array, "preds")


def _as_labels(labels: ArrayLike, n_rows: int) -> NDArray[np.int64]:
    """Validate a ``(W,)`` vector of true classes matching ``n_rows`` rows."""
    array = _to_array(labels, "labels")
    if array.shape != (n_rows,):
        raise ValueError(f"labels must be 1-D with shape (W,) = ({n_rows},) to match preds, got shape {array.shape}")
    return _as_class_indices(array, "labels")


def _as_n_choices(n_choices: int) -> int:
    """Validate the number of answer categories."""
    try:
        n_categories = operator.index(n_choices)
    except TypeError as err:
        raise ValueError(f"n_choices must be an int >= 1, got {n_choices!r}") from err
    if n_categories < 1:
        raise ValueError(f"n_choices must be an int >= 1, got {n_choices!r}")
    return n_categories


# --------------------------------------------------------------------------
# failure-coincidence diversity
# --------------------------------------------------------------------------


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
    is_right = _as_correct(correct)
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
    is_right = _as_correct(correct)
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


# --------------------------------------------------------------------------
# prediction-based statistics
# --------------------------------------------------------------------------


def plurality_accuracy(preds: ArrayLike, labels: ArrayLike) -> float:
    """Accuracy of the team's plurality (majority) vote.

    On every row the class predicted by most members wins; ties go to the
    lowest class index (``np.bincount(...).argmax()`` semantics).

    Parameters
    ----------
    preds : array_like of int, shape (W, M)
        Non-negative predicted class of each member on each row.
    labels : array_like of int, shape (W,)
        Non-negative true class of each row.

    Returns
    -------
    float
        Fraction of rows whose plurality vote equals the label, in
        ``[0, 1]``.  ``W == 0`` -> 0.0; ``M == 0`` -> 0.0 (no votes counts
        as wrong).

    Raises
    ------
    ValueError
        If ``preds`` is not 2-D, ``labels`` is not of shape ``(W,)``, or
        either holds negative or non-integer values.

    Examples
    --------
    Votes ``(2, 2, 0)`` -> 2 (right), ``(1, 0, 1)`` -> 1 (wrong), and the tie
    ``(3, 1, 2)`` -> 1 (right): accuracy 2/3.

    >>> preds = [[2, 2, 0], [1, 0, 1], [3, 1, 2]]
    >>> round(plurality_accuracy(preds, [2, 0, 1]), 6)
    0.666667
    """
    predicted = _as_preds(preds)
    true_class = _as_labels(labels, predicted.shape[0])
    n_rows, n_members = predicted.shape
    if n_rows == 0 or n_members == 0:
        return 0.0
    # Compress classes to 0..K-1 (order-preserving, so ties still go to the
    # lowest class) to keep the count table small whatever the class values.
    classes, class_index = np.unique(predicted, return_inverse=True)
    class_index = class_index.reshape(predicted.shape)
    n_classes = classes.size
    flat = (np.arange(n_rows)[:, None] * n_classes + class_index).ravel()
    votes = np.bincount(flat, minlength=n_rows * n_classes).reshape(n_rows, n_classes)
    winner = classes[votes.argmax(axis=1)]
    return float(np.mean(winner == true_class))


def fleiss_kappa(preds: ArrayLike, n_choices: int) -> float:
    """Fleiss' kappa of the members' predictions (members are raters).

    With ``n_ij`` the number of members predicting class ``j`` on row ``i``:
    ``P_i = (sum_j n_ij^2 - M) / (M (M - 1))``, ``Pbar = mean_i P_i``,
    ``p_j = sum_i n_ij / (W M)``, ``Pe = sum_j p_j^2`` and
    ``kappa = (Pbar - Pe) / (1 - Pe)``.

    Parameters
    ----------
    preds : array_like of int, shape (W, M)
        Predicted class of each member on each row, in ``0..n_choices-1``.
    n_choices : int
        Number of answer categories (>= 1).

    Returns
    -------
    float
        Kappa in ``[-1, 1]`` (clipped, which only removes round-off).
        ``W == 0`` or ``M < 2`` -> 0.0; ``Pe == 1`` (every vote in one
        category: perfect but trivial agreement) -> 1.0.

    Raises
    ------
    ValueError
        If ``preds`` is not 2-D, holds values outside ``0..n_choices-1``, or
        ``n_choices`` is not an int >= 1.

    Examples
    --------
    Two raters, four rows ``(0,0), (1,1), (0,1), (1,0)``: ``P_i = 1, 1, 0, 0``
    so ``Pbar = 1/2``; ``p = (1/2, 1/2)`` so ``Pe = 1/2``; kappa = 0.

    >>> fleiss_kappa([[0, 0], [1, 1], [0, 1], [1, 0]], n_choices=2)
    0.0
    >>> fleiss_kappa([[0, 0], [1, 1], [2, 2]], n_choices=3)
    1.0
    """
    n_categories = _as_n_choices(n_choices)
    predicted = _as_preds(preds)
    if predicted.size and predicted.max() >= n_categories:
        raise ValueError(f"preds must lie in 0..n_choices-1 = 0..{n_categories - 1}, got {predicted.max().item()!r}")
    n_rows, n_members = predicted.shape
    if n_rows == 0 or n_members < 2:
        return 0.0
    flat = (np.arange(n_rows)[:, None] * n_categories + predicted).ravel()
    counts = np.bincount(flat, minlength=n_rows * n_categories).reshape(n_rows, n_categories)  # (W, n_choices): n_ij
    category_totals = counts.sum(axis=0)  # (n_choices,)
    if category_totals.max() == n_rows * n_members:
        return 1.0  # Pe == 1
    agreement_per_row = ((counts**2).sum(axis=1) - n_members) / (n_members * (n_members - 1))
    mean_agreement = agreement_per_row.mean()
    category_share = category_totals / (n_rows * n_members)
    chance_agreement = float((category_share**2).sum())
    kappa = (mean_agreement - chance_agreement) / (1.0 - chance_agreement)
    return float(np.clip(kappa, -1.0, 1.0))


# --------------------------------------------------------------------------
# pairwise statistics (Kuncheva & Whitaker 2003)
# --------------------------------------------------------------------------


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
    is_right = _as_correct(correct)
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
    is_right = _as_correct(correct)
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
    is_right = _as_correct(correct)
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
    is_right = _as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_members < 2 or n_rows == 0:
        return 0.0
    n11, n00, n10, n01 = _pair_tables(is_right)
    denominator = (n11 + n10) * (n01 + n00) + (n11 + n01) * (n10 + n00)
    value = _mean_ratio(2.0 * (n11 * n00 - n01 * n10), denominator)
    return float(np.clip(value, -1.0, 1.0))


# --------------------------------------------------------------------------
# entropy
# --------------------------------------------------------------------------


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
    is_right = _as_correct(correct)
    n_rows, n_members = is_right.shape
    if n_rows == 0 or n_members == 0:
        return 0.0
    share_right = is_right.sum(axis=1) / n_members  # (W,)
    mixed = (share_right > 0.0) & (share_right < 1.0)  # 0 log 0 = 0 elsewhere
    p = share_right[mixed]
    entropy = -(p * np.log2(p) + (1.0 - p) * np.log2(1.0 - p))
    value = float(entropy.sum() / n_rows)
    return float(np.clip(value, 0.0, 1.0))


# --------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    """Description and bounds of one window statistic.

    Attributes
    ----------
    name : str
        Key in :data:`METRICS` and name of the function in this module.
    low, high : float
        Closed range of the statistic's value (for observation spaces).
    uses_preds : bool
        True if the statistic takes ``(preds, labels)`` or
        ``(preds, n_choices)`` rather than ``correct``.
    description : str
        One-line human-readable description.
    """

    name: str
    low: float
    high: float
    uses_preds: bool
    description: str


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec(
            name="focal_diversity",
            low=0.0,
            high=1.0,
            uses_preds=False,
            description="mean GD on the rows where each member fails (Wu & Liu)",
        ),
        MetricSpec(
            name="generalized_diversity",
            low=0.0,
            high=1.0,
            uses_preds=False,
            description="1 - P(2 members fail) / P(1 fails) (Partridge & Krzanowski)",
        ),
        MetricSpec(
            name="plurality_accuracy",
            low=0.0,
            high=1.0,
            uses_preds=True,
            description="accuracy of the plurality vote, ties to the lowest class",
        ),
        MetricSpec(
            name="fleiss_kappa",
            low=-1.0,
            high=1.0,
            uses_preds=True,
            description="Fleiss' kappa agreement of the members' predicted classes",
        ),
        MetricSpec(
            name="q_statistic",
            low=-1.0,
            high=1.0,
            uses_preds=False,
            description="Yule's Q of pairwise correctness, mean over pairs",
        ),
        MetricSpec(
            name="correlation",
            low=-1.0,
            high=1.0,
            uses_preds=False,
            description="phi correlation of pairwise correctness, mean over pairs",
        ),
        MetricSpec(
            name="disagreement",
            low=0.0,
            high=1.0,
            uses_preds=False,
            description="share of rows where exactly one of a pair is right, pair mean",
        ),
        MetricSpec(
            name="pairwise_kappa",
            low=-1.0,
            high=1.0,
            uses_preds=False,
            description="Cohen's kappa of pairwise correctness, mean over pairs",
        ),
        MetricSpec(
            name="binary_entropy",
            low=0.0,
            high=1.0,
            uses_preds=False,
            description="row mean of the binary entropy (bits) of the share right",
        ),
    )
}
"""Registry of the window statistics, keyed by name (see :class:`MetricSpec`)."""


_WindowFunction = Callable[[ArrayLike | None, ArrayLike | None, ArrayLike | None, int | None], float]


def _required(value: ArrayLike | None, name: str) -> ArrayLike:
    if value is None:
        raise ValueError(f"{name} is required, got None")
    return value


def _on_correct(statistic: Callable[[ArrayLike], float]) -> _WindowFunction:
    """Adapt a ``statistic(correct)`` to the common window signature."""

    def compute(
        correct: ArrayLike | None,
        preds: ArrayLike | None,
        labels: ArrayLike | None,
        n_choices: int | None,
    ) -> float:
        return statistic(_required(correct, "correct"))

    return compute


def _plurality_window(
    correct: ArrayLike | None,
    preds: ArrayLike | None,
    labels: ArrayLike | None,
    n_choices: int | None,
) -> float:
    return plurality_accuracy(_required(preds, "preds"), _required(labels, "labels"))


def _fleiss_window(
    correct: ArrayLike | None,
    preds: ArrayLike | None,
    labels: ArrayLike | None,
    n_choices: int | None,
) -> float:
    if n_choices is None:
        raise ValueError("n_choices is required, got None")
    return fleiss_kappa(_required(preds, "preds"), n_choices)


_DISPATCH: dict[str, _WindowFunction] = {
    "focal_diversity": _on_correct(focal_diversity),
    "generalized_diversity": _on_correct(generalized_diversity),
    "plurality_accuracy": _plurality_window,
    "fleiss_kappa": _fleiss_window,
    "q_statistic": _on_correct(q_statistic),
    "correlation": _on_correct(correlation),
    "disagreement": _on_correct(disagreement),
    "pairwise_kappa": _on_correct(pairwise_kappa),
    "binary_entropy": _on_correct(binary_entropy),
}


def window_statistic(
    name: str,
    correct: ArrayLike | None,
    preds: ArrayLike | None,
    labels: ArrayLike | None,
    n_choices: int | None,
) -> float:
    """Compute the statistic registered as ``name`` on one window.

    Parameters
    ----------
    name : str
        A key of :data:`METRICS`.
    correct : array_like of bool or {0, 1}, shape (W, M), or None
        Per-member correctness; used when ``METRICS[name].uses_preds`` is
        False.
    preds : array_like of int, shape (W, M), or None
        Per-member predicted classes; used by ``plurality_accuracy`` and
        ``fleiss_kappa``.
    labels : array_like of int, shape (W,), or None
        True classes; used by ``plurality_accuracy``.
    n_choices : int or None
        Number of answer categories; used by ``fleiss_kappa``.

    Arguments the statistic does not use are ignored (they may be None).

    Returns
    -------
    float
        The statistic, finite and in ``[METRICS[name].low, METRICS[name].high]``.

    Raises
    ------
    ValueError
        If ``name`` is unknown (the message lists the valid names), or if a
        required argument is missing (None) or invalid.

    Examples
    --------
    >>> correct = [[1, 0], [1, 1]]
    >>> window_statistic("binary_entropy", correct, None, None, None)
    0.5
    >>> window_statistic("plurality_accuracy", None, [[1, 1], [0, 1]], [1, 1], 2)
    0.5
    """
    try:
        function = _DISPATCH[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(_DISPATCH))
        raise ValueError(f"unknown statistic {name!r}; valid names: {valid}") from None
    return function(correct, preds, labels, n_choices)
