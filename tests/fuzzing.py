"""Seeded fuzzing with a watchdog, for tests/cache/test_fuzz_caches.py and tests/cache/test_fuzz_lm_eval.py.

Cases run in a worker process, one after another; each prints one JSON line with its outcome. The parent
gives each case ``case_seconds``: a case that takes longer is a *hang* (the worker is killed and a new one
goes on with the next case), a worker that dies is a *crash*. A case function returns its outcome:

==================  ================================================================================
outcome             meaning
==================  ================================================================================
``refused``         the documented error (CacheError / ConversionError) naming the file, bounded
``equal``           accepted, and the result equals the reference (the mutation hit unused bytes)
``accepted``        accepted with other values, where nothing could tell (no checksum; a valid input)
``wrong``           accepted with other values where it must not be (checksummed file, hostile value)
``bad_error``       another exception, or a message without the file or too long
``hang``/``crash``  set by the parent, as above
``lost``            data lost: an input or a previous output changed, a temporary file left, a run that
                    does not resume
==================  ================================================================================

``python tests/fuzzing.py [--slow]`` runs the suites of :data:`SUITE_MODULES` (caches, lm-eval samples, those
of issue 41: the online baselines' arguments, unseen-task evaluation caches, lessons, config files, array
columns, train on a filling disk; and those of issue 49: the partial rules' choice function and seeds, the env ids'
fixed options, train configs against the game, the benchmark scripts' outputs) and prints their table; ``--only
TEXT`` runs the suites whose name holds TEXT.

Three sizes: the default ``pytest`` runs each suite's quick part (but for the two whose cases are train processes,
train configs and train on a filling disk: their quick parts are marked slow, issue 47, and the plain suite tests the
same refusals and failing writers in process); ``pytest --run-slow`` (CI) runs a tenth of its
full part (:func:`slow_size`; a fifth until issue 47, whose budget for the suite is 10 CPU minutes), or a smaller
share where each case trains for seconds (the train configs: a twentieth, 10 of 200 cases); ``python
tests/fuzzing.py --slow`` and the other suites' ``--slow`` scripts run the full part (they set
``ENSEMBLE_ENV_FUZZ=full``): the figures of docs/reliability.md.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: ``ENSEMBLE_ENV_FUZZ=full``: the slow suites at their full size (the scripts' ``--slow``), else a share of it
FULL_VARIABLE = "ENSEMBLE_ENV_FUZZ"


def slow_size(full: int, share: int = 10) -> int:
    """Cases of a slow suite: ``full`` under ``ENSEMBLE_ENV_FUZZ=full``, else ``full // share`` (``pytest
    --run-slow``; a tenth, or the smaller share a suite of costly cases passes), at least one."""
    return full if os.environ.get(FULL_VARIABLE) == "full" else max(1, full // share)


OUTCOMES = ("refused", "equal", "accepted", "wrong", "bad_error", "hang", "crash", "lost")
#: the outcomes that must never happen
BAD = ("wrong", "bad_error", "hang", "crash", "lost")
#: the suites ``python tests/fuzzing.py`` runs: (folder under tests/, module), each module's ``SUITES``
SUITE_MODULES = (
    ("cache", "test_fuzz_caches"),
    ("cache", "test_fuzz_lm_eval"),
    ("baselines", "test_fuzz_online"),
    ("learner", "test_fuzz_unseen"),
    ("cli", "test_fuzz_commands"),
    ("learner", "test_fuzz_disks"),
    ("baselines", "test_fuzz_partial_seeds"),
    ("views", "test_fuzz_env_ids"),
    ("learner", "test_fuzz_train_configs"),
    ("cli", "test_fuzz_script_outputs"),
)
#: a message may be at most this much longer than the path it names
MESSAGE_LIMIT = 700
#: seconds a worker may take to start (imports) before its first case
_START_SECONDS = 120.0

_WORKER = "import json, sys\nsys.path[:] = json.loads(sys.argv[1])\nimport fuzzing\nfuzzing._serve()\n"

#: the worker kept for the next :func:`run_cases` (of any suite module, with the same ``sys.path``), with its output
#: lines: the suites of every fuzz file share one worker process, as the cases of one suite do, instead of importing
#: the package (ensemble_env, h5py, torch) again for each file (issue 47; the worker imports each suite's module the
#: first time a job names it); one worker at most is kept, and it is ended when a case hangs or crashes, and at exit
_kept: dict[str, tuple[subprocess.Popen[str], queue.Queue[str]]] = {}


def _stop(worker: subprocess.Popen[str]) -> None:
    if worker.poll() is None:
        worker.kill()
    worker.wait()
    if worker.stdin is not None:
        with contextlib.suppress(OSError):
            worker.stdin.close()


def _stop_kept() -> None:
    while _kept:
        _stop(_kept.popitem()[1][0])


atexit.register(_stop_kept)


def _worker(paths: str, workdir: Path) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """The kept worker of this ``sys.path``, or a new one (once it said it is ready)."""
    if paths in _kept and _kept[paths][0].poll() is None:
        return _kept[paths]
    _stop_kept()
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, paths],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(worker.stdout, lines), daemon=True).start()
    if not _ready(lines):
        _stop(worker)
        raise RuntimeError("the fuzz worker did not start")
    _kept[paths] = worker, lines
    return worker, lines


def _ready(lines: queue.Queue[str]) -> bool:
    """Whether the worker says it is ready within :data:`_START_SECONDS` (started, or a job's module imported)."""
    try:
        return lines.get(timeout=_START_SECONDS).strip() == "ready"
    except queue.Empty:
        return False


def run_cases(
    module: str, function: str, cases: list[dict[str, Any]], workdir: Path, case_seconds: float
) -> list[dict[str, Any]]:
    """Run ``module.function(case)`` for every case in worker processes; one result dict per case, in order.

    Each result holds ``outcome`` and ``detail`` (and the case's ``kind``). The cases run in ``workdir``, one after
    another, in the worker the previous call left (:data:`_kept`, whichever module its cases were of) or a new one; a
    case that hangs or crashes ends its worker, and the next case starts a new one."""
    workdir.mkdir(parents=True, exist_ok=True)
    cases_file = workdir / f"cases-{function}.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    results: list[dict[str, Any]] = []
    paths = json.dumps([str(Path(__file__).resolve().parent)] + [entry for entry in sys.path if entry])
    while len(results) < len(cases):
        worker, lines = _worker(paths, workdir)
        job = {"module": module, "function": function, "cases": str(cases_file), "start": len(results)}
        job["workdir"] = str(workdir)
        finished = False
        try:
            assert worker.stdin is not None
            worker.stdin.write(json.dumps(job) + "\n")
            worker.stdin.flush()
            if not _ready(lines):  # the cases' time starts once their module is imported
                raise RuntimeError(f"the fuzz worker could not import {module}")
            while len(results) < len(cases):
                try:
                    line = lines.get(timeout=case_seconds)
                except queue.Empty:
                    results.append(_result(cases[len(results)], "hang", f"no answer within {case_seconds} s"))
                    break
                if not line:
                    code = worker.wait()
                    results.append(_result(cases[len(results)], "crash", f"worker ended with {code}"))
                    break
                results.append(json.loads(line))
            else:
                finished = True
        finally:
            if not finished:  # a hang, a crash or an error here: this worker is not used again
                _stop_kept()
                _stop(worker)
    return results


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    with stream:
        for line in stream:
            lines.put(line)
    lines.put("")


def _result(case: dict[str, Any], outcome: str, detail: str = "") -> dict[str, Any]:
    return {"kind": case.get("kind", ""), "outcome": outcome, "detail": detail[:300]}


def _serve() -> None:
    """The worker: say it is ready, then run each job its parent writes on its stdin (a JSON line: the suite's module,
    the case function, the cases file, the first case to run, the folder to run them in): import the module (once per
    worker), say it is ready again, and print one JSON line per case. The cases' own processes read no job: stdin is
    /dev/null for them."""
    jobs = os.fdopen(os.dup(0), encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    print("ready", flush=True)
    while line := jobs.readline():
        job = json.loads(line)
        loaded = importlib.import_module(job["module"])
        print("ready", flush=True)
        os.chdir(job["workdir"])
        _work(getattr(loaded, job["function"]), job["cases"], job["start"])


def _work(run: Callable[[dict[str, Any]], tuple[str, str]], cases_file: str, start: int) -> None:
    cases = json.loads(Path(cases_file).read_text(encoding="utf-8"))
    for case in cases[start:]:
        try:
            outcome, detail = run(case)
        except BaseException as error:  # the case function itself failed: a bug of the test, shown as such
            outcome, detail = "bad_error", f"case raised {type(error).__name__}: {error}"
        sys.stdout.write(json.dumps(_result(case, outcome, detail)) + "\n")
        sys.stdout.flush()


def selftest_case(case: dict[str, Any]) -> tuple[str, str]:
    """A case that answers, hangs or crashes as its ``kind`` says (the watchdog's own test)."""
    if case["kind"] == "hang":
        time.sleep(60)
    if case["kind"] == "crash":
        os._exit(3)
    return "refused", ""


def judge_error(error: BaseException, expected: tuple[type[BaseException], ...], path: str) -> tuple[str, str]:
    """``refused`` when ``error`` is of an expected type and its message names ``path`` in one bounded line."""
    message = str(error)
    if not isinstance(error, expected):
        return "bad_error", f"{type(error).__name__}: {message[:200]}"
    if path not in message or len(message) > len(path) + MESSAGE_LIMIT or "\n" in message:
        return "bad_error", f"message does not name {path} in one short line: {message[:300]}"
    return "refused", message[:300]


def count(results: list[dict[str, Any]]) -> Counter[str]:
    return Counter(result["outcome"] for result in results)


def bad(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results with an outcome that must never happen (for assertion messages)."""
    return [result for result in results if result["outcome"] in BAD]


def table(rows: dict[str, list[dict[str, Any]]], orphans: dict[str, int] | None = None) -> str:
    """The table of issue 13: per suite the inputs tried and each outcome."""
    header = [
        "suite",
        "inputs",
        "refused",
        "equal",
        "accepted",
        "wrong",
        "bad error",
        "hang",
        "crash",
        "data lost",
        "orphans",
        "notes",
    ]
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for name, results in rows.items():
        counts = count(results)
        cells = [name, str(len(results)), *(str(counts[outcome]) for outcome in OUTCOMES)]
        cells.append(str((orphans or {}).get(name, 0)))
        timed = sum("did not finish within" in result["detail"] for result in results)
        left = sum("left ['" in result["detail"] for result in results)
        notes = [f"{timed} refused by the time limit"] if timed else []
        notes += [f"{left} kills left a temporary file, removed by the next write"] if left else []
        lines.append(" | ".join([*cells, "; ".join(notes)]))
    return "\n".join(lines)


def suites_main(
    description: str,
    suites: dict[str, Callable[[Path, bool], tuple[list[dict[str, Any]], Any]]],
    argv: list[str] | None = None,
) -> int:
    """The command line of a fuzz file: run its ``suites`` (each ``suite(folder, slow)``), the whole of them with
    ``--slow`` (pytest --run-slow runs a share: :func:`slow_size`), print their table rows and the first bad
    results; exit 1 on one."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--slow", action="store_true", help="the full suites (pytest --run-slow runs a share)")
    parser.add_argument("--workdir", default=None, help="folder for the suites' files (default: a temporary one)")
    parser.add_argument("--only", default="", metavar="TEXT", help="only the suites whose name holds TEXT")
    args = parser.parse_args(argv)
    if args.slow:
        os.environ[FULL_VARIABLE] = "full"
    rows = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        for name, suite in suites.items():
            if args.only in name:
                rows[name], _ = suite(Path(folder) / name.replace(" ", "-"), args.slow)
    print(table(rows))
    failures = [result for results in rows.values() for result in bad(results)]
    for result in failures[:20]:
        print(f"  {result['kind']}: {result['outcome']}: {result['detail']}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the fuzz suites of issue 13 and print the table.")
    parser.add_argument(
        "--slow", action="store_true", help="the large suites at their full size (pytest --run-slow runs a share)"
    )
    parser.add_argument("--workdir", default=None, help="folder for the mutated files (default: a temporary one)")
    parser.add_argument("--only", default="", metavar="TEXT", help="only the suites whose name holds TEXT")
    args = parser.parse_args(argv)
    if args.slow:
        os.environ[FULL_VARIABLE] = "full"
    here = Path(__file__).resolve().parent
    folders = dict.fromkeys(str(here / folder) for folder, _ in SUITE_MODULES)
    sys.path[:0] = [str(here), *folders, str(here / "adapters")]  # this helper, the suites' folders
    suites: dict[str, Callable[[Path, bool], tuple[list[dict[str, Any]], int]]] = {}
    for _, module in SUITE_MODULES:
        found = importlib.import_module(module).SUITES
        suites.update({name: suite for name, suite in found.items() if args.only in name})
    rows: dict[str, list[dict[str, Any]]] = {}
    orphans: dict[str, int] = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        for name, suite in suites.items():
            started = time.perf_counter()
            rows[name], orphans[name] = suite(Path(folder) / name.replace(" ", "-"), args.slow)
            print(f"{name}: {len(rows[name])} inputs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(table(rows, orphans))
    failures = [result for results in rows.values() for result in bad(results)]
    for result in failures[:20]:
        print(f"  {result['kind']}: {result['outcome']}: {result['detail']}", file=sys.stderr)
    return 1 if failures or any(orphans.values()) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
