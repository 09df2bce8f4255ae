"""The dynamics of the ensemble game as numba kernels over B copies: the one implementation of a step.

:class:`ensemble_env.engine.EnsembleVectorEnv` builds the records of :mod:`ensemble_env.records` once (the
cache's read-only ``Tables``, the copies' ``CopyState``, the ``Settings``) and calls these kernels: ``step``
advances every copy by one question and writes the observations (``Outputs``); ``observe`` writes the
observations of a set of copies (after a reset); ``team_statistics`` gives the decider's window statistics.
The reward of a step is :func:`ensemble_env.reward.step_reward`; the window counts and the statistics read
from them are in :mod:`ensemble_env.window`.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.jit import kernel
from ensemble_env.records import CopyState, Counter, Info, Outputs, Settings, Tables
from ensemble_env.reward import step_reward
from ensemble_env.window import (
    CORRELATION,
    DISAGREEMENT,
    ENTROPY,
    FLEISS,
    GENERALIZED,
    PAIR_KAPPA,
    PLURALITY,
    Q_STAT,
    add_agreement,
    add_failures,
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

__all__ = ["observe", "step", "team_statistics"]


@kernel(inline="always")
def _question(env: int, ahead: int, state: CopyState, settings: Settings) -> int:
    """The question ``ahead`` steps after the one copy ``env`` answers next, or -1 past the end of its stream.

    After an episode cut by ``episode_length`` the stream goes on: the next question is the real one.
    """
    pos = state.counters[env, Counter.POS] + ahead
    if pos >= state.counters[env, Counter.STREAM]:
        return -1
    row = env if settings.per_copy_order else 0
    return state.order[row, state.counters[env, Counter.START] + pos]


@kernel(inline="always")
def _team_statistic(
    code: int,
    env: int,
    members: np.ndarray,
    team_code: int,
    tables: Tables,
    state: CopyState,
    settings: Settings,
    shared: np.ndarray,
) -> float:
    """Statistic ``code`` of copy ``env``'s team ``members`` (bit mask ``team_code``); ``shared``: (N,) scratch.

    Inlined, like every kernel helper that takes records: numba passes a record to a function it does not
    inline field by field, which costs more than the work of a small helper.
    """
    count = state.counters[env, Counter.COUNT]
    fail, fail2, window = state.fail, state.fail2, state.window
    if code == GENERALIZED:
        return generalized_diversity(env, members, count, fail, fail2)
    if code == PLURALITY:
        if count == 0 or members.shape[0] == 0:
            return 0.0
        if settings.use_table:
            return plurality_count(state.plural[env], team_code) / count
        return plurality_from_rows(env, members, count, window, tables.preds, tables.labels, tables.probs.shape[2])
    if code == FLEISS:
        return fleiss_kappa(env, members, count, state.agree, state.votes)
    if code == Q_STAT or code == CORRELATION or code == DISAGREEMENT or code == PAIR_KAPPA:
        return pairwise(env, members, count, fail, fail2, code)
    if code == ENTROPY:
        return binary_entropy(env, members, count, window, tables.correct)
    return focal_diversity(env, members, fail, fail2, state.fail3, shared)


@kernel()
def observe(env_ids: np.ndarray, tables: Tables, state: CopyState, settings: Settings, out: Outputs) -> None:
    """Write the observations of copies ``env_ids``: their current team and next question; note its focal value."""
    probs, n_choices, tasks, features = tables.probs, tables.n_choices, tables.tasks, tables.features
    team, last, layout, statistics = state.team, state.last, settings.layout, settings.statistics
    n_models, max_choices = probs.shape[1], probs.shape[2]
    scratch = np.empty((2, n_models), dtype=np.int64)  # row 0: the team's members; row 1: statistics' scratch
    for env in env_ids:
        q = _question(env, 0, state, settings)  # what the fusion agent answers next (-1: the stream is over)
        q_next = _question(env, 1, state, settings)  # what the decider's committed team answers after it
        count = state.counters[env, Counter.COUNT]
        size = 0
        team_code = 0
        for i in range(n_models):
            if team[env, i]:
                scratch[0, size] = i
                size += 1
                team_code |= 1 << i
        members = scratch[0, :size]

        decider = out.decider[env]
        decider[:] = 0.0
        for i in range(n_models):
            decider[i] = team[env, i]
        decider[n_models] = size / n_models
        focal = focal_diversity(env, members, state.fail, state.fail2, state.fail3, scratch[1])
        last[Info.FOCAL_DIVERSITY, env] = focal
        for k in range(statistics.shape[0]):
            if statistics[k] == FOCAL_CODE:
                decider[layout.decider_statistics + k] = focal
            else:
                decider[layout.decider_statistics + k] = _team_statistic(
                    statistics[k], env, members, team_code, tables, state, settings, scratch[1]
                )
        if layout.decider_model_accuracy >= 0 and count > 0:
            for i in range(n_models):
                decider[layout.decider_model_accuracy + i] = (count - state.fail[env, i]) / count
        if layout.decider_task >= 0 and q_next >= 0:
            decider[layout.decider_task + tasks[q_next]] = 1.0
        if layout.decider_features >= 0 and q_next >= 0:
            for f in range(features.shape[1]):
                decider[layout.decider_features + f] = features[q_next, f]

        fusion = out.fusion[env]
        fusion[:] = 0.0
        if q >= 0:
            for i in range(n_models):
                if team[env, i]:
                    for c in range(n_choices[q]):
                        fusion[i * max_choices + c] = probs[q, i, c]
            for c in range(n_choices[q]):
                fusion[layout.fusion_mask + c] = 1.0
            if layout.fusion_task >= 0:
                fusion[layout.fusion_task + tasks[q]] = 1.0
        else:
            for c in range(max_choices):
                fusion[layout.fusion_mask + c] = 1.0
        for i in range(n_models):
            fusion[layout.fusion_team + i] = team[env, i]
        for k in range(state.rewards.shape[1]):
            fusion[layout.fusion_rewards + k] = state.rewards[env, k]


@kernel()
def step(
    next_team: np.ndarray, answers: np.ndarray, tables: Tables, state: CopyState, settings: Settings, out: Outputs
) -> None:
    """Advance every copy by one question (see ``engine`` for the step order), then observe them all.

    ``next_team``: (B, N) uint8 the teams the decider commits; ``answers``: (B,) int64 the fusion answers.
    """
    counters, team, window, rewards, last = state.counters, state.team, state.window, state.rewards, state.last
    n_envs, n_models = team.shape
    window_length = window.shape[1]
    history = rewards.shape[1]
    carry = np.empty(state.plural.shape[2], dtype=np.uint64)
    borrow = np.empty(state.plural.shape[2], dtype=np.uint64)
    for env in range(n_envs):
        # 1. fusion answers q_t with the team E_t committed one step earlier (a copy stepped past its episode's
        #    end without a reset answers the episode's last question again)
        pos = min(counters[env, Counter.POS], settings.episode_length - 1)
        q = state.order[env if settings.per_copy_order else 0, counters[env, Counter.START] + pos]
        size = 0
        for i in range(n_models):
            size += team[env, i]
        team_cost = float(size)
        total_cost = float(n_models)
        if settings.has_costs:
            team_cost = 0.0
            total_cost = 0.0
            for i in range(n_models):
                total_cost += tables.costs[q, i]
                if team[env, i]:
                    team_cost += tables.costs[q, i]
        answer = answers[env]
        right = size > 0 and 0 <= answer < tables.n_choices[q] and answer == tables.labels[q]
        reward = step_reward(right, size, team_cost, total_cost, n_models, last[Info.FOCAL_DIVERSITY, env], settings)

        # 2. the label of q_t is revealed: q_t enters the window (the oldest question leaves a full one)
        head = counters[env, Counter.HEAD]
        full = counters[env, Counter.COUNT] == window_length
        leaving = window[env, head]
        if full:
            add_failures(env, leaving, -1, tables.failing, tables.n_failing, state.fail, state.fail2, state.fail3)
            if settings.track_agreement:
                add_agreement(env, leaving, -1, tables.preds, state.agree, state.votes)
        else:
            counters[env, Counter.COUNT] += 1
        if settings.use_table:
            table = tables.plural_table
            update_plurality(
                state.plural[env], table[tables.table_row[q]], table[tables.table_row[leaving]], full, carry, borrow
            )
        window[env, head] = q
        counters[env, Counter.HEAD] = (head + 1) % window_length
        add_failures(env, q, 1, tables.failing, tables.n_failing, state.fail, state.fail2, state.fail3)
        if settings.track_agreement:
            add_agreement(env, q, 1, tables.preds, state.agree, state.votes)

        # 3. the decider's team takes over for q_{t+1}; bookkeeping
        for i in range(n_models):
            team[env, i] = next_team[env, i]
        counters[env, Counter.POS] += 1
        counters[env, Counter.ANSWERED] += 1
        counters[env, Counter.N_CORRECT] += right
        if history > 0:
            for k in range(history - 1):
                rewards[env, k] = rewards[env, k + 1]
            rewards[env, history - 1] = reward
        last[Info.CORRECT, env] = right
        last[Info.ANSWER, env] = answer
        last[Info.LABEL, env] = tables.labels[q]
        last[Info.QUESTION, env] = q
        last[Info.TASK, env] = tables.tasks[q]
        last[Info.TEAM_SIZE, env] = size
        last[Info.COST, env] = team_cost
        last[Info.REWARD, env] = reward
        last[Info.ACCURACY, env] = counters[env, Counter.N_CORRECT] / counters[env, Counter.ANSWERED]
        last[Info.EPISODE_RETURN, env] += reward
        last[Info.STEP, env] = counters[env, Counter.POS]
        out.reward[env] = reward
        out.done[env] = counters[env, Counter.POS] >= settings.episode_length
        out.terminated[env] = counters[env, Counter.POS] >= counters[env, Counter.STREAM]
    observe(np.arange(n_envs), tables, state, settings, out)


@kernel()
def team_statistics(tables: Tables, state: CopyState, settings: Settings) -> np.ndarray:
    """(B, K) float64 statistics ``settings.statistics`` of every copy's current team over its window."""
    codes, team = settings.statistics, state.team
    n_envs = team.shape[0]
    out = np.zeros((n_envs, codes.shape[0]))
    shared = np.empty(team.shape[1], dtype=np.int64)
    for env in range(n_envs):
        members = np.flatnonzero(team[env])
        team_code = 0
        for a in range(members.shape[0]):
            team_code |= 1 << members[a]
        for k in range(codes.shape[0]):
            out[env, k] = _team_statistic(codes[k], env, members, team_code, tables, state, settings, shared)
    return out
