"""RLlib adapter (Ray 2.x, new API stack): the game as an RLlib ``MultiAgentEnv`` and a PPO config factory.

RLlib is the way to spread rollouts over many machines. Its own ``ParallelPettingZooEnv`` wrapper does not fit
this game: it orders agents arbitrarily, calls ``render(mode)``, hides ``state()``, and RLlib has no
``MultiBinary`` support. :class:`EnsembleMultiAgentEnv` fixes all four:

- the decider acts in ``MultiDiscrete([2]*N)`` (default) or ``Discrete(2**N - 1)`` (``decider_action="subset"``);
- agents are always ``["decider", "fusion"]``, in that order, in every dict it returns;
- ``render()`` returns the text of the last step (``env_config={"render_mode": "ansi"}``);
- ``state()`` and ``state_space`` give the centralized state, for a custom centralized-critic module.

:func:`ppo_config` returns a ``PPOConfig`` with one policy (RLModule) per role. RLlib's PPO has no centralized
critic: each role's value function sees its own observation. RLlib's default modules do not read the fusion
valid-choice mask either; an answer outside the question's choices is simply a wrong answer.

The same config runs on a Ray cluster (``docs/adapters.md``): ``ray start --head`` on one machine, ``ray start
--address=HEAD:6379`` on the others, ``ray.init(address="auto")``, then raise ``num_env_runners`` and
``num_learners``. Every node needs ``ensemble-env[rllib]`` installed and the cache file at the same path (the
embedded default cache ships inside the package).

``EnsembleMultiAgentEnv`` is built on first access, so importing this module does not import Ray.
"""

from __future__ import annotations

from typing import Any

from ensemble_env.actions import choose_encoding
from ensemble_env.adapters import lazy_class, require
from ensemble_env.env import parallel_env

# EnsembleMultiAgentEnv comes from the module __getattr__ below
__all__ = ["POLICIES", "EnsembleMultiAgentEnv", "policy_for_agent", "ppo_config", "rllib_env"]  # noqa: F822

#: one policy per role, named like the agents
POLICIES = ("decider", "fusion")
#: decider encodings RLlib can sample (it has no MultiBinary)
RLLIB_DECIDER_ACTIONS = ("multidiscrete", "subset")


def _build_env_class() -> type:
    require("ray", "rllib")
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    class EnsembleMultiAgentEnv(MultiAgentEnv):
        """The ensemble game as an RLlib ``MultiAgentEnv``.

        ``config``: RLlib's ``env_config`` dict: ``cache`` (a path, default the embedded cache),
        ``render_mode`` and any option of :func:`ensemble_env.parallel_env`; ``decider_action`` defaults to
        ``"multidiscrete"``.
        """

        metadata = {"render_modes": ["ansi", "human"]}  # noqa: RUF012 (gymnasium's convention)

        def __init__(self, config: dict[str, Any] | None = None) -> None:
            super().__init__()
            options = dict(config or {})
            cache = options.pop("cache", None)
            render_mode = options.pop("render_mode", None)
            options = choose_encoding(options, "multidiscrete", "RLlib", RLLIB_DECIDER_ACTIONS)
            self.env = parallel_env(cache, render_mode=render_mode, **options)
            self.render_mode = render_mode
            self.possible_agents = list(self.env.possible_agents)
            self.agents: list[str] = []
            self.observation_spaces = dict(self.env.observation_spaces)
            self.action_spaces = dict(self.env.action_spaces)
            self.state_space = self.env.state_space

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
            obs, infos = self.env.reset(seed=seed, options=options)
            self.agents = list(self.env.agents)
            return obs, infos

        def step(self, action_dict: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
            obs, rewards, terminations, truncations, infos = self.env.step(action_dict)
            self.agents = list(self.env.agents)
            terminations["__all__"] = all(terminations.values())
            truncations["__all__"] = all(truncations.values())
            return obs, rewards, terminations, truncations, infos

        def state(self) -> Any:
            """The centralized state (both roles' observations), for a centralized critic."""
            return self.env.state()

        def render(self) -> str | None:  # type: ignore[override]
            return self.env.render()

        def close(self) -> None:
            self.env.close()

    return EnsembleMultiAgentEnv


# Built on first access, so that importing this module does not import Ray; Ray pickles the class by reference
# when it ships the config to its env runners.
__getattr__ = lazy_class(__name__, "EnsembleMultiAgentEnv", _build_env_class)


def rllib_env(**env_config: Any) -> Any:
    """An :class:`EnsembleMultiAgentEnv` (needs ``pip install 'ensemble-env[rllib]'``).

    ``env_config``: ``cache``, ``render_mode`` and the options of :func:`ensemble_env.parallel_env`.
    """
    require("ray", "rllib")
    return __getattr__("EnsembleMultiAgentEnv")(env_config)


def policy_for_agent(agent_id: str, episode: Any = None, **kwargs: Any) -> str:
    """RLlib's ``policy_mapping_fn``: each role has its own policy, named like the agent."""
    return agent_id


def ppo_config(
    env_config: dict[str, Any] | None = None,
    *,
    num_env_runners: int = 2,
    num_envs_per_env_runner: int = 1,
    num_learners: int = 0,
    seed: int | None = None,
    **training: Any,
) -> Any:
    """A ``PPOConfig`` for the game: one PPO policy per role, ``num_env_runners`` rollout processes.

    ``env_config``: passed to :class:`EnsembleMultiAgentEnv` on every env runner (``cache`` must be a path that
    exists on each node, or None for the embedded cache). ``num_learners``: 0 trains in the driver; more spread
    the updates over learner actors (on a cluster, one per GPU or node). ``training``: keyword arguments of
    ``PPOConfig.training`` (``lr``, ``train_batch_size_per_learner``, ``minibatch_size``, ``num_epochs``, ...).
    ``seed``: RLlib seeds each env runner's env from it.

    >>> config = ppo_config({"episode_length": 64}, num_env_runners=2)  # doctest: +SKIP
    >>> algo = config.build_algo()  # doctest: +SKIP
    >>> algo.train()["env_runners"]["episode_return_mean"]  # doctest: +SKIP
    """
    require("ray", "rllib")
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    env_config = dict(env_config or {})
    choose_encoding(env_config, "multidiscrete", "RLlib", RLLIB_DECIDER_ACTIONS)  # fail early, in the driver
    config = (
        PPOConfig()
        .environment(__getattr__("EnsembleMultiAgentEnv"), env_config=env_config)
        .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=num_envs_per_env_runner)
        .learners(num_learners=num_learners)
        .multi_agent(policies=set(POLICIES), policy_mapping_fn=policy_for_agent)
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={name: RLModuleSpec() for name in POLICIES}))
        .debugging(seed=seed)
    )
    if training:
        config = config.training(**training)
    return config
