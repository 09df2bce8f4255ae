"""The writers of a run's log: ``progress.csv`` and, with the ``tensorboard`` logger, TensorBoard's event files.

- :class:`ProgressLog`: ``progress.csv`` (one row per update; on resume the history up to the checkpoint is kept,
  read and checked by :func:`~ensemble_mappo.progress_format.progress_rows` and rewritten through
  :mod:`ensemble_env.files`).
- :class:`TensorBoardLog`: with the ``tensorboard`` logger (:func:`check_loggers`), the same rows as TensorBoard
  event files in ``DIR/tensorboard/`` (:func:`tensorboard_folder`), which mirror progress.csv (rewritten from its
  kept rows on resume), and the choice on validation.

What a row holds is :mod:`ensemble_mappo.progress_format`'s; :class:`~ensemble_mappo.progress.RunLog` writes each
row to every logger.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ensemble_env import extras, files
from ensemble_env.text import show
from ensemble_mappo.config import LOGGERS
from ensemble_mappo.progress_format import progress_rows
from ensemble_mappo.runs import TENSORBOARD_DIR, refuse

__all__ = ["EVENT_FILES", "ProgressLog", "TensorBoardLog", "check_loggers", "tensorboard_folder"]


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
