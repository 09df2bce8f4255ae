"""The documentation site builds: ``scripts/build_docs.sh OUT`` exits 0 and OUT holds the pages of docs/ and the API
reference, with an entry for every public name of the two packages (the script checks them in OUT's inventory too).

The build needs the ``docs`` extra (Sphinx, MyST-Parser, furo): skipped without it. It takes about 30 CPU seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _inventory(out: Path) -> set[str]:
    """The names of OUT's Python entries (objects.inv: four lines of header, then zlib-compressed lines)."""
    body = (out / "objects.inv").read_bytes().split(b"\n", 4)[4]
    return {line.split(" ", 2)[0] for line in zlib.decompress(body).decode("utf-8").splitlines() if " py:" in line}


@pytest.mark.slow
def test_the_site_builds_with_an_entry_for_every_public_name(tmp_path: Path) -> None:
    for module in ("sphinx", "myst_parser", "furo"):
        pytest.importorskip(module, reason="the docs extra is not installed")
    out = tmp_path / "site"
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_docs.sh"), str(out)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr
    pages = {path.relative_to(out).as_posix() for path in out.rglob("*.html")}
    assert {"index.html", "environment-spec.html", "tutorials/README.html", "api/index.html"} <= pages
    assert {f"{page.stem}.html" for page in (ROOT / "docs").glob("*.md") if page.name != "README.md"} <= pages
    entries = _inventory(out)
    import ensemble_env
    import ensemble_mappo

    for package in (ensemble_env, ensemble_mappo):
        assert {f"{package.__name__}.{name}" for name in package.__all__} <= entries
    # an object is documented once, under its shortest name; the longer ones are aliases of that entry
    assert "ensemble_env.LogitCache" in entries and "ensemble_env.cache.LogitCache" not in entries
    assert "ensemble_env.cache.logit_cache.LogitCache" in entries  # the alias
    assert "ensemble_mappo.algorithms.register" in entries
    # the front page is docs/README.md's list, and a link to the repository's README a download of it
    front = (out / "index.html").read_text(encoding="utf-8")
    assert "The documentation, page by page" in front
    assert "_downloads/" in front


def test_the_script_refuses_a_call_without_its_folder() -> None:
    called = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_docs.sh")], capture_output=True, text=True, check=False, timeout=60
    )
    assert called.returncode == 2
    assert "usage: scripts/build_docs.sh OUT" in called.stderr
