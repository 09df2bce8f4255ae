"""Hostile inputs to the converters (issue 13): numbers beyond floats or with absurd digit counts, deep nesting,
strings no cache can store, absurd choice counts, damaged .npy/.npz files. Each is refused with a
ConversionError naming the file (and the line), never a traceback.

The seeded fuzz suite over many mutations is in tests/test_fuzz_lm_eval.py; these are the named cases.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_convert import MODELS, SCORES, _write_alpha, record_lines, records, write_run

from ensemble_env.cache.convert import ConversionError, from_array_files, from_lm_eval, read_samples

# -- hostile inputs (issue 13): refused with the file and the line, never a traceback ---------------------------


def _with_raw_loglik(tmp_path: Path, raw: str, layout: str = "new") -> Path:
    """The alpha samples file with the JSON text ``raw`` as the log-likelihood of record 2, choice 1."""
    rows = records("org__alpha", "suite_colors", layout)
    rows[2]["filtered_resps"][1][0] = "@@RAW@@"
    path = _write_alpha(tmp_path, rows, layout)
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
    assert len(read_samples(_write_alpha(tmp_path, rows))) == 5


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
    path = _write_alpha(tmp_path, rows)
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
        with pytest.raises(ConversionError, match=re.escape(f"{labels}, line 2: column 1: ")) as excinfo:
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
    path = _write_alpha(tmp_path, layout="old")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("[\n  {", f"[\n  {element},\n  {{", 1), encoding="utf-8")
    with pytest.raises(ConversionError, match=re.escape(f"{path.name}, line 2: expected a JSON object")):
        read_samples(path)
