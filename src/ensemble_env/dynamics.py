"""The dynamics of the ensemble game as numba kernels over B copies (the one implementation).

:class:`ensemble_env.engine.EnsembleVectorEnv` owns the arrays and validates actions; these kernels advance
every copy by one question and write the observations. Arrays are grouped as:

- *tables* (read-only, per question): ``probs`` (Q, N, C) float32, ``n_choices``, ``labels``, ``tasks``,
  ``n_failing`` and ``table_row`` (Q,) int32 (columns of one (Q, 5) block, so that a question's integers
  share a cache line), ``preds`` (Q, N), ``correct`` (Q, N) uint8, ``failing`` (Q, N) uint8 the failing
  models first, ``costs`` (Q, N) (read only if the cache has costs), ``features`` (Q, F) float32 and
  ``plural_table`` (rows, 2^N / 64) uint64 bits (see :func:`ensemble_env.window.plurality_table`);
- *state* (per copy): ``order`` int32/``counters`` (where each copy is in its stream), ``team`` (B, N) uint8,
  ``window`` (B, T) int32 the question ids of the window (a ring), the window counts of
  :mod:`ensemble_env.window`, ``rewards`` (B, T') the reward history, ``last`` (12, B) the info values
  (what the last step did, the accuracy and return so far, the focal diversity of the current team);
- *config*: ``settings`` (float64) and ``switches`` (int64), indexed by the constants below, ``statistics``
  (K,) the statistic codes of the decider's observation, ``offsets`` where each part of the observations
  starts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ensemble_env.window import (
    CORRELATION,
    DISAGREEMENT,
    ENTROPY,
    FLEISS,
    GENERALIZED,
    PAIR_KAPPA,
    PLURALITY,
    Q_STAT,
    add_question,
    binary_entropy,
    fleiss_kappa,
    focal_diversity,
    generalized_diversity,
    pairwise,
    plurality_count,
    plurality_from_rows,
    update_plurality,
)
from ensemble_env.window import (
    FOCAL as FOCAL_CODE,
)

# counters (B, 6) int64
START, POS, HEAD, COUNT, ANSWERED, N_CORRECT = range(6)
# last (12, B) float64: the info values (what the last step did, the episode so far), ``engine.INFO_KEYS``
CORRECT, ANSWER, LABEL, QUESTION, TASK, TEAM_SIZE, COST, REWARD, ACCURACY, RETURN, FOCAL, STEP = range(12)
# settings float64
ALPHA, BONUS = range(2)
# switches int64
(
    EPISODE_LENGTH,
    ALWAYS_PENALISE,
    USE_COSTS,
    PER_COPY_ORDER,
    USE_TABLE,
    TRACK_AGREEMENT,
    HAS_COSTS,
) = range(7)
# offsets int64 (-1: part absent)
D_STATS, D_MODEL_ACCURACY, D_TASK, D_FEATURES, F_TEAM, F_REWARDS, F_MASK, F_TASK = range(8)


@njit(cache=True)
def binary_teams(bits: np.ndarray) -> tuple[np.ndarray, int]:
    """(B, N) uint8 copy of 0/1 decider actions, and the flat index of the first other value (-1 if none)."""
    n_envs, n_models = bits.shape
    teams = np.empty((n_envs, n_models), dtype=np.uint8)
    for env in range(n_envs):
        for i in range(n_models):
            value = bits[env, i]
            if value == 1:
                teams[env, i] = 1
            elif value == 0:
                teams[env, i] = 0
            else:
                return teams, env * n_models + i
    return teams, -1


@njit(cache=True)
def _question(env: int, order: np.ndarray, counters: np.ndarray, switches: np.ndarray) -> int:
    """The question copy ``env`` answers next (clamped to the last one after the episode's end)."""
    pos = min(counters[env, POS], switches[EPISODE_LENGTH] - 1)
    row = env if switches[PER_COPY_ORDER] else 0
    return order[row, counters[env, START] + pos]


@njit(cache=True)
def _team_statistic(
    code: int,
    env: int,
    members: np.ndarray,
    team_code: int,
    count: int,
    window: np.ndarray,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
    plural: np.ndarray,
    agree: np.ndarray,
    votes: np.ndarray,
    preds: np.ndarray,
    labels: np.ndarray,
    correct: np.ndarray,
    use_table: bool,
    n_classes: int,
    shared: np.ndarray,
) -> float:
    if code == GENERALIZED:
        return generalized_diversity(env, members, count, fail, fail2)
    if code == PLURALITY:
        if count == 0 or members.shape[0] == 0:
            return 0.0
        if use_table:
            return plurality_count(plural[env], team_code) / count
        return plurality_from_rows(env, members, count, window, preds, labels, n_classes)
    if code == FLEISS:
        return fleiss_kappa(env, members, count, agree, votes)
    if code == Q_STAT or code == CORRELATION or code == DISAGREEMENT or code == PAIR_KAPPA:
        return pairwise(env, members, count, fail, fail2, code)
    if code == ENTROPY:
        return binary_entropy(env, members, count, window, correct)
    return focal_diversity(env, members, fail, fail2, fail3, shared)


@njit(cache=True)
def observe(
    env_ids: np.ndarray,
    probs: np.ndarray,
    n_choices: np.ndarray,
    labels: np.ndarray,
    tasks: np.ndarray,
    preds: np.ndarray,
    correct: np.ndarray,
    features: np.ndarray,
    order: np.ndarray,
    counters: np.ndarray,
    team: np.ndarray,
    window: np.ndarray,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
    plural: np.ndarray,
    agree: np.ndarray,
    votes: np.ndarray,
    rewards: np.ndarray,
    last: np.ndarray,
    switches: np.ndarray,
    statistics: np.ndarray,
    offsets: np.ndarray,
    out_decider: np.ndarray,
    out_fusion: np.ndarray,
) -> None:
    """Write the observations of copies ``env_ids``: their current team and next question; note its focal value."""
    n_models, max_choices = probs.shape[1], probs.shape[2]
    use_table = switches[USE_TABLE] != 0
    scratch = np.empty((2, n_models), dtype=np.int64)  # row 0: the team's members; row 1: statistics' scratch
    for env in env_ids:
        live = counters[env, POS] < switches[EPISODE_LENGTH]
        q = _question(env, order, counters, switches)
        count = counters[env, COUNT]
        size = 0
        team_code = 0
        for i in range(n_models):
            if team[env, i]:
                scratch[0, size] = i
                size += 1
                team_code |= 1 << i
        members = scratch[0, :size]

        decider = out_decider[env]
        decider[:] = 0.0
        for i in range(n_models):
            decider[i] = team[env, i]
        decider[n_models] = size / n_models
        focal = focal_diversity(env, members, fail, fail2, fail3, scratch[1])
        last[FOCAL, env] = focal
        for k in range(statistics.shape[0]):
            if statistics[k] == FOCAL_CODE:
                decider[offsets[D_STATS] + k] = focal
                continue
            decider[offsets[D_STATS] + k] = _team_statistic(
                statistics[k], env, members, team_code, count, window, fail, fail2, fail3, plural, agree, votes,
                preds, labels, correct, use_table, max_choices, scratch[1],
            )  # fmt: skip
        if offsets[D_MODEL_ACCURACY] >= 0 and count > 0:
            for i in range(n_models):
                decider[offsets[D_MODEL_ACCURACY] + i] = (count - fail[env, i]) / count
        if offsets[D_TASK] >= 0 and live:
            decider[offsets[D_TASK] + tasks[q]] = 1.0
        if offsets[D_FEATURES] >= 0 and live:
            for f in range(features.shape[1]):
                decider[offsets[D_FEATURES] + f] = features[q, f]

        fusion = out_fusion[env]
        fusion[:] = 0.0
        if live:
            for i in range(n_models):
                if team[env, i]:
                    for c in range(n_choices[q]):
                        fusion[i * max_choices + c] = probs[q, i, c]
            for c in range(n_choices[q]):
                fusion[offsets[F_MASK] + c] = 1.0
            if offsets[F_TASK] >= 0:
                fusion[offsets[F_TASK] + tasks[q]] = 1.0
        else:
            for c in range(max_choices):
                fusion[offsets[F_MASK] + c] = 1.0
        for i in range(n_models):
            fusion[offsets[F_TEAM] + i] = team[env, i]
        for k in range(rewards.shape[1]):
            fusion[offsets[F_REWARDS] + k] = rewards[env, k]


@njit(cache=True)
def step(
    next_team: np.ndarray,
    answers: np.ndarray,
    probs: np.ndarray,
    n_choices: np.ndarray,
    labels: np.ndarray,
    tasks: np.ndarray,
    preds: np.ndarray,
    correct: np.ndarray,
    failing: np.ndarray,
    n_failing: np.ndarray,
    costs: np.ndarray,
    features: np.ndarray,
    table_row: np.ndarray,
    plural_table: np.ndarray,
    order: np.ndarray,
    counters: np.ndarray,
    team: np.ndarray,
    window: np.ndarray,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
    plural: np.ndarray,
    agree: np.ndarray,
    votes: np.ndarray,
    rewards: np.ndarray,
    last: np.ndarray,
    settings: np.ndarray,
    switches: np.ndarray,
    statistics: np.ndarray,
    offsets: np.ndarray,
    out_decider: np.ndarray,
    out_fusion: np.ndarray,
    out_reward: np.ndarray,
    out_done: np.ndarray,
) -> None:
    """Advance every copy by one question (see ``engine`` for the step order), then observe them all."""
    n_envs, n_models = team.shape
    window_length = window.shape[1]
    history = rewards.shape[1]
    use_table = switches[USE_TABLE] != 0
    track_agreement = switches[TRACK_AGREEMENT] != 0
    carry = np.empty(plural.shape[2], dtype=np.uint64)
    borrow = np.empty(plural.shape[2], dtype=np.uint64)
    for env in range(n_envs):
        # 1. fusion answers q_t with the team E_t committed one step earlier
        q = _question(env, order, counters, switches)
        size = 0
        for i in range(n_models):
            size += team[env, i]
        if switches[HAS_COSTS]:
            team_cost = 0.0
            total_cost = 0.0
            for i in range(n_models):
                total_cost += costs[q, i]
                if team[env, i]:
                    team_cost += costs[q, i]
        else:
            team_cost = float(size)
            total_cost = float(n_models)
        answer = answers[env]
        right = size > 0 and 0 <= answer < n_choices[q] and answer == labels[q]
        if switches[USE_COSTS]:
            share = team_cost / total_cost if total_cost > 0 else 0.0
        else:
            share = size / n_models
        penalty = settings[ALPHA] * share
        if switches[ALWAYS_PENALISE]:
            reward = (1.0 if right else -1.0) - penalty
        else:
            reward = 1.0 if right else -1.0 - penalty
        reward += settings[BONUS] * last[FOCAL, env]

        # 2. the label of q_t is revealed: q_t enters the window (the oldest question leaves a full one)
        head = counters[env, HEAD]
        full = counters[env, COUNT] == window_length
        leaving = window[env, head]
        if full:
            add_question(env, leaving, -1, failing, n_failing, preds, fail, fail2, fail3, agree, votes, track_agreement)
        else:
            counters[env, COUNT] += 1
        if use_table:
            update_plurality(
                plural[env], plural_table[table_row[q]], plural_table[table_row[leaving]], full, carry, borrow
            )
        window[env, head] = q
        counters[env, HEAD] = (head + 1) % window_length
        add_question(env, q, 1, failing, n_failing, preds, fail, fail2, fail3, agree, votes, track_agreement)

        # 3. the decider's team takes over for q_{t+1}; bookkeeping
        for i in range(n_models):
            team[env, i] = next_team[env, i]
        counters[env, POS] += 1
        counters[env, ANSWERED] += 1
        counters[env, N_CORRECT] += right
        if history > 0:
            for k in range(history - 1):
                rewards[env, k] = rewards[env, k + 1]
            rewards[env, history - 1] = reward
        last[CORRECT, env] = right
        last[ANSWER, env] = answer
        last[LABEL, env] = labels[q]
        last[QUESTION, env] = q
        last[TASK, env] = tasks[q]
        last[TEAM_SIZE, env] = size
        last[COST, env] = team_cost
        last[REWARD, env] = reward
        last[ACCURACY, env] = counters[env, N_CORRECT] / counters[env, ANSWERED]
        last[RETURN, env] += reward
        last[STEP, env] = counters[env, POS]
        out_reward[env] = reward
        out_done[env] = counters[env, POS] >= switches[EPISODE_LENGTH]
    observe(
        np.arange(n_envs), probs, n_choices, labels, tasks, preds, correct, features, order, counters, team,
        window, fail, fail2, fail3, plural, agree, votes, rewards, last, switches, statistics, offsets, out_decider,
        out_fusion,
    )  # fmt: skip


@njit(cache=True)
def team_statistics(
    codes: np.ndarray,
    preds: np.ndarray,
    labels: np.ndarray,
    correct: np.ndarray,
    team: np.ndarray,
    counters: np.ndarray,
    window: np.ndarray,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
    plural: np.ndarray,
    agree: np.ndarray,
    votes: np.ndarray,
    use_table: bool,
    n_classes: int,
) -> np.ndarray:
    """(B, K) float64 statistics ``codes`` of every copy's current team over its window."""
    n_envs = team.shape[0]
    out = np.zeros((n_envs, codes.shape[0]))
    shared = np.empty(team.shape[1], dtype=np.int64)
    for env in range(n_envs):
        members = np.flatnonzero(team[env])
        team_code = 0
        for a in range(members.shape[0]):
            team_code |= 1 << members[a]
        for k in range(codes.shape[0]):
            out[env, k] = _team_statistic(
                codes[k], env, members, team_code, counters[env, COUNT], window, fail, fail2, fail3, plural,
                agree, votes, preds, labels, correct, use_table, n_classes, shared,
            )  # fmt: skip
    return out
