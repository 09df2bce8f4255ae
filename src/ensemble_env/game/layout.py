"""The observation layout: where each part of every agent's observation lies, and its bounds.

:func:`observation_layout` builds an :class:`ObservationLayout` once from the options and the cache; the engine
(:class:`~ensemble_env.game.engine.EnsembleVectorEnv`) keeps it as ``venv.layout`` (the parallel view's
``env.engine.layout``), its spaces are the layout's bounds, and the kernels read where each part starts
(:func:`ensemble_env.game.build.kernel_layout`).

Observation layouts (float32, fixed length, inside their Box):

- decider: ``[team mask (N), team size / N (1), statistics of the team over the window (K), extras]``;
  extras, in this order when enabled: each model's window accuracy (N), one-hot task of the next question
  (n_tasks), the cache's features of the next question (F), the task's record (1 + N: the count feature and each
  model's correct rate so far), each team's mean-vote correct rate so far (2**N - 1).
- fusion: ``[team-masked probabilities of the question (N x C, model-major), team mask (N),
  last T' rewards (oldest first), valid-choice mask (C), extras]``;
  extras, in this order when enabled: one-hot task of the question (n_tasks), its features (F), its team members'
  record (1 + N: the count feature and the members' correct rates so far, zeros outside the team).
  The records are :mod:`ensemble_env.game.task_record`'s.
- with ``feedback="team"`` (:mod:`ensemble_env.game.feedback`) every block above keeps its name, size and order,
  its values counting only the revealed outputs, and each block that counts them is followed by
  its count features, ``"<block>_count"``, each n / (n + 16) of the count n behind a value: ``statistics_count``
  (1: the window rows on which every member of the team was revealed) after ``statistics``,
  ``model_accuracy_count`` (N) after ``model_accuracy``, ``task_record_count`` (N) after ``task_record``,
  ``team_record_count`` (2**N - 1) after ``team_record``, ``member_record_count`` (N, zeros outside the team)
  after ``member_record``.
- every count feature (``task_record``'s and ``member_record``'s first entry, every ``"<block>_count"``) is
  n / (n + :data:`COUNT_HALF`) of its count n, 0 before the first: :func:`count_of_feature` turns one back into n.
- a per-model agent ``weight_i`` (``fusion_agents="per_model"``): ``[task one-hot of the question (n_tasks),
  its features (F, when the cache has them), the model's team-masked probabilities (C), its team membership (1),
  valid-choice mask (C)]``.
- state: ``concat(decider (with a decider), fusion, context (per-model agents))``, context = the task one-hot
  and features of the question (the per-model agents' shared first n_tasks + F entries).

After the last question there is no next question: the fusion observation's probabilities are zero and its
valid-choice mask is all ones; the decider's task/feature extras are zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.task_record import RECORD_COUNT_HALF
from ensemble_env.game.window import statistic_bounds

__all__ = ["COUNT_HALF", "ObservationLayout", "count_of_feature", "observation_layout"]

#: every count feature of the observations is n / (n + COUNT_HALF) of the count n behind it (1/2 at n = 16)
COUNT_HALF = RECORD_COUNT_HALF


def count_of_feature(feature: Any) -> Any:
    """The count n behind a count feature n / (n + 16) (:data:`COUNT_HALF`): ``16 * feature / (1 - feature)``, for a
    feature in [0, 1) (a number, a numpy array or a torch tensor; a reader clamps an observation below 1 first).

    >>> count_of_feature(0.5), count_of_feature(3 / 19), count_of_feature(0.0)
    (16.0, 3.0, 0.0)
    """
    return COUNT_HALF * feature / (1.0 - feature)


@dataclass(frozen=True)
class ObservationLayout:
    """Where each part of the observations lies: name -> slice, per agent, plus the bounds."""

    decider: dict[str, slice]
    fusion: dict[str, slice]
    decider_low: np.ndarray
    decider_high: np.ndarray
    fusion_low: np.ndarray
    fusion_high: np.ndarray
    #: a per-model agent's observation (``fusion_agents="per_model"``; else empty)
    model: dict[str, slice]
    model_low: np.ndarray
    model_high: np.ndarray
    #: the centralized state: [decider (with a decider)], fusion, [context (per-model agents)]
    state_low: np.ndarray
    state_high: np.ndarray

    @property
    def decider_size(self) -> int:
        return int(self.decider_low.size)

    @property
    def fusion_size(self) -> int:
        return int(self.fusion_low.size)

    @property
    def model_size(self) -> int:
        return int(self.model_low.size)

    @property
    def context_size(self) -> int:
        """Entries of the per-model observation that describe the question (task one-hot, features)."""
        return sum(
            self.model[name].stop - self.model[name].start for name in ("task", "features") if name in self.model
        )


def _layout(
    parts: list[tuple[str, int, float | np.ndarray, float | np.ndarray]],
) -> tuple[dict[str, slice], np.ndarray, np.ndarray]:
    slices, lows, highs, start = {}, [], [], 0
    for name, size, low, high in parts:
        slices[name] = slice(start, start + size)
        lows.append(np.broadcast_to(np.asarray(low, dtype=np.float32), (size,)))
        highs.append(np.broadcast_to(np.asarray(high, dtype=np.float32), (size,)))
        start += size
    return slices, np.concatenate(lows).astype(np.float32), np.concatenate(highs).astype(np.float32)


def observation_layout(
    config: EnvConfig, cache: LogitCache, statistic_names: tuple[str, ...], reward_range: tuple[float, float]
) -> ObservationLayout:
    """The layout of every agent's observation under ``config`` over ``cache`` (the features present when an
    extra asks for them: the engine checks that first). ``statistic_names``: the window statistics of the
    decider's observation, in order; ``reward_range``: the bounds of the fusion observation's reward history."""
    n, c, cfg = cache.n_models, cache.max_choices, config
    team = cfg.feedback == "team"  # each block that counts revealed outputs gains its "<block>_count" block

    def counted(name: str, size: int, counts: int) -> list[tuple[str, int, Any, Any]]:
        return [(name, size, 0.0, 1.0), *([(f"{name}_count", counts, 0.0, 1.0)] if team else [])]

    stat_low, stat_high = statistic_bounds(statistic_names)
    decider_parts: list[tuple[str, int, Any, Any]] = [
        ("team_mask", n, 0.0, 1.0),
        ("team_size", 1, 0.0, 1.0),
        ("statistics", len(statistic_names), stat_low, stat_high),
    ]
    if team:
        decider_parts.append(("statistics_count", 1, 0.0, 1.0))
    if "model_accuracy" in cfg.decider_extras:
        decider_parts += counted("model_accuracy", n, n)
    if "task" in cfg.decider_extras:
        decider_parts.append(("task", cache.n_tasks, 0.0, 1.0))
    if "features" in cfg.decider_extras and cache.features is not None:  # presence checked by the engine
        decider_parts.append(("features", cache.features.shape[1], -np.inf, np.inf))
    if "task_record" in cfg.decider_extras:
        decider_parts += counted("task_record", 1 + n, n)
    if "team_record" in cfg.decider_extras:  # N <= MAX_TEAM_RECORD_MODELS: checked by the engine
        decider_parts += counted("team_record", 2**n - 1, 2**n - 1)
    low_reward, high_reward = reward_range
    fusion_parts: list[tuple[str, int, Any, Any]] = [
        ("probs", n * c, 0.0, 1.0),
        ("team_mask", n, 0.0, 1.0),
        ("rewards", cfg.reward_history, low_reward, high_reward),
        ("action_mask", c, 0.0, 1.0),
    ]
    features = cache.features
    if "task" in cfg.fusion_extras:
        fusion_parts.append(("task", cache.n_tasks, 0.0, 1.0))
    if "features" in cfg.fusion_extras and features is not None:  # presence checked by the engine
        fusion_parts.append(("features", features.shape[1], -np.inf, np.inf))
    if "member_record" in cfg.fusion_extras:
        fusion_parts += counted("member_record", 1 + n, n)
    model_parts: list[tuple[str, int, Any, Any]] = []
    if cfg.fusion_agents == "per_model":
        model_parts.append(("task", cache.n_tasks, 0.0, 1.0))
        if features is not None:
            model_parts.append(("features", features.shape[1], -np.inf, np.inf))
        model_parts += [("probs", c, 0.0, 1.0), ("member", 1, 0.0, 1.0), ("action_mask", c, 0.0, 1.0)]
    decider, d_low, d_high = _layout(decider_parts)
    fusion, f_low, f_high = _layout(fusion_parts)
    model, m_low, m_high = (
        _layout(model_parts) if model_parts else ({}, np.zeros(0, np.float32), np.zeros(0, np.float32))
    )
    context = sum(model[name].stop - model[name].start for name in ("task", "features") if name in model)
    lows = [*([d_low] if cfg.decider else []), f_low, m_low[:context]]
    highs = [*([d_high] if cfg.decider else []), f_high, m_high[:context]]
    return ObservationLayout(
        decider,
        fusion,
        d_low,
        d_high,
        f_low,
        f_high,
        model,
        m_low,
        m_high,
        np.concatenate(lows),
        np.concatenate(highs),
    )
