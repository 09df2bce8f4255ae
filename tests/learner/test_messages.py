"""Refusals that say what is wrong (issue 41, class 6): a damaged checkpoint's cause in one whole sentence, a
``checkpoints/deployed.pt`` that is a folder, a FIFO or a link to /dev/zero named as such (not "no checkpoint"), a
config file with a key given twice naming the key, and float labels in ``cache from-arrays`` naming the field."""

from __future__ import annotations

import collections
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env.cli import main  # noqa: E402
from ensemble_mappo.checkpoint import load_checkpoint  # noqa: E402

TINY = ["--cache", "toy8", "--total-steps", "512", "--num-envs", "16", "--num-steps", "32", "--no-progress"]


class Foreign:
    """An object a checkpoint never holds (a pickle of it is refused by ``weights_only=True``)."""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("messages") / "run"
    assert main(["train", "--out", str(out), *TINY, "--checkpoints", "1"]) == 0
    return out


def _one_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("ensemble-env: ")]  # status lines
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"ensemble-env {command}: error: "), err
    return lines[0]


def test_a_damaged_checkpoint_says_why_in_a_whole_sentence(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.pt"
    torch.save({"networks": collections.OrderedDict(), "extra": Foreign()}, foreign)
    arrays = tmp_path / "numpy.pt"
    torch.save({"networks": {}, "extra": np.arange(3)}, arrays)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"PK\x03\x04" + bytes(200))
    cut = tmp_path / "cut.pt"
    cut.write_bytes(arrays.read_bytes()[:300])
    expected = {
        foreign: f"it holds an object a checkpoint never holds: Unsupported global: GLOBAL {__name__}.Foreign was not "
        "an allowed global by default;",
        arrays: "it holds an object a checkpoint never holds: Unsupported global: GLOBAL numpy.",
        garbage: "PytorchStreamReader failed reading zip archive: failed finding central directory;",
        cut: "PytorchStreamReader failed reading zip archive: failed finding central directory;",
    }
    for path, cause in expected.items():
        with pytest.raises(ValueError) as refused:
            load_checkpoint(path)
        message = str(refused.value)
        assert message.startswith(f"{path} is not a readable checkpoint (damaged, truncated or not written"), message
        assert cause in message and message.endswith("; train again, or resume from an intact copy"), message
        assert "\x1b" not in message and "\n" not in message and "Please" not in message, message


@pytest.mark.parametrize("kind", ["folder", "fifo", "link to /dev/zero", "dangling link"])
def test_a_deployed_checkpoint_that_is_no_file_is_named_as_such(
    kind: str, run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    deployed = run / "checkpoints" / "deployed.pt"
    if kind == "folder":
        deployed.mkdir()
        expected = f"{deployed}: a folder, not a regular file; it is not read"
    elif kind == "fifo":
        os.mkfifo(deployed)
        expected = f"{deployed}: a FIFO (named pipe), not a regular file; it is not read"
    elif kind == "link to /dev/zero":
        deployed.symlink_to("/dev/zero")
        expected = f"{deployed}: a character device (a symbolic link to /dev/zero), not a regular file; it is not read"
    else:
        deployed.symlink_to(run / "gone.pt")
        expected = f"no checkpoint at {deployed}"
    assert main(["evaluate", str(run), "--checkpoint", "deployed", "--no-baselines"]) == 2
    assert _one_line(capsys, "evaluate") == f"ensemble-env evaluate: error: {expected}" + (
        ": train with `ensemble-env train --out DIR` first" if kind == "dangling link" else ""
    )
    shutil.rmtree(deployed) if kind == "folder" else deployed.unlink()
    assert main(["evaluate", str(run), "--checkpoint", "deployed", "--no-baselines"]) == 2  # really absent
    line = _one_line(capsys, "evaluate")
    assert "no checkpoint 'deployed'; the run's checkpoints are last, update_0, update_1" in line


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("twice.toml", "learning_rate = 1e-3\nseed = 1\nlearning_rate = 2e-3\n",
         r"twice\.toml: cannot parse the config \(line 3: the key learning_rate is set twice "
         r"\('learning_rate = 2e-3'\)\)"),
        ("env.toml", "[env]\nalpha = 1\nalpha = 2\n",
         r"env\.toml: cannot parse the config \(line 3: the key alpha is set twice \('alpha = 2'\)\)"),
        ("table.toml", "[env]\nalpha = 1\n[env]\n",
         r"table\.toml: cannot parse the config \(Cannot declare \('env',\) twice"),
        ("twice.json", '{"learning_rate": 0.001, "seed": 1, "learning_rate": 0.002}',
         r"twice\.json: the key 'learning_rate' appears twice in one object with different values "
         r"\(0\.001, then 0\.002\)"),
        ("nested.json", '{"env": {"alpha": 1, "alpha": 0.5}}', r"nested\.json: the key 'alpha' appears twice"),
    ],
)  # fmt: skip
def test_a_config_with_a_key_given_twice_names_the_key(
    name: str, text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / name
    config.write_text(text, encoding="utf-8")
    assert main(["train", "--out", str(tmp_path / "run"), "--config", str(config), *TINY]) == 2
    assert re.search(message, _one_line(capsys, "train")), message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("suffix", [".npy", ".txt"])
def test_float_labels_in_from_arrays_name_the_field(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "scores.npy", np.random.default_rng(0).random((4, 2, 3)))
    labels = tmp_path / f"labels{suffix}"
    if suffix == ".npy":
        np.save(labels, np.array([0.0, 1.0, 2.0, 1.0]))
        problem = "must hold integers, got dtype float64"
    else:
        labels.write_text("0\n1.0\n2\n1\n", encoding="utf-8")
        problem = "column 1: '1.0' is not an integer of 64 bits"
    argv = ["cache", "from-arrays", str(tmp_path / "scores.npy"), "--models", "a,b", "--labels", str(labels)]
    assert main([*argv, "--score-kind", "prob", "-o", str(tmp_path / "out.h5")]) == 2
    line = _one_line(capsys, "cache")
    where = f"{labels}" if suffix == ".npy" else f"{labels}, line 2"
    assert line == f"ensemble-env cache: error: {where}: field 'labels': {problem}", line
    assert not (tmp_path / "out.h5").exists()
