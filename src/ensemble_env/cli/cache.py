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

This module holds the group's parser (its actions, options and help); what each action does is
:mod:`ensemble_env.cli.cache_actions`'.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from ensemble_env import extras
from ensemble_env.cache import datasets
from ensemble_env.cache.convert import MAX_FILE_BYTES, NORMALIZATIONS, number_problem, parse_float
from ensemble_env.cache.features import DEFAULT_N_FEATURES, INSTALL_HINT
from ensemble_env.cache.logit_cache import SCORE_KINDS
from ensemble_env.cli import cache_actions
from ensemble_env.cli.options import ListOption

__all__ = ["LM_EVAL_VALIDATION_FRACTION", "register"]

_SPLIT_CHOICES = ("all", "train", "test", "validation")


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions to the terminal; keeps the lines of an ``examples:`` epilog as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


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
    parser.set_defaults(run=cache_actions.guarded(run))
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
        cache_actions.run_from_lm_eval,
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
        cache_actions.run_from_arrays,
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
        cache_actions.run_info,
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
        cache_actions.run_validate,
        "check cache files against the format",
        "Read each cache and check every rule of the format (docs/cache-format.md): one line per cache, every "
        "cache checked even when one fails; exit status 2 if any fails.",
    )
    validate.add_argument("caches", nargs="+", metavar="CACHE", help="cache files or built-in names")

    split = _add(
        actions,
        "split",
        cache_actions.run_split,
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
        cache_actions.run_features,
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
        cache_actions.run_plot,
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
        cache_actions.run_fit_generator,
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
        cache_actions.run_generate,
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
