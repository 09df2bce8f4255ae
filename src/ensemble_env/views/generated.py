"""``ensemble_env/EnsembleGen-v0``: routing on generated tasks, every episode a task no policy has met (issue 48).

A real cache holds few tasks (``bbh5``: 16); a router trained on some of them learns those tasks. This scenario plays
tasks drawn by a :class:`~ensemble_env.cache.generator.TaskGenerator` fitted to a real cache (SMACv2-style), so that
a policy is trained and scored on draws from one distribution of tasks and wins only by reading the task it plays:
the game of ``ensemble_env/EnsembleUnseen-v2`` (one task per episode, the task's record in the observations and never
its identity, partial feedback by default) over generated tasks.

**The deck.** The factories draw ``deck_size`` tasks of the generator's stream once, when the environment is built:
tasks ``first .. first + deck_size - 1`` of the stream of ``task_seed`` (task ``i`` is that of
``generator.sample(1, task_seed, first=i)``, whatever the deck's size), as one cache, every question of a task played.
The engine deals the episodes' tasks from it as it deals real tasks (``episodes="task"``): ``reset(seed=s)`` shuffles
the deck with the engine's generator seeded ``s`` and deals the copies theirs in copy order; auto-resets (and, in the
parallel and AEC views, a ``reset()`` without a seed) deal on; a used-up deck is shuffled anew. So *fresh* means:
from a seeded reset, the first ``deck_size`` episodes (over all copies) play ``deck_size`` distinct generated tasks,
none of them a real task or a task of another stream (another ``task_seed``, or a ``first`` range that does not
overlap); episode ``deck_size + 1`` on replays the deck's tasks in a new order. A training run of fewer episodes than
``deck_size`` never meets a task twice. Tasks are drawn ahead, not one per episode: drawing a task costs several times
what playing it does (``docs/environment-spec.md``, "Generated tasks", has the figures).

**Held-out tasks**: the same ``task_seed`` from ``first=HELD_OUT_FIRST`` (10**9) on: disjoint from every training deck
that starts at 0 by construction (task indices), drawn from the same distribution, with the same pool (extra models
are drawn from ``task_seed`` too: ``model_seed=task_seed``).

**Seeding.** Every random choice flows from two seeds: the factory's ``task_seed`` (which tasks the deck holds, and the
extra models of ``n_models`` above the fitted pool) and ``reset(seed=...)`` (the order the deck is dealt in, and every
draw of the engine). (The adapters' own ``seed`` is the reset's: hence the name ``task_seed``.)

The generator (``generator``): a :class:`~ensemble_env.cache.generator.TaskGenerator`, a generator file (read by
:func:`~ensemble_env.cache.generator_file.load_generator`, the hostile-input rules applying), or a
:class:`~ensemble_env.cache.LogitCache` (fitted by :func:`~ensemble_env.cache.generator.fit_generator`); None: fitted
to the built-in ``bbh5`` (once per process). Environments of the same generator and deck arguments built in one
process share one deck while any of them is alive (an adapter's copies, a vector env and its parallel view).
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Hashable
from typing import Any

import numpy as np
from pettingzoo import AECEnv

from ensemble_env.cache import datasets
from ensemble_env.cache.generator import MAX_SAMPLED_TASKS, TaskGenerator, fit_generator
from ensemble_env.cache.generator_file import load_generator
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.checks import integer_option
from ensemble_env.game.config import FEEDBACK, UNSEEN_VERSIONS, EnvConfig, unseen_game
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.seeds import check_seed
from ensemble_env.views.parallel import EnsembleParallelEnv, aec_view, vector_env

__all__ = [
    "DEFAULT_DECK_SIZE",
    "DEFAULT_QUESTIONS",
    "GEN_ENV_ID",
    "GEN_FEEDBACK",
    "HELD_OUT_FIRST",
    "default_generator",
    "gen_deck",
    "gen_env",
    "gen_game",
    "gen_parallel_env",
    "gen_vector_env",
]

#: the scenario's id in PettingZoo's registry (:func:`gen_parallel_env`, :func:`gen_env`)
GEN_ENV_ID = "ensemble_env/EnsembleGen-v0"
#: the tasks a deck holds by default (about 400,000 questions of 150-250)
DEFAULT_DECK_SIZE = 2048
#: each task's question count is drawn uniformly from low..high (the generator's default)
DEFAULT_QUESTIONS = (150, 250)
#: ``first=HELD_OUT_FIRST``: the held-out stream, disjoint from every deck of fewer than 10**9 tasks starting at 0
HELD_OUT_FIRST = 10**9
#: the scenario's feedback by default (``EnsembleUnseen-v2``'s, partial); ``feedback="all"`` is ``-v1``'s
GEN_FEEDBACK = FEEDBACK[1]  # "team", of the one vocabulary (ensemble_env.game.config)

_NAME = "EnsembleGen-v0"
#: options the deck sets: every question of every deck task is played (``split="all"``, all tasks)
_DECK_OPTIONS = ("split", "tasks")

_GeneratorArg = TaskGenerator | LogitCache | str | os.PathLike[str] | None


@functools.cache
def default_generator() -> TaskGenerator:
    """The generator fitted to every task of the built-in ``bbh5`` (fitted once per process, about 0.5 s)."""
    return fit_generator(datasets.load(datasets.DEFAULT))


def _generator_key(generator: _GeneratorArg) -> Hashable:
    """What identifies ``generator`` for the shared decks: the object itself, or a file's path and version."""
    if generator is None or isinstance(generator, TaskGenerator | LogitCache):
        return generator
    if isinstance(generator, str | os.PathLike):
        path = os.fspath(generator)
        try:
            found = os.stat(path)
        except OSError:  # load_generator names the problem
            return ("file", path)
        return ("file", os.path.realpath(path), found.st_ino, found.st_size, found.st_mtime_ns)
    raise ValueError(
        f"{_NAME}: generator must be a TaskGenerator, a generator file's path, a LogitCache to fit or None (fitted to "
        f"bbh5), got {type(generator).__name__}"
    )


def _resolved(generator: _GeneratorArg) -> TaskGenerator:
    if generator is None:
        return default_generator()
    if isinstance(generator, TaskGenerator):
        return generator
    if isinstance(generator, LogitCache):
        return fit_generator(generator)
    return load_generator(generator)  # a path (checked by _generator_key)


#: the decks alive in this process, by their arguments: shared while an environment holds one
_DECKS: weakref.WeakValueDictionary[Hashable, LogitCache] = weakref.WeakValueDictionary()


def gen_deck(
    generator: _GeneratorArg = None,
    *,
    n_models: int | None = None,
    task_seed: int = 0,
    first: int = 0,
    deck_size: int = DEFAULT_DECK_SIZE,
    questions: tuple[int, int] = DEFAULT_QUESTIONS,
) -> LogitCache:
    """The deck of ``ensemble_env/EnsembleGen-v0``: tasks ``first .. first + deck_size - 1`` of the stream of
    ``task_seed`` (:meth:`TaskGenerator.sample` with ``model_seed=task_seed``), ``n_models`` models (default the fitted
    pool's), each of ``questions`` = (low, high) questions, the scores as wide as the generator's widest task (so that
    every deck of a generator has the same spaces). A deck of the same arguments still alive in this process is returned
    as it is.

    >>> deck = gen_deck(deck_size=3, first=5)
    >>> deck.task_names, deck.n_models, deck.max_choices
    (('gen-000005', 'gen-000006', 'gen-000007'), 5, 19)
    """
    key = _generator_key(generator)
    stream: int = check_seed(task_seed, f"{_NAME} task_seed", optional=False)  # type: ignore[assignment]
    deck_size = integer_option(deck_size, "deck_size", 1, MAX_SAMPLED_TASKS)
    if isinstance(questions, list):
        questions = tuple(questions)  # a config file's list; the sample checks the values
    arguments: tuple[Any, ...] | None = (key, n_models, stream, first, deck_size, questions)
    try:
        deck = _DECKS.get(arguments)
    except TypeError:  # an unhashable argument: the sample names it
        deck, arguments = None, None
    if deck is None:
        fitted = _resolved(generator)
        widest = max(task.max_choices for task in fitted.tasks)
        deck = fitted.sample(deck_size, stream, n_models=n_models, questions=questions, first=first, model_seed=stream,
                             choices=widest)  # fmt: skip
        if arguments is not None:
            _DECKS[arguments] = deck
    return deck


def gen_game(n_models: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The environment options of ``ensemble_env/EnsembleGen-v0`` for a deck of ``n_models`` models, ``options`` on
    top: those of ``EnsembleUnseen-v2`` (:func:`~ensemble_env.game.config.unseen_game`, version 2), or ``-v1``'s with
    ``feedback="all"``, every question of the deck played (``split="all"``); ``split`` and ``tasks`` are the deck's
    and refused, as :func:`~ensemble_env.game.config.unseen_game` refuses what would show a task's identity.

    >>> game = gen_game(5)
    >>> game["feedback"], game["split"], game["decider_extras"]
    ('team', 'all', ('model_accuracy', 'task_record', 'team_record'))
    >>> gen_game(5, {"feedback": "all"}).get("feedback", "all")
    'all'
    """
    given = dict(options or {})
    for option in _DECK_OPTIONS:
        if option in given:
            raise ValueError(
                f"{_NAME} plays every question of its deck's generated tasks: {option}={given[option]!r} cannot be "
                "given (which tasks: task_seed= and first=, e.g. first=HELD_OUT_FIRST for held-out tasks; how many: "
                "deck_size=)"
            )
    if "cache" in given:
        raise ValueError(
            f"{_NAME} plays generated tasks: cache= is not one of its keywords; give generator= (a TaskGenerator, "
            "a generator file, or a LogitCache to fit a generator to)"
        )
    feedback = given.pop("feedback", GEN_FEEDBACK)
    versions = [version for version, fixed in UNSEEN_VERSIONS.items() if fixed.get("feedback") == feedback]
    if not isinstance(feedback, str) or not versions:
        raise ValueError(f"feedback={feedback!r} is not one of {', '.join(map(repr, FEEDBACK))}")
    game = unseen_game(n_models, given, version=versions[0])
    return {**game, "split": "all"}


def _deck_and_game(
    generator: _GeneratorArg,
    n_models: int | None,
    task_seed: int,
    first: int,
    deck_size: int,
    questions: tuple[int, int],
    options: dict[str, Any],
) -> tuple[LogitCache, dict[str, Any]]:
    """The deck and the options of the game, the options checked before the deck is drawn."""
    EnvConfig.from_options(gen_game(1, options))
    deck = gen_deck(
        generator, n_models=n_models, task_seed=task_seed, first=first, deck_size=deck_size, questions=questions
    )
    return deck, gen_game(deck.n_models, options)


def gen_parallel_env(
    generator: _GeneratorArg = None,
    *,
    n_models: int | None = None,
    task_seed: int = 0,
    first: int = 0,
    deck_size: int = DEFAULT_DECK_SIZE,
    questions: tuple[int, int] = DEFAULT_QUESTIONS,
    render_mode: str | None = None,
    **options: Any,
) -> EnsembleParallelEnv:
    """``ensemble_env/EnsembleGen-v0``: the parallel view (:class:`~ensemble_env.views.parallel.EnsembleParallelEnv`)
    of :func:`gen_deck`'s deck with the options of :func:`gen_game`, a reset without a seed dealing the deck's next
    task (the module's docstring: the deck, what *fresh* means, held-out tasks, seeding).

    ``generator``: a TaskGenerator, a generator file, a LogitCache to fit, or None (fitted to bbh5). ``n_models``: the
    pool (default the fitted one; more draws extra models). ``task_seed``: the task stream's seed (which tasks the deck
    holds); ``reset(seed=...)`` orders their dealing. ``first``: the index of the deck's first task in the stream
    (:data:`HELD_OUT_FIRST` for held-out tasks). ``deck_size``: how many tasks (:data:`DEFAULT_DECK_SIZE`).
    ``questions``: (low, high) questions a task. ``options``: the game's other options (``feedback="all"``,
    ``alpha``, ``window``, ``episode_length``, ...).

    >>> env = gen_parallel_env(deck_size=4)
    >>> obs, infos = env.reset(seed=0)
    >>> env.cache.n_tasks, env.engine.config.feedback, "team_record_count" in env.engine.layout.decider
    (4, 'team', True)
    """
    deck, game = _deck_and_game(generator, n_models, task_seed, first, deck_size, questions, options)
    return EnsembleParallelEnv(deck, EnvConfig.from_options(game), render_mode, deal_on=True)


def gen_env(generator: _GeneratorArg = None, **keywords: Any) -> AECEnv[str, np.ndarray, Any]:
    """The AEC view of ``ensemble_env/EnsembleGen-v0`` (:func:`~ensemble_env.views.parallel.aec_view` of
    :func:`gen_parallel_env`'s game; ``keywords`` are that function's: ``n_models``, ``task_seed``, ``first``,
    ``deck_size``, ``questions``, ``render_mode`` and the game's options)."""
    return aec_view(gen_parallel_env(generator, **keywords))


def gen_vector_env(
    num_envs: int = 1,
    generator: _GeneratorArg = None,
    *,
    n_models: int | None = None,
    task_seed: int = 0,
    first: int = 0,
    deck_size: int = DEFAULT_DECK_SIZE,
    questions: tuple[int, int] = DEFAULT_QUESTIONS,
    **options: Any,
) -> EnsembleVectorEnv:
    """``num_envs`` copies of ``ensemble_env/EnsembleGen-v0`` (:func:`ensemble_env.vector_env` over the deck and
    options of :func:`gen_parallel_env`). After ``reset(seed=...)`` the copies play distinct tasks of the freshly
    shuffled deck, auto-resets dealing on: the first ``deck_size`` episodes of all copies are ``deck_size`` distinct
    tasks. ``get_state``/``set_state`` are the engine's: a snapshot restores into an environment of the same
    arguments (the same deck)."""
    deck, game = _deck_and_game(generator, n_models, task_seed, first, deck_size, questions, options)
    return vector_env(num_envs, deck, **game)
