"""Partial feedback (``EnvConfig.feedback="team"``): answering q_t reveals its label and the outputs of E_t, the team
that answered it, and nothing else; every statistic the agents see counts only what was revealed (numba kernels).

With ``feedback="all"`` (today's game) answering q_t reveals every model's output on it. Under ``"team"`` the
window and the task's record are the same questions, but of each one only the answering team's outputs count:

========================  =======================================================================================
block                     value under ``feedback="team"``
========================  =======================================================================================
``statistics``            each statistic of the committed team computed as defined (``metrics``) on the window rows
                          on which every member was revealed (the row's answering team contains the team); with no
                          such row, the statistic's value on an empty window (as at a reset)
``statistics_count``      count(r), r = those rows
``model_accuracy``        seen_right_i / seen_i, seen_i = window rows that revealed model i (0 when seen_i = 0)
``model_accuracy_count``  count(seen_i) for each model i
the records               :mod:`ensemble_env.game.task_record`: each rate over the task's answered questions that
                          revealed it (a model: its team answered; a team: the answering team contained it), and
                          the ``_count`` blocks, count(n_i) or count(n_k) of those
========================  =======================================================================================

count(n) = n / (n + 16) (:func:`ensemble_env.game.task_record.record_count`), one scale for every count feature.
The info ``focal_diversity`` (and so ``diversity_bonus``) is the revealed one too. The rewards, the labels in the
infos and the fusion agent's view of its question (its team's probabilities) are as under ``"all"``.

How: :class:`~ensemble_env.game.records.Feedback` keeps the answering team of each window slot (a ring of team
masks beside ``CopyState.window``) and the per-model counts over the window. :func:`feedback_step` runs before the
step kernel (whose team is then still E_t) and notes E_t in the slot q_t takes; :func:`observe_feedback` runs after
every observation of the step kernel and overwrites the blocks above; the engine calls them through :func:`step_team`
and :func:`observe_team`, one kernel call each, around the kernels of :mod:`ensemble_env.game.dynamics`. The
statistics re-read the window's rows (the count-based O(1) updates of :mod:`ensemble_env.game.window` cannot condition
on a team's revealed rows): per copy O(T W) to find the rows (W = ceil(N / 64) words per mask) and, on them, the
counts of the team's own members, from which the statistics of :mod:`ensemble_env.game.window` follow unchanged (the
members renumbered 0..M-1). The engine calls these kernels only with ``feedback="team"``: today's game never runs
them.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.game.dynamics import answering, observe, step
from ensemble_env.game.jit import kernel
from ensemble_env.game.records import CopyState, Counter, Feedback, Info, Outputs, Settings, Tables
from ensemble_env.game.task_record import record_count
from ensemble_env.game.window import (
    ENTROPY,
    FLEISS,
    FOCAL,
    GENERALIZED,
    PLURALITY,
    add_agreement,
    add_failures,
    binary_entropy,
    fleiss_kappa,
    focal_diversity,
    generalized_diversity,
    pairwise,
    plurality_from_rows,
)

__all__ = [
    "feedback_step",
    "observe_feedback",
    "observe_team",
    "revealed_masks",
    "revealed_statistics",
    "step_team",
    "write_revealed_statistics",
]


@kernel(inline="always")
def _has(words: np.ndarray, model: int) -> bool:
    """Whether bit ``model`` is set in a team mask of ``Feedback.revealed`` (words (W,) uint64)."""
    return (words[model >> 6] >> np.uint64(model & 63)) & np.uint64(1) == np.uint64(1)


@kernel()
def feedback_step(tables: Tables, feedback: Feedback, state: CopyState, settings: Settings) -> None:
    """Before the step kernel: note each copy's team E_t (``state.team``) as the answering team of the window slot
    its question q_t takes (``counters[HEAD]``), and move the per-model window counts (q_t in, the oldest row out of
    a full window)."""
    counters, team, window, correct = state.counters, state.team, state.window, tables.correct
    revealed, seen, seen_right = feedback.revealed, feedback.seen, feedback.seen_right
    n_envs, n_models = team.shape
    window_length, n_words = revealed.shape[1], revealed.shape[2]
    for env in range(n_envs):
        q = answering(env, state.order, counters, settings.episode_length, settings.per_copy_order)
        head = counters[env, Counter.HEAD]
        if counters[env, Counter.COUNT] == window_length:  # the oldest row leaves
            leaving = window[env, head]
            for i in range(n_models):
                if _has(revealed[env, head], i):
                    seen[env, i] -= 1
                    seen_right[env, i] -= correct[leaving, i]
        for w in range(n_words):
            revealed[env, head, w] = 0
        for i in range(n_models):
            if team[env, i]:
                revealed[env, head, i >> 6] |= np.uint64(1) << np.uint64(i & 63)
                seen[env, i] += 1
                seen_right[env, i] += correct[q, i]


@kernel()
def write_revealed_statistics(
    env_ids: np.ndarray,
    tables: Tables,
    state: CopyState,
    feedback: Feedback,
    settings: Settings,
    values: np.ndarray,
    column: int,
    count_column: int,
) -> None:
    """Write the statistics ``tables.statistics`` of copies ``env_ids``' current teams over the window rows on
    which every member was revealed to ``values[env, column + k]``, and count(those rows) to
    ``values[env, count_column]`` (unless it is -1); note each team's focal diversity in ``state.last``.

    Per copy, the rows are found from the answering teams (``feedback.revealed``), their questions gathered, and
    the team's own counts over them built with the members renumbered 0..M-1 (``window.add_failures`` on the
    failing members, ``window.add_agreement`` on their predictions); the statistics are then those of
    :mod:`ensemble_env.game.window` (row-reading ones on the gathered questions).
    """
    codes, preds, labels, correct = tables.statistics, tables.preds, tables.labels, tables.correct
    team, counters, window, last, revealed = state.team, state.counters, state.window, state.last, feedback.revealed
    n_models, n_words, n_classes = team.shape[1], revealed.shape[2], tables.probs.shape[2]
    agreement = settings.track_agreement
    members = np.empty(n_models, dtype=np.int64)  # the team's model indices
    local = np.arange(n_models)  # ... renumbered 0..M-1
    words = np.empty(n_words, dtype=np.uint64)  # the team's mask
    rows = np.empty((1, window.shape[1]), dtype=window.dtype)  # the questions of the rows that revealed it
    fail = np.zeros((1, n_models), dtype=np.int32)
    fail2 = np.zeros((1, n_models, n_models), dtype=np.int32)
    fail3 = np.zeros((1, max(n_models * (n_models - 1) * (n_models - 2) // 6, 1)), dtype=np.int32)
    agree = np.zeros((1, n_models, n_models) if agreement else (1, 1, 1), dtype=np.int32)
    votes = np.zeros((1, n_models, n_classes) if agreement else (1, 1, 1), dtype=np.int32)
    failing = np.empty((1, n_models), dtype=np.int64)  # a row's failing members (0..M-1, increasing)
    n_failing = np.empty(1, dtype=np.int64)
    member_preds = np.empty((1, n_models), dtype=np.int64)
    shared = np.empty(n_models, dtype=np.int64)
    for env in env_ids:
        size = 0
        words[:] = 0
        for i in range(n_models):
            if team[env, i]:
                members[size] = i
                size += 1
                words[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
        fail[0, :size] = 0
        fail2[0, :size, :size] = 0
        fail3[0, : max(size * (size - 1) * (size - 2) // 6, 1)] = 0
        if agreement:
            agree[0, :size, :size] = 0
            votes[0, :size, :] = 0
        count = 0
        for r in range(counters[env, Counter.COUNT]):
            covered = True
            for w in range(n_words):
                if words[w] & ~revealed[env, r, w]:
                    covered = False
            if not covered:
                continue
            q = window[env, r]
            rows[0, count] = q
            count += 1
            k = 0
            for a in range(size):
                if not correct[q, members[a]]:
                    failing[0, k] = a
                    k += 1
            n_failing[0] = k
            add_failures(0, 0, 1, failing, n_failing, fail, fail2, fail3)
            if agreement:
                for a in range(size):
                    member_preds[0, a] = preds[q, members[a]]
                add_agreement(0, 0, 1, member_preds[:, :size], agree, votes)
        team_members, renumbered = members[:size], local[:size]
        focal = focal_diversity(0, renumbered, fail, fail2, fail3, shared)
        last[Info.FOCAL_DIVERSITY, env] = focal
        for k in range(codes.shape[0]):
            code = codes[k]
            if code == FOCAL:
                value = focal
            elif code == GENERALIZED:
                value = generalized_diversity(0, renumbered, count, fail, fail2)
            elif code == PLURALITY:
                value = plurality_from_rows(0, team_members, count, rows, preds, labels, n_classes)
            elif code == FLEISS:
                value = fleiss_kappa(0, renumbered, count, agree, votes)
            elif code == ENTROPY:
                value = binary_entropy(0, team_members, count, rows, correct)
            else:  # Q_STAT, CORRELATION, DISAGREEMENT, PAIR_KAPPA
                value = pairwise(0, renumbered, count, fail, fail2, code)
            values[env, column + k] = value
        if count_column >= 0:
            values[env, count_column] = record_count(count)


@kernel()
def observe_feedback(
    env_ids: np.ndarray, tables: Tables, state: CopyState, feedback: Feedback, settings: Settings, out: Outputs
) -> None:
    """After the step kernel's observation of copies ``env_ids``: overwrite the decider's window blocks with their
    revealed values (``statistics``, ``statistics_count``, ``model_accuracy``, ``model_accuracy_count``) and the
    info ``focal_diversity``."""
    layout, decider, seen, seen_right = settings.layout, out.decider, feedback.seen, feedback.seen_right
    statistics = layout.decider_statistics  # statistics_count follows statistics
    write_revealed_statistics(
        env_ids, tables, state, feedback, settings, decider, statistics, statistics + tables.statistics.shape[0]
    )
    if layout.decider_model_accuracy < 0:
        return
    at = layout.decider_model_accuracy
    count_at = at + seen.shape[1]  # model_accuracy_count follows model_accuracy
    for env in env_ids:
        for i in range(seen.shape[1]):
            n = seen[env, i]
            decider[env, at + i] = seen_right[env, i] / n if n > 0 else 0.0
            decider[env, count_at + i] = record_count(n)


@kernel()
def step_team(
    next_team: np.ndarray,
    answers: np.ndarray,
    tables: Tables,
    state: CopyState,
    feedback: Feedback,
    settings: Settings,
    out: Outputs,
) -> None:
    """``dynamics.step`` under ``feedback="team"``: E_t noted (:func:`feedback_step`), the step, then the window blocks
    of every copy over what was revealed (:func:`observe_feedback`)."""
    feedback_step(tables, feedback, state, settings)
    step(next_team, answers, tables, state, settings, out)
    observe_feedback(np.arange(state.team.shape[0]), tables, state, feedback, settings, out)


@kernel()
def observe_team(
    env_ids: np.ndarray, tables: Tables, state: CopyState, feedback: Feedback, settings: Settings, out: Outputs
) -> None:
    """``dynamics.observe`` under ``feedback="team"``: the observations of copies ``env_ids``, then their window blocks
    over what was revealed."""
    observe(env_ids, tables, state, settings, out)
    observe_feedback(env_ids, tables, state, feedback, settings, out)


@kernel()
def revealed_statistics(tables: Tables, state: CopyState, feedback: Feedback, settings: Settings) -> np.ndarray:
    """(B, K) float64 statistics ``tables.statistics`` of every copy's current team over its revealed rows."""
    n_envs = state.team.shape[0]
    values = np.zeros((n_envs, tables.statistics.shape[0]))
    write_revealed_statistics(np.arange(n_envs), tables, state, feedback, settings, values, 0, -1)
    return values


def revealed_masks(revealed: np.ndarray, n_models: int) -> np.ndarray:
    """(..., N) uint8 0/1 team masks of ``Feedback.revealed``'s (..., W) uint64 words (bit i % 64 of word i // 64 is
    model i); ``revealed_masks(x, 64 * W)`` keeps the unused high bits too."""
    as_bytes = np.ascontiguousarray(revealed).astype("<u8").view(np.uint8)
    return np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., :n_models]
