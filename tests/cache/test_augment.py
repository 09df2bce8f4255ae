"""Model-permuted copies of a cache's tasks (ensemble_env.cache.augment): what a copy holds, the seed, the refusals,
and the learner's use of them (``model_permutations``) on tasks never seen only."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_env.cache.augment import MAX_COPIES, permuted_copies
from ensemble_env.synthetic import make_cache


def test_each_copy_is_its_task_with_the_models_outputs_moved_to_other_columns() -> None:
    cache = make_cache(n_models=4, n_questions=120, n_tasks=3, seed=2)
    bigger = permuted_copies(cache, 2, seed=5)
    train = cache.select("train")
    assert bigger.n_questions == cache.n_questions + 2 * train.size
    np.testing.assert_array_equal(bigger.scores[: cache.n_questions], cache.scores)  # every question keeps its index
    np.testing.assert_array_equal(bigger.split[: cache.n_questions], cache.split)
    added = np.arange(cache.n_questions, bigger.n_questions)
    assert set(bigger.split[added]) == {0}  # train, as the questions copied
    names = np.asarray(bigger.task_names)[np.asarray(bigger.tasks)[added]]
    for name in np.unique(names):
        rows = added[names == name]
        source = train[np.asarray(cache.tasks)[train] == cache.task_index(name.split("~")[0])]
        np.testing.assert_array_equal(bigger.labels[rows], cache.labels[source])
        # one permutation of the models for the whole copy: find it from the first question, check every question
        original = cache.scores[source[0]]
        first = [int(np.flatnonzero((original == column).all(axis=1))[0]) for column in bigger.scores[rows[0]]]
        assert sorted(first) == list(range(cache.n_models))
        np.testing.assert_array_equal(bigger.scores[rows], cache.scores[source][:, first, :])
    again = permuted_copies(cache, 2, seed=5)
    np.testing.assert_array_equal(again.scores, bigger.scores)  # seeded
    assert not np.array_equal(permuted_copies(cache, 2, seed=6).scores, bigger.scores)
    assert permuted_copies(cache, 0, seed=5) is cache


@pytest.mark.parametrize("copies", [-1, MAX_COPIES + 1, 1.5, True, "2"])
def test_bad_copy_counts_are_refused(copies) -> None:
    cache = make_cache(n_models=3, n_questions=30, n_tasks=2, seed=0)
    with pytest.raises(ValueError, match="copies"):
        permuted_copies(cache, copies, seed=0)
    with pytest.raises(ValueError, match="split"):
        permuted_copies(cache, 1, seed=0, split="dev")


def test_the_learner_adds_copies_only_on_tasks_never_seen() -> None:
    pytest.importorskip("torch")
    from ensemble_mappo.config import TrainConfig
    from ensemble_mappo.training import training_cache

    cache = make_cache(n_models=3, n_questions=60, n_tasks=2, seed=0)
    config = TrainConfig(model_permutations=1)
    unseen = {"episodes": "task", "decider_extras": ("task_record",), "fusion_extras": ()}
    assert training_cache(config, cache, unseen).n_questions == cache.n_questions + cache.select("train").size
    assert training_cache(TrainConfig(), cache, unseen) is cache
    with pytest.raises(ValueError, match="tasks never seen"):
        training_cache(config, cache, {"episodes": "stream", "decider_extras": ("task",)})
    with pytest.raises(ValueError, match="tasks never seen"):
        training_cache(config, cache, {"episodes": "task", "decider_extras": ("task",)})
