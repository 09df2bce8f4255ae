"""Play the ensemble game by hand in a terminal: you are the fusion agent or the decider.

``ensemble-env play`` (or ``python -m ensemble_env.cli.play``) plays a short episode of the game with you in
one role and a scripted partner in the other, and shows you exactly what your agent observes, decoded by
the observation layout:

- ``--role fusion`` (default): the decider commits a fixed team (``--team``, default every model); you see
  each member's probability of each answer choice (and, as a hint computed from the same numbers, the
  team's mean vote), the valid choices and your recent rewards; you type the index of your answer.
- ``--role decider``: the fusion agent takes the team's mean-probability vote; you see your committed team,
  its statistics over the window of answered questions (and the extras you turn on with ``--extras``); you
  type the team for the *next* question: the question being answered now already has its team.

The question's text is not in either observation; ``--show-text`` prints it anyway (marked as such), to
see how far the numbers alone get you. Type ``?`` for help and ``q`` (or end the input) to stop early. When
the input is not a terminal (a pipe, a file) each line read is echoed, so the output is a transcript::

    printf '0\\n1\\n1\\n' | ensemble-env play --questions 3 --seed 1

At the end you get your accuracy and return beside what a scripted agent would have scored on the same
questions with the same teams. :func:`play` is the same game as a function (the lessons of
``docs/tutorials`` call it with their answers as a list).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from ensemble_env.cache import datasets
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.views.parallel import EnsembleParallelEnv, parallel_env
from ensemble_env.views.policies import FixedTeam, MeanVote
from ensemble_env.views.render import question_excerpt

__all__ = ["ROLES", "PlayResult", "parse_team", "play"]

#: the roles you can take
ROLES = ("fusion", "decider")
_QUIT = ("q", "quit", "exit")


@dataclass(frozen=True)
class PlayResult:
    """What happened in a game played by hand."""

    role: str
    answered: int
    right: int
    episode_return: float
    mean_team_size: float
    scripted_right: int
    """Questions the scripted agent in your role would have got right on the same questions: the team's mean
    vote (role fusion, with the same teams) or the full pool's mean vote (role decider)."""
    oracle_right: int
    """Questions on which some member of the team that answered was right (role fusion) or some model of
    the pool was right (role decider): what an agent that knew the labels would reach."""
    quit_early: bool

    @property
    def accuracy(self) -> float:
        return self.right / self.answered if self.answered else 0.0


def parse_team(text: str, cache: LogitCache) -> np.ndarray:
    """A team from ``"all"``, or comma- or space-separated model indices or names; ValueError otherwise."""
    words = text.replace(",", " ").split()
    if not words:
        raise ValueError("no model given")
    team = np.zeros(cache.n_models, dtype=np.int8)
    if [word.lower() for word in words] == ["all"]:
        team[:] = 1
        return team
    for word in words:
        if word.isdigit() and int(word) < cache.n_models:
            team[int(word)] = 1
        elif word in cache.models:
            team[cache.models.index(word)] = 1
        else:
            raise ValueError(f"unknown model {word!r}: give indices 0-{cache.n_models - 1} or full model names")
    return team


class _Terminal:
    """Reads answers from lines (a terminal, a pipe or a list) and writes the game's text."""

    def __init__(self, lines: Iterable[str] | None, out: TextIO, echo: bool) -> None:
        self._lines: Iterator[str] | None = None if lines is None else iter(lines)
        self.out, self.echo = out, echo

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def ask(self, prompt: str) -> str | None:
        """The next line of input (stripped), or None at the end of the input."""
        print(prompt, end="", file=self.out, flush=True)
        try:
            line = input() if self._lines is None else next(self._lines)
        except (EOFError, StopIteration):
            print(file=self.out)
            return None
        line = line.strip()
        if self.echo:
            print(line, file=self.out)
        return line


def _names(cache: LogitCache, team: np.ndarray) -> str:
    members = np.flatnonzero(team)
    return "{" + ", ".join(f"{i} {cache.models[i]}" for i in members) + "}" if members.size else "{} (empty)"


def _describe_decider_obs(env: EnsembleParallelEnv, obs: np.ndarray) -> list[str]:
    """The decider's observation, part by part, as its layout names them."""
    engine, cache = env.engine, env.cache
    lines = []
    for name, part in engine.layout.decider.items():
        values = obs[part]
        if name == "team_mask":
            lines.append(f"  team mask        {_names(cache, values > 0.5)}  (the team answering now)")
        elif name == "team_size":
            lines.append(f"  team size / N    {values[0]:.2f}")
        elif name == "statistics":
            stats = "  ".join(f"{stat} {value:.3f}" for stat, value in zip(engine.statistic_names, values, strict=True))
            window = engine.window_contents(0).size
            lines.append(f"  window stats     {stats}  (of that team, over the {window} questions answered so far)")
        elif name == "model_accuracy":
            accs = "  ".join(f"{i}:{value:.2f}" for i, value in enumerate(values))
            lines.append(f"  model accuracy   {accs}  (each model over the window)")
        elif name == "task":
            task = cache.task_names[int(np.argmax(values))] if values.any() else "(none: the stream is over)"
            lines.append(f"  next task        {task}  (of the question the team you commit now will answer)")
        else:
            lines.append(f"  {name:<16} {values.size} numbers (not shown)")
    return lines


def _describe_fusion_obs(env: EnsembleParallelEnv, obs: np.ndarray) -> list[str]:
    """The fusion agent's observation: the team's probabilities as a table, then the rest."""
    engine, cache = env.engine, env.cache
    layout, n, c = engine.layout.fusion, engine.n_models, engine.max_choices
    probs = obs[layout["probs"]].reshape(n, c)
    valid = np.flatnonzero(obs[layout["action_mask"]] > 0.5)
    members = np.flatnonzero(obs[layout["team_mask"]] > 0.5)
    width = max([len(cache.models[i]) for i in members] + [len("(mean vote)")]) + 4
    lines = ["  " + " " * width + "".join(f"{choice:>6d}" for choice in valid)]
    for i in members:
        lines.append(f"  {i} {cache.models[i]:<{width - 2}}" + "".join(f"{probs[i, choice]:6.2f}" for choice in valid))
    if members.size:
        mean = probs[members].mean(axis=0)
        lines.append(f"  {'(mean vote)':<{width}}" + "".join(f"{mean[choice]:6.2f}" for choice in valid))
    else:
        lines.append("  (the team is empty: no model speaks; any answer is marked wrong)")
    rewards = " ".join(f"{value:+.2f}" for value in obs[layout["rewards"]])
    lines.append(f"  your last rewards (oldest first): {rewards}")
    if "task" in layout:
        lines.append(f"  task             {cache.task_names[int(np.argmax(obs[layout['task']]))]}")
    return lines


def _help(role: str, cache: LogitCache) -> str:
    models = "  ".join(f"{i} {name}" for i, name in enumerate(cache.models))
    if role == "fusion":
        return "type the index of an answer choice (the column numbers); q quits"
    return (
        f"type the next team as model indices or names (e.g. 0,2 or all); Enter keeps it; q quits\n  models: {models}"
    )


def play(
    role: str = "fusion",
    *,
    cache: LogitCache | str | None = None,
    questions: int = 5,
    split: str = "test",
    seed: int = 0,
    team: str = "all",
    extras: Sequence[str] = (),
    show_text: bool = False,
    alpha: float = 1.0,
    inputs: Iterable[str] | None = None,
    out: TextIO | None = None,
    echo: bool = False,
) -> PlayResult:
    """Play ``questions`` questions (a contiguous run from a seeded random start of the shuffled ``split``).

    ``inputs``: the lines you would type (None: read the terminal). ``team``: the scripted decider's team
    when you play fusion (``"all"`` or indices/names). ``extras``: ``decider_extras`` of the environment
    (``"model_accuracy"``, ``"task"``) when you play the decider. Returns a :class:`PlayResult`.
    """
    if role not in ROLES:
        raise ValueError(f"role={role!r} is not one of {', '.join(map(repr, ROLES))}")
    if isinstance(questions, bool) or not isinstance(questions, int) or questions < 1:
        raise ValueError(f"questions must be an integer >= 1, got {questions!r}")
    loaded = datasets.resolve(cache)
    fixed = parse_team(team, loaded)
    options: dict[str, Any] = {"split": split, "order": "shuffled", "alpha": alpha, "window": 50}
    options["episode_length"] = min(questions, loaded.select(split=split).size)
    if role == "decider":
        options["decider_extras"] = tuple(extras)
    else:
        options["initial_team"] = [int(i) for i in np.flatnonzero(fixed)]
    env = parallel_env(loaded, **options)
    where = cache if isinstance(cache, str) else datasets.DEFAULT if cache is None else loaded.path
    term = _Terminal(inputs, sys.stdout if out is None else out, echo)
    obs, infos = env.reset(seed=seed)
    fuse, decide = MeanVote.from_env(env), FixedTeam(fixed, env.config.decider_action)
    n_models = loaded.n_models
    you = "the fusion agent" if role == "fusion" else "the decider"
    partner = (
        f"the decider commits the team {_names(loaded, fixed)} every time"
        if role == "fusion"
        else "the fusion agent answers with the mean-probability vote of the team you give it"
    )
    term.say(f"You are {you}; {partner}. {env.engine.episode_length} question(s) from the {split} split of {where}.")
    term.say(f"Reward: +1 if right, else -1 - alpha x team size / {n_models} (alpha = {alpha:g}). ? help, q quit.")
    right = scripted = oracle = answered = 0
    sizes: list[int] = []
    quit_early = False
    while env.agents:
        step = answered + 1
        question = int(env.engine.next_questions()[0])
        used_team = env.engine.team[0]
        term.say()
        term.say(f"-- question {step}/{env.engine.episode_length}")
        if show_text:
            excerpt = question_excerpt(loaded, question, width=300)
            if excerpt is not None:
                term.say(f"  (text, which no agent sees) {excerpt}")
        if role == "fusion":
            term.say("what you observe: the probabilities your team gives each valid choice")
            for text in _describe_fusion_obs(env, obs["fusion"]):
                term.say(text)
            valid = np.flatnonzero(infos["fusion"]["action_mask"])
            action: Any = None
            while action is None:
                line = term.ask(f"your answer ({valid[0]}-{valid[-1]}): ")
                if line is None or line.lower() in _QUIT:
                    quit_early = True
                    break
                if line in ("?", "help"):
                    term.say(_help(role, loaded))
                elif line.isdigit() and int(line) in valid:
                    action = int(line)
                else:
                    term.say(f"  not a valid choice: {line!r}; type one of {', '.join(map(str, valid))}")
            if quit_early:
                break
            actions = {"decider": decide(obs["decider"])[0], "fusion": action}
        else:
            term.say(f"the fusion agent now answers this question with the team {_names(loaded, used_team)},")
            term.say("which you committed one step ago. What you observe:")
            if step == env.engine.episode_length:
                term.say("  (this is the last question: the team you commit now answers none of this game's questions)")
            for text in _describe_decider_obs(env, obs["decider"]):
                term.say(text)
            choice: np.ndarray | None = None
            while choice is None:
                line = term.ask("team for the NEXT question (e.g. 0,2 or all; Enter keeps it): ")
                if line is None or line.lower() in _QUIT:
                    quit_early = True
                    break
                if line in ("?", "help"):
                    term.say(_help(role, loaded))
                elif line == "":
                    choice = used_team.astype(np.int8)
                else:
                    try:
                        choice = parse_team(line, loaded)
                    except ValueError as error:
                        term.say(f"  {error}; {_help(role, loaded)}")
            if quit_early:
                break
            actions = {"decider": choice, "fusion": int(fuse(obs["fusion"])[0])}
        mean_answer = int(fuse(obs["fusion"])[0])
        full_answer = int(np.argmax(np.where(infos["fusion"]["action_mask"] > 0, loaded.probs[question].sum(0), -1)))
        obs, rewards, _, _, infos = env.step(actions)
        info = infos["fusion"]
        answered += 1
        right += int(info["correct"])
        sizes.append(int(info["team_size"]))
        label = int(info["label"])
        if role == "fusion":
            scripted += int(mean_answer == label)
            oracle += int(loaded.correct[question][used_team].any())
        else:
            scripted += int(full_answer == label)
            oracle += int(loaded.correct[question].any())
        verdict = "right" if info["correct"] else "wrong"
        term.say(
            f"  -> answer {int(info['answer'])} is {verdict} (gold {label}); reward {rewards['fusion']:+.2f}; "
            f"running accuracy {info['accuracy']:.3f}; members who were right: "
            f"{_names(loaded, loaded.correct[question] & used_team)}"
        )
    result = PlayResult(
        role=role,
        answered=answered,
        right=right,
        episode_return=float(info["episode_return"]) if answered else 0.0,
        mean_team_size=float(np.mean(sizes)) if sizes else 0.0,
        scripted_right=scripted,
        oracle_right=oracle,
        quit_early=quit_early,
    )
    term.say()
    if answered:
        scripted_name = "the team's mean vote" if role == "fusion" else "every model with the mean vote"
        oracle_name = "someone in the team was right" if role == "fusion" else "someone in the pool was right"
        term.say(
            f"You answered {answered} question(s): {right} right, return {result.episode_return:+.2f}, mean team "
            f"size {result.mean_team_size:.1f}. On the same questions {scripted_name} got {scripted} right; "
            f"{oracle_name} on {oracle} (the oracle, which needs the labels)."
        )
    else:
        term.say("No question answered.")
    return result
