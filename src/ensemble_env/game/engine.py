"""The batched engine: B independent copies of the ensemble game stepped with array operations.

:class:`EnsembleVectorEnv` is what :func:`ensemble_env.vector_env` returns: it owns the copies' arrays (the
records of :mod:`ensemble_env.game.records`), validates actions (:mod:`ensemble_env.game.actions`) and runs the kernels
of :mod:`ensemble_env.game.dynamics`, the one implementation of a step. The PettingZoo environments are a batch of
one over it, so the API path and the fast path cannot drift apart.

One step t of copy b (the pipelined parallel step of ``docs/environment-spec.md``):

1. the fusion agent answers question q_t, having seen the probabilities of team E_t (committed at t-1;
   E_0 is the initial team);
2. the decider commits E_{t+1}, the team for the next question;
3. both receive r_t = +1 if right, else -1 - alpha * ``|E_t|`` / N (``size_penalty_mode="on_error"``).

The observations' layouts (blocks, order, bounds) are :mod:`ensemble_env.game.layout`'s; the kernels' records
are built by :mod:`ensemble_env.game.build`; snapshots (:meth:`EnsembleVectorEnv.get_state`, ``set_state``) are
taken and restored by :mod:`ensemble_env.game.snapshot`, checked by value by
:mod:`ensemble_env.game.snapshot_check`.

RLAE options (``docs/environment-spec.md``, "RLAE"): with ``fusion_action="weights"`` the fusion action is a
weight per model and :func:`~ensemble_env.game.dynamics.weighted_answers` turns it into the answer the step
takes (the kernels' step is the same); with ``decider=False`` there is no decider agent and every step commits
the whole pool; with ``fusion_agents="per_model"`` agents ``weight_0`` ... ``weight_{N-1}`` each observe
``[task one-hot of the question (n_tasks), its features (F, when the cache has them), the model's team-masked
probabilities (C), its team membership (1), valid-choice mask (C)]`` and set their model's weight. The state is
then ``concat(decider (if any), fusion, context)``, context = the task one-hot and features of the question
(the per-model agents' shared first n_tasks + F entries). The decider's observation is computed in every case
(one set of kernels); without a decider no agent observes it and the state leaves it out.

The optional parts of the game are components (:mod:`ensemble_env.game.components`), built once into
:attr:`EnsembleVectorEnv.components` from the options; every site they touch (the byte count, the step, an
observation, a reset, the snapshot's arrays and checks, the agents' observations) loops over that list, so a game
without them runs exactly the kernels above:

- task episodes (``episodes="task"``, ``docs/environment-spec.md``, "Tasks never seen"): the stream is grouped by task
  (``questions``, ``stream_tasks``, ``task_bounds``) and every episode plays one task from its first question (or a
  window of ``episode_length`` of it) from an empty window; ``reset()`` shuffles a deck of the stream's tasks with
  the engine's generator and deals the copies theirs in copy order, auto-resets deal on (a used deck is shuffled
  anew: ``TaskDeck``);
- partial feedback (``feedback="team"``, ``docs/environment-spec.md``, "Partial feedback"): answering q_t reveals only
  the outputs of E_t; the kernels of :mod:`ensemble_env.game.feedback` note E_t before the step kernel and rewrite the
  window blocks after each observation, over what was revealed (``PartialFeedback``);
- a record extra (``task_record``, ``team_record``, ``member_record``): the kernels of
  :mod:`ensemble_env.game.task_record` add each answered question to the task's record after the step kernel and
  write those blocks (``TaskRecords``);
- per-model agents (``fusion_agents="per_model"``: ``WeightingAgents``).
"""

from __future__ import annotations

from collections.abc import Mapping
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
from ensemble_env.game.build import build_settings, build_state, build_tables, initial_cost, kernel_layout, new_outputs
from ensemble_env.game.components import (
    EpisodeStart,
    build_components,
    game_components,
    wrapped_observe,
    wrapped_statistics,
    wrapped_step,
)
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.layout import observation_layout
from ensemble_env.game.records import INFO_KEYS, Counter, FastKernel, Info, Outputs
from ensemble_env.game.reward import reward_bounds
from ensemble_env.game.snapshot import MAX_STEPS, restore_snapshot, take_snapshot
from ensemble_env.game.window import MAX_TABLE_MODELS, count_planes, n_triples, table_words
from ensemble_env.seeds import check_seed
from ensemble_env.text import show

__all__ = [
    "AGENTS",
    "INFO_KEYS",
    "MAX_STATE_BYTES",
    "MAX_STEPS",
    "EnsembleVectorEnv",
    "check_seed",
    "game_agents",
]

#: the agents of the default game (RL-Focal's two); :func:`game_agents` gives a configuration's
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

    Notes
    -----
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

        #: the stream: the questions of the split and tasks, in cache order (with ``episodes="task"``, grouped by
        #: task in task index order, each task in cache order)
        self.questions = cache.select(config.split, config.tasks)
        n_stream = self.questions.size
        #: every episode is one task (``episodes="task"``)
        self.by_task = config.episodes == "task"
        if self.by_task:
            self.questions = self.questions[np.argsort(cache.tasks[self.questions], kind="stable")]
        #: the tasks of the stream (task indices, increasing) and, with ``episodes="task"``, where each lies in it:
        #: task ``stream_tasks[k]`` is ``questions[task_bounds[k]:task_bounds[k + 1]]`` (else [0, stream size])
        self.stream_tasks, firsts = np.unique(cache.tasks[self.questions], return_index=True)
        self.task_bounds = np.append(firsts if self.by_task else 0, n_stream).astype(np.int64)
        longest = int(np.diff(self.task_bounds).max()) if self.by_task else n_stream
        #: questions per episode (with ``episodes="task"``, at most: a task shorter than it ends its episode first)
        self.episode_length = longest if config.episode_length is None else config.episode_length
        if self.episode_length > longest:
            where = f"split {config.split!r} and tasks {config.tasks!r} in {cache.path}"
            raise ValueError(
                f"episode_length={config.episode_length} exceeds the {n_stream} questions of {where}"
                if not self.by_task
                else f"episode_length={config.episode_length} exceeds the {longest} questions of the largest task "
                f"of {where} (with episodes='task' an episode is at most one task)"
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
        self._agent_names = frozenset(self.agents)
        self.weight_agents = tuple(agent for agent in self.agents if agent.startswith("weight_"))
        self.uses_weights = config.fusion_action == "weights"
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
        self.settings = build_settings(
            config, cache, self.episode_length, self.statistic_names, self.uses_plurality_table
        )
        #: where each part of the observations lies, and the bounds (:mod:`ensemble_env.game.layout`)
        self.layout = observation_layout(config, cache, self.statistic_names, self.reward_range)
        self.settings = self.settings._replace(layout=kernel_layout(self.layout))
        self.tables = build_tables(cache, self.questions, self.statistic_names, self.uses_plurality_table)
        #: the optional parts the options enable (:mod:`ensemble_env.game.components`), built once; every site
        #: they touch loops over them
        self.components = game_components(
            config, cache, self.num_envs, self.questions, self.task_bounds, self.episode_length, self.layout,
            self.agents,
        )  # fmt: skip
        self._check_memory()
        self._state = build_state(config, self.settings, cache, self.questions, self.num_envs, self._shuffled_width())
        build_components(self.components, self.tables, self._state, self.settings)
        self.np_random = np.random.default_rng()
        self._out = new_outputs(self.num_envs, self.layout)
        self._started = False
        self._weights_kernel = FastKernel(dynamics.weighted_answers)
        self._kernels = (FastKernel(dynamics.step), FastKernel(dynamics.observe), FastKernel(dynamics.team_statistics))
        self._compose()
        #: the team every step commits without a decider (the whole pool)
        self._pool = np.ones((self.num_envs, n_models), dtype=np.uint8)
        #: (B, N) float32 the weights of the last step (None before the first, with ``fusion_action="answer"``)
        self.last_weights: np.ndarray | None = None
        #: one copy's spaces by agent, built once (the parallel view's), and of :meth:`state`
        self.single_observation_spaces, self.single_action_spaces = self._build_spaces()
        self.single_state_space = spaces.Box(self.layout.state_low, self.layout.state_high, dtype=np.float32)
        self._batched: dict[tuple[str, str], spaces.Space[Any]] = {}  # the batched spaces, built on first use

    def _compose(self) -> None:
        """The step, an observation of some copies and the window statistics, each with the components' kernels
        around the kernels of :mod:`ensemble_env.game.dynamics` (closures: a pickled engine composes them anew)."""
        step_kernel, observe_kernel, statistics_kernel = self._kernels
        tables, state, settings = self.tables, self._state, self.settings
        self._step = wrapped_step(
            self.components, lambda team, answers, out: step_kernel(team, answers, tables, state, settings, out)
        )
        self._observe_kernels = wrapped_observe(
            self.components, lambda env_ids, out: observe_kernel(env_ids, tables, state, settings, out)
        )
        self._statistics = wrapped_statistics(self.components, lambda: statistics_kernel(tables, state, settings))

    def __getstate__(self) -> dict[str, Any]:
        composed = ("_step", "_observe_kernels", "_statistics")
        return {name: value for name, value in self.__dict__.items() if name not in composed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._compose()

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

    # -- the copies' state (its records: ensemble_env.game.build) ---------------------------------------
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
            + sum(part.state_bytes() for part in self.components)
        )
        total = per_copy * self.num_envs
        if total > MAX_STATE_BYTES:
            raise ValueError(
                f"num_envs={self.num_envs:,} copies with window={cfg.window:,} and reward_history="
                f"{cfg.reward_history:,} need about {total / 2**30:.1f} GiB of state ({per_copy:,} bytes per copy); "
                f"the limit is {MAX_STATE_BYTES / 2**30:.0f} GiB: use fewer copies or a smaller window"
            )

    def _shuffled_width(self) -> int:
        """Questions drawn per shuffled episode: its own, plus the real next ones its final observation shows."""
        return min(self.episode_length + 2, self.questions.size)

    # -- rewards and actions --------------------------------------------------------------------------
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
        agents = self.agents
        if type(actions) is not dict and not isinstance(actions, Mapping):
            raise ValueError(f"actions must be a dict keyed by agent ({', '.join(agents)}), got {show(actions)}")
        if actions.keys() != self._agent_names:
            missing = [agent for agent in agents if agent not in actions]
            if missing:
                raise ValueError(f"actions lacks {', '.join(missing)}; expected a dict with keys {', '.join(agents)}")
            unknown = [agent for agent in actions if agent not in agents]
            raise ValueError(
                f"actions names unknown agent(s) {', '.join(map(repr, unknown))}; the agents are {list(agents)}"
            )
        return self.decode_checked(actions, n_envs)

    def decode_checked(self, actions: Any, n_envs: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """:meth:`decode_actions` of a dict already known to hold one action per agent and nothing else (the
        parallel view checks its keys itself); each action is validated."""
        cfg = self.config
        if cfg.decider:
            teams = decode_decider(actions["decider"], cfg.decider_action, self.n_models, n_envs, cfg.min_team_size)
        else:
            teams = self._pool
        if not self.uses_weights:
            return teams, decode_fusion(actions["fusion"], n_envs, self.max_choices), None
        if self.weight_agents:
            weights = np.concatenate([self.decode_agent(a, actions[a], n_envs) for a in self.weight_agents], axis=1)
        else:
            weights = self.decode_agent("fusion", actions["fusion"], n_envs)
        return teams, self.weighted_answers(weights), weights

    def weighted_answers(self, weights: np.ndarray) -> np.ndarray:
        """(B,) int64 answers the (B, N) weights give on each copy's next question with its current team
        (:func:`~ensemble_env.game.dynamics.weighted_answers`). The weights are checked as a weighting agent's
        action is (:func:`~ensemble_env.game.actions.decode_weights`: real numbers in [0, 1], no NaN)."""
        shape = np.shape(weights)
        if shape != (self.num_envs, self.n_models):
            raise ValueError(
                f"weighted_answers: expected weights of shape {(self.num_envs, self.n_models)}, got {shape}"
            )
        checked = decode_weights(weights, self.n_models, self.num_envs, agent="weighted_answers")
        return self._weights_kernel(checked, self.tables, self._state, self.settings)

    # -- episodes ---------------------------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Re-seed the engine's generator (every random choice of the dynamics flows from it); ``seed`` is None
        or a non-negative integer (:func:`check_seed`)."""
        self.np_random = np.random.default_rng(check_seed(seed, "seed"))

    def _start_episodes(self, env_ids: np.ndarray, fresh_deck: bool = False) -> None:
        """Begin a new episode in the given copies: draw their streams (with ``episodes="task"`` the deck deals their
        tasks, from a freshly shuffled deck when ``fresh_deck``), empty their windows and the components' counts."""
        n_stream, length, s = self.questions.size, self.episode_length, self._state
        counters = s.counters
        width = s.order.shape[1]
        # where each copy's stream ends in its order row
        start = EpisodeStart(env_ids, self.np_random, fresh_deck, np.full(len(env_ids), width, dtype=np.int64))
        for part in self.components:
            part.reset(start)
        for env in env_ids if not start.dealt else ():
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
        # the stream (the task) ends after its last question in the order row (an episode reaching it terminates)
        counters[env_ids, Counter.STREAM] = start.ends - keep_start
        for counts in (s.fail, s.fail2, s.fail3, s.plural, s.agree, s.votes, s.rewards):
            counts[env_ids] = 0
        s.team[env_ids] = self.initial_team
        last = s.last
        last[:, env_ids] = 0.0
        for row in (Info.ANSWER, Info.LABEL, Info.QUESTION, Info.TASK):
            last[row, env_ids] = -1.0
        last[Info.TEAM_SIZE, env_ids] = self.initial_team.sum()
        first = self._questions_of(env_ids)
        last[Info.COST, env_ids] = initial_cost(self.tables, self.settings, self.initial_team, first)

    def next_questions(self) -> np.ndarray:
        """(B,) cache index of the question each copy answers at its next step."""
        return self._questions_of(np.arange(self.num_envs))

    def window_statistics(self) -> np.ndarray:
        """(B, K) float64 statistics of the decider's observation for every copy's current team.

        The observation holds the same values as float32. With ``feedback="team"``, over the rows on which every
        member of the team was revealed (:mod:`ensemble_env.game.feedback`).
        """
        return self._statistics()

    def _questions_of(self, env_ids: np.ndarray) -> np.ndarray:
        """Index of the question each given copy answers next (after an episode's end: the stream's next
        question when ``episode_length`` cut it, else the episode's last)."""
        s = self._state
        counters = s.counters[env_ids]
        pos = np.minimum(counters[:, Counter.POS], counters[:, Counter.STREAM] - 1)
        rows = env_ids if self.config.order == "shuffled" else np.zeros_like(env_ids)
        return s.order[rows, counters[:, Counter.START] + pos]

    def _observe(self, env_ids: np.ndarray) -> None:
        self._observe_kernels(env_ids, self._out)

    def reset(
        self, seed: int | None = None, *, deal_on: bool = False
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Start a new episode in every copy. With ``seed`` (None or a non-negative integer, :func:`check_seed`),
        the generator is re-seeded first. With ``episodes="task"`` the copies are dealt their tasks from a freshly
        shuffled deck, or with ``deal_on`` (no seed) from the current deck, as auto-resets deal them (a new deck
        when it is used up; the first reset shuffles one): a parallel view built with ``deal_on``
        (``ensemble_env/EnsembleGen-v0``'s) resets so without a seed, its one copy's next episode."""
        seed = check_seed(seed)
        if deal_on is not False and (deal_on is not True or seed is not None):
            raise ValueError(
                f"reset: deal_on={deal_on!r} with seed={seed!r}: deal_on (True or False) deals on from the current "
                "deck, a seed shuffles a new one; give one of them"
            )
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        all_envs = np.arange(self.num_envs)
        self._start_episodes(all_envs, fresh_deck=not (deal_on and self._started))
        self._started = True
        self._out = new_outputs(self.num_envs, self.layout)
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
        out = new_outputs(self.num_envs, self.layout)
        self._step(next_team, answers, out)
        self._out = out
        if self.uses_weights:
            self.last_weights = None if weights is None else np.array(weights, dtype=np.float32)
        return self.observations, out.reward, out.done

    # -- snapshots (ensemble_env.game.snapshot) -----------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray]:
        """A snapshot of every copy (plain numpy arrays, the generator's state included) for :meth:`set_state`.

        ``numpy.savez(path, **snapshot)`` stores it and ``dict(numpy.load(path))`` reads it back, without
        pickle. After ``set_state(snapshot)`` the same actions give bit-identical observations, rewards and
        infos.
        """
        if not self._started:
            raise RuntimeError("get_state() called before reset(): there is no episode to snapshot")
        return take_snapshot(self, self._state, self._out, self.np_random, self._optional_arrays())

    def set_state(self, snapshot: Mapping[str, np.ndarray]) -> None:
        """Restore a snapshot of :meth:`get_state` taken from an engine of the same cache, options and B.

        Every array is checked before anything changes: its shape and dtype, then its values against the
        configuration and the cache (:mod:`ensemble_env.game.snapshot_check`): the streams, every counter, the teams,
        the windows and the counts kept over them, the reward history, the infos, the generator's words and the
        observations (which must be those the restored state gives). A value out of its range or inconsistent
        with the others raises a ValueError naming the field, the copy and the value, and the engine is left as
        it was: the kernels never see it. What passes is a state the kernels can step safely, with every
        observation, reward and info inside its bounds (the generator's words, the window's slots not yet
        written in the episode and a return longer than the reward history cannot be checked further).
        """
        self._out, self.np_random = restore_snapshot(
            self, self._state, self._out, self.np_random, snapshot, self._optional_arrays()
        )
        self._started = True
        self.last_weights = None
        for part in self.components:
            part.restored()

    def _optional_arrays(self) -> dict[str, np.ndarray]:
        """The arrays of the components (``snapshot.OPTIONAL_KEYS``), by snapshot name."""
        return {name: array for part in self.components for name, array in part.arrays().items()}

    # -- observations and infos -------------------------------------------------------------------------
    @property
    def outputs(self) -> Outputs:
        """The last step's results as the kernels wrote them (observations, rewards, episode ends)."""
        return self._out

    @property
    def observations(self) -> dict[str, np.ndarray]:
        """The current observations by agent, float32: ``{"decider": (B, D), "fusion": (B, F)}`` by default;
        without a decider no ``"decider"``; per-model agents ``"weight_i": (B, M)`` instead of ``"fusion"``."""
        out = self._out
        obs = {"decider": out.decider, "fusion": out.fusion} if self.config.decider else {"fusion": out.fusion}
        for part in self.components:
            part.observations(obs)
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
        for part in self.components:
            part.state_parts(parts)
        return np.concatenate(parts, axis=1)

    def action_masks(self) -> np.ndarray:
        """(B, C) int8 valid-choice mask of the question the fusion agent answers next."""
        return self._out.fusion[:, self.layout.fusion["action_mask"]].astype(np.int8)

    def _infos(self) -> dict[str, dict[str, np.ndarray]]:
        last = self._state.last
        shared = {key: last[k].copy() for k, key in enumerate(INFO_KEYS)}
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
        length = min(self.episode_length, int(s.counters[env, Counter.STREAM]))  # a task may be shorter
        return s.order[row, start : start + length].astype(np.int64)

    def window_contents(self, env: int = 0) -> np.ndarray:
        """Cache indices of the questions in copy ``env``'s window, oldest first."""
        s = self._state
        count, head = int(s.counters[env, Counter.COUNT]), int(s.counters[env, Counter.HEAD])
        ring = s.window[env]
        if count < ring.size:
            return ring[:count].astype(np.int64)
        return np.roll(ring, -head).astype(np.int64)
