"""How the baselines' public functions check their arguments: by type and by value, as the environment checks its
options (:mod:`ensemble_env.game.checks`), a ValueError naming the argument and the value, never a value clipped,
coerced or read letter by letter.

- :func:`whole` and :func:`real`: one whole number or one finite real in a range (the environment's own checks,
  :func:`~ensemble_env.game.checks.integer_option` and :func:`~ensemble_env.game.checks.real_option`: bools and text
  refused, NaN and infinities refused).
- :func:`grid`: a list of such values, the grid a constant is chosen from (not a string, not empty, at most
  :data:`MAX_GRID` values).
- :func:`names`: a list of names (a string is refused: ``"ftl_team"`` is not the letters of a list).
- :func:`real_array`, :func:`bool_array`, :func:`ranking`: arrays of stated shapes, finite reals within a range,
  booleans, a ranking of the arms.
- :func:`bounds`: a reward range (low, high), two finite numbers, low below high.
- :func:`seed`: a seed, by the project's one rule (:func:`ensemble_env.seeds.check_seed`: a non-negative integer, or
  None where an unseeded draw is allowed; ``True``, ``"0"``, ``[1, 2]`` refused).
- :func:`instance`: an object of the expected type (a :class:`~ensemble_env.game.reward.RewardSettings`, a cache).

>>> whole(16, "window", 1, 100), real(0.5, "exploration", 0.0, 1.0)
(16, 0.5)
>>> grid("16", "windows", lambda value, option: whole(value, option, 1, 100))
Traceback (most recent call last):
...
ValueError: windows must be a list of values, got the string '16'
>>> real_array([[1.0, float("nan")]], "rewards", ndim=2)
Traceback (most recent call last):
...
ValueError: rewards must hold finite numbers: rewards[0, 1] is nan
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, overload

import numpy as np

from ensemble_env.game.checks import integer_option, real_option
from ensemble_env.seeds import check_seed
from ensemble_env.text import show

__all__ = [
    "MAX_GRID",
    "bool_array",
    "bounds",
    "grid",
    "instance",
    "names",
    "ranking",
    "real",
    "real_array",
    "seed",
    "whole",
]

#: the most values a grid of constants may hold (each value is one simulation of the protocol on the training tasks)
MAX_GRID = 64

T = TypeVar("T")


def whole(value: Any, option: str, low: int, high: int) -> int:
    """``value`` as an int in [low, high] (Python or numpy integers, not bools), else a ValueError naming ``option``."""
    return integer_option(value, option, low, high)


def real(value: Any, option: str, low: float, high: float, *, above: bool = False) -> float:
    """``value`` as a finite float in [low, high] (``above``: in (low, high]), else a ValueError naming ``option``."""
    number = real_option(value, option, low, high)
    if above and number <= low:
        raise ValueError(f"{option} must be a number in ({low:g}, {high:g}], got {value!r}")
    return number


def _listed(value: Any, option: str) -> list[Any]:
    """The items of a list-like ``value`` (a list, tuple, range or 1-D array); ValueError for a string, a mapping, a
    number or anything else."""
    if isinstance(value, str | bytes):
        raise ValueError(f"{option} must be a list of values, got the string {show(value)}")
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise ValueError(f"{option} must be a list of values, got {show(value)}")
    if isinstance(value, np.ndarray) and value.ndim != 1:
        raise ValueError(f"{option} must be a list of values, got an array of shape {value.shape}")
    return list(value)


def grid(values: Any, option: str, check: Callable[[Any, str], T]) -> list[T]:
    """The values of a grid, each checked by ``check(value, "option[i]")``: a non-empty list of at most
    :data:`MAX_GRID` values, never a string read letter by letter."""
    items = _listed(values, option)
    if not items:
        raise ValueError(f"{option} is empty: give at least one value to try on the training tasks")
    if len(items) > MAX_GRID:
        raise ValueError(f"{option} holds {len(items):,} values, more than the {MAX_GRID} a grid may hold")
    return [check(item, f"{option}[{index}]") for index, item in enumerate(items)]


def names(value: Any, option: str, known: Iterable[str] | None = None) -> list[str]:
    """A list of names (strings; each one of ``known`` when given), else a ValueError naming ``option`` and the first
    bad name."""
    items = _listed(value, option)
    choices = None if known is None else list(known)
    for name in items:
        if not isinstance(name, str):
            raise ValueError(f"{option} must hold names (strings), got {show(name)}")
        if choices is not None and name not in choices:
            raise ValueError(f"{option}: unknown name {show(name)}; the names are {', '.join(choices)}")
    return items


def real_array(
    value: Any,
    option: str,
    *,
    ndim: int,
    shape: tuple[int | None, ...] | None = None,
    low: float = -np.inf,
    high: float = np.inf,
) -> np.ndarray:
    """``value`` as a float64 array of ``ndim`` dimensions (``shape``: the lengths required, None for any), its values
    finite and in [low, high]; else a ValueError naming ``option``, the shape, the dtype or the first bad entry."""
    array = _array(value, option)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{option} must hold real numbers, got an array of dtype {array.dtype}")
    _check_shape(array, option, ndim, shape)
    with np.errstate(over="ignore"):  # an integer beyond float64's range becomes infinite, refused below
        numbers = array.astype(np.float64)
    bad = ~np.isfinite(numbers)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        entry = f"{option}[{', '.join(map(str, where))}]"
        raise ValueError(f"{option} must hold finite numbers: {entry} is {numbers[where]}")
    outside = (numbers < low) | (numbers > high)
    if outside.any():
        where = tuple(int(i) for i in np.argwhere(outside)[0])
        raise ValueError(
            f"{option} must hold numbers in [{low:g}, {high:g}]: {option}[{', '.join(map(str, where))}] is "
            f"{numbers[where]:g}"
        )
    return numbers


def bool_array(value: Any, option: str, *, shape: tuple[int | None, ...]) -> np.ndarray:
    """``value`` as a bool array of ``shape`` (None: any length), else a ValueError naming ``option``."""
    array = _array(value, option)
    if array.dtype != np.bool_:
        raise ValueError(f"{option} must hold booleans (True where right), got an array of dtype {array.dtype}")
    _check_shape(array, option, len(shape), shape)
    return array


def ranking(value: Any, option: str, n_arms: int) -> np.ndarray:
    """``value`` as an int64 array of ``n_arms`` ranks, each of 0 .. n_arms - 1 once (a permutation: 0 the first),
    else a ValueError naming ``option``."""
    array = _array(value, option)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{option} must hold integer ranks, got an array of dtype {array.dtype}")
    _check_shape(array, option, 1, (n_arms,))
    ranks = array.astype(np.int64)
    if not np.array_equal(np.sort(ranks), np.arange(n_arms)):
        got = show(ranks.tolist())
        raise ValueError(f"{option} must rank the {n_arms} arms 0 .. {n_arms - 1}, each once, got {got}")
    return ranks


def bounds(value: Any, option: str = "bounds") -> tuple[float, float]:
    """(low, high): two finite numbers, low below high (rewards are normalised by high - low), else a ValueError
    naming ``option``.

    >>> bounds((-2, 1))
    (-2.0, 1.0)
    >>> bounds((1.0, 1.0))
    Traceback (most recent call last):
    ...
    ValueError: bounds must be (low, high) with low < high (rewards are divided by high - low), got [1. 1.]
    """
    pair = real_array(value, option, ndim=1, shape=(2,))
    low, high = float(pair[0]), float(pair[1])
    if not low < high:
        raise ValueError(
            f"{option} must be (low, high) with low < high (rewards are divided by high - low), got {pair}"
        )
    return low, high


@overload
def seed(value: Any, option: str = ..., *, optional: Literal[False] = ...) -> int: ...
@overload
def seed(value: Any, option: str = ..., *, optional: bool) -> int | None: ...
def seed(value: Any, option: str = "seed", *, optional: bool = False) -> int | None:
    """``value`` as a seed (:func:`ensemble_env.seeds.check_seed`, the project's one rule): a non-negative integer
    (None too when ``optional``: an unseeded draw), else a ValueError naming ``option`` and the value."""
    return check_seed(value, option, optional=optional)


def instance(value: Any, option: str, kind: type[T]) -> T:
    """``value`` if it is a ``kind``, else a ValueError naming ``option`` and what it got."""
    if not isinstance(value, kind):
        raise ValueError(f"{option} must be a {kind.__name__}, got {type(value).__name__} {show(value)}")
    return value


def _array(value: Any, option: str) -> np.ndarray:
    if isinstance(value, str | bytes):
        raise ValueError(f"{option} must be an array of numbers, got the string {show(value)}")
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged lists
        raise ValueError(f"{option} must be an array of numbers ({show(str(error), 120)[1:-1]})") from None


def _check_shape(array: np.ndarray, option: str, ndim: int, shape: tuple[int | None, ...] | None) -> None:
    wanted = shape if shape is not None else (None,) * ndim
    letters = "ABCDEFGH"
    if array.ndim != ndim or any(
        size is not None and size != got for size, got in zip(wanted, array.shape, strict=True)
    ):
        expected = ", ".join(str(size) if size is not None else letters[k] for k, size in enumerate(wanted))
        raise ValueError(f"{option} must have shape ({expected}{',' if ndim == 1 else ''}), got shape {array.shape}")
