"""A task generator fitted to a real cache: new tasks drawn SMACv2-style, as many as a benchmark needs.

A real cache holds few tasks (``bbh5``: 16); a router trained on some and scored on the others is scored on four.
:func:`fit_generator` fits the generative model of :mod:`ensemble_env.cache.task_model` to each of a cache's tasks,
and :meth:`TaskGenerator.sample` draws new tasks from it: each a fitted task's parameters jittered, with its own
questions, labels, model outputs and train/validation/test split, as one :class:`~ensemble_env.cache.LogitCache`
usable wherever a cache is (the unseen-task protocol, ``unseen_parallel_env``, ``vector_env(..., episodes="task")``).
Files: :mod:`ensemble_env.cache.generator_file`; the fidelity report: :mod:`ensemble_env.baselines.fidelity`; the
page: ``docs/generated-tasks.md``.

**Fitting** (:func:`fit_generator`): each task by :func:`~ensemble_env.cache.task_fit.fit_task`, on all its
questions (every split, labels included); then the spreads of the parameters across the fitted tasks.

**A new task** (:meth:`TaskGenerator.sample`) takes a fitted task, its *parent*, uniformly among the fitted tasks
(or ``parents``), and jitters each parameter family ``f`` by ``jitter * s_f * z`` (``jitter=0.5``: half the spread;
``z ~ N(0, 1)`` per entry; :func:`~ensemble_env.cache.task_model.jittered`) on its unbounded scale. ``s_f``
(:attr:`TaskGenerator.spread`) is the family's spread across the fitted tasks: for a per-model scalar, the root mean
over the models of its variance across tasks (of a model's median log margin for the margins); for the position
vectors (``label_bias``, the logits), the root mean square of their entries (the spread around no bias); for
``distractor_boost``, its standard deviation across tasks. ``jitter=0`` draws replicas of the parent. The number of
choices is the parent's; the question count is drawn uniformly from ``questions``.

**Extra models** (``n_models`` above the pool's P): extra model ``k`` (P <= k < n_models) is a *variant* of a pool
model, its *donor*, drawn uniformly from ``SeedSequence([model_seed, 52, k])`` with a fixed offset of its skill and of
each branch of its margin quantiles, ``0.5 * s * z`` with ``s`` the spread *between the models* of a fitted task
(:attr:`TaskGenerator.model_spread`: the root mean over the tasks of the variance across models). In every task it
takes its donor's parameters plus these offsets, then its own jitter and draws: the same extra models in every task
and every sample of a ``model_seed``, named ``gen-model-KK``. ``n_models`` below P keeps the pool's first
``n_models`` models.

**Seeding.** Task ``i`` of a sample (``first <= i < first + n_tasks``, named ``gen-{i:06d}``) is drawn from its own
generator, ``np.random.default_rng(SeedSequence([seed, 51, i]))``: its parent, its jitter, its question count and its
questions, in that order. The same arguments give bit-identical caches, and task ``i`` does not depend on
``n_tasks``: ``sample(2000, seed)`` and ``sample(400, seed, first=2000)`` are disjoint streams.

>>> from ensemble_env.cache import synthetic
>>> real = synthetic.make_cache(n_models=3, n_questions=600, n_tasks=2, accuracy=[0.5, 0.6, 0.8], seed=0)
>>> generator = fit_generator(real)
>>> cache = generator.sample(4, seed=1, questions=(100, 120))
>>> cache.task_names, cache.models == real.models
(('gen-000000', 'gen-000001', 'gen-000002', 'gen-000003'), True)
>>> generator.sample(2, seed=1, first=2, questions=(100, 120)).task_names
('gen-000002', 'gen-000003')
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import SCORE_KINDS, SPLITS, LogitCache
from ensemble_env.cache.task_draw import draw_questions, task_draws
from ensemble_env.cache.task_fit import fit_task
from ensemble_env.cache.task_model import (
    MARGIN_QUANTILES,
    MAX_GENERATOR_CHOICES,
    MAX_GENERATOR_MODELS,
    MAX_QUESTIONS_PER_TASK,
    MIN_MARGIN,
    MODEL_FAMILIES,
    TASK_FAMILIES,
    FieldChecker,
    TaskFit,
    jittered,
)
from ensemble_env.text import show

__all__ = [
    "MAX_GENERATED_ENTRIES",
    "MAX_GENERATOR_TASKS",
    "MAX_SAMPLED_TASKS",
    "OFFSET_FAMILIES",
    "TaskGenerator",
    "fit_generator",
]

#: the most fitted tasks a generator holds (a bound for crafted files)
MAX_GENERATOR_TASKS = 4096
#: the most tasks of one sample
MAX_SAMPLED_TASKS = 1_000_000
#: the most score entries (questions x models x choices) of one sample: 2**31 float32, 8 GiB
MAX_GENERATED_ENTRIES = 2**31
#: the families an extra model's fixed offset is drawn for (the keys of :attr:`TaskGenerator.model_spread`)
OFFSET_FAMILIES = ("skill", "margin_right", "margin_wrong")

_CHUNK_QUESTIONS = 8192  # questions drawn together (their temporary arrays: some MB per model and choice)
_TASK_KEY, _MODEL_KEY = 51, 52  # SeedSequence keys of the task streams and of the extra models


def _task_rows(cache: LogitCache, tasks: Sequence[str | int] | None) -> list[tuple[str, np.ndarray]]:
    """(name, questions) of each task to fit (named or indexed; all tasks with questions by default)."""
    if tasks is None:
        indices = [int(t) for t in np.unique(cache.tasks)]
    else:
        if isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence | np.ndarray):
            raise ValueError(f"tasks must be a list of task names or indices, got {show(tasks)}")
        indices = []
        for task in tasks:
            if isinstance(task, str):
                indices.append(cache.task_index(task))
            elif isinstance(task, numbers.Integral) and not isinstance(task, bool) and 0 <= task < cache.n_tasks:
                indices.append(int(task))
            else:
                raise ValueError(f"tasks: {show(task)} is neither a task name nor an index in 0..{cache.n_tasks - 1}")
        if len(set(indices)) != len(indices):
            raise ValueError(f"tasks: a task is named twice in {show(list(tasks))}")
    chosen = []
    for index in indices:
        rows = np.flatnonzero(cache.tasks == index)
        if rows.size == 0:
            raise ValueError(f"tasks: {cache.task_names[index]!r} has no question in {cache.path}")
        chosen.append((cache.task_names[index], rows))
    if not chosen:
        raise ValueError(f"{cache.path}: no task to fit")
    return chosen


def fit_generator(cache: LogitCache, tasks: Sequence[str | int] | None = None) -> TaskGenerator:
    """Fit the task model of the module's docstring to each task of ``cache`` (or of ``tasks``, names or indices).

    Only the questions of those tasks are read, all their splits (labels included). The generator keeps the
    cache's model names and ``score_kind``, the split proportions of the fitted questions and the spreads of the
    parameters across the fitted tasks (the jitter's scale).

    Parameters
    ----------
    cache
        The real cache (at most :data:`MAX_GENERATOR_MODELS` models and :data:`MAX_GENERATOR_CHOICES` choices).
    tasks
        The tasks to fit, by name or index (default: every task with questions).

    Returns
    -------
    TaskGenerator
        The fitted generator; :meth:`TaskGenerator.sample` draws caches from it.

    Raises
    ------
    ValueError
        An unknown task, a task without questions, a cache beyond the limits.
    """
    if not isinstance(cache, LogitCache):
        raise ValueError(f"fit_generator needs a LogitCache, got {type(cache).__name__}")
    if cache.n_models > MAX_GENERATOR_MODELS or cache.max_choices > MAX_GENERATOR_CHOICES:
        raise ValueError(
            f"{cache.path}: {cache.n_models} models and {cache.max_choices} choices; a generator holds at most "
            f"{MAX_GENERATOR_MODELS} models and {MAX_GENERATOR_CHOICES} choices"
        )
    chosen = _task_rows(cache, tasks)
    fits = tuple(fit_task(cache, name, rows) for name, rows in chosen)
    rows = np.concatenate([rows for _, rows in chosen])
    split = cache.split[rows]
    spread, shared = _spreads(fits)
    fractions = {name: float(np.mean(split == code)) for name, code in SPLITS.items() if name != "train"}
    return TaskGenerator(
        models=tuple(cache.models),
        score_kind=cache.score_kind,
        tasks=fits,
        split_fractions=(fractions["validation"], fractions["test"]),
        spread=spread,
        shared_spread=shared,
        model_spread=_model_spreads(fits),
        source=f"fitted to {len(fits)} tasks of {cache.path}",
    )


# -- the spreads the jitter reads -----------------------------------------------------------------------------------
def _transformed(fit: TaskFit) -> dict[str, np.ndarray]:
    """Each family of ``fit`` on its unbounded scale (the margins: each model's median)."""
    middle = len(MARGIN_QUANTILES) // 2
    return {
        "skill": fit.skill,
        "label_bias": fit.label_bias,
        "loading": np.arctanh(fit.loading),
        "wrong_logits": fit.wrong_logits,
        "gold_boost": fit.gold_boost,
        "rest_gap": fit.rest_gap[:, middle],
        "margin_right": fit.margin_right[:, middle],
        "margin_wrong": fit.margin_wrong[:, middle],
        "ease_right": np.arctanh(fit.ease_right),
        "ease_wrong": np.arctanh(fit.ease_wrong),
        "label_logits": fit.label_logits,
        "distractor_logits": fit.distractor_logits,
        "distractor_boost": np.array([fit.distractor_boost]),
    }


_VECTORS = ("label_bias", "wrong_logits", "label_logits", "distractor_logits")
#: the families a task of two choices does not use (their spread is taken over the tasks of more)
_SEVERAL_CHOICES = ("wrong_logits", "gold_boost", "rest_gap", "distractor_logits", "distractor_boost")


def _spreads(fits: Sequence[TaskFit]) -> tuple[dict[str, float], dict[str, float]]:
    """The jitter's scales: per family, its spread across the fitted tasks (for the families of one value per model,
    the spread of each model's deviation from the task's mean), and for the families of one value per model the
    spread of the task's mean across tasks (the shared shift)."""
    spread, shared = {}, {}
    for name in TASK_FAMILIES:
        used = [fit for fit in fits if name not in _SEVERAL_CHOICES or fit.max_choices >= 3] or list(fits)
        values = [_transformed(fit)[name] for fit in used]
        if name in _VECTORS:  # the entries' spread around no bias: 1.4826 x their median absolute value
            entries = np.concatenate([value.ravel() for value in values])
            spread[name] = float(1.4826 * np.median(np.abs(entries)))
        elif name in MODEL_FAMILIES:  # (T, N): the task's mean across tasks, each model's deviation from it
            table = np.stack(values)
            means = table.mean(axis=1, keepdims=True)
            shared[name] = float(means.std()) if len(values) > 1 else 0.0
            spread[name] = float(np.sqrt((table - means).var(axis=0).mean())) if len(values) > 1 else 0.0
        else:  # the task's one value: its standard deviation across tasks
            spread[name] = float(np.std(np.concatenate(values))) if len(values) > 1 else 0.0
    return spread, shared


def _model_spreads(fits: Sequence[TaskFit]) -> dict[str, float]:
    """The spread between the models of a task, pooled over the tasks, of :data:`OFFSET_FAMILIES`."""
    values = [_transformed(fit) for fit in fits]
    return {
        name: float(np.sqrt(np.mean([v[name].var() for v in values]))) if fits[0].n_models > 1 else 0.0
        for name in OFFSET_FAMILIES
    }


# -- the generator ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TaskGenerator:
    """A fitted task generator (:func:`fit_generator`; :func:`~ensemble_env.cache.load_generator` reads one).

    Parameters
    ----------
    models
        The pool's P model names (the fitted cache's).
    score_kind
        The fitted cache's ``score_kind``; generated caches hold normalised log-probabilities under it
        (probabilities for ``"prob"``).
    tasks
        The fitted tasks' parameters, one :class:`TaskFit` each.
    split_fractions
        (validation, test): the share of each generated task's questions in each split (its last questions are
        test, the ones before them validation, as the converters split); the fitted questions' proportions.
    spread
        The jitter's scale of each of :data:`TASK_FAMILIES` (see the module's docstring); for the families of one
        value per model (:data:`~ensemble_env.cache.task_model.MODEL_FAMILIES`), of each model's own move.
    shared_spread
        For the families of one value per model, the scale of the shift shared by a task's models.
    model_spread
        The spread between models of each of :data:`OFFSET_FAMILIES` (the extra models' offsets).
    source
        Free text: what the generator was fitted to.
    path
        Where it was read from, for error messages.
    """

    models: tuple[str, ...]
    score_kind: str
    tasks: tuple[TaskFit, ...]
    split_fractions: tuple[float, float]
    spread: dict[str, float]
    shared_spread: dict[str, float]
    model_spread: dict[str, float]
    source: str = ""
    path: str = field(default="<memory>", repr=False)

    def __post_init__(self) -> None:
        check = FieldChecker(self.path, "")
        if isinstance(self.models, str) or not isinstance(self.models, Sequence):
            raise check.fail("models", f"must be a list of model names, got {show(self.models)}")
        models = tuple(check.text(f"models[{i}]", name) for i, name in enumerate(self.models))
        if not 1 <= len(models) <= MAX_GENERATOR_MODELS or len(set(models)) != len(models):
            raise check.fail("models", f"must be 1..{MAX_GENERATOR_MODELS} distinct names, got {show(list(models))}")
        object.__setattr__(self, "models", models)
        if self.score_kind not in SCORE_KINDS:
            raise check.fail("score_kind", f"{show(self.score_kind)} is not one of {', '.join(SCORE_KINDS)}")
        if not isinstance(self.source, str) or "\x00" in self.source:
            raise check.fail("source", f"must be a string, got {show(self.source)}")
        if not isinstance(self.tasks, tuple) or not all(isinstance(task, TaskFit) for task in self.tasks):
            raise check.fail("tasks", "must be a tuple of TaskFit")
        if not 1 <= len(self.tasks) <= MAX_GENERATOR_TASKS:
            raise check.fail("tasks", f"holds {len(self.tasks)} tasks, expected 1..{MAX_GENERATOR_TASKS}")
        names = [task.name for task in self.tasks]
        if len(set(names)) != len(names):
            raise check.fail("tasks", f"task names must be unique, got {show(names)}")
        for task in self.tasks:
            if task.n_models != len(models):
                raise check.fail(
                    f"tasks[{task.name!r}].skill", f"holds {task.n_models} models, the pool has {len(models)}"
                )
        fractions = check.array("split_fractions", self.split_fractions, (2,), low=0.0, high=1.0)
        if fractions.sum() >= 1.0:
            raise check.fail("split_fractions", f"validation + test must be below 1, got {show(fractions.tolist())}")
        object.__setattr__(self, "split_fractions", (float(fractions[0]), float(fractions[1])))
        for name, families in (
            ("spread", TASK_FAMILIES),
            ("shared_spread", MODEL_FAMILIES),
            ("model_spread", OFFSET_FAMILIES),
        ):
            given = getattr(self, name)
            if not isinstance(given, dict) or set(given) != set(families):
                raise check.fail(name, f"must map exactly {', '.join(families)} to numbers, got {show(given)}")
            object.__setattr__(
                self, name, {key: check.real(f"{name}.{key}", given[key], 0.0, 100.0) for key in families}
            )

    @property
    def n_models(self) -> int:
        """P, the models of the fitted pool."""
        return len(self.models)

    @property
    def task_names(self) -> tuple[str, ...]:
        """The fitted tasks' names (the parents a new task is drawn from)."""
        return tuple(task.name for task in self.tasks)

    def sample(
        self,
        n_tasks: int,
        seed: int,
        *,
        n_models: int | None = None,
        questions: tuple[int, int] = (150, 250),
        first: int = 0,
        jitter: float = 0.5,
        parents: Sequence[str] | None = None,
        split_fractions: tuple[float, float] | None = None,
        model_seed: int = 0,
        choices: int | None = None,
    ) -> LogitCache:
        """Draw tasks ``first .. first + n_tasks - 1`` of the stream of ``seed`` as one cache.

        Parameters
        ----------
        n_tasks
            How many tasks (1 ..  1,000,000).
        seed
            The stream's seed (a whole number >= 0); task ``i`` is drawn from ``SeedSequence([seed, 51, i])``.
        n_models
            The pool of the cache (default P, the fitted pool): fewer keeps the first ``n_models`` models, more adds
            extra models drawn from the fitted ones (the module's docstring), named ``gen-model-PP``.
        questions
            (low, high): each task's question count is drawn uniformly from low..high (both included).
        first
            The index of the first task drawn (names ``gen-{i:06d}``): ``first=2000`` continues a stream of 2,000.
        jitter
            The scale of the jitter in units of each family's spread across tasks (0: replicas of the parents).
        parents
            The fitted tasks a new task may copy (default: all), uniformly.
        split_fractions
            (validation, test) shares of each task's questions (default: the fitted cache's,
            :attr:`split_fractions`); a task's last questions are test, the ones before them validation.
        model_seed
            The seed the extra models are drawn from (the same extra models in every sample of a ``model_seed``).
        choices
            The scores' width C (:attr:`LogitCache.max_choices`): default the widest task drawn; a number at least
            that of the widest task ``parents`` holds (else a ValueError), so that samples of any size and stream
            have the same width (the wider columns hold no choice: -inf, or 0 for probabilities).

        Returns
        -------
        LogitCache
            ``n_tasks`` tasks, their questions contiguous in task order, ``score_kind`` the generator's, the pool's
            model names (and the extra ones), a train/validation/test split per task; no costs, features or texts.
        """
        request = _Request.of(self, n_tasks, seed, n_models, questions, first, jitter, parents, split_fractions,
                              model_seed, choices)  # fmt: skip
        return _draw_cache(self, request)


@dataclass(frozen=True)
class _Request:
    """The checked arguments of :meth:`TaskGenerator.sample`."""

    n_tasks: int
    seed: int
    n_models: int
    questions: tuple[int, int]
    first: int
    jitter: float
    parents: tuple[int, ...]
    split_fractions: tuple[float, float]
    model_seed: int
    choices: int | None

    @classmethod
    def of(
        cls,
        generator: TaskGenerator,
        n_tasks: Any,
        seed: Any,
        n_models: Any,
        questions: Any,
        first: Any,
        jitter: Any,
        parents: Any,
        split_fractions: Any,
        model_seed: Any,
        choices: Any,
    ) -> _Request:
        def whole(name: str, value: Any, low: int, high: int) -> int:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
                raise ValueError(f"{name} must be a whole number in {low}..{high}, got {show(value)}")
            return int(value)

        n_tasks = whole("n_tasks", n_tasks, 1, MAX_SAMPLED_TASKS)
        seed = whole("seed", seed, 0, 2**63 - 1)
        first = whole("first", first, 0, 2**40)
        model_seed = whole("model_seed", model_seed, 0, 2**63 - 1)
        models = generator.n_models if n_models is None else whole("n_models", n_models, 1, MAX_GENERATOR_MODELS)
        if isinstance(questions, str | bytes) or not isinstance(questions, Sequence) or len(questions) != 2:
            raise ValueError(f"questions must be (low, high), got {show(questions)}")
        low = whole("questions (low)", questions[0], 1, MAX_QUESTIONS_PER_TASK)
        high = whole("questions (high)", questions[1], low, MAX_QUESTIONS_PER_TASK)
        ok = isinstance(jitter, numbers.Real) and not isinstance(jitter, bool) and 0.0 <= float(jitter) <= 10.0
        if not ok or not np.isfinite(float(jitter)):
            raise ValueError(f"jitter must be a number in [0, 10], got {show(jitter)}")
        if parents is None:
            chosen = tuple(range(len(generator.tasks)))
        else:
            if isinstance(parents, str | bytes) or not isinstance(parents, Sequence) or not parents:
                raise ValueError(f"parents must be a non-empty list of fitted task names, got {show(parents)}")
            names = generator.task_names
            unknown = [name for name in parents if name not in names]
            if unknown:
                raise ValueError(f"parents: {show(unknown[0])} is not a fitted task ({', '.join(names)})")
            chosen = tuple(names.index(name) for name in parents)
        fractions = generator.split_fractions if split_fractions is None else split_fractions
        if isinstance(fractions, str | bytes) or not isinstance(fractions, Sequence) or len(fractions) != 2:
            raise ValueError(f"split_fractions must be (validation, test), got {show(fractions)}")
        values = [float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else np.nan for v in fractions]
        if not all(np.isfinite(v) and v >= 0 for v in values) or sum(values) >= 1:
            raise ValueError(f"split_fractions must be two numbers >= 0 summing below 1, got {show(fractions)}")
        widest = max(generator.tasks[p].max_choices for p in chosen)
        width = None if choices is None else whole("choices", choices, widest, MAX_GENERATOR_CHOICES)
        wide = widest if width is None else width
        entries = n_tasks * high * models * wide
        if entries > MAX_GENERATED_ENTRIES:
            raise ValueError(
                f"{n_tasks} tasks of up to {high} questions x {models} models x {wide} choices is {entries:,} "
                f"scores, more than the {MAX_GENERATED_ENTRIES:,} of one sample: draw fewer tasks at a time (first=)"
            )
        return cls(n_tasks, seed, models, (low, high), first, float(jitter), chosen, (values[0], values[1]), model_seed,
                   width)  # fmt: skip


# -- drawing a sample -------------------------------------------------------------------------------------------------
def _extra_models(generator: TaskGenerator, request: _Request) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The donor of every model of the sample (the pool's own index for a pool model) and the fixed offsets of the
    extra ones (0 for the pool's), each extra model ``k`` from ``SeedSequence([model_seed, 52, k])``."""
    pool = generator.n_models
    donors = np.arange(request.n_models) % pool
    offsets = {name: np.zeros(request.n_models) for name in OFFSET_FAMILIES}
    for k in range(pool, request.n_models):
        rng = np.random.default_rng(np.random.SeedSequence([request.model_seed, _MODEL_KEY, k]))
        donors[k] = rng.integers(pool)
        for name in OFFSET_FAMILIES:
            offsets[name][k] = 0.5 * generator.model_spread[name] * rng.standard_normal()
    return donors, offsets


def _pool_parameters(fit: TaskFit, donors: np.ndarray, offsets: dict[str, np.ndarray]) -> dict[str, Any]:
    """The parameters of ``fit`` for the sample's models: each model's donor's row, shifted by its offsets."""
    parameters = fit.parameters()
    for name, value in parameters.items():
        if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == fit.n_models and name not in (
            "choice_counts", "choice_weights", "label_logits", "distractor_logits"
        ):  # fmt: skip
            parameters[name] = value[donors]
    parameters["skill"] = np.clip(parameters["skill"] + offsets["skill"], -4.0, 4.0)
    for name in ("margin_right", "margin_wrong"):
        parameters[name] = np.clip(parameters[name] + offsets[name][:, None], np.log(MIN_MARGIN), 100.0)
    return parameters


def _split(n_questions: int, fractions: tuple[float, float]) -> np.ndarray:
    """(Q,) split codes: the last ``round(test * Q)`` questions test, the ``round(validation * Q)`` before them
    validation, the rest train."""
    n_test = int(np.floor(fractions[1] * n_questions + 0.5))
    n_validation = min(int(np.floor(fractions[0] * n_questions + 0.5)), n_questions - n_test)
    split = np.full(n_questions, SPLITS["train"], dtype=np.int64)
    split[n_questions - n_test - n_validation : n_questions - n_test] = SPLITS["validation"]
    split[n_questions - n_test :] = SPLITS["test"]
    return split


def _groups(sizes: list[int], widths: list[int]) -> list[list[int]]:
    """The tasks in groups drawn together: tasks of one choice count (no padding to compute), about
    :data:`_CHUNK_QUESTIONS` questions a group (bounded temporary memory)."""
    groups: list[list[int]] = []
    for width in sorted(set(widths)):
        held = _CHUNK_QUESTIONS
        for task in (t for t, w in enumerate(widths) if w == width):
            if held + sizes[task] > _CHUNK_QUESTIONS:
                groups.append([])
                held = 0
            groups[-1].append(task)
            held += sizes[task]
    return groups


def _draw_cache(generator: TaskGenerator, request: _Request) -> LogitCache:
    donors, offsets = _extra_models(generator, request)
    pool = [_pool_parameters(fit, donors, offsets) for fit in generator.tasks]
    streams = [np.random.default_rng(np.random.SeedSequence([request.seed, _TASK_KEY, i]))
               for i in range(request.first, request.first + request.n_tasks)]  # fmt: skip
    parents = [request.parents[int(rng.integers(len(request.parents)))] for rng in streams]
    scales = (generator.spread, generator.shared_spread, request.jitter)
    parameters = [jittered(pool[parent], *scales, rng) for parent, rng in zip(parents, streams, strict=True)]
    sizes = [int(rng.integers(request.questions[0], request.questions[1] + 1)) for rng in streams]
    total, width = sum(sizes), request.choices or max(generator.tasks[parent].max_choices for parent in parents)
    as_prob = generator.score_kind == "prob"
    scores = np.full((total, request.n_models, width), 0.0 if as_prob else -np.inf, dtype=np.float32)
    labels = np.empty(total, dtype=np.int64)
    n_choices = np.empty(total, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for group in _groups(sizes, [generator.tasks[parent].max_choices for parent in parents]):
        logp, group_labels, group_choices = draw_questions(
            [task_draws(parameters[t], sizes[t], streams[t]) for t in group]
        )
        start = 0
        for t in group:  # back to the task's rows
            rows, drawn = slice(starts[t], starts[t + 1]), slice(start, start + sizes[t])
            scores[rows, :, : logp.shape[2]] = np.exp(logp[drawn]) if as_prob else logp[drawn]
            labels[rows], n_choices[rows] = group_labels[drawn], group_choices[drawn]
            start += sizes[t]
    tasks = np.repeat(np.arange(request.n_tasks), sizes)
    split = np.concatenate([_split(size, request.split_fractions) for size in sizes])
    extra = tuple(f"gen-model-{k:02d}" for k in range(generator.n_models, request.n_models))
    models = (*generator.models[: request.n_models], *extra)
    return LogitCache(
        scores=scores,
        labels=labels,
        models=models,
        score_kind=generator.score_kind,
        n_choices=n_choices,
        tasks=tasks,
        task_names=tuple(f"gen-{i:06d}" for i in range(request.first, request.first + request.n_tasks)),
        split=split,
        source=(
            f"ensemble_env generated tasks (TaskGenerator {generator.source}): sample(n_tasks={request.n_tasks}, "
            f"seed={request.seed}, first={request.first}, n_models={request.n_models}, questions={request.questions}, "
            f"jitter={request.jitter:g}, model_seed={request.model_seed})"
        ),
    )
