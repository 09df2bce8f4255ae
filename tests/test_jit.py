"""Compiled kernels go stale with any kernel module: an edit to ``reward.py`` reaches the cached step kernel."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ensemble_env
from ensemble_env.game.jit import KERNEL_MODULES, kernel_sources_digest

PROGRAM = """
import numpy as np, ensemble_env
from ensemble_env.synthetic import make_cache
venv = ensemble_env.vector_env(1, make_cache(n_models=3, n_questions=50, seed=0), alpha=1.0)
venv.reset(seed=0)
label = int(venv.cache.labels[venv.episode_questions(0)[0]])
_, rewards, *_ = venv.step({"decider": np.ones((1, 3), np.int8), "fusion": np.array([label])})
print(float(rewards["fusion"][0]))
"""


def test_every_kernel_module_is_in_the_digest() -> None:
    package = Path(ensemble_env.__file__).parent
    compiled = {path.name for path in package.glob("*.py") if "@kernel(" in path.read_text(encoding="utf-8")}
    assert compiled <= set(KERNEL_MODULES), compiled - set(KERNEL_MODULES)
    assert len(kernel_sources_digest()) == 64


@pytest.mark.slow
def test_editing_the_reward_recompiles_the_cached_step_kernel(tmp_path: Path) -> None:
    package = Path(ensemble_env.__file__).parent
    copy = tmp_path / "ensemble_env"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.h5"))

    def run() -> float:
        env = {"PYTHONPATH": str(tmp_path), "PATH": ""}
        done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        return float(done.stdout.strip())

    assert run() == 1.0  # compiles, and fills the copy's __pycache__
    reward = copy / "game" / "reward.py"
    source = reward.read_text(encoding="utf-8")
    assert source.count("reward = 1.0 if right else -1.0 - penalty") == 1
    reward.write_text(source.replace("reward = 1.0 if right else", "reward = 0.25 if right else"), encoding="utf-8")
    assert run() == 0.25  # the cached dynamics.step, which inlines step_reward, was not reused
