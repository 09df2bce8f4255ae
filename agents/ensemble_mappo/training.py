"""MAPPO on the ensemble game: the training loop (:func:`train`) and the run directory it writes.

:func:`train` reads like CleanRL's ``ppo.py``. After the setup (the environment's copies, the networks, the
optimizer, the rollout storage), each iteration of its loop does, in this order:

1. collect a rollout: ``num_steps`` steps of ``num_envs`` copies into the preallocated storage
   (:func:`~ensemble_mappo.collection.collect`);
2. advantages: each agent's, from its own reward stream, and the critic's targets (:func:`advantages_and_returns`);
3. epochs of minibatch updates for the learning actors and the critic (:func:`~ensemble_mappo.ppo.ppo_update`:
   per epoch one permutation of the rollout, per minibatch the losses, ``backward`` and a clipped Adam step),
   which returns named statistics (:class:`~ensemble_mappo.ppo.UpdateStats`);
4. log the update (:class:`~ensemble_mappo.progress.RunLog`: ``progress.csv``, TensorBoard, the progress bar)
   and, every ``checkpoint_every`` updates and at the end, write a checkpoint.

The pieces live in their own modules and are tested there: :mod:`ensemble_mappo.agents` (the networks
together, the optimizer's construction), :mod:`ensemble_mappo.collection`, :mod:`ensemble_mappo.ppo` (credit,
GAE, the losses, the update), :mod:`ensemble_mappo.optim` and :mod:`ensemble_mappo.progress` (the budget, the
log, the bar); docs/mappo.md ("How the code reads") has the map.

Episodes and exact resumption. Every copy plays episodes of the same length, cut so that they end on rollout
boundaries; at the start of every *round* of episodes the trainer resets all copies with a seed drawn from
(``seed``, round number). A checkpoint stores the environment's snapshot
(:meth:`~ensemble_env.game.engine.EnsembleVectorEnv.get_state`, see :func:`~ensemble_mappo.checkpoint.pack_arrays`);
resuming restores it with ``set_state``. Together with the networks, optimizers, value normaliser and the
sampling generator, a resumed run produces the same numbers as an uninterrupted one.

Run directory: ``config.json`` (the config, the cache and the pool), ``progress.csv`` (one row per update,
namespaced columns such as ``env/accuracy`` and ``losses/value_loss``), ``checkpoint.pt`` and, with
``tensorboard = true``, TensorBoard event files; ``run.lock`` while :func:`train` runs (it holds the folder's
lock for the whole run). :mod:`ensemble_mappo.runs` writes and reads them, each file checked whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

import ensemble_env
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_mappo.agents import Agents, make_optimizer
from ensemble_mappo.checkpoint import CHECKPOINT_NAME, pack_arrays, save_checkpoint
from ensemble_mappo.collection import Behaviour, StepRecord, collect
from ensemble_mappo.config import TrainConfig
from ensemble_mappo.optim import Optimizer
from ensemble_mappo.ppo import AGENTS, Rollout, UpdateStats, agent_targets, ppo_update
from ensemble_mappo.progress import PROGRESS_NAME, Budget, RunLog, check_rollout_size
from ensemble_mappo.runs import CONFIG_NAME, holding_run_lock, load_run, restore_run, write_config
from ensemble_mappo.start import start_decider

__all__ = [
    "CONFIG_NAME",
    "PROGRESS_NAME",
    "Agents",
    "Behaviour",
    "Budget",
    "StepRecord",
    "advantages_and_returns",
    "collect",
    "env_options",
    "episode_plan",
    "load_run",
    "make_env",
    "make_optimizer",
    "round_seed",
    "schedule",
    "start_networks",
    "train",
    "update",
]


# -- the loop -----------------------------------------------------------------------------------------------
@holding_run_lock("out_dir")  # one writer per run directory: a second train there is refused, naming the first
def train(
    config: TrainConfig,
    cache: LogitCache,
    out_dir: str | Path,
    *,
    cache_path: str | None = None,
    resume: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
    optimizer: str = "fused",
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
    optimizer
        "fused" (:class:`~ensemble_mappo.optim.FlatAdam`, the default) or "adam" (the plain
        ``torch.optim.Adam``, :class:`~ensemble_mappo.optim.TorchAdam`): the same update up to float
        rounding, and the same checkpoint format (see :func:`~ensemble_mappo.agents.make_optimizer`).

    Returns the last logged row (``env/accuracy``, ``losses/value_loss``, ...).
    """
    # -- setup: the environment's copies, the networks, the optimizer, the rollout storage
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # a resumed run loads its networks from its checkpoint; one stopped before its first checkpoint starts over
    budget, rounds, venv, agents = _setup(config, cache, fit=not (resume and os.path.lexists(out / CHECKPOINT_NAME)))
    adam = make_optimizer(agents, config, optimizer)
    generator = torch.Generator().manual_seed(config.seed)
    rollout = agents.rollout(venv, config.num_steps)
    models = tuple(cache.models)
    if resume:  # every file checked first (ensemble_mappo.runs); a run stopped before its first checkpoint: 0
        start = restore_run(out, config, budget.iterations, agents, adam, generator, venv)
        obs = {agent: array.copy() for agent, array in venv.observations.items()} if start else {}
    else:
        start, obs = 0, {}
        write_config(out, config, cache, cache_path)
    end = budget.iterations if stop_after is None else min(budget.iterations, stop_after)
    stage_two_from = round(config.stage_one_fraction * budget.iterations) if config.mode == "two-stage" else 0

    row: dict[str, float] = {}
    last_save = start
    with RunLog(
        out, budget, models, start=start, resumed=resume, progress=progress, tensorboard=config.tensorboard
    ) as log:
        for iteration in range(start, end):
            # -- the schedule: a seeded reset when a round starts, the annealed learning rate, the stage
            if iteration % rounds == 0:
                obs, _ = venv.reset(seed=round_seed(config.seed, iteration // rounds))
            learning_rate = config.learning_rate * (1.0 - iteration / budget.iterations if config.anneal_lr else 1.0)
            adam.learning_rate = learning_rate
            stage_two = config.mode == "two-stage" and iteration >= stage_two_from
            behaviour, learners = schedule(config.mode, stage_two)

            # 1. collect a rollout
            obs, record = collect(venv, agents, rollout, obs, generator, behaviour)
            # 2. advantages (per agent) and the critic's targets, bootstrapped from the state after the rollout
            advantages, returns = advantages_and_returns(agents, rollout, venv.state(), config)
            # 3. epochs of minibatch updates: the learning actors and the critic
            actors = {name: getattr(agents, name) for name in learners}
            stats = ppo_update(
                actors, agents.critic, agents.value_norm, adam, rollout, advantages, returns, config, generator
            )
            # 4. log, and checkpoint every checkpoint_every updates and at the end
            row = log.write(
                iteration + 1,
                learning_rate=learning_rate,
                stage=2 if stage_two else 1,
                record=record,
                rewards=rollout.rewards,
                stats=stats,
            )
            if iteration + 1 - last_save >= config.checkpoint_every or iteration + 1 == end:
                payload = _checkpoint(iteration + 1, budget, config, models, agents, adam, generator, venv)
                save_checkpoint(out / CHECKPOINT_NAME, payload)
                last_save = iteration + 1
    return row


def _setup(config: TrainConfig, cache: LogitCache, *, fit: bool) -> tuple[Budget, int, EnsembleVectorEnv, Agents]:
    """A run's budget, rounds of episodes, training environment and networks at update 0 (the decider given its
    start policy, fitted to the offline start when ``fit``): the same objects, from the same random draws, for
    :func:`train` and :func:`start_networks`."""
    torch.set_num_threads(config.threads)
    budget = Budget.of_cache(config, cache)
    episode_length, rounds = episode_plan(budget.questions, config.episode_length, config.num_steps)
    options = env_options(config, cache)
    venv = make_env(
        cache, options, num_envs=config.num_envs, split="train", order=config.order, episode_length=episode_length
    )
    torch.manual_seed(config.seed)
    agents = Agents.build(venv, config.hidden_size, config.decider_initial_prob, config.critic, config.decider_policy)
    check_rollout_size(agents, venv, config.num_steps)  # before any rollout storage is allocated
    start_decider(agents, venv, config, fit=fit, rollouts=rounds)  # the size prior, or the offline start
    return budget, rounds, venv, agents


def start_networks(config: TrainConfig, cache: LogitCache) -> dict[str, dict[str, Tensor]]:
    """The networks a run of ``config`` on ``cache`` starts PPO from (update 0, ``Agents.state_dict()``): the
    decider at its start policy (the offline start fitted to the cache's train outcomes, or the size prior) and
    the fusion agent at the mean vote. Exactly what :func:`train` builds before its first update; nothing is
    written. The benchmark's checkpoint choice weighs the trained checkpoints against it."""
    return _setup(config, cache, fit=True)[3].state_dict()


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


def advantages_and_returns(
    agents: Agents, rollout: Rollout, next_state: np.ndarray, config: TrainConfig
) -> tuple[Tensor, Tensor]:
    """Per-agent advantages (T, B, 2) and the critic's targets (T, B, H) of a collected rollout.

    See :func:`~ensemble_mappo.ppo.agent_targets`: the decider's stream is r_{t+1} with ``gamma`` and
    ``gae_lambda`` (r credited as ``config.decider_credit`` says), the fusion agent's r_t with ``fusion_gamma``
    and ``fusion_gae_lambda``; the state after the rollout (``next_state``) and the truncated episodes' final
    states bootstrap them.
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
            torch.from_numpy(rollout.credit(config.decider_credit)),
        )


def update(
    agents: Agents,
    optimizer: Optimizer,
    rollout: Rollout,
    next_state: np.ndarray,
    config: TrainConfig,
    generator: torch.Generator,
    learners: tuple[str, ...] = AGENTS,
) -> UpdateStats:
    """Steps 2 and 3 of an iteration (advantages, then the PPO epochs) for the actors named in ``learners``
    and the critic; the online evaluation protocol's update."""
    advantages, returns = advantages_and_returns(agents, rollout, next_state, config)
    actors = {name: getattr(agents, name) for name in learners}
    return ppo_update(
        actors, agents.critic, agents.value_norm, optimizer, rollout, advantages, returns, config, generator
    )


# -- the environment ----------------------------------------------------------------------------------------
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


def round_seed(seed: int, round_index: int) -> int:
    """Seed of the environment reset that starts round ``round_index`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([seed, round_index]).generate_state(1)[0])


# -- the run directory --------------------------------------------------------------------------------------
def _checkpoint(
    iteration: int,
    budget: Budget,
    config: TrainConfig,
    models: tuple[str, ...],
    agents: Agents,
    optimizer: Optimizer,
    generator: torch.Generator,
    venv: EnsembleVectorEnv,
) -> dict[str, Any]:
    """What ``checkpoint.pt`` holds after ``iteration`` updates: plain data (``torch.load(weights_only=True)``)."""
    return {
        "config": config.to_dict(),
        "iteration": iteration,
        "global_step": iteration * budget.batch_size,
        "num_iterations": budget.iterations,
        "complete": iteration >= budget.iterations,
        "models": list(models),
        "networks": agents.state_dict(),
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "env": pack_arrays(venv.get_state()),
    }
