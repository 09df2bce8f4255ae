"""The ``demo`` and ``baselines`` commands: an episode of the game with the baselines, and the baselines table
of a cache (with its cost-accuracy frontier)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.baselines import comparison, frontier, frontier_plot, routing, simple
from ensemble_env.cache import datasets
from ensemble_env.cache.logit_cache import SPLIT_CHOICES, SPLITS
from ensemble_env.cli.options import ListOption, cache_label, counted, describe_cache, require_split, status
from ensemble_env.game.reward import RewardSettings, check_alpha
from ensemble_env.views.parallel import parallel_env
from ensemble_env.views.policies import MeanVote

__all__ = ["register"]


def _demo(args: argparse.Namespace) -> int:
    cache = datasets.resolve(args.cache)
    require_split(cache, args.cache, args.split, "--split")
    show = print if not args.json else (lambda *_args, **_kwargs: None)
    show(describe_cache(cache, args.cache))
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
    names = comparison.evaluate_baselines(cache)  # those `evaluate` lists
    with status(f"fitting the baselines on train and scoring them on {args.split}"):
        results = comparison.compare(cache, split=args.split, k=team_size, seed=args.seed, names=names)
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
        summary = {"cache": cache_label(args.cache), "episode": episode, "baselines": comparison.scores(cache, results)}
        print(json.dumps(summary, indent=2))
        return 0
    print(f"Baselines (fitted on train, scored on {args.split}):")
    print(comparison.format_table(cache, results))
    return 0


def _baselines(args: argparse.Namespace) -> int:
    if args.frontier is not None and not extras.require("baselines", "plot", option="--frontier"):
        return extras.EXIT_STATUS
    alphas: tuple[float, ...] = frontier.DEFAULT_ALPHAS
    if args.alphas is not None:
        try:
            alphas = tuple(check_alpha(float(value)) for value in args.alphas)
        except ValueError:
            given = ",".join(args.alphas)
            raise ValueError(f"--alphas {given!r}: give numbers >= 0, e.g. 0,0.5,1") from None
    cache = datasets.resolve(args.cache)
    require_split(cache, args.cache, args.split, "--split")
    require_split(cache, args.cache, args.train_split, "--train-split")
    if cache.n_models == 1:
        print(f"note: {cache_label(args.cache)} holds one model: every baseline is that model", file=sys.stderr)
    names = None if args.only is None else comparison.baseline_names(cache, args.only)  # checked before the work
    reward = RewardSettings(args.alpha, args.size_penalty_mode, args.use_costs)
    k = min(3, cache.n_models) if args.k is None else args.k  # the default fits pools of fewer than 3 models
    common = {"split": args.split, "train_split": args.train_split, "k": k, "seed": args.seed, "names": names}
    with status(f"fitting the baselines on {args.train_split} and scoring them on {args.split}"):
        routers = comparison.fit_routers(cache, split=args.split, train_split=args.train_split, names=names)
        results = comparison.compare(cache, reward=reward, **common, routers=routers)
    notes = sys.stderr if args.json else sys.stdout
    label = cache_label(args.cache)
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
        print(comparison.format_table(cache, results, reward))
    if names is None and cache.n_models > routing.MAX_TEAM_MODELS:
        print(
            f"not run: static_team, static_team_acc and router enumerate every team, at most "
            f"{routing.MAX_TEAM_MODELS} models (this cache has {cache.n_models})",
            file=notes,
        )
    if args.frontier is not None:
        bar = sys.stderr.isatty()  # a bar redraws its line: on a terminal only (elsewhere the status lines say it)
        with status(f"sweeping alpha over {len(alphas)} values for the frontier"):
            points = frontier.frontier(cache, alphas, reward=reward, **common, routers=routers, progress=bar)
        against = "cost" if args.use_costs else "team size" + (" and cost" if cache.costs is not None else "")
        title = f"{os.path.basename(label)}: accuracy on {args.split} against {against} (numbers: alpha)"
        path = frontier_plot.plot_frontier(
            points,
            args.frontier,
            x="cost" if args.use_costs else "auto",
            title=title,
            cost_unit=datasets.cost_unit(cache),
        )
        if not args.json:
            print(f"\nCost-accuracy frontier (alpha swept over {', '.join(f'{a:g}' for a in alphas)}):")
            print(frontier.format_frontier(points, simple.cost_format(cache)))
            print(simple.cost_note(cache))
        print(f"frontier plot written to {path}", file=notes)
    return 0


def register(commands: Any) -> None:
    """Add ``demo`` and ``baselines`` to the sub-parsers of ``ensemble-env`` (an ``ensemble_env.commands`` entry
    point)."""
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
        help="also sweep alpha and plot accuracy against mean team size: OUT.png, or a folder for frontier.png "
        "(needs matplotlib: the plot extra)",
    )
    table.add_argument(
        "--alphas",
        action=ListOption,
        metavar="A",
        help="the alphas --frontier sweeps, comma- or space-separated (default 0,0.25,...,16)",
    )
    table.set_defaults(run=_baselines)
