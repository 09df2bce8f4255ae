"""Stable-Baselines3 adapter: train one role with SB3 (the other fixed or frozen), one shared policy, or RLAE's weights.

SB3 is single-agent, so there are three ways in (``docs/adapters.md`` says which to use when):

- ``sb3_env(train="decider")`` / ``sb3_env(train="fusion")``: a :class:`SingleRoleEnv` per copy, a Gymnasium
  view of one role in which the other role is played by a fixed policy (default: the mean-probability vote as
  the fuser, every model as the team) or by a frozen SB3 model. PPO and A2C take the decider's
  ``MultiBinary(N)`` as is; sb3-contrib's MaskablePPO reads :meth:`SingleRoleEnv.action_masks`. This is the
  paper's two-stage recipe: train the decider with a scripted fuser, then the fuser with the decider frozen.
- ``sb3_env(train="shared")``: the SuperSuit path. Both roles become copies of one vectorised agent driven by
  one parameter-shared policy: the decider re-encoded as ``Discrete(2**N - 1)`` (MultiBinary and Discrete cannot
  be padded together), both action spaces padded to the larger ``Discrete``, observations zero-padded to the
  longer one, plus a one-hot agent indicator. No centralized critic: SB3's value function sees one agent's
  padded observation. **Train it with sb3-contrib's MaskablePPO**: the vector env's ``action_masks()`` allow
  each row only its own role's actions (the fusion agent: the question's valid choices), and a padded action
  that still reaches it raises ValueError instead of becoming an answer. (SuperSuit maps every padded action
  to action 0; with plain PPO the shared policy settled on answering 0 to everything.)
- ``sb3_env(train="weights")``: RLAE as published (arXiv 2506.00439, ``docs/rlae.md``): no decider, every model
  answers every question, one agent sets a weight per model, ``Box(0, 1, (N,), float32)``, and the answer is
  the argmax over the valid choices of sum_i w_i p_i(c). It is the :class:`SingleRoleEnv` of the fusion agent
  of ``parallel_env(decider=False, fusion_action="weights")``, played alone (there is no other role), with the
  RLAE learners' context (:func:`weights_options`). SB3's PPO takes the ``Box`` as is (a Gaussian whose samples
  SB3 clips into [0, 1]); :func:`start_at_uniform` makes the untrained policy's mean action the uniform weights,
  the mean vote.

All three return an SB3 ``VecEnv`` wrapped in ``VecMonitor`` (episode return and length in the logs). Episode ends
pass through as SB3 expects them: ``dones`` is terminated or truncated, ``infos[i]["TimeLimit.truncated"]`` is
True only for an ``episode_length`` cut (SB3 then bootstraps from ``infos[i]["terminal_observation"]``, the
real next question), False when the question stream is exhausted. SuperSuit's own SB3 wrapper drops the
difference; this adapter restores it.

>>> from ensemble_env.adapters.sb3 import SingleRoleEnv
>>> env = SingleRoleEnv("fusion", cache="toy8", episode_length=5)
>>> obs, info = env.reset(seed=0)
>>> env.observation_space.contains(obs), env.action_space
(True, Discrete(10))
>>> weights = SingleRoleEnv("fusion", cache="toy8", **weights_options("toy8"))
>>> obs, info = weights.reset(seed=0)
>>> weights.action_space, weights.observation_space.shape
(Box(0.0, 1.0, (8,), float32), (103,))
>>> obs, reward, terminated, truncated, info = weights.step(np.full(8, 0.5, dtype=np.float32))
>>> info["answer"] == info["label"], reward, terminated, truncated  # the mean vote is right: +1
(True, 1.0, False, False)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium
import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from ensemble_env.adapters import game_env, require
from ensemble_env.adapters.wrappers import PerChoiceLayout, answer_reward, per_choice_observation
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.actions import choose_encoding
from ensemble_env.game.config import RLAE_GAME, rlae_game
from ensemble_env.game.engine import check_seed
from ensemble_env.views.policies import FixedTeam, MeanVote

__all__ = [
    "CREDITS",
    "FUSION_VIEWS",
    "ROLES",
    "TRAIN_CHOICES",
    "WEIGHTS_GAME",
    "SingleRoleEnv",
    "sb3_env",
    "start_at_uniform",
    "weights_options",
]

#: the two roles of the game, each of which one single-agent learner can train (``sb3_env(train=role)``)
ROLES = ("decider", "fusion")
#: what ``sb3_env(train=...)`` can train: one role, both roles through one shared policy (SuperSuit), or RLAE's
#: single weighting agent (no decider)
TRAIN_CHOICES = (*ROLES, "shared", "weights")
#: the options that make RLAE's game (``train="weights"``): no decider, one agent weighing every model
WEIGHTS_GAME = {**RLAE_GAME, "fusion_agents": "one"}
#: the decider's reward in a single-role env: the game's r_t, or the aligned r_{t+1} (``wrappers`` module)
CREDITS = ("game", "aligned")
#: the fusion observation the trained fuser sees: the game's, or laid out per choice (``PerChoiceFusion``)
FUSION_VIEWS = ("raw", "per_choice")

#: a batched policy: observations (B, D) -> actions (B,) or (B, N), as in :mod:`ensemble_env.views.policies`
Policy = Callable[[np.ndarray], Any]


def _other_policy(other: Any, role: str, env: Any) -> Policy:
    """The policy that plays ``role`` (the role that is not trained), resolved against ``env``."""
    if other is None:
        other = MeanVote if role == "fusion" else FixedTeam
    if isinstance(other, type) and hasattr(other, "from_env"):  # MeanVote, PluralityVote, FixedTeam
        other = other.from_env(env)
    if hasattr(other, "predict"):  # an SB3 model: frozen, deterministic
        model = other
        return lambda obs: model.predict(obs, deterministic=True)[0]
    if not callable(other):
        raise TypeError(
            f"other must be None, a policy class with from_env (MeanVote, PluralityVote, FixedTeam), a callable "
            f"mapping {role} observations (B, D) to actions, or an SB3 model; got {type(other).__name__}"
        )
    return other


def weights_options(cache: LogitCache | str | os.PathLike[str] | None = None, **options: Any) -> dict[str, Any]:
    """:func:`ensemble_env.parallel_env` options of RLAE's game (the ``rlae_ppo`` learner's, ``docs/rlae.md``).

    :data:`WEIGHTS_GAME` (no decider, one weighting agent), then by default the context of the question the
    weights act on, ``fusion_extras=("task", "features")`` (``("task",)`` on a cache without features), and
    ``reward_history=0`` (each question is a one-step bandit); ``options`` override those two defaults and add
    any other option (``split``, ``episode_length``, ...). An option of :data:`WEIGHTS_GAME` given with another
    value raises ValueError: that would be another game.

    >>> weights_options("toy8", split="test")["fusion_extras"]
    ('task',)
    """
    for key, value in WEIGHTS_GAME.items():
        if key in options and options[key] != value:
            raise ValueError(
                f"{key}={options[key]!r}: the weights game is {key}={value!r} (RLAE: one agent weighing every model); "
                "for another game build SingleRoleEnv or parallel_env with its own options"
            )
    return {**rlae_game("one", has_features=resolve_cache(cache).features is not None), **options}


def start_at_uniform(model: Any) -> Any:
    """Make an SB3 PPO/A2C model on the weights game start at the mean vote; returns the model.

    The policy's last layer (``action_net``) is set to output the middle of the action box, 1/2 for every
    weight, whatever the observation (zero weights, bias 1/2): the untrained policy's mean action is the uniform
    weights, whose answer is the mean vote of all models (the "conventional ensemble" RLAE starts from, as the
    reference learner ``rlae_ppo`` does). The exploration noise (``log_std``) is left as it is.
    """
    space = model.action_space
    if not isinstance(space, gymnasium.spaces.Box):
        raise ValueError(f"start_at_uniform needs a model with a Box (weights) action space, got {space}")
    policy = getattr(model, "policy", None)
    head = getattr(policy, "action_net", None)
    if head is None or not hasattr(head, "bias") or head.bias.shape[0] != space.shape[0]:
        raise ValueError(
            "start_at_uniform needs an SB3 actor-critic policy whose action_net is a linear layer of "
            f"{space.shape[0]} outputs (PPO or A2C with MlpPolicy), got {type(policy).__name__}"
        )
    import torch

    middle = (np.asarray(space.low, dtype=np.float64) + np.asarray(space.high, dtype=np.float64)) / 2
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.as_tensor(middle, dtype=head.bias.dtype))
    return model


class SingleRoleEnv(gymnasium.Env[np.ndarray, Any]):
    """One role of the ensemble game as a ``gymnasium.Env``; ``other`` plays the other role, if the game has one.

    ``role``: "decider" or "fusion", the role the agent learns. ``other``: None (default: mean-probability vote
    as the fuser, every model as the team), a policy class with ``from_env``, a batched callable, or an SB3
    model (used frozen). Observation and action spaces are the role's own (the same objects as the PettingZoo
    env's); the reward is the shared team reward; ``info`` is the role's numeric info dict. The other keyword
    arguments are :func:`ensemble_env.parallel_env`'s, or with ``env_id`` those of a registered scenario
    (:func:`ensemble_env.adapters.game_env`: ``"ensemble_env/EnsembleUnseen-v2"``, ``"ensemble_env/EnsembleGen-v0"``
    with ``generator=``, ``seed=``, ``first=``, ...).

    Without a decider (``decider=False``: the team is every model) the fusion role plays alone, and ``other``
    must stay None. With ``fusion_action="weights"`` (RLAE; :func:`weights_options`) its action is the ``Box``
    of N weights and its info holds the valid choices as ``"choice_mask"``. The per-model weighting agents
    (``fusion_agents="per_model"``) are several agents: no single-role view, a ValueError says so.

    ``credit`` (decider only): ``"game"`` (default) returns the game's r_t, earned by the team committed one step
    earlier; ``"aligned"`` returns r_{t+1}, the reward of the question the team just committed answers, found by
    playing the fixed fuser one question ahead on a snapshot of the engine (restored at once: the game goes on
    exactly as without it, and the next step reuses that answer). An episode's last step then earns 0 (its
    team answers nothing in the episode); the first question's reward (``initial_team``'s) is in no step.
    ``info["reward"]`` stays the game's. ``fusion_view`` (fusion only): ``"raw"`` or ``"per_choice"``
    (:class:`~ensemble_env.adapters.wrappers.PerChoiceLayout`); the other role's policy always reads the raw
    observation.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}  # noqa: RUF012 (gymnasium's convention)

    def __init__(
        self,
        role: str = "decider",
        other: Any = None,
        cache: LogitCache | str | os.PathLike[str] | None = None,
        *,
        render_mode: str | None = None,
        credit: str = "game",
        fusion_view: str = "raw",
        env_id: str | None = None,
        **options: Any,
    ) -> None:
        if role not in ROLES:
            raise ValueError(f"role={role!r} is not one of {', '.join(map(repr, ROLES))}")
        if credit not in CREDITS:
            raise ValueError(f"credit={credit!r} is not one of {', '.join(map(repr, CREDITS))}")
        if fusion_view not in FUSION_VIEWS:
            raise ValueError(f"fusion_view={fusion_view!r} is not one of {', '.join(map(repr, FUSION_VIEWS))}")
        if credit == "aligned" and role != "decider":
            raise ValueError("credit='aligned' realigns the decider's reward: use it with role='decider'")
        if fusion_view != "raw" and role != "fusion":
            raise ValueError(f"fusion_view={fusion_view!r} is what the trained fuser sees: use it with role='fusion'")
        self.role, self.credit = role, credit
        self.parallel = game_env(env_id, cache, options, render_mode)
        agents = list(self.parallel.possible_agents)
        if role not in agents:
            hint = (
                "fusion_agents='per_model' has one agent per model: train them with a multi-agent library, or use "
                "fusion_agents='one' for a single weighting agent"
                if role == "fusion"
                else "decider=False has no decider: train the fusion role"
            )
            raise ValueError(f"role={role!r} is not an agent of this game (its agents: {agents}); {hint}")
        other_role = ROLES[1 - ROLES.index(role)]
        #: the role the other policy plays, or None when the learning role plays alone (decider=False)
        self.other_role: str | None = other_role if other_role in agents else None
        if self.other_role is None and other is not None:
            raise ValueError(
                f"other={getattr(other, '__name__', type(other).__name__)}: this game has no {other_role} "
                f"(agents {agents}), so there is no other role to play; leave other=None"
            )
        self.render_mode = render_mode
        self._per_choice = PerChoiceLayout.from_env(self.parallel) if fusion_view == "per_choice" else None
        self.observation_space = (
            self._per_choice.space() if self._per_choice is not None else self.parallel.observation_space(role)
        )
        self.action_space = self.parallel.action_space(role)
        self._other = None if self.other_role is None else _other_policy(other, self.other_role, self.parallel)
        self._started = False
        self._other_obs: np.ndarray | None = None
        self._next_other_action: Any = None  # the fuser's answer already played in the aligned look-ahead

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        # the game's seed rule (a numpy integer is a seed, True is not), then as a Python int for gymnasium
        seed = check_seed(seed, "SingleRoleEnv.reset")
        super().reset(seed=seed)
        obs, infos = self.parallel.reset(seed=seed)
        self._started = True
        self._other_obs, self._next_other_action = self._other_of(obs), None
        return self._shown(obs), infos[self.role]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self._started:
            raise RuntimeError("step() called before reset()")
        actions = {self.role: action}
        if self.other_role is not None:
            other_action = self._next_other_action
            if other_action is None:
                other_action = self._other_action()
            actions[self.other_role] = other_action
        obs, rewards, terminations, truncations, infos = self.parallel.step(actions)
        self._other_obs, self._next_other_action = self._other_of(obs), None
        role = self.role
        reward = rewards[role]
        if self.credit == "aligned":
            reward = 0.0 if terminations[role] or truncations[role] else self._look_ahead()
        return self._shown(obs), reward, terminations[role], truncations[role], infos[role]

    def _other_action(self) -> Any:
        """The other role's action on its current observation (only in a game that has the other role)."""
        if self._other is None or self._other_obs is None:
            raise RuntimeError("this game has no other role, or reset() was not called")
        return np.asarray(self._other(self._other_obs[None, :]))[0]

    def _other_of(self, obs: dict[str, np.ndarray]) -> np.ndarray | None:
        return None if self.other_role is None else obs[self.other_role]

    def _shown(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        if self._per_choice is None:
            return obs[self.role]
        return per_choice_observation(obs["fusion"], self.parallel.engine.layout, self._per_choice)

    def _look_ahead(self) -> float:
        """r_{t+1}: the reward the fixed fuser's answer to the next question earns with the committed team
        (:func:`~ensemble_env.adapters.wrappers.answer_reward`). The fuser's action is validated as the game
        validates it (an action the game refuses, such as 2.6, raises the game's ValueError here, never scored
        as another answer), kept as it is and played at the next step, so the game goes on exactly as it would
        have. Nothing in the game changes."""
        action = self._other_action()
        reward = answer_reward(self.parallel.engine, action)
        self._next_other_action = action
        return reward

    def action_masks(self) -> np.ndarray:
        """Valid actions, as sb3-contrib's MaskablePPO reads them: the valid-choice mask for the fusion role;
        every value allowed (``2 * N`` entries, one per bit value) for the decider. A weighting agent's ``Box``
        action has no mask (ValueError): every weight vector is valid, the answer is always a valid choice."""
        if isinstance(self.action_space, gymnasium.spaces.Box):
            raise ValueError(
                f"the fusion action is {self.action_space} (weights): a Box has no action mask, and every weight "
                "vector answers a valid choice; train it with PPO, not MaskablePPO (info['choice_mask'] holds the "
                "question's valid choices)"
            )
        if self.role == "fusion":
            return self.parallel.engine.action_masks()[0].astype(bool)
        space = self.action_space
        size = int(space.n) if isinstance(space, gymnasium.spaces.Discrete) else 2 * self.parallel.engine.n_models
        return np.ones(size, dtype=bool)

    def state(self) -> np.ndarray:
        """The centralized state of the underlying game (both roles' observations)."""
        return self.parallel.state()

    def render(self) -> str | np.ndarray | None:  # type: ignore[override]
        return self.parallel.render()


def sb3_env(
    train: str = "decider",
    *,
    other: Any = None,
    num_envs: int = 1,
    cache: LogitCache | str | os.PathLike[str] | None = None,
    seed: int | None = None,
    env_id: str | None = None,
    **options: Any,
) -> Any:
    """An SB3 ``VecEnv`` of ``num_envs`` copies of the game, for ``PPO("MlpPolicy", env)``.

    ``train``: "decider" or "fusion" (one role learns; ``other`` plays the other role, see
    :class:`SingleRoleEnv`), "shared" (both roles through one parameter-shared policy, SuperSuit; the decider
    uses the ``"subset"`` encoding), or "weights" (RLAE: the fusion agent of :func:`weights_options`' game, no
    decider, a ``Box`` of N weights; ``PPO("MlpPolicy", env)``, then :func:`start_at_uniform`). ``seed``: the
    copies' first reset uses ``seed``, ``seed + 1``, ... (SB3's ``PPO(seed=...)`` overrides it for the
    single-role envs). ``options``: :func:`ensemble_env.parallel_env`'s. ``env_id``: a registered scenario instead
    (:func:`ensemble_env.adapters.game_env`; ``cache`` and ``options`` are its keywords):
    ``"ensemble_env/EnsembleUnseen-v1"`` and ``-v2`` (tasks never seen), ``"ensemble_env/EnsembleGen-v0"`` (generated
    tasks: ``generator=``, ``seed=``, ``first=``, ``deck_size=``; the copies share one deck). ``train="weights"`` is
    RLAE's game and takes no ``env_id``.

    Needs ``pip install 'ensemble-env[sb3]'``.
    """
    require("stable_baselines3", "sb3")
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    if train not in TRAIN_CHOICES:
        raise ValueError(f"train={train!r} is not one of {', '.join(map(repr, TRAIN_CHOICES))}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    seed = check_seed(seed, "sb3_env")  # the game's rule; a Python int, so seed + i never wraps around
    loaded = resolve_cache(cache) if env_id is None or cache is not None else None  # loaded once for the copies
    if train == "weights":
        if other is not None:
            raise ValueError("train='weights' has no decider (every model answers): there is no other role to pass")
        if env_id is not None:
            raise ValueError(f"train='weights' is RLAE's game (no decider); env_id={env_id!r} is another game")
        train, options = "fusion", weights_options(loaded, **options)
    if train in ROLES:
        copies = [partial(SingleRoleEnv, train, other, loaded, env_id=env_id, **options) for _ in range(num_envs)]
        vector = DummyVecEnv(copies)
    else:
        require("supersuit", "sb3")
        import supersuit as ss

        if other is not None:
            raise ValueError("train='shared' trains both roles with one policy: there is no other role to pass")
        parallel = game_env(env_id, loaded, choose_encoding(options, "subset", "SuperSuit padding", ("subset",)))
        roles = _SharedRoles.from_env(parallel)
        env: Any = ss.agent_indicator_v0(ss.pad_action_space_v0(ss.pad_observations_v0(_LastStepInfos(parallel))))
        vector = _shared_sb3_wrapper(
            ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), num_envs, num_cpus=0, base_class="gymnasium"),
            roles,
        )
    venv = VecMonitor(vector)
    if seed is not None:
        venv.seed(seed)
    return venv


class _LastStepInfos(BaseParallelWrapper):
    """Empty reset infos. SuperSuit's vector env resets inside ``step()`` and merges the new episode's reset infos
    over the last step's; without this the infos of an episode's last step (its accuracy, return, ...) are lost.
    SB3's own vector envs also keep reset infos apart from step infos."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, _ = self.env.reset(seed=seed, options=options)
        return obs, {agent: {} for agent in obs}


@dataclass(frozen=True)
class _SharedRoles:
    """What the shared vector env needs to tell its rows apart and mask them: each role's own action count and
    where the fusion agent's valid-choice mask lies in its observation (padding appends zeros after it)."""

    decider_actions: int
    fusion_actions: int
    fusion_mask: slice

    @classmethod
    def from_env(cls, parallel: Any) -> _SharedRoles:
        return cls(
            int(parallel.action_space("decider").n),
            int(parallel.action_space("fusion").n),
            parallel.engine.layout.fusion["action_mask"],
        )

    def masks(self, observations: np.ndarray, n_actions: int) -> np.ndarray:
        """(rows, n_actions) bool: a decider row allows its team indices, a fusion row its valid choices.

        The rows' roles come from the agent indicator (the last two observation entries: decider, fusion).
        """
        fusion = observations[:, -1] > 0.5
        masks = np.zeros((observations.shape[0], n_actions), dtype=bool)
        masks[~fusion, : self.decider_actions] = True
        masks[fusion, : self.fusion_actions] = observations[fusion, self.fusion_mask] > 0.5
        return masks

    def check(self, observations: np.ndarray, actions: np.ndarray) -> None:
        """ValueError when a row's action is a padded one (beyond its own role's action count)."""
        fusion = observations[:, -1] > 0.5
        limits = np.where(fusion, self.fusion_actions, self.decider_actions)
        bad = np.flatnonzero(np.asarray(actions).reshape(-1) >= limits)
        if bad.size:
            row = int(bad[0])
            role = "fusion" if fusion[row] else "decider"
            raise ValueError(
                f"sb3_env('shared'): row {row} ({role}) got action {int(actions[row])}, a padded action (the {role} "
                f"agent has {int(limits[row])}); train with sb3_contrib.MaskablePPO, which reads the vector env's "
                "action_masks(), so that padded actions are never sampled"
            )


def _shared_sb3_wrapper(vector: Any, roles: _SharedRoles) -> Any:
    """SuperSuit's ``SB3VecEnvWrapper``, made sound for SB3 2.x and a shared policy over two roles.

    - ``seed()`` keeps the seed for the next reset, which seeds the copies ``seed``, ``seed + 1``, ... (SuperSuit's
      raises AttributeError under ``PPO(seed=...)``); ``get_attr("render_mode")`` works under ``VecMonitor``;
    - ``infos[i]["TimeLimit.truncated"]``: True only when the episode was truncated, not terminated (SuperSuit
      reports ``terminated or truncated`` and nothing else, so SB3 would never bootstrap after a truncation);
    - ``env_method("action_masks")`` / ``has_attr("action_masks")`` for MaskablePPO, and padded actions refused.
    """
    from supersuit.vector.sb3_vector_wrapper import SB3VecEnvWrapper

    class SharedSB3VecEnvWrapper(SB3VecEnvWrapper):
        _pending_seed: int | None = None
        _observations: np.ndarray | None = None

        def seed(self, seed: int | None = None) -> list[int | None]:
            seed = check_seed(seed, "seed")
            self._pending_seed = seed
            return [None if seed is None else seed + index for index in range(self.num_envs)]

        def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            seed = seed if seed is not None else self._pending_seed
            self._pending_seed = None
            self._observations, self.reset_infos = self.venv.reset(seed=seed, options=options)
            return self._observations

        def step_async(self, actions: np.ndarray) -> None:
            if self._observations is None:
                raise RuntimeError("step() called before reset()")
            roles.check(self._observations, actions)
            self.venv.step_async(actions)

        def step_wait(self) -> Any:
            observations, rewards, terminations, truncations, infos = self.venv.step_wait()
            for info, terminated, truncated in zip(infos, terminations, truncations, strict=True):
                if terminated or truncated:
                    info["TimeLimit.truncated"] = bool(truncated and not terminated)
            self._observations = observations
            dones = np.logical_or(terminations, truncations)
            return observations, rewards, dones, infos

        def action_masks(self) -> np.ndarray:
            """(rows, n) bool: the actions each row (a decider or a fusion agent of a copy) may take."""
            if self._observations is None:
                raise RuntimeError("action_masks() called before reset()")
            return roles.masks(self._observations, int(self.action_space.n))

        def has_attr(self, attr_name: str) -> bool:
            return attr_name in ("action_masks", "render_mode")

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
            if method_name != "action_masks":
                return self.venv.env_method(method_name, *args, indices=indices, **kwargs)
            masks = list(self.action_masks())
            return masks if indices is None else [masks[index] for index in self._get_indices(indices)]

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            if attr_name == "render_mode":
                return [self.render_mode] * self.num_envs
            return super().get_attr(attr_name, indices)

    return SharedSB3VecEnvWrapper(vector)
