"""A short MAPPO on the ensemble game with TorchRL's own modules: one actor per role, centralized critics.

    pip install -e ".[torchrl]"
    python examples/torchrl_mappo.py --smoke          # a short run, about a minute on 2 CPU cores
    python examples/torchrl_mappo.py                  # 60 iterations on toy8
    python examples/torchrl_mappo.py --cache bbh5     # the 5 LLMs on BIG-Bench-Hard

The env is :func:`ensemble_env.adapters.torchrl.torchrl_env`: groups "decider" (MultiBinary team mask, one
Bernoulli per model) and "fusion" (Categorical answer, masked to the question's valid choices), and the root
key "state". Each group has its own actor on its own observation and its own critic on the centralized state
(MAPPO); both groups' ClipPPOLoss terms are summed and minimised by one optimizer. GAE is TorchRL's.

GAE bootstraps from the final observation after an ``episode_length`` cut (``truncated``) and not after the end
of the question stream (``terminated``). It prints a progress line per iteration, then the greedy test-split
accuracy, reward per question and team size before and after training next to the fixed baselines, and the
teams the decider committed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MLP, MaskedCategorical, ProbabilisticActor
from torchrl.objectives import ClipPPOLoss, ValueEstimators

from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.adapters.torchrl import GROUP_MAP, torchrl_env
from ensemble_env.cache.datasets import resolve as resolve_cache


class IndependentBernoulli(torch.distributions.Independent):
    """One Bernoulli per model (the decider's team mask); log-probabilities summed over the models."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__(torch.distributions.Bernoulli(logits=logits), 1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return (self.base_dist.probs > 0.5).to(self.base_dist.probs.dtype)


def make_actor(env: Any, group: str, hidden: int) -> ProbabilisticActor:
    """A stochastic policy for ``group`` reading ``(group, "observation")``, writing ``(group, "action")``."""
    action_spec = env.full_action_spec[group, "action"]
    obs_size = env.observation_spec[group, "observation"].shape[-1]
    masked = (group, "action_mask") in env.observation_spec.keys(True)
    if action_spec.dtype == torch.int64 and not masked:  # subset index: one Categorical
        n_out, distribution, in_keys = (
            action_spec.space.n,
            torch.distributions.Categorical,
            {"logits": (group, "logits")},
        )
    elif masked:  # the fusion answer, masked to the valid choices
        n_out, distribution = action_spec.space.n, MaskedCategorical
        in_keys = {"logits": (group, "logits"), "mask": (group, "action_mask")}
    else:  # Binary team mask
        n_out, distribution, in_keys = action_spec.shape[-1], IndependentBernoulli, {"logits": (group, "logits")}
    network = MLP(in_features=obs_size, out_features=n_out, num_cells=[hidden, hidden], activation_class=nn.Tanh)
    return ProbabilisticActor(
        TensorDictModule(network, in_keys=[(group, "observation")], out_keys=[(group, "logits")]),
        in_keys=in_keys,
        out_keys=[(group, "action")],
        distribution_class=distribution,
        return_log_prob=True,
        log_prob_key=(group, "action_log_prob"),
    )


def make_critic(env: Any, group: str, hidden: int) -> TensorDictModule:
    """A centralized critic: the value of the state, shaped like the group's reward (1 agent, 1)."""
    state_size = env.observation_spec["state"].shape[-1]
    network = nn.Sequential(
        MLP(in_features=state_size, out_features=1, num_cells=[hidden, hidden], activation_class=nn.Tanh),
        nn.Unflatten(-1, (1, 1)),
    )
    return TensorDictModule(network, in_keys=["state"], out_keys=[(group, "state_value")])


def make_loss(actor: ProbabilisticActor, critic: TensorDictModule, group: str, gamma: float) -> ClipPPOLoss:
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, normalize_advantage=True)
    loss.set_keys(
        action=(group, "action"),
        sample_log_prob=(group, "action_log_prob"),
        value=(group, "state_value"),
        reward=(group, "reward"),
        done=(group, "done"),
        terminated=(group, "terminated"),
        advantage=(group, "advantage"),
        value_target=(group, "value_target"),
    )
    loss.make_value_estimator(ValueEstimators.GAE, gamma=gamma, lmbda=0.95)
    return loss


def evaluate(actors: dict[str, ProbabilisticActor], cache: str, seed: int) -> EpisodeTally:
    """Greedy play over the whole test stream."""
    env = torchrl_env(cache, split="test", seed=seed)
    engine = env._env.engine
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(engine.episode_length, _joint(actors))
    teams = team_mask_of(rollout["fusion", "observation"][:, 0].numpy(), engine.layout, "fusion")
    info = rollout["next", "fusion", "info"][:, 0]
    return EpisodeTally.from_steps(engine.cache.models, teams, info["correct"].numpy(), info["reward"].numpy())


def _joint(actors: dict[str, ProbabilisticActor]) -> Any:
    from tensordict.nn import TensorDictSequential

    return TensorDictSequential(*actors.values())


@dataclass(frozen=True)
class Config:
    """Hyperparameters of the run (MAPPO defaults where they apply)."""

    iterations: int = 60
    """Collect-then-update rounds."""
    frames_per_batch: int = 1024
    """Environment steps collected per iteration (episodes auto-reset inside)."""
    episode_length: int = 256
    """Questions per training episode (random start in the shuffled train split)."""
    epochs: int = 4
    """Passes over each batch."""
    minibatch_size: int = 256
    lr: float = 1e-3
    hidden: int = 256
    """Width of the two hidden layers of every actor and critic."""
    seed: int = 0
    cache: str = "toy8"
    """A built-in cache name or a cache file."""


def train(config: Config) -> None:
    torch.manual_seed(config.seed)
    env = torchrl_env(
        config.cache, split="train", order="shuffled", episode_length=config.episode_length, seed=config.seed
    )
    actors = {group: make_actor(env, group, config.hidden) for group in GROUP_MAP}
    critics = {group: make_critic(env, group, config.hidden) for group in GROUP_MAP}
    losses = {group: make_loss(actors[group], critics[group], group, gamma=0.99) for group in GROUP_MAP}
    parameters = [p for loss in losses.values() for p in loss.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=config.lr)
    policy = _joint(actors)

    before = evaluate(actors, config.cache, config.seed)
    progress = Progress("iteration", config.iterations)
    for iteration in range(1, config.iterations + 1):
        with torch.no_grad():
            batch = env.rollout(config.frames_per_batch, policy, break_when_any_done=False)
            for loss in losses.values():  # GAE per group, its critic reading the centralized state
                loss.value_estimator(
                    batch, params=loss.critic_network_params, target_params=loss.target_critic_network_params
                )
        batch = batch.reshape(-1)
        for _ in range(config.epochs):
            for index in torch.randperm(batch.numel()).split(config.minibatch_size):
                minibatch = batch[index]
                total = 0.0
                for loss in losses.values():
                    terms = loss(minibatch)
                    total = total + terms["loss_objective"] + terms["loss_critic"] + terms["loss_entropy"]
                optimizer.zero_grad()
                total.backward()
                nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
        reward = batch["next", "fusion", "reward"].mean().item()
        accuracy = batch["next", "fusion", "info", "correct"].mean().item()
        team_size = batch["next", "fusion", "info", "team_size"].mean().item()
        progress.update(iteration, reward=reward, accuracy=accuracy, team_size=team_size)
    after = evaluate(actors, config.cache, config.seed)
    frames = config.iterations * config.frames_per_batch
    title = f"[torchrl mappo] {config.cache}: {config.iterations} iterations ({frames} steps), seed {config.seed}"
    reference = baseline_figures(resolve_cache(config.cache))
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after)))
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line("torchrl", before.figures(), after.figures()), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default=Config.cache, help="a built-in cache (toy8, bbh5) or a cache file")
    parser.add_argument("--iterations", type=int, default=Config.iterations)
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument("--smoke", action="store_true", help="8 iterations: about a minute on 2 CPU cores")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    train(Config(iterations=8 if args.smoke else args.iterations, seed=args.seed, cache=args.cache))


if __name__ == "__main__":
    main()
