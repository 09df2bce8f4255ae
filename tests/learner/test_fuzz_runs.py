"""Fuzzing of run directories: random corruptions of a real run's files, budgets beyond the limits, two trains in
one folder at once, and ``kill -9`` at random moments.

**Run files.** A real run (3 updates on toy8, stopped after 2: a checkpoint at update 2, two log rows, an
evaluation) is copied for each case, one value of one file changed at random (a seeded mutation of the JSON of
``config.json``, a cell, row or the header of ``progress.csv``, an entry or a tensor of ``checkpoint.pt``),
and ``evaluate``, ``train --resume`` or ``plot`` is run on it. Each case runs in a worker process under a
watchdog (tests/fuzzing.py): a case that takes too long is a *hang*, a worker that dies (a signal) a *crash*.

==================  ===========================================================================================
outcome             meaning
==================  ===========================================================================================
``refused``         exit 2, one line ``ensemble-env CMD: error: ...`` naming the changed file, no traceback
``accepted``        exit 0, and the change may be valid (a number within its range, an unused byte, ...)
``wrong``           exit 0 for a change that is never valid (a count that is a string, a NaN weight, ...)
``bad_error``       a traceback, another exit status, or a message that does not name the file
``lost``            a refused command changed the run's files, or an accepted resume lost a log row
``hang``/``crash``  from the watchdog, as above
==================  ===========================================================================================

**Budgets.** Sizes and budgets beyond the limits (``--passes inf``, ``--hidden-size 1000000``, a rollout of
terabytes, ...) must be refused before anything big is allocated: the worker's peak memory may not grow by
more than 512 MB over a case.

**Concurrent runs and kill -9** (slow): two ``train`` in one folder at once, one of them must be refused naming
the other's pid, and the folder must hold one whole run; ``train`` killed at a random update (or twice) must
leave a folder that ``--resume`` completes with every log row once. No process the test starts may outlive it.

``python tests/learner/test_fuzz_runs.py [--slow]`` prints the table of the report.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

if __name__ == "__main__":  # run as a script: the helper is in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fuzzing  # noqa: E402

#: the base run's training options (3 updates of 4 copies x 8 steps)
TINY = {
    "num_envs": 4,
    "num_steps": 8,
    "episode_length": 16,
    "total_steps": 96,
    "update_epochs": 1,
    "num_minibatches": 2,
    "checkpoint_every": 1,
    "hidden_size": 8,
}
OUTCOMES = ("refused", "accepted", "wrong", "bad_error", "lost", "hang", "crash")
BAD = ("wrong", "bad_error", "lost", "hang", "crash")
#: what torch's refusals hold besides their cause: colour codes and advice (a message cut in them says nothing)
TORCH_ADVICE = ("\x1b[", "there is a high likelihood", "Please use", "Please file", "If you are seeing this error")
#: the worker's peak memory may grow by this much over a budget case (the limits refuse before allocating)
BUDGET_MEMORY = 512 * 2**20

HOSTILE_JSON: list[Any] = [None, True, False, 0, -1, 1, 2, 2**63, 10**30, 1.5, -0.0, 1e308, "", "x", "3", "toy8"]
HOSTILE_JSON += [[], {}, [1], {"a": 1}, ["x"], "a" * 500]
HOSTILE_CELLS = ["", "x", "nan", "inf", "-inf", "1e999", "-1", "0", "0.5", "2", "1e300", "1.5", " 1", "1_0", "0x10"]
HOSTILE_CELLS += ["\u0663", "1,2", '"1"', "3"]
#: the columns a log must hold (ensemble_mappo.runs.CORE_COLUMNS, and each model's selection)
CORE_COLUMNS = ("iteration", "global_step", "env/reward", "env/accuracy", "env/team_size", "env/episode_accuracy")
#: parts of config.json whose value the checkpoint does not repeat, and which no command compares with the cache
FREE_JSON = (("run", "tasks"), ("run", "n_questions"))


# -- the base run ---------------------------------------------------------------------------------------------
def make_base_run(folder: Path) -> Path:
    """The run every case corrupts a copy of: a checkpoint at update 2 of 3, two log rows, its test evaluation."""
    from ensemble_env import datasets
    from ensemble_env.cli import main
    from ensemble_mappo.config import config_from_dict
    from ensemble_mappo.training import train

    out = folder / "base"
    config = config_from_dict({**TINY, "seed": 1})
    train(config, datasets.load("toy8"), out, cache_path="toy8", progress=False, stop_after=2)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["evaluate", str(out), "--no-baselines"]) == 0  # plot reads it instead of evaluating
    return out


# -- mutations ------------------------------------------------------------------------------------------------
def _json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            paths += _json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths += _json_paths(item, (*prefix, index))
    return paths


def _same(a: Any, b: Any) -> bool:
    """Equal as a config reads them (an int where a float was is the same number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b) and (isinstance(a, float) or not isinstance(b, float))
    return type(a) is type(b) and a == b


def mutate_config(path: Path, rng: random.Random) -> tuple[str, bool | None]:
    """One random change of config.json; (what, must_refuse: True, or None when it may be valid)."""
    text = path.read_text()
    op = rng.choice(["replace", "replace", "replace", "delete", "add", "text"])
    if op == "text":
        how = rng.choice(["truncate", "flip", "empty", "list", "null"])
        if how == "truncate":
            path.write_text(text[: rng.randrange(len(text) - 2)])
            return "truncated", True
        if how == "flip":
            data = bytearray(text.encode())
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256)
            path.write_bytes(bytes(data))
            return f"byte {at} changed", None
        path.write_text({"empty": "", "list": "[]", "null": "null"}[how])
        return f"replaced by {how}", True
    data = json.loads(text)
    target_path = rng.choice(_json_paths(data))
    *parents, last = target_path
    parent = data
    for key in parents:
        parent = parent[key]
    free = any(target_path[: len(part)] == part for part in FREE_JSON)
    where = ".".join(map(str, target_path))
    if op == "delete":
        # a field a run written before it existed may lack (LEGACY_FIELDS) reads as its legacy value: deleting it
        # where the run holds that value leaves the same config (either outcome is right)
        from ensemble_mappo.runs import LEGACY_FIELDS

        legacy = parents == ["config"] and last in LEGACY_FIELDS and parent[last] == LEGACY_FIELDS[last]
        del parent[last]
        path.write_text(json.dumps(data))
        return f"{where} deleted", None if free or legacy else True
    if op == "add":
        container = parent if isinstance(parent, dict) else data
        if isinstance(container, dict):
            container[f"extra_{rng.randrange(100)}"] = rng.choice(HOSTILE_JSON)
            path.write_text(json.dumps(data))
            return f"a key added beside {where}", None if free else True
        return "nothing", None
    old, new = parent[last], rng.choice(HOSTILE_JSON)
    parent[last] = new
    path.write_text(json.dumps(data))
    if _same(old, new):
        return f"{where} rewritten as {new!r} (unchanged)", None
    return f"{where}: {old!r} -> {new!r}", None if free else True


def mutate_progress(path: Path, rng: random.Random) -> tuple[str, bool | None]:
    """One random change of progress.csv (rows 1 and 2 are under the checkpoint: every row counts)."""
    with path.open(newline="") as file:
        rows = list(csv.reader(file))
    header = rows[0]
    op = rng.choice(["cell", "cell", "cell", "cell", "row", "header", "truncate", "blank", "garbage"])
    must: bool | None = True
    what = op
    if op == "cell":
        line, column = rng.randrange(1, len(rows)), rng.randrange(len(header))
        old, new = rows[line][column], rng.choice(HOSTILE_CELLS)
        rows[line][column] = new
        name = header[column]
        what = f"line {line + 1}, {name}: {old!r} -> {new!r}"
        valid_number = new != "" and new.lstrip("-").replace(".", "", 1).isdigit()
        if new == old:
            must = None
        elif name in ("iteration", "global_step"):
            must = True
        elif new == "" or (valid_number and abs(float(new)) < 1e300):
            must = None  # an empty cell or a finite number: it may be in range
        elif new == "1e300":
            must = None
        elif new == "1,2":
            must = None  # csv quotes it: one cell "1,2", not a number
    elif op == "row":
        how = rng.choice(["drop", "duplicate", "swap"])
        what = f"row {how}"
        if how == "drop":
            at = rng.randrange(1, len(rows))
            rows.pop(at)
            must = None if at == len(rows) else True  # the last row: a shorter log, whole (resume refuses it)
        elif how == "duplicate":
            rows.insert(1, rows[1])
        else:
            rows[1], rows[2] = rows[2], rows[1]
    elif op == "header":
        column = rng.randrange(len(header))
        what = f"header column {header[column]!r} " + rng.choice(["renamed", "dropped"])
        if what.endswith("renamed"):  # a statistic's column may be missing (a log of an older version)
            core = header[column] in CORE_COLUMNS or header[column].startswith("env/select/")
            must = True if core else None
            header[column] = header[column] + "_x"
        else:
            header.pop(column)
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    text = buffer.getvalue()
    if op == "truncate":
        cut = rng.randrange(len(text))
        text = text[:cut]
        what = f"truncated at {cut} of {len(buffer.getvalue())}"
        must = None if text.endswith(("\n", "\r")) or cut >= len(buffer.getvalue()) - 2 else True
    elif op == "blank":
        lines = text.splitlines(keepends=True)
        lines.insert(rng.randrange(1, len(lines) + 1), "\r\n")
        text = "".join(lines)
        must = None
    elif op == "garbage":
        lines = text.splitlines(keepends=True)
        lines.insert(rng.randrange(1, len(lines)), "\x00garbage,\xff\r\n")
        text = "".join(lines)
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return what, must


def mutate_checkpoint(path: Path, rng: random.Random) -> tuple[str, bool | None, bool]:
    """One random change of checkpoint.pt; (what, must_refuse, whether a frozen evaluation reads the entry)."""
    from ensemble_mappo.checkpoint import pack_arrays, save_checkpoint, unpack_arrays

    payload = torch.load(path, weights_only=True)
    key = rng.choice(sorted(payload))
    op = rng.choice(["delete", "replace", "tensor", "tensor", "tensor"])
    # a frozen evaluation reads the policy; the optimizer and the environment's snapshot only a resume restores
    evaluated = key not in ("env", "optimizer")
    tensors = ("networks", "optimizer", "env", "generator")
    if op != "delete":
        op = "tensor" if key in tensors else "replace"
    if op == "delete":
        del payload[key]
        save_checkpoint(path, payload)
        return f"{key} deleted", True, True
    if op == "replace":
        old, new = payload[key], rng.choice([*HOSTILE_JSON, 3.7, "2", torch.tensor(2), 1])
        payload[key] = new
        save_checkpoint(path, payload)
        same = _same(old, new) if not isinstance(new, torch.Tensor) else False
        return f"{key}: {old!r} -> {new!r}"[:200], None if same else True, True
    if key == "env":
        arrays = unpack_arrays(payload["env"], "env")
        how = rng.choice(["flip", "truncate", "array", "drop"])
        if how == "flip":
            data = payload["env"].clone()
            at = rng.randrange(data.numel())
            data[at] = rng.randrange(256)
            payload["env"] = data
            must: bool | None = None
        elif how == "truncate":
            payload["env"] = payload["env"][: rng.randrange(payload["env"].numel())].clone()
            must = True
        elif how == "array":
            name = rng.choice(sorted(arrays))
            array = arrays[name].copy()
            if array.size and array.dtype.kind in "iufb":
                flat = array.reshape(-1)
                if array.dtype.kind in "iu":
                    info = np.iinfo(array.dtype)
                    choices: list[Any] = [0, 1, 7, int(info.max), int(info.min)]
                elif array.dtype.kind == "f":
                    choices = [0.0, -1.0, 1e30, float("nan"), float("inf")]
                else:
                    choices = [True, False]
                flat[rng.randrange(flat.size)] = rng.choice(choices)
            arrays[name] = array
            payload["env"] = pack_arrays(arrays)
            must, how = None, f"array {name}"
        else:
            arrays.pop(rng.choice(sorted(arrays)))
            payload["env"] = pack_arrays(arrays)
            must = True
        save_checkpoint(path, payload)
        return f"env {how}", must, evaluated
    if key == "generator":
        how = rng.choice(["random", "zeros", "short"])
        size = payload["generator"].numel()
        payload["generator"] = {
            "random": torch.randint(0, 256, (size,), dtype=torch.uint8),
            "zeros": torch.zeros(size, dtype=torch.uint8),
            "short": payload["generator"][: size // 2].clone(),
        }[how]
        save_checkpoint(path, payload)
        return f"generator {how}", None if how == "random" else True, True
    if key in ("networks", "optimizer"):
        tensors = (
            [(module, name) for module, state in payload["networks"].items() for name in state]
            if key == "networks"
            else [(None, name) for name in payload["optimizer"]]
        )
        module, name = rng.choice(tensors)
        state = payload["networks"][module] if module is not None else payload["optimizer"]
        value = state[name]
        how = rng.choice(["nan", "inf", "reshape", "dtype", "drop", "extra", "scale", "list"])
        if how == "nan" and value.is_floating_point() and value.numel():
            state[name] = torch.full_like(value, float("nan"))
        elif how == "inf" and value.is_floating_point() and value.numel():
            changed = value.clone().reshape(-1)
            changed[rng.randrange(changed.numel())] = float("inf")
            state[name] = changed.reshape(value.shape)
        elif how == "reshape":
            state[name] = torch.zeros(value.numel() + 1, dtype=value.dtype)
        elif how == "dtype":
            state[name] = value.to(torch.float64 if value.dtype != torch.float64 else torch.float32)
        elif how == "drop":
            del state[name]
        elif how == "extra":
            state[name + "_extra"] = torch.zeros(2)
        elif how == "list":
            state[name] = value.tolist()
        else:
            how = "scale"
            state[name] = value * 1.5 if value.is_floating_point() else value
        save_checkpoint(path, payload)
        where = f"{key}.{module}.{name}" if module is not None else f"{key}.{name}"
        valid = how == "scale" or (how in ("nan", "inf") and not (value.is_floating_point() and value.numel()))
        optimizer_only = key == "optimizer" and how == "scale"
        return f"{where} {how}", None if valid or optimizer_only else True, True
    return "nothing", None, True


# -- the cases ------------------------------------------------------------------------------------------------
def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def _run_command(argv: list[str]) -> tuple[Any, str]:
    from ensemble_env.cli import main

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code: Any = main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 2
    except BaseException as error:  # what a user would see as a traceback
        code = "traceback"
        err.write("".join(traceback.format_exception(error)))
    return code, err.getvalue()


def _judge(code: Any, err: str, command: str, named: str, must: bool | None) -> tuple[str, str]:
    first = err.strip().splitlines()[-1] if err.strip() else ""
    if code == "traceback" or "Traceback" in err:
        return "bad_error", err[-600:]
    if code == 0:
        return ("wrong", "accepted") if must else ("accepted", "")
    if code != 2:
        return "bad_error", f"exit {code}: {err[-300:]}"
    if not first.startswith(f"ensemble-env {command}: error: ") or named not in first or len(first) > 1500:
        return "bad_error", f"message does not name {named} in one bounded line: {err[-400:]}"
    if any(text in first for text in TORCH_ADVICE):  # a library's advice instead of what is wrong (issue 41)
        return "bad_error", f"message carries torch's advice or colour codes, not the cause: {first[:400]}"
    return "refused", first[:300]


def run_file_case(case: dict[str, Any]) -> tuple[str, str]:
    """Corrupt one file of a copy of the base run as ``case`` says and run a command on it."""
    rng = random.Random(case["seed"])
    folder = Path(case["work"]) / f"case{case['index']}"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(case["base"], folder)
    name = {"config": "config.json", "progress": "progress.csv", "checkpoint": "checkpoint.pt"}[case["kind"]]
    path = folder / name
    if case["kind"] == "config":
        what, must = mutate_config(path, rng)
        commands = ["evaluate", "resume"]
    elif case["kind"] == "progress":
        what, must = mutate_progress(path, rng)
        commands = ["resume", "plot"] if case.get("plot") else ["resume"]
    else:
        what, must, evaluated = mutate_checkpoint(path, rng)
        commands = ["evaluate", "resume"] if evaluated else ["resume"]
    command = commands[case["index"] % len(commands)]
    argv = {
        "evaluate": ["evaluate", str(folder), "--no-baselines", "--split", "test"],
        "resume": ["train", "--resume", str(folder), "--no-progress"],
        "plot": ["plot", str(folder), "--out", str(folder / "plots")],
    }[command]
    before = _files(folder)
    code, err = _run_command(argv)
    # the refusal names a file of the run: the changed one, or the one it contradicts (a checkpoint whose config
    # is not config.json's names both)
    outcome, detail = _judge(code, err, argv[0], f"{folder}/", must)
    if outcome == "refused" and _files(folder) != before:
        return "lost", f"{what}: the refused {command} changed the run's files"
    if outcome in ("accepted", "wrong") and command == "resume":
        from ensemble_mappo.progress_format import read_progress

        try:
            iterations = read_progress(folder)["iteration"].tolist()
        except (ValueError, OSError) as error:
            return "lost", f"{what}: the accepted resume left an unreadable log: {error}"
        if iterations != [1.0, 2.0, 3.0]:
            return "lost", f"{what}: the accepted resume left log rows {iterations}"
    return outcome, f"{command} {what}: {detail}"[:300]


def file_cases(work: Path, base: Path, slow: bool) -> list[dict[str, Any]]:
    full = {"config": 40, "progress": 40, "checkpoint": 60}
    counts = (
        {kind: fuzzing.slow_size(n) for kind, n in full.items()}
        if slow
        else {"config": 6, "progress": 5, "checkpoint": 8}
    )
    cases = []
    for kind, count in counts.items():
        for index in range(count):
            seed = 1000 * len(cases) + index
            case = {"kind": kind, "seed": seed, "index": len(cases), "work": str(work), "base": str(base)}
            case["plot"] = kind == "progress" and index % (4 if slow else 5) == 0
            cases.append(case)
    return cases


#: budgets beyond the limits (and a few other sizes and counts), each with the words its refusal must hold
BUDGET_CASES: list[tuple[list[str], str]] = [
    (["--passes", "inf"], "passes must be a number in (0, 1e+06], got inf"),
    (["--passes", "nan"], "passes must be"),
    (["--passes", "-1"], "passes must be"),
    (["--passes", "-0"], "passes must be a number in (0, 1e+06], got -0.0"),
    (["--passes", "0"], "passes must be a number in (0, 1e+06], got 0.0"),
    (["--passes", "1e300"], "passes must be a number in (0, 1e+06], got 1e+300"),
    (["--passes", "1e7"], "passes must be a number in (0, 1e+06], got 10000000.0"),
    (["--passes", "1000000.5"], "passes must be a number in (0, 1e+06], got 1000000.5"),
    (["--total-steps", "100000000000"], "total_steps=100000000000"),
    (["--total-steps", "1" + "0" * 40], "total_steps="),
    (["--hidden-size", "1000000"], "hidden_size=1000000"),
    (["--hidden-size", "5000"], "hidden_size=5000"),
    (["--num-steps", "1000000000000"], "num_steps=1000000000000"),
    (["--num-steps", "1048576"], "GiB of storage"),
    (["--num-steps", "2097152"], "num_steps=2097152"),
    (["--num-envs", "1000000000"], "num_envs=1000000000"),
    (["--num-envs", "70000"], "num_envs=70000"),
    (["--num-envs", "0"], "num_envs must be"),
    (["--update-epochs", "1000000"], "update_epochs=1000000"),
    (["--num-minibatches", "1000000000"], "num_minibatches"),
    (["--seed", str(2**64)], "seed="),
    (["--seed", "-1"], "seed must be"),
    (["--threads", "1000000"], "threads=1000000"),
    (["--episode-length", "1" + "0" * 30], "episode_length="),
    (["--learning-rate", "inf"], "learning_rate must be a number in (0, 1], got inf"),
    (["--learning-rate", "-0"], "learning_rate must be a number in (0, 1], got -0.0"),
    (["--learning-rate", "1e6"], "learning_rate must be a number in (0, 1], got 1000000.0"),
    (["--algorithm", "rlae_ppo", "--num-steps", "1048576"], "GiB of storage"),
    (["--algorithm", "rlae_mappo", "--num-envs", "70000"], "num_envs=70000"),
    (["--algorithm", "rlae_ppo", "--hidden-size", "5000"], "hidden_size=5000"),
    (["--algorithm", "rlae_ppo", "--initial-concentration", "1e9"], "initial_concentration must be"),
    (["--algorithm", "rlae_ppo", "--learning-rate", "1e6"], "learning_rate must be a number in (0, 1]"),
    (["--checkpoint-every", "0"], "checkpoint_every must be"),
    (["--env", "window=1000000000"], "window"),
    (["--env", "reward_history=1000000000"], "reward_history"),
    (["--env", "alpha=1e400"], "alpha"),
]
#: budgets of the other commands, as full argument lists (``{out}``: a fresh folder; ``{run}``: the base run)
OTHER_BUDGETS: list[tuple[list[str], str]] = [
    (["benchmark", "--seeds", "0", "--out", "{out}"], "--seeds must be at least 1"),
    (["benchmark", "--seeds", "-3", "--out", "{out}"], "--seeds must be at least 1"),
    (["benchmark", "--seeds", "1000000", "--out", "{out}"], "at most 1000"),
    (["benchmark", "--alpha", "nan", "--out", "{out}"], "alpha"),
    (["evaluate", "{run}", "--online", "--update-every", "0", "--no-baselines"], "update_every must be"),
    (["evaluate", "{run}", "--seed", "-1", "--no-baselines"], "seed must be"),
    (["evaluate", "{run}", "--seed", str(2**64), "--no-baselines"], "seed must be"),
]


def run_budget_case(case: dict[str, Any]) -> tuple[str, str]:
    argv = [word.format(out=case["out"], run=case["base"]) for word in case["argv"]]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    code, err = _run_command(argv)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    outcome, detail = _judge(code, err, argv[0], case["needle"], True)
    if outcome == "refused" and grown > BUDGET_MEMORY:
        return "wrong", f"refused, after allocating {grown / 2**20:.0f} MB: {detail}"
    return outcome, f"{' '.join(case['argv'])[:80]}: {detail}"


def budget_cases(work: Path, base: Path) -> list[dict[str, Any]]:
    cases = []
    for index, (options, needle) in enumerate(BUDGET_CASES):
        out = str(work / f"budget{index}")
        argv = ["train", "--cache", "toy8", "--out", out, "--no-progress", *options]
        cases.append({"kind": "budget", "argv": argv, "needle": needle, "out": out, "base": str(base)})
    for index, (argv, needle) in enumerate(OTHER_BUDGETS):
        out = str(work / f"other{index}")
        cases.append({"kind": "budget", "argv": argv, "needle": needle, "out": out, "base": str(base)})
    return cases


# -- concurrent runs and kill -9 (subprocesses) ------------------------------------------------------------------
def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from ensemble_env.cli import main; sys.exit(main())", *args]


SHORT = ["--cache", "toy8", "--num-envs", "8", "--num-steps", "16", "--checkpoint-every", "1", "--no-progress"]
# the size prior: the run writes the same files with either start, and the default offline start scores toy8's 255
# teams in every train process (set-up and resume) and every evaluate (about 0.5 s of CPU each; issue 47)
SHORT += ["--hidden-size", "16", "--decider-start", "prior"]
#: updates of a concurrent trial's run: long enough that the first holds the lock when the second asks for it
CONCURRENT_UPDATES = 64


def _rows(folder: Path) -> int:
    path = folder / "progress.csv"
    return max(path.read_text().count("\n") - 1, 0) if path.exists() else 0


def _whole_run(folder: Path, updates: int) -> str:
    """'' if ``folder`` holds one whole run of ``updates`` updates (evaluate works), else what is wrong."""
    from ensemble_mappo.checkpoint import read_checkpoint
    from ensemble_mappo.progress_format import read_progress
    from ensemble_mappo.runs import read_config

    try:
        run = read_config(folder)
        iterations = read_progress(folder, run)["iteration"].tolist()
        checkpoint = read_checkpoint(folder, run)
    except (ValueError, OSError) as error:
        return f"unreadable: {error}"
    if iterations != [float(i) for i in range(1, updates + 1)] or not checkpoint.complete:
        return f"log rows {iterations[:3]}...{iterations[-3:]} of {updates}, checkpoint complete={checkpoint.complete}"
    leftovers = [path.name for path in folder.iterdir() if path.name.endswith(".tmp") or path.name == "run.lock"]
    if leftovers:
        return f"left {leftovers}"
    code, err = _run_command(["evaluate", str(folder), "--no-baselines", "--split", "test"])
    return "" if code == 0 else f"evaluate: exit {code}: {err[-300:]}"


def _alive(processes: list[subprocess.Popen[bytes]], folder: Path) -> int:
    """Processes we started still running, and any other process whose command line names ``folder``."""
    count = sum(process.poll() is None for process in processes)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    count += 1
    return count


def concurrent_trial(work: Path, index: int, rng: random.Random) -> dict[str, Any]:
    """Two trains in one folder at once (--out twice, --out and --out --overwrite, or --resume twice)."""
    folder = work / f"concurrent{index}"
    updates = CONCURRENT_UPDATES
    budget = ["--total-steps", str(updates * 8 * 16), "--seed", str(index)]
    kind = ["out+out", "out+overwrite", "resume+resume"][index % 3]
    processes: list[subprocess.Popen[bytes]] = []
    result = {"kind": f"concurrent {kind}", "outcome": "refused", "detail": ""}
    try:
        if kind == "resume+resume":  # a run killed half-way, then two resumes of it at once
            first = subprocess.Popen(_cli("train", "--out", str(folder), *SHORT, *budget), stdout=subprocess.DEVNULL)
            processes.append(first)
            deadline = time.monotonic() + 300
            while _rows(folder) < 3 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            first.kill()
            first.wait()
            processes.clear()
            argvs = [_cli("train", "--resume", str(folder), "--no-progress")] * 2
        else:
            first_argv = _cli("train", "--out", str(folder), *SHORT, *budget)
            argvs = [first_argv, first_argv + (["--overwrite"] if kind == "out+overwrite" else [])]
        for number, argv in enumerate(argvs):
            if number:
                time.sleep(rng.uniform(0.0, 1.5))
            processes.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        outputs = [process.communicate(timeout=600)[1].decode() for process in processes]
        codes = [process.returncode for process in processes]
        winners = [n for n, code in enumerate(codes) if code == 0]
        if len(winners) != 1:
            result.update(outcome="wrong", detail=f"exit codes {codes}: {outputs}")
        else:
            loser = 1 - winners[0]
            message = outputs[loser].strip().splitlines()[-1] if outputs[loser].strip() else ""
            named = f"pid {processes[winners[0]].pid}" in message or "already holds a run" in message
            if codes[loser] != 2 or "Traceback" in outputs[loser] or not named:
                result.update(outcome="bad_error", detail=f"exit {codes[loser]}: {outputs[loser][-400:]}")
            else:
                result["detail"] = message[:200]
        problem = _whole_run(folder, updates)
        if problem and result["outcome"] == "refused":
            result.update(outcome="lost", detail=problem)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    result["orphans"] = _alive(processes, folder)
    return result


def kill_trial(work: Path, index: int, rng: random.Random) -> dict[str, Any]:
    """train killed with SIGKILL at a random moment (sometimes its resume killed too), then resumed to the end.

    A train killed before it wrote config.json (while it sets up) leaves no run: its folder holds the stale lock
    only, which ``--resume`` refuses (nothing to resume) and the first command, run again, takes over."""
    folder = work / f"kill{index}"
    updates = 24
    processes: list[subprocess.Popen[bytes]] = []
    result = {"kind": "kill -9", "outcome": "refused", "detail": ""}
    start = _cli("train", "--out", str(folder), *SHORT, "--total-steps", str(updates * 128), "--seed", str(index))
    try:
        argv = start
        for _ in range(2 if index % 3 == 2 else 1):
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            processes.append(process)
            target = rng.choice([0, rng.randrange(0, updates - 2)])  # 0: as soon as the folder is locked
            deadline = time.monotonic() + 300
            while process.poll() is None and time.monotonic() < deadline:
                if (folder / "run.lock").exists() and _rows(folder) >= target:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            if process.poll() is not None:
                result.update(outcome="bad_error", detail=f"train ended (exit {process.returncode}) before the kill")
                return result
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            written = sorted(path.name for path in folder.iterdir()) if folder.exists() else []
            result["detail"] += f"killed at {_rows(folder)} rows with {written}; "
            argv = _cli("train", "--resume", str(folder), "--no-progress") if "config.json" in written else start
        resumed = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if resumed.returncode != 0:
            result.update(outcome="lost", detail=f"{result['detail']}the rerun refused: {resumed.stderr[-400:]}")
        elif problem := _whole_run(folder, updates):
            result.update(outcome="lost", detail=f"{result['detail']}{problem}")
        else:
            result["outcome"] = "accepted"  # resumed to a whole run: what must happen
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    result["orphans"] = _alive(processes, folder)
    return result


# -- the suites -----------------------------------------------------------------------------------------------
def run_case(case: dict[str, Any]) -> tuple[str, str]:
    """A file case or a budget case, as its kind says (one worker runs both kinds)."""
    return run_budget_case(case) if case["kind"] == "budget" else run_file_case(case)


def suite(work: Path, slow: bool, *, files: bool = True, budgets: bool = True) -> list[dict[str, Any]]:
    """The file cases (a quick subset unless ``slow``) and the budget cases, in one worker."""
    base = make_base_run(work)
    cases = file_cases(work / "cases", base, slow) if files else []
    cases += budget_cases(work / "budgets", base) if budgets else []
    return fuzzing.run_cases("test_fuzz_runs", "run_case", cases, work / "cases", case_seconds=120)


def _bad(results: list[dict[str, Any]]) -> list[str]:
    return [f"{r['kind']}: {r['outcome']}: {r['detail']}" for r in results if r["outcome"] in BAD or r.get("orphans")]


def test_random_corruptions_of_a_runs_files_and_hostile_budgets_are_refused_cleanly(tmp_path: Path) -> None:
    results = suite(tmp_path, slow=False)
    assert not _bad(results), "\n".join(_bad(results))
    files = [result for result in results if result["kind"] != "budget"]
    assert sum(result["outcome"] == "refused" for result in files) >= len(files) // 2  # the changes mostly break
    assert all(result["outcome"] == "refused" for result in results if result["kind"] == "budget")


@pytest.mark.slow
def test_many_random_corruptions_of_a_runs_files_are_refused_cleanly_or_valid(tmp_path: Path) -> None:
    results = suite(tmp_path, slow=True, budgets=False)
    assert not _bad(results), "\n".join(_bad(results))


@pytest.mark.slow
def test_two_trains_in_one_folder_one_is_refused_and_the_folder_holds_one_run(tmp_path: Path) -> None:
    rng = random.Random(7)
    results = [concurrent_trial(tmp_path, index, rng) for index in range(3)]
    assert not _bad(results), "\n".join(_bad(results))


@pytest.mark.slow
def test_kill_9_at_random_moments_leaves_a_run_that_resumes_whole(tmp_path: Path) -> None:
    rng = random.Random(11)
    results = [kill_trial(tmp_path, index, rng) for index in range(4)]
    assert not _bad(results), "\n".join(_bad(results))


# -- the report's table ---------------------------------------------------------------------------------------
def table(suites: dict[str, list[dict[str, Any]]]) -> str:
    header = ["input class", "inputs", "refused clearly", "accepted (valid)", "accepted wrongly", "wrong exception"]
    header += ["hang", "crash", "data lost", "orphan process"]
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for name, results in suites.items():
        counts = Counter(result["outcome"] for result in results)
        orphans = sum(result.get("orphans", 0) for result in results)
        cells = [name, len(results), counts["refused"], counts["accepted"], counts["wrong"], counts["bad_error"]]
        cells += [counts["hang"], counts["crash"], counts["lost"], orphans]
        lines.append(" | ".join(map(str, cells)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz run directories and print the table of the report.")
    parser.add_argument("--slow", action="store_true", help="the large suites and the subprocess trials")
    args = parser.parse_args(argv)
    if args.slow:
        os.environ[fuzzing.FULL_VARIABLE] = "full"
    suites: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        results = suite(work / "files", args.slow)
        for kind in ("config", "progress", "checkpoint", "budget"):
            name = "budgets" if kind == "budget" else f"run-dir files: {kind}"
            suites[name] = [result for result in results if result["kind"] == kind]
        if args.slow:
            rng = random.Random(7)
            suites["concurrent runs"] = [concurrent_trial(work / "concurrent", i, rng) for i in range(6)]
            rng = random.Random(11)
            suites["kill -9"] = [kill_trial(work / "kill", i, rng) for i in range(8)]
    print(table(suites))
    failures = [line for results in suites.values() for line in _bad(results)]
    for line in failures[:30]:
        print("  " + line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
