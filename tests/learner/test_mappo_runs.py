"""The run directory (``ensemble_mappo.runs``): its lock, and the one checked reader of each of its files.

Every bad file is refused with a RunFileError (a ValueError) naming the file, the field and the value; the
command line prints it as ``ensemble-env COMMAND: error: ...`` with exit status 2. The random corruptions are
in tests/learner/test_fuzz_runs.py; here each rule has a named case.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env import datasets, run_lock  # noqa: E402
from ensemble_env.cli import main  # noqa: E402
from ensemble_mappo import evaluation, progress_format, runs  # noqa: E402
from ensemble_mappo.budget import Budget  # noqa: E402
from ensemble_mappo.checkpoint import pack_arrays, read_checkpoint, save_checkpoint, unpack_arrays  # noqa: E402
from ensemble_mappo.config import LIMITS, MAX_TOTAL_STEPS, TrainConfig, config_from_dict  # noqa: E402
from ensemble_mappo.training import train  # noqa: E402

TINY = {
    "num_envs": 4,
    "checkpoints": 0,  # the run's policy is its last checkpoint
    "num_steps": 8,
    "episode_length": 16,
    "total_steps": 4 * 8 * 3,
    "update_epochs": 1,
    "num_minibatches": 2,
    "checkpoint_every": 1,
    "hidden_size": 8,
    # the size prior: what is tested here is the run directory's files, which are the same with either start; the
    # offline start (the default) scores toy8's 255 teams on every train, resume and evaluate (about 0.5 s of CPU each,
    # 10 times the rest of these commands) and has tests of its own (test_mappo_start.py, test_benchmark.py)
    "decider_start": "prior",
}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 3 updates on toy8 stopped after 2 (checkpoint at update 2, progress rows 1 and 2)."""
    out = tmp_path_factory.mktemp("runs") / "run"
    train(
        config_from_dict({**TINY, "seed": 1}),
        datasets.load("toy8"),
        out,
        cache_path="toy8",
        progress=False,
        stop_after=2,
    )
    return out


@pytest.fixture
def run(base_run: Path, tmp_path: Path) -> Path:
    """A fresh copy of the base run."""
    copy = tmp_path / "run"
    shutil.copytree(base_run, copy)
    return copy


def _edit_json(path: Path, edit: Callable[[Any], Any]) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(edit(data)))


def _edit_checkpoint(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    payload = torch.load(path, weights_only=True)
    edit(payload)
    save_checkpoint(path, payload)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """Run ``ensemble-env argv`` in-process: exit 2 and one message naming every needle (after, at most, the status
    lines of what the command had started: ``ensemble-env: ...``)."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    error = err.index(f"ensemble-env {argv[0]}: error: ") if f"ensemble-env {argv[0]}: error: " in err else -1
    assert error >= 0 and "Traceback" not in err, err
    assert all(line.startswith("ensemble-env: ") for line in err[:error].splitlines()), err
    assert err.count(": error: ") == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# -- the run as written ----------------------------------------------------------------------------------------
def test_a_run_writes_its_files_through_the_checked_readers(run: Path) -> None:
    assert sorted(path.name for path in run.iterdir()) == ["checkpoint.pt", "config.json", "progress.csv"]  # no lock
    config = runs.read_config(run)
    assert config.config.seed == 1 and config.cache == "toy8" and config.models == tuple(datasets.load("toy8").models)
    checkpoint = read_checkpoint(run, config)
    assert (checkpoint.iteration, checkpoint.num_iterations, checkpoint.complete) == (2, 3, False)
    assert progress_format.read_progress(run)["iteration"].tolist() == [1.0, 2.0]
    kept = progress_format.progress_rows(run / "progress.csv", ["iteration"], upto=1)
    assert [row["iteration"] for row in kept] == ["1"]


def test_a_run_of_a_version_before_a_field_existed_reads_with_the_value_it_was_trained_with(run: Path) -> None:
    def drop(data: dict[str, Any]) -> dict[str, Any]:
        for name in runs.LEGACY_FIELDS:
            data["config"].pop(name)
        return data

    _edit_json(run / "config.json", drop)
    config = runs.read_config(run).config
    assert {name: getattr(config, name) for name in runs.LEGACY_FIELDS} == runs.LEGACY_FIELDS


def test_a_run_written_when_a_retired_field_was_in_the_config_reads_and_resumes(run: Path) -> None:
    """Runs written when ``tensorboard`` was a config field hold it in config.json and in the checkpoint's copy: it
    is dropped (a logger changes no number), so they read, evaluate and resume as before."""
    from ensemble_mappo.config import RETIRED_FIELDS

    assert "tensorboard" in RETIRED_FIELDS and "tensorboard" not in TrainConfig().to_dict()
    _edit_json(run / "config.json", _set("config", "tensorboard", value=True))
    _edit_checkpoint(run / "checkpoint.pt", lambda payload: payload["config"].update(tensorboard=False))
    assert runs.read_config(run).config == config_from_dict({**TINY, "seed": 1})
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert progress_format.read_progress(run)["iteration"].tolist() == [1.0, 2.0, 3.0]
    assert not (run / "tensorboard").exists()  # the field is not read: a resume logs with the loggers it is given


# -- config.json -----------------------------------------------------------------------------------------------
def _set(*keys: str, value: Any) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
        return data

    return edit


def _drop(*keys: str) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        target = data
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]
        return data

    return edit


CONFIG_CASES: dict[str, tuple[Callable[[Any], Any] | str, str]] = {
    "a list": ("[]", "expected a JSON object"),
    "an empty object": ("{}", "lacks 'config', 'run'"),
    "invalid JSON": ("{not json", "not valid JSON (line 1, column 2"),
    "not UTF-8": ("\udcff", "not UTF-8"),
    "NaN": ('{"config": NaN, "run": {}}', "NaN is not a JSON number"),
    "deep nesting": ("[" * 100_000, "not valid JSON"),
    "unknown key": (_set("extra", value=1), "unknown key(s) ['extra']"),
    "config not an object": (_set("config", value=[1]), "config: expected an object"),
    "missing field": (_drop("config", "num_envs"), "config: lacks num_envs"),
    "unknown field": (_set("config", "speed", value=1), "unknown key(s) speed"),
    "retired field of another type": (
        _set("config", "tensorboard", value="yes"),
        "config.tensorboard: expected a boolean (a retired field, not read), got a string ('yes')",
    ),
    "wrong type": (_set("config", "num_envs", value="many"), "num_envs must be an integer >= 1, got 'many'"),
    "a float count": (_set("config", "num_steps", value=8.0), "num_steps must be an integer >= 1, got 8.0"),
    "bad env option": (_set("config", "env", "alpha", value=-1), "config: env: alpha must be a"),
    "unknown env option": (_set("config", "env", "speed", value=1), "env: unknown option(s) speed"),
    "huge budget": (
        _set("config", "total_steps", value=10**40),
        "total_steps=<an integer of about 41 digits> is above",
    ),
    "run not an object": (_set("run", value="toy8"), "run: expected an object"),
    "run lacks models": (_drop("run", "models"), "run: lacks 'models'"),
    "models not names": (_set("run", "models", value=[1, 2]), "run.models: expected a list of names"),
    "models twice": (_set("run", "models", value=["a", "a"]), "run.models: names one twice"),
    "n_questions a string": (_set("run", "n_questions", value="3"), "run.n_questions: expected a whole number"),
    "cache a number": (_set("run", "cache", value=3), "run.cache: expected a cache name or path"),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_a_bad_config_json_is_refused_naming_the_file_field_and_value(
    run: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expected = CONFIG_CASES[case]
    path = run / "config.json"
    if isinstance(edit, str):
        path.write_bytes(edit.encode("utf-8", "surrogateescape"))
    else:
        _edit_json(path, edit)
    with pytest.raises(runs.RunFileError) as error:
        runs.read_config(run)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message and len(message) < 1000
    for command in (["evaluate", str(run), "--no-baselines"], ["train", "--resume", str(run)]):
        _refused(command, capsys, str(path))
    assert not (run / "run.lock").exists()  # the refused resume let go of the folder


def test_a_config_json_that_is_not_a_file_is_refused_without_reading_it(run: Path) -> None:
    (run / "config.json").unlink()
    os.mkfifo(run / "config.json")  # a reader of a FIFO would wait for ever
    with pytest.raises(runs.RunFileError, match="not a regular file"):
        runs.read_config(run)


# -- progress.csv ----------------------------------------------------------------------------------------------
def _edit_progress(path: Path, edit: Callable[[list[list[str]]], None]) -> None:
    rows = [line.split(",") for line in path.read_text().splitlines()]
    edit(rows)
    path.write_text("\n".join(",".join(row) for row in rows) + "\n")


def _cell(row: int, column: str, value: str) -> Callable[[list[list[str]]], None]:
    def edit(rows: list[list[str]]) -> None:
        rows[row][rows[0].index(column)] = value

    return edit


PROGRESS_CASES: dict[str, tuple[Callable[[list[list[str]]], None], str]] = {
    "a word": (_cell(1, "env/reward", "high"), "line 2, column env/reward: expected a finite number or nothing"),
    "nan": (_cell(2, "env/reward", "nan"), "line 3, column env/reward: expected a finite number"),
    "inf": (_cell(1, "losses/value_loss", "1e999"), "column losses/value_loss: expected a finite number"),
    "accuracy 3": (_cell(1, "env/accuracy", "3"), "line 2, column env/accuracy: '3' is outside [0, 1]"),
    "iteration 1.5": (_cell(1, "iteration", "1.5"), "line 2, column iteration: expected a whole number, got '1.5'"),
    "iteration skipped": (_cell(2, "iteration", "3"), "line 3, column iteration: expected update 2"),
    "global_step": (_cell(1, "global_step", "7"), "line 2, column global_step: expected 32"),
    "a missing column": (lambda rows: [row.pop(7) for row in rows], "header: lacks the column(s) ['env/accuracy']"),
    "a cut row": (lambda rows: rows[2].pop(), "line 3: 69 cells for 70 columns"),
    "a twice named column": (lambda rows: rows[0].__setitem__(3, rows[0][2]), "header: names ['time/elapsed'] twice"),
}


@pytest.mark.parametrize("case", list(PROGRESS_CASES))
def test_a_bad_progress_csv_is_refused_naming_the_line_column_and_value(
    run: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expected = PROGRESS_CASES[case]
    path = run / "progress.csv"
    if case == "a cut row":  # the count of columns, as the file has it
        expected = f"line 3: {len(path.read_text().splitlines()[0].split(',')) - 1} cells for"
    _edit_progress(path, edit)
    with pytest.raises(runs.RunFileError) as error:
        progress_format.read_progress(run)
    assert str(error.value).startswith(f"{path}: ") and expected in str(error.value), str(error.value)
    before = {item.name: item.read_bytes() for item in run.iterdir()}
    _refused(["train", "--resume", str(run), "--no-progress"], capsys, str(path))
    assert {item.name: item.read_bytes() for item in run.iterdir()} == before  # a refused resume changes nothing


def test_resume_keeps_the_checkpointed_history_and_ignores_the_rows_after_it(run: Path) -> None:
    """A kill between a row and its checkpoint leaves a row (maybe cut) after the checkpoint: resume redoes it."""
    path = run / "progress.csv"
    path.write_text(path.read_text() + "3,96,0.5")  # a cut third row: the checkpoint is at update 2
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert progress_format.read_progress(run)["iteration"].tolist() == [1.0, 2.0, 3.0]


def test_a_log_written_before_a_statistic_was_added_still_reads_and_resumes(run: Path) -> None:
    _edit_progress(run / "progress.csv", lambda rows: [row.pop() for row in rows])  # no last statistic
    last = progress_format.progress_columns(runs.read_config(run).models)[-1]
    assert np.isnan(progress_format.read_progress(run)[last]).all()
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert progress_format.read_progress(run)["iteration"].tolist() == [1.0, 2.0, 3.0]


def test_resume_refuses_a_log_that_lost_checkpointed_rows(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_progress(run / "progress.csv", lambda rows: rows.pop())
    _refused(
        ["train", "--resume", str(run)], capsys, "progress.csv: holds updates 1..1 but the checkpoint is at update 2"
    )


# -- checkpoint.pt ---------------------------------------------------------------------------------------------
def _put(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda payload: payload.__setitem__(key, value)


def _nan_weight(payload: dict[str, Any]) -> None:
    payload["networks"]["fusion"] = {
        key: torch.full_like(value, float("nan")) if value.is_floating_point() else value
        for key, value in payload["networks"]["fusion"].items()
    }


def _first_weight(payload: dict[str, Any]) -> str:
    return next(key for key, value in payload["networks"]["decider"].items() if value.dim() == 2)


def _reshape(payload: dict[str, Any]) -> None:
    key = _first_weight(payload)
    payload["networks"]["decider"][key] = torch.zeros(3, 3)


def _env_of_another_engine(payload: dict[str, Any]) -> None:
    arrays = unpack_arrays(payload["env"], "env")
    arrays["signature"] = np.array("num_envs=99 models=[] config=other")
    payload["env"] = pack_arrays(arrays)


CHECKPOINT_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str, tuple[str, ...]]] = {
    "iteration a string": (_put("iteration", "2"), "iteration: expected a whole number, got a string ('2')", ()),
    "iteration a float": (_put("iteration", 2.0), "iteration: expected a whole number, got a number (2.0)", ()),
    "iteration 3.7": (_put("iteration", 3.7), "iteration: expected a whole number", ()),
    "iteration a bool": (_put("iteration", True), "iteration: expected a whole number", ()),
    "iteration past the budget": (_put("iteration", 9), "iteration: expected a whole number [0, 3], got 9", ()),
    "global_step": (_put("global_step", 5), "global_step: 5 is not iteration x num_envs x num_steps = 64", ()),
    "complete": (_put("complete", True), "complete: expected False", ()),
    "missing key": (lambda payload: payload.pop("optimizer"), "lacks optimizer", ()),
    "config of another run": (lambda payload: payload["config"].__setitem__("seed", 2), "differs from", ()),
    "models of another pool": (_put("models", ["a", "b"]), "models: ['a', 'b'] differ from", ()),
    "a NaN policy": (_nan_weight, "networks.fusion.", ("values that are not finite",)),
    "weights of another shape": (_reshape, "networks.decider.", ("of shape (3, 3), expected",)),
    "a bad generator state": (_put("generator", torch.zeros(5056, dtype=torch.uint8)), "generator: not a state", ()),
    "a generator of another size": (
        _put("generator", torch.zeros(10, dtype=torch.uint8)),
        "generator: not a state",
        (),
    ),
    "optimizer of another size": (
        lambda payload: payload["optimizer"].__setitem__("exp_avg", torch.zeros(7)),
        "optimizer.exp_avg: torch.float32 of shape (7,) and exp_avg_sq torch.float32 of shape",
        (),
    ),
    "env not an archive": (_put("env", torch.zeros(16, dtype=torch.uint8)), "env: not a numpy archive", ()),
    "env of another engine": (_env_of_another_engine, "env: the environment's snapshot is refused: set_state", ()),
}
#: what evaluate reads of a checkpoint: all of it but the environment's values, which only a resume restores
EVALUATE_ACCEPTS = ("env of another engine",)


@pytest.mark.parametrize("case", list(CHECKPOINT_CASES))
def test_a_bad_checkpoint_is_refused_naming_the_file_and_the_entry(
    run: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expected, more = CHECKPOINT_CASES[case]
    path = run / "checkpoint.pt"
    _edit_checkpoint(path, edit)
    before = path.read_bytes()
    commands = [["train", "--resume", str(run), "--no-progress"]]
    if case not in EVALUATE_ACCEPTS:
        commands.append(["evaluate", str(run), "--no-baselines", "--split", "test"])
    for command in commands:
        _refused(command, capsys, f"{path}: ", expected, *more)
    assert path.read_bytes() == before


def test_evaluate_refuses_a_nan_policy_given_as_networks(run: Path) -> None:
    from ensemble_mappo.evaluation import evaluate_agents

    checkpoint = read_checkpoint(run)
    networks = {name: dict(state) for name, state in checkpoint.networks.items()}
    networks["decider"][_first_weight({"networks": networks})] = torch.full((8, 3), float("nan"))
    with pytest.raises(ValueError, match=r"live: networks\.decider\.\S+ holds 24 of 24 values that are not finite"):
        evaluate_agents(networks, checkpoint.config, datasets.load("toy8"), split="test", source="live")


# -- evaluation_test.json (what plot reads of it) -------------------------------------------------------------
def _evaluation(models: tuple[str, ...], **changes: Any) -> dict[str, Any]:
    summary = {"macro_accuracy": 0.5, "mean_team_size": 2.0, "selection_frequency": dict.fromkeys(models, 0.25)}
    return {**summary, **changes}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"macro_accuracy": 2}, "macro_accuracy: expected a number in [0, 1], got a number (2)"),
        ({"macro_accuracy": "0.5"}, "macro_accuracy: expected a number in [0, 1], got a string"),
        ({"macro_accuracy": float("nan")}, "macro_accuracy: expected a number in [0, 1], got a number (nan)"),
        ({"mean_team_size": 99}, "mean_team_size: expected a number in [0, 8]"),
        ({"selection_frequency": []}, "selection_frequency: expected an object of models"),
        ({"selection_frequency": {"logreg": 0.5}}, "selection_frequency.naive_bayes: missing"),
    ],
)
def test_a_bad_evaluation_summary_is_refused_naming_the_field(run: Path, change: dict[str, Any], expected: str) -> None:
    models = runs.read_config(run).models
    path = run / "evaluation_test.json"
    path.write_text(json.dumps(_evaluation(models, **change)))
    with pytest.raises(runs.RunFileError) as error:
        evaluation.read_evaluation(path, models)
    assert str(error.value).startswith(f"{path}: ") and expected in str(error.value), str(error.value)
    path.write_text(json.dumps(_evaluation(models, other=float("nan"))))  # a NaN plot does not read is fine
    assert evaluation.read_evaluation(path, models)["macro_accuracy"] == 0.5


def test_plot_refuses_a_bad_evaluation_before_it_draws(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    (run / "evaluation_test.json").write_text("{}")
    _refused(
        ["plot", str(run), "--out", str(tmp_path / "plots")], capsys, "evaluation_test.json: macro_accuracy: missing"
    )
    assert not list((tmp_path / "plots").glob("*.png"))  # every input is read before the first figure


# -- budgets ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"passes": float("inf")}, "passes must be a number in (0, 1e+06], got inf"),
        ({"passes": 1e300}, "passes must be a number in (0, 1e+06], got 1e+300"),
        ({"passes": float("nan")}, "passes must be a number in (0, 1e+06], got nan"),
        ({"passes": -0.0}, "passes must be a number in (0, 1e+06], got -0.0"),
        ({"learning_rate": -0.0}, "learning_rate must be a number in (0, 1], got -0.0"),
        ({"learning_rate": 1e6}, "learning_rate must be a number in (0, 1], got 1000000.0"),
        ({"hidden_size": 10**6}, "hidden_size=1000000 is above its limit of 4,096"),
        ({"num_steps": 10**12}, "num_steps=1000000000000 is above its limit of 1,048,576"),
        ({"num_envs": 10**9}, "num_envs=1000000000 is above its limit of 65,536"),
        ({"total_steps": MAX_TOTAL_STEPS + 1}, "total_steps=10000000001 is above its limit"),
        ({"update_epochs": 10**6}, "update_epochs=1000000 is above its limit of 1,000"),
        ({"seed": 2**64}, "seed=18446744073709551616 is above its limit"),
        ({"learning_rate": float("inf")}, "learning_rate must be a number in (0, 1], got inf"),
        ({"passes": 10**400}, "passes must be a number in its range, got <an integer of about 401 digits>"),
    ],
)
def test_sizes_and_budgets_beyond_the_limits_are_refused(values: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError) as error:
        config_from_dict(values)
    assert expected in str(error.value)


def test_the_budget_is_bounded_in_steps_before_it_is_rounded_to_rollouts() -> None:
    with pytest.raises(ValueError, match=r"passes=1e\+06 x 100,000,000 train questions = 1e\+14 steps is more than"):
        Budget.plan(TrainConfig(passes=1e6), 10**8)
    assert Budget.plan(TrainConfig(passes=1e6), 10_000).requested == 10**10  # the limit itself runs
    assert LIMITS["passes"] * 10_000 == MAX_TOTAL_STEPS


def test_the_rollout_storage_is_bounded_before_it_is_allocated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--cache", "toy8", "--out", str(tmp_path / "run"), "--num-steps", "1048576", "--no-progress"]
    _refused(argv, capsys, "a rollout of num_envs=256 copies x num_steps=1,048,576 steps would take", "GiB of storage")
    assert not (tmp_path / "run").exists()  # refused before the run folder is made: nothing written


# -- the lock --------------------------------------------------------------------------------------------------
def test_the_lock_is_reentrant_in_its_thread_refused_in_another_and_removed_when_released(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    with run_lock.RunLock(folder, command="first") as lock:
        record = json.loads((folder / "run.lock").read_text())
        assert record["pid"] == os.getpid() and record["command"] == "first" and lock.taken_over is None
        with run_lock.RunLock(folder):  # train() inside the train command
            pass
        assert (folder / "run.lock").exists()
        errors: list[BaseException] = []

        def other() -> None:
            try:
                run_lock.RunLock(folder).acquire()
            except run_lock.RunBusyError as error:
                errors.append(error)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert len(errors) == 1 and f"(pid {os.getpid()} on host " in str(errors[0]) and ": first)" in str(errors[0])
    assert not (folder / "run.lock").exists()


@pytest.mark.parametrize("kind", ["folder", "symlink", "fifo"])
def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    {"folder": lambda p: p.mkdir(), "symlink": lambda p: p.symlink_to("/dev/null"), "fifo": os.mkfifo}[kind](
        folder / "run.lock"
    )
    with pytest.raises(ValueError, match=r"run\.lock"):
        run_lock.RunLock(folder).acquire()


def test_a_folder_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        run_lock.RunLock(tmp_path / "notes.txt").acquire()
    _refused(["train", "--cache", "toy8", "--out", str(tmp_path / "notes.txt")], capsys, "is a file")
    _refused(["train", "--resume", str(tmp_path / "nowhere")], capsys, "no such run directory")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from ensemble_env.cli import main; sys.exit(main())", *args]


@pytest.fixture
def reaper() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts: each killed and waited for at the end, whatever happened."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, "the training ended before the test could meet it"
        assert time.monotonic() < deadline, "the training did not get going in time"
        time.sleep(0.05)


def _rows(folder: Path) -> int:
    path = folder / "progress.csv"
    return max(path.read_text().count("\n") - 1, 0) if path.exists() else 0


LONG = ["--cache", "toy8", "--total-steps", "10000000", "--num-envs", "8", "--num-steps", "16", "--no-progress"]


def test_a_second_train_in_a_running_runs_folder_is_refused_naming_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reaper: list[subprocess.Popen[bytes]]
) -> None:
    """The issue's case: two `train --out D` at once. The second (and a --resume, and an --overwrite) is refused
    naming the first by its pid, touching nothing; once the first is killed (-9), its lock is taken over."""
    folder = tmp_path / "run"
    first = subprocess.Popen(_command("train", "--out", str(folder), *LONG), stdout=subprocess.DEVNULL)
    reaper.append(first)
    _wait_for(lambda: _rows(folder) >= 1, first)
    first.send_signal(signal.SIGSTOP)  # holding its lock, mid-run, until it is killed (it trains nothing meanwhile)
    before = (folder / "config.json").read_bytes()
    for argv in (
        ["train", "--out", str(folder), *LONG],
        ["train", "--out", str(folder), "--overwrite", *LONG],
        ["train", "--resume", str(folder)],
    ):
        err = _refused(argv, capsys, f"{folder} is in use by another training run (pid {first.pid} on host ")
        assert "train --out" in err and f"kill {first.pid}" in err
    assert (folder / "config.json").read_bytes() == before and first.poll() is None
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert (folder / "run.lock").exists()  # left behind, but no longer held
    with run_lock.RunLock(folder, create=False) as lock:
        assert lock.taken_over is not None and lock.taken_over["pid"] == first.pid


def test_a_run_is_tied_to_its_cache_by_content(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """config.json records the cache's content digest: a resume on a cache of the same models but other contents is
    refused; evaluating on one is allowed (its questions are new) and said so."""
    from ensemble_env.cache import save_cache
    from ensemble_env.cache.digest import cache_digest

    toy = datasets.load("toy8")
    assert runs.read_config(run).digest == cache_digest(toy)
    labels = np.asarray(toy.labels).copy()
    labels[:5] = (labels[:5] + 1) % np.asarray(toy.n_choices)[:5]
    other = tmp_path / "other.h5"
    save_cache(other, dataclasses.replace(toy, labels=labels))
    _refused(["train", "--resume", str(run), "--cache", str(other)], capsys, "run.digest: the run trained on a cache")
    assert main(["evaluate", str(run), "--cache", str(other), "--no-baselines", "--json"]) == 0
    assert "is not the cache the run trained on" in capsys.readouterr().err
    # a run that records no cache path (one given in memory) is not evaluated on the default cache behind its back
    recorded = json.loads((run / "config.json").read_text())["run"]["cache"]
    _edit_json(run / "config.json", lambda data: {**data, "run": {**data["run"], "cache": None}})
    _refused(["evaluate", str(run), "--no-baselines"], capsys, "run.cache: null, and the run's digest")
    assert main(["evaluate", str(run), "--cache", "toy8", "--no-baselines", "--json"]) == 0
    _edit_json(run / "config.json", lambda data: {**data, "run": {**data["run"], "cache": recorded}})
    _edit_json(run / "config.json", lambda data: {**data, "run": {**data["run"], "digest": "beef"}})
    _refused(["evaluate", str(run), "--no-baselines"], capsys, "run.digest: expected the cache's sha256 digest")
