"""A short MAPPO on the ensemble game with TorchRL's own modules: one actor per role, centralized critics.

    pip install -e ".[torchrl]"
    python examples/torchrl_mappo.py --smoke          # 4 iterations on bbh5, about a minute on 2 CPU cores
    python examples/torchrl_mappo.py                  # 16 iterations on toy8
    python examples/torchrl_mappo.py --cache bbh5     # the 5 LLMs on BIG-Bench-Hard

The env is :func:`ensemble_env.adapters.torchrl.torchrl_env`: groups "decider" (MultiBinary team mask, one
Bernoulli per model) and "fusion" (Categorical answer, masked to the question's valid choices), and the root
key "state". Each group has its own actor on its own observation and its own critic on the centralized state
(MAPPO). The options that make the game learnable (``docs/adapters.md``, "Learnable by generic networks"):

- both roles see the task of the question (``decider_extras`` / ``fusion_extras``);
- the fuser reads the per-choice view (``fusion_view="per_choice"``) through a scorer shared over the choices
  that starts as the mean vote (:func:`ensemble_env.adapters.networks.per_choice_scorer`);
- the decider is credited with the reward of the question its team answers
  (:func:`ensemble_env.adapters.wrappers.aligned_decider_rewards` on each batch; steps whose next reward is not
  in the batch are left out of its loss);
- actors and critics have their own optimizers and gradient clipping, and the critics learn normalised value
  targets (running mean and variance), so the critics' loss cannot swamp the actors'.

The settings (``Config``: gamma, entropy, learning rates) were chosen on bbh5's validation split
(``--eval-split validation``), never on its test split; the script prints them.

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

from ensemble_env.adapters.networks import per_choice_scorer
from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.adapters.torchrl import GROUP_MAP, torchrl_env
from ensemble_env.adapters.wrappers import PerChoiceLayout, aligned_decider_rewards
from ensemble_env.cache.datasets import resolve as resolve_cache


class IndependentBernoulli(torch.distributions.Independent):
    """One Bernoulli per model (the decider's team mask); log-probabilities summed over the models."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__(torch.distributions.Bernoulli(logits=logits), 1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return (self.base_dist.probs > 0.5).to(self.base_dist.probs.dtype)


def make_actor(env: Any, group: str, hidden: int) -> ProbabilisticActor:
    """A stochastic policy for ``group`` reading ``(group, "observation")``, writing ``(group, "action")``.

    The fusion agent: the per-choice scorer (masked to the valid choices); the decider: an MLP, one Bernoulli
    per model (or one Categorical over team indices with ``decider_action="subset"``).
    """
    action_spec = env.full_action_spec[group, "action"]
    obs_size = env.observation_spec[group, "observation"].shape[-1]
    if group == "fusion":
        network = per_choice_scorer(PerChoiceLayout.from_env(env._env))
        distribution = MaskedCategorical
        in_keys = {"logits": (group, "logits"), "mask": (group, "action_mask")}
    else:
        subset = action_spec.dtype == torch.int64
        n_out = action_spec.space.n if subset else action_spec.shape[-1]
        distribution = torch.distributions.Categorical if subset else IndependentBernoulli
        in_keys = {"logits": (group, "logits")}
        network = MLP(in_features=obs_size, out_features=n_out, num_cells=[hidden, hidden], activation_class=nn.Tanh)
    return ProbabilisticActor(
        TensorDictModule(network, in_keys=[(group, "observation")], out_keys=[(group, "logits")]),
        in_keys=in_keys,
        out_keys=[(group, "action")],
        distribution_class=distribution,
        return_log_prob=True,
        log_prob_key=(group, "action_log_prob"),
    )


class ValueNorm(nn.Module):
    """Running mean and variance of a critic's value targets; the critic learns them normalised.

    ``forward`` turns the critic's normalised output into a value (what GAE reads); :meth:`update` folds in a
    batch of targets; a critic loss divided by :attr:`variance` is the loss on normalised targets.
    """

    def __init__(self, momentum: float = 0.99) -> None:
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(()))
        self.register_buffer("variance", torch.ones(()))

    def forward(self, normalised: torch.Tensor) -> torch.Tensor:
        return normalised * self.variance.sqrt() + self.mean

    @torch.no_grad()
    def update(self, targets: torch.Tensor) -> None:
        self.mean.lerp_(targets.mean(), 1 - self.momentum)
        self.variance.lerp_(targets.var().clamp_min(1e-4), 1 - self.momentum)


def make_critic(env: Any, group: str, hidden: int, norm: ValueNorm) -> TensorDictModule:
    """A centralized critic: the value of the state, shaped like the group's reward (1 agent, 1)."""
    state_size = env.observation_spec["state"].shape[-1]
    network = nn.Sequential(
        MLP(in_features=state_size, out_features=1, num_cells=[hidden, hidden], activation_class=nn.Tanh),
        norm,
        nn.Unflatten(-1, (1, 1)),
    )
    return TensorDictModule(network, in_keys=["state"], out_keys=[(group, "state_value")])


def make_loss(actor: ProbabilisticActor, critic: TensorDictModule, group: str, config: Config) -> ClipPPOLoss:
    entropy = config.decider_entropy if group == "decider" else config.fusion_entropy
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=entropy, normalize_advantage=True)
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
    loss.make_value_estimator(ValueEstimators.GAE, gamma=config.gamma, lmbda=0.95)
    return loss


def align_decider_credit(batch: Any) -> torch.Tensor:
    """Set the decider's rewards of a (T,)-batch to r_{t+1} (the reward of the question its team answers);
    returns the (T,) bool mask of the steps whose aligned reward is known (the decider's loss uses only those)."""
    rewards = batch["next", "fusion", "reward"].reshape(-1).numpy()
    done = batch["next", "fusion", "done"].reshape(-1).numpy()
    aligned, known = aligned_decider_rewards(rewards, done)
    target = batch["next", "decider", "reward"]
    batch["next", "decider", "reward"] = torch.as_tensor(aligned, dtype=target.dtype).reshape(target.shape)
    return torch.as_tensor(known)


def evaluate(actors: dict[str, ProbabilisticActor], cache: str, seed: int, split: str = "test") -> EpisodeTally:
    """Greedy play over the whole ``split`` stream."""
    env = torchrl_env(cache, split=split, seed=seed, fusion_view="per_choice", **EXTRAS)
    engine = env._env.engine
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(engine.episode_length, _joint(actors))
    # the decider's observation before step t shows the team that answers at step t
    teams = team_mask_of(rollout["decider", "observation"][:, 0].numpy(), engine.layout, "decider")
    info = rollout["next", "fusion", "info"][:, 0]
    return EpisodeTally.from_steps(engine.cache.models, teams, info["correct"].numpy(), info["reward"].numpy())


def _joint(actors: dict[str, ProbabilisticActor]) -> Any:
    from tensordict.nn import TensorDictSequential

    return TensorDictSequential(*actors.values())


#: what both roles see beyond the paper's observations: the task of the question
EXTRAS = {"decider_extras": ("task",), "fusion_extras": ("task",)}


@dataclass(frozen=True)
class Config:
    """Hyperparameters of the run; gamma, the entropy bonuses and the learning rates chosen on bbh5's
    validation split (docs/adapters.md, "TorchRL")."""

    iterations: int = 16
    """Collect-then-update rounds (16 beat 8 on bbh5's validation split)."""
    frames_per_batch: int = 1024
    """Environment steps collected per iteration (episodes auto-reset inside)."""
    episode_length: int = 256
    """Questions per training episode (the shuffled train split)."""
    epochs: int = 4
    """Passes over each batch."""
    minibatch_size: int = 256
    actor_lr: float = 1e-3
    critic_lr: float = 1e-3
    max_grad_norm: float = 1.0
    """Clip norm, applied to the actors' gradients and the critics' gradients apart."""
    gamma: float = 0.0
    """0: each step's credit is its own question's reward (the decider's aligned: the question its team answers)."""
    decider_entropy: float = 0.01
    fusion_entropy: float = 0.0
    hidden: int = 256
    """Width of the two hidden layers of the decider's actor and of every critic."""
    seed: int = 0
    cache: str = "toy8"
    """A built-in cache name or a cache file."""
    eval_split: str = "test"


def train(config: Config) -> None:
    torch.manual_seed(config.seed)
    print(f"settings: {config}", flush=True)
    env = torchrl_env(
        config.cache,
        split="train",
        order="shuffled",
        episode_length=config.episode_length,
        seed=config.seed,
        fusion_view="per_choice",
        **EXTRAS,
    )
    actors = {group: make_actor(env, group, config.hidden) for group in GROUP_MAP}
    norms = {group: ValueNorm() for group in GROUP_MAP}
    critics = {group: make_critic(env, group, config.hidden, norms[group]) for group in GROUP_MAP}
    losses = {group: make_loss(actors[group], critics[group], group, config) for group in GROUP_MAP}
    actor_parameters = [p for actor in actors.values() for p in actor.parameters()]
    critic_parameters = [p for critic in critics.values() for p in critic.parameters()]
    actor_optimizer = torch.optim.Adam(actor_parameters, lr=config.actor_lr)
    critic_optimizer = torch.optim.Adam(critic_parameters, lr=config.critic_lr)
    policy = _joint(actors)

    before = evaluate(actors, config.cache, config.seed, config.eval_split)
    progress = Progress("iteration", config.iterations)
    for iteration in range(1, config.iterations + 1):
        # sampled actions: a ProbabilisticActor plays its deterministic action unless told otherwise
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            batch = env.rollout(config.frames_per_batch, policy, break_when_any_done=False)
            known = {"decider": align_decider_credit(batch), "fusion": torch.ones(batch.shape[0], dtype=torch.bool)}
            for group, loss in losses.items():  # GAE per group, its critic reading the centralized state
                loss.value_estimator(
                    batch, params=loss.critic_network_params, target_params=loss.target_critic_network_params
                )
                norms[group].update(batch[group, "value_target"][known[group]])
        for _ in range(config.epochs):
            for index in torch.randperm(batch.numel()).split(config.minibatch_size):
                actor_total, critic_total = 0.0, 0.0
                for group, loss in losses.items():
                    rows = index[known[group][index]]
                    terms = loss(batch[rows])
                    actor_total = actor_total + terms["loss_objective"] + terms["loss_entropy"]
                    critic_total = critic_total + terms["loss_critic"] / norms[group].variance
                actor_optimizer.zero_grad()
                critic_optimizer.zero_grad()
                (actor_total + critic_total).backward()
                nn.utils.clip_grad_norm_(actor_parameters, config.max_grad_norm)
                nn.utils.clip_grad_norm_(critic_parameters, config.max_grad_norm)
                actor_optimizer.step()
                critic_optimizer.step()
        reward = batch["next", "fusion", "reward"].mean().item()
        accuracy = batch["next", "fusion", "info", "correct"].mean().item()
        team_size = batch["next", "fusion", "info", "team_size"].mean().item()
        progress.update(iteration, reward=reward, accuracy=accuracy, team_size=team_size)
    after = evaluate(actors, config.cache, config.seed, config.eval_split)
    frames = config.iterations * config.frames_per_batch
    title = f"[torchrl mappo] {config.cache}: {config.iterations} iterations ({frames} steps), seed {config.seed}"
    reference = baseline_figures(resolve_cache(config.cache), config.eval_split)
    split = config.eval_split
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after), split=split))
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line("torchrl", before.figures(), after.figures(), split), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="a built-in cache (toy8, bbh5) or a cache file; default toy8 (--smoke: bbh5)")
    parser.add_argument("--iterations", type=int, default=Config.iterations)
    parser.add_argument("--seed", type=int, default=Config.seed)
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument("--gamma", type=float, default=Config.gamma)
    parser.add_argument("--decider-entropy", type=float, default=Config.decider_entropy)
    parser.add_argument("--smoke", action="store_true", help="4 iterations on bbh5: about a minute on 2 CPU cores")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    config = Config(
        iterations=4 if args.smoke else args.iterations,
        seed=args.seed,
        cache=args.cache or ("bbh5" if args.smoke else Config.cache),
        eval_split=args.eval_split,
        gamma=args.gamma,
        decider_entropy=args.decider_entropy,
    )
    train(config)


if __name__ == "__main__":
    main()
