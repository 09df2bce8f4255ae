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
  last T' rewards (oldest first), valid-choice mask (C), extras]``;
  extras, in this order when enabled: one-hot task of the question (n_tasks), its features (F).
- state: ``concat(decider, fusion)``.

RLAE options (``docs/environment-spec.md``, "RLAE"): with ``fusion_action="weights"`` the fusion action is a
weight per model and :func:`~ensemble_env.game.dynamics.weighted_answers` turns it into the answer the step
takes (the kernels' step is the same); with ``decider=False`` there is no decider agent and every step commits
the whole pool; with ``fusion_agents="per_model"`` agents ``weight_0`` ... ``weight_{N-1}`` each observe
``[task one-hot of the question (n_tasks), its features (F, when the cache has them), the model's team-masked
probabilities (C), its team membership (1), valid-choice mask (C)]`` and set their model's weight. The state is
then ``concat(decider (if any), fusion, context)``, context = the task one-hot and features of the question
(the per-model agents' shared first n_tasks + F entries). The decider's observation is computed in every case
(one set of kernels); without a decider no agent observes it and the state leaves it out.

After the last question there is no next question: the fusion observation's probabilities are zero and its
valid-choice mask is all ones; the decider's task/feature extras are zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game import dynamics
from ensemble_env.game.actions import (
    MAX_SUBSET_MODELS,
    decider_space,
    decode_decider,
    decode_fusion,
    decode_weights,
    fusion_space,
    weights_space,
)
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.jit import kernel
from ensemble_env.game.records import INFO_KEYS, CopyState, Counter, FastKernel, Info, Layout, Outputs, Settings, Tables
from ensemble_env.game.reward import RewardSettings, reward_bounds
from ensemble_env.game.window import (
    MAX_TABLE_MODELS,
    STATISTIC_CODES,
    add_agreement,
    add_failures,
    count_planes,
    n_triples,
    plurality_table,
    statistic_bounds,
    table_words,
    update_plurality,
)
from ensemble_env.text import show

__all__ = [
    "AGENTS",
    "INFO_KEYS",
    "MAX_STATE_BYTES",
    "MAX_STEPS",
    "EnsembleVectorEnv",
    "ObservationLayout",
    "check_seed",
    "game_agents",
]

AGENTS = ("decider", "fusion")


def game_agents(config: EnvConfig, n_models: int) -> tuple[str, ...]:
    """The agents of a configuration, in acting order: ``AGENTS`` by default; without a decider no
    ``"decider"``; with ``fusion_agents="per_model"`` ``weight_0`` ... ``weight_{N-1}`` instead of ``"fusion"``."""
    deciders = ("decider",) if config.decider else ()
    if config.fusion_agents == "per_model":
        return (*deciders, *(f"weight_{i}" for i in range(n_models)))
    return (*deciders, "fusion")


#: the most memory the copies' state may take (``num_envs`` x window x ... beyond it is refused up front)
MAX_STATE_BYTES = 8 * 2**30
#: the most steps a copy's counters may hold in a snapshot (stepping on past an episode's end with ``advance``
#: keeps counting); 2**53, so that the info ``step`` (a float64) holds it exactly
MAX_STEPS = 2**53


def check_seed(seed: Any, where: str = "reset") -> int | None:
    """``seed`` as numpy's generators take it: None, or a non-negative integer (a Python or numpy integer of any
    size, as :class:`numpy.random.SeedSequence`); anything else (a bool, a negative number, a float, a string,
    a sequence) raises a ValueError naming the value, never coerced (``True`` is not seed 1)."""
    if seed is None:
        return None
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(
            f"{where}: seed must be None or a non-negative integer (int or numpy integer, not a bool), "
            f"got {show(seed)} of type {type(seed).__name__}"
        )
    return int(seed)


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
    ``{"decider": (B, N) 0/1 array (or (B,) team indices for the "subset" encoding), "fusion": (B,) ints}``;
    with the RLAE options (``agents``): ``"fusion"`` (B, N) weights in [0, 1], no ``"decider"``, or
    ``"weight_i"`` (B, 1) weights.
    ``get_state()`` / ``set_state()`` snapshot and restore every copy exactly.

    Spaces, in Gymnasium's vector conventions (``gymnasium.vector``), per agent: ``single_observation_space(agent)``
    and ``single_action_space(agent)`` are one copy's (the parallel view's ``observation_space(agent)`` and
    ``action_space(agent)``); ``observation_space(agent)`` and ``action_space(agent)`` are the batched spaces of
    all B copies (``gymnasium.vector.utils.batch_space``: ``Discrete(C)`` becomes ``MultiDiscrete([C] * B)``,
    ``MultiBinary(N)`` a ``Box(0, 1, (B, N), int8)``, a ``Box`` gains the leading B axis), so that
    ``venv.action_space(agent).sample()`` is a whole batch ``step`` accepts. Each method returns the same object
    every time (seed it with ``.seed(s)``); the batched spaces are built on first use. ``single_state_space`` and
    ``state_space`` are those of :meth:`state`.
    """

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
        for option in ("decider_extras", "fusion_extras"):
            if "features" in getattr(config, option) and cache.features is None:
                raise ValueError(f"{option} includes 'features' but the cache {cache.path} has no 'features' dataset")
        #: the agents, in acting order (:func:`game_agents`)
        self.agents = game_agents(config, n_models)
        self.weight_agents = tuple(agent for agent in self.agents if agent.startswith("weight_"))
        self.uses_weights = config.fusion_action == "weights"
        #: today's game (a decider, one fusion agent answering): the paths it takes stay as they were
        self._plain = self.agents == AGENTS and not self.uses_weights
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
        self._weights_kernel = FastKernel(dynamics.weighted_answers)
        self._models_kernel = FastKernel(dynamics.observe_models)
        #: the team every step commits without a decider (the whole pool)
        self._pool = np.ones((self.num_envs, n_models), dtype=np.uint8)
        self._models_out = np.zeros((self.num_envs, n_models, self.layout.model_size), dtype=np.float32)
        #: (B, N) float32 the weights of the last step (None before the first, with ``fusion_action="answer"``)
        self.last_weights: np.ndarray | None = None
        #: one copy's spaces by agent, built once (the parallel view's), and of :meth:`state`
        self.single_observation_spaces, self.single_action_spaces = self._build_spaces()
        self.single_state_space = spaces.Box(self.layout.state_low, self.layout.state_high, dtype=np.float32)
        self._batched: dict[tuple[str, str], spaces.Space[Any]] = {}  # the batched spaces, built on first use

    # -- spaces -----------------------------------------------------------------------------------------
    def _build_spaces(self) -> tuple[dict[str, spaces.Space[Any]], dict[str, spaces.Space[Any]]]:
        layout, cfg, n_models = self.layout, self.config, self.n_models
        observation: dict[str, spaces.Space[Any]] = {}
        action: dict[str, spaces.Space[Any]] = {}
        for agent in self.agents:
            if agent == "decider":
                observation[agent] = spaces.Box(layout.decider_low, layout.decider_high, dtype=np.float32)
                action[agent] = decider_space(cfg.decider_action, n_models)
            elif agent == "fusion":
                observation[agent] = spaces.Box(layout.fusion_low, layout.fusion_high, dtype=np.float32)
                action[agent] = weights_space(n_models) if self.uses_weights else fusion_space(self.max_choices)
            else:  # weight_i
                observation[agent] = spaces.Box(layout.model_low, layout.model_high, dtype=np.float32)
                action[agent] = weights_space(1)
        return observation, action

    def _agent_space(self, table: dict[str, spaces.Space[Any]], agent: str) -> spaces.Space[Any]:
        if agent not in table:
            raise ValueError(f"unknown agent {agent!r}; the agents are {list(self.agents)}")
        return table[agent]

    def _batch(self, kind: str, agent: str, single: spaces.Space[Any]) -> spaces.Space[Any]:
        key = (kind, agent)
        if key not in self._batched:
            self._batched[key] = batch_space(single, self.num_envs)
        return self._batched[key]

    def single_observation_space(self, agent: str) -> spaces.Space[Any]:
        """One copy's observation space of ``agent`` (a ``Box(float32)``; ValueError for an unknown agent)."""
        return self._agent_space(self.single_observation_spaces, agent)

    def single_action_space(self, agent: str) -> spaces.Space[Any]:
        """One copy's action space of ``agent`` (the parallel view's ``action_space(agent)``)."""
        return self._agent_space(self.single_action_spaces, agent)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The batched observation space of ``agent``: a ``Box(float32)`` of shape (B, size)."""
        return self._batch("observation", agent, self.single_observation_space(agent))

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """The batched action space of ``agent``; its ``sample()`` is a batch of B actions :meth:`step` accepts
        (the fusion agent's ``MultiDiscrete`` takes the valid choices as
        ``sample(mask=tuple(infos["fusion"]["action_mask"]))``)."""
        return self._batch("action", agent, self.single_action_space(agent))

    @property
    def state_space(self) -> spaces.Space[Any]:
        """The batched space of :meth:`state`: ``Box(float32)`` of shape (B, state size)."""
        return self._batch("state", "", self.single_state_space)

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
            fusion_features=start(fusion, "features"),
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
            + 8 * n * self.layout.model_size
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
        features = self.cache.features
        if "task" in cfg.fusion_extras:
            fusion_parts.append(("task", self.cache.n_tasks, 0.0, 1.0))
        if "features" in cfg.fusion_extras and features is not None:  # presence checked in __init__
            fusion_parts.append(("features", features.shape[1], -np.inf, np.inf))
        model_parts: list[tuple[str, int, Any, Any]] = []
        if cfg.fusion_agents == "per_model":
            model_parts.append(("task", self.cache.n_tasks, 0.0, 1.0))
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

    def decode_agent(self, agent: str, action: Any, n_envs: int | None) -> np.ndarray:
        """``agent``'s action decoded and validated: (B, N) uint8 team (decider), (B,) int64 answers (fusion,
        ``fusion_action="answer"``), (B, N) float32 weights (fusion, ``"weights"``) or (B, 1) float32 weights
        (``weight_i``). ``n_envs``: B for a batch, None for one action (B = 1). A ValueError names the agent, the
        space and the value."""
        cfg, n = self.config, self.n_models
        if agent not in self.agents:
            raise ValueError(f"unknown agent {agent!r}; the agents are {list(self.agents)}")
        if agent == "decider":
            return decode_decider(action, cfg.decider_action, n, n_envs, cfg.min_team_size)
        if agent == "fusion" and not self.uses_weights:
            return decode_fusion(action, n_envs, self.max_choices)
        return decode_weights(action, n if agent == "fusion" else 1, n_envs, agent)

    def decode_actions(self, actions: Any, n_envs: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(teams (B, N) uint8, answers (B,) int64, weights (B, N) float32 or None) of one action per agent
        (``n_envs``: see :meth:`decode_agent`), every action validated before anything changes."""
        if not isinstance(actions, Mapping):
            raise ValueError(f"actions must be a dict keyed by agent ({', '.join(self.agents)}), got {show(actions)}")
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(f"actions lacks {', '.join(missing)}; expected a dict with keys {', '.join(self.agents)}")
        unknown = [agent for agent in actions if agent not in self.agents]
        if unknown:
            raise ValueError(
                f"actions names unknown agent(s) {', '.join(map(repr, unknown))}; the agents are {list(self.agents)}"
            )
        teams = self.decode_agent("decider", actions["decider"], n_envs) if self.config.decider else self._pool
        if not self.uses_weights:
            return teams, self.decode_agent("fusion", actions["fusion"], n_envs), None
        if self.weight_agents:
            weights = np.concatenate([self.decode_agent(a, actions[a], n_envs) for a in self.weight_agents], axis=1)
        else:
            weights = self.decode_agent("fusion", actions["fusion"], n_envs)
        return teams, self.weighted_answers(weights), weights

    def weighted_answers(self, weights: np.ndarray) -> np.ndarray:
        """(B,) int64 answers the (B, N) weights give on each copy's next question with its current team
        (:func:`~ensemble_env.game.dynamics.weighted_answers`)."""
        weights = np.ascontiguousarray(weights, dtype=np.float32)
        if weights.shape != (self.num_envs, self.n_models):
            raise ValueError(
                f"weighted_answers: expected weights of shape {(self.num_envs, self.n_models)}, got {weights.shape}"
            )
        return self._weights_kernel(weights, self.tables, self._state, self.settings)

    # -- episodes ---------------------------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Re-seed the engine's generator (every random choice of the dynamics flows from it); ``seed`` is None
        or a non-negative integer (:func:`check_seed`)."""
        self.np_random = np.random.default_rng(check_seed(seed, "seed"))

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
        last[Info.COST, env_ids] = self._initial_cost(self._questions_of(env_ids))

    def _initial_cost(self, questions: np.ndarray) -> np.ndarray | np.integer:
        """The info ``cost`` at reset: the initial team's cost on each given first question."""
        if self.cache.costs is None:
            return self.initial_team.sum()
        return (self.tables.costs[questions] * self.initial_team).sum(axis=1)

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
        if self.weight_agents:
            self._observe_models()

    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Start a new episode in every copy. With ``seed`` (None or a non-negative integer, :func:`check_seed`),
        the generator is re-seeded first."""
        seed = check_seed(seed)
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        all_envs = np.arange(self.num_envs)
        self._start_episodes(all_envs)
        self._started = True
        self._out = self._new_outputs()
        self._observe(all_envs)
        self.last_weights = None
        return self.observations, self._infos()

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]
    ]:
        """Advance every copy by one question; see the class docstring for shapes."""
        if not self._started:
            raise RuntimeError("step() called before reset()")
        if self._plain:  # today's game
            if "decider" not in actions or "fusion" not in actions:
                missing = [agent for agent in AGENTS if agent not in actions]
                raise ValueError(f"actions lacks {', '.join(missing)}; expected a dict with keys {', '.join(AGENTS)}")
            teams, answers, weights = (
                self.decode_decider(actions["decider"]),
                self.decode_fusion(actions["fusion"]),
                None,
            )
        else:
            teams, answers, weights = self.decode_actions(actions, self.num_envs)
        obs, reward, done = self.advance(teams, answers, weights)
        terminated = self.outputs.terminated.copy()
        truncated = done & ~terminated
        infos: dict[str, Any] = self._infos()
        rewards = reward.astype(np.float32)
        if self.autoreset and done.any():
            finished = np.flatnonzero(done)
            infos["final_obs"] = {agent: array.copy() for agent, array in obs.items()}
            infos["final_state"] = self.state()
            infos["final_info"] = {agent: infos[agent] for agent in self.agents}
            self._start_episodes(finished)
            self._observe(finished)
            infos.update(self._infos())
        if self._plain:
            truncations = {"decider": truncated, "fusion": truncated.copy()}
            terminations = {"decider": terminated, "fusion": terminated.copy()}
            return self.observations, {"decider": rewards, "fusion": rewards.copy()}, terminations, truncations, infos
        agents = self.agents
        first = agents[0]
        truncations = {agent: truncated if agent == first else truncated.copy() for agent in agents}
        terminations = {agent: terminated if agent == first else terminated.copy() for agent in agents}
        return (
            self.observations,
            {agent: rewards.copy() if agent != first else rewards for agent in agents},
            terminations,
            truncations,
            infos,
        )

    def advance(
        self, next_team: np.ndarray, answers: np.ndarray, weights: np.ndarray | None = None
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The step itself, on decoded actions: (B, N) uint8 teams and (B,) int64 answers (with
        ``fusion_action="weights"``, those of :meth:`weighted_answers`; ``weights``, kept for rendering in
        :attr:`last_weights`).

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
        if self.weight_agents:
            self._observe_models()
        if self.uses_weights:
            self.last_weights = None if weights is None else np.array(weights, dtype=np.float32)
        return self.observations, out.reward, out.done

    def _observe_models(self) -> None:
        """Fresh per-model observations of every copy (``fusion_agents="per_model"``)."""
        self._models_out = np.empty((self.num_envs, self.n_models, self.layout.model_size), dtype=np.float32)
        self._models_kernel(self.tables, self._state, self.settings, self._models_out, "features" in self.layout.model)

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
        """Restore a snapshot of :meth:`get_state` taken from an engine of the same cache, options and B.

        Every array is checked before anything changes: its shape and dtype, then its values against the
        configuration and the cache (:class:`_SnapshotCheck`): the streams, every counter, the teams, the windows
        and the counts kept over them, the reward history, the infos, the generator's words and the
        observations (which must be those the restored state gives). A value out of its range or inconsistent
        with the others raises a ValueError naming the field, the copy and the value, and the engine is left as
        it was: the kernels never see it. What passes is a state the kernels can step safely, with every
        observation, reward and info inside its bounds (the generator's words, the window's slots not yet
        written in the episode and a return longer than the reward history cannot be checked further).
        """
        values = self._checked_snapshot(snapshot)
        for name, array in self._state._asdict().items():
            array[...] = values[name]
        out = self._new_outputs()
        out.decider[...] = values["obs_decider"]
        out.fusion[...] = values["obs_fusion"]
        self._out = out
        self.np_random = _rng_from_array(values["rng"])
        self._started = True
        self.last_weights = None
        if self.weight_agents:
            self._observe_models()

    def _checked_snapshot(self, snapshot: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Copies of the snapshot's arrays (C order, the engine's dtypes), checked by shape, dtype and value."""
        if not isinstance(snapshot, Mapping):
            raise ValueError(f"set_state: the snapshot must be the dict get_state() returns, got {show(snapshot)}")
        names = [*CopyState._fields, "obs_decider", "obs_fusion", "rng", "signature"]
        missing = [name for name in names if name not in snapshot]
        if missing:
            raise ValueError(f"set_state: the snapshot lacks {', '.join(missing)}; give the dict get_state() returns")
        signature = str(np.asarray(snapshot["signature"]))
        if signature != self._signature():
            raise ValueError(
                f"set_state: the snapshot was taken from another configuration or cache ({show(signature, 2000)}); "
                f"this engine is {self._signature()}"
            )
        references = {name: array for name, array in self._state._asdict().items()}
        references["obs_decider"], references["obs_fusion"] = self._out.decider, self._out.fusion
        references["rng"] = _rng_to_array(self.np_random)
        values: dict[str, np.ndarray] = {}
        for name, reference in references.items():
            try:
                value = np.asarray(snapshot[name])
            except (ValueError, TypeError) as error:
                raise ValueError(f"set_state: {name} is not an array ({type(error).__name__}: {error})") from None
            if value.shape != reference.shape or value.dtype != reference.dtype:
                raise ValueError(
                    f"set_state: {name} has shape {value.shape} and dtype {value.dtype}, expected "
                    f"{reference.shape} and {reference.dtype}"
                )
            values[name] = np.array(value, order="C", copy=True)  # what is checked is what is restored
        _SnapshotCheck(self, values).run()
        return values

    def _signature(self) -> str:
        cfg, cache = self.config, self.cache
        return (
            f"num_envs={self.num_envs} models={list(cache.models)} n_questions={cache.n_questions} "
            f"tasks={list(cache.task_names)} config={cfg.signature_text()}"
        )

    # -- observations and infos -------------------------------------------------------------------------
    @property
    def outputs(self) -> Outputs:
        """The last step's results as the kernels wrote them (observations, rewards, episode ends)."""
        return self._out

    @property
    def observations(self) -> dict[str, np.ndarray]:
        """The current observations by agent, float32: ``{"decider": (B, D), "fusion": (B, F)}`` by default;
        without a decider no ``"decider"``; per-model agents ``"weight_i": (B, M)`` instead of ``"fusion"``."""
        if self._plain:
            return {"decider": self._out.decider, "fusion": self._out.fusion}
        obs = {"decider": self._out.decider} if self.config.decider else {}
        if self.weight_agents:
            obs.update((agent, self._models_out[:, i]) for i, agent in enumerate(self.weight_agents))
        else:
            obs["fusion"] = self._out.fusion
        return obs

    @property
    def fusion_observation(self) -> np.ndarray:
        """(B, F) the fusion observation (the whole team's probabilities), also with per-model agents."""
        return self._out.fusion

    def state(self) -> np.ndarray:
        """(B, S) centralized state: ``concat(decider, fusion)`` observations by default; without a decider
        no decider part; with per-model agents the question's context (task one-hot, features) appended."""
        if not self._started:
            raise RuntimeError("state() called before reset(): reset the environment first")
        parts = [self._out.decider] if self.config.decider else []
        parts.append(self._out.fusion)
        if self.weight_agents:
            parts.append(self._models_out[:, 0, : self.layout.context_size])
        return np.concatenate(parts, axis=1)

    def action_masks(self) -> np.ndarray:
        """(B, C) int8 valid-choice mask of the question the fusion agent answers next."""
        return self._out.fusion[:, self.layout.fusion["action_mask"]].astype(np.int8)

    def _infos(self) -> dict[str, dict[str, np.ndarray]]:
        last = self._state.last
        shared = {key: last[k].copy() for k, key in enumerate(INFO_KEYS)}
        if self._plain:
            return {"decider": shared, "fusion": {**shared, "action_mask": self.action_masks()}}
        infos = {"decider": shared} if self.config.decider else {}
        # a weighting agent's action is a Box: the valid choices are its "choice_mask", not an action mask
        mask_key = "choice_mask" if self.uses_weights else "action_mask"
        for agent in self.agents:
            if agent != "decider":
                infos[agent] = {**shared, mask_key: self.action_masks()}
        return infos

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


# -- checking a snapshot by value -------------------------------------------------------------------------


def _item(value: Any) -> Any:
    """A numpy scalar as a Python number (for messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _first(mask: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first True entry of ``mask`` (C order), None when there is none."""
    if not mask.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask.reshape(-1))), mask.shape))


def _refusal(field: str, index: tuple[Any, ...], value: Any, problem: str) -> ValueError:
    where = "[" + ", ".join(str(part) for part in index) + "]" if index else ""
    return ValueError(f"set_state: {field}{where} = {show(_item(value))} {problem}")


@kernel()
def _window_counts(
    window: np.ndarray,
    counts: np.ndarray,
    tables: Tables,
    settings: Settings,
    fail: np.ndarray,
    fail2: np.ndarray,
    fail3: np.ndarray,
    plural: np.ndarray,
    agree: np.ndarray,
    votes: np.ndarray,
) -> None:
    """The counts the step kernel keeps over each copy's window, rebuilt from the window's first ``counts[env]``
    questions into zeroed arrays (the same updates as ``dynamics.step``, so equal counts are bit-identical)."""
    carry = np.empty(plural.shape[2], dtype=np.uint64)
    borrow = np.empty(plural.shape[2], dtype=np.uint64)
    for env in range(window.shape[0]):
        for r in range(counts[env]):
            q = window[env, r]
            add_failures(env, q, 1, tables.failing, tables.n_failing, fail, fail2, fail3)
            if settings.track_agreement:
                add_agreement(env, q, 1, tables.preds, agree, votes)
            if settings.use_table:
                row = tables.plural_table[tables.table_row[q]]
                update_plurality(plural[env], row, row, False, carry, borrow)


class _SnapshotCheck:
    """The value checks of :meth:`EnsembleVectorEnv.set_state`, in an order where each check relies only on what
    the earlier ones established (the kernels that rebuild the counts and the observations run last, on arrays
    whose indices are all known to be in range).

    What a snapshot of this engine holds, per copy b, with L = episode_length, T = window, S = the stream's size:

    - ``order``: sequential order, exactly the stream (the split's questions in cache order); shuffled order, per
      copy the first questions of a permutation of the stream (questions of the stream, none twice);
    - ``counters``: START in 0..S - L (0 when shuffled or when an episode is the whole stream), POS (steps
      answered) in 0..MAX_STEPS, and the others follow from them: ANSWERED = POS, COUNT = min(POS, T),
      HEAD = POS mod T, STREAM = (order's width) - START, N_CORRECT in 0..ANSWERED;
    - ``team``: 0/1, at least ``min_team_size`` models (every model with ``decider=False``);
    - ``window``: question indices of the cache; the last COUNT slots written hold the questions answered at those
      steps (step t answered ``order[START + min(t, L - 1)]``);
    - ``fail`` ... ``votes``: exactly the counts of the window's questions (rebuilt and compared);
    - ``rewards``: finite, inside ``reward_range``, zero where the episode has not yet written one;
    - ``last`` (the infos): finite; at POS = 0 the values of a reset; after it, the last question, its label and
      task, the step, the running accuracy exactly, the answer an integer (the label when right), the team size
      and cost possible, the reward inside the bounds (and the history's last entry), the return within POS
      times the bounds, the focal diversity that of the team over the window;
    - ``rng``: a PCG64 state (odd increment, has_uint32 0 or 1, a 32-bit cached value);
    - ``obs_decider``, ``obs_fusion``: finite (but features), inside their spaces, and equal to the observations
      the restored state gives (rebuilt by ``dynamics.observe``).
    """

    def __init__(self, engine: EnsembleVectorEnv, values: dict[str, np.ndarray]) -> None:
        self.engine = engine
        self.values = values
        self.state = CopyState(**{name: values[name] for name in CopyState._fields})
        self.sequential = engine.config.order != "shuffled"

    def run(self) -> None:
        self.order()
        self.counters()
        self.team()
        self.window()
        self.counts()
        self.rewards()
        self.infos()
        self.rng()
        self.observations()

    # -- where each copy is ---------------------------------------------------------------------------
    def _stream_text(self) -> str:
        cfg, n_stream = self.engine.config, self.engine.questions.size
        tasks = "" if cfg.tasks is None else f" and tasks {list(cfg.tasks)}"
        return f"the {n_stream} questions of split {cfg.split!r}{tasks}"

    def order(self) -> None:
        order, questions = self.state.order, self.engine.questions
        if self.sequential:
            index = _first(order != questions[None, :])
            if index is not None:
                raise _refusal(
                    "order",
                    index,
                    order[index],
                    f"is not question {questions[index[1]]}: with order='sequential' the stream is "
                    f"{self._stream_text()}, in cache order",
                )
            return
        index = _first(~np.isin(order, questions))
        if index is not None:
            raise _refusal("order", index, order[index], f"is not one of {self._stream_text()}")
        ordered = np.sort(order, axis=1)
        index = _first(ordered[:, 1:] == ordered[:, :-1])
        if index is not None:
            raise ValueError(
                f"set_state: order[{index[0]}] holds question {ordered[index]} twice: a shuffled stream draws "
                f"each question of {self._stream_text()} at most once"
            )

    def counters(self) -> None:
        engine, counters = self.engine, self.state.counters
        window, length, n_stream = engine.config.window, engine.episode_length, engine.questions.size
        start, pos = counters[:, Counter.START], counters[:, Counter.POS]
        if self.sequential and length < n_stream:
            latest, why = n_stream - length, f"an episode of {length} questions starts within a stream of {n_stream}"
        else:
            latest = 0
            why = "a shuffled episode starts its own stream" if not self.sequential else "an episode is the stream"
        self._in_range(Counter.START, 0, latest, why)
        self._in_range(Counter.POS, 0, MAX_STEPS, "the steps answered in the episode")
        derived = {
            Counter.ANSWERED: (pos, "ANSWERED counts the steps answered, as POS"),
            Counter.COUNT: (np.minimum(pos, window), f"the window holds min(POS, window={window}) questions"),
            Counter.HEAD: (pos % window, f"the window's next slot is POS mod window={window}"),
            Counter.STREAM: (
                self.state.order.shape[1] - start,
                "STREAM is the questions of the copy's stream from START on",
            ),
        }
        for column, (expected, why) in derived.items():
            index = _first(counters[:, column] != expected)
            if index is not None:
                env = index[0]
                raise _refusal(
                    "counters",
                    (env, column.name),
                    counters[env, column],
                    f"is not {expected[env]}, the value for POS = {pos[env]} and START = {start[env]} ({why})",
                )
        self._in_range(Counter.N_CORRECT, 0, counters[:, Counter.ANSWERED], "the right answers among ANSWERED")

    def _in_range(self, column: Counter, low: int, high: Any, why: str) -> None:
        values = self.state.counters[:, column]
        highs = np.broadcast_to(high, values.shape)
        index = _first((values < low) | (values > highs))
        if index is not None:
            env = index[0]
            raise _refusal(
                "counters", (env, column.name), values[env], f"is outside [{low}, {_item(highs[env])}] ({why})"
            )

    # -- teams and windows ----------------------------------------------------------------------------
    def team(self) -> None:
        team, smallest = self.state.team, self.engine.config.min_team_size
        index = _first(team > 1)
        if index is not None:
            raise _refusal("team", index, team[index], "is not 0 or 1 (a team is a 0/1 mask over the models)")
        sizes = team.sum(axis=1, dtype=np.int64)
        if not self.engine.config.decider:
            index = _first(team != 1)
            if index is not None:
                raise _refusal("team", index, team[index], "is not 1: with decider=False the team is every model")
        index = _first(sizes < smallest)
        if index is not None:
            raise ValueError(
                f"set_state: team[{index[0]}] has {sizes[index]} models, fewer than min_team_size={smallest}"
            )

    def window(self) -> None:
        engine, state = self.engine, self.state
        window, counters, order = state.window, state.counters, state.order
        n_questions, length, size = engine.cache.n_questions, engine.episode_length, engine.config.window
        index = _first((window < 0) | (window >= n_questions))
        if index is not None:
            raise _refusal("window", index, window[index], f"is not a question of the cache (0..{n_questions - 1})")
        for env in range(engine.num_envs):
            pos, start = int(counters[env, Counter.POS]), int(counters[env, Counter.START])
            steps = np.arange(pos - min(pos, size), pos, dtype=np.int64)
            expected = order[0 if self.sequential else env, start + np.minimum(steps, length - 1)]
            got = window[env, steps % size]
            wrong = _first(got != expected)
            if wrong is not None:
                k = wrong[0]
                raise _refusal(
                    "window",
                    (env, int(steps[k] % size)),
                    got[k],
                    f"is not question {expected[k]}, the one copy {env} answered at step {steps[k]} of its episode "
                    f"(order[{0 if self.sequential else env}, {start + min(int(steps[k]), length - 1)}], with counters "
                    f"POS = {pos} and START = {start})",
                )

    def counts(self) -> None:
        engine, state = self.engine, self.state
        names = ("fail", "fail2", "fail3", "plural", "agree", "votes")
        rebuilt = {name: np.zeros_like(getattr(state, name)) for name in names}
        counts = np.ascontiguousarray(state.counters[:, Counter.COUNT])
        _window_counts(state.window, counts, engine.tables, engine.settings, *rebuilt.values())
        for name, expected in rebuilt.items():
            got = getattr(state, name)
            index = _first(got != expected)
            if index is not None:
                env = index[0]
                count = int(state.counters[env, Counter.COUNT])
                raise _refusal(
                    name,
                    index,
                    got[index],
                    f"is not {_item(expected[index])}, the count the questions of copy {env}'s window give (its "
                    f"window's first {count} slots, counters COUNT = {count})",
                )

    # -- rewards and infos ----------------------------------------------------------------------------
    def rewards(self) -> None:
        rewards, pos = self.state.rewards, self.state.counters[:, Counter.POS]
        history = rewards.shape[1]
        if history == 0:
            return
        low, high = self.engine.reward_range
        index = _first(~np.isfinite(rewards))
        if index is not None:
            raise _refusal("rewards", index, rewards[index], "is not finite")
        index = _first((rewards < np.float32(low)) | (rewards > np.float32(high)))
        if index is not None:
            raise _refusal("rewards", index, rewards[index], f"is outside the reward range [{low:g}, {high:g}]")
        unset = np.arange(history)[None, :] < (history - np.minimum(pos, history))[:, None]
        index = _first(unset & (rewards != 0))
        if index is not None:
            env = index[0]
            raise _refusal(
                "rewards",
                index,
                rewards[index],
                f"is not 0: copy {env} has answered {pos[env]} questions of its episode, so only its last "
                f"{min(int(pos[env]), history)} rewards are set",
            )

    def infos(self) -> None:
        engine, state = self.engine, self.state
        last, counters, order = state.last, state.counters, state.order
        index = _first(~np.isfinite(last))
        if index is not None:
            raise _refusal("last", (Info(index[0]).name, index[1]), last[index], "is not finite (an info value)")
        pos = counters[:, Counter.POS]
        envs = np.arange(engine.num_envs)
        fresh, played = envs[pos == 0], envs[pos > 0]
        # at the start of an episode: the values of a reset
        first = order[0 if self.sequential else fresh, counters[fresh, Counter.START]]
        at_reset = {
            Info.CORRECT: 0.0,
            Info.ANSWER: -1.0,
            Info.LABEL: -1.0,
            Info.QUESTION: -1.0,
            Info.TASK: -1.0,
            Info.TEAM_SIZE: float(engine.initial_team.sum()),
            Info.COST: engine._initial_cost(first),
            Info.REWARD: 0.0,
            Info.ACCURACY: 0.0,
            Info.EPISODE_RETURN: 0.0,
            Info.STEP: 0.0,
        }
        for row, expected in at_reset.items():
            self._expect(row, fresh, expected, "the value at the start of an episode (POS = 0)")
        if played.size == 0:
            return
        # after a step: what the last step wrote
        steps = pos[played]
        rows = 0 if self.sequential else played
        question = order[rows, counters[played, Counter.START] + np.minimum(steps - 1, engine.episode_length - 1)]
        tables = engine.tables
        self._expect(Info.QUESTION, played, question, "the question the copy answered last")
        self._expect(Info.LABEL, played, tables.labels[question], "the label of the question answered last")
        self._expect(Info.TASK, played, tables.tasks[question], "the task of the question answered last")
        self._expect(Info.STEP, played, steps, "the steps answered (counters POS)")
        answered, right = counters[played, Counter.ANSWERED], counters[played, Counter.N_CORRECT]
        self._expect(Info.ACCURACY, played, right / answered, "N_CORRECT / ANSWERED of the counters")
        correct = last[Info.CORRECT, played]
        self._require(Info.CORRECT, played, (correct == 0) | (correct == 1), "is not 0 or 1")
        self._require(
            Info.CORRECT,
            played,
            (right >= correct) & (right <= answered - 1 + correct),
            "does not agree with the counters' N_CORRECT (the right answers of the episode)",
        )
        answer = last[Info.ANSWER, played]
        self._require(
            Info.ANSWER,
            played,
            (answer == np.round(answer)) & (np.abs(answer) <= 2.0**63),
            "is not an integer answer (an int64)",
        )
        self._require(Info.ANSWER, played, (correct == 0) | (answer == tables.labels[question]), "is not the label")
        n_models, smallest = engine.n_models, engine.config.min_team_size
        size = last[Info.TEAM_SIZE, played]
        self._require(
            Info.TEAM_SIZE,
            played,
            (size == np.round(size)) & (size >= smallest) & (size <= n_models),
            f"is not a team size in [min_team_size={smallest}, N={n_models}]",
        )
        self._require(Info.CORRECT, played, (size > 0) | (correct == 0), "is 1 for an empty team (never right)")
        cost = last[Info.COST, played]
        total_cost = np.zeros(played.size)
        for i in range(n_models):  # the question's cost for the whole pool, summed in the step kernel's order
            total_cost = total_cost + tables.costs[question if engine.cache.costs is not None else 0, i]
        if engine.cache.costs is None:
            self._require(Info.COST, played, cost == size, "is not the team size (the cache has no costs)")
        else:
            self._require(Info.COST, played, (cost >= 0) & (cost <= total_cost), "is not a cost of a team")
        low, high = engine.reward_range
        slack = 1e-9 * max(1.0, abs(low), abs(high))
        reward = last[Info.REWARD, played]
        self._require(
            Info.REWARD,
            played,
            (reward >= low - slack) & (reward <= high + slack),
            f"is outside the reward range [{low:g}, {high:g}]",
        )
        # the reward of the answer, team size and cost above (the same kernels as the step's), but the diversity
        # bonus: that is bonus x the focal diversity the answering team had, in [0, 1], exactly 0 without a bonus
        cfg = engine.config
        scoring = RewardSettings(alpha=cfg.alpha, size_penalty_mode=cfg.size_penalty_mode, use_costs=cfg.use_costs)
        base = scoring.rewards(correct == 1, scoring.share(engine.cache, size, cost, total_cost))
        bonus = cfg.diversity_bonus
        index = _first((reward - base < min(bonus, 0.0) - slack) | (reward - base > max(bonus, 0.0) + slack))
        if index is not None:
            env = int(played[index[0]])
            raise _refusal(
                "last",
                ("REWARD", env),
                reward[index],
                f"is not the reward of copy {env}'s last answer (its CORRECT, TEAM_SIZE and COST give "
                f"{_item(base[index])}, plus the diversity bonus {bonus:g} times a focal diversity in [0, 1])",
            )
        if state.rewards.shape[1] > 0:
            self._require(
                Info.REWARD,
                played,
                reward.astype(np.float32) == state.rewards[played, -1],
                "is not the last reward of the history (rewards)",
            )
        total_return = last[Info.EPISODE_RETURN, played]
        self._require(
            Info.EPISODE_RETURN,
            played,
            (total_return >= steps * low - slack * steps) & (total_return <= steps * high + slack * steps),
            "is not a sum of POS rewards inside the reward range",
        )
        history = state.rewards.shape[1]
        whole = steps <= history  # every reward of the episode is in the history: the return is their sum
        if whole.any():
            envs, kept = played[whole], np.arange(history)[None, :] >= history - steps[whole][:, None]
            sums = np.where(kept, state.rewards[envs], 0.0).sum(axis=1, dtype=np.float64)
            self._require(
                Info.EPISODE_RETURN,
                envs,
                np.abs(last[Info.EPISODE_RETURN, envs] - sums) <= 1e-6 * max(1.0, abs(low), abs(high)) * steps[whole],
                "is not the sum of the episode's rewards (all in the history)",
            )

    def _expect(self, row: Info, envs: np.ndarray, expected: Any, what: str) -> None:
        got = self.state.last[row, envs]
        expected = np.broadcast_to(np.asarray(expected, dtype=np.float64), got.shape)
        index = _first(got != expected)
        if index is not None:
            env = int(envs[index[0]])
            raise _refusal(
                "last", (row.name, env), got[index], f"is not {_item(expected[index])}, {what} of copy {env}"
            )

    def _require(self, row: Info, envs: np.ndarray, good: np.ndarray, problem: str) -> None:
        index = _first(~good)
        if index is not None:
            env = int(envs[index[0]])
            raise _refusal("last", (row.name, env), self.state.last[row, env], problem)

    # -- the generator and the observations -----------------------------------------------------------
    def rng(self) -> None:
        words = self.values["rng"]
        if not int(words[3]) & 1:
            raise _refusal("rng", (3,), words[3], "is even: a PCG64 increment (words 2 and 3) is always odd")
        if words[4] > 1:
            raise _refusal("rng", (4,), words[4], "is not 0 or 1 (PCG64's has_uint32 flag)")
        if words[5] >= 2**32:
            raise _refusal("rng", (5,), words[5], "does not fit in 32 bits (PCG64's cached uinteger)")

    def observations(self) -> None:
        engine, state, layout = self.engine, self.state, self.engine.layout
        scratch = state._replace(last=state.last.copy())  # observing notes the focal diversity there
        b = engine.num_envs
        out = Outputs(
            decider=np.zeros((b, layout.decider_size), dtype=np.float32),
            fusion=np.zeros((b, layout.fusion_size), dtype=np.float32),
            reward=np.zeros(b, dtype=np.float64),
            done=np.zeros(b, dtype=np.bool_),
            terminated=np.zeros(b, dtype=np.bool_),
        )
        dynamics.observe(np.arange(b), engine.tables, scratch, engine.settings, out)
        blocks = (
            ("obs_decider", out.decider, layout.decider, layout.decider_low, layout.decider_high),
            ("obs_fusion", out.fusion, layout.fusion, layout.fusion_low, layout.fusion_high),
        )
        for name, expected, parts, low, high in blocks:
            got = self.values[name]
            checked = np.ones(got.shape[1], dtype=bool)
            if "features" in parts:
                checked[parts["features"]] = False  # float32 features of a finite cache may overflow to inf
            index = _first(~np.isfinite(got) & checked)
            if index is not None:
                raise _refusal(
                    name, index, got[index], f"is not finite (block {_block(parts, index[1])!r}, entry {index[1]})"
                )
            index = _first((got < low) | (got > high))
            if index is not None:
                raise _refusal(
                    name,
                    index,
                    got[index],
                    f"is outside the observation space's bounds [{low[index[1]]}, {high[index[1]]}] "
                    f"(block {_block(parts, index[1])!r}, entry {index[1]})",
                )
            index = _first((got != expected) & ~(np.isnan(got) & np.isnan(expected)))
            if index is not None:
                block = _block(parts, index[1])
                raise _refusal(
                    name,
                    index,
                    got[index],
                    f"is not {_item(expected[index])}, the observation the restored state gives (block {block!r}, "
                    f"entry {index[1]}, from {_SOURCES[name, block]})",
                )
        got, expected = state.last[Info.FOCAL_DIVERSITY], scratch.last[Info.FOCAL_DIVERSITY]
        index = _first(got != expected)
        if index is not None:
            env = index[0]
            raise _refusal(
                "last",
                ("FOCAL_DIVERSITY", env),
                got[env],
                f"is not {_item(expected[env])}, the focal diversity of copy {env}'s team over its window",
            )


_STREAM = "order and counters"
#: what each observation block is made from, for the message of an observation the state does not give
_SOURCES = {
    ("obs_decider", "team_mask"): "team",
    ("obs_decider", "team_size"): "team",
    ("obs_decider", "statistics"): "team, window and its counts (fail, fail2, fail3, plural, agree, votes)",
    ("obs_decider", "model_accuracy"): "fail and counters",
    ("obs_decider", "task"): _STREAM,
    ("obs_decider", "features"): _STREAM,
    ("obs_fusion", "probs"): f"{_STREAM} and team",
    ("obs_fusion", "team_mask"): "team",
    ("obs_fusion", "rewards"): "rewards",
    ("obs_fusion", "action_mask"): _STREAM,
    ("obs_fusion", "task"): _STREAM,
    ("obs_fusion", "features"): _STREAM,
}


def _block(parts: dict[str, slice], column: int) -> str:
    """The name of the observation block holding ``column``."""
    return next(name for name, part in parts.items() if part.start <= column < part.stop)


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
