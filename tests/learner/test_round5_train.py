"""``ensemble-env train`` under issue 49 ("Reliability round 5"), classes 2, 6 and 9: the configuration is checked
against the game it will train on before anything is written (the index decider with the offline start, a decider
encoding or a game the learner does not play: one line naming the options, no run directory), and the budget line
is the plan that runs (model-permuted copies included, the passes of a ``--total-steps`` budget over that stream)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ensemble_env import datasets
from ensemble_env.cli import main
from ensemble_env.game.config import unseen_game
from ensemble_mappo.budget import Budget
from ensemble_mappo.config import TrainConfig
from ensemble_mappo.training import check_run, run_budget, training_cache

TINY = ["--cache", "toy8", "--num-envs", "16", "--num-steps", "32", "--no-progress", "--checkpoints", "1"]
#: ``ensemble_env/EnsembleUnseen-v1``'s options on toy8's pool, as ``--env`` flags (and no question features)
UNSEEN = [
    "--env",
    "episodes=task",
    "--env",
    'decider_extras=["model_accuracy", "task_record", "team_record"]',
    "--env",
    'fusion_extras=["member_record"]',
    "--no-question-features",
]


def _refused(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("ensemble-env: compiling")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("ensemble-env train: error: "), err
    return lines[0]


# -- class 2: the index decider with the offline start ----------------------------------------------------------------
def test_the_index_decider_with_the_offline_start_is_refused_when_the_config_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match=r"decider_policy='index' with decider_start='offline'.*decider_start='prior'"):
        TrainConfig(decider_policy="index", decider_start="offline")
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), *TINY, *UNSEEN, "--decider-policy", "index"]) == 2
    line = _refused(capsys)
    assert "decider_policy='index'" in line and "decider_start='offline'" in line
    assert not out.exists()
    TrainConfig(decider_policy="index", decider_start="prior")  # the partial-feedback learner's start: taken


# -- class 9: a game the learner does not play -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--env", "decider_action=subset"], "env: decider_action='subset' is not a game this learner plays"),
        (["--env", "fusion_action=weights"], "env: fusion_action='weights' is not a game this learner plays"),
        (["--env", "decider=false", "--env", "decider_extras=[]"], "env: decider=False is not a game"),
        (["--decider-policy", "index", "--decider-start", "prior"], "decider_policy='index' reads the task's team"),
        (["--model-permutations", "2"], "model_permutations=2: permuted copies of the training tasks are for tasks"),
    ],
)
def test_a_game_the_learner_cannot_play_is_refused_before_the_run_directory_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), *TINY, "--total-steps", "512", *flags]) == 2
    assert named in _refused(capsys)
    assert not out.exists()  # no config.json, checkpoints/ or progress.csv of a run that cannot start


def test_the_encodings_the_learner_plays_still_train(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        main(["train", "--out", str(out), *TINY, "--total-steps", "512", "--env", "decider_action=multidiscrete"]) == 0
    )
    assert (out / "selection.json").is_file()


# -- class 6: the budget line is the plan that runs ------------------------------------------------------------------
def test_the_budget_counts_the_model_permuted_copies() -> None:
    cache = datasets.load("toy8")
    game = unseen_game(cache.n_models)  # EnsembleUnseen-v1's options: no task one-hot, episodes of one task
    env = {
        **TrainConfig().env,
        **{key: list(value) if isinstance(value, tuple) else value for key, value in game.items()},
    }
    config = TrainConfig(passes=2.0, model_permutations=2, question_features=False, env=env)
    budget = run_budget(config, cache)
    stream = int(training_cache(config, cache, env).select("train").size)
    assert budget.questions == stream == 3 * int(cache.select("train").size)
    assert budget.requested == 2 * stream and budget.copies == 2
    assert check_run(config, cache) == budget  # the check builds the same plan
    steps = TrainConfig(total_steps=4096, model_permutations=2, question_features=False, env=env)
    assert (
        run_budget(steps, cache)
        .describe()
        .startswith(
            f"budget: 4,096 steps (--total-steps) = 1 rollout of {steps.num_envs} copies x {steps.num_steps} steps "
            f"({4096 / stream:.4g} passes of {stream:,} train questions); the train questions include 2 model-permuted"
        )
    )
    assert Budget.of_cache(steps, cache).questions == stream // 3  # the cache alone: what the line printed before


def test_train_prints_the_budget_it_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", "--out", str(out), *TINY, *UNSEEN, "--model-permutations", "2", "--passes", "0.2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("budget: "))
    stream = 3 * int(datasets.load("toy8").select("train").size)
    updates = math.ceil(math.ceil(0.2 * stream) / (16 * 32))
    assert line.startswith(f"budget: 0.2 passes x {stream:,} train questions = ")
    assert f"rounded up to {updates} rollouts of 16 copies x 32 steps" in line
    with open(out / "progress.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == updates  # what ran is what was printed
