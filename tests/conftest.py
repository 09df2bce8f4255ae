"""Shared fixtures: a hand-built tiny logit cache and a raw HDF5 writer for building (invalid) cache files."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import h5py
import numpy as np
import pytest

from ensemble_env.cache import LogitCache

# -- the test folders ------------------------------------------------------------------------------------
# tests/ mirrors the package: one folder per part (cache/, game/, views/, baselines/, cli/, adapters/, learner/);
# the top-level modules' tests and the whole-repository checks sit here. No folder has an __init__.py: pytest's
# default (prepend) import mode puts a test file's own folder on sys.path and imports it by its basename, so
# basenames are unique across tests/. Tests also import across folders (the helper ``fuzzing`` of this folder,
# ``from test_convert import write_run`` of cache/), so tests/ and each folder in it go on sys.path here, before
# any test module is imported, whichever tests are run. The fuzz workers, which copy sys.path, inherit them.
TESTS = Path(__file__).resolve().parent
_FOLDERS = sorted(path for path in TESTS.iterdir() if path.is_dir() and not path.name.startswith(("_", ".")))
for _folder in [TESTS, *_FOLDERS]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# -- the slow marker ---------------------------------------------------------------------------------
# Heavy checks (real-data training, adapter loops) carry @pytest.mark.slow. A plain `pytest` skips them;
# `pytest --run-slow` (the README's test command, and so CI) runs them; `pytest -m slow` runs only them.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# -- tiny cache ------------------------------------------------------------------------------------
# 6 questions, 3 models ("m0", "m1", "m2"), C = 3 choices, score_kind "loglik".
# Question 3 has only 2 choices: its third score (5.0, the largest of the row) is padding that must be ignored.
#
#   question | task  | split | n_choices | label | pred m0 | pred m1 | pred m2
#   ---------+-------+-------+-----------+-------+---------+---------+--------
#       0    | alpha | train |     3     |   0   |  0  ok  |  0  ok  |  1
#       1    | alpha | train |     3     |   1   |  1  ok  |  2      |  1  ok
#       2    | beta  | train |     3     |   2   |  2  ok  |  2  ok  |  0
#       3    | beta  | train |     2     |   1   |  1  ok  |  0      |  1  ok
#       4    | alpha | test  |     3     |   0   |  0  ok  |  1      |  2
#       5    | beta  | test  |     3     |   2   |  1      |  2  ok  |  0
#
# Correct on: m0 every question but 5 (5/6), m1 questions 0, 2, 5 (3/6), m2 questions 1, 3 (2/6).
_TINY_SCORES = [
    [[-0.5, -1.5, -2.5], [-1.0, -2.0, -3.0], [-2.0, -0.5, -1.0]],
    [[-2.0, -0.2, -3.0], [-1.0, -1.5, -0.5], [-3.0, -1.0, -2.0]],
    [[-1.0, -2.0, -0.1], [-2.0, -2.0, -1.0], [-0.3, -1.3, -2.3]],
    [[-2.0, -1.0, 5.0], [-0.5, -1.5, 5.0], [-1.2, -0.2, 5.0]],
    [[-0.1, -1.0, -2.0], [-1.0, -0.1, -2.0], [-2.0, -1.0, -0.1]],
    [[-1.0, -0.5, -2.0], [-3.0, -2.0, -1.0], [0.0, -1.0, -2.0]],
]


def _tiny_fields() -> dict[str, Any]:
    """Fresh (writable) constructor arguments of the tiny cache; also the baseline of ``write_cache``."""
    return {
        "scores": np.array(_TINY_SCORES, dtype=np.float64),
        "labels": np.array([0, 1, 2, 1, 0, 2], dtype=np.int64),
        "models": ("m0", "m1", "m2"),
        "score_kind": "loglik",
        "n_choices": np.array([3, 3, 3, 2, 3, 3], dtype=np.int64),
        "tasks": np.array([0, 0, 1, 1, 0, 1], dtype=np.int64),
        "task_names": ("alpha", "beta"),
        "split": np.array([0, 0, 0, 0, 1, 1], dtype=np.int64),
        "question_ids": tuple(f"q{i}" for i in range(6)),
        "costs": np.array([1.0, 2.0, 4.0]),
        "features": np.arange(12, dtype=np.float64).reshape(6, 2) / 10,
        "source": "hand-built tiny cache (tests/conftest.py)",
    }


#: the folder of the benchmark scripts (they import their siblings by name)
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def import_benchmark(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """The benchmark script ``name`` as the scripts import each other: a sibling on ``sys.path``, freshly imported
    (forget it afterwards with ``sys.modules.pop(name, None)``)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def flip_labels(cache: LogitCache, questions: Any) -> LogitCache:
    """``cache`` with the label of each of ``questions`` moved to the next valid choice (every answer that was right
    there is now wrong): the label-flip checks' one way of hiding what a fit or a choice must not read."""
    labels = np.asarray(cache.labels).copy()
    questions = np.asarray(questions)
    labels[questions] = (labels[questions] + 1) % np.asarray(cache.n_choices)[questions]
    return dataclasses.replace(cache, labels=labels)


@pytest.fixture
def tiny_cache() -> LogitCache:
    """The hand-built 3-model, 6-question cache documented in the table above (built in memory)."""
    return LogitCache(**_tiny_fields())


# -- raw HDF5 writer -------------------------------------------------------------------------------
_ROOT_ATTRS = ("format", "format_version", "score_kind", "source")
_STRING_DATASETS = ("models", "task_names", "question_ids")


def _is_strings(name: str, value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "U"
    if isinstance(value, list | tuple):
        if not value:
            return name in _STRING_DATASETS
        return all(isinstance(item, str) for item in value)
    return False


@pytest.fixture
def write_cache(tmp_path: Path) -> Callable[..., Path]:
    """A function writing a cache file with h5py directly (not ``save_cache``) and returning its path.

    ``write(name="cache.h5", *, attrs=None, datasets=None, drop=(), **overrides)`` starts from the tiny
    cache (root attributes ``format``, ``format_version``, ``score_kind``, ``source`` and every dataset),
    then applies ``overrides`` (a root attribute if the name is one of the four above, else a dataset),
    ``attrs`` and ``datasets`` (explicit, e.g. for extra fields), and leaves out the names in ``drop``.
    Lists/tuples of str and numpy str arrays become UTF-8 string datasets; a callable dataset value is called
    as ``value(h5file, name)`` to create the node itself (a group, a link, an odd dtype...).
    """

    def write(
        name: str = "cache.h5",
        *,
        attrs: Mapping[str, Any] | None = None,
        datasets: Mapping[str, Any] | None = None,
        drop: Iterable[str] = (),
        **overrides: Any,
    ) -> Path:
        data = _tiny_fields()
        root = {
            "format": "ensemble-logit-cache",
            "format_version": 1,
            "score_kind": data.pop("score_kind"),
            "source": data.pop("source"),
        }
        for key, value in overrides.items():
            (root if key in _ROOT_ATTRS else data)[key] = value
        root.update(attrs or {})
        data.update(datasets or {})
        dropped = set(drop)
        unknown = dropped - root.keys() - data.keys()
        if unknown:
            raise KeyError(f"write_cache: cannot drop unknown fields {sorted(unknown)}")
        path = tmp_path / name
        with h5py.File(path, "w") as h5file:
            for key, value in root.items():
                if key not in dropped:
                    h5file.attrs[key] = value
            for key, value in data.items():
                if key in dropped:
                    continue
                if callable(value):
                    value(h5file, key)
                elif _is_strings(key, value):
                    h5file.create_dataset(key, data=[str(item) for item in value], dtype=h5py.string_dtype("utf-8"))
                else:
                    h5file.create_dataset(key, data=np.asarray(value))
        return path

    return write


# -- the bbh5 build, made once per session ---------------------------------------------------------------


@pytest.fixture(scope="session")
def bbh5_build() -> LogitCache:
    """``scripts/build_bbh5.py``'s ``build()`` of ``../shared/data/bbh-leaderboard`` (conversion, text features,
    costs), made once: the rebuild test and the CLI's text-features test both compare with it. Skips without the
    shared data or scikit-learn."""
    import importlib.util
    import os

    data = Path(
        os.environ.get(
            "ENSEMBLE_ENV_BBH_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "bbh-leaderboard"
        )
    )
    if not (data / "reference_accuracy.json").is_file():
        pytest.skip(f"the BBH samples are not at {data} (set ENSEMBLE_ENV_BBH_DATA to their folder)")
    pytest.importorskip("sklearn")
    script = Path(__file__).resolve().parents[1] / "scripts" / "build_bbh5.py"
    spec = importlib.util.spec_from_file_location("build_bbh5", script)
    assert spec is not None and spec.loader is not None
    build_bbh5 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_bbh5)
    return build_bbh5.build(data)
