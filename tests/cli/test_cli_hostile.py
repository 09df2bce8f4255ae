"""Every command of ``ensemble-env`` over a table of bad inputs: each is refused with exit status 2 and a message
on stderr, never a traceback, never a hang.

The rows run in one child process (``ensemble_env.cli.main`` called once per row, so the imports are paid once);
a row whose call raises anything but ``SystemExit`` is what a user would see as a traceback, and the child
reports it. Inputs that could block a reader (a FIFO) run in a child of their own under a time limit. The
slow marker adds the rows that start the learner (torch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ensemble_env import synthetic
from ensemble_env.cache import save_cache

DRIVER = textwrap.dedent(
    """
    import contextlib, io, json, signal, sys, traceback
    from ensemble_env.cli import main

    class Hang(BaseException):
        pass

    def hang(*_):
        raise Hang()

    signal.signal(signal.SIGALRM, hang)
    rows, limit = json.loads(sys.stdin.read())
    results = []
    for argv in rows:
        err = io.StringIO()
        signal.alarm(limit)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 2
        except Hang:
            code = f"still running after {limit} s"
        except BaseException as error:
            code = "traceback"
            err.write("".join(traceback.format_exception(error)))
        finally:
            signal.alarm(0)
        results.append({"argv": argv, "code": code, "stderr": err.getvalue()[-2000:]})
    print(json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Paths of hostile inputs, by name."""
    folder = tmp_path_factory.mktemp("hostile")
    good = folder / "good.h5"
    save_cache(good, synthetic.make_cache(n_models=3, n_questions=60, n_choices=3, seed=0))
    (folder / "empty.h5").write_bytes(b"")
    (folder / "garbage.h5").write_bytes(np.random.default_rng(0).bytes(4096))
    (folder / "folder.h5").mkdir()
    (folder / "notes.txt").write_text("not a cache\n")
    (folder / "zero.h5").symlink_to("/dev/zero")
    (folder / "fifo.h5").parent.mkdir(exist_ok=True)
    os.mkfifo(folder / "fifo.h5")
    runs = folder / "runs"
    for name, config in {
        "list": "[]",
        "invalid": "{not json",
        "empty": "{}",
        "types": json.dumps({"train": {"num_envs": "many"}, "cache": 3}),
    }.items():
        (runs / name).mkdir(parents=True)
        (runs / name / "config.json").write_text(config)
    (runs / "nothing").mkdir()
    return {
        "good": str(good),
        "missing": str(folder / "missing.h5"),
        "empty": str(folder / "empty.h5"),
        "garbage": str(folder / "garbage.h5"),
        "folder": str(folder / "folder.h5"),
        "notes": str(folder / "notes.txt"),
        "zero": str(folder / "zero.h5"),
        "fifo": str(folder / "fifo.h5"),
        "out": str(folder / "out"),
        **{f"run_{name}": str(runs / name) for name in ("list", "invalid", "empty", "types", "nothing")},
    }


def _caches(h: dict[str, str]) -> list[str]:
    return [h["missing"], h["empty"], h["garbage"], h["folder"], h["notes"], h["zero"]]


def _rows(h: dict[str, str], slow: bool) -> list[list[str]]:
    rows: list[list[str]] = []
    for cache in _caches(h):
        rows += [
            ["demo", "--cache", cache],
            ["baselines", cache],
            ["play", "--cache", cache, "--questions", "1"],
            ["cache", "info", cache],
            ["cache", "validate", cache],
            ["cache", "plot", cache, "-o", h["out"]],
            ["cache", "split", cache, "-o", h["out"] + ".h5"],
            ["cache", "features", cache, "-o", h["out"] + ".h5"],
            ["cache", "from-lm-eval", cache, "-o", h["out"] + ".h5"],
            ["cache", "from-arrays", cache, "-o", h["out"] + ".h5"],
        ]
    good = h["good"]
    rows += [
        ["demo", "--cache", good, "--team-size", "0"],
        ["demo", "--cache", good, "--window", "0"],
        ["demo", "--cache", good, "--seed", "-1"],
        ["demo", "--cache", good, "--split", "validation"],
        ["baselines", good, "--alpha", "nan"],
        ["baselines", good, "--alpha", "inf"],
        ["baselines", good, "-k", "0"],
        ["baselines", good, "-k", "99"],
        ["baselines", good, "--only", "nobody"],
        ["baselines", good, "--frontier", h["out"], "--alphas", "x"],
        ["play", "--cache", good, "--questions", "-1"],
        ["play", "--cache", good, "--team", "99"],
        ["play", "--cache", good, "--alpha", "-1"],
        ["cache", "split", good, "-o", good],
        ["cache", "split", good, "-o", h["folder"]],
        ["cache", "split", good, "-o", h["out"] + ".h5", "--test-fraction", "2"],
        ["cache", "split", good, "-o", h["out"] + ".h5", "--validation-fraction", "nan"],
    ]
    if slow:
        for run in ("run_list", "run_invalid", "run_empty", "run_types", "run_nothing", "missing", "notes"):
            rows += [["evaluate", h[run]], ["plot", h[run], "--out", h["out"]], ["train", "--resume", h[run]]]
        for option, value in (
            ("--passes", "inf"),
            ("--passes", "nan"),
            ("--passes", "-1"),
            ("--passes", "1e300"),
            ("--hidden-size", "1000000000"),
            ("--num-steps", "1000000000000"),
            ("--num-envs", "0"),
            ("--seed", "x"),
        ):
            rows.append(["train", "--cache", good, "--out", h["out"] + "_run", option, value])
        rows += [
            ["train", "--cache", h["garbage"], "--out", h["out"] + "_run"],
            ["train", "--cache", good, "--out", h["notes"]],
            ["train", "--cache", good, "--config", h["garbage"], "--out", h["out"] + "_run"],
            ["train", "--cache", good, "--env", "alpha=nan", "--out", h["out"] + "_run"],
            ["benchmark", "--cache", h["garbage"], "--out", h["out"] + "_bench", "--budget", "tiny"],
            ["benchmark", "--algorithms", "nobody", "--out", h["out"] + "_bench"],
            ["benchmark", "--seeds", "0", "--out", h["out"] + "_bench"],
        ]
    return rows


def _run(rows: list[list[str]], limit: int = 60) -> list[dict[str, object]]:
    """Run ``rows`` in one child, each allowed ``limit`` seconds (a bad input is refused in well under one)."""
    child = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([rows, limit]),
        capture_output=True,
        text=True,
        timeout=limit * len(rows) + 120,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


def _check(results: list[dict[str, object]]) -> None:
    bad = [
        f"{' '.join(map(str, row['argv']))}: exit {row['code']}\n{row['stderr']}"
        for row in results
        if row["code"] != 2 or "Traceback" in str(row["stderr"]) or not str(row["stderr"]).strip()
    ]
    assert bad == [], f"{len(bad)} of {len(results)} bad inputs not refused cleanly:\n\n" + "\n\n".join(bad)


def test_bad_input_to_every_command_is_refused_without_a_traceback(hostile: dict[str, str]) -> None:
    _check(_run(_rows(hostile, slow=False)))


def _damaged_runs(folder: Path, cache: str) -> list[str]:
    """Copies of a real run (trained here, 2 updates on ``cache``), each with one file damaged: the checkpoint
    (truncated, NaN weights, a count that is a string, a float or missing, tensors of another shape, a bad
    generator state, an environment snapshot of another engine) or progress.csv (a word in a cell, a missing
    column, a row out of order)."""
    import shutil

    import torch

    from ensemble_env.cache import load_cache
    from ensemble_mappo.checkpoint import pack_arrays, save_checkpoint, unpack_arrays
    from ensemble_mappo.config import config_from_dict
    from ensemble_mappo.training import train

    base = folder / "base"
    options = {"num_envs": 4, "num_steps": 8, "total_steps": 64, "hidden_size": 8, "num_minibatches": 2}
    train(config_from_dict(options), load_cache(cache), base, cache_path=cache, progress=False, stop_after=1)

    def checkpoint(edit: Any) -> Any:
        def damage(path: Path) -> None:
            payload = torch.load(path / "checkpoint.pt", weights_only=True)
            edit(payload)
            save_checkpoint(path / "checkpoint.pt", payload)

        return damage

    def progress(edit: Any) -> Any:
        def damage(path: Path) -> None:
            lines = [line.split(",") for line in (path / "progress.csv").read_text().splitlines()]
            edit(lines)
            (path / "progress.csv").write_text("\n".join(",".join(line) for line in lines) + "\n")

        return damage

    def other_engine(payload: dict[str, Any]) -> None:
        arrays = unpack_arrays(payload["env"], "env")
        arrays["signature"] = np.array("another engine")
        payload["env"] = pack_arrays(arrays)

    def first(payload: dict[str, Any]) -> str:
        return next(iter(payload["networks"]["fusion"]))

    damages = {
        "ckpt_truncated": lambda path: (path / "checkpoint.pt").write_bytes(
            (path / "checkpoint.pt").read_bytes()[:999]
        ),
        "ckpt_nan": checkpoint(lambda p: p["networks"]["fusion"].__setitem__(first(p), torch.full((1,), float("nan")))),
        "ckpt_iteration_str": checkpoint(lambda p: p.__setitem__("iteration", "1")),
        "ckpt_iteration_float": checkpoint(lambda p: p.__setitem__("iteration", 1.0)),
        "ckpt_no_networks_key": checkpoint(lambda p: p.pop("optimizer")),
        "ckpt_shape": checkpoint(lambda p: p["networks"]["fusion"].__setitem__(first(p), torch.zeros(2, 2))),
        "ckpt_generator": checkpoint(lambda p: p.__setitem__("generator", torch.zeros(5056, dtype=torch.uint8))),
        "ckpt_env": checkpoint(other_engine),
        "progress_word": progress(lambda lines: lines[1].__setitem__(6, "high")),
        "progress_column": progress(lambda lines: [line.pop(7) for line in lines]),  # env/accuracy
        "progress_order": progress(lambda lines: lines[1].__setitem__(0, "7")),
    }
    paths = []
    for name, damage in damages.items():
        shutil.copytree(base, folder / name)
        damage(folder / name)
        paths.append(str(folder / name))
    return paths


@pytest.mark.slow
def test_bad_input_to_the_learner_commands_is_refused_without_a_traceback(
    hostile: dict[str, str], tmp_path: Path
) -> None:
    rows = _rows(hostile, slow=True)[len(_rows(hostile, slow=False)) :]
    for run in _damaged_runs(tmp_path, hostile["good"]):
        rows.append(["train", "--resume", run, "--no-progress"])
        if "ckpt_env" not in run:  # only a resume restores the environment's snapshot (and checks its values)
            rows.append(["plot", run, "--out", str(tmp_path / "plots")])
            if "progress" not in run:  # evaluate does not read the log
                rows.append(["evaluate", run, "--no-baselines"])
    rows += [
        ["train", "--cache", hostile["good"], "--out", hostile["out"] + "_big", "--num-steps", "1048576"],
        ["train", "--cache", hostile["good"], "--out", hostile["out"] + "_run", "--hidden-size", "5000"],
        ["train", "--cache", hostile["good"], "--out", hostile["out"] + "_run", "--seed", str(2**64)],
        ["benchmark", "--seeds", "-1", "--out", hostile["out"] + "_bench"],
    ]
    _check(_run(rows, limit=30))


@pytest.mark.parametrize(
    "argv",
    [["cache", "info", "{fifo}"], ["baselines", "{fifo}"], ["cache", "from-lm-eval", "{fifo}", "-o", "{out}.h5"]],
)
def test_a_fifo_never_blocks_a_command(hostile: dict[str, str], argv: list[str]) -> None:
    words = [word.format(**hostile) for word in argv]
    child = subprocess.run(
        [sys.executable, "-m", "ensemble_env.cli", *words], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 2 and "Traceback" not in child.stderr and child.stderr.strip()
