"""Every documented command goes through the one error handler (issue 41, class 3): ``ensemble-env``, the ``python -m``
entry points and the repository's scripts and benchmarks answer bad input, a file that cannot be read or written and a
missing extra with one line ``PROG: error: ...`` (exit 2), never a traceback (:func:`ensemble_env.errors.run_command`).

The entry points are found by reading the sources (every ``if __name__ == "__main__":`` and ``__main__.py`` under
src/, agents/, scripts/ and benchmarks/), so a new one without the handler fails here.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble_env import synthetic
from ensemble_env.baselines import unseen
from ensemble_env.cache import save_cache
from ensemble_env.errors import error_text, run_command

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("src", "agents", "scripts", "benchmarks")


def _entry_points() -> list[Path]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if path.name == "__main__.py" or 'if __name__ == "__main__":' in text:
                found.append(path)
    return found


ENTRY_POINTS = _entry_points()


def _handled_main(path: Path) -> bool:
    """Whether the ``main`` the entry point runs goes through the handler: decorated with ``@command(...)``, or its
    body returns ``run_command(...)``; a ``__main__.py`` that runs ``ensemble_env.cli.parser.main``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if path.name == "__main__.py":
        return any(
            isinstance(node, ast.ImportFrom) and node.module == "ensemble_env.cli.parser" for node in ast.walk(tree)
        )
    mains = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"]
    if len(mains) != 1:
        return False
    (main,) = mains
    decorated = any(
        isinstance(item, ast.Call) and getattr(item.func, "id", "") == "command" for item in main.decorator_list
    )
    calls = any(isinstance(node, ast.Call) and getattr(node.func, "id", "") == "run_command" for node in ast.walk(main))
    return decorated or calls


def test_the_entry_points_are_found() -> None:
    names = {str(path.relative_to(ROOT)) for path in ENTRY_POINTS}
    assert {
        "src/ensemble_env/cli/__main__.py",
        "src/ensemble_env/baselines/unseen.py",
        "src/ensemble_env/cli/play.py",
        "src/ensemble_env/adapters/benchmarl.py",
        "scripts/make_notebooks.py",
        "scripts/build_bbh5.py",
        "benchmarks/soak.py",
    } <= names


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_entry_point_runs_through_the_error_handler(path: Path) -> None:
    assert _handled_main(path), f"{path.relative_to(ROOT)}: its main does not go through ensemble_env.errors"
    text = path.read_text(encoding="utf-8")
    tail = text[text.index('if __name__ == "__main__":') :] if 'if __name__ == "__main__":' in text else text
    assert "SystemExit(" in tail or "raise SystemExit" in tail, "the exit status must reach the shell"


def test_the_handler_prints_one_line_per_kind_of_error(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (ValueError("cache.h5: field 'labels': must hold integers,\n got dtype float64"),
         "cache.h5: field 'labels': must hold integers, got dtype float64"),
        (OSError(28, "No space left on device", "runs/a/progress.csv"), "runs/a/progress.csv: No space left on device"),
        (PermissionError(13, "Permission denied", "x.h5"), "x.h5: Permission denied"),
        (FileNotFoundError("missing.h5: no such file"), "missing.h5: no such file"),
        (OSError(30, "Read-only file system"), "Read-only file system"),
        (ModuleNotFoundError("plot needs matplotlib"), "plot needs matplotlib"),
    ]  # fmt: skip
    for error, text in cases:
        assert error_text(error) == text

        def body(error: BaseException = error) -> int:
            raise error

        assert run_command("prog", body) == 2
        assert capsys.readouterr().err == f"prog: error: {text}\n"
    with pytest.raises(KeyError):  # a bug keeps its traceback
        run_command("prog", lambda: {}["x"])


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("unseen")
    save_cache(folder / "one_task.h5", synthetic.make_cache(n_models=3, n_questions=30, n_tasks=1, seed=0))
    (folder / "garbage.h5").write_bytes(np.random.default_rng(0).bytes(2048))
    (folder / "folder.h5").mkdir()
    os.mkfifo(folder / "fifo.h5")
    return {name: str(folder / name) for name in ("one_task.h5", "garbage.h5", "folder.h5", "fifo.h5", "missing.h5")}


UNSEEN_ROWS = {
    "alpha NaN": (["toy8", "--alpha", "nan"], "alpha must be a finite number in [0, 1e+06], got nan"),
    "alpha negative": (["toy8", "--alpha", "-1"], "alpha must be a finite number in [0, 1e+06], got -1.0"),
    "alpha infinite": (["toy8", "--alpha", "1e400"], "alpha must be a finite number in [0, 1e+06], got inf"),
    "costs missing": (["toy8", "--use-costs"], "has no 'costs' dataset"),
    "missing cache": (["missing.h5"], "missing.h5: no such cache file"),
    "corrupt cache": (["garbage.h5"], "garbage.h5: not an HDF5 file"),
    "folder cache": (["folder.h5"], "folder.h5: is a folder, not a cache file"),
    "fifo cache": (["fifo.h5"], "fifo.h5: is not a regular file"),
    "one task": (["one_task.h5"], "needs questions of at least two tasks; the questions are of one task ('task_0')"),
}


@pytest.mark.parametrize("row", list(UNSEEN_ROWS))
def test_the_unseen_command_answers_bad_input_in_one_line(
    row: str, caches: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, message = UNSEEN_ROWS[row]
    argv = [caches.get(arg, arg) for arg in argv]
    assert unseen.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m ensemble_env.baselines.unseen: error: "), err
    assert message in err, err


def test_an_unknown_penalty_mode_is_argparses_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop, contextlib.redirect_stdout(io.StringIO()):
        unseen.main(["toy8", "--size-penalty-mode", "sometimes"])
    assert stop.value.code == 2
    assert "argument --size-penalty-mode: invalid choice: 'sometimes'" in capsys.readouterr().err


def test_python_dash_m_reaches_the_handler(caches: dict[str, str]) -> None:
    """Through the interpreter, as the docs run it: exit 2, one line, no traceback."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "ensemble_env.baselines.unseen", caches["folder.h5"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"python -m ensemble_env.baselines.unseen: error: {caches['folder.h5']}: is a folder, not a cache file"
    ]
