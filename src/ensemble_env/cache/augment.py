"""Permuted copies of a cache's tasks: the same questions, each model's outputs moved to another model's column.

A router trained on some tasks and played on tasks it never saw should learn to read what a task reveals rather
than which model was best on the training tasks. :func:`permuted_copies` adds, for each task with questions in
``split``, ``copies`` copies of those questions whose models' outputs are shuffled by a seeded permutation (one
permutation per copy of a task, the same for all its questions): in a copy, "model i" is some other model of the
pool, so no model and no team is best on every task, and a policy can earn more than the best fixed team only by
reading the task's record. The copies are new tasks (``"NAME~c"``, ``c`` from 1) in the same split, appended after
the cache's questions, so every original question keeps its index. Costs move with their model's outputs; question
ids get the copy's suffix; text features and question text are kept (they describe the question, not the models).

>>> import numpy as np
>>> from ensemble_env.synthetic import make_cache
>>> cache = make_cache(n_models=3, n_questions=40, n_tasks=2, seed=0)
>>> bigger = permuted_copies(cache, 2, seed=0)
>>> bigger.n_questions - cache.n_questions == 2 * cache.select("train").size, bigger.task_names[2:]
(True, ('task_0~1', 'task_1~1', 'task_0~2', 'task_1~2'))
>>> np.array_equal(bigger.scores[: cache.n_questions], cache.scores)
True
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.seeds import check_seed

__all__ = ["MAX_COPIES", "permuted_copies"]

#: the most copies of each task :func:`permuted_copies` makes
MAX_COPIES = 64


def permuted_copies(cache: LogitCache, copies: int, *, seed: int, split: str = "train") -> LogitCache:
    """``cache`` with ``copies`` model-permuted copies of each task's ``split`` questions appended (see the module's
    docstring); the permutations are drawn from ``SeedSequence([seed, 41])``. ``copies = 0`` returns ``cache``.
    ValueError for a count that is not a whole number in [0, :data:`MAX_COPIES`] or an unknown split."""
    if isinstance(copies, bool) or not isinstance(copies, int | np.integer) or not 0 <= copies <= MAX_COPIES:
        raise ValueError(f"copies must be a whole number from 0 to {MAX_COPIES}, got {copies!r}")
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    seed = check_seed(seed, "permuted_copies", optional=False)  # never True as seed 1, "0", [1, 2]
    if copies == 0:
        return cache
    rows = np.flatnonzero(np.asarray(cache.split) == SPLITS[split])
    tasks = np.asarray(cache.tasks)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 41]))
    picks, perms, task_ids, copy_ids, names = [], [], [], [], list(cache.task_names)
    for copy in range(1, copies + 1):
        for task in np.unique(tasks[rows]):
            questions = rows[tasks[rows] == task]
            picks.append(questions)
            perms.append(np.broadcast_to(rng.permutation(cache.n_models), (questions.size, cache.n_models)))
            task_ids.append(np.full(questions.size, len(names)))
            copy_ids.append(np.full(questions.size, copy))
            names.append(f"{cache.task_names[task]}~{copy}")
    if not picks:
        return cache
    pick, perm, copy_of = np.concatenate(picks), np.concatenate(perms), np.concatenate(copy_ids)
    scores = np.take_along_axis(cache.scores[pick], perm[:, :, None], axis=1)  # rows reordered along the model axis
    costs = cache.costs
    if costs is not None:
        per_question = np.broadcast_to(costs, (cache.n_questions, cache.n_models)) if costs.ndim == 1 else costs
        costs = np.concatenate([per_question, np.take_along_axis(per_question[pick], perm, axis=1)])
    ids = cache.question_ids
    if ids is not None:
        ids = (*ids, *(f"{ids[q]}~{c}" for q, c in zip(pick, copy_of, strict=True)))
    text = cache.question_text
    if text is not None:
        text = (*text, *(text[q] for q in pick))
    stack = np.concatenate  # (each field: the cache's rows, then the copies')
    return dataclasses.replace(
        cache,
        scores=stack([cache.scores, scores]),
        labels=stack([cache.labels, cache.labels[pick]]),
        n_choices=stack([cache.n_choices, cache.n_choices[pick]]),
        tasks=stack([tasks, np.concatenate(task_ids)]),
        task_names=tuple(names),
        split=stack([cache.split, cache.split[pick]]),
        question_ids=ids,
        costs=costs,
        features=None if cache.features is None else stack([cache.features, cache.features[pick]]),
        question_text=text,
        path=f"{cache.path} (+{copies} model-permuted copies of the {split} tasks)",
    )
