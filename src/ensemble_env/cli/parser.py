"""The ``ensemble-env`` command line.

Commands:

- ``ensemble-env demo``: one episode of the game on a cache (the built-in default, ``bbh5``, unless
  ``--cache``) with a rendered excerpt, a summary, and the baselines every comparison shows.
- ``ensemble-env baselines [CACHE]``: the baselines table of a cache (fitted on train, scored on test).
- ``ensemble-env play``: play the game by hand (:mod:`ensemble_env.views.play`).
- ``ensemble-env cache ...``: build, check, summarise, re-split and plot logit caches (:mod:`ensemble_env.cli.cache`).
- the commands of installed packages, e.g. ``train``, ``evaluate`` and ``plot`` of the reference MAPPO
  learner that ships beside this package (the ``mappo`` extra).

Adding commands: the ``ensemble_env.commands`` entry-point group
-----------------------------------------------------------------

Every command comes from an entry point of the group ``ensemble_env.commands`` (:data:`COMMAND_GROUP`): this
package's own groups (``cache``, ``demo`` with ``baselines``, ``play``: :mod:`ensemble_env.cli.cache`,
:mod:`ensemble_env.cli.demo`, :mod:`ensemble_env.cli.play`), the reference learner's (``mappo``) and any
other package's, all the same way. A package adds commands by declaring one in its pyproject.toml::

    [project.entry-points."ensemble_env.commands"]
    mytool = "my_package.cli:register"

``register(commands)`` receives the argparse sub-parsers object of ``ensemble-env``. It adds its parsers
with ``commands.add_parser(NAME, help=...)`` and sets ``run`` on each parser a command line ends in
(``parser.set_defaults(run=function)``; a group of sub-commands sets it on those): a function of the parsed
:class:`argparse.Namespace` returning the exit code. A ``ValueError``, an ``OSError`` (a missing or unreadable
file, a full or read-only disk) or an ``ImportError`` raised by ``run`` is printed as one line,
``ensemble-env NAME: error: ...`` (exit code 2), by :func:`~ensemble_env.cli.options.run_command`, the error
handler every command of the project shares (the ``python -m`` entry points and the repository's scripts too).
The module is imported on every call of ``ensemble-env``, ``--help`` included: keep optional dependencies out of
its imports (import them inside ``run``).

The entry points are loaded in the order of their names (then of their values), so the commands appear in a
stable order. A plugin that fails to load or to register, or that
redefines an existing command, is skipped whole (the parsers it added are removed) with one
``ensemble-env: warning: ...`` line on stderr naming it and the error; every other command works as usual.

Conventions every command follows (and plugins should)
-------------------------------------------------------

- ``ensemble-env --version`` prints the installed version; every command and option has a help text.
- **Lists**: an option that takes several names (``--tasks``, ``--models``, ``--only``, ...) is a
  :class:`~ensemble_env.cli.options.ListOption`: ``--tasks a,b``, ``--tasks a b`` and ``--tasks a --tasks b`` all mean
  ``[a, b]``. The space-separated form takes every word up to the next option, so put it after the positional arguments
  (or end it with ``--``).
- **Tables**: a command that prints a table has ``--json``, printing the same numbers as one JSON object on
  stdout (notes go to stderr then); tables show names in full and give every number of a column the same
  number of decimals.
- **Closed pipes**: when the reader of stdout goes away (``ensemble-env baselines | head -3``) the command
  stops quietly with exit status 141 (128 + SIGPIPE, what a shell reports for ``seq 1 100000 | head -1``), no
  traceback.
- **Waits**: a step that takes seconds says what it is doing on stderr (:func:`~ensemble_env.cli.options.status`:
  one line on a terminal, ``ensemble-env: MESSAGE... done (8.1 s)``; elsewhere, a pipe or a log, a whole line when
  it starts and one when it ends) or draws a progress bar; the one-time compile of the kernels says so itself
  (:mod:`ensemble_env.game.jit`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from ensemble_env.cli.options import version_text
from ensemble_env.errors import run_command

__all__ = ["COMMAND_GROUP", "build_parser", "main"]

#: the entry-point group of the commands that packages add to ``ensemble-env`` (see the module docstring)
COMMAND_GROUP = "ensemble_env.commands"


def _add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Let every entry point of :data:`COMMAND_GROUP` (this package's own groups too) add its commands; skip and
    report the broken ones."""
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
    _add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ensemble-env`` with ``argv`` (default: the command line); returns the exit status. Errors go through the
    one error handler, :func:`~ensemble_env.cli.options.run_command`: ``ensemble-env COMMAND: error: ...``."""
    args: argparse.Namespace | None = None

    def run() -> int:
        nonlocal args
        args = build_parser().parse_args(argv)
        return int(args.run(args))

    return run_command(lambda: "ensemble-env" if args is None else f"ensemble-env {args.command}", run)


if __name__ == "__main__":
    raise SystemExit(main())
