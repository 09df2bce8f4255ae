"""Checkpoints: plain dicts of tensors, numbers and strings, written atomically, read with ``weights_only=True``.

A checkpoint never holds a pickled object: network and optimizer state dicts, the sampling generator's state,
counters, the run's config as a dict, and the environment's snapshot as the bytes of a ``numpy.savez`` archive
(:func:`pack_arrays`; see :mod:`ensemble_mappo.training`). ``torch.load(path, weights_only=True)`` reads it, so
loading a checkpoint never runs code.

:func:`save_checkpoint` writes through :func:`ensemble_env.files.atomic_path` (``torch.save`` to a temporary
file beside the target, synced, then renamed over it). :func:`load_checkpoint` reads one and checks its
networks (a mapping of modules to mappings of plain tensors, every floating value finite); a run's checkpoint
is read whole, every entry checked, by :func:`ensemble_mappo.runs.read_checkpoint`.
"""

from __future__ import annotations

import io
import os
import pickle
import stat
import struct
import warnings
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ensemble_env.files import atomic_path
from ensemble_env.text import show

__all__ = [
    "CHECKPOINT_NAME",
    "check_networks",
    "check_tensor",
    "load_checkpoint",
    "pack_arrays",
    "save_checkpoint",
    "unpack_arrays",
]

#: file name of a run's checkpoint inside its directory
CHECKPOINT_NAME = "checkpoint.pt"
#: the tensor types a checkpoint may hold (no complex, quantized or sparse tensors)
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16)
_DTYPES += (torch.int32, torch.int64, torch.bool)
#: what numpy and zipfile raise on damaged archive bytes
_ARCHIVE_ERRORS = (ValueError, OSError, EOFError, KeyError, MemoryError, zipfile.BadZipFile, zlib.error, struct.error)
_ARCHIVE_ERRORS += (NotImplementedError,)


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically (:func:`ensemble_env.files.atomic_path`); the folder must exist."""
    with atomic_path(path) as temporary:
        torch.save(payload, temporary)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint (a run directory or the file itself) with ``torch.load(weights_only=True)``.

    Refused with a ValueError naming the file: a file torch cannot read that way (damaged, truncated, a pickle of
    objects), one that is not a dict with a ``networks`` entry, and networks that are not plain tensors or hold
    a value that is not finite (:func:`check_networks`). A missing file raises FileNotFoundError.
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}: train with `ensemble-env train --out DIR` first") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read the checkpoint ({error.strerror or error})") from None
    if not stat.S_ISREG(mode):  # a FIFO would block the reader, a device never end
        raise ValueError(f"{path}: not a regular file, so not a checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickles before refusing them; we explain
            warnings.simplefilter("ignore", UserWarning)
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError, MemoryError) as error:
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise ValueError(
            f"{path} is not a readable checkpoint (damaged, truncated or not written by ensemble_mappo): {first}; "
            "train again, or resume from an intact copy"
        ) from None
    if not isinstance(payload, dict) or "networks" not in payload:
        raise ValueError(f"{path} is not an ensemble_mappo checkpoint (no 'networks' entry)")
    check_networks(payload["networks"], str(path))
    return payload


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
