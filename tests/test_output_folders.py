"""The benchmark scripts' output folders and arguments (issue 49, "Reliability round 5", classes 1, 4 and 5).

- One rule for an output folder (:func:`ensemble_env.files.output_folder`): a script writes only into a new or empty
  folder, which it marks as its own, or into one it marked before; a folder of another command's files (a ``train``
  run, the other script's outputs, anything unmarked) is refused in one line naming ``--out``, and nothing in it
  changes.
- ``small_sample.py`` keeps each cut with the arguments it was cut with and refuses a cut of another cache or seed.
- ``partial_selection.py --set``: a setting without its colon, a field given twice, ``seed`` and ``env.alpha`` are
  refused; ``checkpoints`` and ``passes`` reach the runs.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from testing.benchmarks import fake_benchmark, folder_snapshot, import_benchmark, train_run

from ensemble_env.cache import save_cache
from ensemble_env.cache.logit_cache import SPLITS
from ensemble_env.files import OUTPUT_MARK, OutputError, output_folder
from ensemble_env.synthetic import make_cache

pytest.importorskip("torch")  # the scripts import the learner


@pytest.fixture
def partial_selection(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    yield import_benchmark(monkeypatch, "partial_selection")
    sys.modules.pop("partial_selection", None)


@pytest.fixture
def small_sample(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    module = import_benchmark(monkeypatch, "small_sample")
    monkeypatch.setattr(module, "benchmark", fake_benchmark)  # the stress's benchmark runs: not these tests' subject
    yield module
    sys.modules.pop("small_sample", None)


def small_cache(n_tasks: int = 8):
    cache = make_cache(n_models=3, n_questions=40 * n_tasks, n_tasks=n_tasks, accuracy=[0.5, 0.6, 0.7], seed=3)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == SPLITS["train"])[::5]] = SPLITS["validation"]
    return dataclasses.replace(cache, split=split)


def run(main: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    return int(code or 0), capsys.readouterr().err


# -- the rule --------------------------------------------------------------------------------------------------------
def test_a_new_or_empty_folder_is_marked_and_taken_back_by_its_command_only(tmp_path: Path) -> None:
    made = output_folder(tmp_path / "new" / "sel", "partial_selection.py")
    assert json.loads((made / OUTPUT_MARK).read_text(encoding="utf-8")) == {"command": "partial_selection.py"}
    (made / "selection.json").write_text("{}", encoding="utf-8")
    assert output_folder(made, "partial_selection.py") == made  # a rerun: its own folder
    with pytest.raises(OutputError, match=r"holds the outputs of partial_selection\.py \(made-by\.json\)"):
        output_folder(made, "small_sample.py")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert output_folder(empty, "small_sample.py") == empty and (empty / OUTPUT_MARK).is_file()


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "train run",
            r"holds files small_sample\.py did not write \(checkpoints, config\.json, progress\.csv, \.\.\.\)",
        ),
        ("a file", "is not a folder"),
        ("under a file", "is a file, not a folder"),
        ("empty path", "--out is empty"),
        ("a mark that is a folder", "which is not the mark of a command"),
        ("a mark that is garbage", "which is not the mark of a command"),
        ("a mark that is a link", "which is not the mark of a command"),
        ("a mark without a command", "which is not the mark of a command"),
    ],
)
def test_a_folder_of_other_files_is_refused_in_one_line_and_left_as_it_was(
    tmp_path: Path, kind: str, message: str
) -> None:
    target = tmp_path / "out"
    if kind == "train run":
        train_run(target)
    elif kind in ("a file", "under a file"):
        (tmp_path / "file").write_text("x", encoding="utf-8")
        target = tmp_path / "file" if kind == "a file" else tmp_path / "file" / "out"
    elif kind == "empty path":
        target = Path("")
    else:
        target.mkdir()
        mark = target / OUTPUT_MARK
        if kind == "a mark that is a folder":
            mark.mkdir()
        elif kind == "a mark that is garbage":
            mark.write_bytes(b"\xff\x00not json")
        elif kind == "a mark that is a link":
            (tmp_path / "elsewhere.json").write_text('{"command": "small_sample.py"}', encoding="utf-8")
            mark.symlink_to(tmp_path / "elsewhere.json")
        else:
            mark.write_text('{"by": "small_sample.py"}', encoding="utf-8")
    before = folder_snapshot(tmp_path)
    with pytest.raises(OutputError, match=message) as caught:
        output_folder(target if kind != "empty path" else "", "small_sample.py")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("--out")
    assert folder_snapshot(tmp_path) == before


def test_a_read_only_folder_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from ensemble_env import files

    target = tmp_path / "out"
    target.mkdir()

    def read_only(path: Any, text: str) -> Path:
        raise OutputError(f"{path}: cannot write: Read-only file system", errno.EROFS)

    monkeypatch.setattr(files, "write_text", read_only)
    with pytest.raises(OutputError, match=r"^--out .*out: .*made-by\.json: cannot write: Read-only file system$"):
        output_folder(target, "small_sample.py")


# -- class 1: partial_selection.py over a train run -----------------------------------------------------------------
def test_partial_selection_never_writes_over_a_train_run(partial_selection, tmp_path: Path, capsys) -> None:
    path = save_cache(tmp_path / "c.h5", small_cache())
    run_dir = train_run(tmp_path / "run")
    before = folder_snapshot(run_dir)
    code, err = run(
        partial_selection.main, ["--cache", str(path), "--set", "a: gamma=0.5", "--out", str(run_dir)], capsys
    )
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"partial_selection.py: error: --out {run_dir}: the folder holds files partial_selection.py")
    assert folder_snapshot(run_dir) == before  # selection.json, config.json, ... untouched; no mark, no lock left


def test_small_sample_never_writes_over_the_other_script_s_folder(small_sample, tmp_path: Path, capsys) -> None:
    path = save_cache(tmp_path / "c.h5", small_cache())
    other = output_folder(tmp_path / "sel", "partial_selection.py")
    (other / "selection.json").write_text("{}", encoding="utf-8")
    before = folder_snapshot(other)
    code, err = run(small_sample.main, ["--cache", str(path), "--sizes", "10", "--seeds", "1", "--out", str(other)],
                    capsys)  # fmt: skip
    assert code == 2 and "holds the outputs of partial_selection.py (made-by.json)" in err, err
    assert folder_snapshot(other) == before


# -- class 4: small_sample.py's cuts and their arguments ------------------------------------------------------------
def test_a_cut_is_reused_only_with_the_arguments_it_was_cut_with(small_sample, tmp_path: Path, capsys) -> None:
    first = save_cache(tmp_path / "a.h5", small_cache())
    second = save_cache(tmp_path / "b.h5", small_cache(n_tasks=6))
    out = tmp_path / "stress"
    argv = ["--sizes", "10", "--seeds", "1", "--out", str(out)]
    assert run(small_sample.main, [*argv, "--cache", str(first)], capsys)[0] == 0
    record = json.loads((out / "cut10.json").read_text(encoding="utf-8"))
    assert (record["size"], record["cut_seed"], record["cache"]) == (10, 0, str(first))
    kept = folder_snapshot(out)
    assert run(small_sample.main, [*argv, "--cache", str(first)], capsys)[0] == 0  # the same arguments: reused
    assert folder_snapshot(out) == kept
    for extra, differs in (
        (["--cache", str(second)], f"was cut with cache {str(first)!r} (digest {record['digest'][:12]}), not cache"),
        (["--cache", str(first), "--cut-seed", "1"], "was cut with --cut-seed 0, not --cut-seed 1"),
    ):
        code, err = run(small_sample.main, [*argv, *extra], capsys)
        assert code == 2 and differs in err and err.count("\n") == 1, err
        assert folder_snapshot(out) == kept  # the old cut and its runs are left as they were
    (out / "cut10.json").unlink()  # a cut whose record is gone: its arguments are unknown
    code, err = run(small_sample.main, [*argv, "--cache", str(first)], capsys)
    assert code == 2 and "has no record of the arguments it was cut with" in err, err


def test_a_bad_cut_seed_is_refused_naming_it(small_sample, tmp_path: Path, capsys) -> None:
    path = save_cache(tmp_path / "a.h5", small_cache())
    code, err = run(small_sample.main, ["--cache", str(path), "--out", str(tmp_path / "o"), "--cut-seed", "-1"], capsys)
    assert code == 2 and "--cut-seed: seed must be a non-negative integer" in err, err
    assert not (tmp_path / "o").exists()


# -- class 5: partial_selection.py --set ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("index", "expected NAME: FIELD=VALUE, ... (a colon after the name"),
        ('index decider_policy="index"', "expected NAME: FIELD=VALUE"),
        ("a: seed=3", "seed is set by the script (the seeds are --seeds's 0..S-1"),
        ("a: env.alpha=0.5", "env.alpha is set by the script"),
        ("a: gamma=0.5, gamma=0.9", "gamma is given twice"),
        ("a: checkpoints=-1", "checkpoints must be an integer >= 0"),
        ("a: passes=0", "passes must be a number"),
    ],
)
def test_a_setting_that_would_lose_a_field_is_refused(
    partial_selection, tmp_path: Path, capsys, setting: str, message: str
) -> None:
    path = save_cache(tmp_path / "c.h5", small_cache())
    code, err = run(partial_selection.main, ["--cache", str(path), "--set", setting, "--out", str(tmp_path / "o")],
                    capsys)  # fmt: skip
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()  # refused before the folder is made


def test_checkpoints_and_passes_of_a_setting_reach_its_runs(
    partial_selection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []

    def fake_answers(cache: Any, seed: int, alpha: float, out_dir: Path, **options: Any) -> None:
        seen.append({"seed": seed, **options})
        raise KeyboardInterrupt  # one run is enough to read its arguments

    monkeypatch.setattr(partial_selection, "learner_answers", fake_answers)
    settings = {"a": {"checkpoints": 2, "passes": 3.0}, "b": {"total_steps": 4096}}
    for name, fields in settings.items():
        seen.clear()
        with pytest.raises(KeyboardInterrupt):
            partial_selection.selection(small_cache(), {name: fields}, 1, tmp_path / name)
        (options,) = seen
        overrides = options["overrides"]
        if name == "a":
            assert options["checkpoints"] == 2 and options["passes"] == 3.0 and overrides["total_steps"] == 0
        else:
            passes, checkpoints = partial_selection.algorithms.get("mappo").budget("default")
            assert (options["passes"], options["checkpoints"], overrides["total_steps"]) == (passes, checkpoints, 4096)
