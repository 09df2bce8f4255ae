"""Seeded fuzzing of issue 49's ("Reliability round 5") classes 2, 6 and 9: ``ensemble-env train`` with a random
learner configuration and game (the decider's policy and start, the decider's action encoding, the fusion agent's
action, a game without a decider, model-permuted copies, the standard or the unseen-task game, a budget in passes or
steps), through the command as a user runs it.

A case is ``refused`` when the command ends in one line naming what is wrong, with status 2 and no run directory
(nothing written: a refused run that leaves ``config.json``, ``checkpoints/`` or ``progress.csv`` is ``lost``, a
half-written output); ``accepted`` when the run completes (its ``selection.json`` written) and ran what its budget
line printed (as many rows in ``progress.csv`` as rollouts announced; otherwise ``wrong``). A traceback or a message of
several lines is ``bad_error``. The games this learner cannot play (``decider_action="subset"``,
``fusion_action="weights"``, no decider) and the index decider with the offline start must be refused: taken, they are
``wrong``.

Cases run in the watchdog workers of tests/fuzzing.py; ``pytest --run-slow`` runs a quick part (8 cases) and a
twentieth of the full part (10 cases; about half of them train, for seconds each), ``python
tests/learner/test_fuzz_train_configs.py --slow`` the full part (200 cases) and prints its row. Both parts are marked
slow (issue 47: the quick part took about 12 CPU s of the plain ``pytest``, a train process per case): the plain
suite refuses the unplayable games before any run directory exists, trains the encodings the learner plays and
checks the budget line against ``progress.csv`` in process (``tests/learner/test_round5_train.py``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helper is in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main

CASE_SECONDS = 300.0
#: ``pytest --run-slow`` runs this share of the full part (:func:`fuzzing.slow_size`)
SHARE = 20
MODULE = "test_fuzz_train_configs"
#: rollouts of 4 x 16 steps: the offline start fits the decider on a rollout's observations in minibatches of at most
#: 256, here 64, and the scorer (each team's logit a network of the team and the observation) costs per row and
#: team: a case with its default start takes about 7 CPU s instead of 35 with rollouts of 16 x 32 (issue 47)
SHAPE = ["--cache", "toy8", "--num-envs", "4", "--num-steps", "16", "--no-progress", "--checkpoints", "1"]
UNSEEN = [
    "--env", "episodes=task", "--env", 'decider_extras=["model_accuracy", "task_record", "team_record"]',
    "--env", 'fusion_extras=["member_record"]', "--no-question-features",
]  # fmt: skip
#: each option's values and their weights (the unplayable ones rarer, so that about half the runs start)
CHOICES: dict[str, dict[str, float]] = {
    "game": {"standard": 0.4, "unseen": 0.6},
    "decider_policy": {"absent": 0.3, "auto": 0.1, "teams": 0.15, "scorer": 0.15, "index": 0.15, "bernoulli": 0.15},
    "decider_start": {"absent": 0.3, "prior": 0.45, "offline": 0.25},
    "decider_action": {"absent": 0.6, "multibinary": 0.1, "multidiscrete": 0.2, "subset": 0.1},
    "fusion_action": {"absent": 0.75, "answer": 0.15, "weights": 0.1},
    "decider": {"absent": 0.75, "true": 0.15, "false": 0.1},
    "model_permutations": {"absent": 0.5, "0": 0.2, "1": 0.3},
    "budget": {"passes": 0.5, "steps": 0.5},
}
#: (option, value) pairs that must be refused whatever the rest is
UNPLAYABLE = {("decider_action", "subset"), ("fusion_action", "weights"), ("decider", "false")}


def _argv(case: dict[str, Any], out: Path) -> list[str]:
    argv = ["train", "--out", str(out), *SHAPE, *(UNSEEN if case["game"] == "unseen" else [])]
    for option in ("decider_policy", "decider_start", "model_permutations"):
        if case[option] != "absent":
            argv += [f"--{option.replace('_', '-')}", case[option]]
    for option in ("decider_action", "fusion_action", "decider"):
        if case[option] != "absent":
            argv += ["--env", f"{option}={case[option]}"]
    if case["decider"] == "false":
        argv += ["--env", "decider_extras=[]"]
    argv += ["--passes", "0.3"] if case["budget"] == "passes" else ["--total-steps", "700"]
    return argv


def _must_refuse(case: dict[str, Any]) -> bool:
    if any((option, case[option]) in UNPLAYABLE for option in ("decider_action", "fusion_action", "decider")):
        return True
    start = case["decider_start"] if case["decider_start"] != "absent" else "offline"  # the default start
    return case["decider_policy"] == "index" and start == "offline"


def train_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_env.cli import main

    out = Path.cwd() / f"case{case['seed']}" / "run"
    out.parent.mkdir(parents=True, exist_ok=True)
    printed, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(err):
            code = main(_argv(case, out))
    except BaseException as error:  # a traceback the command let through
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("ensemble-env: compiling")]
    if code != 0:
        if code != 2 or len(lines) != 1 or not lines[0].startswith("ensemble-env train: error: "):
            return "bad_error", f"status {code}: {' | '.join(lines)[:280]}"
        if os.path.lexists(out):
            return "lost", f"refused after writing {sorted(os.listdir(out)) if out.is_dir() else out}: {lines[0][:200]}"
        return "refused", lines[0][:300]
    if _must_refuse(case):
        return "wrong", f"trained a game or start it cannot play: {' '.join(_argv(case, out)[9:])}"
    if not (out / "selection.json").is_file():
        return "wrong", f"completed without selection.json: {sorted(os.listdir(out))}"
    budget = next((line for line in printed.getvalue().splitlines() if line.startswith("budget: ")), "")
    found = re.search(r"(?:rounded up to |= )([\d,]+) rollouts? of", budget)
    with open(out / "progress.csv", newline="", encoding="utf-8") as handle:
        rows = len(list(csv.DictReader(handle)))
    if found is None or int(found.group(1).replace(",", "")) != rows:
        return "wrong", f"printed {budget!r}, ran {rows} rollouts"
    return "accepted", ""


def cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    found = []
    for index in range(n):
        case: dict[str, Any] = {
            name: str(rng.choice(list(values), p=list(values.values()))) for name, values in CHOICES.items()
        }
        case["seed"] = index
        case["kind"] = " ".join(f"{name}={value}" for name, value in case.items() if value not in ("absent", index))
        found.append(case)
    return found


def suite(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    chosen = cases(slow_size(200, share=SHARE) if slow else 8, seed=49 if slow else 9)
    return run_cases(MODULE, "train_case", chosen, workdir, CASE_SECONDS), 0


SUITES = {"train configs against the game": suite}


@pytest.mark.slow
def test_train_configs_are_refused_before_writing_or_run_as_printed(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] >= 2 and counts["accepted"] >= 1, dict(counts)


@pytest.mark.slow
def test_many_train_configs(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results, _ = suite(tmp_path, slow=True)
    assert len(results) == slow_size(200, share=SHARE) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the train configs' fuzz and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
