"""The ``ensemble-env`` command line.

Commands:

- ``ensemble-env demo``: one episode of the game on a cache (the embedded default by default) with a
  rendered excerpt, a summary, and the baselines every comparison shows.
- ``ensemble-env baselines CACHE``: the baselines table of a cache (fitted on train, scored on test).
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
stable order, after ``demo`` and ``baselines``. A plugin that fails to load or to register, or that
redefines an existing command, is skipped whole (the parsers it added are removed) with one
``ensemble-env: warning: ...`` line on stderr naming it and the error; every other command works as usual.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

import numpy as np

from ensemble_env import baselines
from ensemble_env.cache import LogitCache
from ensemble_env.env import parallel_env, resolve_cache
from ensemble_env.policies import MeanVote

__all__ = ["COMMAND_GROUP", "build_parser", "main"]

#: the entry-point group of the commands that packages add to ``ensemble-env`` (see the module docstring)
COMMAND_GROUP = "ensemble_env.commands"


def _describe_cache(cache: LogitCache, cache_arg: str | None) -> str:
    where = "embedded default cache" if cache_arg is None else cache.path
    return (
        f"{where}: {cache.n_questions} questions, {cache.n_models} models ({', '.join(cache.models)}), "
        f"{cache.n_tasks} tasks ({', '.join(cache.task_names)})"
    )


def _demo(args: argparse.Namespace) -> int:
    cache = resolve_cache(args.cache)
    print(_describe_cache(cache, args.cache))
    env = parallel_env(cache, render_mode="ansi", split=args.split, order="shuffled", window=args.window)
    obs, _ = env.reset(seed=args.seed)
    rng = np.random.default_rng(args.seed)
    fuse = MeanVote.from_env(env)
    team_size = min(args.team_size, cache.n_models)
    print(
        f"\nAn episode on the {args.split} split: the decider commits a random team of {team_size} "
        f"(a stand-in for a learned decider), the fusion agent takes the team's mean-probability vote.\n"
    )
    print(env.render())
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
            print(env.render())
        elif steps == 2:
            print("  ...")
    accuracy = infos["fusion"]["accuracy"]
    print(
        f"  ... {steps} steps in all: accuracy {accuracy:.3f}, mean team size {np.mean(team_sizes):.2f}, "
        f"return {total_reward:.1f}\n"
    )
    print(f"Baselines (fitted on train, scored on {args.split}):")
    print(baselines.format_table(cache, baselines.run_all(cache, split=args.split, k=team_size, seed=args.seed)))
    return 0


def _baselines(args: argparse.Namespace) -> int:
    import json
    import os

    from ensemble_env import comparison, datasets, routing
    from ensemble_env.cache import SPLITS

    alphas: tuple[float, ...] = comparison.DEFAULT_ALPHAS
    if args.alphas is not None:
        try:
            alphas = tuple(baselines.check_alpha(float(value)) for value in args.alphas.split(","))
        except ValueError:
            raise ValueError(f"--alphas {args.alphas!r}: give comma-separated numbers >= 0, e.g. 0,0.5,1") from None
    cache = datasets.resolve(args.cache)
    names = None if args.only is None else [name.strip() for name in args.only.split(",") if name.strip()]
    reward = baselines.RewardSettings(args.alpha, args.size_penalty_mode, args.use_costs)
    common = {"split": args.split, "train_split": args.train_split, "k": args.k, "seed": args.seed, "names": names}
    routers = comparison.fit_routers(cache, split=args.split, train_split=args.train_split, names=names)
    results = comparison.compare(cache, reward=reward, **common, routers=routers)
    notes = sys.stderr if args.json else sys.stdout
    label = args.cache if args.cache is not None else f"{datasets.DEFAULT} (the default cache)"
    if args.json:
        print(json.dumps(comparison.scores(cache, results, reward), indent=2))
    else:
        counts = {name: int((cache.split == code).sum()) for name, code in SPLITS.items()}
        splits = ", ".join(f"{count} {name}" for name, count in counts.items() if count)
        print(
            f"{label}: {cache.n_questions} questions ({splits}), {cache.n_models} models, {cache.n_tasks} tasks\n"
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
        description="Learn to route and fuse LLM ensembles with multi-agent RL (RL-Focal as a PettingZoo env).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="play one episode with a rendered excerpt, then show the baselines")
    demo.add_argument("--cache", default=None, help="logit cache file (default: the embedded cache)")
    demo.add_argument("--split", default="test", choices=("train", "test", "validation", "all"))
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--window", type=int, default=500, help="window T of the decider's statistics")
    demo.add_argument("--team-size", type=int, default=3, help="size of the demo decider's random teams")
    demo.add_argument("--show", type=int, default=3, help="how many steps to render after --show-from")
    demo.add_argument("--show-from", type=int, default=200, help="render the steps after this many (and step 0)")
    demo.set_defaults(run=_demo)

    table = commands.add_parser(
        "baselines",
        help="baselines of a cache: fitted on train, scored on test on accuracy, reward, team size and cost",
        description="Every baseline (best single, static team per task, per-question router, stacking, votes, "
        "oracle, ...) fitted on train and scored on test: macro accuracy, the environment's mean reward at "
        "--alpha, mean team size and mean cost. See docs/baselines.md.",
    )
    from ensemble_env import datasets

    table.add_argument(
        "cache",
        nargs="?",
        default=None,
        help=f"logit cache file or built-in name ({', '.join(datasets.available())}; default: {datasets.DEFAULT})",
    )
    table.add_argument("--split", default="test", choices=("train", "test", "validation", "all"))
    table.add_argument("--train-split", default="train", choices=("train", "test", "validation", "all"))
    table.add_argument("--alpha", type=float, default=1.0, help="size penalty of the reward (default 1.0)")
    table.add_argument("--size-penalty-mode", default="on_error", choices=("on_error", "always"))
    table.add_argument("--use-costs", action="store_true", help="penalise the team's share of the cache's costs")
    table.add_argument("-k", type=int, default=3, help="team size of the random and greedy-focal teams")
    table.add_argument("--seed", type=int, default=0)
    table.add_argument("--only", metavar="NAME,...", help="run only these baselines (comma-separated names)")
    table.add_argument("--json", action="store_true", help="print {name: {accuracy, reward, team_size, cost, tasks}}")
    table.add_argument(
        "--frontier",
        metavar="OUT",
        help="also sweep alpha and plot accuracy against mean team size: OUT.png, or a folder for frontier.png",
    )
    table.add_argument("--alphas", metavar="A,...", help="the alphas --frontier sweeps (default 0,0.25,...,16)")
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (ValueError, FileNotFoundError) as error:
        print(f"ensemble-env {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
