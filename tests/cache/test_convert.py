"""Tests of ensemble_env.cache.convert: lm-eval samples (both layouts) and arrays into logit caches.

The samples files are built here, in tmp_path, from the small hand-written pool of tests/testing/conversions.py (two
models, two tasks with 2 to 4 choices). The expected labels, predictions and splits are written by hand from that table.
The test against the real BBH files in ../shared/data/bbh-leaderboard is marked slow and skips without them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testing.conversions import (
    BBH_MODEL_ORDER,
    LABELS,
    MODELS,
    PREDS,
    SCORES,
    SPLIT,
    TASKS,
    digest,
    line_of,
    record_lines,
    records,
    write_alpha,
    write_run,
    write_samples,
)

from ensemble_env.cache.convert import (
    ConversionError,
    find_model_folders,
    find_task_files,
    from_array_files,
    from_arrays,
    from_lm_eval,
    read_samples,
    split_by_task,
    strip_task_prefix,
)

# -- the happy path --------------------------------------------------------------------------------------------------


def test_new_layout_converts_with_hand_checked_values(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    before = digest(run)
    cache = from_lm_eval([run])
    assert cache.models == MODELS
    assert cache.task_names == ("colors", "numbers")  # the common prefix "suite_" stripped
    assert cache.score_kind == "loglik"
    assert cache.scores.shape == (9, 2, 4)
    assert cache.labels.tolist() == LABELS
    assert cache.n_choices.tolist() == [2, 3, 2, 3, 2, 4, 2, 3, 2]
    assert cache.tasks.tolist() == [0] * 5 + [1] * 4
    assert cache.split.tolist() == SPLIT
    assert cache.preds.tolist() == PREDS
    assert cache.scores[1, 1, :3].tolist() == [-1.0, -0.5, -2.0]
    assert cache.scores[0, 0].tolist() == [-1.5, -0.5, -np.inf, -np.inf]  # padding beyond the choices
    assert cache.question_ids[0] == "hash-suite_colors-0" and cache.question_ids[8] == "hash-suite_numbers-3"
    assert cache.model_accuracy().tolist() == [6 / 9, 3 / 9]
    assert "last 0.2 by doc_id" in cache.source
    assert cache.question_text == tuple(f"{task} question {d}" for task in TASKS for d, _, _ in TASKS[task])
    assert digest(run) == before  # inputs are only read


def test_old_layout_converts_to_the_same_cache(tmp_path: Path) -> None:
    new = from_lm_eval([write_run(tmp_path / "new")])
    old = from_lm_eval([write_run(tmp_path / "old", layout="old")])
    for name in ("scores", "labels", "n_choices", "tasks", "split"):
        np.testing.assert_array_equal(getattr(old, name), getattr(new, name))
    assert old.models == new.models and old.task_names == new.task_names
    assert old.question_text == new.question_text  # doc["question"] in both layouts
    # no doc_hash in the old layout: "<task>/<doc_id>"
    assert old.question_ids is not None and old.question_ids[:2] == ("colors/0", "colors/1")


def test_old_layout_reads_one_json_array_with_native_numbers(tmp_path: Path) -> None:
    path = write_samples(tmp_path, "org__alpha", "suite_colors", records("org__alpha", "suite_colors", "old"), "old")
    assert path.read_text(encoding="utf-8").startswith("[\n  {")
    samples = read_samples(path)
    assert [s.label for s in samples] == LABELS[:5]
    assert samples[2].logliks == (-0.75, -1.25)
    assert [sample.line for sample in samples] == record_lines(path)
    assert samples[1].line == line_of(path, '"doc_id": 1') - 1  # the line of the record's "{"


def test_old_layout_task_names_come_from_results_or_tasks_option(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", layout="old", models=("org__alpha",), results=False)
    folder = run / "org__alpha"
    with pytest.raises(ConversionError, match=r"cannot tell the task from the file name.*results \.json.*--tasks"):
        find_task_files(folder)
    files = find_task_files(folder, known_tasks=["suite_colors", "suite_numbers"])
    assert sorted(files) == ["suite_colors", "suite_numbers"]
    cache = from_lm_eval([folder], tasks=["suite_numbers"])
    assert cache.task_names == ("suite_numbers",)  # one task: no prefix to strip
    assert cache.labels.tolist() == LABELS[5:]


def test_lines_in_any_order_and_blank_lines(tmp_path: Path) -> None:
    reference = from_lm_eval([write_run(tmp_path / "sorted")])
    run = write_run(tmp_path / "shuffled")
    for path in run.rglob("*.jsonl"):
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines[::-1]) + "\n\n", encoding="utf-8")
    cache = from_lm_eval([run])
    np.testing.assert_array_equal(cache.scores, reference.scores)
    np.testing.assert_array_equal(cache.split, reference.split)
    assert cache.question_ids == reference.question_ids


def test_single_model_folder_and_several_paths(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    single = from_lm_eval([run / "org__beta"])
    assert single.models == ("org__beta",)
    assert single.preds[:, 0].tolist() == [row[1] for row in PREDS]
    both = from_lm_eval([run / "org__beta", run / "org__alpha"])  # model order = the order of the paths
    assert both.models == ("org__beta", "org__alpha")
    assert both.preds.tolist() == [row[::-1] for row in PREDS]
    assert find_model_folders(run) == [("org__alpha", run / "org__alpha"), ("org__beta", run / "org__beta")]
    with pytest.raises(ConversionError, match="two model folders are named 'org__alpha'"):
        from_lm_eval([run, run / "org__alpha"])


def test_path_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such folder"):
        from_lm_eval([tmp_path / "absent"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConversionError, match=r"empty: no lm-eval samples files \(\*\.jsonl\)"):
        from_lm_eval([tmp_path / "empty"])
    (tmp_path / "file.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="not a folder"):
        from_lm_eval([tmp_path / "file.jsonl"])


def test_two_runs_of_one_task_in_a_folder_is_an_error(tmp_path: Path) -> None:
    folder = write_run(tmp_path / "run", models=("org__alpha",)) / "org__alpha"
    extra = folder / "samples_suite_colors_2024-08-01T00-00-00.000000.jsonl"
    extra.write_text((folder / "samples_suite_colors_2024-07-01T12-30-45.123456.jsonl").read_text(encoding="utf-8"))
    with pytest.raises(ConversionError, match="task 'suite_colors' has two samples files"):
        from_lm_eval([folder])


def test_target_rules(tmp_path: Path) -> None:
    # the choice text first (even when it reads as an index), then an integer index, then the first equal choice
    rows = records("org__alpha", "suite_colors")
    rows[0]["arguments"]["gen_args_0"]["arg_1"] = " blue"  # choices "blue", "blue"
    path = write_alpha(tmp_path, rows)
    assert [sample.label for sample in read_samples(path)] == [0, 0, 1, 2, 0]
    old = write_alpha(tmp_path / "old", records("org__alpha", "suite_colors", "old"), "old")
    assert '"target": 1,' in old.read_text(encoding="utf-8")  # a native integer in the old layout
    assert [sample.label for sample in read_samples(old)] == LABELS[:5]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("purple", r"'purple' is neither one of the 2 choices \['red', 'blue'\] nor a choice index in 0\.\.1"),
        ("2", "'2' is neither one of the 2 choices"),
        ("-1", "'-1' is neither one of the 2 choices"),
        (5, "5 is neither one of the 2 choices"),
        (True, "True is neither one of the 2 choices"),
        (["red"], r"\['red'\] holds several gold answers"),
    ],
)
def test_bad_target_names_file_line_and_value(tmp_path: Path, target: Any, message: str) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[0]["target"] = target
    path = write_samples(tmp_path / "m", "org__alpha", "suite_colors", rows)
    with pytest.raises(ConversionError, match=rf"{path.name}, line 1: field 'target': {message}"):
        read_samples(path)


def test_normalize_by_characters_and_bytes(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", models=("org__alpha",))
    plain = from_lm_eval([run])
    chars = from_lm_eval([run], normalize="chars")
    utf8 = from_lm_eval([run], normalize="bytes")
    # question 4: choices "été" (3 characters, 5 bytes) and "a", log-likelihoods -3 and -1
    assert plain.scores[4, 0, :2].tolist() == [-3.0, -1.0]
    assert chars.scores[4, 0, :2].tolist() == [-1.0, -1.0]
    assert utf8.scores[4, 0, :2].tolist() == [-0.6, -1.0]
    # question 3: choices "10", "2", "1": -2/2, -1/1, -0.5/1
    assert chars.scores[3, 0, :3].tolist() == [-1.0, -1.0, -0.5]
    assert "normalize=chars" in chars.source
    with pytest.raises(ValueError, match="normalize must be one of none, chars, bytes, got 'tokens'"):
        from_lm_eval([run], normalize="tokens")


def test_empty_choice_cannot_be_normalised(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[2]["arguments"]["gen_args_1"]["arg_1"] = " "
    rows[2]["target"] = "yes"
    path = write_samples(tmp_path / "org__alpha", "org__alpha", "suite_colors", rows)
    assert from_lm_eval([path.parent]).n_questions == 5
    with pytest.raises(ConversionError, match=rf"{path.name}, line 3: field 'arguments': choice 1 is empty"):
        from_lm_eval([path.parent], normalize="chars")


# -- splits ----------------------------------------------------------------------------------------------------------


def test_split_last_fraction_is_exact() -> None:
    tasks = np.repeat([0, 1], [90, 7])
    codes = split_by_task(tasks, 0.3)
    # floor(0.7 * 90) = 63 exactly (the float product 0.7 * 90 is 62.99...)
    assert (codes[:90] == 0).sum() == 63 and codes[:90].tolist() == [0] * 63 + [1] * 27
    assert codes[90:].tolist() == [0, 0, 0, 0, 1, 1, 1]  # floor(0.7 * 7) = 4
    assert split_by_task(tasks, 0.0).tolist() == [0] * 97
    assert split_by_task(tasks, 1.0).tolist() == [1] * 97


def test_seeded_split_is_random_per_task_and_reproducible() -> None:
    tasks = np.repeat([0, 1, 2], 20)
    first = split_by_task(tasks, 0.25, seed=7)
    assert first.tolist() == split_by_task(tasks, 0.25, seed=7).tolist()
    assert first.tolist() != split_by_task(tasks, 0.25, seed=8).tolist()
    assert [(first[tasks == t] == 1).sum() for t in range(3)] == [5, 5, 5]
    assert first.tolist() != split_by_task(tasks, 0.25).tolist()


def test_validation_is_carved_out_of_train_per_task() -> None:
    tasks = np.repeat([0, 1, 2], [250, 10, 7])
    codes = split_by_task(tasks, 0.2, validation_fraction=0.2)
    # 250: floor(0.8 * 250) = 200 not test, floor(0.8 * 200) = 160 train, 40 validation, 50 test
    assert codes[:250].tolist() == [0] * 160 + [2] * 40 + [1] * 50
    assert codes[250:260].tolist() == [0] * 6 + [2] * 2 + [1] * 2  # 10: 8 not test, floor(6.4) = 6 train
    assert codes[260:].tolist() == [0] * 4 + [2] * 1 + [1] * 2  # 7: floor(5.6) = 5 not test, floor(4.0) = 4 train
    # the test questions do not move when a validation split is carved out
    assert ((codes == 1) == (split_by_task(tasks, 0.2) == 1)).all()
    # exact decimals: 100 -> 90 not test -> floor(0.7 * 90) = 63 train, although (1 - 0.3) * 90 is 62.99... as floats
    assert (split_by_task(np.zeros(100, dtype=np.int64), 0.1, validation_fraction=0.3) == 0).sum() == 63
    assert split_by_task(np.zeros(5, dtype=np.int64), 0.0, validation_fraction=1.0).tolist() == [2] * 5
    seeded = split_by_task(tasks, 0.2, validation_fraction=0.2, seed=4)
    assert [int((seeded[tasks == 0] == code).sum()) for code in (0, 2, 1)] == [160, 40, 50]
    assert seeded.tolist() == split_by_task(tasks, 0.2, validation_fraction=0.2, seed=4).tolist()


def test_bad_fractions_and_seeds() -> None:
    for name, bad in [(name, value) for name in ("test", "validation") for value in (-0.1, 1.5, math.nan, "0.2")]:
        with pytest.raises(ValueError, match=f"{name}_fraction must be a number in"):
            split_by_task(np.zeros(3, dtype=np.int64), **{f"{name}_fraction": bad})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed must be None or a non-negative integer"):
        split_by_task(np.zeros(3, dtype=np.int64), 0.2, seed=1.5)  # type: ignore[arg-type]


def test_converter_split_options(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    assert from_lm_eval([run], test_fraction=0.5).split.tolist() == [0, 0, 1, 1, 1, 0, 0, 1, 1]
    # per task by doc_id: colors 5 -> 4 not test -> 2 train, 2 validation; numbers 4 -> 3 -> 1 train, 2 validation
    carved = from_lm_eval([run], validation_fraction=0.5)
    assert carved.split.tolist() == [0, 0, 2, 2, 1, 0, 2, 2, 1]
    assert "last 0.2 by doc_id is test, last 0.5 of the rest by doc_id is validation" in carved.source
    with pytest.raises(ValueError, match="validation_fraction must be a number in"):
        from_lm_eval([tmp_path / "absent"], validation_fraction=2.0)  # checked before any file is read
    seeded = from_lm_eval([run], split_seed=3)
    assert seeded.split.tolist() == from_lm_eval([run], split_seed=3).split.tolist()
    assert (seeded.split == 1).sum() == 2 and "seed 3" in seeded.source


# -- question text ---------------------------------------------------------------------------------------------------


def test_question_text_from_doc_input_question_or_context(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    for model in MODELS:
        rows = records(model, "suite_colors")
        rows[0]["doc"] = {"input": "the BBH input", "question": "not this one"}
        rows[1]["doc"] = {"query": "a query"}
        rows[2]["doc"] = {"input": 5, "text": "no known field"}  # not a string: the context is used
        del rows[3]["doc"]
        write_samples(run / model, model, "suite_colors", rows)
    texts = from_lm_eval([run]).question_text
    assert texts is not None
    assert texts[:5] == ("the BBH input", "a query", "Q2\nA:", "Q3\nA:", "suite_colors question 4")
    samples = read_samples(next((run / "org__alpha").glob("samples_suite_colors_*.jsonl")))
    assert [sample.text for sample in samples][:2] == ["the BBH input", "a query"]


def test_question_text_of_the_first_model_when_the_models_differ(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    rows = records("org__beta", "suite_numbers")
    rows[2]["doc"]["question"] = "beta's wording"
    write_samples(run / "org__beta", "org__beta", "suite_numbers", rows)
    assert from_lm_eval([run]).question_text[7] == "suite_numbers question 2"  # type: ignore[index]
    flipped = from_lm_eval([run / "org__beta", run / "org__alpha"])
    assert flipped.question_text[7] == "beta's wording"  # type: ignore[index]


def test_question_text_errors_name_the_line(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[1]["doc"] = {"question": "nul \x00 inside"}
    path = write_samples(tmp_path, "org__alpha", "suite_colors", rows)
    with pytest.raises(ConversionError, match=f"{re.escape(str(path))}, line 2: field 'doc': .* NUL character"):
        read_samples(path)
    rows = records("org__alpha", "suite_colors")
    del rows[0]["doc"]
    rows[0]["arguments"]["gen_args_0"]["arg_0"] = ["not", "text"]
    path = write_samples(tmp_path, "org__alpha", "suite_colors", rows)
    with pytest.raises(ConversionError, match="line 1: field 'arguments': request 0: the context must be a string"):
        read_samples(path)


# -- task names ------------------------------------------------------------------------------------------------------


def test_strip_prefix_choices(tmp_path: Path) -> None:
    names = ["leaderboard_bbh_navigate", "leaderboard_bbh_snarks", "leaderboard_bbh_web_of_lies"]
    assert list(strip_task_prefix(names).values()) == ["navigate", "snarks", "web_of_lies"]
    assert list(strip_task_prefix(names, "leaderboard_").values()) == ["bbh_navigate", "bbh_snarks", "bbh_web_of_lies"]
    assert list(strip_task_prefix(names, "").values()) == names
    assert list(strip_task_prefix(["arc_easy"]).values()) == ["arc_easy"]  # one task: nothing shared to strip
    assert list(strip_task_prefix(["ab_x", "ab_y", "abc"]).values()) == ["ab_x", "ab_y", "abc"]  # cut at a '_'
    with pytest.raises(ConversionError, match="tasks 'a_x' and 'x' would both be named 'x'"):
        strip_task_prefix(["a_x", "x"], "a_")
    with pytest.raises(ConversionError, match="without a name"):
        strip_task_prefix(["a_", "a_b"], "a_")
    run = write_run(tmp_path / "run")
    assert from_lm_eval([run], strip_prefix="").task_names == ("suite_colors", "suite_numbers")


def test_tasks_option_takes_full_or_stored_names(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    by_short = from_lm_eval([run], tasks=["numbers"])
    by_full = from_lm_eval([run], tasks=["suite_numbers"])
    # the prefix comes from every task found, so a subset keeps the same stored names
    assert by_short.task_names == by_full.task_names == ("numbers",)
    assert by_short.labels.tolist() == LABELS[5:]
    with pytest.raises(ConversionError, match=r"--tasks: 'shapes' not found .* they hold: colors, numbers"):
        from_lm_eval([run], tasks=["shapes"])
    with pytest.raises(ValueError, match="tasks must be a list of task names"):
        from_lm_eval([run], tasks="colors")


# -- malformed files: every error names the file and the line ----------------------------------------------------


def test_truncated_json_lines(tmp_path: Path) -> None:
    path = write_alpha(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) - 40], encoding="utf-8")  # the last line cut short
    with pytest.raises(ConversionError, match=rf"{path.name}, line 5: not valid JSON \(.*truncated or corrupt\?\)"):
        read_samples(path)


def test_truncated_json_array(tmp_path: Path) -> None:
    path = write_alpha(tmp_path, layout="old")
    text = path.read_text(encoding="utf-8")
    cut = text.index('"doc_id": 3') + 30
    path.write_text(text[:cut], encoding="utf-8")
    with pytest.raises(ConversionError, match=rf"{path.name}, line \d+: not valid JSON"):
        read_samples(path)
    path.write_text(text.rstrip()[:-1], encoding="utf-8")  # only the closing ']' missing
    with pytest.raises(ConversionError, match=rf"{path.name}, line \d+: the JSON array has no closing"):
        read_samples(path)
    path.write_text(text + "\n[]", encoding="utf-8")
    with pytest.raises(ConversionError, match="text after the end of the JSON array"):
        read_samples(path)


@pytest.mark.parametrize("field", ["doc_id", "arguments", "target"])
@pytest.mark.parametrize("layout", ["new", "old"])
def test_missing_field(tmp_path: Path, field: str, layout: str) -> None:
    rows = records("org__alpha", "suite_colors", layout)
    del rows[3][field]
    path = write_alpha(tmp_path, rows, layout)
    line = record_lines(path)[3]
    with pytest.raises(ConversionError, match=rf"{path.name}, line {line}: field '{field}': required field is missing"):
        read_samples(path)


def test_missing_log_likelihoods(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    del rows[1]["filtered_resps"]
    path = write_alpha(tmp_path, rows)
    assert read_samples(path)[1].logliks == (-0.25, -2.0, -3.0)  # 'resps' holds the same numbers
    del rows[1]["resps"]
    path = write_alpha(tmp_path, rows)
    with pytest.raises(ConversionError, match=rf"{path.name}, line 2: field 'filtered_resps': required field"):
        read_samples(path)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("abc", "'abc' is not a number"),
        ("", "'' is not a number"),
        ("1_000", "'1_000' is not a number"),
        (" -1.0", "' -1.0' is not a number"),
        ("NaN", r"'NaN' is not finite \(NaN or infinity\)"),
        ("-inf", "'-inf' is not finite"),
        ("1e999", "'1e999' is outside the float range"),
        ("False", "'False' is not a number"),
        (None, "None is not a number"),
    ],
)
def test_bad_log_likelihood_new_layout(tmp_path: Path, value: Any, problem: str) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[2]["filtered_resps"][1][0] = value
    path = write_alpha(tmp_path, rows)
    with pytest.raises(
        ConversionError, match=rf"{path.name}, line 3: field 'filtered_resps': choice 1: log-likelihood {problem}"
    ):
        read_samples(path)


@pytest.mark.parametrize(("value", "problem"), [(math.nan, "nan is not finite"), (True, "True is not a number")])
def test_bad_log_likelihood_old_layout(tmp_path: Path, value: Any, problem: str) -> None:
    rows = records("org__alpha", "suite_colors", "old")
    rows[4]["filtered_resps"][0][0] = value
    path = write_alpha(tmp_path, rows, "old")
    assert ("NaN" in path.read_text(encoding="utf-8")) == (value is not True)  # json writes the NaN literal
    line = record_lines(path)[4]
    with pytest.raises(
        ConversionError, match=rf"{path.name}, line {line}: field 'filtered_resps': choice 0: log-likelihood {problem}"
    ):
        read_samples(path)


def test_response_shape_errors(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[0]["filtered_resps"] = rows[0]["filtered_resps"][:1]
    path = write_alpha(tmp_path, rows)
    with pytest.raises(ConversionError, match=r"line 1: field 'filtered_resps': has 1 entries but 'arguments' has 2"):
        read_samples(path)
    rows = records("org__alpha", "suite_colors")
    rows[1]["filtered_resps"][0] = ["-1.0"]
    path = write_alpha(tmp_path, rows)
    with pytest.raises(ConversionError, match=r"line 2: field 'filtered_resps': choice 0: expected a \[log-likelihood"):
        read_samples(path)


def test_record_shape_errors(tmp_path: Path) -> None:
    path = tmp_path / "samples_t_2024-01-01T00-00-00.000000.jsonl"
    for line, problem in [
        ('["not", "an", "object"]', "line 1: expected a JSON object"),
        ('{"doc_id": "7"}', "line 1: field 'doc_id': must be a non-negative integer (below 2**63), got '7'"),
        ('{"doc_id": 0, "arguments": "ctx"}', "line 1: field 'arguments': expected an object of gen_args_i"),
        (
            '{"doc_id": 0, "arguments": {"gen_args_1": {"arg_0": "c", "arg_1": " a"}}}',
            "line 1: field 'arguments': expected keys gen_args_0..gen_args_0",
        ),
    ]:
        path.write_text(line + "\n", encoding="utf-8")
        with pytest.raises(ConversionError, match=re.escape(f"{path.name}, {problem}")):
            read_samples(path)


def test_empty_files(tmp_path: Path) -> None:
    path = tmp_path / "samples_t.jsonl"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ConversionError, match=rf"{path.name}: the file is empty: no samples"):
        read_samples(path)
    path.write_text("[\n]\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="holds no samples"):
        read_samples(path)
    path.write_bytes(b'{"doc_id": 0}\n{"doc": "\xff"}\n')
    with pytest.raises(ConversionError, match=rf"{path.name}, line 2: not UTF-8 text"):
        read_samples(path)


def test_duplicate_doc_id(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[3]["doc_id"] = 1
    path = write_alpha(tmp_path, rows)
    with pytest.raises(
        ConversionError, match=rf"{path.name}, line 4: field 'doc_id': doc_id 1 already appears on line 2"
    ):
        read_samples(path)


def test_fewer_than_two_choices(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[0]["arguments"] = {"gen_args_0": rows[0]["arguments"]["gen_args_0"]}
    path = write_alpha(tmp_path, rows)
    with pytest.raises(ConversionError, match=r"line 1: field 'arguments': has 1 choice\(s\): a multiple-choice"):
        read_samples(path)


def _generate_until(doc_id: int, flt: str = "strict-match") -> dict[str, Any]:
    """A line of a generative task as lm-eval >= 0.4.7 writes it: generation settings, texts, one line per filter."""
    return {
        "doc_id": doc_id,
        "target": "42",
        "arguments": {"gen_args_0": {"arg_0": "Q: 6 x 7?\nA:", "arg_1": {"until": ["\n"], "do_sample": "False"}}},
        "resps": [["The answer is 42."]],
        "filtered_resps": ["42"],
        "filter": flt,
        "metrics": ["exact_match"],
    }


def test_generative_tasks_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "samples_gsm8k_2024-01-01T00-00-00.000000.jsonl"
    path.write_text(json.dumps(_generate_until(0)) + "\n", encoding="utf-8")
    with pytest.raises(
        ConversionError, match=rf"{path.name}, line 1: field 'arguments': .*generative \(generate_until\)"
    ):
        read_samples(path)
    # texts instead of log-likelihoods
    rows = records("org__alpha", "suite_colors")
    rows[0]["filtered_resps"] = ["red", "blue"]
    path = write_alpha(tmp_path, rows)
    with pytest.raises(
        ConversionError, match=r"line 1: field 'filtered_resps': choice 0 is the text 'red'.*generative"
    ):
        read_samples(path)
    # one line per filter
    rows = records("org__alpha", "suite_colors")
    twin = json.loads(json.dumps(rows[2]))
    twin["filter"] = "flexible-extract"
    path = write_alpha(tmp_path, [*rows, twin])
    with pytest.raises(ConversionError, match=r"line 6: field 'filter': doc_id 2 appears once per filter.*generative"):
        read_samples(path)


# -- alignment across models ---------------------------------------------------------------------------------------


def test_question_missing_for_a_model(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    beta = run / "org__beta" / "samples_suite_colors_2024-07-01T12-30-45.123456.jsonl"
    lines = beta.read_text(encoding="utf-8").splitlines()
    beta.write_text("\n".join(lines[:1] + lines[2:]) + "\n", encoding="utf-8")  # doc_id 1 gone
    with pytest.raises(
        ConversionError,
        match=r"task 'colors'.*model 'org__beta' \(.*samples_suite_colors.*\) lacks 1 \(doc_id 1\).*--intersect",
    ):
        from_lm_eval([run])
    messages: list[str] = []
    cache = from_lm_eval([run], intersect=True, notify=messages.append)
    assert messages == [
        "--intersect: dropped 1 of 9 questions (1 missing for some model, 0 with differing labels, choices or doc_hash)"
    ]
    assert cache.n_questions == 8 and cache.labels.tolist() == [LABELS[0], *LABELS[2:]]
    assert cache.split.tolist() == [0, 0, 0, 1, 0, 0, 0, 1]  # the split is made after the intersection
    assert "1 questions not shared by every model dropped" in cache.source


def test_models_disagree_on_a_label(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    rows = records("org__beta", "suite_numbers")
    rows[2]["target"] = "q"
    path = write_samples(run / "org__beta", "org__beta", "suite_numbers", rows)
    with pytest.raises(
        ConversionError,
        match=r"task 'numbers', doc_id 2: the models disagree on the label: "
        r"'org__alpha' \(.*, line 3\) has label 2 \('r'\), "
        rf"'org__beta' \(.*{path.name}, line 3\) has label 1 \('q'\)",
    ):
        from_lm_eval([run])
    messages: list[str] = []
    cache = from_lm_eval([run], intersect=True, notify=messages.append)
    assert "0 missing for some model, 1 with differing labels" in messages[0]
    assert cache.n_questions == 8


def test_models_disagree_on_doc_hash_or_choices(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    rows = records("org__beta", "suite_colors")
    rows[0]["doc_hash"] = "another-document"
    write_samples(run / "org__beta", "org__beta", "suite_colors", rows)
    with pytest.raises(ConversionError, match=r"doc_id 0: the models disagree on the doc_hash: .*another-document"):
        from_lm_eval([run])
    rows = records("org__beta", "suite_colors")
    rows[1]["arguments"]["gen_args_2"]["arg_1"] = " purple"
    write_samples(run / "org__beta", "org__beta", "suite_colors", rows)
    with pytest.raises(ConversionError, match=r"doc_id 1: the models disagree on the choices"):
        from_lm_eval([run])


def test_task_missing_for_a_model(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "org__beta" / "samples_suite_numbers_2024-07-01T12-30-45.123456.jsonl").unlink()
    with pytest.raises(ConversionError, match=r"task 'numbers': model 'org__beta' has no samples file for it"):
        from_lm_eval([run])
    messages: list[str] = []
    cache = from_lm_eval([run], intersect=True, notify=messages.append)
    assert messages == ["--intersect: task 'numbers' left out: no samples file for org__beta"]
    assert cache.task_names == ("colors",)


def test_progress_is_reported(tmp_path: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    from_lm_eval([write_run(tmp_path / "run")], progress=lambda *call: calls.append(call))
    assert calls[0] == (0, 4, "org__alpha: colors") and calls[-1] == (4, 4, "")
    assert [done for done, *_ in calls] == [0, 1, 2, 3, 4]


# -- arrays ----------------------------------------------------------------------------------------------------------


def test_from_arrays_both_shapes() -> None:
    flat = from_arrays(SCORES.reshape(3, 4), [0, 1, 1], ["a", "b"], score_kind="prob")
    full = from_arrays(SCORES, [0, 1, 1], ["a", "b"], score_kind="prob", tasks=["x", "y", "x"])
    np.testing.assert_array_equal(flat.scores, full.scores)
    assert full.preds.tolist() == [[0, 1], [1, 0], [0, 1]]
    assert full.task_names == ("x", "y") and full.tasks.tolist() == [0, 1, 0]
    with pytest.raises(
        ConversionError, match=r"<memory>: scores of shape \(3, 4\) \(Q, N\*C\) cannot be split among 3"
    ):
        from_arrays(SCORES.reshape(3, 4), [0, 1, 1], ["a", "b", "c"], score_kind="prob")
    with pytest.raises(ConversionError, match="must have shape"):
        from_arrays(SCORES[0, 0], [0], ["a"], score_kind="prob")
    with pytest.raises(ValueError, match="field 'labels': question 2 has label 2"):
        from_arrays(SCORES, [0, 1, 2], ["a", "b"], score_kind="prob")


def test_from_npz_and_npy(tmp_path: Path) -> None:
    npz = tmp_path / "pool.npz"
    np.savez(npz, scores=SCORES, labels=np.array([0, 1, 1]), models=np.array(["a", "b"]), split=np.array([0, 0, 1]))
    cache = from_array_files(npz, score_kind="prob")
    assert cache.models == ("a", "b") and cache.split.tolist() == [0, 0, 1]
    assert cache.source == "arrays: pool.npz"
    npy, labels = tmp_path / "scores.npy", tmp_path / "labels.txt"
    np.save(npy, SCORES.reshape(3, 4))
    labels.write_text("0\n1\n1\n", encoding="utf-8")
    other = from_array_files(npy, score_kind="prob", labels=labels, models=["a", "b"])
    np.testing.assert_array_equal(other.scores, cache.scores)
    with pytest.raises(ConversionError, match=r"pool\.npz: field 'labels': is given twice"):
        from_array_files(npz, score_kind="prob", labels=labels)
    with pytest.raises(ConversionError, match=r"scores\.npy: field 'labels': missing: give it with --labels"):
        from_array_files(npy, score_kind="prob", models=["a", "b"])
    np.savez(npz, scores=SCORES, lables=np.array([0, 1, 1]))
    with pytest.raises(ConversionError, match=r"pool\.npz: unknown arrays \['lables'\]"):
        from_array_files(npz, score_kind="prob")
    np.savez(npz, scores=SCORES, labels=np.array([0, 1, 1]), models=np.array([7, 8]))
    with pytest.raises(ConversionError, match=r"pool\.npz: field 'models': must hold strings .*got dtype int64"):
        from_array_files(npz, score_kind="prob")
    np.savez(npz, scores=SCORES, labels=np.array([0, 1, 1]), models=np.array(["a", None], dtype=object))
    with pytest.raises(ConversionError, match=r"pool\.npz: field 'models': cannot be read without pickle"):
        from_array_files(npz, score_kind="prob")


def test_from_npz_with_question_text_and_features(tmp_path: Path) -> None:
    npz = tmp_path / "pool.npz"
    texts = np.array(["first question", "zweite Frage", ""])
    features = np.arange(6, dtype=np.float32).reshape(3, 2)
    names = np.array(["f0", "f1"])
    common = {"scores": SCORES, "labels": np.array([0, 1, 1]), "models": np.array(["a", "b"]), "features": features}
    np.savez(npz, **common, question_text=texts, feature_names=names)
    cache = from_array_files(npz, score_kind="prob")
    assert cache.question_text == ("first question", "zweite Frage", "")
    assert cache.feature_names == ("f0", "f1") and cache.features.tolist() == features.tolist()  # type: ignore
    np.savez(npz, **common, question_text=np.array(["only one"]))
    with pytest.raises(ValueError, match=r"pool\.npz: field 'question_text': has 1 entries, expected 3"):
        from_array_files(npz, score_kind="prob")
    with pytest.raises(ConversionError, match="question_text must be a list of strings, got the string 'abc'"):
        from_arrays(SCORES, [0, 1, 1], ["a", "b"], score_kind="prob", question_text="abc")


def test_from_csv_with_header_padding_and_tasks(tmp_path: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text("a0,a1,a2,b0,b1,b2\n-1,-2,-3,-2,-1,-3\n-0.5,-1,,-1,-0.5,\n", encoding="utf-8")
    (tmp_path / "labels.csv").write_text("label\n2\n0\n", encoding="utf-8")
    (tmp_path / "n.txt").write_text("3\n2\n", encoding="utf-8")
    (tmp_path / "tasks.txt").write_text("math\nlogic\n", encoding="utf-8")
    cache = from_array_files(
        scores,
        score_kind="loglik",
        labels=tmp_path / "labels.csv",
        models=["a", "b"],
        n_choices=tmp_path / "n.txt",
        tasks=tmp_path / "tasks.txt",
    )
    assert cache.scores.shape == (2, 2, 3) and cache.n_choices.tolist() == [3, 2]
    assert cache.preds.tolist() == [[0, 1], [0, 1]] and cache.task_names == ("math", "logic")
    inferred = from_array_files(scores, score_kind="loglik", labels=tmp_path / "labels.csv", models=["a", "b"])
    assert inferred.n_choices.tolist() == [3, 2]  # the empty cells are padding: the same counts as n.txt
    scores.write_text("-1,-2,-3,-2,-1,-3\n-0.5,-1,,-1,-0.5,-2\n", encoding="utf-8")  # one model only: an error
    with pytest.raises(ValueError, match=r"field 'scores': question 1, model 'a', choice 2: non-finite value nan"):
        from_array_files(scores, score_kind="loglik", labels=tmp_path / "labels.csv", models=["a", "b"])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1,2\n3,x\n", r"line 2: column 2: 'x' is not a number"),
        ("0.5,y\n3,4\n", r"line 1: column 2: 'y' is not a number"),  # a row with a number is not a header
        ("1,2\n3,nan\n", r"line 2: column 2: 'nan' is not finite"),
        ("1,2\n3,4,5\n", r"line 2: has 3 columns, the first row of numbers has 2"),
        ("h1,h2\n", "holds no rows of numbers"),
    ],
)
def test_bad_csv_names_line_and_column(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConversionError, match=rf"scores\.csv(, |: ){problem}"):
        from_array_files(path, score_kind="prob", labels=None, models=["a"])


def test_bad_label_file(tmp_path: Path) -> None:
    (tmp_path / "s.csv").write_text("0.2,0.8\n0.6,0.4\n", encoding="utf-8")
    (tmp_path / "labels.txt").write_text("1\n0.5\n", encoding="utf-8")
    with pytest.raises(
        ConversionError, match=r"labels\.txt, line 2: field 'labels': column 1: '0\.5' is not an integer"
    ):
        from_array_files(tmp_path / "s.csv", score_kind="prob", labels=tmp_path / "labels.txt", models=["a"])
    np.save(tmp_path / "labels.npy", np.array([1.0, 0.0]))
    with pytest.raises(ConversionError, match=r"labels\.npy: field 'labels': must hold integers, got dtype float64"):
        from_array_files(tmp_path / "s.csv", score_kind="prob", labels=tmp_path / "labels.npy", models=["a"])
    (tmp_path / "s.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ConversionError, match=r"s\.json: unknown file type"):
        from_array_files(tmp_path / "s.json", score_kind="prob")


# -- the real BBH files (slow; skipped without ../shared) --------------------------------------------------------------


@pytest.mark.slow
def test_real_bbh_accuracies_equal_the_reference(bbh_data: Path) -> None:
    reference = json.loads((bbh_data / "reference_accuracy.json").read_text(encoding="utf-8"))
    before = digest(bbh_data)
    cache = from_lm_eval([bbh_data])
    assert digest(bbh_data) == before
    assert cache.n_models == 5 and sorted(cache.models) == sorted(BBH_MODEL_ORDER)
    assert cache.task_names == tuple(sorted(reference)) and cache.n_tasks == 16
    columns = [cache.models.index(model) for model in BBH_MODEL_ORDER]
    for task, expected in reference.items():
        questions = cache.select("all", [task])
        assert questions.size == expected["n"]
        assert int((cache.split[questions] == 0).sum()) == expected["n_train"]
        assert int(cache.n_choices[questions].max()) == expected["C"]
        assert cache.model_accuracy(questions)[columns].tolist() == expected["acc"], task


@pytest.mark.slow
def test_real_bbh_normalized_scores_reproduce_lm_eval_acc_norm(bbh_data: Path) -> None:
    cache = from_lm_eval([bbh_data], tasks=["navigate", "geometric_shapes"], normalize="chars")
    folder = bbh_data / "google__gemma-7b"
    acc_norm = [
        json.loads(line)["acc_norm"]
        for task in ("geometric_shapes", "navigate")
        for line in next(folder.glob(f"samples_leaderboard_bbh_{task}_*.jsonl"))
        .read_text(encoding="utf-8")
        .splitlines()
    ]
    assert cache.correct[:, cache.models.index("google__gemma-7b")].astype(float).tolist() == acc_norm


# -- corners of a newcomer's data (issue 14) ---------------------------------------------------------------------------


def test_a_renamed_samples_file_takes_the_task_before_its_date_or_from_the_results_file(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    for model in MODELS:  # cut copies, renamed after the run: the date is no longer at the end of the name
        for path in sorted((run / model).glob("samples_*.jsonl")):
            path.rename(path.with_name(path.name.replace(".jsonl", ".first25.jsonl")))
    cache = from_lm_eval([run])
    assert cache.task_names == ("colors", "numbers") and cache.labels.tolist() == LABELS
    folder = tmp_path / "undated" / "org__alpha"  # no date at all: the results file names the task
    folder.mkdir(parents=True)
    for task in TASKS:
        write_samples(tmp_path / "scratch", "org__alpha", task, records("org__alpha", task))
        (tmp_path / "scratch" / f"samples_{task}_2024-07-01T12-30-45.123456.jsonl").rename(
            folder / f"samples_{task}_v2.jsonl"
        )
    assert sorted(find_task_files(folder)) == ["suite_colors_v2", "suite_numbers_v2"]  # no hint: the whole name
    results = {"results": {task: {"acc": 0.5} for task in TASKS}, "configs": {task: {} for task in TASKS}}
    (folder / "results_2024-07-01T12-30-45.123456.json").write_text(json.dumps(results), encoding="utf-8")
    assert sorted(find_task_files(folder)) == ["suite_colors", "suite_numbers"]
    assert from_lm_eval([folder]).task_names == ("colors", "numbers")


def test_minus_infinity_and_nan_padding_give_the_choice_counts(tmp_path: Path) -> None:
    scores = np.log(np.array([[[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], [[0.4, 0.6, 1.0], [0.7, 0.3, 1.0]]]))
    scores[1, :, 2] = -np.inf  # how caches pad a question of 2 choices when C = 3
    npz = tmp_path / "pool.npz"
    np.savez(npz, scores=scores, labels=np.array([2, 0]), models=np.array(["a", "b"]))
    cache = from_array_files(npz, score_kind="logprob")
    assert cache.n_choices.tolist() == [3, 2] and cache.preds.tolist() == [[2, 0], [1, 0]]
    with_nan = scores.copy()
    with_nan[1, 0, 2] = np.nan  # NaN (an empty CSV cell) pads as well, mixed with -inf
    assert from_arrays(with_nan, [2, 0], ["a", "b"], score_kind="logprob").n_choices.tolist() == [3, 2]
    partial = scores.copy()
    partial[1, 1, 2] = np.log(0.5)  # model b scores the third choice: not padding, model a's -inf is an error
    with pytest.raises(ValueError, match=r"question 1, model 'a', choice 2: non-finite value -inf"):
        from_arrays(partial, [2, 0], ["a", "b"], score_kind="logprob")
    short = scores.copy()
    short[1, :, 1:] = -np.inf
    with pytest.raises(ConversionError, match=r"question 1 has 1 choice\(s\) before its padding"):
        from_arrays(short, [2, 0], ["a", "b"], score_kind="logprob")
    given = from_arrays(scores, [2, 0], ["a", "b"], score_kind="logprob", n_choices=[3, 2])
    np.testing.assert_array_equal(given.n_choices, cache.n_choices)  # the same as stating the counts


def test_array_files_get_a_test_split_per_task_unless_they_hold_one(tmp_path: Path) -> None:
    npz = tmp_path / "pool.npz"
    labels = np.array([0, 1, 1, 0, 1])
    tasks = np.array(["x", "x", "x", "y", "y"])
    scores = np.stack([SCORES[0]] * 5)
    np.savez(npz, scores=scores, labels=labels, models=np.array(["a", "b"]), tasks=tasks)
    cache = from_array_files(npz, score_kind="prob")
    assert cache.split.tolist() == [0, 0, 1, 0, 1]  # per task, the last 20% in file order: floor(0.8 n) train
    assert cache.source == "arrays: pool.npz; split per task: last 0.2 in file order is test"
    assert from_array_files(npz, score_kind="prob", test_fraction=0.0).split.tolist() == [0] * 5
    carved = from_array_files(npz, score_kind="prob", test_fraction=0.4, validation_fraction=0.5)
    assert carved.split.tolist() == [2, 1, 1, 2, 1]  # x: 3 -> floor(0.6 * 3) = 1 not test -> 0 train; y: 2 -> 1 -> 0
    seeded = from_array_files(npz, score_kind="prob", split_seed=1)
    assert (seeded.split == 1).sum() == 2 and "seed 1" in seeded.source
    with pytest.raises(ValueError, match="test_fraction must be a number in"):
        from_array_files(tmp_path / "absent.npz", score_kind="prob", test_fraction=2.0)  # before reading a file
    np.savez(npz, scores=scores, labels=labels, models=np.array(["a", "b"]), split=np.array([0, 0, 0, 0, 1]))
    kept = from_array_files(npz, score_kind="prob")
    assert kept.split.tolist() == [0, 0, 0, 0, 1] and kept.source == "arrays: pool.npz"
