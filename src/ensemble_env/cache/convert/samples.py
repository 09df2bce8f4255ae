"""Reading one lm-evaluation-harness samples file (``--log_samples``) into its questions: :func:`read_samples`.

Either layout lm-eval has written is read:

===============  ==================================  ===========================================
lm-eval          file                                content
===============  ==================================  ===========================================
>= 0.4.3         ``samples_<task>_<date>.jsonl``     JSON Lines; numbers and booleans as strings;
                                                     ``arguments`` ``{"gen_args_i": {"arg_0":
                                                     context, "arg_1": " " + choice_i}}``
0.4.0 - 0.4.2    ``<model_args>_<task>.jsonl``       one indented JSON array; native numbers;
                                                     ``arguments`` ``[[context, continuation]]``
===============  ==================================  ===========================================

The file is read by :func:`~ensemble_env.cache.convert.common.read_input` (a regular file only, of bounded size,
never through a link leading out of the folder given). The JSON is streamed record by record (each with the line
it starts on), and every record is checked as it becomes a :class:`Sample`; a problem raises
:class:`~ensemble_env.cache.convert.common.ConversionError` naming the file, the line and the field.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ensemble_env.cache.convert.common import (
    MAX_FILE_BYTES,
    ConversionError,
    DuplicateKeyError,
    check_depth,
    conversion_error,
    decode_text,
    json_decoder,
    number_problem,
    parse_float,
    read_input,
)
from ensemble_env.text import show

__all__ = ["DOC_TEXT_FIELDS", "Sample", "read_samples"]

_INDEX = re.compile(r"[0-9]+")
#: fields of a record's ``doc`` that hold the question as the model saw it, tried in this order (BBH: ``input``)
DOC_TEXT_FIELDS = ("input", "question", "query")
_GENERATIVE = (
    "this is a generative (generate_until) task; only multiple-choice tasks, scored by a log-likelihood per "
    "choice, can become a logit cache"
)


@dataclass(frozen=True)
class Sample:
    """One multiple-choice question as one model answered it: one line (or array element) of a samples file.

    ``choices`` are the continuations with the target delimiter (one leading space) removed; ``logliks`` the
    model's log-likelihood of each; ``label`` the gold choice index; ``line`` where the record starts;
    ``text`` the question: the first of :data:`DOC_TEXT_FIELDS` that ``doc`` holds as a string, else the
    context of the first request (``arguments``' ``arg_0``).
    """

    doc_id: int
    line: int
    choices: tuple[str, ...]
    logliks: tuple[float, ...]
    label: int
    doc_hash: str | None = None
    filter: str | None = None
    text: str = ""


def _checked(path: Path, line: int, record: Any) -> Any:
    """``record``, refused when it nests deeper than :data:`~ensemble_env.cache.convert.common.MAX_DEPTH`."""
    try:
        check_depth(record)
    except ValueError as error:
        raise conversion_error(path, line, None, f"not a samples record: {error}") from None
    return record


_TOO_DEEP = "not valid JSON here (arrays and objects nested too deeply to parse; corrupt?)"


def _duplicate(path: Path, line: int, error: DuplicateKeyError, layout: str) -> ConversionError:
    """The error of a key written twice with different values in the record at ``line``."""
    where = "this line's record" if layout == "lines" else "the record starting on this line"
    return conversion_error(
        path,
        line,
        error.key,
        f"appears twice in one object of {where} with different values ({show(error.first)}, then "
        f"{show(error.second)}); JSON readers keep one of them silently, so the record is refused",
    )


def _json_lines(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    decoder = json_decoder()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = decoder.decode(line)
        except json.JSONDecodeError as error:
            raise conversion_error(
                path, number, None, f"not valid JSON ({error.msg} at column {error.colno}; truncated or corrupt?)"
            ) from None
        except RecursionError:
            raise conversion_error(path, number, None, _TOO_DEEP) from None
        except DuplicateKeyError as error:
            raise _duplicate(path, number, error, "lines") from None
        yield number, _checked(path, number, record)


def _skip_space(text: str, index: int) -> int:
    """The index of the first character at or after ``index`` that is not JSON whitespace."""
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index


def _json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """The elements of a JSON array (lm-eval 0.4.0-0.4.2 files), each with the line it starts on."""
    decoder = json_decoder()
    line, counted = 1, 0

    def line_at(position: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, position)
        counted = position
        return line

    index = _skip_space(text, _skip_space(text, 0) + 1)  # after the '['
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            start = line_at(index)
            try:
                record, index = decoder.raw_decode(text, index)
            except json.JSONDecodeError as error:
                raise conversion_error(
                    path, error.lineno, None, f"not valid JSON ({error.msg}; truncated or corrupt?)"
                ) from None
            except RecursionError:
                raise conversion_error(path, start, None, _TOO_DEEP) from None
            except DuplicateKeyError as error:
                raise _duplicate(path, start, error, "array") from None
            yield start, _checked(path, start, record)
            index = _skip_space(text, index)
            if index >= len(text):
                raise conversion_error(path, line_at(index), None, "the JSON array has no closing ']' (truncated?)")
            if text[index] == "]":
                index += 1
                break
            if text[index] != ",":
                raise conversion_error(
                    path, line_at(index), None, f"expected ',' or ']' in the JSON array, got {text[index]!r}"
                )
            index = _skip_space(text, index + 1)
    index = _skip_space(text, index)
    if index < len(text):
        raise conversion_error(path, line_at(index), None, "text after the end of the JSON array")


def _records(path: Path, root: str | Path | None, max_file_bytes: int) -> Iterator[tuple[int, Any]]:
    """(line, record) for every record of a samples file, whichever of the two layouts it has."""
    data = read_input(path, limit=max_file_bytes, root=root, limit_option="max_file_bytes (--max-file-mb)")
    text = decode_text(path, data)
    del data
    start = text.lstrip()
    if not start:
        raise conversion_error(path, None, None, "the file is empty: no samples")
    yield from (_json_array if start[0] == "[" else _json_lines)(path, text)


def _argument_lists(record: Mapping[str, Any], fail: Callable[[str, str], ConversionError]) -> list[list[Any]]:
    """The request arguments of a record as lists ``[context, continuation, ...]``, in request order."""
    if "arguments" not in record:
        raise fail("arguments", "required field is missing")
    arguments = record["arguments"]
    if isinstance(arguments, dict):  # lm-eval >= 0.4.3: {"gen_args_i": {"arg_j": ...}}
        requests = []
        for i in range(len(arguments)):
            entry = arguments.get(f"gen_args_{i}")
            if not isinstance(entry, dict):
                raise fail(
                    "arguments",
                    f"expected keys gen_args_0..gen_args_{len(arguments) - 1} holding objects, got {show(arguments)}",
                )
            if any(f"arg_{j}" not in entry for j in range(len(entry))):
                raise fail("arguments", f"gen_args_{i}: expected keys arg_0..arg_{len(entry) - 1}, got {sorted(entry)}")
            requests.append([entry[f"arg_{j}"] for j in range(len(entry))])
        return requests
    if isinstance(arguments, list) and all(isinstance(entry, list) for entry in arguments):
        return arguments  # lm-eval 0.4.0-0.4.2: [[context, continuation], ...]
    raise fail(
        "arguments",
        f"expected an object of gen_args_i or a list of [context, continuation] pairs, got {show(arguments)}",
    )


def _continuations(requests: list[list[Any]], fail: Callable[[str, str], ConversionError]) -> list[str]:
    continuations = []
    for i, request in enumerate(requests):
        if len(request) >= 2 and isinstance(request[1], dict):
            raise fail("arguments", f"request {i} carries generation settings {show(request[1])}: {_GENERATIVE}")
        if len(request) != 2:
            raise fail(
                "arguments",
                f"request {i} has {len(request)} argument(s), expected [context, continuation] "
                "(a loglikelihood_rolling or generative task cannot become a logit cache)",
            )
        if not isinstance(request[1], str):
            raise fail("arguments", f"request {i}: the continuation must be a string, got {show(request[1])}")
        continuations.append(request[1])
    if len(continuations) < 2:
        raise fail("arguments", f"has {len(continuations)} choice(s): a multiple-choice question needs at least 2")
    return continuations


def _logliks(
    record: Mapping[str, Any], n_choices: int, fail: Callable[[str, str], ConversionError]
) -> tuple[float, ...]:
    """The per-choice log-likelihoods, from ``filtered_resps`` (or ``resps`` when it is absent)."""
    field = "filtered_resps" if "filtered_resps" in record else "resps"
    if field not in record:
        raise fail("filtered_resps", "required field is missing (and there is no 'resps' either)")
    responses = record[field]
    if not isinstance(responses, list):
        raise fail(field, f"expected a list with one entry per choice, got {show(responses)}")
    if len(responses) != n_choices:
        raise fail(field, f"has {len(responses)} entries but 'arguments' has {n_choices} choices")
    values = []
    for i, response in enumerate(responses):
        if field == "resps":  # resps: per choice a list holding one [loglik, is_greedy] pair
            if not (isinstance(response, list) and len(response) == 1):
                raise fail(field, f"choice {i}: expected [[log-likelihood, is_greedy]], got {show(response)}")
            response = response[0]
        if isinstance(response, str):
            raise fail(field, f"choice {i} is the text {show(response)}, not a log-likelihood: {_GENERATIVE}")
        if not (isinstance(response, list) and len(response) == 2):
            raise fail(field, f"choice {i}: expected a [log-likelihood, is_greedy] pair, got {show(response)}")
        value = parse_float(response[0])
        if value is None:
            raise fail(field, f"choice {i}: log-likelihood {number_problem(response[0])}")
        values.append(value)
    return tuple(values)


def _gold(record: Mapping[str, Any], choices: tuple[str, ...], fail: Callable[[str, str], ConversionError]) -> int:
    """The gold index: the position of ``target`` among the choices, else ``target`` as an index."""
    if "target" not in record:
        raise fail("target", "required field is missing")
    target = record["target"]
    n_choices = len(choices)
    if isinstance(target, str):
        if target in choices:
            return choices.index(target)
        if len(target) <= 9 and _INDEX.fullmatch(target) and int(target) < n_choices:
            return int(target)
    elif isinstance(target, int) and not isinstance(target, bool):
        if 0 <= target < n_choices:
            return target
    elif isinstance(target, list):
        raise fail("target", f"{show(target)} holds several gold answers; a logit cache has one per question")
    raise fail(
        "target",
        f"{show(target)} is neither one of the {n_choices} choices {show(list(choices), 120)} "
        f"nor a choice index in 0..{n_choices - 1}",
    )


def _question_text(
    record: Mapping[str, Any], requests: list[list[Any]], fail: Callable[[str, str], ConversionError]
) -> str:
    """The question: from ``doc`` (:data:`DOC_TEXT_FIELDS`), else the context of the first request."""
    doc = record.get("doc")
    field, text = "arguments", requests[0][0]
    if isinstance(doc, dict):
        found = next((key for key in DOC_TEXT_FIELDS if isinstance(doc.get(key), str)), None)
        if found is not None:
            field, text = "doc", doc[found]
    if not isinstance(text, str):
        raise fail("arguments", f"request 0: the context must be a string, got {show(text)}")
    _storable(text, field, "the question text", fail)
    return text


def _optional_string(record: Mapping[str, Any], field: str, fail: Callable[[str, str], ConversionError]) -> str | None:
    value = record.get(field)
    if value is not None and not isinstance(value, str):
        raise fail(field, f"must be a string, got {show(value)}")
    if value is not None:
        _storable(value, field, "the string", fail)
    return value


def _storable(text: str, field: str, what: str, fail: Callable[[str, str], ConversionError]) -> None:
    """Refuse a string a cache cannot store: a NUL character, or a lone surrogate (not UTF-8)."""
    if "\x00" in text:
        raise fail(field, f"{what} {show(text)} holds a NUL character (a cache cannot store it)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(
            field, f"{what} {show(text)} holds a lone surrogate (\\ud800-\\udfff): not storable as UTF-8"
        ) from None


def _parse_record(path: Path, line: int, record: Any) -> Sample:
    def fail(field: str, problem: str) -> ConversionError:
        return conversion_error(path, line, field, problem)

    if not isinstance(record, dict):
        raise conversion_error(path, line, None, f"expected a JSON object (one sample), got {show(record)}")
    if "doc_id" not in record:
        raise fail("doc_id", "required field is missing")
    doc_id = record["doc_id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, int) or not 0 <= doc_id < 2**63:
        raise fail("doc_id", f"must be a non-negative integer (below 2**63), got {show(doc_id)}")
    requests = _argument_lists(record, fail)
    continuations = _continuations(requests, fail)
    logliks = _logliks(record, len(continuations), fail)
    choices = tuple(text[1:] if text.startswith(" ") else text for text in continuations)
    return Sample(
        doc_id=doc_id,
        line=line,
        choices=choices,
        logliks=logliks,
        label=_gold(record, choices, fail),
        doc_hash=_optional_string(record, "doc_hash", fail),
        filter=_optional_string(record, "filter", fail),
        text=_question_text(record, requests, fail),
    )


def read_samples(
    path: str | Path, *, root: str | Path | None = None, max_file_bytes: int = MAX_FILE_BYTES
) -> list[Sample]:
    """Read one lm-eval samples file (either layout) into its questions, sorted by ``doc_id``.

    The file is read by :func:`~ensemble_env.cache.convert.common.read_input`: a regular file of at most
    ``max_file_bytes`` (default :data:`~ensemble_env.cache.convert.common.MAX_FILE_BYTES`, 1 GiB), and with
    ``root`` (the folder the user gave) only when its real path is inside that folder.

    Raises
    ------
    FileNotFoundError
        When there is no such file.
    ConversionError
        Naming the file: not a regular file (a FIFO, a device), larger than ``max_file_bytes``, a symbolic
        link leading out of ``root``.
    ConversionError
        Naming the file, the line and the field: invalid or truncated JSON, a key written twice in one object
        with different values (a key repeated with an identical value is accepted), a missing field, a
        log-likelihood that is not a finite number, a ``target`` that is not a choice, a generative task (generation
        settings instead of continuations, texts instead of log-likelihoods, one line per filter), fewer than
        two choices, a ``doc_id`` that appears twice.
    """
    file = Path(path)
    samples = [_parse_record(file, line, record) for line, record in _records(file, root, max_file_bytes)]
    if not samples:
        raise conversion_error(file, None, None, "holds no samples (an empty JSON array)")
    samples.sort(key=lambda sample: sample.doc_id)
    for first, second in itertools.pairwise(samples):
        if first.doc_id == second.doc_id:
            if first.filter != second.filter:
                raise conversion_error(
                    file,
                    second.line,
                    "filter",
                    f"doc_id {first.doc_id} appears once per filter ({first.filter!r} on line {first.line}, "
                    f"{second.filter!r} here): {_GENERATIVE}",
                )
            raise conversion_error(
                file, second.line, "doc_id", f"doc_id {first.doc_id} already appears on line {first.line}"
            )
    return samples
