"""Failing disks under every writer of a run (issue 41, class 2): a full or read-only location under ``config.json``,
the kept checkpoints, ``checkpoint.pt``, ``progress.csv``, the TensorBoard event files, ``selection.json``, the
evaluation and the plots is one error line, ``ensemble-env COMMAND: error: PATH: cannot write: CAUSE`` (exit 2), never
a traceback (torch's "unexpected pos", an ``OSError`` of the TensorBoard writer's thread); the previous file is left as
it was, and the run resumes once the disk has room again.

The disk is made to fail by monkeypatching the writes (the tests run as root: permissions do not stop root), and, where
the machine allows it, by a real read-only bind mount and a real full file system (a small tmpfs).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from ensemble_env.cli import main  # noqa: E402
from ensemble_mappo.checkpoint import read_checkpoint  # noqa: E402
from ensemble_mappo.plots import PLOT_NAMES  # noqa: E402

TINY = ["--cache", "toy8", "--total-steps", "1536", "--num-envs", "16", "--num-steps", "32", "--no-progress"]
TINY += ["--checkpoint-every", "1", "--checkpoints", "3"]
# the size prior: the run writes the same files with either start, and the default offline start scores toy8's 255
# teams on every train, resume and evaluate (about 0.5 s of CPU each); test_mappo_start.py tests that start
TINY += ["--decider-start", "prior"]
UPDATES = 3


def _oserror(code: int, path: str | None = None) -> OSError:
    return OSError(code, os.strerror(code), path) if path else OSError(code, os.strerror(code))


def _fail_rename(monkeypatch: pytest.MonkeyPatch, name: str, code: int, after: int = 0) -> None:
    """The rename that puts ``name`` in place fails with ``code`` from its ``after + 1``-th time (a disk remounted
    read-only, or full, under the atomic writer)."""
    replace = os.replace
    seen = [0]

    def failing(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        if Path(target).name == name:
            seen[0] += 1
            if seen[0] > after:
                raise _oserror(code)
        replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing)


def _fail_appends(monkeypatch: pytest.MonkeyPatch, name: str, code: int, after: int = 0) -> None:
    """Appends to ``name`` fail with ``code`` once ``after`` writes went through (a disk filling up under a log)."""
    open_path = Path.open

    def opening(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = open_path(self, mode, *args, **kwargs)
        if self.name != name or "a" not in mode:
            return handle
        written = [0]
        write = handle.write

        def failing(text: str) -> int:
            written[0] += 1
            if written[0] > after:
                raise _oserror(code)
            return write(text)

        handle.write = failing  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(Path, "open", opening)


def _fail_events(monkeypatch: pytest.MonkeyPatch, code: int, after: int = 0) -> None:
    """TensorBoard's writing thread fails with ``code`` once ``after`` records went through."""
    from tensorboard.summary.writer import record_writer

    write = record_writer.RecordWriter.write
    seen = [0]

    def failing(self: Any, data: bytes) -> None:
        seen[0] += 1
        if seen[0] > after:
            raise _oserror(code)
        write(self, data)

    monkeypatch.setattr(record_writer.RecordWriter, "write", failing)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("ensemble-env: ")]  # status lines
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"ensemble-env {command}: error: "), err
    return lines[0]


def _rows(run: Path) -> list[int]:
    with open(run / "progress.csv", newline="", encoding="utf-8") as file:
        return [int(row["iteration"]) for row in csv.DictReader(file)]


def _failing(writer: str, patch: pytest.MonkeyPatch, code: int) -> str:
    """Make the disk fail under ``writer`` with ``code``; the path (in the run) its error must name."""
    if writer == "progress.csv":
        _fail_appends(patch, "progress.csv", code, after=1)  # the header and the first row are written
    elif writer == "tensorboard":
        _fail_events(patch, code, after=30)  # the first update's scalars are written
        return "tensorboard"
    elif writer == "checkpoint.pt":
        _fail_rename(patch, "checkpoint.pt", code, after=1)  # the first one is written: it must stay intact
    else:
        _fail_rename(patch, Path(writer).name, code)
    return writer


WRITERS = ["config.json", "checkpoints/update_1.pt", "checkpoint.pt", "progress.csv", "tensorboard", "selection.json"]
CASES = [pytest.param(writer, errno.ENOSPC, id=f"{writer}-ENOSPC") for writer in WRITERS]
CASES += [
    pytest.param(writer, errno.EROFS, id=f"{writer}-EROFS", marks=pytest.mark.slow)
    for writer in ("checkpoint.pt", "tensorboard")
]


@pytest.mark.parametrize(("writer", "code"), CASES)
def test_a_failing_disk_under_a_writer_of_train_is_one_line_and_the_run_resumes(
    writer: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    with monkeypatch.context() as patch:
        named = _failing(writer, patch, code)
        status, err = _run(capsys, "train", "--out", str(run), "--logger", "tensorboard", *TINY)
    assert status == 2
    line = _one_error_line(err, "train")
    assert line == f"ensemble-env train: error: {run / named}: cannot write: {os.strerror(code)}", line
    assert not list(run.rglob("*.tmp")), "a temporary file was left"
    if writer == "checkpoint.pt":  # the previous checkpoint (update 1) is intact
        assert read_checkpoint(run).iteration == 1
    if writer == "config.json":
        return  # nothing of the run was written: a new train starts it
    status, err = _run(capsys, "train", "--resume", str(run), "--logger", "tensorboard", "--no-progress")
    assert status == 0, err
    assert _rows(run) == list(range(1, UPDATES + 1))  # every update logged once
    assert read_checkpoint(run).complete and (run / "selection.json").is_file()


def test_evaluate_and_plot_on_a_failing_disk_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), *TINY]) == 0
    capsys.readouterr()
    with monkeypatch.context() as patch:
        _fail_rename(patch, "evaluation_test.json", errno.ENOSPC)
        status, err = _run(capsys, "evaluate", str(run), "--no-baselines")
    assert status == 2
    assert _one_error_line(err, "evaluate") == (
        f"ensemble-env evaluate: error: {run / 'evaluation_test.json'}: cannot write: No space left on device"
    )
    assert main(["evaluate", str(run), "--no-baselines"]) == 0
    before = (run / "evaluation_test.json").read_bytes()
    pytest.importorskip("matplotlib")
    with monkeypatch.context() as patch:
        _fail_rename(patch, PLOT_NAMES[0], errno.EROFS)
        status, err = _run(capsys, "plot", str(run))
    assert status == 2
    assert _one_error_line(err, "plot").endswith(f"{run / PLOT_NAMES[0]}: cannot write: Read-only file system")
    assert (run / "evaluation_test.json").read_bytes() == before
    assert not list(run.rglob("*.tmp"))


def test_a_plot_folder_under_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only location without permissions (root ignores them): a folder that cannot be made under a file."""
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), *TINY]) == 0
    (tmp_path / "file").write_text("x")
    capsys.readouterr()
    status, err = _run(capsys, "plot", str(run), "--out", str(tmp_path / "file" / "plots"))
    assert status == 2
    assert f"{tmp_path / 'file'}: is a file, not a folder" in _one_error_line(err, "plot")


@contextlib.contextmanager
def _mounted(*arguments: str) -> Iterator[None]:
    """``mount ARGUMENTS`` (the last is the folder), unmounted after; skips where mounting is not allowed."""
    folder = arguments[-1]
    done = subprocess.run(["mount", *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()[:100]}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", folder], capture_output=True, check=False)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="mounting needs root on Linux")
def test_a_real_read_only_tensorboard_folder_and_a_real_full_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same through the kernel: ``run/tensorboard`` bind-mounted read-only (EROFS from TensorBoard's thread), and
    the run directory on a 64 KiB tmpfs (ENOSPC under the first checkpoint)."""
    run = tmp_path / "run"
    (run / "tensorboard").mkdir(parents=True)
    board = str(run / "tensorboard")
    with _mounted("--bind", board, board):
        if subprocess.run(["mount", "-o", "remount,ro,bind", board], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        status, err = _run(capsys, "train", "--out", str(run), "--logger", "tensorboard", *TINY)
    assert status == 2
    assert _one_error_line(err, "train") == f"ensemble-env train: error: {board}: cannot write: Read-only file system"
    small = tmp_path / "small"
    small.mkdir()
    with _mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)):
        status, err = _run(capsys, "train", "--out", str(small / "run"), *TINY)
        assert status == 2
        line = _one_error_line(err, "train")
        assert line.startswith(f"ensemble-env train: error: {small / 'run'}/") and "No space left on device" in line
        assert not list((small / "run").rglob("*.tmp"))
