"""The one training loop (:func:`train`) every algorithm of :data:`ensemble_mappo.algorithms.ALGORITHMS` runs.

:func:`train` reads like CleanRL's ``ppo.py``. After the setup (the environment's copies, the algorithm's learner
and its start policy, the optimizer, the rollout storage), each iteration of its loop does, in this order:

1. collect a rollout: ``num_steps`` steps of ``num_envs`` copies into the preallocated storage
   (:meth:`~ensemble_mappo.frame.Learner.collect`);
2. advantages, from the algorithm's own credit (:meth:`~ensemble_mappo.frame.Learner.batch`), and
3. epochs of minibatch updates of the networks that learn (:func:`~ensemble_mappo.frame.update`: per epoch one
   permutation of the rollout, per minibatch the algorithm's loss, ``backward`` and a clipped Adam step), which
   return the log's values by name;
4. log the update (:class:`~ensemble_mappo.progress.RunLog`: ``progress.csv``, the other ``loggers``: TensorBoard,
   the progress bar),
   keep the networks at the ``checkpoints`` stops, and every ``checkpoint_every`` updates and at the end write the
   resumable checkpoint.

When the budget is spent, the kept checkpoints play the validation split and ``selection`` chooses the run's policy
(:func:`ensemble_mappo.evaluation.choose`); ``evaluate`` plays it.

Episodes and exact resumption. With ``Learner.seeded_rounds`` (MAPPO), every copy plays episodes of the same
length, cut so that they end on rollout boundaries, and at the start of every *round* of episodes the trainer resets
all copies with a seed drawn from (``seed``, round number); otherwise (RLAE) the copies are reset once, seeded, and
restart their own episodes. A checkpoint stores the environment's snapshot
(:meth:`~ensemble_env.game.engine.EnsembleVectorEnv.get_state`, see :func:`~ensemble_mappo.checkpoint.pack_arrays`);
resuming restores it with ``set_state``. Together with the networks, optimizer, the sampling generators and the
value normaliser, a resumed run produces the same numbers as an uninterrupted one.

The run directory and its files: :mod:`ensemble_mappo.runs`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ensemble_env import files
from ensemble_env.cache.augment import permuted_copies
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.run_lock import holding_run_lock
from ensemble_mappo import algorithms
from ensemble_mappo.budget import Budget, check_rollout_size
from ensemble_mappo.checkpoint import pack_arrays, read_checkpoint, restore_run, save_checkpoint
from ensemble_mappo.config import LearnerConfig
from ensemble_mappo.evaluation import DEPLOYED, candidates, evaluate_candidates
from ensemble_mappo.frame import Learner, make_env, make_optimizer, update
from ensemble_mappo.loggers import check_loggers, tensorboard_folder
from ensemble_mappo.optim import Optimizer
from ensemble_mappo.progress import RunLog
from ensemble_mappo.runs import CANDIDATES_DIR, CHECKPOINT_NAME, SELECTION_NAME, read_config, write_config
from ensemble_mappo.selection import select, stops

__all__ = [
    "Setup",
    "check_run",
    "choose",
    "episode_plan",
    "round_seed",
    "run_budget",
    "setup",
    "start_networks",
    "train",
]


# -- the loop -----------------------------------------------------------------------------------------------
@holding_run_lock("out_dir")  # one writer per run directory: a second train there is refused, naming the first
def train(
    config: LearnerConfig,
    cache: LogitCache,
    out_dir: str | Path,
    *,
    cache_path: str | None = None,
    resume: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
    optimizer: str = "fused",
    loggers: Sequence[str] = ("csv",),
) -> dict[str, float]:
    """Train the algorithm ``config`` configures (a config of :data:`~ensemble_mappo.algorithms.ALGORITHMS`) on the
    train split of ``cache``; write logs and checkpoints to ``out_dir``.

    Parameters
    ----------
    config
        The hyperparameters: :class:`~ensemble_mappo.config.TrainConfig` (MAPPO, IPPO) or
        :class:`~ensemble_mappo.rlae_config.RLAEConfig` (RLAE), or another registered algorithm's.
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
        rounding, and the same checkpoint format (see :func:`~ensemble_mappo.frame.make_optimizer`).
    loggers
        Where each update is logged (:data:`~ensemble_mappo.config.LOGGERS`): ``progress.csv`` always;
        ``"tensorboard"`` adds TensorBoard event files in ``out_dir/tensorboard/``
        (:class:`~ensemble_mappo.loggers.TensorBoardLog`). Not part of the config: a resume may add or drop one. An
        unknown name, a missing package or a ``tensorboard`` that is not a folder stops the run before it starts.

    Returns the last logged row (``env/accuracy``, ``losses/value_loss``, ...).
    """
    # -- setup: the environment's copies, the learner and its start, the optimizer, the rollout storage
    out = Path(out_dir)
    if "tensorboard" in check_loggers(loggers):  # a logger that cannot write stops the run before it starts
        tensorboard_folder(out)
    files.make_folder(out)
    # a resumed run loads its networks from its checkpoint; one stopped before its first checkpoint starts over
    run = setup(config, cache, fit=not (resume and os.path.lexists(out / CHECKPOINT_NAME)))
    budget, venv, learner = run.budget, run.venv, run.learner
    adam = make_optimizer(learner, config, optimizer)
    generator = torch.Generator().manual_seed(config.seed)
    storage = learner.storage(venv, config.num_steps)
    keep = stops(budget.iterations, config.checkpoints)
    if resume:  # every file checked first (ensemble_mappo.checkpoint); a run stopped before its first checkpoint: 0
        start = restore_run(out, config, budget.iterations, learner, adam, generator, venv, cache)
    else:
        start = 0
        write_config(out, config, cache, cache_path)
    end = budget.iterations if stop_after is None else min(budget.iterations, stop_after)

    row: dict[str, float] = {}
    last_save = start
    log = RunLog(
        out,
        budget,
        venv.cache.models,
        algorithm=config.algorithm,
        start=start,
        resumed=resume,
        progress=progress,
        loggers=loggers,
    )
    with log:
        for iteration in range(start, end):
            # -- the schedule: a seeded reset when a round of episodes starts, the learning rate, the phase
            if iteration == 0 or (run.rounds and iteration % run.rounds == 0):  # a resumed run stands where it stopped
                venv.reset(seed=round_seed(config.seed, iteration // run.rounds if run.rounds else 0))
            if iteration == 0 and keep:
                _save(out / CANDIDATES_DIR / "update_0.pt", 0, run, adam, generator)  # the start policy
            learning_rate = config.learning_rate * (1.0 - iteration / budget.iterations if config.anneal_lr else 1.0)
            adam.learning_rate = learning_rate
            phase = learner.phase(iteration, budget.iterations)

            # 1. collect a rollout
            record = learner.collect(venv, storage, generator, phase.behaviour)
            # 2.-3. advantages (bootstrapped from the state after the rollout), then epochs of minibatch updates
            losses = update(learner, adam, storage, venv.state(), config, generator, phase.learners)
            # 4. log; keep the networks at the stops; the resumable checkpoint every checkpoint_every and at the end
            row = log.write(
                iteration + 1,
                learning_rate=learning_rate,
                stage=phase.stage,
                record=record,
                rewards=storage.rewards,
                losses=losses,
            )
            if iteration + 1 in keep:
                _save(out / CANDIDATES_DIR / f"update_{iteration + 1}.pt", iteration + 1, run, adam, generator)
            if iteration + 1 - last_save >= config.checkpoint_every or iteration + 1 == end:
                _save(out / CHECKPOINT_NAME, iteration + 1, run, adam, generator)
                last_save = iteration + 1
        if end == budget.iterations and keep:
            # the kept checkpoints play validation; selection.json names the run's policy
            log.selection(choose(out, cache))
    return row


@dataclass
class Setup:
    """What a run starts from: its budget, its rounds of episodes (0: the copies restart their own episodes), its
    training environment and its learner (the networks at update 0)."""

    config: LearnerConfig
    budget: Budget
    rounds: int
    venv: EnsembleVectorEnv
    learner: Learner


def training_cache(config: LearnerConfig, cache: LogitCache, options: dict[str, Any]) -> LogitCache:
    """The cache a run trains on: ``cache`` with ``config.model_permutations`` model-permuted copies of each training
    task appended (:func:`ensemble_env.cache.augment.permuted_copies`, seeded by the run's seed; every question of
    ``cache`` keeps its index, so evaluation plays ``cache`` itself). ValueError for copies in a game that shows the
    task (their task one-hot would be new columns) or is not played in task episodes."""
    copies = getattr(config, "model_permutations", 0)
    if not copies:
        return cache
    shown = (*tuple(options.get("decider_extras") or ()), *tuple(options.get("fusion_extras") or ()))
    if options.get("episodes") != "task" or "task" in shown:
        raise ValueError(
            f"model_permutations={copies}: permuted copies of the training tasks are for tasks never seen (episodes "
            "of one task, no task one-hot: --protocol unseen-tasks)"
        )
    return permuted_copies(cache, copies, seed=config.seed)


def _plan(config: LearnerConfig, cache: LogitCache) -> tuple[type[Learner], dict[str, Any], LogitCache, Budget]:
    """(the learner's class, the game's options, the cache it trains on, its budget): the one plan of a run."""
    kind = algorithms.learner_of(config)
    options = kind.env_options(config, cache)
    cache = training_cache(config, cache, options)
    return kind, options, cache, Budget.of_cache(config, cache)


def run_budget(config: LearnerConfig, cache: LogitCache) -> Budget:
    """The budget a run of ``config`` on ``cache`` runs: over the stream it trains on, model-permuted copies
    included (what :func:`train` runs and ``train``'s budget line prints)."""
    return _plan(config, cache)[3]


def check_run(config: LearnerConfig, cache: LogitCache) -> Budget:
    """Check ``config`` against the game it will train on, writing nothing: the game is built from its options and
    ``cache``, the learner for it (an option it cannot play, a record it lacks, is refused here), the rollout's size
    measured; no start is fitted. Returns the run's budget (:func:`run_budget`). The ``train`` command calls it before
    the run directory is made."""
    return setup(config, cache, fit=False, start=False).budget


def setup(
    config: LearnerConfig,
    cache: LogitCache,
    *,
    fit: bool,
    start_questions: np.ndarray | None = None,
    start: bool = True,
) -> Setup:
    """A run's budget, episodes, training environment and learner at update 0 (given its start policy, fitted to
    the cache's train outcomes when ``fit``, or to those of ``start_questions``; none without ``start``): the same
    objects, from the same random draws, for :func:`train`, :func:`start_networks` and :func:`check_run`."""
    torch.set_num_threads(config.threads)
    kind, options, cache, budget = _plan(config, cache)
    if options.get("episodes") == "task":  # an episode is one task (or a window of it); copies deal themselves tasks
        questions = cache.select("train", tasks=options.get("tasks"))
        largest = int(np.bincount(np.asarray(cache.tasks)[questions]).max())
        episode_length, rounds = min(config.episode_length, largest), 0
    elif kind.seeded_rounds:
        episode_length, rounds = episode_plan(budget.questions, config.episode_length, config.num_steps)
    else:
        episode_length, rounds = min(config.episode_length, budget.questions), 0
    venv = make_env(
        cache, options, num_envs=config.num_envs, split="train", order=config.order, episode_length=episode_length
    )
    torch.manual_seed(config.seed)
    learner = kind(config, venv)
    check_rollout_size(learner, venv, config.num_steps)  # before any rollout storage is allocated
    if start:
        learner.start(venv, fit=fit, rollouts=max(rounds, 1), questions=start_questions)
    return Setup(config, budget, rounds, venv, learner)


def start_networks(config: LearnerConfig, cache: LogitCache) -> dict[str, dict[str, Tensor]]:
    """The networks a run of ``config`` on ``cache`` starts PPO from (update 0, :meth:`Learner.state_dict`): for
    MAPPO the decider at its start policy (the offline start fitted to the cache's train outcomes, or the size prior)
    and the fusion agent at the mean vote. Exactly what :func:`train` builds before its first update; nothing is
    written."""
    return setup(config, cache, fit=True).learner.state_dict()


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


# -- the policy the run deploys ------------------------------------------------------------------------------
def choose(run_dir: str | Path, cache: LogitCache) -> dict[str, Any]:
    """Choose the run's policy among its kept checkpoints (the start and ``checkpoints`` evenly spaced ones): each
    plays the validation split, frozen, and the config's ``selection`` rule (:func:`ensemble_mappo.selection.select`)
    reads their per-question rewards; on a cache without a validation split the last one is kept, and said so.

    When the start is chosen and the algorithm fits its start to labelled questions (MAPPO's offline start), the
    deployed policy is the start refitted on train + validation (``checkpoints/deployed.pt``): the settings are
    chosen, so every labelled question informs the table the start plays. The choice itself read the validation
    rewards of the start fitted on train alone, so the safe rule's guarantee is about that start; the refitted one
    is the same estimator on more questions. (Cross-fitting the refitted start's validation rewards was tried and
    dropped: with a few validation questions per task, a held-out question is exactly the one missing from the fit
    that would have chosen the model it favours, so the cross-fitted score of a per-task argmax is biased low: on
    bbh5 cut to 40 questions per task it scored -0.14 to -0.17 against -0.066 for the start fitted on train.) Writes
    ``selection.json`` and returns it. Only train and validation labels are read."""
    run = read_config(run_dir)
    kept = [read_checkpoint(path, run) for _, path in candidates(run_dir)]
    if not kept:
        raise ValueError(f"{run_dir}: the run kept no checkpoint to choose from (checkpoints = 0)")
    config = run.config
    tasks = config.env.get("tasks")
    try:
        validation = cache.select("validation", tasks=tasks)
    except ValueError:  # no validation question: nothing to choose on
        last = kept[-1].iteration
        chosen = {
            "rule": "last (no validation split)",
            "update": last,
            "checkpoint": f"update_{last}",
            "candidates": [],
        }
    else:
        played = evaluate_candidates(
            [c.networks for c in kept], config, cache, split="validation", seed=config.seed,
            sources=[str(c.path) for c in kept],
        )  # fmt: skip
        rewards = [evaluation.rewards for evaluation in played]
        selection = select(rewards, config.selection)
        update = kept[selection.index].iteration
        chosen = {
            "rule": selection.rule,
            "delta": selection.delta,
            "z": selection.z,
            "update": update,
            "checkpoint": f"update_{update}",
            "candidates": [{"update": c.iteration, **selection.row(k)} for k, c in enumerate(kept)],
        }
        if update == 0 and algorithms.learner_of(config).fits_start(config):
            labelled = np.concatenate([cache.select("train", tasks=tasks), validation])
            refit = setup(config, cache, fit=True, start_questions=labelled)
            refit.venv.reset(seed=round_seed(config.seed, 0))  # the state a run's update 0 saves
            start = kept[selection.index]
            payload = _payload(0, refit, start.optimizer, start.generator)
            save_checkpoint(Path(run_dir) / CANDIDATES_DIR / f"{DEPLOYED}.pt", payload)
            chosen["checkpoint"] = DEPLOYED
            chosen["deployed"] = "the start refitted on train + validation"
    files.write_text(Path(run_dir) / SELECTION_NAME, json.dumps(chosen, indent=2) + "\n")
    return chosen


# -- the run directory --------------------------------------------------------------------------------------
def _save(path: Path, iteration: int, run: Setup, optimizer: Optimizer, generator: torch.Generator) -> None:
    """Write the checkpoint of the run after ``iteration`` updates to ``path``: plain data
    (``torch.load(weights_only=True)``), everything a resumed run restores."""
    files.make_folder(path.parent)
    save_checkpoint(path, _payload(iteration, run, optimizer.state_dict(), generator.get_state()))


def _payload(iteration: int, run: Setup, optimizer: dict[str, Tensor], generator: Tensor) -> dict[str, Any]:
    """What a checkpoint of ``run`` after ``iteration`` updates holds, with the optimizer's and the sampling
    generator's states."""
    return {
        "algorithm": run.config.algorithm,
        "config": run.config.to_dict(),
        "iteration": iteration,
        "global_step": iteration * run.budget.batch_size,
        "num_iterations": run.budget.iterations,
        "complete": iteration >= run.budget.iterations,
        "models": list(run.venv.cache.models),
        "networks": run.learner.state_dict(),
        "optimizer": optimizer,
        "generator": generator,
        "env": pack_arrays(run.venv.get_state()),
        "random": run.learner.random_state(),
    }
