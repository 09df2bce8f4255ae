"""Docs that cannot drift: the defaults tables of docs/mappo.md and docs/rlae.md are the configs' own, and every
command's ``--help`` renders.

``python tests/test_docs_tables.py --write`` regenerates the tables from the config classes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ensemble_env.cli import main
from ensemble_env.cli.parser import build_parser
from ensemble_mappo.algorithms import get
from ensemble_mappo.config import defaults_table

ROOT = Path(__file__).resolve().parents[1]
#: the tables: file, algorithm (the config class and fixed fields of its registry entry)
TABLES = {"docs/mappo.md": "mappo", "docs/rlae.md": "rlae_ppo"}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- defaults:{name} -->\n)(.*?)(<!-- /defaults:{name} -->)", re.DOTALL)


def _table(algorithm: str) -> str:
    entry = get(algorithm)
    return defaults_table(entry.config_class, dict(entry.fixed))


@pytest.mark.parametrize(("path", "algorithm"), sorted(TABLES.items()))
def test_the_defaults_tables_are_the_configs(path: str, algorithm: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    match = _block(algorithm).search(text)
    assert match, f"{path} lacks the <!-- defaults:{algorithm} --> block"
    assert match.group(2) == _table(algorithm), f"{path}: regenerate with python tests/test_docs_tables.py --write"


def _commands() -> list[list[str]]:
    parser = build_parser()
    found: list[list[str]] = [[]]

    def walk(node, prefix: list[str]) -> None:
        for action in node._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(parser, [])
    return found


@pytest.mark.parametrize("command", _commands(), ids=lambda words: " ".join(words) or "ensemble-env")
def test_every_command_renders_its_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and len(out) > 100


def test_train_help_shows_each_algorithms_own_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "mappo, ippo: default 160; rlae_ppo, rlae_mappo: default 80" in text  # --passes
    assert "rlae_ppo, rlae_mappo only; default: 5" in text  # --initial-concentration


if __name__ == "__main__":
    if "--write" in sys.argv:
        for path, algorithm in TABLES.items():
            file = ROOT / path
            text = file.read_text(encoding="utf-8")
            table = _table(algorithm)
            text = _block(algorithm).sub(lambda m, table=table: m.group(1) + table + m.group(3), text)
            file.write_text(text, encoding="utf-8")
            print(f"wrote the {algorithm} table of {path}")
