"""Generate the course's notebooks from its lesson scripts: ``docs/tutorials/NN_name.py`` -> ``NN_name.ipynb``.

The lessons are jupytext percent-format scripts and they are the source: edit a lesson, then run this script;
never edit a notebook by hand. Each notebook is written beside its lesson, so that it imports ``course.py``
from its own folder as the script does (Jupyter starts a notebook in the notebook's folder), and the lessons'
relative links work in both.

A notebook holds the lesson's cells and nothing else: no outputs, no execution counts, cell ids numbered in
order (``cell-00``, ``cell-01``, ...), the lesson's kernelspec (``python3``) as its only metadata, jupytext's
round-trip hints dropped. The same lesson gives the same bytes on every machine, so the notebooks are committed
and ``--check`` (a test runs it) fails when one is stale. Each is written to a temporary file renamed into
place (``ensemble_env.files.write_text``), and only when its bytes change.

Usage (from anywhere; the default folder is this repository's ``docs/tutorials``)::

    .venv/bin/python scripts/make_notebooks.py           # write the notebooks that are missing or stale
    .venv/bin/python scripts/make_notebooks.py --check   # write nothing; exit 1 naming each one that is not current

Needs jupytext and nbformat (the ``dev`` extra). A notebook ``NN_*.ipynb`` without its lesson is reported in
both modes (exit 1) and left alone: remove it, or restore its lesson.

Lessons and notebooks are read as the converters read their inputs
(:func:`ensemble_env.cache.convert.common.read_input`): regular files only (a FIFO never blocks, a folder, a
device or a dangling link is refused naming it), of at most :data:`MAX_FILE_BYTES`, UTF-8; errors, a notebook
that cannot be written (a folder, a read-only or full disk) included, are one line, ``make_notebooks.py: error:
...`` (exit 2), through the project's error handler (:func:`ensemble_env.cli.options.run_command`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
COURSE = REPO_ROOT / "docs" / "tutorials"
PROG = "make_notebooks.py"
#: the libraries the conversion needs (both in the dev extra)
NEEDS = ("jupytext", "nbformat")
#: a lesson's file name; its notebook has the same stem
LESSON_GLOB = "[0-9][0-9]_*.py"
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
#: the cell metadata a notebook keeps (jupytext's own hints, such as ``lines_to_next_cell``, are dropped)
KEPT_CELL_METADATA = ("tags",)
KERNEL = "python3"
#: the largest lesson or notebook read (the course's are about 20 KB)
MAX_FILE_BYTES = 4 * 2**20


class LessonError(ValueError):
    """A lesson that cannot become a notebook: the message names the file, the field and the value."""


def lessons(folder: Path) -> list[Path]:
    """The lesson scripts of ``folder``, in order."""
    return sorted(folder.glob(LESSON_GLOB))


def notebook_path(lesson: Path) -> Path:
    return lesson.with_suffix(".ipynb")


def _header_field(lesson: Path, text: str, field: str) -> str:
    """The value of ``field`` in the lesson's jupytext header (the ``# ---`` block that opens the file)."""
    if not text.startswith("# ---\n"):
        raise LessonError(f"{lesson}: the jupytext header (a '# ---' block) does not open the file")
    header = text.split("\n# ---\n", 1)[0]
    found = re.search(rf"^#\s+{field}:\s*(\S+)\s*$", header, re.MULTILINE)
    if found is None:
        raise LessonError(f"{lesson}: the jupytext header has no {field}")
    return found.group(1)


def read_file(path: Path) -> bytes:
    """The bytes of ``path``, a regular file of at most :data:`MAX_FILE_BYTES` (the converters' reader: a FIFO, a
    folder, a device or a link to one is refused naming it; FileNotFoundError when there is none)."""
    from ensemble_env.cache.convert.common import read_input

    return read_input(path, limit=MAX_FILE_BYTES)


def notebook_text(lesson: Path) -> str:
    """The notebook of ``lesson``, as the bytes (UTF-8 text) written to its ``.ipynb``."""
    import jupytext
    import nbformat

    from ensemble_env.cache.convert.common import decode_text

    text = decode_text(lesson, read_file(lesson))
    for field, expected in (("format_name", "percent"), ("name", KERNEL)):
        value = _header_field(lesson, text, field)
        if value != expected:
            raise LessonError(f"{lesson}: jupytext header {field} is {value!r}, expected {expected!r}")
    try:
        source = jupytext.reads(text, fmt="py:percent")
    except Exception as error:  # jupytext's YAML, JSON and format readers raise many kinds on a damaged header
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise LessonError(f"{lesson}: jupytext cannot read it ({type(error).__name__}: {first[:200]})") from None
    cells = []
    for index, cell in enumerate(source.cells):
        metadata = {key: cell.metadata[key] for key in KEPT_CELL_METADATA if key in cell.metadata}
        options: dict[str, Any] = {"id": f"cell-{index:02d}", "metadata": metadata}
        if cell.cell_type == "code":
            cells.append(nbformat.v4.new_code_cell(cell.source, **options))
        elif cell.cell_type == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(cell.source, **options))
        else:  # a raw cell: the lessons have none, and a notebook of the course should not either
            raise LessonError(f"{lesson}: cell {index} has cell_type {cell.cell_type!r}, expected code or markdown")
    if not any(cell.cell_type == "code" for cell in cells):
        raise LessonError(f"{lesson}: no code cell ('# %%') found")
    kernelspec = source.metadata.get("kernelspec")
    if not isinstance(kernelspec, dict):
        raise LessonError(f"{lesson}: the jupytext header has no kernelspec block (its name: {KERNEL})")
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": dict(kernelspec)})
    nbformat.validate(notebook)
    return nbformat.writes(notebook, version=4) + "\n"


def plan(folder: Path) -> tuple[dict[Path, str], list[Path]]:
    """What ``folder`` should hold: each lesson's notebook path and text; and the notebooks without a lesson."""
    wanted = {notebook_path(lesson): notebook_text(lesson) for lesson in lessons(folder)}
    orphans = [path for path in sorted(folder.glob(NOTEBOOK_GLOB)) if path not in wanted]
    return wanted, orphans


def _current(path: Path, text: str) -> bool:
    """Whether the notebook ``path`` holds ``text`` (False when there is none; one that is not a regular file is
    refused, naming it)."""
    try:
        return read_file(path) == text.encode("utf-8")
    except FileNotFoundError:
        return False


def problems(folder: Path) -> list[str]:
    """One line for each notebook of ``folder`` that is not what its lesson gives now (none: all current)."""
    wanted, orphans = plan(folder)
    found = []
    for path, text in wanted.items():
        if not os.path.lexists(path):
            found.append(f"{path}: missing (run python scripts/{PROG})")
        elif not _current(path, text):
            lesson = path.with_suffix(".py").name
            found.append(f"{path}: stale, it differs from what {lesson} gives (run python scripts/{PROG})")
    for path in orphans:
        found.append(f"{path}: no lesson {path.with_suffix('.py').name} beside it (remove it, or restore the lesson)")
    return found


def write(folder: Path) -> list[Path]:
    """Write each notebook of ``folder`` that is missing or stale (atomically); the paths written."""
    from ensemble_env.files import write_text

    wanted, _ = plan(folder)
    return [write_text(path, text) for path, text in wanted.items() if not _current(path, text)]


def main(argv: list[str] | None = None) -> int:
    """The command line; every error is one line through the project's error handler."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook is not current")
    parser.add_argument("--folder", type=Path, default=COURSE, help="the lessons' folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if str(REPO_ROOT / "src") not in sys.path:  # use this checkout's package, whether or not it is installed
        sys.path.insert(0, str(REPO_ROOT / "src"))
    from ensemble_env.errors import run_command

    return run_command(PROG, lambda: _make(args.folder, args.check))


def _make(folder: Path, check: bool) -> int:
    from ensemble_env import extras

    absent = extras.missing(NEEDS)
    if absent:
        print(f"{PROG}: error: {extras.message(PROG, 'dev', absent)}", file=sys.stderr)
        return extras.EXIT_STATUS
    if not folder.is_dir():
        raise ValueError(f"--folder {folder}: not a folder")
    if not lessons(folder):
        raise ValueError(f"--folder {folder}: no lesson ({LESSON_GLOB}) in it")
    if not check:
        for path in write(folder):
            print(f"wrote {path}")
    found = problems(folder)
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"{len(lessons(folder))} notebooks current in {folder}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
