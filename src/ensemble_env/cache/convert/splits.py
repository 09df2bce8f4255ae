"""The train/validation/test split of a cache, assigned per task: :func:`split_by_task`.

:func:`~ensemble_env.cache.convert.lm_eval.from_lm_eval` and the ``cache split`` command use it.

>>> split_by_task(np.array([0, 0, 0, 0, 0, 1, 1]), test_fraction=0.2).tolist()
[0, 0, 0, 0, 1, 0, 1]
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ensemble_env.cache.logit_cache import SPLITS
from ensemble_env.seeds import check_seed

__all__ = ["describe_split", "split_by_task"]


def _fraction(value: float, name: str) -> Fraction:
    """A fraction in [0, 1] as the exact decimal it was written as (0.2 is 1/5, not the float nearest 0.2)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return Fraction(repr(float(value)))


def split_by_task(
    tasks: np.ndarray,
    test_fraction: float = 0.2,
    *,
    validation_fraction: float = 0.0,
    seed: int | None = None,
) -> np.ndarray:
    """Split codes (0 train, 2 validation, 1 test, as stored in a cache) assigned per task.

    For a task of ``n`` questions, the last ``test_fraction`` are test and the last ``validation_fraction``
    of the rest (the train questions) become validation: ``n_not_test = floor((1 - test_fraction) n)``,
    ``n_train = floor((1 - validation_fraction) n_not_test)``, computed exactly from the decimal fractions (so
    with 0.2 and 0.2, 250 questions give 160 train, 40 validation, 50 test). Without ``seed`` the task's
    questions, in the order they appear, are train first, then validation, then test; with ``seed`` they are
    assigned by a random permutation per task, drawn from ``np.random.default_rng(seed)`` in task-index order.

    >>> split_by_task(np.zeros(10, dtype=int), 0.2, validation_fraction=0.25).tolist()
    [0, 0, 0, 0, 0, 0, 2, 2, 1, 1]
    >>> codes = split_by_task(np.zeros(10, dtype=int), 0.2, seed=1)
    >>> int((codes == 1).sum()), codes.tolist() == split_by_task(np.zeros(10, dtype=int), 0.2, seed=1).tolist()
    (2, True)
    """
    test = _fraction(test_fraction, "test_fraction")
    validation = _fraction(validation_fraction, "validation_fraction")
    seed = check_seed(seed, "split_by_task")
    task_index = np.asarray(tasks)
    if task_index.ndim != 1 or task_index.dtype.kind not in "iu":
        raise ValueError(
            f"tasks must be a 1-D integer array, got shape {task_index.shape} and dtype {task_index.dtype}"
        )
    codes = np.zeros(task_index.size, dtype=np.int64)
    rng = None if seed is None else np.random.default_rng(seed)
    for task in np.unique(task_index):
        rows = np.flatnonzero(task_index == task)
        n = rows.size
        n_not_test = math.floor((1 - test) * n)
        n_train = math.floor((1 - validation) * n_not_test)
        position_codes = np.full(n, SPLITS["test"], dtype=np.int64)
        position_codes[:n_not_test] = SPLITS["validation"]
        position_codes[:n_train] = SPLITS["train"]
        if rng is not None:
            rows = rows[rng.permutation(n)]
        codes[rows] = position_codes
    return codes


def describe_split(
    test_fraction: float, validation_fraction: float = 0.0, seed: int | None = None, order: str = "by doc_id"
) -> str:
    """The rule of :func:`split_by_task` in words, for a cache's ``source``; ``order`` says how questions are
    ordered within a task ("by doc_id" for lm-eval caches, "in cache order" for a re-split).

    >>> describe_split(0.2, 0.2)
    'split per task: last 0.2 by doc_id is test, last 0.2 of the rest by doc_id is validation'
    >>> describe_split(0.2, seed=3)
    'split per task: seeded random 0.2 (seed 3) is test'
    """
    if seed is None:
        rule = f"last {test_fraction} {order} is test"
        if validation_fraction:
            rule += f", last {validation_fraction} of the rest {order} is validation"
    else:
        rule = f"seeded random {test_fraction} (seed {seed}) is test"
        if validation_fraction:
            rule += f", a random {validation_fraction} of the rest is validation"
    return f"split per task: {rule}"
