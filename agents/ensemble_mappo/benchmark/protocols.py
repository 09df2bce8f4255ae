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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import unseen_game
from ensemble_env.seeds import check_seed
from ensemble_env.text import show

__all__ = [
    "ANSWER_DTYPE",
    "FEEDBACKS",
    "PARTIAL_BUDGET_STEPS",
    "PARTIAL_LEARNER",
    "PROTOCOLS",
    "Unit",
    "check_unseen",
    "combined_cache",
    "fold_cache",
    "learner_overrides",
    "scored_cache",
    "task_folds",
    "tasks_with_questions",
    "training_questions",
    "units",
]

#: the protocols of ``ensemble-env benchmark --protocol``
PROTOCOLS = ("standard", "unseen-tasks")
#: what the game reveals after each answer (``--feedback``): every model's output ("all"), or only the answering
#: team's ("team": partial feedback, ``ensemble_env/EnsembleUnseen-v2``; unseen-tasks only)
FEEDBACKS = ("all", "team")
#: the learner's settings under partial feedback: a start that encodes no hand rule (the size prior at 0.5: uniform
#: over the teams, no KL to it) and the decider whose logit for each team is an index of what the record shows of it
#: with learned constants (``"index"``: ensemble_mappo.networks.TeamIndexActor), chosen over the team scorer
#: (``"scorer"``) on the training tasks of every fold (benchmarks/partial_selection.py, docs/benchmark.md)
PARTIAL_LEARNER: dict[str, Any] = {
    "decider_start": "prior",
    "decider_kl_coef": 0.0,
    "decider_policy": "index",
    "model_permutations": 2,
    "gamma": 0.9,
    "selection": "trained",
}
#: the learners' budget under partial feedback, in env steps per ``--budget`` level (the training stream holds each
#: training task three times, as it is and in two model-permuted copies); the default's 262,144 steps (64 updates)
#: were chosen with the decider on the folds' training tasks (65,536: worse), and keep the whole bbh5 benchmark,
#: 4 folds x 5 seeds x 2 learners, within 30 CPU minutes (docs/benchmark.md)
PARTIAL_BUDGET_STEPS = {"tiny": 4096, "quick": 16384, "default": 262144}
#: the codes of the cache's ``split`` array
TRAIN, TEST, VALIDATION = 0, 1, 2


@dataclass(frozen=True)
class Unit:
    """One fold of a protocol: the cache the algorithms run on, and where its test questions are in the scored
    cache (``scored_questions[i]`` is the scored question of the unit's ``i``-th test question)."""

    label: str
    cache: LogitCache
    scored_questions: np.ndarray
    held_out: tuple[str, ...]
    validation_tasks: tuple[str, ...]


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


def combined_cache(train: LogitCache, evaluation: LogitCache, validation_tasks: tuple[str, ...]) -> LogitCache:
    """One cache of ``train``'s questions (train; ``validation_tasks`` validation) then ``evaluation``'s (test):
    the same models in the same order, else a ValueError naming both; an evaluation cache holding a training question
    is refused (:func:`check_unseen`); the evaluation cache's tasks are renamed ``eval:NAME`` where a name is also a
    training task. Features and costs are kept only where both caches hold them with the same width."""
    if tuple(train.models) != tuple(evaluation.models):
        raise ValueError(
            f"--eval-cache {evaluation.path}: its models {list(evaluation.models)} are not the training cache's "
            f"{list(train.models)} in the same order; both caches must hold the same models"
        )
    width = max(train.scores.shape[2], evaluation.scores.shape[2])

    def padded(scores: np.ndarray, kind: str) -> np.ndarray:
        fill = 0.0 if kind == "prob" else -np.inf
        out = np.full((*scores.shape[:2], width), fill, dtype=np.float64)
        out[..., : scores.shape[2]] = scores
        return out

    if train.score_kind != evaluation.score_kind:
        raise ValueError(f"--eval-cache {evaluation.path}: scores are {evaluation.score_kind}s, the training cache's "
                         f"{train.score_kind}s")  # fmt: skip
    check_unseen(train, evaluation)
    eval_names = tuple(f"eval:{name}" if name in train.task_names else name for name in evaluation.task_names)
    n_train = train.n_questions
    split = fold_cache(train, (), validation_tasks).split
    features = None
    if train.features is not None and evaluation.features is not None:
        if train.features.shape[1:] == evaluation.features.shape[1:]:
            features = np.concatenate([train.features, evaluation.features])
    costs = None
    if train.costs is not None and evaluation.costs is not None:
        shape = (evaluation.n_questions, train.n_models)
        costs = np.concatenate(
            [np.broadcast_to(train.costs, (n_train, train.n_models)), np.broadcast_to(evaluation.costs, shape)]
        )
    return LogitCache(
        scores=np.concatenate([padded(train.scores, train.score_kind), padded(evaluation.scores, train.score_kind)]),
        labels=np.concatenate([train.labels, evaluation.labels]),
        models=tuple(train.models),
        score_kind=train.score_kind,
        n_choices=np.concatenate([train.n_choices, evaluation.n_choices]),
        tasks=np.concatenate([train.tasks, np.asarray(evaluation.tasks) + len(train.task_names)]),
        task_names=(*train.task_names, *eval_names),
        split=np.concatenate([split, np.full(evaluation.n_questions, TEST, dtype=np.int64)]),
        costs=costs,
        features=features,
        feature_names=train.feature_names if features is not None else None,
        feature_kind=train.feature_kind if features is not None else "",
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


def learner_overrides(name: str, config_class: type, n_models: int, feedback: str = "all") -> dict[str, Any]:
    """The config a learner plays the unseen-task scenario with: ``ensemble_env/EnsembleUnseen-v1``'s options
    (episodes of one task, the task's record, no task one-hot) and no question features (they may name the task);
    with ``feedback="team"``, ``ensemble_env/EnsembleUnseen-v2``'s (only the answering team's outputs revealed, the
    records counting what was revealed) and :data:`PARTIAL_LEARNER` (a start that encodes no hand rule).

    MAPPO and IPPO play the scenario as it is. RLAE's one weighting agent (``rlae_ppo``) plays its own game (no
    decider, the fusion agent sets the pool's weights) with the scenario's episodes and, instead of the task one-hot,
    ``member_record``: each model's count and correct rate on the task so far. ValueError for ``rlae_mappo``, whose
    per-model agents observe the task one-hot, and for RLAE under partial feedback (it has no decider: every model
    answers, so everything is revealed)."""
    if feedback not in FEEDBACKS:
        raise ValueError(f"--feedback {feedback!r} is not one of {', '.join(FEEDBACKS)}")
    fields = {field.name for field in dataclasses.fields(config_class)}
    if "question_features" not in fields:
        rlae = config_class(algorithm=name) if "algorithm" in fields else None
        if rlae is None or rlae.env_options(has_features=False).get("fusion_agents") != "one":
            raise ValueError(
                f"--protocol unseen-tasks: {name}'s per-model agents observe the task one-hot; it is not posed on "
                "tasks never seen yet (rlae_ppo is)"
            )
        if feedback != "all":
            raise ValueError(
                f"--feedback {feedback}: {name} has no decider (every model answers every question, so every output "
                "is revealed); it is posed with --feedback all only"
            )
        game = {"episodes": "task", "fusion_extras": ("member_record",)}
        unseen_game(n_models, {**game, "decider": False, "decider_extras": ()})  # shows no task: checked
        return {"env": {key: list(value) if isinstance(value, tuple) else value for key, value in game.items()}}
    game = unseen_game(n_models, version=2 if feedback == "team" else 1)
    env = {key: list(value) if isinstance(value, tuple) else value for key, value in game.items()}
    return {"env": env, "question_features": False, **(PARTIAL_LEARNER if feedback == "team" else {})}
