"""The batched engine: B independent copies of the ensemble game stepped with array operations.

:class:`EnsembleVectorEnv` is what :func:`ensemble_env.vector_env` returns: it owns the copies' arrays (the
records of :mod:`ensemble_env.game.records`), validates actions (:mod:`ensemble_env.game.actions`) and runs the kernels
of :mod:`ensemble_env.game.dynamics`, the one implementation of a step. The PettingZoo environments are a batch of
one over it, so the API path and the fast path cannot drift apart.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game import dynamics
from ensemble_env.game.actions import MAX_SUBSET_MODELS, decode_decider, decode_fusion
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.records import INFO_KEYS, CopyState, Counter, FastKernel, Info, Layout, Outputs, Settings, Tables
from ensemble_env.game.reward import reward_bounds
from ensemble_env.game.window import (
    MAX_TABLE_MODELS,
    STATISTIC_CODES,
    count_planes,
    n_triples,
    plurality_table,
    statistic_bounds,
    table_words,
)

__all__ = ["AGENTS", "INFO_KEYS", "MAX_STATE_BYTES", "EnsembleVectorEnv", "ObservationLayout"]

AGENTS = ("decider", "fusion")
#: the most memory the copies' state may take (``num_envs`` x window x ... beyond it is refused up front)
MAX_STATE_BYTES = 8 * 2**30


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
        The validated :class:`~ensemble_env.game.config.EnvConfig`.
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
    ``get_state()`` / ``set_state()`` snapshot and restore every copy exactly.
    """

    agents = AGENTS

    def __init__(self, cache: LogitCache, config: EnvConfig, num_envs: int = 1, *, autoreset: bool = True) -> None:
        if isinstance(num_envs, bool | np.bool_) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
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

        #: the window statistics of the decider's observation, in order
        self.statistic_names = tuple(config.metrics)
        self.uses_plurality_table = "plurality_accuracy" in self.statistic_names and n_models <= MAX_TABLE_MODELS
        self.settings = self._build_settings()
        self.layout = self._build_layout()
        self.settings = self.settings._replace(layout=self._kernel_layout())
        self.tables = self._build_tables()
        self._check_memory()
        self._state = self._build_state()
        self.np_random = np.random.default_rng()
        self._out = self._new_outputs()
        self._started = False
        self._step_kernel = FastKernel(dynamics.step)
        self._observe_kernel = FastKernel(dynamics.observe)
        self._statistics_kernel = FastKernel(dynamics.team_statistics)

    # -- records ----------------------------------------------------------------------------------------
    def _build_settings(self) -> Settings:
        """The configuration as the kernels read it, with exact types (a new type would compile anew)."""
        cfg = self.config
        return Settings(
            alpha=float(cfg.alpha),
            diversity_bonus=float(cfg.diversity_bonus),
            always_penalise=cfg.size_penalty_mode == "always",
            use_costs=bool(cfg.use_costs),
            has_costs=self.cache.costs is not None,
            episode_length=int(self.episode_length),
            per_copy_order=cfg.order == "shuffled",
            use_table=bool(self.uses_plurality_table),
            track_agreement="fleiss_kappa" in self.statistic_names,
            layout=Layout(*([-1] * len(Layout._fields))),
        )

    def _kernel_layout(self) -> Layout:
        """Where each part of the observations starts, for the kernels (-1: absent)."""
        decider, fusion = self.layout.decider, self.layout.fusion

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
        )

    def _build_tables(self) -> Tables:
        """Per-question arrays the kernels read (built once; shared by every copy)."""
        cache, n = self.cache, self.n_models
        # failing models first, in index order
        failing = np.argsort(cache.correct, axis=1, kind="stable").astype(np.uint8 if n < 256 else np.int16)
        table_row = np.full(cache.n_questions, -1, dtype=np.int64)
        if self.uses_plurality_table:
            table_row[self.questions] = np.arange(self.questions.size)
            plural_table = plurality_table(
                cache.preds[self.questions], cache.labels[self.questions], cache.n_choices[self.questions], n
            )
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
            statistics=np.array([STATISTIC_CODES[name] for name in self.statistic_names], dtype=np.int64),
        )  # fmt: skip

    def _check_memory(self) -> None:
        """Refuse, before allocating, copies whose state would not fit in :data:`MAX_STATE_BYTES`."""
        n, c, cfg = self.n_models, self.max_choices, self.config
        words = (count_planes(cfg.window) * table_words(n)) if self.uses_plurality_table else 1
        per_copy = (
            4 * (self._shuffled_width() if cfg.order == "shuffled" else 0)
            + 4 * cfg.window
            + 4 * (n + n * n + n_triples(n))
            + 8 * words
            + (4 * (n * n + n * c) if self.settings.track_agreement else 8)
            + 4 * cfg.reward_history
            + 8 * (len(Counter) + len(Info))
            + n
            + 8 * (self.layout.decider_size + self.layout.fusion_size)  # observations, and a step's copy
        )
        total = per_copy * self.num_envs
        if total > MAX_STATE_BYTES:
            raise ValueError(
                f"num_envs={self.num_envs:,} copies with window={cfg.window:,} and reward_history="
                f"{cfg.reward_history:,} need about {total / 2**30:.1f} GiB of state ({per_copy:,} bytes per copy); "
                f"the limit is {MAX_STATE_BYTES / 2**30:.0f} GiB: use fewer copies or a smaller window"
            )

    def _build_state(self) -> CopyState:
        """Per-copy arrays (see :class:`ensemble_env.game.records.CopyState`)."""
        b, n, c, cfg = self.num_envs, self.n_models, self.max_choices, self.config
        if cfg.order == "shuffled":  # the episode's questions and, when the stream has them, the next two
            order = np.zeros((b, self._shuffled_width()), dtype=np.int32)
        else:
            order = self.questions[None, :].astype(np.int32)  # one shared stream; copies differ by start
        agreement = self.settings.track_agreement
        return CopyState(
            order=order,
            counters=np.zeros((b, len(Counter)), dtype=np.int64),
            team=np.zeros((b, n), dtype=np.uint8),
            window=np.zeros((b, cfg.window), dtype=np.int32),
            fail=np.zeros((b, n), dtype=np.int32),
            fail2=np.zeros((b, n, n), dtype=np.int32),
            fail3=np.zeros((b, n_triples(n)), dtype=np.int32),
            plural=np.zeros(
                (b, count_planes(cfg.window), table_words(n)) if self.uses_plurality_table else (b, 1, 1),
                dtype=np.uint64,
            ),
            agree=np.zeros((b, n, n) if agreement else (b, 1, 1), dtype=np.int32),
            votes=np.zeros((b, n, c) if agreement else (b, 1, 1), dtype=np.int32),
            rewards=np.zeros((b, cfg.reward_history), dtype=np.float32),
            last=np.zeros((len(Info), b), dtype=np.float64),
        )

    def _new_outputs(self) -> Outputs:
        """Fresh arrays for a step's results (the kernels write every entry before they are read)."""
        b = self.num_envs
        return Outputs(
            decider=np.empty((b, self.layout.decider_size), dtype=np.float32),
            fusion=np.empty((b, self.layout.fusion_size), dtype=np.float32),
            reward=np.empty(b, dtype=np.float64),
            done=np.empty(b, dtype=np.bool_),
            terminated=np.empty(b, dtype=np.bool_),
        )

    def _shuffled_width(self) -> int:
        """Questions drawn per shuffled episode: its own, plus the real next ones its final observation shows."""
        return min(self.episode_length + 2, self.questions.size)

    # -- layout and actions ---------------------------------------------------------------------------
    def _build_layout(self) -> ObservationLayout:
        n, c, cfg = self.n_models, self.max_choices, self.config
        stat_low, stat_high = statistic_bounds(self.statistic_names)
        decider_parts: list[tuple[str, int, Any, Any]] = [
            ("team_mask", n, 0.0, 1.0),
            ("team_size", 1, 0.0, 1.0),
            ("statistics", len(self.statistic_names), stat_low, stat_high),
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
        return ObservationLayout(decider, fusion, d_low, d_high, f_low, f_high)

    @property
    def reward_range(self) -> tuple[float, float]:
        """Smallest and largest possible reward under this configuration
        (:func:`ensemble_env.game.reward.reward_bounds`)."""
        return reward_bounds(self.settings)

    def decode_decider(self, action: Any) -> np.ndarray:
        """(B, N) uint8 team masks from a batch of decider actions in the configured encoding (validated)."""
        cfg = self.config
        return decode_decider(action, cfg.decider_action, self.n_models, self.num_envs, cfg.min_team_size)

    def decode_fusion(self, action: Any) -> np.ndarray:
        """(B,) answer indices (any integer; out-of-range answers are wrong, never an error)."""
        return decode_fusion(action, self.num_envs, self.max_choices)

    # -- episodes ---------------------------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Re-seed the engine's generator (every random choice of the dynamics flows from it)."""
        self.np_random = np.random.default_rng(seed)

    def _start_episodes(self, env_ids: np.ndarray) -> None:
        """Begin a new episode in the given copies: draw their streams, empty their windows."""
        n_stream, length, s = self.questions.size, self.episode_length, self._state
        counters = s.counters
        width = s.order.shape[1]
        for env in env_ids:
            if self.config.order == "shuffled":
                s.order[env] = self.questions[self.np_random.permutation(n_stream)[:width]]
                counters[env, Counter.START] = 0
            elif length < n_stream:
                counters[env, Counter.START] = int(self.np_random.integers(0, n_stream - length + 1))
            else:
                counters[env, Counter.START] = 0
        keep_start = counters[env_ids, Counter.START]
        counters[env_ids] = 0
        counters[env_ids, Counter.START] = keep_start
        # the stream ends after the order row's last question (an episode reaching it terminates)
        counters[env_ids, Counter.STREAM] = width - keep_start
        for counts in (s.fail, s.fail2, s.fail3, s.plural, s.agree, s.votes, s.rewards):
            counts[env_ids] = 0
        s.team[env_ids] = self.initial_team
        last = s.last
        last[:, env_ids] = 0.0
        for row in (Info.ANSWER, Info.LABEL, Info.QUESTION, Info.TASK):
            last[row, env_ids] = -1.0
        last[Info.TEAM_SIZE, env_ids] = self.initial_team.sum()
        if self.cache.costs is None:
            last[Info.COST, env_ids] = self.initial_team.sum()
        else:
            costs = self.tables.costs[self._questions_of(env_ids)]
            last[Info.COST, env_ids] = (costs * self.initial_team).sum(axis=1)

    def next_questions(self) -> np.ndarray:
        """(B,) cache index of the question each copy answers at its next step."""
        return self._questions_of(np.arange(self.num_envs))

    def window_statistics(self) -> np.ndarray:
        """(B, K) float64 statistics of the decider's observation for every copy's current team.

        The observation holds the same values as float32.
        """
        return self._statistics_kernel(self.tables, self._state, self.settings)

    def _questions_of(self, env_ids: np.ndarray) -> np.ndarray:
        """Index of the question each given copy answers next (after an episode's end: the stream's next
        question when ``episode_length`` cut it, else the episode's last)."""
        s = self._state
        counters = s.counters[env_ids]
        pos = np.minimum(counters[:, Counter.POS], counters[:, Counter.STREAM] - 1)
        rows = env_ids if self.config.order == "shuffled" else np.zeros_like(env_ids)
        return s.order[rows, counters[:, Counter.START] + pos]

    def _observe(self, env_ids: np.ndarray) -> None:
        self._observe_kernel(env_ids, self.tables, self._state, self.settings, self._out)

    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Start a new episode in every copy. With ``seed``, the generator is re-seeded first."""
        if seed is not None:
            self.seed(seed)
        all_envs = np.arange(self.num_envs)
        self._start_episodes(all_envs)
        self._started = True
        self._out = self._new_outputs()
        self._observe(all_envs)
        return self.observations, self._infos()

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
        terminated = self.outputs.terminated.copy()
        truncated = done & ~terminated
        infos: dict[str, Any] = self._infos()
        rewards = reward.astype(np.float32)
        if self.autoreset and done.any():
            finished = np.flatnonzero(done)
            infos["final_obs"] = {agent: array.copy() for agent, array in obs.items()}
            infos["final_state"] = self.state()
            infos["final_info"] = {agent: infos[agent] for agent in AGENTS}
            self._start_episodes(finished)
            self._observe(finished)
            infos.update(self._infos())
        truncations = {"decider": truncated, "fusion": truncated.copy()}
        terminations = {"decider": terminated, "fusion": terminated.copy()}
        return self.observations, {"decider": rewards, "fusion": rewards.copy()}, terminations, truncations, infos

    def advance(
        self, next_team: np.ndarray, answers: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The step itself, on decoded actions: (B, N) uint8 teams and (B,) int64 answers.

        Returns the new observations, the (B,) float64 rewards and the (B,) bool episode ends; no auto-reset.
        """
        if not self._started:
            raise RuntimeError("step() called before reset()")
        next_team = np.ascontiguousarray(next_team, dtype=np.uint8)
        answers = np.ascontiguousarray(answers, dtype=np.int64)
        if next_team.shape != (self.num_envs, self.n_models) or answers.shape != (self.num_envs,):
            raise ValueError(
                f"advance: expected teams of shape {(self.num_envs, self.n_models)} and answers of shape "
                f"{(self.num_envs,)}, got {next_team.shape} and {answers.shape}"
            )
        out = self._new_outputs()
        self._step_kernel(next_team, answers, self.tables, self._state, self.settings, out)
        self._out = out
        return self.observations, out.reward, out.done

    # -- snapshots ----------------------------------------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray]:
        """A snapshot of every copy (plain numpy arrays, the generator's state included) for :meth:`set_state`.

        ``numpy.savez(path, **snapshot)`` stores it and ``dict(numpy.load(path))`` reads it back, without
        pickle. After ``set_state(snapshot)`` the same actions give bit-identical observations, rewards and
        infos.
        """
        if not self._started:
            raise RuntimeError("get_state() called before reset(): there is no episode to snapshot")
        snapshot = {name: array.copy() for name, array in self._state._asdict().items()}
        snapshot["obs_decider"] = self._out.decider.copy()
        snapshot["obs_fusion"] = self._out.fusion.copy()
        snapshot["rng"] = _rng_to_array(self.np_random)
        snapshot["signature"] = np.array(self._signature())
        return snapshot

    def set_state(self, snapshot: Mapping[str, np.ndarray]) -> None:
        """Restore a snapshot of :meth:`get_state` taken from an engine of the same cache, options and B."""
        names = [*CopyState._fields, "obs_decider", "obs_fusion", "rng", "signature"]
        missing = [name for name in names if name not in snapshot]
        if missing:
            raise ValueError(f"set_state: the snapshot lacks {', '.join(missing)}; give the dict get_state() returns")
        signature = str(np.asarray(snapshot["signature"]))
        if signature != self._signature():
            raise ValueError(
                f"set_state: the snapshot was taken from another configuration or cache ({signature}); "
                f"this engine is {self._signature()}"
            )
        shapes = {name: array for name, array in self._state._asdict().items()}
        shapes["obs_decider"], shapes["obs_fusion"] = self._out.decider, self._out.fusion
        shapes["rng"] = _rng_to_array(self.np_random)
        for name, reference in shapes.items():
            value = np.asarray(snapshot[name])
            if value.shape != reference.shape or value.dtype != reference.dtype:
                raise ValueError(
                    f"set_state: {name} has shape {value.shape} and dtype {value.dtype}, expected "
                    f"{reference.shape} and {reference.dtype}"
                )
        for name, array in self._state._asdict().items():
            array[...] = snapshot[name]
        out = self._new_outputs()
        out.decider[...] = snapshot["obs_decider"]
        out.fusion[...] = snapshot["obs_fusion"]
        self._out = out
        self.np_random = _rng_from_array(np.asarray(snapshot["rng"]))
        self._started = True

    def _signature(self) -> str:
        cfg, cache = self.config, self.cache
        return (
            f"num_envs={self.num_envs} models={list(cache.models)} n_questions={cache.n_questions} "
            f"tasks={list(cache.task_names)} config={cfg!r}"
        )

    # -- observations and infos -------------------------------------------------------------------------
    @property
    def outputs(self) -> Outputs:
        """The last step's results as the kernels wrote them (observations, rewards, episode ends)."""
        return self._out

    @property
    def observations(self) -> dict[str, np.ndarray]:
        """The current observations, ``{"decider": (B, D), "fusion": (B, F)}`` float32."""
        return {"decider": self._out.decider, "fusion": self._out.fusion}

    def state(self) -> np.ndarray:
        """(B, decider_size + fusion_size) centralized state: both agents' current observations."""
        if not self._started:
            raise RuntimeError("state() called before reset(): reset the environment first")
        return np.concatenate([self._out.decider, self._out.fusion], axis=1)

    def action_masks(self) -> np.ndarray:
        """(B, C) int8 valid-choice mask of the question the fusion agent answers next."""
        return self._out.fusion[:, self.layout.fusion["action_mask"]].astype(np.int8)

    def _infos(self) -> dict[str, dict[str, np.ndarray]]:
        last = self._state.last
        shared = {key: last[k].copy() for k, key in enumerate(INFO_KEYS)}
        return {"decider": shared, "fusion": {**shared, "action_mask": self.action_masks()}}

    def info_values(self, env: int = 0) -> dict[str, float]:
        """The shared info values of one copy as Python floats (what ``_infos`` holds at index ``env``)."""
        return dict(zip(INFO_KEYS, self._state.last[:, env].tolist(), strict=True))

    @property
    def team(self) -> np.ndarray:
        """(B, N) the team each copy will use for its next question (a copy)."""
        return self._state.team.astype(bool)

    def episode_questions(self, env: int = 0) -> np.ndarray:
        """Cache indices of the questions of copy ``env``'s current episode, in the order it answers them."""
        s, start = self._state, int(self._state.counters[env, Counter.START])
        row = env if self.config.order == "shuffled" else 0
        return s.order[row, start : start + self.episode_length].astype(np.int64)

    def window_contents(self, env: int = 0) -> np.ndarray:
        """Cache indices of the questions in copy ``env``'s window, oldest first."""
        s = self._state
        count, head = int(s.counters[env, Counter.COUNT]), int(s.counters[env, Counter.HEAD])
        ring = s.window[env]
        if count < ring.size:
            return ring[:count].astype(np.int64)
        return np.roll(ring, -head).astype(np.int64)


def _rng_to_array(generator: np.random.Generator) -> np.ndarray:
    """(6,) uint64: a PCG64 generator's 128-bit state and increment (high, low words) and its cached bits."""
    state = generator.bit_generator.state
    if state["bit_generator"] != "PCG64":
        raise ValueError(f"snapshots support PCG64 generators, got {state['bit_generator']}")
    inner, mask = state["state"], (1 << 64) - 1
    words = [inner["state"] >> 64, inner["state"] & mask, inner["inc"] >> 64, inner["inc"] & mask]
    return np.array([*words, state["has_uint32"], state["uinteger"]], dtype=np.uint64)


def _rng_from_array(words: np.ndarray) -> np.random.Generator:
    values = [int(value) for value in words]
    generator = np.random.Generator(np.random.PCG64())
    generator.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (values[0] << 64) | values[1], "inc": (values[2] << 64) | values[3]},
        "has_uint32": values[4],
        "uinteger": values[5],
    }
    return generator
