"""The generative model of one task: its parameters (:class:`TaskFit`) and their jitter (:func:`jittered`).

:mod:`ensemble_env.cache.task_fit` fits these parameters to a real task, :mod:`ensemble_env.cache.task_draw` draws
questions with them and :mod:`ensemble_env.cache.generator` makes new tasks of them (``docs/generated-tasks.md``).
A task has C choices (its largest number of valid choices), N models and these parameters (KN = 11 quantiles, at
:data:`MARGIN_QUANTILES`):

======================  ==============  ==========================================================================
parameter               shape           what it sets
======================  ==============  ==========================================================================
``choice_counts``       (K,), weights   the task's numbers of valid choices and how often each occurs
``label_logits``        (C,)            where the gold answer sits: log of its smoothed position frequencies
``skill``               (N,)            each model's accuracy, on the probit scale
``label_bias``          (N, C)          probit offset of a model's skill when the gold answer is at position c
                                        (position bias: a model that favours "A" is right more often when the
                                        answer is "A")
``loading``             (N,)            how much a model's errors follow the question's shared difficulty
``wrong_logits``        (N, C)          where a wrong model's answer falls: log preference of each position
``distractor_logits``   (C,)            where the question's shared wrong answer falls
``distractor_boost``    scalar          how strongly the models' other choices are drawn to that shared wrong
                                        answer (correlated errors)
``margin_right``        (N, KN)         quantiles of the log margin (the answer's log-probability minus the
                                        runner-up's) of right answers: how peaked the softmax is
``margin_wrong``        (N, KN)         the same of wrong answers (their gap to the right ones: calibration)
``ease_right``          (N,)            how much a right answer's margin grows with the question's ease
``ease_wrong``          (N,)            the same for a wrong answer (negative: confidently wrong on hard questions)
``gold_boost``          (N,)            how strongly a wrong model ranks the gold answer among its other choices
``rest_gap``            (N, KN)         quantiles of the log gaps below the runner-up of the choices ranked after it
======================  ==============  ==========================================================================

**Drawing a task's questions** (:mod:`ensemble_env.cache.task_draw`, vectorised over the questions and models of many
tasks; the random numbers of each task come from its own generator), per question:

1. its number of choices from ``choice_counts``; its label from ``softmax(label_logits)`` over them;
2. a shared difficulty ``d ~ N(0, 1)`` and per model ``z = loading * d + sqrt(1 - loading**2) * e``,
   ``e ~ N(0, 1)``: the model is right iff ``z < skill + label_bias[label]`` (a Gaussian copula: right with
   probability ``Phi(skill + label_bias[label])``, its errors falling with the others' on hard questions);
3. a shared wrong answer ``w`` from ``softmax(distractor_logits)`` over the wrong choices; a wrong model answers
   from ``softmax(wrong_logits + distractor_boost * [c == w])`` over the wrong choices;
4. the order of each model's other choices (all but its answer): by the utilities
   ``wrong_logits + distractor_boost * [c == w] + gold_boost * [c == label] + G`` (``G`` a standard Gumbel): the
   runner-up first;
5. log-probabilities: the answer at 0; the runner-up at ``-M``, ``log M`` the margin quantile function of the
   answer's branch (right or wrong; linear between the quantiles; ``M >= 1e-3``) at ``u = Phi(k * s + sqrt(1 - k**2)
   * n)``, ``n ~ N(0, 1)``, ``k`` the model's ``ease_right`` or ``ease_wrong`` and ``s`` the normal score of the
   rank of the question's ease ``-d`` among the task's questions in that branch (so the margins keep their fitted
   distribution, larger on easy questions when ``k > 0``); the choice ranked ``j + 2`` at ``-M`` minus the
   ``j``-th smallest of ``n_choices - 2`` draws of the ``rest_gap`` quantiles; then all normalised over the valid
   choices. The cache's argmax is exactly the drawn answer.

**Jitter** (:func:`jittered`): every family ``f`` of :data:`TASK_FAMILIES` moves by ``scale * spread[f] * z``
(``z ~ N(0, 1)``, per entry) on its unbounded scale: as it is for ``skill``, ``label_bias``, the logits and the
boosts; atanh for ``loading`` and the ``ease`` links; for the quantiles (``margin_right``, ``margin_wrong``,
``rest_gap``), one shift per model of all its quantiles. The choice counts are kept.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import cache_error
from ensemble_env.text import show

__all__ = [
    "MARGIN_QUANTILES",
    "MAX_GENERATOR_CHOICES",
    "MAX_GENERATOR_MODELS",
    "MAX_LOADING",
    "MAX_QUESTIONS_PER_TASK",
    "MIN_MARGIN",
    "MODEL_FAMILIES",
    "TASK_FAMILIES",
    "FieldChecker",
    "TaskFit",
    "jittered",
    "norm_cdf",
]

#: the probabilities at which the margins' quantiles are kept (min, deciles, max)
MARGIN_QUANTILES = tuple(float(p) for p in np.linspace(0.0, 1.0, 11))
#: the most models and choices a task holds (far above any real pool; a bound for crafted files)
MAX_GENERATOR_MODELS = 64
MAX_GENERATOR_CHOICES = 64
#: the most questions of one task (fitted or generated)
MAX_QUESTIONS_PER_TASK = 100_000
#: the smallest margin between a drawn answer and its runner-up, and below the runner-up (log-probability)
MIN_MARGIN = 1e-3
#: the parameter families jittered across tasks
TASK_FAMILIES = (
    "skill",
    "label_bias",
    "loading",
    "wrong_logits",
    "gold_boost",
    "rest_gap",
    "margin_right",
    "margin_wrong",
    "ease_right",
    "ease_wrong",
    "label_logits",
    "distractor_logits",
    "distractor_boost",
)
#: the families of one value per model (their jitter adds a shift shared by the task's models)
MODEL_FAMILIES = (
    "skill",
    "loading",
    "gold_boost",
    "rest_gap",
    "margin_right",
    "margin_wrong",
    "ease_right",
    "ease_wrong",
)
#: the largest |loading| (the copula's noise keeps a share of at least 1 - 0.95**2)
MAX_LOADING = 0.95
_MAX_LOG_MARGIN = 100.0
_MAX_BOOST = 50.0
#: bounds of the parameters as a file may give them: (low, high) on the stored scale
_BOUNDS = {
    "label_logits": (-100.0, 100.0),
    "skill": (-4.0, 4.0),
    "label_bias": (-8.0, 8.0),
    "loading": (-MAX_LOADING, MAX_LOADING),
    "wrong_logits": (-100.0, 100.0),
    "distractor_logits": (-100.0, 100.0),
    "margin_right": (float(np.log(MIN_MARGIN)), _MAX_LOG_MARGIN),
    "margin_wrong": (float(np.log(MIN_MARGIN)), _MAX_LOG_MARGIN),
    "gold_boost": (-_MAX_BOOST, _MAX_BOOST),
    "ease_right": (-MAX_LOADING, MAX_LOADING),
    "ease_wrong": (-MAX_LOADING, MAX_LOADING),
    "rest_gap": (float(np.log(MIN_MARGIN)), _MAX_LOG_MARGIN),
}


class FieldChecker:
    """Checks of one record's fields by type, shape, range and finiteness, before any is used; a failure is a
    :class:`~ensemble_env.cache.CacheError` naming the file (``path``), the field (``prefix.name``) and the value."""

    def __init__(self, path: str, prefix: str = "") -> None:
        self.path, self.prefix = path, prefix

    def fail(self, name: str, problem: str) -> ValueError:
        """The error of field ``name``."""
        return cache_error(self.path, f"{self.prefix}.{name}" if self.prefix else name, problem)

    def text(self, name: str, value: Any, limit: int = 200) -> str:
        """A non-empty string of at most ``limit`` characters, without NUL."""
        if not isinstance(value, str) or not value or len(value) > limit or "\x00" in value:
            raise self.fail(name, f"must be a non-empty string of at most {limit} characters, got {show(value)}")
        return value

    def integer(self, name: str, value: Any, low: int, high: int) -> int:
        """A whole number (not a bool) in ``low..high``."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
            raise self.fail(name, f"must be a whole number in {low}..{high}, got {show(value)}")
        return int(value)

    def real(self, name: str, value: Any, low: float, high: float) -> float:
        """A finite number (not a bool) in ``[low, high]``."""
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not ok or not np.isfinite(float(value)) or not low <= float(value) <= high:
            raise self.fail(name, f"must be a finite number in [{low:g}, {high:g}], got {show(value)}")
        return float(value)

    def array(
        self,
        name: str,
        value: Any,
        shape: tuple[int | None, ...],
        *,
        integer: bool = False,
        low: float | None = None,
        high: float | None = None,
    ) -> np.ndarray:
        """``value`` as a read-only float64 (int64 with ``integer``) array of ``shape`` (None: any length), every
        entry finite and in ``[low, high]``."""
        if isinstance(value, str | bytes | dict):
            raise self.fail(name, f"must be an array of numbers, got {show(value)}")
        try:
            array = np.array(value, copy=True)
        except (TypeError, ValueError, OverflowError) as error:
            raise self.fail(name, f"cannot be read as an array of numbers ({error})") from None
        if array.dtype.kind not in ("iu" if integer else "iuf"):
            raise self.fail(name, f"must hold {'whole numbers' if integer else 'numbers'}, got {show(value)}")
        matches = array.ndim == len(shape) and all(
            w is None or g == w for g, w in zip(array.shape, shape, strict=False)
        )
        if not matches:
            expected = "(" + ", ".join("any" if want is None else str(want) for want in shape) + ")"
            raise self.fail(name, f"has shape {array.shape}, expected {expected}")
        array = array.astype(np.int64 if integer else np.float64)
        bad = ~np.isfinite(array)
        if low is not None:
            bad |= array < low
        if high is not None:
            bad |= array > high
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            where = f" at {list(index)}" if index else ""
            allowed = f"finite, in [{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
            raise self.fail(name, f"holds {float(array[index])!r}{where} (allowed: {allowed})")
        array.flags.writeable = False
        return array


@dataclass(frozen=True, eq=False)
class TaskFit:
    """The parameters of one task (the module's table), validated at construction: each array by shape, range and
    finiteness, a failure naming ``path`` and the field (``tasks[NAME].FIELD``).

    ``C`` is the task's largest number of choices, ``N`` the pool's models, ``KN`` the margin quantiles kept
    (:data:`MARGIN_QUANTILES`). Position vectors beyond a question's valid choices are never read.
    """

    name: str
    n_questions: int
    choice_counts: np.ndarray
    choice_weights: np.ndarray
    label_logits: np.ndarray
    skill: np.ndarray
    label_bias: np.ndarray
    loading: np.ndarray
    wrong_logits: np.ndarray
    distractor_logits: np.ndarray
    distractor_boost: float
    margin_right: np.ndarray
    margin_wrong: np.ndarray
    ease_right: np.ndarray
    ease_wrong: np.ndarray
    gold_boost: np.ndarray
    rest_gap: np.ndarray
    path: str = field(default="<memory>", repr=False)

    def __post_init__(self) -> None:
        check = FieldChecker(self.path, f"tasks[{show(self.name, 80)}]")
        check.text("name", self.name)
        put = object.__setattr__
        put(self, "n_questions", check.integer("n_questions", self.n_questions, 1, MAX_QUESTIONS_PER_TASK))
        counts = check.array(
            "choice_counts", self.choice_counts, (None,), integer=True, low=2, high=MAX_GENERATOR_CHOICES
        )
        if counts.size < 1 or np.unique(counts).size != counts.size:
            raise check.fail(
                "choice_counts", f"must be distinct choice counts, at least one, got {show(counts.tolist())}"
            )
        weights = check.array("choice_weights", self.choice_weights, counts.shape, low=0.0, high=1e9)
        if not weights.sum() > 0:
            raise check.fail("choice_weights", f"must not all be 0, got {show(weights.tolist())}")
        put(self, "choice_counts", counts)
        put(self, "choice_weights", _readonly(weights / weights.sum()))
        n_models = check.array("skill", self.skill, (None,), low=-4.0, high=4.0).size
        if not 1 <= n_models <= MAX_GENERATOR_MODELS:
            raise check.fail("skill", f"holds {n_models} models, expected 1..{MAX_GENERATOR_MODELS}")
        n_choices, knots = int(counts.max()), len(MARGIN_QUANTILES)
        shapes = {
            "label_logits": (n_choices,),
            "skill": (n_models,),
            "label_bias": (n_models, n_choices),
            "loading": (n_models,),
            "wrong_logits": (n_models, n_choices),
            "distractor_logits": (n_choices,),
            "margin_right": (n_models, knots),
            "margin_wrong": (n_models, knots),
            "ease_right": (n_models,),
            "ease_wrong": (n_models,),
            "gold_boost": (n_models,),
            "rest_gap": (n_models, knots),
        }
        for name, shape in shapes.items():
            low, high = _BOUNDS[name]
            put(self, name, check.array(name, getattr(self, name), shape, low=low, high=high))
        for name in ("margin_right", "margin_wrong", "rest_gap"):
            if np.any(np.diff(getattr(self, name), axis=1) < 0):
                raise check.fail(name, "the quantiles of each model must not decrease")
        put(self, "distractor_boost", check.real("distractor_boost", self.distractor_boost, -_MAX_BOOST, _MAX_BOOST))

    @property
    def n_models(self) -> int:
        """N, the pool's models."""
        return int(self.skill.size)

    @property
    def max_choices(self) -> int:
        """C, the task's largest number of valid choices."""
        return int(self.choice_counts.max())

    def parameters(self) -> dict[str, Any]:
        """The parameters (the module's table) as a dict of arrays (``distractor_boost`` a float)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _NOT_PARAMETERS}


_NOT_PARAMETERS = ("name", "n_questions", "path")


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def norm_cdf(x: Any) -> np.ndarray:
    """Phi(x), the standard normal CDF, elementwise (from Numerical Recipes' complementary error function, absolute
    error below 1e-7; numpy only).

    >>> [round(float(p), 4) for p in norm_cdf([-1.959964, 0.0, 1.0])]
    [0.025, 0.5, 0.8413]
    """
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))  # fmt: skip
    tail = 0.5 * t * np.exp(poly)
    return np.asarray(np.where(x >= 0, 1.0 - tail, tail))


# -- jitter ---------------------------------------------------------------------------------------------------------
def _atanh_clipped(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.arctanh(np.clip(x, -MAX_LOADING, MAX_LOADING)))


def jittered(
    parameters: Mapping[str, Any],
    spread: Mapping[str, float],
    shared: Mapping[str, float],
    scale: float,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``parameters`` (:meth:`TaskFit.parameters`) with every family ``f`` of :data:`TASK_FAMILIES` moved on its
    unbounded scale (the module's docstring) by ``scale * spread[f] * z``, plus, for the families of
    :data:`MODEL_FAMILIES`, ``scale * shared[f] * z0`` with one ``z0`` for all the models (a shift of the whole task);
    the ``z`` drawn from ``rng`` family by family in :data:`TASK_FAMILIES` order (``z0`` first); the results kept
    inside the bounds a :class:`TaskFit` accepts."""
    out = dict(parameters)
    n_models = np.asarray(parameters["skill"]).size

    def noise(family: str, shape: tuple[int, ...]) -> np.ndarray:
        common = scale * shared[family] * rng.standard_normal() if family in MODEL_FAMILIES else 0.0
        return np.asarray(common + scale * spread[family] * rng.standard_normal(shape))

    for family in TASK_FAMILIES:
        value = np.asarray(parameters[family], dtype=np.float64)
        if family in ("margin_right", "margin_wrong", "rest_gap"):
            out[family] = np.clip(value + noise(family, (n_models, 1)), *_BOUNDS[family])
        elif family in ("loading", "ease_right", "ease_wrong"):
            moved = np.tanh(_atanh_clipped(value) + noise(family, value.shape))
            out[family] = np.clip(moved, -MAX_LOADING, MAX_LOADING)
        elif family == "distractor_boost":
            out[family] = float(np.clip(value + noise(family, ()), -_MAX_BOOST, _MAX_BOOST))
        else:
            out[family] = np.clip(value + noise(family, value.shape), *_BOUNDS[family])
    return out
