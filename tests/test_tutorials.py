"""The course in docs/tutorials: every lesson runs as a script with the quick budget and writes its figure.

Each lesson ``NN_name.py`` is a percent-format (jupytext) file that saves ``NN_name.png`` in the output
folder (``ENSEMBLE_ENV_TUTORIAL_OUT``); the lessons listed in :data:`ANIMATIONS` also save a GIF. The runs
take a few seconds to a minute each, so they are marked slow (CI runs them); the structure checks are fast.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

COURSE = Path(__file__).resolve().parents[1] / "docs" / "tutorials"
LESSONS = sorted(COURSE.glob("[0-9][0-9]_*.py"))
#: lessons that also record an episode of a trained agent as a GIF
ANIMATIONS = {"03_delayed_credit.py": "03_trained_agent.gif"}
#: lessons that train with the reference learner (torch)
TRAINING = {"03_delayed_credit.py", "04_centralized_critic.py"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cells(path: Path) -> list[tuple[str, str]]:
    """(kind, text) of each cell of a percent-format file: kind "markdown" or "code"."""
    found: list[tuple[str, str]] = []
    kind, lines = None, []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            if kind is not None:
                found.append((kind, "\n".join(lines)))
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        found.append((kind, "\n".join(lines)))
    return found


def load_course() -> ModuleType:
    spec = importlib.util.spec_from_file_location("course", COURSE / "course.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_course_has_its_six_lessons_listed_in_its_readme() -> None:
    assert [path.name[:3] for path in LESSONS] == ["01_", "02_", "03_", "04_", "05_", "06_"]
    readme = (COURSE / "README.md").read_text(encoding="utf-8")
    for path in LESSONS:
        assert f"({path.name})" in readme, f"docs/tutorials/README.md does not link {path.name}"
        assert f"{path.stem}.png" in readme, f"docs/tutorials/README.md does not name {path.stem}.png"


@pytest.mark.parametrize("path", LESSONS, ids=lambda path: path.stem)
def test_each_lesson_is_a_notebook_with_a_figure_and_exercises(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# ---\n# jupyter:\n#   jupytext:"), "the jupytext header opens the file"
    assert "format_name: percent" in text
    parsed = cells(path)
    assert parsed[0][0] == "markdown" and re.search(r"^# # Lesson \d: ", parsed[0][1], re.MULTILINE)
    assert sum(kind == "code" for kind, _ in parsed) >= 3
    assert f'course.save_figure(figure, "{path.stem}.png")' in text
    exercises = next(body for kind, body in parsed if kind == "markdown" and "## Exercises" in body)
    numbered = re.findall(r"^# (\d)\. ", exercises.split("<details>")[0], re.MULTILINE)
    assert 2 <= len(numbered) <= 3, numbered
    assert "<details><summary>Answers</summary>" in exercises and "</details>" in exercises
    answers = re.findall(r"^# (\d)\. ", exercises.split("<details>")[1], re.MULTILINE)
    assert answers == numbered


def test_output_folder_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ENSEMBLE_ENV_TUTORIAL_OUT", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert load_course().output_dir() == Path("runs") / "tutorials"
    assert (tmp_path / "runs" / "tutorials").is_dir()
    monkeypatch.setenv("CI", "true")
    in_ci = load_course().output_dir()
    assert in_ci.is_dir() and tmp_path not in in_ci.resolve().parents
    monkeypatch.setenv("ENSEMBLE_ENV_TUTORIAL_OUT", str(tmp_path / "chosen"))
    assert load_course().output_dir() == tmp_path / "chosen"
    monkeypatch.setenv("ENSEMBLE_ENV_TUTORIAL_QUICK", "1")
    assert load_course().budget(100, 2) == 2
    monkeypatch.setenv("ENSEMBLE_ENV_TUTORIAL_QUICK", "0")
    assert load_course().budget(100, 2) == 100


def test_mean_ci_uses_students_t() -> None:
    mean, half = load_course().mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / 3**0.5)
    assert load_course().mean_ci([5.0]) == (5.0, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("path", LESSONS, ids=lambda path: path.stem)
def test_lesson_runs_with_the_quick_budget_and_writes_its_figure(path: Path, tmp_path: Path) -> None:
    if path.name in TRAINING:
        pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    env = {**os.environ, "ENSEMBLE_ENV_TUTORIAL_QUICK": "1", "ENSEMBLE_ENV_TUTORIAL_OUT": str(out)}
    result = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figure = out / f"{path.stem}.png"
    assert f"figure written to {figure}" in result.stdout
    data = figure.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000  # a real drawing, not an empty canvas
    if path.name in ANIMATIONS:
        gif = (out / ANIMATIONS[path.name]).read_bytes()
        assert gif.startswith(b"GIF89a") and gif.count(b"\x21\xf9\x04") > 5  # more than five frames
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing written beside the output folder
