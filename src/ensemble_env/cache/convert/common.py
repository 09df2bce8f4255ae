"""What every converter shares: the error, the messages that name where a problem is, and number parsing.

Every problem in an input raises :class:`ConversionError` (a ValueError) whose message names the file, the
line (or array) and the field, built by :func:`conversion_error`. :func:`parse_float` and :func:`number_problem` read
numbers the way both lm-eval samples files (:mod:`ensemble_env.cache.convert.samples`) and CSV tables
(:mod:`ensemble_env.cache.convert.arrays`) write them: JSON numbers or plain decimal text, finite only.

:func:`json_decoder` parses JSON so that no input can raise anything but a clear error: a number written
with more than :data:`MAX_DIGITS` characters, or beyond the float range (``1e400``), becomes a
:class:`_BadNumber` that every field reading numbers refuses by name (an unused field may hold it); nesting
deeper than :data:`MAX_DEPTH` is refused by :func:`check_depth`. A key written twice in one object with two
different values (``{"filtered_resps": A, "filtered_resps": B}``: Python's ``json`` keeps the last one silently)
raises :class:`DuplicateKeyError`, which the readers turn into an error naming the file, the line and the key;
a key repeated with an identical value (same JSON type, same value) loses nothing and is accepted.

Numbers written as text must be plain ASCII decimal (``-1.5``, ``2e-3``): Python's ``float()`` also reads
fullwidth or other Unicode digits (``"１２"``), spaces and underscores, which are refused here, by name
(:func:`looks_like_number` tells such text from words, e.g. a CSV header).

:func:`read_input` is how every converter reads a file (samples, results ``.json``, ``.npz``/``.npy``, CSV):
only a regular file (a FIFO, a device or a folder is refused without blocking on it), at most a number of
bytes (:data:`MAX_FILE_BYTES` by default, :data:`MAX_RESULTS_BYTES` for a run's results), and, given the
folder the user named, never through a symbolic link leading out of it.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import Any

from ensemble_env.text import show

__all__ = [
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_FILE_BYTES",
    "MAX_RESULTS_BYTES",
    "ConversionError",
    "DuplicateKeyError",
    "check_depth",
    "conversion_error",
    "decode_text",
    "json_decoder",
    "looks_like_number",
    "number_problem",
    "parse_float",
    "read_input",
]

#: a number written as text: ASCII digits only ([0-9], not \d, which matches every script's digits)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: characters that read as a minus sign (fullwidth and small hyphen-minus fold to '-' by NFKC already)
_MINUS_SIGNS = "\u2212\u2010\u2011\u2012\u2013\u2014"
#: largest file a converter reads by default, in bytes (a samples file, a CSV table, a .npz/.npy of arrays):
#: 1 GiB, far above lm-eval's samples files (a few MB per task); ``max_file_bytes`` of the converters (the
#: command line's ``--max-file-mb``) changes it
MAX_FILE_BYTES = 2**30
#: largest results ``*.json`` of a run read for hints on the task names (lm-eval writes some KB to a few MB)
MAX_RESULTS_BYTES = 8 * 2**20
#: longest number, in characters, read as a number (a float has at most 17 significant digits and 309
#: before its point; anything longer is corrupted or made to cost time)
MAX_DIGITS = 400
#: deepest nesting of JSON arrays and objects accepted in a samples file (lm-eval writes 4 or 5 levels)
MAX_DEPTH = 100
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


class ConversionError(ValueError):
    """An input cannot be converted; the message names the file, the line (or array) and the field."""


def _where(path: str | Path, line: int | None, field: str | None) -> str:
    place = str(path) if line is None else f"{path}, line {line}"
    return place if field is None else f"{place}: field '{field}'"


def conversion_error(path: str | Path, line: int | None, field: str | None, problem: str) -> ConversionError:
    return ConversionError(f"{_where(path, line, field)}: {problem}")


class _BadNumber:
    """A JSON number that is not read: written with too many characters, or outside the float range."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem

    def __repr__(self) -> str:
        return f"<{self.problem}>"

    def __eq__(self, other: object) -> bool:  # the same number written twice is the same value
        return isinstance(other, _BadNumber) and other.problem == self.problem

    def __hash__(self) -> int:
        return hash(self.problem)


def _json_int(text: str) -> int | _BadNumber:
    if len(text) > MAX_DIGITS:
        return _BadNumber(f"a number written with {len(text)} digits, more than {MAX_DIGITS}")
    return int(text)


def _json_float(text: str) -> float | _BadNumber:
    if len(text) > MAX_DIGITS:
        return _BadNumber(f"a number written with {len(text)} characters, more than {MAX_DIGITS}")
    number = float(text)
    if math.isinf(number):
        return _BadNumber(f"{text} (outside the float range)")
    return number


class DuplicateKeyError(ValueError):
    """A JSON object holds one key twice with different values (``key``, the ``first`` and the ``second`` value)."""

    def __init__(self, key: str, first: Any, second: Any) -> None:
        super().__init__(
            f"the key {show(key)} appears twice in one object with different values ({show(first)}, then "
            f"{show(second)}): which one is meant cannot be told, so neither is taken"
        )
        self.key, self.first, self.second = key, first, second


def _identical(first: Any, second: Any) -> bool:
    """Whether two decoded JSON values are the same value of the same JSON type (``1`` is not ``1.0`` nor
    ``true``; ``0.0`` is not ``-0.0``); iterative, so a deep value cannot exhaust the stack."""
    pending = [(first, second)]
    while pending:
        left, right = pending.pop()
        if type(left) is not type(right):
            return False
        if isinstance(left, dict):
            if list(left) != list(right):
                return False
            pending.extend((left[key], right[key]) for key in left)
        elif isinstance(left, list):
            if len(left) != len(right):
                return False
            pending.extend(zip(left, right, strict=True))
        elif isinstance(left, float):
            if repr(left) != repr(right):  # NaN is NaN, -0.0 is not 0.0
                return False
        elif left != right:
            return False
    return True


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A decoded JSON object; a key written twice with different values raises :class:`DuplicateKeyError`."""
    result = dict(pairs)
    if len(result) == len(pairs):  # no key written twice: the common case, at C speed
        return result
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen and not _identical(seen[key], value):
            raise DuplicateKeyError(key, seen[key], value)
        seen[key] = value
    return result


def json_decoder(*, bounded_numbers: bool = True) -> json.JSONDecoder:
    """A JSON decoder whose objects refuse a key written twice with different values (:class:`DuplicateKeyError`, a
    ValueError) and, with ``bounded_numbers``, whose overlong or out-of-range numbers become :class:`_BadNumber`
    values (without it numbers are Python's: ``1e400`` is infinite, for a reader that refuses infinities itself)."""
    if not bounded_numbers:
        return json.JSONDecoder(object_pairs_hook=_object)
    return json.JSONDecoder(parse_int=_json_int, parse_float=_json_float, object_pairs_hook=_object)


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise ValueError when ``value`` nests arrays and objects deeper than ``limit`` levels."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit + 1):
        level = [
            item
            for container in level
            for item in (container.values() if isinstance(container, dict) else container)
            if isinstance(item, dict | list)
        ]
        if not level:
            return
    raise ValueError(f"arrays and objects nested more than {limit} levels deep")


def parse_float(value: Any) -> float | None:
    """A finite float from a JSON number or a numeric string; None when it is not a finite number.

    Strings must be a plain decimal number in ASCII (no spaces, underscores, hex, nor digits of other
    scripts such as fullwidth ``"１２"``) of at most :data:`MAX_DIGITS` characters; booleans are refused.
    """
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and len(value) <= MAX_DIGITS and _NUMBER.fullmatch(value):
            number = float(value)
        else:
            return None
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


def _ascii_reading(text: str) -> str:
    """``text`` with the non-ASCII characters that look like parts of a number read as ASCII: digits of any
    script (fullwidth ``１``, Arabic-Indic ``١``), fullwidth signs and points, minus signs."""
    characters = []
    for character in text:
        if character.isascii():
            characters.append(character)
        elif unicodedata.decimal(character, None) is not None:
            characters.append(str(unicodedata.decimal(character)))
        elif character in _MINUS_SIGNS:
            characters.append("-")
        else:
            characters.append(unicodedata.normalize("NFKC", character))
    return "".join(characters)


def looks_like_number(value: Any) -> bool:
    """Whether ``value`` is a number by a looser reading than :func:`parse_float`'s: one Python's ``float()``
    reads (other scripts' digits, spaces, underscores, ``nan``) or one once its non-ASCII look-alikes of
    digits and signs are read as ASCII (``"－1.5"``). Such text is refused by name, not taken for a word.

    >>> looks_like_number("１２"), looks_like_number("－1.5"), looks_like_number("model_1")
    (True, True, False)
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    if not isinstance(value, str) or parse_float(value) is not None:
        return True
    try:
        float(value)
        return True
    except ValueError:
        pass
    folded = _ascii_reading(value).replace("_", "").strip()
    return bool(_NUMBER.fullmatch(folded)) or folded.lower() in _NON_FINITE


def number_problem(value: Any) -> str:
    """Why ``value`` (refused by :func:`parse_float`) is not a usable number."""
    if isinstance(value, _BadNumber):
        return f"is {value.problem}"
    if isinstance(value, float) or (isinstance(value, str) and value.strip().lower() in _NON_FINITE):
        return f"{show(value)} is not finite (NaN or infinity)"
    if isinstance(value, str) and len(value) > MAX_DIGITS:
        return f"{show(value)} is written with {len(value)} characters, more than {MAX_DIGITS}"
    if isinstance(value, str) and not value.isascii() and looks_like_number(value):
        foreign = next(character for character in value if not character.isascii())
        name = unicodedata.name(foreign, "an unnamed character")
        return (
            f"{show(value)} is not a number written in ASCII ({foreign!r} is U+{ord(foreign):04X} {name}); "
            "numbers are read only as written with the characters 0-9 . + - e"
        )
    if isinstance(value, str) and looks_like_number(value) and not _NUMBER.fullmatch(value):
        return f"{show(value)} is not a number as written: only plain decimal is read (no spaces or underscores)"
    if (isinstance(value, str) and _NUMBER.fullmatch(value)) or (
        isinstance(value, int) and not isinstance(value, bool)
    ):
        return f"{show(value)} is outside the float range"
    return f"{show(value)} is not a number"


# -- reading input files -----------------------------------------------------------------------------------------

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives (Windows)
        return False


def read_input(
    path: str | Path, *, limit: int = MAX_FILE_BYTES, root: str | Path | None = None, limit_option: str = ""
) -> bytes:
    """The bytes of the input file ``path``, read safely.

    Only a regular file is read: a FIFO, a device, a socket or a folder is refused, checked with ``os.stat``
    and again on the open file (opened non-blocking, so a FIFO cannot block); a file of more than ``limit``
    bytes is refused before it is read, and one that grows while it is read is refused too. With ``root``
    (the folder the user gave), a file whose real path, symbolic links resolved, is not inside ``root`` is
    refused, so a link leading out of the folder (to ``/dev/zero``, ``/etc/...``) is never followed.
    ``limit_option`` names how the caller's user raises ``limit`` (for the message).

    Raises FileNotFoundError when there is no file (a broken link included) and :class:`ConversionError`
    naming the file (and where a link leads) otherwise.
    """
    real = os.path.realpath(path)
    via = f" (a symbolic link to {real})" if os.path.islink(path) else ""
    if root is not None:
        top = os.path.realpath(root)
        if not _inside(real, top):
            raise ConversionError(
                f"{path}: a symbolic link leading out of {root} (to {real}); the converters read only files "
                f"inside the folder given: copy the file into it, or give a folder holding both"
            )
    try:
        before = os.stat(real)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file{via}") from None
    except OSError as error:
        raise ConversionError(f"{path}: cannot be read ({error.strerror or error}){via}") from None
    if not stat.S_ISREG(before.st_mode):
        raise ConversionError(f"{path}: {_kind(before.st_mode)}{via}, not a regular file; it is not read")
    too_big = f"more than the {limit} bytes read from such a file" + (
        f" (raise the limit with {limit_option})" if limit_option else ""
    )
    if before.st_size > limit:
        raise ConversionError(f"{path}: {before.st_size} bytes{via}, {too_big}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        handle = os.open(real, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError as error:  # replaced since the stat (by a link or a FIFO: O_NOFOLLOW, O_NONBLOCK), no access
        raise ConversionError(f"{path}: cannot be read ({error.strerror or error}){via}") from None
    try:
        opened = os.fstat(handle)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise ConversionError(f"{path}: replaced while it was opened{via}; it is not read")
        if opened.st_size > limit:
            raise ConversionError(f"{path}: {opened.st_size} bytes{via}, {too_big}")
        parts: list[bytes] = []
        remaining = opened.st_size + 1  # one byte more than its size: a file still growing is noticed
        while remaining > 0:
            try:
                part = os.read(handle, min(remaining, 2**30))
            except OSError as error:
                raise ConversionError(f"{path}: cannot be read ({error.strerror or error}){via}") from None
            if not part:
                break
            parts.append(part)
            remaining -= len(part)
    finally:
        os.close(handle)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > opened.st_size:
        raise ConversionError(f"{path}: grew while it was read{via}; convert a file that is complete")
    return data


def decode_text(path: str | Path, data: bytes) -> str:
    """``data`` (read from ``path``) as UTF-8 text; ConversionError naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise conversion_error(path, line, None, f"not UTF-8 text ({error.reason})") from None
