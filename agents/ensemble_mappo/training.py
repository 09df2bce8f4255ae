"""MAPPO on the ensemble game: rollouts over ``ensemble_env.vector_env``, GAE, PPO updates, logs, checkpoints.

The loop reads like CleanRL's ``ppo.py``: each iteration collects ``num_steps`` steps of ``num_envs`` copies
into preallocated storage, computes advantages with the centralized critic, and runs PPO epochs. The pieces
(:class:`~ensemble_mappo.networks.DeciderActor`, :class:`~ensemble_mappo.networks.FusionActor`,
:class:`~ensemble_mappo.networks.CentralCritic`, :func:`~ensemble_mappo.ppo.compute_gae`, the losses) live in
their own modules and are tested there.

Episodes and exact resumption. Every copy plays episodes of the same length, cut so that they end on rollout
boundaries; at the start of every *round* of episodes the trainer resets all copies with a seed drawn from
(``seed``, round number). A checkpoint stores the environment's snapshot
(:meth:`~ensemble_env.game.engine.EnsembleVectorEnv.get_state`, see :func:`~ensemble_mappo.checkpoint.pack_arrays`);
resuming restores it with ``set_state``. Together with the networks, optimizers, value normaliser and the
sampling generator, a resumed run produces the same numbers as an uninterrupted one.

Run directory: ``config.json`` (the config, the cache and the pool), ``progress.csv`` (one row per update,
namespaced columns such as ``env/accuracy`` and ``losses/value_loss``), ``checkpoint.pt`` and, with
``tensorboard = true``, TensorBoard event files.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

import ensemble_env
from ensemble_env.game.actions import MAX_SUBSET_MODELS
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.views.policies import PluralityVote
from ensemble_mappo.checkpoint import CHECKPOINT_NAME, load_checkpoint, pack_arrays, save_checkpoint, unpack_arrays
from ensemble_mappo.config import TrainConfig, config_from_dict
from ensemble_mappo.files import atomic_write
from ensemble_mappo.networks import (
    VALUE_HEADS,
    Actor,
    CentralCritic,
    DeciderActor,
    FusionActor,
    LocalCritics,
    TeamDeciderActor,
    ValueNormalizer,
)
from ensemble_mappo.optim import FlatAdam
from ensemble_mappo.ppo import AGENTS, Rollout, agent_targets, ppo_update

__all__ = [
    "CONFIG_NAME",
    "PROGRESS_NAME",
    "Agents",
    "Behaviour",
    "Budget",
    "StepRecord",
    "collect",
    "env_options",
    "episode_plan",
    "load_run",
    "make_env",
    "make_optimizer",
    "round_seed",
    "schedule",
    "train",
]

CONFIG_NAME = "config.json"
PROGRESS_NAME = "progress.csv"
AGENT_LOSS_KEYS = ("policy_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm", "explained_variance")


# -- networks -----------------------------------------------------------------------------------------------
@dataclass
class Agents:
    """The learnable parts of MAPPO: the two actors, the centralized critic and its value normaliser."""

    decider: DeciderActor | TeamDeciderActor
    fusion: FusionActor
    critic: CentralCritic | LocalCritics
    value_norm: ValueNormalizer

    @classmethod
    def build(
        cls,
        venv: EnsembleVectorEnv,
        hidden: int,
        decider_initial_prob: float = 0.5,
        critic: str = "central",
        decider_policy: str = "auto",
    ) -> Agents:
        """Networks sized for ``venv``'s observations (the global torch seed decides the initial weights).

        The decider's greedy and played teams honour the environment's ``min_team_size``. ``critic``:
        "central" (MAPPO: one critic of the state) or "local" (IPPO: :class:`LocalCritics`, each agent's
        values from its own observation). ``decider_policy``: "bernoulli" (:class:`DeciderActor`), "teams"
        (:class:`TeamDeciderActor`, a categorical over the non-empty teams; ``decider_initial_prob`` unused) or
        "auto" (teams for pools of up to :data:`ensemble_env.game.actions.MAX_SUBSET_MODELS` models).
        """
        layout = venv.layout
        if critic == "local":
            critics: CentralCritic | LocalCritics = LocalCritics(layout.decider_size, layout.fusion_size, hidden)
        else:
            critics = CentralCritic(layout.decider_size + layout.fusion_size, hidden)
        min_size = venv.config.min_team_size
        if decider_policy == "auto":
            decider_policy = "teams" if venv.n_models <= MAX_SUBSET_MODELS else "bernoulli"
        decider: DeciderActor | TeamDeciderActor
        if decider_policy == "teams":
            decider = TeamDeciderActor(layout.decider_size, venv.n_models, hidden, min_size)
        elif decider_policy == "bernoulli":
            decider = DeciderActor(layout.decider_size, venv.n_models, hidden, decider_initial_prob, min_size)
        else:
            raise ValueError(f"decider_policy={decider_policy!r} is not 'auto', 'teams' or 'bernoulli'")
        return cls(
            decider=decider,
            fusion=FusionActor(layout.fusion, venv.n_models, venv.max_choices),
            critic=critics,
            value_norm=ValueNormalizer(),
        )

    def modules(self) -> dict[str, nn.Module]:
        return {"decider": self.decider, "fusion": self.fusion, "critic": self.critic, "value_norm": self.value_norm}

    def networks(self) -> dict[str, nn.Module]:
        """The networks with parameters: the two actors and the critic."""
        return {"decider": self.decider, "fusion": self.fusion, "critic": self.critic}

    def state_dict(self) -> dict[str, dict[str, Tensor]]:
        return {name: module.state_dict() for name, module in self.modules().items()}

    def load_state_dict(self, state: Mapping[str, Mapping[str, Tensor]]) -> None:
        """Load saved networks; a checkpoint of local critics (IPPO) replaces a central one and vice versa."""
        saved = state["critic"]
        if "decider_net.0.weight" in saved and isinstance(self.critic, CentralCritic):
            decider, fusion = saved["decider_net.0.weight"].shape[1], saved["fusion_net.0.weight"].shape[1]
            self.critic = LocalCritics(decider, fusion, saved["decider_net.0.weight"].shape[0])
        elif "net.0.weight" in saved and isinstance(self.critic, LocalCritics):
            self.critic = CentralCritic(saved["net.0.weight"].shape[1], saved["net.0.weight"].shape[0])
        for name, module in self.modules().items():
            module.load_state_dict(state[name])

    def value(self, states: Tensor) -> Tensor:
        """Denormalised critic outputs (B, H), one column per head of ``VALUE_HEADS`` (returns' units)."""
        return self.value_norm.denormalize(self.critic(states))

    def rollout(self, venv: EnsembleVectorEnv, num_steps: int) -> Rollout:
        """Storage for ``num_steps`` steps of ``venv``'s copies, sized for these networks' inputs."""
        layout = venv.layout
        sizes = {"decider": layout.decider_size, "fusion": self.fusion.input_size}
        return Rollout.allocate(
            num_steps, venv.num_envs, sizes, layout.decider_size + layout.fusion_size, venv.n_models
        )


def make_optimizer(agents: Agents, config: TrainConfig) -> FlatAdam:
    """Adam over the three networks (eps 1e-5, as MAPPO and CleanRL), each network's gradient norm clipped to
    ``max_grad_norm`` (see :class:`~ensemble_mappo.optim.FlatAdam`)."""
    return FlatAdam(agents.networks(), config.learning_rate, max_grad_norm=config.max_grad_norm, eps=1e-5)


# -- environment --------------------------------------------------------------------------------------------
def env_options(config: TrainConfig, cache: LogitCache) -> dict[str, Any]:
    """The environment options of a run on ``cache``: ``config.env`` plus, with ``question_features`` and a
    cache that holds features, ``"features"`` in the decider's extras. Training and evaluation both use it.

    >>> from ensemble_env import datasets
    >>> env_options(TrainConfig(), datasets.load("toy8"))["decider_extras"]  # toy8 has no features
    ['task']
    """
    options = dict(config.env)
    extras = list(options.get("decider_extras", ()))
    if config.question_features and cache.features is not None and "features" not in extras:
        options["decider_extras"] = [*extras, "features"]
    return options


def make_env(
    cache: LogitCache,
    env_options: Mapping[str, Any],
    *,
    num_envs: int,
    split: str,
    order: str = "sequential",
    episode_length: int | None = None,
) -> EnsembleVectorEnv:
    """``ensemble_env.vector_env`` over ``cache`` with the run's options (lists become tuples)."""
    options = {key: tuple(value) if isinstance(value, list) else value for key, value in env_options.items()}
    return ensemble_env.vector_env(num_envs, cache, split=split, order=order, episode_length=episode_length, **options)


def episode_plan(n_stream: int, episode_length: int, num_steps: int) -> tuple[int, int]:
    """(episode length, rollouts per round): episodes end on rollout boundaries.

    An episode is ``min(episode_length, n_stream)`` questions cut to a multiple of ``num_steps`` (a round is
    then one episode of ``length / num_steps`` rollouts); a stream shorter than one rollout gives episodes of
    the largest divisor of ``num_steps`` that fits (several episodes per rollout, a round per rollout).

    >>> episode_plan(3000, 512, 64), episode_plan(3000, 500, 64), episode_plan(5, 512, 64)
    ((512, 8), (448, 7), (4, 1))
    """
    length = min(episode_length, n_stream)
    if length >= num_steps:
        length -= length % num_steps
        return length, length // num_steps
    divisor = max(d for d in range(1, length + 1) if num_steps % d == 0)
    return divisor, 1


@dataclass(frozen=True)
class Budget:
    """What a training budget runs: whole rollouts of ``num_envs x num_steps`` steps, at least the steps asked.

    >>> print(Budget.plan(TrainConfig(passes=5), 20).describe())  # doctest: +NORMALIZE_WHITESPACE
    budget: 5 passes x 20 train questions = 100 steps, rounded up to 1 rollout of 64 copies x 64 steps
    = 4,096 steps (204.8 passes)
    >>> print(Budget.plan(TrainConfig(total_steps=8192), 2560).describe())
    budget: 8,192 steps (--total-steps) = 2 rollouts of 64 copies x 64 steps (3.2 passes of 2,560 train questions)
    """

    questions: int
    """Questions in the training stream (the train split of the config's tasks)."""
    passes: float | None
    """The passes asked for (None: the budget was given as ``total_steps``)."""
    requested: int
    """Env steps asked for: ``total_steps``, else ``passes x questions`` rounded up."""
    num_envs: int
    num_steps: int
    iterations: int
    """Rollouts (and updates) run: ``requested / (num_envs x num_steps)`` rounded up, at least 1."""

    @classmethod
    def plan(cls, config: TrainConfig, questions: int) -> Budget:
        batch_size = config.num_envs * config.num_steps
        requested = config.total_steps or math.ceil(config.passes * questions)
        return cls(
            questions=questions,
            passes=None if config.total_steps else config.passes,
            requested=requested,
            num_envs=config.num_envs,
            num_steps=config.num_steps,
            iterations=max(1, math.ceil(requested / batch_size)),
        )

    @classmethod
    def of_cache(cls, config: TrainConfig, cache: LogitCache) -> Budget:
        """The budget of training with ``config`` on ``cache``'s train split (of the config's tasks)."""
        return cls.plan(config, int(cache.select("train", _tasks(config)).size))

    @property
    def batch_size(self) -> int:
        """Steps of one rollout, ``num_envs x num_steps``."""
        return self.num_envs * self.num_steps

    @property
    def steps(self) -> int:
        """Env steps run: ``iterations x batch_size``."""
        return self.iterations * self.batch_size

    def describe(self) -> str:
        """One line: the budget asked for and what runs, saying when it is rounded up to whole rollouts."""
        rollouts = f"{self.iterations:,} rollout{'' if self.iterations == 1 else 's'}"
        shape = f"{rollouts} of {self.num_envs} copies x {self.num_steps} steps"
        questions = f"{self.questions:,} train question{'' if self.questions == 1 else 's'}"
        ran = self.steps / self.questions if self.questions else float("nan")
        passes = f"{ran:.4g} pass{'' if ran == 1 else 'es'}"
        if self.passes is None:
            asked = f"{self.requested:,} steps (--total-steps)"
            passes += f" of {questions}"
        else:
            asked = f"{self.passes:g} pass{'' if self.passes == 1 else 'es'} x {questions} = {self.requested:,} steps"
        if self.steps == self.requested:
            return f"budget: {asked} = {shape} ({passes})"
        return f"budget: {asked}, rounded up to {shape} = {self.steps:,} steps ({passes})"


def round_seed(seed: int, round_index: int) -> int:
    """Seed of the environment reset that starts round ``round_index`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([seed, round_index]).generate_state(1)[0])


# -- collection ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Behaviour:
    """How each agent acts while collecting: sample (learning), its mode (frozen), or a scripted fuser.

    ``fusion="plurality"`` answers with the team's plurality vote (the two-stage schedule's first stage).
    """

    decider: str = "sample"
    fusion: str = "sample"


#: the info values :class:`StepRecord` keeps per step
RECORD_KEYS = ("correct", "team_size", "cost", "question", "answer")


@dataclass
class StepRecord:
    """What happened at each collected step, (T, B) numpy arrays, plus the episodes that ended.

    ``team`` (T, B, N) is the team that answered each step's question.
    """

    correct: np.ndarray
    team_size: np.ndarray
    cost: np.ndarray
    question: np.ndarray
    answer: np.ndarray
    team: np.ndarray
    episode_accuracy: list[float] = field(default_factory=list)
    episode_return: list[float] = field(default_factory=list)

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, n_models: int) -> StepRecord:
        shape = (num_steps, num_envs)
        values = [np.zeros(shape) for _ in RECORD_KEYS]
        return cls(*values, team=np.zeros((*shape, n_models), dtype=bool))


def collect(
    venv: EnsembleVectorEnv,
    agents: Agents,
    rollout: Rollout,
    obs: dict[str, np.ndarray],
    generator: torch.Generator,
    behaviour: Behaviour = Behaviour(),
) -> tuple[dict[str, np.ndarray], StepRecord]:
    """Fill ``rollout`` with ``rollout.num_steps`` steps from ``obs``; return the next observations and a record.

    Under ``torch.inference_mode``: each step prepares both observations once (stored for the PPO epochs),
    acts, and steps the environment; the critic's outputs at every collected state are computed after the
    loop in one batched pass. At a truncation the critic reads ``infos["final_state"]`` right away (the copy
    is reset in the same step); a termination needs no value.
    """
    num_steps, num_envs = rollout.num_steps, rollout.num_envs
    record = StepRecord.allocate(num_steps, num_envs, venv.n_models)
    plurality = PluralityVote.from_env(venv) if behaviour.fusion == "plurality" else None
    decider, fusion, critic = agents.decider, agents.fusion, agents.critic
    team_slice = venv.layout.decider["team_mask"]
    rollout.final_values.zero_()
    with torch.inference_mode():
        for t in range(num_steps):
            decider_inputs = rollout.inputs["decider"][t]
            decider_inputs.copy_(decider.prepare(torch.from_numpy(obs["decider"])))
            fusion_inputs = rollout.inputs["fusion"][t]
            fusion_inputs.copy_(fusion.prepare(torch.from_numpy(obs["fusion"])))
            rollout.states[t].copy_(torch.from_numpy(venv.state()))
            record.team[t] = obs["decider"][:, team_slice] > 0
            teams, log_probs, played = decider.act(decider_inputs, generator, behaviour.decider == "mode")
            rollout.actions["decider"][t] = teams
            rollout.log_probs[t, :, 0] = log_probs
            if plurality is not None:
                answers = plurality(obs["fusion"])
                rollout.actions["fusion"][t] = torch.from_numpy(answers)
                rollout.log_probs[t, :, 1] = 0.0
            else:
                chosen, log_probs, _ = fusion.act(fusion_inputs, generator, behaviour.fusion == "mode")
                rollout.actions["fusion"][t] = chosen
                rollout.log_probs[t, :, 1] = log_probs
                answers = chosen.numpy()
            obs, rewards, terminations, truncations, infos = venv.step(
                {"decider": played.numpy().astype(np.int8), "fusion": answers}
            )
            terminated = terminations["fusion"]
            done = terminated | truncations["fusion"]
            rollout.rewards[t] = rewards["fusion"]
            rollout.dones[t] = done
            rollout.terminated[t] = terminated
            step_infos = infos["fusion"]
            if done.any():
                truncated = done & ~terminated
                if truncated.any():
                    final_states = torch.from_numpy(np.asarray(infos["final_state"], dtype=np.float32)[truncated])
                    rollout.final_values[t, torch.from_numpy(truncated)] = critic(final_states)
                final = infos["final_info"]["fusion"]
                record.episode_accuracy.extend(np.asarray(final["accuracy"])[done].tolist())
                record.episode_return.extend(np.asarray(final["episode_return"])[done].tolist())
                step_infos = {key: np.where(done, final[key], step_infos[key]) for key in RECORD_KEYS}
            for key in RECORD_KEYS:
                getattr(record, key)[t] = step_infos[key]
        states = rollout.states.view(num_steps * num_envs, -1)
        rollout.values.copy_(critic(states).view(num_steps, num_envs, -1))
    return obs, record


def advantages_and_returns(
    agents: Agents, rollout: Rollout, next_state: np.ndarray, config: TrainConfig
) -> tuple[Tensor, Tensor]:
    """Per-agent advantages (T, B, 2) and the critic's targets (T, B, H) of a collected rollout.

    See :func:`~ensemble_mappo.ppo.agent_targets`: the decider's stream is r_{t+1} with ``gamma`` and
    ``gae_lambda``, the fusion agent's r_t with ``fusion_gamma`` and ``fusion_gae_lambda``; the state after
    the rollout (``next_state``) and the truncated episodes' final states bootstrap them.
    """
    with torch.no_grad():
        norm = agents.value_norm
        values = norm.denormalize(rollout.values)
        last_values = agents.value(torch.from_numpy(next_state))
        truncated = torch.from_numpy(rollout.dones & ~rollout.terminated).unsqueeze(-1)
        final_values = torch.where(truncated, norm.denormalize(rollout.final_values), 0.0)
        return agent_targets(
            torch.from_numpy(rollout.rewards),
            values,
            last_values,
            torch.from_numpy(rollout.dones),
            final_values,
            (config.gamma, config.fusion_gamma),
            (config.gae_lambda, config.fusion_gae_lambda),
        )


def update(
    agents: Agents,
    optimizer: FlatAdam,
    rollout: Rollout,
    next_state: np.ndarray,
    config: TrainConfig,
    generator: torch.Generator,
    learners: tuple[str, ...] = AGENTS,
) -> dict[str, float]:
    """Advantages, then PPO epochs for the actors named in ``learners`` and the critic."""
    advantages, returns = advantages_and_returns(agents, rollout, next_state, config)
    actors: dict[str, Actor] = {name: getattr(agents, name) for name in learners}
    return ppo_update(
        actors,
        agents.critic,
        agents.value_norm,
        optimizer,
        rollout,
        advantages,
        returns,
        config,
        generator,
    )


# -- logging ------------------------------------------------------------------------------------------------
class ProgressLog:
    """``progress.csv`` (one row per update; fixed columns) and, optionally, TensorBoard."""

    def __init__(self, path: Path, columns: list[str], resume_after: int | None, tensorboard: bool) -> None:
        self.path, self.columns = path, columns
        kept: list[dict[str, str]] = []
        if resume_after is not None and path.exists():
            with path.open(newline="") as file:
                kept = [row for row in csv.DictReader(file) if int(row["iteration"]) <= resume_after]
        # the kept history is rewritten atomically (a kill here loses nothing), then appended to
        text = io.StringIO()
        header = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
        header.writeheader()
        header.writerows(kept)
        atomic_write(path, lambda file: file.write(text.getvalue().encode("utf-8")))
        self.file = path.open("a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
        self.tensorboard: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                print("tensorboard is not installed: logging to progress.csv only (pip install tensorboard)")
            else:
                self.tensorboard = SummaryWriter(str(path.parent))

    def write(self, row: dict[str, float]) -> None:
        self.writer.writerow({key: _csv_value(value) for key, value in row.items()})
        self.file.flush()
        if self.tensorboard is not None:
            for key, value in row.items():
                if key not in ("iteration", "global_step") and math.isfinite(value):
                    self.tensorboard.add_scalar(key, value, int(row["global_step"]))

    def close(self) -> None:
        self.file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()


def _csv_value(value: float) -> str:
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 2**53):
        return str(int(value))
    return "" if not math.isfinite(value) else f"{value:.6g}"


def progress_columns(models: tuple[str, ...]) -> list[str]:
    """The columns of ``progress.csv``, in order."""
    columns = ["iteration", "global_step", "time/elapsed", "time/sps", "charts/learning_rate", "charts/stage"]
    columns += ["env/reward", "env/accuracy", "env/team_size", "env/cost", "env/episode_accuracy"]
    columns += ["env/episode_return", *(f"env/select/{model}" for model in models)]
    columns += ["losses/value_loss", *(f"losses/{head}_value_loss" for head in VALUE_HEADS), "losses/critic_grad_norm"]
    columns += [f"losses/{agent}_{key}" for agent in AGENTS for key in AGENT_LOSS_KEYS]
    return columns


def _rollout_row(record: StepRecord, rollout: Rollout, models: tuple[str, ...]) -> dict[str, float]:
    selection = record.team.mean(axis=(0, 1)).tolist()
    nan = float("nan")
    row = {
        "env/reward": float(rollout.rewards.mean(dtype=np.float64)),
        "env/accuracy": float(record.correct.mean()),
        "env/team_size": float(record.team_size.mean()),
        "env/cost": float(record.cost.mean()),
        "env/episode_accuracy": float(np.mean(record.episode_accuracy)) if record.episode_accuracy else nan,
        "env/episode_return": float(np.mean(record.episode_return)) if record.episode_return else nan,
    }
    row.update({f"env/select/{model}": value for model, value in zip(models, selection, strict=True)})
    return row


# -- the run ------------------------------------------------------------------------------------------------
def _cache_description(cache: LogitCache, cache_path: str | None) -> dict[str, Any]:
    return {
        "cache": cache_path,
        "models": list(cache.models),
        "tasks": list(cache.task_names or ()),
        "n_questions": cache.n_questions,
    }


def load_run(run_dir: str | Path) -> tuple[TrainConfig, dict[str, Any]]:
    """The config and the run description (cache path, models, tasks) of a run directory."""
    path = Path(run_dir) / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a directory written by `ensemble-env train`?")
    data = json.loads(path.read_text(encoding="utf-8"))
    saved = dict(data["config"])
    saved.setdefault("decider_policy", "bernoulli")  # runs written before the field had the Bernoulli decider
    return config_from_dict(saved, where=str(path), merge_env=False), data["run"]


def train(
    config: TrainConfig,
    cache: LogitCache,
    out_dir: str | Path,
    *,
    cache_path: str | None = None,
    resume: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
) -> dict[str, float]:
    """Train MAPPO on the train split of ``cache``; write logs and checkpoints to ``out_dir``.

    Parameters
    ----------
    config
        The hyperparameters.
    cache
        The loaded logit cache; ``cache_path`` (None: the embedded default) is recorded for ``evaluate``.
    out_dir
        The run directory (created).
    resume
        Continue the run saved in ``out_dir`` (its config must equal ``config``).
    progress
        Show a progress bar.
    stop_after
        Stop after this many updates in all (a checkpoint is written there), e.g. to test resumption.

    Returns the last logged row (``env/accuracy``, ``losses/value_loss``, ...).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(config.threads)
    budget = Budget.of_cache(config, cache)
    n_stream = budget.questions
    episode_length, rounds = episode_plan(n_stream, config.episode_length, config.num_steps)
    options = env_options(config, cache)
    venv = make_env(
        cache, options, num_envs=config.num_envs, split="train", order=config.order, episode_length=episode_length
    )
    batch_size, num_iterations = budget.batch_size, budget.iterations
    stage_two_from = round(config.stage_one_fraction * num_iterations) if config.mode == "two-stage" else 0
    models = tuple(cache.models)

    torch.manual_seed(config.seed)
    agents = Agents.build(venv, config.hidden_size, config.decider_initial_prob, config.critic, config.decider_policy)
    optimizer = make_optimizer(agents, config)
    generator = torch.Generator().manual_seed(config.seed)
    rollout = agents.rollout(venv, config.num_steps)

    start = 0
    obs: dict[str, np.ndarray] = {}
    if resume:
        checkpoint = load_checkpoint(out / CHECKPOINT_NAME)
        if checkpoint["config"] != config.to_dict():
            raise ValueError(f"{out}: the checkpoint was written with a different config than {out / CONFIG_NAME}")
        agents.load_state_dict(checkpoint["networks"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        generator.set_state(checkpoint["generator"])
        start = int(checkpoint["iteration"])
        venv.set_state(unpack_arrays(checkpoint["env"], f"{out / CHECKPOINT_NAME}: env"))
        obs = {agent: array.copy() for agent, array in venv.observations.items()}
    else:
        description = {"config": config.to_dict(), "run": _cache_description(cache, cache_path)}
        (out / CONFIG_NAME).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")

    def save(iteration: int) -> None:
        payload = {
            "config": config.to_dict(),
            "iteration": iteration,
            "global_step": iteration * batch_size,
            "num_iterations": num_iterations,
            "complete": iteration >= num_iterations,
            "models": list(models),
            "networks": agents.state_dict(),
            "optimizer": optimizer.state_dict(),
            "generator": generator.get_state(),
            "env": pack_arrays(venv.get_state()),
        }
        save_checkpoint(out / CHECKPOINT_NAME, payload)

    log = ProgressLog(out / PROGRESS_NAME, progress_columns(models), start if resume else None, config.tensorboard)
    bar = _progress_bar(num_iterations * batch_size, start * batch_size, progress)
    end = num_iterations if stop_after is None else min(num_iterations, stop_after)
    row: dict[str, float] = {}
    started = time.perf_counter()
    last_save = start
    try:
        for iteration in range(start, end):
            if iteration % rounds == 0:  # a new round: every copy starts an episode from a seeded reset
                obs, _ = venv.reset(seed=round_seed(config.seed, iteration // rounds))
            learning_rate = config.learning_rate * (1.0 - iteration / num_iterations if config.anneal_lr else 1.0)
            optimizer.learning_rate = learning_rate
            stage_two = config.mode == "two-stage" and iteration >= stage_two_from
            behaviour, learners = schedule(config.mode, stage_two)

            obs, record = collect(venv, agents, rollout, obs, generator, behaviour)
            losses = update(agents, optimizer, rollout, venv.state(), config, generator, learners)

            elapsed = time.perf_counter() - started
            done_steps = (iteration + 1 - start) * batch_size
            row = {
                "iteration": iteration + 1,
                "global_step": (iteration + 1) * batch_size,
                "time/elapsed": elapsed,
                "time/sps": done_steps / elapsed,
                "charts/learning_rate": learning_rate,
                "charts/stage": 2.0 if stage_two else 1.0,
                **_rollout_row(record, rollout, models),
                **losses,
            }
            log.write(row)
            bar.update(batch_size)
            bar.set_postfix(
                sps=f"{row['time/sps']:.0f}",
                reward=f"{row['env/reward']:+.3f}",
                acc=f"{row['env/accuracy']:.3f}",
                team=f"{row['env/team_size']:.2f}",
            )
            if iteration + 1 - last_save >= config.checkpoint_every or iteration + 1 == end:
                save(iteration + 1)
                last_save = iteration + 1
    finally:
        bar.close()
        log.close()
    return row


def schedule(mode: str, stage_two: bool) -> tuple[Behaviour, tuple[str, ...]]:
    """How the agents act and which actors learn: joint, or the two-stage schedule's current stage.

    >>> schedule("two-stage", stage_two=False)
    (Behaviour(decider='sample', fusion='plurality'), ('decider',))
    """
    if mode == "joint":
        return Behaviour(), ("decider", "fusion")
    if not stage_two:  # stage one: the decider learns; the plurality vote of the team answers
        return Behaviour(fusion="plurality"), ("decider",)
    return Behaviour(decider="mode"), ("fusion",)  # stage two: the decider is frozen, the fusion agent learns


def _tasks(config: TrainConfig) -> tuple[str, ...] | None:
    tasks = config.env.get("tasks")
    return None if tasks is None else tuple(tasks)


def _progress_bar(total: int, initial: int, enabled: bool) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is part of the mappo extra
        return _NoBar()
    return tqdm(total=total, initial=initial, unit="step", unit_scale=True, disable=not enabled, dynamic_ncols=True)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **values: Any) -> None:
        pass

    def close(self) -> None:
        pass
