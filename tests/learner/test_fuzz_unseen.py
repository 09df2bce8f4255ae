"""Seeded fuzzing of ``benchmark --protocol unseen-tasks --eval-cache`` (issue 41, "Reliability round 4", class 1).

Each case writes a training cache (3 models, 4 tasks; question ids or none) and an evaluation cache made from it or
from a cache of other questions by 1 to 3 changes: a byte copy, a re-split, a part of it, its tasks renamed, its ids
dropped or renumbered, its scores narrowed to float32 or float16, its labels shuffled, noise on every score, some
training questions copied into a cache of other questions (in a task of the same name or another), the training task
names given to other questions; and sometimes a second training cache (``--cache a.h5,b.h5``). Then ``ensemble-env
benchmark`` runs on them (``global_team``, one seed), as a user would.

The verdict is known in advance from the documented rule (a reference written as plain loops, :func:`shared`): the
evaluation cache holds a training question when a task of the same name holds the same id or the same answers at
float16 precision, or when a whole task of it is training answers under another name. The command must then exit 2
with one line naming ``--eval-cache`` and write no results; otherwise exit 0 with one result per training cache (keyed
``TRAIN -> EVAL`` when there are two). Hostile files as ``--eval-cache`` (a FIFO, a link to /dev/zero, a folder,
garbage, a missing file) are refused in one line too.

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/learner/test_fuzz_unseen.py --slow`` the full part and prints its row.
"""

from __future__ import annotations

import contextlib
import dataclasses
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

CASE_SECONDS = 120.0
MODULE = "test_fuzz_unseen"
CHANGES = [
    "copy", "re-split", "part", "rename tasks", "drop ids", "renumber ids", "float32", "float16", "shuffle labels",
    "noise", "copy questions", "copy questions elsewhere", "same task names",
]  # fmt: skip
FILES = ["fifo", "link to /dev/zero", "folder", "garbage", "missing"]


def _cache(seed: int, ids: bool, names: tuple[str, ...] | None = None) -> Any:
    from ensemble_env.cache import synthetic

    cache = synthetic.make_cache(n_models=3, n_questions=80, n_tasks=4, accuracy=[0.5, 0.6, 0.7], seed=seed)
    prefix = f"s{seed}"
    cache = dataclasses.replace(cache, task_names=names or tuple(f"{prefix}_{name}" for name in cache.task_names))
    if ids:
        cache = dataclasses.replace(cache, question_ids=tuple(f"{prefix}/q{i}" for i in range(cache.n_questions)))
    return cache


def _evaluation(train: Any, case: dict[str, Any], rng: np.random.Generator) -> Any:
    """The evaluation cache of a case: the first change picks what it starts from, the others alter it."""
    changes = case["changes"]
    from_training = changes[0] not in ("copy questions", "copy questions elsewhere", "same task names")
    cache = train if from_training else _cache(case["seed"] + 7, ids=bool(case["ids"]))
    for change in changes:
        if change == "re-split":
            cache = dataclasses.replace(cache, split=rng.integers(0, 3, cache.n_questions))
        elif change == "part" and cache.n_questions > 4:
            cache = cache.subset(rng.random(cache.n_questions) < 0.4)
        elif change == "rename tasks":
            cache = dataclasses.replace(cache, task_names=tuple(f"new_{name}" for name in cache.task_names))
        elif change == "drop ids":
            cache = dataclasses.replace(cache, question_ids=None)
        elif change == "renumber ids":
            cache = dataclasses.replace(cache, question_ids=tuple(f"other/{i}" for i in range(cache.n_questions)))
        elif change in ("float32", "float16"):
            cache = dataclasses.replace(cache, scores=np.asarray(cache.scores).astype(change))
        elif change == "shuffle labels":
            cache = dataclasses.replace(cache, labels=rng.permutation(np.asarray(cache.labels)))
        elif change == "noise":
            scores = np.asarray(cache.scores, dtype=np.float64)
            cache = dataclasses.replace(cache, scores=scores + rng.normal(0.0, 0.05, scores.shape))
        elif change in ("copy questions", "copy questions elsewhere"):
            picked = rng.choice(train.n_questions, size=int(rng.integers(1, 4)), replace=False)
            scores, labels, tasks = (
                np.array(np.asarray(getattr(cache, name))) for name in ("scores", "labels", "tasks")
            )
            rows = rng.choice(cache.n_questions, size=picked.size, replace=False)
            scores[rows] = np.asarray(train.scores)[picked].astype(scores.dtype)
            labels[rows] = np.asarray(train.labels)[picked]
            names = list(cache.task_names)
            if change == "copy questions":  # into a task of the same name as its training task
                for row, question in zip(rows, picked, strict=True):
                    name = train.task_names[int(train.tasks[question])]
                    if name not in names:
                        names.append(name)
                    tasks[row] = names.index(name)
            ids = None
            if cache.question_ids is not None:
                ids = list(cache.question_ids)
                for row, question in zip(rows, picked, strict=True):
                    ids[row] = train.question_ids[question] if train.question_ids is not None else ids[row]
            cache = dataclasses.replace(cache, scores=scores, labels=labels, tasks=tasks, task_names=tuple(names),
                                        question_ids=None if ids is None else tuple(ids))  # fmt: skip
        elif change == "same task names":  # the training tasks' names on the first tasks (names stay distinct)
            names = list(cache.task_names)
            for index, name in enumerate(train.task_names[: len(names)]):
                names[index] = name if name not in names else names[index]
            cache = dataclasses.replace(cache, task_names=tuple(names))
    return cache


def shared(train: Any, evaluation: Any) -> list[int]:
    """The documented rule as plain loops: the evaluation questions that are training questions."""

    def answers(cache: Any, q: int) -> bytes:
        with np.errstate(over="ignore"):
            return np.asarray(cache.scores)[q, :, : cache.n_choices[q]].astype(np.float16).tobytes()

    def task(cache: Any, q: int) -> str:
        return str(cache.task_names[int(cache.tasks[q])])

    pairs = {(task(train, q), answers(train, q)) for q in range(train.n_questions)}
    ids = set()
    if train.question_ids is not None:
        ids = {(task(train, q), train.question_ids[q]) for q in range(train.n_questions)}
    known = {answers(train, q) for q in range(train.n_questions)}
    found = set()
    for q in range(evaluation.n_questions):
        if (task(evaluation, q), answers(evaluation, q)) in pairs:
            found.add(q)
        if evaluation.question_ids is not None and (task(evaluation, q), evaluation.question_ids[q]) in ids:
            found.add(q)
    for t in set(np.asarray(evaluation.tasks).tolist()):
        members = [q for q in range(evaluation.n_questions) if int(evaluation.tasks[q]) == t]
        if all(answers(evaluation, q) in known for q in members):
            found.update(members)
    return sorted(found)


def _hostile_file(folder: Path, kind: str) -> Path:
    path = folder / "eval.h5"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(3000))
    return path


def unseen_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_env.cache import save_cache
    from ensemble_env.cli import main
    from ensemble_mappo.benchmark import protocols

    work = Path(f"unseen-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    rng = np.random.default_rng(case["seed"])
    train = _cache(case["seed"], ids=bool(case["ids"]))
    train_file = save_cache(work / "train.h5", train)
    trains = [train_file]
    if case.get("second"):
        trains.append(save_cache(work / "second.h5", _cache(case["seed"] + 3, ids=bool(case["ids"]))))
    if "file" in case:
        eval_file, expected = _hostile_file(work, case["file"]), None
    else:
        evaluation = _evaluation(train, case, rng)
        eval_file = work / "eval.h5"
        if case["changes"] == ["copy"]:
            shutil.copy(train_file, eval_file)
        else:
            save_cache(eval_file, evaluation)
        expected = shared(train, evaluation)
        if case.get("second"):
            from ensemble_env.cache import load_cache

            expected = expected or shared(load_cache(trains[1]), evaluation)
        check = getattr(protocols, "training_questions", None)  # absent from the builds before issue 41
        got = shared(train, evaluation) if check is None else check(train, evaluation).tolist()
        if got != shared(train, evaluation):
            return "wrong", f"training_questions {got[:5]}, the rule {shared(train, evaluation)[:5]}"
    out = work / "out"
    argv = ["benchmark", "--protocol", "unseen-tasks", "--cache", ",".join(map(str, trains))]
    argv += ["--eval-cache", str(eval_file), "--algorithms", "global_team", "--seeds", "1", "--out", str(out)]
    argv += ["--no-progress"]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
    except BaseException as error:  # a traceback on the command line
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("benchmark: ")]  # the folds' notes
    refuse = expected is None or bool(expected)
    if refuse:
        if code == 0:
            return "wrong", f"scored an evaluation cache holding training questions {expected[:5]}"
        if code != 2 or len(lines) != 1 or not re.match(r"ensemble-env benchmark: error: ", lines[0]):
            return "bad_error", f"exit {code}, stderr {err.getvalue()[-300:]!r}"
        if str(eval_file) not in lines[0] or (out / "results.json").exists():
            return "bad_error", f"not naming --eval-cache, or results written: {lines[0][:250]}"
        return "refused", lines[0][:300]
    if code != 0:
        return "wrong", f"refused tasks never seen: exit {code}, {err.getvalue()[-250:]!r}"
    keys = list(json.loads((out / "results.json").read_text())["caches"])
    wanted = [str(eval_file)] if len(trains) == 1 else [f"{path} -> {eval_file}" for path in trains]
    if keys != wanted:
        return "wrong", f"results under {keys}, expected {wanted}"
    return "accepted", ""


def unseen_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = [{"file": kind} for kind in FILES]
    cases += [{"changes": [change]} for change in CHANGES]
    while len(cases) < n:
        first = str(rng.choice(CHANGES))
        rest = [str(change) for change in rng.choice(CHANGES[1:], size=int(rng.integers(0, 3)))]
        cases.append(
            {"changes": [first, *(change for change in rest if change != "copy")] if first != "copy" else ["copy"]}
        )
    for index, case in enumerate(cases[:n]):
        case["seed"] = int(seed * 1_000_003 + index)
        case["ids"] = bool(rng.random() < 0.5)
        case["second"] = bool(rng.random() < 0.2)
        case["kind"] = case.get("file") or "+".join(case["changes"])
    return cases[:n]


def suite_unseen(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = unseen_cases(slow_size(400) if slow else 24, seed=61 if slow else 6)
    return run_cases(MODULE, "unseen_case", cases, workdir, CASE_SECONDS), 0


SUITES = {"unseen-task eval caches": suite_unseen}


def test_eval_caches_holding_training_questions_are_refused_and_others_scored(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite_unseen(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 8 and counts["accepted"] > 2, dict(counts)


@pytest.mark.slow
def test_many_eval_caches(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite_unseen(tmp_path, slow=True)
    assert len(results) == slow_size(400) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the unseen-task eval-cache fuzz and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
