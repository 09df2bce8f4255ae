"""Routing on tasks never seen under partial feedback (issue 40): the rules that read only the played team's outputs.

**The feedback.** The unseen-task protocol (:mod:`ensemble_env.baselines.online`) streams each held-out task from
an empty history, in the game's timing (:data:`~ensemble_env.baselines.online.GAME_DELAY`: the team of question
t + 1 is committed before question t is scored). Under *team feedback* (:data:`FEEDBACK`), once question s is
scored only its label and the outputs of the members of the team E_s that answered it are revealed: the reward of
every sub-team of E_s on question s is known (each answers by its members' mean vote), and of no other team. So
before the team of question t is chosen, team k has been observed on

    n_k = #{s <= t - 1 - d : k is a sub-team of E_s}      questions, for a summed reward    S_k = sum of r_k(s) on them

(d = ``delay``; :func:`partial_statistics` replays these for any sequence of played teams; playing all N models
reveals every team, playing one model reveals that model alone). Each rule below reads n_k, S_k, the training
questions and nothing else of the task.

=========================  ===========================================================================================
rule                       the team of the t-th question of a held-out task (index maximised, ties to the prior rank)
=========================  ===========================================================================================
:func:`greedy_team`        (S_k + n0 * prior_k) / (n0 + n_k): the observed mean shrunk toward the training mean
:func:`etc_team`           all N models for the first m questions of the task (every team is observed), then greedy
:func:`partial_ucb_team`   greedy's mean + c * (high - low) * sqrt(2 ln(1 + r) / (n0 + n_k)), r the revealed
                           questions (UCB1 on rewards normalised to [0, 1], as :func:`~ensemble_env.baselines.online.
                           ucb_team`, but a played team updates all its sub-teams); ``"ucb_team(partial)"``
:func:`thompson_team`      greedy's mean + sigma * (high - low) * z_k / sqrt(n0 + n_k), z_k ~ N(0, 1) drawn per question
                           and team: a sample of each team's mean from a Gaussian posterior whose prior is n0 pseudo
                           observations at the training mean (seeded)
=========================  ===========================================================================================

prior_k is team k's mean reward on the training questions and the prior rank is
:func:`~ensemble_env.baselines.outcomes.prior_rank` on them (the first question of a task goes to the global team,
except :func:`etc_team`'s, to all N models, and by its draws :func:`thompson_team`'s); (low, high) is
:func:`~ensemble_env.baselines.outcomes.reward_range`. The references of a partial-feedback table are
:func:`~ensemble_env.baselines.online.ftl_team` (it reads every model's output: full feedback, a rule this protocol
cannot play) and :func:`~ensemble_env.baselines.online.hindsight_team` (the scored labels);
:data:`ensemble_env.baselines.registry.PARTIAL_DEFAULT_BASELINES` lists what a partial-feedback table shows.

**Constants chosen on the training tasks.** n0 (every rule), m (:func:`etc_team`), c (:func:`partial_ucb_team`) and
sigma (:func:`thompson_team`) are chosen on a grid by streaming every *training task*: all its questions (``train``
and ``validation`` alike: the benchmark's folds pass the training tasks' train and validation questions, and each
training task is streamed whole), in cache order, from an empty history, in the game's timing, under the same
feedback, with the **other** training tasks as the prior (their mean rewards and their rank): the situation of a
held-out task. The constants with the best mean over training tasks of the mean reward per question win (ties to
the first of the grid: the smaller n0, m, c, sigma). Held-out labels are never read. Unlike
:func:`~ensemble_env.baselines.online.ucb_team`, whose training streams keep the streamed task in the prior, the
prior leaves it out: under partial feedback the prior is most of what a rule knows, and a prior that has seen the
streamed task would favour trusting it. Hence at least two training tasks (a ValueError otherwise).

**Or on validation tasks** (``choose_on="validation"``, :data:`CHOOSE_ON`; the benchmark's generated-task protocol,
whose training tasks are hundreds): the constants are chosen by streaming every *validation task* (the tasks of
``validation``, none of them a ``train`` task) from an empty history, in the game's timing, with the ``train`` tasks
as the prior (their mean rewards and their rank, as a held-out task has them); the held-out tasks are then played
with the same prior, the ``train`` tasks alone. Each setting is played once per validation task instead of once per
training task, and ``info["validation_reward"]`` keeps the chosen setting's mean reward per validation question.
Held-out labels are never read in either mode (:func:`rule_settings` builds both settings, :func:`fitted_rule`
chooses).

**Randomness.** Only :func:`thompson_team` draws: the normal draws of a task's stream come from
``numpy.random.default_rng([seed, part, task])`` (part 0 for a held-out task, 1 for a training task's stream), so
they depend on the seed and the task alone (not on the labels, nor on the other tasks held out), and the grid's
values are compared on the same draws.

>>> from ensemble_env.cache import synthetic
>>> cache = synthetic.make_cache(n_models=3, n_questions=120, n_tasks=3, seed=0)
>>> held = cache.select(tasks=["task_0"])
>>> train = np.setdiff1d(np.arange(cache.n_questions), held)
>>> result = greedy_team(cache, train, held)
>>> result.name, result.n_questions, result.info["feedback"], result.info["held_out_tasks"]
('greedy_team', 40, 'team', ('task_0',))
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines import arguments, online, pooling
from ensemble_env.baselines.online import (
    GAME_DELAY,
    UCB_EXPLORATION_GRID,
    stream_means,
    team_label,
    unseen_result,
    unseen_setting,
)
from ensemble_env.baselines.outcomes import SCORE_DIGITS, TeamOutcomes, reward_range, team_outcomes
from ensemble_env.baselines.simple import BaselineResult, question_indices, task_ids, task_names
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import FEEDBACK_LEVELS
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings

__all__ = [
    "CHOOSE_ON",
    "EXPLORE_GRID",
    "FEEDBACK",
    "PSEUDO_COUNT_GRID",
    "THOMPSON_SCALE_GRID",
    "Player",
    "contained_teams",
    "etc_team",
    "fitted_rule",
    "greedy_team",
    "partial_choices",
    "partial_statistics",
    "partial_ucb_team",
    "rule_settings",
    "rules",
    "thompson_team",
    "training_priors",
]

#: the feedback these rules read (``info["feedback"]``, the registry's ``feedback``): the played team's members,
#: ``"team"`` of the one vocabulary (:data:`ensemble_env.game.config.FEEDBACK_LEVELS`)
FEEDBACK = FEEDBACK_LEVELS[1]
#: the pseudo-counts n0 of the training prior every rule tries on the training tasks
PSEUDO_COUNT_GRID = (0.0625, 0.25, 1.0, 4.0, 16.0, 64.0)
#: the numbers m of first questions :func:`etc_team` gives to all N models, tried on the training tasks
EXPLORE_GRID = (1, 2, 5, 10, 20)
#: the sampling scales sigma (of the reward range) :func:`thompson_team` tries on the training tasks
THOMPSON_SCALE_GRID = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
#: where a rule chooses its constants (``choose_on``): "training", each training task's stream with the other
#: training tasks as the prior; "validation", each validation task's stream with the train tasks as the prior (the
#: module's docstring)
CHOOSE_ON = ("training", "validation")


def _count(value: object, name: str, minimum: int, maximum: int = online.MAX_DELAY) -> int:
    """A whole number in [minimum, maximum] (not a bool), else a ValueError naming ``name``."""
    return arguments.whole(value, name, minimum, maximum)


# -- what a played team reveals ---------------------------------------------------------------------------------------


def contained_teams(teams: np.ndarray) -> np.ndarray:
    """(K, K) bool: ``[j, k]`` is True when team k is a sub-team of team j (every member of k is in j), i.e. when
    playing team j reveals team k's reward. ``teams`` (K, N) bool.

    >>> contained_teams(np.array([[1, 0], [0, 1], [1, 1]], bool)).astype(int).tolist()
    [[1, 0, 0], [0, 1, 0], [1, 1, 1]]
    """
    teams = np.asarray(teams, dtype=bool)
    return ~(teams[None, :, :] & ~teams[:, None, :]).any(axis=2)


def _reveal(
    counts: np.ndarray, sums: np.ndarray, contains: np.ndarray, played: np.ndarray, rewards: np.ndarray
) -> None:
    """Add one scored question to the statistics, in place: ``counts``, ``sums`` (..., K); ``played`` (...) the team
    row that answered it (-1: no question, nothing revealed); ``rewards`` (..., K) every team's reward on it (only the
    played team's sub-teams' are read)."""
    seen = contains[np.maximum(played, 0)] & (played >= 0)[..., None]
    counts += seen
    sums += np.where(seen, rewards, 0.0)


def partial_statistics(
    rewards: ArrayLike, teams: np.ndarray, played: ArrayLike, delay: int = GAME_DELAY
) -> tuple[np.ndarray, np.ndarray]:
    """What team feedback has revealed before each question of one stream: (counts (T, K) int64, sums (T, K)).

    ``rewards`` (K, T): every team's reward on each question of the stream; ``teams`` (K, N) bool; ``played`` (T,)
    the team row that answered each question. Row t holds, for each team k, the number n_k of the questions
    s <= t - 1 - ``delay`` whose played team contains k, and the summed reward S_k of team k on them: what a rule
    reads when it commits the team of question t (the statistics every rule of this module plays on).

    >>> rewards = np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0], [1.0, 1.0, -1.0]])  # {a}, {b}, {a, b}
    >>> counts, sums = partial_statistics(rewards, np.array([[1, 0], [0, 1], [1, 1]], bool), [2, 0, 1], delay=0)
    >>> counts.tolist(), sums.tolist()
    ([[0, 0, 0], [1, 1, 1], [2, 1, 1]], [[0.0, 0.0, 0.0], [1.0, -1.0, 1.0], [0.0, -1.0, 1.0]])
    """
    rewards, contains = _stream(rewards, teams)
    played = np.asarray(played)
    if (
        played.shape != (rewards.shape[1],)
        or played.dtype.kind not in "iu"
        or not np.all((played >= 0) & (played < rewards.shape[0]))
    ):
        raise ValueError(f"played must hold one team row in 0..{rewards.shape[0] - 1} per question of the stream")
    delay = _count(delay, "delay", 0)
    counts = np.zeros(rewards.shape[::-1], dtype=np.int64)
    sums = np.zeros(rewards.shape[::-1])
    counted, summed = np.zeros(rewards.shape[0], dtype=np.int64), np.zeros(rewards.shape[0])
    for t in range(rewards.shape[1]):
        if t - delay >= 1:  # the outcome of question t - delay - 1 arrives now
            _reveal(counted, summed, contains, played[t - delay - 1], rewards[:, t - delay - 1])
        counts[t], sums[t] = counted, summed
    return counts, sums


def _stream(rewards: ArrayLike, teams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rewards (K, T) float64, :func:`contained_teams`), ValueError unless the shapes agree."""
    teams = np.asarray(teams)
    if teams.ndim != 2 or teams.dtype != np.bool_ or teams.shape[0] < 1:
        raise ValueError(f"teams must be a (K, N) bool array, K >= 1, got {teams.dtype} of shape {teams.shape}")
    rewards = arguments.real_array(rewards, "rewards", ndim=2, shape=(teams.shape[0], None))  # finite, K rows
    return rewards, contained_teams(teams)


# -- the rules, on many streams and many constants at once --------------------------------------------------------


#: the constants of the index (and of :func:`ensemble_env.baselines.bayes.bayes_team`'s model: s, lambda), by their
#: key in ``info["grid_scores"]``: the name of ``info``'s entry and its type
_CONSTANTS: dict[str, tuple[str, type]] = {
    "n0": ("pseudo_count", float),
    "m": ("explore", int),
    "c": ("exploration", float),
    "sigma": ("scale", float),
    "s": ("prior_scale", float),
    "lambda": ("shrinkage", float),
}


@dataclass(frozen=True)
class _Grid:
    """G settings of the index, one per row: the pseudo-count n0, exploration c, the first m questions to all
    models, the sampling scale sigma (each (G,)); ``settings`` the G settings as given (the constants a rule varies,
    by their keys in :data:`_CONSTANTS`)."""

    pseudo_count: np.ndarray
    exploration: np.ndarray
    explore: np.ndarray
    scale: np.ndarray
    settings: tuple[dict[str, float], ...]

    @staticmethod
    def of(settings: Iterable[dict[str, float]]) -> _Grid:
        settings = tuple(settings)
        column = {key: np.array([s.get(key, 0.0) for s in settings]) for key in _CONSTANTS}
        return _Grid(column["n0"], column["c"], column["m"].astype(np.int64), column["sigma"], settings)

    @property
    def labels(self) -> list[str]:
        """The label of each setting, e.g. ``"m=5,n0=4"``."""
        return [",".join(f"{key}={value:g}" for key, value in s.items()) for s in self.settings]

    def __getitem__(self, g: int) -> _Grid:
        return _Grid(
            self.pseudo_count[g : g + 1],
            self.exploration[g : g + 1],
            self.explore[g : g + 1],
            self.scale[g : g + 1],
            self.settings[g : g + 1],
        )

    def info(self, g: int) -> dict[str, Any]:
        """The constants of setting ``g`` under their ``info`` names (``{"explore": 5, "pseudo_count": 4.0}``)."""
        return {_CONSTANTS[key][0]: _CONSTANTS[key][1](value) for key, value in self.settings[g].items()}


def _play(
    rewards: list[np.ndarray],
    prior: np.ndarray,
    rank: np.ndarray,
    contains: np.ndarray,
    grid: _Grid,
    width: float,
    noise: list[np.ndarray] | None,
    delay: int,
) -> np.ndarray:
    """(G, S, T) int64: the team rows the G settings of ``grid`` play on S streams at once (-1 past a stream's end).

    ``rewards``: S arrays (K, T_s), every team's reward on each question of the stream (only the played teams'
    sub-teams' are read, ``delay`` questions later); ``prior``, ``rank`` (S, K): each stream's training means and
    tie-break; ``contains`` (K, K) :func:`contained_teams`; ``width`` = high - low of the rewards; ``noise``: S
    arrays (T_s, K) of standard normal draws (read only where sigma > 0).
    """
    n_streams, n_teams = len(rewards), prior.shape[1]
    lengths = np.array([r.shape[1] for r in rewards])
    padded = np.zeros((n_streams, int(lengths.max()), n_teams))
    drawn = np.zeros_like(padded)
    for s, stream in enumerate(rewards):
        padded[s, : lengths[s]] = stream.T
        if noise is not None:
            drawn[s, : lengths[s]] = noise[s]
    full = int(np.argmax(contains.sum(axis=1)))  # the team of all N models: it holds every team
    n_grid = grid.pseudo_count.size
    counts = np.zeros((n_grid, n_streams, n_teams))
    sums = np.zeros((n_grid, n_streams, n_teams))
    chosen = np.full((n_grid, n_streams, padded.shape[1]), -1, dtype=np.int64)
    n0 = grid.pseudo_count[:, None, None]
    c, sigma = grid.exploration[:, None, None] * width, grid.scale[:, None, None] * width
    for t in range(padded.shape[1]):
        revealed = max(0, t - delay)  # questions 0 .. revealed - 1 are scored and revealed
        if revealed >= 1:
            _reveal(counts, sums, contains, chosen[:, :, revealed - 1], padded[None, :, revealed - 1])
        plays = n0 + counts
        index = (sums + n0 * prior) / plays
        index = index + c * np.sqrt(2.0 * math.log1p(revealed) / plays) + sigma * drawn[None, :, t] / plays**0.5
        rounded = np.round(index, SCORE_DIGITS)
        tied = rounded == rounded.max(axis=2, keepdims=True)
        team = np.where(tied, rank[None], n_teams).argmin(axis=2)  # (G, S)
        team = np.where(t < grid.explore[:, None], full, team)
        active = t < lengths
        chosen[:, active, t] = team[:, active]
    return chosen


def partial_choices(
    rewards: ArrayLike,
    teams: np.ndarray,
    prior: ArrayLike,
    rank: ArrayLike,
    *,
    pseudo_count: float,
    exploration: float = 0.0,
    explore: int = 0,
    scale: float = 0.0,
    noise: ArrayLike | None = None,
    bounds: tuple[float, float] | None = None,
    delay: int = GAME_DELAY,
) -> np.ndarray:
    """(T,) int64: the team rows a rule of this module plays on one stream of T questions, under team feedback.

    ``rewards`` (K, T): every team's reward on each question (only the played teams' sub-teams' are read, ``delay``
    questions after they are played: :func:`partial_statistics`); ``teams`` (K, N) bool; ``prior`` (K,): each
    team's mean reward on the training questions; ``rank`` (K,): the tie-break (:func:`~ensemble_env.baselines.
    outcomes.prior_rank`, 0 first). The first ``explore`` questions go to the team of all N models; then, with n_k,
    S_k the revealed statistics and r the number of revealed questions, the team maximising

        (S_k + n0 * prior_k) / (n0 + n_k)
            + (high - low) * (c * sqrt(2 ln(1 + r) / (n0 + n_k)) + sigma * z_k / sqrt(n0 + n_k))

    plays (rounded to :data:`~ensemble_env.baselines.outcomes.SCORE_DIGITS` decimals, ties to the lowest rank): n0
    ``pseudo_count``, c ``exploration``, sigma ``scale``, z ``noise`` (T, K) standard normal draws (needed when
    sigma > 0), (low, high) ``bounds`` (default :func:`~ensemble_env.baselines.outcomes.reward_range`'s, (-2, 1)).
    Greedy is c = sigma = 0 and m = 0. Every argument is checked as
    :func:`~ensemble_env.baselines.online.ucb_choices` checks its own (:mod:`ensemble_env.baselines.arguments`):
    finite rewards, prior and noise of these shapes, rewards and prior within ``bounds``, ``rank`` a permutation of
    the K teams, ``bounds`` two finite numbers with low < high; a ValueError names the argument otherwise.

    Two models: {a}, whose training mean is 0, is wrong on every question of the task (-1); {b} (training mean -1)
    and the pair (-1.5, answering as b) are right (+1). Greedy with n0 = 1 never learns it: playing {a} reveals
    {a} alone, and its shrunk mean -n / (n + 1) stays above b's untried prior -1. Giving the first two questions to
    both models reveals every team: b plays from the third question on (the first outcome is read then, in the
    game's timing).

    >>> stream = np.array([[-1.0] * 5, [1.0] * 5, [1.0] * 5])  # {a}, {b}, {a, b} (the pair answers as b)
    >>> teams = np.array([[1, 0], [0, 1], [1, 1]], bool)
    >>> prior, rank = np.array([0.0, -1.0, -1.5]), np.array([0, 1, 2])
    >>> partial_choices(stream, teams, prior, rank, pseudo_count=1.0).tolist()
    [0, 0, 0, 0, 0]
    >>> partial_choices(stream, teams, prior, rank, pseudo_count=1.0, explore=2).tolist()
    [2, 2, 1, 1, 1]
    """
    rewards, contains = _stream(rewards, teams)
    n_teams = rewards.shape[0]
    low, high = reward_range() if bounds is None else arguments.bounds(bounds)
    arguments.real_array(rewards, "rewards", ndim=2, low=low, high=high)  # rewards and prior within the bounds
    prior = arguments.real_array(prior, "prior", ndim=1, shape=(n_teams,), low=low, high=high)
    rank = arguments.ranking(rank, "rank", n_teams)
    settings = {
        "n0": _positive(pseudo_count, "pseudo_count"),
        "c": _non_negative(exploration, "exploration"),
        "m": _count(explore, "explore", 0),
        "sigma": _non_negative(scale, "scale"),
    }
    draws = None
    if noise is not None:
        draws = [arguments.real_array(noise, "noise", ndim=2, shape=rewards.shape[::-1])]
    elif settings["sigma"] > 0:
        raise ValueError("scale > 0 samples: give noise, (T, K) standard normal draws")
    grid = _Grid.of([settings])
    return _play([rewards], prior[None], rank[None], contains, grid, high - low, draws, _count(delay, "delay", 0))[0, 0]


# -- checks ------------------------------------------------------------------------------------------------------------


#: the largest constant (a pseudo-count, an exploration or a scale) a grid may hold
MAX_CONSTANT = 1e12


def _positive(value: Any, name: str) -> float:
    return arguments.real(value, name, 0.0, MAX_CONSTANT, above=True)


def _non_negative(value: Any, name: str) -> float:
    return arguments.real(value, name, 0.0, MAX_CONSTANT)


def _explore(value: Any, name: str) -> int:
    return _count(value, name, 1)


# -- the rules on the protocol ----------------------------------------------------------------------------------------


def training_priors(p: Any, streams: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(prior (S, K), rank (S, K)) of each training task's stream: the mean reward and
    :func:`~ensemble_env.baselines.outcomes.prior_rank` of every team on the *other* training tasks' questions.

    ``p`` the protocol's setting (:func:`~ensemble_env.baselines.online.unseen_setting`), ``streams`` the training
    tasks' columns of its outcomes (``p.training_streams()``). ValueError with fewer than two training tasks."""
    if len(streams) < 2:
        raise ValueError(
            "the partial-feedback rules choose their constants by streaming each training task with the other "
            f"training tasks as the prior: give at least two training tasks, got {len(streams)}"
        )
    out: TeamOutcomes = p.outcomes
    parts = (out.rewards, out.correct.astype(np.float64), out.share)
    own = np.stack([np.stack([part[:, columns].sum(axis=1) for part in parts]) for columns in streams])  # (S, 3, K)
    sizes = np.array([columns.size for columns in streams], dtype=np.float64)
    others = (own.sum(axis=0)[None] - own) / (sizes.sum() - sizes)[:, None, None]
    ranks = np.stack([_rank(*stream) for stream in others])
    return others[:, 0], ranks


def _rank(mean_reward: np.ndarray, accuracy: np.ndarray, mean_share: np.ndarray) -> np.ndarray:
    """(K,) each team's rank (0 best) by the keys of :func:`~ensemble_env.baselines.outcomes.prior_rank`, from the
    teams' means (:func:`~ensemble_env.baselines.pooling.rank_teams`)."""
    rank = np.empty(mean_reward.size, dtype=np.int64)
    rank[pooling.rank_teams(mean_reward, accuracy, mean_share)] = np.arange(mean_reward.size)
    return rank


def _draws(seed: int | None, part: int, tasks: list[int], lengths: list[int], n_teams: int) -> list[np.ndarray] | None:
    """The standard normal draws (T_s, K) of each stream, from ``default_rng([seed, part, task])``; None unseeded."""
    if seed is None:
        return None
    return [np.random.default_rng([seed, part, task]).standard_normal((length, n_teams)) for task, length in
            zip(tasks, lengths, strict=True)]  # fmt: skip


#: how a rule plays, given to :func:`fitted_rule`: ``play(p, settings, streams, training)`` -> (G, S, T) int64, the
#: team rows G ``settings`` (dicts of constants by their key in ``info["grid_scores"]``) play on S ``streams`` (the
#: columns of ``p.outcomes`` of each task's questions, in stream order; -1 past a stream's end); ``training`` True
#: for the training tasks' streams (each with the other training tasks as the prior), False for the held-out tasks'
#: (the training tasks as the prior)
Player = Callable[[Any, tuple[dict[str, float], ...], list[np.ndarray], bool], np.ndarray]


def rule_settings(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    reward: RewardSettings,
    validation: ArrayLike | None,
    outcomes: TeamOutcomes | None,
    choose_on: str = "training",
) -> tuple[Any, Any]:
    """(the setting a rule plays its held-out tasks in, the setting it chooses its constants in or None) under
    ``choose_on`` (:data:`CHOOSE_ON`), the pair :func:`fitted_rule` takes.

    ``"training"``: :func:`~ensemble_env.baselines.online.unseen_setting` of ``train`` and ``validation`` pooled
    (the training tasks) and ``test``, and None (the constants are chosen on the training tasks' streams).
    ``"validation"``: the setting of ``train`` and ``test``, and the setting of ``train`` and the ``validation``
    tasks, streamed as held-out tasks: both with the prior of the ``train`` tasks alone, both on one
    :class:`~ensemble_env.baselines.outcomes.TeamOutcomes` (``outcomes``, or computed once on the three). ValueError
    naming ``choose_on`` for another value, or for ``"validation"`` without validation questions."""
    if choose_on not in CHOOSE_ON:
        raise ValueError(f"choose_on must be one of {', '.join(CHOOSE_ON)}, got {choose_on!r}")
    if choose_on == "training":
        return unseen_setting(cache, train, test, reward, validation, outcomes), None
    if validation is None or np.asarray(validation).size == 0:
        raise ValueError(
            "choose_on='validation' chooses the constants on the validation tasks: give validation questions "
            "(the questions of tasks that are neither train nor test tasks)"
        )
    if outcomes is None:
        rows = [question_indices(cache, part, name) for part, name in
                ((train, "train"), (validation, "validation"), (test, "test"))]  # fmt: skip
        outcomes = team_outcomes(cache, np.concatenate(rows), reward)
    played = unseen_setting(cache, train, test, reward, None, outcomes)
    return played, unseen_setting(cache, train, validation, reward, None, outcomes)


def fitted_rule(
    name: str, p: Any, grids: dict[str, list[Any]], play: Player, *, validation: Any = None, **info: Any
) -> BaselineResult:
    """The rule ``name`` with its constants chosen on the training tasks (or the validation tasks) and played on the
    held-out tasks.

    Every setting of the product of ``grids`` (constant key -> checked values; the first grid varying slowest) is
    played by ``play`` (:data:`Player`) on the training tasks' streams of ``p`` (the protocol's setting,
    :func:`~ensemble_env.baselines.online.unseen_setting`), each with the other training tasks as the prior; or, with
    ``validation`` (the second setting of :func:`rule_settings`: the validation tasks as its held-out tasks), on the
    validation tasks' streams with the train tasks as the prior. The best mean over those tasks of the mean reward
    per question wins (rounded to :data:`~ensemble_env.baselines.outcomes.SCORE_DIGITS` decimals, ties to the
    earlier setting) and plays the held-out tasks of ``p``. ``info`` joins the result's ``info``, after the
    constants chosen (with ``validation``, ``validation_reward``: the chosen setting's mean reward per validation
    question)."""
    grid = _Grid.of([dict(zip(grids, values, strict=True)) for values in itertools.product(*grids.values())])
    if validation is None:
        where, columns = p, p.training_streams()
        chosen = play(p, grid.settings, columns, True)
        fitted_on = "training tasks' streams, each with the other training tasks as the prior"
    else:
        where, columns = validation, [validation.test_columns[positions] for _, positions in
                                      validation.held_out_streams()]  # fmt: skip
        chosen = play(validation, grid.settings, columns, False)
        fitted_on = "validation tasks' streams, with the train tasks as the prior"
    streams = [where.outcomes.rewards[:, task] for task in columns]
    scores = [
        stream_means(streams, [chosen[g, s, : r.shape[1]] for s, r in enumerate(streams)])
        for g in range(len(grid.settings))
    ]
    best = max(range(len(scores)), key=lambda g: (round(scores[g], SCORE_DIGITS), -g))
    if validation is not None:
        rewards = [r[chosen[best, s, : r.shape[1]], np.arange(r.shape[1])] for s, r in enumerate(streams)]
        info = {**info, "validation_reward": float(np.concatenate(rewards).mean())}
    held = p.held_out_streams()
    played = play(p, grid[best].settings, [p.test_columns[positions] for _, positions in held], False)[0]
    rows = np.empty(p.test.size, dtype=np.int64)
    switches: dict[str, int] = {}
    for s, (task, positions) in enumerate(held):
        rows[positions] = played[s, : positions.size]
        switches[task_names(p.cache)[task]] = int(np.count_nonzero(np.diff(rows[positions])))
    info = p.info(
        feedback=FEEDBACK,
        delay=GAME_DELAY,
        fitted_on=fitted_on,
        **grid.info(best),
        **info,
        grid_scores=dict(zip(grid.labels, scores, strict=True)),
        first_team=team_label(p.cache, p.teams[played[0, 0]]),
        switches=switches,
    )
    return unseen_result(name, p, rows, info)


def _index_player(seed: int | None) -> Player:
    """:func:`partial_choices`' index as a :data:`Player` (``seed``: the draws', for a grid that samples)."""

    def play(p: Any, settings: tuple[dict[str, float], ...], streams: list[np.ndarray], training: bool) -> np.ndarray:
        out: TeamOutcomes = p.outcomes
        contains = contained_teams(p.teams)
        low, high = reward_range(p.reward)
        tasks = task_ids(p.cache)[out.questions]
        lengths = [columns.size for columns in streams]
        noise = _draws(seed, int(training), [int(tasks[columns[0]]) for columns in streams], lengths, len(contains))
        if training:
            prior, rank = training_priors(p, streams)
        else:
            prior = np.repeat(out.rewards[:, p.train_columns].mean(axis=1)[None], len(streams), axis=0)
            rank = np.repeat(p.rank[None], len(streams), axis=0)
        rewards = [out.rewards[:, columns] for columns in streams]
        return _play(rewards, prior, rank, contains, _Grid.of(settings), high - low, noise, GAME_DELAY)

    return play


def _rule(name: str, settings: tuple[Any, Any], grids: dict[str, list[Any]], seed: int | None = None) -> BaselineResult:
    """:func:`fitted_rule` with :func:`partial_choices`' index on :func:`rule_settings`' pair (``seed``: the
    draws', for a grid that samples)."""
    p, validation = settings
    extra = {} if seed is None else {"seed": seed}
    return fitted_rule(name, p, grids, _index_player(seed), validation=validation, **extra)


def greedy_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    pseudo_counts: Iterable[float] = PSEUDO_COUNT_GRID,
    outcomes: TeamOutcomes | None = None,
    choose_on: str = "training",
) -> BaselineResult:
    """Greedy under team feedback: the team with the best observed mean reward shrunk toward its training mean,
    (S_k + n0 * prior_k) / (n0 + n_k) (:func:`partial_choices` with c = sigma = 0), ties to the prior rank; the
    first questions (nothing revealed) to the global team.

    n0 from ``pseudo_counts`` is chosen on the training tasks' streams (the module's docstring; on the validation
    tasks' with ``choose_on="validation"``, :data:`CHOOSE_ON`, as every rule here). ``outcomes`` as
    :func:`~ensemble_env.baselines.online.global_team`'s. Named ``"greedy_team"``; ``info["pseudo_count"]``,
    ``info["grid_scores"]`` (the training score of every n0), ``info["first_team"]``, ``info["switches"]``.
    """
    grids = {"n0": arguments.grid(pseudo_counts, "pseudo_counts", _positive)}
    return _rule("greedy_team", rule_settings(cache, train, test, reward, validation, outcomes, choose_on), grids)


def etc_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    explores: Iterable[int] = EXPLORE_GRID,
    pseudo_counts: Iterable[float] = PSEUDO_COUNT_GRID,
    outcomes: TeamOutcomes | None = None,
    choose_on: str = "training",
) -> BaselineResult:
    """Explore then commit: all N models answer the first m questions of each held-out task (so every team's
    reward on them is revealed), then :func:`greedy_team`'s rule.

    (m, n0) from ``explores`` x ``pseudo_counts`` is chosen on the training tasks' streams (ties to the smaller m,
    then the smaller n0). Named ``"etc_team"``; ``info["explore"]`` m, ``info["pseudo_count"]`` n0,
    ``info["grid_scores"]``, ``info["first_team"]`` (all N models), ``info["switches"]``.
    """
    grids: dict[str, list[Any]] = {"m": arguments.grid(explores, "explores", _explore)}
    grids["n0"] = arguments.grid(pseudo_counts, "pseudo_counts", _positive)
    return _rule("etc_team", rule_settings(cache, train, test, reward, validation, outcomes, choose_on), grids)


def partial_ucb_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    explorations: Iterable[float] = UCB_EXPLORATION_GRID,
    pseudo_counts: Iterable[float] = PSEUDO_COUNT_GRID,
    outcomes: TeamOutcomes | None = None,
    choose_on: str = "training",
) -> BaselineResult:
    """UCB over teams under team feedback: :func:`~ensemble_env.baselines.online.ucb_team`'s index (UCB1 on rewards
    normalised to [0, 1], n0 pseudo-plays at the training mean), but a played team reveals the reward of every one
    of its sub-teams, so each of their counts grows (:func:`partial_choices` with exploration c).

    (c, n0) from ``explorations`` x ``pseudo_counts`` is chosen on the training tasks' streams (ties to the smaller
    c, then the smaller n0). Named ``"ucb_team(partial)"``; ``info["exploration"]``, ``info["pseudo_count"]``,
    ``info["grid_scores"]``, ``info["first_team"]``, ``info["switches"]``.
    """
    grids = {"c": arguments.grid(explorations, "explorations", _non_negative)}
    grids["n0"] = arguments.grid(pseudo_counts, "pseudo_counts", _positive)
    settings = rule_settings(cache, train, test, reward, validation, outcomes, choose_on)
    return _rule("ucb_team(partial)", settings, grids)


def thompson_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    seed: int | None,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    scales: Iterable[float] = THOMPSON_SCALE_GRID,
    pseudo_counts: Iterable[float] = PSEUDO_COUNT_GRID,
    outcomes: TeamOutcomes | None = None,
    choose_on: str = "training",
) -> BaselineResult:
    """Thompson sampling over teams under team feedback: before each question, every team's mean reward is drawn
    from a Gaussian posterior, mean (S_k + n0 * prior_k) / (n0 + n_k) and standard deviation
    sigma * (high - low) / sqrt(n0 + n_k) (the prior counts as n0 observations at the training mean; sigma is the
    per-question spread as a share of the reward range), and the best draw plays (:func:`partial_choices` with
    ``scale`` sigma).

    (sigma, n0) from ``scales`` x ``pseudo_counts`` is chosen on the training tasks' streams (ties to the smaller
    sigma, then the smaller n0), every setting on the same draws. ``seed`` (an integer >= 0; None, an unseeded
    setting, is refused) seeds every draw (the module's docstring): the same seed, the same teams. Named
    ``"thompson_team"``; ``info["scale"]``, ``info["pseudo_count"]``, ``info["seed"]``, ``info["grid_scores"]``,
    ``info["first_team"]``, ``info["switches"]``.
    """
    checked = arguments.seed(seed, "seed")
    grids = {"sigma": arguments.grid(scales, "scales", _positive)}
    grids["n0"] = arguments.grid(pseudo_counts, "pseudo_counts", _positive)
    settings = rule_settings(cache, train, test, reward, validation, outcomes, choose_on)
    return _rule("thompson_team", settings, grids, checked)


def rules(seed: int | None = 0) -> dict[str, Callable[..., BaselineResult]]:
    """The partial-feedback rules by their registry name, each called as
    ``function(cache, train, test, reward=..., validation=..., outcomes=..., choose_on=...)``; ``seed`` goes to
    :func:`thompson_team` (None: it refuses to run)."""
    return {
        "greedy_team": greedy_team,
        "etc_team": etc_team,
        "ucb_team(partial)": partial_ucb_team,
        "thompson_team": functools.partial(thompson_team, seed=seed),
    }
