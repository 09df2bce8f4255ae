"""Statistics of the members' predicted classes (their votes) on a window: the accuracy of the plurality vote
and Fleiss' kappa agreement.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.metrics.validation import as_labels, as_n_choices, as_preds

__all__ = ["fleiss_kappa", "plurality_accuracy", "row_counts"]


def row_counts(values: np.ndarray, n: int) -> np.ndarray:
    """(R, n) int: how many times each row of ``values`` (R, M), integers in 0..n-1, holds each of them.

    >>> row_counts(np.array([[2, 2, 0], [1, 0, 1]]), 3).tolist()
    [[1, 0, 2], [1, 2, 0]]
    """
    n_rows = values.shape[0]
    flat = (np.arange(n_rows)[:, None] * n + values).ravel()
    return np.bincount(flat, minlength=n_rows * n).reshape(n_rows, n)


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
    predicted = as_preds(preds)
    true_class = as_labels(labels, predicted.shape[0])
    n_rows, n_members = predicted.shape
    if n_rows == 0 or n_members == 0:
        return 0.0
    # Compress classes to 0..K-1 (order-preserving, so ties still go to the
    # lowest class) to keep the count table small whatever the class values.
    classes, class_index = np.unique(predicted, return_inverse=True)
    class_index = class_index.reshape(predicted.shape)
    n_classes = classes.size
    winner = classes[row_counts(class_index, n_classes).argmax(axis=1)]
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
    n_categories = as_n_choices(n_choices)
    predicted = as_preds(preds)
    if predicted.size and predicted.max() >= n_categories:
        raise ValueError(f"preds must lie in 0..n_choices-1 = 0..{n_categories - 1}, got {predicted.max().item()!r}")
    n_rows, n_members = predicted.shape
    if n_rows == 0 or n_members < 2:
        return 0.0
    counts = row_counts(predicted, n_categories)  # (W, n_choices): n_ij
    category_totals = counts.sum(axis=0)  # (n_choices,)
    if category_totals.max() == n_rows * n_members:
        return 1.0  # Pe == 1
    agreement_per_row = ((counts**2).sum(axis=1) - n_members) / (n_members * (n_members - 1))
    mean_agreement = agreement_per_row.mean()
    category_share = category_totals / (n_rows * n_members)
    chance_agreement = float((category_share**2).sum())
    kappa = (mean_agreement - chance_agreement) / (1.0 - chance_agreement)
    return float(np.clip(kappa, -1.0, 1.0))
