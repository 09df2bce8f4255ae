"""Tests of benchmarks/reporting.py, the helpers of the benchmark scripts (mean ± std cells, README blocks)."""

from __future__ import annotations

import doctest
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from testing.benchmarks import import_benchmark


@pytest.fixture
def reporting(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The module as the scripts import it: a sibling on ``sys.path`` (forgotten afterwards)."""
    yield import_benchmark(monkeypatch, "reporting")
    sys.modules.pop("reporting", None)


def test_docstring_examples(reporting: ModuleType) -> None:
    failures, tried = doctest.testmod(reporting)
    assert failures == 0 and tried > 0


def test_write_block_creates_then_replaces_and_keeps_the_rest(reporting: ModuleType, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    reporting.write_block(readme, "speed", "slow")
    assert readme.read_text() == "# Benchmarks\n\n## MAPPO\n\n<!-- mappo:speed -->\nslow\n<!-- /mappo:speed -->\n"
    readme.write_text(readme.read_text() + "\n## Other\n\nkept\n")
    reporting.write_block(readme, "table", "| a |")  # a new block goes at the end of the MAPPO section
    reporting.write_block(readme, "speed", "fast")
    text = readme.read_text()
    assert text.index("fast") < text.index("| a |") < text.index("## Other") and "slow" not in text
    assert text.endswith("## Other\n\nkept\n")
    assert [path.name for path in tmp_path.iterdir()] == ["README.md"]  # no temporary file left


def test_mean_std(reporting: ModuleType) -> None:
    assert reporting.mean_std([1.0]) == "1.000"
    assert reporting.mean_std([0.0, 1.0], digits=1) == "0.5 ± 0.5"
