"""The record of the episode's task so far: what the record extras show, and the counts behind them (numba kernels).

When every episode is one task (``EnvConfig.episodes="task"``), the agents can observe the history of the task they
play instead of its identity, so that a policy trained on some tasks can route on tasks it never saw. With n the
questions of the task answered so far (``counters[:, Counter.ANSWERED]``; the episode is the task):

=================  ========  =====  ==================================================================================
extra              agent     size   values
=================  ========  =====  ==================================================================================
``task_record``    decider   1 + N  [count(n), right_0 / n, ..., right_{N-1} / n]
``team_record``    decider   K      team_right_k / n for the K = 2**N - 1 teams, in the order of the decider's subset
                                    encoding (team k: bit i of k + 1 is model i, ``actions.subset_masks``); N <= 8
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

Timing (``docs/environment-spec.md``, step order): step t answers q_t and reveals its label; :func:`record_step` then
adds q_t's outcomes to the counts (``TaskRecord``) and writes the blocks, so the observations after step t include
q_t's outcome and no label of a question not yet answered. A reset zeroes the counts. The counts are integers
(int64), so the rates are exact ratios.

The engine calls these kernels only when a record extra is on: the step kernel (:func:`ensemble_env.game.dynamics.step`)
never sees the records, so a game without them pays nothing.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.game.jit import kernel
from ensemble_env.game.records import CopyState, Counter, Info, Outputs, RecordTables, Settings, TaskRecord

__all__ = ["RECORD_COUNT_HALF", "observe_record", "record_count", "record_step", "team_vote_table"]

#: the count feature is n / (n + RECORD_COUNT_HALF): 1/2 after this many answered questions
RECORD_COUNT_HALF = 16.0


@kernel(inline="always")
def record_count(n: int) -> float:
    """The count feature of n answered questions, n / (n + 16), in [0, 1)."""
    return n / (n + RECORD_COUNT_HALF)


@kernel()
def _team_votes(
    probs: np.ndarray, n_choices: np.ndarray, labels: np.ndarray, questions: np.ndarray, masks: np.ndarray
) -> np.ndarray:
    n_teams, n_models = masks.shape
    table = np.zeros((probs.shape[0], n_teams), dtype=np.uint8)
    for q in questions:
        for k in range(n_teams):
            best, best_score = 0, -1.0
            for c in range(n_choices[q]):
                score = 0.0
                for i in range(n_models):
                    if masks[k, i]:
                        score += float(probs[q, i, c])
                if score > best_score:
                    best, best_score = c, score
            table[q, k] = best == labels[q]
    return table


def team_vote_table(
    probs: np.ndarray, n_choices: np.ndarray, labels: np.ndarray, questions: np.ndarray, masks: np.ndarray
) -> np.ndarray:
    """(Q, K) uint8: 1 where team k's mean vote on question q is its label, for the ``questions`` given (the other
    rows are 0). ``probs`` (Q, N, C) float32, ``n_choices``, ``labels`` (Q,), ``masks`` (K, N) 0/1 the teams.

    The mean vote is the valid choice with the largest sum of the members' probabilities, summed in float64 in model
    order, ties to the lowest choice (as :func:`ensemble_env.game.dynamics.weighted_answers` with equal weights).
    """
    return _team_votes(
        np.ascontiguousarray(probs, dtype=np.float32),
        np.ascontiguousarray(n_choices, dtype=np.int64),
        np.ascontiguousarray(labels, dtype=np.int64),
        np.ascontiguousarray(questions, dtype=np.int64),
        np.ascontiguousarray(masks, dtype=np.uint8),
    )


@kernel()
def observe_record(env_ids: np.ndarray, record: TaskRecord, state: CopyState, settings: Settings, out: Outputs) -> None:
    """Write the record blocks of copies ``env_ids``' observations from their counts (the table of the module)."""
    layout, counters, team = settings.layout, state.counters, state.team
    model_right, team_right = record.model_right, record.team_right
    n_models, n_teams = model_right.shape[1], team_right.shape[1]
    for env in env_ids:
        n = counters[env, Counter.ANSWERED]
        count = record_count(n)
        if layout.decider_task_record >= 0:
            at = layout.decider_task_record
            out.decider[env, at] = count
            for i in range(n_models):
                out.decider[env, at + 1 + i] = model_right[env, i] / n if n > 0 else 0.0
        if layout.decider_team_record >= 0:
            at = layout.decider_team_record
            for k in range(n_teams):
                out.decider[env, at + k] = team_right[env, k] / n if n > 0 else 0.0
        if layout.fusion_member_record >= 0:
            at = layout.fusion_member_record
            out.fusion[env, at] = count
            for i in range(n_models):
                out.fusion[env, at + 1 + i] = model_right[env, i] / n if n > 0 and team[env, i] else 0.0


@kernel()
def record_step(tables: RecordTables, record: TaskRecord, state: CopyState, settings: Settings, out: Outputs) -> None:
    """After a step: add each copy's answered question (``last[Info.QUESTION]``, q_t) to its counts, then write the
    record blocks of every copy's observations."""
    model_right, team_right, last = record.model_right, record.team_right, state.last
    correct, team_correct = tables.correct, tables.team_correct
    n_envs, n_models, n_teams = model_right.shape[0], model_right.shape[1], team_right.shape[1]
    for env in range(n_envs):
        q = int(last[Info.QUESTION, env])
        for i in range(n_models):
            model_right[env, i] += correct[q, i]
        for k in range(n_teams):
            team_right[env, k] += team_correct[q, k]
    observe_record(np.arange(n_envs), record, state, settings, out)
