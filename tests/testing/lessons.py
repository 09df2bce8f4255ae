"""The course's notebooks, each run once per test session (nbclient on a python3 kernel of this interpreter) and kept:
tests/test_tutorials.py checks each run, and tests/test_docs_site.py builds the site's lesson pages from the same
runs instead of running the lessons again (``ENSEMBLE_ENV_SITE_LESSONS``, docs/conf.py; issue 47).

Each notebook runs as Jupyter opens it, from its own folder: a copy of docs/tutorials (so that nothing is written into
the repository), with the course's quick budget and its output folder ``runs/tutorials`` under that folder, the
folder the site build's runs write to: what a cell prints (``figure written to runs/tutorials/NN_name.png``) is what a
page of the site shows.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COURSE = Path(__file__).resolve().parents[2] / "docs" / "tutorials"
#: the output folder of a run, relative to the lesson's folder (as the site build's runs have it)
OUT = Path("runs") / "tutorials"


@dataclass(frozen=True)
class LessonRun:
    """One notebook's run: the executed notebook, the folder it ran in (a copy of docs/tutorials) and what that folder
    and docs/tutorials held before and after it."""

    notebook: Any  # nbformat.NotebookNode
    folder: Path
    before: list[str]
    after: list[str]
    course_before: list[str]
    course_after: list[str]

    @property
    def out(self) -> Path:
        """The lesson's output folder (``runs/tutorials`` under :attr:`folder`)."""
        return self.folder / OUT


def _listing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


class LessonRuns:
    """Each lesson's notebook run at most once, when first asked for (:meth:`run`), its run kept in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._runs: dict[str, LessonRun | BaseException] = {}

    def run(self, stem: str) -> LessonRun:
        """The run of ``docs/tutorials/STEM.ipynb`` (an error of the run raised again, for each caller)."""
        if stem not in self._runs:
            try:
                self._runs[stem] = self._execute(stem)
            except Exception as error:  # a cell that raised: every caller fails with it
                self._runs[stem] = error
        found = self._runs[stem]
        if isinstance(found, BaseException):
            raise found
        return found

    def _execute(self, stem: str) -> LessonRun:
        import nbclient
        import nbformat
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager

        folder = self.root / stem / "tutorials"
        shutil.copytree(COURSE, folder, ignore=shutil.ignore_patterns("__pycache__", "runs", ".ipynb_checkpoints"))
        notebook = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
        env = {
            **os.environ,
            "ENSEMBLE_ENV_TUTORIAL_QUICK": "1",
            "ENSEMBLE_ENV_TUTORIAL_OUT": str(OUT),
            "PYTHONDONTWRITEBYTECODE": "1",  # nothing written beside the lesson (course.py's bytecode)
        }
        env.pop("MPLBACKEND", None)  # the kernel's own backend: figures inline, as in Jupyter
        # ipykernel's own python3 kernelspec (this interpreter), whatever kernelspecs the machine has installed
        manager = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]))
        before, course_before = _listing(folder), _listing(COURSE)
        client = nbclient.NotebookClient(
            notebook, km=manager, timeout=600, resources={"metadata": {"path": str(folder)}}
        )
        client.execute(env=env, cleanup_kc=True)  # raises CellExecutionError, naming the cell, at the first error
        return LessonRun(notebook, folder, before, _listing(folder), course_before, _listing(COURSE))

    def write(self, stems: list[str], folder: Path) -> Path:
        """The executed notebooks of ``stems`` written into ``folder`` as ``STEM.ipynb`` (run first if need be), for
        the site build (``ENSEMBLE_ENV_SITE_LESSONS``)."""
        import nbformat

        folder.mkdir(parents=True, exist_ok=True)
        for stem in stems:
            nbformat.write(self.run(stem).notebook, folder / f"{stem}.ipynb")
        return folder
