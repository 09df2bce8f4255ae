"""How a team's answers become one answer: plurality and mean-probability votes over the valid choices.

Every function is vectorised over questions (rows); a team is a ``(Q, N)`` bool row mask over the N models.

>>> import numpy as np
>>> plurality_answers(np.array([[0, 1, 1], [2, 0, 1]]), n_classes=3).tolist()  # ties to the lowest choice
[1, 0]
>>> full_teams(2, 3).tolist(), fixed_teams(1, 3, [0, 2]).tolist()
([[True, True, True], [True, True, True]], [[True, False, True]])
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.votes import row_mean_votes
from ensemble_env.metrics.votes import row_counts

__all__ = ["fixed_teams", "full_teams", "mean_vote", "plurality_answers", "valid_choices"]


def valid_choices(cache: LogitCache, questions: np.ndarray) -> np.ndarray:
    """(Q, C) bool: which choices exist for each question."""
    return np.arange(cache.max_choices)[None, :] < cast(np.ndarray, cache.n_choices)[questions, None]


def plurality_answers(preds: np.ndarray, n_classes: int) -> np.ndarray:
    """Row-wise plurality of (Q, M) class indices in 0..n_classes-1; ties to the lowest class."""
    return row_counts(preds, n_classes).argmax(axis=1)


def mean_vote(probs: np.ndarray, members: np.ndarray, valid: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Argmax over valid choices of the summed probabilities of each row's members.

    ``probs`` is (P, N, C) float32; ``rows`` (Q,) the positions in it voted on (None: every row, Q = P), so that a
    cache's whole ``probs`` is read in place rather than copied for a split; ``members`` (Q, N) bool and ``valid``
    (Q, C) bool, one row per position. The sum (not the mean) is used: dividing by the team size does not move the
    argmax. Every call sums in model order, in float64, so a full team gives exactly the same numbers whichever
    function asks; ties go to the lowest valid choice. A compiled loop over each row's members
    (:func:`ensemble_env.game.votes.row_mean_votes`).
    """
    return row_mean_votes(probs, members, valid, rows=rows)


def full_teams(n_rows: int, n_models: int) -> np.ndarray:
    """(n_rows, n_models) bool: every model on every row."""
    return np.ones((n_rows, n_models), dtype=bool)


def fixed_teams(n_rows: int, n_models: int, members: ArrayLike) -> np.ndarray:
    """(n_rows, n_models) bool: the same team (model indices) on every row."""
    teams = np.zeros((n_rows, n_models), dtype=bool)
    teams[:, np.asarray(members, dtype=np.int64)] = True
    return teams
