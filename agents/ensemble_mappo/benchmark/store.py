"""The benchmark's files: its results folder and the finished runs kept in it.

A finished run is ``OUT/runs/CACHE-DIGEST/ALGORITHM-seedS-HASH/result.json``: its key (:func:`run_key`: the
algorithm, the seed, the cache's content digest, alpha and the algorithm's config) and its test answers.
``CACHE-DIGEST`` is the cache's file name and the start of its content digest
(:func:`ensemble_env.cache.digest.cache_digest`), so a cache rebuilt at the same path, or another cache of the
same name, has runs of its own; ``HASH`` is a hash of the whole key.

:func:`read_run` is the one way a stored run is read back. It reads only a regular file of a bounded size inside
``OUT/runs`` (:func:`ensemble_env.cache.convert.common.read_input`), as JSON without NaN or infinities nested at
most :data:`MAX_DEPTH` levels, and checks it by value (:func:`check_record`): exactly the fields of
:data:`RECORD_FIELDS`, the key equal to the run's, the questions the cache's test split in order, the predictions
integers in -1..n_choices-1, the teams rows of 0/1 integers with a member each, ``info`` an object. A file that
fails raises :class:`RunError` naming the file, the field and the value. :func:`write_run` writes a run
atomically after the same checks on the very text it writes, so a run written is a run that reads back.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache.convert.common import MAX_DIGITS, check_depth, decode_text, read_input
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import OutputError, check_output, make_folder, write_bytes
from ensemble_env.text import show

__all__ = [
    "EVERY_SEED",
    "MAX_DEPTH",
    "RECORD_FIELDS",
    "RESULT",
    "RunError",
    "check_record",
    "prepare_out",
    "read_run",
    "run_folder",
    "run_key",
    "write_output",
    "write_run",
]

#: the file of a finished run, in its folder
RESULT = "result.json"
#: the seed in the key of a run that stands for every seed: an algorithm that draws nothing, run once per unit under
#: ``--protocol generated`` (its folder ``ALGORITHM-seedall-HASH``)
EVERY_SEED = "all"
#: the fields of a run's file, exactly these
RECORD_FIELDS = ("key", "questions", "predictions", "teams", "info")
#: the deepest nesting of arrays and objects in a run's file (the teams are 3 levels deep, ``info`` a few more)
MAX_DEPTH = 32
#: the bytes a run's file may hold besides its answers (its key and ``info``)
MAX_EXTRA_BYTES = 4 * 2**20
#: the bytes a stored number may take with its indentation, comma and newline (far more than it does)
BYTES_PER_NUMBER = 32
#: how long a name is, at most, in a run's folder name (the hash keeps the folders apart)
_NAME_LENGTH = 64


class RunError(ValueError):
    """A stored run that is not read: the message names the file, the field and the value."""


def run_key(algorithm: str, seed: int | str, digest: str, alpha: float, config: Mapping[str, Any]) -> dict[str, Any]:
    """The key of one run, as it reads back from JSON: the algorithm (its canonical name), the seed (or
    :data:`EVERY_SEED`), the content digest of the cache, alpha, and the algorithm's config (for a learner: its
    budget and whole configuration)."""
    key = {"algorithm": algorithm, "seed": seed, "cache": digest, "alpha": alpha, "config": dict(config)}
    try:
        return dict(json.loads(json.dumps(key, allow_nan=False)))
    except (TypeError, ValueError) as error:
        raise ValueError(f"algorithm {algorithm!r}: its config must be JSON-ready, finite numbers ({error})") from None


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:_NAME_LENGTH] or "_"


def run_folder(out: Path, key: Mapping[str, Any], cache_name: str) -> Path:
    """``out/runs/CACHE-DIGEST/ALGORITHM-seedS-HASH``: the folder of the run of ``key`` on the cache ``cache_name``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    cache = f"{_safe(Path(cache_name).stem)}-{key['cache'][:12]}"
    return out / "runs" / cache / f"{_safe(key['algorithm'])}-seed{key['seed']}-{digest}"


def run_size_limit(cache: LogitCache) -> int:
    """The most bytes a stored run of ``cache`` may hold (its answers to every test question, and its info)."""
    test = cache.select("test")
    return MAX_EXTRA_BYTES + BYTES_PER_NUMBER * test.size * (cache.n_models + 2)


class _NotANumber:
    """A JSON number that is not read, kept as its text so that the field holding it is named: NaN, an infinity,
    a number beyond the float range (``1e400``) or written with more than :data:`MAX_DIGITS` characters."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text if len(self.text) <= 40 else f"<a number written with {len(self.text)} characters>"


def _float(text: str) -> float | _NotANumber:
    number = float(text) if len(text) <= MAX_DIGITS else math.inf
    return number if math.isfinite(number) else _NotANumber(text)


def _int(text: str) -> int | _NotANumber:
    return int(text) if len(text) <= MAX_DIGITS else _NotANumber(text)


_DECODER = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_NotANumber)


def _parse(where: str, text: str) -> Any:
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise RunError(f"{where}: not valid JSON here (arrays and objects nested too deeply to parse)") from None
    except ValueError as error:
        raise RunError(f"{where}: not valid JSON ({show(str(error), 200)}; truncated or corrupt?)") from None
    try:
        check_depth(value, MAX_DEPTH)
    except ValueError as error:
        raise RunError(f"{where}: {error}") from None
    return value


def _not_a_number(value: Any) -> _NotANumber | None:
    """The first number that is not read in ``value`` (nested at most :data:`MAX_DEPTH` levels), or None."""
    level = [value]
    while level:
        for item in level:
            if isinstance(item, _NotANumber):
                return item
        level = [
            inner
            for item in level
            if isinstance(item, dict | list)
            for inner in (item.values() if isinstance(item, dict) else item)
        ]
    return None


def check_record(record: Any, key: Mapping[str, Any], cache: LogitCache, where: str) -> dict[str, Any]:
    """``record`` (a run parsed from JSON) when it is the run of ``key`` on ``cache``, else :class:`RunError`
    naming ``where``, the field and the value (see the module docstring for the rules)."""

    def refuse(field: str, problem: str) -> RunError:
        return RunError(f"{where}: field '{field}': {problem}")

    if not isinstance(record, dict):
        raise RunError(f"{where}: a run is a JSON object of {', '.join(RECORD_FIELDS)}, got {type(record).__name__}")
    missing = [field for field in RECORD_FIELDS if field not in record]
    extra = [field for field in record if field not in RECORD_FIELDS]
    if missing or extra:
        raise RunError(f"{where}: a run holds exactly {', '.join(RECORD_FIELDS)}; missing {missing}, extra {extra}")
    if record["key"] != key:
        raise refuse("key", f"{show(record['key'], 200)} is not this run's key {show(dict(key), 200)}")
    test = cache.select("test")
    questions = record["questions"]
    given = _integers(questions, test.size)  # the usual case at C speed; the loops below name a wrong entry
    if given is None or not np.array_equal(given, test):
        if not isinstance(questions, list) or len(questions) != test.size:
            raise refuse("questions", f"must be the {test.size} test questions in order, got {show(questions)}")
        for index, (entry, expected) in enumerate(zip(questions, test.tolist(), strict=True)):
            if type(entry) is not int or entry != expected:
                raise refuse("questions", f"entry {index} is {show(entry)}, the test question there is {expected}")
    choices = np.asarray(cache.n_choices)[test]
    predictions = record["predictions"]
    answers = _integers(predictions, test.size)
    if answers is None or not np.all((answers >= -1) & (answers < choices)):
        if not isinstance(predictions, list) or len(predictions) != test.size:
            raise refuse("predictions", f"must be a list of {test.size} answer indices, got {show(predictions)}")
        for index, (answer, n_choices) in enumerate(zip(predictions, choices.tolist(), strict=True)):
            if type(answer) is not int or not -1 <= answer < n_choices:
                problem = f"entry {index} is {show(answer)}, expected an integer in -1..{n_choices - 1}"
                raise refuse("predictions", problem)
    _check_teams(record["teams"], test.size, cache.n_models, refuse)
    info = record["info"]
    if not isinstance(info, dict):
        raise refuse("info", f"must be a JSON object, got {type(info).__name__} {show(info)}")
    if (number := _not_a_number(info)) is not None:
        raise refuse("info", f"holds {number!r}, not a finite number")
    return record


def _integers(values: Any, size: int) -> np.ndarray | None:
    """``values`` as an int64 array when it is a list of ``size`` JSON integers (``bool`` is not one) within int64,
    else None: the check of the usual case at C speed."""
    if not isinstance(values, list) or len(values) != size or not set(map(type, values)) <= {int}:
        return None
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:  # an integer beyond int64: the entry-by-entry check names it
        return None


def _valid_teams(teams: Any, n_questions: int, n_models: int) -> bool:
    """Whether ``teams`` is ``n_questions`` rows of ``n_models`` 0/1 integers with a member each, at C speed."""
    if not isinstance(teams, list) or len(teams) != n_questions or not set(map(type, teams)) <= {list}:
        return False
    if not set(map(len, teams)) <= {n_models}:
        return False
    members = _integers(list(itertools.chain.from_iterable(teams)), n_questions * n_models)
    if members is None or not np.all((members == 0) | (members == 1)):
        return False
    return bool(members.reshape(n_questions, n_models).any(axis=1).all())


def _check_teams(teams: Any, n_questions: int, n_models: int, refuse: Any) -> None:
    if _valid_teams(teams, n_questions, n_models):
        return  # the usual case; else the checks below name the first wrong row or entry
    if not isinstance(teams, list) or len(teams) != n_questions:
        raise refuse("teams", f"must be {n_questions} rows of {n_models} 0/1 entries, got {show(teams)}")
    for index, row in enumerate(teams):
        if not isinstance(row, list) or len(row) != n_models:
            raise refuse("teams", f"row {index} is {show(row)}, expected {n_models} 0/1 entries")
        for model, member in enumerate(row):
            if type(member) is not int or member not in (0, 1):
                raise refuse("teams", f"row {index}, model {model} is {show(member)}, expected 0 or 1")
        if 1 not in row:
            raise refuse("teams", f"row {index} has no member (every question needs a model)")


def read_run(path: Path, key: Mapping[str, Any], cache: LogitCache, root: Path) -> dict[str, Any] | None:
    """The stored run at ``path`` (inside the folder ``root``), checked to be the run of ``key`` on ``cache``; None
    when there is no file; :class:`RunError` naming the file, the field and the value when it is not one."""
    try:
        data = read_input(path, limit=run_size_limit(cache), root=root)
        text = decode_text(path, data)
    except FileNotFoundError:
        return None
    except ValueError as error:  # not a regular file, too large, a link out of the folder, not UTF-8
        raise RunError(str(error)) from None
    return check_record(_parse(str(path), text), key, cache, str(path))


def write_run(path: Path, record: Mapping[str, Any], cache: LogitCache, inputs: Iterable[str], name: str) -> None:
    """Write the run ``record`` of algorithm ``name`` to ``path`` atomically, once the text written passes the
    checks of :func:`read_run` (ValueError naming the algorithm otherwise, e.g. ``info`` holding NaN)."""
    where = f"algorithm {name!r}"
    try:
        text = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"  # compact: json's C encoder
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(f"{where}: answers.info must be JSON-ready, without NaN or infinity ({error})") from None
    data, limit = text.encode("utf-8"), run_size_limit(cache)
    if len(data) > limit:
        raise ValueError(f"{where}: the run is {len(data)} bytes, more than {limit}: answers.info is too large")
    check_record(_parse(where, text), record["key"], cache, where)
    write_bytes(path, data, inputs=inputs)


def write_output(path: Path, text: str, inputs: Iterable[str]) -> None:
    """Write ``results.json`` or ``results.md`` atomically, never over one of ``inputs`` (the caches)."""
    write_bytes(path, text.encode("utf-8"), inputs=inputs)


def prepare_out(out: str | os.PathLike[str], outputs: Iterable[str], inputs: Iterable[str]) -> Path:
    """The results folder ``out``, created with its ``runs`` folder; :class:`~ensemble_env.files.OutputError` when it
    is empty, a file, under a file or cannot be written, or when one of the files ``outputs`` it will hold is one of
    ``inputs`` (the caches)."""
    if not os.fspath(out).strip():
        raise OutputError("--out is empty: give the results folder (e.g. --out bench)")
    folder = Path(out)
    try:
        make_folder(folder)
        make_folder(folder / "runs")
    except OutputError as error:
        raise OutputError(f"--out {out}: {error}; --out names the results folder", error.errno) from None
    if not os.access(folder, os.W_OK | os.X_OK) or not os.access(folder / "runs", os.W_OK | os.X_OK):
        raise OutputError(f"--out {out}: the folder cannot be written (permission denied)", errno.EACCES)
    inputs = list(inputs)
    for name in outputs:
        check_output(folder / name, inputs)
    return folder
