"""Hostile inputs to the converters (issue 13): numbers beyond floats or with absurd digit counts, deep nesting,
strings no cache can store, absurd choice counts, damaged .npy/.npz files; and (round 2) FIFOs, devices,
symbolic links leading out of the folder given, files beyond the size limits, numbers in fullwidth or other
scripts' digits. Each is refused with a ConversionError naming the file (and the line), never a traceback
nor a hang.

The seeded fuzz suite over many mutations is in tests/cache/test_fuzz_lm_eval.py; these are the named cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testing.conversions import MODELS, SCORES, digest, record_lines, records, write_alpha, write_run

from ensemble_env.cache.convert import (
    MAX_FILE_BYTES,
    ConversionError,
    from_array_files,
    from_arrays,
    from_lm_eval,
    parse_float,
    read_input,
    read_samples,
)
from ensemble_env.cache.convert.common import MAX_RESULTS_BYTES, looks_like_number

# -- hostile inputs (issue 13): refused with the file and the line, never a traceback ---------------------------


def _with_raw_loglik(tmp_path: Path, raw: str, layout: str = "new") -> Path:
    """The alpha samples file with the JSON text ``raw`` as the log-likelihood of record 2, choice 1."""
    rows = records("org__alpha", "suite_colors", layout)
    rows[2]["filtered_resps"][1][0] = "@@RAW@@"
    path = write_alpha(tmp_path, rows, layout)
    path.write_text(path.read_text(encoding="utf-8").replace('"@@RAW@@"', raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("layout", ["new", "old"])
@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("9" * 400, "'9999999999999999999999999999999999999999999999999999999999999... is outside the float range"),
        ("7" * 5000, "is a number written with 5000 digits, more than 400"),
        ("1e400", "is 1e400 (outside the float range)"),
        ("-1e400", "is -1e400 (outside the float range)"),
        ("0." + "0" * 4998 + "1", "is a number written with 5001 characters, more than 400"),
        ('"' + "3" * 5000 + '"', "is written with 5000 characters, more than 400"),
    ],
    ids=["400-digits", "5000-digits", "1e400", "-1e400", "5000-digit-float", "5000-digit-text"],
)
def test_numbers_beyond_floats_or_absurdly_long_are_refused_with_the_line(
    tmp_path: Path, layout: str, raw: str, problem: str
) -> None:
    path = _with_raw_loglik(tmp_path, raw, layout)
    line = record_lines(path)[2]
    where = f"{path.name}, line {line}: field 'filtered_resps': choice 1: log-likelihood "
    with pytest.raises(ConversionError, match=re.escape(where)) as excinfo:
        read_samples(path)
    assert problem.removesuffix("...") in str(excinfo.value) or problem.split("...")[1] in str(excinfo.value)
    assert len(str(excinfo.value)) < len(str(path)) + 200


@pytest.mark.parametrize("layout", ["new", "old"])
@pytest.mark.parametrize("depth", [150, 100_000])
def test_deep_nesting_is_refused_with_the_line(tmp_path: Path, layout: str, depth: int) -> None:
    path = _with_raw_loglik(tmp_path, "[" * depth + "]" * depth, layout)
    with pytest.raises(ConversionError, match=re.escape(f"{path.name}, line {record_lines(path)[2]}: ")) as excinfo:
        read_samples(path)
    assert "nested" in str(excinfo.value)


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    value: Any = 0
    for _ in range(95):  # an unused field, nested 95 levels (plus the record's own level)
        value = [value]
    rows[0]["metrics"] = value
    assert len(read_samples(write_alpha(tmp_path, rows))) == 5


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"doc_id": 2**63}, "doc_id", "must be a non-negative integer (below 2**63)"),
        ({"target": "3" * 5000}, "target", "is neither one of the 3 choices"),
        ({"doc_hash": "@@SURROGATE@@"}, "doc_hash", "holds a lone surrogate"),
        ({"doc": {"question": "@@SURROGATE@@"}}, "doc", "holds a lone surrogate"),
    ],
)
def test_hostile_fields_are_refused_with_the_line(
    tmp_path: Path, change: dict[str, Any], field: str, problem: str
) -> None:
    rows = records("org__alpha", "suite_colors")
    rows[1].update(change)
    path = write_alpha(tmp_path, rows)
    path.write_text(path.read_text(encoding="utf-8").replace("@@SURROGATE@@", "bad \\ud800 text"), encoding="utf-8")
    with pytest.raises(ConversionError, match=re.escape(f"{path.name}, line 2: field '{field}': ")) as excinfo:
        read_samples(path)
    assert problem in str(excinfo.value) and len(str(excinfo.value)) < len(str(path)) + 300


def test_a_results_file_that_cannot_be_parsed_is_only_no_hint(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", layout="old")
    for model in MODELS:
        (run / model / "broken.json").write_text("[" * 100_000 + "9" * 5000, encoding="utf-8")
    assert from_lm_eval([run]).n_questions == 9


def test_csv_integers_beyond_64_bits_are_refused(tmp_path: Path) -> None:
    scores, labels = tmp_path / "scores.csv", tmp_path / "labels.txt"
    scores.write_text("0.1,0.9,0.6,0.4\n0.7,0.3,0.2,0.8\n", encoding="utf-8")
    for value in ("9" * 20, "7" * 5000):
        labels.write_text(f"0\n{value}\n", encoding="utf-8")
        with pytest.raises(
            ConversionError, match=re.escape(f"{labels}, line 2: field 'labels': column 1: ")
        ) as excinfo:
            from_array_files(scores, score_kind="prob", labels=labels, models=["a", "b"])
        assert "is not an integer of 64 bits" in str(excinfo.value) and len(str(excinfo.value)) < 300


def test_npy_declaring_more_than_it_holds_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "scores.npy"
    with path.open("wb") as handle:  # a 64-byte body behind a header declaring 2**40 x 4 float64
        np.lib.format.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": (2**40, 4)})
        handle.write(bytes(64))
    with pytest.raises(ConversionError, match=re.escape(f"{path}: cannot be read as .npy")) as excinfo:
        from_array_files(path, score_kind="prob", models=["a", "b"])
    assert "declares an array of shape (1099511627776, 4) (35184372088832 bytes)" in str(excinfo.value)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "zip-bomb"])
def test_damaged_npz_is_refused(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "pool.npz"
    if damage == "zip-bomb":  # 20 MB of zeros in a member of a few hundred bytes (bzip2 compresses far beyond gzip)
        member = io.BytesIO()
        np.save(member, np.zeros((2_500, 1_000)))
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as archive:
            archive.writestr("scores.npy", member.getvalue())
    else:
        np.savez_compressed(path, scores=SCORES, labels=np.array([0, 1, 1]), models=np.array(["a", "b"]))
        data = bytearray(path.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        else:
            data[60] ^= 0xFF  # inside the first member's compressed data
        path.write_bytes(bytes(data))
    with pytest.raises(ConversionError, match=re.escape(f"{path}: cannot be read as a .npz archive")) as excinfo:
        from_array_files(path, score_kind="prob")
    assert len(str(excinfo.value)) < len(str(path)) + 400
    if damage == "zip-bomb":
        assert "member scores.npy expands" in str(excinfo.value)


def test_a_question_with_absurdly_many_choices_is_refused_before_padding(tmp_path: Path) -> None:
    """2000 questions of 2 choices and one of 40,000: padding every question to 40,000 choices would take
    2001 x 2 x 40,000 float64 (1.3 GB) for 44,000 real scores."""
    rows = [
        {"doc_id": i, "target": 0, "arguments": [["Q", " a"], ["Q", " b"]], "filtered_resps": [[-1.0, False]] * 2}
        for i in range(2000)
    ]
    rows.append(
        {
            "doc_id": 2000,
            "target": 0,
            "arguments": [["Q", f" c{i}"] for i in range(40_000)],
            "filtered_resps": [[-1.0, False]] * 40_000,
        }
    )
    for model in MODELS:
        (tmp_path / "run" / model).mkdir(parents=True)
        text = "\n".join(json.dumps(row) for row in rows)
        (tmp_path / "run" / model / "samples_wide_2024-01-01T00-00-00.jsonl").write_text(text, encoding="utf-8")
    with pytest.raises(ConversionError, match=r"samples_wide_.*\.jsonl, line 2001: field 'arguments': doc_id 2000 has"):
        from_lm_eval([tmp_path / "run"])


@pytest.mark.parametrize("element", ["1.5", "true", '"text"', "null"])
def test_an_array_element_that_is_not_an_object_is_refused_with_its_line(tmp_path: Path, element: str) -> None:
    path = write_alpha(tmp_path, layout="old")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("[\n  {", f"[\n  {element},\n  {{", 1), encoding="utf-8")
    with pytest.raises(ConversionError, match=re.escape(f"{path.name}, line 2: expected a JSON object")):
        read_samples(path)


# -- files that are not what they seem (issue "Reliability, round 2"): FIFOs, devices, links, sizes ---------------
# Every read goes through ensemble_env.cache.convert.common.read_input. Each case runs under an alarm, so a
# regression fails the test instead of hanging it.


@contextlib.contextmanager
def _within(seconds: int = 10) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"did not finish within {seconds} s (a read blocked?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _replace_by(path: Path, kind: str, outside: Path) -> None:
    """Replace the file ``path`` by a FIFO, or by a symbolic link to a device or to a copy of it in ``outside``."""
    content = path.read_bytes()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "outside":
        outside.mkdir(exist_ok=True)
        (outside / path.name).write_bytes(content)
        os.symlink(outside / path.name, path)
    else:
        os.symlink(kind, path)


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("fifo", "a FIFO (named pipe), not a regular file; it is not read"),
        ("/dev/zero", "a symbolic link leading out of {root} (to /dev/zero)"),
        ("/dev/urandom", "a symbolic link leading out of {root} (to /dev/urandom)"),
        ("outside", "a symbolic link leading out of {root} (to {outside}"),
    ],
)
@pytest.mark.parametrize("which", ["samples", "results"])
def test_a_samples_or_results_file_that_is_not_a_regular_file_inside_the_folder_is_refused(
    tmp_path: Path, kind: str, problem: str, which: str
) -> None:
    run = write_run(tmp_path / "run", layout="old")  # the old layout: the results file is read
    folder = run / "org__beta"
    target = folder / ("results.json" if which == "results" else sorted(folder.glob("*.jsonl"))[0].name)
    _replace_by(target, kind, tmp_path / "elsewhere")
    before = digest(tmp_path)
    with _within(), pytest.raises(ConversionError) as excinfo:
        from_lm_eval([run])
    expected = problem.format(root=run, outside=tmp_path / "elsewhere")
    assert str(excinfo.value).startswith(f"{target}: {expected}"), str(excinfo.value)
    assert digest(tmp_path) == before


def test_a_results_fifo_is_not_even_opened_when_the_names_tell_the_tasks(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")  # samples_<task>_<date>.jsonl: no results file is needed
    for model in MODELS:
        os.mkfifo(run / model / "results_2024-07-01T12-30-45.json")
        os.symlink("/dev/zero", run / model / "results.json")
    with _within():
        assert from_lm_eval([run]).n_questions == 9


def test_links_inside_the_folder_given_are_followed(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    name = "samples_suite_colors_2024-07-01T12-30-45.123456.jsonl"
    (run / "shared").mkdir()  # no *.jsonl in it: not a model folder
    (run / "org__beta" / name).rename(run / "shared" / "colors.data")
    os.symlink(Path("..") / "shared" / "colors.data", run / "org__beta" / name)
    assert from_lm_eval([run]).n_questions == 9
    with pytest.raises(ConversionError, match=re.escape("a symbolic link leading out of")):
        from_lm_eval([run / "org__alpha", run / "org__beta"])  # now the link leads out of the folder given


def test_a_model_folder_linked_from_outside_is_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "org__beta").rename(tmp_path / "beta")
    os.symlink(tmp_path / "beta", run / "org__beta")
    with pytest.raises(ConversionError, match=r"org__beta/samples_\S+: a symbolic link leading out of"):
        from_lm_eval([run])


def test_files_beyond_the_size_limits_are_refused_before_reading(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", layout="old")
    samples = sorted((run / "org__alpha").glob("*.jsonl"))[0]
    size = samples.stat().st_size
    with pytest.raises(ConversionError) as excinfo:
        from_lm_eval([run], max_file_bytes=size - 1)
    assert str(excinfo.value) == (
        f"{samples}: {size} bytes, more than the {size - 1} bytes read from such a file "
        "(raise the limit with max_file_bytes (--max-file-mb))"
    )
    with (run / "org__beta" / "results.json").open("r+b") as handle:  # sparse: nothing is written
        handle.truncate(MAX_RESULTS_BYTES + 1)
    with _within(), pytest.raises(ConversionError, match=re.escape(f"results.json: {MAX_RESULTS_BYTES + 1} bytes")):
        from_lm_eval([run])
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    with _within(), pytest.raises(ConversionError, match=re.escape(f"{huge}: {MAX_FILE_BYTES + 1} bytes, more than")):
        read_samples(huge)
    with pytest.raises(ValueError, match="max_file_bytes must be a positive integer"):
        from_lm_eval([run], max_file_bytes=0)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("which", ["scores.npy", "scores.npz", "scores.csv", "labels.txt", "tasks.txt"])
def test_array_files_that_are_not_regular_files_are_refused(tmp_path: Path, kind: str, which: str) -> None:
    np.save(tmp_path / "scores.npy", SCORES)
    np.savez(tmp_path / "scores.npz", scores=SCORES)
    (tmp_path / "scores.csv").write_text("\n".join(",".join(map(str, row)) for row in SCORES.reshape(3, -1)))
    (tmp_path / "labels.txt").write_text("0\n1\n1\n")
    (tmp_path / "tasks.txt").write_text("a\na\nb\n")
    _replace_by(tmp_path / which, kind, tmp_path)
    scores = which if which.startswith("scores") else "scores.csv"
    via = "" if kind == "fifo" else f" (a symbolic link to {kind})"
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    with _within(), pytest.raises(ConversionError) as excinfo:
        from_array_files(
            tmp_path / scores,
            score_kind="prob",
            labels=tmp_path / "labels.txt",
            tasks=tmp_path / "tasks.txt",
            models=["a", "b"],
        )
    assert str(excinfo.value) == f"{tmp_path / which}: {what}{via}, not a regular file; it is not read"


def test_read_input_reads_a_regular_file_and_says_what_else_is_there(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"bytes")
    assert read_input(tmp_path / "file") == b"bytes"
    (tmp_path / "empty").write_bytes(b"")
    assert read_input(tmp_path / "empty") == b""
    with pytest.raises(ConversionError, match=re.escape(f"{tmp_path}: a folder, not a regular file")):
        read_input(tmp_path)
    os.symlink(tmp_path / "absent", tmp_path / "broken")
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path / 'broken'}: no such file (a symbolic link")):
        read_input(tmp_path / "broken")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    with pytest.raises(ConversionError, match=re.escape(f"{tmp_path / 'loop'}: cannot be read (Too many levels")):
        read_input(tmp_path / "loop", root=tmp_path)


# -- numbers written in other scripts' digits (issue "Reliability, round 2") ------------------------------------------


@pytest.mark.parametrize(
    ("text", "character"),
    [
        ("１２", "'１' is U+FF11 FULLWIDTH DIGIT ONE"),
        ("－1.5", "'－' is U+FF0D FULLWIDTH HYPHEN-MINUS"),
        ("-１.5", "'１' is U+FF11 FULLWIDTH DIGIT ONE"),
        ("1e５", "'５' is U+FF15 FULLWIDTH DIGIT FIVE"),
        ("١٢", "'١' is U+0661 ARABIC-INDIC DIGIT ONE"),
        ("\u22121.5", "'\u2212' is U+2212 MINUS SIGN"),
    ],
)
def test_a_number_not_in_ascii_digits_is_refused_by_name(tmp_path: Path, text: str, character: str) -> None:
    assert parse_float(text) is None
    problem = f"{text!r} is not a number written in ASCII ({character}); numbers are read only as written with"
    rows = records("org__alpha", "suite_colors")
    rows[2]["filtered_resps"][1][0] = text
    path = write_alpha(tmp_path, rows)
    with pytest.raises(ConversionError) as excinfo:
        read_samples(path)
    assert str(excinfo.value).startswith(
        f"{path}, line 3: field 'filtered_resps': choice 1: log-likelihood {problem}"
    ), str(excinfo.value)
    scores, labels = tmp_path / "scores.csv", tmp_path / "labels.txt"
    labels.write_text("0\n1\n", encoding="utf-8")
    for first in (f"{text},0.5", "0.5,0.5"):  # a first row of such numbers is not taken for a header either
        scores.write_text(f"{first}\n0.25,{text}\n", encoding="utf-8")
        line = 1 if first.startswith(text) else 2
        column = 1 if line == 1 else 2
        with pytest.raises(ConversionError) as excinfo:
            from_array_files(scores, score_kind="prob", labels=labels, models=["a"])
        assert str(excinfo.value).startswith(f"{scores}, line {line}: column {column}: {problem}"), str(excinfo.value)


def test_integers_not_in_ascii_digits_are_refused(tmp_path: Path) -> None:
    scores, labels = tmp_path / "scores.csv", tmp_path / "labels.txt"
    scores.write_text("0.1,0.9\n0.7,0.3\n", encoding="utf-8")
    labels.write_text("0\n１\n", encoding="utf-8")
    with pytest.raises(
        ConversionError, match=re.escape(f"{labels}, line 2: field 'labels': column 1: '１' is not a number written")
    ):
        from_array_files(scores, score_kind="prob", labels=labels, models=["a"])
    rows = records("org__alpha", "suite_colors")
    rows[0]["target"] = "１"  # not a choice, and not an index in ASCII digits
    with pytest.raises(ConversionError, match="field 'target': '１' is neither one of the 2 choices"):
        read_samples(write_alpha(tmp_path, rows))


def test_a_header_row_is_still_skipped(tmp_path: Path) -> None:
    scores, labels = tmp_path / "scores.csv", tmp_path / "labels.txt"
    scores.write_text("model_1 c0,model_1 c1\n0.1,0.9\n0.7,0.3\n", encoding="utf-8")
    labels.write_text("1\n0\n", encoding="utf-8")
    assert from_array_files(scores, score_kind="prob", labels=labels, models=["a"]).n_questions == 2
    assert [looks_like_number(text) for text in ("model_1", "c0", "１２", "1_000", " 2 ", "nan", "x1")] == [
        False,
        False,
        True,
        True,
        True,
        True,
        False,
    ]


# -- reliability round 3 (issue 34, item 6): nothing taken silently ------------------------------------------------


def _duplicated(record: dict[str, Any], path: tuple[str, ...], value: Any, first: bool = False) -> str:
    """The record as JSON text, with the key at ``path`` written a second time holding ``value`` (after the
    original pair, or before it with ``first``)."""
    marker = "@@DUPLICATE@@"
    holder = record
    for key in path[:-1]:
        holder = holder[key]
    pairs = list(holder.items())
    at = next(index for index, (key, _) in enumerate(pairs) if key == path[-1])
    pairs.insert(at if first else at + 1, (marker, value))
    holder.clear()
    holder.update(pairs)
    return json.dumps(record, ensure_ascii=False).replace(json.dumps(marker), json.dumps(path[-1]))


@pytest.mark.parametrize("first", [False, True], ids=["second-wins", "first-wins"])
def test_a_key_written_twice_with_two_values_is_refused_naming_file_line_and_key(tmp_path: Path, first: bool) -> None:
    """Python's json keeps the last of two keys silently: the log-likelihoods read would depend on which."""
    rows = records("org__alpha", "suite_colors")
    path = write_alpha(tmp_path, rows)
    other = [["-9.0", "False"] for _ in rows[2]["filtered_resps"]]
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[2] = _duplicated(rows[2], ("filtered_resps",), other, first)
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConversionError) as excinfo:
        read_samples(path)
    message = str(excinfo.value)
    assert message.startswith(f"{path}, line 3: field 'filtered_resps': appears twice in one object"), message
    assert "-9.0" in message and "\n" not in message


def test_a_nested_duplicated_key_and_the_old_layout(tmp_path: Path) -> None:
    rows = records("org__alpha", "suite_colors")
    path = write_alpha(tmp_path, rows)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[1] = _duplicated(rows[1], ("doc", "question"), "another question")  # an unused field: refused too
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConversionError, match=rf"{path.name}, line 2: field 'question': appears twice in one object"):
        read_samples(path)
    old = records("org__alpha", "suite_colors", "old")
    path = write_alpha(tmp_path / "old", old, "old")
    starts = record_lines(path)
    text = path.read_text(encoding="utf-8")
    head, tail = text.split('"target": 1,', 1)  # the third record's target (an index): written twice
    assert head.count("\n") + 1 > starts[2]  # on a line after the one its record starts on
    path.write_text(head + '"target": 1, "target": 0,' + tail, encoding="utf-8")
    with pytest.raises(ConversionError) as excinfo:
        read_samples(path)
    assert str(excinfo.value).startswith(f"{path}, line {starts[2]}: field 'target': appears twice"), excinfo.value
    assert "the record starting on this line" in str(excinfo.value)


def test_a_key_repeated_with_the_identical_value_is_accepted(tmp_path: Path) -> None:
    """Identical duplicates lose nothing and are accepted; a value of another JSON type is not identical."""
    rows = records("org__alpha", "suite_colors")
    path = write_alpha(tmp_path, rows)
    expected = read_samples(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[0] = _duplicated(rows[0], ("filtered_resps",), rows[0]["filtered_resps"])
    path.write_text("\n".join(lines), encoding="utf-8")
    assert read_samples(path) == expected
    for same, other in (("1.0", "1"), ("0.0", "-0.0"), ("true", "1"), ('"1"', "1")):
        text = lines[0].replace('"acc": 1.0', f'"acc": {same}, "acc": {other}')
        path.write_text("\n".join([text, *lines[1:]]), encoding="utf-8")
        with pytest.raises(ConversionError, match="line 1: field 'acc': appears twice in one object"):
            read_samples(path)
        path.write_text("\n".join([text.replace(other, same, 1), *lines[1:]]), encoding="utf-8")


def test_a_duplicated_key_through_the_command_line(tmp_path: Path) -> None:
    from ensemble_env.cli import main

    run = write_run(tmp_path / "run")
    path = sorted(run.rglob("*.jsonl"))[0]
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[0] = lines[0].replace('"filter": "none"', '"filter": "none", "filter": "strict-match"')
    path.write_text("\n".join(lines), encoding="utf-8")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = main(["cache", "from-lm-eval", str(run), "-o", str(tmp_path / "out.h5")])
    assert code == 2 and not (tmp_path / "out.h5").exists()
    assert stderr.getvalue().startswith(f"ensemble-env cache: error: {path}, line 1: field 'filter': appears twice")


def _pool(**arrays: Any) -> dict[str, Any]:
    return {"scores": SCORES, "labels": np.array([0, 1, 1]), "models": np.array(["a", "b"]), **arrays}


def test_from_arrays_refuses_a_question_id_given_twice(tmp_path: Path) -> None:
    npz = tmp_path / "pool.npz"
    np.savez(npz, **_pool(question_ids=np.array(["q1", "q2", "q1"])))
    with pytest.raises(ConversionError) as excinfo:
        from_array_files(npz, score_kind="prob")
    assert str(excinfo.value) == (
        f"{npz}: field 'question_ids': question 2 has the id 'q1' of question 0; question ids must be unique"
    )
    np.savez(npz, **_pool(question_ids=np.array(["q1", "Q1", "q1 "])))  # distinct strings: distinct ids
    assert from_array_files(npz, score_kind="prob").question_ids == ("q1", "Q1", "q1 ")
    with pytest.raises(ConversionError, match="<memory>: field 'question_ids': question 1 has the id 'x'"):
        from_arrays(SCORES, [0, 1, 1], ["a", "b"], score_kind="prob", question_ids=["x", "x", "x"])


def test_from_arrays_refuses_features_beyond_float32(tmp_path: Path) -> None:
    """The game reads features as float32: a float64 beyond its range would be infinite there."""
    npz = tmp_path / "pool.npz"
    largest = float(np.finfo(np.float32).max)
    for value in (1e39, -3.5e38, np.nextafter(largest, np.inf), 1e308):
        features = np.array([[0.5, 1.0], [2.0, 3.0], [value, 4.0]])
        np.savez(npz, **_pool(features=features))
        with pytest.raises(ConversionError) as excinfo:
            from_array_files(npz, score_kind="prob")
        assert str(excinfo.value).startswith(
            f"{npz}: field 'features': question 2, column 0: the value {features[2, 0]} is beyond float32's range"
        ), excinfo.value
    for value in (largest, -largest, 1e-50):  # in range (1e-50 rounds to 0 as any float64 rounds in float32)
        np.savez(npz, **_pool(features=np.array([[0.5, 1.0], [2.0, 3.0], [value, 4.0]])))
        cache = from_array_files(npz, score_kind="prob")
        assert np.isfinite(cache.features.astype(np.float32)).all()
    np.savez(npz, **_pool(features=np.full((3, 2), largest, dtype=np.float32)))
    assert from_array_files(npz, score_kind="prob").features.dtype == np.float32
    with pytest.raises(ConversionError, match=r"<memory>: field 'features': question 0, column 1: the value 1e\+39"):
        from_arrays(SCORES, [0, 1, 1], ["a", "b"], score_kind="prob", features=[[0.0, 1e39], [0, 0], [0, 0]])


def test_from_arrays_refusals_through_the_command_line(tmp_path: Path) -> None:
    from ensemble_env.cli import main

    npz = tmp_path / "pool.npz"
    for arrays, field in (
        (_pool(question_ids=np.array(["a", "b", "b"])), "question_ids"),
        (_pool(features=np.array([[0.0], [1e39], [0.0]])), "features"),
    ):
        np.savez(npz, **arrays)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            code = main(["cache", "from-arrays", str(npz), "--score-kind", "prob", "-o", str(tmp_path / "out.h5")])
        assert code == 2 and not (tmp_path / "out.h5").exists()
        assert stderr.getvalue().startswith(f"ensemble-env cache: error: {npz}: field '{field}'"), stderr
        assert stderr.getvalue().count("\n") == 1


def test_from_arrays_refuses_floats_no_cache_stores(tmp_path: Path) -> None:
    """longdouble scores, costs or features were written, and the cache then refused by load_cache."""
    npz = tmp_path / "pool.npz"
    for name, value in (
        ("scores", SCORES.astype(np.longdouble)),
        ("costs", np.array([1.0, 2.0], dtype=np.longdouble)),
        ("features", np.ones((3, 2), dtype=np.longdouble)),
    ):
        if np.dtype(np.longdouble).itemsize <= 8:
            pytest.skip("numpy's longdouble is float64 on this platform")
        np.savez(npz, **_pool(**{name: value}))
        with pytest.raises(ConversionError, match=rf"pool\.npz: field '{name}': holds float\d+ numbers \(extended"):
            from_array_files(npz, score_kind="prob")
    np.savez(npz, **_pool(scores=SCORES.astype(np.float16), features=np.ones((3, 2), dtype=np.float16)))
    assert from_array_files(npz, score_kind="prob").n_questions == 3
