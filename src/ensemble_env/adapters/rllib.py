"""RLlib adapter (Ray 2.x, new API stack): the game as an RLlib ``MultiAgentEnv`` and a PPO config factory.

RLlib is the way to spread rollouts over many machines. Its own ``ParallelPettingZooEnv`` wrapper does not fit
this game: it orders agents arbitrarily, calls ``render(mode)``, hides ``state()``, and RLlib has no
``MultiBinary`` support. :class:`EnsembleMultiAgentEnv` fixes all four:

- the decider acts in ``MultiDiscrete([2]*N)`` (default) or ``Discrete(2**N - 1)`` (``decider_action="subset"``);
- agents are always ``["decider", "fusion"]``, in that order, in every dict it returns;
- ``render()`` returns the text of the last step (``env_config={"render_mode": "ansi"}``);
- ``state()`` and ``state_space`` give the centralized state, for a custom centralized-critic module.

Episode ends keep their kind: an exhausted question stream is a termination (``terminateds``, every agent and
``"__all__"``), an ``episode_length`` cut a truncation (``truncateds["__all__"]``, with the real next question as
the last observation), so RLlib's GAE bootstraps from the value of that observation only after a truncation.
The truncation is reported through ``"__all__"`` alone: RLlib 2.60's ``MultiAgentEpisode`` calls an episode in
which every agent is done *terminated*, truncated agents included, and then terminates each agent's episode;
with ``"__all__"`` alone it marks every agent's episode truncated (``tests/adapters/test_rllib.py`` checks the
episodes an env runner returns).

:func:`ppo_config` returns a ``PPOConfig`` with one policy (RLModule) per role and settings that learn:

- **separate value layers** (``vf_share_layers=False``). Returns reach the hundreds (256-question episodes,
  rewards in [-2, 1]); RLlib's default ``vf_share_layers=True`` lets that value loss flow through the policy's
  layers, and the policy collapsed to one constant answer. ``vf_clip_param`` is raised for the same reason
  (RLlib's 10 would stop the value loss from following returns that large).
- **the fusion valid-choice mask**: the fusion policy is a :class:`MaskedPPOTorchRLModule`, which reads the
  mask out of its own observation (the ``action_mask`` part of the layout) and gives invalid answers a
  log-probability of about -3.4e38, so they are never sampled and carry no gradient. The decider's actions are
  all valid.
- **one policy per role, in a fixed order** (a list, not a set: the order of a set of strings changes with
  Python's hash seed, and with it the order in which the modules draw their initial weights).

RLlib's PPO has no centralized critic: each role's value function sees its own observation.

Two ``env_config`` options of the adapter (not of the game) make the game learnable by RLlib's generic PPO
(docs/adapters.md, "Learnable by generic networks"); neither changes the game:

- ``fusion_view="per_choice"``: the fusion observation laid out per choice
  (:class:`~ensemble_env.adapters.wrappers.PerChoiceFusion`); :func:`ppo_config` then gives the fuser a
  :class:`PerChoicePPOTorchRLModule` (the per-choice scorer that starts as the mean vote, masked to the valid
  choices; an MLP value).
- ``credit="aligned"``: the env plays by turns, the fuser's answer to q_t first, then the decider's commit of
  E_{t+1} (the game's step, both actions together). The fuser's answer is scored at once, with the game's own
  reward function (:func:`~ensemble_env.adapters.wrappers.answer_reward`), and that reward r_t goes to the fuser
  and to the decider, whose last action (the commit of E_t, one question ago) RLlib credits with it: the decider
  earns the reward of the question its team answers, r_{t+1} for its commit at t. The first question's team is
  ``initial_team`` (no commit is paid for it); the last commit of an episode earns 0. Observations, rewards and
  episode ends are the game's (``tests/adapters/test_rllib.py``); RLlib counts two env steps per question.

Seeding: ``ppo_config(seed=s)`` seeds RLlib's env runners (env runner i: ``s + i``) and learners; call
:func:`seed_everything` in the driver before ``build_algo()`` too (the driver-side module, when
``num_learners=0``, and the minibatch shuffling draw from the driver's global generators). Two runs with
one seed then print the same numbers (``tests/adapters/test_rllib.py`` checks it).

The same config runs on a Ray cluster (``docs/adapters.md``): ``ray start --head`` on one machine, ``ray start
--address=HEAD:6379`` on the others, ``ray.init(address="auto")``, then raise ``num_env_runners`` and
``num_learners``. Every node needs ``ensemble-env[rllib]`` installed and the cache file at the same path (the
built-in caches ship inside the package).

``EnsembleMultiAgentEnv`` and ``MaskedPPOTorchRLModule`` are built on first access, so importing this module
does not import Ray.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ensemble_env.adapters import game_env, lazy_class, require
from ensemble_env.adapters.wrappers import PerChoiceFusion, answer_reward
from ensemble_env.game.actions import choose_encoding
from ensemble_env.game.engine import check_seed

# EnsembleMultiAgentEnv and MaskedPPOTorchRLModule come from the module __getattr__ below
__all__ = [  # noqa: F822
    "CREDITS",
    "FUSION_VIEWS",
    "MODEL_DEFAULTS",
    "POLICIES",
    "TRAINING_DEFAULTS",
    "EnsembleMultiAgentEnv",
    "MaskedPPOTorchRLModule",
    "PerChoicePPOTorchRLModule",
    "policy_for_agent",
    "ppo_config",
    "rllib_env",
    "seed_everything",
]

#: one policy per role, named like the agents, in this order
POLICIES = ("decider", "fusion")
#: decider encodings RLlib can sample (it has no MultiBinary)
RLLIB_DECIDER_ACTIONS = ("multidiscrete", "subset")
#: ``DefaultModelConfig`` fields changed from RLlib's defaults (``ppo_config(model=...)`` overrides them)
MODEL_DEFAULTS: dict[str, Any] = {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False}
#: ``PPOConfig.training`` settings changed from RLlib's defaults (``ppo_config(**training)`` overrides them)
TRAINING_DEFAULTS: dict[str, Any] = {
    "lr": 1e-3,
    "lambda_": 0.95,
    "use_kl_loss": False,
    "vf_clip_param": 1e4,  # returns reach the hundreds: RLlib's 10 would stop the value loss following them
    "train_batch_size_per_learner": 2048,
    "minibatch_size": 128,
    "num_epochs": 8,
}
#: the fusion observation: the game's (``"raw"``) or laid out per choice (``"per_choice"``, ``PerChoiceFusion``)
FUSION_VIEWS = ("raw", "per_choice")
#: the decider's reward: the game's r_t (``"game"``) or r_{t+1}, that of the question its team answers
#: (``"aligned"``, by turns: the fuser answers, then the decider commits)
CREDITS = ("game", "aligned")
#: key of the fusion module's ``model_config`` that holds the mask's [start, stop) in its observation
MASK_SLICE_KEY = "action_mask_slice"


def _build_env_class() -> type:
    require("ray", "rllib")
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    class EnsembleMultiAgentEnv(MultiAgentEnv):
        """The ensemble game as an RLlib ``MultiAgentEnv``.

        ``config``: RLlib's ``env_config`` dict: ``cache`` (a built-in name or a path, default the default
        built-in cache), ``render_mode``, ``fusion_view`` (:data:`FUSION_VIEWS`), ``credit`` (:data:`CREDITS`;
        see the module docstring) and any option of :func:`ensemble_env.parallel_env`; ``decider_action``
        defaults to ``"multidiscrete"``. ``env_id``: a registered scenario, the other entries its keywords
        (:func:`ensemble_env.adapters.game_env`: ``"ensemble_env/EnsembleUnseen-v2"``,
        ``"ensemble_env/EnsembleGen-v0"`` with ``generator`` a path or None, ``seed``, ``first``, ``deck_size``: each
        env runner draws the same deck). ``env``: the PettingZoo game (wrapped in ``PerChoiceFusion`` with the
        per-choice view); ``engine``: its engine.
        """

        metadata = {"render_modes": ["ansi", "human"]}  # noqa: RUF012 (gymnasium's convention)

        def __init__(self, config: dict[str, Any] | None = None) -> None:
            super().__init__()
            options = dict(config or {})
            cache = options.pop("cache", None)
            render_mode = options.pop("render_mode", None)
            fusion_view = options.pop("fusion_view", "raw")
            credit = options.pop("credit", "game")
            env_id = options.pop("env_id", None)
            if fusion_view not in FUSION_VIEWS:
                raise ValueError(f"fusion_view={fusion_view!r} is not one of {', '.join(map(repr, FUSION_VIEWS))}")
            if credit not in CREDITS:
                raise ValueError(f"credit={credit!r} is not one of {', '.join(map(repr, CREDITS))}")
            options = choose_encoding(options, "multidiscrete", "RLlib", RLLIB_DECIDER_ACTIONS)
            env = game_env(env_id, cache, options, render_mode)
            self.env = PerChoiceFusion(env) if fusion_view == "per_choice" else env
            #: the game's engine (one copy)
            self.engine = env.engine
            self.credit = credit
            self.render_mode = render_mode
            self.possible_agents = list(self.env.possible_agents)
            self.agents: list[str] = []
            self.observation_spaces = {agent: self.env.observation_space(agent) for agent in self.possible_agents}
            self.action_spaces = {agent: self.env.action_space(agent) for agent in self.possible_agents}
            self.state_space = self.env.state_space
            self._obs: dict[str, Any] = {}
            self._infos: dict[str, Any] = {}
            self._answer: Any = None  # aligned credit: the fuser's answer, played with the decider's next action
            self._committed = False  # aligned credit: whether the decider has committed a team in this episode

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
            obs, infos = self.env.reset(seed=seed, options=options)
            self.agents = list(self.env.agents)
            if self.credit == "game":
                return obs, infos
            self._obs, self._infos, self._answer, self._committed = obs, infos, None, False
            return {"fusion": obs["fusion"]}, {"fusion": infos["fusion"]}

        def step(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
            if self.credit == "aligned":
                return self._turn(action_dict)
            return self._game_step(action_dict)

        def _game_step(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
            obs, rewards, terminations, truncations, infos = self.env.step(action_dict)
            self.agents = list(self.env.agents)
            terminated, truncated = all(terminations.values()), all(truncations.values())
            if truncated and not terminated:
                # RLlib 2.60's MultiAgentEpisode declares an episode terminated once every agent is done,
                # truncated agents included, and then terminates each agent's episode: no bootstrap from the
                # real next question. Reported through "__all__" only, the cut stays a truncation for every agent.
                truncations = dict.fromkeys(truncations, False)
            terminations["__all__"], truncations["__all__"] = terminated, truncated
            return obs, rewards, terminations, truncations, infos

        def _turn(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
            """One turn of the aligned credit: the fuser's answer (scored at once), or the decider's commit (the
            game's step, with the answer kept from the fuser's turn)."""
            not_done = {"__all__": False}
            if self._answer is None:  # the fuser's turn: it answers the question its observation shows
                if set(action_dict) != {"fusion"}:
                    raise ValueError(f"the fuser's turn takes the action of 'fusion' alone, got {sorted(action_dict)}")
                # validated as the game validates it (2.6 is refused, never scored as 2), then kept as it is
                reward = answer_reward(self.engine, action_dict["fusion"])
                self._answer = action_dict["fusion"]
                rewards = {"fusion": reward}
                if self._committed:  # r_t credits the decider's commit of E_t, one question ago (E_0: initial_team)
                    rewards["decider"] = reward
                infos = {"decider": self._infos["decider"]}
                return {"decider": self._obs["decider"]}, rewards, dict(not_done), dict(not_done), infos
            if set(action_dict) != {"decider"}:
                raise ValueError(f"the decider's turn takes the action of 'decider' alone, got {sorted(action_dict)}")
            actions = {"decider": action_dict["decider"], "fusion": self._answer}
            self._answer, self._committed = None, True
            obs, rewards, terminations, truncations, infos = self._game_step(actions)
            self._obs, self._infos = obs, infos
            if terminations["__all__"] or truncations["__all__"]:
                # both agents' last observations; the decider's last commit answers nothing in the episode: 0
                return obs, dict.fromkeys(obs, 0.0), terminations, truncations, infos
            return (
                {"fusion": obs["fusion"]},
                {"fusion": 0.0},
                dict(not_done),
                dict(not_done),
                {"fusion": infos["fusion"]},
            )

        def state(self) -> Any:
            """The centralized state (both roles' observations), for a centralized critic."""
            return self.env.state()

        def render(self) -> str | np.ndarray | None:  # type: ignore[override]
            """The last step as text (render modes ansi, human), or the episode as an image (rgb_array)."""
            return self.env.render()

        def close(self) -> None:
            self.env.close()

    return EnsembleMultiAgentEnv


def _build_module_class() -> type:
    require("ray", "rllib")
    import torch
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.torch_utils import FLOAT_MIN

    class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
        """RLlib's default PPO module with a valid-action mask read from a slice of the flat observation.

        ``model_config["action_mask_slice"]``: ``[start, stop)`` of the 0/1 mask in the observation (for the
        fusion agent: ``env.engine.layout.fusion["action_mask"]``). Invalid actions get a logit of about
        -3.4e38: never sampled, never the greedy action, no gradient. The network still reads the whole
        observation, mask included.
        """

        def _mask(self, batch: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
            start, stop = self.model_config[MASK_SLICE_KEY]
            valid = batch[Columns.OBS][..., start:stop] > 0.5
            logits = output[Columns.ACTION_DIST_INPUTS]
            output[Columns.ACTION_DIST_INPUTS] = torch.where(valid, logits, torch.full_like(logits, FLOAT_MIN))
            return output

        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            return self._mask(batch, super()._forward(batch, **kwargs))

        def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            return self._mask(batch, super()._forward_train(batch, **kwargs))

    return MaskedPPOTorchRLModule


def _build_per_choice_module_class() -> type:
    require("ray", "rllib")
    import torch
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
    from ray.rllib.core.rl_module.torch import TorchRLModule
    from ray.rllib.utils.torch_utils import FLOAT_MIN

    from ensemble_env.adapters.networks import scorer_for

    class PerChoicePPOTorchRLModule(TorchRLModule, ValueFunctionAPI):
        """A PPO module for the fuser on the per-choice view (``fusion_view="per_choice"``): the actor is the
        per-choice scorer (:mod:`ensemble_env.adapters.networks`: one network shared over the choices, starting
        as the team's mean vote), masked to the valid choices (each row's last entry); the value an MLP of
        ``fcnet_hiddens`` on the whole observation.

        ``model_config``: ``per_choice`` ``[n_models, n_choices]``, ``scorer_hidden``, ``fcnet_hiddens``.
        """

        def setup(self) -> None:
            super().setup()
            n_models, n_choices = self.model_config["per_choice"]
            size = int(self.observation_space.shape[0])
            self.scorer = scorer_for(n_models, n_choices, size, int(self.model_config.get("scorer_hidden", 32)))
            self.row_size, self.n_choices = n_models + 2, n_choices
            layers: list[torch.nn.Module] = []
            width = size
            for hidden in self.model_config.get("fcnet_hiddens", [64, 64]):
                layers += [torch.nn.Linear(width, hidden), torch.nn.Tanh()]
                width = hidden
            self.vf = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))

        def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            obs = batch[Columns.OBS]
            logits = self.scorer(obs)
            rows = obs[..., : self.n_choices * self.row_size].reshape(*obs.shape[:-1], self.n_choices, self.row_size)
            valid = rows[..., -1] > 0.5
            return {Columns.ACTION_DIST_INPUTS: torch.where(valid, logits, torch.full_like(logits, FLOAT_MIN))}

        def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
            return self.vf(batch[Columns.OBS]).squeeze(-1)

    return PerChoicePPOTorchRLModule


# Built on first access, so that importing this module does not import Ray; Ray pickles the classes by reference
# when it ships the config to its env runners.
_env_class = lazy_class(__name__, "EnsembleMultiAgentEnv", _build_env_class)
_module_class = lazy_class(__name__, "MaskedPPOTorchRLModule", _build_module_class)
_per_choice_class = lazy_class(__name__, "PerChoicePPOTorchRLModule", _build_per_choice_module_class)


def __getattr__(attribute: str) -> Any:
    if attribute == "MaskedPPOTorchRLModule":
        return _module_class(attribute)
    if attribute == "PerChoicePPOTorchRLModule":
        return _per_choice_class(attribute)
    return _env_class(attribute)


def rllib_env(**env_config: Any) -> Any:
    """An :class:`EnsembleMultiAgentEnv` (needs ``pip install 'ensemble-env[rllib]'``).

    ``env_config``: ``cache``, ``render_mode`` and the options of :func:`ensemble_env.parallel_env`, or ``env_id``
    and a registered scenario's keywords (:class:`EnsembleMultiAgentEnv`).
    """
    require("ray", "rllib")
    return __getattr__("EnsembleMultiAgentEnv")(env_config)


def policy_for_agent(agent_id: str, episode: Any = None, **kwargs: Any) -> str:
    """RLlib's ``policy_mapping_fn``: each role has its own policy, named like the agent."""
    return agent_id


def seed_everything(seed: int) -> None:
    """Seed the driver's global generators (Python, numpy, torch) as RLlib seeds its workers'."""
    require("ray", "rllib")
    from ray.rllib.utils.debug import update_global_seed_if_necessary

    update_global_seed_if_necessary("torch", check_seed(seed, "seed_everything"))


def ppo_config(
    env_config: dict[str, Any] | None = None,
    *,
    num_env_runners: int = 2,
    num_envs_per_env_runner: int = 1,
    num_learners: int = 0,
    seed: int | None = None,
    model: dict[str, Any] | None = None,
    mask_fusion: bool = True,
    **training: Any,
) -> Any:
    """A ``PPOConfig`` for the game: one PPO policy per role, ``num_env_runners`` rollout processes.

    ``env_config``: passed to :class:`EnsembleMultiAgentEnv` on every env runner (``cache`` must be a built-in
    name, a path that exists on each node, or None; ``{"env_id": "ensemble_env/EnsembleGen-v0", "seed": 0}`` plays
    generated tasks). ``num_learners``: 0 trains in the driver; more spread the
    updates over learner actors (on a cluster, one per GPU or node). ``seed``: RLlib seeds each env runner's
    env and generators from it (see :func:`seed_everything` for the driver). ``model``: fields of RLlib's
    ``DefaultModelConfig`` over :data:`MODEL_DEFAULTS` (separate value layers). ``mask_fusion``: the fusion
    policy masks invalid answers (:class:`MaskedPPOTorchRLModule`). ``training``: keyword arguments of
    ``PPOConfig.training`` over :data:`TRAINING_DEFAULTS` (``lr``, ``gamma``, ``num_epochs``, ...).

    >>> config = ppo_config({"episode_length": 256}, num_env_runners=2, seed=0)  # doctest: +SKIP
    >>> algo = config.build_algo()  # doctest: +SKIP
    >>> algo.train()["env_runners"]["episode_return_mean"]  # doctest: +SKIP
    """
    require("ray", "rllib")
    seed = check_seed(seed, "ppo_config")  # the game's rule, as a Python int (RLlib adds i per env runner)
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    env_config = dict(env_config or {})
    # Built once in the driver: fails early on a bad option, and gives the fusion mask's place.
    probe = __getattr__("EnsembleMultiAgentEnv")(env_config)
    mask = probe.engine.layout.fusion["action_mask"]
    model_config = DefaultModelConfig(**{**MODEL_DEFAULTS, **(model or {})})
    specs = {"decider": RLModuleSpec(model_config=model_config)}
    if isinstance(probe.env, PerChoiceFusion):  # the valid choices are in its rows: the module masks them
        fusion_config = {
            "per_choice": [probe.env.layout.n_models, probe.env.layout.n_choices],
            "fcnet_hiddens": list(model_config.fcnet_hiddens),
        }
        specs["fusion"] = RLModuleSpec(
            module_class=__getattr__("PerChoicePPOTorchRLModule"), model_config=fusion_config
        )
    elif mask_fusion:
        fusion_config = {**vars(model_config), MASK_SLICE_KEY: [mask.start, mask.stop]}
        specs["fusion"] = RLModuleSpec(module_class=__getattr__("MaskedPPOTorchRLModule"), model_config=fusion_config)
    else:
        specs["fusion"] = RLModuleSpec(model_config=model_config)
    return (
        PPOConfig()
        .environment(__getattr__("EnsembleMultiAgentEnv"), env_config=env_config)
        .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=num_envs_per_env_runner)
        .learners(num_learners=num_learners)
        .multi_agent(policies=list(POLICIES), policy_mapping_fn=policy_for_agent)
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .training(**{**TRAINING_DEFAULTS, **training})
        .debugging(seed=seed)
    )
