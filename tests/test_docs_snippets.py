"""The fenced ``sh`` and ``python`` blocks of README.md and docs/*.md run as written.

Every block of code a reader may copy is extracted (```` ```sh ````, ```` ```python ````, and the ``$ ``
lines of ```` ```console ```` blocks; ``text`` and ``toml`` blocks are output or configuration) and run in a
subprocess, in a scratch copy of the repository's layout: ``../shared`` points at the real shared data,
``examples/`` and ``scripts/`` at the real ones, everything a block writes (``bbh.h5``, ``runs/``,
``docs/img/...``) stays in the scratch folder. Shell blocks run with ``bash -e -o pipefail`` and the test's
Python environment first on PATH (``ensemble-env``, ``python``); Python blocks run with ``sys.executable``.
The blocks of one document run in their order and share the scratch folder, as a reader following it would.

Rules, applied to each block's text (:func:`classify`), in this order:

1. **skipped: CI runs it elsewhere.** A block that creates a virtualenv (``-m venv``): the README's two
   commands (``.ci/run`` checks that the README shows them word for word and runs them on a clean clone) and
   the adapters' installs (``.ci/adapters.sh``).
2. **skipped: cannot run here.** A block that only runs models with lm-evaluation-harness (``lm_eval ...``: a
   GPU and the network; the rest of a block that also converts their output runs, below), starts a Ray
   cluster (``ray start``: several machines), builds the documentation site (``scripts/build_docs.sh``: CI and
   ``tests/test_docs_site.py`` do, where Sphinx is installed), rebuilds a data file inside the package
   (``scripts/build_*``: it would rewrite the installed package's data), or is a usage synopsis (optional parts
   in brackets, ``[--alpha 1]``: a pattern, not a command).
3. **long: skipped unless** ``ENSEMBLE_ENV_DOCS_LONG=1``. A block that trains for minutes: SB3's ``.learn(``,
   RLlib's ``algo.train(``, BenchMARL's ``experiment.run(`` or ``-m ensemble_env.adapters.benchmarl``,
   ``ensemble-env benchmark`` (learners x seeds), or an ``ensemble-env train`` without ``--passes`` of 20 or
   fewer (the default budget, 100 passes, takes minutes); and the commands of :data:`LONG_COMMANDS`, which take a
   minute or more without training and print figures other tests check (leave one task out on ``bbh5`` under team
   feedback: ``tests/baselines/test_partial.py`` checks the partial rules' figures it prints).
   Their durations are stated in the documents; CI keeps this test under about 5 minutes.
4. **needs a library:** a block that imports (or runs ``-m``) a package that is not installed is skipped
   naming it (the adapters' libraries live in their own virtualenvs, ``.ci/adapters.sh``); ``ensemble-env
   train/evaluate`` needs torch, plots need matplotlib, text features scikit-learn.
5. **needs ../shared:** a block that reads ``../shared`` (or an input made from it, below) is skipped when the
   shared data is absent.
6. **slow** (``@pytest.mark.slow``, run by ``pytest --run-slow``, i.e. CI): every shell block (each command
   starts a Python process and most fit baselines or convert data) and every Python block that calls a heavy
   function (:data:`HEAVY_CALLS`: fitting all baselines, routers, text features, converting lm-eval output,
   plotting, training the example learner of docs/your-learner.md: tests/learner/test_your_learner.py trains it at
   a tiny budget in the default suite). The other Python blocks (building environments, loading caches) run in the
   default suite.

Three more rules make blocks runnable as written:

- **Install steps are dropped** from shell blocks that do not create a virtualenv (``pip install ...``, alone
  or chained with ``&&``): the test runs in the environment they set up, the one running the tests. So are
  **lm-eval runs** (``lm_eval ...`` with its continuation lines): their output, ``runs/``, is the shared
  data's lm-eval output (below), so the commands that convert it run.

- **Inputs a block names but does not make** (:data:`INPUTS`: ``my_cache.h5``, ``bbh.h5``, ``pool.npz``,
  ``runs/``, ...; a name the block first names as a command's output, ``-o bbh.h5``, is the block's to make) are
  created in the scratch folder before it runs, when missing: a copy of a built-in cache,
  the conversion of ``../shared/data/bbh-leaderboard``, small arrays, a copy of the shared model folders
  (lm-eval's output layout).
- **A Python block that uses a name it does not define** (``cache`` in a block that continues the one above)
  runs after the earlier Python blocks of its document, in one program.

A block known to be wrong in a document owned elsewhere is listed in :data:`KNOWN_BROKEN` as a strict xfail
with the fix: when the document is fixed, the xfail fails and the entry must go.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LONG = os.environ.get("ENSEMBLE_ENV_DOCS_LONG") == "1"
TIMEOUT = 900  # seconds per block

#: calls that make a Python block slow (rule 6)
HEAVY_CALLS = (
    "compare(", "fit_router(", "with_text_features(", "from_lm_eval(", "plot_cache(", "frontier(", "example.train("
)  # fmt: skip
#: the Python packages a library adapter imports (rule 4: ``-m ensemble_env.adapters.X`` or ``examples/X_...``)
ADAPTER_LIBRARIES = {"sb3": "stable_baselines3", "rllib": "ray", "torchrl": "torchrl", "benchmarl": "benchmarl"}
#: commands that take a minute or more without training (rule 3): pattern -> where what they print is checked
LONG_COMMANDS = {
    r"-m ensemble_env\.baselines\.unseen bbh5\b[^\n]*--feedback team": (
        "leave one task out on bbh5 under team feedback, bayes_team's 25 settings per fold: a minute; "
        "tests/baselines/test_partial.py checks the partial rules' figures, tests/baselines/test_bayes.py "
        "bayes_team's row on a small cache"
    ),
}
#: blocks of documents owned elsewhere that do not run as written: (document, a line of the block) -> the fix
KNOWN_BROKEN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Block:
    """One fenced block of code: its document, the line its code starts on, its language and its code."""

    document: Path
    line: int
    language: str  # "sh" or "python"
    code: str

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


def extract(document: Path) -> list[Block]:
    """The ``sh``, ``python`` and ``console`` blocks of a Markdown file, in order (console: its ``$`` lines)."""
    text = document.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        language, code = match.group(1), match.group(2)
        line = text.count("\n", 0, match.start(2)) + 1
        if language == "console":
            commands = [row[2:] for row in code.splitlines() if row.startswith("$ ")]
            if commands:
                blocks.append(Block(document, line, "sh", "\n".join(commands) + "\n"))
        elif language in ("sh", "bash", "python"):
            blocks.append(Block(document, line, "python" if language == "python" else "sh", code))
    return blocks


# -- rules -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What the test does with a block: ``skip`` (with ``reason``), ``long``, ``slow`` or ``fast``."""

    tier: str
    reason: str = ""
    modules: tuple[str, ...] = ()  # importorskip these first
    shared: bool = False  # needs ../shared


def _imported_modules(block: Block) -> set[str]:
    modules = set()
    if block.language == "python":
        tree = ast.parse(block.code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
    for adapter in re.findall(r"ensemble_env\.adapters\.(\w+)|examples/(\w+?)_", block.code):
        for name in adapter:
            if name in ADAPTER_LIBRARIES:
                modules.add(ADAPTER_LIBRARIES[name])
    if re.search(r"\bensemble-env (train|evaluate)\b", block.code):
        modules.add("torch")
    if re.search(r"\bensemble-env (plot|cache plot)\b|--frontier|plot_cache\(", block.code):
        modules.add("matplotlib")
    if re.search(r"--features text|--from text|with_text_features\(", block.code):
        modules.add("sklearn")
    local = {"ensemble_env", "ensemble_mappo", *sys.stdlib_module_names}
    return {module for module in modules if module not in local}


def _trains_for_minutes(code: str) -> bool:
    if re.search(r"\.learn\(|algo\.train\(|experiment\.run\(|-m ensemble_env\.adapters\.benchmarl", code):
        return True
    if re.search(r"\bensemble-env benchmark\b", code):
        return True
    for command in re.findall(r"ensemble-env train\b[^\n]*", code):
        passes = re.search(r"--passes (\d+(?:\.\d+)?)", command)
        if passes is None or float(passes.group(1)) > 20:
            return True
    return False


def classify(block: Block) -> Plan:
    """The tier of a block under the rules of the module docstring."""
    code = block.code
    if "-m venv" in code:
        return Plan("skip", "creates a virtualenv: CI runs it (.ci/run, .ci/adapters.sh)")
    if re.search(r"^\s*lm_eval\b", code, re.M) and not without_setup(code).strip():
        return Plan("skip", "runs a model with lm-evaluation-harness (GPU, network)")
    if "ray start" in code:
        return Plan("skip", "starts a Ray cluster")
    if "scripts/build_docs.sh" in code:
        return Plan("skip", "builds the documentation site: .ci/run and tests/test_docs_site.py run it")
    if "scripts/build_" in code:
        return Plan("skip", "rebuilds a data file inside the package")
    if re.search(r"\[--?\w", code):
        return Plan("skip", "a usage synopsis (optional parts in brackets), not a command")
    modules = tuple(sorted(_imported_modules(block)))
    shared = "../shared" in code or any(needs and re.search(pattern, code) for pattern, (_, _, needs) in INPUTS.items())
    if _trains_for_minutes(code):
        return Plan("long", "trains for minutes (ENSEMBLE_ENV_DOCS_LONG=1 runs it)", modules, shared)
    for pattern, checked in LONG_COMMANDS.items():
        if re.search(pattern, code):
            return Plan("long", f"{checked} (ENSEMBLE_ENV_DOCS_LONG=1 runs it)", modules, shared)
    slow = block.language == "sh" or any(call in code for call in HEAVY_CALLS)
    return Plan("slow" if slow else "fast", "", modules, shared)


def _undefined_names(code: str) -> set[str]:
    """Names a Python block reads at module level without defining or importing them."""
    tree = ast.parse(code)
    defined, used = set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else defined).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return used - defined


def program(block: Block, blocks: list[Block]) -> str:
    """The code to run for ``block``: with the earlier Python blocks of its document when it continues them."""
    if block.language != "python" or not _undefined_names(block.code):
        return block.code
    earlier = [other.code for other in blocks if other.document == block.document and other.language == "python"]
    return "\n".join(earlier[: earlier.index(block.code) + 1])


# -- inputs a block names --------------------------------------------------------------------------------


def _copy_toy8(path: Path) -> None:
    from ensemble_env import datasets

    shutil.copyfile(datasets.path("toy8"), path)


def _bbh(path: Path) -> None:
    from ensemble_env import save_cache
    from ensemble_env.cache.convert import from_lm_eval

    save_cache(path, from_lm_eval([SHARED / "data" / "bbh-leaderboard"]))


def _pool_npz(path: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(path, scores=rng.normal(size=(30, 3, 4)), labels=rng.integers(0, 4, 30), models=np.array(["a", "b", "c"]))


def _scores_csv(path: Path) -> None:
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(2), size=(20, 3)).reshape(20, 6)
    np.savetxt(path, probs, delimiter=",", fmt="%.6f")


def _labels_txt(path: Path) -> None:
    path.write_text("".join(f"{label}\n" for label in np.random.default_rng(2).integers(0, 2, 20)), encoding="utf-8")


def _embeddings(path: Path) -> None:
    from ensemble_env import load_cache

    bbh = path.parent / "bbh.h5"
    if not bbh.exists():
        _bbh(bbh)
    n_questions = load_cache(bbh).n_questions
    np.save(path, np.random.default_rng(3).normal(size=(n_questions, 8)).astype(np.float32))


def _runs(path: Path) -> None:
    # a copy, not symlinks: the converters refuse a link that leads out of the folder they are given
    shutil.copytree(SHARED / "data" / "bbh-leaderboard", path)


#: inputs created when a block names them and they are missing: pattern in the code -> (file, maker, needs shared)
INPUTS = {
    r"\bmy_cache\.h5\b": ("my_cache.h5", _copy_toy8, False),
    r"\bother\.h5\b": ("other.h5", _copy_toy8, False),
    r"\bbbh\.h5\b": ("bbh.h5", _bbh, True),
    r"\bpool\.npz\b": ("pool.npz", _pool_npz, False),
    r"\bscores\.csv\b": ("scores.csv", _scores_csv, False),
    r"\blabels\.txt\b": ("labels.txt", _labels_txt, False),
    r"\bembeddings\.npy\b": ("embeddings.npy", _embeddings, True),
    r"(?<![\w/])runs/(?![\w])": ("runs", _runs, True),
}


#: what a command writes: the path after ``-o``, ``--out`` or ``--output``
_WRITES = re.compile(r"(?:^|\s)(?:-o|--out|--output)[ =]$")


def _make_inputs(block: Block, folder: Path) -> None:
    """Make the inputs (:data:`INPUTS`) ``block`` names and does not make: the missing ones, unless the first time the
    block names one is as the output of its command (``-o bbh.h5``: the block writes it before reading it)."""
    for pattern, (name, make, _) in INPUTS.items():
        first = re.search(pattern, block.code)
        if first and not (folder / name).exists() and not _WRITES.search(block.code[: first.start()]):
            make(folder / name)


# -- running ------------------------------------------------------------------------------------------------


def _scratch(root: Path) -> Path:
    """A folder laid out like the repository: ../shared, examples/ and scripts/ linked, docs/img empty."""
    repo = root / "repo"
    (repo / "docs" / "img").mkdir(parents=True)
    for name in ("examples", "scripts"):
        (repo / name).symlink_to(ROOT / name)
    if SHARED.exists():
        (root / "shared").symlink_to(SHARED)
    return repo


def without_installs(code: str) -> str:
    r"""Shell code without its ``pip install`` steps (whole lines, or parts of an ``&&`` chain).

    >>> without_installs('pip install torch && pip install -e ".[mappo]"   # first\nensemble-env demo\n')
    'ensemble-env demo\n'
    """
    lines = []
    for line in code.splitlines():
        command = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        steps = [step for step in command.split("&&") if not re.match(r"\s*(\S*/)?pip3? install\b", step)]
        if command and not "".join(steps).strip():
            continue  # only installs on this line
        lines.append(line if len(steps) == command.count("&&") + 1 else "&&".join(steps).strip())
    return "".join(f"{line}\n" for line in lines)


def without_lm_eval_runs(code: str) -> str:
    r"""Shell code without its ``lm_eval`` commands (and their ``\`` continuation lines) and comment lines.

    >>> without_lm_eval_runs("# run it\nlm_eval --model hf \\\n    --output_path runs/\nensemble-env cache info a.h5\n")
    'ensemble-env cache info a.h5\n'
    """
    lines, continued = [], False
    for line in code.splitlines():
        if continued or re.match(r"\s*lm_eval\b", line):
            continued = line.rstrip().endswith("\\")
        elif not line.lstrip().startswith("#"):
            lines.append(line)
    return "".join(f"{line}\n" for line in lines)


def without_setup(code: str) -> str:
    """Shell code as the test runs it: without install steps and lm-eval runs (see the module docstring)."""
    return without_installs(without_lm_eval_runs(code))


def run_block(block: Block, blocks: list[Block], folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``block`` in ``folder`` (its inputs made first); the completed process."""
    _make_inputs(block, folder)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "MPLBACKEND": "Agg"}
    if block.language == "sh":
        argv = ["bash", "-e", "-o", "pipefail", "-c", without_setup(block.code)]
    else:
        argv = [sys.executable, "-c", program(block, blocks)]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def _report(block: Block, done: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{block.where}: exit status {done.returncode}\n--- code\n{block.code}\n"
        f"--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}"
    )


ALL_BLOCKS = [block for document in DOCUMENTS for block in extract(document)]


def _parameters() -> list[object]:
    parameters = []
    for block in ALL_BLOCKS:
        plan = classify(block)
        marks: list[pytest.MarkDecorator] = []
        if plan.tier == "slow":
            marks.append(pytest.mark.slow)
        for (document, line), fix in KNOWN_BROKEN.items():
            if str(block.document.relative_to(ROOT)) == document and line in block.code:
                marks.append(pytest.mark.xfail(strict=True, reason=f"{block.where} does not run as written: {fix}"))
        parameters.append(pytest.param(block, plan, id=block.where, marks=marks))
    return parameters


@pytest.fixture(scope="module")
def scratch_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """One scratch folder per document, shared by its blocks (made when first used)."""
    return {document: _scratch(tmp_path_factory.mktemp(document.stem)) for document in DOCUMENTS}


@pytest.mark.parametrize(("block", "plan"), _parameters())
def test_block_runs_as_written(block: Block, plan: Plan, scratch_folders: dict[Path, Path]) -> None:
    if plan.tier == "skip":
        pytest.skip(f"{block.where}: {plan.reason}")
    if plan.tier == "long" and not LONG:
        pytest.skip(f"{block.where}: {plan.reason}")
    for module in plan.modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{block.where}: needs {module}")
    if plan.shared and not SHARED.exists():
        pytest.skip(f"{block.where}: needs the shared data in ../{SHARED.name}/")
    done = run_block(block, ALL_BLOCKS, scratch_folders[block.document])
    assert done.returncode == 0, _report(block, done)


# -- the rules themselves ------------------------------------------------------------------------------------


def test_every_document_has_runnable_blocks_and_the_readme_commands_are_left_to_ci() -> None:
    readme = [block for block in ALL_BLOCKS if block.document.name == "README.md"]
    assert readme and readme[0].language == "sh"
    assert classify(readme[0]) == Plan("skip", "creates a virtualenv: CI runs it (.ci/run, .ci/adapters.sh)")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in re.findall(r"^(?:main_job|tests)='([^']+)'", ci, re.M):
        assert command in readme[0].code  # the block skipped here is the one .ci/run runs
    assert {classify(block).tier for block in ALL_BLOCKS} >= {"fast", "slow", "skip"}


def test_rules_classify_by_content() -> None:
    def plan(code: str, language: str = "sh") -> Plan:
        return classify(Block(ROOT / "README.md", 1, language, code))

    assert plan("ensemble-env train --out runs/x --passes 20\n").tier == "slow"
    assert plan("ensemble-env train --out runs/x\n").tier == "long"
    assert plan("ensemble-env train --out runs/x --passes 200\n").tier == "long"
    assert plan("from ensemble_env import datasets\ndatasets.load('toy8')\n", "python").tier == "fast"
    assert plan("from ensemble_env import comparison\ncomparison.compare(c)\n", "python").tier == "slow"
    assert plan("from sb3_contrib import MaskablePPO\n", "python").modules == ("sb3_contrib",)
    assert plan("python -m ensemble_env.adapters.benchmarl task=x\n").modules == ("benchmarl",)
    assert plan("ensemble-env cache plot bbh.h5 -o p/\n") == Plan("slow", "", ("matplotlib",), True)
    assert plan("lm_eval --model hf \\\n  --output_path runs/ --log_samples\n").tier == "skip"
    converts = plan("lm_eval --model hf \\\n  --output_path runs/\nensemble-env cache from-lm-eval runs/ -o bbh.h5\n")
    assert converts == Plan("slow", "", (), True)  # the lm-eval run dropped, its output made from ../shared
    assert plan("ensemble-env benchmark --cache bbh5 --out OUT [--alpha 1]\n").tier == "skip"  # a synopsis
    assert plan("ensemble-env benchmark --seeds 5 --cache bbh5 --out OUT\n").tier == "long"
    assert plan("python -m ensemble_env.baselines.unseen bbh5 --alpha 1 --feedback team\n").tier == "long"
    assert plan("python -m ensemble_env.baselines.unseen bbh5 --alpha 1\n").tier == "slow"
    assert plan("python -m ensemble_env.baselines.unseen toy8 --alpha 1 --feedback team\n").tier == "slow"


def test_a_python_block_that_continues_the_one_above_runs_after_it(tmp_path: Path) -> None:
    first = Block(tmp_path / "a.md", 1, "python", "import math\nvalue = math.sqrt(16)\n")
    second = Block(tmp_path / "a.md", 9, "python", "assert value == 4.0\nprint('ok', value)\n")
    assert _undefined_names(second.code) == {"value"} and not _undefined_names(first.code)
    done = run_block(second, [first, second], tmp_path)
    assert done.returncode == 0 and done.stdout == "ok 4.0\n", done.stderr


def test_a_failing_block_fails_and_says_where(tmp_path: Path) -> None:
    document = tmp_path / "guide.md"
    document.write_text(
        "Text.\n\n```sh\necho first\nfalse\necho never\n```\n\n```console\n$ echo shown\nshown\n```\n",
        encoding="utf-8",
    )
    failing, console = extract(document)
    assert (failing.line, failing.language, console.code) == (4, "sh", "echo shown\n")
    done = run_block(failing, [failing], tmp_path)
    assert done.returncode != 0 and done.stdout == "first\n"  # bash -e stops at the failing command
    assert run_block(console, [console], tmp_path).stdout == "shown\n"


def test_inputs_a_block_names_are_made_in_its_folder(tmp_path: Path) -> None:
    block = Block(ROOT / "README.md", 1, "sh", "ensemble-env cache validate my_cache.h5\n")
    _make_inputs(block, tmp_path)
    assert (tmp_path / "my_cache.h5").is_file() and not (tmp_path / "bbh.h5").exists()
    done = run_block(block, [block], tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("ok my_cache.h5: 3136 questions x 8 models"), done.stderr
    writes = Block(
        ROOT / "README.md", 1, "sh", "ensemble-env cache from-arrays pool.npz --score-kind logit -o my_cache.h5\n"
    )
    (tmp_path / "writes").mkdir()
    _make_inputs(writes, tmp_path / "writes")  # the block writes my_cache.h5 before anything reads it
    assert sorted(path.name for path in (tmp_path / "writes").iterdir()) == ["pool.npz"]
