"""The pieces of PPO that MAPPO shares between its agents: rollout storage, credit, GAE, the losses, the update.

**Credit.** Both agents receive the same team reward r_t at step t, but their actions reach it differently
(the pipelined step of ``docs/environment-spec.md``): the fusion agent's answer at t earns r_t, while the
decider's action at t commits the team that answers the *next* question, so its consequence is r_{t+1}.
Each agent therefore has its own reward stream and discount:

- fusion: rewards r_t, discount ``fusion_gamma`` (0 by default: each answer is a one-step bandit, whose
  advantage is r_t - E[r_t | s_t]);
- decider: rewards r_{t+1}, discount ``gamma`` (:func:`decider_rewards`). Where r_{t+1} is not in the rollout
  (the rollout's last step, or an episode cut short by ``episode_length``: a *truncation*, whose next
  question exists but is answered in no episode) it is replaced by the critic's estimate of the reward of
  that next question, read from the state that follows. At a *termination* (the stream is exhausted) the
  decider's last team answers nothing: its reward and everything after it are 0.

The centralized critic V(s) has one head per quantity (:data:`~ensemble_mappo.networks.VALUE_HEADS`): the
decider's value, the fusion agent's value and the expected reward of the question being answered (the last
one is the estimate above; with ``fusion_gamma = 0`` it equals the fusion value). GAE runs per agent on its
own stream (:func:`compute_gae`, vectorised over the agents); episodes stop the recursion, truncations
bootstrap from the critic's outputs at ``infos["final_state"]``, terminations from 0
(:func:`bootstrap_values`).

Each actor has its own clipped surrogate with its own probability ratio and advantage; the critic's loss is
on value-normalised targets, clipped around the rollout's predictions.

>>> import torch
>>> rewards = torch.tensor([[1.0], [1.0]])
>>> values = torch.zeros(2, 1)
>>> next_values = torch.zeros(2, 1)
>>> advantages, returns = compute_gae(rewards, values, next_values, torch.zeros(2, 1), gamma=0.5, gae_lambda=1.0)
>>> advantages.squeeze(1).tolist()
[1.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ensemble_mappo.config import DECIDER_CREDITS, TrainConfig
from ensemble_mappo.networks import VALUE_HEADS

__all__ = [
    "AGENTS",
    "Rollout",
    "UpdateStats",
    "agent_targets",
    "batch_of",
    "bootstrap_values",
    "clipped_policy_loss",
    "clipped_value_loss",
    "coefficients",
    "compute_gae",
    "decider_rewards",
    "explained_variance",
]

#: the learning agents, in the order of the per-agent columns (log-probabilities, advantages)
AGENTS = ("decider", "fusion")
_REWARD_HEAD = VALUE_HEADS.index("reward")


# -- storage ------------------------------------------------------------------------------------------------
@dataclass
class Rollout:
    """Preallocated storage of ``num_steps`` steps of ``num_envs`` copies (leading axes (T, B)).

    ``inputs`` and ``actions`` are keyed by agent: the prepared observations (:meth:`Actor.prepare`) and the
    actions the policies chose; ``log_probs`` (T, B, 2) holds their log-probabilities, one column per agent
    of :data:`AGENTS`. ``values`` (T, B, H) are the critic's outputs (normalised units) at the states the
    steps started from, ``final_values`` (T, B, H) its outputs at the last state of an episode truncated at
    that step (0 elsewhere, and at terminations). ``rewards``, ``dones`` (the episode ended: terminated or
    truncated) and ``terminated`` are (T, B) numpy arrays, filled step by step without tensor conversions.
    ``credits`` (T, B, 3) is the reward of each step's question under each way of crediting the team that
    answered it (:data:`~ensemble_mappo.config.DECIDER_CREDITS`: the sampled answer's reward, the fusion agent's
    most probable answer's, the expectation over its policy; see :func:`ensemble_mappo.collection.collect`);
    ``TrainConfig.decider_credit`` picks the column the decider learns from (:meth:`credit`).
    """

    inputs: dict[str, Tensor]
    actions: dict[str, Tensor]
    states: Tensor
    log_probs: Tensor
    values: Tensor
    final_values: Tensor
    rewards: np.ndarray
    dones: np.ndarray
    terminated: np.ndarray
    credits: np.ndarray

    @classmethod
    def allocate(
        cls, num_steps: int, num_envs: int, input_sizes: dict[str, int], state_size: int, n_models: int
    ) -> Rollout:
        t, b, h = num_steps, num_envs, len(VALUE_HEADS)
        return cls(
            inputs={agent: torch.zeros(t, b, input_sizes[agent]) for agent in AGENTS},
            actions={"decider": torch.zeros(t, b, n_models), "fusion": torch.zeros(t, b, dtype=torch.long)},
            states=torch.zeros(t, b, state_size),
            log_probs=torch.zeros(t, b, len(AGENTS)),
            values=torch.zeros(t, b, h),
            final_values=torch.zeros(t, b, h),
            rewards=np.zeros((t, b), dtype=np.float32),
            dones=np.zeros((t, b), dtype=bool),
            terminated=np.zeros((t, b), dtype=bool),
            credits=np.zeros((t, b, len(DECIDER_CREDITS)), dtype=np.float32),
        )

    @property
    def num_steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.rewards.shape[1])

    def credit(self, kind: str) -> np.ndarray:
        """(T, B) the reward each step's question credits its team with, by ``kind`` (of
        :data:`~ensemble_mappo.config.DECIDER_CREDITS`); "sampled" is ``rewards``."""
        if kind not in DECIDER_CREDITS:
            raise ValueError(f"decider credit {kind!r} is not one of {', '.join(DECIDER_CREDITS)}")
        return self.rewards if kind == "sampled" else self.credits[..., DECIDER_CREDITS.index(kind)]


def _flat(tensor: Tensor) -> Tensor:
    """``tensor`` with its (T, B) axes merged into one batch axis."""
    return tensor.reshape(-1, *tensor.shape[2:])


# -- credit and advantages ----------------------------------------------------------------------------------
def bootstrap_values(values: Tensor, last_value: Tensor, dones: Tensor, final_values: Tensor) -> Tensor:
    """(T, B, ...) what follows each step: the next step's entry, or the episode's own last state's.

    ``values`` (T, B, ...) belong to the states the steps started from and ``last_value`` (B, ...) to the
    state after the rollout. Where an episode ended at step t (``dones[t]`` = 1, shape (T, B)) the next
    stored state belongs to a new episode, so ``final_values[t]`` is used instead (the critic at
    ``infos["final_state"]`` for a truncation, 0 for a termination).

    >>> bootstrap_values(torch.tensor([[1.0], [2.0]]), torch.tensor([3.0]), torch.tensor([[1.0], [0.0]]),
    ...                  torch.tensor([[9.0], [0.0]])).squeeze(1).tolist()
    [9.0, 3.0]
    """
    following = torch.cat([values[1:], last_value.unsqueeze(0)], dim=0)
    ended = dones.reshape(*dones.shape, *(1,) * (values.dim() - dones.dim())) > 0
    return torch.where(ended, final_values, following)


def decider_rewards(rewards: Tensor, next_reward_estimates: Tensor, dones: Tensor) -> Tensor:
    """(T, B) the reward each decider action earns: r_{t+1}, the reward of the question its team answers.

    ``next_reward_estimates`` (T, B) is the critic's estimate of the reward of the question after step t
    (see :func:`bootstrap_values`), used where r_{t+1} is not in the rollout: at its last step and where an
    episode was truncated; it must be 0 where an episode terminated (no question follows).

    >>> decider_rewards(torch.tensor([[1.0], [-1.0], [1.0]]), torch.tensor([[0.0], [0.0], [0.5]]),
    ...                 torch.tensor([[0.0], [1.0], [0.0]])).squeeze(1).tolist()  # a termination after step 1
    [-1.0, 0.0, 0.5]
    """
    following = torch.cat([rewards[1:], torch.zeros_like(rewards[:1])], dim=0)
    last = torch.zeros_like(dones, dtype=torch.bool)
    last[-1] = True
    return torch.where((dones > 0) | last, next_reward_estimates, following)


def compute_gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    dones: Tensor,
    gamma: float | Tensor,
    gae_lambda: float | Tensor,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimates and returns (value targets), each shaped like ``rewards``.

    ``delta_t = r_t + gamma * next_values[t] - values[t]`` and
    ``A_t = delta_t + gamma * lambda * (1 - dones[t]) * A_{t+1}``: the recursion stops where an episode ended
    (truncated or terminated) while ``next_values`` (see :func:`bootstrap_values`) bootstraps a truncated
    episode from the value of its last state. Returns are ``A_t + values[t]``. Trailing axes after (T, B)
    are independent streams; ``gamma`` and ``gae_lambda`` may be tensors over the last one (one per agent).
    """
    not_done = 1.0 - dones.reshape(*dones.shape, *(1,) * (rewards.dim() - dones.dim())).to(rewards.dtype)
    deltas = rewards + gamma * next_values - values
    carry = gamma * gae_lambda * not_done
    advantages = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + carry[t] * running
        advantages[t] = running
    return advantages, advantages + values


def agent_targets(
    rewards: Tensor,
    values: Tensor,
    last_values: Tensor,
    dones: Tensor,
    final_values: Tensor,
    gammas: Sequence[float],
    lambdas: Sequence[float],
    credit: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-agent advantages (T, B, 2) and the critic's targets (T, B, H), from denormalised critic outputs.

    ``values`` (T, B, H), ``last_values`` (B, H) and ``final_values`` (T, B, H) are the critic's outputs, per
    head of :data:`~ensemble_mappo.networks.VALUE_HEADS`, at the steps' states, at the state after the
    rollout and at the last state of each truncated episode (0 where an episode terminated). ``gammas`` and
    ``lambdas`` are per agent (:data:`AGENTS`). ``credit`` (T, B; None: ``rewards``) is what each step's
    question credits the team that answered it with (``Rollout.credit``): the decider's stream is its next
    step's, and the reward head, which stands in for it where the rollout does not hold it, learns it. The
    fusion agent always learns from ``rewards``, the rewards of its own (sampled) answers. The targets are each
    agent's lambda-return and, for the reward head, the credit itself.
    """
    credit = rewards if credit is None else credit
    following = bootstrap_values(values, last_values, dones, final_values)
    streams = torch.stack([decider_rewards(credit, following[..., _REWARD_HEAD], dones), rewards], dim=-1)
    n = len(AGENTS)
    gamma = torch.tensor(gammas, dtype=rewards.dtype)
    gae_lambda = torch.tensor(lambdas, dtype=rewards.dtype)
    advantages, returns = compute_gae(streams, values[..., :n], following[..., :n], dones, gamma, gae_lambda)
    return advantages, torch.cat([returns, credit.unsqueeze(-1)], dim=-1)


# -- losses -------------------------------------------------------------------------------------------------
def clipped_policy_loss(
    log_probs: Tensor, old_log_probs: Tensor, advantages: Tensor, clip_coef: float
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO's clipped surrogate, to minimise: ``-mean(min(ratio * A, clip(ratio, 1 - c, 1 + c) * A))``.

    Means are over the first (batch) axis, so (B, K) inputs give K independent losses. Returns
    ``(loss, approx_kl, clip_fraction)``; ``approx_kl`` is the ``(ratio - 1) - log ratio`` estimator and
    ``clip_fraction`` the share of samples whose ratio left [1 - c, 1 + c] (both detached).
    """
    log_ratio = log_probs - old_log_probs
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    loss = -torch.min(unclipped, clipped).mean(0)
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean(0)
        clip_fraction = ((ratio - 1.0).abs() > clip_coef).to(ratio.dtype).mean(0)
    return loss, approx_kl, clip_fraction


def clipped_value_loss(values: Tensor, old_values: Tensor, targets: Tensor, clip_coef: float | None) -> Tensor:
    """``0.5 * mean(max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2))``; plain ``0.5 * MSE`` if c is None.

    Means are over the first (batch) axis: (B, H) inputs give one loss per head.
    """
    unclipped = (values - targets) ** 2
    if clip_coef is None:
        return 0.5 * unclipped.mean(0)
    clipped_values = old_values + torch.clamp(values - old_values, -clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped_values - targets) ** 2).mean(0)


def coefficients(settings: TrainConfig, names: Sequence[str]) -> tuple[Tensor, Tensor]:
    """(entropy bonus, KL penalty to the start policy) per actor of ``names`` (K,): the decider's are
    ``decider_ent_coef`` (negative: ``ent_coef``) and ``decider_kl_coef``, the fusion agent's ``ent_coef`` and 0."""
    decider_ent = settings.ent_coef if settings.decider_ent_coef < 0 else settings.decider_ent_coef
    ent = {"decider": decider_ent, "fusion": settings.ent_coef}
    kl = {"decider": settings.decider_kl_coef, "fusion": 0.0}
    return torch.tensor([ent[name] for name in names]), torch.tensor([kl[name] for name in names])


# -- the update's statistics ----------------------------------------------------------------------------
@dataclass(frozen=True)
class UpdateStats:
    """What one PPO update measured: means over its minibatches, by critic head, actor or network.

    The log's columns (``losses/value_loss``, ``losses/decider_policy_loss``, ...) are
    :func:`ensemble_mappo.mappo.losses_row` of it.
    """

    value_loss: dict[str, float]
    """The critic's clipped value loss per head of :data:`~ensemble_mappo.networks.VALUE_HEADS`."""
    policy_loss: dict[str, float]
    """Each learning actor's clipped surrogate loss (the actors that did not learn are absent, here and below)."""
    entropy: dict[str, float]
    """Each learning actor's mean policy entropy."""
    approx_kl: dict[str, float]
    """Each learning actor's approximate KL divergence from the collecting policy (``(ratio - 1) - log ratio``)."""
    clip_fraction: dict[str, float]
    """Each learning actor's share of samples whose probability ratio was clipped."""
    start_kl: dict[str, float]
    """Each learning actor with a KL penalty to its start policy (``decider_kl_coef``): that KL divergence."""
    grad_norm: dict[str, float]
    """Each network that stepped (the learning actors and ``"critic"``): its gradient norm before clipping."""
    explained_variance: dict[str, float]
    """Per agent of :data:`AGENTS`: how much of the variance of its returns the critic's head explained before
    the update (1 - Var(returns - values) / Var(returns))."""

    @property
    def total_value_loss(self) -> float:
        """The critic's loss summed over its heads (the log's ``losses/value_loss``)."""
        return sum(self.value_loss.values())


def batch_of(
    rollout: Rollout, advantages: Tensor, targets: Tensor, names: list[str], standardise: bool
) -> dict[str, Tensor]:
    """A rollout flattened for the PPO epochs: one sample per (step, copy), the learning actors' columns only.

    ``states`` (M, S) are the critic's inputs, ``values`` (M, H) its outputs while collecting and ``targets``
    (M, H) its targets (the normalised returns), both value-normalised; ``advantages`` and ``log_probs`` (M, K) have
    one column per learning actor of ``names``, whose prepared observations and actions are ``inputs/<agent>`` and
    ``actions/<agent>``.
    """
    columns = [AGENTS.index(agent) for agent in names]
    chosen = advantages[..., columns]
    batch = {
        "states": _flat(rollout.states),
        "values": _flat(rollout.values),
        "targets": _flat(targets),
        "advantages": _flat(_standardised(chosen) if standardise else chosen),
        "log_probs": _flat(rollout.log_probs[..., columns]),
    }
    for agent in names:
        batch[f"inputs/{agent}"] = _flat(rollout.inputs[agent])
        batch[f"actions/{agent}"] = _flat(rollout.actions[agent])
    return batch


def _standardised(advantages: Tensor) -> Tensor:
    """Each agent's advantages (T, B, K) centred and scaled to unit variance over the rollout (as MAPPO does)."""
    flat = _flat(advantages)
    if flat.shape[0] < 2:
        return advantages
    return (advantages - flat.mean(0)) / (flat.std(0) + 1e-8)


def explained_variance(returns: Tensor, values: Tensor) -> list[float]:
    """1 - Var(returns - values) / Var(returns) per head (0 where the returns do not vary)."""
    flat_returns, flat_values = _flat(returns), _flat(values)
    variance = flat_returns.var(0)
    residual = (flat_returns - flat_values).var(0)
    explained = torch.where(variance > 0, 1.0 - residual / variance.clamp(min=1e-12), torch.zeros_like(variance))
    return [float(value) for value in explained]
