"""Seeded simulators of a model pool: synthetic :class:`~ensemble_env.cache.LogitCache` objects.

Tests and scale studies need pools whose structure is known: how accurate each model is, how often their
errors coincide, whether they then give the *same* wrong answer, and whether accuracy drifts along the
question stream.

- :func:`make_cache` draws a pool from a handful of interpretable knobs (accuracy per model and task, error
  correlation through a Gaussian copula, shared distractors, concept drift, confidence).
- :func:`planted_cache` builds small pools with a planted team structure (``"complementary"``: two mediocre
  models whose mean-probability fusion beats everyone; ``"dominant"``: one model best left alone), used to
  check that a learner finds the planted team.

Everything is drawn from ``np.random.default_rng(seed)``: the same arguments give identical arrays. The module
depends on numpy only (the inverse normal CDF is Acklam's rational approximation, :func:`norm_ppf`).

>>> cache = make_cache(n_models=3, n_questions=500, accuracy=[0.5, 0.7, 0.9], seed=1)
>>> cache.scores.shape, cache.score_kind
((500, 3, 4), 'logit')
>>> [round(float(a), 1) for a in cache.model_accuracy()]
[0.5, 0.7, 0.9]
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.seeds import check_seed

__all__ = ["PLANTED_KINDS", "make_cache", "norm_ppf", "planted_cache"]

#: the structures :func:`planted_cache` can plant
PLANTED_KINDS = ("complementary", "dominant")
#: bounds of the per-question accuracy once drift is applied
_DRIFT_CLIP = (0.01, 0.99)
#: smallest logit gap between the predicted class and the runner-up (far above float32 resolution)
_MIN_MARGIN = 1e-3

# -- inverse normal CDF (Acklam's algorithm, relative error < 1.15e-9) ---------------------------------------
_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01, -1.328068155288572e01)
_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_P_LOW = 0.02425


def _tail(p: np.ndarray) -> np.ndarray:
    """Acklam's lower-tail formula, for 0 < p < _P_LOW."""
    q = np.sqrt(-2.0 * np.log(p))
    numerator = ((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]
    denominator = (((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0
    return np.asarray(numerator / denominator, dtype=np.float64)


def norm_ppf(p: Any) -> np.ndarray:
    """Inverse of the standard normal CDF, elementwise (Acklam's rational approximation, numpy only).

    Parameters
    ----------
    p
        Array-like of probabilities strictly between 0 and 1.

    Returns
    -------
    numpy.ndarray
        float64 array of the same shape: ``x`` with ``P(N(0, 1) < x) = p``, to a relative error below
        1.15e-9.

    Raises
    ------
    ValueError
        When an entry of ``p`` is not strictly between 0 and 1.

    >>> [round(float(x), 6) for x in norm_ppf([0.025, 0.5, 0.975])]
    [-1.959964, 0.0, 1.959964]
    """
    probs: np.ndarray = np.asarray(p, dtype=np.float64)
    inside = (probs > 0.0) & (probs < 1.0)
    if not np.all(inside):
        raise ValueError(f"p must be strictly between 0 and 1, got {probs[~inside].flat[0]!r}")
    x: np.ndarray = np.empty_like(probs)
    low, high = probs < _P_LOW, probs > 1.0 - _P_LOW
    central = ~(low | high)
    q = probs[central] - 0.5
    r = q * q
    numerator = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q
    denominator = ((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0
    x[central] = numerator / denominator
    x[low] = _tail(probs[low])
    x[high] = -_tail(1.0 - probs[high])
    return x


# -- argument validation ------------------------------------------------------------------------------------
def _int_arg(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _float_arg(name: str, value: Any, low: float, high: float, *, closed_high: bool) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = bool(np.isfinite(value)) and low <= value and (value <= high if closed_high else value < high)
    if not ok:
        interval = f"[{low}, {high}]" if closed_high else f"[{low}, {high})"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


def _float_array(name: str, value: Any, shapes: dict[tuple[int, ...], str]) -> np.ndarray:
    """``value`` as float64 if its shape is one of ``shapes`` (shape -> description for the message)."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric, got {value!r}") from error
    if array.shape not in shapes:
        expected = " or ".join(shapes.values())
        raise ValueError(f"{name} must be {expected}, got shape {array.shape}: {value!r}")
    bad = np.flatnonzero(~np.isfinite(array).reshape(-1))
    if bad.size:
        raise ValueError(f"{name} must be finite, got {array.reshape(-1)[bad[0]]!r} at flat index {bad[0]}")
    return array


def _names_arg(name: str, value: Any, default_prefix: str, length: int) -> tuple[str, ...]:
    if value is None:
        return tuple(f"{default_prefix}_{i}" for i in range(length))
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise ValueError(f"{name} must be a sequence of {length} strings, got {value!r}")
    names = list(value)
    if len(names) != length or not all(isinstance(item, str) and item for item in names):
        raise ValueError(f"{name} must be {length} non-empty strings, got {value!r}")
    if len(set(names)) != length:
        raise ValueError(f"{name} must be unique, got {value!r}")
    return tuple(names)


def _choices_arg(value: Any, n_tasks: int) -> np.ndarray:
    counts: list[Any]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        counts = [value] * n_tasks
    elif isinstance(value, Sequence | np.ndarray) and not isinstance(value, str | bytes):
        counts = list(np.asarray(value, dtype=object).reshape(-1)) if np.ndim(value) == 1 else [value]
    else:
        counts = [value]
    valid = all(isinstance(c, numbers.Integral) and not isinstance(c, bool) and int(c) >= 2 for c in counts)
    if not valid or len(counts) != n_tasks:
        raise ValueError(
            f"n_choices must be an integer >= 2 or a sequence of {n_tasks} such integers (one per task), got {value!r}"
        )
    return np.asarray(counts, dtype=np.int64)


def _describe(value: Any) -> str:
    """Short text of an argument for the cache's ``source`` (full values when small, a summary otherwise)."""
    array = np.asarray(value)
    if array.ndim == 0:
        return f"{float(array):g}" if array.dtype.kind == "f" else str(array.item())
    if array.size <= 64:
        return str(np.round(array, 6).tolist())
    return f"<array shape {array.shape} mean {float(array.mean()):.4g}>"


# -- shared building blocks ---------------------------------------------------------------------------------
def _test_split(tasks: np.ndarray, n_tasks: int, test_fraction: float) -> np.ndarray:
    """(Q,) split: per task, the last ``round(test_fraction * count)`` questions in stream order are test (1)."""
    order = np.argsort(tasks, kind="stable")  # grouped by task, stream order inside each task
    counts = np.bincount(tasks, minlength=n_tasks)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    sorted_tasks = tasks[order]
    rank = np.arange(tasks.size) - starts[sorted_tasks]
    n_test = np.floor(test_fraction * counts + 0.5).astype(np.int64)
    split = np.zeros(tasks.size, dtype=np.int64)
    split[order] = (rank >= counts[sorted_tasks] - n_test[sorted_tasks]).astype(np.int64)
    return split


def _wrong_class(
    rng: np.random.Generator, labels: np.ndarray, n_choices: np.ndarray, shape: tuple[int, ...]
) -> np.ndarray:
    """Uniformly random class other than the label, per question (axis 0) and per trailing entry."""
    extra = (1,) * (len(shape) - 1)
    offset = rng.integers(0, (n_choices - 1).reshape(-1, *extra), size=shape)
    return np.asarray((labels.reshape(-1, *extra) + 1 + offset) % n_choices.reshape(-1, *extra))


def _logits(
    rng: np.random.Generator,
    preds: np.ndarray,
    n_choices: np.ndarray,
    max_choices: int,
    margin: np.ndarray,
    runner_up: np.ndarray | None = None,
    runner_up_gap: np.ndarray | None = None,
) -> np.ndarray:
    """(Q, N, C) float32 logits whose argmax over each question's valid choices is exactly ``preds``.

    Each valid choice gets N(0, 1) noise, then the predicted class is set ``margin`` (> 0) above the highest
    other valid choice. Where ``runner_up`` (Q, N) is >= 0 it is first set ``runner_up_gap`` above the other
    non-predicted choices, so it ends second. Entries beyond a question's ``n_choices`` are 0.0.
    """
    n_questions, n_models = preds.shape
    logits = rng.standard_normal((n_questions, n_models, max_choices), dtype=np.float32)
    classes = np.arange(max_choices)
    valid = (classes < n_choices[:, None])[:, None, :]  # (Q, 1, C)
    is_pred = classes == preds[..., None]
    if runner_up is not None and runner_up_gap is not None:
        is_second = (classes == runner_up[..., None]) & ~is_pred
        rest = np.where(valid & ~is_pred & ~is_second, logits, -np.inf).max(axis=2)
        rest = np.where(np.isfinite(rest), rest, 0.0)  # two choices: nothing else to beat
        logits = np.where(is_second, (rest + runner_up_gap).astype(np.float32)[..., None], logits)
    others = np.where(valid & ~is_pred, logits, -np.inf).max(axis=2)
    top = (others + np.maximum(margin, _MIN_MARGIN)).astype(np.float32)
    logits = np.where(is_pred, top[..., None], logits)
    return np.where(valid, logits, np.float32(0.0)).astype(np.float32, copy=False)


# -- make_cache ---------------------------------------------------------------------------------------------
def make_cache(
    *,
    n_models: int = 8,
    n_questions: int = 2000,
    n_tasks: int = 1,
    n_choices: int | Sequence[int] = 4,
    accuracy: float | Sequence[float] | np.ndarray = 0.7,
    error_correlation: float = 0.3,
    shared_wrong_answer: float = 0.5,
    drift: float | Sequence[float] | np.ndarray = 0.0,
    confidence: float = 2.0,
    test_fraction: float = 0.2,
    costs: Sequence[float] | np.ndarray | None = None,
    model_names: Sequence[str] | None = None,
    task_names: Sequence[str] | None = None,
    seed: int = 0,
) -> LogitCache:
    """Simulate a pool of models answering multiple-choice questions, as a seeded :class:`LogitCache`.

    Generative story, per question ``q`` (all vectorised):

    1. Task: questions are spread evenly over the tasks (counts differ by at most one) in a seeded random
       order, so the stream mixes tasks. Label: uniform over the task's ``n_choices``.
    2. Correctness (Gaussian copula): a shared difficulty ``z_q ~ N(0, 1)`` and per-model noise
       ``e_qn ~ N(0, 1)``; model ``n`` is right iff
       ``sqrt(rho) z_q + sqrt(1 - rho) e_qn < Phi^{-1}(acc_qn)``, with ``rho = error_correlation`` and
       ``acc_qn`` the model's accuracy on the question's task (after drift). The left side is N(0, 1), so
       the expected accuracy is exactly ``acc_qn``; larger ``rho`` makes errors fall on the same questions.
    3. Wrong answers: each question has a common distractor (a uniformly drawn wrong class). A wrong model
       picks it with probability ``shared_wrong_answer``, otherwise a uniformly random wrong class (which
       may also be the distractor).
    4. Logits: N(0, 1) noise per valid choice, then the predicted class is raised above the highest other
       choice by ``confidence * Exponential(1) + 1e-3``, so the cache's ``preds`` (argmax) and ``correct``
       are exactly the simulated ones.

    The random draws do not depend on the values of ``accuracy``, ``error_correlation``,
    ``shared_wrong_answer``, ``drift`` or ``confidence`` (only on the sizes and ``seed``), so changing one
    of them under the same seed changes the pool smoothly (common random numbers).

    Parameters
    ----------
    n_models
        Number of models N (>= 1).
    n_questions
        Number of questions Q (>= n_tasks, so that every task has a question).
    n_tasks
        Number of tasks T (>= 1).
    n_choices
        Answer choices per question: one int (>= 2) for all tasks, or a sequence of T ints (one per task).
        ``scores`` has ``max(n_choices)`` columns; entries beyond a question's choices are 0.0.
    accuracy
        Target accuracy: a scalar, (N,) per model, or (N, T) per model and task, each strictly between 0
        and 1. Values below chance (1 / n_choices) are allowed: such a model is worse than guessing.
    error_correlation
        ``rho`` in [0, 1): weight of the shared difficulty; 0 gives independent errors.
    shared_wrong_answer
        In [0, 1]: probability that a wrong model picks the question's common distractor.
    drift
        Scalar or (N,): linear change of each model's accuracy along the stream; at position ``i`` the
        accuracy is ``accuracy + drift * (i / (Q - 1) - 0.5)``, clipped to [0.01, 0.99] (models whose drift
        is 0 keep their accuracy unclipped). The mean over the stream stays ``accuracy`` unless clipped.
    confidence
        Mean (> 0) of the exponential logit margin of the predicted class over the runner-up; higher gives
        more peaked probabilities.
    test_fraction
        In [0, 1]: per task, the last ``round(test_fraction * count)`` questions in stream order get
        ``split`` 1 (test), the others 0 (train).
    costs
        Optional (N,) finite non-negative cost per model, stored in the cache.
    model_names, task_names
        N (T) unique non-empty names; default ``"model_0"``, ... (``"task_0"``, ...).
    seed
        Non-negative integer seed of ``np.random.default_rng``.

    Returns
    -------
    LogitCache
        ``scores`` (Q, N, max(n_choices)) float32 with ``score_kind="logit"``, ``labels``, ``n_choices``,
        ``tasks``, ``task_names``, ``split``, ``costs`` and a ``source`` naming the call.

    Raises
    ------
    ValueError
        When an argument has the wrong type, shape or range; the message names the argument and value.

    Examples
    --------
    >>> cache = make_cache(n_models=4, n_questions=4000, n_tasks=2, n_choices=(2, 5),
    ...                    accuracy=[[0.6, 0.8]] * 4, costs=[1.0, 1.0, 2.0, 4.0], seed=7)
    >>> cache.scores.shape, cache.task_names, cache.costs.tolist()
    ((4000, 4, 5), ('task_0', 'task_1'), [1.0, 1.0, 2.0, 4.0])
    >>> [round(float(cache.correct[cache.tasks == t].mean()), 1) for t in (0, 1)]
    [0.6, 0.8]
    >>> round(float((cache.split == 1).mean()), 2)
    0.2
    """
    n_models = _int_arg("n_models", n_models, 1)
    n_tasks = _int_arg("n_tasks", n_tasks, 1)
    n_questions = _int_arg("n_questions", n_questions, n_tasks)
    choices_per_task = _choices_arg(n_choices, n_tasks)
    acc = _float_array(
        "accuracy",
        accuracy,
        {
            (): "a scalar",
            (n_models,): f"(n_models,)=({n_models},)",
            (n_models, n_tasks): f"(n_models, n_tasks)=({n_models}, {n_tasks})",
        },
    )
    outside = np.flatnonzero(~((acc > 0.0) & (acc < 1.0)).reshape(-1))
    if outside.size:
        raise ValueError(
            f"accuracy must be strictly between 0 and 1, got {acc.reshape(-1)[outside[0]]!r} (flat index {outside[0]})"
        )
    acc_table = np.broadcast_to(acc.reshape(acc.shape + (1,) * (2 - acc.ndim)), (n_models, n_tasks))
    rho = _float_arg("error_correlation", error_correlation, 0.0, 1.0, closed_high=False)
    shared = _float_arg("shared_wrong_answer", shared_wrong_answer, 0.0, 1.0, closed_high=True)
    drifts = np.broadcast_to(_float_array("drift", drift, {(): "a scalar", (n_models,): f"({n_models},)"}), (n_models,))
    scale = _float_arg("confidence", confidence, 0.0, np.inf, closed_high=False)
    if scale <= 0.0:
        raise ValueError(f"confidence must be a number > 0, got {confidence!r}")
    fraction = _float_arg("test_fraction", test_fraction, 0.0, 1.0, closed_high=True)
    cost_array = None
    if costs is not None:
        cost_array = _float_array("costs", costs, {(n_models,): f"(n_models,)=({n_models},)"})
        if np.any(cost_array < 0):
            raise ValueError(f"costs must be non-negative, got {costs!r}")
    models = _names_arg("model_names", model_names, "model", n_models)
    tasks_named = _names_arg("task_names", task_names, "task", n_tasks)
    seed = check_seed(seed, "make_cache", optional=False)

    rng = np.random.default_rng(seed)
    tasks = rng.permutation(np.arange(n_questions, dtype=np.int64) % n_tasks)
    choices = choices_per_task[tasks]
    labels = rng.integers(0, choices)
    distractor = _wrong_class(rng, labels, choices, (n_questions,))
    difficulty = rng.standard_normal(n_questions)
    noise = rng.standard_normal((n_questions, n_models))
    use_distractor = rng.random((n_questions, n_models)) < shared
    random_wrong = _wrong_class(rng, labels, choices, (n_questions, n_models))
    margin = scale * rng.standard_exponential((n_questions, n_models), dtype=np.float32) + _MIN_MARGIN

    acc_qn = acc_table.T[tasks]  # (Q, N)
    if np.any(drifts != 0.0):
        position = np.arange(n_questions) / (n_questions - 1) - 0.5 if n_questions > 1 else np.zeros(1)
        drifted = np.clip(acc_qn + drifts * position[:, None], *_DRIFT_CLIP)
        acc_qn = np.where(drifts != 0.0, drifted, acc_qn)
        threshold = norm_ppf(acc_qn)
    else:  # inverse CDF of the (N, T) table only
        threshold = norm_ppf(acc_table).T[tasks]
    correct = np.sqrt(rho) * difficulty[:, None] + np.sqrt(1.0 - rho) * noise < threshold
    wrong = np.where(use_distractor, distractor[:, None], random_wrong)
    preds = np.where(correct, labels[:, None], wrong)
    scores = _logits(rng, preds, choices, int(choices_per_task.max()), margin)

    source = (
        f"ensemble_env.synthetic.make_cache(seed={seed}, n_models={n_models}, n_questions={n_questions}, "
        f"n_tasks={n_tasks}, n_choices={_describe(choices_per_task if np.ndim(n_choices) else n_choices)}, "
        f"accuracy={_describe(acc)}, error_correlation={rho:g}, shared_wrong_answer={shared:g}, "
        f"drift={_describe(np.asarray(drift, dtype=np.float64))}, confidence={scale:g}, "
        f"test_fraction={fraction:g}, costs={'None' if cost_array is None else _describe(cost_array)})"
    )
    return LogitCache(
        scores=scores,
        labels=labels,
        models=models,
        score_kind="logit",
        n_choices=choices,
        tasks=tasks,
        task_names=tasks_named,
        split=_test_split(tasks, n_tasks, fraction),
        costs=cost_array,
        source=source,
    )


# -- planted_cache ------------------------------------------------------------------------------------------
def _planted_complementary(
    rng: np.random.Generator, n_questions: int, labels: np.ndarray, choices: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Correctness, predictions, margins and runner-up classes of the ``"complementary"`` pool."""
    q = n_questions
    # models 0 and 1: both right 30%, only 0 right 30%, only 1 right 30%, both wrong 10% (stratified so the
    # proportions hold to within one question)
    cell = rng.permutation(np.floor(np.arange(q) * 10 / q).astype(np.int64))  # 0..9, ~10% each
    right_0 = cell < 6
    right_1 = (cell < 3) | ((cell >= 6) & (cell < 9))
    # models 2..5: noisy copies of one 0.7 model that fails wherever models 0 and 1 both fail (hard
    # questions); each copy keeps the base outcome (and wrong answer) with probability 0.9 and otherwise
    # redraws it with the same accuracy, still failing the hard questions
    hard = cell == 9
    base = ~hard & (rng.random(q) < 0.7 / 0.9)
    keep = rng.random((q, 4)) < 0.9
    redrawn = ~hard[:, None] & (rng.random((q, 4)) < 0.7 / 0.9)
    right_copies = np.where(keep, base[:, None], redrawn)
    correct = np.column_stack([right_0, right_1, right_copies])

    base_wrong = _wrong_class(rng, labels, choices, (q,))
    random_wrong = _wrong_class(rng, labels, choices, (q, 6))
    wrong = random_wrong.copy()
    wrong[:, 2:] = np.where(keep, base_wrong[:, None], random_wrong[:, 2:])
    preds = np.where(correct, labels[:, None], wrong)

    # models 0 and 1 are calibrated: confident (margin 3 + Exp(1)) when right, hesitant (margin < 0.5, with
    # the gold label as a close runner-up) when wrong; the copies are confident either way (1 + Exp(1.5))
    exponential = rng.standard_exponential((q, 6))
    hesitant = rng.uniform(0.05, 0.5, size=(q, 6))
    margin = np.where(correct, 3.0 + exponential, hesitant)
    margin[:, 2:] = 1.0 + 1.5 * exponential[:, 2:]
    runner_up = np.where(~correct, labels[:, None], -1)
    runner_up[:, 2:] = -1
    return correct, preds, margin, runner_up


def _planted_dominant(
    rng: np.random.Generator, n_questions: int, labels: np.ndarray, choices: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Correctness, predictions, margins and runner-up classes of the ``"dominant"`` pool."""
    q = n_questions
    strong = rng.random(q) < 0.95
    # models 1..5: accuracy 0.55 through a Gaussian copula with rho = 0.6 (errors on the same questions)
    rho = 0.6
    latent = np.sqrt(rho) * rng.standard_normal((q, 1)) + np.sqrt(1 - rho) * rng.standard_normal((q, 5))
    weak = latent < norm_ppf(0.55)
    correct = np.column_stack([strong, weak])
    # wrong weak models mostly (80%) give the question's common distractor
    distractor = _wrong_class(rng, labels, choices, (q,))
    random_wrong = _wrong_class(rng, labels, choices, (q, 6))
    wrong = np.where(rng.random((q, 6)) < 0.8, distractor[:, None], random_wrong)
    wrong[:, 0] = random_wrong[:, 0]
    preds = np.where(correct, labels[:, None], wrong)
    # the strong model is modest (margin 0.5..1.0), the weak ones overconfident (margin 2 + Exp(1))
    margin = 2.0 + rng.standard_exponential((q, 6))
    margin[:, 0] = rng.uniform(0.5, 1.0, size=q)
    return correct, preds, margin, np.full((q, 6), -1)


_PLANTED_MODELS = {
    "complementary": ("complement_a", "complement_b", "copy_0", "copy_1", "copy_2", "copy_3"),
    "dominant": ("strong", "weak_0", "weak_1", "weak_2", "weak_3", "weak_4"),
}


def planted_cache(kind: str, n_questions: int = 3000, seed: int = 0) -> LogitCache:
    """A 6-model, 4-choice pool with a planted team structure, for checking that a learner finds it.

    ``"complementary"``
        Models 0 and 1 are mediocre (accuracy 0.6 each) with anti-correlated errors: on a stratified 30%
        of the questions both are right, on 30% only model 0, on 30% only model 1, on 10% neither (phi
        correlation of correctness -0.25). Both are calibrated: confident when right (logit margin
        3 + Exp(1)) and hesitant when wrong (margin 0.05..0.5 with the gold label a close second), so the
        mean-probability fusion of the team {0, 1} is right whenever one of them is (about 0.9). Models
        2..5 are noisy copies of one 0.7 model (each keeps the base model's outcome and wrong answer with
        probability 0.9, so their pairwise correctness correlation is about 0.85), confident whether right
        or wrong, and wrong on every question where models 0 and 1 both are: adding them to {0, 1} cannot
        help, and {0, 1} is the best team.
    ``"dominant"``
        Model 0 is right on about 95% of the questions with a modest margin (0.5..1.0). Models 1..5 are at
        about 0.55 with correlated errors (Gaussian copula, rho 0.6), mostly (80%) giving the question's
        common distractor when wrong, and overconfident (margin 2 + Exp(1)). Any team that adds a weak
        model to model 0 is pulled towards the weak model's answers, so the best team is {0} alone.

    The last 20% of the questions (in stream order) are the test split; the single task is named ``kind``.

    Parameters
    ----------
    kind
        ``"complementary"`` or ``"dominant"``.
    n_questions
        Number of questions (>= 10).
    seed
        Non-negative integer seed of ``np.random.default_rng``.

    Raises
    ------
    ValueError
        When ``kind`` is unknown or ``n_questions``/``seed`` is out of range.

    Examples
    --------
    >>> cache = planted_cache("complementary", seed=0)
    >>> [round(float(a), 1) for a in cache.model_accuracy()]
    [0.6, 0.6, 0.7, 0.7, 0.7, 0.7]
    >>> fused = cache.probs[:, [0, 1]].mean(axis=1).argmax(axis=1)
    >>> bool((fused == cache.labels).mean() > 0.85)
    True
    >>> round(float(planted_cache("dominant").model_accuracy()[0]), 2)
    0.95
    """
    if kind not in PLANTED_KINDS:
        raise ValueError(f"kind must be one of {', '.join(PLANTED_KINDS)}, got {kind!r}")
    n_questions = _int_arg("n_questions", n_questions, 10)
    seed = check_seed(seed, "planted_cache", optional=False)
    rng = np.random.default_rng(seed)
    choices = np.full(n_questions, 4, dtype=np.int64)
    labels = rng.integers(0, 4, size=n_questions)
    build = _planted_complementary if kind == "complementary" else _planted_dominant
    _, preds, margin, runner_up = build(rng, n_questions, labels, choices)
    gap = rng.uniform(0.0, 0.1, size=preds.shape) + _MIN_MARGIN
    scores = _logits(rng, preds, choices, 4, margin, runner_up=runner_up, runner_up_gap=gap)
    tasks = np.zeros(n_questions, dtype=np.int64)
    return LogitCache(
        scores=scores,
        labels=labels,
        models=_PLANTED_MODELS[kind],
        score_kind="logit",
        n_choices=choices,
        tasks=tasks,
        task_names=(kind,),
        split=_test_split(tasks, 1, 0.2),
        source=f"ensemble_env.synthetic.planted_cache({kind!r}, n_questions={n_questions}, seed={seed})",
    )
