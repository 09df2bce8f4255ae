"""The ``ensemble-env cache`` command group: build, check, summarise, re-split, add features to and plot caches.

- ``cache from-lm-eval PATH... -o OUT.h5``: lm-evaluation-harness samples files to a cache
  (:func:`ensemble_env.cache.convert.from_lm_eval`).
- ``cache from-arrays SCORES -o OUT.h5``: ``.npz``/``.npy``/CSV arrays to a cache
  (:func:`ensemble_env.cache.convert.from_array_files`).
- ``cache info CACHE [--json]``: sizes and per-task accuracies with the baselines
(:mod:`ensemble_env.baselines.report`).
- ``cache validate CACHE...``: read and check files against the format.
- ``cache split CACHE -o OUT.h5``: a copy with a new train/validation/test split.
- ``cache features CACHE --from text|FILE.npy -o OUT.h5``: a copy with new per-question features
  (:mod:`ensemble_env.cache.features`).
- ``cache plot CACHE -o DIR``: PNGs of accuracy by task, error correlation, teams by size (needs matplotlib).
- ``cache fit-generator CACHE -o GEN.json [--report DIR]``: a task generator fitted to a cache's tasks
  (:func:`ensemble_env.cache.fit_generator`), and its fidelity report (:mod:`ensemble_env.baselines.fidelity`).
- ``cache generate GEN.json -o OUT.h5 --tasks N --seed S``: tasks drawn from a generator as a cache.

A ``CACHE`` argument is a file or the name of a built-in cache (:func:`ensemble_env.datasets.resolve`).

:func:`register` adds the group to the ``ensemble-env`` parser (the ``ensemble_env.commands`` entry point, see
:mod:`ensemble_env.cli`). Every file the group writes goes through :func:`ensemble_env.files.atomic_path` with the
command's inputs (caches by :func:`ensemble_env.cache.save_cache` inside it): an output that is one of the
inputs (the same file by device and inode: a hard or symbolic link to it too) is refused before anything is
read and again before the rename, as are a folder, a read-only or full filesystem, a name too long (each an
:class:`ensemble_env.files.OutputError`, reported as ``ensemble-env cache ACTION: error: ...``, exit status 2).
Any other OSError (an unreadable input) is reported the same way, never as a traceback; numbers given as
options are plain ASCII decimal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ensemble_env import extras
from ensemble_env.baselines.fidelity import REPORT_FILES, fidelity_report, write_report
from ensemble_env.baselines.report import PLOT_FILES, format_summary, plot_cache, summarize
from ensemble_env.cache import datasets
from ensemble_env.cache.convert import (
    MAX_FILE_BYTES,
    NORMALIZATIONS,
    describe_split,
    from_array_files,
    from_lm_eval,
    lm_eval_inputs,
    number_problem,
    parse_float,
    split_by_task,
)
from ensemble_env.cache.features import (
    DEFAULT_N_FEATURES,
    INSTALL_HINT,
    TEXT_FEATURE_KIND,
    load_feature_file,
    with_features,
    with_text_features,
)
from ensemble_env.cache.generator import fit_generator
from ensemble_env.cache.generator_file import load_generator, save_generator
from ensemble_env.cache.hdf5 import superblock_version
from ensemble_env.cache.io import save_cache
from ensemble_env.cache.logit_cache import SCORE_KINDS, SPLITS, LogitCache
from ensemble_env.cli.options import ListOption, status
from ensemble_env.files import check_output

__all__ = ["ProgressBar", "register"]

_SPLIT_CHOICES = ("all", "train", "test", "validation")


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


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions to the terminal; keeps the lines of an ``examples:`` epilog as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


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


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
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


def _from_lm_eval(args: argparse.Namespace) -> int:
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


def _from_arrays(args: argparse.Namespace) -> int:
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


def _info(args: argparse.Namespace) -> int:
    summary = summarize(datasets.resolve(args.cache), args.split, args.train_split)
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


def _validate(args: argparse.Namespace) -> int:
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


def _split(args: argparse.Namespace) -> int:
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


def _features(args: argparse.Namespace) -> int:
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


def _plot(args: argparse.Namespace) -> int:
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


def _fit_generator(args: argparse.Namespace) -> int:
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


def _generate(args: argparse.Namespace) -> int:
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


#: ``cache from-lm-eval``'s default --validation-fraction: with the default --test-fraction 0.2, bbh5's proportions
#: (per task of 250 questions: 160 train, 40 validation, 50 test), so that ``benchmark`` (which tunes on validation)
#: takes the converted cache as it is; ``--validation-fraction 0`` makes none
LM_EVAL_VALIDATION_FRACTION = 0.2


def _add_split_options(
    parser: argparse.ArgumentParser, order: str, when: str = "", validation_fraction: float = 0.0
) -> None:
    """--test-fraction, --validation-fraction (default ``validation_fraction``) and --split-seed of a converter
    (questions ordered ``order``)."""
    parser.add_argument(
        "--test-fraction",
        type=_decimal,
        default=0.2,
        metavar="F",
        help=f"{when}per task, the last F of the questions {order} are test: n_train = floor((1 - F) n) (default 0.2)",
    )
    parser.add_argument(
        "--validation-fraction",
        type=_decimal,
        default=validation_fraction,
        metavar="V",
        help=f"per task, the last V of the train questions {order} become validation (default {validation_fraction:g}"
        + (": none)" if validation_fraction == 0 else "; 0: none)"),
    )
    parser.add_argument(
        "--split-seed",
        type=_integer,
        default=None,
        metavar="S",
        help="random test (and validation) sets of the same sizes per task, seeded, instead",
    )


def _pool_note(output: Path | str, cache: LogitCache) -> None:
    """Warn about a pool of one model: there is no team to choose and nothing to fuse."""
    if cache.n_models == 1:
        _note(
            f"warning: {output} holds one model ({cache.models[0]}): there is no team to choose and no answers "
            "to fuse, so the environment, training and baselines run but have nothing to learn about routing; "
            "convert the outputs of two or more models"
        )


def _integer(text: str) -> int:
    """An integer option, written in ASCII digits (``int()`` would also read ``"１２"`` or ``"1_000"``)."""
    if not re.fullmatch(r"[+-]?[0-9]{1,18}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer (ASCII digits 0-9)")
    return int(text)


def _positive(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1")
    return value


def _decimal(text: str) -> float:
    """A number option, plain ASCII decimal and finite (``float()`` would also read ``"０.２"`` or ``"nan"``)."""
    value = parse_float(text)
    if value is None:
        raise argparse.ArgumentTypeError(number_problem(text))
    return value


def _fraction(text: str) -> float:
    value = _decimal(text)
    if not 0.0 <= value <= 10.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 10]")
    return value


def _add_limit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-file-mb",
        type=_positive,
        default=MAX_FILE_BYTES // 2**20,
        metavar="MB",
        help=f"the largest input file read, in MiB (default {MAX_FILE_BYTES // 2**20}); only regular files are "
        "read (a FIFO or a device is refused)",
    )


def _add(
    actions: Any,
    name: str,
    run: Callable[[argparse.Namespace], int],
    help_text: str,
    description: str,
    epilog: str = "",
) -> argparse.ArgumentParser:
    """Add the action ``name``, run by ``run``, with a wrapped description and an optional examples epilog."""
    parser: argparse.ArgumentParser = actions.add_parser(
        name, help=help_text, description=description, epilog=epilog or None, formatter_class=_HelpFormatter
    )
    parser.set_defaults(run=_guarded(run))
    return parser


def register(commands: Any) -> None:
    """Add the ``cache`` command group to the ``ensemble-env`` sub-parsers ``commands``."""
    group = commands.add_parser(
        "cache",
        help="build, check, summarise, re-split, add features to, plot and generate logit caches",
        description="Build logit caches from what researchers have (lm-evaluation-harness samples, arrays), "
        "check them, summarise them with the baselines, re-split them, add per-question features and plot "
        "them; fit a task generator to a cache and draw new tasks from it. A CACHE argument is a file or a "
        "built-in cache: " + ", ".join(datasets.available()) + ".",
        epilog="examples:\n"
        "  ensemble-env cache from-lm-eval runs/ -o bbh.h5\n"
        "  ensemble-env cache info bbh.h5\n"
        "  ensemble-env cache plot bbh.h5 -o plots/",
        formatter_class=_HelpFormatter,
    )
    actions = group.add_subparsers(dest="cache_command", required=True, metavar="ACTION")

    lm_eval = _add(
        actions,
        "from-lm-eval",
        _from_lm_eval,
        "lm-evaluation-harness samples files (--log_samples) to a cache",
        "Convert lm-evaluation-harness samples files (written with --log_samples, as in the Open LLM "
        "Leaderboard details) into a logit cache. Each PATH is the folder of one model's samples files "
        "(the model is named after the folder) or a folder of such folders. Both layouts are read: "
        "samples_<task>_<date>.jsonl (lm-eval >= 0.4.3) and <model_args>_<task>.jsonl (0.4.0-0.4.2, with the "
        "run's results .json beside it). Only multiple-choice tasks convert; questions are aligned across "
        "models by doc_id (checked with doc_hash).",
        "examples:\n"
        "  ensemble-env cache from-lm-eval ../shared/data/bbh-leaderboard -o bbh.h5\n"
        "  ensemble-env cache from-lm-eval out/gpt2 out/pythia --tasks arc_easy,hellaswag --normalize chars -o a.h5",
    )
    lm_eval.add_argument(
        "paths", nargs="+", metavar="PATH", help="a model's folder of samples files, or a folder of them"
    )
    lm_eval.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the cache to write (atomically)")
    lm_eval.add_argument(
        "--tasks",
        action=ListOption,
        metavar="TASK",
        help="only these tasks, comma- or space-separated (full or stored names)",
    )
    _add_split_options(lm_eval, "by doc_id", validation_fraction=LM_EVAL_VALIDATION_FRACTION)
    lm_eval.add_argument(
        "--normalize",
        choices=NORMALIZATIONS,
        default="none",
        help="divide each choice's log-likelihood by its length in characters (lm-eval acc_norm) or UTF-8 "
        "bytes (acc_bytes); default none (acc)",
    )
    lm_eval.add_argument(
        "--strip-prefix",
        default="auto",
        metavar="PREFIX",
        help="removed from the task names: 'auto' (default) removes the longest '_'-ended prefix shared by "
        "all tasks found, e.g. leaderboard_bbh_; '' keeps lm-eval's names",
    )
    lm_eval.add_argument(
        "--intersect",
        action="store_true",
        help="keep only the questions every model answered with the same label and choices (prints the count "
        "dropped) instead of stopping with an error",
    )
    lm_eval.add_argument(
        "--features",
        choices=("text",),
        default=None,
        help="also compute per-question features: 'text' = TF-IDF of hashed word and character n-grams of the "
        f"question text, reduced by SVD, fitted on the train split only (needs scikit-learn: {INSTALL_HINT})",
    )
    lm_eval.add_argument(
        "--n-features",
        type=_positive,
        default=None,
        metavar="F",
        help=f"dimensions of --features text (default {DEFAULT_N_FEATURES})",
    )
    _add_limit_option(lm_eval)
    lm_eval.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )

    arrays = _add(
        actions,
        "from-arrays",
        _from_arrays,
        "numpy .npz/.npy or CSV arrays to a cache",
        "Build a logit cache from arrays. SCORES is a .npz with arrays named like the cache datasets "
        "(scores, labels, models, n_choices, tasks, task_names, split, question_ids, costs, features), a .npy "
        "of scores, or a CSV/TSV table with one row per question. Scores have shape (Q, N, C) or (Q, N*C), "
        "model-major (column n*C + c); in a CSV an optional header row is skipped. Without --n-choices, trailing "
        "scores that are -inf or NaN (an empty CSV cell) for every model are padding beyond a question's "
        "choices. Without a split array, the last --test-fraction of each task, in file order, is test.",
        "examples:\n"
        "  ensemble-env cache from-arrays pool.npz --score-kind logit -o pool.h5\n"
        "  ensemble-env cache from-arrays scores.csv --labels labels.csv --models a,b,c --score-kind prob -o p.h5",
    )
    arrays.add_argument("scores", metavar="SCORES", help=".npz, .npy, .csv or .tsv")
    arrays.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the cache to write (atomically)")
    arrays.add_argument(
        "--score-kind", required=True, choices=SCORE_KINDS, help="how scores become probabilities (see the format)"
    )
    arrays.add_argument("--labels", metavar="FILE", help="gold choice per question: .npy or one integer per line")
    arrays.add_argument(
        "--models", action=ListOption, metavar="NAME", help="model names in column order, comma- or space-separated"
    )
    arrays.add_argument("--n-choices", metavar="FILE", help="valid choices per question: .npy or one integer per line")
    arrays.add_argument("--tasks", metavar="FILE", help="task name per question: .npy of strings or one per line")
    _add_split_options(arrays, "in file order", "when the arrays hold no split: ")
    _add_limit_option(arrays)

    info = _add(
        actions,
        "info",
        _info,
        "sizes and per-task accuracies of a cache, with the baselines",
        "Show a cache's questions, models, tasks, choice counts and splits, then per task each model's "
        "accuracy, the plurality vote, the mean-probability vote, the best single model (chosen on the train "
        "split over all tasks) and the oracle (right when any model is).",
    )
    info.add_argument(
        "cache", metavar="CACHE", help="a cache file or a built-in name (" + ", ".join(datasets.available()) + ")"
    )
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    info.add_argument("--split", default="all", choices=_SPLIT_CHOICES, help="questions to score (default all)")
    info.add_argument("--train-split", default="train", choices=_SPLIT_CHOICES, help="where best_single is chosen")

    validate = _add(
        actions,
        "validate",
        _validate,
        "check cache files against the format",
        "Read each cache and check every rule of the format (docs/cache-format.md): one line per cache, every "
        "cache checked even when one fails; exit status 2 if any fails.",
    )
    validate.add_argument("caches", nargs="+", metavar="CACHE", help="cache files or built-in names")

    split = _add(
        actions,
        "split",
        _split,
        "write a copy of a cache with a new train/validation/test split",
        "Assign a new split per task and write the cache to OUT (the input is left as it is). Without --seed "
        "each task's questions, in cache order (doc_id order for lm-eval caches), are train, then validation, "
        "then test: the last --test-fraction F is test, n_not_test = floor((1 - F) n), and the last "
        "--validation-fraction V of the rest is validation, n_train = floor((1 - V) n_not_test).",
    )
    split.add_argument("cache", metavar="CACHE", help="a cache file or a built-in name")
    split.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the cache to write (atomically)")
    split.add_argument(
        "--test-fraction", type=_decimal, default=0.2, metavar="F", help="the last F of each task is test (default 0.2)"
    )
    split.add_argument(
        "--validation-fraction",
        type=_decimal,
        default=0.0,
        metavar="V",
        help="the last V of each task's train questions become validation (default 0)",
    )
    split.add_argument(
        "--seed", type=_integer, default=None, help="a seeded random split per task instead (same sizes; default: none)"
    )

    features = _add(
        actions,
        "features",
        _features,
        "write a copy of a cache with new per-question features",
        "Add or replace the per-question features of a cache and write it to OUT (the input is left as it "
        "is). --from text computes them from the cache's question_text: TF-IDF of hashed word 1-2-grams and "
        "character 3-5-grams, TruncatedSVD to F dimensions, standardised; fitted on the train split only, "
        f"seeded (needs scikit-learn: {INSTALL_HINT}). --from FILE.npy reads a (Q, F) array of finite numbers "
        "(no pickle). Features are stored as float32.",
        "examples:\n"
        "  ensemble-env cache features bbh.h5 --from text -o bbh_features.h5\n"
        "  ensemble-env cache features bbh5 --from embeddings.npy --kind sentence-embedding -o bbh5_emb.h5",
    )
    features.add_argument("cache", metavar="CACHE", help="a cache file or a built-in name")
    features.add_argument(
        "--from", dest="source", required=True, metavar="text|FILE.npy", help="'text' or a (Q, F) .npy file"
    )
    features.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the cache to write (atomically)")
    features.add_argument(
        "--n-features",
        type=_positive,
        default=None,
        metavar="F",
        help=f"dimensions of --from text (default {DEFAULT_N_FEATURES})",
    )
    features.add_argument("--seed", type=_integer, default=0, help="random_state of the SVD of --from text (default 0)")
    features.add_argument(
        "--kind", default="", help="with --from FILE.npy: how the features were made, stored as feature_kind"
    )

    plot = _add(
        actions,
        "plot",
        _plot,
        "PNGs of accuracy by task, error correlation and teams by size",
        "Write accuracy_by_task.png, error_correlation.png and teams_by_size.png into DIR (created if "
        f"missing). Needs matplotlib (the plot extra): {extras.install_line('plot')}.",
    )
    plot.add_argument("cache", metavar="CACHE", help="a cache file or a built-in name")
    plot.add_argument("-o", "--output", required=True, metavar="DIR", help="folder of the PNGs (created if missing)")
    plot.add_argument("--split", default="all", choices=_SPLIT_CHOICES, help="questions to plot (default all)")
    plot.add_argument(
        "--max-teams", type=_positive, default=256, metavar="K", help="teams per size beyond which K are sampled"
    )
    plot.add_argument("--seed", type=_integer, default=0, help="seed of the team sample (default 0)")
    plot.add_argument("--dpi", type=_positive, default=100, help="resolution (default 100)")

    fit = _add(
        actions,
        "fit-generator",
        _fit_generator,
        "fit a task generator to a cache's tasks (and report its fidelity)",
        "Fit the task model of docs/generated-tasks.md to each task of CACHE (or of --tasks), reading every "
        "question of those tasks, and write the generator to GEN (JSON, atomically). With --report DIR, also "
        "compare each task with --replicas replicas of it (the 31 team votes' accuracies, the best single model, "
        "the best and the global team, the hindsight gap, agreement, confidence) and place --holdout real tasks "
        "held out of a second fit among --draws tasks it generates: fidelity.md, fidelity.json and fidelity.png "
        f"(needs matplotlib, the plot extra: {extras.install_line('plot')}).",
        "examples:\n"
        "  ensemble-env cache fit-generator bbh5 -o bbh5_generator.json\n"
        "  ensemble-env cache fit-generator bbh5 -o bbh5_generator.json --report fidelity/ --overwrite",
    )
    fit.add_argument("cache", metavar="CACHE", help="a cache file or a built-in name")
    fit.add_argument("-o", "--output", required=True, metavar="GEN", help="the generator file to write (JSON)")
    fit.add_argument(
        "--tasks", action=ListOption, metavar="TASK", help="only these tasks, comma- or space-separated (default all)"
    )
    fit.add_argument("--report", metavar="DIR", default=None, help="also write the fidelity report into DIR")
    fit.add_argument(
        "--replicas", type=_positive, default=8, metavar="R", help="replicas of each task in the report (default 8)"
    )
    fit.add_argument(
        "--holdout",
        type=_integer,
        default=4,
        metavar="K",
        help="real tasks held out of a second fit and placed among its tasks in the report (default 4; 0: none)",
    )
    fit.add_argument(
        "--draws", type=_positive, default=200, metavar="N", help="tasks drawn to place the held-out ones (default 200)"
    )
    fit.add_argument("--seed", type=_integer, default=0, help="seed of the report's draws and held-out tasks (0)")
    fit.add_argument("--overwrite", action="store_true", help="replace GEN and the report's files when they exist")

    generate = _add(
        actions,
        "generate",
        _generate,
        "draw new tasks from a task generator, as a cache",
        "Draw tasks FIRST .. FIRST + N - 1 of the stream of --seed from the generator GEN (made by cache "
        "fit-generator) and write them as a cache: tasks gen-000000, ..., each a fitted task jittered by --jitter "
        "times the spread across tasks, with --questions LO HI questions and the fitted cache's split "
        "proportions. Task i depends only on the seed and i: a second stream is --first N. --models above the "
        "fitted pool adds models drawn from it. Refuses an existing OUT without --overwrite.",
        "examples:\n"
        "  ensemble-env cache generate bbh5_generator.json -o test_tasks.h5 --tasks 2000 --seed 0\n"
        "  ensemble-env cache generate bbh5_generator.json -o val_tasks.h5 --tasks 400 --seed 0 --first 2000\n"
        "  ensemble-env cache generate bbh5_generator.json -o pool10.h5 --tasks 100 --seed 1 --models 10",
    )
    generate.add_argument("generator", metavar="GEN", help="a generator file (cache fit-generator)")
    generate.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="the cache to write (atomically)")
    generate.add_argument("--tasks", type=_positive, required=True, metavar="N", help="how many tasks to draw")
    generate.add_argument("--seed", type=_integer, required=True, metavar="S", help="the stream's seed (>= 0)")
    generate.add_argument(
        "--models", type=_positive, default=None, metavar="M", help="the pool's size (default: the fitted pool's)"
    )
    generate.add_argument(
        "--questions",
        type=_positive,
        nargs=2,
        default=(150, 250),
        metavar=("LO", "HI"),
        help="each task's question count, drawn uniformly from LO..HI (default 150 250)",
    )
    generate.add_argument(
        "--first", type=_integer, default=0, metavar="I", help="the index of the first task of the stream (default 0)"
    )
    generate.add_argument(
        "--jitter",
        type=_fraction,
        default=0.5,
        metavar="J",
        help="the jitter in units of each parameter's spread across the fitted tasks (default 0.5; 0: replicas)",
    )
    generate.add_argument("--overwrite", action="store_true", help="replace OUT when it exists")
