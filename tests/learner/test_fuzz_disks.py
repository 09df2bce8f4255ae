"""Seeded fuzzing of ``train`` on a disk that fills up (issue 41, "Reliability round 4", class 2).

Each case runs ``ensemble-env train`` in a process whose files may not grow past a limit (``RLIMIT_FSIZE``: the kernel
refuses the write that crosses it with EFBIG, as a full disk refuses one with ENOSPC), with the csv or the TensorBoard
logger, checkpoints every update or only at the end, and 0 to 2 kept checkpoints. The limit is drawn log-uniformly
from one of four bands, so that it falls under each writer: below ``config.json`` (1.5 KB); between it and the
checkpoints (the run of 12 updates keeping none and checkpointing at its end: a row of ``progress.csv`` or an event
file crosses it); under the checkpoints (about 470 KB each); above them (the run finishes). Then, the limit lifted,
the run is resumed (``train --resume``; started again when it has no config yet).

The run must end with one line naming a file of the run directory and the cause (exit 2) or finish (exit 0); never a
traceback. No temporary file may be left, and the resumed run must finish with every update logged once and a
complete checkpoint: otherwise data was lost.

Cases run in the watchdog workers of tests/fuzzing.py; ``pytest --run-slow`` runs a quick part (1 case) and a tenth
of the full part (4 cases, one in each band, with the csv logger: each case trains twice), ``python
tests/learner/test_fuzz_disks.py --slow`` the full part (40 cases, each band with each logger, about 8 minutes of CPU)
and prints its row. Both parts are marked slow (issue 47: the quick case took about 11 CPU s of the plain ``pytest``,
three trains and two processes): the plain suite fails every writer of ``train`` in process and resumes the run
(``tests/learner/test_run_disks.py``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helper is in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import bad, count, run_cases, slow_size, suites_main

CASE_SECONDS = 600.0
MODULE = "test_fuzz_disks"
TINY = ["--cache", "toy8", "--total-steps", "768", "--num-envs", "8", "--num-steps", "8", "--no-progress"]
# the size prior: the run writes the same files with either start, and the default offline start scores toy8's 255
# teams in every train process before the first write (about 0.5 s of CPU); test_mappo_start.py tests that start
TINY += ["--decider-start", "prior"]
UPDATES = 12
#: the bands of the limit: (low, high, checkpoint every, kept checkpoints or None for any)
BANDS = [
    (512, 1_500, None, None),
    (1_600, 6_000, 100, 0),
    (12_000, 470_000, None, None),
    (480_000, 1_500_000, None, None),
]


def _limited(limit: int) -> Any:
    def start() -> None:  # in the child: files may not grow past ``limit`` bytes; the write that would is EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return start


def _train(argv: list[str], limit: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in sys.path if entry)}
    return subprocess.run(
        [sys.executable, "-m", "ensemble_env.cli", "train", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=CASE_SECONDS / 2,
        preexec_fn=None if limit is None else _limited(limit),
    )


def _rows(run: Path) -> list[int]:
    with open(run / "progress.csv", newline="", encoding="utf-8") as file:
        return [int(row["iteration"]) for row in csv.DictReader(file)]


def disk_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_mappo.checkpoint import read_checkpoint

    run = Path(f"disk-{os.getpid()}").resolve() / "run"
    shutil.rmtree(run.parent, ignore_errors=True)
    run.parent.mkdir()
    options = [*TINY, "--logger", case["logger"], "--checkpoint-every", str(case["every"])]
    options += ["--checkpoints", str(case["checkpoints"])]
    first = _train(["--out", str(run), *options], case["limit"])
    lines = [line for line in first.stderr.splitlines() if not line.startswith("ensemble-env: ")]
    if "Traceback" in first.stderr or first.returncode not in (0, 2):
        return "bad_error", f"exit {first.returncode}: {first.stderr[-400:]}"
    leftovers = [path.name for path in run.parent.rglob("*.tmp")]
    if leftovers:
        return "lost", f"temporary files left: {leftovers}"
    if first.returncode == 2:
        if len(lines) != 1 or not re.fullmatch(rf"ensemble-env train: error: {re.escape(str(run))}\S*: .+", lines[0]):
            return "bad_error", f"not one line naming a file of the run: {first.stderr[-400:]}"
        if "File too large" not in lines[0]:
            return "bad_error", f"the cause is not named: {lines[0][:300]}"
    again = ["--resume", str(run), "--logger", case["logger"], "--no-progress"]
    if not (run / "config.json").exists():
        again = ["--out", str(run), "--overwrite", *options]
    second = _train(again)
    if second.returncode != 0:
        return "lost", f"the run does not resume after the disk failed: {second.stderr[-400:]}"
    if _rows(run) != list(range(1, UPDATES + 1)) or not read_checkpoint(run).complete:
        return "lost", f"the resumed run logged {_rows(run)}"
    if first.returncode == 0:
        return "accepted", ""
    return "refused", f"{_writer(lines[0], run)}: {lines[0][:300]}"


def _writer(line: str, run: Path) -> str:
    """The file of the run a refusal names (``progress.csv``, ``checkpoints/update_0.pt``, ...)."""
    found = re.search(rf"{re.escape(str(run))}/(\S+?):", line)
    return re.sub(r"events\.out\.tfevents\.\S+", "events", found.group(1)) if found else "?"


def disk_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases = []
    for index in range(n):
        low, high, every_, kept = BANDS[index % len(BANDS)]
        limit = int(math.exp(rng.uniform(math.log(low), math.log(high))))
        logger = ("csv", "tensorboard")[(index // len(BANDS)) % 2]  # each band with each logger
        every = every_ if every_ is not None else int(rng.choice([1, 100]))
        checkpoints = kept if kept is not None else int(rng.integers(0, 3))
        kind = f"{logger}, {limit:,} bytes, checkpoint every {every}, keep {checkpoints}"
        cases.append({"limit": limit, "logger": logger, "every": every, "checkpoints": checkpoints, "kind": kind,
                      "seed": int(seed * 1_000_003 + index)})  # fmt: skip
    return cases


#: whether this process ran :func:`_warm` already (the quick and the slow test: one run warms both)
_warmed = False


def _warm(workdir: Path) -> None:
    """One run without a limit first: the kernels are compiled and cached before any write is limited. In this
    process (its kernels go to the same disk cache as the limited runs' processes; torch is imported once), once."""
    global _warmed
    if _warmed:
        return
    from ensemble_env.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["train", "--out", str(workdir / "warm"), *TINY])
    assert code == 0, err.getvalue()[-500:]
    shutil.rmtree(workdir / "warm", ignore_errors=True)
    _warmed = True


def suite_disks(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    workdir.mkdir(parents=True, exist_ok=True)
    _warm(workdir)
    cases = disk_cases(slow_size(40) if slow else 1, seed=101 if slow else 10)
    results = run_cases(MODULE, "disk_case", cases, workdir, CASE_SECONDS)
    writers = Counter(result["detail"].split(":", 1)[0] for result in results if result["outcome"] == "refused")
    print(f"train on a filling disk: the writer that failed: {dict(sorted(writers.items()))}", file=sys.stderr)
    return results, 0


SUITES = {"train on a filling disk": suite_disks}


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE (POSIX)")
def test_train_on_a_filling_disk_fails_in_one_line_and_resumes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite_disks(tmp_path, slow=False)
    assert not bad(results) and not [r for r in results if r["outcome"] == "lost"], results


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE (POSIX)")
def test_train_on_many_filling_disks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite_disks(tmp_path, slow=True)
    counts = count(results)
    assert counts["refused"] > 0 and not bad(results) and not counts["lost"], (dict(counts), bad(results)[:5])


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run train on filling disks and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
