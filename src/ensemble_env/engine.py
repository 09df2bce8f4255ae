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

from ensemble_env import dynamics
from ensemble_env.cache import LogitCache
from ensemble_env.config import MAX_SUBSET_MODELS, EnvConfig
from ensemble_env.window import (
    MAX_TABLE_MODELS,
    STATISTIC_CODES,
    count_planes,
    n_triples,
    plurality_table,
    statistic_bounds,
    table_words,
)

__all__ = ["AGENTS", "INFO_KEYS", "EnsembleVectorEnv", "ObservationLayout"]

AGENTS = ("decider", "fusion")
#: numeric info keys present for both agents at reset and at every step, in the order of the kernels'
#: ``last`` rows (``dynamics.CORRECT .. dynamics.STEP``)
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

        self._stat_names = tuple(config.metrics)
        self._build_layout()
        self._build_action_decoder()
        self._build_tables()
        self._build_state()
        self.np_random = np.random.default_rng()
        self._obs: dict[str, np.ndarray] = {}
        self._started = False

    # -- tables and state ------------------------------------------------------------------------------
    def _build_tables(self) -> None:
        """Per-question arrays the kernels read (built once; shared by every copy)."""
        cache, cfg, n = self.cache, self.config, self.n_models
        # failing models first, in index order
        failing = np.argsort(cache.correct, axis=1, kind="stable").astype(np.uint8 if n < 256 else np.int16)
        self.uses_plurality_table = "plurality_accuracy" in self._stat_names and n <= MAX_TABLE_MODELS
        table_row = np.full(cache.n_questions, -1, dtype=np.int64)
        if self.uses_plurality_table:
            table_row[self.questions] = np.arange(self.questions.size)
            plural_table = plurality_table(
                cache.preds[self.questions], cache.labels[self.questions], cache.n_choices[self.questions], n
            )
        else:
            plural_table = np.zeros((1, 1), dtype=np.uint64)
        # What a step reads of a question, side by side: one cache line per question for a random stream
        per_question = np.stack(
            [cache.n_choices, cache.labels, cache.tasks, (~cache.correct).sum(axis=1), table_row], axis=1
        ).astype(np.int32)
        self._tables: dict[str, np.ndarray] = {
            "probs": np.ascontiguousarray(cache.probs),
            "n_choices": per_question[:, 0],
            "labels": per_question[:, 1],
            "tasks": per_question[:, 2],
            "preds": cache.preds,
            "correct": cache.correct.view(np.uint8),
            "failing": np.ascontiguousarray(failing),
            "n_failing": per_question[:, 3],
            # without costs every model costs 1 and the kernels skip the reads
            "costs": np.ones((1, n)) if cache.costs is None
            else np.ascontiguousarray(np.broadcast_to(cache.costs, (cache.n_questions, n)), dtype=np.float64),
            "features": np.zeros((1, 1), np.float32) if cache.features is None
            else np.ascontiguousarray(cache.features, dtype=np.float32),
            "table_row": per_question[:, 4],
            "plural_table": plural_table,
        }  # fmt: skip
        self._tracks_agreement = "fleiss_kappa" in self._stat_names
        self._settings = np.array([cfg.alpha, cfg.diversity_bonus], dtype=np.float64)
        per_copy_order = cfg.order == "shuffled"
        self._switches = np.array(
            [
                self.episode_length,
                cfg.size_penalty_mode == "always",
                cfg.use_costs,
                per_copy_order,
                self.uses_plurality_table,
                self._tracks_agreement,
                cache.costs is not None,
            ],
            dtype=np.int64,
        )
        self._statistics = np.array([STATISTIC_CODES[name] for name in self._stat_names], dtype=np.int64)
        layout = self.layout

        def offset(parts: dict[str, slice], name: str) -> int:
            return parts[name].start if name in parts else -1

        self._offsets = np.array(
            [
                offset(layout.decider, "statistics"),
                offset(layout.decider, "model_accuracy"),
                offset(layout.decider, "task"),
                offset(layout.decider, "features"),
                offset(layout.fusion, "team_mask"),
                offset(layout.fusion, "rewards"),
                offset(layout.fusion, "action_mask"),
                offset(layout.fusion, "task"),
            ],
            dtype=np.int64,
        )

    def _build_state(self) -> None:
        """Per-copy arrays (see ``ensemble_env.dynamics``)."""
        b, n, c, cfg = self.num_envs, self.n_models, self.max_choices, self.config
        if cfg.order == "shuffled":
            order = np.zeros((b, self.episode_length), dtype=np.int32)
        else:
            order = self.questions[None, :].astype(np.int32)  # one shared stream; copies differ by start
        self._state: dict[str, np.ndarray] = {
            "order": order,
            "counters": np.zeros((b, 6), dtype=np.int64),
            "team": np.zeros((b, n), dtype=np.uint8),
            "window": np.zeros((b, cfg.window), dtype=np.int32),
            "fail": np.zeros((b, n), dtype=np.int32),
            "fail2": np.zeros((b, n, n), dtype=np.int32),
            "fail3": np.zeros((b, n_triples(n)), dtype=np.int32),
            "plural": np.zeros(
                (b, count_planes(cfg.window), table_words(n)) if self.uses_plurality_table else (b, 1, 1),
                dtype=np.uint64,
            ),
            "agree": np.zeros((b, n, n) if self._tracks_agreement else (b, 1, 1), dtype=np.int32),
            "votes": np.zeros((b, n, c) if self._tracks_agreement else (b, 1, 1), dtype=np.int32),
            "rewards": np.zeros((b, cfg.reward_history), dtype=np.float32),
            "last": np.zeros((len(INFO_KEYS), b), dtype=np.float64),
        }

    def _observe_copies(self, env_ids: np.ndarray) -> None:
        t, s = self._tables, self._state
        dynamics.observe(
            env_ids, t["probs"], t["n_choices"], t["labels"], t["tasks"], t["preds"], t["correct"], t["features"],
            s["order"], s["counters"], s["team"], s["window"], s["fail"], s["fail2"], s["fail3"], s["plural"],
            s["agree"], s["votes"], s["rewards"], s["last"], self._switches, self._statistics, self._offsets,
            self._obs["decider"], self._obs["fusion"],
        )  # fmt: skip

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
        if "features" in cfg.decider_extras and self.cache.features is not None:  # presence checked in __init__
            decider_parts.append(("features", self.cache.features.shape[1], -np.inf, np.inf))
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
            if array.dtype.kind not in "biuf":
                raise ValueError(f"decider action: expected 0/1 numbers, got dtype {array.dtype}")
            teams, bad = dynamics.binary_teams(array)
            if bad >= 0:
                raise ValueError(f"decider action: entries must be 0 or 1, got {array.reshape(-1)[bad]}")
        if self.config.min_team_size:
            small = teams.sum(axis=1) < self.config.min_team_size
            if small.any():
                raise ValueError(
                    f"decider action: a team of {int(teams[small][0].sum())} model(s) is below "
                    f"min_team_size={self.config.min_team_size}"
                )
        if teams.dtype == np.bool_:
            return teams.view(np.uint8)
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
        """Begin a new episode in the given copies: draw their streams, empty their windows."""
        n_stream, length, s = self.questions.size, self.episode_length, self._state
        counters = s["counters"]
        for env in env_ids:
            if self.config.order == "shuffled":
                s["order"][env] = self.questions[self.np_random.permutation(n_stream)[:length]]
                counters[env, dynamics.START] = 0
            elif length < n_stream:
                counters[env, dynamics.START] = int(self.np_random.integers(0, n_stream - length + 1))
            else:
                counters[env, dynamics.START] = 0
        keep_start = counters[env_ids, dynamics.START]
        counters[env_ids] = 0
        counters[env_ids, dynamics.START] = keep_start
        for name in ("fail", "fail2", "fail3", "plural", "agree", "votes", "rewards"):
            s[name][env_ids] = 0
        s["team"][env_ids] = self.initial_team
        last = s["last"]
        last[:, env_ids] = 0.0
        for key in ("answer", "label", "question", "task"):
            last[INFO_KEYS.index(key), env_ids] = -1.0
        last[INFO_KEYS.index("team_size"), env_ids] = self.initial_team.sum()
        if self.cache.costs is None:
            last[INFO_KEYS.index("cost"), env_ids] = self.initial_team.sum()
        else:
            costs = self._tables["costs"][self._questions_of(env_ids)]
            last[INFO_KEYS.index("cost"), env_ids] = (costs * self.initial_team).sum(axis=1)

    def next_questions(self) -> np.ndarray:
        """(B,) cache index of the question each copy answers at its next step."""
        return self._questions_of(np.arange(self.num_envs))

    def window_statistics(self) -> np.ndarray:
        """(B, K) float64 statistics of the decider's observation for every copy's current team.

        The observation holds the same values as float32.
        """
        t, s = self._tables, self._state
        return dynamics.team_statistics(
            self._statistics, t["preds"], t["labels"], t["correct"], s["team"], s["counters"], s["window"],
            s["fail"], s["fail2"], s["fail3"], s["plural"], s["agree"], s["votes"], self.uses_plurality_table,
            self.max_choices,
        )  # fmt: skip

    def _questions_of(self, env_ids: np.ndarray) -> np.ndarray:
        """Index of the question each given copy answers next (clamped at the end of an episode)."""
        s = self._state
        counters = s["counters"][env_ids]
        pos = np.minimum(counters[:, dynamics.POS], self.episode_length - 1)
        rows = env_ids if self.config.order == "shuffled" else np.zeros_like(env_ids)
        return s["order"][rows, counters[:, dynamics.START] + pos]

    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Start a new episode in every copy. With ``seed``, the generator is re-seeded first."""
        if seed is not None:
            self.seed(seed)
        all_envs = np.arange(self.num_envs)
        self._start_episodes(all_envs)
        self._started = True
        self._obs = self._new_observations()
        self._observe_copies(all_envs)
        return self._obs, self._infos()

    def _new_observations(self) -> dict[str, np.ndarray]:
        b = self.num_envs
        return {
            "decider": np.empty((b, self.layout.decider_size), dtype=np.float32),
            "fusion": np.empty((b, self.layout.fusion_size), dtype=np.float32),
        }

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]
    ]:
        """Advance every copy by one question; see the class docstring for shapes."""
        if not self._started:
            raise RuntimeError("step() called before reset()")
        if "decider" not in actions or "fusion" not in actions:
            missing = [agent for agent in AGENTS if agent not in actions]
            raise ValueError(f"actions lacks {', '.join(missing)}; expected a dict with keys {', '.join(AGENTS)}")
        obs, reward, done = self.advance(self.decode_decider(actions["decider"]), self.decode_fusion(actions["fusion"]))
        b = self.num_envs
        infos: dict[str, Any] = self._infos()
        rewards = reward.astype(np.float32)
        if self.autoreset and done.any():
            finished = np.flatnonzero(done)
            infos["final_obs"] = {agent: array.copy() for agent, array in obs.items()}
            infos["final_state"] = self.state()
            infos["final_info"] = {agent: infos[agent] for agent in AGENTS}
            self._start_episodes(finished)
            self._observe_copies(finished)
            infos.update(self._infos())
        truncations = {"decider": done, "fusion": done.copy()}
        terminations = {"decider": np.zeros(b, dtype=bool), "fusion": np.zeros(b, dtype=bool)}
        return self._obs, {"decider": rewards, "fusion": rewards.copy()}, terminations, truncations, infos

    def advance(
        self, next_team: np.ndarray, answers: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The step itself, on decoded actions: (B, N) uint8 teams and (B,) int64 answers.

        Returns the new observations, the (B,) float64 rewards and the (B,) bool episode ends; no auto-reset.
        """
        b = self.num_envs
        obs = self._new_observations()
        reward = np.empty(b, dtype=np.float64)
        done = np.empty(b, dtype=np.bool_)
        t, s = self._tables, self._state
        dynamics.step(
            next_team, answers, t["probs"], t["n_choices"], t["labels"], t["tasks"], t["preds"], t["correct"],
            t["failing"], t["n_failing"], t["costs"], t["features"], t["table_row"], t["plural_table"],
            s["order"], s["counters"], s["team"], s["window"], s["fail"], s["fail2"], s["fail3"], s["plural"],
            s["agree"], s["votes"], s["rewards"], s["last"], self._settings, self._switches,
            self._statistics, self._offsets, obs["decider"], obs["fusion"], reward, done,
        )  # fmt: skip
        self._obs = obs
        return obs, reward, done

    # -- observations and infos -------------------------------------------------------------------------
    def state(self) -> np.ndarray:
        """(B, decider_size + fusion_size) centralized state: both agents' current observations."""
        return np.concatenate([self._obs["decider"], self._obs["fusion"]], axis=1)

    def action_masks(self) -> np.ndarray:
        """(B, C) int8 valid-choice mask of the question the fusion agent answers next."""
        return self._obs["fusion"][:, self.layout.fusion["action_mask"]].astype(np.int8)

    def _infos(self) -> dict[str, dict[str, np.ndarray]]:
        last = self._state["last"]
        shared = {key: last[k].copy() for k, key in enumerate(INFO_KEYS)}
        return {"decider": shared, "fusion": {**shared, "action_mask": self.action_masks()}}

    def info_values(self, env: int = 0) -> dict[str, float]:
        """The shared info values of one copy as Python floats (what ``_infos`` holds at index ``env``)."""
        return dict(zip(INFO_KEYS, self._state["last"][:, env].tolist(), strict=True))

    @property
    def team(self) -> np.ndarray:
        """(B, N) the team each copy will use for its next question (a copy)."""
        return self._state["team"].astype(bool)

    def episode_questions(self, env: int = 0) -> np.ndarray:
        """Cache indices of the questions of copy ``env``'s current episode, in the order it answers them."""
        s, start = self._state, int(self._state["counters"][env, dynamics.START])
        row = env if self.config.order == "shuffled" else 0
        return s["order"][row, start : start + self.episode_length].astype(np.int64)


def _integral(array: np.ndarray, what: str) -> np.ndarray:
    """int64 copy of an integer (or integral float) array; anything else is a ValueError naming it."""
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "b":
        return array.astype(np.int64)
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        return array.astype(np.int64)
    raise ValueError(f"{what}: expected integers, got {array.dtype} values {array.reshape(-1)[:4].tolist()}")
