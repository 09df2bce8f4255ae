"""The bookkeeping of a training run: its budget, its log (``progress.csv``, TensorBoard) and its progress bar.

- :class:`Budget`: how many rollouts a budget (``passes`` or ``total_steps``) runs, and the line that says so;
  a budget above :data:`~ensemble_mappo.config.MAX_TOTAL_STEPS` is refused, and :func:`check_rollout_size`
  refuses a rollout storage above :data:`~ensemble_mappo.config.MAX_ROLLOUT_BYTES` before it is allocated.
- :func:`progress_columns`, :func:`rollout_row`, :func:`losses_row`: the columns of ``progress.csv`` and the
  values of one update's row, under namespaced keys (``env/accuracy``, ``losses/value_loss``, ...).
- :class:`ProgressLog`: ``progress.csv`` (one row per update; on resume the history up to the checkpoint is
  kept, read and checked by :func:`ensemble_mappo.runs.progress_rows` and rewritten through
  :mod:`ensemble_env.files`) and, optionally, TensorBoard event files.
- :class:`RunLog`: what :func:`~ensemble_mappo.training.train` calls once per update: times the run,
  writes the row and moves the progress bar.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ensemble_env import files
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_mappo.agents import Agents
from ensemble_mappo.collection import StepRecord
from ensemble_mappo.config import MAX_ROLLOUT_BYTES, MAX_TOTAL_STEPS, TrainConfig
from ensemble_mappo.ppo import UpdateStats
from ensemble_mappo.runs import AGENT_LOSS_KEYS, PROGRESS_NAME, progress_columns, progress_rows

__all__ = [
    "AGENT_LOSS_KEYS",
    "PROGRESS_NAME",
    "Budget",
    "ProgressLog",
    "RunLog",
    "check_rollout_size",
    "losses_row",
    "progress_bar",
    "progress_columns",
    "rollout_row",
]


# -- the budget ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """What a training budget runs: whole rollouts of ``num_envs x num_steps`` steps, at least the steps asked.

    >>> print(Budget.plan(TrainConfig(passes=5), 20).describe())  # doctest: +NORMALIZE_WHITESPACE
    budget: 5 passes x 20 train questions = 100 steps, rounded up to 1 rollout of 64 copies x 64 steps
    = 4,096 steps (204.8 passes)
    >>> print(Budget.plan(TrainConfig(total_steps=8192), 2560).describe())
    budget: 8,192 steps (--total-steps) = 2 rollouts of 64 copies x 64 steps (3.2 passes of 2,560 train questions)
    """

    questions: int
    """Questions in the training stream (the train split of the config's tasks)."""
    passes: float | None
    """The passes asked for (None: the budget was given as ``total_steps``)."""
    requested: int
    """Env steps asked for: ``total_steps``, else ``passes x questions`` rounded up."""
    num_envs: int
    num_steps: int
    iterations: int
    """Rollouts (and updates) run: ``requested / (num_envs x num_steps)`` rounded up, at least 1."""

    @classmethod
    def plan(cls, config: TrainConfig, questions: int) -> Budget:
        """The budget of ``config`` over a stream of ``questions``; a ValueError when the steps asked for exceed
        :data:`~ensemble_mappo.config.MAX_TOTAL_STEPS` (the rounding up to whole rollouts adds less than one)."""
        batch_size = config.num_envs * config.num_steps
        asked = config.total_steps or config.passes * questions  # a float for passes: no huge integer is made
        if not asked <= MAX_TOTAL_STEPS:
            what = (
                f"{config.total_steps:,} steps"
                if config.total_steps
                else (f"passes={config.passes:g} x {questions:,} train questions = {asked:.4g} steps")
            )
            raise ValueError(
                f"budget: {what} is more than the limit of {MAX_TOTAL_STEPS:,} env steps of one run "
                "(ensemble_mappo.config.MAX_TOTAL_STEPS, about two weeks of CPU)"
            )
        requested = config.total_steps or math.ceil(config.passes * questions)
        return cls(
            questions=questions,
            passes=None if config.total_steps else config.passes,
            requested=requested,
            num_envs=config.num_envs,
            num_steps=config.num_steps,
            iterations=max(1, math.ceil(requested / batch_size)),
        )

    @classmethod
    def of_cache(cls, config: TrainConfig, cache: LogitCache) -> Budget:
        """The budget of training with ``config`` on ``cache``'s train split (of the config's tasks)."""
        return cls.plan(config, int(cache.select("train", _tasks(config)).size))

    @property
    def batch_size(self) -> int:
        """Steps of one rollout, ``num_envs x num_steps``."""
        return self.num_envs * self.num_steps

    @property
    def steps(self) -> int:
        """Env steps run: ``iterations x batch_size``."""
        return self.iterations * self.batch_size

    def describe(self) -> str:
        """One line: the budget asked for and what runs, saying when it is rounded up to whole rollouts."""
        rollouts = f"{self.iterations:,} rollout{'' if self.iterations == 1 else 's'}"
        shape = f"{rollouts} of {self.num_envs} copies x {self.num_steps} steps"
        questions = f"{self.questions:,} train question{'' if self.questions == 1 else 's'}"
        ran = self.steps / self.questions if self.questions else float("nan")
        passes = f"{ran:.4g} pass{'' if ran == 1 else 'es'}"
        if self.passes is None:
            asked = f"{self.requested:,} steps (--total-steps)"
            passes += f" of {questions}"
        else:
            asked = f"{self.passes:g} pass{'' if self.passes == 1 else 'es'} x {questions} = {self.requested:,} steps"
        if self.steps == self.requested:
            return f"budget: {asked} = {shape} ({passes})"
        return f"budget: {asked}, rounded up to {shape} = {self.steps:,} steps ({passes})"


def _tasks(config: TrainConfig) -> tuple[str, ...] | None:
    tasks = config.env.get("tasks")
    return None if tasks is None else tuple(tasks)


def check_rollout_size(agents: Agents, venv: EnsembleVectorEnv, num_steps: int) -> int:
    """The bytes of a rollout of ``num_steps`` steps of ``venv``'s copies (:meth:`Agents.rollout`), measured on
    one step before the whole is allocated; a ValueError when they exceed
    :data:`~ensemble_mappo.config.MAX_ROLLOUT_BYTES`."""
    one = agents.rollout(venv, 1)
    per_step = 0
    for item in dataclasses.fields(one):
        value = getattr(one, item.name)
        for array in value.values() if isinstance(value, dict) else [value]:
            per_step += array.element_size() * array.numel() if hasattr(array, "element_size") else array.nbytes
    total = per_step * num_steps
    if total > MAX_ROLLOUT_BYTES:
        raise ValueError(
            f"a rollout of num_envs={venv.num_envs:,} copies x num_steps={num_steps:,} steps would take "
            f"{total / 2**30:,.1f} GiB of storage, more than the limit of {MAX_ROLLOUT_BYTES / 2**30:g} GiB "
            "(ensemble_mappo.config.MAX_ROLLOUT_BYTES): lower num_envs or num_steps"
        )
    return total


# -- the log's rows -----------------------------------------------------------------------------------------
def rollout_row(record: StepRecord, rewards: np.ndarray, models: Sequence[str]) -> dict[str, float]:
    """The ``env/`` columns of one rollout: mean reward (``rewards``, (T, B)), accuracy, team size, cost, the
    episodes that ended in it, and how often each model was in the answering team."""
    selection = record.team.mean(axis=(0, 1)).tolist()
    nan = float("nan")
    row = {
        "env/reward": float(rewards.mean(dtype=np.float64)),
        "env/accuracy": float(record.correct.mean()),
        "env/team_size": float(record.team_size.mean()),
        "env/cost": float(record.cost.mean()),
        "env/episode_accuracy": float(np.mean(record.episode_accuracy)) if record.episode_accuracy else nan,
        "env/episode_return": float(np.mean(record.episode_return)) if record.episode_return else nan,
    }
    row.update({f"env/select/{model}": value for model, value in zip(models, selection, strict=True)})
    return row


def losses_row(stats: UpdateStats) -> dict[str, float]:
    """The ``losses/`` columns of one update: ``losses/value_loss`` (all heads), ``losses/<head>_value_loss``,
    ``losses/<agent>_<key>`` for each key of :data:`AGENT_LOSS_KEYS` the update measured, and
    ``losses/critic_grad_norm`` (an actor that did not learn has no entry; its columns stay empty)."""
    row = {"losses/value_loss": stats.total_value_loss}
    row.update({f"losses/{head}_value_loss": value for head, value in stats.value_loss.items()})
    for key in AGENT_LOSS_KEYS:
        values: dict[str, float] = getattr(stats, key)
        row.update({f"losses/{name}_{key}": value for name, value in values.items()})
    return row


# -- the files ----------------------------------------------------------------------------------------------
class ProgressLog:
    """``progress.csv`` (one row per update; fixed columns) and, optionally, TensorBoard."""

    def __init__(
        self,
        path: Path,
        columns: list[str],
        resume_after: int | None,
        tensorboard: bool,
        *,
        batch_size: int | None = None,
    ) -> None:
        self.path, self.columns = path, columns
        # the history up to the checkpoint, checked (a log without it is refused before anything is written);
        # ``batch_size`` (steps per update), when given, is checked against the rows' global_step
        kept = progress_rows(path, columns, upto=resume_after, batch_size=batch_size) if resume_after else []
        # the kept history is rewritten atomically (a kill here loses nothing), then appended to
        text = io.StringIO()
        header = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        header.writeheader()
        header.writerows(kept)
        files.write_bytes(path, text.getvalue().encode("utf-8"))
        self.file = path.open("a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
        self.tensorboard: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                print("tensorboard is not installed: logging to progress.csv only (pip install tensorboard)")
            else:
                self.tensorboard = SummaryWriter(str(path.parent))

    def write(self, row: dict[str, float]) -> None:
        """Append ``row`` (its keys among the columns) and flush it; TensorBoard gets its finite values."""
        self.writer.writerow({key: _csv_value(value) for key, value in row.items()})
        self.file.flush()
        if self.tensorboard is not None:
            for key, value in row.items():
                if key not in ("iteration", "global_step") and math.isfinite(value):
                    self.tensorboard.add_scalar(key, value, int(row["global_step"]))

    def close(self) -> None:
        """Close the CSV file and the TensorBoard writer."""
        self.file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()


def _csv_value(value: float) -> str:
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 2**53):
        return str(int(value))
    return "" if not math.isfinite(value) else f"{value:.6g}"


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


# -- the run's log ------------------------------------------------------------------------------------------
class RunLog:
    """The log of one training run: ``progress.csv`` (and TensorBoard) and the progress bar; a context manager.

    ``start`` is the number of updates already done (a resumed run: the log keeps its rows up to there).
    """

    def __init__(
        self,
        out_dir: Path,
        budget: Budget,
        models: Sequence[str],
        *,
        start: int = 0,
        resumed: bool = False,
        progress: bool = True,
        tensorboard: bool = False,
    ) -> None:
        self.budget, self.models, self.start = budget, tuple(models), start
        self.file = ProgressLog(
            out_dir / PROGRESS_NAME,
            progress_columns(self.models),
            start if resumed else None,
            tensorboard,
            batch_size=budget.batch_size,
        )
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
        stats: UpdateStats,
    ) -> dict[str, float]:
        """Log update number ``iteration`` (counted from 1) and return its row.

        ``stage`` is the two-stage schedule's (1 in joint mode), ``record`` and ``rewards`` the rollout's
        (:func:`rollout_row`), ``stats`` the update's (:func:`losses_row`).
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
            **losses_row(stats),
        }
        self.file.write(row)
        self.bar.update(batch_size)
        self.bar.set_postfix(
            sps=f"{row['time/sps']:.0f}",
            reward=f"{row['env/reward']:+.3f}",
            acc=f"{row['env/accuracy']:.3f}",
            team=f"{row['env/team_size']:.2f}",
        )
        return row

    def close(self) -> None:
        """Close the progress bar and the files."""
        self.bar.close()
        self.file.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
