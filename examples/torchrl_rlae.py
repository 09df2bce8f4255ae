"""RLAE_MAPPO with TorchRL's own modules: one agent per model sets that model's weight per question.

    pip install -e ".[torchrl]"
    python examples/torchrl_rlae.py --smoke             # 3 iterations on bbh5, about a minute on 2 CPU cores
    python examples/torchrl_rlae.py                     # bbh5, the default budget (SETTINGS)
    python examples/torchrl_rlae.py --cache toy8        # the synthetic 8-model pool
    python examples/torchrl_rlae.py --eval-split validation --set epochs=4   # how SETTINGS were chosen

The game is RLAE_MAPPO's (Fu et al., arXiv 2506.00439; ``docs/rlae.md``), with the reference learner's options
(``RLAEConfig.env_options``): no decider, every model answers every question, and N agents ``weight_0 ...
weight_{N-1}``, TorchRL's group "weights" (:func:`ensemble_env.adapters.torchrl.torchrl_env`), each setting its
own model's weight in [0, 1] from the question's context (task one-hot and, on bbh5, its features) and its own
model's probabilities; the answer is the valid choice with the largest weighted sum of the models' probabilities.

- **Actor**: one network shared by the N agents, which also reads the agent's one-hot id (parameter sharing), and
  gives each agent a Beta: the reference learner's :class:`ensemble_mappo.rlae.BetaActor`
  (alpha = 1 + kappa mu, beta = 1 + kappa (1 - mu)); at the start mu = 1/2 for every agent, so the policy's mean
  (every weight 1/2) is the mean vote. Evaluation plays each Beta's mean.
- **Critic**: centralized, on ``"state"`` (the fusion observation and the question's context), one value for
  the N agents.
- **Loss**: TorchRL's ``ClipPPOLoss``, one probability ratio per agent, with GAE at gamma 0: a question is one
  step of a bandit (the weights change nothing later), so the advantage is r_t - V(s_t).

It prints SETTINGS, a progress line per iteration, then the test-split accuracy and reward per question of the
policy's mean before and after training next to the fixed baselines: the mean vote (uniform weights, where the
policy starts), per_task_weights (a weight vector per task fitted on train) and the others.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import ProbabilisticActor
from torchrl.objectives import ClipPPOLoss, ValueEstimators

from ensemble_env.adapters.scoring import EpisodeTally, Progress, comparison, gain_line, weight_baseline_figures
from ensemble_env.adapters.torchrl import WEIGHTS_GROUP, torchrl_env
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_mappo.networks import mlp
from ensemble_mappo.rlae import ACTION_EPS, BetaActor
from ensemble_mappo.rlae_config import RLAEConfig

GROUP = WEIGHTS_GROUP
#: the run's settings, chosen on bbh5's validation split (``--eval-split validation``; docs/adapters.md)
SETTINGS: dict[str, Any] = {
    "iterations": 40,  # collect-then-update rounds
    "frames_per_batch": 1024,  # questions collected per iteration (N agents act on each)
    "episode_length": 512,  # questions per training episode (the shuffled train split)
    "epochs": 10,  # passes over each batch (10 against 4 on validation: a bandit's batch bears reuse)
    "minibatch_size": 256,
    "learning_rate": 3e-3,  # actor and critic (Adam), the reference learner's
    "max_grad_norm": 1.0,  # the actor's and the critic's gradients clipped apart
    "clip_epsilon": 0.2,
    "hidden": 64,  # two hidden layers, actor and critic
    "initial_concentration": 5.0,  # the Betas' kappa at the start: weights spread about 0.18 around 1/2
}
#: --smoke: a short run of the same settings
SMOKE = {"iterations": 3}
#: the baselines printed next to the run (the registry's names)


class WeightBeta(torch.distributions.Beta):
    """A Beta over one weight: samples clamped to [ACTION_EPS, 1 - ACTION_EPS] (finite log-densities, as the
    reference learner), and its mean as the deterministic action."""

    def __init__(self, concentration1: torch.Tensor, concentration0: torch.Tensor) -> None:
        super().__init__(concentration1, concentration0, validate_args=False)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:  # noqa: B008
        return super().sample(sample_shape).clamp(ACTION_EPS, 1.0 - ACTION_EPS)

    def rsample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:  # noqa: B008
        return super().rsample(sample_shape).clamp(ACTION_EPS, 1.0 - ACTION_EPS)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mean


class SharedBetaNetwork(nn.Module):
    """(..., N, D) observations -> (alpha, beta), each (..., N, 1): one :class:`BetaActor` for every agent, which
    reads the agent's observation and its one-hot id."""

    def __init__(self, obs_size: int, n_agents: int, hidden: int, initial_concentration: float) -> None:
        super().__init__()
        self.actor = BetaActor(obs_size + n_agents, 1, hidden, initial_concentration)
        self.register_buffer("ids", torch.eye(n_agents))

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = self.ids.expand(*observation.shape[:-2], *self.ids.shape)
        return self.actor(torch.cat([observation, ids], dim=-1))


class SharedValue(nn.Module):
    """A centralized critic: the value of the state, repeated for the N agents, (..., N, 1)."""

    def __init__(self, state_size: int, n_agents: int, hidden: int) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.net = mlp(state_size, hidden, 1, output_gain=1.0)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        value = self.net(state).unsqueeze(-2)  # (..., 1, 1)
        return value.expand(*value.shape[:-2], self.n_agents, 1)


def make_actor(env: Any, settings: dict[str, Any]) -> ProbabilisticActor:
    n_agents, obs_size = env.observation_spec[GROUP, "observation"].shape
    network = SharedBetaNetwork(obs_size, n_agents, settings["hidden"], settings["initial_concentration"])
    module = TensorDictModule(
        network, in_keys=[(GROUP, "observation")], out_keys=[(GROUP, "concentration1"), (GROUP, "concentration0")]
    )
    return ProbabilisticActor(
        module,
        in_keys={"concentration1": (GROUP, "concentration1"), "concentration0": (GROUP, "concentration0")},
        out_keys=[(GROUP, "action")],
        distribution_class=WeightBeta,
        return_log_prob=True,
        log_prob_key=(GROUP, "action_log_prob"),
    )


def make_loss(env: Any, actor: ProbabilisticActor, settings: dict[str, Any]) -> ClipPPOLoss:
    n_agents = env.observation_spec[GROUP, "observation"].shape[0]
    critic = TensorDictModule(
        SharedValue(env.observation_spec["state"].shape[-1], n_agents, settings["hidden"]),
        in_keys=["state"],
        out_keys=[(GROUP, "state_value")],
    )
    loss = ClipPPOLoss(
        actor, critic, clip_epsilon=settings["clip_epsilon"], entropy_bonus=False, normalize_advantage=True
    )
    loss.set_keys(
        action=(GROUP, "action"),
        sample_log_prob=(GROUP, "action_log_prob"),
        value=(GROUP, "state_value"),
        reward=(GROUP, "reward"),
        done=(GROUP, "done"),
        terminated=(GROUP, "terminated"),
        advantage=(GROUP, "advantage"),
        value_target=(GROUP, "value_target"),
    )
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.0, lmbda=0.95)  # a one-step bandit per question
    return loss


def game_options(cache: LogitCache) -> dict[str, Any]:
    """RLAE_MAPPO's game, as the reference learner plays it (its context: task one-hot, features if any)."""
    return RLAEConfig(algorithm="rlae_mappo").env_options(has_features=cache.features is not None)


def evaluate(actor: ProbabilisticActor, cache_name: str, seed: int, split: str) -> EpisodeTally:
    """The policy's mean (each Beta's mean weight) over the whole ``split`` stream."""
    cache = resolve_cache(cache_name)
    env = torchrl_env(cache_name, split=split, seed=seed, **game_options(cache))
    engine = env._env.engine
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(engine.episode_length, actor)
    info = rollout["next", GROUP, "info"][:, 0]
    teams = np.ones((rollout.shape[0], cache.n_models), dtype=np.int8)  # every model answers
    return EpisodeTally.from_steps(cache.models, teams, info["correct"].numpy(), info["reward"].numpy())


def train(cache_name: str, seed: int, split: str, settings: dict[str, Any]) -> None:
    torch.manual_seed(seed)
    print(f"SETTINGS: {settings}", flush=True)
    cache = resolve_cache(cache_name)
    options = game_options(cache)
    print(f"game: {options}", flush=True)
    env = torchrl_env(
        cache_name, split="train", order="shuffled", episode_length=settings["episode_length"], seed=seed, **options
    )
    actor = make_actor(env, settings)
    loss = make_loss(env, actor, settings)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=settings["learning_rate"])
    critic_optimizer = torch.optim.Adam(loss.critic_network.parameters(), lr=settings["learning_rate"])

    before = evaluate(actor, cache_name, seed, split)
    iterations = settings["iterations"]
    progress = Progress("iteration", iterations)
    for iteration in range(1, iterations + 1):
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):  # sampled weights (the default: means)
            batch = env.rollout(settings["frames_per_batch"], actor, break_when_any_done=False)
            loss.value_estimator(
                batch, params=loss.critic_network_params, target_params=loss.target_critic_network_params
            )
        for _ in range(settings["epochs"]):
            for index in torch.randperm(batch.numel()).split(settings["minibatch_size"]):
                terms = loss(batch[index])
                actor_optimizer.zero_grad()
                critic_optimizer.zero_grad()
                (terms["loss_objective"] + terms["loss_critic"]).backward()
                nn.utils.clip_grad_norm_(actor.parameters(), settings["max_grad_norm"])
                nn.utils.clip_grad_norm_(loss.critic_network.parameters(), settings["max_grad_norm"])
                actor_optimizer.step()
                critic_optimizer.step()
        weights = batch[GROUP, "action"][..., 0]
        progress.update(
            iteration,
            reward=batch["next", GROUP, "reward"].mean().item(),
            accuracy=batch["next", GROUP, "info", "correct"].mean().item(),
            weight_spread=weights.std(dim=-1).mean().item(),  # how far a question's weights are from equal
        )
    after = evaluate(actor, cache_name, seed, split)
    frames = iterations * settings["frames_per_batch"]
    title = f"[torchrl rlae_mappo] {cache_name}: {iterations} iterations ({frames} questions), seed {seed}"
    print(
        comparison(
            title,
            before.figures(),
            after.figures(),
            weight_baseline_figures(cache, split),
            questions=len(after),
            split=split,
        )
    )
    print(gain_line("torchrl rlae", before.figures(), after.figures(), split), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="bbh5", help="a built-in cache (bbh5, toy8) or a cache file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="change one of SETTINGS (repeatable)"
    )
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE['iterations']} iterations: about a minute")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    settings = {**SETTINGS, **(SMOKE if args.smoke else {})}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in SETTINGS:
            parser.error(f"--set {item!r}: {name!r} is not one of SETTINGS ({', '.join(SETTINGS)})")
        kind = type(SETTINGS[name])
        try:
            settings[name] = kind(value)
        except ValueError:
            parser.error(f"--set {item!r}: {value!r} is not a {kind.__name__}")
        if settings[name] <= 0:
            parser.error(f"--set {item!r}: {name} must be > 0")
    train(args.cache, args.seed, args.eval_split, settings)


if __name__ == "__main__":
    main()
