"""The HDF5 side of logit caches, writing: the checksummed writer.

:func:`ensemble_env.cache.save_cache` calls :func:`write_cache_file`; the reader is
:mod:`ensemble_env.cache.hdf5`'s.

Writing (:func:`write_cache_file`) makes the whole file in memory (h5py's core driver, no backing store:
:func:`cache_image`) and then writes its bytes with plain Python I/O, atomically: a disk that fails (full,
read-only, over quota) is an ordinary OSError, reported as a :class:`CacheWriteError` naming the file and the cause,
never a failed write inside HDF5 (which went on to crash the process with SIGSEGV when Python freed the damaged
file's objects).

Checksums. The file is in the HDF5 format of version 1.10 (superblock 3, object headers 2, chunk indexes with
checksums), every dataset with the fletcher32 checksum filter, and every string with a fixed length
(variable-length strings live in HDF5's global heap, which carries no checksum): corruption of such a file is
caught by a checksum, however it falls, and the reader reads it without a helper process.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import FORMAT_NAME, FORMAT_VERSION, CacheError, LogitCache
from ensemble_env.files import OutputError, write_bytes
from ensemble_env.text import show

__all__ = ["CacheWriteError", "cache_image", "write_cache_file"]


def _fixed_strings(texts: Sequence[str]) -> np.ndarray:
    """Fixed-length UTF-8 strings (NUL-padded; the cache holds no NUL character, so they read back exactly)."""
    import h5py

    encoded = [text.encode("utf-8") for text in texts]
    width = max(1, *(len(item) for item in encoded))
    return np.array(encoded, dtype=h5py.string_dtype("utf-8", width))


def _fixed_string(text: str) -> np.ndarray:
    import h5py

    encoded = text.encode("utf-8")
    return np.array(encoded, dtype=h5py.string_dtype("utf-8", max(1, len(encoded))))


class CacheWriteError(OSError, CacheError):
    """A cache file could not be written (a full disk, a read-only file system, a quota, a name too long, ...).

    Both an OSError, with the cause's ``errno`` (``errno.ENOSPC``, ``EROFS``, ``EDQUOT``, ``ENAMETOOLONG``, ...),
    its ``strerror`` (``"No space left on device"``) and the file as ``filename``, and a
    :class:`~ensemble_env.cache.CacheError` (so a ValueError: the command line reports it in one line). Its
    message names the file and the cause.
    """

    def __init__(self, code: int | None, reason: str, path: str, message: str | None = None) -> None:
        super().__init__(code, reason, path)
        self.message = message if message is not None else f"{path}: cannot write: {reason}"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errno, self.strerror, self.filename, self.message))


def _write_error(path: str, cause: OSError) -> CacheWriteError:
    """The CacheWriteError of an OSError of writing ``path`` (the atomic writer's own message when it names
    ``path`` already, else one made from the cause)."""
    code = cause.errno if isinstance(cause.errno, int) else None
    text = str(cause)
    reason = cause.strerror or (os.strerror(code) if code else "") or text or type(cause).__name__
    if text.startswith(f"{path}:"):
        message = text
    else:
        other = cause.filename is not None and os.fsdecode(cause.filename) != path
        message = f"{path}: cannot write: {reason}" + (f" ({show(os.fsdecode(cause.filename), 300)})" if other else "")
    name = errno.errorcode.get(code, "") if code else ""
    if name and name not in message:
        message += f" ({name})"
    return CacheWriteError(code, reason, path, f"{message}; no partial or temporary file is left")


_IMAGES = itertools.count()


def cache_image(cache: LogitCache, compression: str | None) -> bytes:
    """The bytes of the cache file of ``cache`` (the checksummed form of the module docstring), made wholly in
    memory: h5py's ``core`` driver without a backing store, so HDF5 never touches a disk."""
    import h5py

    name = f"ensemble-env-cache-{os.getpid()}-{next(_IMAGES)}.h5"  # in-memory files are told apart by name
    with h5py.File(name, "w", driver="core", backing_store=False, libver=("v110", "v110")) as h5file:
        _write_fields(h5file, cache, compression)
        h5file.flush()
        return bytes(h5file.id.get_file_image())


def write_cache_file(
    path: str | os.PathLike[str],
    cache: LogitCache,
    compression: str | None,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``cache`` to ``path`` atomically, in the checksummed form described in the module docstring.

    The file is made in memory first (:func:`cache_image`), then written with plain Python I/O through
    :func:`~ensemble_env.files.write_bytes` (a temporary file beside ``path``, synced, renamed; removed on any
    failure). So every failure of the disk (full, read-only, over quota, a name too long) is an ordinary OSError,
    raised as a :class:`CacheWriteError` naming ``path`` and the cause, with ``path`` as it was and no temporary
    file left; HDF5 never sees a failed write (on a full disk it used to go on writing and closing a damaged
    file, and then crash the process when Python freed its objects). The cost: memory for about twice the
    file's size while it is written (the HDF5 image and its bytes). The folder must exist (FileNotFoundError).
    An output that is one of ``inputs`` (the files the cache was made from) is refused
    (:func:`~ensemble_env.files.check_output`).
    """
    name = os.fsdecode(path)
    image = cache_image(cache, compression)  # in memory: nothing of the disk can fail here (MemoryError can)
    try:
        write_bytes(path, image, inputs=inputs)
    except FileNotFoundError:
        raise  # the folder does not exist: atomic_path's message names it
    except OutputError as error:
        if error.errno is None:  # a refusal (the output is one of the inputs, a folder, ...), not a failed disk
            raise
        raise _write_error(name, error) from None
    except OSError as error:
        raise _write_error(name, error) from None
    return Path(path)


def _write_fields(h5file: Any, cache: LogitCache, compression: str | None) -> None:
    options = {"fletcher32": True, "compression": compression}
    h5file.attrs.create("format", _fixed_string(FORMAT_NAME))
    h5file.attrs.create("format_version", np.int64(FORMAT_VERSION))
    h5file.attrs.create("score_kind", _fixed_string(cache.score_kind))
    if cache.source:
        h5file.attrs.create("source", _fixed_string(cache.source))
    numbers = {"scores": cache.scores, "labels": cache.labels, "n_choices": cache.n_choices}
    numbers.update({"tasks": cache.tasks, "split": cache.split})
    if cache.costs is not None:
        numbers["costs"] = cache.costs
    for name, array in numbers.items():
        h5file.create_dataset(name, data=array, **options)
    strings: dict[str, tuple[str, ...] | None] = {"models": cache.models, "task_names": cache.task_names}
    strings.update({"question_ids": cache.question_ids, "question_text": cache.question_text})
    for name, texts in strings.items():
        if texts is not None:
            h5file.create_dataset(name, data=_fixed_strings(texts), **options)
    if cache.features is not None:
        node = h5file.create_dataset("features", data=cache.features, **options)
        if cache.feature_names is not None:
            node.attrs.create("feature_names", _fixed_strings(cache.feature_names))
        if cache.feature_kind:
            node.attrs.create("feature_kind", _fixed_string(cache.feature_kind))
