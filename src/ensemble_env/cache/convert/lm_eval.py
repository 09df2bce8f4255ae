"""A logit cache from lm-evaluation-harness samples files of several models: :func:`from_lm_eval`.

It takes one folder of samples files per model (also the Open LLM Leaderboard "details" datasets, which use
the same files), found by :mod:`ensemble_env.cache.convert.discovery` and read by
:func:`~ensemble_env.cache.convert.samples.read_samples`; aligns the questions across models by ``doc_id`` (checking
that the models agree on the choices, the label and the ``doc_hash``); normalises the log-likelihoods as asked
(:data:`NORMALIZATIONS`) and splits each task with :func:`~ensemble_env.cache.convert.splits.split_by_task`. The
question texts (``question_text``) are the first model's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ensemble_env.cache.convert.common import MAX_FILE_BYTES, ConversionError, conversion_error
from ensemble_env.cache.convert.discovery import find_model_folders, find_task_files, strip_task_prefix
from ensemble_env.cache.convert.samples import Sample, read_samples
from ensemble_env.cache.convert.splits import describe_split, split_by_task
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.text import show

__all__ = ["NORMALIZATIONS", "NotifyFn", "ProgressFn", "from_lm_eval", "lm_eval_inputs"]

#: how per-choice log-likelihoods may be normalised: as is, per character (lm-eval ``acc_norm``), per byte
#: (lm-eval ``acc_bytes``) of the choice text
NORMALIZATIONS = ("none", "chars", "bytes")

#: how many times the choices of all questions the padded (Q, N, C) scores may hold
_MAX_PADDING = 64
ProgressFn = Callable[[int, int, str], None]
NotifyFn = Callable[[str], None]


@dataclass(frozen=True)
class _Model:
    name: str
    folder: Path
    files: dict[str, Path]
    root: Path  # the folder given (PATH): no file is read through a link leading out of it


def _find_models(paths: Sequence[str | Path], known_tasks: Sequence[str]) -> list[_Model]:
    models: list[_Model] = []
    seen: dict[str, Path] = {}
    if isinstance(paths, str | Path) or not paths:
        raise ValueError(f"paths must be a non-empty list of folders, got {paths!r}")
    for path in paths:
        for name, folder in find_model_folders(path):
            if name in seen:
                raise ConversionError(
                    f"two model folders are named {name!r}: {seen[name]} and {folder}; model names must be unique"
                )
            seen[name] = folder
            files = find_task_files(folder, known_tasks, skip_unknown=bool(known_tasks), root=path)
            models.append(_Model(name, folder, files, Path(path)))
    return models


def lm_eval_inputs(paths: Sequence[str | Path]) -> list[Path]:
    """Every file and folder :func:`from_lm_eval` may read from ``paths``: the folders given, the model
    folders, and their samples (``*.jsonl``) and results (``*.json``) files; what an output must not be
    (:func:`ensemble_env.files.check_output`)."""
    if isinstance(paths, str | Path):
        raise ValueError(f"paths must be a list of folders, got {paths!r}")
    found: list[Path] = []
    for path in paths:
        found.append(Path(path))
        for _, folder in find_model_folders(path):
            found.append(folder)
            found.extend(sorted(file for pattern in ("*.jsonl", "*.json") for file in folder.glob(pattern)))
    return found


def _select_tasks(models: list[_Model], short: dict[str, str], tasks: Sequence[str] | None) -> list[str]:
    """Full names of the tasks to convert, in the order of their stored (short) names."""
    if tasks is None:
        chosen = list(short)
    else:
        by_name = {**{name: name for name in short}, **{name: full for full, name in short.items()}}
        unknown = [task for task in tasks if task not in by_name]
        if unknown:
            raise ConversionError(
                f"--tasks: {', '.join(map(repr, unknown))} not found in the samples of "
                f"{', '.join(m.name for m in models)}; they hold: {', '.join(sorted(short.values()))}"
            )
        chosen = list(dict.fromkeys(by_name[task] for task in tasks))
    return sorted(chosen, key=lambda full: short[full])


def _normalized(sample: Sample, normalize: str, file: Path) -> tuple[float, ...]:
    if normalize == "none":
        return sample.logliks
    lengths = [len(choice) if normalize == "chars" else len(choice.encode("utf-8")) for choice in sample.choices]
    for i, length in enumerate(lengths):
        if length == 0:
            raise conversion_error(
                file,
                sample.line,
                "arguments",
                f"choice {i} is empty: cannot normalise its log-likelihood by its length",
            )
    return tuple(value / length for value, length in zip(sample.logliks, lengths, strict=True))


def _mismatch(reference: Sample, other: Sample) -> str | None:
    if reference.doc_hash is not None and other.doc_hash is not None and reference.doc_hash != other.doc_hash:
        return "doc_hash"
    if reference.choices != other.choices:
        return "choices"
    if reference.label != other.label:
        return "label"
    return None


def from_lm_eval(
    paths: Sequence[str | Path],
    *,
    tasks: Sequence[str] | None = None,
    test_fraction: float = 0.2,
    validation_fraction: float = 0.0,
    split_seed: int | None = None,
    normalize: str = "none",
    strip_prefix: str = "auto",
    intersect: bool = False,
    progress: ProgressFn | None = None,
    notify: NotifyFn | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> LogitCache:
    """Build a logit cache from lm-evaluation-harness samples files.

    Parameters
    ----------
    paths
        Folders: each the folder of one model's samples files (the model is named after the folder) or a
        folder of such folders.
    tasks
        Tasks to convert, by full or stored name (default: every task found).
    test_fraction, validation_fraction, split_seed
        The split, per task, by :func:`split_by_task` over the questions in ``doc_id`` order: the last
        ``test_fraction`` is test, the last ``validation_fraction`` of the rest is validation.
    normalize
        ``"none"``: summed log-likelihoods (lm-eval ``acc``); ``"chars"``: divided by the choice's length in
        characters (``acc_norm``); ``"bytes"``: in UTF-8 bytes (``acc_bytes``). The choice is the continuation
        without the target delimiter (one leading space), as lm-eval measures it.
    strip_prefix
        How the stored task names are derived from lm-eval's (see :func:`strip_task_prefix`); the prefix is
        computed over every task found in the folders, whatever ``tasks`` selects.
    intersect
        Keep only the questions (and tasks) every model answered alike, instead of raising an error; the count
        dropped is reported through ``notify`` and recorded in the cache's ``source``.
    progress
        Called as ``progress(done, total, "<model>: <task>")`` while files are read.
    notify
        Called with messages for the user (the questions dropped by ``intersect``).
    max_file_bytes
        The largest samples file read (default 1 GiB): every file is read by
        :func:`~ensemble_env.cache.convert.common.read_input`, only when it is a regular file within this size
        whose real path is inside the folder given (a symbolic link leading out of it is refused).

    Returns
    -------
    LogitCache
        ``score_kind="loglik"``; questions grouped by task (tasks sorted by stored name), ``doc_id`` order
        within a task; padding beyond a question's choices is ``-inf``; ``question_ids`` from ``doc_hash`` when
        present, else ``"<task>/<doc_id>"``; ``question_text`` from each record's ``doc`` (``input``,
        ``question`` or ``query``) or else its context, as the first model's file has it (the models may differ).
    """
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got {normalize!r}")
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes < 1:
        raise ValueError(f"max_file_bytes must be a positive integer, got {max_file_bytes!r}")
    split = functools.partial(
        split_by_task, test_fraction=test_fraction, validation_fraction=validation_fraction, seed=split_seed
    )
    split(np.zeros(1, dtype=np.int64))  # validate the fractions and the seed before reading
    if isinstance(tasks, str):
        raise ValueError(f"tasks must be a list of task names, got the string {tasks!r}")
    models = _find_models(paths, tasks or ())
    short = strip_task_prefix(sorted({task for model in models for task in model.files}), strip_prefix)
    chosen = _select_tasks(models, short, tasks)
    say = notify or (lambda message: None)

    kept_tasks = []
    for task in chosen:
        lacking = [model for model in models if task not in model.files]
        if not lacking:
            kept_tasks.append(task)
            continue
        having = next(model for model in models if task in model.files)
        if not intersect:
            raise ConversionError(
                f"task {short[task]!r}: model {lacking[0].name!r} has no samples file for it in {lacking[0].folder} "
                f"(model {having.name!r} has {having.files[task].name}); leave the task out with --tasks, or keep "
                "what every model answered with --intersect"
            )
        say(f"--intersect: task {short[task]!r} left out: no samples file for {', '.join(m.name for m in lacking)}")
    if not kept_tasks:
        raise ConversionError("no task has samples files for every model")

    total, done = len(kept_tasks) * len(models), 0
    read: dict[tuple[str, str], dict[int, Sample]] = {}
    for task in kept_tasks:
        for model in models:
            if progress is not None:
                progress(done, total, f"{model.name}: {short[task]}")
            samples = read_samples(model.files[task], root=model.root, max_file_bytes=max_file_bytes)
            read[task, model.name] = {sample.doc_id: sample for sample in samples}
            done += 1
    if progress is not None:
        progress(total, total, "")

    blocks: list[tuple[str, list[int]]] = []
    n_missing = n_differing = n_questions = 0
    for task in kept_tasks:
        per_model = [read[task, model.name] for model in models]
        doc_ids = sorted(set().union(*per_model))
        n_questions += len(doc_ids)
        kept = []
        for doc_id in doc_ids:
            absent = [model for model, samples in zip(models, per_model, strict=True) if doc_id not in samples]
            if absent:
                if not intersect:
                    raise _missing_error(short[task], task, doc_id, models, per_model)
                n_missing += 1
                continue
            reference = per_model[0][doc_id]
            problems = [
                (model, samples[doc_id], what)
                for model, samples in zip(models[1:], per_model[1:], strict=True)
                if (what := _mismatch(reference, samples[doc_id])) is not None
            ]
            if problems:
                if not intersect:
                    model, sample, what = problems[0]
                    raise ConversionError(
                        f"task {short[task]!r}, doc_id {doc_id}: the models disagree on the {what}: "
                        f"{models[0].name!r} ({models[0].files[task]}, line {reference.line}) has "
                        f"{_describe(reference, what)}, {model.name!r} ({model.files[task]}, line {sample.line}) has "
                        f"{_describe(sample, what)}; pass --intersect to drop such questions"
                    )
                n_differing += 1
                continue
            kept.append(doc_id)
        if kept:
            blocks.append((task, kept))
        elif intersect:
            say(f"--intersect: task {short[task]!r} left out: no question answered alike by every model")
    dropped = n_missing + n_differing
    if intersect and dropped:
        say(
            f"--intersect: dropped {dropped} of {n_questions} questions ({n_missing} missing for some model, "
            f"{n_differing} with differing labels, choices or doc_hash)"
        )
    if not blocks:
        raise ConversionError("no question is left after dropping the ones the models do not share")
    rule = describe_split(test_fraction, validation_fraction, split_seed)
    return _build(models, blocks, read, short, normalize, split, rule, dropped)


def _describe(sample: Sample, what: str) -> str:
    if what == "doc_hash":
        return f"doc_hash {show(sample.doc_hash)}"
    if what == "choices":
        return f"choices {show(list(sample.choices), 100)}"
    return f"label {sample.label} ({show(sample.choices[sample.label])})"


def _missing_error(
    name: str, task: str, doc_id: int, models: list[_Model], per_model: list[dict[int, Sample]]
) -> ConversionError:
    parts = []
    answered = set().union(*per_model)
    for model, samples in zip(models, per_model, strict=True):
        lacking = sorted(answered - samples.keys())
        if lacking:
            shown = ", ".join(map(str, lacking[:5])) + (", ..." if len(lacking) > 5 else "")
            parts.append(f"model {model.name!r} ({model.files[task]}) lacks {len(lacking)} (doc_id {shown})")
    return ConversionError(
        f"task {name!r}: some models lack questions the others answered (first: doc_id {doc_id}): "
        f"{'; '.join(parts)}; pass --intersect to keep only the questions every model answered"
    )


def _build(
    models: list[_Model],
    blocks: list[tuple[str, list[int]]],
    read: dict[tuple[str, str], dict[int, Sample]],
    short: dict[str, str],
    normalize: str,
    split: Callable[[np.ndarray], np.ndarray],
    rule: str,
    dropped: int,
) -> LogitCache:
    """The cache of the aligned questions; ``split`` gives the split codes of the task indices."""
    n_questions = sum(len(doc_ids) for _, doc_ids in blocks)
    counts = [(len(read[task, models[0].name][d].choices), task, d) for task, doc_ids in blocks for d in doc_ids]
    max_choices, task, doc_id = max(counts)
    padded, real = n_questions * max_choices, sum(count for count, _, _ in counts)
    if padded > _MAX_PADDING * real + 10**6:  # the (Q, N, C) scores would be mostly padding: a memory bomb
        widest = read[task, models[0].name][doc_id]
        raise conversion_error(
            models[0].files[task],
            widest.line,
            "arguments",
            f"doc_id {doc_id} has {max_choices} choices where the {n_questions} questions have {real} in all: "
            f"the scores, padded to {max_choices} choices each, would take {padded * len(models) * 8} bytes",
        )
    scores = np.full((n_questions, len(models), max_choices), -np.inf)
    labels = np.zeros(n_questions, dtype=np.int64)
    n_choices = np.zeros(n_questions, dtype=np.int64)
    task_index = np.zeros(n_questions, dtype=np.int64)
    question_ids, texts = [], []
    row = 0
    for index, (task, doc_ids) in enumerate(blocks):
        for doc_id in doc_ids:
            reference = read[task, models[0].name][doc_id]
            size = len(reference.choices)
            for column, model in enumerate(models):
                sample = read[task, model.name][doc_id]
                scores[row, column, :size] = _normalized(sample, normalize, model.files[task])
            labels[row], n_choices[row], task_index[row] = reference.label, size, index
            question_ids.append(reference.doc_hash or f"{short[task]}/{doc_id}")
            texts.append(reference.text)
            row += 1
    source = f"lm-evaluation-harness samples of {len(models)} models; normalize={normalize}; {rule}"
    if dropped:
        source += f"; {dropped} questions not shared by every model dropped (--intersect)"
    return LogitCache(
        scores=scores,
        labels=labels,
        models=tuple(model.name for model in models),
        score_kind="loglik",
        n_choices=n_choices,
        tasks=task_index,
        task_names=tuple(short[task] for task, _ in blocks),
        split=split(task_index),
        question_ids=tuple(question_ids),
        question_text=tuple(texts),
        source=source,
    )
