"""The pieces of PPO that MAPPO shares between its agents: rollout storage, GAE, the clipped losses, the update.

Both agents receive the same team reward, so one centralized critic V(s) serves both and they share one
advantage per step (MAPPO with a shared reward). Each actor has its own clipped surrogate with its own
probability ratio; the critic's loss is on value-normalised targets, clipped around the rollout's predictions.

>>> import torch
>>> rewards = torch.tensor([[1.0], [1.0]])
>>> values = torch.zeros(2, 1)
>>> next_values = torch.zeros(2, 1)
>>> advantages, returns = compute_gae(rewards, values, next_values, torch.zeros(2, 1), gamma=0.5, gae_lambda=1.0)
>>> advantages.squeeze(1).tolist()
[1.5, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ensemble_mappo.config import TrainConfig
from ensemble_mappo.networks import Actor, CentralCritic, ValueNormalizer

__all__ = [
    "Rollout",
    "bootstrap_values",
    "clipped_policy_loss",
    "clipped_value_loss",
    "compute_gae",
    "ppo_update",
]


# -- storage ------------------------------------------------------------------------------------------------
@dataclass
class Rollout:
    """Preallocated storage of ``num_steps`` steps of ``num_envs`` copies (leading axes (T, B)).

    ``values`` are the critic's outputs (normalised units) at collection time, ``final_values`` the
    denormalised value of the last state of an episode that ended at that step (0 elsewhere).
    """

    decider_obs: Tensor
    fusion_obs: Tensor
    states: Tensor
    decider_actions: Tensor
    fusion_actions: Tensor
    decider_log_probs: Tensor
    fusion_log_probs: Tensor
    values: Tensor
    rewards: Tensor
    dones: Tensor
    final_values: Tensor

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, decider_size: int, fusion_size: int, n_models: int) -> Rollout:
        t, b = num_steps, num_envs
        return cls(
            decider_obs=torch.zeros(t, b, decider_size),
            fusion_obs=torch.zeros(t, b, fusion_size),
            states=torch.zeros(t, b, decider_size + fusion_size),
            decider_actions=torch.zeros(t, b, n_models),
            fusion_actions=torch.zeros(t, b, dtype=torch.long),
            decider_log_probs=torch.zeros(t, b),
            fusion_log_probs=torch.zeros(t, b),
            values=torch.zeros(t, b),
            rewards=torch.zeros(t, b),
            dones=torch.zeros(t, b),
            final_values=torch.zeros(t, b),
        )

    @property
    def num_steps(self) -> int:
        return int(self.rewards.shape[0])

    def flat(self, name: str) -> Tensor:
        """Field ``name`` with the (T, B) axes merged into one batch axis."""
        tensor: Tensor = getattr(self, name)
        return tensor.reshape(-1, *tensor.shape[2:])


# -- advantages ---------------------------------------------------------------------------------------------
def bootstrap_values(values: Tensor, last_value: Tensor, dones: Tensor, final_values: Tensor) -> Tensor:
    """(T, B) value of the state each step led to: the next step's value, or the episode's last state.

    ``values`` (T, B) and ``last_value`` (B,) are the critic's (denormalised) values of the states the steps
    started from and of the state after the rollout. Where an episode ended at step t (``dones[t]`` = 1) the
    next stored state belongs to a new episode, so the value of the episode's own last state,
    ``final_values[t]`` (V of ``infos["final_state"]`` for a truncation, 0 for a termination), is used instead.

    >>> bootstrap_values(torch.tensor([[1.0], [2.0]]), torch.tensor([3.0]), torch.tensor([[1.0], [0.0]]),
    ...                  torch.tensor([[9.0], [0.0]])).squeeze(1).tolist()
    [9.0, 3.0]
    """
    following = torch.cat([values[1:], last_value.unsqueeze(0)], dim=0)
    return torch.where(dones > 0, final_values, following)


def compute_gae(
    rewards: Tensor, values: Tensor, next_values: Tensor, dones: Tensor, gamma: float, gae_lambda: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimates and returns (value targets), each (T, B).

    ``delta_t = r_t + gamma * next_values[t] - values[t]`` and
    ``A_t = delta_t + gamma * lambda * (1 - dones[t]) * A_{t+1}``: the recursion stops where an episode ended
    (truncated or terminated) while ``next_values`` (see :func:`bootstrap_values`) bootstraps a truncated
    episode from the value of its last state. Returns are ``A_t + values[t]``.
    """
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        running = delta + gamma * gae_lambda * (1.0 - dones[t]) * running
        advantages[t] = running
    return advantages, advantages + values


# -- losses -------------------------------------------------------------------------------------------------
def clipped_policy_loss(
    log_probs: Tensor, old_log_probs: Tensor, advantages: Tensor, clip_coef: float
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO's clipped surrogate, to minimise: ``-mean(min(ratio * A, clip(ratio, 1 - c, 1 + c) * A))``.

    Returns ``(loss, approx_kl, clip_fraction)``; ``approx_kl`` is the ``(ratio - 1) - log ratio`` estimator
    and ``clip_fraction`` the share of samples whose ratio left [1 - c, 1 + c] (both detached).
    """
    log_ratio = log_probs - old_log_probs
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    loss = -torch.min(unclipped, clipped).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return loss, approx_kl, clip_fraction


def clipped_value_loss(values: Tensor, old_values: Tensor, targets: Tensor, clip_coef: float | None) -> Tensor:
    """``0.5 * mean(max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2))``; plain ``0.5 * MSE`` if c is None."""
    unclipped = (values - targets) ** 2
    if clip_coef is None:
        return 0.5 * unclipped.mean()
    clipped_values = old_values + torch.clamp(values - old_values, -clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped_values - targets) ** 2).mean()


# -- the update ---------------------------------------------------------------------------------------------
def ppo_update(
    actors: dict[str, Actor],
    critic: CentralCritic,
    value_norm: ValueNormalizer,
    optimizers: dict[str, torch.optim.Optimizer],
    rollout: Rollout,
    advantages: Tensor,
    returns: Tensor,
    settings: TrainConfig,
    generator: torch.Generator,
) -> dict[str, float]:
    """PPO epochs over one rollout for the actors in ``actors`` (a subset of decider, fusion) and the critic.

    ``settings`` supplies clip_coef, clip_value, ent_coef, max_grad_norm, update_epochs, num_minibatches
    and normalize_advantages. ``optimizers`` maps "decider", "fusion", "critic" to their Adam optimizers.
    The value normaliser is updated with this rollout's returns first; the critic then regresses the
    normalised returns. Returns the mean of each logged quantity over the minibatches, under namespaced keys
    (``losses/value_loss``, ...).
    """
    clip_coef = settings.clip_coef
    variance = returns.var()
    residual = (returns - value_norm.denormalize(rollout.values)).var()
    explained_variance = float(1.0 - residual / variance) if variance > 0 else 0.0
    value_norm.update(returns)
    batch = {name: rollout.flat(name) for name in ("states", "values", "decider_obs", "fusion_obs")}
    actions = {"decider": rollout.flat("decider_actions"), "fusion": rollout.flat("fusion_actions")}
    old_log_probs = {"decider": rollout.flat("decider_log_probs"), "fusion": rollout.flat("fusion_log_probs")}
    observations = {"decider": batch["decider_obs"], "fusion": batch["fusion_obs"]}
    flat_advantages = advantages.reshape(-1)
    targets = value_norm.normalize(returns.reshape(-1))
    size = flat_advantages.shape[0]
    minibatch = max(1, size // settings.num_minibatches)
    networks: dict[str, nn.Module] = {**actors, "critic": critic}
    sums: dict[str, float] = {}
    count = 0
    for _ in range(settings.update_epochs):
        order = torch.randperm(size, generator=generator)
        for start in range(0, size - minibatch + 1, minibatch):
            index = order[start : start + minibatch]
            mb_advantages = flat_advantages[index]
            if settings.normalize_advantages and index.numel() > 1:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            new_values = critic(batch["states"][index])
            value_loss = clipped_value_loss(
                new_values,
                batch["values"][index],
                targets[index],
                clip_coef if settings.clip_value else None,
            )
            loss = value_loss
            stats = {"losses/value_loss": value_loss.detach()}
            for agent, actor in actors.items():
                log_probs, entropy = actor.evaluate(observations[agent][index], actions[agent][index])
                policy_loss, approx_kl, clip_fraction = clipped_policy_loss(
                    log_probs, old_log_probs[agent][index], mb_advantages, clip_coef
                )
                loss = loss + policy_loss - settings.ent_coef * entropy.mean()
                stats[f"losses/{agent}_policy_loss"] = policy_loss.detach()
                stats[f"losses/{agent}_entropy"] = entropy.mean().detach()
                stats[f"losses/{agent}_approx_kl"] = approx_kl
                stats[f"losses/{agent}_clip_fraction"] = clip_fraction
            for name in networks:
                optimizers[name].zero_grad(set_to_none=True)
            loss.backward()
            for name, network in networks.items():
                norm = nn.utils.clip_grad_norm_(network.parameters(), settings.max_grad_norm)
                stats[f"losses/{name}_grad_norm"] = norm.detach()
                optimizers[name].step()
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + float(value)
            count += 1
    result = {key: value / max(count, 1) for key, value in sums.items()}
    result["losses/explained_variance"] = explained_variance
    return result
