"""The HDF5 side of logit caches, reading: a reader that is safe on any file.

:func:`ensemble_env.cache.load_cache` calls :func:`read_cache_file` (and :func:`ensemble_env.cache.save_cache` the
checksummed writer, :func:`ensemble_env.cache.hdf5_writer.write_cache_file`); nothing else in the package touches
HDF5.

Reading (:func:`read_cache_file`) looks at every field's header before it reads a byte of its data:

- links: a field must be stored in the file itself; an external link, a user-defined link or a soft link that
  leads out of the file (through an external link) is refused, never followed;
- storage: a virtual dataset (data gathered from other files) or external storage (raw data kept in other
  files) is refused; chunks must all be stored (a missing chunk would read as fill values); only the filters
  gzip (deflate), lzf, shuffle and fletcher32 are accepted (no filter plugin is ever loaded);
- types and shapes: each dataset's class (float, integer, string), rank and dimensions are checked against
  the format, against the other fields (``scores`` sets Q, N, C) and against :data:`LIMITS`; its declared size
  must be one the stored bytes can hold (at most :data:`MAX_DATASET_BYTES`, and no more than the filters can
  expand the stored bytes to), so a small file declaring a huge dataset is refused at once, using no memory.

Checksums. The writer (:mod:`ensemble_env.cache.hdf5_writer`) writes the HDF5 format of version 1.10 (superblock
3, object headers 2, chunk indexes with checksums), every dataset with the fletcher32 checksum filter, and every
string with a fixed length (variable-length strings live in HDF5's global heap, which carries no checksum).
Corruption of such a file is caught by a checksum, however it falls. A file that lacks any of this (the HDF5 of h5py's
defaults, for instance: superblock 0 and no checksum on metadata) can make HDF5 loop forever on a corrupted
byte; it is read anyway, but first by a helper process with a time limit (:mod:`ensemble_env.cache.guard`).

Every failure, from these checks or from h5py/HDF5 (any exception), is a :class:`~ensemble_env.cache.CacheError`
naming the file and the field, with a short message.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache import guard
from ensemble_env.cache.logit_cache import FORMAT_NAME, FORMAT_VERSION, CacheError, cache_error
from ensemble_env.text import show

__all__ = ["LIMITS", "MAX_DATASET_BYTES", "read_cache_file", "serve", "superblock_version"]

#: largest size a cache's dimension may declare: questions Q, models N, choices C, tasks T, features F
LIMITS = {"Q": 2**31 - 1, "N": 2**16, "C": 2**16, "T": 2**24, "F": 2**20}
#: largest size in bytes a dataset may declare (once read into memory)
MAX_DATASET_BYTES = 2**36
#: longest fixed-length string (bytes) and largest string attribute
_MAX_STRING_BYTES = 2**24
_MAX_ATTRIBUTE_ITEMS = 2**20
#: per accepted filter, by HDF5 filter id: (name, largest factor by which it can expand the stored bytes)
_FILTERS = {1: ("gzip (deflate)", 1100.0), 2: ("shuffle", 1.0), 3: ("fletcher32", 1.0), 32000: ("lzf", 100.0)}
_FLETCHER32 = 3
#: bytes a stored chunk may need beyond its share of the data (filter headers), and a small dataset's allowance
_CHUNK_SLACK = 1024
_SMALL = 65536
#: rows of a string dataset read at once: bounds the temporary padded array
_STRING_BLOCK_BYTES = 2**26
_MESSAGE_LIMIT = 200
_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: what each dataset of the format holds, and its shape in the letters of LIMITS (alternatives for costs)
_KINDS = {
    "scores": "float",
    "labels": "int",
    "models": "str",
    "n_choices": "int",
    "tasks": "int",
    "task_names": "str",
    "split": "int",
    "question_ids": "str",
    "costs": "float",
    "features": "float",
    "question_text": "str",
}
_SHAPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "scores": (("Q", "N", "C"),),
    "labels": (("Q",),),
    "models": (("N",),),
    "n_choices": (("Q",),),
    "tasks": (("Q",),),
    "task_names": (("T",),),
    "split": (("Q",),),
    "question_ids": (("Q",),),
    "costs": (("N",), ("Q", "N")),
    "features": (("Q", "F"),),
    "question_text": (("Q",),),
}
_REQUIRED = ("scores", "labels", "models")
_ROOT_ATTRIBUTES = ("format", "format_version", "score_kind", "source")
_FEATURE_ATTRIBUTES = ("feature_names", "feature_kind")
_KIND_WORDS = {"float": "floating-point numbers", "int": "integers", "str": "strings"}


# -- where a failure happened ------------------------------------------------------------------------


class _Place:
    """The field being read, for messages; ``report`` is told each field as reading reaches it."""

    def __init__(self, path: str, report: Callable[[str], None] | None) -> None:
        self.path = path
        self.field: str | None = None
        self.report = report

    def at(self, field: str | None) -> None:
        self.field = field
        if self.report is not None and field is not None:
            self.report(field)

    def fail(self, problem: str) -> CacheError:
        if self.field is None:
            return CacheError(f"{self.path}: {problem}")
        return cache_error(self.path, self.field, problem)


def _short(error: BaseException) -> str:
    """A one-line, bounded description of an exception raised by h5py/HDF5."""
    if isinstance(error, MemoryError):
        return "MemoryError: more memory than is available"
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else 'no message'}"
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


@contextlib.contextmanager
def _translated(place: _Place) -> Iterator[None]:
    """Turn any exception of h5py/HDF5 (or of numpy on what it returned) into a CacheError naming the field."""
    try:
        yield
    except CacheError:
        raise
    except Exception as error:
        what = "cannot be read as HDF5" if place.field is None else "cannot be read"
        raise place.fail(f"{what} ({_short(error)}); the file is corrupted or not a logit cache") from None


# -- the file before HDF5 opens it ---------------------------------------------------------------------


def superblock_version(path: str | os.PathLike[str]) -> int | None:
    """The version of the HDF5 superblock of a file (2 and above carry a checksum), None if it is not HDF5.

    HDF5 looks for its signature at byte 0, then 512, 1024, 2048, ... (after a user block); so does this.
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        offset = 0
        while offset + len(_SIGNATURE) < size:
            handle.seek(offset)
            head = handle.read(len(_SIGNATURE) + 1)
            if head[: len(_SIGNATURE)] == _SIGNATURE:
                return head[len(_SIGNATURE)]
            offset = 512 if offset == 0 else offset * 2
    return None


# -- headers: links, storage, types, shapes --------------------------------------------------------------


@dataclass
class _Header:
    """What a dataset declares, checked before its data is read."""

    node: Any
    kind: str
    shape: tuple[int, ...]
    variable_strings: bool
    checksummed: bool


def _resolve(h5file: Any, name: str, place: _Place) -> Any:
    """The object a root-level name stands for, None when absent; refuses links that leave the file."""
    import h5py

    group, parts, hops = h5file.id, [name], 0
    while parts:
        part = parts.pop(0)
        key = part.encode("utf-8")
        if not group.links.exists(key):
            if hops:
                raise place.fail(f"is a soft link to a path that does not exist in the file ({show(part)} is missing)")
            return None
        info = group.links.get_info(key)
        if info.type == h5py.h5l.TYPE_SOFT:
            hops += 1
            if hops > 8:
                raise place.fail("is a chain of more than 8 soft links (a loop?)")
            target = group.links.get_val(key).decode("utf-8", errors="replace")
            if target.startswith("/"):
                group = h5file.id
            parts = [piece for piece in target.split("/") if piece] + parts
            continue
        if info.type == h5py.h5l.TYPE_EXTERNAL:
            other, inner = group.links.get_val(key)
            raise place.fail(
                f"is a link to {show(inner.decode('utf-8', 'replace'))} in another file "
                f"({show(os.fsdecode(other))}); a cache must hold its data itself: refused"
            )
        if info.type != h5py.h5l.TYPE_HARD:
            raise place.fail(f"is a user-defined HDF5 link (type {info.type}): refused")
        target_id = h5py.h5o.open(group, key)
        if not parts:
            return target_id
        if not isinstance(target_id, h5py.h5g.GroupID):
            raise place.fail(f"is a soft link through {show(part)}, which is not a group")
        group = target_id
    return h5file.id  # a soft link to the root group


def _is_checksummed_object(object_id: Any) -> bool:
    import h5py

    return bool(h5py.h5o.get_info(object_id).hdr.version >= 2)


def _storage(node: Any, place: _Place, file_size: int, kind_bytes: int) -> bool:
    """Check how a dataset stores its data; True when the data carry the fletcher32 checksum."""
    import h5py

    plist = node.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.VIRTUAL:
        raise place.fail("is a virtual dataset (its data would come from other files): refused")
    if plist.get_external_count() > 0:
        name = os.fsdecode(plist.get_external(0)[0])
        raise place.fail(f"keeps its data in an external file ({show(name)}); a cache must hold its data: refused")
    expansion, checksummed = 1.0, False
    for index in range(plist.get_nfilters()):
        code = plist.get_filter(index)[0]
        if code not in _FILTERS:
            raise place.fail(
                f"is stored with HDF5 filter {code}, which this reader does not accept "
                f"(accepted: {', '.join(name for name, _ in _FILTERS.values())})"
            )
        expansion *= _FILTERS[code][1]
        checksummed |= code == _FLETCHER32
    declared = kind_bytes
    if declared > MAX_DATASET_BYTES:
        raise place.fail(f"declares {declared} bytes of data, more than the {MAX_DATASET_BYTES} a cache may hold")
    if declared > file_size * expansion + _SMALL:
        raise place.fail(f"declares {declared} bytes of data, more than the {file_size}-byte file can hold")
    if layout == h5py.h5d.CHUNKED:
        chunks = plist.get_chunk()
        expected = math.prod(-(-size // chunk) for size, chunk in zip(node.shape, chunks, strict=True))
        if expected > file_size:
            raise place.fail(f"declares {expected} chunks, more than the {file_size}-byte file can hold")
        stored = node.get_num_chunks()
        if stored != expected:
            raise place.fail(f"stores {stored} of its {expected} chunks (the rest would read as fill values)")
        if declared > node.get_storage_size() * expansion + expected * _CHUNK_SLACK:
            raise place.fail(f"declares {declared} bytes, more than its {node.get_storage_size()} stored bytes hold")
    elif layout == h5py.h5d.CONTIGUOUS:
        if node.get_storage_size() < declared:
            raise place.fail(f"stores {node.get_storage_size()} of its {declared} bytes (the data were never written)")
    return checksummed


def _header(h5file: Any, name: str, place: _Place, file_size: int) -> _Header | None:
    import h5py

    place.at(name)
    node = _resolve(h5file, name, place)
    if node is None:
        return None
    if not isinstance(node, h5py.h5d.DatasetID):
        found = {h5py.h5g.GroupID: "Group", h5py.h5t.TypeID: "Datatype"}
        kind = next((label for cls, label in found.items() if isinstance(node, cls)), type(node).__name__)
        raise place.fail(f"is a {kind}, expected a dataset")
    checksummed = _is_checksummed_object(node)
    space = node.get_space()
    if space.get_simple_extent_type() != h5py.h5s.SIMPLE:
        raise place.fail("has no data (empty or scalar dataspace), expected an array")
    shape = tuple(int(size) for size in space.shape)
    type_id = node.get_type()
    type_class = type_id.get_class()
    want = _KINDS[name]
    variable = False
    if want == "str":
        if type_class != h5py.h5t.STRING:
            raise place.fail(f"must hold strings, got {_type_name(node)}")
        variable = bool(type_id.is_variable_str())
        if not variable and type_id.get_size() > _MAX_STRING_BYTES:
            raise place.fail(f"holds strings of {type_id.get_size()} bytes, more than {_MAX_STRING_BYTES}")
        item_bytes = 16 if variable else type_id.get_size()
    else:
        wanted_class = h5py.h5t.FLOAT if want == "float" else h5py.h5t.INTEGER
        sizes = (2, 4, 8) if want == "float" else (1, 2, 4, 8)
        if type_class != wanted_class or type_id.get_size() not in sizes:
            raise place.fail(f"must hold {_KIND_WORDS[want]}, got {_type_name(node)}")
        item_bytes = type_id.get_size()
    checksummed &= _storage(node, place, file_size, math.prod(shape) * item_bytes) and not variable
    return _Header(node, want, shape, variable, checksummed)


#: names of HDF5's type classes (H5T_class_t)
_CLASS_NAMES = {
    0: "integers",
    1: "floating-point numbers",
    2: "times",
    3: "strings",
    4: "a bit field",
    5: "opaque data",
    6: "a compound type",
    7: "references",
    8: "an enumeration",
    9: "variable-length sequences",
    10: "an array type",
}


def _type_name(node: Any) -> str:
    try:
        return f"dtype {node.dtype}"
    except Exception:  # an HDF5 type numpy has no name for
        type_class = node.get_type().get_class()
        return f"HDF5 {_CLASS_NAMES.get(type_class, f'type class {type_class}')}"


def _check_shapes(headers: dict[str, _Header], place: _Place) -> None:
    """Each dataset's shape against the format, the others (``scores`` sets Q, N, C) and :data:`LIMITS`."""
    scores = headers["scores"]
    place.at("scores")
    if len(scores.shape) != 3:
        raise place.fail(f"must have shape (Q, N, C), got shape {scores.shape}")
    sizes = dict(zip("QNC", scores.shape, strict=True))
    for name, header in headers.items():
        place.at(name)
        rank = len(header.shape)
        allowed = [shape for shape in _SHAPES[name] if len(shape) == rank]
        letters = allowed[0] if allowed else _SHAPES[name][0]
        if not allowed:
            expected = " or ".join("(" + ", ".join(shape) + ")" for shape in _SHAPES[name])
            raise place.fail(f"shape {header.shape} does not have the rank of {expected}")
        for letter, size in zip(letters, header.shape, strict=True):
            if size > LIMITS[letter]:
                raise place.fail(f"shape {header.shape}: {letter} = {size} is above the limit {LIMITS[letter]}")
            if sizes.setdefault(letter, size) != size:
                want = tuple(sizes.get(letter, "?") for letter in letters)
                if header.kind == "str" and rank == 1:
                    raise place.fail(f"has {size} entries, expected {want[0]}")
                raise place.fail(
                    f"shape {header.shape} does not match the expected {want} (the shape of "
                    f"({', '.join(letters)}) set by the other fields)"
                )


# -- attributes ----------------------------------------------------------------------------------------


def _attribute_header(owner: Any, name: str, place: _Place) -> bool | None:
    """Check an attribute's type and size before reading it: None when absent, else whether it is checksummed
    (stored in the object header, not as variable-length strings in the unprotected global heap)."""
    import h5py

    key = name.encode("utf-8")
    if not h5py.h5a.exists(owner, key):
        return None
    place.at(name)
    attribute = h5py.h5a.open(owner, key)
    type_id = attribute.get_type()
    type_class = type_id.get_class()
    if type_class not in (h5py.h5t.STRING, h5py.h5t.INTEGER, h5py.h5t.FLOAT):
        raise place.fail(f"attribute must hold a string or a number, got {_CLASS_NAMES.get(type_class, type_class)}")
    space = attribute.get_space()
    if space.get_simple_extent_type() == h5py.h5s.NULL:
        raise place.fail("attribute holds no value (empty dataspace)")
    items = math.prod(space.shape) if space.get_simple_extent_type() == h5py.h5s.SIMPLE else 1
    if items > _MAX_ATTRIBUTE_ITEMS or type_id.get_size() > _MAX_STRING_BYTES:
        raise place.fail(f"attribute declares {items} items of {type_id.get_size()} bytes: too large")
    return not (type_class == h5py.h5t.STRING and type_id.is_variable_str())


def _read_attribute(owner: Any, name: str, place: _Place, required: bool) -> Any:
    if name not in owner.attrs:
        if required:
            raise cache_error(place.path, name, "required root attribute is missing")
        return None
    place.at(name)
    value = owner.attrs[name]
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise place.fail(f"root attribute must be a single value, got an array of shape {value.shape}")
        value = value[()]
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise place.fail("root attribute is not valid UTF-8") from None
    return value


def _feature_attributes(node: Any, place: _Place) -> dict[str, Any]:
    """``feature_names`` ((F,) strings) and ``feature_kind`` (a string): attributes of the ``features`` dataset."""
    found: dict[str, Any] = {}
    if "feature_names" in node.attrs:
        place.at("feature_names")
        value = node.attrs["feature_names"]
        if not isinstance(value, np.ndarray) or value.ndim != 1:
            raise place.fail(f"attribute of 'features' must be a 1-D array of strings, got {show(value)}")
        found["feature_names"] = value
    if "feature_kind" in node.attrs:
        place.at("feature_kind")
        value = node.attrs["feature_kind"]
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                raise place.fail("attribute of 'features' is not valid UTF-8") from None
        if not isinstance(value, str):
            raise place.fail(f"attribute of 'features' must be a string, got {show(value)}")
        found["feature_kind"] = value
    return found


# -- reading -------------------------------------------------------------------------------------------------


def _read_strings(header: _Header, place: _Place) -> tuple[str, ...]:
    """A string dataset as a tuple of str, read in blocks of rows (bounded temporary memory)."""
    import h5py

    node = h5py.Dataset(header.node)
    rows = header.shape[0]
    width = 16 if header.variable_strings else max(1, node.dtype.itemsize)
    block = max(1, _STRING_BLOCK_BYTES // width)
    texts: list[str] = []
    try:
        for start in range(0, rows, block):
            texts.extend(str(item) for item in np.asarray(node.asstr()[start : start + block]).reshape(-1))
    except UnicodeDecodeError:
        raise place.fail("holds bytes that are not valid UTF-8") from None
    return tuple(texts)


def _read_all(h5file: Any, headers: dict[str, _Header], place: _Place) -> dict[str, Any]:
    import h5py

    arrays: dict[str, Any] = {}
    for name, header in headers.items():
        place.at(name)
        if header.kind == "str":
            arrays[name] = _read_strings(header, place)
        else:
            arrays[name] = h5py.Dataset(header.node)[()]
    if "features" in headers:
        arrays.update(_feature_attributes(h5py.Dataset(headers["features"].node), place))
    return arrays


def _check_root(attributes: dict[str, Any], place: _Place) -> None:
    path = place.path
    file_format = attributes["format"]
    if not isinstance(file_format, str) or file_format != FORMAT_NAME:
        raise cache_error(path, "format", f"is {show(file_format)}, expected {FORMAT_NAME!r}")
    version = attributes["format_version"]
    if not isinstance(version, int | np.integer) or int(version) != FORMAT_VERSION:
        raise cache_error(
            path, "format_version", f"{show(version)} is not supported (this reader knows {FORMAT_VERSION})"
        )
    if not isinstance(attributes["score_kind"], str):
        raise cache_error(path, "score_kind", f"must be a string, got {show(attributes['score_kind'])}")
    source = attributes["source"]
    if source is not None and not isinstance(source, str):
        raise cache_error(path, "source", f"must be a string, got {show(source)}")


def _read_once(path: str, file_size: int, trusted: bool, report: Callable[[str], None] | None) -> dict[str, Any] | None:
    """The constructor arguments of the cache in ``path``, or None when the file is not fully checksummed and
    ``trusted`` is False (the caller then reads it under the guard first)."""
    import h5py

    place = _Place(path, report)
    with _translated(place), h5py.File(path, "r") as h5file:
        checksummed = _is_checksummed_object(h5file.id)
        attribute_headers = {name: _attribute_header(h5file.id, name, place) for name in _ROOT_ATTRIBUTES}
        checksummed &= all(found is not False for found in attribute_headers.values())
        if not (checksummed or trusted):
            return None
        place.at(None)
        attributes = {
            name: _read_attribute(h5file, name, place, required=name != "source") for name in _ROOT_ATTRIBUTES
        }
        _check_root(attributes, place)
        headers: dict[str, _Header] = {}
        for name in _KINDS:
            header = _header(h5file, name, place, file_size)
            if header is None:
                if name in _REQUIRED:
                    raise place.fail("required dataset is missing")
                continue
            headers[name] = header
        _check_shapes(headers, place)
        if "features" in headers:
            for name in _FEATURE_ATTRIBUTES:
                checksummed &= _attribute_header(headers["features"].node, name, place) is not False
        if not (trusted or (all(header.checksummed for header in headers.values()) and checksummed)):
            return None
        arrays = _read_all(h5file, headers, place)
    source = attributes["source"]
    return {
        "score_kind": attributes["score_kind"],
        "source": "" if source is None else source,
        "path": path,
        **arrays,
    }


def read_cache_file(
    path: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    trusted: bool = False,
    report: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The constructor arguments of :class:`~ensemble_env.cache.LogitCache` for the cache file ``path``.

    A file that is not fully checksummed (see the module docstring) is first read by the helper process of
    :mod:`ensemble_env.cache.guard`, which is given ``timeout`` seconds (default: 20 s plus 1 s per 20 MB);
    ``trusted=True`` skips that (the helper itself reads so). ``report`` is called with each field's name as
    reading reaches it. Raises FileNotFoundError or :class:`~ensemble_env.cache.CacheError`.
    """
    name = str(path)
    file_path = Path(path)
    if not file_path.exists():
        raise FileNotFoundError(f"{name}: no such cache file")
    if not file_path.is_file():
        what = "a folder" if file_path.is_dir() else "not a regular file (a device, a pipe, ...)"
        raise CacheError(f"{name}: is {what}, not a cache file")
    place = _Place(name, None)
    with _translated(place):
        version = superblock_version(file_path)
        before = os.stat(file_path)
    if version is None:
        raise CacheError(f"{name}: not an HDF5 file (a logit cache is HDF5, see docs/cache-format.md)")
    if not trusted and version >= 2:
        found = _read_once(name, before.st_size, False, report)
        if found is not None:
            return found
    if not trusted:
        guard.check(name, before.st_size, timeout)
        after = os.stat(file_path)
        if (after.st_ino, after.st_size, after.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
            raise CacheError(f"{name}: the file changed while it was being checked; read it again")
    found = _read_once(name, before.st_size, True, report)
    assert found is not None  # trusted reads always return
    return found


# -- the guard's helper process -----------------------------------------------------------------


def serve() -> None:
    """The loop of :mod:`ensemble_env.cache.guard`'s helper process: read each requested file with
    :func:`read_cache_file` and report each field it reaches, as JSON lines on standard output.

    Each request is ``{"path": ..., "seconds": the parent's time limit}``. Where there is ``signal.alarm``
    (POSIX), each read is covered by an alarm left to its default action (the kernel ends the process even while
    HDF5 spins in C), at :func:`~ensemble_env.cache.guard.alarm_seconds` of the limit: a helper whose parent is
    gone never spins on a file for long. The loop ends when standard input closes (the parent is gone).
    """

    def say(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    alarm = getattr(signal, "alarm", None)
    if alarm is not None:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    say({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        path = request["path"]
        if alarm is not None:
            alarm(guard.alarm_seconds(float(request.get("seconds", math.inf))))
        try:
            read_cache_file(path, trusted=True, report=lambda field: say({"field": field}))
        except FileNotFoundError as error:
            say({"missing": str(error)})
        except CacheError as error:
            say({"error": str(error)})
        except Exception as error:  # a bug, not the file's fault: say so rather than look like a crash
            say({"error": f"{path}: cannot be read ({type(error).__name__}: {str(error)[:200]})"})
        else:
            say({"done": True})
        finally:
            if alarm is not None:
                alarm(0)
