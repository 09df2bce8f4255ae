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
``fail3``  (C(N, 3),)       rows where i, j and l all fail, one entry     C(k, 3)
                            per set {i < j < l} (``triple_index``)
``plural`` (P, 2^N / 64)    rows where the plurality vote of team e is    2^N / 64 words per plane
                            right, for every team e, bit-sliced: plane    touched (N <= 12 only)
                            k holds bit k of the counts, P = bits of T
``agree``  (N, N)           rows where i and j predict the same class     N^2 (Fleiss' kappa only)
``votes``  (N, C)           rows where model i predicts class c           N (Fleiss' kappa only)
==========================  ============================================  ===========================

From them, for a team of M members: focal diversity in O(M^3 / 6) (for focal model f on its failure rows,
with A = sum_{g in team} fail2[f, g] - fail[f] and P = 2 S_f, S_f the sum of the counts of the sets {f, g, h}
of three distinct members, GD_f = 1 - (2A + P) / ((M - 1)(fail[f] + A))); generalized diversity, Q,
correlation, disagreement and pairwise kappa in O(M^2); Fleiss' kappa in O(M^2 + M C); plurality accuracy in
O(P) from the per-team counts, whose update is a bit-sliced ripple over the question's row of the plurality
table (one bit per team, ``plurality_table``). Two statistics cost O(T M) per step (they read the window's
rows): ``binary_entropy`` always, and ``plurality_accuracy`` for pools of more than 12 models, where the 2^N
table would not fit. All counts are integers, so nothing drifts over millions of steps.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.game.jit import kernel
from ensemble_env.metrics import METRICS

__all__ = [
    "MAX_TABLE_MODELS",
    "STATISTIC_CODES",
    "count_planes",
    "n_triples",
    "plurality_table",
    "statistic_bounds",
    "table_words",
    "unpack_teams",
]

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


# -- layout of the counts --------------------------------------------------------------------------------


def n_triples(n_models: int) -> int:
    """Entries of the packed three-way co-failure counts: one per set {i < j < k} of distinct models."""
    return max(n_models * (n_models - 1) * (n_models - 2) // 6, 1)


@kernel(inline="always")
def triple_index(i: int, j: int, k: int) -> int:
    """Position of the set {i < j < k} in the packed counts (the combinatorial number system)."""
    return k * (k - 1) * (k - 2) // 6 + j * (j - 1) // 2 + i


def table_words(n_models: int) -> int:
    """uint64 words of one plurality-table row (2^N bits, one per team)."""
    return max((1 << n_models) // 64, 1)


def count_planes(window: int) -> int:
    """Bit planes of the per-team plurality counts: enough for counts up to ``window``."""
    return max(int(window).bit_length(), 1)


# -- setup -----------------------------------------------------------------------------------------------


@kernel()
def _plurality_table(preds: np.ndarray, labels: np.ndarray, n_choices: np.ndarray, n_models: int) -> np.ndarray:
    n_questions = preds.shape[0]
    n_teams = 1 << n_models
    table = np.zeros((n_questions, max(n_teams // 64, 1)), dtype=np.uint64)
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
            if best == labels[q]:
                table[q, team >> 6] |= np.uint64(1) << np.uint64(team & 63)
    return table


def plurality_table(preds: np.ndarray, labels: np.ndarray, n_choices: np.ndarray, n_models: int) -> np.ndarray:
    """(Q, max(2^N / 64, 1)) uint64 bits: bit e (word e // 64, bit e % 64) is set where the plurality vote
    of team e (bit i of e = model i) is right on question q.

    Ties go to the lowest class index; the empty team (e = 0) is never right. ``unpack_teams`` turns a row
    into one 0/1 value per team.
    """
    return _plurality_table(
        np.ascontiguousarray(preds, dtype=np.int64),
        np.ascontiguousarray(labels, dtype=np.int64),
        np.ascontiguousarray(n_choices, dtype=np.int64),
        n_models,
    )


def unpack_teams(bits: np.ndarray, n_models: int) -> np.ndarray:
    """(..., 2^N) uint8 0/1 values of a (..., words) uint64 bit array of ``plurality_table`` or the planes."""
    as_bytes = np.ascontiguousarray(bits, dtype=np.uint64).view(np.uint8)
    return np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., : 1 << n_models]


# -- updates ---------------------------------------------------------------------------------------------


@kernel()
def add_failures(
    env: int,
    q: int,
    sign: int,
    failing: np.ndarray,
    n_failing: np.ndarray,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
) -> None:
    """Add (sign=+1) or remove (sign=-1) question q's rows from copy ``env``'s co-failure counts.

    ``failing[q]`` lists the failing models in increasing order, so the sets {i < j < l} come out sorted.
    The per-team plurality counts are updated by :func:`update_plurality` (one fused pass for the question
    entering and the one leaving), the agreement counts by :func:`add_agreement`.
    """
    k = n_failing[q]
    for a in range(k):
        i = failing[q, a]
        fail[env, i] += sign
        for b in range(k):
            fail2[env, i, failing[q, b]] += sign
        for b in range(a + 1, k):
            j = failing[q, b]
            for c in range(b + 1, k):
                fail3[env, triple_index(i, j, failing[q, c])] += sign


@kernel()
def add_agreement(env: int, q: int, sign: int, preds: np.ndarray, agree: np.ndarray, votes: np.ndarray) -> None:
    """Add or remove question q's rows from copy ``env``'s agreement counts (for Fleiss' kappa)."""
    n_models = preds.shape[1]
    for i in range(n_models):
        votes[env, i, preds[q, i]] += sign
        for j in range(n_models):
            if preds[q, i] == preds[q, j]:
                agree[env, i, j] += sign


@kernel()
def update_plurality(
    planes: np.ndarray, entering: np.ndarray, leaving: np.ndarray, full: bool, carry: np.ndarray, borrow: np.ndarray
) -> None:
    """Per-team counts += entering - leaving (bit rows of the plurality table; ``leaving`` unused unless full).

    The counts are bit-sliced: ``planes[k]`` holds bit k of every team's count, 64 teams to a word, so one
    question moves 2^N / 64 words per plane instead of 2^N integers. A team whose bit is set in ``entering``
    only is incremented, in ``leaving`` only decremented (disjoint sets of teams), so both ripple through
    the planes at once; the ripple stops at the first plane where no carry or borrow is left. Counts stay
    within [0, T] < 2^planes, so nothing overflows.
    """
    n_words = planes.shape[1]
    for w in range(n_words):
        if full:
            carry[w] = entering[w] & ~leaving[w]
            borrow[w] = leaving[w] & ~entering[w]
        else:
            carry[w] = entering[w]
            borrow[w] = 0
    for k in range(planes.shape[0]):
        pending = np.uint64(0)
        for w in range(n_words):
            bits = planes[k, w]
            up, down = carry[w], borrow[w]
            planes[k, w] = bits ^ (up | down)
            carry[w] = bits & up
            borrow[w] = ~bits & down
            pending |= carry[w] | borrow[w]
        if pending == 0:
            return


@kernel()
def plurality_count(planes: np.ndarray, team: int) -> int:
    """The window count of team ``team`` in the bit-sliced counts ``planes`` (P, words)."""
    word, shift = team >> 6, np.uint64(team & 63)
    total = 0
    for k in range(planes.shape[0]):
        total += int((planes[k, word] >> shift) & np.uint64(1)) << k
    return total


# -- statistics of a team ----------------------------------------------------------------------------------


@kernel()
def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


@kernel()
def focal_diversity(
    env: int, members: np.ndarray, fail: np.ndarray, fail2: np.ndarray, fail3: np.ndarray, shared: np.ndarray
) -> float:
    """Focal diversity of the team ``members`` (increasing model indices) from the packed counts.

    For focal member f, sum_{g,h in team} fail3[f, g, h] = n_f + 3 A + 2 S_f, where S_f sums the counts of the
    sets {f, g, h} of three distinct members; so one pass over the C(M, 3) sets of the team gives every
    member's P = 2 S_f. ``shared`` is (N,) int64 scratch.
    """
    size = members.shape[0]
    if size == 0:
        return 0.0
    for a in range(size):
        shared[a] = 0
    for a in range(size):
        for b in range(a + 1, size):
            for c in range(b + 1, size):
                count = fail3[env, triple_index(members[a], members[b], members[c])]
                shared[a] += count
                shared[b] += count
                shared[c] += count
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
        total += 1.0 - (2.0 * pairs + 2.0 * shared[a]) / ((size - 1) * (n_f + pairs))
    return _clip(total / size, 0.0, 1.0)


@kernel()
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


@kernel()
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


@kernel()
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


@kernel()
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


@kernel()
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
