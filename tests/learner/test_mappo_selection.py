"""The checkpoint a learner deploys (ensemble_mappo.selection): the best validation reward, or safe policy
improvement over the start (a checkpoint only where its paired gain is positive with confidence)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from ensemble_mappo.selection import DEFAULT_SELECTION, SELECTIONS, select


def test_the_bounds_by_hand() -> None:
    start = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    checkpoint = np.array([1.0, 1.0, 1.0, -1.0, 1.0])  # one question better: differences 0, 2, 0, 0, 0
    other = np.array([1.0, -1.0, -1.0, -1.0, 1.0])  # one worse
    chosen = select([start, checkpoint, other], "safe", delta=0.1)
    z = NormalDist().inv_cdf(1 - 0.1 / 2)  # Bonferroni over the two checkpoints
    error = math.sqrt(((2 - 0.4) ** 2 + 4 * 0.4**2) / 4) / math.sqrt(5)
    assert chosen.z == pytest.approx(z)
    assert chosen.means == pytest.approx((0.2, 0.6, -0.2))
    assert chosen.gains == pytest.approx((0.0, 0.4, -0.4))
    assert chosen.errors == pytest.approx((0.0, error, error))
    assert chosen.bounds == pytest.approx((0.0, 0.4 - z * error, -0.4 - z * error))
    assert chosen.index == 0  # 0.4 - 1.64 * 0.4 < 0: not a confident gain
    assert select([start, checkpoint, other], "best").index == 1
    assert chosen.row(1) == {
        "validation_reward": chosen.means[1],
        "gain_over_start": chosen.gains[1],
        "gain_error": chosen.errors[1],
        "gain_lower_bound": chosen.bounds[1],
    }


def test_a_confident_gain_is_deployed_and_the_best_of_the_passing_ones() -> None:
    rng = np.random.default_rng(0)
    start = rng.choice([-1.0, 1.0], size=2000, p=[0.6, 0.4])
    better = np.where(rng.random(2000) < 0.3, 1.0, start)  # about +0.36 mean: far above its error
    slightly = np.where(rng.random(2000) < 0.1, 1.0, start)
    chosen = select([start, slightly, better, slightly])
    assert chosen.rule == DEFAULT_SELECTION == "safe" and chosen.index == 2
    assert all(bound > 0 for bound in chosen.bounds[1:])
    # a lead of 2 questions in 40 (+0.1) is within the noise; the same share of 4,000 questions is not
    few = np.r_[np.full(2, -1.0), np.ones(38)]
    assert select([few, np.ones(40)]).index == 0 and select([np.tile(few, 100), np.ones(4000)]).index == 1


def test_more_checkpoints_ask_for_more_confidence() -> None:
    start = np.zeros(100)
    lead = np.r_[np.full(20, 1.0), np.zeros(80)]  # gain 0.2, error 0.04: 5 errors
    assert select([start, lead]).index == 1
    assert select([start, lead] + [start] * 4).z > select([start, lead]).z
    # equal candidates: the earliest under "best", the start under "safe" (a zero gain is no gain)
    assert select([start, start, start], "best").index == 0
    assert select([lead, lead, lead], "safe").index == 0


@pytest.mark.parametrize(
    ("rewards", "rule", "delta", "message"),
    [
        ([np.zeros(3)], "greedy", 0.05, "selection rule 'greedy' is not one of safe, best"),
        ([np.zeros(3)], "safe", 0.0, r"delta must be a number in \(0, 1\), got 0.0"),
        ([np.zeros(3)], "safe", True, "got True"),
        ([], "safe", 0.05, "no candidate"),
        ([np.zeros(3), np.zeros(4)], "safe", 0.05, r"candidate 1's rewards have shape \(4,\)"),
        ([np.zeros((3, 1))], "safe", 0.05, r"candidate 0's rewards have shape \(3, 1\)"),
        ([np.zeros(0)], "best", 0.05, "expected one non-empty row"),
        ([np.zeros(3), np.array([0.0, np.nan, 1.0])], "best", 0.05, "candidate 1's rewards hold a non-finite"),
    ],
)
def test_bad_input_is_refused(rewards, rule, delta, message) -> None:
    with pytest.raises(ValueError, match=message):
        select(rewards, rule, delta)


def test_the_rules_are_listed() -> None:
    assert SELECTIONS == ("safe", "best", "trained")


def test_the_trained_rule_never_deploys_the_start() -> None:
    start, worse, better = np.array([1.0, 1.0, 1.0]), np.array([-1.0, -1.0, 1.0]), np.array([1.0, -1.0, 1.0])
    assert select([start, worse, better], "trained").index == 2  # the best trained checkpoint, below the start
    assert select([start, better, better], "trained").index == 1  # ties: the earliest
    assert select([start, worse, better], "best").index == 0 and select([start], "trained").index == 0
