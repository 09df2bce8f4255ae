"""Routing on tasks never seen (issue 32): the baselines of the unseen-task protocol.

**The protocol.** An algorithm is fitted on some tasks, the *training tasks* (``train`` holds their questions,
``validation`` possibly more of them), and scored on *held-out tasks* it has never seen (``test`` holds their
questions). Each held-out task is streamed from an empty history, in the order of ``test`` (cache order,
normally; the questions of a task are its subsequence of ``test``, so tasks may be interleaved): after a
question is answered its label is revealed, and with it (full information: the cache logs every model's output)
every model's and every team's correctness on it, the outcomes the environment's statistics window sees. The
choice for the t-th question of a held-out task reads the training questions (labels included) and the outcomes of
the questions of the same task revealed when its team is committed, nothing else: not the task's later questions,
not the other held-out tasks. ValueError when a held-out task is also a training task.

**Timing: the game's.** The environment's decider commits the team of question t + 1 in the step that answers
question t, before question t's outcome is revealed: when it chooses, it has the outcomes of the t - 1 questions
before the last one answered (its window and the task's record count question t only after that step). Every
online baseline here waits the same :data:`GAME_DELAY` = 1 question (``delay``), so it reads exactly the outcomes
the decider's observation holds. ``ftl_team(no_delay)`` reads the outcome of the question just answered too (the
follow-the-leader of a game where the team is chosen after the previous answer is scored): a stronger rule on
information this game does not give, kept as a second yardstick.

Teams are the 2**N - 1 non-empty subsets of the N models, in :func:`~ensemble_env.baselines.routing.all_teams`
order (N <= :data:`~ensemble_env.baselines.routing.MAX_TEAM_MODELS`), each answering by its mean-probability vote
(:func:`~ensemble_env.baselines.routing.team_correct`); a question's reward is the environment's
(:class:`~ensemble_env.game.reward.RewardSettings`: +1 when right, else -1 - alpha * share).

=========================  =========  ==========================================================================
baseline                   feedback   the team of the t-th question of a held-out task
=========================  =========  ==========================================================================
:func:`global_single`      none       the single model with the best mean reward on the training questions
:func:`global_team`        none       the team with the best mean reward on the training questions (pooled)
``mean_probability_vote``  none       all N models (:func:`ensemble_env.baselines.mean_probability_vote`)
:func:`ftl_single`         full       follow the leader: the model with the best mean reward on the task's
                                      questions answered so far
:func:`ftl_team`           full       the same over teams
``ftl_team(no_delay)``     full       :func:`ftl_team` reading one more outcome than the game reveals (no delay)
:func:`ftl_team_window`    full       the same over the last W answered questions of the task, W chosen on the
                                      training tasks (``ftl_team(window)``)
:func:`ucb_team`           bandit     UCB1 over teams seeing only the played team's reward, started from the
                                      training rewards (pseudo-count and exploration chosen on training tasks)
:func:`hindsight_team`     test       the best fixed team of each held-out task on all its questions: reads the
                                      labels it is scored on, a reference for the headroom, never a competitor
=========================  =========  ==========================================================================

**Ties and the empty history.** Every choice among teams (or single models) breaks ties by the *prior rank*:
the teams' scores on the pooled training questions, the keys of
:func:`~ensemble_env.baselines.routing.static_team` (mean reward, higher first; then accuracy, higher first;
then mean share of the pool, smaller first; then the earlier team of ``all_teams``). With an empty history
every team ties, so the first question of a held-out task goes to the first of the rank: the global team
(the global single model for :func:`ftl_single`). Sums of rewards are compared rounded to
:data:`~ensemble_env.baselines.outcomes.SCORE_DIGITS` decimals, so equal scores tie whatever the order of summation.

**Constants chosen on the training tasks.** :func:`ftl_team_window`'s W and :func:`ucb_team`'s exploration and
pseudo-count are chosen by simulating the protocol on the training tasks: each training task is streamed (its
training questions in cache order, from an empty history, with the same prior rank), and the value of the grid
with the best mean over training tasks of the mean reward per question wins (the held-out labels are never
read; the training task streamed is not left out of the prior). Everything is deterministic (nothing is drawn
at random).

**Arguments.** Every public function checks its arguments by type and value before anything is computed
(:mod:`ensemble_env.baselines.arguments`, the environment's own checks): the cache and the reward settings by type;
windows (1 .. :data:`~ensemble_env.game.config.MAX_WINDOW`), delays (0 .. :data:`MAX_DELAY`) and the grids' values
as whole numbers or finite reals in range, the grids as lists (never a string read letter by letter); reward arrays
as finite reals of the stated shapes, a rank as a permutation of the arms, the normalising bounds as two finite
numbers, the lower first, holding every reward. A ValueError names the argument and the value.

**Cost.** Every team's correctness and reward on every question involved is computed once
(:func:`~ensemble_env.baselines.outcomes.team_outcomes`, (K, Q)); follow-the-leader is a cumulative sum per task, the
bandit a loop over the questions of the task vectorised over the teams, the grid values and the training streams.
:func:`~ensemble_env.baselines.unseen.leave_one_task_out` shares one
:class:`~ensemble_env.baselines.outcomes.TeamOutcomes` across the folds: on
``bbh5`` (5 models, 31 teams, 16 tasks) every baseline of every fold runs in a few seconds.
``python -m ensemble_env.baselines.unseen [CACHE] [--alpha A]`` prints the leave-one-task-out table
(docs/baselines.md).

>>> from ensemble_env.cache import synthetic
>>> cache = synthetic.make_cache(n_models=3, n_questions=120, n_tasks=3, seed=0)
>>> held = cache.select(tasks=["task_0"])
>>> train = np.setdiff1d(np.arange(cache.n_questions), held)
>>> result = ftl_team(cache, train, held)
>>> result.name, result.n_questions, result.info["held_out_tasks"]
('ftl_team', 40, ('task_0',))
>>> ftl_team(cache, train, cache.select(tasks=["task_0", "task_1"]))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: task 'task_1' is both a held-out task (test) and a training task (train): ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines import arguments, routing, simple
from ensemble_env.baselines.outcomes import SCORE_DIGITS, TeamOutcomes, prior_rank, reward_range, team_outcomes
from ensemble_env.baselines.simple import BaselineResult, question_indices, task_ids, task_names
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.checks import MAX_REAL
from ensemble_env.game.config import MAX_QUESTIONS, MAX_WINDOW
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings

__all__ = [
    "GAME_DELAY",
    "MAX_DELAY",
    "PROTOCOL",
    "UCB_EXPLORATION_GRID",
    "UCB_PSEUDO_COUNT_GRID",
    "UNSEEN_BASELINES",
    "WINDOW_GRID",
    "ftl_choices",
    "ftl_single",
    "ftl_team",
    "ftl_team_window",
    "global_single",
    "global_team",
    "hindsight_team",
    "ucb_choices",
    "ucb_team",
]

#: the protocol's name, in every result's ``info["protocol"]``
PROTOCOL = "unseen-tasks"
#: the outcomes an online baseline waits for, as the game's decider does: it commits the team of question t + 1 in
#: the step that answers question t, so the outcome of question t is not yet revealed (every earlier one is)
GAME_DELAY = 1
#: the longest delay (questions whose outcome is not revealed yet) a rule may be given: a stream's length at most
MAX_DELAY = MAX_QUESTIONS
#: the windows (answered questions of the task) :func:`ftl_team_window` tries on the training tasks
WINDOW_GRID = (8, 16, 32, 64, 128)
#: the exploration constants c :func:`ucb_team` tries on the training tasks (0: greedy on the smoothed means)
UCB_EXPLORATION_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: the pseudo-counts n0 of the training prior :func:`ucb_team` tries on the training tasks
UCB_PSEUDO_COUNT_GRID = (1.0, 4.0, 16.0, 64.0)


# -- the two online rules, on one stream ------------------------------------------------------------


def _first_of_rank(scores: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Per column of ``scores`` (A, T), the arm with the highest rounded score, ties to the lowest ``rank`` (A,)."""
    rounded = np.round(scores, SCORE_DIGITS)
    tied = rounded == rounded.max(axis=0, keepdims=True)
    return np.where(tied, rank[:, None], rank.size).argmin(axis=0)


def ftl_choices(rewards: np.ndarray, rank: np.ndarray, window: int | None = None, delay: int = 0) -> np.ndarray:
    """(T,) int64: follow the leader on one stream of T questions over A arms (teams or models).

    ``rewards`` (A, T): each arm's reward on each question of the stream, in stream order (full information: all
    of a question's rewards are known once it is answered); ``rank`` (A,): the tie-break
    (:func:`~ensemble_env.baselines.outcomes.prior_rank`, 0 first). With ``delay`` d the outcomes of the last d answered
    questions are not revealed yet (the game's decider has d = :data:`GAME_DELAY`): the arm of question t maximises the
    summed reward over questions ``max(0, e - window) .. e - 1``, e = max(0, t - d) (every earlier one when ``window``
    is None); every arm sums the same number of questions, so this is the best mean reward. Ties, the empty history
    included, go to the lowest rank. Column t never reads column t - d or later.

    >>> ftl_choices(np.array([[1.0, -1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]]), np.array([0, 1])).tolist()
    [0, 0, 0, 1]
    >>> ftl_choices(np.array([[1.0, -1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]]), np.array([0, 1]), window=1).tolist()
    [0, 0, 1, 1]
    >>> ftl_choices(np.array([[1.0, -1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]]), np.array([0, 1]), delay=1).tolist()
    [0, 0, 0, 0]
    """
    rewards, rank = _arms(rewards, rank)
    n_arms, length = rewards.shape
    if window is not None:
        window = _window(window, "window")
    delay = _delay(delay)
    cumulative = np.zeros((n_arms, length + 1))
    np.cumsum(rewards, axis=1, out=cumulative[:, 1:])
    end = np.maximum(0, np.arange(length) - delay)
    start = np.zeros(length, dtype=np.int64) if window is None else np.maximum(0, end - window)
    return _first_of_rank(cumulative[:, end] - cumulative[:, start], rank)


# -- the arguments' checks (ensemble_env.baselines.arguments) ------------------------------------------------------


def _window(value: Any, option: str = "window") -> int:
    """A window of answered questions: a whole number in [1, MAX_WINDOW], the environment's own window's range."""
    return arguments.whole(value, option, 1, MAX_WINDOW)


def _delay(value: Any) -> int:
    return arguments.whole(value, "delay", 0, MAX_DELAY)


def _exploration(value: Any, option: str = "exploration") -> float:
    return arguments.real(value, option, 0.0, MAX_REAL)


def _pseudo_count(value: Any, option: str = "pseudo_count") -> float:
    return arguments.real(value, option, 0.0, MAX_REAL, above=True)


def _cache(cache: Any) -> LogitCache:
    return arguments.instance(cache, "cache", LogitCache)


def _reward(reward: Any) -> RewardSettings:
    return arguments.instance(reward, "reward", RewardSettings)


def _arms(rewards: Any, rank: Any) -> tuple[np.ndarray, np.ndarray]:
    """(rewards (A, T) float64, finite; rank (A,) int64, a permutation of the A arms)."""
    table = arguments.real_array(rewards, "rewards", ndim=2)
    if table.shape[0] < 1:
        raise ValueError(f"rewards must have one row per arm, at least one, got shape {table.shape}")
    return table, arguments.ranking(rank, "rank", table.shape[0])


def _ucb(
    rewards: np.ndarray,
    lengths: np.ndarray,
    prior: np.ndarray,
    rank: np.ndarray,
    c: np.ndarray,
    n0: np.ndarray,
    delay: int = 0,
) -> np.ndarray:
    """(G, S, T) int64: UCB's arms on S streams at once, for G (c, n0) pairs at once.

    ``rewards`` (S, A, T) normalised to [0, 1], stream s valid up to ``lengths[s]`` (the rest is padding, never
    read); ``prior`` (A,) the arms' normalised training means; ``rank`` (A,); ``c``, ``n0`` (G,). Only the played
    arm's reward of a question is read (bandit feedback), ``delay`` questions after it is played. Padding steps get
    arm -1.
    """
    n_streams, n_arms, length = rewards.shape
    grid = c.size
    plays = np.zeros((grid, n_streams, n_arms))
    sums = np.zeros((grid, n_streams, n_arms))
    chosen = np.full((grid, n_streams, length), -1, dtype=np.int64)
    pseudo = n0[:, None, None]
    weighted_prior = pseudo * prior[None, None, :]
    for t in range(length):
        revealed = t - delay  # the outcomes of questions 0 .. revealed - 1 are known
        if revealed >= 1:  # the outcome of question revealed - 1 arrives now
            played = chosen[:, :, revealed - 1]  # (G, S), -1 on padding
            g, s = np.nonzero(played >= 0)
            plays[g, s, played[g, s]] += 1.0
            sums[g, s, played[g, s]] += rewards[s, played[g, s], revealed - 1]
        counts = pseudo + plays
        bonus = c[:, None, None] * np.sqrt(2.0 * np.log1p(max(0, revealed)) / counts)
        rounded = np.round((weighted_prior + sums) / counts + bonus, SCORE_DIGITS)
        tied = rounded == rounded.max(axis=2, keepdims=True)
        arm = np.where(tied, rank, n_arms).argmin(axis=2)  # (G, S)
        active = t < lengths  # (S,)
        chosen[:, active, t] = arm[:, active]
    return chosen


def ucb_choices(
    rewards: np.ndarray,
    prior: np.ndarray,
    rank: np.ndarray,
    exploration: float,
    pseudo_count: float,
    bounds: tuple[float, float] | None = None,
    delay: int = 0,
) -> np.ndarray:
    """(T,) int64: UCB1 with a prior, on one stream of T questions over A arms, with bandit feedback.

    ``rewards`` (A, T): each arm's reward on each question (only the played arm's is read, after it is played);
    ``prior`` (A,): each arm's mean reward on the training questions; ``rank`` (A,): the tie-break
    (:func:`~ensemble_env.baselines.outcomes.prior_rank`). Rewards and prior are normalised to [0, 1] by ``bounds``,
    (low, high) (default: the default reward's, :func:`~ensemble_env.baselines.outcomes.reward_range`: (-2, 1)). Each
    arm starts with ``pseudo_count`` pseudo-plays worth its prior mean; before question t (t answered so far)
    arm k has been played m_k times for a summed normalised reward s_k, and its index is

        (n0 * prior_k + s_k) / (n0 + m_k) + c * sqrt(2 ln(1 + t) / (n0 + m_k))

    (UCB1's bonus scaled by ``exploration`` c). The highest index plays (indices rounded to
    :data:`~ensemble_env.baselines.outcomes.SCORE_DIGITS` decimals, ties to the lowest rank): the first question goes to
    the best prior. With ``delay`` d a played arm's reward is read d questions later (t counts the revealed questions
    only), as the game's decider (d = :data:`GAME_DELAY`) sees it.

    Greedy (c = 0) on a team whose training mean was +1 (normalised 1) and is now always wrong (-2, normalised 0),
    against one at 0 (normalised 2/3) now always right: the prior's 4 pseudo-plays hold for three questions (4/6
    ties 2/3, to the better rank), then the other team plays.

    >>> ucb_choices(np.array([[-2.0] * 4, [1.0] * 4]), np.array([1.0, 0.0]), np.array([0, 1]),
    ...             exploration=0.0, pseudo_count=4.0).tolist()
    [0, 0, 0, 1]
    """
    low, high = reward_range() if bounds is None else arguments.bounds(bounds)
    c, n0 = np.array([_exploration(exploration)]), np.array([_pseudo_count(pseudo_count)])
    rewards, rank = _arms(rewards, rank)
    arguments.real_array(rewards, "rewards", ndim=2, low=low, high=high)  # inside the bounds they are normalised by
    prior = arguments.real_array(prior, "prior", ndim=1, shape=(rewards.shape[0],), low=low, high=high)
    delay = _delay(delay)
    scale = (rewards - low) / (high - low)
    prior_scaled = (prior - low) / (high - low)
    lengths = np.array([rewards.shape[1]])
    return _ucb(scale[None], lengths, prior_scaled, rank, c, n0, delay)[0, 0]


# -- the protocol: checks, streams, prior ------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Protocol:
    """A validated unseen-task setting: the pooled training questions, the held-out stream and the prior."""

    cache: LogitCache
    reward: RewardSettings
    training: np.ndarray  # (P,) ascending unique: train and validation
    test: np.ndarray  # (Q,) in stream order
    outcomes: TeamOutcomes
    train_columns: np.ndarray  # (P,)
    test_columns: np.ndarray  # (Q,)
    rank: np.ndarray  # (K,) prior rank of the teams on the pooled training questions

    @property
    def teams(self) -> np.ndarray:
        return self.outcomes.teams

    def info(self, **more: Any) -> dict[str, Any]:
        names = task_names(self.cache)
        return {
            "protocol": PROTOCOL,
            "alpha": self.reward.alpha,
            "training_tasks": tuple(names[t] for t in np.unique(task_ids(self.cache)[self.training])),
            "held_out_tasks": tuple(names[t] for t, _ in _streams(task_ids(self.cache)[self.test])),
            **more,
        }

    def arm_rank(self, arms: np.ndarray) -> np.ndarray:
        """(A,) the prior rank among ``arms`` (team rows) only."""
        return np.argsort(np.argsort(self.rank[arms]))

    def training_streams(self) -> list[np.ndarray]:
        """The training tasks' questions as columns of the outcomes, one array per task, in cache order."""
        tasks = task_ids(self.cache)[self.training]
        return [self.train_columns[positions] for _, positions in _streams(tasks)]

    def held_out_streams(self) -> list[tuple[int, np.ndarray]]:
        """(task, positions in ``test``) per held-out task, in order of first appearance."""
        return _streams(task_ids(self.cache)[self.test])


def _streams(tasks: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(task, positions) for each task of ``tasks`` (Q,), in order of first appearance, positions ascending."""
    first = np.unique(tasks, return_index=True)
    order = np.argsort(first[1])
    return [(int(first[0][i]), np.flatnonzero(tasks == first[0][i])) for i in order]


def unseen_setting(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    reward: RewardSettings,
    validation: ArrayLike | None,
    outcomes: TeamOutcomes | None,
) -> _Protocol:
    cache, reward = _cache(cache), _reward(reward)
    if outcomes is not None:
        arguments.instance(outcomes, "outcomes", TeamOutcomes)
    train_rows = question_indices(cache, train, "train")
    test_rows = question_indices(cache, test, "test")
    parts = {"train": train_rows}
    if validation is not None:
        parts["validation"] = question_indices(cache, validation, "validation")
    if np.unique(test_rows).size != test_rows.size:
        raise ValueError("test holds a question twice: each question of a held-out task is answered once")
    tasks, names = task_ids(cache), task_names(cache)
    held = set(np.unique(tasks[test_rows]).tolist())
    for part, rows in parts.items():
        both = sorted(held & set(np.unique(tasks[rows]).tolist()))
        if both:
            raise ValueError(
                f"task {names[both[0]]!r} is both a held-out task (test) and a training task ({part}): the "
                "unseen-task protocol scores tasks whose questions were never seen in fitting"
            )
    training = np.unique(np.concatenate(list(parts.values())))
    if outcomes is None:
        outcomes = team_outcomes(cache, np.concatenate([training, test_rows]), reward)
    else:
        outcomes.check(cache, reward)
    train_columns, test_columns = outcomes.columns(training), outcomes.columns(test_rows)
    rank = prior_rank(
        outcomes.rewards[:, train_columns], outcomes.correct[:, train_columns], outcomes.share[:, train_columns]
    )
    return _Protocol(cache, reward, training, test_rows, outcomes, train_columns, test_columns, rank)


def team_label(cache: LogitCache, team: np.ndarray) -> str:
    return "+".join(cache.models[m] for m in np.flatnonzero(team))


def unseen_result(name: str, p: _Protocol, rows: np.ndarray, info: dict[str, Any]) -> BaselineResult:
    """The mean votes of the team rows ``rows`` (Q,) on the held-out questions, with ``info`` and the teams used."""
    counts = np.bincount(rows, minlength=p.teams.shape[0])
    used = {team_label(p.cache, p.teams[k]): int(counts[k]) for k in np.argsort(-counts, kind="stable") if counts[k]}
    return routing.team_vote(name, p.cache, p.test, p.teams[rows], {**info, "teams_used": used})


def _held_out_rewards(p: _Protocol, arms: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(A, T) the rewards of ``arms`` on the held-out questions at ``positions`` of ``test``."""
    return p.outcomes.rewards[np.ix_(arms, p.test_columns[positions])]


def stream_means(rewards: Sequence[np.ndarray], chosen: Sequence[np.ndarray]) -> float:
    """Mean over streams of the mean reward per question of the arms ``chosen`` (T,) on ``rewards`` (A, T)."""
    return float(np.mean([r[c, np.arange(c.size)].mean() for r, c in zip(rewards, chosen, strict=True)]))


# -- the baselines ------------------------------------------------------------------------------------


def _fixed(name: str, p: _Protocol, arms: np.ndarray) -> BaselineResult:
    best = arms[np.argmin(p.rank[arms])]
    train = p.train_columns
    info = p.info(
        team=team_label(p.cache, p.teams[best]),
        fitted_on="training tasks (train + validation, pooled)",
        train_reward=float(p.outcomes.rewards[best, train].mean()),
        train_accuracy=float(p.outcomes.correct[best, train].mean()),
    )
    return unseen_result(name, p, np.full(p.test.size, best), info)


def global_single(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """The single model with the best mean ``reward`` on the training questions (``train`` and ``validation``),
    answering every held-out question (ties by :func:`~ensemble_env.baselines.outcomes.prior_rank`'s keys).

    ``outcomes`` (:func:`~ensemble_env.baselines.outcomes.team_outcomes`, covering the training and test questions,
    computed under ``reward``) saves recomputing every team's outcomes
    (:func:`~ensemble_env.baselines.unseen.leave_one_task_out` shares one). Returns a result named
    ``"global_single"``, ``info["team"]`` the model, ``info["train_reward"]`` and ``info["train_accuracy"]`` its
    training scores.
    """
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    return _fixed("global_single", p, p.outcomes.singles)


def global_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """The team with the best mean ``reward`` on the training questions (pooled), answering every held-out question.

    The team :func:`~ensemble_env.baselines.routing.static_team` gives a task without train questions (same keys).
    Named ``"global_team"``; ``info`` as :func:`global_single`'s.
    """
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    return _fixed("global_team", p, np.arange(p.teams.shape[0]))


def _ftl(
    name: str, p: _Protocol, arms: np.ndarray, window: int | None, delay: int, info: dict[str, Any]
) -> BaselineResult:
    rank = p.arm_rank(arms)
    rows = np.empty(p.test.size, dtype=np.int64)
    switches: dict[str, int] = {}
    for task, positions in p.held_out_streams():
        chosen = arms[ftl_choices(_held_out_rewards(p, arms, positions), rank, window, delay)]
        rows[positions] = chosen
        switches[task_names(p.cache)[task]] = int(np.count_nonzero(np.diff(chosen)))
    first = team_label(p.cache, p.teams[arms[np.argmin(rank)]])
    return unseen_result(name, p, rows, p.info(**info, window=window, delay=delay, first_team=first, switches=switches))


def ftl_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    window: int | None = None,
    delay: int = GAME_DELAY,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """Follow the leader over teams: the t-th question of a held-out task goes to the team with the best mean
    ``reward`` on the task's questions whose outcomes are revealed when its team is committed (the last ``window``
    of them when given), ties to the prior rank (the teams' pooled training reward,
    :func:`~ensemble_env.baselines.outcomes.prior_rank`); the first questions to the global team.

    Full information: once a question's outcome is revealed every team's reward on it is known
    (:func:`ftl_choices`). ``delay`` (default :data:`GAME_DELAY`, the game's timing) is how many of the last
    answered questions are not revealed yet; ``delay=0`` reads the outcome of the question just answered, one the
    game's decider never has (``"ftl_team(no_delay)"`` in the registry). Named ``"ftl_team"``, with options
    ``"ftl_team(no_delay)"``, ``"ftl_team(window=W)"``, ``"ftl_team(window=W, delay=D)"``; ``info["first_team"]``
    is the global team, ``info["switches"]`` the number of team changes per held-out task, ``info["teams_used"]``
    the questions each team answered.
    """
    window = None if window is None else _window(window)
    delay = _delay(delay)
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    options = ([] if window is None else [f"window={window}"]) + ([] if delay == GAME_DELAY else [f"delay={delay}"])
    name = "ftl_team" + (f"({', '.join(options)})" if options else "")
    name = "ftl_team(no_delay)" if options == ["delay=0"] else name
    return _ftl(name, p, np.arange(p.teams.shape[0]), window, delay, {})


def ftl_single(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """:func:`ftl_team` over the single models: the model with the best mean reward on the task's answered
    questions, ties to the models' pooled training rank; the first question to :func:`global_single`'s model.
    Named ``"ftl_single"``."""
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    return _ftl("ftl_single", p, p.outcomes.singles, None, GAME_DELAY, {})


def ftl_team_window(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    windows: Sequence[int] = WINDOW_GRID,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """:func:`ftl_team` over a sliding window of the last W answered questions of the task, W chosen on the
    training tasks.

    Each W of ``windows`` is scored by streaming every training task from an empty history (its training questions
    in cache order; ties to the same prior rank) and taking the mean over training tasks of the mean reward per
    question; the best W wins, ties to the larger W (closer to plain follow-the-leader). The held-out labels are
    never read to choose it. Named ``"ftl_team(window)"``; ``info["window"]`` is W, ``info["window_scores"]`` the
    training score of every W tried.
    """
    grid = arguments.grid(windows, "windows", _window)
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    arms = np.arange(p.teams.shape[0])
    rank = p.arm_rank(arms)
    streams = [p.outcomes.rewards[:, columns] for columns in p.training_streams()]
    scores = {w: stream_means(streams, [ftl_choices(r, rank, w, GAME_DELAY) for r in streams]) for w in grid}
    best = max(grid, key=lambda w: (round(scores[w], SCORE_DIGITS), w))
    info = {"fitted_on": "training tasks' streams", "window_scores": scores}
    return _ftl("ftl_team(window)", p, arms, best, GAME_DELAY, info)


def ucb_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    explorations: Sequence[float] = UCB_EXPLORATION_GRID,
    pseudo_counts: Sequence[float] = UCB_PSEUDO_COUNT_GRID,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """A bandit over teams with bandit feedback: UCB1 seeing only the reward of the team it played.

    Rewards are normalised to [0, 1] by the reward's bounds (:func:`~ensemble_env.baselines.outcomes.reward_range`);
    each team starts with n0 pseudo-plays worth its mean training reward, and the index of :func:`ucb_choices`
    (exploration c) picks the team of each question (ties to the prior rank; the first question to the global team). (c,
    n0) is chosen from ``explorations`` x ``pseudo_counts`` by streaming every training task (as
    :func:`ftl_team_window`; ties to the smaller c, then the smaller n0). Deterministic. Named ``"ucb_team"``;
    ``info["exploration"]``, ``info["pseudo_count"]`` the chosen constants, ``info["grid_scores"]`` the training score
    of every pair.
    """
    c_grid = arguments.grid(explorations, "explorations", _exploration)
    n0_grid = arguments.grid(pseudo_counts, "pseudo_counts", _pseudo_count)
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    low, high = reward_range(reward)
    normalised = (p.outcomes.rewards - low) / (high - low)  # (K, Q_outcomes)
    prior = normalised[:, p.train_columns].mean(axis=1)
    pairs = [(c, n0) for c in c_grid for n0 in n0_grid]  # grid order: ties to the first
    c, n0 = (np.array(values) for values in zip(*pairs, strict=True))

    def play(streams: list[np.ndarray], grid_c: np.ndarray, grid_n0: np.ndarray) -> np.ndarray:
        lengths = np.array([columns.size for columns in streams])
        padded = np.zeros((len(streams), prior.size, int(lengths.max())))
        for s, columns in enumerate(streams):
            padded[s, :, : columns.size] = normalised[:, columns]
        return _ucb(padded, lengths, prior, p.rank, grid_c, grid_n0, GAME_DELAY)

    training = p.training_streams()
    chosen = play(training, c, n0)  # (G, S, T)
    rewards = [p.outcomes.rewards[:, columns] for columns in training]
    scores = [stream_means(rewards, [chosen[g, s, : r.shape[1]] for s, r in enumerate(rewards)]) for g in range(c.size)]
    best = max(range(c.size), key=lambda g: (round(scores[g], SCORE_DIGITS), -g))
    held = p.held_out_streams()
    picked = play([p.test_columns[positions] for _, positions in held], c[best : best + 1], n0[best : best + 1])
    rows = np.empty(p.test.size, dtype=np.int64)
    for s, (_, positions) in enumerate(held):
        rows[positions] = picked[0, s, : positions.size]
    info = p.info(
        feedback="bandit",
        delay=GAME_DELAY,
        fitted_on="training tasks' streams",
        exploration=float(c[best]),
        pseudo_count=float(n0[best]),
        grid_scores={f"c={cg:g},n0={ng:g}": score for (cg, ng), score in zip(pairs, scores, strict=True)},
        first_team=team_label(cache, p.teams[np.argmin(p.rank)]),
    )
    return unseen_result("ucb_team", p, rows, info)


def hindsight_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    outcomes: TeamOutcomes | None = None,
) -> BaselineResult:
    """The best fixed team of each held-out task in hindsight: chosen on all the task's questions, labels included.

    A reference for the headroom of an online rule (it reads the labels it is scored on), never a competitor. The
    keys of :func:`~ensemble_env.baselines.outcomes.prior_rank` on the task's questions (those of
    :func:`~ensemble_env.baselines.routing.static_team` fitted on the test questions themselves). Named
    ``"hindsight_team"``; ``info["teams"]`` maps each held-out task to its team.
    """
    p = unseen_setting(cache, train, test, reward, validation, outcomes)
    rows = np.empty(p.test.size, dtype=np.int64)
    teams: dict[str, str] = {}
    out = p.outcomes
    for task, positions in p.held_out_streams():
        columns = p.test_columns[positions]
        best = int(np.argmin(prior_rank(out.rewards[:, columns], out.correct[:, columns], out.share[:, columns])))
        rows[positions] = best
        teams[task_names(cache)[task]] = team_label(cache, p.teams[best])
    return unseen_result("hindsight_team", p, rows, p.info(uses_test_labels=True, teams=teams))


def _mean_vote(
    cache: LogitCache, train: ArrayLike, test: ArrayLike, *, outcomes: TeamOutcomes | None = None, **_: Any
) -> BaselineResult:
    """:func:`ensemble_env.baselines.mean_probability_vote` (nothing to fit) under the protocol's signature."""
    return simple.mean_probability_vote(cache, train, test)


#: the protocol's baselines, by their registry name, in the order of the tables; each is called as
#: ``function(cache, train, test, reward=..., validation=..., outcomes=...)``
UNSEEN_BASELINES: dict[str, Callable[..., BaselineResult]] = {
    "global_single": global_single,
    "global_team": global_team,
    "mean_probability_vote": _mean_vote,
    "ftl_single": ftl_single,
    "ftl_team": ftl_team,
    "ftl_team(no_delay)": functools.partial(ftl_team, delay=0),
    "ftl_team(window)": ftl_team_window,
    "ucb_team": ucb_team,
    "hindsight_team": hindsight_team,
}
