"""The one rule for a seed, wherever a seed enters the project: the game's ``reset`` and its adapters, the baselines
and their estimators (:func:`ensemble_env.baselines.arguments.seed`), the augment functions, the synthetic caches and
splits, the benchmark's folds and scripts.

A seed is a non-negative integer, a Python or numpy integer of any size (as :class:`numpy.random.SeedSequence` takes
it), or None where an unseeded draw is allowed. Anything else is refused with a ValueError naming where it entered
and the value, never coerced: ``True`` is not seed 1, ``"0"`` not seed 0, ``[1, 2]`` not a SeedSequence's entropy,
``1.0`` not seed 1.

>>> check_seed(3), check_seed(None)
(3, None)
>>> check_seed(True, "permuted_copies")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: permuted_copies: seed must be None or a non-negative integer (...), got True of type bool
>>> check_seed("0", "certified_teams", optional=False)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: certified_teams: seed must be a non-negative integer (...), got '0' of type str
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np

from ensemble_env.text import show

__all__ = ["check_seed"]


@overload
def check_seed(seed: Any, where: str = ..., *, optional: Literal[False]) -> int: ...
@overload
def check_seed(seed: Any, where: str = ..., *, optional: bool = ...) -> int | None: ...
def check_seed(seed: Any, where: str = "reset", *, optional: bool = True) -> int | None:
    """``seed`` as numpy's generators take it: a non-negative integer (a Python or numpy integer of any size) as a
    Python int, or None when ``optional`` (an unseeded draw); anything else (a bool, a negative number, a float, a
    string, a sequence, None when not ``optional``) raises a ValueError naming ``where`` and the value."""
    if seed is None and optional:
        return None
    if seed is None or isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer) or seed < 0:
        kinds = (
            "None or a non-negative integer (int or numpy integer, not a bool)"
            if optional
            else ("a non-negative integer (int or numpy integer, not a bool or None)")
        )
        raise ValueError(f"{where}: seed must be {kinds}, got {show(seed)} of type {type(seed).__name__}")
    return int(seed)
