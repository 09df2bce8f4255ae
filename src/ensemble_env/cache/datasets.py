"""Built-in logit caches shipped inside the package, and :func:`resolve`: a cache from a name, a path or None.

=========  ================================================================================================
name       what it is
=========  ================================================================================================
``toy8``   8 scikit-learn classifiers on 5 scikit-learn datasets (3136 questions), each model seeing a
           restricted view of each task: a toy pool (``docs/default-cache.md``, ``scripts/build_default_cache.py``)
``bbh5``   5 open LLMs (Open LLM Leaderboard v2 details) on 16 BIG-Bench-Hard tasks (4000 questions), with
           the question texts and 64 text features (``src/ensemble_env/data/README.md``, ``scripts/build_bbh5.py``)
=========  ================================================================================================

>>> available()
('toy8', 'bbh5')
>>> describe("toy8").startswith("8 scikit-learn classifiers")
True
>>> load("toy8").n_models
8
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

from ensemble_env.cache.io import load_cache, save_cache
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import atomic_path

__all__ = [
    "BUILTINS",
    "COST_UNITS",
    "DEFAULT",
    "available",
    "cost_unit",
    "default_cache_path",
    "describe",
    "load",
    "load_default_cache",
    "path",
    "resolve",
    "save_builtin",
]

#: built-in caches: name -> (file in ``ensemble_env/data``, one-line description)
BUILTINS: dict[str, tuple[str, str]] = {
    "toy8": (
        "toy8.h5",
        "8 scikit-learn classifiers on 5 scikit-learn datasets (3136 questions), each seeing part of each task: "
        "a toy pool",
    ),
    "bbh5": (
        "bbh5.h5",
        "5 open LLMs on 16 BIG-Bench-Hard tasks (4000 questions; Open LLM Leaderboard v2 log-likelihoods), "
        "with question texts and 64 text features",
    ),
}
#: the cache used when none is given (``resolve(None)``, ``cache.load_default_cache()``)
DEFAULT = "bbh5"
#: the unit of each built-in cache's ``costs`` (``toy8`` has none); the format leaves the unit to whoever makes a
#: cache (``docs/cache-format.md``), bbh5's is in ``src/ensemble_env/data/README.md`` ("Costs")
COST_UNITS: dict[str, str] = {"bbh5": "billion active parameters x thousand prompt characters"}


def available() -> tuple[str, ...]:
    """The names of the built-in caches."""
    return tuple(BUILTINS)


def _entry(name: str) -> tuple[str, str]:
    if not isinstance(name, str) or name not in BUILTINS:
        raise ValueError(f"unknown built-in cache {name!r}; the built-in caches are {', '.join(BUILTINS)}")
    return BUILTINS[name]


def cost_unit(cache: LogitCache) -> str | None:
    """The unit of ``cache``'s costs when it is a built-in cache or a copy of one (its ``source`` starts with the
    built-in's name, as ``ensemble-env cache split`` keeps it): :data:`COST_UNITS`; else None, the unit being the
    cache maker's (any unit, ``docs/cache-format.md``). None too for a cache without costs.

    >>> cost_unit(load("bbh5")), cost_unit(load("toy8"))
    ('billion active parameters x thousand prompt characters', None)
    """
    if cache.costs is None:
        return None
    for name, unit in COST_UNITS.items():
        if cache.source.startswith(f"{name}: "):
            return unit
    return None


def describe(name: str) -> str:
    """A one-line description of a built-in cache (ValueError listing the names when it is unknown)."""
    return _entry(name)[1]


def path(name: str) -> Path:
    """The file of a built-in cache inside the installed package (it may be missing in a bare checkout)."""
    return Path(str(resources.files("ensemble_env") / "data" / _entry(name)[0]))


@functools.cache
def load(name: str) -> LogitCache:
    """A built-in cache, loaded once per process and name (its arrays are read-only, so it can be shared).

    Raises ValueError for an unknown name and FileNotFoundError when the file is missing (a checkout in which
    it was not built).
    """
    file = path(name)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: the built-in cache {name!r} is missing from the package")
    return load_cache(file)


def resolve(cache: LogitCache | str | os.PathLike[str] | None) -> LogitCache:
    """A loaded cache from None (the :data:`DEFAULT` built-in), a :class:`LogitCache` (as is), a built-in name
    or a path (a ``str`` or :class:`os.PathLike`).

    A string is a built-in name when it is one; a ``Path`` object is always a path. A string that is both a
    built-in name and an existing file or folder is refused (write ``./bbh5`` for the file). A string that is
    neither raises FileNotFoundError listing the built-in names.
    """
    if cache is None:
        return load(DEFAULT)
    if isinstance(cache, LogitCache):
        return cache
    if isinstance(cache, str):
        if cache in BUILTINS:
            if os.path.exists(cache):
                raise ValueError(
                    f"{cache!r} is both a built-in cache and a path in the current folder: write "
                    f"'./{cache}' for the file, or use ensemble_env.datasets.load({cache!r}) (or run from another "
                    "folder) for the built-in cache"
                )
            return load(cache)
        if not os.path.exists(cache):
            raise FileNotFoundError(
                f"{cache}: no such cache file, and not a built-in cache (the built-in caches are {', '.join(BUILTINS)})"
            )
        return load_cache(cache)
    if isinstance(cache, os.PathLike):
        return load_cache(cache)
    raise TypeError(f"cache must be a built-in name, a path, a LogitCache or None, got {type(cache).__name__}")


def save_builtin(target: str | os.PathLike[str], cache: LogitCache, max_bytes: int) -> int:
    """Write a built-in cache file (the build scripts' last step) with :func:`~ensemble_env.cache.save_cache`,
    refusing a file of ``max_bytes`` or more: ValueError, and nothing is written (an existing file is kept).

    Returns the size of the file written, in bytes.
    """
    with atomic_path(target) as temporary:
        save_cache(temporary, cache)
        size = temporary.stat().st_size
        if size >= max_bytes:
            raise ValueError(f"{target}: {size} bytes, a built-in cache must stay under {max_bytes}; nothing written")
    return size


def default_cache_path() -> Path:
    """Path of the default built-in cache (:data:`DEFAULT`)."""
    return path(DEFAULT)


def load_default_cache() -> LogitCache:
    """The default built-in cache, loaded once per process (its arrays are read-only)."""
    return load(DEFAULT)
