"""The mean-probability vote (``fusion.mean_vote``) sums its members in model order: the same float64 sums, bit
for bit, as the whole (Q, N, C) table cast to float64 and summed over the models, for pools of 1 to 16 models, with
ties and padded choices; rows read in place (``rows=``) vote as the copied rows."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_env.baselines.fusion import mean_vote


@pytest.mark.parametrize("n_models", [1, 3, 5, 10, 16])
def test_the_vote_is_the_float64_sum_of_the_members_in_model_order(n_models: int) -> None:
    rng = np.random.default_rng(n_models)
    n_questions, n_choices = 4000, 7
    logits = rng.normal(size=(n_questions, n_models, n_choices))
    probs = (np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)).astype(np.float32)
    probs[::5] = np.round(probs[::5], 1)  # ties between choices
    members = rng.random((n_questions, n_models)) < 0.5
    members[np.arange(n_questions), rng.integers(0, n_models, n_questions)] = True
    valid = np.ones((n_questions, n_choices), dtype=bool)
    valid[::3, 4:] = False  # questions of 4 choices, padded to 7
    total = (probs.astype(np.float64) * members[:, :, None]).sum(axis=1)
    expected = np.where(valid, total, -np.inf).argmax(axis=1)
    np.testing.assert_array_equal(mean_vote(probs, members, valid), expected)


def test_rows_read_in_place_vote_as_the_copied_rows_and_bad_rows_are_refused() -> None:
    rng = np.random.default_rng(7)
    probs = rng.random((300, 5, 4)).astype(np.float32)
    rows = rng.integers(0, 300, 120)  # repeats and any order, as a test split's positions in a cache
    members = rng.random((120, 5)) < 0.5
    members[:, 2] = True
    valid = np.ones((120, 4), dtype=bool)
    valid[::2, 3] = False
    in_place = mean_vote(probs, members, valid, rows=rows)
    np.testing.assert_array_equal(in_place, mean_vote(probs[rows], members, valid))
    for bad in (np.array([0, 300]), np.array([-1, 0]), np.array([0.0, 1.0])):
        with pytest.raises(ValueError, match=r"rows must be positions in 0\.\.299"):
            mean_vote(probs, members[:2], valid[:2], rows=bad)
    with pytest.raises(ValueError, match="float32"):
        mean_vote(probs.astype(np.float64), members, valid, rows=rows)
    with pytest.raises(ValueError, match="members"):
        mean_vote(probs, members[:, :4], valid, rows=rows)
