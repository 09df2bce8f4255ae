"""What every lesson of the course shares: the budget switch, the output folder and saving figures.

The lessons import this module from the folder they live in (``python docs/tutorials/NN_name.py`` puts the
folder on ``sys.path``; their notebooks ``NN_name.ipynb`` sit in the same folder, and Jupyter starts a notebook
in its own folder). It is not part of the package.

Budget. ``ENSEMBLE_ENV_TUTORIAL_QUICK=1`` switches every lesson to its quick budget (what CI runs: a few
seconds of training, fewer seeds); without it a lesson runs its default budget, under two minutes on two
cores.

Output folder (figures, GIFs, training runs), the first that applies:

1. ``ENSEMBLE_ENV_TUTORIAL_OUT``, if set;
2. a new temporary folder, if ``CI`` is set (continuous integration never writes into the repository), removed
   with what the lesson wrote when the process ends;
3. ``runs/tutorials`` under the current folder (``runs/`` is ignored by git in this repository).

The folder is created if needed and each lesson prints the paths it writes. A folder that cannot be used (a file,
a read-only or full disk, no permission) ends the lesson with one line, ``NN_name.py: error: PATH: CAUSE`` (exit
status 2, as the project's commands), never a traceback; a figure is written whole or not at all
(``ensemble_env.files``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

QUICK_VARIABLE = "ENSEMBLE_ENV_TUTORIAL_QUICK"
OUT_VARIABLE = "ENSEMBLE_ENV_TUTORIAL_OUT"

QUICK = os.environ.get(QUICK_VARIABLE, "").strip().lower() in ("1", "true", "yes")
_OUT: Path | None = None


def budget(default: Any, quick: Any) -> Any:
    """``quick`` under ``ENSEMBLE_ENV_TUTORIAL_QUICK=1``, else ``default``."""
    return quick if QUICK else default


def in_notebook() -> bool:
    """True inside Jupyter (an IPython kernel), where figures show inline."""
    shell = sys.modules.get("IPython")
    return shell is not None and getattr(shell.get_ipython(), "kernel", None) is not None


def output_dir() -> Path:
    """The folder the lessons write to (the rule is in the module docstring)."""
    global _OUT
    if _OUT is None:
        from ensemble_env.files import make_folder

        if os.environ.get(OUT_VARIABLE):
            folder = Path(os.environ[OUT_VARIABLE])
        elif os.environ.get("CI"):
            folder = Path(_writing(lambda: tempfile.mkdtemp(prefix="ensemble_env_tutorials_")))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)  # ours alone: nothing left behind
        else:
            folder = Path("runs") / "tutorials"
        _OUT = _writing(lambda: make_folder(folder))
    return _OUT


def _writing(write: Any) -> Any:
    """``write()``, or one line on stderr naming the path and the cause and exit status 2 when it fails (a file
    where the folder should be, a read-only or full disk, no permission): never a traceback."""
    from ensemble_env.errors import ERROR_STATUS, error_text

    try:
        return write()
    except OSError as error:  # an OutputError of ensemble_env.files too
        lesson = Path(sys.argv[0]).name if sys.argv and sys.argv[0].endswith(".py") else "the lesson"
        print(f"{lesson}: error: {error_text(error)}", file=sys.stderr)
        raise SystemExit(ERROR_STATUS) from None


def pyplot() -> Any:
    """matplotlib.pyplot, with a file-only backend outside notebooks; a clear error without matplotlib."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise SystemExit(
            "the lessons draw their figures with matplotlib: pip install -e '.[plot]' (or '.[mappo,plot]' for "
            "the lessons that train)"
        ) from None
    if not in_notebook():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, name: str) -> None:
    """Save ``figure`` as ``name`` in the output folder, print the path; close it unless in a notebook. Nothing is
    returned, so that a notebook cell ending with it shows the figure, not a path."""
    from ensemble_env import files

    path = output_dir() / name
    _writing(lambda: files.save_figure(figure, path, dpi=110, bbox_inches="tight"))
    print(f"figure written to {path}")
    if not in_notebook():
        pyplot().close(figure)


def save_gif(frames: list[Any], name: str, fps: float = 4.0) -> None:
    """Write ``frames`` ((H, W, 3) uint8 arrays) as an animated GIF with Pillow (installed with matplotlib) and print
    its path (nothing returned, as :func:`save_figure`)."""
    try:
        from PIL import Image
    except ModuleNotFoundError:
        raise SystemExit("writing a GIF needs Pillow: pip install -e '.[plot]' (matplotlib brings it)") from None
    from ensemble_env.files import atomic_path

    path = output_dir() / name
    images = [Image.fromarray(frame) for frame in frames]

    def write() -> None:
        with atomic_path(path) as temporary:
            options = {"save_all": True, "append_images": images[1:], "duration": round(1000 / fps), "loop": 0}
            images[0].save(temporary, format="GIF", **options)

    _writing(write)
    print(f"animation written to {path} ({len(images)} frames)")


# two-sided 95% quantiles of Student's t for 1..10 degrees of freedom (beyond: the normal 1.96)
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def mean_ci(values: Any) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (Student's t; 0 for a single value)."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return float(values.mean()), 0.0
    t = _T95[values.size - 2] if values.size - 1 <= len(_T95) else 1.96
    return float(values.mean()), float(t * values.std(ddof=1) / np.sqrt(values.size))


def read_progress(path: Any) -> dict[str, Any]:
    """The columns of a training run's ``progress.csv`` (``ensemble-env train``) as float arrays, by name."""
    import csv

    import numpy as np

    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {key: np.array([float(row[key]) if row[key] else np.nan for row in rows]) for key in rows[0]}
