"""Run files of the reference learner: checkpoints refused clearly when damaged, logs never truncated."""

from __future__ import annotations

import csv
import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ensemble_mappo.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from ensemble_mappo.files import atomic_write  # noqa: E402
from ensemble_mappo.progress import ProgressLog  # noqa: E402


def _checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"networks": {"w": torch.arange(1000.0)}, "iteration": 3})
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


def test_atomic_write_leaves_no_temporary_and_removes_a_dead_writers(tmp_path: Path) -> None:
    stale = tmp_path / ".log.txt.999999999.abcdefgh.tmp"  # the name atomic_path gives, from a process that is gone
    stale.write_text("left by a killed writer")
    atomic_write(tmp_path / "log.txt", lambda file: file.write(b"ok"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["log.txt"]
    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "log.txt", lambda file: (_ for _ in ()).throw(RuntimeError("interrupted")))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["log.txt"]
    assert (tmp_path / "log.txt").read_bytes() == b"ok"


def test_resuming_keeps_the_progress_history(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    log = ProgressLog(path, ["iteration", "global_step", "loss"], None, False)
    for i in range(1, 6):
        log.write({"iteration": i, "global_step": 10 * i, "loss": 0.5})
    log.close()
    resumed = ProgressLog(path, ["iteration", "global_step", "loss"], 3, False)  # the checkpoint was at 3
    with path.open(newline="") as file:  # before any new row: the history up to the checkpoint is on disk
        assert [row["iteration"] for row in csv.DictReader(file)] == ["1", "2", "3"]
    resumed.write({"iteration": 4, "global_step": 40, "loss": 0.25})
    resumed.close()
    with path.open(newline="") as file:
        assert [row["iteration"] for row in csv.DictReader(file)] == ["1", "2", "3", "4"]
