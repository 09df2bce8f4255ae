"""What every adapter example prints: a greedy test episode's figures and teams, next to the fixed baselines.

Numpy only (no MARL library is imported), shared by the four scripts in ``examples/``:

- :class:`EpisodeTally` collects one episode step by step (the team that answered, the fusion agent's info) and
  gives its figures (:data:`FIGURES`) and the teams the decider used most;
- :func:`baseline_figures` gives the same figures for the best single model, the mean-probability vote of all
  models and supervised stacking on the same split, with the environment's reward;
- :func:`comparison` formats them as the table the examples print; :func:`gain_line` is the one line CI reads;
- :class:`Progress` prints one line per unit of work with the elapsed time and an estimate of the rest.

>>> import numpy as np
>>> tally = EpisodeTally(("a", "b", "c"))
>>> tally.add(np.array([1, 1, 0]), {"correct": 1.0, "reward": 1.0})
>>> tally.add(np.array([1, 0, 0]), {"correct": 0.0, "reward": -1.0 - 1 / 3})
>>> tally.figures()
{'accuracy': 0.5, 'reward_per_question': -0.16666666666666663, 'team_size': 1.5}
>>> tally.describe_teams()
'a+b 50%, a 50% (mean size 1.50 of 3)'
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, TextIO

import numpy as np

from ensemble_env.baselines import routing
from ensemble_env.baselines import simple as baselines
from ensemble_env.baselines.comparison import compare
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import RewardSettings, question_rewards

__all__ = [
    "FIGURES",
    "WEIGHT_BASELINES",
    "EpisodeTally",
    "Progress",
    "baseline_figures",
    "comparison",
    "gain_line",
    "team_mask_of",
    "weight_baseline_figures",
]

#: the figures of an episode, in the order the examples print them
FIGURES = ("accuracy", "reward_per_question", "team_size")
#: what the RLAE examples (every model answers, weighted) are compared with: the weighted votes and the references
WEIGHT_BASELINES = ("mean_probability_vote", "per_task_weights", "per_question_weights", "best_single", "stacking")


def team_mask_of(observation: np.ndarray, layout: Any, role: str) -> np.ndarray:
    """The (N,) 0/1 team mask inside a decider or fusion observation (both show the team answering next).

    ``layout``: the environment's :class:`~ensemble_env.game.layout.ObservationLayout` (``env.engine.layout``).
    """
    if role not in ("decider", "fusion"):
        raise ValueError(f"role={role!r} is not 'decider' or 'fusion'")
    parts = layout.decider if role == "decider" else layout.fusion
    return np.asarray(observation)[..., parts["team_mask"]].round().astype(np.int8)


class EpisodeTally:
    """Figures of one episode, fed one answered question at a time.

    ``models``: the cache's model names. :meth:`add` takes the team that answered (an (N,) 0/1 mask, e.g. from
    :func:`team_mask_of` on the observation before the step) and the step's numeric info (``correct``,
    ``reward``), as the environment reports it.
    """

    def __init__(self, models: tuple[str, ...] | list[str]) -> None:
        self.models = tuple(models)
        self.teams: list[tuple[int, ...]] = []
        self.correct: list[float] = []
        self.rewards: list[float] = []

    def add(self, team_mask: np.ndarray, info: Mapping[str, Any]) -> None:
        mask = np.asarray(team_mask).reshape(-1)
        if mask.size != len(self.models):
            raise ValueError(f"team_mask has {mask.size} entries, expected one per model ({len(self.models)})")
        self.teams.append(tuple(int(index) for index in np.flatnonzero(mask > 0.5)))
        self.correct.append(float(info["correct"]))
        self.rewards.append(float(info["reward"]))

    @classmethod
    def from_steps(
        cls, models: tuple[str, ...] | list[str], teams: np.ndarray, correct: np.ndarray, rewards: np.ndarray
    ) -> EpisodeTally:
        """A tally of a whole episode at once: (T, N) team masks, (T,) correct flags and rewards."""
        tally = cls(models)
        if not len(teams) == len(correct) == len(rewards):
            raise ValueError(
                f"teams, correct and rewards differ in length: {len(teams)}, {len(correct)}, {len(rewards)}"
            )
        for team, right, reward in zip(teams, np.asarray(correct).tolist(), np.asarray(rewards).tolist(), strict=True):
            tally.add(team, {"correct": right, "reward": reward})
        return tally

    def __len__(self) -> int:
        return len(self.correct)

    def figures(self) -> dict[str, float]:
        """Accuracy, reward per question and mean team size of the questions added so far."""
        if not self.correct:
            raise ValueError("no question was added: play an episode first")
        return {
            "accuracy": float(np.mean(self.correct)),
            "reward_per_question": float(np.mean(self.rewards)),
            "team_size": float(np.mean([len(team) for team in self.teams])),
        }

    def top_teams(self, top: int = 3) -> list[tuple[tuple[str, ...], float]]:
        """The ``top`` teams used most often, as (model names, share of the questions)."""
        counts = Counter(self.teams).most_common(top)
        return [(tuple(self.models[index] for index in team), count / len(self.teams)) for team, count in counts]

    def describe_teams(self, top: int = 3) -> str:
        """One line: the most used teams with their shares, and the mean team size (model names without the
        organisation prefix that Hugging Face names carry, ``org__model``)."""
        parts = [
            f"{'+'.join(name.split('__')[-1] for name in names) or '(empty)'} {share:.0%}"
            for names, share in self.top_teams(top)
        ]
        size = np.mean([len(team) for team in self.teams])
        return f"{', '.join(parts)} (mean size {size:.2f} of {len(self.models)})"


def weight_baseline_figures(
    cache: LogitCache, split: str = "test", names: tuple[str, ...] = WEIGHT_BASELINES
) -> dict[str, dict[str, float]]:
    """The :data:`FIGURES` of the baselines ``names`` on ``split``, fitted on train
    (:func:`ensemble_env.baselines.comparison.compare`: those that tune do so on validation when it is not the split
    scored), with the environment's reward: what the RLAE examples print next to their policy."""
    return {
        result.name: {
            "accuracy": result.accuracy,
            "reward_per_question": float(result.rewards(cache).mean()),
            "team_size": result.mean_team_size,
        }
        for result in compare(cache, split=split, names=names)
    }


def baseline_figures(
    cache: LogitCache,
    split: str = "test",
    *,
    alpha: float = 1.0,
    size_penalty_mode: str = "on_error",
) -> dict[str, dict[str, float]]:
    """The :data:`FIGURES` of the fixed baselines on ``split``, fitted on the train split.

    Baselines: ``best_single`` (the model with the best train accuracy), ``mean_probability_vote`` (all
    models), ``static_team`` (per task, the team with the best train reward, by its mean vote: what a decider
    that sees the task can reach with the mean vote fusing), ``stacking`` (the strong supervised reference).
    The reward per question is the environment's with the given ``alpha`` and ``size_penalty_mode`` (team
    share = team size / N).
    """
    train, questions = cache.select("train"), cache.select(split)
    results = (
        baselines.best_single(cache, train, questions),
        baselines.mean_probability_vote(cache, train, questions),
        routing.static_team(
            cache, train, questions, reward=RewardSettings(alpha=alpha, size_penalty_mode=size_penalty_mode)
        ),
        baselines.stacking(cache, train, questions),
    )
    figures = {}
    for result in results:
        share = result.team_size / cache.n_models
        rewards = question_rewards(result.correct, share, alpha=alpha, size_penalty_mode=size_penalty_mode)
        name = result.name.split("(")[0]
        figures[name] = {
            "accuracy": result.accuracy,
            "reward_per_question": float(rewards.mean()),
            "team_size": result.mean_team_size,
        }
    return figures


def comparison(
    title: str,
    before: Mapping[str, float],
    after: Mapping[str, float],
    reference: Mapping[str, Mapping[str, float]],
    *,
    questions: int | None = None,
    split: str = "test",
) -> str:
    """The table the examples print: before and after training, then the baselines, one row each."""
    heading = f"  {split}{f' ({questions} questions)' if questions else ''}"
    rows = [f"{heading:<34s}{'accuracy':>9s}{'reward/q':>10s}{'team':>7s}"]
    named = [("before training", before), ("after training", after)]
    named += [(name.replace("_", " "), figures) for name, figures in reference.items()]
    for name, figures in named:
        rows.append(
            f"  {name:<32s}{figures['accuracy']:9.3f}{figures['reward_per_question']:10.3f}{figures['team_size']:7.2f}"
        )
    return "\n".join([title, *rows])


def gain_line(label: str, before: Mapping[str, float], after: Mapping[str, float], split: str = "test") -> str:
    """``[label] test accuracy 0.203 -> 0.745 (+0.542), reward/q ...``: the line ``.ci/adapters.sh`` reads."""
    change = after["accuracy"] - before["accuracy"]
    return (
        f"[{label}] {split} accuracy {before['accuracy']:.3f} -> {after['accuracy']:.3f} ({change:+.3f}), "
        f"reward/q {before['reward_per_question']:.3f} -> {after['reward_per_question']:.3f}, "
        f"team {before['team_size']:.2f} -> {after['team_size']:.2f}"
    )


class Progress:
    """Prints ``label i/n`` with the elapsed time, an estimate of the time left and any figures given.

    >>> import io
    >>> out = io.StringIO()
    >>> progress = Progress("iteration", 2, stream=out)
    >>> progress.update(1, reward=0.5)
    >>> out.getvalue().split()[:3]
    ['iteration', '1/2', 'reward']
    """

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None) -> None:
        self.label, self.total = label, total
        self.stream = stream  # None: sys.stdout when printing (so that the object pickles, as BenchMARL needs)
        self.start = time.monotonic()

    def update(self, done: int, **figures: float) -> None:
        elapsed = time.monotonic() - self.start
        left = elapsed / done * (self.total - done) if done else float("nan")
        shown = "  ".join(f"{name} {value:8.3f}" for name, value in figures.items())
        width = len(str(self.total))
        print(
            f"{self.label} {done:>{width}d}/{self.total}  {shown}  [{elapsed:5.0f} s, ~{left:4.0f} s left]",
            file=self.stream if self.stream is not None else sys.stdout,
            flush=True,
        )
