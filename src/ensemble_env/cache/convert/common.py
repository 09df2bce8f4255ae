"""What every converter shares: the error, the messages that name where a problem is, and number parsing.

Every problem in an input raises :class:`ConversionError` (a ValueError) whose message names the file, the
line (or array) and the field, built by :func:`conversion_error`. :func:`parse_float` and :func:`number_problem` read
numbers the way both lm-eval samples files (:mod:`ensemble_env.cache.convert.samples`) and CSV tables
(:mod:`ensemble_env.cache.convert.arrays`) write them: JSON numbers or plain decimal text, finite only.

:func:`json_decoder` parses JSON so that no input can raise anything but a clear error: a number written
with more than :data:`MAX_DIGITS` characters, or beyond the float range (``1e400``), becomes a
:class:`_BadNumber` that every field reading numbers refuses by name (an unused field may hold it); nesting
deeper than :data:`MAX_DEPTH` is refused by :func:`check_depth`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ensemble_env.text import show

__all__ = [
    "MAX_DEPTH",
    "MAX_DIGITS",
    "ConversionError",
    "check_depth",
    "conversion_error",
    "json_decoder",
    "number_problem",
    "parse_float",
]

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
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


def json_decoder() -> json.JSONDecoder:
    """A JSON decoder whose overlong or out-of-range numbers become :class:`_BadNumber` values."""
    return json.JSONDecoder(parse_int=_json_int, parse_float=_json_float)


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

    Strings must look like a plain decimal number (no spaces, underscores or hex) of at most
    :data:`MAX_DIGITS` characters; booleans are refused.
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


def number_problem(value: Any) -> str:
    """Why ``value`` (refused by :func:`parse_float`) is not a usable number."""
    if isinstance(value, _BadNumber):
        return f"is {value.problem}"
    if isinstance(value, float) or (isinstance(value, str) and value.strip().lower() in _NON_FINITE):
        return f"{show(value)} is not finite (NaN or infinity)"
    if isinstance(value, str) and len(value) > MAX_DIGITS:
        return f"{show(value)} is written with {len(value)} characters, more than {MAX_DIGITS}"
    if (isinstance(value, str) and _NUMBER.fullmatch(value)) or (
        isinstance(value, int) and not isinstance(value, bool)
    ):
        return f"{show(value)} is outside the float range"
    return f"{show(value)} is not a number"
