"""Sliding-window statistics of a team at a cost independent of the window length T (numba kernels).

The decider observes statistics of its team over the last T answered questions. Recomputing them from the
T x M correctness matrix every step costs O(T M); here each copy of the game keeps *counts* over its window
that are updated when a question enters and when one leaves, and every statistic of any team follows from
them (the plain definitions are in :mod:`ensemble_env.metrics`; the tests check equality to 1e-9):

==========================  ============================================  ===========================
count (per copy)            what it holds                                 update per question
==========================  ============================================  ===========================
``fail``   (N,)             rows where model i fails                      k, k = failing models
``fail2``  (N, N)           rows where i and j both fail                  k^2
``fail3``  (N, N, N)        rows where i, j and l all fail                k^3
``plural`` (2^N,)           rows where the plurality vote of team e is    2^N (N <= 12 only)
                            right, for every team e
``agree``  (N, N)           rows where i and j predict the same class     N^2 (Fleiss' kappa only)
``votes``  (N, C)           rows where model i predicts class c           N (Fleiss' kappa only)
==========================  ============================================  ===========================

From them, for a team of M members: focal diversity in O(M^3) (for focal model f on its failure rows,
with A = sum_{g in team} fail2[f, g] - fail[f] and P = sum_{g,h in team} fail3[f, g, h] - fail[f] - 3A,
GD_f = 1 - (2A + P) / ((M - 1)(fail[f] + A))); generalized diversity, Q, correlation, disagreement and
pairwise kappa in O(M^2); Fleiss' kappa in O(M^2 + M C); plurality accuracy in O(1) from the per-team
table. Two statistics cost O(T M) per step (they read the window's rows): ``binary_entropy`` always, and
``plurality_accuracy`` for pools of more than 12 models, where the 2^N table would not fit. All counts are
integers, so nothing drifts over millions of steps.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ensemble_env.metrics import METRICS

__all__ = ["MAX_TABLE_MODELS", "STATISTIC_CODES", "plurality_table", "statistic_bounds"]

#: the per-team plurality table (2^N entries per copy) is used up to this pool size
MAX_TABLE_MODELS = 12
#: kernel codes of the statistics, in the order of ``ensemble_env.metrics.METRICS``
STATISTIC_CODES = {name: code for code, name in enumerate(METRICS)}
FOCAL, GENERALIZED, PLURALITY, FLEISS, Q_STAT, CORRELATION, DISAGREEMENT, PAIR_KAPPA, ENTROPY = (
    STATISTIC_CODES[name]
    for name in (
        "focal_diversity",
        "generalized_diversity",
        "plurality_accuracy",
        "fleiss_kappa",
        "q_statistic",
        "correlation",
        "disagreement",
        "pairwise_kappa",
        "binary_entropy",
    )
)


def statistic_bounds(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of the named statistics, as float32 arrays."""
    low = np.array([METRICS[name].low for name in names], dtype=np.float32)
    high = np.array([METRICS[name].high for name in names], dtype=np.float32)
    return low, high


# -- setup -----------------------------------------------------------------------------------------------


@njit(cache=True)
def _plurality_table(preds: np.ndarray, labels: np.ndarray, n_choices: np.ndarray, n_models: int) -> np.ndarray:
    n_questions = preds.shape[0]
    n_teams = 1 << n_models
    table = np.zeros((n_questions, n_teams), dtype=np.uint8)
    max_choices = int(n_choices.max())
    counts = np.zeros(max_choices, dtype=np.int64)
    for q in range(n_questions):
        counts[:] = 0
        team = 0
        # Gray-code walk over the teams: each step adds or removes one member.
        for step in range(1, n_teams):
            bit = 0
            while not (step >> bit) & 1:
                bit += 1
            team ^= 1 << bit
            if team & (1 << bit):
                counts[preds[q, bit]] += 1
            else:
                counts[preds[q, bit]] -= 1
            best = 0
            for c in range(1, n_choices[q]):
                if counts[c] > counts[best]:
                    best = c
            table[q, team] = best == labels[q]
    return table


def plurality_table(preds: np.ndarray, labels: np.ndarray, n_choices: np.ndarray, n_models: int) -> np.ndarray:
    """(Q, 2^N) uint8: 1 where the plurality vote of team e (bit i = model i) is right on question q.

    Ties go to the lowest class index; the empty team (e = 0) is never right.
    """
    return _plurality_table(
        np.ascontiguousarray(preds, dtype=np.int64),
        np.ascontiguousarray(labels, dtype=np.int64),
        np.ascontiguousarray(n_choices, dtype=np.int64),
        n_models,
    )


# -- updates ---------------------------------------------------------------------------------------------


@njit(cache=True)
def add_question(
    env: int,
    q: int,
    sign: int,
    failing: np.ndarray,
    n_failing: np.ndarray,
    preds: np.ndarray,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
    agree: np.ndarray,
    votes: np.ndarray,
    track_agreement: bool,
) -> None:
    """Add (sign=+1) or remove (sign=-1) question q's rows from copy ``env``'s pairwise window counts.

    The per-team plurality counts are updated by :func:`update_plurality` (one fused pass for the question
    entering and the one leaving).
    """
    k = n_failing[q]
    for a in range(k):
        i = failing[q, a]
        fail[env, i] += sign
        for b in range(k):
            j = failing[q, b]
            fail2[env, i, j] += sign
            for c in range(k):
                fail3[env, i, j, failing[q, c]] += sign
    if track_agreement:
        n_models = preds.shape[1]
        for i in range(n_models):
            votes[env, i, preds[q, i]] += sign
            for j in range(n_models):
                if preds[q, i] == preds[q, j]:
                    agree[env, i, j] += sign


@njit(cache=True)
def update_plurality(plural: np.ndarray, entering: np.ndarray, leaving: np.ndarray, full: bool) -> None:
    """plural (2^N,) += entering - leaving (rows of the plurality table); ``leaving`` ignored unless full."""
    if full:
        for team in range(plural.shape[0]):
            plural[team] += entering[team] - leaving[team]  # numba promotes the uint8 operands to a signed int
    else:
        for team in range(plural.shape[0]):
            plural[team] += entering[team]


# -- statistics of a team ----------------------------------------------------------------------------------


@njit(cache=True)
def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


@njit(cache=True)
def focal_diversity(env: int, members: np.ndarray, fail: np.ndarray, fail2: np.ndarray, fail3: np.ndarray) -> float:
    size = members.shape[0]
    if size == 0:
        return 0.0
    total = 0.0
    for a in range(size):
        f = members[a]
        n_f = fail[env, f]
        if n_f == 0:
            total += 1.0  # never fails in the window: GD of an empty window
            continue
        if size == 1:
            continue  # a lone model's failures always coincide: 0
        pairs = 0
        for b in range(size):
            pairs += fail2[env, f, members[b]]
        pairs -= n_f
        triples = 0
        for b in range(size):
            for c in range(size):
                triples += fail3[env, f, members[b], members[c]]
        triples -= n_f + 3 * pairs
        total += 1.0 - (2.0 * pairs + triples) / ((size - 1) * (n_f + pairs))
    return _clip(total / size, 0.0, 1.0)


@njit(cache=True)
def generalized_diversity(env: int, members: np.ndarray, count: int, fail: np.ndarray, fail2: np.ndarray) -> float:
    size = members.shape[0]
    if size == 0:
        return 0.0
    failures = 0
    for a in range(size):
        failures += fail[env, members[a]]
    if failures == 0:
        return 1.0
    if size == 1:
        return 0.0
    both = 0
    for a in range(size):
        for b in range(size):
            if a != b:
                both += fail2[env, members[a], members[b]]
    return _clip(1.0 - both / ((size - 1) * failures), 0.0, 1.0)


@njit(cache=True)
def pairwise(env: int, members: np.ndarray, count: int, fail: np.ndarray, fail2: np.ndarray, which: int) -> float:
    """Mean over member pairs of Q, correlation, disagreement or pairwise kappa (``which``)."""
    size = members.shape[0]
    if size < 2 or count == 0:
        return 0.0
    total = 0.0
    n_pairs = 0
    for a in range(size):
        for b in range(a + 1, size):
            i, j = members[a], members[b]
            n00 = float(fail2[env, i, j])
            n01 = float(fail[env, i]) - n00  # i wrong, j right
            n10 = float(fail[env, j]) - n00  # i right, j wrong
            n11 = count - n00 - n01 - n10
            cross = n11 * n00 - n01 * n10
            if which == Q_STAT:
                denominator = n11 * n00 + n01 * n10
                value = cross / denominator if denominator != 0 else 0.0
            elif which == CORRELATION:
                denominator = np.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00))
                value = cross / denominator if denominator != 0 else 0.0
            elif which == DISAGREEMENT:
                value = (n01 + n10) / count
            else:
                denominator = (n11 + n10) * (n01 + n00) + (n11 + n01) * (n10 + n00)
                value = 2.0 * cross / denominator if denominator != 0 else 0.0
            total += value
            n_pairs += 1
    low = 0.0 if which == DISAGREEMENT else -1.0
    return _clip(total / n_pairs, low, 1.0)


@njit(cache=True)
def fleiss_kappa(env: int, members: np.ndarray, count: int, agree: np.ndarray, votes: np.ndarray) -> float:
    size = members.shape[0]
    if count == 0 or size < 2:
        return 0.0
    n_choices = votes.shape[2]
    votes_total = count * size
    chance = 0.0
    for c in range(n_choices):
        in_class = 0
        for a in range(size):
            in_class += votes[env, members[a], c]
        if in_class == votes_total:
            return 1.0  # every vote in one class: Pe == 1
        share = in_class / votes_total
        chance += share * share
    same = 0
    for a in range(size):
        for b in range(size):
            same += agree[env, members[a], members[b]]
    agreement = (same - votes_total) / (votes_total * (size - 1))
    return _clip((agreement - chance) / (1.0 - chance), -1.0, 1.0)


@njit(cache=True)
def plurality_from_rows(
    env: int,
    members: np.ndarray,
    count: int,
    window: np.ndarray,
    preds: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
) -> float:
    """Plurality accuracy read from the window's rows: O(T M), for pools too large for the table."""
    size = members.shape[0]
    if count == 0 or size == 0:
        return 0.0
    votes = np.zeros(n_classes, dtype=np.int64)
    right = 0
    for r in range(count):
        q = window[env, r]
        votes[:] = 0
        for a in range(size):
            votes[preds[q, members[a]]] += 1
        best = 0
        for c in range(1, votes.shape[0]):
            if votes[c] > votes[best]:
                best = c
        right += best == labels[q]
    return right / count


@njit(cache=True)
def binary_entropy(env: int, members: np.ndarray, count: int, window: np.ndarray, correct: np.ndarray) -> float:
    """Mean over the window's rows of H2(members right / M), in bits: O(T M)."""
    size = members.shape[0]
    if count == 0 or size == 0:
        return 0.0
    total = 0.0
    for r in range(count):
        q = window[env, r]
        right = 0
        for a in range(size):
            right += correct[q, members[a]]
        p = right / size
        if 0.0 < p < 1.0:
            total -= p * np.log2(p) + (1.0 - p) * np.log2(1.0 - p)
    return _clip(total / count, 0.0, 1.0)
