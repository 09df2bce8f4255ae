"""Tests for ensemble_env.metrics.

Hand-computed values are derived in the comments next to each case; a
brute-force reference written with explicit Python loops (straight from the
definitions) is compared with the vectorised module on random windows.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from ensemble_env import metrics
from ensemble_env.metrics import (
    METRICS,
    MetricSpec,
    binary_entropy,
    correlation,
    disagreement,
    fleiss_kappa,
    focal_diversity,
    generalized_diversity,
    pairwise_kappa,
    plurality_accuracy,
    q_statistic,
    window_statistic,
)

CORRECT_STATISTICS = [
    focal_diversity,
    generalized_diversity,
    q_statistic,
    correlation,
    disagreement,
    pairwise_kappa,
    binary_entropy,
]

# --------------------------------------------------------------------------
# brute-force references: explicit loops, straight from the definitions
# --------------------------------------------------------------------------


def ref_generalized_diversity(rows: list[list[bool]], n_members: int) -> float:
    if n_members == 0:
        return 0.0
    n_rows = len(rows)
    # p_i: fraction of rows where exactly i members fail
    p = [0.0] * (n_members + 1)
    for row in rows:
        failures = sum(1 for value in row if not value)
        p[failures] += 1.0 / n_rows
    p1 = sum(i / n_members * p[i] for i in range(n_members + 1))
    if p1 == 0.0:
        return 1.0
    if n_members == 1:
        return 0.0
    p2 = sum(i * (i - 1) / (n_members * (n_members - 1)) * p[i] for i in range(n_members + 1))
    return 1.0 - p2 / p1


def ref_focal_diversity(rows: list[list[bool]], n_members: int) -> float:
    if n_members == 0:
        return 0.0
    total = 0.0
    for focal in range(n_members):
        focal_wrong_rows = [row for row in rows if not row[focal]]
        total += ref_generalized_diversity(focal_wrong_rows, n_members)
    return total / n_members


def ref_plurality_accuracy(preds: list[list[int]], labels: list[int]) -> float:
    if not preds or not preds[0]:
        return 0.0
    hits = 0
    for row, label in zip(preds, labels, strict=True):
        votes: dict[int, int] = {}
        for vote in row:
            votes[vote] = votes.get(vote, 0) + 1
        best = max(votes.values())
        winner = min(cls for cls, count in votes.items() if count == best)
        hits += winner == label
    return hits / len(preds)


def ref_fleiss_kappa(preds: list[list[int]], n_choices: int) -> float:
    n_rows = len(preds)
    n_members = len(preds[0]) if preds else 0
    if n_rows == 0 or n_members < 2:
        return 0.0
    p_bar = 0.0
    totals = [0] * n_choices
    for row in preds:
        counts = [0] * n_choices
        for vote in row:
            counts[vote] += 1
            totals[vote] += 1
        p_i = (sum(c * c for c in counts) - n_members) / (n_members * (n_members - 1))
        p_bar += p_i / n_rows
    p_e = sum((t / (n_rows * n_members)) ** 2 for t in totals)
    if max(totals) == n_rows * n_members:  # Pe == 1
        return 1.0
    return (p_bar - p_e) / (1.0 - p_e)


def ref_pair_counts(rows, j, k):
    n11 = n00 = n10 = n01 = 0
    for row in rows:
        if row[j] and row[k]:
            n11 += 1
        elif not row[j] and not row[k]:
            n00 += 1
        elif row[j]:
            n10 += 1
        else:
            n01 += 1
    return n11, n00, n10, n01


def ref_pair_q(n11, n00, n10, n01):
    den = n11 * n00 + n01 * n10
    return 0.0 if den == 0 else (n11 * n00 - n01 * n10) / den


def ref_pair_rho(n11, n00, n10, n01):
    den = math.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00))
    return 0.0 if den == 0 else (n11 * n00 - n01 * n10) / den


def ref_pair_kappa(n11, n00, n10, n01):
    den = (n11 + n10) * (n01 + n00) + (n11 + n01) * (n10 + n00)
    return 0.0 if den == 0 else 2 * (n11 * n00 - n01 * n10) / den


def ref_pairwise_mean(rows, n_members, pair_value) -> float:
    if n_members < 2 or len(rows) == 0:
        return 0.0
    values = [pair_value(*ref_pair_counts(rows, j, k)) for j, k in itertools.combinations(range(n_members), 2)]
    return sum(values) / len(values)


def ref_disagreement(rows, n_members) -> float:
    n_rows = len(rows)
    return ref_pairwise_mean(rows, n_members, lambda n11, n00, n10, n01: (n01 + n10) / n_rows)


def ref_binary_entropy(rows, n_members) -> float:
    if len(rows) == 0 or n_members == 0:
        return 0.0
    total = 0.0
    for row in rows:
        p = sum(row) / n_members
        for q in (p, 1.0 - p):
            if q > 0.0:
                total -= q * math.log2(q)
    return total / len(rows)


def random_window(rng: np.random.Generator):
    """Random (correct, preds, labels, n_choices) with W in 0..40, M in 0..6."""
    n_rows = int(rng.integers(0, 41))
    n_members = int(rng.integers(0, 7))
    n_choices = int(rng.integers(1, 5))
    labels = rng.integers(0, n_choices, size=n_rows)
    # Members of varying skill: each copies the label with its own probability,
    # so some windows contain members that are always right / always wrong.
    skill = rng.choice([0.0, 0.3, 0.6, 0.9, 1.0], size=n_members)
    copies_label = rng.random((n_rows, n_members)) < skill
    noise = rng.integers(0, n_choices, size=(n_rows, n_members))
    preds = np.where(copies_label, labels[:, None], noise)
    correct = preds == labels[:, None]
    return correct, preds, labels, n_choices


RANDOM_WINDOWS = [random_window(np.random.default_rng(seed)) for seed in range(200)]


# --------------------------------------------------------------------------
# generalized diversity
# --------------------------------------------------------------------------

# 5 x 4 window; failures per row f = 0, 1, 1, 2, 3.
GD_WINDOW = np.array(
    [
        [1, 1, 1, 1],  # f = 0
        [0, 1, 1, 1],  # f = 1
        [0, 1, 1, 1],  # f = 1
        [0, 0, 1, 1],  # f = 2
        [1, 0, 0, 0],  # f = 3
    ],
    dtype=bool,
)


def test_generalized_diversity_by_hand():
    # p_0 = 1/5, p_1 = 2/5, p_2 = 1/5, p_3 = 1/5, p_4 = 0
    # p1 = (1/4)(2/5) + (2/4)(1/5) + (3/4)(1/5) = 2/20 + 2/20 + 3/20 = 7/20
    # p2 = (2*1/12)(1/5) + (3*2/12)(1/5) = 2/60 + 6/60 = 2/15
    # GD = 1 - (2/15) / (7/20) = 1 - 40/105 = 13/21
    assert generalized_diversity(GD_WINDOW) == pytest.approx(13 / 21, abs=1e-12)


def test_generalized_diversity_extremes():
    # all three always fail together: p_3 = 1, p1 = 1, p2 = 1 -> GD = 0
    assert generalized_diversity(np.zeros((4, 3), dtype=bool)) == 0.0
    # at most one failure per row: p2 = 0 -> GD = 1
    one_fails = [[0, 1, 1], [1, 0, 1], [1, 1, 0], [1, 1, 1]]
    assert generalized_diversity(one_fails) == 1.0


def test_generalized_diversity_degenerate():
    assert generalized_diversity(np.zeros((5, 0), dtype=bool)) == 0.0  # M == 0
    assert generalized_diversity(np.zeros((0, 0), dtype=bool)) == 0.0  # M == 0 first
    assert generalized_diversity(np.zeros((0, 3), dtype=bool)) == 1.0  # W == 0
    assert generalized_diversity(np.ones((6, 3), dtype=bool)) == 1.0  # no failure
    assert generalized_diversity([[True], [False]]) == 0.0  # M == 1, failed
    assert generalized_diversity([[True], [True]]) == 1.0  # M == 1, p1 == 0 first
    assert generalized_diversity(np.zeros((0, 1), dtype=bool)) == 1.0


# --------------------------------------------------------------------------
# focal diversity
# --------------------------------------------------------------------------


def test_focal_diversity_by_hand():
    # GD_F = 1 - sum f(f-1) / ((M-1) sum f) over the rows where F fails, M = 4.
    # member 0 fails on rows with f = 1, 1, 2: 1 - 2 / (3 * 4)  = 5/6
    #   (check via p_i on those 3 rows: p1 = 1/3, p2 = 1/18, 1 - 1/6 = 5/6)
    # member 1 fails on rows with f = 2, 3:    1 - 8 / (3 * 5)  = 7/15
    # member 2 fails on the row with f = 3:    1 - 6 / (3 * 3)  = 1/3
    # member 3 fails on the row with f = 3:                       1/3
    # mean = (25/30 + 14/30 + 10/30 + 10/30) / 4 = 59/120
    assert focal_diversity(GD_WINDOW) == pytest.approx(59 / 120, abs=1e-12)


def test_focal_diversity_member_that_never_fails_contributes_one():
    # member 0 never fails -> 1.0; members 1 and 2 fail only on row 0 with f = 2:
    # 1 - 2 / (2 * 2) = 1/2 each; mean = (1 + 1/2 + 1/2) / 3 = 2/3
    correct = [[1, 0, 0], [1, 1, 1]]
    assert focal_diversity(correct) == pytest.approx(2 / 3, abs=1e-12)


def test_focal_diversity_degenerate():
    assert focal_diversity(np.zeros((4, 0), dtype=bool)) == 0.0  # M == 0
    assert focal_diversity(np.zeros((0, 0), dtype=bool)) == 0.0
    assert focal_diversity(np.zeros((0, 3), dtype=bool)) == 1.0  # W == 0
    assert focal_diversity(np.ones((5, 3), dtype=bool)) == 1.0  # nobody fails
    assert focal_diversity(np.zeros((5, 3), dtype=bool)) == 0.0  # always together
    assert focal_diversity([[1], [0], [1]]) == 0.0  # lone member failed once
    assert focal_diversity([[1], [1], [1]]) == 1.0  # lone member never failed
    assert focal_diversity(np.zeros((0, 1), dtype=bool)) == 1.0


# --------------------------------------------------------------------------
# plurality accuracy
# --------------------------------------------------------------------------


def test_plurality_accuracy_by_hand():
    preds = [
        [0, 1, 2],  # three-way tie -> lowest class 0; label 0: right
        [2, 2, 1],  # 2 wins;                          label 1: wrong
        [1, 3, 3],  # 3 wins;                          label 3: right
        [4, 0, 4],  # 4 wins;                          label 4: right
    ]
    assert plurality_accuracy(preds, [0, 1, 3, 4]) == pytest.approx(3 / 4)


def test_plurality_accuracy_tie_goes_to_lowest_class():
    # votes 3, 1, 1, 3: tie between 1 and 3 -> 1
    assert plurality_accuracy([[3, 1, 1, 3]], [1]) == 1.0
    assert plurality_accuracy([[3, 1, 1, 3]], [3]) == 0.0
    # large class values do not matter (tie between 7 and 10**12 -> 7)
    assert plurality_accuracy([[10**12, 7]], [7]) == 1.0


def test_plurality_accuracy_degenerate():
    assert plurality_accuracy(np.zeros((0, 3), dtype=int), np.zeros(0, int)) == 0.0
    assert plurality_accuracy(np.zeros((4, 0), dtype=int), [0, 1, 2, 3]) == 0.0
    assert plurality_accuracy(np.zeros((0, 0)), []) == 0.0
    assert plurality_accuracy([[2], [1]], [2, 2]) == 0.5  # M == 1: member accuracy


# --------------------------------------------------------------------------
# Fleiss' kappa
# --------------------------------------------------------------------------


def test_fleiss_kappa_by_hand():
    preds = [
        [0, 0, 0],  # n = (3, 0, 0): P = (9 - 3) / 6 = 1
        [0, 0, 1],  # n = (2, 1, 0): P = (5 - 3) / 6 = 1/3
        [1, 1, 2],  # n = (0, 2, 1): P = 1/3
        [2, 1, 0],  # n = (1, 1, 1): P = (3 - 3) / 6 = 0
    ]
    # Pbar = (1 + 1/3 + 1/3 + 0) / 4 = 5/12
    # category totals (6, 4, 2) / 12 -> p = (1/2, 1/3, 1/6)
    # Pe = 1/4 + 1/9 + 1/36 = 14/36 = 7/18
    # kappa = (5/12 - 7/18) / (1 - 7/18) = (1/36) / (11/18) = 1/22
    assert fleiss_kappa(preds, 3) == pytest.approx(1 / 22, abs=1e-12)


def test_fleiss_kappa_perfect_disagreement_is_minus_one():
    # P_i = 0 on both rows, p = (1/2, 1/2), Pe = 1/2 -> (0 - 1/2) / (1/2) = -1
    assert fleiss_kappa([[0, 1], [1, 0]], 2) == pytest.approx(-1.0)


def test_fleiss_kappa_degenerate():
    assert fleiss_kappa(np.zeros((0, 3), dtype=int), 3) == 0.0  # W == 0
    assert fleiss_kappa([[0], [1], [2]], 3) == 0.0  # M == 1
    assert fleiss_kappa(np.zeros((3, 0), dtype=int), 3) == 0.0  # M == 0
    # every vote in one category: Pe == 1 -> 1.0 (trivial perfect agreement)
    assert fleiss_kappa(np.full((4, 3), 2), 3) == 1.0
    assert fleiss_kappa(np.zeros((4, 3), dtype=int), 1) == 1.0


# --------------------------------------------------------------------------
# pairwise statistics
# --------------------------------------------------------------------------

PAIR_WINDOW = np.array(
    [
        [1, 1, 0],
        [1, 0, 0],
        [0, 1, 1],
        [1, 1, 1],
        [0, 0, 1],
    ],
    dtype=bool,
)
# pair (0, 1): N11 = 2 (rows 0, 3), N00 = 1 (row 4), N10 = 1 (row 1), N01 = 1 (row 2)
# pair (0, 2): N11 = 1 (row 3), N00 = 0, N10 = 2 (rows 0, 1), N01 = 2 (rows 2, 4)
# pair (1, 2): N11 = 2 (rows 2, 3), N00 = 1 (row 1), N10 = 1 (row 0), N01 = 1 (row 4)


def test_q_statistic_by_hand():
    # (0,1): (2*1 - 1*1) / (2*1 + 1*1) = 1/3; (0,2): (0 - 4) / (0 + 4) = -1;
    # (1,2): 1/3.  Mean: (1/3 - 1 + 1/3) / 3 = -1/9
    assert q_statistic(PAIR_WINDOW) == pytest.approx(-1 / 9, abs=1e-12)


def test_correlation_by_hand():
    # (0,1): 1 / sqrt(3*2*3*2) = 1/6; (0,2): -4 / sqrt(3*2*3*2) = -2/3;
    # (1,2): 1/6.  Mean: (1/6 - 4/6 + 1/6) / 3 = -1/9
    assert correlation(PAIR_WINDOW) == pytest.approx(-1 / 9, abs=1e-12)


def test_disagreement_by_hand():
    # (0,1): 2/5; (0,2): 4/5; (1,2): 2/5.  Mean: (8/5) / 3 = 8/15
    assert disagreement(PAIR_WINDOW) == pytest.approx(8 / 15, abs=1e-12)


def test_pairwise_kappa_by_hand():
    # (0,1): 2*1 / (3*2 + 3*2) = 1/6; (0,2): 2*(-4) / (3*2 + 3*2) = -2/3;
    # (1,2): 1/6.  Mean: -1/9
    assert pairwise_kappa(PAIR_WINDOW) == pytest.approx(-1 / 9, abs=1e-12)


def test_pairwise_statistics_single_pair_unbalanced_margins():
    # col 0 = 1,1,1,1,0,0; col 1 = 1,1,1,0,0,0
    # N11 = 3, N10 = 1, N00 = 2, N01 = 0
    correct = np.array([[1, 1], [1, 1], [1, 1], [1, 0], [0, 0], [0, 0]])
    # Q = (3*2 - 0) / (3*2 + 0) = 1
    assert q_statistic(correct) == pytest.approx(1.0)
    # rho = 6 / sqrt((3+1)(0+2)(3+0)(1+2)) = 6 / sqrt(72) = 1 / sqrt(2)
    assert correlation(correct) == pytest.approx(1 / math.sqrt(2), abs=1e-12)
    # kappa = 2*6 / ((4)(2) + (3)(3)) = 12/17
    assert pairwise_kappa(correct) == pytest.approx(12 / 17, abs=1e-12)
    # disagreement = (0 + 1) / 6
    assert disagreement(correct) == pytest.approx(1 / 6, abs=1e-12)


def test_pair_with_zero_denominator_contributes_zero_but_is_counted():
    # member 2 is always right, so pairs (0,2) and (1,2) have N00 = N01 = 0:
    # Q denominators N11*N00 + N01*N10 = 0 -> contribute 0.
    # pair (0,1): N11 = 2 (rows 0, 3), N00 = 1 (row 1), N10 = 1 (row 2), N01 = 0
    #   -> Q = (2 - 0) / (2 + 0) = 1.  Mean over 3 pairs: 1/3.
    correct = [[1, 1, 1], [0, 0, 1], [1, 0, 1], [1, 1, 1]]
    assert q_statistic(correct) == pytest.approx(1 / 3, abs=1e-12)
    # rho: (0,2), (1,2) have (N01 + N00) = 0 -> 0.
    # (0,1): (2*1 - 0) / sqrt((3)(1)(2)(2)) = 2 / sqrt(12) = 1/sqrt(3); mean / 3.
    assert correlation(correct) == pytest.approx(1 / math.sqrt(3) / 3, abs=1e-12)


@pytest.mark.parametrize("statistic", [q_statistic, correlation, disagreement, pairwise_kappa])
def test_pairwise_degenerate(statistic):
    assert statistic(np.zeros((5, 0), dtype=bool)) == 0.0  # M == 0
    assert statistic([[True], [False]]) == 0.0  # M == 1
    assert statistic(np.zeros((0, 4), dtype=bool)) == 0.0  # W == 0
    # every denominator zero (all right / all wrong): each pair contributes 0
    assert statistic(np.ones((5, 3), dtype=bool)) == 0.0
    assert statistic(np.zeros((5, 3), dtype=bool)) == 0.0


# --------------------------------------------------------------------------
# binary entropy
# --------------------------------------------------------------------------


def test_binary_entropy_by_hand():
    correct = [
        [0, 0, 0, 0],  # l = 0: H2(0) = 0
        [1, 0, 0, 0],  # l = 1: H2(1/4) = 1/4 * 2 + 3/4 * log2(4/3)
        [1, 1, 0, 0],  # l = 2: H2(1/2) = 1
        [1, 1, 1, 1],  # l = 4: H2(1) = 0
    ]
    h_quarter = 0.25 * 2 + 0.75 * (2 - math.log2(3))  # = 2 - 0.75 log2 3
    assert binary_entropy(correct) == pytest.approx((h_quarter + 1) / 4, abs=1e-12)


def test_binary_entropy_degenerate():
    assert binary_entropy(np.zeros((0, 3), dtype=bool)) == 0.0  # W == 0
    assert binary_entropy(np.zeros((3, 0), dtype=bool)) == 0.0  # M == 0
    assert binary_entropy([[1], [0]]) == 0.0  # M == 1: always unanimous
    assert binary_entropy([[1, 0], [0, 1]]) == 1.0  # even split every row


# --------------------------------------------------------------------------
# brute force vs vectorised, bounds, return types
# --------------------------------------------------------------------------


@pytest.mark.parametrize("window", RANDOM_WINDOWS)
def test_matches_brute_force_reference(window):
    correct, preds, labels, n_choices = window
    n_members = correct.shape[1]
    rows = [[bool(v) for v in row] for row in correct]
    pred_rows = [[int(v) for v in row] for row in preds]
    label_list = [int(v) for v in labels]
    expected = {
        "generalized_diversity": ref_generalized_diversity(rows, n_members),
        "focal_diversity": ref_focal_diversity(rows, n_members),
        "plurality_accuracy": ref_plurality_accuracy(pred_rows, label_list),
        "fleiss_kappa": ref_fleiss_kappa(pred_rows, n_choices),
        "q_statistic": ref_pairwise_mean(rows, n_members, ref_pair_q),
        "correlation": ref_pairwise_mean(rows, n_members, ref_pair_rho),
        "disagreement": ref_disagreement(rows, n_members),
        "pairwise_kappa": ref_pairwise_mean(rows, n_members, ref_pair_kappa),
        "binary_entropy": ref_binary_entropy(rows, n_members),
    }
    assert expected.keys() == METRICS.keys()
    for name, reference in expected.items():
        value = window_statistic(name, correct, preds, labels, n_choices)
        assert type(value) is float, name
        assert value == pytest.approx(reference, abs=1e-9), name


def test_random_windows_cover_degenerate_shapes():
    shapes = [window[0].shape for window in RANDOM_WINDOWS]
    assert any(w == 0 for w, _ in shapes)
    assert any(m == 0 for _, m in shapes)
    assert any(m == 1 for _, m in shapes)
    assert any(m >= 5 and w >= 30 for w, m in shapes)


def test_values_finite_and_within_bounds_on_random_input():
    rng = np.random.default_rng(12345)
    for _ in range(300):
        n_rows = int(rng.integers(0, 30))
        n_members = int(rng.integers(0, 8))
        n_choices = int(rng.integers(1, 4))
        preds = rng.integers(0, n_choices, size=(n_rows, n_members))
        labels = rng.integers(0, n_choices, size=n_rows)
        correct = rng.random((n_rows, n_members)) < rng.random()
        for name, spec in METRICS.items():
            source = preds == labels[:, None] if name == "binary_entropy" else correct
            value = window_statistic(name, source, preds, labels, n_choices)
            assert math.isfinite(value), name
            assert spec.low <= value <= spec.high, (name, value)


def test_extreme_anti_agreement_stays_in_bounds():
    # two members who always disagree on correctness: Q = rho = kappa = -1
    correct = np.array([[1, 0], [0, 1]] * 10, dtype=bool)
    for statistic in (q_statistic, correlation, pairwise_kappa):
        assert -1.0 <= statistic(correct) <= 1.0
        assert statistic(correct) == pytest.approx(-1.0)
    assert disagreement(correct) == 1.0


@pytest.mark.parametrize(
    "correct",
    [
        np.array([[True, False], [True, True]]),
        np.array([[1, 0], [1, 1]], dtype=np.int8),
        np.array([[1, 0], [1, 1]], dtype=np.uint64),
        np.array([[1.0, 0.0], [1.0, 1.0]]),
        [[1, 0], [1, 1]],
    ],
)
def test_correct_accepts_bool_and_01_arrays(correct):
    for statistic in CORRECT_STATISTICS:
        value = statistic(correct)
        assert type(value) is float
        assert value == statistic(np.array([[True, False], [True, True]]))


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("statistic", CORRECT_STATISTICS)
def test_correct_validation(statistic):
    with pytest.raises(ValueError, match=r"correct must be 2-D \(W, M\), got shape \(3,\)"):
        statistic(np.array([True, False, True]))
    with pytest.raises(ValueError, match=r"correct .*got shape \(2, 2, 2\)"):
        statistic(np.zeros((2, 2, 2), dtype=bool))
    with pytest.raises(ValueError, match=r"correct .*0/1.*got 2"):
        statistic([[1, 2], [0, 1]])
    with pytest.raises(ValueError, match=r"correct .*got -1"):
        statistic(np.array([[0, -1]]))
    with pytest.raises(ValueError, match=r"correct .*got 0\.5"):
        statistic([[0.5, 1.0]])
    with pytest.raises(ValueError, match=r"correct .*got nan"):
        statistic([[np.nan, 1.0]])
    with pytest.raises(ValueError, match=r"correct .*dtype"):
        statistic([["a", "b"]])
    with pytest.raises(ValueError, match=r"correct"):
        statistic([[1, 0], [1]])  # ragged


def test_plurality_validation():
    with pytest.raises(ValueError, match=r"preds must be 2-D \(W, M\), got shape \(3,\)"):
        plurality_accuracy([0, 1, 2], [0, 1, 2])
    with pytest.raises(ValueError, match=r"labels .*got shape \(4,\)"):
        plurality_accuracy([[0, 1], [1, 1], [2, 2]], [0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"labels .*got shape \(3, 1\)"):
        plurality_accuracy([[0, 1], [1, 1], [2, 2]], [[0], [1], [2]])
    with pytest.raises(ValueError, match=r"preds .*non-negative.*got -1"):
        plurality_accuracy([[0, -1]], [0])
    with pytest.raises(ValueError, match=r"labels .*non-negative.*got -3"):
        plurality_accuracy([[0, 1]], [-3])
    with pytest.raises(ValueError, match=r"preds .*integer.*got 1\.5"):
        plurality_accuracy([[0, 1.5]], [0])
    with pytest.raises(ValueError, match=r"preds .*dtype"):
        plurality_accuracy([["x", "y"]], [0])


def test_fleiss_validation():
    with pytest.raises(ValueError, match=r"preds must be 2-D \(W, M\), got shape \(2,\)"):
        fleiss_kappa([0, 1], 2)
    with pytest.raises(ValueError, match=r"preds must lie in 0\.\.n_choices-1.*got 3"):
        fleiss_kappa([[0, 3]], 3)
    with pytest.raises(ValueError, match=r"preds .*got -1"):
        fleiss_kappa([[0, -1]], 3)
    with pytest.raises(ValueError, match=r"n_choices .*got 0"):
        fleiss_kappa([[0, 0]], 0)
    with pytest.raises(ValueError, match=r"n_choices .*got 2\.0"):
        fleiss_kappa([[0, 0]], 2.0)
    with pytest.raises(ValueError, match=r"n_choices"):
        fleiss_kappa(np.zeros((0, 2), dtype=int), -1)  # checked even when W == 0


# --------------------------------------------------------------------------
# registry and dispatch
# --------------------------------------------------------------------------


def test_registry_contents():
    assert set(METRICS) == {
        "focal_diversity",
        "generalized_diversity",
        "plurality_accuracy",
        "fleiss_kappa",
        "q_statistic",
        "correlation",
        "disagreement",
        "pairwise_kappa",
        "binary_entropy",
    }
    bounds = {name: (spec.low, spec.high) for name, spec in METRICS.items()}
    assert bounds == {
        "focal_diversity": (0.0, 1.0),
        "generalized_diversity": (0.0, 1.0),
        "plurality_accuracy": (0.0, 1.0),
        "fleiss_kappa": (-1.0, 1.0),
        "q_statistic": (-1.0, 1.0),
        "correlation": (-1.0, 1.0),
        "disagreement": (0.0, 1.0),
        "pairwise_kappa": (-1.0, 1.0),
        "binary_entropy": (0.0, 1.0),
    }
    uses_preds = {name for name, spec in METRICS.items() if spec.uses_preds}
    assert uses_preds == {"plurality_accuracy", "fleiss_kappa"}
    for name, spec in METRICS.items():
        assert isinstance(spec, MetricSpec)
        assert spec.name == name
        assert spec.description
        assert callable(getattr(metrics, name))
        assert name in metrics.__all__


def test_metric_spec_is_frozen():
    spec = METRICS["q_statistic"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.low = -2.0  # type: ignore[misc]


def test_window_statistic_dispatch():
    preds = np.array([[0, 1, 1], [2, 2, 0], [1, 1, 1], [0, 2, 1]])
    labels = np.array([1, 2, 0, 1])
    correct = preds == labels[:, None]
    for statistic in CORRECT_STATISTICS:
        assert window_statistic(statistic.__name__, correct, preds, labels, 3) == statistic(correct)
    assert window_statistic("plurality_accuracy", correct, preds, labels, 3) == plurality_accuracy(preds, labels)
    assert window_statistic("fleiss_kappa", correct, preds, labels, 3) == fleiss_kappa(preds, 3)
    # unused arguments may be None
    assert window_statistic("disagreement", correct, None, None, None) == disagreement(correct)
    assert window_statistic("fleiss_kappa", None, preds, None, 3) == fleiss_kappa(preds, 3)


def test_window_statistic_errors():
    with pytest.raises(ValueError, match="unknown statistic 'entropy'") as info:
        window_statistic("entropy", np.ones((2, 2), bool), None, None, None)
    for name in METRICS:
        assert name in str(info.value)
    with pytest.raises(ValueError, match="correct is required"):
        window_statistic("q_statistic", None, np.zeros((2, 2), int), None, 2)
    with pytest.raises(ValueError, match="labels is required"):
        window_statistic("plurality_accuracy", None, np.zeros((2, 2), int), None, 2)
