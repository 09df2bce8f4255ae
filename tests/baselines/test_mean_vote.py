"""The mean-probability vote (``fusion.mean_vote``) sums its members one model at a time: the same float64 sums, bit
for bit, as the whole (Q, N, C) table cast to float64 and summed over the models, for pools of 1 to 16 models, with
ties and padded choices."""

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
