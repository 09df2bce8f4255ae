"""Fuzzing the lm-eval converter (issue 13): mutated samples files, in both layouts, through the API and the CLI.

Every mutation of the hand-written run of tests/cache/test_convert.py must either convert or be refused with a
ConversionError naming the mutated file (and, for a problem inside a record, its line) in one short line;
through ``ensemble-env cache from-lm-eval`` it must exit with status 2, print no traceback and leave no file.
Hostile values (numbers beyond the float range or written with thousands of digits, deep nesting, NaN,
strings no cache can store) put where a log-likelihood or the doc_id belongs must be refused. Cases are
seeded and run in the watchdog worker of tests/fuzzing.py; ``--run-slow`` runs thousands.

The second suite (round 2) mixes hostile files and outputs (FIFOs, links to /dev/zero or out of the folder,
oversized files, fullwidth digits, byte corruptions; -o an input, a link to one, a folder, a FIFO, a name
too long) and checks the command's exit status, its one error line, and that no input changed.

The third suite (round 3, issue 34 item 6a) writes a key of one object of a record twice: with the identical
value (converted, to the same cache), with another value or the same value under another JSON type (``1`` and
``1.0``, ``0.0`` and ``-0.0``, ``"1"`` and ``1``), before or after the original pair, at the record's top level
or in a nested object. A key with two different values must be refused naming the file, the record's line and
the key, through the API and the command line; JSON's own rule (the last one wins) must never decide.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzzing import BAD, bad, count, judge_error, run_cases, slow_size
from testing.conversions import record_lines, write_run

from ensemble_env.cache.convert import ConversionError, from_lm_eval, parse_float
from ensemble_env.cli import main
from ensemble_env.text import show

CASE_SECONDS = 60.0
#: a hostile-files case converts a run of 9 questions: anything near this long is a hang
HOSTILE_CASE_SECONDS = 20.0
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
    cases = lm_eval_cases(workdir, slow_size(4000) if slow else 100, 21)
    return run_cases("test_fuzz_lm_eval", "lm_eval_case", cases, workdir, CASE_SECONDS), 0


# -- hostile files and outputs (issue "Reliability, round 2") ----------------------------------------------------------
# Each case copies the base run, applies a random mix of 1 to 3 of HOSTILE_FILES (FIFOs, links to devices or out of
# the folder, oversized or fullwidth-digit files, byte corruptions, outputs that are inputs or cannot be written)
# and runs ``ensemble-env cache from-lm-eval`` in the watchdog worker. It must exit 0 (a cache that loads) or 2
# (one ``error:`` line), never raise, hang or crash, and leave every input and a previous output as they were.

#: the hostile changes: name -> whether the conversion must then be refused (None: depends on the layout)
HOSTILE_FILES: dict[str, bool | None] = {
    "fifo-samples": True,  # a samples file replaced by a FIFO
    "zero-samples": True,  # ... by a link to /dev/zero
    "urandom-samples": True,  # ... by a link to /dev/urandom
    "link-out-samples": True,  # ... by a link to a copy outside the folder given
    "link-in-samples": False,  # ... by a link to a copy inside it: read
    "broken-link-samples": True,  # ... by a link to nothing
    "linked-model-folder": True,  # a model folder replaced by a link to it, moved outside
    "oversized-samples": True,  # a samples file beyond --max-file-mb 1 (sparse)
    "fullwidth-loglik": True,  # a log-likelihood written "１２" or "－1.5"
    "fifo-results": None,  # a results .json that is a FIFO: read (and refused) only in the old layout
    "zero-results": None,  # a results .json linked to /dev/zero
    "corrupted-bytes": False,  # the byte and line mutations above: converted or refused
    "output-is-input": True,  # -o a samples file
    "output-hard-link": True,  # -o a hard link to a samples file
    "output-symlink": True,  # -o a symbolic link to a samples file
    "output-folder": True,  # -o an existing folder
    "output-fifo": True,  # -o an existing FIFO
    "output-252-chars": False,  # -o a legal name of 252 characters
    "output-256-bytes": True,  # -o a name beyond the filesystem's 255
    "previous-output": False,  # an earlier cache at -o, to be kept when the conversion fails
}


def _snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: the hash of a regular file, where a link leads, the kind of anything else."""
    found = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            found[str(path)] = "-> " + os.readlink(path)
        elif stat.S_ISREG(mode):
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[str(path)] = stat.filemode(mode)
    return found


def _apply(change: str, run: Path, work: Path, output: Path, rng: np.random.Generator) -> tuple[Path, list[str]]:
    """Make the ``change``; returns the output path (it may change it) and extra command-line arguments."""
    models = sorted(folder for folder in run.iterdir() if folder.is_dir() and not folder.is_symlink())
    models = [folder for folder in models if folder.name != "shared"]  # where link-in-samples keeps its files
    model = models[int(rng.integers(len(models)))] if models else run
    files = sorted(file for file in model.glob("*.jsonl") if stat.S_ISREG(file.lstat().st_mode))
    target = files[int(rng.integers(len(files)))] if files else model / "samples_none_2024-01-01T00-00-00.jsonl"
    outside = work / "outside"
    outside.mkdir(exist_ok=True)
    if change.endswith("-samples") and change != "oversized-samples":
        content = target.read_bytes() if target.exists() else b""
        target.unlink(missing_ok=True)
        if change == "fifo-samples":
            os.mkfifo(target)
        elif change in ("zero-samples", "urandom-samples"):
            os.symlink("/dev/" + change.split("-")[0], target)
        elif change == "link-out-samples":
            (outside / target.name).write_bytes(content)
            os.symlink(outside / target.name, target)
        elif change == "link-in-samples":
            (run / "shared").mkdir(exist_ok=True)
            (run / "shared" / f"{model.name}.data").write_bytes(content)
            os.symlink(Path("..") / "shared" / f"{model.name}.data", target)
        else:
            os.symlink(work / "absent.jsonl", target)
    elif change == "linked-model-folder":
        moved = outside / f"moved-{model.name}"
        if not moved.exists():
            model.rename(moved)
            os.symlink(moved, model)
    elif change == "oversized-samples" and target.exists():
        with target.open("r+b") as handle:
            handle.truncate(2 * 2**20)  # trailing NULs, sparse
        return output, ["--max-file-mb", "1"]
    elif change == "fullwidth-loglik" and target.exists():
        text = target.read_text(encoding="utf-8")
        start = text.find('"filtered_resps"')  # the log-likelihoods read ('resps' is not, beside it)
        number = re.compile(r"-[0-9]+\.[0-9]+").search(text, max(start, 0))
        if start >= 0 and number is not None:
            wrong = '"１２"' if rng.random() < 0.5 else '"－' + number.group(0)[1:] + '"'
            start, end = number.span()
            if text[start - 1] == '"':  # the new layout writes it as a string
                start, end = start - 1, end + 1
            target.write_text(text[:start] + wrong + text[end:], encoding="utf-8")
    elif change in ("fifo-results", "zero-results"):
        results = model / ("results.json" if (model / "results.json").exists() else "results_2024-01-01T00-00-00.json")
        results.unlink(missing_ok=True)
        if change == "fifo-results":
            os.mkfifo(results)
        else:
            os.symlink("/dev/zero", results)
    elif change == "corrupted-bytes" and target.exists():
        mutation = str(rng.choice(["flip", "truncate", "insert", "drop-line", "repeat-line", "swap-lines"]))
        target.write_bytes(_mutate(target.read_bytes(), {"mutation": mutation}, rng))
    elif change == "output-is-input":
        return target, []
    elif change in ("output-hard-link", "output-symlink") and target.exists():
        link = output.parent / f"{change}.h5"
        if not link.exists():
            (os.link if change == "output-hard-link" else os.symlink)(target, link)
        return link, []
    elif change == "output-folder":
        output.mkdir(exist_ok=True)
    elif change == "output-fifo" and not os.path.lexists(output):
        os.mkfifo(output)
    elif change == "output-252-chars":
        return output.parent / ("o" * 249 + ".h5"), []
    elif change == "output-256-bytes":
        return output.parent / ("o" * 253 + ".h5"), []
    elif change == "previous-output" and not os.path.lexists(output) and len(output.name) < 256:
        output.write_bytes(b"an earlier cache")
    return output, []


def hostile_files_case(case: dict[str, Any]) -> tuple[str, str]:
    """Copy the base run, make the case's changes, convert through the CLI, and judge (see above)."""
    from ensemble_env.cache import load_cache

    rng = np.random.default_rng(case["seed"])
    work = Path(f"hostile-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(case["base"], work / "run")
    (work / "out").mkdir()
    output, extra = work / "out" / "cache.h5", []
    applied = []  # the changes that changed something (one may find nothing left to change)
    for change in case["changes"]:
        state = _snapshot(work)
        changed_output, more = _apply(change, work / "run", work, output, rng)
        if more or changed_output != output or _snapshot(work) != state:
            applied.append(change)
        output, extra = changed_output, extra + more
    must = any(HOSTILE_FILES[name] or (HOSTILE_FILES[name] is None and case["layout"] == "old") for name in applied)
    before = _snapshot(work)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            code = main(["cache", "from-lm-eval", str(work / "run"), "-o", str(output), *extra])
    except BaseException as error:  # a traceback on the command line
        return "bad_error", f"wrong exception: {type(error).__name__}: {str(error)[:200]}"
    after = _snapshot(work)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    written = [str(output)] if code == 0 else []
    if [path for path in changed if path not in written]:
        return "wrong", f"data lost: exit {code}, changed {changed[:3]}"
    err = stderr.getvalue()
    if code == 2:
        if "Traceback" in err or not re.fullmatch(r"ensemble-env cache( [a-z-]+)?: error: [^\n]+\n", err):
            return "bad_error", f"wrong exception: not one error line: {err[:200]!r}"
        return "refused", err[:300]
    if code != 0:
        return "bad_error", f"wrong exception: exit {code}: {err[:200]!r}"
    if must:
        return "wrong", "accepted wrongly"
    try:
        load_cache(output)
    except Exception as error:
        return "wrong", f"accepted wrongly: the cache written does not load: {error}"
    return "accepted", ""


def hostile_files_cases(workdir: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded cases: each change alone once per layout, then random mixes of 1 or 2 changes of the files,
    with one of the output's (they are alternatives for -o) and, on top, an earlier cache at -o."""
    bases = {layout: write_run(workdir / f"base-{layout}", layout) for layout in ("new", "old")}
    rng = np.random.default_rng(seed)
    outputs = [name for name in HOSTILE_FILES if name.startswith("output-")]
    inputs = [name for name in HOSTILE_FILES if name not in outputs and name != "previous-output"]
    cases = [{"layout": layout, "changes": [name]} for name in HOSTILE_FILES for layout in bases]
    while len(cases) < n:
        picked = [inputs[i] for i in rng.choice(len(inputs), size=int(rng.integers(1, 3)), replace=False)]
        if rng.random() < 0.6:
            picked.append(outputs[int(rng.integers(len(outputs)))])
        if rng.random() < 0.3:
            picked.append("previous-output")
        cases.append({"layout": str(rng.choice(list(bases))), "changes": picked})
    for index, case in enumerate(cases[:n]):
        case["base"] = str(bases[case["layout"]])
        case["seed"] = int(seed * 1_000_003 + index)
        case["kind"] = f"{case['layout']} {'+'.join(case['changes'])}"
    return cases[:n]


def suite_hostile_files(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = hostile_files_cases(workdir, slow_size(1500) if slow else 2 * len(HOSTILE_FILES), 22)
    return run_cases("test_fuzz_lm_eval", "hostile_files_case", cases, workdir, HOSTILE_CASE_SECONDS), 0


def hostile_table(results: list[dict[str, Any]]) -> str:
    """Per change (a case counts in the row of each of its changes) the inputs and each outcome."""
    columns = ["inputs", "refused clearly", "accepted (valid)", "accepted wrongly", "wrong exception", "hang"]
    columns += ["crash", "data lost"]
    rows: dict[str, Counter[str]] = {name: Counter() for name in HOSTILE_FILES}
    rows["all cases"] = Counter()
    for result in results:
        outcome = result["outcome"]
        if outcome == "wrong":
            outcome = "data lost" if result["detail"].startswith("data lost") else "accepted wrongly"
        column = {"refused": "refused clearly", "accepted": "accepted (valid)", "bad_error": "wrong exception"}
        for name in [*result["kind"].split(" ", 1)[1].split("+"), "all cases"]:
            rows[name]["inputs"] += 1
            rows[name][column.get(outcome, outcome)] += 1
    lines = [" | ".join(["input class", *columns]), " | ".join(["---"] * (len(columns) + 1))]
    lines += [" | ".join([name, *(str(counts[c]) for c in columns)]) for name, counts in rows.items()]
    return "\n".join(lines)


# -- duplicated keys (issue 34, "Reliability round 3", item 6a) ---------------------------------------------------

#: raw JSON values a duplicate may hold (in the float range: an out-of-range number is refused where it is read)
DUPLICATE_VALUES = [
    "null", "true", "false", "0", "1", "-1", "1.0", "-0.0", "0.0", "0.5", "NaN", '"x"', '"1"', '""', "[]", "{}",
    '[["-1.5", "False"]]', '[-1.5, false]', '{"question": "another"}', '"none"', '"hash-other"',
]  # fmt: skip
_DUPLICATE_KEY, _DUPLICATE_VALUE = "@@DUPLICATE-KEY@@", "@@DUPLICATE-VALUE@@"


def _objects(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every JSON object (dict) inside ``value``, itself included."""
    found = [path] if isinstance(value, dict) else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found += _objects(item, (*path, key))
    return found


def _canonical(raw: str) -> str:
    """One spelling of a JSON value that keeps its type (``1`` is not ``1.0``): Python's json round trip."""
    return json.dumps(json.loads(raw))


def _retyped(raw: str) -> str | None:
    """The same value under another JSON type or sign, where there is one."""
    value = json.loads(raw)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return f"{value}.0"
    if isinstance(value, float):
        return "-0.0" if value == 0 and str(value)[0] != "-" else str(int(value)) if value.is_integer() else None
    if isinstance(value, str):  # a number written as text ("-1.5"), written as the number
        return value if parse_float(value) is not None else None
    return None


def duplicate_key_case(case: dict[str, Any]) -> tuple[str, str]:
    """Copy the base run, write one key of one record twice, convert through the API and the CLI, and judge."""
    rng = np.random.default_rng(case["seed"])
    work = Path(f"duplicate-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(case["base"], work / "run")
    target = _files(work / "run")[int(rng.integers(len(_files(work / "run"))))]
    text = target.read_text(encoding="utf-8")
    if case["layout"] == "new":
        lines = text.split("\n")
        numbers = [number for number, line in enumerate(lines) if line.strip()]
        index = int(rng.integers(len(numbers)))
        records = [json.loads(lines[number]) for number in numbers]
    else:
        records = json.loads(text)
        index = int(rng.integers(len(records)))
    record = records[index]
    paths = _objects(record)
    path = paths[int(rng.integers(len(paths)))]
    holder = record
    for key in path:
        holder = holder[key]
    if not holder:
        return "accepted", "an empty object: nothing to write twice"
    key = list(holder)[int(rng.integers(len(holder)))]
    original = json.dumps(holder[key], ensure_ascii=False)
    variant = case["variant"]
    duplicate = original if variant == "identical" else _retyped(original) if variant == "retyped" else None
    if duplicate is None:
        duplicate = DUPLICATE_VALUES[int(rng.integers(len(DUPLICATE_VALUES)))]
    pairs = list(holder.items())
    at = [name for name, _ in pairs].index(key) + (0 if case["before"] else 1)
    pairs.insert(at, (_DUPLICATE_KEY, _DUPLICATE_VALUE))
    holder.clear()
    holder.update(pairs)
    marker = f"{json.dumps(_DUPLICATE_KEY)}: {json.dumps(_DUPLICATE_VALUE)}"
    written = f"{json.dumps(key, ensure_ascii=False)}: {duplicate}"
    if case["layout"] == "new":
        lines[numbers[index]] = json.dumps(record, ensure_ascii=False).replace(marker, written)
        target.write_text("\n".join(lines), encoding="utf-8")
        line = numbers[index] + 1
    else:
        target.write_text(json.dumps(records, indent=2, ensure_ascii=False).replace(marker, written), encoding="utf-8")
        line = record_lines(target)[index]
    must = _canonical(duplicate) != _canonical(original)
    converts = False
    try:
        converted = from_lm_eval([work / "run"])
        converts = True
    except Exception as error:
        outcome, detail = judge_error(error, (ConversionError,), target.name)
        message = str(error)
        if outcome == "refused" and not must:
            outcome, detail = "wrong", f"refused an identical duplicate: {message[:250]}"
        elif outcome == "refused":
            expected = f"{target.name}, line {line}: field {show(key)}: appears twice in one object"
            if expected not in message:
                outcome, detail = "bad_error", f"expected {expected!r} in: {message[:250]}"
    else:
        if must:
            outcome, detail = "wrong", f"converted {key!r} written with {original[:40]} and {duplicate[:40]}"
        elif not _same_cache(converted, _base_cache(case["base"])):
            outcome, detail = "wrong", "an identical duplicate changed the cache"
        else:
            outcome, detail = "equal", ""
    cli = _through_cli(work, converts)  # the command agrees with the API
    return (outcome, detail) if cli is None else ("bad_error", cli)


_BASES: dict[str, Any] = {}


def _base_cache(base: str) -> Any:
    if base not in _BASES:
        _BASES[base] = from_lm_eval([Path(base)])
    return _BASES[base]


def _same_cache(left: Any, right: Any) -> bool:
    arrays = ("scores", "labels", "n_choices", "tasks", "split")
    names = ("models", "task_names", "question_ids", "question_text")
    return all(np.array_equal(getattr(left, a), getattr(right, a)) for a in arrays) and all(
        getattr(left, n) == getattr(right, n) for n in names
    )


def duplicate_key_cases(workdir: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded cases: both layouts; identical, other or retyped values; before or after the original."""
    bases = {layout: write_run(workdir / f"base-{layout}", layout) for layout in ("new", "old")}
    rng = np.random.default_rng(seed)
    cases = []
    for index in range(n):
        layout = str(rng.choice(["new", "old"]))
        variant = str(rng.choice(["identical", "different", "retyped"]))
        before = bool(rng.random() < 0.5)
        cases.append(
            {
                "kind": f"{layout} {variant} {'before' if before else 'after'}",
                "layout": layout,
                "variant": variant,
                "before": before,
                "base": str(bases[layout]),
                "seed": int(seed * 1_000_003 + index),
            }
        )
    return cases


def suite_duplicate_keys(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = duplicate_key_cases(workdir, slow_size(1000) if slow else 60, 23 if slow else 5)
    return run_cases("test_fuzz_lm_eval", "duplicate_key_case", cases, workdir, CASE_SECONDS), 0


SUITES: dict[str, Callable[[Path, bool], tuple[list[dict[str, Any]], int]]] = {
    "lm-eval samples": suite_lm_eval,
    "hostile files and outputs": suite_hostile_files,
    "duplicated keys": suite_duplicate_keys,
}


def test_duplicated_keys_are_refused_unless_identical(tmp_path: Path) -> None:
    results, _ = suite_duplicate_keys(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 15 and counts["equal"] > 10, dict(counts)


@pytest.mark.slow
def test_duplicated_keys_large(tmp_path: Path) -> None:
    results, _ = suite_duplicate_keys(tmp_path, slow=True)
    assert len(results) == slow_size(1000) and not bad(results), f"{dict(count(results))}; first: {bad(results)[:5]}"


def test_hostile_files_and_outputs_are_refused_clearly_or_converted(tmp_path: Path) -> None:
    results, _ = suite_hostile_files(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}\n{hostile_table(results)}"
    assert counts["refused"] >= 30 and counts["accepted"] >= 4, hostile_table(results)
    assert set(counts) <= {"refused", "accepted"}


@pytest.mark.slow
def test_hostile_files_and_outputs_large(tmp_path: Path) -> None:
    results, _ = suite_hostile_files(tmp_path, slow=True)
    assert len(results) == slow_size(1500) and not bad(results), f"first: {bad(results)[:5]}\n{hostile_table(results)}"


def _cli(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real ``ensemble-env`` in a process of its own, given HOSTILE_CASE_SECONDS (a hang fails the test)."""
    command = [sys.executable, "-m", "ensemble_env.cli", *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, timeout=HOSTILE_CASE_SECONDS, cwd=cwd)


def test_a_fifo_named_results_json_does_not_hang_the_command(tmp_path: Path) -> None:
    """The reported hang, end to end in a process of its own: lm-eval 0.4.0-0.4.2 names need the results file."""
    run = write_run(tmp_path / "run", layout="old")
    fifo = run / "org__beta" / "results.json"
    fifo.unlink()
    os.mkfifo(fifo)
    before = _snapshot(tmp_path)
    done = _cli("cache", "from-lm-eval", run, "-o", tmp_path / "out.h5", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr == f"ensemble-env cache: error: {fifo}: a FIFO (named pipe), not a regular file; it is not read\n"
    )
    assert _snapshot(tmp_path) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "change", ["output-is-input", "output-hard-link", "zero-samples", "urandom-samples", "zero-results", "fifo-samples"]
)
def test_hostile_cases_in_their_own_process(tmp_path: Path, change: str) -> None:
    """The real ``ensemble-env``, one process per case: exit status 2, one error line, nothing changed."""
    run = write_run(tmp_path / "run", layout="old")
    output, extra = _apply(change, run, tmp_path, tmp_path / "out.h5", np.random.default_rng(0))
    before = _snapshot(tmp_path)
    done = _cli("cache", "from-lm-eval", run, "-o", output, *extra, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("ensemble-env cache: error: ") and "Traceback" not in done.stderr
    expected = "the output would overwrite the input" if change.startswith("output") else "not a regular file"
    expected = "a symbolic link leading out of" if "zero" in change or "urandom" in change else expected
    assert expected in done.stderr, done.stderr
    assert _snapshot(tmp_path) == before


def test_mutated_samples_convert_or_are_refused_with_file_and_line(tmp_path: Path) -> None:
    results, _ = suite_lm_eval(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 30 and counts["accepted"] > 5


@pytest.mark.slow
def test_mutated_samples_large(tmp_path: Path) -> None:
    results, _ = suite_lm_eval(tmp_path, slow=True)
    assert not bad(results), f"{dict(count(results))}; first: {bad(results)[:5]}"
    assert len(results) == slow_size(4000) and not set(count(results)) & set(BAD)
