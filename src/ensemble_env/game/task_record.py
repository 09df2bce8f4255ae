"""The record of the episode's task so far: what the record extras show, and the counts behind them (numba kernels).

When every episode is one task (``EnvConfig.episodes="task"``), the agents can observe the history of the task they
play instead of its identity, so that a policy trained on some tasks can route on tasks it never saw. With n the
questions of the task answered so far (``counters[:, Counter.ANSWERED]``; the episode is the task):

=================  ========  =====  ==================================================================================
extra              agent     size   values
=================  ========  =====  ==================================================================================
``task_record``    decider   1 + N  [count(n), right_0 / n, ..., right_{N-1} / n]
``team_record``    decider   K      team_right_k / n for the K = 2**N - 1 teams, in the order of the decider's subset
                                    encoding (team k: bit i of k + 1 is model i, ``actions.subset_masks``); N <= 10
``member_record``  fusion    1 + N  [count(n), right_i / n for the members i of the team it answers with, 0 for the
                                    others]
=================  ========  =====  ==================================================================================

- count(n) = n / (n + :data:`RECORD_COUNT_HALF`), n / (n + 16): 0 before the first answer, 0.16 after 3, 1/2 after
  16, 0.95 after 300, below 1. It depends on nothing but n, so tasks of every size and split share its scale.
- right_i: the answered questions model i got right (its argmax over the valid choices is the label,
  ``LogitCache.correct``); every rate is 0 while n = 0.
- team_right_k: the answered questions team k's mean vote got right: the valid choice with the largest sum of the
  members' probabilities (summed in float64 in model order, ties to the lowest choice), the answer
  ``fusion_action="weights"`` gives with equal weights (:func:`team_vote_table`).

With ``feedback="team"`` (:mod:`ensemble_env.game.feedback`) only the outputs of the team that answered a question are
revealed: right_i and n_i count the answered questions whose answering team held model i (``Feedback.model_seen``),
team_right_k and n_k those whose answering team contained team k (``Feedback.team_seen``), each rate is over its own
count (right_i / n_i, team_right_k / n_k; 0 while it is 0), and each block is followed by its count features:
``task_record_count`` [count(n_0), ..., count(n_{N-1})], ``team_record_count`` [count(n_k) for the K teams],
``member_record_count`` [count(n_i) for the members, 0 for the others]; count(n) of ``task_record`` and
``member_record`` stays that of all the answered questions.

Timing (``docs/environment-spec.md``, step order): step t answers q_t and reveals its label; :func:`record_step` then
adds q_t's outcomes to the counts (``TaskRecord``) and writes the blocks, so the observations after step t include
q_t's outcome and no label of a question not yet answered. A reset zeroes the counts. The counts are integers
(int64), so the rates are exact ratios.

The engine calls these kernels only when a record extra is on (its component, ``TaskRecords`` of
:mod:`ensemble_env.game.components`): the step kernel (:func:`ensemble_env.game.dynamics.step`) never sees the records,
so a game without them pays nothing.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.game.jit import kernel
from ensemble_env.game.records import CopyState, Counter, Feedback, Info, Outputs, RecordTables, Settings, TaskRecord

__all__ = ["RECORD_COUNT_HALF", "observe_record", "record_count", "record_step", "team_vote_table"]

#: the count feature is n / (n + RECORD_COUNT_HALF): 1/2 after this many answered questions
RECORD_COUNT_HALF = 16.0


@kernel(inline="always")
def record_count(n: int) -> float:
    """The count feature of n answered questions, n / (n + 16), in [0, 1)."""
    return n / (n + RECORD_COUNT_HALF)


@kernel()
def _team_votes(probs: np.ndarray, n_choices: np.ndarray, labels: np.ndarray, questions: np.ndarray) -> np.ndarray:
    n_models, width = probs.shape[1], probs.shape[2]
    n_teams = 2**n_models - 1
    table = np.zeros((probs.shape[0], n_teams), dtype=np.uint8)
    sums = np.zeros((n_teams + 1, width), dtype=np.float64)  # row code: the sums of the team whose bits are code
    for q in questions:
        choices = n_choices[q]
        top = 0  # the highest model of the codes below 2**(top + 1)
        for code in range(1, n_teams + 1):
            if code >> (top + 1):
                top += 1
            below = code ^ (1 << top)  # the team without its highest model: adding that one last is model order
            best, best_score = 0, -1.0
            for c in range(choices):
                score = sums[below, c] + float(probs[q, top, c])
                sums[code, c] = score
                if score > best_score:
                    best, best_score = c, score
            table[q, code - 1] = best == labels[q]
    return table


def team_vote_table(probs: np.ndarray, n_choices: np.ndarray, labels: np.ndarray, questions: np.ndarray) -> np.ndarray:
    """(Q, K) uint8: 1 where team k's mean vote on question q is its label, for the ``questions`` given (the other
    rows are 0), for the K = 2**N - 1 teams in the order of the decider's subset encoding (team k: bit i of k + 1 is
    model i, ``actions.subset_masks``). ``probs`` (Q, N, C) float32, ``n_choices``, ``labels`` (Q,).

    The mean vote is the valid choice with the largest sum of the members' probabilities, summed in float64 in model
    order, ties to the lowest choice (as :func:`ensemble_env.game.dynamics.weighted_answers` with equal weights).
    Each team's sums are its team without its highest model's plus that model's probabilities: the same additions in
    the same order, O(K C) per question rather than O(K N C).
    """
    return _team_votes(
        np.ascontiguousarray(probs, dtype=np.float32),
        np.ascontiguousarray(n_choices, dtype=np.int64),
        np.ascontiguousarray(labels, dtype=np.int64),
        np.ascontiguousarray(questions, dtype=np.int64),
    )


@kernel()
def observe_record(
    env_ids: np.ndarray, record: TaskRecord, state: CopyState, feedback: Feedback, settings: Settings, out: Outputs
) -> None:
    """Write the record blocks of copies ``env_ids``' observations from their counts (the table of the module;
    with ``feedback="team"`` each rate over its own count, ``feedback.model_seen`` or ``team_seen``, and the
    ``_count`` blocks)."""
    layout, counters, team, partial = settings.layout, state.counters, state.team, settings.revealed_only
    model_right, team_right, model_seen, team_seen = (
        record.model_right,
        record.team_right,
        feedback.model_seen,
        feedback.team_seen,
    )
    n_models, n_teams = model_right.shape[1], team_right.shape[1]
    for env in env_ids:
        n = counters[env, Counter.ANSWERED]
        count = record_count(n)
        if layout.decider_task_record >= 0:
            at = layout.decider_task_record
            out.decider[env, at] = count
            for i in range(n_models):
                seen = model_seen[env, i] if partial else n
                out.decider[env, at + 1 + i] = model_right[env, i] / seen if seen > 0 else 0.0
                if partial:  # task_record_count follows task_record
                    out.decider[env, at + 1 + n_models + i] = record_count(seen)
        if layout.decider_team_record >= 0:
            at = layout.decider_team_record
            for k in range(n_teams):
                seen = team_seen[env, k] if partial else n
                out.decider[env, at + k] = team_right[env, k] / seen if seen > 0 else 0.0
                if partial:  # team_record_count follows team_record
                    out.decider[env, at + n_teams + k] = record_count(seen)
        if layout.fusion_member_record >= 0:
            at = layout.fusion_member_record
            out.fusion[env, at] = count
            for i in range(n_models):
                seen = model_seen[env, i] if partial else n
                member = team[env, i] > 0
                out.fusion[env, at + 1 + i] = model_right[env, i] / seen if seen > 0 and member else 0.0
                if partial:  # member_record_count follows member_record
                    out.fusion[env, at + 1 + n_models + i] = record_count(seen) if member else 0.0


@kernel()
def record_step(
    tables: RecordTables, record: TaskRecord, state: CopyState, feedback: Feedback, settings: Settings, out: Outputs
) -> None:
    """After a step: add each copy's answered question (``last[Info.QUESTION]``, q_t) to its counts, then write the
    record blocks of every copy's observations. With ``feedback="team"`` only what q_t revealed counts: the models
    of its answering team E_t (the mask :func:`ensemble_env.game.feedback.feedback_step` noted in the window slot
    q_t took, the one before ``counters[HEAD]``) and the teams E_t contains (team k: bit i of k + 1 is model i)."""
    model_right, team_right, last = record.model_right, record.team_right, state.last
    model_seen, team_seen, revealed = feedback.model_seen, feedback.team_seen, feedback.revealed
    correct, team_correct = tables.correct, tables.team_correct
    n_envs, n_models, n_teams = model_right.shape[0], model_right.shape[1], team_right.shape[1]
    for env in range(n_envs):
        q = int(last[Info.QUESTION, env])
        if settings.revealed_only:
            slot = (state.counters[env, Counter.HEAD] + revealed.shape[1] - 1) % revealed.shape[1]
            answered_by = revealed[env, slot]
            for i in range(n_models):
                if (answered_by[i >> 6] >> np.uint64(i & 63)) & np.uint64(1):
                    model_seen[env, i] += 1
                    model_right[env, i] += correct[q, i]
            for k in range(n_teams):  # team codes below 2**N: word 0 (N <= 10)
                if np.uint64(k + 1) & ~answered_by[0] == 0:
                    team_seen[env, k] += 1
                    team_right[env, k] += team_correct[q, k]
            continue
        for i in range(n_models):
            model_right[env, i] += correct[q, i]
        for k in range(n_teams):
            team_right[env, k] += team_correct[q, k]
    observe_record(np.arange(n_envs), record, state, feedback, settings, out)
