"""What each action of the ``ensemble-env cache`` command group does, given its parsed arguments: one ``run_*``
function per action (``run_from_lm_eval`` for ``cache from-lm-eval``, ...), each returning the exit status, run
through :func:`guarded`. The group's parser, its options and their help are :mod:`ensemble_env.cli.cache`'s.

Every file an action writes goes through :func:`ensemble_env.files.atomic_path` with the action's inputs (caches by
:func:`ensemble_env.cache.save_cache`): an output that is one of the inputs is refused before anything is read
(:func:`~ensemble_env.files.check_output`) and again before the rename. :class:`ProgressBar` draws the progress of
a conversion on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ensemble_env import extras
from ensemble_env.baselines.fidelity import REPORT_FILES, fidelity_report, write_report
from ensemble_env.baselines.report import PLOT_FILES, format_summary, plot_cache, summarize
from ensemble_env.cache import datasets
from ensemble_env.cache.convert import describe_split, from_array_files, from_lm_eval, lm_eval_inputs, split_by_task
from ensemble_env.cache.features import (
    DEFAULT_N_FEATURES,
    TEXT_FEATURE_KIND,
    load_feature_file,
    with_features,
    with_text_features,
)
from ensemble_env.cache.generator import fit_generator
from ensemble_env.cache.generator_file import load_generator, save_generator
from ensemble_env.cache.hdf5 import superblock_version
from ensemble_env.cache.io import save_cache
from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.cli.options import status
from ensemble_env.files import check_output

__all__ = [
    "ProgressBar",
    "guarded",
    "run_features",
    "run_fit_generator",
    "run_from_arrays",
    "run_from_lm_eval",
    "run_generate",
    "run_info",
    "run_plot",
    "run_split",
    "run_validate",
]


class ProgressBar:
    """A one-line progress bar on a text stream: ``reading [######......] 12/80 file``.

    Call it as ``bar(done, total, what)``; it redraws the line in place and ends it when ``done == total``.
    ``enabled=None`` draws only when the stream is a terminal.
    """

    def __init__(self, label: str, stream: TextIO | None = None, *, enabled: bool | None = None, width: int = 30):
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width

    def __call__(self, done: int, total: int, what: str = "") -> None:
        if not self.enabled or total <= 0:
            return
        filled = self.width * done // total
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} {what[:50]:<50}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def _note(message: str) -> None:
    print(message, file=sys.stderr)


def _describe(path: Path | str, cache: LogitCache) -> str:
    counts = ", ".join(f"{int((cache.split == code).sum())} {name}" for name, code in SPLITS.items())
    extras = [] if cache.question_text is None else ["question text"]
    if cache.features is not None:
        kind = f" ({cache.feature_kind})" if cache.feature_kind else ""
        extras.append(f"{cache.features.shape[1]} features{kind}")
    return (
        f"{path}: {cache.n_questions} questions x {cache.n_models} models, {cache.n_tasks} tasks, "
        f"{int(cache.n_choices.min())}-{cache.max_choices} choices; split {counts}"
        + (f"; {', '.join(extras)}" if extras else "")
    )


def _load_input(name: str, output: str, other_inputs: tuple[str, ...] = ()) -> tuple[LogitCache, list[str]]:
    """The cache named by a CACHE argument (a file or a built-in name) and the inputs of the command, the output
    refused when it is one of them (:func:`~ensemble_env.files.check_output`)."""
    cache = datasets.resolve(name)
    inputs = [name, cache.path, *other_inputs]
    check_output(output, inputs)
    return cache, inputs


def _save(output: str | Path, cache: LogitCache, inputs: list[str] | list[Path]) -> None:
    """Write ``cache`` to ``output`` atomically, refusing an output that is one of ``inputs``."""
    save_cache(output, cache, inputs=inputs)


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run``, reporting a missing optional dependency (its message says what to install) and any OSError (an
    input that cannot be read, a folder that cannot be made) as ``ensemble-env cache ACTION: error: ...`` with
    exit status 2. ValueErrors (bad input, :class:`~ensemble_env.files.OutputError`) are the parser's to report."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (ModuleNotFoundError, OSError) as error:
            if isinstance(error, BrokenPipeError | ValueError):  # the parser's: a closed stdout; an error line
                raise
            print(f"ensemble-env cache {args.cache_command}: error: {error}", file=sys.stderr)
            return 2

    return guarded


def _n_features(args: argparse.Namespace) -> int:
    return DEFAULT_N_FEATURES if args.n_features is None else int(args.n_features)


def _max_file_bytes(args: argparse.Namespace) -> int:
    return int(args.max_file_mb * 2**20)


def run_from_lm_eval(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if args.n_features is not None and args.features != "text":
        raise ValueError("--n-features goes with --features text")
    text = args.features == "text"
    if text and not extras.require("cache from-lm-eval", "data", ["sklearn"], option="--features text"):
        return extras.EXIT_STATUS
    inputs = lm_eval_inputs(args.paths)
    check_output(output, inputs)  # before reading: the same check runs again before the rename
    cache = from_lm_eval(
        args.paths,
        tasks=args.tasks,
        test_fraction=args.test_fraction,
        validation_fraction=args.validation_fraction,
        split_seed=args.split_seed,
        normalize=args.normalize,
        strip_prefix=args.strip_prefix,
        intersect=args.intersect,
        progress=ProgressBar("reading samples", enabled=args.progress),
        notify=_note,
        max_file_bytes=_max_file_bytes(args),
    )
    if args.features == "text":
        with status("computing the text features (TF-IDF, SVD)"):
            cache = with_text_features(cache, _n_features(args))
    _save(output, cache, inputs)
    print(f"wrote {_describe(output, cache)}")
    print(f"  tasks: {', '.join(cache.task_names)}")
    print(f"  models: {', '.join(cache.models)}")
    _pool_note(output, cache)
    return 0


def run_from_arrays(args: argparse.Namespace) -> int:
    inputs = [path for path in (args.scores, args.labels, args.n_choices, args.tasks) if path is not None]
    output = Path(args.output)
    check_output(output, inputs)
    cache = from_array_files(
        args.scores,
        score_kind=args.score_kind,
        labels=args.labels,
        models=args.models,
        n_choices=args.n_choices,
        tasks=args.tasks,
        test_fraction=args.test_fraction,
        validation_fraction=args.validation_fraction,
        split_seed=args.split_seed,
        max_file_bytes=_max_file_bytes(args),
    )
    _save(output, cache, inputs)
    print(f"wrote {_describe(output, cache)}")
    _pool_note(output, cache)
    return 0


def run_info(args: argparse.Namespace) -> int:
    summary = summarize(datasets.resolve(args.cache), args.split, args.train_split)
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Check every file given, whatever happens with the others; one line each, and a count if any fails."""
    failed = 0
    for path in args.caches:
        try:
            cache = datasets.resolve(path)
            unchecked = (superblock_version(cache.path) or 0) < 2
        except (ValueError, OSError) as error:  # CacheError is a ValueError; OSError: missing, unreadable
            print(f"INVALID {error}", file=sys.stderr)
            failed += 1
            continue
        note = " (no HDF5 checksums: read under the time guard; save_cache writes them)" if unchecked else ""
        print(f"ok {_describe(path, cache)}{note}")
    if failed:
        print(f"{failed} of {len(args.caches)} caches are invalid", file=sys.stderr)
    return 2 if failed else 0


def run_split(args: argparse.Namespace) -> int:
    output = Path(args.output)
    cache, inputs = _load_input(args.cache, args.output)
    split = split_by_task(cache.tasks, args.test_fraction, validation_fraction=args.validation_fraction, seed=args.seed)
    note = "re-" + describe_split(args.test_fraction, args.validation_fraction, args.seed, order="in cache order")
    source = f"{cache.source}; {note}" if cache.source else note
    resplit = dataclasses.replace(cache, split=split, source=source, path="<memory>")
    if resplit.feature_kind == TEXT_FEATURE_KIND:
        _note(
            f"note: the {TEXT_FEATURE_KIND} features were fitted on the old train split; recompute them on the new "
            f"one with: ensemble-env cache features {output} --from text -o OUT.h5"
        )
    _save(output, resplit, inputs)
    print(f"wrote {_describe(output, resplit)}")
    return 0


def run_features(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if args.source == "text":
        if args.kind:
            raise ValueError("--kind goes with --from FILE.npy (text features are of kind text-tfidf-svd)")
        if not extras.require("cache features", "data", ["sklearn"], option="--from text"):
            return extras.EXIT_STATUS
        cache, inputs = _load_input(args.cache, args.output)
        with status("computing the text features (TF-IDF, SVD)"):
            updated = with_text_features(cache, _n_features(args), seed=args.seed)
    elif args.source.lower().endswith(".npy"):
        if args.n_features is not None:
            raise ValueError("--n-features goes with --from text (a file's features are stored as they are)")
        cache, inputs = _load_input(args.cache, args.output, (args.source,))
        features = load_feature_file(args.source, cache.n_questions)
        note = f"features: {features.shape[1]} from {Path(args.source).name}"
        updated = with_features(cache, features, kind=args.kind, note=note)
    else:
        raise ValueError(f"--from: expected 'text' or a .npy file, got {args.source!r}")
    _save(output, updated, inputs)
    print(f"wrote {_describe(output, updated)}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    if not extras.require("cache plot", "plot"):
        return extras.EXIT_STATUS
    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: not a folder; -o of cache plot names the folder of the PNGs (created if missing)")
    cache = datasets.resolve(args.cache)
    for name in PLOT_FILES:  # the PNGs are written by save_figure (atomic_path); none may be the input
        check_output(folder / name, [args.cache, cache.path])
    with status(f"drawing {len(PLOT_FILES)} plots"):
        written = plot_cache(
            cache, args.output, split=args.split, max_teams_per_size=args.max_teams, seed=args.seed, dpi=args.dpi
        )
    for path in written:
        print(f"wrote {path}")
    return 0


def _refuse_existing(paths: list[Path], overwrite: bool) -> None:
    """The ``--overwrite`` convention of ``train``: an output that exists is replaced only when asked."""
    present = [path for path in paths if path.exists() or path.is_symlink()]
    if present and not overwrite:
        raise ValueError(f"{present[0]}: exists; --overwrite replaces it (or write elsewhere)")


def run_fit_generator(args: argparse.Namespace) -> int:
    output = Path(args.output)
    report = None if args.report is None else Path(args.report)
    if report is not None and not extras.require("cache fit-generator", "plot", option="--report"):
        return extras.EXIT_STATUS
    if report is not None and report.exists() and not report.is_dir():
        raise ValueError(f"{report}: not a folder; --report names the folder of {', '.join(REPORT_FILES)}")
    outputs = [output] + ([] if report is None else [report / name for name in REPORT_FILES])
    _refuse_existing(outputs, args.overwrite)
    cache, inputs = _load_input(args.cache, args.output)
    for path in outputs[1:]:
        check_output(path, inputs)
    with status(f"fitting the task model to {len(args.tasks) if args.tasks else cache.n_tasks} tasks"):
        generator = fit_generator(cache, tasks=args.tasks)
    save_generator(output, generator)
    print(f"wrote {output}: a generator of {len(generator.tasks)} tasks ({', '.join(generator.task_names)}) of "
          f"{generator.n_models} models ({', '.join(generator.models)})")  # fmt: skip
    if report is not None:
        held = args.holdout if args.holdout < len(generator.tasks) - 1 else 0
        if held != args.holdout:
            _note(f"note: {len(generator.tasks)} tasks are too few to hold {args.holdout} out; no held-out comparison")
        with status(f"comparing each task with {args.replicas} replicas" + (f", {held} held out" if held else "")):
            result = fidelity_report(
                cache,
                generator,
                replicas=args.replicas,
                held_out_count=held,
                n_generated=args.draws,
                seed=args.seed,
                source=args.cache,
            )
            written = write_report(result, report)
        for path in written:
            print(f"wrote {path}")
        maes = [comparison.mae() for comparison in result.tasks]
        print(f"  team mean-vote accuracies, real against replicas: MAE {sum(maes) / len(maes):.4f} "
              f"(from {min(maes):.3f} to {max(maes):.3f}) over {len(maes)} tasks")  # fmt: skip
    return 0


def run_generate(args: argparse.Namespace) -> int:
    output = Path(args.output)
    _refuse_existing([output], args.overwrite)
    check_output(output, [args.generator])
    generator = load_generator(args.generator)
    low, high = args.questions
    with status(f"drawing {args.tasks} tasks of {low}-{high} questions"):
        cache = generator.sample(
            args.tasks, args.seed, n_models=args.models, questions=(low, high), first=args.first, jitter=args.jitter
        )
    with status(f"writing {output}"):
        _save(output, cache, [args.generator])
    print(f"wrote {_describe(output, cache)}")
    print(f"  tasks {cache.task_names[0]} .. {cache.task_names[-1]}; models: {', '.join(cache.models)}")
    return 0


def _pool_note(output: Path | str, cache: LogitCache) -> None:
    """Warn about a pool of one model: there is no team to choose and nothing to fuse."""
    if cache.n_models == 1:
        _note(
            f"warning: {output} holds one model ({cache.models[0]}): there is no team to choose and no answers "
            "to fuse, so the environment, training and baselines run but have nothing to learn about routing; "
            "convert the outputs of two or more models"
        )
