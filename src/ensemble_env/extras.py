"""The optional extras (pyproject.toml's ``[project.optional-dependencies]``) and the one message that says one is
missing.

Every command that needs an extra checks it before it does any work (:func:`require`: nothing is computed, no file
is written or claimed), and every function that imports an optional library says the same when the import fails
(:func:`missing_error`). The message names what needs it, the missing libraries, the extra and the exact install
line, in one format (on one line)::

    ensemble-env cache plot: error: cache plot needs matplotlib, which is not installed (the plot extra):
    pip install -e ".[plot]"

(the prefix ``ensemble-env COMMAND: error:`` only on the command line, exit status 2; a function says
``the frontier plot needs matplotlib, ...``). A library is missing when
:func:`importlib.util.find_spec` does not find it: nothing is imported to check.

>>> message("plot", "mappo", ["torch", "matplotlib"])  # doctest: +NORMALIZE_WHITESPACE
'plot needs torch and matplotlib, which are not installed (the mappo extra):
 pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e ".[mappo]"'
>>> message("the frontier plot", "plot", ["matplotlib"])
'the frontier plot needs matplotlib, which is not installed (the plot extra): pip install -e ".[plot]"'
>>> install_line("mappo", with_torch=True)
'pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e ".[mappo]"'
>>> sorted(EXTRAS)
['benchmarl', 'data', 'dev', 'docs', 'mappo', 'plot', 'rllib', 'sb3', 'tensorboard', 'torchrl']
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from ensemble_env.text import listed

__all__ = [
    "EXIT_STATUS",
    "EXTRAS",
    "TORCH_CPU_LINE",
    "Extra",
    "install_line",
    "message",
    "missing",
    "missing_error",
    "require",
]

#: the exit status of a command refused for a missing extra (argparse's, and every other refusal's)
EXIT_STATUS = 2
#: how to get torch before the ``mappo`` extra, as the README says: a CPU build from PyTorch's own index (a plain
#: ``pip install torch`` on Linux pulls the CUDA build, several GB; the README gives the GPU lines)
TORCH_CPU_LINE = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


@dataclasses.dataclass(frozen=True)
class Extra:
    """One extra of pyproject.toml: the modules it provides that the code imports, and what it enables."""

    name: str
    modules: tuple[str, ...]
    enables: str


#: the extras, as pyproject.toml defines them (``tests/test_repository_files.py`` checks the names agree)
EXTRAS: dict[str, Extra] = {
    extra.name: extra
    for extra in (
        Extra("plot", ("matplotlib",), "every figure: `plot`, `baselines --frontier`, `cache plot`, benchmark's plot"),
        Extra(
            "mappo",
            ("torch", "tqdm", "matplotlib", "threadpoolctl"),
            "`train`, `evaluate`, `plot`, the learners in `benchmark`",
        ),
        Extra(
            "tensorboard", ("tensorboard",), "`train --logger tensorboard`: the run's log as TensorBoard event files"
        ),
        Extra("data", ("sklearn",), "text features (`cache features --from text`), rebuilding toy8"),
        Extra(
            "dev",
            (
                "pytest",
                "ruff",
                "mypy",
                "matplotlib",
                "sklearn",
                "jsonschema",
                "tensorboard",
                "jupytext",
                "nbformat",
                "nbclient",
                "ipykernel",
            ),
            "the tests, the linters and the course's notebooks",
        ),
        Extra(
            "docs", ("sphinx", "myst_parser", "myst_nb", "furo"), "the documentation site: `scripts/build_docs.sh OUT`"
        ),
        Extra("sb3", ("stable_baselines3", "sb3_contrib", "supersuit", "torch"), "the Stable-Baselines3 adapter"),
        Extra("rllib", ("ray", "torch"), "the RLlib adapter"),
        Extra("torchrl", ("torchrl", "tensordict", "torch"), "the TorchRL adapter"),
        Extra("benchmarl", ("benchmarl", "torchrl", "torch"), "the BenchMARL adapter"),
    )
}

#: how a module is called where it is installed from (``import sklearn`` is the package scikit-learn)
_PACKAGE_NAMES = {
    "sklearn": "scikit-learn",
    "stable_baselines3": "stable-baselines3",
    "sb3_contrib": "sb3-contrib",
    "myst_parser": "myst-parser",
}


def _present(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (a module set to None in ``sys.modules``,
    as a test simulates a missing one, is missing; so is one whose parent package is)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package; a module without __spec__
        return False


def missing(modules: Iterable[str]) -> list[str]:
    """The ones of ``modules`` that are not installed, in order."""
    return [module for module in modules if not _present(module)]


def install_line(extra: str, *, with_torch: bool = False) -> str:
    """The exact command that installs ``extra`` from the repository's root (``with_torch``: the CPU torch first, as
    the ``mappo`` extra needs when torch is missing)."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras are {', '.join(EXTRAS)}")
    line = f'pip install -e ".[{extra}]"'
    return f"{TORCH_CPU_LINE} && {line}" if with_torch else line


def message(what: str, extra: str, absent: Sequence[str]) -> str:
    """The one message: ``WHAT needs M, which is not installed (the EXTRA extra): INSTALL LINE``, for the modules
    ``absent`` (the install line starts with the CPU torch when torch is one of them)."""
    if not absent:
        raise ValueError("message: name at least one missing module")
    names = [_PACKAGE_NAMES.get(module, module) for module in absent]
    verb = "is" if len(names) == 1 else "are"
    line = install_line(extra, with_torch="torch" in absent)
    return f"{what} needs {listed(names)}, which {verb} not installed (the {extra} extra): {line}"


def _modules(extra: str, modules: Sequence[str] | None) -> Sequence[str]:
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras are {', '.join(EXTRAS)}")
    return EXTRAS[extra].modules if modules is None else modules


def missing_error(what: str, extra: str, absent: Sequence[str]) -> ModuleNotFoundError:
    """The ModuleNotFoundError (the one message) a function raises when importing the modules ``absent`` of
    ``extra`` failed; ``what`` names what needs them (``"the frontier plot"``)."""
    error = ModuleNotFoundError(message(what, extra, absent))
    error.name = absent[0] if absent else None
    return error


def require(
    command: str, extra: str, modules: Sequence[str] | None = None, *, option: str = "", stream: TextIO | None = None
) -> bool:
    """Check, at the start of ``ensemble-env COMMAND``, that ``modules`` (default: the extra's) are installed.

    True when they are; otherwise print ``ensemble-env COMMAND: error: COMMAND [OPTION] needs ...`` (the one
    message) on ``stream`` (default stderr) and return False: the command then returns :data:`EXIT_STATUS` before
    doing any work. ``option`` names the option that needs the extra when the command alone does not
    (``require("baselines", "plot", option="--frontier")``).
    """
    absent = missing(_modules(extra, modules))
    if not absent:
        return True
    what = f"{command} {option}".strip()
    print(f"ensemble-env {command}: error: {message(what, extra, absent)}", file=stream or sys.stderr)
    return False
