"""Tests of the ``ensemble-env cache`` command group (ensemble_env.cli.cache), run through ``cli.main``.

The lm-eval samples files come from the hand-written pool of tests/cache/test_convert.py (written into tmp_path);
accuracies there: org__alpha 3/5 on colors and 3/4 on numbers, org__beta 2/5 and 1/4.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from testing.conversions import BBH_DATA, LABELS, SPLIT, digest, records, write_run, write_samples

from ensemble_env.cache import LogitCache, default_cache_path, load_cache, save_cache
from ensemble_env.cli import main
from ensemble_env.cli.cache_actions import ProgressBar


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")


@pytest.fixture
def converted(tmp_path: Path, samples: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "pool.h5"
    assert run(capsys, "cache", "from-lm-eval", samples, "-o", out, "--validation-fraction", "0")[0] == 0
    return out


def test_help_lists_the_cache_actions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0 and "cache" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["cache", "--help"])
    text = capsys.readouterr().out
    for action in ("from-lm-eval", "from-arrays", "info", "validate", "split", "features", "plot"):
        assert action in text
    with pytest.raises(SystemExit):
        main(["cache", "from-lm-eval", "--help"])
    text = capsys.readouterr().out
    assert "samples_<task>_<date>.jsonl" in text and "<model_args>_<task>.jsonl" in text
    assert "  ensemble-env cache from-lm-eval ../shared/data/bbh-leaderboard -o bbh.h5\n" in text  # kept as written


def test_from_lm_eval_writes_the_cache(
    converted: Path, samples: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cache = load_cache(converted)
    assert cache.labels.tolist() == LABELS and cache.split.tolist() == SPLIT
    assert cache.models == ("org__alpha", "org__beta") and cache.task_names == ("colors", "numbers")
    code, out, _ = run(
        capsys, "cache", "from-lm-eval", samples / "org__beta", "-o", tmp_path / "b.h5", "--tasks", "colors"
    )
    assert code == 0  # by default, bbh5's proportions: the last 20% test, the last 20% of the rest validation
    assert out.startswith(f"wrote {tmp_path / 'b.h5'}: 5 questions x 1 models, 1 tasks, 2-3 choices; split 3 train")
    assert load_cache(tmp_path / "b.h5").split.tolist() == [0, 0, 0, 2, 1]
    code, _, _ = run(
        capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "c.h5", "--strip-prefix", "", "--split-seed", "4"
    )
    assert code == 0 and load_cache(tmp_path / "c.h5").task_names == ("suite_colors", "suite_numbers")


def test_old_layout_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write_run(tmp_path / "old", layout="old")
    code, _, err = run(capsys, "cache", "from-lm-eval", old, "-o", tmp_path / "old.h5", "--normalize", "bytes")
    assert code == 0, err
    assert load_cache(tmp_path / "old.h5").scores[4, 0, :2].tolist() == [-0.6, -1.0]


def test_malformed_input_leaves_no_output(tmp_path: Path, samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = records("org__beta", "suite_numbers")
    rows[1]["filtered_resps"][0][0] = "NaN"
    bad = write_samples(samples / "org__beta", "org__beta", "suite_numbers", rows)
    before = digest(samples)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = run(capsys, "cache", "from-lm-eval", samples, "-o", out_dir / "pool.h5")
    assert code == 2 and out == ""
    assert err.startswith("ensemble-env cache: error: ")
    assert f"{bad}, line 2: field 'filtered_resps': choice 0: log-likelihood 'NaN' is not finite" in err
    assert list(out_dir.iterdir()) == []  # neither the cache nor a temporary file
    assert digest(samples) == before


def test_failed_conversion_keeps_an_existing_output(
    tmp_path: Path, samples: Path, tiny_cache: LogitCache, capsys: pytest.CaptureFixture[str]
) -> None:
    out = save_cache(tmp_path / "pool.h5", tiny_cache)
    before = out.read_bytes()
    (samples / "org__alpha" / "samples_suite_colors_2024-07-01T12-30-45.123456.jsonl").write_text("{\n")
    assert run(capsys, "cache", "from-lm-eval", samples, "-o", out)[0] == 2
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.h5", "run"]


def test_intersect_prints_the_count_dropped(samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = samples / "org__alpha" / "samples_suite_numbers_2024-07-01T12-30-45.123456.jsonl"
    path.write_text("".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "x.h5")
    assert code == 2 and "model 'org__alpha'" in err and "lacks 2 (doc_id 2, 3)" in err and "--intersect" in err
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "x.h5", "--intersect")
    assert code == 0
    assert "--intersect: dropped 2 of 9 questions (2 missing for some model, 0 with differing" in err
    assert load_cache(tmp_path / "x.h5").n_questions == 7


def test_progress_bar(samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "p.h5", "--progress")
    assert code == 0 and "reading samples [" in err and "] 4/4" in err and err.endswith("\n")
    assert run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "q.h5")[2] == ""  # not a terminal
    stream = io.StringIO()
    bar = ProgressBar("files", stream, enabled=True, width=10)
    bar(0, 4, "a")
    bar(2, 4, "b")
    bar(4, 4)
    assert stream.getvalue().split("\r")[1:] == [
        "files [..........] 0/4 a" + " " * 49,
        "files [#####.....] 2/4 b" + " " * 49,
        "files [##########] 4/4 " + " " * 50 + "\n",
    ]
    quiet = io.StringIO()
    ProgressBar("files", quiet)(1, 2)  # a StringIO is not a terminal: nothing drawn
    assert quiet.getvalue() == ""


def test_info_shows_the_baselines_table(converted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cache", "info", converted)
    assert code == 0
    assert "9 questions, 2 models, 2 tasks, score_kind 'loglik', splits: 7 train, 2 test" in out
    assert "m0 org__alpha (accuracy 0.667)" in out and "m1 org__beta (accuracy 0.333)" in out
    assert "best_single = org__alpha, chosen on train" in out
    lines = out.split("\n")
    assert next(line for line in lines if line.startswith("task ")).split() == [
        "task", "n", "C", "m0", "m1", "plurality", "mean_prob", "best_single", "oracle",
    ]  # fmt: skip
    colors = next(line for line in lines if line.startswith("colors")).split()
    assert colors[:5] == ["colors", "5", "2-3", "0.600", "0.400"] and colors[-1] == "1.000"  # oracle
    numbers = next(line for line in lines if line.startswith("numbers")).split()
    assert numbers[:5] == ["numbers", "4", "2-4", "0.750", "0.250"] and numbers[-1] == "1.000"


def test_info_json(converted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cache", "info", converted, "--json", "--split", "test")
    assert code == 0
    summary = json.loads(out)
    assert summary["n_eval"] == 2 and summary["split"] == "test"
    assert [task["models"] for task in summary["tasks"]] == [
        {"org__alpha": 0.0, "org__beta": 1.0},
        {"org__alpha": 1.0, "org__beta": 0.0},
    ]


def test_validate(
    converted: Path,
    write_cache: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    code, out, _ = run(capsys, "cache", "validate", converted)
    assert code == 0 and out.startswith(f"ok {converted}: 9 questions x 2 models") and "checksums" not in out
    broken = write_cache("broken.h5", labels=np.array([0, 1, 2, 2, 0, 2]))  # question 3 has 2 choices
    corrupted = tmp_path / "corrupted.h5"
    corrupted.write_bytes(converted.read_bytes()[:-100])  # truncated
    plain = write_cache("plain.h5")  # h5py's defaults: valid, without checksums
    caches = [broken, corrupted, tmp_path, tmp_path / "absent.h5", converted, plain]
    code, out, err = run(capsys, "cache", "validate", *caches)
    assert code == 2
    assert out.splitlines()[0].startswith(f"ok {converted}: 9 questions")  # checked after four bad ones
    assert out.splitlines()[1].startswith(f"ok {plain}: 6 questions") and "(no HDF5 checksums" in out
    lines = err.splitlines()
    assert lines[0] == f"INVALID {broken}: field 'labels': question 3 has label 2, outside 0..1"
    assert lines[1].startswith(f"INVALID {corrupted}: ") and len(lines[1]) < 400
    assert lines[2] == f"INVALID {tmp_path}: is a folder, not a cache file"
    assert "absent.h5: no such cache file" in lines[3]
    assert lines[4:] == ["4 of 6 caches are invalid"]


def test_split_writes_a_copy(converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = converted.read_bytes()
    out = tmp_path / "resplit.h5"
    code, text, _ = run(
        capsys, "cache", "split", converted, "-o", out, "--test-fraction", "0.4", "--validation-fraction", "0.2"
    )
    assert code == 0 and "split 3 train, 4 test, 2 validation" in text
    resplit = load_cache(out)
    # colors (5): floor(0.6 * 5) = 3 not test, of which floor(0.8 * 3) = 2 train, 1 validation, 2 test;
    # numbers (4): floor(0.6 * 4) = 2 not test, floor(0.8 * 2) = 1 train, 1 validation, 2 test
    assert resplit.split.tolist() == [0, 0, 2, 1, 1, 0, 2, 1, 1]
    assert "re-split per task: last 0.4 in cache order is test, last 0.2 of the rest in cache order" in resplit.source
    assert resplit.question_text == load_cache(converted).question_text
    np.testing.assert_array_equal(resplit.scores, load_cache(converted).scores)
    assert converted.read_bytes() == before
    code, _, _ = run(capsys, "cache", "split", converted, "-o", tmp_path / "seeded.h5", "--seed", "5")
    assert code == 0 and (load_cache(tmp_path / "seeded.h5").split == 1).sum() == 2
    code, _, err = run(capsys, "cache", "split", converted, "-o", converted)
    assert code == 2 and "would overwrite the input" in err and converted.read_bytes() == before


def test_bad_fraction_is_refused(converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "cache", "split", converted, "-o", tmp_path / "x.h5", "--test-fraction", "1.5")
    assert code == 2 and "test_fraction must be a number in [0, 1], got 1.5" in err
    assert not (tmp_path / "x.h5").exists()


def test_from_arrays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "scores.csv").write_text("0.2,0.8,0.6,0.4\n0.7,0.3,0.1,0.9\n", encoding="utf-8")
    (tmp_path / "labels.txt").write_text("1\n1\n", encoding="utf-8")
    out = tmp_path / "arrays.h5"
    code, text, _ = run(
        capsys, "cache", "from-arrays", tmp_path / "scores.csv", "--labels", tmp_path / "labels.txt",
        "--models", "a,b", "--score-kind", "prob", "-o", out,
    )  # fmt: skip
    assert code == 0 and text.startswith(f"wrote {out}: 2 questions x 2 models")
    assert load_cache(out).preds.tolist() == [[1, 0], [0, 1]]
    code, _, err = run(capsys, "cache", "from-arrays", tmp_path / "scores.csv", "--score-kind", "prob", "-o", out)
    assert code == 2 and "field 'labels': missing" in err


def test_plot(converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    code, out, _ = run(capsys, "cache", "plot", converted, "-o", tmp_path / "plots", "--dpi", "60")
    assert code == 0
    names = sorted(path.name for path in (tmp_path / "plots").iterdir())
    assert names == ["accuracy_by_task.png", "error_correlation.png", "teams_by_size.png"]
    assert out.count("wrote ") == 3


def test_plot_without_matplotlib(
    converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    code, _, err = run(capsys, "cache", "plot", converted, "-o", tmp_path / "plots")
    assert code == 2 and 'needs matplotlib, which is not installed (the plot extra): pip install -e ".[plot]"' in err


@pytest.mark.slow
def test_real_bbh_info_shows_every_task_with_the_baselines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (BBH_DATA / "reference_accuracy.json").is_file():
        pytest.skip(f"the BBH samples are not at {BBH_DATA} (set ENSEMBLE_ENV_BBH_DATA to their folder)")
    out = tmp_path / "bbh.h5"
    code, text, _ = run(capsys, "cache", "from-lm-eval", BBH_DATA, "-o", out)
    # by default bbh5's split (160 train, 40 validation, 50 test per task), so that `benchmark` takes the cache
    assert code == 0 and "4000 questions x 5 models, 16 tasks, 2-19 choices; split 2560 train, 800 test, 640" in text
    converted, shipped = load_cache(out), load_cache(default_cache_path())
    np.testing.assert_array_equal(converted.split, shipped.split)  # the same splits: the same static_team
    code, text, _ = run(capsys, "cache", "info", out)
    assert code == 0
    lines = text.split("\n")
    header = next(line for line in lines if line.startswith("task "))
    assert header.split()[-4:] == ["plurality", "mean_prob", "best_single", "oracle"]
    reference = json.loads((BBH_DATA / "reference_accuracy.json").read_text(encoding="utf-8"))
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 2 :] if line.split()}
    assert set(reference) <= set(rows) and all(len(rows[task]) == 3 + 5 + 4 for task in reference)


# -- validation split, question text, features ---------------------------------------------------------------


def test_from_lm_eval_validation_fraction_and_text_features(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sklearn")
    out = tmp_path / "featured.h5"
    code, text, err = run(
        capsys, "cache", "from-lm-eval", samples, "-o", out, "--validation-fraction", "0.5", "--features", "text",
        "--n-features", "2",
    )  # fmt: skip
    assert code == 0, err
    assert "split 3 train, 2 test, 4 validation; question text, 2 features (text-tfidf-svd)" in text
    cache = load_cache(out)
    assert cache.split.tolist() == [0, 0, 2, 2, 1, 0, 2, 2, 1]  # per task by doc_id (tests/cache/test_convert.py)
    assert cache.question_text is not None and cache.question_text[0] == "suite_colors question 0"
    assert cache.features is not None and cache.features.shape == (9, 2) and cache.features.dtype == np.float32
    assert cache.feature_kind == "text-tfidf-svd" and cache.feature_names == ("text_svd_0", "text_svd_1")
    code, text, _ = run(capsys, "cache", "info", out)
    assert code == 0 and "  question text: yes; features: 2 (text-tfidf-svd)\n" in text
    # 3 train questions: 3 features cannot be fitted; nothing is written
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "x.h5", "--validation-fraction",
                       "0.5", "--features", "text", "--n-features", "3")  # fmt: skip
    assert code == 2 and "n_features=3 needs more questions to fit on than features, got 3" in err
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / "x.h5", "--n-features", "3")
    assert code == 2 and "--n-features goes with --features text" in err
    assert not (tmp_path / "x.h5").exists()


def test_features_from_text_and_from_a_file(
    converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sklearn")
    before = converted.read_bytes()
    code, text, err = run(capsys, "cache", "features", converted, "--from", "text", "--n-features", "3", "-o",
                          tmp_path / "t.h5")  # fmt: skip
    assert code == 0, err
    assert (
        text == f"wrote {tmp_path / 't.h5'}: 9 questions x 2 models, 2 tasks, 2-4 choices; split 7 train, "
        "2 test, 0 validation; question text, 3 features (text-tfidf-svd)\n"
    )
    from_text = load_cache(tmp_path / "t.h5")
    assert from_text.features.shape == (9, 3)  # type: ignore[union-attr]
    again = tmp_path / "again.h5"
    assert run(capsys, "cache", "features", converted, "--from", "text", "--n-features", "3", "-o", again)[0] == 0
    np.testing.assert_array_equal(load_cache(again).features, from_text.features)  # deterministic
    np.save(tmp_path / "emb.npy", np.arange(18, dtype=np.float64).reshape(9, 2))
    code, _, err = run(capsys, "cache", "features", tmp_path / "t.h5", "--from", tmp_path / "emb.npy", "--kind", "emb",
                       "-o", tmp_path / "e.h5")  # fmt: skip
    assert code == 0, err
    replaced = load_cache(tmp_path / "e.h5")
    assert replaced.features.dtype == np.float32 and replaced.features.tolist()[1] == [2.0, 3.0]  # type: ignore
    assert replaced.feature_kind == "emb" and replaced.feature_names is None
    assert "features: 2 from emb.npy" in replaced.source and str(tmp_path) not in replaced.source
    assert converted.read_bytes() == before  # the input is only read


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((8, 2)), r"emb.npy: shape (8, 2) is not (Q, F) with Q=9"),
        (np.where(np.arange(18).reshape(9, 2) == 5, np.nan, 1.0), "emb.npy: question 2, column 1: the value nan"),
    ],
)
def test_bad_feature_file_leaves_no_output(
    converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], array: np.ndarray, message: str
) -> None:
    np.save(tmp_path / "emb.npy", array)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = run(capsys, "cache", "features", converted, "--from", tmp_path / "emb.npy", "-o", out_dir / "f.h5")
    assert code == 2 and out == "" and message in err
    assert list(out_dir.iterdir()) == []


def test_features_refusals(
    converted: Path, tiny_cache: LogitCache, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_text = save_cache(tmp_path / "no_text.h5", tiny_cache)
    cases = [
        ((no_text, "--from", "text"), "field 'question_text': missing"),
        ((converted, "--from", "emb.csv"), "--from: expected 'text' or a .npy file, got"),
        ((converted, "--from", tmp_path / "absent.npy"), "absent.npy: no such file"),
        ((converted, "--from", tmp_path / "x.npy", "--n-features", "2"), "--n-features goes with --from text"),
        ((converted, "--from", "text", "--kind", "k"), "--kind goes with --from FILE.npy"),
    ]
    for arguments, message in cases:
        code, _, err = run(capsys, "cache", "features", *arguments, "-o", tmp_path / "out.h5")
        assert code == 2 and message in err, (arguments, err)
    code, _, err = run(capsys, "cache", "features", converted, "--from", "text", "-o", converted)
    assert code == 2 and "would overwrite the input" in err
    assert not (tmp_path / "out.h5").exists()


def test_features_without_scikit_learn(
    converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("sklearn", "sklearn.decomposition", "sklearn.feature_extraction.text"):
        monkeypatch.setitem(sys.modules, module, None)
    code, _, err = run(
        capsys, "cache", "features", converted, "--from", "text", "--n-features", "2", "-o", tmp_path / "f.h5"
    )
    assert code == 2 and 'pip install -e ".[data]"' in err and err.startswith("ensemble-env cache features:")
    assert not (tmp_path / "f.h5").exists()


def test_commands_take_built_in_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cache", "info", "bbh5", "--split", "test")
    assert code == 0 and "4000 questions, 5 models, 16 tasks" in out
    assert "  question text: yes; features: 64 (text-tfidf-svd)\n" in out
    code, out, _ = run(capsys, "cache", "validate", "toy8", "bbh5")
    assert code == 0 and out.startswith("ok toy8: 3136 questions x 8 models") and "\nok bbh5: 4000 questions" in out
    code, out, _ = run(capsys, "cache", "split", "toy8", "-o", tmp_path / "toy.h5", "--validation-fraction", "0.25")
    assert code == 0 and load_cache(tmp_path / "toy.h5").n_questions == 3136
    code, _, err = run(capsys, "cache", "info", "bbh6")
    assert code == 2 and "not a built-in cache (the built-in caches are toy8, bbh5)" in err


def test_split_warns_that_text_features_follow_the_old_train_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "cache", "split", "bbh5", "-o", tmp_path / "b.h5", "--test-fraction", "0.3")
    assert code == 0 and "fitted on the old train split" in err and "cache features" in err


@pytest.mark.slow
def test_real_bbh_text_features_are_stored_and_reproducible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bbh5_build: LogitCache
) -> None:
    """The command's text features, and the same computed again by scripts/build_bbh5.py (the session's
    ``bbh5_build``, which runs the converter and the feature code as this command does): bit-identical."""
    before = digest(BBH_DATA)
    code, _, err = run(capsys, "cache", "from-lm-eval", BBH_DATA, "-o", tmp_path / "one.h5", "--features", "text")
    assert code == 0, err  # by default bbh5's split: 0.2 test, 0.2 of the rest validation
    one, two = load_cache(tmp_path / "one.h5"), bbh5_build
    assert digest(BBH_DATA) == before
    np.testing.assert_array_equal(one.features, two.features)
    assert one.features is not None and one.features.shape == (4000, 64) and np.isfinite(one.features).all()
    assert (one.features.std(axis=0) > 0.1).all()  # no constant column
    first = next((BBH_DATA / "google__gemma-7b").glob("samples_leaderboard_bbh_boolean_expressions_*.jsonl"))
    inputs = [json.loads(line)["doc"]["input"] for line in first.read_text(encoding="utf-8").splitlines()]
    assert one.question_text is not None and list(one.question_text[:250]) == inputs
    assert {code: int((one.split == code).sum()) for code in (0, 1, 2)} == {0: 2560, 1: 800, 2: 640}
