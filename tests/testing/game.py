"""The game in the tests: the unseen-task game's hand cache and its tables (``ensemble_env/EnsembleUnseen-v1`` and
``-v2`` are checked by hand on it), random teams, every window statistic by its definition, a snapshot's round trip
through ``np.savez``, and a deep equality of everything an environment gives."""

from __future__ import annotations

import io

import numpy as np

from ensemble_env import LogitCache, metrics

# -- the unseen-task game's hand cache ---------------------------------------------------------------------------

#: p(choice 0) of models m0 m1 m2 on each question (2 choices, p(choice 1) = 1 - p(choice 0); multiples of 1/8, so
#: every sum of a team's votes is exact and the ties are real), the labels and the tasks, in cache order
P0 = np.array([[7, 2, 3], [6, 1, 2], [1, 5, 7], [5, 6, 1], [3, 7, 6], [2, 3, 1], [2, 1, 7]]) / 8
LABELS = np.array([0, 1, 1, 0, 0, 1, 0])
TASKS = np.array([0, 1, 0, 1, 0, 0, 1])  # task "a": q0 q2 q4 q5; task "b": q1 q3 q6

#: right (1) or wrong of each model on each question (its argmax is the label)
CORRECT = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1], [0, 0, 1]])
#: right or wrong of each team's mean vote (choice 0 when its p(0) sum is at least its p(1) sum: ties go to 0), in
#: the subset encoding's order: {m0}, {m1}, {m0 m1}, {m2}, {m0 m2}, {m1 m2}, {m0 m1 m2}
TEAMS = np.array(
    [
        [1, 0, 1, 0, 1, 0, 1],  # q0: {m0 m1 m2} 12/8 vs 12/8, a tie: 0, right
        [0, 1, 1, 1, 0, 1, 1],  # q1: {m0 m2} 8/8 vs 8/8: 0, wrong
        [1, 0, 1, 0, 0, 0, 0],  # q2: {m0 m2} a tie: 0, wrong; {m1 m2} 12/8 vs 4/8
        [1, 1, 1, 0, 0, 0, 1],  # q3: {m0 m1 m2} a tie: 0, right
        [0, 1, 1, 1, 1, 1, 1],  # q4
        [1, 1, 1, 1, 1, 1, 1],  # q5
        [0, 0, 0, 1, 1, 1, 0],  # q6: {m1 m2} a tie: 0, right
    ]
)


def hand_cache(labels: np.ndarray = LABELS) -> LogitCache:
    """The 3-model, 7-question, 2-task cache of the tables above."""
    probs = np.stack([P0, 1 - P0], axis=2)
    return LogitCache(
        scores=probs,
        labels=labels,
        models=("m0", "m1", "m2"),
        score_kind="prob",
        tasks=TASKS,
        task_names=("a", "b"),
        split=np.zeros(7, dtype=int),
    )


def random_team(rng: np.random.Generator, n_models: int, whole: float = 0.3) -> np.ndarray:
    """The whole pool with probability ``whole`` (so that smaller teams find rows that revealed them under partial
    feedback), else random bits (the empty team among them)."""
    if rng.random() < whole:
        return np.ones(n_models, dtype=np.int8)
    return rng.integers(0, 2, n_models).astype(np.int8)


# -- the window statistics by definition ---------------------------------------------------------------------------

#: every window statistic
ALL = tuple(metrics.METRICS)


def definitions(cache: LogitCache, questions: list[int], members: np.ndarray) -> list[float]:
    """Each statistic of :data:`ALL` by its definition (``ensemble_env.metrics``) on the team ``members``' outputs
    on ``questions``."""
    rows = np.array(questions, dtype=np.int64)
    correct = cache.correct[rows][:, members]
    preds = cache.preds[rows][:, members]
    labels = cache.labels[rows]
    return [metrics.window_statistic(name, correct, preds, labels, cache.max_choices) for name in ALL]


# -- snapshots and equality ----------------------------------------------------------------------------------------


def through_savez(snapshot: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``snapshot`` written by ``np.savez`` and read back (without pickles): what a stored snapshot restores from."""
    buffer = io.BytesIO()
    np.savez(buffer, **snapshot)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}


def assert_same(a: object, b: object) -> None:
    """``a`` equals ``b`` all the way down: dicts (same keys), lists and tuples (same lengths), arrays (same values),
    anything else by ``==``."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b
