"""The benchmark's protocols: ``standard`` (train, validation and test splits of every task) and ``unseen-tasks``.

``unseen-tasks`` scores routing on tasks never seen: every algorithm fits and chooses on some tasks and answers
every question of other tasks, each streamed from an empty history. It is posed as caches of the usual splits, so
that every algorithm and baseline runs unchanged (fit on ``train``, choose on ``validation``, answer ``test``):

- without another cache, the cache's tasks are dealt into ``k`` folds by a seeded permutation (:func:`task_folds`);
  for each fold, :func:`fold_cache` makes every question of the fold's tasks ``test``, every question of a quarter of
  the other tasks (drawn with the same seed) ``validation`` (validation is tasks too, never held-out ones) and every
  question of the rest ``train``;
- with ``eval_cache``, :func:`combined_cache` puts every question of the training cache in train (its validation
  tasks in validation) and every question of the evaluation cache in test; the two caches must hold the same models
  in the same order, and the evaluation cache no training question (:func:`training_questions`: the same cache, a
  copy, a re-split or a part of it is refused, naming the first shared question).

Learners play the scenario ``ensemble_env/EnsembleUnseen-v1`` (episodes of one task, no task one-hot:
:func:`learner_overrides`); the answers of the folds are merged into one answer per question of the scored cache
(:func:`scored_cache`), in the cache's order, and scored as a standard run is.

``generated`` (:func:`generated_units`, SMACv2-style: issue 48) keeps the folds of ``unseen-tasks`` but trains and
chooses on tasks drawn from a generator (:func:`ensemble_env.cache.fit_generator`) fitted on each fold's training
tasks alone (its validation tasks among them, never its held-out tasks): each fold's unit holds
:class:`GeneratedPlan`'s generated train tasks (``train``), generated validation tasks (``validation``), and as
``test`` generated test tasks followed by the fold's real held-out tasks. A unit's test questions are scored in two
caches (:attr:`Unit.scored_part`): every fold's generated test tasks together, and the real cache, every question
once (with ``eval_cache``: one unit, the generator fitted on every task of the cache, the evaluation cache's tasks
scored). With another pool size than the cache's (``GeneratedPlan.n_models``) the real tasks, which hold the cache's
models alone, are not posed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import unseen_game
from ensemble_env.seeds import check_seed
from ensemble_env.text import show
from ensemble_mappo import algorithms
from ensemble_mappo.presets import GENERATED, GENERATED_BUDGET_STEPS, PARTIAL, PARTIAL_BUDGET_STEPS

if TYPE_CHECKING:
    from ensemble_env.cache.generator import TaskGenerator

__all__ = [
    "ANSWER_DTYPE",
    "FEEDBACKS",
    "GENERATED_BUDGET_STEPS",
    "GENERATED_FIRST",
    "GENERATED_LEARNER",
    "PARTIAL_BUDGET_STEPS",
    "PARTIAL_LEARNER",
    "PROTOCOLS",
    "GeneratedPlan",
    "Unit",
    "check_evaluation",
    "check_unseen",
    "combined_cache",
    "fold_cache",
    "fold_generator",
    "fold_stream_seed",
    "generated_name",
    "generated_tasks",
    "generated_units",
    "joined_cache",
    "learner_overrides",
    "scored_cache",
    "task_folds",
    "tasks_only",
    "tasks_with_questions",
    "training_questions",
    "units",
]

#: the protocols of ``ensemble-env benchmark --protocol``
PROTOCOLS = ("standard", "unseen-tasks", "generated")
#: what the game reveals after each answer (``--feedback``): every model's output ("all"), or only the answering
#: team's ("team": partial feedback, ``ensemble_env/EnsembleUnseen-v2``; unseen-tasks and generated only)
from ensemble_env.game.config import FEEDBACK as FEEDBACKS  # noqa: E402 (the one vocabulary)

#: the learner's settings under partial feedback, read-only: the preset :data:`ensemble_mappo.presets.PARTIAL` (where
#: they are defined, with how they were chosen); its budget, :data:`PARTIAL_BUDGET_STEPS`, is defined there too
PARTIAL_LEARNER: Mapping[str, Any] = PARTIAL.values
#: what ``--protocol generated`` adds to the learners' settings (:func:`learner_overrides`), under either feedback,
#: read-only: the preset :data:`ensemble_mappo.presets.GENERATED` (defined there, with how they were chosen; its
#: budget :data:`GENERATED_BUDGET_STEPS`)
GENERATED_LEARNER: Mapping[str, Any] = GENERATED.values
#: the codes of the cache's ``split`` array
TRAIN, TEST, VALIDATION = 0, 1, 2
#: where each part of a fold's generated tasks starts in the fold's stream (``TaskGenerator.sample(first=...)``): the
#: parts are disjoint, and a part's tasks do not depend on the other parts' counts (the test tasks stay the same
#: when the train tasks are more); a part holds at most :data:`MAX_GENERATED_PART` tasks
GENERATED_FIRST = {"train": 0, "validation": 1_000_000, "test": 2_000_000}
#: the most tasks of one part of :class:`GeneratedPlan`
MAX_GENERATED_PART = 1_000_000


@dataclass(frozen=True)
class GeneratedPlan:
    """The generated tasks of each fold of ``--protocol generated`` (:func:`generated_units`): the defaults are the
    protocol's (docs/benchmark.md); tests shrink them.

    ``train_tasks`` the learners and rules fit on, ``validation_tasks`` they choose on, ``test_tasks`` scored (per
    fold: 4 folds of bbh5 score 2,000), each of ``questions`` = (low, high) questions drawn uniformly; ``n_models``
    the pool of the generated tasks (``--generated-models``; None: the cache's own, and then the fold's real held-out
    tasks are scored too; more draws extra models from the generator, fewer keeps the first). A ValueError names the
    field for a count that is not a whole number in range."""

    train_tasks: int = 800
    validation_tasks: int = 200
    test_tasks: int = 500
    questions: tuple[int, int] = (150, 250)
    n_models: int | None = None

    def __post_init__(self) -> None:
        from ensemble_env.cache.task_model import MAX_GENERATOR_MODELS, MAX_QUESTIONS_PER_TASK

        def whole(name: str, value: Any, low: int, high: int) -> int:
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
                raise ValueError(f"GeneratedPlan.{name} must be a whole number in {low}..{high}, got {show(value)}")
            return int(value)

        lows = {"train_tasks": 2, "validation_tasks": 1, "test_tasks": 1}
        for name, low in lows.items():
            object.__setattr__(self, name, whole(name, getattr(self, name), low, MAX_GENERATED_PART))
        questions = self.questions
        if isinstance(questions, str | bytes) or not isinstance(questions, tuple | list) or len(questions) != 2:
            raise ValueError(f"GeneratedPlan.questions must be (low, high), got {show(questions)}")
        low = whole("questions", questions[0], 2, MAX_QUESTIONS_PER_TASK)
        object.__setattr__(self, "questions", (low, whole("questions", questions[1], low, MAX_QUESTIONS_PER_TASK)))
        if self.n_models is not None:
            object.__setattr__(self, "n_models", whole("n_models", self.n_models, 1, MAX_GENERATOR_MODELS))

    def counts(self) -> dict[str, int]:
        """The tasks of each part of a fold, by split name."""
        return {"train": self.train_tasks, "validation": self.validation_tasks, "test": self.test_tasks}


@dataclass(frozen=True)
class Unit:
    """One fold of a protocol: the cache the algorithms run on, and where its test questions are scored
    (``scored_questions[i]`` is the scored question of the unit's ``i``-th test question, in the scored cache
    ``scored_part[i]``: 0 always but under ``--protocol generated``, whose units are scored in two caches)."""

    label: str
    cache: LogitCache
    scored_questions: np.ndarray
    held_out: tuple[str, ...]
    validation_tasks: tuple[str, ...]
    scored_part: np.ndarray | None = None
    generated: dict[str, Any] | None = None
    """Under ``--protocol generated``: the fold's generator (the tasks it was fitted on) and its tasks' seed and
    counts, as ``results.json`` keeps them."""

    def parts(self) -> np.ndarray:
        """(T,) the scored cache of each test question (:attr:`scored_part`, zeros when None)."""
        if self.scored_part is None:
            return np.zeros(np.asarray(self.scored_questions).size, dtype=np.int64)
        return np.asarray(self.scored_part)


def task_folds(task_names: tuple[str, ...], k: int, seed: int) -> list[tuple[str, ...]]:
    """The tasks dealt into ``k`` folds (sizes differing by at most one) by a permutation seeded with ``seed``.

    >>> task_folds(("a", "b", "c", "d", "e"), 2, 0)
    [('b', 'c', 'd'), ('a', 'e')]
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= len(task_names):
        raise ValueError(f"--folds must be an integer from 2 to the cache's {len(task_names)} tasks, got {k!r}")
    order = np.random.default_rng(np.random.SeedSequence([seed, 32])).permutation(len(task_names))
    return [tuple(task_names[i] for i in sorted(order[fold::k])) for fold in range(k)]


def _validation_tasks(training: tuple[str, ...], seed: int, fold: int) -> tuple[str, ...]:
    """A quarter of the training tasks (at least one), drawn with (``seed``, ``fold``): the tasks settings and
    checkpoints are chosen on."""
    count = max(1, round(len(training) / 4))
    order = np.random.default_rng(np.random.SeedSequence([seed, 33, fold])).permutation(len(training))
    return tuple(training[i] for i in sorted(order[:count]))


def fold_cache(cache: LogitCache, held_out: tuple[str, ...], validation_tasks: tuple[str, ...]) -> LogitCache:
    """``cache`` with its splits redrawn by task: the questions of ``held_out`` test, of ``validation_tasks``
    validation, of every other task train (whatever their splits were)."""
    names = np.asarray(cache.task_names)[np.asarray(cache.tasks)]
    split = np.full(cache.n_questions, TRAIN, dtype=np.int64)
    split[np.isin(names, validation_tasks)] = VALIDATION
    split[np.isin(names, held_out)] = TEST
    return dataclasses.replace(cache, split=split)


#: the precision answers are compared at: the narrowest float a cache stores scores in (a copy of a cache narrowed to
#: float16 or float32 holds the same questions)
ANSWER_DTYPE = np.float16


def _answers(cache: LogitCache) -> list[bytes]:
    """Per question, what makes it the same question in another cache of the same models: its answers, every model's
    scores over its choices, at :data:`ANSWER_DTYPE` precision (the label is left out: a question relabelled is still
    the question the models answered)."""
    with np.errstate(over="ignore"):
        scores = np.asarray(cache.scores).astype(ANSWER_DTYPE)
    return [np.ascontiguousarray(scores[q, :, : cache.n_choices[q]]).tobytes() for q in range(cache.n_questions)]


def _task_of_each(cache: LogitCache) -> list[str]:
    return np.asarray(cache.task_names)[np.asarray(cache.tasks)].tolist()


def training_questions(train: LogitCache, evaluation: LogitCache) -> np.ndarray:
    """(K,) int64, ascending: the questions of ``evaluation`` that are questions of ``train``.

    A question is a training question when a task of the same name holds it: the same question id (when both caches
    hold ids), or the same answers (every model's scores over its choices, compared at :data:`ANSWER_DTYPE`
    precision, whatever its label); and every question of a task whose questions all have the answers of training
    questions, whatever its name (a training task renamed). A copy of the training cache, a part of it, its questions
    under other splits, other labels, other task names or narrower floats are training questions; a cache of other
    questions shares none (a question's answers alone, in a task of another name, are not enough: saturated models
    answer different questions alike). Questions whose every answer was changed and whose id is gone are other
    questions to this check."""
    if tuple(train.models) != tuple(evaluation.models) or train.score_kind != evaluation.score_kind:
        return np.zeros(0, dtype=np.int64)  # other models, or scores of another kind: no answer can be the same
    tasks, train_tasks = _task_of_each(evaluation), _task_of_each(train)
    answers, train_answers = _answers(evaluation), _answers(train)
    named = set(zip(train_tasks, train_answers, strict=True))
    shared = np.array([(task, answer) in named for task, answer in zip(tasks, answers, strict=True)], dtype=bool)
    if train.question_ids is not None and evaluation.question_ids is not None:
        ids = set(zip(train_tasks, train.question_ids, strict=True))
        shared |= [(task, qid) in ids for task, qid in zip(tasks, evaluation.question_ids, strict=True)]
    known = set(train_answers)
    in_training = np.array([answer in known for answer in answers], dtype=bool)
    task_ids = np.asarray(evaluation.tasks)
    for task in np.unique(task_ids):
        members = task_ids == task
        if in_training[members].all():  # a whole task of training questions, under another name
            shared |= members
    return np.flatnonzero(shared).astype(np.int64)


def check_unseen(train: LogitCache, evaluation: LogitCache) -> None:
    """Refuse (ValueError naming both caches) an evaluation cache that holds training questions: the training cache
    itself or a copy of it (the same content digest), or any question of it (:func:`training_questions`), since the
    unseen-task protocol scores tasks never seen."""
    where = f"--eval-cache {evaluation.path}"
    if cache_digest(train) == cache_digest(evaluation):
        raise ValueError(
            f"{where} holds the same cache as --cache {train.path} (the same content digest): the unseen-task "
            "protocol scores tasks never seen in training; give --eval-cache a cache of other tasks"
        )
    shared = training_questions(train, evaluation)
    if shared.size:
        q = int(shared[0])
        task = evaluation.task_names[int(evaluation.tasks[q])]
        named = f", id {show(evaluation.question_ids[q])}" if evaluation.question_ids is not None else ""
        raise ValueError(
            f"{where}: {shared.size:,} of its {evaluation.n_questions:,} questions are questions of --cache "
            f"{train.path} (the first: question {q}, task {show(task)}{named}): the unseen-task protocol scores tasks "
            "never seen in training; remove them from one of the caches (ensemble-env cache ... --tasks)"
        )


def joined_cache(
    parts: list[LogitCache],
    splits: list[np.ndarray],
    task_names: list[tuple[str, ...]] | None = None,
    dtype: Any = None,
) -> LogitCache:
    """One cache of the questions of ``parts`` in order (the same models in the same order and the same score kind,
    else a ValueError): part ``i``'s questions under the split codes ``splits[i]`` and its tasks under the names
    ``task_names[i]`` (default its own; every name of the result must differ), scores padded to the widest part
    (probabilities with 0, other kinds with -inf) as ``dtype`` (default the parts' common type). Features and costs
    are kept only where every part holds them with the same width."""
    first = parts[0]
    for part in parts[1:]:
        if tuple(part.models) != tuple(first.models) or part.score_kind != first.score_kind:
            raise ValueError(
                f"{part.path}: its models {list(part.models)} ({part.score_kind}) are not {first.path}'s "
                f"{list(first.models)} ({first.score_kind}); joined caches hold the same models in the same order"
            )
    names = [tuple(part.task_names) for part in parts] if task_names is None else task_names
    every = [name for group in names for name in group]
    if len(set(every)) != len(every):
        raise ValueError(f"joined caches need distinct task names; {show(sorted(every))} repeats one")
    width = max(part.scores.shape[2] for part in parts)
    dtype = np.result_type(*(part.scores.dtype for part in parts)) if dtype is None else dtype
    scores = np.full((sum(part.n_questions for part in parts), first.n_models, width),
                     0.0 if first.score_kind == "prob" else -np.inf, dtype=dtype)  # fmt: skip
    start = 0
    for part in parts:
        scores[start : start + part.n_questions, :, : part.scores.shape[2]] = part.scores
        start += part.n_questions
    offsets = np.cumsum([0, *(len(group) for group in names[:-1])])
    features = None
    if all(part.features is not None for part in parts):
        if len({part.features.shape[1:] for part in parts}) == 1:
            features = np.concatenate([part.features for part in parts])
    costs = None
    if all(part.costs is not None for part in parts):
        costs = np.concatenate([np.broadcast_to(part.costs, (part.n_questions, part.n_models)) for part in parts])
    return LogitCache(
        scores=scores,
        labels=np.concatenate([part.labels for part in parts]),
        models=tuple(first.models),
        score_kind=first.score_kind,
        n_choices=np.concatenate([part.n_choices for part in parts]),
        tasks=np.concatenate([np.asarray(part.tasks) + offset for part, offset in zip(parts, offsets, strict=True)]),
        task_names=tuple(every),
        split=np.concatenate([np.asarray(split, dtype=np.int64) for split in splits]),
        costs=costs,
        features=features,
        feature_names=first.feature_names if features is not None else None,
        feature_kind=first.feature_kind if features is not None else "",
    )


def check_evaluation(train: LogitCache, evaluation: LogitCache) -> None:
    """Refuse (ValueError naming ``--eval-cache``) an evaluation cache of other models, or models in another order,
    or scores of another kind than the training cache's, or holding a training question (:func:`check_unseen`)."""
    if tuple(train.models) != tuple(evaluation.models):
        raise ValueError(
            f"--eval-cache {evaluation.path}: its models {list(evaluation.models)} are not the training cache's "
            f"{list(train.models)} in the same order; both caches must hold the same models"
        )
    if train.score_kind != evaluation.score_kind:
        raise ValueError(f"--eval-cache {evaluation.path}: scores are {evaluation.score_kind}s, the training cache's "
                         f"{train.score_kind}s")  # fmt: skip
    check_unseen(train, evaluation)


def combined_cache(train: LogitCache, evaluation: LogitCache, validation_tasks: tuple[str, ...]) -> LogitCache:
    """One cache of ``train``'s questions (train; ``validation_tasks`` validation) then ``evaluation``'s (test):
    the same models in the same order, else a ValueError naming both; an evaluation cache holding a training question
    is refused (:func:`check_unseen`); the evaluation cache's tasks are renamed ``eval:NAME`` where a name is also a
    training task. Features and costs are kept only where both caches hold them with the same width
    (:func:`joined_cache`, scores as float64)."""
    check_evaluation(train, evaluation)
    eval_names = _renamed(evaluation.task_names, train.task_names, "eval:")
    splits = [fold_cache(train, (), validation_tasks).split, np.full(evaluation.n_questions, TEST, dtype=np.int64)]
    return joined_cache([train, evaluation], splits, [tuple(train.task_names), eval_names], dtype=np.float64)


def _renamed(names: tuple[str, ...], taken: tuple[str, ...], prefix: str) -> tuple[str, ...]:
    """``names``, each that is also in ``taken`` with ``prefix`` before it."""
    return tuple(f"{prefix}{name}" if name in taken else name for name in names)


def tasks_only(cache: LogitCache, names: tuple[str, ...]) -> LogitCache:
    """The questions of the tasks ``names`` of ``cache``, in the cache's order, its task indices renumbered over these
    tasks alone (in the cache's task order)."""
    part = cache.subset(np.isin(np.asarray(cache.task_names)[np.asarray(cache.tasks)], names))
    kept = np.unique(part.tasks)
    return dataclasses.replace(
        part, tasks=np.searchsorted(kept, part.tasks), task_names=tuple(cache.task_names[i] for i in kept)
    )


def tasks_with_questions(cache: LogitCache) -> tuple[str, ...]:
    """The names of the cache's tasks that hold at least one question, in the cache's order (a cache cut by
    ``subset`` keeps every task name, with no question under some): the only tasks a fold can hold out or validate
    on."""
    return tuple(cache.task_names[i] for i in np.unique(np.asarray(cache.tasks)))


def scored_cache(cache: LogitCache) -> LogitCache:
    """``cache`` with every question in test: the cache the unseen-task protocol scores (every question of every
    held-out task, in the cache's order)."""
    return dataclasses.replace(cache, split=np.full(cache.n_questions, TEST, dtype=np.int64))


def units(
    cache: LogitCache, *, k: int, seed: int, eval_cache: LogitCache | None = None
) -> tuple[list[Unit], LogitCache]:
    """The folds of the unseen-task protocol on ``cache`` (or, with ``eval_cache``, the one unit of training on
    ``cache`` and scoring ``eval_cache``), and the scored cache."""
    names = tasks_with_questions(cache)
    seed = check_seed(seed, "--fold-seed", optional=False)
    if eval_cache is not None:
        validation = _validation_tasks(names, seed, 0)
        combined = combined_cache(cache, eval_cache, validation)
        scored = np.arange(eval_cache.n_questions)
        unit = Unit("all tasks", combined, scored, tasks_with_questions(eval_cache), validation)
        return [unit], scored_cache(eval_cache)
    found = []
    for fold, held_out in enumerate(task_folds(names, k, seed)):
        training = tuple(name for name in names if name not in held_out)
        validation = _validation_tasks(training, seed, fold)
        derived = fold_cache(cache, held_out, validation)
        found.append(Unit(f"fold {fold + 1}", derived, derived.select("test"), held_out, validation))
    return found, scored_cache(cache)


def generated_name(name: str) -> str:
    """The key of the generated test tasks' results of the cache (or results) ``name``: ``generated(NAME)``."""
    return f"generated({name})"


def fold_stream_seed(seed: int, fold: int) -> int:
    """The seed of fold ``fold``'s generated tasks (``TaskGenerator.sample``'s ``seed`` and ``model_seed``), drawn
    from ``SeedSequence([seed, 35, fold])``: each fold its own tasks, the same for the same fold seed."""
    sequence = np.random.SeedSequence([check_seed(seed, "--fold-seed", optional=False), 35, fold])
    return int(sequence.generate_state(1, np.uint64)[0] >> np.uint64(1))


def fold_generator(cache: LogitCache, training: tuple[str, ...]) -> TaskGenerator:
    """The generator of a fold: :func:`~ensemble_env.cache.fit_generator` on the questions of its ``training`` tasks
    alone (its validation tasks among them), never on a held-out task's."""
    from ensemble_env.cache.generator import fit_generator

    return fit_generator(cache, tasks=list(training))


def generated_tasks(generator: TaskGenerator, plan: GeneratedPlan, seed: int) -> dict[str, LogitCache]:
    """A fold's generated tasks by part (``"train"``, ``"validation"``, ``"test"``: :meth:`GeneratedPlan.counts`),
    drawn from the stream of ``seed`` at :data:`GENERATED_FIRST` (the parts disjoint, named ``gen-NNNNNNN``), each
    of ``plan.questions`` questions and ``plan.n_models`` models (the extra ones drawn with ``model_seed=seed``: the
    same in the three parts); every question of a part in that part's split."""
    drawn = {}
    for part, count in plan.counts().items():
        cache = generator.sample(count, seed, first=GENERATED_FIRST[part], questions=plan.questions,
                                 n_models=plan.n_models, model_seed=seed)  # fmt: skip
        code = {"train": TRAIN, "validation": VALIDATION, "test": TEST}[part]
        drawn[part] = dataclasses.replace(cache, split=np.full(cache.n_questions, code, dtype=np.int64))
    return drawn


def generated_units(
    cache: LogitCache, plan: GeneratedPlan, *, k: int, seed: int, eval_cache: LogitCache | None = None
) -> tuple[list[Unit], list[LogitCache]]:
    """The folds of ``--protocol generated`` on ``cache`` and the caches their test questions are scored in: every
    fold's generated test tasks together (their names ``foldK/gen-NNNNNNN``), then, when the generated tasks hold the
    cache's models, the real cache scored whole (:func:`scored_cache`; with ``eval_cache``, the evaluation cache).

    The folds and each fold's validation tasks are :func:`units`' (``k``, ``seed``); a fold's generator is fitted on
    its training tasks, validation tasks included (:func:`fold_generator`), and draws :func:`generated_tasks` with
    :func:`fold_stream_seed`. A fold's unit cache: the generated train tasks (train), validation tasks (validation),
    test tasks (test), then its real held-out tasks (test; a name also generated renamed ``real:NAME``). With
    ``eval_cache``, one unit: the generator fitted on every task of ``cache``, the evaluation cache's tasks held out
    (the same models in the same order and no question of ``cache``: :func:`combined_cache`'s checks)."""
    names = tasks_with_questions(cache)
    seed = check_seed(seed, "--fold-seed", optional=False)
    real = plan.n_models is None or plan.n_models == cache.n_models
    if eval_cache is not None:
        check_evaluation(cache, eval_cache)
        folds = [("all tasks", names, tasks_with_questions(eval_cache), _validation_tasks(names, seed, 0), eval_cache)]
    else:
        folds = []
        for fold, held_out in enumerate(task_folds(names, k, seed)):
            training = tuple(name for name in names if name not in held_out)
            folds.append((f"fold {fold + 1}", training, held_out, _validation_tasks(training, seed, fold), cache))
    found, generated_tests, offset = [], [], 0
    for fold, (label, training, held_out, validation, source) in enumerate(folds):
        stream = fold_stream_seed(seed, fold)
        drawn = generated_tasks(fold_generator(cache, training), plan, stream)
        parts, splits = [drawn["train"], drawn["validation"], drawn["test"]], [d.split for d in drawn.values()]
        test = drawn["test"]
        scored, where = [offset + np.arange(test.n_questions)], [np.zeros(test.n_questions, dtype=np.int64)]
        prefix = f"fold{fold + 1}/" if len(folds) > 1 else ""
        generated_tests.append(dataclasses.replace(test, task_names=tuple(prefix + n for n in test.task_names)))
        offset += test.n_questions
        if real:
            taken = tuple(n for d in parts for n in d.task_names)
            tail = tasks_only(source, held_out)
            parts.append(dataclasses.replace(tail, task_names=_renamed(tuple(tail.task_names), taken, "real:")))
            splits.append(np.full(tail.n_questions, TEST, dtype=np.int64))
            questions = np.flatnonzero(np.isin(_task_of_each(source), held_out))
            scored.append(questions)
            where.append(np.ones(questions.size, dtype=np.int64))
        info = {
            "fitted_on": list(training),
            "seed": stream,
            **{f"{part}_tasks": count for part, count in plan.counts().items()},
            "questions": list(plan.questions),
            "n_models": test.n_models,
        }
        unit = Unit(label, joined_cache(parts, splits), np.concatenate(scored), held_out, validation,
                    np.concatenate(where), info)  # fmt: skip
        found.append(unit)
    generated = joined_cache(generated_tests, [np.full(t.n_questions, TEST, dtype=np.int64) for t in generated_tests])
    return found, [generated, scored_cache(eval_cache if eval_cache is not None else cache)] if real else [generated]


def learner_overrides(
    name: str, config_class: type, n_models: int, feedback: str = "all", protocol: str = "unseen-tasks"
) -> dict[str, Any]:
    """The config a learner plays the unseen-task scenario with: ``ensemble_env/EnsembleUnseen-v1``'s options
    (episodes of one task, the task's record, no task one-hot) and no question features (they may name the task);
    with ``feedback="team"``, ``ensemble_env/EnsembleUnseen-v2``'s (only the answering team's outputs revealed, the
    records counting what was revealed) and :data:`PARTIAL_LEARNER` (a start that encodes no hand rule); under
    ``protocol="generated"``, :data:`GENERATED_LEARNER` on top (no model-permuted copies: the tasks are plentiful; a
    learner of another config than MAPPO's takes the fields it has, :meth:`ensemble_mappo.presets.Preset.overrides`).
    ``config_class`` is the algorithm's (:attr:`ensemble_mappo.algorithms.Algorithm.config_class`).

    How an algorithm is posed is its registry entry's :attr:`~ensemble_mappo.algorithms.Algorithm.unseen`. MAPPO and
    IPPO (``"decider"``) play the scenario as it is. RLAE's one weighting agent (``rlae_ppo``, ``"weights"``) plays
    its own game (no decider, the fusion agent sets the pool's weights) with the scenario's episodes and, instead of
    the task one-hot, ``member_record``: each model's count and correct rate on the task so far. ValueError for an
    algorithm not posed (``rlae_mappo``, whose per-model agents observe the task one-hot), and for RLAE under
    partial feedback (it has no decider: every model answers, so everything is revealed)."""
    if feedback not in FEEDBACKS:
        raise ValueError(f"--feedback {feedback!r} is not one of {', '.join(FEEDBACKS)}")
    entry = algorithms.get(name)
    if config_class is not entry.config_class:
        raise ValueError(f"{name}'s config is {entry.config_class.__name__}, not {show(config_class)}")
    generated = GENERATED.overrides(config_class) if protocol == "generated" else {}
    if entry.unseen not in algorithms.UNSEEN_GAMES:
        posed = [other.name for other in algorithms.ALGORITHMS.values()
                 if other.config_class is config_class and other.unseen in algorithms.UNSEEN_GAMES]  # fmt: skip
        instead = f" ({', '.join(posed)} {'is' if len(posed) == 1 else 'are'})" if posed else ""
        raise ValueError(
            f"--protocol {protocol}: {name}'s {entry.unseen}; it is not posed on tasks never seen yet{instead}"
        )
    if entry.unseen == "weights":
        if feedback != "all":
            raise ValueError(
                f"--feedback {feedback}: {name} has no decider (every model answers every question, so every output "
                "is revealed); it is posed with --feedback all only"
            )
        game = {"episodes": "task", "fusion_extras": ("member_record",)}
        unseen_game(n_models, {**game, "decider": False, "decider_extras": ()})  # shows no task: checked
        return {"env": {key: list(value) if isinstance(value, tuple) else value for key, value in game.items()},
                **generated}  # fmt: skip
    game = unseen_game(n_models, version=2 if feedback == "team" else 1)
    env = {key: list(value) if isinstance(value, tuple) else value for key, value in game.items()}
    partial = PARTIAL.overrides(config_class) if feedback == "team" else {}
    return {"env": env, "question_features": False, **partial, **generated}
