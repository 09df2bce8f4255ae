"""Build the built-in ``bbh5`` cache (``src/ensemble_env/data/bbh5.h5``) from the BBH samples of five LLMs.

The samples are the Open LLM Leaderboard v2 details of five open models on 16 BIG-Bench-Hard multiple-choice
tasks, in the lm-evaluation-harness samples format (``../shared/data/bbh-leaderboard`` beside the repository,
read only; never copied into the repository). The cache is made by the package's own converter and feature
code, as these commands would make it::

    ensemble-env cache from-lm-eval ../shared/data/bbh-leaderboard --test-fraction 0.2 \\
        --validation-fraction 0.2 --features text --n-features 64 -o bbh5.h5

- split per task by ``doc_id``: the first 80% train (the data's recommended split), of which the last 20% by
  ``doc_id`` become validation; the last 20% test (250 questions: 160 train, 40 validation, 50 test);
- scores: the summed log-likelihoods (lm-eval ``acc``), stored in the narrowest float type that holds every
  value exactly (float16 when lossless, else float32), gzip-compressed;
- ``question_text``: each question as the models saw it (``doc["input"]``, no few-shot examples);
- ``features``: 64 text features of the question alone (hashed word and character n-grams, TF-IDF,
  TruncatedSVD, standardised), fitted on the train split only (``ensemble_env.cache.features``);
- ``costs``: per question and model, the model's active parameters per token (billions, :data:`ACTIVE_PARAMETERS_B`,
  from the model cards) times the length of the prompt it scored, in thousands of characters (``arguments.*.arg_0``
  of the samples, ``"Q: <question>\nA:"``; characters, not tokens: the five models have four tokenizers, and the
  leaderboard's few-shot prefix is not in the data); a (Q, N) float64 array, the compute of reading the question
  in "billion-parameter x thousand-character" units;
- ``source``: the models, where the numbers (costs included) come from and the licences.

The script checks each model's accuracy on each task against the data's ``reference_accuracy.json``, copies
the BIG-Bench-Hard licence beside the cache as ``BBH-LICENSE``, and prints the accuracy tables documented in
``src/ensemble_env/data/README.md``. The build is deterministic: two builds give byte-identical files.

Usage (from anywhere; paths are relative to the repository root)::

    .venv/bin/python scripts/build_bbh5.py [--data DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
PROG = "build_bbh5.py"
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "bbh-leaderboard"
DEFAULT_OUT = REPO_ROOT / "src" / "ensemble_env" / "data" / "bbh5.h5"
TEST_FRACTION = 0.2
VALIDATION_FRACTION = 0.2
N_FEATURES = 64
MAX_FILE_BYTES = 4 * 1024 * 1024
LICENSE_FILE = "BBH-LICENSE"
#: the order of the accuracies in the data's reference_accuracy.json (the folder order of its README)
REFERENCE_ORDER = (
    "meta-llama__Llama-2-70b-chat-hf",
    "mistralai__Mixtral-8x7B-Instruct-v0.1",
    "google__gemma-7b",
    "microsoft__phi-2",
    "mistralai__Mistral-7B-v0.1",
)
#: active parameters per token, in billions (a mixture of experts counts the experts a token uses), and where
#: the figure comes from: the costs are these times the prompt's length (docs/default-cache.md, "Costs")
ACTIVE_PARAMETERS_B = {
    "google__gemma-7b": 8.5,  # Gemma report (arXiv 2403.08295), Table 2: 0.79B embedding + 7.75B other = 8.54B
    "meta-llama__Llama-2-70b-chat-hf": 70.0,  # Llama 2 model card: sizes 7B, 13B, 70B
    "microsoft__phi-2": 2.7,  # phi-2 model card: "a Transformer with 2.7 billion parameters"
    "mistralai__Mistral-7B-v0.1": 7.2,  # Mistral 7B checkpoint: 7.24B parameters (the announcement rounds to 7.3B)
    "mistralai__Mixtral-8x7B-Instruct-v0.1": 12.9,  # Mixtral announcement: 46.7B in all, 12.9B used per token
}
COST_UNIT = "billion active parameters x thousand prompt characters"
PROVENANCE = (
    "bbh5: per-choice log-likelihoods of 5 open LLMs ({models}) on 16 BIG-Bench-Hard multiple-choice tasks "
    "(3-shot, lm-evaluation-harness leaderboard_bbh_<task>), from the public Open LLM Leaderboard v2 details "
    "of these models, with the gold labels recomputed from the leaderboard's choice order; question texts and "
    "targets from BIG-Bench-Hard (Suzgun et al. 2022, MIT licence: BBH-LICENSE beside this file); "
    "built by scripts/build_bbh5.py; {conversion}; scores stored as {dtype}; costs: {costs}"
)


def narrowest_exact_dtype(scores: np.ndarray, valid: np.ndarray) -> np.dtype[Any]:
    """float16 or float32 if every valid score survives the round trip exactly, else the scores' own type."""
    values = scores[valid]
    for dtype in (np.float16, np.float32):
        if np.array_equal(values.astype(dtype).astype(values.dtype), values):
            return np.dtype(dtype)
    return scores.dtype


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``, read as the converters read their inputs
    (:func:`ensemble_env.cache.convert.common.read_input`: a regular file within the size limit, never a FIFO or a
    device; errors name the file)."""
    from ensemble_env.cache.convert.common import decode_text, read_input

    return decode_text(path, read_input(path))


def _json(path: Path, text: str, line: int) -> Any:
    """The JSON value of ``text`` (line ``line`` of ``path``); ValueError naming the file and the line otherwise."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}, line {line + error.lineno - 1}: not valid JSON ({error.msg})") from None


def check_reference(cache: Any, data: Path) -> None:
    """Each model's accuracy on each task (all questions) equals the data's reference_accuracy.json."""
    reference = _json(data / "reference_accuracy.json", read_text(data / "reference_accuracy.json"), 1)
    columns = [cache.models.index(model) for model in REFERENCE_ORDER]
    if sorted(reference) != sorted(cache.task_names):
        raise ValueError(f"tasks {cache.task_names} differ from the reference {sorted(reference)}")
    for task, expected in reference.items():
        questions = cache.select("all", [task])
        got = cache.model_accuracy(questions)[columns].tolist()
        if questions.size != expected["n"] or got != expected["acc"]:
            raise ValueError(f"task {task}: accuracies {got} (n={questions.size}) differ from {expected}")


def accuracy_table(cache: Any) -> str:
    """Markdown table: per split, each model's accuracy and the baselines (best single chosen on train)."""
    from ensemble_env.baselines.report import summarize

    splits = ("train", "validation", "test", "all")
    summaries = {split: summarize(cache, split) for split in splits}
    header = "| | " + " | ".join(f"{s} ({summaries[s]['n_eval']})" for s in splits) + " |"
    lines = [header, "|---|" + "---:|" * len(splits)]
    for model in cache.models:
        cells = [f"{100 * summaries[s]['overall']['models'][model]:.1f}" for s in splits]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    names = {
        "best_single": f"best single (train: {summaries['test']['best_single_model']})",
        "plurality_vote": "plurality vote of the 5",
        "mean_probability_vote": "mean-probability vote of the 5",
        "oracle": "oracle (any model right)",
    }
    for key, label in names.items():
        cells = [f"{100 * summaries[s]['overall']['baselines'][key]:.1f}" for s in splits]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def prompt_characters(cache: Any, data: Path) -> np.ndarray:
    """(Q,) int64: the length in characters of the prompt each question was scored with (``arg_0``), read from
    every model's samples, which must agree on it (a ValueError naming the file and the question otherwise)."""
    lengths: dict[str, int] = {}
    for path in sorted(data.glob("*/samples_*.jsonl")):
        for number, line in enumerate(read_text(path).splitlines(), start=1):
            record = _json(path, line, number)
            contexts = {request["arg_0"] for request in record["arguments"].values()}
            if len(contexts) != 1:
                raise ValueError(f"{path}:{number}: the choices were scored after different prompts")
            length = len(contexts.pop())
            if lengths.setdefault(record["doc_hash"], length) != length:
                raise ValueError(f"{path}:{number}: doc_hash {record['doc_hash']}: another prompt length")
    missing = [qid for qid in cache.question_ids if qid not in lengths]
    if missing:
        raise ValueError(f"no samples record of question {missing[0]} in {data}")
    return np.array([lengths[qid] for qid in cache.question_ids], dtype=np.int64)


def question_costs(cache: Any, data: Path) -> np.ndarray:
    """(Q, N) float64: each model's active parameters (billions) times the question's prompt length in thousands
    of characters (:data:`COST_UNIT`)."""
    missing = [model for model in cache.models if model not in ACTIVE_PARAMETERS_B]
    if missing:
        raise ValueError(f"no active parameter count for model {missing[0]} (ACTIVE_PARAMETERS_B)")
    parameters = np.array([ACTIVE_PARAMETERS_B[model] for model in cache.models])
    return prompt_characters(cache, data)[:, None] / 1000.0 * parameters[None, :]


def describe_costs(models: tuple[str, ...]) -> str:
    """The costs' provenance, as the cache's ``source`` says it."""
    counts = ", ".join(f"{model.replace('__', '/')} {ACTIVE_PARAMETERS_B[model]:g}B" for model in models)
    return (
        f"per question and model, active parameters per token ({counts}; from the model cards, a mixture of "
        "experts counting the experts a token uses) x the characters of the prompt scored (arguments.arg_0) "
        f"/ 1000, in {COST_UNIT}"
    )


def copy_license(data: Path, folder: Path) -> Path:
    """Copy the BIG-Bench-Hard licence beside the cache (atomically: temporary file, then rename)."""
    from ensemble_env.cache.convert.common import read_input
    from ensemble_env.files import write_bytes

    return write_bytes(folder / LICENSE_FILE, read_input(data / LICENSE_FILE), inputs=[data / LICENSE_FILE])


def build(data: Path) -> Any:
    """The bbh5 cache from the samples folder ``data``."""
    from ensemble_env.cache.convert import from_lm_eval
    from ensemble_env.cache.features import with_text_features

    cache = from_lm_eval([data], test_fraction=TEST_FRACTION, validation_fraction=VALIDATION_FRACTION)
    if cache.n_models != 5 or cache.n_tasks != 16:
        raise ValueError(f"expected 16 tasks x 5 models, got {cache.n_tasks} x {cache.n_models}")
    check_reference(cache, data)
    valid = np.arange(cache.max_choices)[None, None, :] < cache.n_choices[:, None, None]
    valid = np.broadcast_to(valid, cache.scores.shape)
    dtype = narrowest_exact_dtype(cache.scores, valid)
    cache = with_text_features(cache, N_FEATURES)
    models = ", ".join(model.replace("__", "/") for model in cache.models)
    costs = describe_costs(cache.models)
    source = PROVENANCE.format(models=models, conversion=cache.source, dtype=dtype.name, costs=costs)
    narrowed = dataclasses.replace(
        cache, scores=cache.scores.astype(dtype), source=source, costs=question_costs(cache, data)
    )
    if not np.array_equal(narrowed.preds, cache.preds):
        raise ValueError("narrowing the scores changed a prediction")
    return narrowed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the BBH samples folder (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the cache (default: %(default)s)")
    args = parser.parse_args(argv)
    # use this checkout's package, whether or not it is installed
    sys.path.insert(0, str(REPO_ROOT / "src"))
    from ensemble_env.errors import run_command

    return run_command(PROG, lambda: _build(args.data, args.out))


def _build(data: Path, out: Path) -> int:
    if not (data / "reference_accuracy.json").is_file():
        raise ValueError(f"{data}: not the BBH samples folder (no reference_accuracy.json)")
    from ensemble_env.cache import SPLITS, load_cache
    from ensemble_env.datasets import save_builtin

    start = time.perf_counter()
    size = save_builtin(out, build(data), MAX_FILE_BYTES)
    print(f"wrote {out} ({size / 1024:.0f} KiB) in {time.perf_counter() - start:.1f}s")
    print(f"copied {copy_license(data, out.parent)}")
    loaded = load_cache(out)
    counts = {name: int((loaded.split == code).sum()) for name, code in SPLITS.items()}
    print(f"scores {loaded.scores.dtype}, features {loaded.features.shape}, splits {counts}")  # type: ignore[union-attr]
    mean_costs = ", ".join(f"{m} {c:.3f}" for m, c in zip(loaded.models, loaded.costs.mean(axis=0), strict=True))  # type: ignore[union-attr]
    print(f"mean cost per question ({COST_UNIT}): {mean_costs}")
    print(f"source: {loaded.source}")
    print()
    print(accuracy_table(loaded))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
