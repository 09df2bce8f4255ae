"""The batched engine: B independent copies of the ensemble game stepped with array operations.

This module holds the one implementation of the dynamics. :class:`EnsembleVectorEnv` is what
:func:`ensemble_env.vector_env` returns; the PettingZoo environments are a batch of one over it, so the API
path and the fast path cannot drift apart.

One step t of copy b (the pipelined parallel step of ``docs/environment-spec.md``):

1. the fusion agent answers question q_t, having seen the probabilities of team E_t (committed at t-1;
   E_0 is the initial team);
2. the decider commits E_{t+1}, the team for the next question;
3. both receive r_t = +1 if right, else -1 - alpha * |E_t| / N (``size_penalty_mode="on_error"``).

Observation layouts (float32, fixed length, inside their Box):

- decider: ``[team mask (N), team size / N (1), statistics of the team over the window (K), extras]``;
  extras, in this order when enabled: each model's window accuracy (N), one-hot task of the next question
  (n_tasks), the cache's features of the next question (F).
- fusion: ``[team-masked probabilities of the question (N x C, model-major), team mask (N),
  last T' rewards (oldest first), valid-choice mask (C), extras]``; extra: one-hot task of the question (n_tasks)
  with ``fusion_extras=("task",)``.
- state: ``concat(decider, fusion)``.

After the last question there is no next question: the fusion observation's probabilities are zero and its
valid-choice mask is all ones; the decider's task/feature extras are zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.cache import LogitCache
from ensemble_env.config import MAX_SUBSET_MODELS, EnvConfig
from ensemble_env.window import WindowStats, statistic_bounds

__all__ = ["AGENTS", "INFO_KEYS", "EnsembleVectorEnv", "ObservationLayout"]

AGENTS = ("decider", "fusion")
#: numeric info keys present for both agents at reset and at every step
INFO_KEYS = (
    "correct",
    "answer",
    "label",
    "question",
    "task",
    "team_size",
    "cost",
    "reward",
    "accuracy",
    "episode_return",
    "focal_diversity",
    "step",
)


@dataclass(frozen=True)
class ObservationLayout:
    """Where each part of the observations lies: name -> slice, per agent, plus the bounds."""

    decider: dict[str, slice]
    fusion: dict[str, slice]
    decider_low: np.ndarray
    decider_high: np.ndarray
    fusion_low: np.ndarray
    fusion_high: np.ndarray

    @property
    def decider_size(self) -> int:
        return int(self.decider_low.size)

    @property
    def fusion_size(self) -> int:
        return int(self.fusion_low.size)


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


class EnsembleVectorEnv:
    """B independent copies of the two-agent ensemble game, stepped together.

    Parameters
    ----------
    cache
        The loaded :class:`~ensemble_env.cache.LogitCache`.
    config
        The validated :class:`~ensemble_env.config.EnvConfig`.
    num_envs
        B, the number of copies.
    autoreset
        Reset a copy in the same step its episode ends (True for vectorised training; the PettingZoo view
        uses False and ends the episode instead). The observation returned for such a copy is the first of
        its new episode; the last one of the finished episode is in ``infos["final_obs"]`` and
        ``infos["final_state"]``.

    ``reset(seed)`` returns ``(obs, infos)``; ``step(actions)`` returns ``(obs, rewards, terminations,
    truncations, infos)``, each a dict keyed by agent of arrays with a leading B axis. ``actions`` is
    ``{"decider": (B, N) 0/1 array (or (B,) team indices for the "subset" encoding), "fusion": (B,) ints}``.
    """

    agents = AGENTS

    def __init__(self, cache: LogitCache, config: EnvConfig, num_envs: int = 1, *, autoreset: bool = True) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if not isinstance(cache, LogitCache):
            raise TypeError(f"cache must be a LogitCache (see ensemble_env.load_cache), got {type(cache).__name__}")
        self.cache, self.config, self.num_envs, self.autoreset = cache, config, int(num_envs), autoreset
        n_models, max_choices = cache.n_models, cache.max_choices
        self.n_models, self.max_choices = n_models, max_choices

        self.questions = cache.select(config.split, config.tasks)
        n_stream = self.questions.size
        self.episode_length = n_stream if config.episode_length is None else config.episode_length
        if self.episode_length > n_stream:
            raise ValueError(
                f"episode_length={config.episode_length} exceeds the {n_stream} questions of split "
                f"{config.split!r} and tasks {config.tasks!r} in {cache.path}"
            )
        if config.decider_action == "subset" and n_models > MAX_SUBSET_MODELS:
            raise ValueError(
                f"decider_action='subset' enumerates 2**N - 1 teams and supports N <= {MAX_SUBSET_MODELS} models; "
                f"the cache {cache.path} has N={n_models}: use 'multibinary' or 'multidiscrete'"
            )
        if config.use_costs and cache.costs is None:
            raise ValueError(f"use_costs=True but the cache {cache.path} has no 'costs' dataset")
        if "features" in config.decider_extras and cache.features is None:
            raise ValueError(f"decider_extras includes 'features' but the cache {cache.path} has no 'features' dataset")
        if config.min_team_size > n_models:
            raise ValueError(f"min_team_size={config.min_team_size} exceeds the pool size N={n_models}")

        self.initial_team = np.ones(n_models, dtype=bool)
        if config.initial_team is not None:
            self.initial_team[:] = False
            self.initial_team[[cache.model_index(model) for model in config.initial_team]] = True
        if self.initial_team.sum() < config.min_team_size:
            raise ValueError(
                f"initial_team {config.initial_team!r} is smaller than min_team_size={config.min_team_size}"
            )

        # Per-question arrays, float32 where they enter observations.
        self._probs = cache.probs
        self._valid = (np.arange(max_choices)[None, :] < cache.n_choices[:, None]).astype(np.float32)
        if cache.costs is None:
            self._costs = None
        else:
            self._costs = np.broadcast_to(cache.costs, (cache.n_questions, n_models)).astype(np.float64)
        self._task_onehot = np.eye(cache.n_tasks, dtype=np.float32)
        self._features = None if cache.features is None else cache.features.astype(np.float32)

        self._stat_names = tuple(config.metrics)
        self._build_layout()
        self._build_action_decoder()

        b = self.num_envs
        self.np_random = np.random.default_rng()
        self._order = np.zeros((b, self.episode_length), dtype=np.int64)
        self._pos = np.zeros(b, dtype=np.int64)
        self._team = np.zeros((b, n_models), dtype=bool)
        self._window = WindowStats(b, n_models, config.window, max_choices)
        self._reward_history = np.zeros((b, config.reward_history), dtype=np.float32)
        self._answered = np.zeros(b, dtype=np.int64)
        self._n_correct = np.zeros(b, dtype=np.int64)
        self._return = np.zeros(b, dtype=np.float64)
        self._focal = np.zeros(b, dtype=np.float64)  # focal diversity of the current team over the window
        self._last: dict[str, np.ndarray] = {}
        self._obs: dict[str, np.ndarray] = {}
        self._started = False

    # -- layout and actions ---------------------------------------------------------------------------
    def _build_layout(self) -> None:
        n, c, cfg = self.n_models, self.max_choices, self.config
        stat_low, stat_high = statistic_bounds(self._stat_names)
        decider_parts: list[tuple[str, int, Any, Any]] = [
            ("team_mask", n, 0.0, 1.0),
            ("team_size", 1, 0.0, 1.0),
            ("statistics", len(self._stat_names), stat_low, stat_high),
        ]
        if "model_accuracy" in cfg.decider_extras:
            decider_parts.append(("model_accuracy", n, 0.0, 1.0))
        if "task" in cfg.decider_extras:
            decider_parts.append(("task", self.cache.n_tasks, 0.0, 1.0))
        if "features" in cfg.decider_extras:
            assert self._features is not None
            decider_parts.append(("features", self._features.shape[1], -np.inf, np.inf))
        low_reward, high_reward = self.reward_range
        fusion_parts: list[tuple[str, int, Any, Any]] = [
            ("probs", n * c, 0.0, 1.0),
            ("team_mask", n, 0.0, 1.0),
            ("rewards", cfg.reward_history, low_reward, high_reward),
            ("action_mask", c, 0.0, 1.0),
        ]
        if "task" in cfg.fusion_extras:
            fusion_parts.append(("task", self.cache.n_tasks, 0.0, 1.0))
        decider, d_low, d_high = _layout(decider_parts)
        fusion, f_low, f_high = _layout(fusion_parts)
        self.layout = ObservationLayout(decider, fusion, d_low, d_high, f_low, f_high)

    @property
    def reward_range(self) -> tuple[float, float]:
        """Smallest and largest possible reward under this configuration."""
        cfg = self.config
        bonus = abs(cfg.diversity_bonus)
        low = -1.0 - cfg.alpha - bonus
        high = 1.0 + bonus
        return float(low), float(high)

    def _build_action_decoder(self) -> None:
        n = self.n_models
        self._subset_masks: np.ndarray | None
        if self.config.decider_action == "subset":
            codes = np.arange(1, 2**n, dtype=np.int64)
            self._subset_masks = ((codes[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
        else:
            self._subset_masks = None

    def decode_decider(self, action: Any) -> np.ndarray:
        """(B, N) bool team masks from a batch of decider actions in the configured encoding."""
        n, b = self.n_models, self.num_envs
        array = np.asarray(action)
        if self._subset_masks is not None:
            if array.shape not in ((b,), (b, 1)):
                raise ValueError(
                    f"decider action: expected shape ({b},) team indices (subset encoding), got {array.shape}"
                )
            codes = _integral(array.reshape(b), "decider action")
            bad = (codes < 0) | (codes >= self._subset_masks.shape[0])
            if bad.any():
                raise ValueError(
                    f"decider action: team index {codes[bad][0]} outside 0..{self._subset_masks.shape[0] - 1} "
                    f"(Discrete(2**{n} - 1))"
                )
            teams = self._subset_masks[codes]
        else:
            if array.shape != (b, n):
                raise ValueError(f"decider action: expected shape ({b}, {n}) of 0/1 (one per model), got {array.shape}")
            bits = _integral(array, "decider action")
            if ((bits != 0) & (bits != 1)).any():
                raise ValueError(f"decider action: entries must be 0 or 1, got {bits[(bits != 0) & (bits != 1)][0]}")
            teams = bits.astype(bool)
        small = teams.sum(axis=1) < self.config.min_team_size
        if small.any():
            raise ValueError(
                f"decider action: a team of {int(teams[small][0].sum())} model(s) is below "
                f"min_team_size={self.config.min_team_size}"
            )
        return teams

    def decode_fusion(self, action: Any) -> np.ndarray:
        """(B,) answer indices (any integer; out-of-range answers are wrong, never an error)."""
        b = self.num_envs
        array = np.asarray(action)
        if array.shape not in ((b,), (b, 1)):
            raise ValueError(f"fusion action: expected shape ({b},) answer indices, got {array.shape}")
        return _integral(array.reshape(b), "fusion action")

    # -- episodes ---------------------------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Re-seed the engine's generator (every random choice of the dynamics flows from it)."""
        self.np_random = np.random.default_rng(seed)

    def _start_episodes(self, env_ids: np.ndarray) -> None:
        n_stream, length = self.questions.size, self.episode_length
        for env in env_ids:
            if self.config.order == "shuffled":
                stream = self.questions[self.np_random.permutation(n_stream)[:length]]
            elif length < n_stream:
                start = int(self.np_random.integers(0, n_stream - length + 1))
                stream = self.questions[start : start + length]
            else:
                stream = self.questions
            self._order[env] = stream
        self._pos[env_ids] = 0
        self._team[env_ids] = self.initial_team
        self._window.clear(env_ids)
        self._reward_history[env_ids] = 0.0
        self._answered[env_ids] = 0
        self._n_correct[env_ids] = 0
        self._return[env_ids] = 0.0

    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Start a new episode in every copy. With ``seed``, the generator is re-seeded first."""
        if seed is not None:
            self.seed(seed)
        all_envs = np.arange(self.num_envs)
        self._start_episodes(all_envs)
        self._started = True
        b = self.num_envs
        minus_one = np.full(b, -1.0)
        self._last = {
            "correct": np.zeros(b),
            "answer": minus_one,
            "label": minus_one,
            "question": minus_one,
            "task": minus_one,
            "team_size": self._team.sum(axis=1).astype(np.float64),
            "cost": self._team_cost(self._current_questions(), self._team),
            "reward": np.zeros(b),
        }
        self._observe()
        return self._obs, self._infos()

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]
    ]:
        """Advance every copy by one question; see the class docstring for shapes."""
        if not self._started:
            raise RuntimeError("step() called before reset()")
        missing = [agent for agent in AGENTS if agent not in actions]
        if missing:
            raise ValueError(f"actions lacks {', '.join(missing)}; expected a dict with keys {', '.join(AGENTS)}")
        next_team = self.decode_decider(actions["decider"])
        answers = self.decode_fusion(actions["fusion"])
        cfg, cache, rows = self.config, self.cache, np.arange(self.num_envs)

        # 1. fusion answers q_t with the team E_t committed one step earlier.
        question = self._current_questions()
        team = self._team
        team_size = team.sum(axis=1)
        labels = cache.labels[question]
        in_range = (answers >= 0) & (answers < cache.n_choices[question])
        correct = in_range & (answers == labels) & (team_size > 0)
        cost = self._team_cost(question, team)
        penalty = cfg.alpha * self._penalty_share(question, team)
        if cfg.size_penalty_mode == "on_error":
            reward = np.where(correct, 1.0, -1.0 - penalty)
        else:
            reward = np.where(correct, 1.0, -1.0) - penalty
        if cfg.diversity_bonus:
            reward = reward + cfg.diversity_bonus * self._focal

        # 2. the label of q_t is revealed: it enters every copy's window.
        self._window.push(cache.correct[question], cache.preds[question], labels)
        # 3. the decider's team takes over for q_{t+1}.
        self._team = next_team
        self._pos += 1
        self._answered += 1
        self._n_correct += correct
        self._return += reward
        if cfg.reward_history:
            self._reward_history[:, :-1] = self._reward_history[:, 1:]
            self._reward_history[:, -1] = reward
        self._last = {
            "correct": correct.astype(np.float64),
            "answer": answers.astype(np.float64),
            "label": labels.astype(np.float64),
            "question": question.astype(np.float64),
            "task": cache.tasks[question].astype(np.float64),
            "team_size": team_size.astype(np.float64),
            "cost": cost,
            "reward": reward.astype(np.float64),
        }
        done = self._pos >= self.episode_length
        self._observe()
        infos: dict[str, Any] = dict(self._infos())
        rewards = reward.astype(np.float32)
        truncations = {agent: done.copy() for agent in AGENTS}
        terminations = {agent: np.zeros(self.num_envs, dtype=bool) for agent in AGENTS}
        if self.autoreset and done.any():
            finished = rows[done]
            infos["final_obs"] = {agent: obs.copy() for agent, obs in self._obs.items()}
            infos["final_state"] = self.state()
            infos["final_info"] = {
                agent: {key: value.copy() for key, value in info.items()}
                for agent, info in infos.items()
                if agent in AGENTS
            }
            self._start_episodes(finished)
            self._observe()
            infos.update(self._infos())
        return self._obs, {agent: rewards for agent in AGENTS}, terminations, truncations, infos

    # -- observations -------------------------------------------------------------------------------------
    def _current_questions(self) -> np.ndarray:
        """(B,) index of the question each copy answers next (clamped at the end of an episode)."""
        pos = np.minimum(self._pos, self.episode_length - 1)
        return self._order[np.arange(self.num_envs), pos]

    def _team_cost(self, question: np.ndarray, team: np.ndarray) -> np.ndarray:
        if self._costs is None:
            return team.sum(axis=1).astype(np.float64)
        return (self._costs[question] * team).sum(axis=1)

    def _penalty_share(self, question: np.ndarray, team: np.ndarray) -> np.ndarray:
        if self.config.use_costs:
            assert self._costs is not None
            totals = self._costs[question].sum(axis=1)
            return np.divide(self._team_cost(question, team), totals, out=np.zeros_like(totals), where=totals > 0)
        return team.sum(axis=1) / self.n_models

    def _observe(self) -> None:
        layout = self.layout
        b, n, c = self.num_envs, self.n_models, self.max_choices
        team = self._team
        live = self._pos < self.episode_length  # False after the last question: there is no next question
        question = self._current_questions()

        names = self._stat_names if "focal_diversity" in self._stat_names else (*self._stat_names, "focal_diversity")
        statistics = self._window.team_statistics(team, names)
        self._focal = statistics[:, names.index("focal_diversity")]

        decider = np.zeros((b, layout.decider_size), dtype=np.float32)
        decider[:, layout.decider["team_mask"]] = team
        decider[:, layout.decider["team_size"]] = team.sum(axis=1, keepdims=True) / n
        decider[:, layout.decider["statistics"]] = statistics[:, : len(self._stat_names)]
        if "model_accuracy" in layout.decider:
            decider[:, layout.decider["model_accuracy"]] = self._window.model_accuracy()
        if "task" in layout.decider:
            decider[:, layout.decider["task"]] = self._task_onehot[self.cache.tasks[question]] * live[:, None]
        if "features" in layout.decider:
            assert self._features is not None
            decider[:, layout.decider["features"]] = self._features[question] * live[:, None]

        fusion = np.zeros((b, layout.fusion_size), dtype=np.float32)
        probs = self._probs[question] * (team & live[:, None])[:, :, None]
        fusion[:, layout.fusion["probs"]] = probs.reshape(b, n * c)
        fusion[:, layout.fusion["team_mask"]] = team
        fusion[:, layout.fusion["rewards"]] = self._reward_history
        fusion[:, layout.fusion["action_mask"]] = np.where(live[:, None], self._valid[question], 1.0)
        if "task" in layout.fusion:
            fusion[:, layout.fusion["task"]] = self._task_onehot[self.cache.tasks[question]] * live[:, None]
        np.clip(decider, layout.decider_low, layout.decider_high, out=decider)
        self._obs = {"decider": decider, "fusion": fusion}

    def state(self) -> np.ndarray:
        """(B, decider_size + fusion_size) centralized state: both agents' current observations."""
        return np.concatenate([self._obs["decider"], self._obs["fusion"]], axis=1)

    def action_masks(self) -> np.ndarray:
        """(B, C) int8 valid-choice mask of the question the fusion agent answers next."""
        return self._obs["fusion"][:, self.layout.fusion["action_mask"]].astype(np.int8)

    def _infos(self) -> dict[str, dict[str, np.ndarray]]:
        answered = self._answered
        accuracy = np.divide(self._n_correct, answered, out=np.zeros(self.num_envs), where=answered > 0)
        shared = dict(self._last)
        shared.update(
            accuracy=accuracy,
            episode_return=self._return.copy(),
            focal_diversity=self._focal.copy(),
            step=self._pos.astype(np.float64),
        )
        return {
            "decider": shared,
            "fusion": {**shared, "action_mask": self.action_masks()},
        }

    @property
    def team(self) -> np.ndarray:
        """(B, N) the team each copy will use for its next question (read-only copy)."""
        return self._team.copy()


def _integral(array: np.ndarray, what: str) -> np.ndarray:
    """int64 copy of an integer (or integral float) array; anything else is a ValueError naming it."""
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "b":
        return array.astype(np.int64)
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        return array.astype(np.int64)
    raise ValueError(f"{what}: expected integers, got {array.dtype} values {array.reshape(-1)[:4].tolist()}")
