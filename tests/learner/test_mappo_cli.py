"""Smoke tests of ``ensemble-env train``, ``evaluate`` and ``plot`` on the embedded default cache (tiny budget)."""

from __future__ import annotations

import doctest
import importlib
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from testing.tables import decimals_per_column, table_rows  # noqa: E402

from ensemble_env import datasets  # noqa: E402
from ensemble_env.baselines import comparison  # noqa: E402
from ensemble_env.cli import main  # noqa: E402
from ensemble_env.game.reward import RewardSettings  # noqa: E402
from ensemble_mappo.evaluation import Evaluation, format_report  # noqa: E402

TINY = ["--cache", "toy8", "--total-steps", "1024", "--num-envs", "16", "--num-steps", "32", "--no-progress"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mappo") / "run"
    assert main(["train", "--out", str(out), "--seed", "3", *TINY]) == 0
    return out


def _assert_waits(err: str, waits: list[str]) -> None:
    """``err`` (stderr off a terminal) says each wait in order, as whole lines: ``ensemble-env: WAIT...`` when it
    starts, ``ensemble-env: WAIT: done (N s)`` when it ends; nothing else but the first-run compile message."""
    lines = [line for line in err.splitlines() if "compiling the environment's kernels" not in line]
    assert len(lines) == 2 * len(waits) and "\r" not in err, err
    for wait, started, ended in zip(waits, lines[0::2], lines[1::2], strict=True):
        assert started == f"ensemble-env: {wait}...", err
        assert re.fullmatch(rf"ensemble-env: {re.escape(wait)}: done \(\d+\.\d s\)", ended), err


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
    assert text.splitlines()[0].startswith("mappo evaluation [frozen]")
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


def test_evaluate_tables_keep_names_whole_format_columns_alike_and_list_static_team(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(run_dir)]) == 0
    text, err = capsys.readouterr()
    # stderr is no terminal here (a pipe, a log): the waits still say what they are for, in whole lines
    waits = ["playing the test split with the run's policy", "fitting the baselines on train and scoring them on test"]
    _assert_waits(err, waits)
    tables = [table_rows(text, header) for header in ("task ", "model ", "baseline ")]
    assert [row[0] for row in tables[0]] == ["iris", "wine", "breast_cancer", "digits", "diabetes"]
    assert [row[0] for row in tables[1]][:2] == ["logreg", "naive_bayes"]
    for rows in tables:  # e.g. a mean cost of 3.5 printed 3.50 like 2.35 above it
        assert all(len(found) == 1 for found in decimals_per_column(rows).values()), rows
    names = [row[0].split(" ", 1)[-1] for row in tables[2]]
    assert names[:2] == ["best_single", "static_team"] and names[-1] == "mappo"
    # the baselines numbered without gaps, as in `demo` and `baselines`; the policy is no baseline: its name alone
    assert [row[0] for row in tables[2]][:2] == ["b1 best_single", "b2 static_team"] and tables[2][-1][0] == "mappo"
    summary = json.loads((run_dir / "evaluation_test.json").read_text())
    assert {"static_team", "stacking(per_task)", "oracle"} <= set(summary["baselines"])
    mappo = tables[2][-1]  # the table's row of the policy: the summary's numbers, same rounding
    assert mappo[1:4] == [f"{summary['macro_accuracy']:.4f}", f"{summary['accuracy']:.4f}", f"{summary['reward']:.4f}"]
    assert f"reward {summary['reward']:+.4f}" in text.splitlines()[2]


def test_report_prints_3_5_as_3_50_under_2_25() -> None:
    """Mean team sizes and costs of 3.5 and 2.25 in one column: both with 2 decimals (issue 14)."""
    cache = datasets.load("toy8")
    questions = np.concatenate([np.flatnonzero(cache.tasks == task)[:4] for task in (0, 1)])
    sizes = [3, 4, 3, 4, 2, 2, 2, 3]  # iris: mean 3.5, wine: 2.25
    teams = np.array([[1] * size + [0] * (cache.n_models - size) for size in sizes], dtype=np.int8)
    answers = cache.labels[questions]
    evaluation = Evaluation(
        "frozen", "test", None, "run", 1, 512, tuple(cache.models), questions, answers, answers >= 0, teams,
        teams.sum(axis=1).astype(float), np.ones(8),
    )  # fmt: skip
    text = format_report(evaluation, cache, None)
    rows = table_rows(text, "task ")
    assert [row[-2:] for row in rows] == [["3.50", "3.50"], ["2.25", "2.25"]]
    assert "mean cost 2.88 (36% of the whole pool)" in text.splitlines()[2]
    assert [row[2] for row in table_rows(text, "model ")][:2] == ["1.00", "1.00"]  # cost/question, not "1"


def test_evaluate_scores_the_baselines_on_the_runs_reward(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--env", "alpha=0.5", *TINY]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(out)]) == 0
    assert "reward(alpha=0.5)" in capsys.readouterr().out
    # static_team chose its teams for alpha = 0.5: its reward is the one ensemble_env.baselines.comparison gives at 0.5
    cache = datasets.load("toy8")
    [static] = comparison.compare(cache, reward=RewardSettings(alpha=0.5), names=["static_team"])
    assert summary["baselines"]["static_team"]["reward"] == pytest.approx(
        static.scores(cache, RewardSettings(alpha=0.5))["reward"]
    )


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


def test_plot_writes_pngs_and_says_what_it_waits_for(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    (run_dir / "evaluation_test.json").unlink(missing_ok=True)  # plot plays the test split itself
    assert main(["plot", str(run_dir), "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    names = [Path(line).name for line in out.splitlines()]
    assert names == [
        "mappo_learning_curves.png",
        "mappo_team_size.png",
        "mappo_selection_frequency.png",
        "mappo_accuracy_vs_team_size.png",
    ]
    assert all((tmp_path / name).is_file() for name in names)
    # stderr is no terminal here: each wait is a line when it starts and one when it ends, in order
    waits = [
        "loading torch and matplotlib",
        f"playing the test split with the policy of {run_dir} (it has no evaluation_test.json yet)",
        "fitting the baselines on train and scoring them on test (alpha 1)",
        f"drawing 4 plots into {tmp_path}",
    ]
    _assert_waits(err, waits)


def test_learning_curves_say_their_smoothing_end_on_the_last_update_and_draw_one_value_as_a_marker() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from ensemble_mappo import plots

    steps = np.arange(1.0, 9.0) * 100
    log = {"global_step": steps, "env/accuracy": np.linspace(0.2, 0.9, 8), "env/one": np.full(8, np.nan)}
    log["env/one"][3] = 0.5
    axes = Figure().add_subplot()
    plots._curves(axes, [log], "env/accuracy", "accuracy")
    plots._curves(axes, [log], "env/one", "finished episodes")
    labels = [line.get_label() for line in axes.get_lines()]
    assert "accuracy (trailing mean of 5 updates)" in labels and "last update: 0.900" in labels  # train's last line
    [one] = [line for line in axes.get_lines() if line.get_label() == "finished episodes (one value)"]
    assert one.get_linestyle() == "None" and one.get_marker() == "o" and one.get_xdata().tolist() == [400.0]


@pytest.mark.parametrize("last", [4_096, 53_248, 262_144, 409_600, 2_621_440, 40_960_000, 999_999_999])
def test_env_step_ticks_never_run_together(last: int) -> None:
    """The learning curves' x axis at any budget: round ticks labelled short (50k, 1.5M), no offset text (1e6), a
    gap of a label's height at least between labels (matplotlib's own ticks touched at 160 passes of bbh5,
    409,600 steps: 0 50000 100000 ... 400000)."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ensemble_mappo import plots

    figure = Figure(figsize=(11, 4))  # the learning curves' size: two panels side by side
    FigureCanvasAgg(figure)
    for ax in figure.subplots(1, 2):
        ax.plot(np.linspace(last / 64, last, 64), np.linspace(0, 1, 64))
        plots._steps_axis(ax)
        ax.set_ylabel("accuracy")
    figure.tight_layout()
    figure.canvas.draw()
    ax, renderer = figure.axes[0], figure.canvas.get_renderer()
    low, high = ax.get_xlim()
    ticks = [tick for tick in ax.xaxis.get_major_ticks() if low <= tick.get_loc() <= high]
    labels = [tick.label1.get_text() for tick in ticks]
    assert 3 <= len(ticks) <= plots.MAX_STEP_TICKS + 1 and ax.xaxis.get_offset_text().get_text() == ""
    assert all(len(label) <= 4 for label in labels), labels  # e.g. 250k, 1.5M
    boxes = sorted((tick.label1.get_window_extent(renderer) for tick in ticks), key=lambda box: box.x0)
    assert all(right.x0 - left.x1 >= left.height for left, right in itertools.pairwise(boxes)), labels
    assert [plots.step_label(value) for value in (0, 800, 50_000, 262_144, 1_500_000)] == [
        "0",
        "800",
        "50k",
        "262k",
        "1.5M",
    ]


@pytest.mark.parametrize(
    "module", ["config", "checkpoint", "networks", "optim", "ppo", "budget", "loggers", "training"]
)
def test_docstring_examples(module: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(f"ensemble_mappo.{module}"))
    assert failures == 0


def test_overwrite_removes_the_tensorboard_event_files(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    assert main(["train", "--out", str(tmp_path), "--logger", "tensorboard", *TINY]) == 0
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 1
    (tmp_path / "events.out.tfevents.1.host.2.0").write_bytes(b"")  # where runs of earlier versions wrote them
    assert main(["train", "--out", str(tmp_path), "--overwrite", "--seed", "2", *TINY]) == 0  # starts over
    assert json.loads((tmp_path / "config.json").read_text())["config"]["seed"] == 2
    assert not (tmp_path / "tensorboard").exists() and not list(tmp_path.glob("events.out.tfevents.*"))
