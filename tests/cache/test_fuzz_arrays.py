"""Seeded fuzzing of ``from-arrays`` (issue 34, "Reliability round 3", item 6b and 6c): question ids and features.

Each case writes a ``.npz`` pool (12 questions, 3 models, 4 choices, question ids and float64 features) with 1 to 3
changes: a question id given to a second question, ids that only look alike (another case, a trailing space,
a fullwidth digit: distinct ids, valid), two ids swapped, an id missing, ids stored as bytes; a feature set to a
value at or beyond float32's range (``1e39``, the float64 just above float32's largest value, that value itself,
``1e308``, subnormals, NaN, infinities), the features stored as float16, float32 or longdouble (which no cache
stores: refused too, since this suite found such a cache written, then refused by ``load_cache``). It converts the
pool through :func:`~ensemble_env.cache.convert.from_array_files` and ``ensemble-env cache from-arrays``.

The verdict is known in advance: the pool must be refused exactly when an id is missing or given twice, or a
feature is not finite, beyond float32's range or a longdouble, with a ConversionError naming the file, the field
and the first offending id or value (its question and column); the command must then exit with status 2, one
error line and no file. Otherwise the cache written must load with the ids given and features finite in float32.

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/cache/test_fuzz_arrays.py --slow`` the full part and prints its row.
"""

from __future__ import annotations

import contextlib
import io
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
from fuzzing import BAD, bad, count, judge_error, run_cases, slow_size, suites_main

CASE_SECONDS = 30.0
Q, N, C, F = 12, 3, 4, 3
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: values a feature is set to (spelled for JSON)
FEATURE_VALUES = [
    "1e39", "-1e39", "3.5e38", "-3.5e38", "above", "-above", "max", "-max", "1e308", "-1e308", "1e-320", "5e-324",
    "-0.0", "3.4028235e38", "3.4028234e38", "nan", "inf", "-inf", "1e30", "0.25",
]  # fmt: skip
CHANGES = [
    "duplicate-id", "duplicate-id", "alike-id", "swap-ids", "missing-id", "bytes-ids",
    "feature-value", "feature-value", "feature-value", "features-dtype",
]  # fmt: skip


def _feature(spelled: str) -> float:
    sign = -1.0 if spelled.startswith("-") else 1.0
    word = spelled.lstrip("-")
    if word == "above":
        return sign * float(np.nextafter(FLOAT32_MAX, np.inf))
    if word == "max":
        return sign * FLOAT32_MAX
    return float(spelled)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _pool(case: dict[str, Any]) -> dict[str, Any]:
    """The arrays of a case: the base pool with the case's changes, in order."""
    rng = np.random.default_rng(case["seed"])
    scores = rng.dirichlet(np.ones(C), size=(Q, N))
    arrays: dict[str, Any] = {
        "scores": scores,
        "labels": rng.integers(0, C, Q),
        "models": np.array([f"model-{i}" for i in range(N)]),
        "question_ids": np.array([f"task-{i % 3}/q{i}" for i in range(Q)]),
        "features": rng.normal(size=(Q, F)) * 10,
        "tasks": np.array([f"task-{i % 3}" for i in range(Q)]),
    }
    for change in case["changes"]:
        ids = arrays["question_ids"]
        if ids.dtype.kind == "S" and change != "bytes-ids":  # back to text for the changes of ids
            ids = np.array([_text(x) for x in ids.tolist()])
        if change == "duplicate-id":
            i, j = rng.choice(len(ids), size=2, replace=False) if len(ids) > 1 else (0, 0)
            ids = ids.astype(object)
            ids[i] = ids[j]
        elif change == "alike-id":
            i = int(rng.integers(len(ids)))
            ids = ids.astype(object)
            ids[i] = str(rng.choice([ids[i].upper(), ids[i] + " ", ids[i].replace("1", "１"), ids[i] + "\u0301"]))
        elif change == "swap-ids":
            i, j = rng.choice(len(ids), size=2, replace=False)
            ids = ids.copy()
            ids[[i, j]] = ids[[j, i]]
        elif change == "missing-id":
            ids = np.delete(ids, int(rng.integers(len(ids))))
        elif change == "bytes-ids" and ids.dtype.kind == "U":
            arrays["question_ids"] = np.array([str(x).encode("utf-8") for x in ids], dtype="S")
            continue
        elif change == "feature-value":
            features = arrays["features"].copy()
            value = _feature(FEATURE_VALUES[int(rng.integers(len(FEATURE_VALUES)))])
            with np.errstate(all="ignore"):
                features[int(rng.integers(Q)), int(rng.integers(F))] = value
            arrays["features"] = features
            continue
        elif change == "features-dtype":
            with np.errstate(all="ignore"):
                arrays["features"] = arrays["features"].astype(str(rng.choice(["float16", "float32", "longdouble"])))
            continue
        arrays["question_ids"] = np.array([str(x) for x in ids]) if ids.dtype == object else ids
    return arrays


def _expected_problems(arrays: dict[str, Any], path: Path) -> list[list[str]]:
    """Every refusal the pool deserves, each as the texts its message must hold; empty when it is valid."""
    problems = []
    ids = [_text(x) for x in arrays["question_ids"].tolist()]
    if len(ids) != Q:
        problems.append([f"{path}", "field 'question_ids'", f"has {len(ids)} entries, expected {Q}"])
    else:
        first = next((i for i in range(Q) if ids[i] in ids[:i]), None)
        if first is not None:
            problems.append([f"{path}", "field 'question_ids'", f"question {first} has the id {ids[first]!r}"])
    features = arrays["features"]
    if features.dtype.itemsize > 8:  # longdouble: no cache stores it (it was written, then not loaded)
        problems.append([f"{path}", "field 'features'", f"holds {features.dtype} numbers"])
    for beyond in (~np.isfinite(features), np.abs(features) > FLOAT32_MAX):
        if beyond.any():
            q, f = (int(i) for i in np.argwhere(beyond)[0])
            problems.append([f"{path}", "field 'features'", f"question {q}", f"column {f}"])
            break  # a non-finite value is the cache's own refusal, checked before the float32 range
    return problems


def arrays_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_env.cache import load_cache
    from ensemble_env.cache.convert import ConversionError, from_array_files
    from ensemble_env.cli import main

    work = Path(f"arrays-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    arrays = _pool(case)
    npz = work / "pool.npz"
    np.savez(npz, **arrays)
    problems = _expected_problems(arrays, npz)
    try:
        from_array_files(npz, score_kind="prob")
    except Exception as error:
        outcome, detail = judge_error(error, (ConversionError, ValueError), str(npz))
        if outcome == "refused" and not problems:
            outcome, detail = "wrong", f"refused a valid pool: {str(error)[:250]}"
        elif outcome == "refused" and not any(all(text in str(error) for text in need) for need in problems):
            outcome, detail = "bad_error", f"expected one of {problems} in: {str(error)[:250]}"
        converts = False
    else:
        outcome, detail = ("wrong", f"converted although {problems[0][1:]}") if problems else ("accepted", "")
        converts = True
    out = work / "out.h5"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            code = main(["cache", "from-arrays", str(npz), "--score-kind", "prob", "-o", str(out)])
    except BaseException as error:
        return "bad_error", f"the command raised {type(error).__name__}: {str(error)[:200]}"
    err = stderr.getvalue()
    if (code, out.exists()) != ((0, True) if converts else (2, False)):
        return "bad_error", f"the command: exit {code}, output {out.exists()}, stderr {err[:200]!r}"
    if code == 2 and not re.fullmatch(r"ensemble-env cache: error: [^\n]+\n", err):
        return "bad_error", f"the command: not one error line: {err[:200]!r}"
    if code == 0:
        cache = load_cache(out)
        ids = [_text(x) for x in arrays["question_ids"].tolist()]
        if cache.question_ids != tuple(ids) or not np.isfinite(cache.features.astype(np.float32)).all():
            return "wrong", "the cache written holds other ids or features infinite in float32"
    return outcome, detail


def arrays_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases = [{"changes": []}]  # the base pool: converts
    cases += [{"changes": [change]} for change in dict.fromkeys(CHANGES)]  # each change alone
    while len(cases) < n:
        cases.append({"changes": [str(x) for x in rng.choice(CHANGES, size=int(rng.integers(1, 4)))]})
    for index, case in enumerate(cases[:n]):
        case["seed"] = int(seed * 1_000_003 + index)
        case["kind"] = "+".join(case["changes"]) or "none"
    return cases[:n]


def suite_arrays(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = arrays_cases(slow_size(1000) if slow else 60, seed=51 if slow else 6)
    return run_cases("test_fuzz_arrays", "arrays_case", cases, workdir, CASE_SECONDS), 0


SUITES = {"from-arrays ids and features": suite_arrays}


def test_from_arrays_ids_and_features_are_refused_clearly_or_converted(tmp_path: Path) -> None:
    results, _ = suite_arrays(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 20 and counts["accepted"] > 5, dict(counts)


@pytest.mark.slow
def test_from_arrays_ids_and_features_large(tmp_path: Path) -> None:
    results, _ = suite_arrays(tmp_path, slow=True)
    assert len(results) == slow_size(1000) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main(
        "Run the from-arrays fuzz and print its table row.", {"from-arrays ids and features": suite_arrays}, argv
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
