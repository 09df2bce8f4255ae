"""The mean-probability vote of each row's own team (a numba kernel): what :func:`ensemble_env.baselines.mean_vote`
computes for the baselines and the benchmark's routing counterfactuals.

Each row's vote is the valid choice with the largest sum of its members' probabilities, summed in float64 in model
order, ties to the lowest valid choice (0 when no choice is valid): the sums of
:func:`ensemble_env.game.task_record.team_vote_table` and of :func:`ensemble_env.game.dynamics.weighted_answers` with
equal weights, bit for bit. A compiled loop over the members only: O(Q x team size x C), no (Q, C) temporaries per
model (the Python form was a tenth of a second per call on a benchmark's 2,000 generated tasks).
"""

from __future__ import annotations

import numpy as np

from ensemble_env.game.jit import kernel

__all__ = ["row_mean_votes"]


@kernel()
def _row_votes(probs: np.ndarray, rows: np.ndarray, members: np.ndarray, valid: np.ndarray) -> np.ndarray:
    n_models, width = probs.shape[1], probs.shape[2]
    n_rows = rows.size
    answers = np.zeros(n_rows, dtype=np.int64)
    sums = np.zeros(width, dtype=np.float64)
    for q in range(n_rows):
        sums[:] = 0.0
        for i in range(n_models):
            if members[q, i]:
                for c in range(width):
                    sums[c] += float(probs[rows[q], i, c])
        best, best_score = 0, -np.inf
        for c in range(width):
            if valid[q, c] and sums[c] > best_score:
                best, best_score = c, sums[c]
        answers[q] = best
    return answers


def row_mean_votes(
    probs: np.ndarray, members: np.ndarray, valid: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """(Q,) int64: for each row q the valid choice with the largest float64 sum of ``probs[rows[q], i]`` over the models
    i with ``members[q, i]``, in model order, ties to the lowest (see the module docstring). ``probs`` (P, N, C)
    float32, ``rows`` (Q,) positions in it (None: every row, Q = P; a cache's whole ``probs`` is read in place, never
    copied), ``members`` (Q, N) and ``valid`` (Q, C) bool; ValueError on other shapes, a row out of range or a
    ``probs`` of another dtype (a cast would change the sums)."""
    probs = np.asarray(probs)
    if probs.dtype != np.float32 or probs.ndim != 3:
        raise ValueError(f"probs must be (P, N, C) float32, not {probs.shape} {probs.dtype}")
    rows = np.arange(probs.shape[0]) if rows is None else np.asarray(rows)
    if rows.ndim != 1 or rows.dtype.kind not in "iu" or (rows.size and not 0 <= rows.min() <= rows.max() < len(probs)):
        raise ValueError(f"rows must be positions in 0..{len(probs) - 1}, got {rows.dtype} of shape {rows.shape}")
    members, valid = np.asarray(members, dtype=bool), np.asarray(valid, dtype=bool)
    if members.shape != (rows.size, probs.shape[1]) or valid.shape != (rows.size, probs.shape[2]):
        raise ValueError(
            f"members {members.shape} and valid {valid.shape} must be {(rows.size, probs.shape[1])} and "
            f"{(rows.size, probs.shape[2])} for {rows.size} rows of probs {probs.shape}"
        )
    return _row_votes(
        np.ascontiguousarray(probs),
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(members),
        np.ascontiguousarray(valid),
    )
