"""The RLAE learners (Fu et al., arXiv 2506.00439) as learners of the frame: PPO agents that set the ensemble's weights.

- ``rlae_ppo``: one weighting agent reads the fusion observation (the N models' probabilities, the valid-choice
  mask, the task one-hot and the question's features) and sets the N weights (``fusion_agents="one"``).
- ``rlae_mappo``: N agents ``weight_i`` (``fusion_agents="per_model"``), each reading its own observation (the
  context, its model's probabilities, membership, mask); one shared actor, which also reads the agent's one-hot id
  (parameter sharing), and a centralized critic of ``venv.state()``.

Both play ``decider=False`` (every model answers every question) with ``fusion_action="weights"``: the answer is
the valid choice with the largest weighted sum of the models' probabilities. **Policy**: each weight is a Beta,
``alpha = 1 + kappa mu``, ``beta = 1 + kappa (1 - mu)`` (unimodal; ``mu`` and ``kappa`` from the network; at the
start ``mu = 1/2`` and ``kappa = initial_concentration``, so the first answers are near the mean vote); the log-
probability is exact on (0, 1) (:func:`beta_log_prob`) and a sampled weight is clamped to [:data:`ACTION_EPS`,
1 - :data:`ACTION_EPS`] before its log-probability is taken. The mean policy (each Beta's mean) plays when frozen.
**Credit**: a question is one step of a bandit (the action changes nothing later): the advantage is r_t - V(s_t)
(:func:`~ensemble_mappo.ppo.compute_gae` with gamma 0), standardised per rollout; the loss (:meth:`RLAELearner.loss`)
is :func:`~ensemble_mappo.ppo.clipped_policy_loss` (one ratio per agent), less the entropy bonus, plus ``vf_coef``
times :func:`~ensemble_mappo.ppo.clipped_value_loss`.

Everything else (the loop, the run directory, resume, evaluation, the choice on validation, plots) is the frame's:
:func:`ensemble_mappo.training.train` with an :class:`~ensemble_mappo.rlae_config.RLAEConfig`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.text import show
from ensemble_mappo.frame import RECORD_KEYS, Behaviour, Learner, Loss, StepRecord, step_infos
from ensemble_mappo.networks import mlp
from ensemble_mappo.ppo import clipped_policy_loss, clipped_value_loss, compute_gae
from ensemble_mappo.rlae_config import RLAEConfig

__all__ = [
    "ACTION_EPS",
    "BanditRollout",
    "BetaActor",
    "RLAELearner",
    "RLAENetworks",
    "beta_entropy",
    "beta_log_prob",
    "collect",
]

#: sampled weights are clamped to [ACTION_EPS, 1 - ACTION_EPS] (the Beta's log-density is finite there)
ACTION_EPS = 1e-4
#: the statistics of RLAE's loss, the log's ``losses/<name>`` columns
LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


# -- the Beta policy ------------------------------------------------------------------------------------------
def beta_log_prob(alpha: Tensor, beta: Tensor, x: Tensor) -> Tensor:
    """log Beta(x; alpha, beta) = (a-1) log x + (b-1) log(1-x) - log B(a, b), elementwise, exact on (0, 1).

    >>> round(float(beta_log_prob(torch.tensor(2.0), torch.tensor(2.0), torch.tensor(0.5))), 6)  # 6 x (1 - x) at 1/2
    0.405465
    """
    log_norm = torch.lgamma(alpha) + torch.lgamma(beta) - torch.lgamma(alpha + beta)
    return (alpha - 1.0) * torch.log(x) + (beta - 1.0) * torch.log1p(-x) - log_norm


def beta_entropy(alpha: Tensor, beta: Tensor) -> Tensor:
    """The differential entropy of Beta(alpha, beta), elementwise:
    log B(a, b) - (a-1) psi(a) - (b-1) psi(b) + (a+b-2) psi(a+b)."""
    log_norm = torch.lgamma(alpha) + torch.lgamma(beta) - torch.lgamma(alpha + beta)
    total = alpha + beta
    return (
        log_norm
        - (alpha - 1.0) * torch.digamma(alpha)
        - (beta - 1.0) * torch.digamma(beta)
        + (total - 2.0) * torch.digamma(total)
    )


class BetaActor(nn.Module):
    """An MLP from inputs (..., D) to ``n_weights`` Betas: ``(alpha, beta)``, each (..., n_weights), both >= 1.

    ``alpha = 1 + kappa mu``, ``beta = 1 + kappa (1 - mu)``, ``mu = sigmoid(u)``, ``kappa = softplus(v + c)`` with
    ``c`` such that the untrained network (output near 0) has ``mu = 1/2`` and ``kappa = initial_concentration``.
    """

    def __init__(self, input_size: int, n_weights: int, hidden: int, initial_concentration: float) -> None:
        super().__init__()
        self.n_weights = n_weights
        self.net = mlp(input_size, hidden, 2 * n_weights, output_gain=0.01)
        # softplus(offset) = initial_concentration, written so that it does not overflow
        offset = initial_concentration + math.log(-math.expm1(-initial_concentration))
        self.register_buffer("offset", torch.tensor(offset))

    def forward(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        out = self.net(inputs)
        mu = torch.sigmoid(out[..., : self.n_weights])
        kappa = nn.functional.softplus(out[..., self.n_weights :] + self.offset)
        return 1.0 + kappa * mu, 1.0 + kappa * (1.0 - mu)


@dataclass
class RLAENetworks:
    """The actor and the critic of one RLAE run, and how they read the environment.

    ``rlae_ppo``: the actor reads the fusion observation, one agent with N weights. ``rlae_mappo``: the actor reads
    each ``weight_i``'s observation with the one-hot id i appended, N agents with one weight each. The critic reads
    ``venv.state()`` in both.
    """

    algorithm: str
    n_models: int
    actor: BetaActor
    critic: nn.Sequential

    @classmethod
    def build(cls, venv: EnsembleVectorEnv, config: RLAEConfig) -> RLAENetworks:
        n = venv.n_models
        if config.algorithm == "rlae_ppo":
            size, weights = venv.observation_space("fusion").shape[-1], n
        else:
            size, weights = venv.observation_space("weight_0").shape[-1] + n, 1
        actor = BetaActor(size, weights, config.hidden_size, config.initial_concentration)
        critic = mlp(venv.state_space.shape[-1], config.hidden_size, 1, output_gain=1.0)
        return cls(config.algorithm, n, actor, critic)

    @property
    def n_agents(self) -> int:
        return 1 if self.algorithm == "rlae_ppo" else self.n_models

    @property
    def input_size(self) -> int:
        """D, the width of one agent's input (:meth:`inputs`)."""
        return int(self.actor.net[0].in_features)

    def inputs(self, obs: Mapping[str, np.ndarray]) -> Tensor:
        """(B, K, D) the actor's inputs, one row per agent (K = 1 or N)."""
        if self.algorithm == "rlae_ppo":
            return torch.from_numpy(np.asarray(obs["fusion"], dtype=np.float32)).unsqueeze(1)
        own = np.stack([obs[f"weight_{i}"] for i in range(self.n_models)], axis=1).astype(np.float32)
        ids = np.broadcast_to(np.eye(self.n_models, dtype=np.float32), (own.shape[0], self.n_models, self.n_models))
        return torch.from_numpy(np.concatenate([own, ids], axis=2))

    def actions(self, weights: np.ndarray) -> dict[str, np.ndarray]:
        """The environment's action dict of (B, N) weights."""
        weights = weights.astype(np.float32)
        if self.algorithm == "rlae_ppo":
            return {"fusion": weights}
        return {f"weight_{i}": weights[:, i : i + 1] for i in range(self.n_models)}


# -- collecting -----------------------------------------------------------------------------------------------
@dataclass
class BanditRollout:
    """Preallocated storage of one rollout of the bandit: (T, B) steps; ``inputs`` (T, B, K, D), ``actions``
    (T, B, K, W) the clamped weights, ``log_probs`` (T, B, K), ``states`` (T, B, S), ``rewards`` (T, B)."""

    inputs: Tensor
    actions: Tensor
    log_probs: Tensor
    states: Tensor
    rewards: np.ndarray

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, networks: RLAENetworks, state_size: int) -> BanditRollout:
        t, b, k = num_steps, num_envs, networks.n_agents
        w = networks.n_models // k
        return cls(
            inputs=torch.zeros(t, b, k, networks.input_size),
            actions=torch.zeros(t, b, k, w),
            log_probs=torch.zeros(t, b, k),
            states=torch.zeros(t, b, state_size),
            rewards=np.zeros((t, b), dtype=np.float32),
        )


def collect(
    venv: EnsembleVectorEnv,
    networks: RLAENetworks,
    rollout: BanditRollout,
    obs: dict[str, np.ndarray],
    rng: np.random.Generator,
    mean: bool = False,
) -> tuple[dict[str, np.ndarray], StepRecord]:
    """Fill ``rollout`` from ``obs``: the weights sampled from the Betas (with ``rng``) and clamped, or with ``mean``
    each Beta's mean (the frozen policy); return the next observations and what happened."""
    agent = venv.agents[0]
    num_steps, num_envs = rollout.rewards.shape
    record = StepRecord.allocate(num_steps, num_envs, venv.n_models)
    record.team[:] = True  # every model answers every question
    with torch.inference_mode():
        for t in range(num_steps):
            inputs = networks.inputs(obs)
            alpha, beta = networks.actor(inputs)
            if mean:
                weights = alpha / (alpha + beta)
            else:
                sample = rng.beta(alpha.numpy().astype(np.float64), beta.numpy().astype(np.float64))
                weights = torch.from_numpy(np.clip(sample, ACTION_EPS, 1.0 - ACTION_EPS).astype(np.float32))
            rollout.inputs[t].copy_(inputs)
            rollout.actions[t].copy_(weights)
            rollout.log_probs[t].copy_(beta_log_prob(alpha, beta, weights).sum(-1))
            rollout.states[t].copy_(torch.from_numpy(venv.state().astype(np.float32)))
            obs, rewards, terminations, truncations, infos = venv.step(
                networks.actions(weights.reshape(-1, networks.n_models).numpy())
            )
            rollout.rewards[t] = rewards[agent]
            record.write(t, step_infos(infos, agent, terminations[agent] | truncations[agent], RECORD_KEYS, record))
    return obs, record


# -- the learner ----------------------------------------------------------------------------------------------
class RLAELearner(Learner):
    """RLAE's part of the frame: the Beta actor and the critic, the RLAE game, the bandit's advantages and loss.

    Episodes are not cut into seeded rounds: the run resets its copies once, then each copy starts a new
    ``episode_length`` window of the train stream when one ends.
    """

    seeded_rounds = False

    def __init__(self, config: RLAEConfig, venv: EnsembleVectorEnv) -> None:
        super().__init__(config, venv)
        self.config: RLAEConfig = config
        self.model = RLAENetworks.build(venv, config)
        self.rng = np.random.default_rng(np.random.SeedSequence([config.seed, 7]))

    @staticmethod
    def env_options(config: RLAEConfig, cache: LogitCache) -> dict[str, Any]:  # type: ignore[override]
        return config.env_options(has_features=cache.features is not None)

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.model.actor, "critic": self.model.critic}

    def storage(self, venv: EnsembleVectorEnv, num_steps: int) -> BanditRollout:
        return BanditRollout.allocate(num_steps, venv.num_envs, self.model, int(venv.state_space.shape[-1]))

    def collect(
        self, venv: EnsembleVectorEnv, storage: BanditRollout, generator: torch.Generator, behaviour: Behaviour
    ) -> StepRecord:
        return collect(venv, self.model, storage, venv.observations, self.rng, mean=behaviour.fusion == "mode")[1]

    def batch(self, storage: BanditRollout, next_state: np.ndarray, learners: Sequence[str]) -> dict[str, Tensor]:
        """Advantages r - V(s) (gamma 0), standardised over the rollout; the critic's targets r."""
        t, b = storage.rewards.shape
        states = storage.states.reshape(t * b, -1)
        with torch.no_grad():
            values = self.model.critic(states).reshape(t, b)
        rewards = torch.from_numpy(storage.rewards)
        advantages, returns = compute_gae(
            rewards, values, torch.zeros_like(values), torch.zeros_like(values), gamma=0.0, gae_lambda=0.0
        )
        advantages = ((advantages - advantages.mean()) / (advantages.std() + 1e-8)).reshape(-1, 1)
        self.last_inputs = storage.inputs[-1]
        return {
            "states": states,
            "inputs": storage.inputs.reshape(t * b, *storage.inputs.shape[2:]),
            "actions": storage.actions.reshape(t * b, *storage.actions.shape[2:]),
            "log_probs": storage.log_probs.reshape(t * b, -1),
            "advantages": advantages,
            "returns": returns.reshape(-1, 1),
            "values": values.reshape(-1, 1),
        }

    def loss(self, minibatch: Mapping[str, Tensor], learners: Sequence[str]) -> Loss:
        """The clipped surrogate (one ratio per agent) less ``ent_coef`` times the Beta's entropy, plus ``vf_coef``
        times the critic's squared error."""
        config, model = self.config, self.model
        alpha, beta = model.actor(minibatch["inputs"])
        log_probs = beta_log_prob(alpha, beta, minibatch["actions"]).sum(-1)
        entropy = beta_entropy(alpha, beta).sum(-1).mean()
        policy_loss, approx_kl, clip_fraction = clipped_policy_loss(
            log_probs, minibatch["log_probs"], minibatch["advantages"], config.clip_coef
        )
        values = model.critic(minibatch["states"])
        value_loss = clipped_value_loss(values, minibatch["values"], minibatch["returns"], None)
        total = policy_loss.mean() - config.ent_coef * entropy + config.vf_coef * value_loss.sum()
        stats = {
            "policy_loss": policy_loss.mean().detach(),
            "value_loss": value_loss.sum().detach(),
            "entropy": entropy.detach(),
            "approx_kl": approx_kl.mean(),
            "clip_fraction": clip_fraction.mean(),
        }
        return Loss(total, stats)

    @staticmethod
    def log_columns(models: Sequence[str]) -> list[str]:
        columns = [f"losses/{key}" for key in LOSS_KEYS]
        return [*columns, "losses/actor_grad_norm", "losses/critic_grad_norm", "charts/concentration"]

    def log_row(self, means: Mapping[str, Tensor], grad_norms: Mapping[str, float]) -> dict[str, float]:
        row = {f"losses/{key}": float(value) for key, value in means.items()}
        row.update({f"losses/{name}_grad_norm": value for name, value in grad_norms.items()})
        with torch.no_grad():
            alpha, beta = self.model.actor(self.last_inputs)
        row["charts/concentration"] = float((alpha + beta - 2.0).mean())
        return row

    def random_state(self) -> str:
        return json.dumps(self.rng.bit_generator.state)

    def set_random_state(self, state: str, source: str) -> None:
        try:
            values = json.loads(state)
            generator = np.random.default_rng()
            generator.bit_generator.state = values
        except (TypeError, ValueError, KeyError, OverflowError) as error:
            raise ValueError(f"{source}: random: not the state of the Beta sampler ({show(str(error), 200)})") from None
        self.rng = generator

    def reseed(self, seed: int) -> None:
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
