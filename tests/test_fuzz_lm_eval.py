"""Fuzzing the lm-eval converter (issue 13): mutated samples files, in both layouts, through the API and the CLI.

Every mutation of the hand-written run of tests/test_convert.py must either convert or be refused with a
ConversionError naming the mutated file (and, for a problem inside a record, its line) in one short line;
through ``ensemble-env cache from-lm-eval`` it must exit with status 2, print no traceback and leave no file.
Hostile values (numbers beyond the float range or written with thousands of digits, deep nesting, NaN,
strings no cache can store) put where a log-likelihood or the doc_id belongs must be refused. Cases are
seeded and run in the watchdog worker of tests/fuzzing.py; ``--run-slow`` runs thousands.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzzing import BAD, bad, count, judge_error, run_cases
from test_convert import write_run

from ensemble_env.cache.convert import ConversionError, from_lm_eval
from ensemble_env.cli import main

CASE_SECONDS = 60.0
#: raw JSON texts put in place of a field's value
HOSTILE = {
    "nesting-100000": "[" * 100_000 + "]" * 100_000,
    "nesting-150": "[" * 150 + "]" * 150,
    "int-400-digits": "9" * 400,
    "int-5000-digits": "7" * 5000,
    "float-1e400": "1e400",
    "float--1e400": "-1e400",
    "float-5000-digits": "0." + "0" * 4998 + "1",
    "text-1e400": '"1e400"',
    "text-5000-digits": '"' + "3" * 5000 + '"',
    "text-nan": '"NaN"',
    "nan": "NaN",
    "infinity": "-Infinity",
    "null": "null",
    "true": "true",
    "object": '{"a": [1, {"b": 2}]}',
    "empty-list": "[]",
    "list-100000": "[" + ",".join(["0"] * 100_000) + "]",
    "string-1mb": '"' + "x" * 2**20 + '"',
    "string-nul": '"a\\u0000b"',
    "string-surrogate": '"a\\ud800b"',
    "empty-string": '""',
    "negative": "-1",
    "int-2**63": str(2**63),
    "half": "0.5",
}
#: where a value is replaced (a path into one record; ints index lists), by layout
PATHS = {
    "new": [
        ("doc_id",),
        ("target",),
        ("arguments",),
        ("arguments", "gen_args_0"),
        ("arguments", "gen_args_0", "arg_0"),
        ("arguments", "gen_args_1", "arg_1"),
        ("filtered_resps",),
        ("filtered_resps", 0),
        ("filtered_resps", 1, 0),
        ("resps", 0, 0, 0),
        ("doc",),
        ("doc", "question"),
        ("doc_hash",),
        ("filter",),
        ("acc",),
    ],
    "old": [
        ("doc_id",),
        ("target",),
        ("arguments", 0),
        ("arguments", 1, 1),
        ("filtered_resps", 0, 0),
        ("filtered_resps", 1),
        ("resps", 0, 0, 0),
        ("doc", "question"),
        ("acc",),
    ],
}
#: values a log-likelihood or a doc_id must never be read from
_NOT_NUMBERS = set(HOSTILE) - {"negative", "half", "int-2**63"}


def _must_refuse(path: tuple[Any, ...], hostile: str) -> bool:
    """Whether a hostile value at ``path`` must be refused (elsewhere it may be ignored: an unused field)."""
    if hostile.startswith("nesting") or path in (("doc_id",), ("filtered_resps",)):
        return True  # nesting deeper than MAX_DEPTH anywhere; no hostile value is a doc_id or a list of pairs
    if path[0] == "filtered_resps":  # the [log-likelihood, is_greedy] pair, or the log-likelihood in it
        return len(path) == 2 or hostile in _NOT_NUMBERS
    return False


# -- mutations ----------------------------------------------------------------------------------------------


def _files(run: Path) -> list[Path]:
    return sorted(run.rglob("*.jsonl"))


def _replace_value(text: str, layout: str, rng: np.random.Generator, path: tuple[Any, ...], raw: str) -> str:
    """``text`` (a samples file) with the value at ``path`` of one record replaced by the raw JSON ``raw``."""
    marker = "@@HOSTILE@@"
    if layout == "new":
        lines = text.split("\n")
        index = int(rng.integers(len([line for line in lines if line.strip()])))
        record = json.loads(lines[index])
        _put(record, path, marker)
        lines[index] = json.dumps(record, ensure_ascii=False).replace(json.dumps(marker), raw)
        return "\n".join(lines)
    records = json.loads(text)
    _put(records[int(rng.integers(len(records)))], path, marker)
    return json.dumps(records, indent=2, ensure_ascii=False).replace(json.dumps(marker), raw)


def _put(record: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = value


def _mutate(text: bytes, case: dict[str, Any], rng: np.random.Generator) -> bytes:
    kind = case["mutation"]
    if kind == "flip":
        data = bytearray(text)
        data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
        return bytes(data)
    if kind == "truncate":
        return text[: int(rng.integers(len(text)))]
    if kind == "insert":
        junk = rng.choice([b"\x00", b"\xff\xfe", b"{", b"]", b"\n", b"\r\n", b"\xef\xbb\xbf", b'"', b"\\", b"1e999"])
        at = int(rng.integers(len(text) + 1))
        return text[:at] + bytes(junk) + text[at:]
    lines = text.split(b"\n")
    pick = int(rng.integers(len(lines)))
    if kind == "drop-line":
        del lines[pick]
    elif kind == "repeat-line":
        lines.insert(pick, lines[pick])
    elif kind == "swap-lines":
        other = int(rng.integers(len(lines)))
        lines[pick], lines[other] = lines[other], lines[pick]
    return b"\n".join(lines)


# -- one case ------------------------------------------------------------------------------------------------


def lm_eval_case(case: dict[str, Any]) -> tuple[str, str]:
    """Copy the base run, mutate one samples file, convert through the API and the CLI, and judge."""
    rng = np.random.default_rng(case["seed"])
    work = Path(f"case-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(case["base"], work / "run")
    target = _files(work / "run")[int(rng.integers(len(_files(work / "run"))))]
    original = target.read_bytes()
    if case["mutation"] == "value":
        path = tuple(case["path"])
        text = _replace_value(original.decode("utf-8"), case["layout"], rng, path, HOSTILE[case["hostile"]])
        target.write_text(text, encoding="utf-8")
    else:
        target.write_bytes(_mutate(original, case, rng))
    try:
        from_lm_eval([work / "run"])
    except Exception as error:
        outcome, detail = judge_error(error, (ConversionError,), target.name)
        if outcome == "refused" and case["mutation"] == "value" and "line " not in str(error):
            outcome, detail = "bad_error", f"no line in: {str(error)[:300]}"
    else:
        must = case["mutation"] == "value" and _must_refuse(tuple(case["path"]), case["hostile"])
        outcome, detail = ("wrong", "converted a hostile value") if must else ("accepted", "")
    cli = _through_cli(work, outcome == "accepted")
    return (outcome, detail) if cli is None else ("bad_error", cli)


def _through_cli(work: Path, converts: bool) -> str | None:
    """What is wrong with ``ensemble-env cache from-lm-eval`` on the run (None: exit status, output and the
    files left agree with the API's outcome)."""
    out = work / "out"
    out.mkdir()
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = main(["cache", "from-lm-eval", str(work / "run"), "-o", str(out / "cache.h5")])
    left = sorted(os.listdir(out))
    expected = (0, ["cache.h5"]) if converts else (2, [])
    if (code, left) != expected or "Traceback" in stderr.getvalue():
        return f"CLI: exit {code}, files {left}, stderr {stderr.getvalue()[:200]!r}"
    return None


# -- suites -----------------------------------------------------------------------------------------------------


def lm_eval_cases(workdir: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded cases over both layouts: byte and line mutations, and hostile values at every path."""
    bases = {layout: write_run(workdir / f"base-{layout}", layout) for layout in ("new", "old")}
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = []
    # every hostile value at every path, once per layout, first; then random mutations
    for layout, paths in PATHS.items():
        for path in paths:
            for hostile in HOSTILE:
                cases.append({"layout": layout, "mutation": "value", "path": list(path), "hostile": hostile})
    if n < len(cases):
        picked = rng.choice(len(cases), size=n // 2, replace=False)
        cases = [cases[i] for i in sorted(picked)]
    mutations = ["flip", "truncate", "insert", "drop-line", "repeat-line", "swap-lines"]
    while len(cases) < n:
        cases.append({"layout": str(rng.choice(["new", "old"])), "mutation": str(rng.choice(mutations))})
    for index, case in enumerate(cases):
        case["base"] = str(bases[case["layout"]])
        case["seed"] = int(seed * 1_000_003 + index)
        what = case.get("hostile", "")
        case["kind"] = f"{case['layout']} {case['mutation']} {'.'.join(map(str, case.get('path', [])))} {what}"
    return cases


def suite_lm_eval(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = lm_eval_cases(workdir, 4000 if slow else 100, 21)
    return run_cases("test_fuzz_lm_eval", "lm_eval_case", cases, workdir, CASE_SECONDS), 0


SUITES: dict[str, Callable[[Path, bool], tuple[list[dict[str, Any]], int]]] = {"lm-eval samples": suite_lm_eval}


def test_mutated_samples_convert_or_are_refused_with_file_and_line(tmp_path: Path) -> None:
    results, _ = suite_lm_eval(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 30 and counts["accepted"] > 5


@pytest.mark.slow
def test_mutated_samples_large(tmp_path: Path) -> None:
    results, _ = suite_lm_eval(tmp_path, slow=True)
    assert not bad(results), f"{dict(count(results))}; first: {bad(results)[:5]}"
    assert len(results) == 4000 and not set(count(results)) & set(BAD)
