"""Compiled kernels go stale with any kernel module: an edit to ``reward.py`` reaches the cached step kernel; the
compile message is printed once per disk cache; actions of any dtype reuse the compiled signatures."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import ensemble_env
from ensemble_env import datasets
from ensemble_env.game.jit import COMPILE_MESSAGE, KERNEL_MODULES, kernel_sources_digest

PROGRAM = """
import numpy as np, ensemble_env
from ensemble_env.synthetic import make_cache
venv = ensemble_env.vector_env(1, make_cache(n_models=3, n_questions=50, seed=0), alpha=1.0)
venv.reset(seed=0)
label = int(venv.cache.labels[venv.episode_questions(0)[0]])
_, rewards, *_ = venv.step({"decider": np.ones((1, 3), np.int8), "fusion": np.array([label])})
print(float(rewards["fusion"][0]))
"""


#: a kernel the demo never runs: the weighted answers of fusion_action="weights"
OTHER_KERNEL = """
import numpy as np, ensemble_env
from ensemble_env.synthetic import make_cache
venv = ensemble_env.vector_env(1, make_cache(n_models=3, n_questions=50, seed=0), fusion_action="weights")
venv.reset(seed=0)
print(len(venv.weighted_answers(np.ones((1, 3), np.float32))))
"""

#: the README's first command's compile, as ``ensemble-env demo`` meets it (the cache: a path, the copy has no data)
DEMO = "import sys; from ensemble_env.cli import main; sys.exit(main(sys.argv[1:]))"

MESSAGE_START = COMPILE_MESSAGE.split("{", 1)[0]


def _signatures() -> dict[str, int]:
    """Compiled signatures of every kernel of the game's modules, by name."""
    counts = {}
    for name in KERNEL_MODULES:
        module = sys.modules.get(f"ensemble_env.game.{name.removesuffix('.py')}")
        for attribute, value in vars(module or object).items():
            if isinstance(value, CPUDispatcher):
                counts[f"{name}:{attribute}"] = len(value.signatures)
    return counts


@pytest.mark.parametrize("options", [{}, {"decider_action": "multidiscrete"}, {"fusion_action": "weights"}])
def test_actions_of_any_dtype_compile_no_new_signature(options: dict[str, str]) -> None:
    venv = ensemble_env.vector_env(3, "toy8", **options)
    venv.reset(seed=0)

    def step(dtype: type) -> None:
        actions: dict[str, np.ndarray] = {"decider": np.ones((3, 8), dtype=dtype)[:, ::-1]}  # not C-contiguous
        actions["fusion"] = np.ones((3, 8), dtype) if "fusion_action" in options else np.zeros(3, dtype)
        venv.step(actions)

    step(np.int8)  # what the spaces sample: compiles (or loads) its signature of each kernel
    step(np.float64)  # the signature every other dtype is cast to
    before = _signatures()
    for dtype in (np.float64, np.float32, np.int64, np.uint8, np.bool_, np.int32):
        step(dtype)
    assert _signatures() == before


def test_every_kernel_module_is_in_the_digest() -> None:
    package = Path(ensemble_env.__file__).parent
    compiled = {path.name for path in package.glob("*.py") if "@kernel(" in path.read_text(encoding="utf-8")}
    assert compiled <= set(KERNEL_MODULES), compiled - set(KERNEL_MODULES)
    assert len(kernel_sources_digest()) == 64


@pytest.mark.slow
def test_the_compile_is_said_once_per_machine_and_editing_the_reward_recompiles(tmp_path: Path) -> None:
    """On a copy of the package (its own empty ``__pycache__``): the first ``demo`` compiles and says so once, the
    second loads the kernels silently with the same result; a kernel the demo did not compile is compiled without
    repeating the message (once per machine); an edit of ``reward.py`` reaches the cached step kernel, which
    inlines ``step_reward``, and that new compile is announced."""
    package = Path(ensemble_env.__file__).parent
    copy = tmp_path / "ensemble_env"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.h5"))
    env = {"PYTHONPATH": str(tmp_path), "PATH": ""}
    messages: list[int] = []  # how many times each run printed the compile message

    def run(program: str, *argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", program, *argv], capture_output=True, text=True, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        messages.append(done.stderr.count(MESSAGE_START))
        return done.stdout

    demo = ["demo", "--cache", str(datasets.path("toy8")), "--json"]
    first = json.loads(run(DEMO, *demo))  # compiles, and fills the copy's __pycache__; says so
    assert messages == [1]
    assert json.loads(run(DEMO, *demo)) == first and messages == [1, 0]  # loaded from the disk cache, silently
    assert run(OTHER_KERNEL).strip() == "1" and messages == [1, 0, 0]  # a new kernel: compiled, not announced
    assert float(run(PROGRAM)) == 1.0 and messages[-1] == 0
    reward = copy / "game" / "reward.py"
    source = reward.read_text(encoding="utf-8")
    assert source.count("reward = 1.0 if right else -1.0 - penalty") == 1
    reward.write_text(source.replace("reward = 1.0 if right else", "reward = 0.25 if right else"), encoding="utf-8")
    assert float(run(PROGRAM)) == 0.25  # the cached dynamics.step, which inlines step_reward, was not reused
    assert messages[-1] == 1  # new kernel sources: a new compile, announced
