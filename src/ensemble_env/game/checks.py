"""How every numeric option of the game is checked: a value out of range, of the wrong type or a bool is refused
with a ValueError naming the option and the value, never clipped or coerced.

>>> real_option(0.5, "alpha", 0.0, 1.0)
0.5
>>> integer_option(True, "window", 1, 10)
Traceback (most recent call last):
...
ValueError: window must be an integer in [1, 10], got True
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_REAL", "integer_option", "real_option"]

#: the largest magnitude of a real option (beyond it a value is refused, never clipped)
MAX_REAL = 1e6


def real_option(value: Any, option: str, low: float, high: float) -> float:
    """A finite real option in [low, high]: Python or numpy numbers (not bools), as a float."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{option} must be a number in [{low:g}, {high:g}], got {value!r}")
    number = float(value)
    if not low <= number <= high:  # NaN fails both comparisons
        raise ValueError(f"{option} must be a finite number in [{low:g}, {high:g}], got {value!r}")
    return number


def integer_option(value: Any, option: str, low: int, high: int) -> int:
    """An integer option in [low, high]: Python or numpy integers (not bools), as an int."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or not low <= value <= high:
        raise ValueError(f"{option} must be an integer in [{low:,}, {high:,}], got {value!r}")
    return int(value)
