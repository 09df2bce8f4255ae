"""Task generator files: :func:`save_generator` (atomic JSON) and :func:`load_generator` (validated, safe on any file).

A generator file is one JSON object of numbers and strings, never a pickle (``docs/generated-tasks.md``):

=====================  ============================================================================================
key                    value
=====================  ============================================================================================
``format``             ``"ensemble-task-generator"``
``format_version``     ``1`` (a reader refuses another)
``models``             the fitted pool's P model names
``score_kind``         the fitted cache's ``score_kind``
``source``             free text: what the generator was fitted to
``split_fractions``    [validation, test]: the share of each generated task's questions in each split
``margin_quantiles``   the probabilities of the quantiles kept (:data:`~ensemble_env.cache.task_model.MARGIN_QUANTILES`)
``spread``             {family: number}: the jitter's scale of each parameter family (of each model's own move)
``shared_spread``      {family: number}: the scale of the shift a task's models share (per-model families)
``model_spread``       {family: number}: the spread between models (the extra models' offsets)
``tasks``              a list of objects, one per fitted task: ``name``, ``n_questions`` and every parameter of
                       :class:`~ensemble_env.cache.task_model.TaskFit` (arrays as nested lists)
=====================  ============================================================================================

Reading follows the project's rules for hostile input: only a regular file of at most :data:`MAX_GENERATOR_BYTES`
bytes is read (a folder, a FIFO, a device, or a link to one is refused without blocking on it:
:func:`~ensemble_env.cache.convert.common.read_input`); the JSON is parsed with numbers bounded (an overlong number
or one beyond the float range is refused by name), no key twice with different values, nesting at most
:data:`MAX_GENERATOR_DEPTH` levels; then every field is checked by type, shape, range and finiteness before anything
uses it (:class:`~ensemble_env.cache.task_model.TaskFit` and :class:`~ensemble_env.cache.generator.TaskGenerator`
validate at construction). Every refusal is a :class:`~ensemble_env.cache.CacheError` (a ValueError) naming the file,
the field and the value. Writing goes to a temporary file renamed into place (:func:`ensemble_env.files.write_text`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache.convert.common import (
    ConversionError,
    DuplicateKeyError,
    check_depth,
    json_decoder,
    read_input,
)
from ensemble_env.cache.generator import MAX_GENERATOR_TASKS, OFFSET_FAMILIES, TaskGenerator
from ensemble_env.cache.logit_cache import CacheError, cache_error
from ensemble_env.cache.task_model import MARGIN_QUANTILES, MODEL_FAMILIES, TASK_FAMILIES, FieldChecker, TaskFit
from ensemble_env.files import write_text
from ensemble_env.text import show

__all__ = [
    "GENERATOR_FORMAT",
    "GENERATOR_FORMAT_VERSION",
    "MAX_GENERATOR_BYTES",
    "MAX_GENERATOR_DEPTH",
    "load_generator",
    "save_generator",
]

#: the ``format`` of a generator file
GENERATOR_FORMAT = "ensemble-task-generator"
#: the ``format_version`` this package writes and reads
GENERATOR_FORMAT_VERSION = 1
#: the largest generator file read (a bbh5 fit is about 200 kB)
MAX_GENERATOR_BYTES = 32 * 2**20
#: the deepest nesting of JSON arrays and objects read (the format has 4 levels)
MAX_GENERATOR_DEPTH = 8

_TOP = ("format", "format_version", "models", "score_kind", "source", "split_fractions", "margin_quantiles", "spread",
        "shared_spread", "model_spread", "tasks")  # fmt: skip
_TASK = ("name", "n_questions", *(name for name in TaskFit.__dataclass_fields__ if name not in ("name", "n_questions",
         "path")))  # fmt: skip


def _as_json(value: Any) -> Any:
    """``value`` with arrays as nested lists and numpy scalars as Python numbers (for JSON)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def save_generator(path: str | os.PathLike[str], generator: TaskGenerator) -> Path:
    """Write ``generator`` to ``path`` as JSON (the module's table), atomically (a temporary file beside ``path``,
    synced, then renamed: :func:`ensemble_env.files.write_text`); numbers are written exactly (``repr`` of each
    float), so :func:`load_generator` gives back the same parameters. Returns the path written.

    Raises :class:`~ensemble_env.files.OutputError` (a ValueError and an OSError naming ``path`` and the cause) when
    the file cannot be written: a folder, a read-only or full disk, ...
    """
    if not isinstance(generator, TaskGenerator):
        raise ValueError(f"save_generator needs a TaskGenerator, got {type(generator).__name__}")
    record = {
        "format": GENERATOR_FORMAT,
        "format_version": GENERATOR_FORMAT_VERSION,
        "models": list(generator.models),
        "score_kind": generator.score_kind,
        "source": generator.source,
        "split_fractions": list(generator.split_fractions),
        "margin_quantiles": list(MARGIN_QUANTILES),
        "spread": dict(generator.spread),
        "shared_spread": dict(generator.shared_spread),
        "model_spread": dict(generator.model_spread),
        "tasks": [
            {"name": task.name, "n_questions": task.n_questions}
            | {key: _as_json(value) for key, value in task.parameters().items()}
            for task in generator.tasks
        ],
    }
    return write_text(path, json.dumps(record, allow_nan=False, indent=1) + "\n")


def _object(check: FieldChecker, name: str, value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """``value`` as a JSON object holding exactly ``keys``."""
    if not isinstance(value, dict):
        raise check.fail(name, f"must be a JSON object, got {show(value)}")
    missing = [key for key in keys if key not in value]
    if missing:
        raise check.fail(name, f"lacks the field {missing[0]!r} (a generator file holds {', '.join(keys)})")
    unknown = [key for key in value if key not in keys]
    if unknown:
        raise check.fail(name, f"holds the unknown field {show(unknown[0])} (known: {', '.join(keys)})")
    return value


def _parse(path: str, data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise cache_error(path, "(file)", f"is not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        record = json_decoder().decode(text)
    except DuplicateKeyError as error:
        raise cache_error(path, error.key, str(error)) from None
    except (ValueError, RecursionError) as error:
        raise cache_error(path, "(file)", f"is not valid JSON ({str(error)[:200]})") from None
    try:
        check_depth(record, MAX_GENERATOR_DEPTH)
    except ValueError as error:
        raise cache_error(path, "(file)", str(error)) from None
    return record


def load_generator(path: str | os.PathLike[str]) -> TaskGenerator:
    """Read and validate the generator file ``path`` (safe on any file, whoever made it: the module's docstring).

    Raises FileNotFoundError when there is no file, and :class:`~ensemble_env.cache.CacheError` (a ValueError) naming
    the file, the field and the value for anything else: not a regular file, too large, not UTF-8 JSON, another
    ``format`` or ``format_version``, a missing or unknown field, a value of the wrong type, shape or range, a number
    that is not finite.
    """
    name = os.fspath(path) if not isinstance(path, bytes) else os.fsdecode(path)
    try:
        data = read_input(name, limit=MAX_GENERATOR_BYTES)
    except ConversionError as error:
        raise CacheError(str(error)) from None
    record = _parse(name, data)
    check = FieldChecker(name)
    record = _object(check, "(file)", record, _TOP)
    if record["format"] != GENERATOR_FORMAT:
        raise check.fail("format", f"is {show(record['format'])}, expected {GENERATOR_FORMAT!r}")
    version = record["format_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version != GENERATOR_FORMAT_VERSION:
        raise check.fail(
            "format_version", f"{show(version)} is not supported (this reader knows {GENERATOR_FORMAT_VERSION})"
        )
    quantiles = check.array("margin_quantiles", record["margin_quantiles"], (len(MARGIN_QUANTILES),), low=0.0, high=1.0)
    if not np.allclose(quantiles, MARGIN_QUANTILES, rtol=0.0, atol=1e-12):
        raise check.fail("margin_quantiles", f"must be {list(MARGIN_QUANTILES)}, got {show(quantiles.tolist())}")
    tasks = record["tasks"]
    if not isinstance(tasks, list) or not 1 <= len(tasks) <= MAX_GENERATOR_TASKS:
        raise check.fail("tasks", f"must be a list of 1..{MAX_GENERATOR_TASKS} task objects, got {show(tasks)}")
    fits = []
    for index, task in enumerate(tasks):
        fields = _object(check, f"tasks[{index}]", task, _TASK)
        fits.append(TaskFit(**fields, path=name))
    for key, families in (
        ("spread", TASK_FAMILIES),
        ("shared_spread", MODEL_FAMILIES),
        ("model_spread", OFFSET_FAMILIES),
    ):
        _object(check, key, record[key], families)
    models = record["models"]
    if not isinstance(models, list):
        raise check.fail("models", f"must be a list of model names, got {show(models)}")
    return TaskGenerator(
        models=tuple(models),
        score_kind=record["score_kind"],
        tasks=tuple(fits),
        split_fractions=record["split_fractions"],
        spread=record["spread"],
        shared_spread=record["shared_spread"],
        model_spread=record["model_spread"],
        source=record["source"],
        path=name,
    )
