"""The registry of the window statistics: :class:`MetricSpec` (name, bounds, inputs) for each, in
:data:`METRICS`, and :func:`window_statistic`, which computes any of them by name on one window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from numpy.typing import ArrayLike

from ensemble_env.metrics.entropy import binary_entropy
from ensemble_env.metrics.failures import focal_diversity, generalized_diversity
from ensemble_env.metrics.pairwise import correlation, disagreement, pairwise_kappa, q_statistic
from ensemble_env.metrics.votes import fleiss_kappa, plurality_accuracy

__all__ = ["METRICS", "MetricSpec", "window_statistic"]


@dataclass(frozen=True)
class MetricSpec:
    """Description and bounds of one window statistic.

    Attributes
    ----------
    name : str
        Key in :data:`METRICS` and name of the function in :mod:`ensemble_env.metrics`.
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
