"""Issue 49 ("Reliability round 5"), the two unclear messages: ``scripts/build_docs.sh`` with an OUT that is a file,
under a file or read-only, and the lessons (``docs/tutorials/course.py``: lesson 7 among them) with an output folder
that cannot be used, end in one line naming the path and the cause (exit status 2), never in Sphinx's crash report
or a traceback."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ensemble_env.files import OutputError

ROOT = Path(__file__).resolve().parents[1]
BUILD_DOCS = ROOT / "scripts" / "build_docs.sh"
COURSE = ROOT / "docs" / "tutorials"


@contextlib.contextmanager
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A real read-only filesystem (a tmpfs mounted ro: root only; the test skips where mounting is not allowed)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("cannot mount a read-only filesystem here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, check=False)


def build_docs(out: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(BUILD_DOCS), str(out)], capture_output=True, text=True, check=False, timeout=60, env=environment
    )


@pytest.mark.parametrize(
    ("where", "cause"),
    [
        ("a file", "is not a folder (OUT is the folder the HTML site is written to)"),
        ("under a file", "cannot make the folder (Not a directory)"),
        ("read-only", "cannot write in the folder (Read-only file system)"),
        ("under read-only", "cannot make the folder (Read-only file system)"),
    ],
)
def test_build_docs_with_an_unusable_out_ends_in_one_line(tmp_path: Path, where: str, cause: str) -> None:
    (tmp_path / "file").write_text("kept", encoding="utf-8")
    with contextlib.ExitStack() as stack:
        if where == "a file":
            out = tmp_path / "file"
        elif where == "under a file":
            out = tmp_path / "file" / "site"
        else:
            folder = stack.enter_context(read_only_folder(tmp_path))
            out = folder if where == "read-only" else folder / "site"
        called = build_docs(out)
    assert called.returncode == 2, called
    assert called.stderr == f"build_docs.sh: error: OUT {out}: {cause}\n"
    assert (tmp_path / "file").read_text(encoding="utf-8") == "kept"


def _course(monkeypatch: pytest.MonkeyPatch) -> object:
    import importlib.util

    monkeypatch.delitem(sys.modules, "course", raising=False)
    spec = importlib.util.spec_from_file_location("course", COURSE / "course.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_lesson_whose_output_folder_is_a_file_ends_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("kept", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", [str(COURSE / "07_exploration.py")])
    for out in (tmp_path / "file", tmp_path / "file" / "sub"):
        monkeypatch.setenv("ENSEMBLE_ENV_TUTORIAL_OUT", str(out))
        course = _course(monkeypatch)
        with pytest.raises(SystemExit) as stopped:
            course.output_dir()  # type: ignore[attr-defined]
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"07_exploration.py: error: {tmp_path / 'file'}: is a file, not a folder"), err
        assert err.count("\n") == 1
    assert (tmp_path / "file").read_text(encoding="utf-8") == "kept"


def test_a_lesson_that_cannot_write_its_figure_ends_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    from ensemble_env import files

    def refused(figure: object, path: Path, **options: object) -> Path:
        raise OutputError(f"{path}: cannot write: No space left on device", errno.ENOSPC)

    monkeypatch.setattr(sys, "argv", [str(COURSE / "07_exploration.py")])
    monkeypatch.setenv("ENSEMBLE_ENV_TUTORIAL_OUT", str(tmp_path / "out"))
    monkeypatch.setattr(files, "save_figure", refused)
    course = _course(monkeypatch)
    with pytest.raises(SystemExit) as stopped:
        course.save_figure(plt.figure(), "07_exploration.png")  # type: ignore[attr-defined]
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    figure = tmp_path / "out" / "07_exploration.png"
    assert err == f"07_exploration.py: error: {figure}: cannot write: No space left on device\n"


def test_a_lesson_on_a_real_read_only_folder_ends_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    with read_only_folder(tmp_path) as folder:
        script = (
            "import sys; sys.path.insert(0, sys.argv[1]); import course\n"
            "figure = course.pyplot().figure(); course.save_figure(figure, 'x.png')\n"
        )
        environment = {**os.environ, "ENSEMBLE_ENV_TUTORIAL_OUT": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
        called = subprocess.run(
            [sys.executable, "-c", script, str(COURSE)], capture_output=True, text=True, env=environment, timeout=120
        )
    assert called.returncode == 2 and "Traceback" not in called.stderr, called.stderr
    assert called.stderr == (
        f"the lesson: error: {folder / 'x.png'}: cannot write: Read-only file system (creating a temporary file in "
        f"{folder})\n"
    )
