"""The dynamics of the ensemble game as numba kernels over B copies: the one implementation of a step.

:class:`ensemble_env.game.engine.EnsembleVectorEnv` builds the records of :mod:`ensemble_env.game.records` once (the
cache's read-only ``Tables``, the copies' ``CopyState``, the ``Settings``) and calls these kernels: ``step``
advances every copy by one question and writes the observations (``Outputs``); ``observe`` writes the
observations of a set of copies (after a reset); ``team_statistics`` gives the decider's window statistics.
For RLAE (``fusion_action="weights"``), ``weighted_answers`` turns the weights into the answers ``step`` takes,
and ``observe_models`` writes the per-model agents' observations (``fusion_agents="per_model"``).
The reward of a step is :func:`ensemble_env.game.reward.step_reward`; the window counts and the statistics read
from them are in :mod:`ensemble_env.game.window`.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.game.jit import kernel
from ensemble_env.game.records import CopyState, Counter, Info, Outputs, Settings, Tables
from ensemble_env.game.reward import step_reward
from ensemble_env.game.window import (
    ENTROPY,
    FLEISS,
    GENERALIZED,
    PLURALITY,
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
from ensemble_env.game.window import (
    FOCAL as FOCAL_CODE,
)

__all__ = ["answering", "observe", "observe_models", "step", "team_statistics", "weighted_answers", "write_statistics"]


@kernel(inline="always")
def _question(env: int, ahead: int, order: np.ndarray, counters: np.ndarray, per_copy_order: bool) -> int:
    """The question ``ahead`` steps after the one copy ``env`` answers next, or -1 past the end of its stream.

    After an episode cut by ``episode_length`` the stream goes on: the next question is the real one.
    """
    pos = counters[env, Counter.POS] + ahead
    if pos >= counters[env, Counter.STREAM]:
        return -1
    return order[env if per_copy_order else 0, counters[env, Counter.START] + pos]


@kernel(inline="always")
def answering(env: int, order: np.ndarray, counters: np.ndarray, episode_length: int, per_copy_order: bool) -> int:
    """The question copy ``env`` answers at its next step (a copy stepped past its episode's end without a reset
    answers the episode's last question again: that of an ``episode_length`` cut, or its stream's (task's) last)."""
    pos = min(counters[env, Counter.POS], episode_length - 1, counters[env, Counter.STREAM] - 1)
    return order[env if per_copy_order else 0, counters[env, Counter.START] + pos]


@kernel()
def write_statistics(
    env_ids: np.ndarray, tables: Tables, state: CopyState, settings: Settings, values: np.ndarray, column: int
) -> None:
    """Write the statistics ``tables.statistics`` of copies ``env_ids``' current teams over their windows to
    ``values[env, column + k]``; note each team's focal diversity in ``state.last`` (it rewards a bonus)."""
    codes, preds, labels, correct = tables.statistics, tables.preds, tables.labels, tables.correct
    team, counters, window, last = state.team, state.counters, state.window, state.last
    fail, fail2, fail3, plural, agree, votes = (
        state.fail,
        state.fail2,
        state.fail3,
        state.plural,
        state.agree,
        state.votes,
    )
    use_table, n_models, n_classes = settings.use_table, team.shape[1], tables.probs.shape[2]
    scratch = np.empty((2, n_models), dtype=np.int64)  # row 0: the team's members; row 1: statistics' scratch
    for env in env_ids:
        count = counters[env, Counter.COUNT]
        size = 0
        team_code = 0
        for i in range(n_models):
            if team[env, i]:
                scratch[0, size] = i
                size += 1
                team_code |= 1 << i
        members = scratch[0, :size]
        focal = focal_diversity(env, members, fail, fail2, fail3, scratch[1])
        last[Info.FOCAL_DIVERSITY, env] = focal
        for k in range(codes.shape[0]):
            code = codes[k]
            if code == FOCAL_CODE:
                value = focal
            elif code == GENERALIZED:
                value = generalized_diversity(env, members, count, fail, fail2)
            elif code == PLURALITY:
                if count == 0 or size == 0:
                    value = 0.0
                elif use_table:
                    value = plurality_count(plural[env], team_code) / count
                else:
                    value = plurality_from_rows(env, members, count, window, preds, labels, n_classes)
            elif code == FLEISS:
                value = fleiss_kappa(env, members, count, agree, votes)
            elif code == ENTROPY:
                value = binary_entropy(env, members, count, window, correct)
            else:  # Q_STAT, CORRELATION, DISAGREEMENT, PAIR_KAPPA
                value = pairwise(env, members, count, fail, fail2, code)
            values[env, column + k] = value


@kernel()
def observe(env_ids: np.ndarray, tables: Tables, state: CopyState, settings: Settings, out: Outputs) -> None:
    """Write the observations of copies ``env_ids``: their current team and next question; note its focal value.

    Per copy, the decider sees its team, the team's window statistics (:func:`write_statistics`) and, with the
    extras, what describes q_{t+1} (the question the committed team answers after the fusion agent's next one);
    the fusion agent sees the next question through the team.
    """
    probs, n_choices, tasks, features = tables.probs, tables.n_choices, tables.tasks, tables.features
    team, counters, order, fail, rewards = state.team, state.counters, state.order, state.fail, state.rewards
    layout, per_copy_order = settings.layout, settings.per_copy_order
    out_decider, out_fusion = out.decider, out.fusion
    n_models, max_choices = probs.shape[1], probs.shape[2]
    for env in env_ids:
        q = _question(env, 0, order, counters, per_copy_order)  # the fusion agent's next question (-1: none)
        q_next = _question(env, 1, order, counters, per_copy_order)  # what the decider's team answers after it
        count = counters[env, Counter.COUNT]
        decider = out_decider[env]
        decider[:] = 0.0
        size = 0
        for i in range(n_models):
            decider[i] = team[env, i]
            size += team[env, i]
        decider[n_models] = size / n_models
        if layout.decider_model_accuracy >= 0 and count > 0:
            for i in range(n_models):
                decider[layout.decider_model_accuracy + i] = (count - fail[env, i]) / count
        if layout.decider_task >= 0 and q_next >= 0:
            decider[layout.decider_task + tasks[q_next]] = 1.0
        if layout.decider_features >= 0 and q_next >= 0:
            for f in range(features.shape[1]):
                decider[layout.decider_features + f] = features[q_next, f]

        fusion = out_fusion[env]
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
            if layout.fusion_features >= 0:
                for f in range(features.shape[1]):
                    fusion[layout.fusion_features + f] = features[q, f]
        else:
            for c in range(max_choices):
                fusion[layout.fusion_mask + c] = 1.0
        for i in range(n_models):
            fusion[layout.fusion_team + i] = team[env, i]
        for k in range(rewards.shape[1]):
            fusion[layout.fusion_rewards + k] = rewards[env, k]
    write_statistics(env_ids, tables, state, settings, out_decider, layout.decider_statistics)


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
        q = answering(env, state.order, counters, settings.episode_length, settings.per_copy_order)
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
        # the stream (with episodes="task": the task) exhausted terminates; an episode_length cut truncates
        terminated = counters[env, Counter.POS] >= counters[env, Counter.STREAM]
        out.terminated[env] = terminated
        out.done[env] = terminated or counters[env, Counter.POS] >= settings.episode_length
    observe(np.arange(n_envs), tables, state, settings, out)


@kernel()
def team_statistics(tables: Tables, state: CopyState, settings: Settings) -> np.ndarray:
    """(B, K) float64 statistics ``tables.statistics`` of every copy's current team over its window."""
    n_envs = state.team.shape[0]
    values = np.zeros((n_envs, tables.statistics.shape[0]))
    write_statistics(np.arange(n_envs), tables, state, settings, values, 0)
    return values


@kernel()
def weighted_answers(weights: np.ndarray, tables: Tables, state: CopyState, settings: Settings) -> np.ndarray:
    """(B,) int64 answers of weights (B, N) float32: per copy, the valid choice c of its next question with the
    largest sum over the team of w_i p_i(c) (RLAE's weighted ensemble), summed in float64 in model order.

    Ties go to the lowest choice index; weights of models outside the team are ignored; when the team's weights
    are all 0 every member counts 1 (the team's mean vote). An empty team answers 0 (never right).
    """
    probs, n_choices, team = tables.probs, tables.n_choices, state.team
    n_envs, n_models = team.shape
    answers = np.zeros(n_envs, dtype=np.int64)
    for env in range(n_envs):
        q = answering(env, state.order, state.counters, settings.episode_length, settings.per_copy_order)
        total = 0.0
        for i in range(n_models):
            if team[env, i]:
                total += float(weights[env, i])
        best, best_score = 0, -1.0
        for c in range(n_choices[q]):
            score = 0.0
            for i in range(n_models):
                if team[env, i]:
                    score += (float(weights[env, i]) if total > 0.0 else 1.0) * float(probs[q, i, c])
            if score > best_score:
                best, best_score = c, score
        answers[env] = best
    return answers


@kernel()
def observe_models(tables: Tables, state: CopyState, settings: Settings, out: np.ndarray, has_features: bool) -> None:
    """Write the per-model agents' observations (B, N, M) of every copy: for agent i, the context of the question
    it weighs next (task one-hot, then the cache's features when ``has_features``), model i's probabilities over
    the choices (zero outside the team), its team membership and the valid-choice mask (all ones, and no context
    or probabilities, after the last question)."""
    probs, n_choices, tasks, features = tables.probs, tables.n_choices, tables.tasks, tables.features
    team, counters, order = state.team, state.counters, state.order
    n_envs, n_models, max_choices = team.shape[0], team.shape[1], probs.shape[2]
    n_tasks = out.shape[2] - 2 * max_choices - 1 - (features.shape[1] if has_features else 0)
    n_features = features.shape[1] if has_features else 0
    probs_at = n_tasks + n_features
    member_at = probs_at + max_choices
    mask_at = member_at + 1
    for env in range(n_envs):
        q = _question(env, 0, order, counters, settings.per_copy_order)
        for i in range(n_models):
            row = out[env, i]
            row[:] = 0.0
            row[member_at] = team[env, i]
            if q >= 0:
                row[tasks[q]] = 1.0
                for f in range(n_features):
                    row[n_tasks + f] = features[q, f]
                for c in range(n_choices[q]):
                    if team[env, i]:
                        row[probs_at + c] = probs[q, i, c]
                    row[mask_at + c] = 1.0
            else:
                for c in range(max_choices):
                    row[mask_at + c] = 1.0
