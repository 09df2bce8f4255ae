"""The caches: what a pool of models answered, in memory and on disk.

This part sits at the bottom of the package (it imports only :mod:`ensemble_env.text` and
:mod:`ensemble_env.files`); the game, the views and the baselines read its :class:`LogitCache`.

===================  =========================================================================================
module               what it holds
===================  =========================================================================================
``logit_cache``      :class:`LogitCache` (validated, read-only arrays; probabilities from the scores),
                     :class:`CacheError`, the format's constants (:data:`SPLITS`, :data:`SCORE_KINDS`, ...)
``hdf5``             reading HDF5 (every size checked before data are read, nothing outside the file followed);
                     the guard's helper loop
``hdf5_writer``      writing HDF5 (checksummed, made in memory, written atomically); with ``hdf5``, the only code
                     that touches HDF5
``guard``            reading checksum-less files in a helper process under a time limit
``io``               :func:`load_cache` and :func:`save_cache` (atomic)
``datasets``         the built-in caches (``toy8``, ``bbh5``) and :func:`~ensemble_env.cache.datasets.resolve`,
                     the one way a cache argument (None, a name, a path, a cache) becomes a cache
``features``         text features of the questions (hashed character n-grams)
``synthetic``        a seeded synthetic pool with planted structure (:func:`~ensemble_env.cache.synthetic.make_cache`)
``task_model``       the generative model of one task: its parameters (:class:`~ensemble_env.cache.task_model.TaskFit`)
                     and their jitter
``task_fit``         fitting that model to a real task's questions
``task_draw``        drawing the questions of tasks from their parameters, vectorised
``generator``        a task generator fitted to a real cache (:func:`fit_generator`), new tasks drawn from it
                     (:meth:`TaskGenerator.sample`)
``generator_file``   generator files: :func:`save_generator` (atomic JSON) and :func:`load_generator` (validated)
``convert``          converters into caches: lm-evaluation-harness samples, arrays, splits
===================  =========================================================================================

The format is ``docs/cache-format.md``; the names below are re-exported for convenience
(``from ensemble_env.cache import LogitCache, load_cache``).
"""

from __future__ import annotations

from ensemble_env.cache.datasets import default_cache_path, load_default_cache
from ensemble_env.cache.generator import TaskGenerator, fit_generator
from ensemble_env.cache.generator_file import load_generator, save_generator
from ensemble_env.cache.hdf5_writer import CacheWriteError
from ensemble_env.cache.io import load_cache, save_cache
from ensemble_env.cache.logit_cache import (
    FORMAT_NAME,
    FORMAT_VERSION,
    SCORE_KINDS,
    SPLIT_CHOICES,
    SPLITS,
    CacheError,
    LogitCache,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "SCORE_KINDS",
    "SPLITS",
    "SPLIT_CHOICES",
    "CacheError",
    "CacheWriteError",
    "LogitCache",
    "TaskGenerator",
    "default_cache_path",
    "fit_generator",
    "load_cache",
    "load_default_cache",
    "load_generator",
    "save_cache",
    "save_generator",
]
