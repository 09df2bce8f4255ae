"""What every converter shares: the error, the messages that name where a problem is, and number parsing.

Every problem in an input raises :class:`ConversionError` (a ValueError) whose message names the file, the
line (or array) and the field, built by :func:`_error`. :func:`_parse_float` and :func:`_number_problem` read
numbers the way both lm-eval samples files (:mod:`ensemble_env.convert.samples`) and CSV tables
(:mod:`ensemble_env.convert.arrays`) write them: JSON numbers or plain decimal text, finite only.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ensemble_env.cache import _show

__all__ = ["ConversionError"]

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


class ConversionError(ValueError):
    """An input cannot be converted; the message names the file, the line (or array) and the field."""


def _where(path: str | Path, line: int | None, field: str | None) -> str:
    place = str(path) if line is None else f"{path}, line {line}"
    return place if field is None else f"{place}: field '{field}'"


def _error(path: str | Path, line: int | None, field: str | None, problem: str) -> ConversionError:
    return ConversionError(f"{_where(path, line, field)}: {problem}")


def _parse_float(value: Any) -> float | None:
    """A finite float from a JSON number or a numeric string; None when it is not a finite number.

    Strings must look like a plain decimal number (no spaces, underscores or hex); booleans are refused.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and _NUMBER.fullmatch(value):
        number = float(value)
    else:
        return None
    return number if math.isfinite(number) else None


def _number_problem(value: Any) -> str:
    """Why ``value`` (refused by :func:`_parse_float`) is not a usable number."""
    if isinstance(value, float) or (isinstance(value, str) and value.strip().lower() in _NON_FINITE):
        return f"{_show(value)} is not finite (NaN or infinity)"
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return f"{_show(value)} overflows a float"
    return f"{_show(value)} is not a number"
