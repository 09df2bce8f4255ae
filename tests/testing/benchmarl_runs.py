"""BenchMARL's Hydra command line, run tiny and quiet in a subprocess (shared by the BenchMARL test modules)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: every run: no evaluation, logger, JSON or final checkpoint; its files in the test's folder
QUIET = [
    "experiment.evaluation=false",
    "experiment.loggers=[]",
    "experiment.create_json=false",
    "experiment.checkpoint_at_end=false",
]


def run_benchmarl(module: str, overrides: list[str], tmp_path: Path) -> str:
    """``python -m MODULE OVERRIDES`` plus :data:`QUIET` and the folders in ``tmp_path``; asserts it succeeds and
    returns what it printed."""
    folders = [f"experiment.save_folder={tmp_path}", f"hydra.run.dir={tmp_path}"]
    command = [sys.executable, "-m", module, *overrides, *QUIET, *folders]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
