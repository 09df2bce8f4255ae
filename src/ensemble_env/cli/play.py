"""The ``play`` command: a person plays one role of the game in the terminal (:mod:`ensemble_env.views.play`).

``python -m ensemble_env.cli.play`` runs it on its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ensemble_env.cache import datasets
from ensemble_env.cache.logit_cache import SPLIT_CHOICES
from ensemble_env.cli.options import ListOption
from ensemble_env.errors import command
from ensemble_env.views import play as play_module
from ensemble_env.views.play import ROLES, play

__all__ = ["configure", "main", "register", "run"]


def register(commands: Any) -> None:
    """Add ``play`` to the sub-parsers of ``ensemble-env`` (an ``ensemble_env.commands`` entry point)."""
    configure(
        commands.add_parser(
            "play",
            help="play the game by hand in the terminal: you are the fusion agent or the decider",
            description="Play a few questions of the game as the fusion agent (--role fusion) or the decider "
            "(--role decider), seeing what that agent observes; a scripted partner plays the other role.",
        )
    )


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options of ``play`` to ``parser`` and set it to run :func:`run` (for ``ensemble-env play``)."""
    parser.add_argument("--role", default="fusion", choices=ROLES, help="the agent you play (default: fusion)")
    parser.add_argument(
        "--cache",
        default=None,
        help=f"logit cache file or built-in name ({', '.join(datasets.available())}; default: {datasets.DEFAULT})",
    )
    parser.add_argument("--questions", type=int, default=5, help="how many questions to play (default 5)")
    parser.add_argument(
        "--split",
        default="test",
        choices=SPLIT_CHOICES,
        help=f"the questions played: {', '.join(SPLIT_CHOICES)} (default test)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the episode's random start (default 0)")
    parser.add_argument(
        "--team",
        action=ListOption,
        metavar="MODEL",
        help="role fusion: the decider's team, model indices or names, e.g. 0,2 or 0 2 (default: all)",
    )
    parser.add_argument(
        "--extras",
        action=ListOption,
        metavar="NAME",
        help="role decider: decider_extras to observe, comma- or space-separated (model_accuracy, task)",
    )
    parser.add_argument("--alpha", type=float, default=1.0, help="size penalty of the reward (default 1.0)")
    parser.add_argument("--show-text", action="store_true", help="also print the question text (no agent sees it)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    play(
        args.role,
        cache=args.cache,
        questions=args.questions,
        split=args.split,
        seed=args.seed,
        team=" ".join(args.team) if args.team else "all",
        extras=tuple(args.extras or ()),
        show_text=args.show_text,
        alpha=args.alpha,
        echo=not sys.stdin.isatty(),
    )
    return 0


PROG = "python -m ensemble_env.cli.play"


@command(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ensemble_env.cli.play``: the ``play`` command on its own (errors as ``ensemble-env``'s)."""
    parser = configure(argparse.ArgumentParser(prog=PROG, description=play_module.__doc__.split("\n\n")[0]))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
