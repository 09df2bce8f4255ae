"""``ensemble-env benchmark``: the command line (:func:`register_command`), the ``--register`` files that add
algorithms (:func:`load_plugins`), and how the command reports an interruption (exit status 130).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ensemble_env import extras
from ensemble_env.cache import datasets
from ensemble_env.cli.options import ListOption
from ensemble_env.text import listed, show
from ensemble_mappo.benchmark import marl_eval
from ensemble_mappo.benchmark.learners import BUDGETS, LEARNERS, budget_help
from ensemble_mappo.benchmark.protocols import FEEDBACKS, PROTOCOLS, GeneratedPlan
from ensemble_mappo.benchmark.registry import (
    DEFAULT_ALGORITHMS,
    PARTIAL_DEFAULT_ALGORITHMS,
    UNSEEN_DEFAULT_ALGORITHMS,
    default_algorithms,
)
from ensemble_mappo.benchmark.report import format_markdown, plot_skipped, write_plots
from ensemble_mappo.benchmark.runner import Interrupted, benchmark, checked_alpha
from ensemble_mappo.benchmark.stats import REFERENCES

__all__ = ["INTERRUPTED_STATUS", "MAX_SEEDS", "load_plugins", "register_command"]

#: the most seeds one benchmark runs (``--seeds``)
MAX_SEEDS = 1000
#: the exit status after Ctrl-C: 128 + SIGINT, as a shell reports it
INTERRUPTED_STATUS = 130
#: the defaults of --protocol generated, quoted by the help (read from the fields: no plan is made before it is used)
_PLAN = {field.name: field.default for field in dataclasses.fields(GeneratedPlan)}


def load_plugins(paths: Sequence[str]) -> None:
    """Run the Python files ``paths`` (``--register``), which register algorithms; ValueError naming the file and
    the line when one is missing, does not compile, or raises."""
    for index, file in enumerate(paths):
        if not os.path.isfile(file):
            raise ValueError(f"--register {file}: no such file" + (" (a folder)" if os.path.isdir(file) else ""))
        spec = importlib.util.spec_from_file_location(f"_benchmark_plugin_{index}", file)
        if spec is None or spec.loader is None:
            raise ValueError(f"--register {file}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except SyntaxError as error:
            raise ValueError(f"--register {file}, line {error.lineno}: {error.msg}") from None
        except Exception as error:
            lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if _same(frame.filename, file)]
            where = f", line {lines[-1]}" if lines else ""
            text = str(error) if len(str(error)) <= 300 else str(error)[:297] + "..."
            raise ValueError(f"--register {file}{where}: {type(error).__name__}: {text}") from None


def _same(one: str, other: str) -> bool:
    return os.path.abspath(one) == os.path.abspath(other)


def _command(args: Any) -> int:
    runs = Path(args.out) / "runs"
    try:
        return _run(args)
    except Interrupted as stop:
        message = f"interrupted after {stop.finished} of {stop.total} runs; the finished runs are kept in {stop.folder}"
    except KeyboardInterrupt:
        message = f"interrupted; the finished runs are kept in {runs}"
    print(f"ensemble-env benchmark: {message} and are read back, not redone, next time", file=sys.stderr)
    return INTERRUPTED_STATUS


def _run(args: Any) -> int:
    algorithms = list(args.algorithms or default_algorithms(args.protocol, args.feedback))
    learners = [name for name in algorithms if name in LEARNERS]
    if learners and not extras.require("benchmark", "mappo", ["torch"], option=f"--algorithms {','.join(learners)}"):
        return extras.EXIT_STATUS
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise ValueError(f"--seeds must be at least 1 and at most {MAX_SEEDS} (seeds 0..S-1), got {show(args.seeds)}")
    checked_alpha(args.alpha)
    load_plugins(args.register or [])
    caches = args.cache or [datasets.DEFAULT]
    results = benchmark(
        algorithms,
        range(args.seeds),
        caches,
        args.out,
        alpha=args.alpha,
        budget=args.budget,
        progress=args.progress,
        plot=False,
        protocol=args.protocol,
        folds=args.folds,
        fold_seed=args.fold_seed,
        eval_cache=args.eval_cache,
        jobs=args.jobs,
        formats=args.format or (),
        feedback=args.feedback,
        generated=_generated_plan(args),
    )
    plots = write_plots(results, Path(args.out), list(results["caches"]))
    print(format_markdown(results))
    written = [str(Path(args.out) / "results.json"), "results.md"]
    written += [marl_eval.FILE] if "marl-eval" in (args.format or ()) else []
    if plots is None:
        print(f"benchmark: {plot_skipped()}", file=sys.stderr)
        print(f"wrote {listed(written)} (no frontier plot: matplotlib is missing)")
    else:
        print(f"wrote {listed([*written, 'the frontier plot'])}")
    return 0


def _generated_plan(args: Any) -> GeneratedPlan | None:
    """The plan of ``--protocol generated`` (:class:`GeneratedPlan`'s defaults, ``--generated-models``); None for
    another protocol, whose runs ``--generated-models`` is refused with."""
    if args.protocol != "generated":
        if args.generated_models is not None:
            raise ValueError(f"--generated-models {args.generated_models} goes with --protocol generated")
        return None
    try:
        return GeneratedPlan(n_models=args.generated_models)
    except ValueError as error:
        raise ValueError(f"--generated-models: {str(error).replace('GeneratedPlan.n_models ', '')}") from None


def register_command(commands: Any) -> None:
    """Add ``benchmark`` to the ``ensemble-env`` sub-parsers (called by :func:`ensemble_mappo.cli.register`)."""
    parser = commands.add_parser(
        "benchmark",
        help="run algorithms x seeds x caches on the test split, with confidence intervals",
        description="Run each algorithm with each seed on each cache: fit on train, choose on validation, "
        "answer test once. Writes OUT/results.json (per run and means over seeds with 95% bootstrap intervals, "
        "per task and macro: accuracy, reward at alpha, team size, cost), OUT/results.md (the tables: scores, each "
        "algorithm's role, how its teams vary within a task, paired differences to the simple opponents: "
        + ", ".join(REFERENCES)
        + ") and OUT/frontier.png. The defaults show the headroom: "
        "static_team(train+val) (the best fixed team per task on train + validation, a competitor), "
        "static_team(pooled) (the same with each team's reward per task shrunk toward its reward over all tasks) and "
        "oracle_team(test) (the best fixed team per task on test: it reads the test labels, a reference marked as "
        "such, never a competitor). Finished runs (same algorithm, seed, cache contents, alpha, config) are read "
        "back, not redone. The defaults on bbh5 (5 seeds, MAPPO and IPPO at the default budget, eight baselines) take "
        "about 9 minutes on 2 CPU cores, almost all of it the learners.",
        epilog="example: ensemble-env benchmark --algorithms mappo static_team 'static_team(train+val)' stacking "
        "best_single 'oracle_team(test)' --seeds 5 --cache bbh5 --out bench",
    )
    parser.add_argument(
        "--algorithms",
        action=ListOption,
        metavar="NAME",
        help=f"the learners ({', '.join(LEARNERS)}), any baseline of `ensemble-env baselines` (and stacking, "
        "uniform_weights, per_task_weights, per_question_weights, static_team(pooled), best_single(per_task)), or a "
        f"name registered by a --register file; a,b or a b (default: {', '.join(DEFAULT_ALGORITHMS)}; with "
        f"--protocol unseen-tasks or generated: {', '.join(UNSEEN_DEFAULT_ALGORITHMS)})",
    )
    parser.add_argument("--seeds", type=int, default=5, metavar="S", help="seeds 0..S-1 (default: %(default)s)")
    parser.add_argument(
        "--cache",
        action=ListOption,
        metavar="CACHE",
        help=f"built-in name or cache file; several: a,b or a b (default: {datasets.DEFAULT})",
    )
    parser.add_argument(
        "--out",
        default="bench",
        metavar="DIR",
        help="results folder (reused runs live in DIR/runs; default: %(default)s)",
    )
    parser.add_argument("--alpha", type=float, default=1.0, help="size penalty of the reward (default: %(default)s)")
    parser.add_argument(
        "--budget",
        choices=tuple(BUDGETS),
        default="default",
        help=budget_help() + " (default: %(default)s, the train command's own budget)",
    )
    parser.add_argument(
        "--register",
        action=ListOption,
        metavar="FILE",
        help="Python file(s) that register algorithms with register_algorithm (e.g. examples/register_algorithm.py)",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="standard",
        help="standard: every task's train, validation and test splits; unseen-tasks: routing tasks never seen, each "
        "algorithm fitted and chosen on some tasks (its validation is tasks too) and scored on every question of the "
        "others, each streamed from an empty history: --folds folds of the cache's tasks, or --eval-cache; "
        "generated: the same folds, but every algorithm fits and chooses on tasks drawn from a generator fitted on "
        f"the fold's training tasks alone ({_PLAN['train_tasks']} train and {_PLAN['validation_tasks']} "
        f"validation tasks a fold, {_PLAN['questions'][0]}-{_PLAN['questions'][1]} questions each) and is scored "
        f"twice: on {_PLAN['test_tasks']} generated test tasks a fold (results 'generated(CACHE)') and on the fold's "
        "real held-out tasks (results 'CACHE'; with --eval-cache the generator is fitted on all of --cache and the "
        "eval cache is "
        "scored) (default: %(default)s; docs/benchmark.md)",
    )
    parser.add_argument(
        "--feedback",
        choices=FEEDBACKS,
        default="all",
        help="unseen-tasks, generated: what the game reveals after each answer: every model's output (all), or only "
        "the answering team's (team: partial feedback, the learners play ensemble_env/EnsembleUnseen-v2; its default "
        f"algorithms: {', '.join(PARTIAL_DEFAULT_ALGORITHMS)}) (default: %(default)s)",
    )
    parser.add_argument(
        "--generated-models",
        type=int,
        default=None,
        metavar="M",
        help="generated: the models of every generated task (default: the cache's pool; more draws the extra ones "
        "from the generator, e.g. 10 on bbh5's 5, and the learners train on M-model tasks). The real held-out "
        "tasks hold the cache's models alone: with another M they are not scored (said on stderr and in "
        "results.json's protocol.generated.real_tasks)",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=4,
        metavar="K",
        help="unseen-tasks, generated: folds of the tasks (default: %(default)s)",
    )
    parser.add_argument(
        "--fold-seed",
        type=int,
        default=0,
        metavar="S",
        help="unseen-tasks, generated: seed of the folds, and of each fold's generated tasks (default: %(default)s)",
    )
    parser.add_argument(
        "--eval-cache",
        default=None,
        metavar="PATH",
        help="unseen-tasks, generated: train and choose on every task of --cache (generated: on tasks of a generator "
        "fitted on all of it), score every task of this cache (the same models in the same order)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run the missing runs in N processes (each run is seeded on its own: the results are a serial run's; "
        "default: %(default)s)",
    )
    parser.add_argument(
        "--format",
        action=ListOption,
        metavar="FORMAT",
        help="also write the results in these formats: marl-eval (OUT/marl_eval.json, the JSON that marl-eval and "
        "BenchMARL's JSON logger use: cache, task, algorithm, seed_S, then accuracy, reward, team_size and cost per "
        "task; docs/benchmark.md)",
    )
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar")
    parser.set_defaults(run=_command)
