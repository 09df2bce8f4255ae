"""The log of a training run, as :func:`~ensemble_mappo.training.train` writes it once per update.

:class:`RunLog` times the run, writes each update's row (:func:`~ensemble_mappo.progress_format.rollout_row` and
the update's losses, in the columns of :func:`~ensemble_mappo.progress_format.progress_columns`) to every logger
(:mod:`ensemble_mappo.loggers`: ``progress.csv``, TensorBoard) and moves the progress bar (:func:`progress_bar`).
The run's budget is :mod:`ensemble_mappo.budget`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ensemble_mappo.budget import Budget
from ensemble_mappo.frame import StepRecord
from ensemble_mappo.loggers import ProgressLog, TensorBoardLog, check_loggers
from ensemble_mappo.progress_format import progress_columns, rollout_row
from ensemble_mappo.runs import PROGRESS_NAME

__all__ = ["RunLog", "progress_bar"]


def progress_bar(total: int, initial: int, enabled: bool) -> Any:
    """A tqdm bar over ``total`` steps from ``initial`` (hidden unless ``enabled``; a no-op without tqdm)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is part of the mappo extra
        return _NoBar()
    return tqdm(total=total, initial=initial, unit="step", unit_scale=True, disable=not enabled, dynamic_ncols=True)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **values: Any) -> None:
        pass

    def close(self) -> None:
        pass


class RunLog:
    """The log of one training run: ``progress.csv``, the other ``loggers`` (:func:`check_loggers`: TensorBoard) and
    the progress bar; a context manager.

    ``start`` is the number of updates already done (a resumed run: the log keeps its rows up to there).
    """

    def __init__(
        self,
        out_dir: Path,
        budget: Budget,
        models: Sequence[str],
        *,
        algorithm: str = "mappo",
        start: int = 0,
        resumed: bool = False,
        progress: bool = True,
        loggers: Sequence[str] = ("csv",),
    ) -> None:
        self.budget, self.models, self.start = budget, tuple(models), start
        columns = progress_columns(self.models, algorithm)
        # every check first (the loggers, the TensorBoard folder, the kept history), then the writes
        board = TensorBoardLog(out_dir) if "tensorboard" in check_loggers(loggers) else None
        self.file = ProgressLog(
            out_dir / PROGRESS_NAME, columns, start if resumed else None, batch_size=budget.batch_size
        )
        self.board = board
        if board is not None:
            try:
                board.open(self.file.kept, columns)
            except BaseException:
                self.file.close()
                board.close()
                raise
        self.bar = progress_bar(budget.steps, start * budget.batch_size, progress)
        self.started = time.perf_counter()

    def write(
        self,
        iteration: int,
        *,
        learning_rate: float,
        stage: int,
        record: StepRecord,
        rewards: np.ndarray,
        losses: Mapping[str, float],
    ) -> dict[str, float]:
        """Log update number ``iteration`` (counted from 1) and return its row.

        ``stage`` is the schedule's (1 without one), ``record`` and ``rewards`` the rollout's (:func:`rollout_row`),
        ``losses`` the update's values (:meth:`ensemble_mappo.frame.Learner.log_row`).
        """
        elapsed = time.perf_counter() - self.started
        batch_size = self.budget.batch_size
        row = {
            "iteration": iteration,
            "global_step": iteration * batch_size,
            "time/elapsed": elapsed,
            "time/sps": (iteration - self.start) * batch_size / elapsed,
            "charts/learning_rate": learning_rate,
            "charts/stage": float(stage),
            **rollout_row(record, rewards, self.models),
            **losses,
        }
        self.file.write(row)
        if self.board is not None:
            self.board.write(row)
        self.bar.update(batch_size)
        self.bar.set_postfix(
            sps=f"{row['time/sps']:.0f}",
            reward=f"{row['env/reward']:+.3f}",
            acc=f"{row['env/accuracy']:.3f}",
            team=f"{row['env/team_size']:.2f}",
        )
        return row

    def selection(self, chosen: Mapping[str, Any]) -> None:
        """Log the choice on validation (``selection.json``) to the loggers that take it (TensorBoard)."""
        if self.board is not None:
            self.board.selection(chosen, self.budget.batch_size, self.budget.iterations * self.budget.batch_size)

    def close(self) -> None:
        """Close the progress bar and the files."""
        self.bar.close()
        self.file.close()
        if self.board is not None:
            self.board.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
