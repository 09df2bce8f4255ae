"""Seeded fuzzing of issue 49's ("Reliability round 5") classes 1, 4 and 5: the benchmark scripts' ``--out`` folders,
``small_sample.py``'s cuts and ``partial_selection.py``'s settings, through each script's ``main``.

- ``--out`` cases: ``partial_selection.py`` or ``small_sample.py`` pointed at a new folder, an empty one, its own
  earlier folder (with or without an earlier selection's runs), the other script's, a ``train`` run's, a folder of
  other files, a file, a path under a file, an empty path, links to an empty folder or to a run, and folders whose mark
  is a folder, a link, garbage or another command's. Valid: new, empty, its own (without runs), a link to an empty
  folder.
- cut cases: ``small_sample.py`` rerun in its folder with the cache, size and ``--cut-seed`` of the earlier run or
  others: a cut is reused only with the arguments it was cut with (a new size is a new cut).
- setting cases: ``partial_selection.py --set`` with texts made of valid and invalid pieces (no colon, ``seed``,
  ``env.alpha``, an unknown field, a field given twice, values out of range, the index decider's offline start); a
  valid setting's fields must reach its runs as given (``passes`` without ``total_steps`` replacing the budget).

The learner runs and the stress's benchmark are replaced by stubs (what is fuzzed is what the scripts decide and
write, not training). Every file that existed before a case is compared after it: a refused case changes nothing,
an accepted one only adds files or rewrites its own output (``selection.json`` in its own folder); anything else is
``lost``. A refusal must be one line ``SCRIPT: error: ...`` with status 2.

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/cli/test_fuzz_script_outputs.py --slow`` the full part and prints its row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helpers are in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main
from testing.benchmarks import BENCHMARKS, fake_benchmark, folder_snapshot, train_run

CASE_SECONDS = 120.0
MODULE = "test_fuzz_script_outputs"
SCRIPTS = ("partial_selection.py", "small_sample.py")
TARGETS = [
    "new", "nested new", "empty", "own", "own with runs", "other script", "train run", "other files", "a file",
    "under a file", "empty path", "link to empty", "link to run", "mark folder", "mark link", "mark garbage",
    "mark other",
]  # fmt: skip
VALID_TARGETS = {"new", "nested new", "empty", "own", "link to empty"}
#: the mark of a command's output folder (ensemble_env.files.OUTPUT_MARK)
MARK = "made-by.json"
#: setting pieces: (text, valid)
PIECES = [
    ("gamma=0.5", True), ("passes=2", True), ("checkpoints=2", True), ("total_steps=4096", True),
    ("env.window=16", True), ('decider_policy="teams"', True), ("seed=3", False), ("env.alpha=0.5", False),
    ("no_such=1", False), ("checkpoints=-1", False), ("passes=0", False), ('decider_start="offline"', False),
    ("gamma=2", False), ("nonsense", False),
]  # fmt: skip
#: the index decider's offline start (refused with the partial-feedback default, the index decider; the team
#: decider of 'decider_policy="teams"' takes it)
OFFLINE, TEAMS = 11, 5


# -- the world a case runs in ------------------------------------------------------------------------------------------
def _target(world: Path, kind: str, script: str) -> Path:
    """Make the folder of ``kind`` in ``world``; its path (what ``--out`` gets)."""
    out = world / "out"
    if kind == "nested new":
        return world / "a" / "b" / "out"
    if kind in ("empty", "link to empty"):
        out.mkdir()
    elif kind in ("own", "own with runs"):
        _mark(out, script)
        (out / "selection.json" if script == "partial_selection.py" else out / "notes.txt").write_text("{}")
        if kind == "own with runs":
            (out / "runs").mkdir()
    elif kind == "other script":
        _mark(out, SCRIPTS[1 - SCRIPTS.index(script)])
        (out / "kept.txt").write_text("the other script's")
    elif kind in ("train run", "link to run"):
        train_run(out)
    elif kind == "other files":
        out.mkdir()
        (out / "notes.md").write_text("mine")
    elif kind in ("a file", "under a file"):
        out.write_text("a file")
        return out if kind == "a file" else out / "sub"
    elif kind == "empty path":
        return Path("")
    elif kind.startswith("mark"):
        out.mkdir()
        mark = out / MARK
        if kind == "mark folder":
            mark.mkdir()
        elif kind == "mark link":
            (world / "elsewhere.json").write_text(json.dumps({"command": script}))
            mark.symlink_to(world / "elsewhere.json")
        elif kind == "mark garbage":
            mark.write_bytes(b"\x00\xff{")
        else:
            mark.write_text(json.dumps({"command": "ensemble-env train"}))
    if kind.startswith("link"):
        (world / "link").symlink_to(out)
        return world / "link"
    return out


def _mark(folder: Path, command: str) -> None:
    """A folder as ``command`` leaves it (ensemble_env.files.output_folder's mark, written here by hand)."""
    folder.mkdir(parents=True)
    (folder / MARK).write_text(json.dumps({"command": command}) + "\n", encoding="utf-8")


def _cache(world: Path, which: str) -> Path:
    from ensemble_env.cache import save_cache
    from ensemble_env.cache.logit_cache import SPLITS
    from ensemble_env.synthetic import make_cache

    path = world / f"cache_{which}.h5"
    if not path.exists():
        tasks = 8 if which == "a" else 6
        cache = make_cache(n_models=3, n_questions=40 * tasks, n_tasks=tasks, accuracy=[0.5, 0.6, 0.7], seed=3)
        split = np.asarray(cache.split).copy()
        split[np.flatnonzero(split == SPLITS["train"])[::5]] = SPLITS["validation"]
        save_cache(path, dataclasses.replace(cache, split=split))
    return path


# -- the scripts, with their runs stubbed ------------------------------------------------------------------------------
def _script(name: str) -> Any:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    module = importlib.import_module(name.removesuffix(".py"))
    if name == "partial_selection.py":
        module._run_all = _fake_runs  # type: ignore[attr-defined]
        module._rules = lambda cache, alpha, generated=False: dict.fromkeys(module.RULES, 0.0)  # type: ignore[attr-defined]
    else:
        module.benchmark = fake_benchmark  # type: ignore[attr-defined]
    return module


_SEEN: list[dict[str, Any]] = []


def _fake_runs(jobs: int) -> list[float]:
    work = sys.modules["partial_selection"]._WORK
    _SEEN[:] = [dict(overrides) for _, _, overrides, _, _ in work[:1]]
    return [0.0] * len(work)


def _run(script: str, argv: list[str]) -> tuple[int, list[str]]:
    module = _script(script)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as stop:  # argparse's own refusals
            code = stop.code if isinstance(stop.code, int) else 2
    return int(code), [line for line in err.getvalue().splitlines() if line.strip()]


def _argv(
    script: str, cache: Path, out: Path, *, setting: str = "s: gamma=0.5", seed: int = 0, size: int = 10
) -> list[str]:
    if script == "partial_selection.py":
        return ["--cache", str(cache), "--set", setting, "--seeds", "1", "--out", str(out)]
    return ["--cache", str(cache), "--sizes", str(size), "--seeds", "1", "--cut-seed", str(seed), "--out", str(out)]


def _judge(script: str, code: int, lines: list[str], ok: bool, what: str) -> tuple[str, str] | None:
    """The outcome of a run's status and stderr, or None when it completed as it should (the caller checks more)."""
    if code != 0:
        if code != 2 or len(lines) != 1 or not lines[0].startswith(f"{script}: error: "):
            return "bad_error", f"status {code}: {' | '.join(lines)[:280]}"
        if ok:
            return "wrong", f"refused a valid {what}: {lines[0][:250]}"
        return "refused", lines[0][:300]
    if not ok:
        return "wrong", f"took an invalid {what}"
    return None


def _changed(before: dict[str, str], after: dict[str, str], allowed: set[str]) -> list[str]:
    return [name for name, digest in before.items() if after.get(name) != digest and name not in allowed]


# -- the cases ---------------------------------------------------------------------------------------------------------
def out_case(case: dict[str, Any]) -> tuple[str, str]:
    script, kind = case["script"], case["target"]
    world = Path.cwd() / f"case{case['seed']}"
    world.mkdir()
    cache = _cache(world, "a")
    out = _target(world, kind, script)
    ok = kind in VALID_TARGETS or (kind == "own with runs" and script == "small_sample.py")
    before = folder_snapshot(world)
    code, lines = _run(script, _argv(script, cache, out))
    judged = _judge(script, code, lines, ok, f"--out ({kind})")
    after = folder_snapshot(world)
    allowed = {"out/selection.json"} if kind == "own" and script == "partial_selection.py" else set()
    lost = _changed(before, after, allowed if code == 0 else set())
    if lost:
        return "lost", f"{kind}: changed or removed {lost[:4]}"
    return judged or ("accepted", "")


def cut_case(case: dict[str, Any]) -> tuple[str, str]:
    world = Path.cwd() / f"case{case['seed']}"
    world.mkdir()
    first, then = case["first"], case["then"]
    out = world / "stress"
    code, lines = _run("small_sample.py", _argv("small_sample.py", _cache(world, first["cache"]), out,
                                                seed=first["seed"], size=first["size"]))  # fmt: skip
    if code != 0:
        return "bad_error", f"the first run failed: {lines[:2]}"
    before = folder_snapshot(world)
    ok = first["size"] != then["size"] or (first["cache"], first["seed"]) == (then["cache"], then["seed"])
    code, lines = _run("small_sample.py", _argv("small_sample.py", _cache(world, then["cache"]), out,
                                                seed=then["seed"], size=then["size"]))  # fmt: skip
    judged = _judge("small_sample.py", code, lines, ok, f"cut ({first} then {then})")
    lost = _changed(before, folder_snapshot(world), set())
    if lost:
        return "lost", f"changed or removed {lost[:4]}"
    if judged is None:  # the cut the run used is the cut of the arguments it was given
        from ensemble_env.cache import load_cache
        from ensemble_env.cache.digest import cache_digest

        wanted = _script("small_sample.py").cut_cache(
            load_cache(_cache(world, then["cache"])), then["size"], then["seed"]
        )
        if cache_digest(load_cache(out / f"cut{then['size']}.h5")) != cache_digest(wanted):
            return "wrong", f"ran on a cut of other arguments than {then}"
    return judged or ("accepted", "")


def _setting_valid(pieces: list[int], colon: bool) -> bool:
    texts = [PIECES[i][0] for i in pieces]
    keys = [text.partition("=")[0] for text in texts]
    fine = all(PIECES[i][1] or (i == OFFLINE and TEAMS in pieces) for i in pieces)
    return colon and fine and len(set(keys)) == len(keys)


def setting_case(case: dict[str, Any]) -> tuple[str, str]:
    world = Path.cwd() / f"case{case['seed']}"
    world.mkdir()
    pieces, colon = case["pieces"], case["colon"]
    text = "s" + (": " if colon else " ") + ", ".join(PIECES[i][0] for i in pieces)
    ok = _setting_valid(pieces, colon)
    _SEEN.clear()
    code, lines = _run("partial_selection.py", _argv("partial_selection.py", _cache(world, "a"), world / "out",
                                                     setting=text))  # fmt: skip
    judged = _judge("partial_selection.py", code, lines, ok, f"setting {text!r}")
    if judged is not None:
        if judged[0] == "refused" and os.path.lexists(world / "out"):
            return "lost", f"refused {text!r} after making --out"
        return judged
    (overrides,) = _SEEN
    for index in pieces:
        key, _, value = PIECES[index][0].partition("=")
        got = overrides["env"].get(key[4:]) if key.startswith("env.") else overrides.get(key)
        if got != json.loads(value):
            return "wrong", f"{text!r}: the runs got {key}={got!r}"
    if "passes" in text and "total_steps" not in text and overrides["total_steps"] != 0:
        return "wrong", f"{text!r}: passes given, but the runs keep total_steps={overrides['total_steps']}"
    return "accepted", ""


def script_case(case: dict[str, Any]) -> tuple[str, str]:
    return {"out": out_case, "cut": cut_case, "setting": setting_case}[case["type"]](case)


def cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    found: list[dict[str, Any]] = []
    for index in range(n):
        roll = rng.random()
        if roll < 0.5:
            script, target = str(rng.choice(SCRIPTS)), str(rng.choice(TARGETS))
            case = {"type": "out", "script": script, "target": target, "kind": f"{script} --out {target}"}
        elif roll < 0.7:
            draw = lambda: {"cache": str(rng.choice(["a", "b"])), "seed": int(rng.integers(0, 2)),  # noqa: E731
                            "size": int(rng.choice([10, 12]))}  # fmt: skip
            first = draw()
            then = dict(first) if rng.random() < 0.3 else draw()
            case = {"type": "cut", "first": first, "then": then, "kind": f"small_sample.py cut {first} then {then}"}
        else:
            pieces = [int(i) for i in rng.integers(0, len(PIECES), size=int(rng.integers(0, 4)))]
            colon = bool(rng.random() < 0.85)
            case = {"type": "setting", "pieces": pieces, "colon": colon,
                    "kind": f"partial_selection.py --set {'colon' if colon else 'no colon'} {pieces}"}  # fmt: skip
        case["seed"] = index
        found.append(case)
    return found


def suite(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    chosen = cases(slow_size(500) if slow else 30, seed=49 if slow else 1)
    return run_cases(MODULE, "script_case", chosen, workdir, CASE_SECONDS), 0


SUITES = {"benchmark scripts' outputs, cuts and settings": suite}


def test_script_outputs_are_refused_unharmed_or_taken(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 8 and counts["accepted"] > 5, dict(counts)


@pytest.mark.slow
def test_many_script_outputs(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite(tmp_path, slow=True)
    assert len(results) == slow_size(500) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the benchmark scripts' output fuzz and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
