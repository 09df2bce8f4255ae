"""Run files of the reference learner: checkpoints refused clearly when damaged, logs never truncated."""

from __future__ import annotations

import csv
import os
import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ensemble_mappo.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from ensemble_mappo.loggers import ProgressLog  # noqa: E402


def _checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"networks": {"decider": {"w": torch.arange(1000.0)}}, "iteration": 3})
    return path


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "pickle"])
def test_a_damaged_checkpoint_is_refused_clearly(tmp_path: Path, damage: str) -> None:
    path = _checkpoint(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        for at in range(40, len(data), 97):
            data[at] ^= 0xFF
    elif damage == "garbage":
        data = bytearray(b"not a checkpoint at all")
    else:  # a pickle that would run code: weights_only refuses it, and we say so without advising otherwise
        data = bytearray(pickle.dumps({"networks": Path("x")}))
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"checkpoint\.pt is not a readable checkpoint") as error:
        load_checkpoint(path)
    assert "weights_only=False" not in str(error.value) and len(str(error.value)) < 500


def test_an_intact_checkpoint_loads(tmp_path: Path) -> None:
    assert load_checkpoint(_checkpoint(tmp_path))["iteration"] == 3


def test_a_checkpoint_leaves_no_temporary_and_removes_a_dead_writers(tmp_path: Path) -> None:
    stale = tmp_path / ".checkpoint.pt.999999999.abcdefgh.tmp"  # atomic_path's name, from a process that is gone
    stale.write_text("left by a killed writer")
    path = _checkpoint(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["checkpoint.pt"]
    before = path.read_bytes()
    with pytest.raises(RuntimeError):  # torch.save fails half-way: the previous checkpoint stays as it was
        save_checkpoint(path, {"networks": {}, "bad": _Unsaveable()})
    assert sorted(path.name for path in tmp_path.iterdir()) == ["checkpoint.pt"]
    assert path.read_bytes() == before


class _Unsaveable:
    def __reduce__(self) -> tuple[object, ...]:
        raise RuntimeError("interrupted")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_checkpoint_whose_weights_are_not_finite_is_refused_naming_the_tensor(tmp_path: Path, value: float) -> None:
    weights = torch.ones(4, 3)
    weights[1, 2] = value
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"networks": {"decider": {"net.0.weight": weights}}, "iteration": 3})
    with pytest.raises(ValueError, match=r"checkpoint\.pt: networks\.decider\.net\.0\.weight holds 1 of 12 values"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    "networks",
    [[], {"decider": "weights"}, {"decider": {"w": [1.0]}}, {"decider": {"w": torch.zeros(2, dtype=torch.complex64)}}],
    ids=["list", "module-not-a-dict", "tensor-not-a-tensor", "complex"],
)
def test_networks_of_anything_but_real_tensors_are_refused(tmp_path: Path, networks: object) -> None:
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"networks": networks})
    with pytest.raises(ValueError, match=r"checkpoint\.pt: networks"):
        load_checkpoint(path)


def test_a_checkpoint_that_is_not_a_regular_file_is_refused_without_reading(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "checkpoint.pt")  # reading a FIFO would block for ever
    with pytest.raises(ValueError, match="not a regular file"):
        load_checkpoint(tmp_path)


def test_resuming_keeps_the_progress_history(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    log = ProgressLog(path, ["iteration", "global_step", "loss"], None)
    for i in range(1, 6):
        log.write({"iteration": i, "global_step": 10 * i, "loss": 0.5})
    log.close()
    resumed = ProgressLog(path, ["iteration", "global_step", "loss"], 3)  # the checkpoint was at 3
    with path.open(newline="") as file:  # before any new row: the history up to the checkpoint is on disk
        assert [row["iteration"] for row in csv.DictReader(file)] == ["1", "2", "3"]
    resumed.write({"iteration": 4, "global_step": 40, "loss": 0.25})
    resumed.close()
    with path.open(newline="") as file:
        assert [row["iteration"] for row in csv.DictReader(file)] == ["1", "2", "3", "4"]
