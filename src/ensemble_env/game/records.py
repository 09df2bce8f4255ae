"""The named records the numba kernels read and write, and the names of every index they use.

The engine (:class:`ensemble_env.game.engine.EnsembleVectorEnv`) builds these records once, with the builders of
:mod:`ensemble_env.game.build`; the kernels of :mod:`ensemble_env.game.dynamics`, :mod:`ensemble_env.game.window` and
:mod:`ensemble_env.game.reward` take them whole, so that a kernel's parameter list is a handful of records rather
than dozens of arrays, and a new array is added in one place (its record) rather than in every signature.

================  ======================================================  ======================================
record            what it holds                                           who writes it
================  ======================================================  ======================================
``Tables``        per-question arrays of the cache (probabilities,        the engine, once (read-only)
                  labels, failing models, the plurality table, ...)
``CopyState``     per-copy arrays: where each copy is in its stream, its  the kernels, every step
                  team, its window and window counts, reward history,
                  info
``Settings``      the configuration as named scalars, the statistic       the engine, once
                  codes of the decider's observation and where each part
                  of the observations starts (``Layout``)
``Outputs``       a step's observations, rewards and episode ends         the kernels, every step
``TaskRecord``    per-copy counts of the task's answered questions each   the record kernels, every step (only
                  model and each team got right (``episodes="task"``      with a record extra)
                  with a record extra)
``RecordTables``  per-question correctness of each model and of each      the engine, once (read-only)
                  team's mean vote, which the record kernels add up
================  ======================================================  ======================================

The record extras' arrays (``TaskRecord``, ``RecordTables``) are records of their own, which only the record
kernels of :mod:`ensemble_env.game.task_record` take: the step kernel never receives them, so a game without those
extras pays nothing for them.

Two index vocabularies remain, for arrays whose rows are indexed: :class:`Counter` (columns of
``CopyState.counters``) and :class:`Info` (rows of ``CopyState.last``, the info values; :data:`INFO_KEYS`
is derived from it). Use them by name everywhere, tests included.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "INFO_KEYS",
    "CopyState",
    "Counter",
    "FastKernel",
    "Feedback",
    "Info",
    "Layout",
    "Outputs",
    "RecordTables",
    "Settings",
    "Tables",
    "TaskRecord",
]


class Counter(IntEnum):
    """Columns of ``CopyState.counters`` ((B, len(Counter)) int64): where each copy is in its episode."""

    START = 0  # position of the episode's first question in the copy's stream (``order`` row)
    POS = 1  # questions answered in this episode: the next question is order[START + POS]
    HEAD = 2  # next slot of the window ring to write
    COUNT = 3  # questions in the window (grows to T)
    ANSWERED = 4  # questions answered in this episode (for the running accuracy)
    N_CORRECT = 5  # of which right
    STREAM = 6  # questions of the copy's stream from START on: POS reaching it exhausts the stream (terminates)


class Info(IntEnum):
    """Rows of ``CopyState.last`` ((len(Info), B) float64): the info values every step reports.

    The info keys are these names in lower case (:data:`INFO_KEYS`), in this order.
    """

    CORRECT = 0  # 1 if the last answer was right
    ANSWER = 1  # the fusion agent's last answer (-1 before the first step)
    LABEL = 2  # the gold answer of the last question (-1 before the first step)
    QUESTION = 3  # cache index of the last question (-1 before the first step)
    TASK = 4  # its task index (-1 before the first step)
    TEAM_SIZE = 5  # size of the team that answered it (at reset: of the initial team)
    COST = 6  # that team's cost (model count without the cache's costs)
    REWARD = 7  # the last reward
    ACCURACY = 8  # running accuracy of the episode
    EPISODE_RETURN = 9  # sum of the episode's rewards
    FOCAL_DIVERSITY = 10  # focal diversity of the current team over the window
    STEP = 11  # questions answered in the episode


#: numeric info keys present for both agents at reset and at every step (rows of ``CopyState.last``)
INFO_KEYS: tuple[str, ...] = tuple(row.name.lower() for row in Info)


class Tables(NamedTuple):
    """Per-question arrays (Q rows) the kernels read; built once from the cache, shared by every copy."""

    probs: np.ndarray  # (Q, N, C) float32 probabilities, zero beyond a question's choices
    n_choices: np.ndarray  # (Q,) int32 valid choices ...
    labels: np.ndarray  # (Q,) int32 gold choice ...
    tasks: np.ndarray  # (Q,) int32 task index ...
    n_failing: np.ndarray  # (Q,) int32 models that answer wrong ...
    table_row: np.ndarray  # (Q,) int32 row in ``plural_table`` (-1: not in the stream); these five are
    #                        columns of one (Q, 5) block, so that a question's integers share a cache line
    preds: np.ndarray  # (Q, N) each model's predicted choice
    correct: np.ndarray  # (Q, N) uint8 1 where the model is right
    failing: np.ndarray  # (Q, N) the failing models first, in increasing order
    costs: np.ndarray  # (Q, N) float64 cost of asking each model ((1, N) ones without the cache's costs)
    features: np.ndarray  # (Q, F) float32 per-question features ((1, 1) zeros without)
    plural_table: np.ndarray  # (rows, 2^N / 64) uint64: bit e set where team e's plurality vote is right
    statistics: np.ndarray  # (K,) int64 codes (``window.STATISTIC_CODES``) of the decider's statistics


class CopyState(NamedTuple):
    """Per-copy arrays (B copies): everything that changes as the copies play.

    The kernels trust these arrays (indices into the cache's tables, counters within their ranges): the engine
    alone writes them, and ``EnsembleVectorEnv.set_state`` checks a restored snapshot by value before any kernel
    reads it (what each array must hold: ``SnapshotCheck`` in :mod:`ensemble_env.game.snapshot_check`).
    """

    order: np.ndarray  # (B or 1, L) int32 the question streams (one shared row for sequential order)
    counters: np.ndarray  # (B, len(Counter)) int64, columns named by ``Counter``
    team: np.ndarray  # (B, N) uint8 the team that answers each copy's next question
    window: np.ndarray  # (B, T) int32 question ids of the window (a ring)
    fail: np.ndarray  # (B, N) int32 window rows where model i fails
    fail2: np.ndarray  # (B, N, N) int32 rows where i and j both fail
    fail3: np.ndarray  # (B, C(N, 3)) int32 rows where three distinct models fail (``window.triple_index``)
    plural: np.ndarray  # (B, planes, 2^N / 64) uint64 bit-sliced per-team plurality counts
    agree: np.ndarray  # (B, N, N) int32 rows where i and j predict the same class (Fleiss' kappa only)
    votes: np.ndarray  # (B, N, C) int32 rows where model i predicts class c (Fleiss' kappa only)
    rewards: np.ndarray  # (B, T') float32 the last rewards, oldest first
    last: np.ndarray  # (len(Info), B) float64 the info values, rows named by ``Info``


class Layout(NamedTuple):
    """Where each part of the observations starts (index into the observation vector; -1: absent).

    With ``feedback="team"`` each block that counts revealed outputs is followed by its ``"<block>_count"`` block
    (:mod:`ensemble_env.game.layout`): the kernels find it right after the block (no field of its own, so that the
    records of today's game are as they were)."""

    decider_statistics: int
    decider_model_accuracy: int
    decider_task: int
    decider_features: int
    fusion_team: int
    fusion_rewards: int
    fusion_mask: int
    fusion_task: int
    fusion_features: int
    decider_task_record: int  # the record extras (written by the record kernels of ``task_record``)
    decider_team_record: int
    fusion_member_record: int


class Settings(NamedTuple):
    """The configuration the kernels read, as named scalars (built with exact types: see ``build.build_settings``).

    Scalars only, so that the inlined helpers may take it for free: numba updates the reference count of every
    array in a record each time an inlined helper receives it, which costs more than a small helper's work.
    Helpers that run per copy therefore take arrays, never ``Tables`` or ``CopyState``.
    """

    alpha: float  # size penalty
    diversity_bonus: float  # reward += bonus x focal diversity of the team that answered
    always_penalise: bool  # size_penalty_mode == "always"
    use_costs: bool  # penalise the team's share of the cache's costs instead of its share of the models
    has_costs: bool  # the cache has costs (else every model costs 1 and the kernels skip the reads)
    episode_length: int  # questions per episode
    per_copy_order: bool  # each copy has its own stream (shuffled order)
    use_table: bool  # plurality accuracy from the per-team counts (N <= 12)
    track_agreement: bool  # keep ``agree``/``votes`` (Fleiss' kappa observed)
    revealed_only: bool  # feedback="team": only the answering team's outputs count (``Feedback`` is real)
    layout: Layout


class Outputs(NamedTuple):
    """What a step returns, written by the kernels."""

    decider: np.ndarray  # (B, decider size) float32 observations
    fusion: np.ndarray  # (B, fusion size) float32 observations
    reward: np.ndarray  # (B,) float64
    done: np.ndarray  # (B,) bool: the copy's episode ended at this step (terminated or truncated)
    terminated: np.ndarray  # (B,) bool: ... because the stream is exhausted (else ``episode_length`` cut it)


class TaskRecord(NamedTuple):
    """Per-copy counts over the questions answered in the episode's task (``episodes="task"`` with a record extra);
    the number answered is ``counters[:, Counter.ANSWERED]``. With ``feedback="team"`` they count only what was
    revealed (out of ``Feedback.model_seen``, ``team_seen``). Snapshots hold them; a reset zeroes them."""

    model_right: np.ndarray  # (B, N) int64 answered questions model i got right
    team_right: np.ndarray  # (B, K) int64 ... team k's mean vote got right (K = 2**N - 1; (B, 0) without team_record)


class Feedback(NamedTuple):
    """Per-copy record of what was revealed under ``feedback="team"`` (:mod:`ensemble_env.game.feedback`): the team
    that answered each question of the window, and counts over the revealed outputs. Snapshots of such a game hold
    them; a reset zeroes them. With ``feedback="all"`` the record kernels receive (B, 1, 1) and (B, 0) placeholders
    (``build.no_feedback``), which none reads: ``Settings.revealed_only`` tells them which it is."""

    revealed: np.ndarray  # (B, T, W) uint64 the team that answered each window slot (a ring aligned with
    #                       ``CopyState.window``): bit i % 64 of word i // 64 is model i, W = ceil(N / 64); 0 unset
    seen: np.ndarray  # (B, N) int32 window rows where model i's output was revealed (it was in the answering team)
    seen_right: np.ndarray  # (B, N) int32 ... of which model i was right
    model_seen: np.ndarray  # (B, N) int64 answered questions of the episode's task that revealed model i (a record
    #                         extra on; else (B, 0)); ``TaskRecord.model_right`` then counts only those
    team_seen: np.ndarray  # (B, K) int64 ... whose answering team contained team k (team_record; else (B, 0));
    #                        ``TaskRecord.team_right`` then counts only those


class RecordTables(NamedTuple):
    """Per-question correctness the record kernels add up (built once, shared by every copy)."""

    correct: np.ndarray  # (Q, N) uint8 1 where model i is right (``Tables.correct``)
    team_correct: np.ndarray  # (Q, K) uint8 1 where team k's mean vote is right (``task_record.team_vote_table``;
    #                          (Q, 0) without team_record); team k is row k of ``actions.subset_masks``


class FastKernel:
    """Call a numba kernel through its compiled entry point, skipping the dispatcher's type resolution.

    The dispatcher types every argument on every call; for records of a dozen arrays that costs several
    microseconds, more than a PettingZoo step's whole kernel. The first call goes through the dispatcher
    (compiling or loading the kernel); later calls use the compiled function for those argument types
    directly. Use it only where every call passes arguments of the same types and layouts (the engine's own
    arrays): the entry point does not check layouts.
    """

    __slots__ = ("_entry", "kernel")

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self._entry: Any = None

    def __reduce__(self) -> tuple[Any, ...]:  # pickle the kernel only: the entry point is found again
        return (FastKernel, (self.kernel,))

    def __call__(self, *args: Any) -> Any:
        entry = self._entry
        if entry is not None:
            return entry(*args)
        result = self.kernel(*args)
        try:
            signature = tuple(self.kernel.typeof_pyval(arg) for arg in args)
            self._entry = self.kernel.overloads[signature].entry_point
        except (AttributeError, KeyError):  # another numba: keep calling through the dispatcher
            self._entry = self.kernel
        return result
