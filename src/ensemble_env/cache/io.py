"""Reading and writing logit cache files: :func:`load_cache` (validated, safe on any file) and :func:`save_cache`
(atomic, checksummed). The HDF5 work itself is :mod:`ensemble_env.cache.hdf5`'s (reading) and
:mod:`ensemble_env.cache.hdf5_writer`'s (writing); files without checksums are read under a time limit by
:mod:`ensemble_env.cache.guard`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ensemble_env.cache.hdf5 import read_cache_file
from ensemble_env.cache.hdf5_writer import write_cache_file
from ensemble_env.cache.logit_cache import LogitCache

__all__ = ["load_cache", "save_cache"]


def load_cache(path: str | os.PathLike[str], *, timeout: float | None = None) -> LogitCache:
    """Read and validate a logit cache file; safe on any file, whoever made it.

    Raises FileNotFoundError when the file does not exist and :class:`CacheError` (a ValueError naming the
    file and the field) when it is not a valid cache: not a regular file, not HDF5, corrupted (whatever
    h5py/HDF5 raises), wrong ``format`` or ``format_version``, missing or malformed dataset, shapes that
    disagree or exceed the limits (checked before any data are read), a link, virtual dataset or external
    storage reaching outside the file, labels or choice counts out of range, non-finite valid scores,
    duplicate model names.

    A file without checksums (not written by :func:`save_cache`) is first read by a helper process allowed
    ``timeout`` seconds (default: 20 s plus 1 s per 20 MB), so a corrupted one is refused, never spun on
    (:mod:`ensemble_env.cache.guard`).
    """
    return LogitCache(**read_cache_file(path, timeout=timeout))


def save_cache(
    path: str | os.PathLike[str],
    cache: LogitCache,
    *,
    compression: str | None = "gzip",
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``cache`` to ``path`` atomically (:func:`~ensemble_env.files.atomic_path`: a temporary file in the same
    folder, synced to disk, then renamed), with checksums on its data and metadata.

    The file is HDF5 in the format of HDF5 1.10 (readable by HDF5 >= 1.10 and h5py >= 2.7), every dataset
    with the fletcher32 checksum filter (and ``compression``, gzip by default; None for none), strings as
    fixed-length UTF-8. It is made in memory first, then written with plain Python I/O
    (:func:`~ensemble_env.cache.hdf5_writer.write_cache_file`): it needs memory for about twice the file's size.
    The folder must exist (FileNotFoundError). An existing file at ``path`` is replaced only once the new one
    is complete. Returns the path written.

    A disk that fails (full, read-only, over quota, a name too long, ...) raises
    :class:`~ensemble_env.cache.hdf5_writer.CacheWriteError`, both an OSError with the cause's ``errno`` and a
    :class:`CacheError`, naming ``path`` and the cause; ``path`` is left as it was and no temporary file remains.
    ``inputs``: the files ``cache`` was made from; an output that is one of them (the same file by device and
    inode, through links) is refused with :class:`~ensemble_env.files.OutputError` and nothing is written.
    """
    return write_cache_file(path, cache, compression, inputs)
