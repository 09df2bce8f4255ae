"""How ``ensemble-env`` behaves in a shell: ``--version``, help everywhere, one list syntax, ``--json``, quiet
closed pipes, tables that keep names whole, and waits that say what they are for (the first-run compile)."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import numba
import numpy as np
import pytest
from testing.tables import decimals_per_column, table_rows

from ensemble_env import cli, datasets
from ensemble_env.cache import LogitCache, save_cache
from ensemble_env.game import jit

PYTHON_CLI = [sys.executable, "-m", "ensemble_env.cli"]
#: options that are repeatable but not lists of names: (command, dest) -> why
NOT_LISTS = {("ensemble-env train", "env"): "KEY=VALUE pairs, whose JSON values hold commas"}


def _parsers(
    parser: argparse.ArgumentParser, path: str = "ensemble-env"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (command path, parser) of ``ensemble-env`` (built-in and plugin commands), the top level included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def long_names_cache() -> LogitCache:
    """Two tasks and two models with long names; 12 questions, half of them test."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 12)
    scores = rng.normal(size=(12, 2, 3))
    scores[np.arange(12), 0, labels] += 2.0
    return LogitCache(
        scores=scores,
        labels=labels,
        models=("an-organisation__a-model-with-a-very-long-name-v0.1", "short"),
        score_kind="logit",
        tasks=np.repeat([0, 1], 6),
        task_names=("tracking_shuffled_objects_seven_objects_and_more", "b"),
        split=np.tile([0, 0, 0, 1, 1, 1], 2),
    )


# -- version and help ----------------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"ensemble-env {version('ensemble-env')}\n"


def test_every_command_and_option_has_a_description_and_help() -> None:
    missing = []
    paths = set()
    for path, parser in _parsers(cli.build_parser()):
        paths.add(path)
        if not parser.description:
            missing.append(f"{path}: no description")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {a.dest}: no help" for a in action._choices_actions if not a.help]
            elif not action.help or action.help.lstrip().startswith("(default"):  # a default is not a help
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}: no help")
    assert missing == []
    assert {"ensemble-env train", "ensemble-env evaluate", "ensemble-env plot", "ensemble-env play"} <= paths


# -- one list syntax -----------------------------------------------------------------------------------------

LIST_OPTIONS = [
    (["baselines"], "--only", "only"),
    (["baselines"], "--alphas", "alphas"),
    (["cache", "from-lm-eval", "runs/", "-o", "x.h5"], "--tasks", "tasks"),
    (["cache", "from-arrays", "s.npz", "-o", "x.h5", "--score-kind", "prob"], "--models", "models"),
    (["train", "--out", "runs/x"], "--tasks", "tasks"),
    (["play"], "--team", "team"),
    (["play", "--role", "decider"], "--extras", "extras"),
]


@pytest.mark.parametrize(("prefix", "option", "dest"), LIST_OPTIONS)
@pytest.mark.parametrize("form", ["commas", "spaces", "repeated", "mixed"])
def test_list_options_take_commas_spaces_and_repeats(prefix: list[str], option: str, dest: str, form: str) -> None:
    given = {
        "commas": [option, "a,b,c"],
        "spaces": [option, "a", "b", "c"],
        "repeated": [option, "a", option, "b", option, "c"],
        "mixed": [option, "a, b", option, "c,"],
    }[form]
    args = cli.build_parser().parse_args([*prefix, *given])
    assert getattr(args, dest) == ["a", "b", "c"]
    assert getattr(cli.build_parser().parse_args(prefix), dest) is None


def test_every_list_option_of_every_command_follows_the_rule() -> None:
    """An option taking several values (nargs, repeated, or 'comma-separated' in its help) is a ListOption."""
    lists, breaking = set(), set()
    for path, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            takes_several = action.option_strings and (
                action.nargs in ("+", "*")
                or isinstance(action, argparse._AppendAction)
                or "comma-separated" in (action.help or "")
            )
            if isinstance(action, cli.options.ListOption):
                lists.add((path, action.dest))
            elif takes_several and (path, action.dest) not in NOT_LISTS:
                breaking.add((path, action.dest))
    assert not breaking
    assert {
        ("ensemble-env baselines", "only"),
        ("ensemble-env train", "tasks"),
        ("ensemble-env play", "team"),
        ("ensemble-env benchmark", "algorithms"),
        ("ensemble-env benchmark", "cache"),
    } <= lists


def test_an_empty_list_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["baselines", "--only", ","])
    assert stop.value.code == 2
    assert "argument --only: expected at least one name" in capsys.readouterr().err
    with pytest.raises(ValueError, match="default must be None"):
        argparse.ArgumentParser().add_argument("--x", action=cli.options.ListOption, default=["a"])


def test_bad_alphas_in_any_list_form_name_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = save_cache(tmp_path / "c.h5", long_names_cache())
    code, _, err = _run(capsys, "baselines", str(cache), "--frontier", str(tmp_path / "f.png"), "--alphas", "0", "x")
    assert code == 2 and "--alphas '0,x': give numbers >= 0" in err


# -- --json on the commands that print tables -----------------------------------------------------------------


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "demo", "--cache", "toy8", "--json", "--team-size", "2")
    assert code == 0
    data = json.loads(out)
    cache = datasets.load("toy8")
    assert data["cache"] == "toy8"
    assert data["episode"]["steps"] == int((cache.split == 1).sum()) and data["episode"]["team_size"] == 2
    steps = data["episode"]["steps"]  # the first question is answered by E_0, all 8 models; then teams of 2
    assert data["episode"]["mean_team_size"] == pytest.approx(2 + 6 / steps) and 0 <= data["episode"]["accuracy"] <= 1
    assert {"best_single", "oracle", "mean_probability_vote"} <= set(data["baselines"])
    assert set(data["baselines"]["oracle"]) == {"accuracy", "reward", "team_size", "cost", "tasks"}


def test_demo_text_names_the_default_cache(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "demo", "--show", "0")
    assert code == 0 and out.startswith(f"{datasets.DEFAULT} (the default cache): 4000 questions, 5 models")


def test_tables_number_the_baselines_they_show_b1_b2_and_so_on(capsys: pytest.CaptureFixture[str]) -> None:
    """Every table numbers the baselines it shows without gaps, in its own order (and ``evaluate``'s, with the policy
    under its name: tests/learner/test_mappo_cli.py), and the per-task table's columns are those ids."""
    from ensemble_env.baselines import comparison

    def ids(text: str) -> list[tuple[str, str]]:
        return re.findall(r"^(b\d+) (\S+)", text, flags=re.MULTILINE)

    code, demo, _ = _run(capsys, "demo", "--cache", "toy8", "--show", "0")
    assert code == 0
    code, table, _ = _run(capsys, "baselines", "toy8", "--only", "static_team,mean_probability_vote,oracle,stacking")
    assert code == 0
    for text in (demo, table):
        numbers = [number for number, _ in ids(text)]
        assert numbers == [f"b{n}" for n in range(1, len(numbers) + 1)] and len(numbers) >= 4, text
        header = next(line for line in text.splitlines() if line.startswith("task "))
        assert header.split()[1:] == numbers  # the per-task columns
    assert ids(table) == [
        ("b1", "static_team"),
        ("b2", "stacking(per_task)"),
        ("b3", "mean_probability_vote"),
        ("b4", "oracle"),
    ]
    assert comparison.is_baseline("random_team(k=2)") and comparison.is_baseline("stacking")
    assert not comparison.is_baseline("mappo")


def test_table_commands_have_json() -> None:
    parser = cli.build_parser()
    for argv in (["demo"], ["baselines"], ["cache", "info", "toy8"]):
        assert parser.parse_args([*argv, "--json"]).json is True


# -- tables --------------------------------------------------------------------------------------------------


def test_tables_keep_names_whole_and_give_a_column_one_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = save_cache(tmp_path / "long.h5", long_names_cache())
    code, info, _ = _run(capsys, "cache", "info", str(path))
    assert code == 0
    assert "m0 an-organisation__a-model-with-a-very-long-name-v0.1 (accuracy" in info
    rows = table_rows(info, "task ")
    assert [row[0] for row in rows[:2]] == ["tracking_shuffled_objects_seven_objects_and_more", "b"]
    assert all(len(found) == 1 for found in decimals_per_column(rows).values())
    code, table, _ = _run(capsys, "baselines", str(path), "--only", "best_single,mean_probability_vote,oracle")
    assert code == 0 and "models: an-organisation__a-model-with-a-very-long-name-v0.1, short" in table
    per_task = table_rows(table, "task ")
    assert [row[0] for row in per_task] == ["tracking_shuffled_objects_seven_objects_and_more", "b"]
    assert all(len(found) == 1 for found in decimals_per_column(table_rows(table, "baseline ")).values())


# -- closed pipes --------------------------------------------------------------------------------------------


def _with_stdout_closed(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the CLI with the reading end of its stdout closed before it writes anything."""
    process = subprocess.Popen([*PYTHON_CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(argv, process.returncode, "", err)


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["--help"], 0),  # argparse itself ignores a failed write of the help
        (["cache", "info", "toy8"], cli.options.CLOSED_PIPE_STATUS),
        (["baselines", "toy8", "--only", "best_single"], cli.options.CLOSED_PIPE_STATUS),
        pytest.param(["demo", "--cache", "toy8"], cli.options.CLOSED_PIPE_STATUS, marks=pytest.mark.slow),
    ],
    ids=["help", "cache-info", "baselines", "demo"],
)
def test_a_closed_pipe_ends_quietly(argv: list[str], status: int) -> None:
    done = _with_stdout_closed(argv)
    assert done.returncode == status
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_head_reads_the_first_lines_without_a_traceback() -> None:
    command = " ".join(PYTHON_CLI) + " cache info toy8 | head -3"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 3
    assert "Traceback" not in done.stderr, done.stderr


# -- waits that say what they are for ------------------------------------------------------------------------


def test_status_says_what_a_wait_is_for_and_ends_its_line() -> None:
    """On a terminal: one line, left open while the work runs, ended by ``done (N s)``."""
    stream = io.StringIO()
    with cli.options.status("fitting", stream, inline=True):
        pass
    assert re.fullmatch(r"ensemble-env: fitting\.\.\. done \(\d+\.\d s\)\n", stream.getvalue())
    quiet = io.StringIO()
    with cli.options.status("fitting", quiet, enabled=False):
        pass
    assert quiet.getvalue() == ""
    failed = io.StringIO()
    with pytest.raises(KeyError), cli.options.status("fitting", failed, inline=True):
        raise KeyError("x")
    assert failed.getvalue() == "ensemble-env: fitting... \n"


def test_status_off_a_terminal_writes_whole_lines_when_the_wait_starts_and_ends() -> None:
    """A pipe or a log (a StringIO is no terminal): two whole lines, no open line, no carriage return."""
    stream = io.StringIO()
    with cli.options.status("fitting", stream):
        assert stream.getvalue() == "ensemble-env: fitting...\n"  # said before the work, not after it
    assert re.fullmatch(r"ensemble-env: fitting\.\.\.\nensemble-env: fitting: done \(\d+\.\d s\)\n", stream.getvalue())
    failed = io.StringIO()
    with pytest.raises(KeyError), cli.options.status("fitting", failed):
        raise KeyError("x")
    assert failed.getvalue() == "ensemble-env: fitting...\n"  # the error follows on a line of its own
    assert "\r" not in stream.getvalue() + failed.getvalue()


def test_text_written_during_a_status_line_gets_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first-run compile message inside ``evaluate``'s wait: not glued to the open status line."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with cli.options.status("playing the test split", inline=True):
        print("ensemble-env: compiling the environment's kernels...", file=sys.stderr)
    assert sys.stderr is err
    lines = err.getvalue().splitlines()
    assert lines[:2] == [
        "ensemble-env: playing the test split... ",
        "ensemble-env: compiling the environment's kernels...",
    ]
    assert re.fullmatch(r"ensemble-env: playing the test split\.\.\. done \(\d+\.\d s\)", lines[2]) and len(lines) == 3


def test_baselines_say_what_they_fit_on_and_off_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(save_cache(tmp_path / "long.h5", long_names_cache()))
    code, out, err = _run(capsys, "baselines", path, "--only", "best_single", "--json")
    assert code == 0 and list(json.loads(out)) == ["best_single"]  # stdout: the JSON alone
    fitting = "ensemble-env: fitting the baselines on train and scoring them on test"
    assert err.splitlines()[0] == f"{fitting}..."  # stderr is not a terminal here: whole lines
    assert re.fullmatch(rf"{fitting}: done \(\d+\.\d s\)", err.splitlines()[1]), err
    monkeypatch.setattr(cli.options, "_is_terminal", lambda stream: True)
    code, out, err = _run(capsys, "baselines", path, "--only", "best_single", "--json")
    assert code == 0 and list(json.loads(out)) == ["best_single"]
    assert re.search(rf"{fitting}\.\.\. done \(", err)


@pytest.fixture
def fresh_numba_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty numba disk cache for kernels defined from now on, and the compile message not yet printed."""
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(jit, "_announced", False)
    return tmp_path


def _add_one_kernel() -> object:
    @jit.kernel()
    def add_one(x: float) -> float:
        return x + 1

    return add_one


def test_the_first_compile_says_so_once_and_a_cached_kernel_is_silent(
    fresh_numba_cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    add_one = _add_one_kernel()
    assert add_one(1) == 2  # type: ignore[operator]
    err = capsys.readouterr().err
    assert err.count("compiling the environment's kernels") == 1 and str(fresh_numba_cache) in err
    assert add_one(1.5) == 2.5  # type: ignore[operator]  # a second compile in the process: said once only
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(jit, "_announced", False)  # as in a new process
    assert _add_one_kernel()(2) == 3  # type: ignore[operator]  # found in the disk cache: no compile, no message
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(jit, "_announced", False)  # a new process compiling a kernel the first one did not

    @jit.kernel()
    def times_two(x: float) -> float:
        return 2 * x

    assert times_two(2) == 4  # compiled, silently: the message was printed once on this disk cache
    assert capsys.readouterr().err == ""
    assert len(list(fresh_numba_cache.rglob("ensemble-env-compiled-*.txt"))) == 1


# test_demo_with_an_empty_numba_cache_says_it_compiles_once: in tests/game/test_jit.py, sharing its compile


# -- converted caches a newcomer makes (issue 14) -------------------------------------------------------------


def _one_model_npz(path: Path) -> Path:
    rng = np.random.default_rng(0)
    np.savez(path, scores=rng.normal(size=(10, 1, 3)), labels=rng.integers(0, 3, 10), models=np.array(["solo"]))
    return path


def test_a_pool_of_one_model_is_called_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    npz = _one_model_npz(tmp_path / "solo.npz")
    code, out, err = _run(
        capsys, "cache", "from-arrays", str(npz), "--score-kind", "logit", "-o", str(tmp_path / "s.h5")
    )
    assert code == 0 and "split 8 train, 2 test, 0 validation" in out  # a test split by default
    assert "warning: " in err and "holds one model (solo): there is no team to choose" in err
    code, out, _ = _run(capsys, "cache", "info", str(tmp_path / "s.h5"))
    assert code == 0 and "note: one model: there is no team to choose and no answers to fuse" in out
    code, out, err = _run(capsys, "baselines", str(tmp_path / "s.h5"))  # -k defaults to the pool's size
    assert code == 0 and "random_team(k=1)" in out and "holds one model: every baseline is that model" in err
    two = tmp_path / "two.npz"
    np.savez(two, scores=np.zeros((10, 2, 3)), labels=np.zeros(10, dtype=int), models=np.array(["a", "b"]))
    code, _, err = _run(capsys, "cache", "from-arrays", str(two), "--score-kind", "logit", "-o", str(tmp_path / "t.h5"))
    assert code == 0 and "warning" not in err


def test_a_cache_without_a_test_split_gets_the_command_that_makes_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npz = _one_model_npz(tmp_path / "solo.npz")
    out_h5 = str(tmp_path / "train_only.h5")
    code, _, _ = _run(
        capsys, "cache", "from-arrays", str(npz), "--score-kind", "logit", "-o", out_h5, "--test-fraction", "0"
    )
    assert code == 0
    hint = f"ensemble-env cache split {out_h5} -o split.h5 --test-fraction 0.2"
    for command in (["baselines", out_h5], ["demo", "--cache", out_h5]):
        code, _, err = _run(capsys, *command)
        assert code == 2 and f"{out_h5} has no test question (--split test)" in err and hint in err
    code, _, err = _run(capsys, "baselines", out_h5, "--split", "train", "--train-split", "validation")
    assert code == 2 and "has no validation question (--train-split validation)" in err
