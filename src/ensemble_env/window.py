"""Sliding windows of answered questions, one per environment copy, and the team statistics over them.

The decider observes statistics of its team over the last T answered questions (all N models' correctness
and predictions on those questions are known once the label is revealed). :class:`WindowStats` keeps, per
copy, a ring buffer of the last T questions and evaluates the statistics of ``ensemble_env.metrics`` on the
rows of the window restricted to the team's columns. Every statistic is invariant to the order of the rows,
so the ring buffer's rotation does not matter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ensemble_env.metrics import METRICS, window_statistic

__all__ = ["WindowStats"]


class WindowStats:
    """Per-copy windows of the last ``window`` answered questions.

    Parameters
    ----------
    num_envs
        Number of independent copies B.
    n_models
        Pool size N.
    window
        T, the window length.
    max_choices
        C, the largest choice count (category count for Fleiss' kappa).
    """

    def __init__(self, num_envs: int, n_models: int, window: int, max_choices: int) -> None:
        self.num_envs, self.n_models, self.window, self.max_choices = num_envs, n_models, window, max_choices
        self.correct = np.zeros((num_envs, window, n_models), dtype=bool)
        self.preds = np.zeros((num_envs, window, n_models), dtype=np.int64)
        self.labels = np.zeros((num_envs, window), dtype=np.int64)
        self.count = np.zeros(num_envs, dtype=np.int64)  # rows filled, <= window
        self.head = np.zeros(num_envs, dtype=np.int64)  # next row to write

    def clear(self, env_ids: np.ndarray) -> None:
        """Empty the windows of the given copies (at the start of an episode)."""
        self.count[env_ids] = 0
        self.head[env_ids] = 0

    def push(self, correct: np.ndarray, preds: np.ndarray, labels: np.ndarray) -> None:
        """Append one answered question to every copy's window: correct/preds (B, N), labels (B,)."""
        rows = np.arange(self.num_envs)
        self.correct[rows, self.head] = correct
        self.preds[rows, self.head] = preds
        self.labels[rows, self.head] = labels
        self.head = (self.head + 1) % self.window
        self.count = np.minimum(self.count + 1, self.window)

    def team_statistics(self, team: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """(B, len(names)) statistics of each copy's team (B, N) bool over its window."""
        values = np.zeros((self.num_envs, len(names)), dtype=np.float64)
        for env in range(self.num_envs):
            filled = int(self.count[env])
            members = np.flatnonzero(team[env])
            correct = self.correct[env, :filled][:, members]
            preds = self.preds[env, :filled][:, members]
            labels = self.labels[env, :filled]
            for k, name in enumerate(names):
                values[env, k] = window_statistic(name, correct, preds, labels, self.max_choices)
        return values

    def model_accuracy(self) -> np.ndarray:
        """(B, N) accuracy of every model over each copy's window (0 for an empty window)."""
        totals = np.zeros((self.num_envs, self.n_models), dtype=np.float64)
        for env in range(self.num_envs):
            filled = int(self.count[env])
            if filled:
                totals[env] = self.correct[env, :filled].mean(axis=0)
        return totals


def statistic_bounds(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of the named statistics, as float32 arrays."""
    low = np.array([METRICS[name].low for name in names], dtype=np.float32)
    high = np.array([METRICS[name].high for name in names], dtype=np.float32)
    return low, high
