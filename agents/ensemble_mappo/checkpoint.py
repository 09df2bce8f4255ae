"""Checkpoints: plain dicts of tensors, numbers and strings, written atomically, read with ``weights_only=True``.

A checkpoint never holds a pickled object: network and optimizer state dicts, the sampling generator's state,
counters, the run's config as a dict, and the environment's snapshot as the bytes of a ``numpy.savez`` archive
(:func:`pack_arrays`; see :mod:`ensemble_mappo.training`). ``torch.load(path, weights_only=True)`` reads it.
"""

from __future__ import annotations

import io
import pickle
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ensemble_mappo.files import atomic_write

__all__ = ["CHECKPOINT_NAME", "load_checkpoint", "pack_arrays", "save_checkpoint", "unpack_arrays"]

#: file name of a run's checkpoint inside its directory
CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically: a temporary file in the same folder, then a rename."""
    atomic_write(path, lambda file: torch.save(payload, file))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint (a run directory or the file itself) with ``torch.load(weights_only=True)``."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: train with `ensemble-env train --out DIR` first")
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickles before refusing them; we explain
            warnings.simplefilter("ignore", UserWarning)
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError) as error:
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise ValueError(
            f"{path} is not a readable checkpoint (damaged, truncated or not written by ensemble_mappo): {first}; "
            "train again, or resume from an intact copy"
        ) from None
    if not isinstance(payload, dict) or "networks" not in payload:
        raise ValueError(f"{path} is not an ensemble_mappo checkpoint (no 'networks' entry)")
    return payload


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
        raise ValueError(f"{what}: expected a 1-D uint8 tensor of packed arrays, got {type(packed).__name__}")
    try:
        with np.load(io.BytesIO(packed.numpy().tobytes()), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError) as error:
        raise ValueError(f"{what}: not a numpy archive of arrays ({error})") from error
