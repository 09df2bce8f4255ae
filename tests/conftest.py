"""Shared fixtures: a hand-built tiny logit cache and a raw HDF5 writer for building (invalid) cache files; the slow
marker. The helpers the fixtures are built from, and every helper shared by test modules, are in the package
``testing`` of this folder."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from testing.caches import tiny_fields
from testing.conversions import BBH_DATA
from testing.cpu_times import CpuTimes, children_seconds
from testing.lessons import LessonRuns

from ensemble_env.cache import LogitCache

# -- the test folders ------------------------------------------------------------------------------------
# tests/ mirrors the package: one folder per part (cache/, game/, views/, baselines/, cli/, adapters/, learner/);
# the top-level modules' tests and the whole-repository checks sit here. No test folder has an __init__.py: pytest's
# default (prepend) import mode puts a test file's own folder on sys.path and imports it by its basename, so
# basenames are unique across tests/. No test module imports another (tests/test_architecture.py checks it): what
# several share is in the package testing/ of this folder, and the fuzz suites' watchdog is fuzzing.py; so tests/
# goes on sys.path here, before any test module is imported, whichever tests are run. The fuzz workers, which copy
# sys.path, inherit it.
TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

# -- the slow marker ---------------------------------------------------------------------------------
# Heavy checks (real-data training, adapter loops) carry @pytest.mark.slow. A plain `pytest` skips them;
# `pytest --run-slow` (the README's test command, and so CI) runs them; `pytest -m slow` runs only them.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")
    parser.addoption(
        "--cpu-times",
        metavar="FILE",
        default=None,
        help="write each test's CPU seconds (its own and its finished child processes') to FILE as JSON, and print "
        "the 30 costliest tests and files (testing/cpu_times.py)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# -- per-test CPU time (--cpu-times FILE) ---------------------------------------------------------------
_CPU_TIMES = CpuTimes()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if item.config.getoption("--cpu-times") is None:
        yield
        return
    own, children = time.process_time(), children_seconds()
    yield
    _CPU_TIMES.add(item.nodeid, time.process_time() - own, children_seconds() - children)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    target = config.getoption("--cpu-times")
    if target is not None and _CPU_TIMES.rows:
        _CPU_TIMES.write(Path(target))
        terminalreporter.write_line(_CPU_TIMES.summary())


# -- tiny cache ------------------------------------------------------------------------------------
# Its table (who is right on which question) and its fields are in testing/caches.py.


@pytest.fixture
def tiny_cache() -> LogitCache:
    """The hand-built 3-model, 6-question cache of the table in testing/caches.py (built in memory)."""
    return LogitCache(**tiny_fields())


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
        data = tiny_fields()
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


# -- the real BBH samples and the bbh5 build, made once per session -----------------------------------------------


@pytest.fixture
def bbh_data() -> Path:
    """The folder of the real BBH samples (``../shared/data/bbh-leaderboard`` or ``ENSEMBLE_ENV_BBH_DATA``); skips
    without it."""
    if not (BBH_DATA / "reference_accuracy.json").is_file():
        pytest.skip(f"the BBH samples are not at {BBH_DATA} (set ENSEMBLE_ENV_BBH_DATA to their folder)")
    return BBH_DATA


@pytest.fixture(scope="session")
def bbh5_build() -> LogitCache:
    """``scripts/build_bbh5.py``'s ``build()`` of ``../shared/data/bbh-leaderboard`` (conversion, text features,
    costs), made once: the rebuild test and the CLI's text-features test both compare with it. Skips without the
    shared data or scikit-learn."""
    import importlib.util

    if not (BBH_DATA / "reference_accuracy.json").is_file():
        pytest.skip(f"the BBH samples are not at {BBH_DATA} (set ENSEMBLE_ENV_BBH_DATA to their folder)")
    pytest.importorskip("sklearn")
    script = Path(__file__).resolve().parents[1] / "scripts" / "build_bbh5.py"
    spec = importlib.util.spec_from_file_location("build_bbh5", script)
    assert spec is not None and spec.loader is not None
    build_bbh5 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_bbh5)
    return build_bbh5.build(BBH_DATA)


# -- the course's notebooks, each run once per session ------------------------------------------------------------


@pytest.fixture(scope="session")
def lesson_runs(tmp_path_factory: pytest.TempPathFactory) -> LessonRuns:
    """Each lesson's notebook run once, when first asked for (testing/lessons.py): tests/test_tutorials.py checks the
    runs, tests/test_docs_site.py builds the lessons' pages from them."""
    return LessonRuns(tmp_path_factory.mktemp("lessons"))
