"""Tests of the ``ensemble-env`` command plumbing: commands come from the ``ensemble_env.commands`` entry points.

Torch-free on purpose: the reference learner's commands must register, and say which extra to install,
on a machine without torch.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pytest

from ensemble_env import cli

#: the commands of a plain install, in the order ``ensemble-env --help`` lists them
COMMANDS = ["cache", "demo", "baselines", "train", "evaluate", "plot", "benchmark", "play"]
#: the README's CPU install (PyTorch's CPU index), not a pinned wheel that exists only on the project's machines
HINT = 'pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e ".[mappo]"'


def _command_names(parser: argparse.ArgumentParser) -> list[str]:
    (commands,) = (action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return list(commands.choices)


def _fake_plugin(name: str, function: str) -> EntryPoint:
    return EntryPoint(name=name, value=f"{__name__}:{function}", group=cli.COMMAND_GROUP)


def register_hello(commands: Any) -> None:
    commands.add_parser("hello", help="a third-party command").set_defaults(run=lambda args: 7)


def register_then_fail(commands: Any) -> None:
    commands.add_parser("half-done").set_defaults(run=lambda args: 0)
    raise RuntimeError("the plugin broke halfway")


def register_demo_again(commands: Any) -> None:
    commands.add_parser("demo").set_defaults(run=lambda args: 1)


def test_the_package_declares_its_command_groups_as_entry_points() -> None:
    declared = {(point.name, point.value) for point in entry_points(group=cli.COMMAND_GROUP)}
    assert {
        ("cache", "ensemble_env.cli.cache:register"),
        ("demo", "ensemble_env.cli.demo:register"),
        ("play", "ensemble_env.cli.play:register"),
        ("mappo", "ensemble_mappo.cli:register"),
    } <= declared


def test_help_lists_every_command_in_a_stable_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert _command_names(cli.build_parser())[: len(COMMANDS)] == COMMANDS
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    out, err = capsys.readouterr()
    assert stop.value.code == 0 and err == ""
    assert all(f"    {name} " in out or f"    {name}\n" in out for name in COMMANDS)


def test_a_broken_plugin_is_reported_and_the_other_commands_still_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = [
        _fake_plugin("zzz-hello", "register_hello"),
        _fake_plugin("half", "register_then_fail"),
        _fake_plugin("shadow", "register_demo_again"),
        EntryPoint(name="aaa-missing", value="no_such_module_of_ensemble_env:register", group=cli.COMMAND_GROUP),
        *entry_points(group=cli.COMMAND_GROUP),
    ]
    monkeypatch.setattr(cli.parser, "entry_points", lambda group: [point for point in plugins if point.group == group])
    parser = cli.build_parser()
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 3
    assert all(line.startswith("ensemble-env: warning: skipped the commands of") for line in warnings)
    # sorted by entry-point name, whatever order the metadata gives
    assert "aaa-missing" in warnings[0] and "ModuleNotFoundError" in warnings[0]
    assert "half" in warnings[1] and "the plugin broke halfway" in warnings[1]
    assert "shadow" in warnings[2] and "conflicting" in warnings[2]
    assert _command_names(parser) == [*COMMANDS, "hello"]  # nothing of the broken ones is left
    assert parser.parse_args(["demo"]).run is cli.demo._demo  # the core's demo, not the shadow's
    assert "half-done" not in parser.format_help()
    assert cli.main(["hello"]) == 7


def test_mappo_commands_register_without_torch_and_name_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    for name in [name for name in sys.modules if name == "ensemble_mappo" or name.startswith("ensemble_mappo.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, without torch
    assert _command_names(cli.build_parser())[: len(COMMANDS)] == COMMANDS
    assert capsys.readouterr().err == ""
    assert cli.main(["train", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ensemble-env train: error: train needs torch, which is not installed") and HINT in err
    assert not (tmp_path / "run").exists()
    assert cli.main(["evaluate", str(tmp_path)]) == 2
    assert HINT in capsys.readouterr().err


def test_the_install_hint_is_the_readme_cpu_install() -> None:
    from ensemble_mappo.cli import INSTALL_HINT

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    torch_step = HINT.split(" && ")[0]
    assert HINT in INSTALL_HINT and "torch==" not in INSTALL_HINT  # works on any machine, not only CI's wheel
    assert f"`{torch_step}`" in readme  # the README's CPU-only line (in the virtualenv command 1 activates)
