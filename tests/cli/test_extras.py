"""Every command that needs an optional extra checks it first (:func:`ensemble_env.extras.require`): with the library
missing it prints one line in the one format, naming the extra and the install line, exits with status 2, and has
done nothing (no cache read, nothing written, no folder made).

A missing library is simulated as the tests of the package do it: ``sys.modules[name] = None``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from ensemble_env import cli, extras

TORCH = 'pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e ".[mappo]"'
PLOT = 'pip install -e ".[plot]"'
DATA = 'pip install -e ".[data]"'


def _learners() -> str:
    from ensemble_mappo.benchmark.learners import LEARNERS
    from ensemble_mappo.benchmark.registry import DEFAULT_ALGORITHMS

    return ",".join(name for name in DEFAULT_ALGORITHMS if name in LEARNERS)


#: what every refusal for torch ends with
NO_TORCH = f"needs torch, which is not installed (the mappo extra): {TORCH}"
#: (command line, missing modules, the one line on stderr after ``ensemble-env ``)
CASES = [
    (["train", "--out", "run"], ["torch"], f"train: error: train {NO_TORCH}"),
    (["train", "--resume", "run"], ["torch"], f"train: error: train {NO_TORCH}"),
    (["evaluate", "run"], ["torch"], f"evaluate: error: evaluate {NO_TORCH}"),
    (["plot", "run", "--out", "plots"], ["torch"], f"plot: error: plot {NO_TORCH}"),
    (
        ["plot", "run", "--out", "plots"], ["matplotlib"],
        'plot: error: plot needs matplotlib, which is not installed (the mappo extra): pip install -e ".[mappo]"',
    ),
    (
        ["plot", "run"], ["torch", "matplotlib"],
        f"plot: error: plot needs torch and matplotlib, which are not installed (the mappo extra): {TORCH}",
    ),
    (
        ["baselines", "toy8", "--frontier", "f.png"], ["matplotlib"],
        f"baselines: error: baselines --frontier needs matplotlib, which is not installed (the plot extra): {PLOT}",
    ),
    (
        ["cache", "plot", "toy8", "-o", "plots"], ["matplotlib"],
        f"cache plot: error: cache plot needs matplotlib, which is not installed (the plot extra): {PLOT}",
    ),
    (
        ["cache", "features", "bbh5", "--from", "text", "-o", "f.h5"], ["sklearn"],
        "cache features: error: cache features --from text needs scikit-learn, which is not installed (the data "
        f"extra): {DATA}",
    ),
    (
        ["cache", "from-lm-eval", "samples", "--features", "text", "-o", "c.h5"], ["sklearn"],
        "cache from-lm-eval: error: cache from-lm-eval --features text needs scikit-learn, which is not installed "
        f"(the data extra): {DATA}",
    ),
    (
        ["benchmark", "--algorithms", "static_team,mappo", "--cache", "toy8", "--out", "b"], ["torch"],
        f"benchmark: error: benchmark --algorithms mappo {NO_TORCH}",
    ),
    (["benchmark"], ["torch"], f"benchmark: error: benchmark --algorithms {{learners}} {NO_TORCH}"),
]  # fmt: skip
IDS = [f"{' '.join(argv[:2])} {'+'.join(absent)}" for argv, absent, _ in CASES]


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a command starts its work fails the test: reading a cache, running the benchmark. The modules that
    bind ``datasets.resolve`` at import (as ``resolve_cache``) are imported first and patched too: patched only at
    its source, a module first imported during the test would keep the patch after it, and one imported before
    would not be guarded."""
    from ensemble_mappo.benchmark import cli as benchmark_cli

    def work(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the command started its work before checking its extra")

    bound = []
    for name in ("ensemble_mappo.cli", "ensemble_mappo.runs", "ensemble_mappo.benchmark.runner"):
        with contextlib.suppress(ImportError):  # a learner module may need torch, which a test may hide
            bound.append(importlib.import_module(name))  # before the patch, so it binds the real function
    monkeypatch.setattr("ensemble_env.cache.datasets.resolve", work)
    for module in bound:
        monkeypatch.setattr(module, "resolve_cache", work)
    monkeypatch.setattr(benchmark_cli, "benchmark", work)
    monkeypatch.setattr(benchmark_cli, "load_plugins", work)


@pytest.mark.parametrize(("argv", "absent", "line"), CASES, ids=IDS)
def test_a_command_stops_first_with_the_one_message(
    argv: list[str],
    absent: list[str],
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()  # a run directory for train --resume, evaluate and plot: left as it is
    _no_work(monkeypatch)
    for module in absent:
        monkeypatch.setitem(sys.modules, module, None)
    assert cli.main(argv) == extras.EXIT_STATUS == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"ensemble-env {line.format(learners=_learners())}\n"
    assert [path.name for path in tmp_path.iterdir()] == ["run"] and not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize(
    "argv",
    [["train", "--out", "run", "--logger", "tensorboard"], ["train", "--resume", "run", "--logger", "csv,tensorboard"]],
    ids=["out", "resume"],
)
def test_train_logger_tensorboard_stops_first_without_tensorboard(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if extras.missing(["torch"]):
        pytest.skip("without torch, train stops for torch first (CASES)")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    _no_work(monkeypatch)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    assert cli.main(argv) == extras.EXIT_STATUS
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "ensemble-env train: error: train --logger tensorboard needs tensorboard, which is not installed (the "
        'tensorboard extra): pip install -e ".[tensorboard]"\n'
    )
    assert [path.name for path in tmp_path.iterdir()] == ["run"] and not any((tmp_path / "run").iterdir())


def test_what_needs_no_extra_runs_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``baselines`` without ``--frontier`` needs no matplotlib; a benchmark of baselines needs no torch."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["baselines", "toy8", "--only", "best_single", "--json"]) == 0
    monkeypatch.setitem(sys.modules, "torch", None)
    argv = ["benchmark", "--algorithms", "best_single", "--seeds", "1", "--cache", "toy8", "--out", "b"]
    assert cli.main([*argv, "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "needs torch" not in err and (tmp_path / "b" / "results.json").is_file()
    skipped = f"benchmark: skipped: the frontier plot needs matplotlib, which is not installed (the plot extra): {PLOT}"
    assert skipped in err and not list((tmp_path / "b").glob("*.png"))


def test_the_message_and_the_install_lines() -> None:
    expected = f"x needs scikit-learn, which is not installed (the data extra): {DATA}"
    assert extras.message("x", "data", ["sklearn"]) == expected
    assert extras.message("x", "mappo", ["torch", "tqdm", "matplotlib"]).startswith(
        "x needs torch, tqdm and matplotlib, which are not installed (the mappo extra): pip install torch --index-url"
    )
    assert extras.install_line("mappo") == 'pip install -e ".[mappo]"'
    with pytest.raises(ValueError, match="unknown extra 'plots'; the extras are plot, mappo"):
        extras.install_line("plots")
    with pytest.raises(ValueError, match="name at least one missing module"):
        extras.message("x", "plot", [])
    error = extras.missing_error("the frontier plot", "plot", ["matplotlib"])
    assert isinstance(error, ModuleNotFoundError) and error.name == "matplotlib"


def test_missing_finds_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert extras.missing(["numpy", "json"]) == []
    assert extras.missing(["no_such_module_here", "no_such_package_here.sub", "numpy"]) == [
        "no_such_module_here",
        "no_such_package_here.sub",
    ]
    monkeypatch.setitem(sys.modules, "numpy", None)
    assert extras.missing(["numpy"]) == ["numpy"]
    assert extras.require("demo", "plot", ["json"]) is True
