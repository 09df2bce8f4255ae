"""The refusals of a snapshot's values (:mod:`ensemble_env.game.snapshot_check` and the components' checks,
:mod:`ensemble_env.game.components`): where a check fails, and the ValueError that names the field, the copy and the
value; and the questions a copy answered, which several checks rebuild."""

from __future__ import annotations

from typing import Any

import numpy as np

from ensemble_env.game.records import CopyState, Counter, Settings
from ensemble_env.text import show

__all__ = ["answered_questions", "first", "number", "refusal"]


def number(value: Any) -> Any:
    """A numpy scalar as a Python number (for messages)."""
    return value.item() if isinstance(value, np.generic) else value


def first(mask: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first True entry of ``mask`` (C order), None when there is none."""
    if not mask.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask.reshape(-1))), mask.shape))


def refusal(field: str, index: tuple[Any, ...], value: Any, problem: str) -> ValueError:
    """The ValueError of a snapshot's ``field`` whose entry ``index`` holds ``value``: ``problem``."""
    where = "[" + ", ".join(str(part) for part in index) + "]" if index else ""
    return ValueError(f"set_state: {field}{where} = {show(number(value))} {problem}")


def answered_questions(state: CopyState, settings: Settings, env: int, steps: np.ndarray) -> np.ndarray:
    """The questions copy ``env`` answered at the given steps of its episode (a copy stepped past the end of its
    episode answers its last question again)."""
    counters = state.counters
    start = int(counters[env, Counter.START])
    last = min(settings.episode_length, int(counters[env, Counter.STREAM])) - 1
    return state.order[env if settings.per_copy_order else 0, start + np.minimum(steps, last)]
