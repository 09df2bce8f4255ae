"""The RLAE learners (Fu et al., arXiv 2506.00439): PPO agents that set the ensemble's weights per question.

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
1 - :data:`ACTION_EPS`] before its log-probability is taken. The mean policy (each Beta's mean) plays evaluation.
**Credit**: a question is one step of a bandit (the action changes nothing later): the advantage is r_t - V(s_t)
(:func:`~ensemble_mappo.ppo.compute_gae` with gamma 0), standardised per rollout; the losses are
:func:`~ensemble_mappo.ppo.clipped_policy_loss` (one ratio per agent) and
:func:`~ensemble_mappo.ppo.clipped_value_loss`; the optimizer is :class:`~ensemble_mappo.optim.FlatAdam`.

:func:`train_rlae` trains on the train split, playing the mean policy on the validation split at the start and at
``checkpoints`` evenly spaced points, and keeps the best of those by validation reward (choices on validation only);
it writes the run directory (``config.json`` with ``"algorithm"``, ``progress.csv``, ``checkpoint.pt``) under the
folder's :class:`~ensemble_mappo.runs.RunLock`. :func:`evaluate_rlae_run` plays a split with the run's policy.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

import ensemble_env
from ensemble_env import files
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.reward import RewardSettings
from ensemble_env.text import show
from ensemble_mappo.checkpoint import CHECKPOINT_NAME, check_networks, load_checkpoint, save_checkpoint
from ensemble_mappo.config import MAX_CONFIG_BYTES
from ensemble_mappo.evaluation import Evaluation
from ensemble_mappo.networks import mlp
from ensemble_mappo.optim import FlatAdam
from ensemble_mappo.ppo import clipped_policy_loss, clipped_value_loss, compute_gae
from ensemble_mappo.progress import ProgressLog, progress_bar
from ensemble_mappo.rlae_config import RLAEConfig, rlae_config_from_dict
from ensemble_mappo.runs import CONFIG_NAME, PROGRESS_NAME, holding_run_lock, read_json
from ensemble_mappo.selection import select
from ensemble_mappo.training import round_seed

__all__ = [
    "ACTION_EPS",
    "CHECKPOINT_KEYS",
    "PROGRESS_COLUMNS",
    "BanditRollout",
    "BetaActor",
    "RLAEEvaluation",
    "RLAENetworks",
    "beta_entropy",
    "beta_log_prob",
    "collect",
    "evaluate_rlae",
    "evaluate_rlae_run",
    "is_rlae_run",
    "iterations_of",
    "make_rlae_env",
    "read_rlae_checkpoint",
    "read_rlae_run",
    "reward_settings_of",
    "train_rlae",
]

#: sampled weights are clamped to [ACTION_EPS, 1 - ACTION_EPS] (the Beta's log-density is finite there)
ACTION_EPS = 1e-4
#: the columns of an RLAE run's progress.csv
PROGRESS_COLUMNS = [
    "iteration",
    "global_step",
    "env/reward",
    "env/accuracy",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clip_fraction",
    "charts/concentration",
    "validation/reward",
]
#: the keys of an RLAE checkpoint
CHECKPOINT_KEYS = ("kind", "config", "models", "iteration", "selected_iteration", "validation", "networks")


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

    def modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor, "critic": self.critic}

    def state_dict(self) -> dict[str, dict[str, Tensor]]:
        return {name: {k: v.detach().clone() for k, v in m.state_dict().items()} for name, m in self.modules().items()}

    def load(self, networks: Mapping[str, Mapping[str, Tensor]], source: str) -> None:
        """Load ``networks`` after checking them (names, shapes, dtypes, finite values) against these networks."""
        check_networks(networks, source)
        modules = self.modules()
        if sorted(networks) != sorted(modules):
            raise ValueError(f"{source}: networks: holds {show(sorted(networks))}, expected actor, critic")
        for name, module in modules.items():
            expected, state = module.state_dict(), networks[name]
            if sorted(state) != sorted(expected):
                raise ValueError(f"{source}: networks.{name}: holds {show(sorted(state), 200)}, another network")
            for key, reference in expected.items():
                if state[key].shape != reference.shape or state[key].dtype != reference.dtype:
                    raise ValueError(
                        f"{source}: networks.{name}.{key}: {state[key].dtype} of shape {tuple(state[key].shape)}, "
                        f"expected {reference.dtype} of shape {tuple(reference.shape)} (another pool or hidden_size?)"
                    )
            module.load_state_dict(dict(state))


# -- playing --------------------------------------------------------------------------------------------------
def make_rlae_env(
    config: RLAEConfig, cache: LogitCache, *, num_envs: int, split: str, episode_length: int | None = None
) -> EnsembleVectorEnv:
    """``ensemble_env.vector_env`` of the run's game (:meth:`RLAEConfig.env_options`) on ``split``."""
    options = config.env_options(has_features=cache.features is not None)
    options = {key: tuple(value) if isinstance(value, list) else value for key, value in options.items()}
    return ensemble_env.vector_env(num_envs, cache, split=split, episode_length=episode_length, **options)


@dataclass
class BanditRollout:
    """One rollout of the bandit: (T, B) steps; ``inputs`` (T, B, K, D), ``actions`` (T, B, K, W) the clamped
    weights, ``log_probs`` (T, B, K), ``states`` (T, B, S), ``rewards`` and ``correct`` (T, B)."""

    inputs: Tensor
    actions: Tensor
    log_probs: Tensor
    states: Tensor
    rewards: np.ndarray
    correct: np.ndarray


def _step_infos(infos: Mapping[str, Any], agent: str, done: np.ndarray) -> dict[str, np.ndarray]:
    """The infos of the step just played (a finished copy's are in ``final_info``: it was reset in the step)."""
    step = infos[agent]
    if not done.any():
        return step
    final = infos["final_info"][agent]
    return {key: np.where(done, final[key], step[key]) for key in ("correct", "question", "answer", "reward")}


def collect(
    venv: EnsembleVectorEnv,
    networks: RLAENetworks,
    obs: dict[str, np.ndarray],
    num_steps: int,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], BanditRollout]:
    """``num_steps`` steps of every copy, the weights sampled from the Betas (with ``rng``) and clamped."""
    agent = venv.agents[0]
    parts: dict[str, list[Any]] = {key: [] for key in ("inputs", "actions", "log_probs", "states", "rewards", "right")}
    with torch.inference_mode():
        for _ in range(num_steps):
            inputs = networks.inputs(obs)
            alpha, beta = networks.actor(inputs)
            sample = rng.beta(alpha.numpy().astype(np.float64), beta.numpy().astype(np.float64))
            weights = torch.from_numpy(np.clip(sample, ACTION_EPS, 1.0 - ACTION_EPS).astype(np.float32))
            parts["inputs"].append(inputs)
            parts["actions"].append(weights)
            parts["log_probs"].append(beta_log_prob(alpha, beta, weights).sum(-1))
            parts["states"].append(torch.from_numpy(venv.state().astype(np.float32)))
            obs, rewards, terminations, truncations, infos = venv.step(
                networks.actions(weights.reshape(-1, networks.n_models).numpy())
            )
            done = terminations[agent] | truncations[agent]
            parts["rewards"].append(np.asarray(rewards[agent], dtype=np.float32))
            parts["right"].append(_step_infos(infos, agent, done)["correct"] > 0)
    rollout = BanditRollout(
        torch.stack(parts["inputs"]),
        torch.stack(parts["actions"]),
        torch.stack(parts["log_probs"]),
        torch.stack(parts["states"]),
        np.stack(parts["rewards"]),
        np.stack(parts["right"]),
    )
    return obs, rollout


@dataclass(frozen=True)
class RLAEEvaluation(Evaluation):
    """An :class:`~ensemble_mappo.evaluation.Evaluation` of an RLAE run (its rows are named by the algorithm)."""

    algorithm: str = "rlae_ppo"

    @property
    def name(self) -> str:
        return self.algorithm


def evaluate_rlae(
    networks_state: Mapping[str, Mapping[str, Tensor]],
    config: RLAEConfig,
    cache: LogitCache,
    *,
    split: str = "validation",
    run: str = "",
    iteration: int = 0,
    source: str = "networks",
) -> RLAEEvaluation:
    """Play ``split`` once, in the cache's order, with the mean policy of ``networks_state`` (each weight its Beta's
    mean). Nothing is learned; the labels only score the answers."""
    torch.set_num_threads(config.threads)
    venv = make_rlae_env(config, cache, num_envs=1, split=split)
    networks = RLAENetworks.build(venv, config)
    networks.load(networks_state, source)
    return _play(venv, networks, config, cache, split, run, iteration)


def _play(
    venv: EnsembleVectorEnv,
    networks: RLAENetworks,
    config: RLAEConfig,
    cache: LogitCache,
    split: str,
    run: str,
    iteration: int,
) -> RLAEEvaluation:
    """Play ``venv``'s whole stream (one copy) once with the mean policy of ``networks``."""
    agent = venv.agents[0]
    obs, _ = venv.reset(seed=0)
    keys = ("question", "answer", "correct", "reward")
    parts: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    with torch.inference_mode():
        for _ in range(venv.episode_length):
            alpha, beta = networks.actor(networks.inputs(obs))
            weights = (alpha / (alpha + beta)).reshape(-1, networks.n_models).numpy()
            obs, _, terminations, truncations, infos = venv.step(networks.actions(weights))
            step = _step_infos(infos, agent, terminations[agent] | truncations[agent])
            for key in keys:
                parts[key].append(np.asarray(step[key]))
    joined = {key: np.concatenate(value) for key, value in parts.items()}
    questions = joined["question"].astype(np.int64)
    n = cache.n_models
    return RLAEEvaluation(
        protocol="frozen",
        split=split,
        update_every=None,
        run=run,
        iteration=iteration,
        global_step=0,
        models=tuple(cache.models),
        questions=questions,
        answers=joined["answer"].astype(np.int64),
        correct=joined["correct"] > 0,
        teams=np.ones((questions.size, n), dtype=bool),
        cost=np.full(questions.size, float(n)) if cache.costs is None else _pool_cost(cache, questions),
        rewards=joined["reward"].astype(np.float64),
        reward=reward_settings_of(config, cache),
        algorithm=config.algorithm,
    )


def _pool_cost(cache: LogitCache, questions: np.ndarray) -> np.ndarray:
    costs = np.broadcast_to(np.asarray(cache.costs, dtype=np.float64), (cache.n_questions, cache.n_models))
    return np.asarray(costs[questions].sum(axis=1))


def reward_settings_of(config: RLAEConfig, cache: LogitCache) -> RewardSettings:
    """The reward of the run's game (its ``alpha``, ``size_penalty_mode``, ``use_costs``; no diversity bonus)."""
    options, defaults = config.env_options(has_features=cache.features is not None), ensemble_env.EnvConfig()
    return RewardSettings(
        alpha=options.get("alpha", defaults.alpha),
        size_penalty_mode=options.get("size_penalty_mode", defaults.size_penalty_mode),
        use_costs=options.get("use_costs", defaults.use_costs),
    )


# -- training -------------------------------------------------------------------------------------------------
def _update(
    networks: RLAENetworks, optimizer: FlatAdam, rollout: BanditRollout, config: RLAEConfig, rng: torch.Generator
) -> dict[str, float]:
    """PPO epochs on one rollout: advantages r - V(s) (gamma 0), clipped surrogate per agent, value MSE."""
    t, b = rollout.rewards.shape
    states = rollout.states.reshape(t * b, -1)
    with torch.no_grad():
        values = networks.critic(states).reshape(t, b)
    rewards = torch.from_numpy(rollout.rewards)
    advantages, returns = compute_gae(
        rewards, values, torch.zeros_like(values), torch.zeros_like(values), gamma=0.0, gae_lambda=0.0
    )
    advantages = ((advantages - advantages.mean()) / (advantages.std() + 1e-8)).reshape(-1, 1)
    returns, old_values = returns.reshape(-1, 1), values.reshape(-1, 1)
    inputs = rollout.inputs.reshape(t * b, *rollout.inputs.shape[2:])
    actions = rollout.actions.reshape(t * b, *rollout.actions.shape[2:])
    old_log_probs = rollout.log_probs.reshape(t * b, -1)
    size = t * b
    minibatch = max(1, size // config.num_minibatches)
    sums = dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"), 0.0)
    count = 0
    for _ in range(config.update_epochs):
        order = torch.randperm(size, generator=rng)
        for start in range(0, size - minibatch + 1, minibatch):
            rows = order[start : start + minibatch]
            alpha, beta = networks.actor(inputs[rows])
            log_probs = beta_log_prob(alpha, beta, actions[rows]).sum(-1)
            entropy = beta_entropy(alpha, beta).sum(-1).mean()
            policy_loss, approx_kl, clip_fraction = clipped_policy_loss(
                log_probs, old_log_probs[rows], advantages[rows], config.clip_coef
            )
            value_loss = clipped_value_loss(networks.critic(states[rows]), old_values[rows], returns[rows], None)
            loss = policy_loss.mean() - config.ent_coef * entropy + config.vf_coef * value_loss.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step(["actor", "critic"])
            for key, value in (
                ("policy_loss", policy_loss.mean()),
                ("value_loss", value_loss.sum()),
                ("entropy", entropy),
                ("approx_kl", approx_kl.mean()),
                ("clip_fraction", clip_fraction.mean()),
            ):
                sums[key] += float(value.detach())
            count += 1
    return {f"losses/{key}": value / max(count, 1) for key, value in sums.items()}


def _stops(iterations: int, checkpoints: int) -> list[int]:
    """The updates after which the mean policy plays validation (the start, 0, is one more)."""
    return sorted({max(1, round(iterations * (k + 1) / checkpoints)) for k in range(checkpoints)})


def iterations_of(config: RLAEConfig, n_train: int) -> int:
    """Rollouts (updates) of the budget: ``passes x n_train`` steps rounded up to whole rollouts."""
    return max(1, math.ceil(config.passes * n_train / (config.num_envs * config.num_steps)))


@holding_run_lock("out_dir")
def train_rlae(
    config: RLAEConfig, cache: LogitCache, out_dir: str | Path, *, cache_path: str | None = None, progress: bool = True
) -> dict[str, Any]:
    """Train ``config.algorithm`` on the train split of ``cache``; keep the checkpoint (of the start and
    ``config.checkpoints`` evenly spaced ones) whose mean policy earns the best mean reward on the validation split
    (the last one when the cache has no validation question). Writes ``config.json``, ``progress.csv`` and
    ``checkpoint.pt`` in ``out_dir``; returns ``{"selected_iteration", "iterations", "validation"}``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    n_train = int(cache.select("train", tasks=config.env.get("tasks")).size)
    episode = min(config.episode_length, n_train)
    venv = make_rlae_env(config, cache, num_envs=config.num_envs, split="train", episode_length=episode)
    networks = RLAENetworks.build(venv, config)
    optimizer = FlatAdam(networks.modules(), config.learning_rate, max_grad_norm=config.max_grad_norm)
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, 7]))
    generator = torch.Generator().manual_seed(config.seed)
    try:
        cache.select("validation", tasks=config.env.get("tasks"))
        has_validation = True
    except ValueError:
        has_validation = False
    iterations = iterations_of(config, n_train)
    stops = _stops(iterations, config.checkpoints)
    _write_run_config(out, config, cache, cache_path)

    validation_env = make_rlae_env(config, cache, num_envs=1, split="validation") if has_validation else None

    # the candidates: the start and the checkpoints at ``stops``, each with its per-question validation rewards
    candidates: list[tuple[int, dict[str, dict[str, Tensor]]]] = []
    rewards: list[np.ndarray] = []

    def validate(iteration: int) -> float:
        candidates.append((iteration, networks.state_dict()))
        if validation_env is None:
            return float("nan")
        rewards.append(_play(validation_env, networks, config, cache, "validation", "", iteration).rewards)
        return float(rewards[-1].mean())

    validate(0)
    obs, _ = venv.reset(seed=round_seed(config.seed, 0))
    batch = config.num_envs * config.num_steps
    log = ProgressLog(out / PROGRESS_NAME, PROGRESS_COLUMNS, None, False)
    bar = progress_bar(iterations * batch, 0, progress)
    try:
        for iteration in range(1, iterations + 1):
            obs, rollout = collect(venv, networks, obs, config.num_steps, rng)
            row: dict[str, float] = {"iteration": iteration, "global_step": iteration * batch}
            row["env/reward"] = float(rollout.rewards.mean())
            row["env/accuracy"] = float(rollout.correct.mean())
            row.update(_update(networks, optimizer, rollout, config, generator))
            with torch.no_grad():
                alpha, beta = networks.actor(rollout.inputs[-1])
            row["charts/concentration"] = float((alpha + beta - 2.0).mean())
            if iteration in stops:
                row["validation/reward"] = validate(iteration)
            log.write(row)
            bar.update(batch)
            bar.set_postfix(reward=f"{row['env/reward']:+.3f}", acc=f"{row['env/accuracy']:.3f}")
    finally:
        bar.close()
        log.close()
    # the best mean validation reward among the start and the checkpoints (the last without a validation split)
    chosen = select(rewards, "best") if rewards else None
    index = chosen.index if chosen is not None else len(candidates) - 1
    history = [
        {"iteration": it, "validation_reward": chosen.means[k] if chosen is not None else float("nan")}
        for k, (it, _) in enumerate(candidates)
    ]
    selected, kept = candidates[index]
    payload = {
        "kind": "rlae",
        "config": config.to_dict(),
        "models": list(cache.models),
        "iteration": iterations,
        "selected_iteration": selected,
        "validation": json.dumps(history),
        "networks": kept,
    }
    save_checkpoint(out / CHECKPOINT_NAME, payload)
    return {"selected_iteration": selected, "iterations": iterations, "validation": history}


# -- the run directory ----------------------------------------------------------------------------------------
def _write_run_config(out: Path, config: RLAEConfig, cache: LogitCache, cache_path: str | None) -> None:
    run = {"cache": cache_path, "models": list(cache.models), "n_questions": int(cache.n_questions)}
    text = json.dumps(
        {"algorithm": config.algorithm, "config": config.to_dict(), "run": run}, indent=2, allow_nan=False
    )
    files.write_text(out / CONFIG_NAME, text + "\n")


def is_rlae_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir``'s ``config.json`` is an RLAE run's (it names its ``"algorithm"``); a missing or
    unreadable one is not (:func:`ensemble_mappo.runs.read_config` then says what is wrong with it)."""
    try:
        data = read_json(Path(run_dir) / CONFIG_NAME, MAX_CONFIG_BYTES, "")
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("algorithm") in ("rlae_ppo", "rlae_mappo")


def read_rlae_run(run_dir: str | Path) -> tuple[RLAEConfig, dict[str, Any]]:
    """The config and the ``run`` entry (cache, models, n_questions) of an RLAE run directory, checked (a regular
    file within the size limit, finite JSON: :func:`ensemble_mappo.runs.read_json`)."""
    path = Path(run_dir) / CONFIG_NAME
    data = read_json(path, MAX_CONFIG_BYTES, f"is {run_dir} a run of `ensemble-env train`?")
    if not isinstance(data, dict) or sorted(data) != ["algorithm", "config", "run"]:
        raise ValueError(f"{path}: expected an object of algorithm, config and run")
    config = rlae_config_from_dict(data["config"], where=f"{path}: config")
    run = data["run"]
    if config.algorithm != data["algorithm"]:
        raise ValueError(f"{path}: algorithm {show(data['algorithm'])} differs from config.algorithm")
    if not isinstance(run, dict) or not isinstance(run.get("models"), list):
        raise ValueError(f"{path}: run: expected an object with the cache and its models, got {show(run)}")
    cache = run.get("cache")
    if cache is not None and not isinstance(cache, str):
        raise ValueError(f"{path}: run.cache: expected a cache name or path, got {show(cache)}")
    return config, run


def read_rlae_checkpoint(run_dir: str | Path, config: RLAEConfig) -> dict[str, Any]:
    """The run's checkpoint, read without pickle and checked: every key, the same config, counts that are ints."""
    path = Path(run_dir) / CHECKPOINT_NAME
    payload = load_checkpoint(path)
    missing = [key for key in CHECKPOINT_KEYS if key not in payload]
    if missing:
        raise ValueError(f"{path}: lacks {', '.join(missing)} (not a checkpoint of an RLAE run)")
    if payload["kind"] != "rlae":
        raise ValueError(f"{path}: kind: expected 'rlae', got {show(payload['kind'])}")
    if payload["config"] != config.to_dict():
        raise ValueError(f"{path}: config: differs from the run's config.json (another run's checkpoint?)")
    for key in ("iteration", "selected_iteration"):
        value = payload[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**40:
            raise ValueError(f"{path}: {key}: expected an integer >= 0, got {show(value)}")
    if payload["selected_iteration"] > payload["iteration"]:
        raise ValueError(f"{path}: selected_iteration: {payload['selected_iteration']} is after the last update")
    if not isinstance(payload["validation"], str):
        raise ValueError(f"{path}: validation: expected the JSON text of the validation history")
    payload["networks"] = check_networks(payload["networks"], str(path))
    return payload


def evaluate_rlae_run(run_dir: str | Path, cache: LogitCache, *, split: str = "test") -> RLAEEvaluation:
    """Play ``split`` with an RLAE run's policy (the checkpoint chosen on validation)."""
    config, run = read_rlae_run(run_dir)
    if list(cache.models) != list(run["models"]):
        raise ValueError(
            f"the cache's models {list(cache.models)} differ from the run's {run['models']}: evaluate with the cache "
            "the run was trained on"
        )
    checkpoint = read_rlae_checkpoint(run_dir, config)
    source = str(Path(run_dir) / CHECKPOINT_NAME)
    evaluation = evaluate_rlae(checkpoint["networks"], config, cache, split=split, run=str(run_dir), source=source)
    return dataclasses.replace(evaluation, iteration=checkpoint["selected_iteration"])
