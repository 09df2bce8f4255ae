"""The package's shape: imports point one way (no cycle, not even through an import inside a function), each
part imports only from itself or the parts below it, no private name crosses a module, the public names
stay importable, and every file the docs and docstrings cite exists; each module holds one concept (fewer than
:data:`MAX_MODULE_LINES` lines), each numba kernel takes at most :data:`MAX_KERNEL_PARAMETERS` parameters (its state
travels as named records), and the RLAE learner shares no block of code with the rest of the learners (it reuses).
In the tests, no module imports a test module (what several share is in the package tests/testing/).

The imports are read with ``ast`` (module level and inside functions alike), not by importing anything.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"ensemble_env": ROOT / "src" / "ensemble_env", "ensemble_mappo": ROOT / "agents" / "ensemble_mappo"}

#: the parts, bottom to top: a module may import from its own part and from the parts of a lower rank.
#: ``views`` and ``baselines`` stand side by side over the game; the package's front door (``ensemble_env``
#: itself) sits above what it re-exports, the command line and the learner above it.
RANKS = {
    "ensemble_env.text": 0,
    "ensemble_env.filesystem": 0,
    "ensemble_env.files": 0,
    "ensemble_env.run_lock": 0,
    "ensemble_env.metrics": 0,
    "ensemble_env.extras": 0,
    "ensemble_env.errors": 0,
    "ensemble_env.seeds": 0,
    "ensemble_env.cache": 1,
    "ensemble_env.game": 2,
    "ensemble_env.views": 3,
    "ensemble_env.baselines": 3,
    "ensemble_env": 4,
    "ensemble_env.adapters": 5,
    "ensemble_env.cli": 5,
    "ensemble_mappo": 6,
}


def _modules() -> dict[str, Path]:
    modules = {}
    for name, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _owner(target: str) -> str | None:
    """The first-party module ``target`` (a dotted name) lives in, or None for a third-party one."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every first-party import in the module's source."""
    return _imports_of_source(name, path.read_text(encoding="utf-8"), package=path.name == "__init__.py")


def _imports_of_source(name: str, source: str, package: bool = False) -> list[tuple[str, str | None, int]]:
    anchor_name = name if package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (owner := _owner(alias.name)) is not None:
                    found.append((owner, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = anchor_name.split(".")[: len(anchor_name.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:
                    found.append((submodule, None, node.lineno))
                elif (owner := _owner(base)) is not None:
                    found.append((owner, alias.name, node.lineno))
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _rank(module: str) -> int:
    part = max((prefix for prefix in RANKS if module == prefix or module.startswith(prefix + ".")), key=len)
    return RANKS[part]


def _cycles(graph: dict[str, list[tuple[str, str | None, int]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), i.e. the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in {target for target, _, _ in graph[node] if target != node}:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_graph_is_read_from_both_packages() -> None:
    assert {"ensemble_env.game.engine", "ensemble_env.cache.hdf5", "ensemble_mappo.training"} <= set(MODULES)
    assert ("ensemble_env.game.jit", "kernel", 0) in {(t, n, 0) for t, n, _ in GRAPH["ensemble_env.game.reward"]}


def test_no_import_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_a_cycle_through_an_import_inside_a_function_is_found() -> None:
    """The checker itself: an import inside a function, from the caches back up to the game, is a cycle."""
    source = "def load():\n    from ensemble_env.game.engine import EnsembleVectorEnv\n"
    planted = dict(GRAPH)
    tree = ast.parse(source)
    assert isinstance(tree.body[0], ast.FunctionDef)
    planted["ensemble_env.cache.logit_cache"] = [
        *GRAPH["ensemble_env.cache.logit_cache"],
        *((target, name, line) for target, name, line in _imports_of_source("ensemble_env.cache.logit_cache", source)),
    ]
    assert any("ensemble_env.cache.logit_cache" in cycle for cycle in _cycles(planted))


def test_imports_point_down() -> None:
    upward = [
        f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}"
        for name, imports in GRAPH.items()
        for target, _, line in imports
        if _rank(target) > _rank(name)
    ]
    assert upward == []


def test_no_private_name_crosses_a_module() -> None:
    crossing = [
        f"{MODULES[name].relative_to(ROOT)}:{line} imports {imported} from {target}"
        for name, imports in GRAPH.items()
        for target, imported, line in imports
        if imported is not None and imported.startswith("_") and not imported.startswith("__") and target != name
    ]
    assert crossing == []


PUBLIC = [
    ("ensemble_env", "parallel_env"),
    ("ensemble_env", "env"),
    ("ensemble_env", "vector_env"),
    ("ensemble_env", "load_cache"),
    ("ensemble_env", "save_cache"),
    ("ensemble_env", "LogitCache"),
    ("ensemble_env", "CacheError"),
    ("ensemble_env", "EnvConfig"),
    ("ensemble_env", "datasets"),
    ("ensemble_env", "metrics"),
    ("ensemble_env", "synthetic"),
    ("ensemble_env", "baselines"),
    ("ensemble_env.datasets", "resolve"),
    ("ensemble_env.synthetic", "make_cache"),
    ("ensemble_env.metrics", "focal_diversity"),
    ("ensemble_env.cache", "load_cache"),
    ("ensemble_env.baselines", "best_single"),
    ("ensemble_env.baselines", "BASELINES"),
    ("ensemble_env.adapters", "require"),
    ("ensemble_env.cli", "main"),
]


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_public_names_import(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is not None


def test_the_commands_stay() -> None:
    from ensemble_env.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"demo", "baselines", "play", "cache", "train", "evaluate", "plot", "benchmark"} <= set(commands)


#: a path the docs cite: a repository folder and a file name, or a module file of a package
_CITED = re.compile(
    r"(?<![\w/.-])((?:docs|benchmarks|examples|scripts|src|agents|tests|\.ci)/[\w./-]+\.(?:md|py|png|h5|sh|toml|txt)"
    r"|(?:ensemble_env|ensemble_mappo)/[\w/]+\.py)"
)
_PLACEHOLDER = re.compile(r"NAME|EXAMPLE|NN_|/f\.png")


def _tracked() -> list[Path]:
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if listing.returncode != 0:  # not a git checkout (an unpacked sdist): every file below the root
        return [path for path in ROOT.rglob("*") if ".venv" not in path.parts and path.is_file()]
    return [ROOT / line for line in listing.stdout.splitlines()]


def _exists(cited: str) -> bool:
    if cited.startswith("ensemble_env/"):
        return (ROOT / "src" / cited).exists()
    if cited.startswith("ensemble_mappo/"):
        return (ROOT / "agents" / cited).exists()
    return (ROOT / cited).exists()


def test_every_cited_file_exists() -> None:
    missing = []
    for path in _tracked():
        if path.suffix not in (".py", ".md", ".toml", ".sh") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for cited in _CITED.findall(line):
                cited = cited.rstrip(".")
                if not _PLACEHOLDER.search(cited) and not _exists(cited):
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {cited}")
    assert missing == []


# -- one concept per file, kernels of few parameters, no copy of the learner frame ------------------------------------

#: a module of this many lines or more holds more than one concept: split it along them (JaxMARL's environments are
#: 135-209 lines; Gymnasium's vector/ keeps one mechanism per small file)
MAX_MODULE_LINES = 700
#: the most parameters of a numba kernel: what it reads and writes travels as a few named records (game/records.py)
MAX_KERNEL_PARAMETERS = 8
#: the RLAE learner's modules, which reuse the frame's pieces rather than copy them
RLAE_MODULES = ("ensemble_mappo.rlae", "ensemble_mappo.rlae_config")
#: lines in a row that make a copied block
COPIED_LINES = 4


def _long_modules(paths: list[Path]) -> list[str]:
    """``path: N lines`` for each of ``paths`` of :data:`MAX_MODULE_LINES` lines or more."""
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}: {count} lines"
        for path in paths
        if (count := len(path.read_text(encoding="utf-8").splitlines())) >= MAX_MODULE_LINES
    ]


def test_every_module_holds_one_concept() -> None:
    assert _long_modules(list(MODULES.values())) == []


def test_the_checker_finds_a_long_module(tmp_path: Path) -> None:
    """The checker itself: a planted module of exactly the limit is found, one line shorter is not."""
    long, short = tmp_path / "long.py", tmp_path / "short.py"
    long.write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    short.write_text("x = 1\n" * (MAX_MODULE_LINES - 1), encoding="utf-8")
    assert _long_modules([long, short]) == [f"long.py: {MAX_MODULE_LINES} lines"]


def _kernels() -> Iterator[tuple[str, ast.FunctionDef]]:
    """(module, function) for every function decorated with ``@kernel(...)`` (ensemble_env.game.jit)."""
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    called = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if isinstance(called, ast.Name) and called.id == "kernel":
                        yield name, node


def test_kernels_take_few_parameters() -> None:
    kernels = list(_kernels())
    assert len(kernels) >= 20, "the kernels of ensemble_env.game were not found"
    wide = []
    for module, function in kernels:
        arguments = function.args
        count = len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
        count += (arguments.vararg is not None) + (arguments.kwarg is not None)
        if count > MAX_KERNEL_PARAMETERS:
            wide.append(f"{module}.{function.name}: {count} parameters")
    assert wide == []


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text with white space folded) of the lines that are code: no blank line, comment, import or
    lone bracket (as ``duplicates`` reads a file)."""
    lines = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = " ".join(line.split())
        if not text or text.startswith(("#", "import ", "from ")) or not re.search(r"[\w\"']", text):
            continue
        lines.append((number, text))
    return lines


def _copied_blocks(ours: Path, theirs: Path, size: int = COPIED_LINES) -> list[tuple[int, int]]:
    """(line in ``ours``, line in ``theirs``) where a run of ``size`` code lines of ``ours`` stands again, identical."""
    runs: dict[tuple[str, ...], int] = {}
    other = _code_lines(theirs)
    for start in range(len(other) - size + 1):
        runs.setdefault(tuple(text for _, text in other[start : start + size]), other[start][0])
    own = _code_lines(ours)
    return [
        (own[start][0], runs[block])
        for start in range(len(own) - size + 1)
        if (block := tuple(text for _, text in own[start : start + size])) in runs
    ]


def test_the_checker_finds_a_copied_block(tmp_path: Path) -> None:
    body = "def f(x):\n    y = x + 1\n    # a comment\n    z = y * 2\n    return z - x\n"
    ours, theirs = tmp_path / "ours.py", tmp_path / "theirs.py"
    ours.write_text(f"import os\n{body}", encoding="utf-8")
    theirs.write_text(f"a = 1\n\n{body.replace('    ', '        ')}", encoding="utf-8")
    assert _copied_blocks(ours, theirs) == [(2, 3)]  # the comment and the import do not count, nor the indentation
    assert _copied_blocks(ours, theirs, size=5) == []


def test_the_rlae_learner_copies_no_block_of_the_other_learners() -> None:
    copies = [
        f"{MODULES[name].relative_to(ROOT)}:{line} ~ {path.relative_to(ROOT)}:{their_line}"
        for name in RLAE_MODULES
        for other, path in MODULES.items()
        if other.startswith("ensemble_mappo") and other not in RLAE_MODULES
        for line, their_line in _copied_blocks(MODULES[name], path)
    ]
    assert copies == []


def test_the_rlae_learner_repeats_no_shape_of_the_other_learners() -> None:
    """``duplicates --min-lines 4`` (a developer tool, not a dependency: skipped where it is not installed) also
    finds blocks alike but for names and values; none may pair the RLAE learner with the rest of agents/."""
    tool = shutil.which("duplicates")
    if tool is None:
        pytest.skip("the duplicates command is not installed")
    found = subprocess.run(
        [tool, "--min-lines", str(COPIED_LINES), "--most", "200", "--seconds", "120", "--repo", str(ROOT / "agents")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    ).stdout
    rlae = [f"ensemble_mappo/{name.rpartition('.')[2]}.py:" for name in RLAE_MODULES]
    pairs = [line for line in found.splitlines() if re.match(r"D\d+ ", line) and any(f in line for f in rlae)]
    assert pairs == []
    assert "incomplete:" not in found, found


# -- the game's optional parts are components; one feedback vocabulary ------------------------------------------------

SRC = ROOT / "src" / "ensemble_env"


def test_no_twin_path_of_todays_game() -> None:
    """No ``_plain`` flag keeps a second path for the default game: every game runs the same code, its optional parts
    being components (ensemble_env.game.components)."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SRC.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b_plain\b", line)
    ]
    assert found == []


#: what a dispatch on a game option reads: the options themselves, and the flags the engine once derived from them
_MODE_NAMES = {
    "feedback",
    "episodes",
    "fusion_agents",
    "team_feedback",
    "revealed_only",
    "record_tables",
    "uses_records",
}


def _mode_reads(source: str) -> list[int]:
    """Lines of ``source`` that read an option of the game's optional parts (an attribute or a name of
    :data:`_MODE_NAMES`)."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if (isinstance(node, ast.Attribute) and node.attr in _MODE_NAMES)
        or (isinstance(node, ast.Name) and node.id in _MODE_NAMES)
    )


def test_the_snapshot_check_holds_no_dispatch_of_its_own() -> None:
    """``SnapshotCheck`` reads no option of the optional parts: it runs the engine's components' checks and their
    observation kernels, in a loop."""
    source = (SRC / "game" / "snapshot_check.py").read_text(encoding="utf-8")
    assert _mode_reads(source) == []
    run = next(node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef) and node.name == "run")
    loops = [node for node in ast.walk(run) if isinstance(node, ast.For)]
    assert any(ast.unparse(loop.iter) == "self.components" for loop in loops)


def test_the_dispatch_checker_finds_a_branch_on_feedback() -> None:
    assert _mode_reads("if self.engine.config.feedback == 'team':\n    pass\n") == [1]
    assert _mode_reads("for part in self.components:\n    part.check()\n") == []


def _vocabularies(source: str) -> list[tuple[int, str]]:
    """(line, name) of each assignment in ``source`` of a tuple or list of string constants holding ``"all"`` and
    ``"team"`` (a feedback vocabulary), or of a string constant to a constant's name with FEEDBACK in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [ast.unparse(target) for target in targets]
        value = node.value
        if isinstance(value, ast.Tuple | ast.List):
            words = {item.value for item in value.elts if isinstance(item, ast.Constant)}
            if {"all", "team"} <= words:
                found.extend((node.lineno, name) for name in names)
        elif isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.extend((node.lineno, name) for name in names if "FEEDBACK" in name and name.isupper())
    return found


def test_one_feedback_vocabulary() -> None:
    """The feedback vocabulary is defined once, in ensemble_env.game.config; every other module imports it."""
    definitions = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in MODULES.values()
        for line, name in _vocabularies(path.read_text(encoding="utf-8"))
    ]
    assert definitions == [f"{(SRC / 'game' / 'config.py').relative_to(ROOT)}:{_line_of_levels()} FEEDBACK_LEVELS"]
    from ensemble_env.baselines import partial, registry
    from ensemble_env.game.config import FEEDBACK, FEEDBACK_LEVELS

    assert FEEDBACK == FEEDBACK_LEVELS[:2] and registry.FEEDBACK is FEEDBACK_LEVELS and partial.FEEDBACK == "team"


def _line_of_levels() -> int:
    source = (SRC / "game" / "config.py").read_text(encoding="utf-8")
    return next(number for number, line in enumerate(source.splitlines(), 1) if line.startswith("FEEDBACK_LEVELS ="))


def test_the_vocabulary_checker_finds_a_second_definition() -> None:
    assert _vocabularies('FEEDBACKS = ("all", "team")\n') == [(1, "FEEDBACKS")]
    assert _vocabularies('FEEDBACK = "team"\nchoices = ["none", "team", "all"]\n') == [(1, "FEEDBACK"), (2, "choices")]
    assert _vocabularies("FEEDBACK = FEEDBACK_LEVELS[:2]\n") == []


# -- the learners read the game through its public modules ------------------------------------------------------------

#: the modules of the game the learners (``ensemble_mappo``) may import: the engine, its options, the observation
#: layout (where each block lies, and what a count feature counts: ``count_of_feature``), the action encodings and the
#: reward. The rest is the game's inside: the kernels (``task_record``, ``dynamics``, ``feedback``, ``window``), their
#: records and builders, the snapshots and the checks
GAME_SURFACE = (
    "ensemble_env.game",
    "ensemble_env.game.actions",
    "ensemble_env.game.config",
    "ensemble_env.game.engine",
    "ensemble_env.game.layout",
    "ensemble_env.game.reward",
)


def _game_inside_imports(graph: dict[str, list[tuple[str, str | None, int]]]) -> list[str]:
    """``path:line imports module`` for each import by a learner's module of a module of the game outside
    :data:`GAME_SURFACE`."""
    return [
        f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}"
        for name, imports in graph.items()
        if name.split(".")[0] == "ensemble_mappo"
        for target, _, line in imports
        if target.startswith("ensemble_env.game.") and target not in GAME_SURFACE
    ]


def test_the_learners_import_nothing_from_inside_the_game() -> None:
    """The learners read the game's observations through its layout: e.g. the record's count feature n / (n + 16) is
    turned back into n with ``ensemble_env.game.layout.count_of_feature``, never with the constant of the record's
    kernels (``ensemble_env.game.task_record``)."""
    inside = [module for module in MODULES if module.startswith("ensemble_env.game.") and module not in GAME_SURFACE]
    assert {"ensemble_env.game.task_record", "ensemble_env.game.dynamics", "ensemble_env.game.records"} <= set(inside)
    assert _game_inside_imports(GRAPH) == []


def test_the_game_inside_checker_finds_every_form() -> None:
    source = (
        "from ensemble_env.game.task_record import RECORD_COUNT_HALF\n"
        "from ensemble_env.game import feedback\n"
        "def late():\n"
        "    import ensemble_env.game.window\n"
        "from ensemble_env.game.layout import count_of_feature\n"
    )
    module = "ensemble_mappo.team_logits"
    planted = {**GRAPH, module: [*GRAPH[module], *_imports_of_source(module, source)]}
    where = MODULES[module].relative_to(ROOT)
    assert _game_inside_imports(planted) == [
        f"{where}:1 imports ensemble_env.game.task_record",
        f"{where}:2 imports ensemble_env.game.feedback",
        f"{where}:4 imports ensemble_env.game.window",
    ]


# -- a config names its algorithm: nothing but the registry infers it ------------------------------------------------

#: the module that may infer an algorithm from a config's fields (:func:`ensemble_mappo.algorithms.saved_name`, for
#: runs saved before configs named theirs); every other reads ``config.algorithm``
REGISTRY = "ensemble_mappo.algorithms"
#: the names of the functions that inferred an algorithm from a config's fields (gone with issue 50)
INFERENCES = ("name_of", "saved_name")


def _inference_calls(source: str) -> list[tuple[int, str]]:
    """(line, name) of each call of a function of :data:`INFERENCES` in ``source``, by name or as an attribute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in INFERENCES:
                found.append((node.lineno, name))
    return found


def test_no_algorithm_is_inferred_outside_the_registry() -> None:
    """``config.algorithm`` names the algorithm everywhere; the one inference, for runs saved before the field, is
    the registry's own (runs.py calls it once, at load)."""
    calls = [
        (module, name)
        for module, path in MODULES.items()
        if module != REGISTRY
        for _, name in _inference_calls(path.read_text(encoding="utf-8"))
    ]
    assert calls == [("ensemble_mappo.runs", "saved_name")]
    text = "\n".join(path.read_text(encoding="utf-8") for module, path in MODULES.items() if module != REGISTRY)
    assert "name_of(" not in text.replace("names_of(", "")


def test_the_inference_checker_finds_every_form() -> None:
    source = "x = name_of(config)\ny = algorithms.name_of(config)\nz = a.saved_name(saved)\nnames_of(p, f, v)\n"
    assert _inference_calls(source) == [(1, "name_of"), (2, "name_of"), (3, "saved_name")]


# -- the tests: no test module imports another ---------------------------------------------------------------------

TESTS = ROOT / "tests"


def _is_test_module(dotted: str) -> bool:
    """A test module's name (``test_*``) or ``conftest``, alone or as the last part of a dotted or relative name."""
    last = dotted.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def _test_module_imports(source: str, own: str = "") -> list[tuple[int, str]]:
    """(line, module) of each import in ``source`` of a test module or of ``conftest`` other than ``own``: ``import``
    and ``from ... import`` (absolute or relative, at module level or inside a function; ``from PACKAGE import
    test_x`` included) and ``importlib.import_module`` or ``__import__`` of a constant name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names = [base] if node.module else []
            names += [f"{base.rstrip('.')}.{alias.name}" if node.module else base + alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "__import__"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names = [first.value]
        found += [(node.lineno, name) for name in names if _is_test_module(name) and name.rpartition(".")[2] != own]
    return sorted(found)


def test_no_test_module_imports_another() -> None:
    """What several test modules use is in the package tests/testing/ (or a fixture of tests/conftest.py): no module
    under tests/ imports a test module (a ``test_*.py`` file) or ``conftest``, which would run or collect one test
    file's module from another and tie them together."""
    paths = sorted(TESTS.rglob("*.py"))
    assert TESTS / "testing" / "__init__.py" in paths and TESTS / "conftest.py" in paths
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in paths
        for line, module in _test_module_imports(path.read_text(encoding="utf-8"), own=path.stem)
    ]
    assert found == []


def test_the_test_import_checker_finds_every_form() -> None:
    source = (
        "from test_convert import write_run\n"
        "import test_env as env\n"
        "from .test_window import ALL\n"
        "from . import test_snapshot\n"
        "from tests.cache.test_cache import rebuild\n"
        "from tests.game import test_unseen\n"
        "from conftest import flip_labels\n"
        "def late():\n"
        "    from test_partial import naive_choices\n"
        "importlib.import_module('test_cli')\n"
        "from testing.game import assert_same\n"
        "import fuzzing\n"
        "from test_own import helper\n"
        "importlib.import_module(MODULE)\n"
    )
    assert _test_module_imports(source, own="test_own") == [
        (1, "test_convert"),
        (2, "test_env"),
        (3, ".test_window"),
        (4, ".test_snapshot"),
        (5, "tests.cache.test_cache"),
        (6, "tests.game.test_unseen"),
        (7, "conftest"),
        (9, "test_partial"),
        (10, "test_cli"),
    ]
