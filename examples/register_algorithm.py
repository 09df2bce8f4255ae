"""Register an algorithm with ``ensemble-env benchmark`` (see docs/benchmark.md).

    ensemble-env benchmark --register examples/register_algorithm.py \
        --algorithms per_task_vote,static_team --seeds 5 --cache bbh5 --out bench

``per_task_vote``: for each task, the k models most accurate on train answer by mean probability, k (1..N)
chosen by the mean reward at alpha on validation; the test split is only answered.
"""

import numpy as np

from ensemble_env.game.reward import question_rewards
from ensemble_mappo.benchmark import Answers, register_algorithm


def _vote(cache, rows, models):
    return cache.probs[rows][:, models].mean(axis=1).argmax(-1)


@register_algorithm("per_task_vote", config={"version": 1})
def per_task_vote(cache, seed, alpha, out_dir):
    train, validation, test = (cache.select(split) for split in ("train", "validation", "test"))
    tasks, n = np.asarray(cache.tasks), cache.n_models
    predictions, teams = np.zeros(test.size, dtype=np.int64), np.zeros((test.size, n), dtype=bool)
    for task in np.unique(tasks[test]):
        fit, tune, here = train[tasks[train] == task], validation[tasks[validation] == task], tasks[test] == task
        ranked = np.argsort(-(cache.probs[fit].argmax(-1) == cache.labels[fit, None]).mean(axis=0), kind="stable")
        rewards = [
            question_rewards(
                _vote(cache, tune, ranked[:k]) == cache.labels[tune], np.full(tune.size, k / n), alpha=alpha
            )
            for k in range(1, n + 1)
        ]
        k = int(np.argmax([reward.mean() for reward in rewards])) + 1
        predictions[here] = _vote(cache, test[here], ranked[:k])
        teams[np.ix_(here, ranked[:k])] = True
    return Answers(test, predictions, teams, {"seed_independent": True})
