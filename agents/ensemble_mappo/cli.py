"""The ``train``, ``evaluate`` and ``plot`` commands of ``ensemble-env``: the reference MAPPO learner.

- ``ensemble-env train [--cache CACHE] --out DIR [--seed S] [--tasks ...] [--config FILE] [options]``: train
  MAPPO (``--algorithm rlae_ppo|rlae_mappo``: the RLAE learners of :mod:`ensemble_mappo.rlae`) on the cache's
  train split (progress bar, ``DIR/progress.csv``, atomic ``DIR/checkpoint.pt``; ``--logger tensorboard``:
  TensorBoard event files in ``DIR/tensorboard/``);
  ``ensemble-env train --resume DIR`` continues a run exactly where its checkpoint left it.
- ``ensemble-env evaluate DIR [--cache CACHE] [--split test] [--json] [--online]``: per-task accuracy, team
  size, selection frequency and cost of the frozen policy (or, with ``--online``, of the paper's online
  protocol, labelled as such), next to the baselines.
- ``ensemble-env plot DIR [DIR ...] [--out FOLDER]``: learning curves, team size, selection frequency, and
  accuracy against team size next to the baselines, as PNG files.

:func:`register` plugs them into ``ensemble-env`` through the ``ensemble_env.commands`` entry-point group
(``mappo = "ensemble_mappo.cli:register"`` in pyproject.toml; see :mod:`ensemble_env.cli`). This module
imports no torch: the options are built from the torch-free :mod:`ensemble_mappo.config`, and the learner
is imported when a command runs (without torch, ``train`` and ``evaluate`` say which extra to install).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from ensemble_env import extras
from ensemble_env.cache import datasets
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import SPLIT_CHOICES
from ensemble_env.cli.options import ListOption, status

__all__ = ["register"]

#: how to get torch, as the README says: a CPU build from PyTorch's own index (a plain ``pip install torch`` on
#: Linux pulls the CUDA build, several GB), then the extra (:func:`ensemble_env.extras.install_line`)
INSTALL_HINT = (
    "install a CPU torch (any >= 2.1; for a GPU build see the README), then the `mappo` extra: "
    + extras.install_line("mappo", with_torch=True)
)


def _torch_available(command: str) -> bool:
    """Whether torch is installed; if not, ``ensemble-env COMMAND: error: COMMAND needs torch, ...`` (the one
    message of :func:`ensemble_env.extras.require`) is printed, and the command returns 2 before any work."""
    return extras.require(command, "mappo", ["torch"])


def _parse_env_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (numbers, lists, true/false), else as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--env expects KEY=VALUE (e.g. alpha=0.5), got {text!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def _option_fields() -> dict[str, list[str]]:
    """Each training option (a field of some algorithm's config, ``env`` aside) and the algorithms that have it."""
    from ensemble_mappo.algorithms import ALGORITHMS

    owners: dict[str, list[str]] = {}
    for entry in ALGORITHMS.values():
        for name in entry.options:
            owners.setdefault(name, []).append(entry.name)
    return owners


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    """One ``--field-name`` option per field of the algorithms' configs; its help is the field's docstring and each
    algorithm's own default, both read from the config classes (:func:`ensemble_mappo.config.field_docs`)."""
    from ensemble_mappo.algorithms import ALGORITHMS
    from ensemble_mappo.config import CHOICES, LIMITS, field_docs

    group = parser.add_argument_group(
        "training options (the algorithm's defaults < --config FILE < these; each says whose it is and its default)"
    )
    for name, owners in _option_fields().items():
        entries = [ALGORITHMS[owner] for owner in owners]
        config_class = entries[0].config_class
        kind = next(item.type for item in fields(config_class) if item.name == name)
        doc = field_docs(config_class)[name]
        by_default: dict[str, list[str]] = {}
        for entry in entries:
            value = getattr(entry.make_config(), name)
            by_default.setdefault(f"{value:g}" if isinstance(value, float) else str(value), []).append(entry.name)
        if len(by_default) == 1:
            defaults = f"default: {next(iter(by_default))}"
        else:
            defaults = "; ".join(f"{', '.join(names)}: default {value}" for value, names in by_default.items())
        if len(entries) < len(ALGORITHMS):
            defaults = f"{', '.join(owners)} only; {defaults}"
        limit = f"; at most {LIMITS[name]:,}" if name in LIMITS else ""
        help_text = f"{doc} ({defaults}{limit})".replace("%", "%%")
        flag = "--" + name.replace("_", "-")
        if kind == "bool":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        else:
            python_type = {"int": int, "float": float, "str": str}[kind]
            group.add_argument(
                flag,
                type=python_type,
                choices=CHOICES.get(name),
                default=argparse.SUPPRESS,
                help=help_text,
                metavar=kind.upper() if name not in CHOICES else None,
            )


def _given_config_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The training options given as flags (``--learning-rate`` ...), by field name."""
    return {name: getattr(args, name) for name in _option_fields() if hasattr(args, name)}


def _config_from_args(args: argparse.Namespace) -> Any:
    """The config of ``--algorithm``: its defaults, a ``--config`` file's values, the flags, ``--env``, ``--tasks``."""
    from ensemble_mappo.algorithms import get
    from ensemble_mappo.config import read_config_file

    entry = get(args.algorithm)
    flags = _given_config_flags(args)
    foreign = [name for name in flags if name not in entry.options]
    if foreign:
        raise ValueError(
            f"--algorithm {entry.name}: {', '.join('--' + name.replace('_', '-') for name in foreign)} "
            f"{'is not one of its options' if len(foreign) == 1 else 'are not among its options'}; its options are "
            f"{', '.join(entry.options)} (flags, or a --config file)"
        )
    base = read_config_file(args.config) if args.config else {}
    where = args.config or "options"
    config = entry.from_dict({**base, **flags}, where=where)
    env = dict(config.env)
    env.update(dict(args.env or []))
    if args.tasks:
        env["tasks"] = list(args.tasks)
    return entry.from_dict({**config.to_dict(), "env": env}, where="options", merge_env=False)


def _train(args: argparse.Namespace) -> int:
    """``train --out DIR`` or ``train --resume DIR``, holding DIR's lock (:class:`ensemble_env.run_lock.RunLock`)
    from before the folder is looked at (or cleared by ``--overwrite``) to the end of the run."""
    if not _torch_available("train"):
        return 2
    loggers = args.logger or ["csv"]
    if "tensorboard" in loggers and not extras.require("train", "tensorboard", option="--logger tensorboard"):
        return extras.EXIT_STATUS
    from ensemble_env.run_lock import RunLock
    from ensemble_mappo.loggers import check_loggers
    from ensemble_mappo.runs import read_config, run_cache
    from ensemble_mappo.training import check_run

    args.logger = check_loggers(loggers, "--logger")

    if args.resume:
        given = [f"--{name.replace('_', '-')}" for name in _given_config_flags(args)]
        given += [
            flag for flag, value in (("--config", args.config), ("--tasks", args.tasks), ("--env", args.env)) if value
        ]
        if args.algorithm is not None:
            given.append("--algorithm")
        if given or args.out or args.overwrite:
            extra = given or [flag for flag, used in (("--out", args.out), ("--overwrite", args.overwrite)) if used]
            raise ValueError(f"--resume continues a run with its saved config; drop {', '.join(extra)}")
        out = Path(args.resume)
        with RunLock(out, create=False) as lock:
            _say_taken_over(lock)
            run = read_config(out)
            cache_path = args.cache if args.cache is not None else run.cache
            cache = run_cache(run, args.cache)
            return _run_training(run.config, cache, cache_path, out, args, check_run(run.config, cache))
    if not args.out:
        raise ValueError("--out DIR is required (the run directory), or --resume DIR to continue a run")
    args.algorithm = args.algorithm or "mappo"
    out = Path(args.out)
    config = _config_from_args(args)
    cache_path = _cache_reference(args.cache)
    cache = resolve_cache(cache_path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; the run directory is a folder")
    # the config against the game it will train on (its options, the learner built for them, the budget's limits)
    # before the folder is made: a run directory is written only for a run that can start
    budget = check_run(config, cache)
    with RunLock(out) as lock:
        _say_taken_over(lock)
        _clear_for_new_run(out, args.overwrite)
        return _run_training(config, cache, cache_path, out, args, budget)


def _say_taken_over(lock: Any) -> None:
    if lock.taken_over:
        from ensemble_env.run_lock import describe_holder

        print(
            f"ensemble-env train: {lock.path} was left by {describe_holder(lock.taken_over)}, which no longer runs "
            "(killed?); taking the run directory over",
            file=sys.stderr,
        )


def _clear_for_new_run(out: Path, overwrite: bool) -> None:
    """Refuse a folder that holds a run (or part of one), unless ``overwrite``: then remove the run's files."""
    from ensemble_mappo.loggers import EVENT_FILES
    from ensemble_mappo.plots import PLOT_NAMES
    from ensemble_mappo.runs import CANDIDATES_DIR, CHECKPOINT_NAME, CONFIG_NAME, RUN_FILES, TENSORBOARD_DIR

    present = [name for name in RUN_FILES if os.path.lexists(out / name)]
    if not present:
        return
    if not overwrite:
        raise ValueError(
            f"{out} already holds a run ({', '.join(present)}): --resume {out} continues it, --overwrite starts it over"
        )
    kept = out / CANDIDATES_DIR
    stale = [out / CHECKPOINT_NAME, *(out / name for name in RUN_FILES if name not in (CHECKPOINT_NAME, CONFIG_NAME))]
    board = out / TENSORBOARD_DIR
    stale += [*out.glob("evaluation_*.json"), *out.glob(EVENT_FILES), *(out / name for name in PLOT_NAMES), board]
    folders = (kept, board)
    stale = [*(kept.glob("*.pt") if kept.is_dir() and not kept.is_symlink() else []), *stale]
    stale = [*(board.glob(EVENT_FILES) if board.is_dir() and not board.is_symlink() else []), *stale]
    stale.append(out / CONFIG_NAME)  # last: until it goes, the folder still says whose files these are
    for path in stale:
        try:
            if path in folders and path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        except OSError as error:
            raise ValueError(f"--overwrite: cannot remove {path} ({error.strerror or error})") from None


def _run_training(
    config: Any, cache: Any, cache_path: str | None, out: Path, args: argparse.Namespace, budget: Any
) -> int:
    """Train (``budget``: the run's, :func:`ensemble_mappo.training.check_run`'s: the plan that runs)."""
    from ensemble_mappo.evaluation import read_selection
    from ensemble_mappo.runs import TENSORBOARD_DIR
    from ensemble_mappo.training import train

    where = f"the default built-in cache {datasets.DEFAULT!r}" if cache_path is None else cache_path
    schedule = f" ({config.mode})" if hasattr(config, "mode") else ""
    print(f"{config.algorithm}{schedule} on {where}: {cache.n_models} models, train split; run directory {out}")
    print(budget.describe())
    board = out / TENSORBOARD_DIR
    if args.resume and "tensorboard" not in args.logger and os.path.lexists(board):
        print(
            f"ensemble-env train: {board} holds the run's TensorBoard events; without --logger tensorboard they stop "
            "where they are (a resume with it writes them again from progress.csv)",
            file=sys.stderr,
        )
    row = train(
        config,
        cache,
        out,
        cache_path=cache_path,
        resume=bool(args.resume),
        progress=args.progress,
        loggers=args.logger,
    )
    if not row:
        print(f"nothing to do: the run in {out} is complete; evaluate with: ensemble-env evaluate {out}")
        return 0
    nan = float("nan")
    selection = read_selection(out)
    chosen = (
        f"; its policy: update {selection['update']}, chosen on the validation split ({selection['rule']})"
        if selection is not None
        else "; its policy: the last checkpoint"
    )
    print(
        f"done: {int(row.get('global_step', 0))} steps; last rollout (sampled actions): accuracy "
        f"{row.get('env/accuracy', nan):.4f}, team size {row.get('env/team_size', nan):.2f}{chosen}; "
        f"evaluate with: ensemble-env evaluate {out}"
    )
    return 0


def _cache_reference(cache_arg: str | None) -> str | None:
    """How a run records its cache: None (the default), a built-in name, or an absolute path."""
    if cache_arg is None or (cache_arg in datasets.BUILTINS and not Path(cache_arg).exists()):
        return cache_arg  # resolve_cache refuses a name that is also a path, with the fix
    return str(Path(cache_arg).resolve())


def _run_cache(run_dir: Path, cache_arg: str | None) -> Any:
    from ensemble_mappo.runs import read_config, run_cache

    return run_cache(read_config(run_dir), cache_arg)


def _evaluate(args: argparse.Namespace) -> int:
    if not _torch_available("evaluate"):
        return 2
    from ensemble_mappo.algorithms import get
    from ensemble_mappo.evaluation import evaluate_run

    run = _read_run(Path(args.run_dir))
    cache = _run_cache(Path(args.run_dir), args.cache)
    if run.digest is not None and args.cache is not None:
        from ensemble_env.cache.digest import cache_digest

        if cache_digest(cache) != run.digest:
            print(
                f"ensemble-env evaluate: {args.cache} is not the cache the run trained on (same models, other "
                "contents): its questions are scored as new ones",
                file=sys.stderr,
            )
    protocol = "learning online on" if args.online else "playing"
    with status(f"{protocol} the {args.split} split with the run's policy"):
        evaluation = evaluate_run(
            args.run_dir,
            cache,
            split=args.split,
            online=args.online,
            update_every=args.update_every,
            seed=args.seed,
            checkpoint=args.checkpoint,
        )
    return _report(evaluation, cache, args, get(run.algorithm).baselines)


def _read_run(run_dir: Path) -> Any:
    from ensemble_mappo.runs import read_config

    return read_config(run_dir)


def _report(evaluation: Any, cache: Any, args: argparse.Namespace, extra_baselines: tuple[str, ...] = ()) -> int:
    """The baselines next to an evaluation (unless --no-baselines), the summary saved, the report printed."""
    from ensemble_env.baselines import comparison
    from ensemble_mappo.evaluation import baseline_summary, format_report, run_baselines, save_evaluation

    results = None
    if not args.no_baselines:
        with status(f"fitting the baselines on train and scoring them on {args.split}"):
            results = run_baselines(cache, args.split, args.seed, evaluation.reward)
            if extra_baselines:
                reward = evaluation.reward
                results += comparison.compare(cache, split=args.split, reward=reward, names=extra_baselines)
    summary = {**evaluation.summary(cache), "algorithm": evaluation.algorithm}
    if results is not None:
        summary["baselines"] = baseline_summary(cache, results, evaluation.reward)
    save_evaluation(evaluation, summary)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_report(evaluation, cache, results))
    return 0


def _plot(args: argparse.Namespace) -> int:
    if not extras.require("plot", "mappo", ["torch", "matplotlib"]):  # torch: a run's missing evaluation is played
        return extras.EXIT_STATUS
    with status("loading torch and matplotlib"):
        from ensemble_mappo.plots import plot_runs, pyplot

        pyplot()

    runs = [Path(run) for run in args.runs]
    for path in plot_runs(runs, Path(args.out) if args.out else None, args.cache, status=status):
        print(path)
    return 0


def register(commands: Any) -> None:
    """Add ``train``, ``evaluate``, ``plot`` and ``benchmark`` to the ``ensemble-env`` sub-parsers."""
    train = commands.add_parser(
        "train",
        help="train the reference MAPPO learner (needs the mappo extra)",
        description="Train MAPPO (decider + fusion actors, a centralized critic) on the train split of a cache. "
        "Needs torch: " + INSTALL_HINT + ".",
    )
    train.add_argument(
        "--cache",
        default=None,
        help=f"logit cache file or built-in name ({', '.join(datasets.available())}; default: {datasets.DEFAULT})",
    )
    train.add_argument("--out", default=None, metavar="DIR", help="run directory (logs, checkpoint)")
    train.add_argument("--resume", default=None, metavar="DIR", help="continue the run saved in DIR")
    train.add_argument("--config", default=None, metavar="FILE", help="TOML or JSON file of training options")
    train.add_argument(
        "--tasks",
        action=ListOption,
        metavar="TASK",
        help="train (and later evaluate) on these tasks only, comma- or space-separated (default: every task)",
    )
    train.add_argument(
        "--env",
        action="append",
        type=_parse_env_option,
        metavar="KEY=VALUE",
        help="environment option (repeatable), e.g. --env alpha=0.5 --env 'decider_extras=[\"task\"]'",
    )
    from ensemble_mappo.algorithms import ALGORITHMS
    from ensemble_mappo.config import LOGGERS

    train.add_argument(
        "--algorithm",
        choices=tuple(ALGORITHMS),
        default=None,
        help="the learner (default: mappo): "
        + "; ".join(f"{entry.name}: {entry.summary}" for entry in ALGORITHMS.values())
        + " (docs/mappo.md, docs/rlae.md). Each training option below says which algorithms take it and their "
        "defaults",
    )
    train.add_argument("--overwrite", action="store_true", help="start over when --out already holds a run")
    train.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar")
    train.add_argument(
        "--logger",
        action=ListOption,
        metavar="NAME",
        help=f"where each update is logged, comma- or space-separated: {' and '.join(LOGGERS)}. csv is "
        "DIR/progress.csv, always written; tensorboard adds the same columns as TensorBoard event files in "
        f"DIR/tensorboard/ (the tensorboard extra: {extras.install_line('tensorboard')}; open them with "
        "`tensorboard --logdir DIR`). Not part of the run's config: --resume may add or drop it (default: csv)",
    )
    _add_config_options(train)
    train.set_defaults(run=_train)

    evaluate = commands.add_parser(
        "evaluate",
        help="evaluate a trained MAPPO run on a split (frozen by default)",
        description="Play the questions of --split once, in the cache's order, with the run's checkpoint: the "
        "decider keeps the models it picks with probability > 1/2, the fusion agent its most probable choice "
        "(--online: the paper's protocol, learning on the stream, labelled as such). Prints macro accuracy, "
        "the environment's mean reward, team size and cost, per task and per model, then the baselines "
        "(fitted on train, static_team included) with the policy as one more row; saves "
        "DIR/evaluation_SPLIT.json. Needs torch: " + INSTALL_HINT + ".",
    )
    evaluate.add_argument("run_dir", metavar="DIR", help="run directory written by `ensemble-env train`")
    evaluate.add_argument("--cache", default=None, help="logit cache file (default: the run's cache)")
    evaluate.add_argument(
        "--split",
        default="test",
        choices=SPLIT_CHOICES,
        help=f"the questions played: {', '.join(SPLIT_CHOICES)} (default test; choose settings on validation)",
    )
    evaluate.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    evaluate.add_argument(
        "--online",
        action="store_true",
        help="the paper's online protocol: keep learning on the evaluated stream (labelled ONLINE in every output)",
    )
    evaluate.add_argument("--update-every", type=int, default=64, metavar="N", help="online: questions per update")
    evaluate.add_argument("--seed", type=int, default=0, help="seed of the online protocol's sampling")
    evaluate.add_argument("--no-baselines", action="store_true", help="skip the baselines table")
    evaluate.add_argument(
        "--checkpoint",
        default=None,
        metavar="NAME",
        help="play another of the run's checkpoints: last, or update_N of those it kept (default: the policy "
        "selection.json names when the run kept checkpoints, else the last)",
    )
    evaluate.set_defaults(run=_evaluate)

    plot = commands.add_parser(
        "plot",
        help="PNG plots of MAPPO runs (needs matplotlib: the plot extra)",
        description="Write PNG plots of one or more runs (several, e.g. the seeds of one setting: each run "
        "thin, their mean thick): learning curves, team size, per-model selection frequency, and test accuracy "
        "against team size among the baselines (from DIR/evaluation_test.json, computed when missing). Needs "
        "matplotlib (the plot extra).",
    )
    plot.add_argument("runs", nargs="+", metavar="DIR", help="run directories (several: seeds of one setting)")
    plot.add_argument("--out", default=None, metavar="FOLDER", help="where the PNGs go (default: the first DIR)")
    plot.add_argument("--cache", default=None, help="logit cache for the baselines (default: the run's cache)")
    plot.set_defaults(run=_plot)

    from ensemble_mappo.benchmark import register_command

    register_command(commands)
