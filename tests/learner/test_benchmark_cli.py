"""``ensemble-env benchmark`` at the command line: bad outputs, bad ``--register`` files and bad alphas are one
error line (exit status 2, never a traceback); no matplotlib means no claim of a plot; Ctrl-C keeps the finished
runs and exits 130.

Fast: a tiny synthetic cache, baselines and fake algorithms; one child process for a real SIGINT.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from ensemble_env.cache import save_cache
from ensemble_env.cli import main
from ensemble_env.synthetic import make_cache


@pytest.fixture
def cache_file(tmp_path: Path) -> str:
    cache = make_cache(n_models=3, n_questions=120, n_tasks=2, accuracy=[0.5, 0.6, 0.8], seed=1)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2
    path = tmp_path / "pool.h5"
    save_cache(path, dataclasses.replace(cache, split=split))
    return str(path)


def bench(cache_file: str, *options: str) -> list[str]:
    return [
        "benchmark",
        "--algorithms",
        "best_single",
        "--seeds",
        "1",
        "--cache",
        cache_file,
        "--no-progress",
        *options,
    ]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error line of a command that must be refused: exit status 2, one line, no traceback."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("ensemble-env benchmark: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_bad_out_is_one_error_line(cache_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("kept\n")
    assert "is a file, not a folder" in refused(bench(cache_file, "--out", str(a_file)), capsys)
    err = refused(bench(cache_file, "--out", str(a_file / "bench")), capsys)
    assert f"{a_file}: is a file, not a folder (in the way of {a_file / 'bench'})" in err
    assert "--out is empty" in refused(bench(cache_file, "--out", ""), capsys)
    assert "--out is empty" in refused(bench(cache_file, "--out", "  "), capsys)
    assert a_file.read_text() == "kept\n"
    # the results may not replace the cache: a cache named results.md in the results folder
    folder = tmp_path / "results"
    folder.mkdir()
    os.link(cache_file, folder / "results.md")
    err = refused(bench(str(folder / "results.md"), "--out", str(folder)), capsys)
    assert "the output would overwrite the input" in err


def _read_only_folder(tmp_path: Path) -> Path:
    """A folder this process cannot write in: a read-only one, or (as root, who writes anywhere) /sys."""
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    folder = Path("/sys/ensemble-benchmark-test")
    try:
        folder.mkdir()
    except OSError:
        return Path("/sys")
    folder.rmdir()
    pytest.skip("no read-only folder to try")


def test_a_read_only_out_is_one_error_line(cache_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    folder = _read_only_folder(tmp_path)
    err = refused(bench(cache_file, "--out", str(folder / "bench")), capsys)
    assert "cannot create the folder" in err


@pytest.mark.parametrize(
    ("source", "line", "what"),
    [
        ("x = 1\ndef broken(:\n", 2, "invalid syntax"),
        ("import numpy\n\nraise RuntimeError('no GPU here')\n", 3, "RuntimeError: no GPU here"),
        ("def setup():\n    return 1 / 0\n\nsetup()\n", 2, "ZeroDivisionError"),
        (
            "from ensemble_mappo.benchmark import register_algorithm\n\n@register_algorithm('mappo')\ndef f(): ...\n",
            3,
            "is a built-in name",
        ),
    ],
    ids=["syntax error", "raises", "raises in a function", "a built-in name"],
)
def test_a_broken_register_file_names_the_file_and_line(
    cache_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, line: int, what: str
):
    plugin = tmp_path / "plugin.py"
    plugin.write_text(source)
    err = refused(bench(cache_file, "--out", str(tmp_path / "b"), "--register", str(plugin)), capsys)
    assert f"--register {plugin}, line {line}: " in err and what in err
    assert "no such file" in refused(bench(cache_file, "--register", str(tmp_path / "none.py")), capsys)


@pytest.mark.parametrize("alpha", ["nan", "-0", "-0.0", "inf", "-inf", "1e400", "-1"])
def test_a_bad_alpha_is_refused(cache_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], alpha: str):
    err = refused(bench(cache_file, "--out", str(tmp_path / "b"), f"--alpha={alpha}"), capsys)
    assert "alpha must be a finite number in [0, 1e+06]" in err
    assert not (tmp_path / "b").exists()


def test_without_matplotlib_the_plot_is_skipped_and_said_so(
    cache_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(bench(cache_file, "--out", str(tmp_path / "b"))) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == (
        f"wrote {tmp_path / 'b' / 'results.json'} and results.md (no frontier plot: matplotlib is missing)"
    )
    assert (
        "benchmark: skipped: the frontier plot needs matplotlib, which is not installed (the plot extra): "
        'pip install -e ".[plot]"'
    ) in err
    assert not list((tmp_path / "b").glob("*.png")) and (tmp_path / "b" / "results.md").is_file()


def test_an_interrupted_benchmark_says_what_it_kept(
    cache_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """In-process: Ctrl-C (a KeyboardInterrupt) in the third run; the two finished runs are read back next time."""
    plugin = tmp_path / "stops.py"
    plugin.write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            import numpy as np
            from ensemble_mappo.benchmark import Answers, register_algorithm

            STOPPED = Path(__file__).with_name("stopped")

            @register_algorithm("stops_at_seed_2")
            def stops(cache, seed, alpha, out_dir):
                if seed == 2 and not STOPPED.exists():  # Ctrl-C the first time only
                    STOPPED.touch()
                    raise KeyboardInterrupt
                test = cache.select("test")
                return Answers(test, cache.preds[test, 0], np.eye(cache.n_models, dtype=bool)[np.zeros(test.size, int)])
            """
        )
    )
    argv = ["benchmark", "--algorithms", "stops_at_seed_2", "--seeds", "3", "--cache", cache_file, "--no-progress"]
    argv += ["--out", str(tmp_path / "b"), "--register", str(plugin)]
    assert main(argv) == 130
    err = capsys.readouterr().err
    runs = tmp_path / "b" / "runs"
    assert err == (
        f"ensemble-env benchmark: interrupted after 2 of 3 runs; the finished runs are kept in {runs} and are read "
        "back, not redone, next time\n"
    )
    assert len(list(runs.glob("*/*/result.json"))) == 2
    assert main(argv) == 0
    assert json.loads((tmp_path / "b" / "results.json").read_text())["reused_runs"] == 2
    assert len(list(runs.glob("*/*/result.json"))) == 3


def test_sigint_exits_130_without_a_traceback(cache_file: str, tmp_path: Path):
    """A real SIGINT to a running ``ensemble-env benchmark`` (sent by the second run to its own process)."""
    plugin = tmp_path / "sigint.py"
    plugin.write_text(
        textwrap.dedent(
            """
            import os, signal, time
            import numpy as np
            from ensemble_mappo.benchmark import Answers, register_algorithm

            # a process started in the background inherits SIGINT ignored, and Python then keeps it ignored: give it
            # the handler an interactive ``ensemble-env benchmark`` has, whoever started this test
            signal.signal(signal.SIGINT, signal.default_int_handler)

            @register_algorithm("interrupted")
            def interrupted(cache, seed, alpha, out_dir):
                if seed == 1:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(30)
                test = cache.select("test")
                return Answers(test, cache.preds[test, 0], np.eye(cache.n_models, dtype=bool)[np.zeros(test.size, int)])
            """
        )
    )
    out = tmp_path / "b"
    command = [sys.executable, "-m", "ensemble_env.cli", "benchmark", "--algorithms", "interrupted,best_single"]
    command += ["--seeds", "2", "--cache", cache_file, "--out", str(out), "--no-progress", "--register", str(plugin)]
    child = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert child.returncode == 128 + signal.SIGINT, child.stderr
    assert "Traceback" not in child.stderr
    assert child.stderr.splitlines()[-1] == (
        f"ensemble-env benchmark: interrupted after 1 of 4 runs; the finished runs are kept in {out / 'runs'} and "
        "are read back, not redone, next time"
    )
    assert len(list((out / "runs").glob("*/interrupted-seed0-*/result.json"))) == 1
    assert not list((out / "runs").glob("*/interrupted-seed1-*/result.json"))
    assert not list(out.rglob("*.tmp")) and not (out / "results.json").exists()
