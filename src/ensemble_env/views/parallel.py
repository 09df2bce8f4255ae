"""The PettingZoo view of the ensemble game (``ensemble_v1``) and the friendly factories.

The whole contract (spaces, step order, reward, observations, episode end, metrics) is
``docs/environment-spec.md``; this card sums it up.

Env card
--------
=================  ===============================================================================
Agents             ``"decider"``, ``"fusion"`` (cooperative, both live for the whole episode)
Decider action     ``MultiBinary(N)`` team mask (default); ``MultiDiscrete([2]*N)``; ``Discrete(2**N-1)``
Fusion action      ``Discrete(C)``: the answer index (C = largest choice count)
Decider obs        ``Box(float32)``: team mask (N), team size / N, K window statistics of the team
                   [, per-model window accuracy (N), task one-hot and features of q_{t+1}, the question
                   its committed team answers next (zeros when the stream has no next question)]
Fusion obs         ``Box(float32)``: team-masked probabilities (N x C), team mask (N), last T' rewards,
                   valid-choice mask (C) (also ``infos["fusion"]["action_mask"]``) [, task one-hot]
State              ``Box(float32)``: decider obs + fusion obs (no label), for centralized critics
                   [+ the question's context (task one-hot, features) with per-model agents]
Vector spaces      ``vector_env``: ``single_observation_space(agent)``, ``single_action_space(agent)`` (one
                   copy's, these) and batched ``observation_space(agent)``, ``action_space(agent)``
                   (``gymnasium.vector.utils.batch_space``; ``.sample()`` is a whole batch ``step`` takes)
Reward (shared)    +1 if right, else -1 - alpha * ``|E_t|`` / N (``size_penalty_mode="on_error"``)
Step order         fusion answers q_t with team E_t; the decider commits E_{t+1}; both get r_t
Episode end        the stream exhausted: both agents terminated; ``episode_length`` cut a longer stream:
                   both truncated, the final observation shows the stream's real next question;
                   ``agents`` emptied either way
RLAE options       ``fusion_action="weights"``: fusion sets ``Box(0, 1, (N,))`` weights; the answer is
                   argmax over valid c of sum over the team of w_i p_i(c) (ties: lowest c; all-zero
                   team weights: equal; weights outside the team ignored; outside [0, 1] or NaN
                   refused). ``decider=False``: no decider, the team is every model. ``fusion_agents=
                   "per_model"``: agents ``weight_0 .. weight_{N-1}``, ``Box(0, 1, (1,))`` each,
                   observing [task one-hot, features, own team-masked probs (C), membership, valid-
                   choice mask (C)]; weighting agents' infos carry ``choice_mask``
Feedback           ``feedback="all"`` (default): answering q_t reveals every model's output on it;
                   ``"team"``: only E_t's (and the label); every statistic and record counts what was
                   revealed and gains count features (``<block>_count``); the unseen-task option
                   set with it is ``ensemble_env/EnsembleUnseen-v2`` (``ensemble_env.game.feedback``)
=================  ===============================================================================

Arguments: ``cache`` (a built-in name, a path or a :class:`~ensemble_env.cache.LogitCache`; default: ``"bbh5"``),
``render_mode`` ("ansi", "human" or "rgb_array") and the options of :class:`~ensemble_env.game.config.EnvConfig`.

Version history:

- v1: the decider's question extras (``decider_extras`` ``"task"``, ``"features"``) describe q_{t+1}, the
  question its committed team answers, instead of q_t; an exhausted stream terminates the episode (it was
  reported as truncation), an ``episode_length`` cut truncates it with a real final observation (it was a
  placeholder); the default cache is the built-in ``bbh5`` (5 open LLMs on 16 BIG-Bench-Hard tasks).
- v1, unchanged: the RLAE options ``fusion_action``, ``decider``, ``fusion_agents`` (and ``fusion_extras``
  ``"features"``) were added without a bump: at their defaults every existing configuration's observations,
  rewards, infos and snapshots are bit-identical.
- v1, unchanged: the option ``feedback`` (partial feedback) and the id ``ensemble_env/EnsembleUnseen-v2`` were added
  without a bump: at ``feedback="all"`` everything is bit-identical.
- v0: first release.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from ensemble_env.cache import datasets
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.engine import EnsembleVectorEnv, check_seed
from ensemble_env.views.render import EpisodeTrace, describe_reset, describe_step, draw_frame

__all__ = ["EnsembleParallelEnv", "aec_view", "env", "parallel_env", "vector_env"]

#: "ansi": the last step as text (returned); "human": the same text printed; "rgb_array": a picture of the
#: episode so far as an (H, W, 3) uint8 array (:func:`ensemble_env.views.render.draw_frame`)
RENDER_MODES = ("ansi", "human", "rgb_array")


class EnsembleParallelEnv(ParallelEnv[str, np.ndarray, Any]):
    """PettingZoo parallel view of the ensemble game: a batch of one over :class:`EnsembleVectorEnv`.

    Build it with :func:`ensemble_env.parallel_env`; see the module docstring for the env card.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "ensemble_v1",
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def __init__(
        self, cache: LogitCache, config: EnvConfig, render_mode: str | None = None, *, deal_on: bool = False
    ) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode={render_mode!r} is not one of None, {', '.join(map(repr, RENDER_MODES))}")
        self.render_mode = render_mode
        self.engine = EnsembleVectorEnv(cache, config, num_envs=1, autoreset=False)
        self.cache, self.config = cache, config
        #: with ``episodes="task"``, a reset without a seed deals the deck's next task instead of a new deck's first
        #: (``ensemble_env/EnsembleGen-v0``'s views: :mod:`ensemble_env.views.generated`)
        self.deal_on = deal_on
        self.possible_agents = list(self.engine.agents)
        self.agents: list[str] = []
        # each space built once, by the engine (its single-copy spaces), and returned as the same object
        self.observation_spaces: dict[str, spaces.Space[Any]] = dict(self.engine.single_observation_spaces)
        self.action_spaces: dict[str, spaces.Space[Any]] = dict(self.engine.single_action_spaces)
        self.state_space = self.engine.single_state_space
        #: the info key of the valid choices: a weighting agent's action is a Box, so its "choice_mask"
        self._mask_key = "choice_mask" if config.fusion_action == "weights" else "action_mask"
        #: the agents whose infos carry it (all but the decider)
        self._answering = tuple(agent for agent in self.possible_agents if agent != "decider")
        self._used_team: np.ndarray | None = None  # the team that answered the last step, for render()
        self._trace: EpisodeTrace | None = None  # the recent steps, for render_mode="rgb_array"

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start an episode (re-seeded with ``seed``: None or a non-negative integer, a ValueError naming the
        value otherwise, before anything changes; ``True`` is not seed 1). With ``episodes="task"`` a reset deals the
        first task of a freshly shuffled deck, or, built with ``deal_on`` and without a seed, the deck's next task as
        ``vector_env``'s auto-reset does (from a seeded reset, every run of as many episodes as the deck holds plays
        each of its tasks once). ``options`` is accepted for the PettingZoo API (whose own conformance test passes
        arbitrary ones) and ignored: the game's options are set when the environment is built
        (``ensemble_env.parallel_env(alpha=..., ...)``)."""
        seed = check_seed(seed)
        obs, _ = self.engine.reset(seed=seed, deal_on=self.deal_on and seed is None)
        self.agents = list(self.possible_agents)
        self._used_team = None
        self._trace = EpisodeTrace() if self.render_mode == "rgb_array" else None
        if self.render_mode == "human":
            self.render()
        return self._unbatch_obs(obs), self._infos()

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        if not self.agents:
            raise RuntimeError("the episode is over (or reset() was never called): call reset() first")
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(f"actions lacks {', '.join(missing)}; give one action per agent of {self.agents}")
        if len(actions) != len(self.agents):
            unknown = ", ".join(repr(agent) for agent in actions if agent not in self.agents)
            raise ValueError(f"actions names unknown agent(s) {unknown}; the agents are {self.agents}")
        engine = self.engine
        # the team that answers this step, kept only for render()
        used_team = engine.team[0] if self.render_mode is not None else None
        next_team, answers, weights = engine.decode_checked(actions, None)  # its keys checked above
        obs, reward, done = engine.advance(next_team, answers, weights)
        self._used_team = used_team
        if self._trace is not None and used_team is not None:
            self._trace.record(engine, used_team)
        value, over = float(reward[0]), bool(done[0])
        terminated = bool(engine.outputs.terminated[0])
        truncated = over and not terminated
        agents = self.possible_agents
        result = (
            self._unbatch_obs(obs),
            dict.fromkeys(agents, value),
            dict.fromkeys(agents, terminated),
            dict.fromkeys(agents, truncated),
            self._infos(),
        )
        if over:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return result

    def check_action(self, agent: str, action: Any) -> np.ndarray:
        """``agent``'s action decoded ((1, N) team, (1,) answer, (1, N) or (1, 1) weights); a ValueError naming
        the agent, the space and the value if it does not belong to the agent's space (nothing changes)."""
        return self.engine.decode_agent(agent, action, None)

    def state(self) -> np.ndarray:
        return self.engine.state()[0]

    def render(self) -> str | np.ndarray | None:
        """The last step (or the reset) as text ("ansi"; "human" prints it), or the episode so far as an RGB
        image ("rgb_array"); None without a render mode."""
        if self.render_mode is None:
            return None
        if self.render_mode == "rgb_array":
            if self._trace is None:
                raise RuntimeError("render() before reset(): there is no episode to draw yet")
            return draw_frame(self.engine, self._trace, self._used_team)
        if self._used_team is None:
            text = describe_reset(self.engine)
        else:
            text = describe_step(self.engine, self._used_team)
        if self.render_mode == "ansi":
            return text
        print(text)
        return None

    def close(self) -> None:
        pass

    def _unbatch_obs(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {agent: array[0] for agent, array in obs.items()}  # fresh arrays every step

    def _infos(self) -> dict[str, dict[str, Any]]:
        values = self.engine.info_values(0)
        infos: dict[str, dict[str, Any]] = {"decider": values} if self.config.decider else {}
        mask = {self._mask_key: self.engine.action_masks()[0]}
        for agent in self._answering:
            infos[agent] = {**values, **mask}
        return infos


# -- factories ----------------------------------------------------------------------------------------------


def parallel_env(
    cache: LogitCache | str | os.PathLike[str] | None = None, *, render_mode: str | None = None, **options: Any
) -> EnsembleParallelEnv:
    """The ensemble game as a PettingZoo ``ParallelEnv``.

    ``cache``: a built-in cache name (``ensemble_env.datasets.available()``), a path to a logit cache, a
    :class:`~ensemble_env.cache.LogitCache`, or None for the default built-in cache (``"bbh5"``).
    ``options``: the fields of :class:`~ensemble_env.game.config.EnvConfig` (``alpha``, ``window``,
    ``split``, ``tasks``, ``order``, ``episode_length``, ``decider_action``, ``metrics``, ...).

    >>> import ensemble_env
    >>> env = ensemble_env.parallel_env(window=100)
    >>> obs, infos = env.reset(seed=0)
    >>> sorted(obs)
    ['decider', 'fusion']
    """
    return EnsembleParallelEnv(datasets.resolve(cache), EnvConfig.from_options(options), render_mode=render_mode)


def env(
    cache: LogitCache | str | os.PathLike[str] | None = None, *, render_mode: str | None = None, **options: Any
) -> AECEnv[str, np.ndarray, Any]:
    """The same game through PettingZoo's AEC API (agents act in turn: decider, then fusion).

    Each action is checked when it is given, so a refused action changes nothing and the game stays playable.
    """
    return aec_view(parallel_env(cache, render_mode=render_mode, **options))


def aec_view(parallel: EnsembleParallelEnv) -> AECEnv[str, np.ndarray, Any]:
    """The AEC view of a parallel view (what :func:`env` returns), each action checked when it is given."""
    return OrderEnforcingWrapper(_AECView(parallel))


class _AECView(parallel_to_aec_wrapper):  # type: ignore[misc]
    """PettingZoo's AEC view of a parallel env, checking each agent's action when it is given (PettingZoo's
    own stores it and fails only at the last agent, after which every step would repeat the failure)."""

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if not (self.terminations[agent] or self.truncations[agent]):
            self.env.check_action(agent, action)
        super().step(action)


def vector_env(
    num_envs: int = 1, cache: LogitCache | str | os.PathLike[str] | None = None, **options: Any
) -> EnsembleVectorEnv:
    """``num_envs`` independent copies stepped with arrays, auto-resetting at episode end.

    Observations, actions, rewards are dicts keyed by agent of arrays with a leading ``num_envs`` axis.

    >>> import numpy as np, ensemble_env
    >>> venv = ensemble_env.vector_env(4)
    >>> obs, infos = venv.reset(seed=0)
    >>> obs["decider"].shape[0], obs["fusion"].dtype
    (4, dtype('float32'))
    >>> actions = {"decider": np.ones((4, venv.n_models), dtype=np.int8), "fusion": np.zeros(4, dtype=np.int64)}
    >>> obs, rewards, terminations, truncations, infos = venv.step(actions)
    >>> rewards["decider"].shape
    (4,)
    """
    return EnsembleVectorEnv(datasets.resolve(cache), EnvConfig.from_options(options), num_envs=num_envs)
