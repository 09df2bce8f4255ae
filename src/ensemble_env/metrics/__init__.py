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

The statistics live in one module per kind; every public name is re-exported here
(``from ensemble_env.metrics import focal_diversity, METRICS``):

==============  ==================================================================================
module          what it holds
==============  ==================================================================================
``validation``  the checks and conversions of ``correct``, ``preds``, ``labels`` and ``n_choices``
``failures``    failure-coincidence diversity: :func:`generalized_diversity`, :func:`focal_diversity`
``votes``       statistics of the predicted classes: :func:`plurality_accuracy`, :func:`fleiss_kappa`
``pairwise``    pair means (Kuncheva & Whitaker 2003): :func:`q_statistic`, :func:`correlation`,
                :func:`disagreement`, :func:`pairwise_kappa`
``entropy``     :func:`binary_entropy`
``registry``    :class:`MetricSpec`, :data:`METRICS` and :func:`window_statistic`
==============  ==================================================================================
"""

from __future__ import annotations

from ensemble_env.metrics.entropy import binary_entropy
from ensemble_env.metrics.failures import focal_diversity, generalized_diversity
from ensemble_env.metrics.pairwise import correlation, disagreement, pairwise_kappa, q_statistic
from ensemble_env.metrics.registry import METRICS, MetricSpec, window_statistic
from ensemble_env.metrics.votes import fleiss_kappa, plurality_accuracy

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
