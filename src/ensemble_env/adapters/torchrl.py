"""TorchRL adapter: the game as a ``torchrl.envs.PettingZooWrapper`` with the centralized state.

TorchRL takes every encoding of the decider (``MultiBinary(N)`` becomes a ``Binary`` spec, the default). The two
roles are two groups, so each has its own tensors and networks:

=====================================  =====================================================================
key                                    shape (batch dims first)
=====================================  =====================================================================
``("decider", "observation")``         (1, decider obs size), float32
``("decider", "action")``              (1, N) 0/1 (``Binary``); (1,) index with ``decider_action="subset"``
``("fusion", "observation")``          (1, fusion obs size), float32
``("fusion", "action")``               (1,) answer index (``Categorical``, one-hot with ``categorical_actions=False``)
``("fusion", "action_mask")``          (1, C) bool, the valid choices (the action spec's mask follows it)
``(group, "info", key)``               (1,) float32 for every numeric info key (``correct``, ``accuracy``, ...)
``(group, "reward")`` / ``"done"``     (1, 1) the shared reward; per-group done, terminated, truncated
``"state"``                            (state size,) float32: both observations, for a centralized critic
=====================================  =====================================================================

The groups follow the game's agents (:func:`group_map_of`): without a decider (``decider=False``) there is no
"decider" group, and with per-model weighting agents (RLAE_MAPPO's game: ``decider=False,
fusion_action="weights", fusion_agents="per_model"``) the N agents ``weight_0 ... weight_{N-1}`` form one group,
"weights" (:data:`WEIGHTS_GROUP`), so that one network can act for all of them:

========================================  ==================================================================
``("weights", "observation")``            (N, per-model obs size) float32: agent i's context, its model's
                                          probabilities, membership and the valid-choice mask
``("weights", "action")``                 (N, 1) float32 in [0, 1] (a ``Bounded`` spec): model i's weight
``("weights", "info", "choice_mask")``    (N, C) float32, the valid choices (an info: the action is not
                                          discrete)
``"state"``                               the fusion observation, then the question's context (task, features)
========================================  ==================================================================

With ``fusion_action="weights"`` and one agent, the "fusion" group's action is (1, N) weights in [0, 1].

>>> env = torchrl_env(episode_length=8, seed=0)  # doctest: +SKIP
>>> env.rollout(8)["next", "fusion", "info", "accuracy"].shape  # doctest: +SKIP
torch.Size([8, 1])
>>> rlae = torchrl_env("toy8", decider=False, fusion_action="weights", fusion_agents="per_model")  # doctest: +SKIP
>>> rlae.full_action_spec["weights", "action"].shape  # doctest: +SKIP
torch.Size([8, 1])
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from ensemble_env.adapters import game_env, require
from ensemble_env.adapters.wrappers import PerChoiceFusion
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import check_seed

__all__ = ["GROUP_MAP", "WEIGHTS_GROUP", "DeciderActionMask", "group_map_of", "torchrl_env"]

#: one group per role: the roles have different spaces and their own networks (the default game's groups)
GROUP_MAP = {"decider": ["decider"], "fusion": ["fusion"]}
#: the group of the per-model weighting agents ``weight_0 ... weight_{N-1}`` (``fusion_agents="per_model"``)
WEIGHTS_GROUP = "weights"


def group_map_of(agents: Any) -> dict[str, list[str]]:
    """TorchRL's groups for the game's ``agents``: ``"decider"`` and ``"fusion"`` alone, the per-model
    ``weight_i`` together in :data:`WEIGHTS_GROUP` (same spaces, one shared reward), in acting order.

    >>> group_map_of(["decider", "fusion"]) == GROUP_MAP
    True
    >>> group_map_of(["weight_0", "weight_1"])
    {'weights': ['weight_0', 'weight_1']}
    """
    groups: dict[str, list[str]] = {}
    for agent in agents:
        if agent in ("decider", "fusion"):
            groups[agent] = [agent]
        elif agent.startswith("weight_"):
            groups.setdefault(WEIGHTS_GROUP, []).append(agent)
        else:
            raise ValueError(f"agent {agent!r} is not 'decider', 'fusion' or 'weight_<i>'")
    return groups


def torchrl_env(
    cache: LogitCache | str | os.PathLike[str] | None = None,
    *,
    seed: int | None = None,
    device: Any = "cpu",
    categorical_actions: bool = True,
    render_mode: str | None = None,
    decider_action_mask: bool = False,
    fusion_view: str = "raw",
    env_id: str | None = None,
    **options: Any,
) -> Any:
    """The game as a TorchRL ``PettingZooWrapper``: groups "decider" and "fusion" (by default; the groups follow
    the agents, :func:`group_map_of`: "weights" for the per-model agents), ``return_state=True``.

    ``seed``: the first reset's seed (later resets continue the generator; ``env.set_seed`` re-seeds).
    ``categorical_actions``: discrete actions as indices (True) or one-hot. ``decider_action_mask``: also give
    the decider an all-valid ``("decider", "action_mask")`` (``decider_action="subset"`` only), for libraries
    that mask the actions of every group or of none (BenchMARL). ``fusion_view``: ``"raw"`` (the game's fusion
    observation) or ``"per_choice"`` (:class:`~ensemble_env.adapters.wrappers.PerChoiceFusion`: laid out per
    choice, for a scorer shared over the choices; ``state`` follows it). ``options``: the options of
    :func:`ensemble_env.parallel_env`, RLAE's included (``decider=False, fusion_action="weights",
    fusion_agents="per_model"``: the group "weights", continuous actions bounded to [0, 1]). ``env_id``: a registered
    scenario instead, ``cache`` and ``options`` its keywords (:func:`ensemble_env.adapters.game_env`:
    ``"ensemble_env/EnsembleUnseen-v2"``, ``"ensemble_env/EnsembleGen-v0"`` with ``generator=``, ``seed=``, ...).
    Needs ``pip install 'ensemble-env[torchrl]'``.
    """
    require("torchrl", "torchrl")
    from torchrl.envs import PettingZooWrapper

    seed = check_seed(seed, "torchrl_env")  # the game's rule, as a Python int for TorchRL

    if fusion_view not in ("raw", "per_choice"):
        raise ValueError(f"fusion_view={fusion_view!r} is not 'raw' or 'per_choice'")
    env: Any = game_env(env_id, cache, options, render_mode)
    if fusion_view == "per_choice":
        env = PerChoiceFusion(env)
    if decider_action_mask:
        env = DeciderActionMask(env)
    with warnings.catch_warnings():
        # TorchRL warns for every PettingZoo release but 1.24.3; this adapter's tests run the released ones.
        warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested", category=UserWarning)
        return PettingZooWrapper(
            env=env,
            return_state=True,
            group_map=group_map_of(env.possible_agents),
            categorical_actions=categorical_actions,
            seed=seed,
            device=device,
        )


class DeciderActionMask(BaseParallelWrapper):
    """Adds ``infos["decider"]["action_mask"]``, every team index valid, at reset and at every step.

    For libraries that mask the actions of every group or of none (BenchMARL, once the fusion agent has its
    valid-choice mask). Only for ``decider_action="subset"``: the mask has one entry per team index.
    """

    def __init__(self, env: Any) -> None:
        if "decider" not in env.possible_agents:
            raise ValueError(
                f"decider_action_mask needs a decider, and the game's agents are {list(env.possible_agents)} "
                "(decider=False)"
            )
        if env.config.decider_action != "subset":
            raise ValueError(
                f"decider_action_mask needs decider_action='subset' (one mask entry per team index), "
                f"got decider_action={env.config.decider_action!r}"
            )
        super().__init__(env)
        self._mask = np.ones(env.action_space("decider").n, dtype=np.int8)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        infos["decider"]["action_mask"] = self._mask.copy()
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        infos["decider"]["action_mask"] = self._mask.copy()
        return obs, rewards, terminations, truncations, infos
