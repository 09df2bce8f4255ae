"""ensemble_env: learn to route and fuse LLM ensembles with multi-agent RL.

A pool of N models has answered every question of a benchmark (their per-choice scores sit in an HDF5
"logit cache"). Two cooperating agents play on the stream of questions: the *decider* picks a small team of
models for each question, the *fusion* agent reads the team's probabilities and answers. This is the
two-stage Dec-POMDP of RL-Focal (arXiv 2502.04492).

>>> import ensemble_env
>>> env = ensemble_env.parallel_env()          # the default built-in cache, bbh5
>>> obs, infos = env.reset(seed=0)
>>> env.agents
['decider', 'fusion']
"""

import os
import sys
from typing import Any

import numpy as np
from pettingzoo import AECEnv

from ensemble_env import baselines, metrics
from ensemble_env.cache import datasets, io, synthetic
from ensemble_env.cache.datasets import default_cache_path, load_default_cache
from ensemble_env.cache.generator import TaskGenerator, fit_generator
from ensemble_env.cache.generator_file import load_generator, save_generator
from ensemble_env.cache.io import save_cache
from ensemble_env.cache.logit_cache import CacheError, LogitCache
from ensemble_env.game.config import EnvConfig, unseen_game
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.views.generated import GEN_ENV_ID, HELD_OUT_FIRST, gen_env, gen_parallel_env, gen_vector_env
from ensemble_env.views.parallel import EnsembleParallelEnv, env, parallel_env, vector_env

# ``import ensemble_env.datasets`` and ``import ensemble_env.synthetic`` keep working: the modules live in the
# caches part (ensemble_env/cache/) and are published under these names too.
sys.modules.setdefault("ensemble_env.datasets", datasets)
sys.modules.setdefault("ensemble_env.synthetic", synthetic)


def load_cache(path: str | os.PathLike[str], *, timeout: float | None = None) -> LogitCache:
    """Read and validate a logit cache file (:func:`ensemble_env.cache.io.load_cache`: safe on any file), or, for
    the name of a built-in cache (``"bbh5"``, ``"toy8"``: :func:`ensemble_env.datasets.available`) that is not also
    a file here, load that cache (:func:`ensemble_env.datasets.load`).

    >>> load_cache("toy8").n_models
    8
    """
    if isinstance(path, str) and path in datasets.BUILTINS and not os.path.exists(path):
        return datasets.load(path)
    return io.load_cache(path, timeout=timeout)


__all__ = [
    "ENV_ID",
    "GEN_ENV_ID",
    "HELD_OUT_FIRST",
    "ID_OPTIONS",
    "UNSEEN_ENV_ID",
    "UNSEEN_V2_ENV_ID",
    "CacheError",
    "EnsembleParallelEnv",
    "EnsembleVectorEnv",
    "EnvConfig",
    "LogitCache",
    "TaskGenerator",
    "baselines",
    "datasets",
    "default_cache_path",
    "env",
    "fit_generator",
    "gen_env",
    "gen_parallel_env",
    "gen_vector_env",
    "load_cache",
    "load_default_cache",
    "load_generator",
    "make_env",
    "metrics",
    "parallel_env",
    "save_cache",
    "save_generator",
    "synthetic",
    "unseen_env",
    "unseen_parallel_env",
    "unseen_vector_env",
    "vector_env",
]
__version__ = "0.1.0"

#: the environment's id in PettingZoo's registry (:func:`parallel_env`, :func:`env`)
ENV_ID = "ensemble_env/Ensemble-v1"
#: routing on tasks never seen: every episode one task, the agents see its history, never its identity
#: (:func:`unseen_parallel_env`; the options: :func:`ensemble_env.game.config.unseen_game`)
UNSEEN_ENV_ID = "ensemble_env/EnsembleUnseen-v1"
#: the same under partial feedback: answering a question reveals only the outputs of the team that answered it
#: (``version=2`` of the unseen factories; ``feedback="team"``, :mod:`ensemble_env.game.feedback`)
UNSEEN_V2_ENV_ID = "ensemble_env/EnsembleUnseen-v2"

#: each registered id's fixed options: the keywords of its factory that the id sets, which a keyword given to
#: ``pettingzoo.make`` may repeat but never contradict (:class:`_IdFactory`)
ID_OPTIONS: dict[str, dict[str, Any]] = {
    ENV_ID: {},
    UNSEEN_ENV_ID: {"version": 1},
    UNSEEN_V2_ENV_ID: {"version": 2},
    GEN_ENV_ID: {},  # generated tasks (ensemble_env.views.generated): feedback "team" by default, "all" allowed
}

_CacheArg = LogitCache | str | os.PathLike[str] | None


def unseen_parallel_env(
    cache: _CacheArg = None, *, render_mode: str | None = None, version: int = 1, **options: Any
) -> EnsembleParallelEnv:
    """``ensemble_env/EnsembleUnseen-v{version}``: :func:`parallel_env` with the options of
    :func:`~ensemble_env.game.config.unseen_game` for the cache's pool, ``options`` on top (an option that would
    show the task's identity raises a ValueError). ``version=2`` is the game under partial feedback
    (``feedback="team"``: answering a question reveals only the outputs of the team that answered it).

    >>> env = unseen_parallel_env("toy8", split="test")
    >>> obs, infos = env.reset(seed=0)
    >>> [name for name in env.engine.layout.decider if "record" in name], list(env.engine.layout.fusion)[-1]
    (['task_record', 'team_record'], 'member_record')
    >>> env = unseen_parallel_env("toy8", split="test", version=2)
    >>> [name for name in env.engine.layout.decider if "record" in name], list(env.engine.layout.fusion)[-1]
    (['task_record', 'task_record_count', 'team_record', 'team_record_count'], 'member_record_count')
    """
    loaded = datasets.resolve(cache)
    return parallel_env(loaded, render_mode=render_mode, **unseen_game(loaded.n_models, options, version=version))


def unseen_env(
    cache: _CacheArg = None, *, render_mode: str | None = None, version: int = 1, **options: Any
) -> AECEnv[str, np.ndarray, Any]:
    """The AEC view of ``ensemble_env/EnsembleUnseen-v{version}`` (:func:`env` with the options of
    :func:`unseen_parallel_env`)."""
    loaded = datasets.resolve(cache)
    return env(loaded, render_mode=render_mode, **unseen_game(loaded.n_models, options, version=version))


def unseen_vector_env(
    num_envs: int = 1, cache: _CacheArg = None, *, version: int = 1, **options: Any
) -> EnsembleVectorEnv:
    """``num_envs`` copies of ``ensemble_env/EnsembleUnseen-v{version}`` (:func:`vector_env` with the options of
    :func:`unseen_parallel_env`). After ``reset()`` the copies play distinct tasks of a freshly shuffled deck while
    it lasts: with ``num_envs`` equal to the stream's task count, each copy's first episode is a different task, all
    of its questions (``split="test", tasks=held_out`` scores every held-out question once)."""
    loaded = datasets.resolve(cache)
    return vector_env(num_envs, loaded, **unseen_game(loaded.n_models, options, version=version))


class _IdFactory:
    """The entry point of a registered id: ``factory`` with the id's fixed options (:data:`ID_OPTIONS`); a keyword
    that contradicts one (``version=1`` for ``ensemble_env/EnsembleUnseen-v2``) raises a ValueError naming the id,
    the option and both values, instead of silently building another game."""

    def __init__(self, env_id: str, factory: Any) -> None:
        self.env_id, self.factory = env_id, factory

    def __call__(self, **options: Any) -> Any:
        fixed = ID_OPTIONS[self.env_id]
        for option, value in fixed.items():
            given = options.get(option, value)
            whole = isinstance(given, int | np.integer) and not isinstance(given, bool | np.bool_)
            if not (whole if isinstance(value, int) else type(given) is type(value)) or given != value:
                raise ValueError(  # True is not version 1, nor 2.0 version 2
                    f"{self.env_id} is the game with {option}={value!r}: a keyword cannot change it, got "
                    f"{option}={given!r}; make the id of the game you want"
                )
        return self.factory(**{**options, **fixed})

    def __repr__(self) -> str:
        return f"<the entry point of {self.env_id}>"


#: each registered id's factories, (parallel, AEC)
_ENTRY_POINTS: dict[str, tuple[Any, Any]] = {
    ENV_ID: (parallel_env, env),
    UNSEEN_ENV_ID: (unseen_parallel_env, unseen_env),
    UNSEEN_V2_ENV_ID: (unseen_parallel_env, unseen_env),
    GEN_ENV_ID: (gen_parallel_env, gen_env),
}


def make_env(env_id: str, api: str = "parallel", **keywords: Any) -> Any:
    """The game of a registered id as ``pettingzoo.make(api, env_id, **keywords)`` builds it, through the id's entry
    point (:class:`_IdFactory`: a keyword contradicting its fixed options is refused), also where PettingZoo has no
    registry (< 1.25). ``api``: ``"parallel"`` or ``"aec"``; ``keywords``: the id's factory's (``cache=`` and the
    game's options; for ``ensemble_env/EnsembleGen-v0``, ``generator=``, ``seed=``, ``first=``, ...). The library
    adapters take ``env_id`` through it.

    >>> make_env(UNSEEN_V2_ENV_ID, cache="toy8").engine.config.feedback
    'team'
    """
    if env_id not in _ENTRY_POINTS:
        raise ValueError(f"env_id={env_id!r} is not a registered id: {', '.join(map(repr, _ENTRY_POINTS))}")
    if api not in ("parallel", "aec"):
        raise ValueError(f"api={api!r} is not 'parallel' or 'aec'")
    return _IdFactory(env_id, _ENTRY_POINTS[env_id][api == "aec"])(**keywords)


def _register() -> None:
    """Register the envs in PettingZoo's registry (PettingZoo >= 1.25 has one): ``ensemble_env/Ensemble-v1``,
    ``ensemble_env/EnsembleUnseen-v1``, ``ensemble_env/EnsembleUnseen-v2`` and ``ensemble_env/EnsembleGen-v0``, each
    for both APIs, each through :class:`_IdFactory` (its fixed options cannot be overridden by keywords)."""
    try:
        from pettingzoo.env_registry.registration import aec_registry, parallel_registry, register
    except ImportError:  # older PettingZoo: no registry
        return
    for env_id, (parallel_entry, aec_entry) in _ENTRY_POINTS.items():
        kwargs = dict(ID_OPTIONS[env_id])
        if env_id not in parallel_registry:
            register("parallel", env_id, entry_point=_IdFactory(env_id, parallel_entry), kwargs=kwargs)
        if env_id not in aec_registry:
            register("aec", env_id, entry_point=_IdFactory(env_id, aec_entry), kwargs=kwargs)


_register()
