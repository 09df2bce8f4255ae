"""The interactive mode (ensemble_env.views.play): what each role is shown, how input is read, the summary."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

import ensemble_env
from ensemble_env import cli
from ensemble_env.cache import LogitCache
from ensemble_env.views.play import parse_team, play


def episode_questions(cache: LogitCache, questions: int, seed: int, split: str = "all") -> np.ndarray:
    """The questions ``play`` asks: the same environment options, the same seed."""
    env = ensemble_env.parallel_env(cache, split=split, order="shuffled", window=50, episode_length=questions)
    env.reset(seed=seed)
    return env.engine.episode_questions()


def test_fusion_role_scores_the_typed_answers(tiny_cache: LogitCache) -> None:
    out = io.StringIO()
    result = play("fusion", cache=tiny_cache, split="all", questions=4, seed=2, inputs=["0"] * 4, out=out, team="1")
    questions = episode_questions(tiny_cache, 4, seed=2)
    labels = tiny_cache.labels[questions]
    assert result.answered == 4 and not result.quit_early
    assert result.right == int(np.sum(labels == 0))
    assert result.mean_team_size == 1.0
    # the scripted fusion agent: the vote of {m1}; the oracle: m1 right (m1 is wrong on 1, 3, 4: the pool is not)
    votes = [int(np.argmax(tiny_cache.probs[q, 1, : tiny_cache.n_choices[q]])) for q in questions]
    assert result.scripted_right == int(np.sum(np.array(votes) == labels))
    assert result.oracle_right == int(tiny_cache.correct[questions, 1].sum()) < 4
    text = out.getvalue()
    assert text.count("your answer (0-") == 4 and "-> answer 0 is" in text
    # the table shows the observation: each member's probability of each choice, m2 is not in the team
    first = questions[0]
    row = next(line for line in text.splitlines() if line.startswith("  1 m1"))
    assert row.split()[2:] == [f"{p:.2f}" for p in tiny_cache.probs[first, 1, : tiny_cache.n_choices[first]]]
    assert "  0 m0" not in text and "  2 m2" not in text


def test_bad_input_reprompts_help_explains_and_the_end_of_input_stops(tiny_cache: LogitCache) -> None:
    out = io.StringIO()
    result = play("fusion", cache=tiny_cache, split="all", questions=5, seed=0, inputs=["9", "x", "?", "1"], out=out)
    text = out.getvalue()
    assert "not a valid choice: '9'" in text and "not a valid choice: 'x'" in text
    assert "type the index of an answer choice" in text
    assert result.answered == 1 and result.quit_early
    assert "You answered 1 question(s)" in text
    quit_now = play("fusion", cache=tiny_cache, split="all", questions=5, inputs=["q"], out=io.StringIO())
    assert quit_now.answered == 0 and quit_now.quit_early


def test_decider_role_the_typed_team_answers_the_next_question(tiny_cache: LogitCache) -> None:
    out = io.StringIO()
    result = play(
        "decider", cache=tiny_cache, split="all", questions=3, seed=1, inputs=["2", "", "m0 m1"], out=out, echo=True
    )
    text = out.getvalue()
    teams = [line for line in text.splitlines() if line.startswith("the fusion agent now answers")]
    assert teams[0].endswith("{0 m0, 1 m1, 2 m2},")  # E_0: every model
    assert teams[1].endswith("{2 m2},") and teams[2].endswith("{2 m2},")  # typed, then kept with Enter
    assert result.answered == 3 and result.mean_team_size == pytest.approx((3 + 1 + 1) / 3)
    assert "this is the last question" in text
    assert "Enter keeps it): m0 m1\n" in text  # echoed after the prompt: the output is a transcript
    assert "window stats     focal_diversity" in text


def test_decider_role_shows_the_extras_it_observes(tiny_cache: LogitCache) -> None:
    out = io.StringIO()
    play("decider", cache=tiny_cache, split="all", questions=2, seed=1, extras=("task",), inputs=["all"], out=out)
    questions = episode_questions(tiny_cache, 2, seed=1)
    next_task = tiny_cache.task_names[tiny_cache.tasks[questions[1]]]  # the task of q_{t+1}, not of q_t
    assert f"next task        {next_task}  (of the question the team you commit now will answer)" in out.getvalue()


def test_parse_team(tiny_cache: LogitCache) -> None:
    assert parse_team("all", tiny_cache).tolist() == [1, 1, 1]
    assert parse_team("0, m2", tiny_cache).tolist() == [1, 0, 1]
    for bad in ("", "3", "m9", "-1"):
        with pytest.raises(ValueError):
            parse_team(bad, tiny_cache)


def test_wrong_arguments_are_errors(tiny_cache: LogitCache) -> None:
    with pytest.raises(ValueError, match="role='referee'"):
        play("referee", cache=tiny_cache, inputs=[])
    with pytest.raises(ValueError, match="questions must be"):
        play("fusion", cache=tiny_cache, questions=0, inputs=[])


def test_command_line_and_module(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n0\n"))
    assert cli.main(["play", "--cache", "toy8", "--questions", "2", "--team", "0,4"]) == 0
    text = capsys.readouterr().out
    assert "You are the fusion agent; the decider commits the team {0 logreg, 4 forest}" in text
    assert "You answered 2 question(s)" in text
    monkeypatch.setattr(sys, "stdin", io.StringIO("all\n"))  # the list options take spaces as well as commas
    assert (
        cli.main(
            ["play", "--cache", "toy8", "--questions", "1", "--role", "decider", "--extras", "task", "model_accuracy"]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "next task" in text and "model accuracy" in text
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n"))
    assert cli.main(["play", "--cache", "toy8", "--questions", "1", "--team", "logreg", "4"]) == 0
    assert "the decider commits the team {0 logreg, 4 forest}" in capsys.readouterr().out
    result = subprocess.run(
        [sys.executable, "-m", "ensemble_env.cli.play", "--role", "decider", "--cache", "toy8", "--questions", "1"],
        input="all\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert "team for the NEXT question" in result.stdout and "You answered 1 question(s)" in result.stdout
