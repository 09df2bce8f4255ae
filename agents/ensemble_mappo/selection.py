"""The policy a learner deploys, chosen on the validation split among its start and its trained checkpoints.

A run's candidates are its start policy (update 0: for MAPPO the offline start, the fixed team per task the
cache's train outcomes favour, answered by the mean vote) and ``K`` checkpoints; each has played the same
validation questions, so the choice reads per-question rewards (paired). Two rules (:data:`SELECTIONS`):

- ``"best"``: the candidate with the highest mean validation reward (ties: the earliest).
- ``"trained"``: the same among the trained checkpoints, never the start: for a learner whose start encodes
  nothing worth falling back on (an untrained network: tasks never seen under partial feedback).
- ``"safe"``: safe policy improvement over the start (high-confidence policy improvement, Thomas, Theocharous
  and Ghavamzadeh, ICML 2015; the same test guards SPIBB's baseline, Laroche et al., ICML 2019). A checkpoint is
  deployed only when the one-sided lower confidence bound of its paired per-question gain over the start is
  above 0, at level ``delta`` shared by the ``K`` checkpoints (Bonferroni: ``z = Phi^-1(1 - delta / K)``, the
  normal approximation of the mean of the per-question differences); among the checkpoints that pass, the one
  with the highest mean. When none passes, the start is deployed: fine-tuning is kept only where validation
  shows it pays with confidence, not where it is ahead by less than its noise.

``delta`` is 0.05, the conventional level, and is not tuned. docs/mappo.md ("The checkpoint the benchmark
deploys") gives the reasons and the evidence: on bbh5 the trained checkpoints lead their start on validation by
0.01-0.05 reward, 1.8 standard errors at most, and lose to it on test.

>>> start = np.array([1.0, -1.0, 1.0, -1.0])
>>> ahead = np.array([1.0, 1.0, 1.0, -1.0])
>>> select([start, ahead], "best").index, select([start, ahead], "safe").index
(1, 0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ensemble_mappo.config import SELECTIONS

__all__ = ["DEFAULT_DELTA", "DEFAULT_SELECTION", "SELECTIONS", "Selection", "select", "stops"]

#: the rules :func:`select` knows; the first is the default
DEFAULT_SELECTION = SELECTIONS[0]
#: the safe rule's level: the chance, split over the checkpoints, of deploying one that does not beat the start
DEFAULT_DELTA = 0.05


@dataclass(frozen=True)
class Selection:
    """The candidate chosen (``index`` into the candidates; 0 is the start) and, per candidate, the facts the
    choice read: ``means`` (mean validation reward), ``gains`` (mean paired gain over the start), ``errors``
    (the standard error of that gain) and ``bounds`` (the gain's lower confidence bound under the safe rule,
    ``gains - z * errors``; for the start 0)."""

    index: int
    rule: str
    delta: float
    z: float
    means: tuple[float, ...]
    gains: tuple[float, ...]
    errors: tuple[float, ...]
    bounds: tuple[float, ...]

    def row(self, k: int) -> dict[str, Any]:
        """Candidate ``k``'s facts, JSON-ready (the benchmark stores them in its run's ``info``)."""
        return {
            "validation_reward": self.means[k],
            "gain_over_start": self.gains[k],
            "gain_error": self.errors[k],
            "gain_lower_bound": self.bounds[k],
        }


def select(rewards: Sequence[np.ndarray], rule: str = DEFAULT_SELECTION, delta: float = DEFAULT_DELTA) -> Selection:
    """Choose among candidates from their per-question validation rewards: ``rewards[0]`` the start's,
    ``rewards[1:]`` the checkpoints', each a 1-D array over the same questions in the same order.

    ValueError when ``rule`` is not one of :data:`SELECTIONS`, ``delta`` is not in (0, 1), there is no
    candidate, or the arrays differ in shape, are empty or hold a non-finite reward.
    """
    if rule not in SELECTIONS:
        raise ValueError(f"selection rule {rule!r} is not one of {', '.join(SELECTIONS)}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"selection delta must be a number in (0, 1), got {delta!r}")
    if len(rewards) == 0:
        raise ValueError("selection: no candidate to choose from")
    table = [np.asarray(values, dtype=np.float64) for values in rewards]
    shape = table[0].shape
    for k, values in enumerate(table):
        if values.ndim != 1 or values.shape != shape or values.size == 0:
            raise ValueError(
                f"selection: candidate {k}'s rewards have shape {values.shape}, expected one non-empty row "
                f"like the start's {shape}"
            )
        if not np.isfinite(values).all():
            raise ValueError(f"selection: candidate {k}'s rewards hold a non-finite value")
    stacked = np.stack(table)
    means = stacked.mean(axis=1)
    differences = stacked - stacked[0]
    n = differences.shape[1]
    gains = differences.mean(axis=1)
    errors = differences.std(axis=1, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(len(table))
    checkpoints = len(table) - 1
    z = NormalDist().inv_cdf(1.0 - float(delta) / max(1, checkpoints))
    bounds = gains - z * errors
    bounds[0] = 0.0
    if rule == "best":
        index = int(np.argmax(means))  # the first of equal means: the earliest
    elif rule == "trained":
        index = 1 + int(np.argmax(means[1:])) if len(table) > 1 else 0
    else:
        passing = [k for k in range(1, len(table)) if bounds[k] > 0.0]
        index = max(passing, key=lambda k: (means[k], -k)) if passing else 0
    return Selection(
        index=index,
        rule=rule,
        delta=float(delta),
        z=float(z),
        means=tuple(float(v) for v in means),
        gains=tuple(float(v) for v in gains),
        errors=tuple(float(v) for v in errors),
        bounds=tuple(float(v) for v in bounds),
    )


def stops(iterations: int, checkpoints: int) -> list[int]:
    """The updates after which a run of ``iterations`` updates keeps its networks among the candidates of its policy
    (the start, update 0, is one more when ``checkpoints`` > 0): ``checkpoints`` evenly spaced, the last at the end.

    >>> stops(100, 5), stops(3, 5), stops(100, 0)
    ([20, 40, 60, 80, 100], [1, 2, 3], [])
    """
    return sorted({max(1, round(iterations * (k + 1) / checkpoints)) for k in range(checkpoints)})
