"""The converters' inputs in the tests: a small hand-written pool of lm-eval samples (two models, two tasks with 2 to
4 choices) written as either layout's files, a digest of a folder's files, the arrays of ``from_arrays``, and the
real BBH samples' folder."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

# -- the hand-written pool -------------------------------------------------------------------------------------------
# Per task: (doc_id, choices, target). Gold labels: colors 1, 0, 1 (integer target), 2 (the choice "1" wins
# over index 1), 0; numbers 2, 0 (integer target), 2, 1.
TASKS: dict[str, list[tuple[int, tuple[str, ...], str]]] = {
    "suite_colors": [
        (0, ("red", "blue"), "blue"),
        (1, ("red", "green", "blue"), "red"),
        (2, ("yes", "no"), "1"),
        (3, ("10", "2", "1"), "1"),
        (4, ("été", "a"), "été"),
    ],
    "suite_numbers": [
        (0, ("1", "2", "3", "4"), "3"),
        (1, ("x", "y"), "0"),
        (2, ("p", "q", "r"), "r"),
        (3, ("m", "n"), "n"),
    ],
}
LABELS = [1, 0, 1, 2, 0, 2, 0, 2, 1]
# Per model and task, per question, the log-likelihood of each choice (multiples of 1/8: exact as text).
LOGLIKS: dict[str, dict[str, list[list[float]]]] = {
    "org__alpha": {
        "suite_colors": [[-1.5, -0.5], [-0.25, -2.0, -3.0], [-0.75, -1.25], [-2.0, -1.0, -0.5], [-3.0, -1.0]],
        "suite_numbers": [[-1.0, -2.0, -0.5, -3.0], [-0.5, -1.0], [-1.0, -2.0, -3.0], [-2.0, -1.0]],
    },
    "org__beta": {
        "suite_colors": [[-0.5, -1.5], [-1.0, -0.5, -2.0], [-2.0, -0.125], [-0.5, -1.5, -2.5], [-0.5, -4.0]],
        "suite_numbers": [[-1.0, -0.5, -2.0, -3.0], [-2.0, -1.0], [-3.0, -2.0, -1.0], [-1.0, -2.0]],
    },
}
MODELS = tuple(LOGLIKS)
# argmax of each model on the 9 questions (colors then numbers)
PREDS = [[1, 0], [0, 1], [0, 1], [2, 0], [1, 0], [2, 1], [0, 1], [0, 2], [1, 0]]
# per task, floor(0.8 n) train: colors 4 of 5, numbers 3 of 4
SPLIT = [0, 0, 0, 0, 1, 0, 0, 0, 1]


def new_record(task: str, doc_id: int, choices: tuple[str, ...], target: str, logliks: list[float]) -> dict[str, Any]:
    """One line of an lm-eval >= 0.4.7 samples file: numbers and booleans as strings, filter/metrics fields."""
    return {
        "doc_id": doc_id,
        "doc": {"question": f"{task} question {doc_id}", "target": target},
        "target": target,
        "arguments": {f"gen_args_{i}": {"arg_0": f"Q{doc_id}\nA:", "arg_1": " " + c} for i, c in enumerate(choices)},
        "resps": [[[repr(value), "False"]] for value in logliks],
        "filtered_resps": [[repr(value), "False"] for value in logliks],
        "filter": "none",
        "metrics": ["acc", "acc_norm"],
        "doc_hash": f"hash-{task}-{doc_id}",
        "prompt_hash": f"prompt-{doc_id}",
        "target_hash": f"target-{doc_id}",
        "acc": 1.0,
        "acc_norm": 0.0,
    }


def old_record(task: str, doc_id: int, choices: tuple[str, ...], target: str, logliks: list[float]) -> dict[str, Any]:
    """One element of an lm-eval 0.4.0-0.4.2 samples file: native numbers, [context, continuation] pairs."""
    native: int | str = int(target) if target.isdigit() and target not in choices else target
    return {
        "doc_id": doc_id,
        "doc": {"question": f"{task} question {doc_id}"},
        "target": native,
        "arguments": [[f"Q{doc_id}\nA:", " " + c] for c in choices],
        "resps": [[[value, False]] for value in logliks],
        "filtered_resps": [[value, False] for value in logliks],
        "acc": 1.0,
    }


def records(model: str, task: str, layout: str = "new") -> list[dict[str, Any]]:
    build = new_record if layout == "new" else old_record
    return [
        build(task, doc_id, choices, target, LOGLIKS[model][task][doc_id]) for doc_id, choices, target in TASKS[task]
    ]


def model_args(model: str) -> str:
    return f"pretrained=org/{model.split('__')[1]},dtype=bfloat16"


def write_samples(folder: Path, model: str, task: str, rows: list[dict[str, Any]], layout: str = "new") -> Path:
    """Write one samples file the way that lm-eval version names and formats it; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    if layout == "new":
        path = folder / f"samples_{task}_2024-07-01T12-30-45.123456.jsonl"
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    else:
        sanitized = model_args(model).replace("/", "__").replace("=", "__")
        path = folder / f"{sanitized}_{task}.jsonl"
        path.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def write_run(root: Path, layout: str = "new", models: tuple[str, ...] = MODELS, results: bool = True) -> Path:
    """An ``--output_path`` folder: one sub-folder per model with one samples file per task."""
    for model in models:
        for task in TASKS:
            write_samples(root / model, model, task, records(model, task, layout), layout)
        if layout == "old" and results:
            summary = {"results": {t: {"acc": 0.5} for t in TASKS}, "configs": {t: {} for t in TASKS}}
            summary["config"] = {"model": "hf", "model_args": model_args(model)}
            (root / model / "results.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return root


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first occurrence of ``needle`` in a file."""
    text = path.read_text(encoding="utf-8")
    return text[: text.index(needle)].count("\n") + 1


def record_lines(path: Path) -> list[int]:
    """The line each record starts on: every non-empty line (JSON Lines), or each '  {' line (a JSON array)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines[0] == "[":
        return [number for number, line in enumerate(lines, start=1) if line == "  {"]
    return [number for number, line in enumerate(lines, start=1) if line.strip()]


def digest(folder: Path) -> dict[str, str]:
    """The SHA-256 of every regular file under ``folder`` and where every link leads (links are not followed: one
    may lead to /dev/zero or a FIFO)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = "-> " + os.readlink(path)
        elif stat.S_ISREG(path.lstat().st_mode):
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def write_alpha(tmp_path: Path, rows: list[dict[str, Any]] | None = None, layout: str = "new") -> Path:
    """org__alpha's samples file of suite_colors (its records, or ``rows``), in its folder under ``tmp_path``."""
    rows = records("org__alpha", "suite_colors", layout) if rows is None else rows
    return write_samples(tmp_path / "org__alpha", "org__alpha", "suite_colors", rows, layout)


# -- arrays -----------------------------------------------------------------------------------------------------------

SCORES = np.array([[[0.9, 0.1], [0.4, 0.6]], [[0.2, 0.8], [0.7, 0.3]], [[0.5, 0.5], [0.1, 0.9]]])


# -- the real BBH files (skipped without ../shared) ------------------------------------------------------------------

BBH_DATA = Path(
    os.environ.get(
        "ENSEMBLE_ENV_BBH_DATA", Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "bbh-leaderboard"
    )
)
# the order of the accuracies in reference_accuracy.json: the folder order of the data's README
BBH_MODEL_ORDER = (
    "meta-llama__Llama-2-70b-chat-hf",
    "mistralai__Mixtral-8x7B-Instruct-v0.1",
    "google__gemma-7b",
    "microsoft__phi-2",
    "mistralai__Mistral-7B-v0.1",
)
