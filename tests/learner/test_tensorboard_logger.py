"""``train --logger tensorboard``: the run's log as TensorBoard event files in ``DIR/tensorboard/``, read back here with
TensorBoard's own reader (``EventAccumulator``) and compared with ``progress.csv`` and ``selection.json``.

The event files mirror progress.csv: every column (``global_step`` is the step) at the row's global step, each step
once, also after a resume that redoes updates a killed run had logged. The logger is no part of the run's config. A
missing package, an unknown logger or a ``tensorboard`` that is not a folder stops ``train`` before it writes anything.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env.cache import save_cache  # noqa: E402
from ensemble_env.cache.logit_cache import LogitCache  # noqa: E402
from ensemble_env.cli import main  # noqa: E402
from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo.algorithms import get  # noqa: E402
from ensemble_mappo.config import RETIRED_FIELDS, LearnerConfig  # noqa: E402
from ensemble_mappo.evaluation import read_selection  # noqa: E402
from ensemble_mappo.progress_format import read_progress  # noqa: E402
from ensemble_mappo.runs import RunFileError, read_config  # noqa: E402
from ensemble_mappo.training import train  # noqa: E402

#: a tiny run: 2 passes over 180 train questions in rollouts of 4 copies x 16 steps (6 updates), 2 kept checkpoints
OPTIONS = {"passes": 2.0, "num_envs": 4, "num_steps": 16, "hidden_size": 8, "checkpoints": 2}
FLAGS = [f"--{name.replace('_', '-')}={value}" for name, value in OPTIONS.items()]
BATCH = 4 * 16
NOT_INSTALLED = (
    "the tensorboard logger needs tensorboard, which is not installed (the tensorboard extra): "
    'pip install -e ".[tensorboard]"'
)


def _cache() -> LogitCache:
    """3 models, 2 tasks, 300 questions; a quarter of the train questions moved to validation (the choice's)."""
    cache = make_cache(n_models=3, n_questions=300, n_tasks=2, seed=0)
    split = np.array(cache.split)
    split[np.flatnonzero(split == 0)[::4]] = 2
    return dataclasses.replace(cache, split=split)


def _config(algorithm: str = "mappo") -> LearnerConfig:
    return get(algorithm).from_dict(dict(OPTIONS), where="test")


def _events(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``folder``: tag -> (step, value) in the order written, as TensorBoard
    reads them (``size_guidance`` 0: all of them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reader = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    reader.Reload()
    return {tag: [(event.step, event.value) for event in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]}


def _assert_mirrors_progress(events: dict[str, list[tuple[int, float]]], run: Path) -> None:
    """The events hold every measured cell of progress.csv, at its row's global step, once; nothing else but the
    choice on validation (float32 of the value; the CSV keeps 6 significant digits)."""
    log = read_progress(run)
    steps = log["global_step"].astype(int)
    assert steps.tolist() == [BATCH * (k + 1) for k in range(len(steps))]
    measured = {name: np.isfinite(values) for name, values in log.items() if name != "global_step"}
    logged = {tag for tag in events if not tag.startswith("validation/")}
    assert logged == {name for name, finite in measured.items() if finite.any()}
    for name in logged:
        finite = measured[name]
        assert [step for step, _ in events[name]] == steps[finite].tolist(), name
        values = [value for _, value in events[name]]
        assert values == pytest.approx(log[name][finite].tolist(), rel=1e-5, abs=1e-9), name


@pytest.mark.parametrize("algorithm", ["mappo", "rlae_mappo"])
def test_train_logger_tensorboard_writes_every_column_of_progress_csv_at_its_step(
    algorithm: str, tmp_path: Path
) -> None:
    pytest.importorskip("tensorboard")
    cache = tmp_path / "cache.h5"
    save_cache(cache, _cache())
    run = tmp_path / "run"
    argv = ["train", "--algorithm", algorithm, "--out", str(run), "--cache", str(cache), *FLAGS, "--no-progress"]
    assert main([*argv, "--logger", "tensorboard"]) == 0
    [events_file] = (run / "tensorboard").iterdir()
    assert events_file.name.startswith("events.out.tfevents.")
    events = _events(run / "tensorboard")
    _assert_mirrors_progress(events, run)
    assert {"env/accuracy", "env/reward", "charts/learning_rate", "iteration"} <= set(events)
    # the choice on validation: each candidate's facts at its update's step, the chosen update at the last step
    selection = read_selection(run)
    candidates = selection["candidates"]
    assert [candidate["update"] for candidate in candidates] == [0, 3, 6]
    for name, tag in [("validation_reward", "validation/reward"), ("gain_lower_bound", "validation/gain_lower_bound")]:
        expected = [(candidate["update"] * BATCH, candidate[name]) for candidate in candidates]
        assert [step for step, _ in events[tag]] == [step for step, _ in expected]
        assert [value for _, value in events[tag]] == pytest.approx([value for _, value in expected], abs=1e-6)
    assert events["validation/chosen_update"] == [(6 * BATCH, float(selection["update"]))]
    assert "tensorboard" not in read_config(run).config.to_dict()  # not part of the run's config


@pytest.mark.parametrize("first", [["tensorboard"], ["csv"]], ids=["logged before", "not logged before"])
def test_a_resumed_run_logs_each_step_once(first: list[str], tmp_path: Path) -> None:
    """A kill between update 4's row and its checkpoint leaves a row, and its events, after the checkpoint at
    update 3: the resume redoes update 4, and its events replace the killed run's (a run logged without TensorBoard
    gets its whole history from progress.csv)."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "run"
    train(_config(), _cache(), run, progress=False, stop_after=3, loggers=first)
    with (run / "progress.csv").open("a") as file:
        file.write(f"4,{4 * BATCH},0.5")  # a row cut by the kill
    if first == ["tensorboard"]:
        with SummaryWriter(str(run / "tensorboard")) as stray:  # the killed run's events of update 4
            stray.add_scalar("env/reward", 99.0, 4 * BATCH)
        assert len(list((run / "tensorboard").iterdir())) == 2
    cache = tmp_path / "cache.h5"
    save_cache(cache, _cache())
    argv = ["train", "--resume", str(run), "--cache", str(cache), "--no-progress", "--logger", "tensorboard"]
    assert main(argv) == 0
    assert len(list((run / "tensorboard").iterdir())) == 1
    events = _events(run / "tensorboard")
    assert read_progress(run)["iteration"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    _assert_mirrors_progress(events, run)
    assert 99.0 not in [value for _, value in events["env/reward"]]


def test_a_resume_without_the_logger_leaves_the_event_files_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    train(_config(), _cache(), run, progress=False, stop_after=3, loggers=["tensorboard"])
    before = {path.name: path.read_bytes() for path in (run / "tensorboard").iterdir()}
    assert [step for step, _ in _events(run / "tensorboard")["env/reward"]] == [BATCH, 2 * BATCH, 3 * BATCH]
    cache = tmp_path / "cache.h5"
    save_cache(cache, _cache())
    assert main(["train", "--resume", str(run), "--cache", str(cache), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"{run / 'tensorboard'} holds the run's TensorBoard events; without --logger tensorboard they stop" in err
    assert {path.name: path.read_bytes() for path in (run / "tensorboard").iterdir()} == before
    assert read_progress(run)["iteration"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_a_missing_package_stops_train_before_it_writes_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python API says it with the one message of ensemble_env.extras (the command line: tests/cli/test_extras.py);
    the run lock it took is gone and the folder empty."""
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    run = tmp_path / "run"
    with pytest.raises(ModuleNotFoundError, match=re.escape(NOT_INSTALLED)):
        train(_config(), _cache(), run, progress=False, loggers=["csv", "tensorboard"])
    assert not run.exists() or not any(run.iterdir())


def test_an_unknown_logger_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), "--cache", "toy8", "--logger", "csv,wandb"]) == 2
    err = capsys.readouterr().err
    assert err == "ensemble-env train: error: --logger: 'wandb' is not a logger; the loggers are csv, tensorboard\n"
    assert not run.exists()
    with pytest.raises(ValueError, match="loggers: 'tensorbord' is not a logger"):
        train(_config(), _cache(), run, progress=False, loggers=["tensorbord"])
    assert not run.exists() or not any(run.iterdir())


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_tensorboard_that_is_not_a_folder_is_refused_before_the_run_starts(kind: str, tmp_path: Path) -> None:
    """A symbolic link would take the event files, and the removal of the stale ones, elsewhere."""
    pytest.importorskip("tensorboard")
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (elsewhere / "events.out.tfevents.1.host.2.0").write_bytes(b"someone else's")
    if kind == "file":
        (run / "tensorboard").write_text("a file")
    else:
        (run / "tensorboard").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RunFileError, match=re.escape(f"{run / 'tensorboard'}: is not a folder (a file or a symbolic")):
        train(_config(), _cache(), run, progress=False, loggers=["tensorboard"])
    assert [path.name for path in run.iterdir()] == ["tensorboard"]  # no config.json: the run did not start
    assert (elsewhere / "events.out.tfevents.1.host.2.0").read_bytes() == b"someone else's"


def test_the_retired_config_field_points_to_the_logger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tensorboard`` was a config field: a --config file that sets it is refused, naming the option that replaced
    it; the benchmark keeps it in its run key, so that the runs it stored before are still found."""
    from ensemble_mappo.benchmark.learners import learner

    config = tmp_path / "run.toml"
    config.write_text("seed = 1\ntensorboard = true\n")
    assert main(["train", "--out", str(tmp_path / "run"), "--config", str(config)]) == 2
    expected = (
        f"ensemble-env train: error: {config}: tensorboard is no longer a training option; choose the logger per "
        "command: `ensemble-env train --logger tensorboard`\n"
    )
    assert capsys.readouterr().err == expected
    assert not (tmp_path / "run").exists()
    for algorithm in ("mappo", "rlae_ppo"):
        found = learner(algorithm, "tiny")
        assert found is not None
        key = found[1]["config"]
        assert {name: key[name] for name in RETIRED_FIELDS} == {"tensorboard": False}
