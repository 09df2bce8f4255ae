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
from torch import Tensor, nn

from ensemble_mappo.config import TrainConfig
from ensemble_mappo.networks import VALUE_HEADS, Actor, ValueNormalizer
from ensemble_mappo.optim import FlatAdam

__all__ = [
    "AGENTS",
    "Rollout",
    "agent_targets",
    "bootstrap_values",
    "clipped_policy_loss",
    "clipped_value_loss",
    "compute_gae",
    "decider_rewards",
    "ppo_update",
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
        )

    @property
    def num_steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.rewards.shape[1])


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
) -> tuple[Tensor, Tensor]:
    """Per-agent advantages (T, B, 2) and the critic's targets (T, B, H), from denormalised critic outputs.

    ``values`` (T, B, H), ``last_values`` (B, H) and ``final_values`` (T, B, H) are the critic's outputs, per
    head of :data:`~ensemble_mappo.networks.VALUE_HEADS`, at the steps' states, at the state after the
    rollout and at the last state of each truncated episode (0 where an episode terminated). ``gammas`` and
    ``lambdas`` are per agent (:data:`AGENTS`). The targets are each agent's lambda-return and, for the
    reward head, the reward itself.
    """
    following = bootstrap_values(values, last_values, dones, final_values)
    streams = torch.stack([decider_rewards(rewards, following[..., _REWARD_HEAD], dones), rewards], dim=-1)
    n = len(AGENTS)
    gamma = torch.tensor(gammas, dtype=rewards.dtype)
    gae_lambda = torch.tensor(lambdas, dtype=rewards.dtype)
    advantages, returns = compute_gae(streams, values[..., :n], following[..., :n], dones, gamma, gae_lambda)
    return advantages, torch.cat([returns, rewards.unsqueeze(-1)], dim=-1)


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


# -- the update ---------------------------------------------------------------------------------------------
def ppo_update(
    actors: dict[str, Actor],
    critic: nn.Module,
    value_norm: ValueNormalizer,
    optimizer: FlatAdam,
    rollout: Rollout,
    advantages: Tensor,
    returns: Tensor,
    settings: TrainConfig,
    generator: torch.Generator,
) -> dict[str, float]:
    """PPO epochs over one rollout for the actors in ``actors`` (a subset of :data:`AGENTS`) and the critic.

    ``critic`` maps states (B, S) to (B, H) outputs, one per head of :data:`~ensemble_mappo.networks.VALUE_HEADS`
    (:class:`~ensemble_mappo.networks.CentralCritic` or IPPO's local critics). ``advantages`` (T, B, 2) are per
    agent, ``returns`` (T, B, H) per critic head. ``optimizer`` holds the
    actors' and the critic's parameters (by the names "decider", "fusion", "critic") and clips each one's
    gradient norm; only the given actors and the critic step. ``settings`` supplies clip_coef, clip_value,
    ent_coef, update_epochs, num_minibatches and normalize_advantages. The value normaliser is updated with this
    rollout's returns first; the critic then regresses the normalised returns. Each epoch permutes the
    rollout once and walks it in contiguous minibatches. Returns the mean of each logged quantity over the
    minibatches, under namespaced keys (``losses/value_loss``, ``losses/decider_policy_loss``, ...).
    """
    clip_coef = settings.clip_coef
    names = [agent for agent in AGENTS if agent in actors]
    columns = [AGENTS.index(agent) for agent in names]
    old_values = value_norm.denormalize(rollout.values)
    explained = _explained_variance(returns, old_values)
    value_norm.update(returns)
    chosen = advantages[..., columns]
    flat = {
        "states": _flat(rollout.states),
        "values": _flat(rollout.values),
        "targets": _flat(value_norm.normalize(returns)),
        "advantages": _flat(_standardised(chosen) if settings.normalize_advantages else chosen),
        "log_probs": _flat(rollout.log_probs[..., columns]),
        **{f"inputs/{agent}": _flat(rollout.inputs[agent]) for agent in names},
        **{f"actions/{agent}": _flat(rollout.actions[agent]) for agent in names},
    }
    size = flat["states"].shape[0]
    minibatch = max(1, size // settings.num_minibatches)
    learners = [*names, "critic"]
    sums = torch.zeros(len(VALUE_HEADS) + 4 * len(names) + len(optimizer.names))
    count = 0
    for _ in range(settings.update_epochs):
        order = torch.randperm(size, generator=generator)
        shuffled = {key: tensor.index_select(0, order) for key, tensor in flat.items()}
        for start in range(0, size - minibatch + 1, minibatch):
            batch = {key: tensor[start : start + minibatch] for key, tensor in shuffled.items()}
            value_loss = clipped_value_loss(
                critic(batch["states"]), batch["values"], batch["targets"], clip_coef if settings.clip_value else None
            )
            log_probs, entropies = [], []
            for agent in names:
                log_prob, entropy = actors[agent].evaluate(batch[f"inputs/{agent}"], batch[f"actions/{agent}"])
                log_probs.append(log_prob)
                entropies.append(entropy)
            policy_loss, approx_kl, clip_fraction = clipped_policy_loss(
                torch.stack(log_probs, 1), batch["log_probs"], batch["advantages"], clip_coef
            )
            entropy = torch.stack(entropies, 1).mean(0)
            loss = value_loss.sum() + policy_loss.sum() - settings.ent_coef * entropy.sum()
            optimizer.zero_grad()
            loss.backward()
            grad_norms = optimizer.step(learners)
            with torch.no_grad():
                sums += torch.cat([value_loss, policy_loss, entropy, approx_kl, clip_fraction, grad_norms])
            count += 1
    means = (sums / max(count, 1)).tolist()
    result = {f"losses/{head}_value_loss": means[i] for i, head in enumerate(VALUE_HEADS)}
    result["losses/value_loss"] = sum(means[: len(VALUE_HEADS)])
    offset = len(VALUE_HEADS)
    for key in ("policy_loss", "entropy", "approx_kl", "clip_fraction"):
        for agent in names:
            result[f"losses/{agent}_{key}"] = means[offset]
            offset += 1
    for name in optimizer.names:
        if name in learners:
            result[f"losses/{name}_grad_norm"] = means[offset]
        offset += 1
    for column, agent in enumerate(AGENTS):
        result[f"losses/{agent}_explained_variance"] = explained[column]
    return result


def _standardised(advantages: Tensor) -> Tensor:
    """Each agent's advantages (T, B, K) centred and scaled to unit variance over the rollout (as MAPPO does)."""
    flat = _flat(advantages)
    if flat.shape[0] < 2:
        return advantages
    return (advantages - flat.mean(0)) / (flat.std(0) + 1e-8)


def _explained_variance(returns: Tensor, values: Tensor) -> list[float]:
    """1 - Var(returns - values) / Var(returns) per head (0 where the returns do not vary)."""
    flat_returns, flat_values = _flat(returns), _flat(values)
    variance = flat_returns.var(0)
    residual = (flat_returns - flat_values).var(0)
    explained = torch.where(variance > 0, 1.0 - residual / variance.clamp(min=1e-12), torch.zeros_like(variance))
    return [float(value) for value in explained]
