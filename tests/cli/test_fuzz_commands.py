"""Seeded fuzzing of what the commands read besides caches (issue 41, "Reliability round 4", classes 3, 5 and 6).

- **lessons** (``scripts/make_notebooks.py``): a lesson with 1 to 3 random edits (a byte flipped, bytes that are not
  UTF-8, a NUL, a line deleted, repeated or cut, cell markers added, the jupytext header's fields changed, the file
  emptied or cut), or a lesson or notebook that is a FIFO, a folder, a link to /dev/zero or /dev/urandom, a dangling
  link, a file beyond the size limit. The script must write a notebook nbformat reads (exit 0), or refuse in one line
  naming the lesson or the notebook (exit 2): never a traceback, never a hang (a FIFO is never opened for reading).
- **config files** (``train --config``): a valid TOML or JSON config with 1 to 3 random edits (a key given twice
  with the same or another value, at the top or in ``[env]``, a key unknown, a value of another type, NaN or
  1e400, the text cut, bytes that are not UTF-8). Read as ``train`` reads it (:func:`read_config_file`, then the
  algorithm's config): taken when valid, else refused naming the file, and a key given twice with another value
  naming that key.
- **array columns** (``cache from-arrays --labels/--n-choices/--tasks``): a column as ``.npy`` of every dtype
  (floats that are whole numbers included) or as text with numbers spelled every way; refused naming the file and
  the field, or converted when it is integers (strings for tasks).

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/cli/test_fuzz_commands.py --slow`` the full part and prints the rows.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helper is in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main

CASE_SECONDS = 60.0
MODULE = "test_fuzz_commands"
ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "docs" / "tutorials" / "06_adaptation.py"
LESSON_EDITS = [
    "flip",
    "not utf-8",
    "nul",
    "delete line",
    "repeat line",
    "cut line",
    "marker",
    "header",
    "empty",
    "cut",
]
LESSON_FILES = ["fifo", "folder", "link to /dev/zero", "link to /dev/urandom", "dangling link", "too big"]
NOTEBOOK_FILES = ["fifo", "folder", "link to /dev/zero", "dangling link"]


def _workdir(name: str) -> Path:
    work = Path(f"{name}-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    return work


def _one_line(err: str, prefix: str) -> str | None:
    lines = [line for line in err.splitlines() if not line.startswith("ensemble-env: ")]
    if len(lines) != 1 or "Traceback" in err or not lines[0].startswith(prefix):
        return None
    return lines[0]


# -- lessons ---------------------------------------------------------------------------------------------------------
def _make_notebooks() -> Any:
    spec = importlib.util.spec_from_file_location("make_notebooks", ROOT / "scripts" / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _edit_lesson(data: bytes, edit: str, rng: np.random.Generator) -> bytes:
    lines = data.split(b"\n")
    if edit == "flip" and data:
        index = int(rng.integers(len(data)))
        return data[:index] + bytes([data[index] ^ (1 << int(rng.integers(8)))]) + data[index + 1 :]
    if edit == "not utf-8":
        index = int(rng.integers(len(data) + 1))
        return data[:index] + bytes(rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xfe\xfe"])) + data[index:]
    if edit == "nul":
        index = int(rng.integers(len(data) + 1))
        return data[:index] + b"\x00" + data[index:]
    if edit in ("delete line", "repeat line", "cut line") and lines:
        index = int(rng.integers(len(lines)))
        if edit == "delete line":
            del lines[index]
        elif edit == "repeat line":
            lines.insert(index, lines[index])
        else:
            lines[index] = lines[index][: len(lines[index]) // 2]
        return b"\n".join(lines)
    if edit == "marker":
        index = int(rng.integers(len(lines) + 1))
        lines.insert(index, bytes(rng.choice([b"# %%", b"# %% [markdown]", b"# %% [raw]", b"# %% [md] x"])))
        return b"\n".join(lines)
    if edit == "header":
        field = bytes(rng.choice([b"format_name: percent", b"name: python3", b"# ---", b"jupytext:"]))
        return data.replace(field, bytes(rng.choice([b"", b"format_name: light", b"name: ir", b"# --"])), 1)
    if edit == "empty":
        return b""
    return data[: int(rng.integers(len(data) + 1))]  # cut


def _special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind.startswith("link to "):
        path.symlink_to(kind.removeprefix("link to "))
    elif kind == "dangling link":
        path.symlink_to(path.parent / "gone")
    elif kind == "too big":
        path.write_bytes(LESSON.read_bytes() + b"#" * (4 * 2**20))


def lesson_case(case: dict[str, Any]) -> tuple[str, str]:
    make = _make_notebooks()
    import nbformat

    work = _workdir("lessons")
    folder = work / "course"
    folder.mkdir()
    rng = np.random.default_rng(case["seed"])
    lesson = folder / "06_adaptation.py"
    notebook = folder / "06_adaptation.ipynb"
    if "file" in case:
        _special(lesson, case["file"])
        named = lesson
    elif "notebook" in case:
        shutil.copy(LESSON, lesson)
        _special(notebook, case["notebook"])
        named = notebook
    else:
        data = LESSON.read_bytes()
        for edit in case["edits"]:
            data = _edit_lesson(data, edit, rng)
        lesson.write_bytes(data)
        named = lesson
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = make.main(["--folder", str(folder)])
    except BaseException as error:
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    if code == 0:
        if "file" in case or case.get("notebook", "dangling link") != "dangling link":  # a broken link is replaced
            return "wrong", "took a lesson or notebook that is not a regular file"
        try:
            nbformat.validate(nbformat.reads(notebook.read_text(encoding="utf-8"), as_version=4))
        except Exception as error:  # the notebook written is not one
            return "wrong", f"wrote a notebook nbformat refuses: {str(error)[:200]}"
        return "accepted", ""
    line = _one_line(err.getvalue(), "make_notebooks.py: error: ")
    if code != 2 or line is None or str(named) not in line:
        return "bad_error", f"exit {code}: {err.getvalue()[-300:]!r}"
    return "refused", line[:300]


def lesson_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = [{"file": kind} for kind in LESSON_FILES]
    cases += [{"notebook": kind} for kind in NOTEBOOK_FILES]
    cases += [{"edits": [edit]} for edit in LESSON_EDITS]
    while len(cases) < n:
        cases.append({"edits": [str(edit) for edit in rng.choice(LESSON_EDITS, size=int(rng.integers(1, 4)))]})
    for index, case in enumerate(cases[:n]):
        case["seed"] = int(seed * 1_000_003 + index)
        case["kind"] = case.get("file") or (
            f"notebook {case['notebook']}" if "notebook" in case else "+".join(case["edits"])
        )
    return cases[:n]


def suite_lessons(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = lesson_cases(slow_size(600) if slow else 30, seed=71 if slow else 7)
    return run_cases(MODULE, "lesson_case", cases, workdir, CASE_SECONDS), 0


# -- config files ----------------------------------------------------------------------------------------------------
BASE_CONFIG = {"learning_rate": 0.0003, "seed": 3, "num_envs": 8, "gamma": 0.99, "env": {"alpha": 0.5, "window": 16}}
CONFIG_EDITS = ["same key, same value", "same key, other value", "env key twice", "unknown key", "other type", "nan",
                "1e400", "cut", "not utf-8"]  # fmt: skip


def _config_text(kind: str, edits: list[str], rng: np.random.Generator) -> tuple[bytes, list[str], bool]:
    """(the file's bytes, the keys given twice (one of them must be named), whether it is valid)."""
    pairs: list[tuple[str, Any]] = [(key, value) for key, value in BASE_CONFIG.items() if key != "env"]
    env: list[tuple[str, Any]] = list(BASE_CONFIG["env"].items())
    twice: list[str] = []
    valid, cut, broken = True, False, False
    for edit in edits:
        key, value = pairs[int(rng.integers(len(pairs)))]
        if edit == "same key, same value":
            pairs.append((key, value))
            valid = valid and kind == "json"  # JSON takes a repeat of the same value; TOML takes no repeat
            twice += [key] if kind == "toml" else []
        elif edit == "same key, other value":
            pairs.append((key, value + 1 if not isinstance(value, str) else value + "x"))
            valid, twice = False, [*twice, key]
        elif edit == "env key twice":
            env.append(("alpha", 0.25))
            valid, twice = False, [*twice, "alpha"]
        elif edit == "unknown key":
            twice += ["learning_rat"] if kind == "toml" and ("learning_rat", 0.1) in pairs else []
            pairs.append(("learning_rat", 0.1))
            valid = False
        elif edit == "other type":
            pairs = [(k, "fast" if k == key else v) for k, v in pairs]
            valid = False
        elif edit in ("nan", "1e400"):
            pairs = [(k, edit if k == "learning_rate" else v) for k, v in pairs]
            valid = False
        elif edit == "cut":
            cut, valid = True, False
        else:
            broken, valid = True, False

    def literal(value: Any) -> str:
        if value in ("nan", "1e400"):
            return "nan" if kind == "toml" else "NaN" if value == "nan" else "1e400"
        return json.dumps(value)

    if kind == "toml":
        text = (
            "".join(f"{k} = {literal(v)}\n" for k, v in pairs)
            + "[env]\n"
            + "".join(f"{k} = {literal(v)}\n" for k, v in env)
        )
    else:
        body = ", ".join(f'"{k}": {literal(v)}' for k, v in pairs)
        text = "{" + body + ', "env": {' + ", ".join(f'"{k}": {literal(v)}' for k, v in env) + "}}"
    data = text.encode("utf-8")
    if cut:
        data = data[: int(rng.integers(len(data) // 2, len(data)))]
    if broken:
        data = data[:10] + b"\xff" + data[10:]
    return data, twice, valid


def config_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_mappo.algorithms import get
    from ensemble_mappo.config import read_config_file

    work = _workdir("configs")
    rng = np.random.default_rng(case["seed"])
    data, twice, valid = _config_text(case["format"], case["edits"], rng)
    path = work / f"config.{case['format']}"
    path.write_bytes(data)
    try:
        get("mappo").from_dict(read_config_file(path), where=str(path))
    except ValueError as error:
        message = str(error)
        if valid:
            return "wrong", f"refused a valid config: {message[:250]}"
        if str(path) not in message or "\n" in message or len(message) > len(str(path)) + 700:
            return "bad_error", f"not one line naming the file: {message[:250]}"
        if twice and "cut" not in case["edits"] and "not utf-8" not in case["edits"]:
            if not any(key in message for key in twice):
                return "bad_error", f"no key given twice ({twice}) is named: {message[:250]}"
        return "refused", message[:300]
    except Exception as error:
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    if not valid and "cut" not in case["edits"]:  # a config cut after a whole line may be a valid one
        return "wrong", f"took an invalid config ({'+'.join(case['edits'])})"
    return "accepted", ""


def config_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = [{"edits": [], "format": fmt} for fmt in ("toml", "json")]
    cases += [{"edits": [edit], "format": fmt} for edit in CONFIG_EDITS for fmt in ("toml", "json")]
    while len(cases) < n:
        edits = [str(edit) for edit in rng.choice(CONFIG_EDITS, size=int(rng.integers(1, 4)))]
        cases.append({"edits": edits, "format": str(rng.choice(["toml", "json"]))})
    for index, case in enumerate(cases[:n]):
        case["seed"] = int(seed * 1_000_003 + index)
        case["kind"] = f"{case['format']} {'+'.join(case['edits']) or 'valid'}"
    return cases[:n]


def suite_configs(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = config_cases(slow_size(1000) if slow else 30, seed=81 if slow else 8)
    return run_cases(MODULE, "config_case", cases, workdir, CASE_SECONDS), 0


# -- array columns ---------------------------------------------------------------------------------------------------
COLUMN_DTYPES = ["int64", "int8", "uint16", "float64", "float32", "float16", "bool", "str", "bytes", "complex64"]
SPELLINGS = ["1", "1.0", "1e0", " 1", "+1", "-1", "0x1", "١", "1_0", "", "nan", "2**3", "99999999999999999999"]


def column_case(case: dict[str, Any]) -> tuple[str, str]:
    """One column file; a value that is not of the field's kind (an integer; a name for tasks) must be refused, naming
    the file and the field; one of its kind may be taken or refused (out of range), naming them too."""
    from ensemble_env.cache.convert import ConversionError, from_array_files

    work = _workdir("columns")
    rng = np.random.default_rng(case["seed"])
    q = 6
    np.save(work / "scores.npy", rng.random((q, 2, 3)))
    field = case["field"]
    base = (
        [f"t{i % 2}" for i in range(q)]
        if field == "tasks"
        else (rng.integers(0, 3, q) if field == "labels" else [3] * q)
    )
    path = work / f"{field}.{'npy' if 'dtype' in case else 'txt'}"
    if "dtype" in case:
        dtype = {"str": "U", "bytes": "S"}.get(case["dtype"], case["dtype"])
        if field == "tasks" and dtype not in ("U", "S"):
            base = [i % 2 for i in range(q)]  # task numbers where names are expected
        with np.errstate(all="ignore"):
            column = np.asarray(base).astype(dtype)
        np.save(path, column)
        of_its_kind = column.dtype.kind == ("U" if field == "tasks" else "i") or (
            field != "tasks" and column.dtype.kind == "u"
        )
    else:
        spelled = [str(v) for v in base]
        spelled[int(rng.integers(q))] = case["spelling"]
        path.write_text("\n".join(spelled) + "\n", encoding="utf-8")
        cell = case["spelling"].strip()
        of_its_kind = bool(cell) if field == "tasks" else bool(re.fullmatch(r"[+-]?[0-9]{1,18}", cell))
    extra = {} if field == "labels" else {"labels": _labels(work, q)}
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            from_array_files(work / "scores.npy", score_kind="prob", models=["a", "b"], **{field: path}, **extra)
    except (ConversionError, ValueError) as error:
        message = str(error)
        if f"field '{field}'" not in message or (str(path) not in message and "<memory>" in message):
            return "bad_error", f"does not name the field {field} of {path.name}: {message[:250]}"
        return "refused", message[:300]
    except Exception as error:
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    return (
        ("accepted", "")
        if of_its_kind
        else ("wrong", f"took {path.name} ({case.get('dtype') or case.get('spelling')!r})")
    )


def _labels(work: Path, q: int) -> Path:
    path = work / "good_labels.npy"
    np.save(path, np.zeros(q, dtype=np.int64))
    return path


def column_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = []
    for field in ("labels", "n_choices", "tasks"):
        cases += [{"field": field, "dtype": dtype} for dtype in COLUMN_DTYPES]
        cases += [{"field": field, "spelling": spelling} for spelling in SPELLINGS]
    while len(cases) < n:
        field = str(rng.choice(["labels", "n_choices", "tasks"]))
        case = {"field": field, "dtype": str(rng.choice(COLUMN_DTYPES))} if rng.random() < 0.5 else {
            "field": field, "spelling": str(rng.choice(SPELLINGS))}  # fmt: skip
        cases.append(case)
    for index, case in enumerate(cases[:n]):
        case["seed"] = int(seed * 1_000_003 + index)
        case["kind"] = f"{case['field']} {case.get('dtype') or repr(case.get('spelling'))}"
    return cases[:n]


def suite_columns(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = column_cases(slow_size(500) if slow else 69, seed=91 if slow else 9)
    return run_cases(MODULE, "column_case", cases, workdir, CASE_SECONDS), 0


SUITES = {"lessons": suite_lessons, "config files": suite_configs, "array columns": suite_columns}


def test_lessons_convert_or_are_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("jupytext")
    pytest.importorskip("nbformat")
    results, _ = suite_lessons(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 10 and counts["accepted"] > 3, dict(counts)


def test_config_files_are_taken_or_refused_naming_the_key(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite_configs(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 10 and counts["accepted"] >= 2, dict(counts)


def test_array_columns_name_their_field(tmp_path: Path) -> None:
    results, _ = suite_columns(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 20 and counts["accepted"] > 5, dict(counts)


@pytest.mark.slow
def test_many_lessons_configs_and_columns(tmp_path: Path) -> None:
    pytest.importorskip("jupytext")
    pytest.importorskip("torch")
    for name, suite in SUITES.items():
        results, _ = suite(tmp_path / name.replace(" ", "-"), slow=True)
        assert not set(count(results)) & set(BAD), f"{name}: {dict(count(results))}; first: {bad(results)[:5]}"


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the lessons, config files and array columns fuzz and print their rows.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
