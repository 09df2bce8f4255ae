"""The builders of the kernels' records (:mod:`ensemble_env.game.records`), from the options and the cache.

The engine (:class:`~ensemble_env.game.engine.EnsembleVectorEnv`) calls them once when it is built
(:func:`build_settings`, :func:`kernel_layout`, :func:`build_tables`, :func:`build_state`; its components
(:mod:`ensemble_env.game.components`) :func:`build_feedback`, :func:`build_record_tables`, :func:`build_task_record`)
and at every step
(:func:`new_outputs`, fresh arrays for the step's results); :func:`initial_cost` is the info ``cost`` a reset
writes (the snapshot's checks expect it too). Every array has the one dtype and layout the kernels were compiled
for: a new type would compile them anew.
"""

from __future__ import annotations

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.layout import ObservationLayout
from ensemble_env.game.records import (
    CopyState,
    Counter,
    Feedback,
    Info,
    Layout,
    Outputs,
    RecordTables,
    Settings,
    Tables,
    TaskRecord,
)
from ensemble_env.game.task_record import team_vote_table
from ensemble_env.game.window import STATISTIC_CODES, count_planes, n_triples, plurality_table, table_words

__all__ = [
    "build_feedback",
    "build_record_tables",
    "build_settings",
    "build_state",
    "build_tables",
    "build_task_record",
    "feedback_words",
    "initial_cost",
    "kernel_layout",
    "new_outputs",
    "no_feedback",
]


def build_settings(
    config: EnvConfig,
    cache: LogitCache,
    episode_length: int,
    statistic_names: tuple[str, ...],
    uses_plurality_table: bool,
) -> Settings:
    """The configuration as the kernels read it, with exact types (a new type would compile anew); its ``layout``
    is all -1 until the observation layout is known (``settings._replace(layout=kernel_layout(...))``)."""
    cfg = config
    return Settings(
        alpha=float(cfg.alpha),
        diversity_bonus=float(cfg.diversity_bonus),
        always_penalise=cfg.size_penalty_mode == "always",
        use_costs=bool(cfg.use_costs),
        has_costs=cache.costs is not None,
        episode_length=int(episode_length),
        per_copy_order=cfg.order == "shuffled",
        use_table=bool(uses_plurality_table),
        track_agreement="fleiss_kappa" in statistic_names,
        revealed_only=cfg.feedback == "team",
        layout=Layout(*([-1] * len(Layout._fields))),
    )


def kernel_layout(layout: ObservationLayout) -> Layout:
    """Where each part of the observations starts, for the kernels (-1: absent)."""
    decider, fusion = layout.decider, layout.fusion

    def start(parts: dict[str, slice], name: str) -> int:
        return int(parts[name].start) if name in parts else -1

    return Layout(
        decider_statistics=start(decider, "statistics"),
        decider_model_accuracy=start(decider, "model_accuracy"),
        decider_task=start(decider, "task"),
        decider_features=start(decider, "features"),
        fusion_team=start(fusion, "team_mask"),
        fusion_rewards=start(fusion, "rewards"),
        fusion_mask=start(fusion, "action_mask"),
        fusion_task=start(fusion, "task"),
        fusion_features=start(fusion, "features"),
        decider_task_record=start(decider, "task_record"),
        decider_team_record=start(decider, "team_record"),
        fusion_member_record=start(fusion, "member_record"),
    )


def build_tables(
    cache: LogitCache, questions: np.ndarray, statistic_names: tuple[str, ...], uses_plurality_table: bool
) -> Tables:
    """Per-question arrays the kernels read (built once; shared by every copy). ``questions``: the stream (the
    plurality table has a row for each of them)."""
    n = cache.n_models
    # failing models first, in index order
    failing = np.argsort(cache.correct, axis=1, kind="stable").astype(np.uint8 if n < 256 else np.int16)
    table_row = np.full(cache.n_questions, -1, dtype=np.int64)
    if uses_plurality_table:
        table_row[questions] = np.arange(questions.size)
        plural_table = plurality_table(cache.preds[questions], cache.labels[questions], cache.n_choices[questions], n)
    else:
        plural_table = np.zeros((1, 1), dtype=np.uint64)

    def column(values: np.ndarray) -> np.ndarray:  # contiguous int32 ('A'-layout arrays index slower)
        return np.ascontiguousarray(values, dtype=np.int32)

    return Tables(
        probs=np.ascontiguousarray(cache.probs),
        n_choices=column(cache.n_choices),
        labels=column(cache.labels),
        tasks=column(cache.tasks),
        n_failing=column((~cache.correct).sum(axis=1)),
        table_row=column(table_row),
        preds=cache.preds,
        correct=cache.correct.view(np.uint8),
        failing=np.ascontiguousarray(failing),
        # without costs every model costs 1 and the kernels skip the reads
        costs=np.ones((1, n)) if cache.costs is None
        else np.ascontiguousarray(np.broadcast_to(cache.costs, (cache.n_questions, n)), dtype=np.float64),
        features=np.zeros((1, 1), np.float32) if cache.features is None
        else np.ascontiguousarray(cache.features, dtype=np.float32),
        plural_table=plural_table,
        statistics=np.array([STATISTIC_CODES[name] for name in statistic_names], dtype=np.int64),
    )  # fmt: skip


def build_state(
    config: EnvConfig, settings: Settings, cache: LogitCache, questions: np.ndarray, num_envs: int, width: int
) -> CopyState:
    """Per-copy arrays of ``num_envs`` copies, zeroed (see :class:`ensemble_env.game.records.CopyState`).
    ``questions``: the stream; ``width``: the questions a shuffled episode draws (its ``order`` row)."""
    b, n, c, cfg = num_envs, cache.n_models, cache.max_choices, config
    if cfg.order == "shuffled":  # the episode's questions and, when the stream has them, the next two
        order = np.zeros((b, width), dtype=np.int32)
    else:
        order = questions[None, :].astype(np.int32)  # one shared stream; copies differ by start
    agreement = settings.track_agreement
    return CopyState(
        order=order,
        counters=np.zeros((b, len(Counter)), dtype=np.int64),
        team=np.zeros((b, n), dtype=np.uint8),
        window=np.zeros((b, cfg.window), dtype=np.int32),
        fail=np.zeros((b, n), dtype=np.int32),
        fail2=np.zeros((b, n, n), dtype=np.int32),
        fail3=np.zeros((b, n_triples(n)), dtype=np.int32),
        plural=np.zeros(
            (b, count_planes(cfg.window), table_words(n)) if settings.use_table else (b, 1, 1),
            dtype=np.uint64,
        ),
        agree=np.zeros((b, n, n) if agreement else (b, 1, 1), dtype=np.int32),
        votes=np.zeros((b, n, c) if agreement else (b, 1, 1), dtype=np.int32),
        rewards=np.zeros((b, cfg.reward_history), dtype=np.float32),
        last=np.zeros((len(Info), b), dtype=np.float64),
    )


def new_outputs(num_envs: int, layout: ObservationLayout) -> Outputs:
    """Fresh arrays for a step's results (the kernels write every entry before they are read)."""
    b = num_envs
    return Outputs(
        decider=np.empty((b, layout.decider_size), dtype=np.float32),
        fusion=np.empty((b, layout.fusion_size), dtype=np.float32),
        reward=np.empty(b, dtype=np.float64),
        done=np.empty(b, dtype=np.bool_),
        terminated=np.empty(b, dtype=np.bool_),
    )


def initial_cost(
    tables: Tables, settings: Settings, initial_team: np.ndarray, questions: np.ndarray
) -> np.ndarray | np.integer:
    """The info ``cost`` at reset: the initial team's cost on each given first question (its size without the
    cache's costs)."""
    if not settings.has_costs:
        return initial_team.sum()
    return (tables.costs[questions] * initial_team).sum(axis=1)


def build_record_tables(tables: Tables, cache: LogitCache, questions: np.ndarray, team_record: bool) -> RecordTables:
    """What the record kernels add up (:mod:`ensemble_env.game.task_record`): each model's correctness
    (``tables.correct``) and, with ``team_record``, each team's mean-vote correctness on the stream's ``questions``
    ((Q, 0) without)."""
    if team_record:
        team_correct = team_vote_table(tables.probs, cache.n_choices, cache.labels, questions)
    else:
        team_correct = np.zeros((cache.n_questions, 0), dtype=np.uint8)
    return RecordTables(correct=tables.correct, team_correct=team_correct)


def feedback_words(n_models: int) -> int:
    """uint64 words of a team's mask in ``Feedback.revealed``: ceil(N / 64)."""
    return (n_models + 63) // 64


def build_feedback(window: int, num_envs: int, n_models: int, records: bool, team_record: bool) -> Feedback:
    """Zeroed per-copy arrays of partial feedback (:class:`~ensemble_env.game.records.Feedback`, ``feedback="team"``)
    over a window of ``window`` questions (``records``: a record extra is on; ``team_record``: that one)."""
    b, n = num_envs, n_models
    return Feedback(
        revealed=np.zeros((b, window, feedback_words(n)), dtype=np.uint64),
        seen=np.zeros((b, n), dtype=np.int32),
        seen_right=np.zeros((b, n), dtype=np.int32),
        model_seen=np.zeros((b, n if records else 0), dtype=np.int64),
        team_seen=np.zeros((b, 2**n - 1 if team_record else 0), dtype=np.int64),
    )


def no_feedback(num_envs: int) -> Feedback:
    """The placeholders the record kernels receive without partial feedback (``Settings.revealed_only`` False): no
    kernel reads them."""
    b, empty = num_envs, np.zeros((num_envs, 0), dtype=np.int64)
    return Feedback(np.zeros((b, 1, 1), np.uint64), np.zeros((b, 0), np.int32), np.zeros((b, 0), np.int32),
                    empty, empty.copy())  # fmt: skip


def build_task_record(num_envs: int, n_models: int, team_record: bool) -> TaskRecord:
    """Zeroed per-copy counts of the record extras (:class:`~ensemble_env.game.records.TaskRecord`)."""
    n_teams = 2**n_models - 1 if team_record else 0
    return TaskRecord(
        model_right=np.zeros((num_envs, n_models), dtype=np.int64),
        team_right=np.zeros((num_envs, n_teams), dtype=np.int64),
    )
