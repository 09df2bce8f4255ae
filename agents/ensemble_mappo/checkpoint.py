"""Checkpoints: plain dicts of tensors, numbers and strings, written atomically, read with ``weights_only=True``.

A checkpoint never holds a pickled object: network and optimizer state dicts, the sampling generator's state,
counters, the run's config as a dict, and the actions needed to rebuild the environment's current episodes
(see :mod:`ensemble_mappo.training`). ``torch.load(path, weights_only=True)`` reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ensemble_mappo.files import atomic_write

__all__ = ["CHECKPOINT_NAME", "load_checkpoint", "save_checkpoint"]

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
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or "networks" not in payload:
        raise ValueError(f"{path} is not an ensemble_mappo checkpoint (no 'networks' entry)")
    return payload
