"""Smoke tests of ``ensemble-env train``, ``evaluate`` and ``plot`` on the embedded default cache (tiny budget)."""

from __future__ import annotations

import doctest
import importlib
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ensemble_env.cli import main  # noqa: E402

TINY = ["--cache", "toy8", "--total-steps", "1024", "--num-envs", "16", "--num-steps", "32", "--no-progress"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mappo") / "run"
    assert main(["train", "--out", str(out), "--seed", "3", *TINY]) == 0
    return out


def test_train_writes_config_progress_and_checkpoint(run_dir: Path) -> None:
    assert {path.name for path in run_dir.iterdir()} >= {"config.json", "progress.csv", "checkpoint.pt"}
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["config"]["seed"] == 3
    assert saved["run"]["cache"] == "toy8"  # a built-in cache is recorded by name
    header = (run_dir / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"env/accuracy", "env/team_size", "losses/value_loss", "losses/fusion_policy_loss"} <= set(header)
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["complete"] is True


def test_evaluate_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(run_dir), "--split", "test", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["protocol"] == "frozen"
    assert 0.0 <= summary["macro_accuracy"] <= 1.0
    tasks = summary["tasks"]
    assert set(tasks) == {"iris", "wine", "breast_cancer", "digits", "diabetes"}
    keys = {"accuracy", "reward", "mean_team_size", "mean_cost", "selection_frequency"}
    assert all(keys <= set(t) for t in tasks.values())
    assert summary["macro_accuracy"] == pytest.approx(sum(t["accuracy"] for t in tasks.values()) / 5)
    assert summary["macro_reward"] == pytest.approx(sum(t["reward"] for t in tasks.values()) / 5)
    # alpha = 1 on errors: a right answer earns 1, a wrong one between -2 (all 8 models) and -1 (none)
    for task in tasks.values():
        accuracy = task["accuracy"]
        assert accuracy - 2 * (1 - accuracy) - 1e-9 <= task["reward"] <= 2 * accuracy - 1 + 1e-9
    assert "best_single" in summary["baselines"]
    assert (run_dir / "evaluation_test.json").is_file()


def test_evaluate_text_and_online_is_labelled(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(run_dir), "--no-baselines"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("MAPPO evaluation [frozen]")
    assert "selected" in text and "diabetes" in text
    assert main(["evaluate", str(run_dir), "--online", "--update-every", "200"]) == 0
    text = capsys.readouterr().out
    assert "ONLINE" in text.splitlines()[0]
    assert "mappo(online)" in text
    assert main(["evaluate", str(run_dir), "--online", "--update-every", "200", "--json", "--no-baselines"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["protocol"] == "online" and summary["update_every"] == 200
    assert "ONLINE" in summary["protocol_description"]
    assert (run_dir / "evaluation_test_online.json").is_file()


def test_resume_a_finished_run_and_refuse_options(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0
    assert main(["train", "--resume", str(run_dir), "--seed", "1"]) == 2
    assert "--seed" in capsys.readouterr().err
    assert main(["train", "--out", str(run_dir), *TINY]) == 2  # would overwrite a run
    assert "--overwrite" in capsys.readouterr().err


def test_train_says_what_its_budget_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--passes 1 on iris's 120 train questions is 120 steps: a whole rollout of 16 x 32 = 512 steps runs."""
    small = ["--cache", "toy8", "--tasks", "iris", "--num-envs", "16", "--num-steps", "32", "--no-progress"]
    assert main(["train", "--out", str(tmp_path / "run"), "--passes", "1", *small]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "budget: 1 pass x 120 train questions = 120 steps, rounded up to 1 rollout of 16 copies x 32 steps "
        "= 512 steps (4.267 passes)"
    )
    assert out[-1].startswith("done: 512 steps;")
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["global_step"] == 512
    assert main(["train", "--out", str(tmp_path / "exact"), "--total-steps", "1024", *small]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "budget: 1,024 steps (--total-steps) = 2 rollouts of 16 copies x 32 steps (8.533 passes of 120 train questions)"
    )


def test_train_options_from_a_config_file_and_flags(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('seed = 5\nmode = "two-stage"\nhidden_size = 8\n[env]\nalpha = 0.5\n')
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--config", str(config), "--seed", "6", "--tasks", "iris", "wine",
                 "--env", "window=50", *TINY]) == 0  # fmt: skip
    saved = json.loads((out / "config.json").read_text())["config"]
    assert (saved["seed"], saved["mode"], saved["hidden_size"]) == (6, "two-stage", 8)  # flags beat the file
    assert saved["env"] == {"decider_extras": ["task"], "fusion_extras": ["task"], "alpha": 0.5,
                            "window": 50, "tasks": ["iris", "wine"]}  # fmt: skip


def test_plot_writes_pngs(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert main(["plot", str(run_dir), "--out", str(tmp_path)]) == 0
    names = {path.name for path in tmp_path.glob("mappo_*.png")}
    assert names == {
        "mappo_learning_curves.png",
        "mappo_team_size.png",
        "mappo_selection_frequency.png",
        "mappo_accuracy_vs_team_size.png",
    }


@pytest.mark.parametrize("module", ["config", "files", "networks", "optim", "ppo", "training"])
def test_docstring_examples(module: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(f"ensemble_mappo.{module}"))
    assert failures == 0


def test_tensorboard_event_files_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    assert main(["train", "--out", str(tmp_path), "--tensorboard", *TINY]) == 0
    assert list(tmp_path.glob("events.out.tfevents.*"))
    assert main(["train", "--out", str(tmp_path), "--overwrite", "--seed", "2", *TINY]) == 0  # starts over
    assert json.loads((tmp_path / "config.json").read_text())["config"]["seed"] == 2
