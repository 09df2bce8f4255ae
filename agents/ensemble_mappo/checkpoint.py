"""Checkpoints: plain dicts of tensors, numbers and strings, written atomically, read with ``weights_only=True``.

A checkpoint never holds a pickled object: network and optimizer state dicts, the sampling generator's state,
counters, the run's config as a dict, and the environment's snapshot as the bytes of a ``numpy.savez`` archive
(:func:`pack_arrays`; see :mod:`ensemble_mappo.training`). ``torch.load(path, weights_only=True)`` reads it, so
loading a checkpoint never runs code.

:func:`save_checkpoint` serialises in memory (``torch.save`` into a buffer) and writes the bytes through
:func:`ensemble_env.files.write_bytes` (a temporary file beside the target, synced, then renamed over it), so a full
or read-only disk is an :class:`~ensemble_env.files.OutputError` naming the checkpoint and the cause, never torch's
own writer failing mid-archive, and the previous checkpoint is left as it was.
:func:`load_checkpoint` reads one and checks its networks (a mapping of modules to mappings of plain tensors, every
floating value finite); a run's checkpoint is read whole, every entry checked, by :func:`read_checkpoint`, and
restored into a resumed run's live objects by :func:`restore_run`.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ensemble_env.cache.convert.common import read_input
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import write_bytes
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.text import show
from ensemble_mappo import algorithms
from ensemble_mappo.config import LIMITS, LearnerConfig
from ensemble_mappo.optim import Optimizer
from ensemble_mappo.runs import (
    CHECKPOINT_NAME,
    RunConfig,
    RunFileError,
    config_entry,
    describe,
    exact_keys,
    names_of,
    read_config,
    refuse,
    run_folder,
    whole_number,
)

__all__ = [
    "CHECKPOINT_KEYS",
    "CHECKPOINT_NAME",
    "MAX_CHECKPOINT_BYTES",
    "Checkpoint",
    "check_networks",
    "check_tensor",
    "checkpoint_file",
    "load_checkpoint",
    "load_error",
    "load_networks",
    "load_optimizer",
    "pack_arrays",
    "read_checkpoint",
    "restore_env",
    "restore_run",
    "save_checkpoint",
    "unpack_arrays",
]

#: the entries of a checkpoint (see ensemble_mappo.training; ``algorithm`` and ``random`` too since the learner
#: frame, absent from MAPPO's checkpoints before it); others are ignored
CHECKPOINT_KEYS = (
    "config",
    "iteration",
    "global_step",
    "num_iterations",
    "complete",
    "models",
    "networks",
    "optimizer",
    "generator",
    "env",
)
#: the tensor types a checkpoint may hold (no complex, quantized or sparse tensors)
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16)
_DTYPES += (torch.int32, torch.int64, torch.bool)
#: what numpy and zipfile raise on damaged archive bytes
_ARCHIVE_ERRORS = (ValueError, OSError, EOFError, KeyError, MemoryError, zipfile.BadZipFile, zlib.error, struct.error)
_ARCHIVE_ERRORS += (NotImplementedError,)
#: the largest checkpoint read (a run at the largest hidden size, with its optimizer's moments, is far below it)
MAX_CHECKPOINT_BYTES = 8 * 2**30


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically: serialised in memory, then :func:`ensemble_env.files.write_bytes`
    (an :class:`~ensemble_env.files.OutputError` naming ``path`` and the cause when the disk refuses; the previous
    file intact). The folder must exist."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    write_bytes(path, buffer.getvalue())


def checkpoint_file(path: str | Path) -> Path:
    """The checkpoint file ``path`` names: ``path/checkpoint.pt`` for a run directory, else ``path`` itself (a
    folder named ``*.pt`` is a checkpoint file that is a folder, refused as such when read, never looked into)."""
    path = Path(path)
    if path.is_dir() and path.suffix != ".pt":
        return path / CHECKPOINT_NAME
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint (a run directory or the file itself) with ``torch.load(weights_only=True)``.

    The file is read as the converters read their inputs (:func:`ensemble_env.cache.convert.common.read_input`): a
    regular file of at most :data:`MAX_CHECKPOINT_BYTES`; a folder, a FIFO, a device or a link to one is refused
    naming what it is. Refused with a ValueError naming the file and the cause (:func:`load_error`): a file torch
    cannot read that way (damaged, truncated, a pickle of objects), one that is not a dict with a ``networks``
    entry, and networks that are not plain tensors or hold a value that is not finite (:func:`check_networks`). A
    missing file raises FileNotFoundError.
    """
    path = checkpoint_file(path)
    try:
        data = read_input(path, limit=MAX_CHECKPOINT_BYTES)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: train with `ensemble-env train --out DIR` first") from None
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickles before refusing them; we explain
            warnings.simplefilter("ignore", UserWarning)
            payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError, MemoryError) as error:
        raise ValueError(
            f"{path} is not a readable checkpoint (damaged, truncated or not written by ensemble_mappo): "
            f"{load_error(error)}; train again, or resume from an intact copy"
        ) from None
    if not isinstance(payload, dict) or "networks" not in payload:
        raise ValueError(f"{path} is not an ensemble_mappo checkpoint (no 'networks' entry)")
    check_networks(payload["networks"], str(path))
    return payload


#: terminal colour codes (torch writes some in its messages)
_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: where torch's refusal of a pickled object says which object (after its advice on loading it anyway)
_UNPICKLER = "WeightsUnpickler error:"


def load_error(error: BaseException) -> str:
    """What ``torch.load(weights_only=True)`` found wrong, in one sentence of at most about 200 characters: the
    object it refused (``Unsupported global: GLOBAL numpy...``), else the first sentence of its message
    (``PytorchStreamReader failed reading zip archive: failed finding central directory``), never its advice, cut
    at a word.

    >>> load_error(RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory. "
    ...                         "This is an internal miniz error. If you are seeing this error, ..."))
    'PytorchStreamReader failed reading zip archive: failed finding central directory'
    """
    text = _ESCAPES.sub("", str(error)).strip()
    if _UNPICKLER in text:
        refused = text.split(_UNPICKLER, 1)[1].strip().splitlines()[0]
        text = "it holds an object a checkpoint never holds: " + refused.split(". Please", 1)[0]
    lines = text.splitlines()
    sentence = lines[0].split(". ", 1)[0].rstrip(". ") if lines else ""
    if not sentence:
        return type(error).__name__
    if len(sentence) > 200:
        sentence = sentence[:200].rsplit(" ", 1)[0] + " ..."
    return sentence


def check_tensor(value: Any, where: str, name: str) -> torch.Tensor:
    """``value`` if it is a plain dense tensor whose floating values are all finite; else a ValueError naming
    ``where`` (the file) and ``name`` (the tensor)."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{where}: {name} must be a tensor, got {show(value)}")
    if value.layout != torch.strided or value.is_quantized or value.dtype not in _DTYPES:
        kind = f"{value.dtype} {value.layout}"
        raise ValueError(f"{where}: {name} is a {kind} tensor; a checkpoint holds dense real tensors only")
    if value.is_floating_point():
        finite = torch.isfinite(value)
        if not bool(finite.all()):
            bad = int((~finite).sum())
            raise ValueError(
                f"{where}: {name} holds {bad:,} of {value.numel():,} values that are not finite (NaN or infinite): "
                "the training diverged or the file was altered; resume from an earlier copy or train again"
            )
    return value


def check_networks(networks: Any, where: str) -> dict[str, dict[str, torch.Tensor]]:
    """``networks`` if it is a mapping of module names to mappings of tensor names to finite tensors
    (:func:`check_tensor`); else a ValueError naming ``where`` and the tensor."""
    if not isinstance(networks, Mapping):
        raise ValueError(f"{where}: networks must map each network to its tensors, got {show(networks)}")
    for module, state in networks.items():
        if not isinstance(module, str):
            raise ValueError(f"{where}: networks has a network named {show(module)}, not a string")
        if not isinstance(state, Mapping):
            raise ValueError(f"{where}: networks.{module} must map tensor names to tensors, got {show(state)}")
        for name, value in state.items():
            if not isinstance(name, str):
                raise ValueError(f"{where}: networks.{module} has a tensor named {show(name)}, not a string")
            check_tensor(value, where, f"networks.{module}.{name}")
    return dict(networks)


def pack_arrays(arrays: Mapping[str, np.ndarray]) -> torch.Tensor:
    """A dict of numpy arrays as a uint8 tensor: the bytes of an uncompressed ``numpy.savez`` archive.

    Any dtype numpy stores without pickle (unsigned, strings, ...) survives; :func:`unpack_arrays` reads it.

    >>> arrays = unpack_arrays(pack_arrays({"rng": np.arange(3, dtype=np.uint64)}), "example")
    >>> arrays["rng"].dtype, arrays["rng"].tolist()
    (dtype('uint64'), [0, 1, 2])
    """
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def unpack_arrays(packed: torch.Tensor, what: str) -> dict[str, np.ndarray]:
    """The arrays of :func:`pack_arrays` (read with ``allow_pickle=False``); ``what`` names the source in errors."""
    if not isinstance(packed, torch.Tensor) or packed.dtype != torch.uint8 or packed.dim() != 1:
        raise ValueError(f"{what}: expected a 1-D uint8 tensor of packed arrays, got {show(packed)}")
    try:
        archive = np.load(io.BytesIO(packed.numpy().tobytes()), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):  # the bytes of one .npy array, not an archive
            raise ValueError(f"a single {type(archive).__name__}, not an archive")
        with archive:
            return {name: archive[name] for name in archive.files}
    except _ARCHIVE_ERRORS as error:
        cause = show(str(error) or type(error).__name__, 200)
        raise ValueError(f"{what}: not a numpy archive of arrays ({cause})") from None


# -- a run's checkpoint, read back and restored ------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """A run's checkpoint, every entry checked (:func:`read_checkpoint`)."""

    path: Path
    algorithm: str
    config: LearnerConfig
    iteration: int
    """Updates done (0: a run's start, kept among its checkpoints)."""
    global_step: int
    num_iterations: int
    """Updates the run's budget runs in all."""
    complete: bool
    models: tuple[str, ...]
    networks: dict[str, dict[str, Tensor]]
    optimizer: dict[str, Tensor]
    generator: Tensor
    env: dict[str, np.ndarray]
    """The environment's snapshot (its values are checked by ``set_state``: :func:`restore_env`)."""
    random: str
    """The state of the learner's own generator ("" for none; :meth:`ensemble_mappo.frame.Learner.random_state`)."""


def read_checkpoint(run_dir: str | Path, run: RunConfig | None = None) -> Checkpoint:
    """Read a checkpoint (a run directory or the file) and check every entry: a readable plain-data file
    (:func:`~ensemble_mappo.checkpoint.load_checkpoint`), every entry of :data:`CHECKPOINT_KEYS` there, counts
    that are ints (``3``, never ``"3"`` or ``3.7``) and agree with each other and the config, finite network
    and optimizer tensors, a generator state torch accepts, an environment snapshot archive. With ``run``
    (the folder's ``config.json``), the checkpoint must belong to it: the same config and pool."""
    path = checkpoint_file(run_dir)
    payload = load_checkpoint(path)
    where = str(path)
    missing = [key for key in CHECKPOINT_KEYS if key not in payload]
    if missing:
        raise refuse(path, "", f"lacks {', '.join(missing)} (a checkpoint of `ensemble-env train` holds all of them)")
    algorithm = payload.get("algorithm")  # a MAPPO checkpoint written before the registry has none
    if algorithm is not None and (not isinstance(algorithm, str) or algorithm not in algorithms.ALGORITHMS):
        known = ", ".join(algorithms.ALGORITHMS)
        raise refuse(path, "algorithm", f"expected one of {known}, got {describe(algorithm)}")
    config = config_entry(path, "config", payload["config"], algorithm)
    random = payload.get("random", "")
    if not isinstance(random, str) or len(random) > 2**16:
        raise refuse(path, "random", f"expected the text of a generator's state, got {describe(random)}")
    batch_size = config.num_envs * config.num_steps
    num_iterations = whole_number(path, "num_iterations", payload["num_iterations"], low=1, high=LIMITS["total_steps"])
    iteration = whole_number(path, "iteration", payload["iteration"], low=0, high=num_iterations)
    global_step = whole_number(path, "global_step", payload["global_step"], low=0)
    if global_step != iteration * batch_size:
        raise refuse(
            path, "global_step", f"{global_step} is not iteration x num_envs x num_steps = {iteration * batch_size}"
        )
    complete = payload["complete"]
    if not isinstance(complete, bool) or complete != (iteration >= num_iterations):
        raise refuse(
            path,
            "complete",
            f"expected {iteration >= num_iterations} (update {iteration} of {num_iterations}), "
            f"got {describe(complete)}",
        )
    models = names_of(path, "models", payload["models"], nonempty=True)
    networks = check_networks(payload["networks"], where)
    optimizer = payload["optimizer"]
    if not isinstance(optimizer, dict):
        raise refuse(
            path, "optimizer", f"expected the optimizer's state (exp_avg, exp_avg_sq, steps), got {describe(optimizer)}"
        )
    exact_keys(path, "optimizer", optimizer, ("exp_avg", "exp_avg_sq", "steps"))
    moments = [check_tensor(optimizer[key], where, f"optimizer.{key}") for key in ("exp_avg", "exp_avg_sq")]
    if not all(m.is_floating_point() and m.dim() == 1 for m in moments) or moments[0].shape != moments[1].shape:
        raise refuse(
            path,
            "optimizer.exp_avg",
            f"{moments[0].dtype} of shape {tuple(moments[0].shape)} and exp_avg_sq {moments[1].dtype} of shape "
            f"{tuple(moments[1].shape)}: expected two flat float tensors of one shape (one entry per parameter)",
        )
    if bool((moments[1] < 0).any()):
        raise refuse(path, "optimizer.exp_avg_sq", "holds a negative value; it is a mean of squares")
    steps = check_tensor(optimizer["steps"], where, "optimizer.steps")
    if steps.dtype != torch.int64 or steps.dim() != 1 or bool((steps < 0).any()):
        raise refuse(path, "optimizer.steps", f"expected a flat int64 tensor of step counts >= 0, got {show(steps)}")
    generator = check_tensor(payload["generator"], where, "generator")
    try:
        torch.Generator().set_state(generator)
    except (RuntimeError, TypeError, ValueError) as error:
        raise refuse(path, "generator", f"not a state of torch's generator ({show(str(error), 200)})") from None
    env = unpack_arrays(payload["env"], f"{path}: env")
    checkpoint = Checkpoint(
        path,
        config.algorithm,
        config,
        iteration,
        global_step,
        num_iterations,
        complete,
        models,
        networks,
        optimizer,
        generator,
        env,
        random,
    )
    if run is not None:
        _belongs(checkpoint, run)
    return checkpoint


def _belongs(checkpoint: Checkpoint, run: RunConfig) -> None:
    if checkpoint.config != run.config:
        changed = [
            item.name
            for item in fields(run.config)
            if getattr(checkpoint.config, item.name, None) != getattr(run.config, item.name)
        ]
        raise refuse(
            checkpoint.path,
            "config",
            f"differs from {run.path} in {', '.join(changed)}: the two files belong to different runs (was the run "
            "started over, or a file copied in?)",
        )
    if checkpoint.models != run.models:
        raise refuse(
            checkpoint.path,
            "models",
            f"{show(list(checkpoint.models), 200)} differ from {run.path}'s run.models {show(list(run.models), 200)}",
        )


def load_optimizer(optimizer: Optimizer, state: Mapping[str, Tensor], source: str) -> None:
    """Load a checkpoint's optimizer state after checking it against ``optimizer``'s own: the same entries,
    shapes and dtypes, finite moments, second moments and step counts >= 0. ``source`` is named in errors."""
    if not isinstance(state, Mapping):
        raise refuse(source, "optimizer", f"expected the optimizer's state, got {show(state)}")
    expected = optimizer.state_dict()
    exact_keys(Path(source), "optimizer", state, tuple(expected))
    for key, reference in expected.items():
        value = check_tensor(state[key], source, f"optimizer.{key}")
        if value.shape != reference.shape or value.dtype != reference.dtype:
            raise refuse(
                source,
                f"optimizer.{key}",
                f"{value.dtype} of shape {tuple(value.shape)}, expected {reference.dtype} of shape "
                f"{tuple(reference.shape)}",
            )
    for key in ("exp_avg_sq", "steps"):
        if key in state and bool((state[key] < 0).any()):
            raise refuse(source, f"optimizer.{key}", "holds a negative value")
    try:
        optimizer.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError) as error:
        raise refuse(source, "optimizer", f"not loadable ({show(str(error), 300)})") from None


def restore_env(venv: EnsembleVectorEnv, snapshot: Mapping[str, np.ndarray], source: str) -> None:
    """``venv.set_state(snapshot)``, which checks every array by value against the engine (its cache, options
    and copies); a refusal is raised as a :class:`RunFileError` naming ``source`` (the checkpoint file)."""
    try:
        venv.set_state(snapshot)
    except ValueError as error:  # CacheError is one: the snapshot no play of this engine could have produced
        raise refuse(source, "env", f"the environment's snapshot is refused: {show(str(error), 600)[1:-1]}") from None


def restore_run(
    run_dir: str | Path,
    config: LearnerConfig,
    num_iterations: int,
    learner: Any,
    optimizer: Optimizer,
    generator: torch.Generator,
    venv: EnsembleVectorEnv,
    cache: LogitCache,
) -> int:
    """Restore the run saved in ``run_dir`` into the live objects of a resumed run; the updates it had done.

    The folder's ``config.json`` must hold ``config`` and the digest of ``cache``, the cache the run is given (what
    :func:`~ensemble_mappo.runs.write_config` recorded: the cache before the model-permuted copies of its training
    tasks that ``venv``, the training environment, may add; ``config`` and ``cache`` make those copies again); its
    checkpoint must belong to it (:func:`read_checkpoint`), be of ``venv``'s pool and of a budget of
    ``num_iterations`` updates. A run stopped before its first checkpoint
    has none: it starts again from update 0 (0 is returned and nothing is loaded). Nothing is changed before
    everything is checked, apart from the objects loaded in turn (networks, optimizer, generator, environment),
    which a refusal leaves to be thrown away.
    """
    folder = run_folder(run_dir)
    run = read_config(folder)
    if run.config != config:
        changed = [
            item.name for item in fields(config) if getattr(run.config, item.name, None) != getattr(config, item.name)
        ]
        raise refuse(
            run.path,
            "config",
            f"the run was trained with a different config (other {', '.join(changed)}); resume it with its own config",
        )
    path = folder / CHECKPOINT_NAME
    if not os.path.lexists(path):
        return 0  # stopped before its first checkpoint: the run starts over, with its saved config
    checkpoint = read_checkpoint(path, run)
    digest = cache_digest(cache)  # the cache as given, as write_config recorded it (not venv.cache: its copies)
    if run.digest is not None and run.digest != digest:
        raise refuse(
            run.path,
            "run.digest",
            f"the run trained on a cache with other contents (its digest {run.digest[:12]}..., this cache's "
            f"{digest[:12]}...): resume it with the cache it was trained on, or train a new run",
        )
    pool = tuple(venv.cache.models)
    if checkpoint.models != pool:
        raise refuse(
            path,
            "models",
            f"the run's pool {show(list(checkpoint.models), 200)} is not the cache's {show(list(pool), 200)}",
        )
    if checkpoint.num_iterations != num_iterations:
        raise refuse(
            path,
            "num_iterations",
            f"the run's budget was {checkpoint.num_iterations} updates; its config on this cache gives "
            f"{num_iterations} (another cache or tasks?)",
        )
    source = str(path)
    load_networks(learner, checkpoint.networks, source)
    load_optimizer(optimizer, checkpoint.optimizer, source)
    generator.set_state(checkpoint.generator)
    learner.set_random_state(checkpoint.random, source)
    restore_env(venv, checkpoint.env, source)
    return checkpoint.iteration


def load_networks(learner: Any, networks: Mapping[str, Mapping[str, Tensor]], source: str) -> None:
    """Load ``networks`` (a checkpoint's) into ``learner`` (:meth:`ensemble_mappo.frame.Learner.load`, which checks
    them against its own), a refusal raised as a :class:`~ensemble_mappo.runs.RunFileError` naming ``source``."""
    try:
        learner.load(networks, source)
    except (RuntimeError, KeyError) as error:
        raise refuse(source, "networks", f"not loadable ({show(str(error), 300)})") from None
    except ValueError as error:
        raise RunFileError(str(error)) from None
