"""The ``ensemble-env`` command line.

Commands:

- ``ensemble-env demo``: one episode of the game on a cache (the built-in default, ``bbh5``, unless
  ``--cache``) with a rendered excerpt, a summary, and the baselines every comparison shows.
- ``ensemble-env baselines [CACHE]``: the baselines table of a cache (fitted on train, scored on test).
- ``ensemble-env play``: play the game by hand (:mod:`ensemble_env.play`).
- ``ensemble-env cache ...``: build, check, summarise, re-split and plot logit caches (:mod:`ensemble_env.cache_cli`).
- the commands of installed packages, e.g. ``train``, ``evaluate`` and ``plot`` of the reference MAPPO
  learner that ships beside this package (the ``mappo`` extra).

Adding commands: the ``ensemble_env.commands`` entry-point group
-----------------------------------------------------------------

Every command but ``demo`` and ``baselines`` comes from an entry point of the group ``ensemble_env.commands``
(:data:`COMMAND_GROUP`), this package's own ``cache`` group included. A package adds commands by declaring
one in its pyproject.toml::

    [project.entry-points."ensemble_env.commands"]
    mytool = "my_package.cli:register"

``register(commands)`` receives the argparse sub-parsers object of ``ensemble-env``. It adds its parsers
with ``commands.add_parser(NAME, help=...)`` and sets ``run`` on each parser a command line ends in
(``parser.set_defaults(run=function)``; a group of sub-commands sets it on those): a function of the parsed
:class:`argparse.Namespace` returning the exit code. A ``ValueError`` or ``FileNotFoundError`` raised by
``run`` is printed as ``ensemble-env NAME: error: ...`` (exit code 2). The module is imported on every call
of ``ensemble-env``, ``--help`` included: keep optional dependencies out of its imports (import them inside
``run``).

The entry points are loaded in the order of their names (then of their values), so the commands appear in a
stable order, after ``demo``, ``baselines`` and ``play``. A plugin that fails to load or to register, or that
redefines an existing command, is skipped whole (the parsers it added are removed) with one
``ensemble-env: warning: ...`` line on stderr naming it and the error; every other command works as usual.

Conventions every command follows (and plugins should)
-------------------------------------------------------

- ``ensemble-env --version`` prints the installed version; every command and option has a help text.
- **Lists**: an option that takes several names (``--tasks``, ``--models``, ``--only``, ...) is a
  :class:`ListOption`: ``--tasks a,b``, ``--tasks a b`` and ``--tasks a --tasks b`` all mean ``[a, b]``. The
  space-separated form takes every word up to the next option, so put it after the positional arguments
  (or end it with ``--``).
- **Tables**: a command that prints a table has ``--json``, printing the same numbers as one JSON object on
  stdout (notes go to stderr then); tables show names in full and give every number of a column the same
  number of decimals.
- **Closed pipes**: when the reader of stdout goes away (``ensemble-env baselines | head -3``) the command
  stops quietly with exit status 141 (128 + SIGPIPE, what a shell reports for ``seq 1 100000 | head -1``), no
  traceback.
- **Waits**: a step that takes seconds says what it is doing on stderr (:func:`status`, when stderr is a
  terminal) or draws a progress bar; the one-time compile of the kernels says so itself
  (:mod:`ensemble_env.jit`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import Any, TextIO

import numpy as np

from ensemble_env import baselines, datasets
from ensemble_env.cache import SPLIT_CHOICES, SPLITS, LogitCache
from ensemble_env.env import parallel_env, resolve_cache
from ensemble_env.policies import MeanVote

__all__ = [
    "CLOSED_PIPE_STATUS",
    "COMMAND_GROUP",
    "ListOption",
    "build_parser",
    "counted",
    "main",
    "status",
    "version_text",
]

#: the entry-point group of the commands that packages add to ``ensemble-env`` (see the module docstring)
COMMAND_GROUP = "ensemble_env.commands"
#: the exit status after the reader of stdout went away: 128 + SIGPIPE, as a shell reports for ``seq ... | head``
CLOSED_PIPE_STATUS = 141


class ListOption(argparse.Action):
    """An option taking a list: ``--tasks a,b``, ``--tasks a b`` and ``--tasks a --tasks b`` all give ``[a, b]``.

    Items are stripped and empty ones dropped; an option given with no item at all (``--tasks ,``) is an error.
    The default must be None (the option absent). Values stay strings: the command converts and checks them,
    so that its errors name the option.

    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--tasks", action=ListOption)
    >>> parser.parse_args(["--tasks", "a,b", "c", "--tasks", "d"]).tasks
    ['a', 'b', 'c', 'd']
    >>> parser.parse_args([]).tasks is None
    True
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        if kwargs.get("default") is not None:
            raise ValueError(f"ListOption {dest}: the default must be None")
        kwargs.setdefault("nargs", "+")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        words = [values] if isinstance(values, str) else list(values or [])
        items = [item.strip() for word in words for item in str(word).split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentError(self, "expected at least one name (comma- or space-separated)")
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *items])


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class _OpenLine:
    """Stands for stderr while a :func:`status` line is open: the first other text written (the first-run
    compile message, a warning, a progress bar) ends the line first, so that it starts a line of its own."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.open = stream, True

    def write(self, text: str) -> int:
        if self.open and text:
            self.stream.write("\n")
            self.open = False
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def status(message: str, stream: TextIO | None = None, *, enabled: bool | None = None) -> Iterator[None]:
    """Say on stderr what a wait of seconds is for: ``ensemble-env: MESSAGE... done (8.1 s)``.

    ``enabled=None`` writes only when stderr is a terminal (so pipes, logs and ``--json`` stay clean, like
    the progress bars). The line is ended even when the work fails. When the work writes to stderr meanwhile
    (``sys.stderr``, e.g. the first-run compile message), that text gets lines of its own and the message is
    said again when done: ``ensemble-env: MESSAGE... done (8.1 s)`` on a line of its own.
    """
    stream = sys.stderr if stream is None else stream
    if not (_stderr_is_terminal() if enabled is None else enabled):
        yield
        return
    start = time.perf_counter()
    stream.write(f"ensemble-env: {message}... ")
    stream.flush()
    guard = _OpenLine(stream)
    swap = stream is sys.stderr
    if swap:
        sys.stderr = guard  # type: ignore[assignment]
    try:
        yield
    except BaseException:
        stream.write("\n" if guard.open else "")
        raise
    finally:
        if swap:
            sys.stderr = stream
    done = f"done ({time.perf_counter() - start:.1f} s)\n"
    stream.write(done if guard.open else f"ensemble-env: {message}... {done}")
    stream.flush()


def counted(number: int, noun: str) -> str:
    """``number noun`` with the plural ``s`` when needed.

    >>> counted(1, "model"), counted(5, "model")
    ('1 model', '5 models')
    """
    return f"{number} {noun}" + ("" if number == 1 else "s")


def version_text() -> str:
    """``ensemble-env X.Y.Z`` of the installed distribution (the package's ``__version__`` when not installed)."""
    try:
        number = version("ensemble-env")
    except PackageNotFoundError:  # run from a source tree without installing
        from ensemble_env import __version__ as number
    return f"ensemble-env {number}"


def _cache_label(cache_arg: str | None) -> str:
    """How a command names its cache: the default's name, or the name or path as given."""
    return f"{datasets.DEFAULT} (the default cache)" if cache_arg is None else cache_arg


def _describe_cache(cache: LogitCache, cache_arg: str | None) -> str:
    return (
        f"{_cache_label(cache_arg)}: {cache.n_questions} questions, {counted(cache.n_models, 'model')} "
        f"({', '.join(cache.models)}), {counted(cache.n_tasks, 'task')} ({', '.join(cache.task_names)})"
    )


def _require_split(cache: LogitCache, cache_arg: str | None, split: str, option: str) -> None:
    """Refuse a split with no question, saying how to give the cache one (``cache split``)."""
    if split == "all" or (cache.split == SPLITS[split]).any():
        return
    name = datasets.DEFAULT if cache_arg is None else cache_arg
    raise ValueError(
        f"{name} has no {split} question ({option} {split}): write a copy with a train/validation/test split, e.g. "
        f"ensemble-env cache split {name} -o split.h5 --test-fraction 0.2 --validation-fraction 0.2, "
        f"or choose another {option}"
    )


def _demo(args: argparse.Namespace) -> int:
    cache = resolve_cache(args.cache)
    _require_split(cache, args.cache, args.split, "--split")
    show = print if not args.json else (lambda *_args, **_kwargs: None)
    show(_describe_cache(cache, args.cache))
    env = parallel_env(cache, render_mode="ansi", split=args.split, order="shuffled", window=args.window)
    obs, _ = env.reset(seed=args.seed)
    rng = np.random.default_rng(args.seed)
    fuse = MeanVote.from_env(env)
    team_size = min(args.team_size, cache.n_models)
    show(
        f"\nAn episode on the {args.split} split: the decider commits a random team of {team_size} "
        f"(a stand-in for a learned decider), the fusion agent takes the team's mean-probability vote.\n"
    )
    show(env.render())
    steps = 0
    total_reward, team_sizes = 0.0, []
    while env.agents:
        team = np.zeros(cache.n_models, dtype=np.int8)
        team[rng.choice(cache.n_models, size=team_size, replace=False)] = 1
        actions = {"decider": team, "fusion": int(fuse(obs["fusion"])[0])}
        obs, rewards, _, _, infos = env.step(actions)
        total_reward += rewards["fusion"]
        team_sizes.append(infos["fusion"]["team_size"])
        steps += 1
        if steps == 1 or args.show_from < steps <= args.show_from + args.show:
            show(env.render())
        elif steps == 2:
            show("  ...")
    accuracy = infos["fusion"]["accuracy"]
    show(
        f"  ... {steps} steps in all: accuracy {accuracy:.3f}, mean team size {np.mean(team_sizes):.2f}, "
        f"return {total_reward:.1f}\n"
    )
    results = baselines.run_all(cache, split=args.split, k=team_size, seed=args.seed)
    if args.json:
        episode = {
            "split": args.split,
            "seed": args.seed,
            "team_size": team_size,
            "steps": steps,
            "accuracy": float(accuracy),
            "mean_team_size": float(np.mean(team_sizes)),
            "return": float(total_reward),
        }
        from ensemble_env.comparison import scores

        summary = {"cache": _cache_label(args.cache), "episode": episode, "baselines": scores(cache, results)}
        print(json.dumps(summary, indent=2))
        return 0
    print(f"Baselines (fitted on train, scored on {args.split}):")
    print(baselines.format_table(cache, results))
    return 0


def _baselines(args: argparse.Namespace) -> int:
    from ensemble_env import comparison, routing

    alphas: tuple[float, ...] = comparison.DEFAULT_ALPHAS
    if args.alphas is not None:
        try:
            alphas = tuple(baselines.check_alpha(float(value)) for value in args.alphas)
        except ValueError:
            given = ",".join(args.alphas)
            raise ValueError(f"--alphas {given!r}: give numbers >= 0, e.g. 0,0.5,1") from None
    cache = datasets.resolve(args.cache)
    _require_split(cache, args.cache, args.split, "--split")
    _require_split(cache, args.cache, args.train_split, "--train-split")
    if cache.n_models == 1:
        print(f"note: {_cache_label(args.cache)} holds one model: every baseline is that model", file=sys.stderr)
    names = args.only
    reward = baselines.RewardSettings(args.alpha, args.size_penalty_mode, args.use_costs)
    k = min(3, cache.n_models) if args.k is None else args.k  # the default fits pools of fewer than 3 models
    common = {"split": args.split, "train_split": args.train_split, "k": k, "seed": args.seed, "names": names}
    with status(f"fitting the baselines on {args.train_split} and scoring them on {args.split}"):
        routers = comparison.fit_routers(cache, split=args.split, train_split=args.train_split, names=names)
        results = comparison.compare(cache, reward=reward, **common, routers=routers)
    notes = sys.stderr if args.json else sys.stdout
    label = _cache_label(args.cache)
    if args.json:
        print(json.dumps(comparison.scores(cache, results, reward), indent=2))
    else:
        counts = {name: int((cache.split == code).sum()) for name, code in SPLITS.items()}
        splits = ", ".join(f"{count} {name}" for name, count in counts.items() if count)
        print(
            f"{label}: {cache.n_questions} questions ({splits}), {counted(cache.n_models, 'model')}, "
            f"{counted(cache.n_tasks, 'task')}\n"
            f"models: {', '.join(cache.models)}"
        )
        print(
            f"Baselines fitted on {args.train_split}, scored on {args.split}; reward: the environment's at "
            f"alpha={args.alpha:g} ({args.size_penalty_mode}{', cost shares' if args.use_costs else ''})\n"
        )
        print(baselines.format_table(cache, results, reward))
    if names is None and cache.n_models > routing.MAX_TEAM_MODELS:
        print(
            f"not run: static_team, static_team_acc and router enumerate every team, at most "
            f"{routing.MAX_TEAM_MODELS} models (this cache has {cache.n_models})",
            file=notes,
        )
    if args.frontier is not None:
        with status(f"sweeping alpha over {len(alphas)} values for the frontier"):
            points = comparison.frontier(cache, alphas, reward=reward, **common, routers=routers)
        title = f"{os.path.basename(label)}: accuracy on {args.split} against team size (numbers: alpha)"
        path = comparison.plot_frontier(points, args.frontier, x="cost" if args.use_costs else "team_size", title=title)
        if not args.json:
            print(f"\nCost-accuracy frontier (alpha swept over {', '.join(f'{a:g}' for a in alphas)}):")
            print(comparison.format_frontier(points, baselines.cost_format(cache)))
        print(f"frontier plot written to {path}", file=notes)
    return 0


def _add_plugin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Let every entry point of :data:`COMMAND_GROUP` add its commands; skip and report the broken ones."""
    for plugin in sorted(entry_points(group=COMMAND_GROUP), key=lambda point: (point.name, point.value)):
        before, listed = dict(commands.choices), len(commands._choices_actions)
        try:
            plugin.load()(commands)
            _check_kept(commands.choices, before)
        except Exception as error:
            commands.choices.clear()
            commands.choices.update(before)
            del commands._choices_actions[listed:]
            print(
                f"ensemble-env: warning: skipped the commands of {plugin.name} = {plugin.value!r} "
                f"({COMMAND_GROUP} entry point): {type(error).__name__}: {error}",
                file=sys.stderr,
            )


def _check_kept(parsers: dict[str, argparse.ArgumentParser], before: dict[str, argparse.ArgumentParser]) -> None:
    """Refuse a plugin that redefined a command (Python 3.10's argparse lets it replace one silently)."""
    redefined = [name for name, parser in before.items() if parsers.get(name) is not parser]
    if redefined:
        raise ValueError(f"conflicting command: {', '.join(redefined)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ensemble-env",
        description="Learn to route and fuse LLM ensembles with multi-agent RL (RL-Focal as a PettingZoo env). "
        "List options take comma- or space-separated names (--tasks a,b or --tasks a b); commands that print "
        "a table take --json.",
    )
    parser.add_argument("--version", action="version", version=version_text(), help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    builtins = f"{', '.join(datasets.available())}; default: {datasets.DEFAULT}"
    splits = ", ".join(SPLIT_CHOICES)

    demo = commands.add_parser(
        "demo",
        help="play one episode with a rendered excerpt, then show the baselines",
        description="Play one episode of the game on the questions of --split: the decider commits a random "
        "team of --team-size models (a stand-in for a learned decider), the fusion agent answers with the team's "
        "mean-probability vote. Prints the first step and a few later ones as the environment renders them, "
        "the episode's accuracy, mean team size and return, then the baselines table (fitted on train). "
        "Needs no torch. The first run compiles the environment's kernels (about 20 s, said on stderr).",
    )
    demo.add_argument("--cache", default=None, help=f"logit cache file or built-in name ({builtins})")
    demo.add_argument(
        "--split", default="test", choices=SPLIT_CHOICES, help=f"the questions of the episode: {splits} (default test)"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the episode and of the random teams (default 0)")
    demo.add_argument("--window", type=int, default=500, help="window T of the decider's statistics (default 500)")
    demo.add_argument("--team-size", type=int, default=3, help="size of the demo decider's random teams (default 3)")
    demo.add_argument("--show", type=int, default=3, help="how many steps to render after --show-from (default 3)")
    demo.add_argument(
        "--show-from", type=int, default=200, help="render the steps after this many, and step 0 (default 200)"
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="print {cache, episode: {steps, accuracy, mean_team_size, return, ...}, baselines: {name: scores}} "
        "instead of the excerpt and the table",
    )
    demo.set_defaults(run=_demo)

    table = commands.add_parser(
        "baselines",
        help="baselines of a cache: fitted on train, scored on test on accuracy, reward, team size and cost",
        description="Every baseline (best single, static team per task, per-question router, stacking, votes, "
        "oracle, ...) fitted on train and scored on test: macro accuracy, the environment's mean reward at "
        "--alpha, mean team size and mean cost. See docs/baselines.md. Takes about 10 s on bbh5 (the router "
        "fits a logistic model per team).",
    )
    table.add_argument("cache", nargs="?", default=None, help=f"logit cache file or built-in name ({builtins})")
    table.add_argument(
        "--split", default="test", choices=SPLIT_CHOICES, help=f"the questions scored: {splits} (default test)"
    )
    table.add_argument(
        "--train-split",
        default="train",
        choices=SPLIT_CHOICES,
        help="the questions the baselines are fitted on (default train; settings are tuned on validation)",
    )
    table.add_argument("--alpha", type=float, default=1.0, help="size penalty of the reward (default 1.0)")
    table.add_argument(
        "--size-penalty-mode",
        default="on_error",
        choices=("on_error", "always"),
        help="on_error (default, the paper): the size penalty applies to wrong answers only; always: to every answer",
    )
    table.add_argument("--use-costs", action="store_true", help="penalise the team's share of the cache's costs")
    table.add_argument(
        "-k", type=int, default=None, help="team size of the random and greedy-focal teams (default 3, at most N)"
    )
    table.add_argument("--seed", type=int, default=0, help="seed of the random team (default 0)")
    table.add_argument(
        "--only", action=ListOption, metavar="NAME", help="run only these baselines (comma- or space-separated)"
    )
    table.add_argument(
        "--json",
        action="store_true",
        help="print {name: {accuracy, reward, team_size, cost, tasks}} instead of the tables (notes go to stderr)",
    )
    table.add_argument(
        "--frontier",
        metavar="OUT",
        help="also sweep alpha and plot accuracy against mean team size: OUT.png, or a folder for frontier.png",
    )
    table.add_argument(
        "--alphas",
        action=ListOption,
        metavar="A",
        help="the alphas --frontier sweeps, comma- or space-separated (default 0,0.25,...,16)",
    )
    table.set_defaults(run=_baselines)

    from ensemble_env import play

    play.configure(
        commands.add_parser(
            "play",
            help="play the game by hand in the terminal: you are the fusion agent or the decider",
            description="Play a few questions of the game as the fusion agent (--role fusion) or the decider "
            "(--role decider), seeing what that agent observes; a scripted partner plays the other role.",
        )
    )

    _add_plugin_commands(commands)
    return parser


def _stdout_closed() -> int:
    """The reader of stdout went away: stop quietly (see the module docstring)."""
    try:  # Python flushes stdout again at exit: send what is left to /dev/null, not to the closed pipe
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (e.g. captured): nothing to redirect
        pass
    return CLOSED_PIPE_STATUS


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ensemble-env`` with ``argv`` (default: the command line); returns the exit status."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        try:
            return int(args.run(args))
        except (ValueError, FileNotFoundError) as error:
            print(f"ensemble-env {args.command}: error: {error}", file=sys.stderr)
            return 2
    except BrokenPipeError:
        return _stdout_closed()


if __name__ == "__main__":
    raise SystemExit(main())
