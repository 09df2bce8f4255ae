"""The benchmark scripts in the tests: importing one as the scripts import each other, and the folders they meet
(a folder's snapshot, a ``train`` run's files) and the stub of the learner's ``benchmark`` that the stress of
``small_sample.py`` calls."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

#: the folder of the benchmark scripts (they import their siblings by name)
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def import_benchmark(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """The benchmark script ``name`` as the scripts import each other: a sibling on ``sys.path``, freshly imported
    (forget it afterwards with ``sys.modules.pop(name, None)``)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def folder_snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by relative path, with the SHA-256 of its bytes (links and folders by kind): what
    must be the same after a refused case."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = f"link {os.readlink(path)}"
        elif path.is_dir():
            found[key] = "folder"
        else:
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def train_run(folder: Path) -> Path:
    """A folder holding a ``train`` run's files (what a run leaves; their bytes are what must survive)."""
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "config.json").write_text('{"algorithm": "mappo"}\n', encoding="utf-8")
    (folder / "selection.json").write_text('{"update": 3, "rule": "safe"}\n', encoding="utf-8")
    (folder / "progress.csv").write_text("update,env/reward\n1,0.5\n", encoding="utf-8")
    (folder / "checkpoints" / "update_0.pt").write_bytes(b"weights")
    return folder


def fake_benchmark(algorithms: list[str], seeds: Any, caches: list[str], out: Path, **_: Any) -> dict[str, Any]:
    """What ``small_sample.stress`` reads of ``benchmark``'s results, without training (the cut file must exist)."""
    assert Path(caches[0]).is_file()
    interval = {"mean": 0.0, "low": 0.0, "high": 0.0}
    mine = {"runs": [{"info": {"selected_iteration": 0}}], "aggregate": {"reward": interval},
            "versus": {name: {"reward": interval} for name in algorithms[1:]}}  # fmt: skip
    return {"caches": {caches[0]: {algorithms[0]: mine}}}
