"""The bookkeeping of a training run: its budget, its log (``progress.csv``, TensorBoard, its format and reader) and
its progress bar.

- :class:`Budget`: how many rollouts a budget (``passes`` or ``total_steps``) runs, and the line that says so;
  a budget above :data:`~ensemble_mappo.config.MAX_TOTAL_STEPS` is refused, and :func:`check_rollout_size`
  refuses a rollout storage above :data:`~ensemble_mappo.config.MAX_ROLLOUT_BYTES` before it is allocated.
- :func:`progress_columns`, :func:`rollout_row`: the columns of ``progress.csv`` (the frame's, then the algorithm's)
  and the values of one update's rollout, under namespaced keys (``env/accuracy``, ``losses/value_loss``, ...);
  :func:`read_progress` (plot) and :func:`progress_rows` (resume) read it back, every cell checked.
- :class:`ProgressLog`: ``progress.csv`` (one row per update; on resume the history up to the checkpoint is
  kept, read and checked by :func:`progress_rows` and rewritten through :mod:`ensemble_env.files`).
- :class:`TensorBoardLog`: with the ``tensorboard`` logger (:func:`check_loggers`), the same rows as TensorBoard
  event files in ``DIR/tensorboard/``, which mirror progress.csv (rewritten from its kept rows on resume), and the
  choice on validation.
- :class:`RunLog`: what :func:`~ensemble_mappo.training.train` calls once per update: times the run,
  writes the row to every logger and moves the progress bar.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import math
import os
import re
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ensemble_env import extras, files
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.text import show
from ensemble_mappo import algorithms
from ensemble_mappo.config import LOGGERS, MAX_ROLLOUT_BYTES, MAX_TOTAL_STEPS, LearnerConfig
from ensemble_mappo.frame import Learner, StepRecord
from ensemble_mappo.runs import PROGRESS_NAME, TENSORBOARD_DIR, RunConfig, read_config, refuse, run_folder

__all__ = [
    "CORE_COLUMNS",
    "EVENT_FILES",
    "PROGRESS_NAME",
    "Budget",
    "ProgressLog",
    "RunLog",
    "TensorBoardLog",
    "check_loggers",
    "check_rollout_size",
    "progress_bar",
    "progress_columns",
    "progress_rows",
    "read_progress",
    "rollout_row",
    "tensorboard_folder",
]


# -- the budget ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """What a training budget runs: whole rollouts of ``num_envs x num_steps`` steps, at least the steps asked.

    >>> from ensemble_mappo.config import TrainConfig
    >>> shape = {"num_envs": 64, "num_steps": 64}
    >>> print(Budget.plan(TrainConfig(passes=5, **shape), 20).describe())  # doctest: +NORMALIZE_WHITESPACE
    budget: 5 passes x 20 train questions = 100 steps, rounded up to 1 rollout of 64 copies x 64 steps
    = 4,096 steps (204.8 passes)
    >>> print(Budget.plan(TrainConfig(total_steps=8192, **shape), 2560).describe())
    budget: 8,192 steps (--total-steps) = 2 rollouts of 64 copies x 64 steps (3.2 passes of 2,560 train questions)
    >>> print(Budget.plan(TrainConfig(passes=2, model_permutations=2, **shape), 3000).describe())
    ... # doctest: +NORMALIZE_WHITESPACE
    budget: 2 passes x 3,000 train questions = 6,000 steps, rounded up to 2 rollouts of 64 copies x 64 steps
    = 8,192 steps (2.731 passes); the train questions include 2 model-permuted copies of each training task

    A run's budget is :func:`ensemble_mappo.training.run_budget`'s: over the stream it trains on, its copies included.
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
    copies: int = 0
    """Model-permuted copies of each training task in the stream (``model_permutations``; counted in ``questions``)."""

    @classmethod
    def plan(cls, config: LearnerConfig, questions: int) -> Budget:
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
            copies=int(getattr(config, "model_permutations", 0)),
        )

    @classmethod
    def of_cache(cls, config: LearnerConfig, cache: LogitCache) -> Budget:
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
        copies = ""
        if self.copies:
            copies = (
                f"; the train questions include {self.copies} model-permuted "
                f"cop{'y' if self.copies == 1 else 'ies'} of each training task"
            )
        if self.steps == self.requested:
            return f"budget: {asked} = {shape} ({passes}){copies}"
        return f"budget: {asked}, rounded up to {shape} = {self.steps:,} steps ({passes}){copies}"


def _tasks(config: LearnerConfig) -> tuple[str, ...] | None:
    tasks = config.env.get("tasks")
    return None if tasks is None else tuple(tasks)


def check_rollout_size(learner: Learner, venv: EnsembleVectorEnv, num_steps: int) -> int:
    """The bytes of a rollout of ``num_steps`` steps of ``venv``'s copies (:meth:`Learner.storage`), measured on
    one step before the whole is allocated; a ValueError when they exceed
    :data:`~ensemble_mappo.config.MAX_ROLLOUT_BYTES`."""
    one = learner.storage(venv, 1)
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


# -- the files ----------------------------------------------------------------------------------------------
class ProgressLog:
    """``progress.csv``: one row per update, fixed columns; on resume the rows up to the checkpoint (``kept``)."""

    def __init__(
        self, path: Path, columns: list[str], resume_after: int | None, *, batch_size: int | None = None
    ) -> None:
        self.path, self.columns = path, columns
        # the history up to the checkpoint, checked (a log without it is refused before anything is written);
        # ``batch_size`` (steps per update), when given, is checked against the rows' global_step
        self.kept = progress_rows(path, columns, upto=resume_after, batch_size=batch_size) if resume_after else []
        # the kept history is rewritten atomically (a kill here loses nothing), then appended to
        text = io.StringIO()
        header = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        header.writeheader()
        header.writerows(self.kept)
        files.write_bytes(path, text.getvalue().encode("utf-8"))
        with files.writing(path):
            self.file = path.open("a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")

    def write(self, row: dict[str, float]) -> None:
        """Append ``row`` (its keys among the columns) and flush it; a disk that refuses is an
        :class:`~ensemble_env.files.OutputError` naming the file (a row cut by it comes after the checkpoint: a resumed
        run rewrites it)."""
        with files.writing(self.path):
            self.writer.writerow({key: _csv_value(value) for key, value in row.items()})
            self.file.flush()

    def close(self) -> None:
        """Close the file (what it cannot flush is lost; the run stops on the first error anyway)."""
        with contextlib.suppress(OSError):
            self.file.close()


#: the names of TensorBoard's event files (``SummaryWriter`` adds the time, host, process and a counter)
EVENT_FILES = "events.out.tfevents.*"


def check_loggers(names: Iterable[str], where: str = "loggers") -> tuple[str, ...]:
    """The loggers ``names`` asks for (:data:`~ensemble_mappo.config.LOGGERS`), in that order, ``csv`` always among
    them. A ValueError names an unknown one (``where``: the option that gave it); a ModuleNotFoundError (the one
    message of :mod:`ensemble_env.extras`) says when a logger's package is missing. Nothing is imported.

    >>> check_loggers([]), check_loggers(["csv", "csv"])
    (('csv',), ('csv',))
    >>> check_loggers(["wandb"], "--logger")
    Traceback (most recent call last):
    ValueError: --logger: 'wandb' is not a logger; the loggers are csv, tensorboard
    """
    names = [names] if isinstance(names, str) else list(names)
    unknown = [name for name in names if name not in LOGGERS]
    if unknown:
        raise ValueError(f"{where}: {show(unknown[0])} is not a logger; the loggers are {', '.join(LOGGERS)}")
    if "tensorboard" in names:
        absent = extras.missing(extras.EXTRAS["tensorboard"].modules)
        if absent:
            raise extras.missing_error("the tensorboard logger", "tensorboard", absent)
    return tuple(name for name in LOGGERS if name == "csv" or name in names)


def tensorboard_folder(run_dir: Path) -> Path:
    """``run_dir/tensorboard``, the folder of the run's event files: refused (a RunFileError naming it) when it is
    there but is not a folder (a file, or a symbolic link, which would take the writes and removals elsewhere)."""
    folder = run_dir / TENSORBOARD_DIR
    if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
        raise refuse(
            folder, "", "is not a folder (a file or a symbolic link): the TensorBoard logger writes there; move it away"
        )
    return folder


class TensorBoardLog:
    """The run's log as TensorBoard event files in ``run_dir/tensorboard``: each row's columns (``global_step``
    aside, the step) as scalars at the row's ``global_step``, under the same names (``env/accuracy``, ...); an
    empty cell (not measured) writes nothing. Then the choice on validation (:meth:`selection`).

    The event files mirror ``progress.csv``. When the log opens (:meth:`open`), the folder's event files are removed
    and ``history``, the rows progress.csv keeps (none for a new run; a resumed run's rows up to its checkpoint), is
    written again: the rows a killed run wrote after its checkpoint are gone with them, so no step appears twice,
    and a run resumed with the logger after running without it gets its whole history. A run resumed without the
    logger leaves the files as they were."""

    def __init__(self, run_dir: Path) -> None:
        """Check the folder (:func:`tensorboard_folder`) and the package; nothing is written yet."""
        self.folder = tensorboard_folder(run_dir)
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:  # check_loggers says so first; a broken install lands here
            raise extras.missing_error("the tensorboard logger", "tensorboard", [error.name or "tensorboard"]) from None
        self.summary_writer = SummaryWriter
        self.writer: Any = None
        _quiet_writer_threads()

    def open(self, history: Sequence[Mapping[str, str]], columns: Sequence[str]) -> None:
        """Replace the folder's event files by ``history`` (rows of progress.csv as text; ``columns`` are written)."""
        for path in sorted(self.folder.glob(EVENT_FILES)) if self.folder.is_dir() else []:
            try:
                path.unlink()
            except OSError as error:
                raise refuse(path, "", f"cannot remove it ({error.strerror or error})") from None
        with files.writing(self.folder):
            self.writer = self.summary_writer(str(self.folder))
        for row in history:
            self.write({name: float(row[name]) for name in columns if row.get(name)}, flush=False)
        self.flush()

    def write(self, row: Mapping[str, float], *, flush: bool = True) -> None:
        """One row: every finite value but ``global_step`` at step ``global_step``; flushed to disk."""
        step = int(row["global_step"])
        with files.writing(self.folder):
            for name, value in row.items():
                if name != "global_step" and math.isfinite(value):
                    self.writer.add_scalar(name, value, step)
        if flush:
            self.flush()

    def flush(self) -> None:
        """Write what the writer holds to the event file; a disk that refuses is an
        :class:`~ensemble_env.files.OutputError` naming the folder and the cause."""
        with files.writing(self.folder):
            self.writer.flush()

    def selection(self, chosen: Mapping[str, Any], batch_size: int, last_step: int) -> None:
        """The choice on validation (``selection.json``, :func:`ensemble_mappo.training.choose`): each candidate's
        facts at its update's step (``validation/reward``, ``validation/gain_over_start``, ``validation/gain_error``,
        ``validation/gain_lower_bound``) and ``validation/chosen_update`` at the last step."""
        with files.writing(self.folder):
            for candidate in chosen.get("candidates", []):
                step = int(candidate["update"]) * batch_size
                for name, value in candidate.items():
                    if name != "update" and math.isfinite(value):
                        self.writer.add_scalar(f"validation/{name.removeprefix('validation_')}", value, step)
            self.writer.add_scalar("validation/chosen_update", float(chosen["update"]), last_step)
        self.flush()

    def close(self) -> None:
        """Close the writer (its files stay; what it cannot write after a failing disk is lost)."""
        if self.writer is not None:
            with contextlib.suppress(OSError):
                self.writer.close()


#: the class of TensorBoard's writing thread: it writes the event files, keeps the OSError of a failing disk and
#: raises it again in the thread that logs (at the next write or flush), then ends on it
_WRITER_THREAD = "_AsyncWriterThread"


def _quiet_writer_threads() -> None:
    """Keep the traceback of TensorBoard's writing thread off stderr when the disk fails under it: the same OSError
    reaches the logging thread (:meth:`TensorBoardLog.flush`), which reports it in one line naming the folder. Every
    other thread's exception is reported as before (``threading.excepthook`` is chained, once)."""
    previous = threading.excepthook
    if getattr(previous, "quiets", None) == _WRITER_THREAD:
        return

    def hook(args: Any) -> None:
        if type(args.thread).__name__ == _WRITER_THREAD and isinstance(args.exc_value, OSError):
            return
        previous(args)

    hook.quiets = _WRITER_THREAD  # type: ignore[attr-defined]
    threading.excepthook = hook


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


# -- the format of progress.csv, and its reader ---------------------------------------------------------
def progress_columns(models: Sequence[str], algorithm: str = "mappo") -> list[str]:
    """The columns of ``progress.csv`` of a run of ``algorithm`` on a pool of ``models``, in order: the frame's
    (the update, time, the learning rate, the stage, the rollout's ``env/`` statistics), then the algorithm's
    (:meth:`ensemble_mappo.frame.Learner.log_columns`)."""
    columns = ["iteration", "global_step", "time/elapsed", "time/sps", "charts/learning_rate", "charts/stage"]
    columns += ["env/reward", "env/accuracy", "env/team_size", "env/cost", "env/episode_accuracy"]
    columns += ["env/episode_return", *(f"env/select/{model}" for model in models)]
    return columns + algorithms.get(algorithm).learner_class().log_columns(models)


#: a number as the log writes it (no "nan", "inf", spaces or underscores, which float() would take)
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_WHOLE = re.compile(r"[0-9]{1,19}")


def _bounds(column: str, n_models: int | None) -> tuple[float, float] | None:
    """The range of a column's values (None: any finite number)."""
    if column in ("env/accuracy", "env/episode_accuracy") or column.startswith("env/select/"):
        return 0.0, 1.0
    if column.endswith("_clip_fraction"):
        return 0.0, 1.0
    if column == "env/team_size":
        return 0.0, float(n_models) if n_models is not None else math.inf
    if column.startswith("time/") or column == "charts/learning_rate" or column.endswith(("grad_norm", "value_loss")):
        return 0.0, math.inf
    if column == "charts/stage":
        return 1.0, 2.0
    return None


#: the columns every progress.csv holds (what plot and resume read); the others are checked when present, so that
#: a log written before a statistic was added still reads
CORE_COLUMNS = ("iteration", "global_step", "env/reward", "env/accuracy", "env/team_size", "env/episode_accuracy")


def _progress_table(
    path: Path, columns: Sequence[str], *, upto: int | None, batch_size: int | None, n_models: int | None
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of ``path``'s rows 1..upto (all with None), each checked: the header must hold the core
    columns among ``columns`` (:data:`CORE_COLUMNS` and the selection columns), and each of ``columns`` it
    holds is checked in every row (the others are kept as they are)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} not found: is {path.parent} a directory written by `ensemble-env train`?"
        ) from None
    except OSError as error:
        raise refuse(path, "", f"cannot read it ({error.strerror or error})") from None
    if not stat.S_ISREG(status.st_mode):
        raise refuse(path, "", "not a regular file (a folder, FIFO or device)")
    try:
        with open(path, newline="", encoding="utf-8") as file:
            reader = csv.reader(file, strict=True)
            header = next(reader, None)
            if not header:
                raise refuse(path, "", "empty: no header line (the columns)")
            duplicated = sorted(name for name, count in Counter(header).items() if count > 1)
            if duplicated:
                raise refuse(path, "header", f"names {show(duplicated, 200)} twice")
            present = set(header)
            core = [name for name in columns if name in CORE_COLUMNS or name.startswith("env/select/")]
            missing = [name for name in core if name not in present]
            if missing:
                raise refuse(path, "header", f"lacks the column(s) {show(missing, 300)} (an edited or foreign log?)")
            checked = [name for name in columns if name in present]
            expected = 1
            if upto is not None and upto < 1:
                return
            for cells in reader:
                if not cells:  # a blank line carries nothing
                    continue
                line = reader.line_num
                if len(cells) != len(header):
                    raise refuse(
                        path, f"line {line}", f"{len(cells)} cells for {len(header)} columns (a cut or edited row)"
                    )
                row = dict(zip(header, cells, strict=True))
                _check_row(path, line, row, checked, expected, batch_size, n_models)
                yield line, row
                expected += 1
                if upto is not None and expected > upto:
                    return  # the rows after the checkpoint (maybe cut by a kill) are redone, not read
            if upto is not None and expected <= upto:
                raise refuse(
                    path,
                    "",
                    f"holds updates 1..{expected - 1} but the checkpoint is at update {upto}: the log lost "
                    "rows; start the run over (`ensemble-env train --out DIR --overwrite`)",
                )
    except UnicodeDecodeError as error:
        raise refuse(path, "", f"not UTF-8 text (byte {error.start})") from None
    except csv.Error as error:
        raise refuse(path, "", f"not a CSV file ({show(str(error), 200)})") from None
    except OSError as error:
        raise refuse(path, "", f"cannot read it ({error.strerror or error})") from None


def _check_row(
    path: Path,
    line: int,
    row: Mapping[str, str],
    columns: Sequence[str],
    expected: int,
    batch_size: int | None,
    n_models: int | None,
) -> None:
    where = f"line {line}"
    for name in ("iteration", "global_step"):
        if name in columns and not _WHOLE.fullmatch(row[name]):
            raise refuse(path, f"{where}, column {name}", f"expected a whole number, got {show(row[name])}")
    if "iteration" in columns and int(row["iteration"]) != expected:
        raise refuse(
            path,
            f"{where}, column iteration",
            f"expected update {expected} (rows run 1, 2, ...), got {show(row['iteration'])}",
        )
    if batch_size is not None and "global_step" in columns and int(row["global_step"]) != expected * batch_size:
        raise refuse(
            path,
            f"{where}, column global_step",
            f"expected {expected * batch_size} (update {expected} x {batch_size} steps), "
            f"got {show(row['global_step'])}",
        )
    for name in columns:
        if name in ("iteration", "global_step"):
            continue
        cell = row[name]
        if not cell:
            continue  # not measured (an actor that did not learn, no episode ended)
        value = float(cell) if _NUMBER.fullmatch(cell) else math.nan
        if not math.isfinite(value):
            raise refuse(path, f"{where}, column {name}", f"expected a finite number or nothing, got {show(cell)}")
        bounds = _bounds(name, n_models)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise refuse(path, f"{where}, column {name}", f"{show(cell)} is outside [{bounds[0]:g}, {bounds[1]:g}]")


def progress_rows(
    path: str | Path, columns: Sequence[str], *, upto: int, batch_size: int | None = None
) -> list[dict[str, str]]:
    """Rows 1..``upto`` of a ``progress.csv`` as text (for the rewrite on resume), each checked (with
    ``batch_size``, global_step too); the rows after them (updates after the checkpoint, redone by the resumed
    run) are not read."""
    if upto < 1:
        return []
    table = _progress_table(Path(path), columns, upto=upto, batch_size=batch_size, n_models=_n_models(columns))
    return [row for _, row in table]


def _n_models(columns: Sequence[str]) -> int | None:
    """The pool's size, from the selection columns (None for a log without them)."""
    count = sum(name.startswith("env/select/") for name in columns)
    return count or None


def read_progress(run_dir: str | Path, run: RunConfig | None = None) -> dict[str, np.ndarray]:
    """``progress.csv`` of a run as columns of floats (an empty cell is NaN), checked whole against the run's
    config (``run``, read from the folder when None): every column there, updates 1, 2, ... in order, each
    cell a finite number in its column's range, or empty."""
    folder = run_folder(run_dir)
    run = run if run is not None else read_config(folder)
    columns = progress_columns(run.models, run.algorithm)
    batch_size = run.config.num_envs * run.config.num_steps
    path = folder / PROGRESS_NAME
    rows = [
        row for _, row in _progress_table(path, columns, upto=None, batch_size=batch_size, n_models=len(run.models))
    ]
    if not rows:
        raise refuse(path, "", "has no rows yet: train for at least one update")
    return {key: np.array([float(row[key]) if row.get(key) else np.nan for row in rows]) for key in columns}
