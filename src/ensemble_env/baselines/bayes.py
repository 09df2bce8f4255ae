"""The Bayesian rule under team feedback (issue 48): the posterior-mean team under a correlated Gaussian prior over
the teams' mean rewards on the task, fitted on the training tasks, so that observing one team updates the teams
that share its members.

**The feedback** is :mod:`ensemble_env.baselines.partial`'s: once question s of a held-out task is scored, the
reward r_k(s) of every sub-team k of the team E_s that answered it is revealed, and of no other team, in the game's
timing (:data:`~ensemble_env.baselines.online.GAME_DELAY`: the team of question t reads the questions up to
t - 2).

**The model** (:class:`TeamPrior`, :func:`fit_prior`). On a task, the K = 2^N - 1 teams have mean rewards mu (K,)
and question s gives r(s) = mu + e(s), e(s) ~ N(0, R) independent across questions. The prior is
mu ~ N(m, s^2 * Sigma_lambda), fitted on J training tasks, a_j (K,) the mean reward of every team on task j:

- m = the mean over tasks of a_j (each task weighs the same);
- S = the covariance across tasks of a_j (divisor J - 1): teams that share members rise and fall together from
  one task to the next;
- Sigma_lambda = (1 - lambda) * S + lambda * diag(S) + eps * I: S shrunk toward its diagonal by lambda (with
  11 to 15 training tasks S has rank 10 to 14 in 31 dimensions; lambda = 1 keeps no correlation) and a ridge
  eps = :data:`RIDGE` * mean(diag S) that makes it positive definite;
- R = the within-task covariance of the per-question rewards, pooled over the training tasks
  (sum_j sum_s (r(s) - a_j)(r(s) - a_j)^T / sum_j (T_j - 1)) plus :data:`RIDGE` * mean(diag R) * I: on one
  question the teams that share members are right and wrong together.

**The update** is exact: question s reveals y_s = r_O(s) on the rows O = O(E_s) (the sub-teams of E_s) with noise
N(0, R_OO), correlated across the revealed teams. The information a played team j brings depends on j alone, so
with c_j the questions team j played and revealed and Y_j their summed r_O(j), the posterior is
N(mu_post, (P0 + L)^-1), P0 = (s^2 Sigma_lambda)^-1, L = sum_j c_j R_OjOj^-1 (embedded), b = sum_j R_OjOj^-1 Y_j::

    mu_post = (P0 + L)^-1 (P0 m + b) = m + Sigma0[:, U] (I + L_UU Sigma0_UU)^-1 (b_U - L_UU m_U)

with Sigma0 = s^2 Sigma_lambda and U the teams revealed so far (L and b vanish off U): a u x u solve per question
(u the number of teams in U, at most K), never an inverse of Sigma0. A team never revealed moves by its prior
covariance with the revealed ones. With a flat prior (s -> infinity) mu_post on U is the generalised least-squares
mean; with R diagonal (or one team played throughout) that is each team's observed mean S_k / n_k
(:func:`~ensemble_env.baselines.partial.partial_statistics`).

**The rule** (:func:`bayes_choices`): the team of question t maximises mu_post given the questions revealed by
then (rounded to :data:`~ensemble_env.baselines.outcomes.SCORE_DIGITS` decimals, ties to the prior rank,
:func:`~ensemble_env.baselines.outcomes.prior_rank`); the first question goes to the prior's best team (argmax m).
Deterministic: nothing is drawn.

**Constants chosen on the training tasks** (s from :data:`PRIOR_SCALE_GRID`, lambda from
:data:`SHRINKAGE_GRID`), as every rule of :mod:`~ensemble_env.baselines.partial`
(:func:`~ensemble_env.baselines.partial.fitted_rule`): every training task is streamed whole, in cache order, from
an empty history, in the game's timing, under team feedback, with m, S and R fitted on the **other** training
tasks (and their rank for ties); the setting with the best mean over training tasks of the mean reward per question
wins, ties to the first of the grid (the smaller s, then the smaller lambda). The held-out tasks are then played
with m, S, R fitted on every training task. Held-out labels are never read. Hence at least three training tasks
(the prior of a training task's stream needs the spread of two others).
With ``choose_on="validation"`` the settings are chosen instead on the validation tasks' streams, with m, S, R
fitted on the ``train`` tasks, which then play the held-out tasks too (the mode of
:func:`~ensemble_env.baselines.partial.rule_settings`: one stream per validation task and setting, where hundreds
of generated training tasks would cost hundreds of streams per setting).

**Cost.** Fitting is one K x K scatter per task; a question costs a solve of the size of U and a K x U product (the
noise blocks R_OjOj^-1 are inverted once per played team and prior). Measured on one core (docs/baselines.md): at N = 5
(K = 31) about 35 microseconds per question (measured before L was read by flat positions, which then cut the
generated benchmark's ``bayes_team`` from 172 to 119 CPU s), 2.7 CPU seconds for a fold of the benchmark (12 training
tasks x 25 settings); at N = 10 (K = 1,023) about 0.35 ms per question while small teams play, 85 ms while the whole
pool plays (every team revealed).

>>> from ensemble_env.cache import synthetic
>>> cache = synthetic.make_cache(n_models=3, n_questions=160, n_tasks=4, seed=0)
>>> held = cache.select(tasks=["task_0"])
>>> train = np.setdiff1d(np.arange(cache.n_questions), held)
>>> result = bayes_team(cache, train, held)
>>> result.name, result.n_questions, result.info["feedback"], sorted(result.info)[-3:]
('bayes_team', 40, 'team', ['switches', 'teams_used', 'training_tasks'])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines import arguments
from ensemble_env.baselines.online import GAME_DELAY, MAX_DELAY
from ensemble_env.baselines.outcomes import SCORE_DIGITS, TeamOutcomes
from ensemble_env.baselines.partial import MAX_CONSTANT, contained_teams, fitted_rule, rule_settings, training_priors
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings

__all__ = [
    "PRIOR_SCALE_GRID",
    "RIDGE",
    "SHRINKAGE_GRID",
    "TeamPrior",
    "bayes_choices",
    "bayes_team",
    "fit_prior",
    "posterior_means",
]

#: the prior scales s tried on the training tasks: the prior covariance is s^2 * Sigma_lambda (s < 1 trusts the
#: training tasks more than their spread says, s > 1 the task's own record more)
PRIOR_SCALE_GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
#: the shrinkages lambda of the prior covariance toward its diagonal tried on the training tasks (0: the training
#: tasks' covariance as it is, 1: no correlation between teams)
SHRINKAGE_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
#: the ridge of both covariances, relative to the mean of their diagonal (absolute when that is 0)
RIDGE = 1e-3


def _ridge(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` + :data:`RIDGE` * mean(diag) * I (+ RIDGE * I when the diagonal's mean is 0)."""
    level = float(np.mean(np.diag(matrix)))
    return matrix + RIDGE * (level if level > 0 else 1.0) * np.eye(matrix.shape[0])


def _symmetric(value: Any, option: str, size: int) -> np.ndarray:
    """A finite symmetric (size, size) array, else a ValueError naming ``option``."""
    matrix = arguments.real_array(value, option, ndim=2, shape=(size, size))
    if np.abs(matrix - matrix.T).max(initial=0.0) > 1e-9 * max(1.0, float(np.abs(matrix).max(initial=0.0))):
        raise ValueError(f"{option} must be symmetric, got a ({size}, {size}) array that is not")
    return matrix


@dataclass(frozen=True, eq=False)
class TeamPrior:
    """A correlated Gaussian model of the K teams' mean rewards on a task, fitted on some tasks (:func:`fit_prior`).

    ``mean`` (K,): m, the mean over the tasks of each team's mean reward; ``between`` (K, K): S, the covariance
    across the tasks of those means (positive semi-definite: positive definite once :data:`RIDGE` is added);
    ``noise`` (K, K): R, the within-task covariance of the per-question rewards, pooled over the tasks, ridge
    included (positive definite). Checked on construction (shapes, finite, symmetric, definite): a ValueError names
    the field.
    """

    mean: np.ndarray
    between: np.ndarray
    noise: np.ndarray

    def __post_init__(self) -> None:
        mean = arguments.real_array(self.mean, "mean", ndim=1)
        if mean.size < 1:
            raise ValueError("mean must hold one team at least, got an empty array")
        between = _symmetric(self.between, "between", mean.size)
        noise = _symmetric(self.noise, "noise", mean.size)
        for matrix, option, what in ((noise, "noise", "definite"), (_ridge(between), "between", "semi-definite")):
            try:
                np.linalg.cholesky(matrix)
            except np.linalg.LinAlgError:
                raise ValueError(f"{option} must be positive {what} (a covariance)") from None
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "between", between)
        object.__setattr__(self, "noise", noise)

    @property
    def n_teams(self) -> int:
        """K, the number of teams."""
        return int(self.mean.size)

    def covariance(self, shrinkage: float) -> np.ndarray:
        """(K, K) Sigma_lambda = (1 - lambda) * S + lambda * diag(S) + ridge (:data:`RIDGE`), lambda ``shrinkage``
        in [0, 1]: the prior covariance at s = 1 (positive definite)."""
        weight = arguments.real(shrinkage, "shrinkage", 0.0, 1.0)
        shrunk = (1.0 - weight) * self.between + weight * np.diag(np.diag(self.between))
        return _ridge(shrunk)


def _task_moments(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a (K,), scatter (K, K)): one task's mean reward per team and the summed outer products of its deviations."""
    mean = rewards.mean(axis=1)
    centred = rewards - mean[:, None]
    return mean, centred @ centred.T


def _prior(means: np.ndarray, scatter: np.ndarray, degrees: int) -> TeamPrior:
    """The :class:`TeamPrior` of task means (J, K), J >= 2, a pooled ``scatter`` of ``degrees`` degrees of freedom."""
    between = np.cov(means, rowvar=False, ddof=1).reshape(means.shape[1], -1)
    return TeamPrior(means.mean(axis=0), between, _ridge(scatter / degrees))


def _streams(streams: Any, option: str) -> list[np.ndarray]:
    """Each task's rewards (K, T_j) as float64, the same K, at least two tasks and one degree of freedom within."""
    if isinstance(streams, str | bytes) or not isinstance(streams, Iterable):
        raise ValueError(f"{option} must be a list of (K, T) reward arrays, one per task, got {type(streams).__name__}")
    items = [arguments.real_array(stream, f"{option}[{i}]", ndim=2) for i, stream in enumerate(streams)]
    if len(items) < 2:
        found = len(items)
        raise ValueError(
            f"{option} must hold the rewards of two tasks at least (their spread is the prior's), got {found}"
        )
    for i, item in enumerate(items):
        if item.shape[0] != items[0].shape[0] or item.shape[1] < 1:
            raise ValueError(f"{option}[{i}] must be ({items[0].shape[0]}, T) with T >= 1 questions, got {item.shape}")
    if sum(item.shape[1] - 1 for item in items) < 1:
        raise ValueError(f"{option}: the within-task covariance needs a task of two questions at least")
    return items


def fit_prior(streams: Iterable[ArrayLike]) -> TeamPrior:
    """The :class:`TeamPrior` fitted on some tasks: ``streams`` holds each task's rewards (K, T_j), every team's
    reward on each of its questions (two tasks at least, all of K teams).

    >>> prior = fit_prior([np.array([[1.0, -1.0], [1.0, 1.0]]), np.array([[1.0, 1.0], [-1.0, -1.0]])])
    >>> prior.mean.tolist(), prior.between.tolist()
    ([0.5, 0.0], [[0.5, -1.0], [-1.0, 2.0]])
    """
    items = _streams(streams, "streams")
    moments = [_task_moments(item) for item in items]
    scatter = np.sum([scatter for _, scatter in moments], axis=0)
    return _prior(np.stack([mean for mean, _ in moments]), scatter, sum(item.shape[1] - 1 for item in items))


def _leave_one_out(streams: list[np.ndarray]) -> list[TeamPrior]:
    """The prior of each task's stream fitted on the *other* tasks (J >= 3)."""
    moments = [_task_moments(stream) for stream in streams]
    means = np.stack([mean for mean, _ in moments])
    total = np.sum([scatter for _, scatter in moments], axis=0)
    degrees = sum(stream.shape[1] - 1 for stream in streams)
    return [
        _prior(np.delete(means, j, axis=0), total - moments[j][1], degrees - (streams[j].shape[1] - 1))
        for j in range(len(streams))
    ]


# -- the posterior, one revealed question at a time ------------------------------------------------------------------


class _Noise:
    """The noise blocks of one prior: ``block(j)`` -> (rows O_j, R_OjOj^-1, the flat positions of O_j x O_j in a
    K x K array), inverted once per played team j."""

    def __init__(self, noise: np.ndarray, contains: np.ndarray) -> None:
        self.noise, self.contains = noise, contains
        self.blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def block(self, team: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if team not in self.blocks:
            rows = np.flatnonzero(self.contains[team])
            inverse = np.linalg.inv(self.noise[np.ix_(rows, rows)])
            self.blocks[team] = rows, inverse, _flat(rows, self.noise.shape[0])
        return self.blocks[team]


def _flat(rows: np.ndarray, size: int) -> np.ndarray:
    """The flat positions of ``rows`` x ``rows`` in a (size, size) array, row-major."""
    return (rows[:, None] * size + rows[None, :]).ravel()


class _Posterior:
    """The posterior mean of the teams' mean rewards on one stream: prior N(``mean``, ``covariance``), revealed
    questions added by :meth:`reveal` (information L and b over the revealed teams U; what is read of the prior on
    U is cut once each time U grows)."""

    def __init__(self, mean: np.ndarray, covariance: np.ndarray, noise: _Noise) -> None:
        size = mean.size
        self.prior, self.covariance, self.noise = mean, covariance, noise
        self.revealed = np.zeros(size, dtype=bool)
        self.rows = np.zeros(0, dtype=np.int64)
        self.information = np.zeros(size * size)  # L, flat (K * K)
        self.linear = np.zeros(size)
        self.cross = np.zeros((size, 0))  # Sigma0[:, U]
        self.square = np.zeros((0, 0))  # Sigma0[U, U]
        self.square_flat = np.zeros(0, dtype=np.int64)  # the flat positions of U x U
        self.current = mean.copy()
        self.stale = False

    def reveal(self, team: int, rewards: np.ndarray) -> None:
        """Add a question answered by ``team`` (a row): the rewards (K,) of its sub-teams are read, no other."""
        rows, inverse, flat = self.noise.block(team)
        self.information[flat] += inverse.ravel()
        self.linear[rows] += inverse @ rewards[rows]
        if not self.revealed[rows].all():
            self.revealed[rows] = True
            self.rows = np.flatnonzero(self.revealed)
            self.cross = self.covariance[:, self.rows]
            self.square = self.cross[self.rows]
            self.square_flat = _flat(self.rows, self.prior.size)
        self.stale = True

    def means(self) -> np.ndarray:
        """(K,) the posterior mean m + Sigma0[:, U] (I + L_UU Sigma0_UU)^-1 (b_U - L_UU m_U)."""
        if self.stale:
            rows = self.rows
            information = self.information[self.square_flat].reshape(rows.size, rows.size)
            system = information @ self.square
            system.flat[:: rows.size + 1] += 1.0
            residual = self.linear[rows] - information @ self.prior[rows]
            self.current = self.prior + self.cross @ np.linalg.solve(system, residual)
            self.stale = False
        return self.current


def _best(means: np.ndarray, rank: np.ndarray) -> int:
    """The team of the highest mean (rounded to SCORE_DIGITS decimals), ties to the lowest ``rank``."""
    rounded = np.round(means, SCORE_DIGITS)
    top = np.flatnonzero(rounded == rounded.max())
    return int(top[0]) if top.size == 1 else int(top[np.argmin(rank[top])])


def _choices(rewards: np.ndarray, posterior: _Posterior, rank: np.ndarray, delay: int) -> np.ndarray:
    """(T,) the team rows the rule plays on one stream (``rewards`` (K, T)), revealing each ``delay`` questions on."""
    chosen = np.empty(rewards.shape[1], dtype=np.int64)
    for t in range(rewards.shape[1]):
        if t - delay >= 1:  # the outcome of question t - delay - 1 arrives now
            posterior.reveal(int(chosen[t - delay - 1]), rewards[:, t - delay - 1])
        chosen[t] = _best(posterior.means(), rank)
    return chosen


# -- one stream: the public forms, checked -----------------------------------------------------------------------


def _scale(value: Any, option: str = "scale") -> float:
    return arguments.real(value, option, 0.0, MAX_CONSTANT, above=True)


def _shrinkage(value: Any, option: str = "shrinkage") -> float:
    return arguments.real(value, option, 0.0, 1.0)


def _checked(
    rewards: ArrayLike, teams: np.ndarray, prior: TeamPrior, scale: float, shrinkage: float, delay: int
) -> tuple[np.ndarray, _Posterior, int]:
    """(rewards (K, T), the empty posterior, delay) after the checks of :func:`posterior_means`' arguments."""
    prior = arguments.instance(prior, "prior", TeamPrior)
    size = prior.n_teams
    teams = arguments.bool_array(teams, "teams", shape=(size, None))
    table = arguments.real_array(rewards, "rewards", ndim=2, shape=(size, None))
    covariance = _scale(scale) ** 2 * prior.covariance(_shrinkage(shrinkage))
    posterior = _Posterior(prior.mean, covariance, _Noise(prior.noise, contained_teams(teams)))
    return table, posterior, arguments.whole(delay, "delay", 0, MAX_DELAY)


def posterior_means(
    rewards: ArrayLike,
    teams: np.ndarray,
    played: ArrayLike,
    prior: TeamPrior,
    *,
    scale: float,
    shrinkage: float,
    delay: int = GAME_DELAY,
) -> np.ndarray:
    """(T, K): the posterior mean of every team's mean reward when the team of each question of one stream is
    committed, the teams ``played`` (T,) having answered (the analogue of
    :func:`~ensemble_env.baselines.partial.partial_statistics`).

    ``rewards`` (K, T): every team's reward on each question (only the played teams' sub-teams' are read,
    ``delay`` + 1 questions later); ``teams`` (K, N) bool; ``prior`` a :class:`TeamPrior` of K teams, taken as
    N(m, ``scale``^2 * ``prior.covariance(shrinkage)``) with noise ``prior.noise``. Row t is the exact Gaussian
    posterior mean given the questions s <= t - 1 - ``delay`` (the module's docstring).

    One model, prior N(0, 1) and noise variance 1 (ridge aside): two rewards of +1 give the posterior mean
    (0 / 1 + 2 / 1) / (1 / 1 + 2 / 1) = 2 / 3.

    >>> prior = TeamPrior(np.zeros(1), np.ones((1, 1)), np.ones((1, 1)))
    >>> posterior_means(np.ones((1, 3)), np.ones((1, 1), bool), [0, 0, 0], prior, scale=1.0, shrinkage=0.0,
    ...                 delay=0).round(3).tolist()
    [[0.0], [0.5], [0.667]]
    """
    table, posterior, delay = _checked(rewards, teams, prior, scale, shrinkage, delay)
    rows = np.asarray(played)
    if rows.shape != (table.shape[1],) or rows.dtype.kind not in "iu" or not np.all((rows >= 0) & (rows < len(table))):
        last, got = len(table) - 1, f"{rows.dtype} of shape {rows.shape}"
        raise ValueError(f"played must hold one team row in 0..{last} per question of the stream, got {got}")
    means = np.empty(table.shape[::-1])
    for t in range(table.shape[1]):
        if t - delay >= 1:
            posterior.reveal(int(rows[t - delay - 1]), table[:, t - delay - 1])
        means[t] = posterior.means()
    return means


def bayes_choices(
    rewards: ArrayLike,
    teams: np.ndarray,
    prior: TeamPrior,
    rank: ArrayLike,
    *,
    scale: float,
    shrinkage: float,
    delay: int = GAME_DELAY,
) -> np.ndarray:
    """(T,) int64: the team rows :func:`bayes_team`'s rule plays on one stream of T questions, under team feedback.

    The team of question t maximises :func:`posterior_means`' row t (given the teams the rule played before),
    rounded to :data:`~ensemble_env.baselines.outcomes.SCORE_DIGITS` decimals, ties to the lowest ``rank`` (K,)
    (:func:`~ensemble_env.baselines.outcomes.prior_rank`, 0 first); the first question (nothing revealed) to the
    prior's best team. Arguments as :func:`posterior_means`'.

    Two models: {a} (prior mean 0.5) is wrong on every question (-1), {b} (0.2) right (+1), the pair (0.1) as b;
    prior variances 0.01, noise variance 0.25. With the teams independent (lambda = 1) {a}'s record pulls its mean
    down, but not below b's untried 0.2 in this stream. With the teams' means correlated across tasks (correlation
    0.9 between {b} and the pair, -0.9 between {a} and each: lambda = 0), {a}'s record says {b} is good: {b} plays
    once three questions are revealed (the fifth question, in the game's timing).

    >>> stream = np.array([[-1.0] * 6, [1.0] * 6, [1.0] * 6])  # {a}, {b}, {a, b}
    >>> teams = np.array([[1, 0], [0, 1], [1, 1]], bool)
    >>> between = 0.01 * np.array([[1.0, -0.9, -0.9], [-0.9, 1.0, 0.9], [-0.9, 0.9, 1.0]])
    >>> prior = TeamPrior(np.array([0.5, 0.2, 0.1]), between, 0.25 * np.eye(3))
    >>> bayes_choices(stream, teams, prior, [0, 1, 2], scale=1.0, shrinkage=1.0).tolist()
    [0, 0, 0, 0, 0, 0]
    >>> bayes_choices(stream, teams, prior, [0, 1, 2], scale=1.0, shrinkage=0.0).tolist()
    [0, 0, 0, 0, 1, 1]
    """
    table, posterior, delay = _checked(rewards, teams, prior, scale, shrinkage, delay)
    return _choices(table, posterior, arguments.ranking(rank, "rank", len(table)), delay)


# -- the rule on the protocol -----------------------------------------------------------------------------------------


def _player(p: Any, settings: tuple[dict[str, float], ...], streams: list[np.ndarray], training: bool) -> np.ndarray:
    """:func:`bayes_choices` as a :data:`~ensemble_env.baselines.partial.Player`: each training task's stream with
    the prior of the other training tasks, the held-out tasks' with the prior of every training task."""
    out: TeamOutcomes = p.outcomes
    contains = contained_teams(p.teams)
    rewards = [out.rewards[:, columns] for columns in streams]
    if training:
        priors = _leave_one_out(rewards)
        ranks = training_priors(p, streams)[1]
    else:
        priors = [fit_prior([out.rewards[:, columns] for columns in p.training_streams()])] * len(streams)
        ranks = np.repeat(p.rank[None], len(streams), axis=0)
    chosen = np.full((len(settings), len(streams), max(r.shape[1] for r in rewards)), -1, dtype=np.int64)
    for s, stream in enumerate(rewards):
        noise = _Noise(priors[s].noise, contains)
        shrunk: dict[float, np.ndarray] = {}
        for g, setting in enumerate(settings):
            covariance = shrunk.setdefault(setting["lambda"], priors[s].covariance(setting["lambda"]))
            posterior = _Posterior(priors[s].mean, setting["s"] ** 2 * covariance, noise)
            chosen[g, s, : stream.shape[1]] = _choices(stream, posterior, ranks[s], GAME_DELAY)
    return chosen


def bayes_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    validation: ArrayLike | None = None,
    scales: Iterable[float] = PRIOR_SCALE_GRID,
    shrinkages: Iterable[float] = SHRINKAGE_GRID,
    outcomes: TeamOutcomes | None = None,
    choose_on: str = "training",
) -> BaselineResult:
    """The Bayesian rule under team feedback: each question of a held-out task goes to the team of the highest
    posterior mean reward under a correlated Gaussian prior over the teams' mean rewards fitted on the training
    tasks (:func:`bayes_choices`; the model and the update in the module's docstring), ties to the prior rank; the
    first question to the prior's best team.

    (s, lambda) from ``scales`` x ``shrinkages`` is chosen on the training tasks' streams, each with the prior of
    the other training tasks (ties to the smaller s, then the smaller lambda): at least three training tasks
    (``train`` and ``validation``), else a ValueError. With ``choose_on="validation"``
    (:data:`~ensemble_env.baselines.partial.CHOOSE_ON`) it is chosen on the validation tasks' streams with the prior
    fitted on the ``train`` tasks, which then plays the held-out tasks: at least two ``train`` tasks. ``outcomes``
    as :func:`~ensemble_env.baselines.online.global_team`'s. Deterministic. Named ``"bayes_team"``;
    ``info["prior_scale"]`` s, ``info["shrinkage"]`` lambda, ``info["grid_scores"]`` (the score of every setting,
    ``"s=1,lambda=0.5"``), ``info["first_team"]``, ``info["switches"]``, ``info["teams_used"]``.
    """
    grids: dict[str, list[Any]] = {"s": arguments.grid(scales, "scales", _scale)}
    grids["lambda"] = arguments.grid(shrinkages, "shrinkages", _shrinkage)
    p, on_validation = rule_settings(cache, train, test, reward, validation, outcomes, choose_on)
    found = len(p.training_streams())
    if on_validation is None and found < 3:
        raise ValueError(
            "bayes_team chooses its constants by streaming each training task with a prior fitted on the spread of "
            f"the other training tasks: give at least three training tasks (train and validation), got {found}"
        )
    if found < 2:
        raise ValueError(
            "bayes_team fits its prior on the spread of the train tasks (choose_on='validation'): give at least two "
            f"train tasks, got {found}"
        )
    return fitted_rule("bayes_team", p, grids, _player, validation=on_validation)
