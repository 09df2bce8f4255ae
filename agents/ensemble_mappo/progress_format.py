"""The format of a run's ``progress.csv`` (its columns and the values of a row's rollout) and its one checked reader.

- :func:`progress_columns`: the columns of ``progress.csv``, the frame's, then the algorithm's; :data:`CORE_COLUMNS`,
  those every log holds.
- :func:`rollout_row`: the values of one update's rollout, under namespaced keys (``env/accuracy``, ...).
- :func:`read_progress` (``ensemble-env plot``) and :func:`progress_rows` (a resumed run's history) read it back,
  every cell checked: a bad file is a :class:`~ensemble_mappo.runs.RunFileError` naming the line, the column and the
  value.

The writers of the log are in :mod:`ensemble_mappo.loggers`.
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ensemble_env.text import show
from ensemble_mappo import algorithms
from ensemble_mappo.frame import StepRecord
from ensemble_mappo.runs import PROGRESS_NAME, RunConfig, read_config, refuse, run_folder

__all__ = ["CORE_COLUMNS", "progress_columns", "progress_rows", "read_progress", "rollout_row"]


def progress_columns(models: Sequence[str], algorithm: str = "mappo") -> list[str]:
    """The columns of ``progress.csv`` of a run of ``algorithm`` on a pool of ``models``, in order: the frame's
    (the update, time, the learning rate, the stage, the rollout's ``env/`` statistics), then the algorithm's
    (:meth:`ensemble_mappo.frame.Learner.log_columns`)."""
    columns = ["iteration", "global_step", "time/elapsed", "time/sps", "charts/learning_rate", "charts/stage"]
    columns += ["env/reward", "env/accuracy", "env/team_size", "env/cost", "env/episode_accuracy"]
    columns += ["env/episode_return", *(f"env/select/{model}" for model in models)]
    return columns + algorithms.get(algorithm).learner_class().log_columns(models)


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
