"""The learner frame: what every algorithm supplies (:class:`Learner`) and the pieces of the one loop it plugs into.

:func:`ensemble_mappo.training.train` runs every algorithm of :data:`ensemble_mappo.algorithms.ALGORITHMS` with one
loop (collect, advantages, epochs of minibatch updates, log, checkpoint), one run directory, one resume, one
evaluation and one choice on validation. An algorithm supplies a subclass of :class:`Learner` with only what
differs: its networks (:meth:`Learner.modules`, :meth:`Learner.networks`), its environment options
(:meth:`Learner.env_options`), how it acts and what it stores (:meth:`Learner.storage`, :meth:`Learner.collect`),
its advantages (:meth:`Learner.batch`) and its loss, written in one place (:meth:`Learner.loss`, whose statistics are
named), and its log columns (:meth:`Learner.log_columns`, :meth:`Learner.log_row`).

Here too: :class:`Behaviour` (how the agents act while collecting), :class:`Phase` (what an iteration does: how the
agents act, which networks learn, the stage of a schedule), :class:`StepRecord` (what happened at each step, read by
the log and the evaluation), :func:`minibatches`, :func:`update` (advantages and the epochs of minibatch updates:
steps 2 and 3 of an iteration, shared by training and the online evaluation), :func:`make_env` and
:func:`make_optimizer`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

import ensemble_env
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.text import show
from ensemble_mappo.checkpoint import check_networks
from ensemble_mappo.config import LearnerConfig
from ensemble_mappo.optim import OPTIMIZERS, Optimizer

__all__ = [
    "FROZEN",
    "LEARNING",
    "RECORD_KEYS",
    "Behaviour",
    "Learner",
    "Loss",
    "Phase",
    "StepRecord",
    "make_env",
    "make_optimizer",
    "minibatches",
    "step_infos",
    "update",
]


@dataclass(frozen=True)
class Behaviour:
    """How each agent acts while collecting: sample (learning), its mode (frozen: for a weighting agent, each
    weight's mean), or a scripted fuser (``fusion="plurality"``: the team's plurality vote answers, the two-stage
    schedule's first stage)."""

    decider: str = "sample"
    fusion: str = "sample"


#: how the agents act while they learn, and how a frozen policy acts (evaluation)
LEARNING, FROZEN = Behaviour(), Behaviour(decider="mode", fusion="mode")


@dataclass(frozen=True)
class Phase:
    """What one iteration does: how the agents act (``behaviour``), which networks step (``learners``, by their
    optimizer names), and the stage of a schedule (the log's ``charts/stage``; 1 without one)."""

    behaviour: Behaviour
    learners: tuple[str, ...]
    stage: int = 1


@dataclass(frozen=True)
class Loss:
    """One minibatch's loss: ``total`` to minimise, and its terms and diagnostics by name (``stats``, detached
    tensors; the log's columns are the means over an update's minibatches, :meth:`Learner.log_row`)."""

    total: Tensor
    stats: dict[str, Tensor]


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

    def write(self, t: int, infos: Mapping[str, np.ndarray]) -> None:
        """Store step ``t``'s values of :data:`RECORD_KEYS` from one agent's infos (:func:`step_infos`)."""
        for key in RECORD_KEYS:
            getattr(self, key)[t] = infos[key]


def step_infos(
    infos: Mapping[str, Any], agent: str, done: np.ndarray, keys: Sequence[str], record: StepRecord | None = None
) -> dict[str, np.ndarray]:
    """The ``keys`` of ``agent``'s infos of the step just played: a copy whose episode ended in the step was reset
    in it, so its values are in ``infos["final_info"]``. With ``record``, the ended episodes' accuracy and return are
    appended to it."""
    step = infos[agent]
    if not done.any():
        return {key: step[key] for key in keys}
    final = infos["final_info"][agent]
    if record is not None:
        record.episode_accuracy.extend(np.asarray(final["accuracy"])[done].tolist())
        record.episode_return.extend(np.asarray(final["episode_return"])[done].tolist())
    return {key: np.where(done, final[key], step[key]) for key in keys}


def minibatches(batch: Mapping[str, Tensor], num_minibatches: int, generator: torch.Generator) -> Iterator[dict]:
    """One epoch over ``batch`` (flat tensors of one length, by name): permuted once, then walked in
    ``num_minibatches`` contiguous minibatches of ``len // num_minibatches`` samples (at least 1; a remainder is left
    out of this epoch)."""
    size = int(next(iter(batch.values())).shape[0])
    minibatch = max(1, size // num_minibatches)
    order = torch.randperm(size, generator=generator)
    shuffled = {name: tensor.index_select(0, order) for name, tensor in batch.items()}
    for start in range(0, size - minibatch + 1, minibatch):
        yield {name: tensor[start : start + minibatch] for name, tensor in shuffled.items()}


class Learner:
    """What an algorithm supplies to the one loop; a subclass per algorithm (``ensemble_mappo.mappo.MAPPOLearner``,
    ``ensemble_mappo.rlae.RLAELearner``), registered in :data:`ensemble_mappo.algorithms.ALGORITHMS`.

    ``__init__(config, venv)`` builds the networks for ``venv``'s spaces (the loop has seeded torch's global
    generator with ``config.seed`` just before).
    """

    #: episodes: True: every copy is reset, seeded, at the start of each round of episodes cut on rollout boundaries
    #: (:func:`ensemble_mappo.training.episode_plan`); False: one seeded reset when the run starts, then the copies
    #: reset themselves when an episode ends (``episode_length`` questions, or the stream)
    seeded_rounds: ClassVar[bool] = True

    def __init__(self, config: LearnerConfig, venv: EnsembleVectorEnv) -> None:
        self.config = config

    # -- the environment and the networks
    @staticmethod
    def env_options(config: LearnerConfig, cache: LogitCache) -> dict[str, Any]:
        """The environment options of a run of ``config`` on ``cache`` (training and evaluation alike)."""
        return dict(config.env)

    @staticmethod
    def fits_start(config: LearnerConfig) -> bool:
        """Whether a run of ``config`` fits its start policy to labelled questions (then a chosen update 0 deploys
        the start refitted on train + validation: :func:`ensemble_mappo.training.choose`). False by default."""
        return False

    def start(self, venv: EnsembleVectorEnv, *, fit: bool, rollouts: int, questions: np.ndarray | None = None) -> None:
        """Give the networks their start policy before the optimizer is built (``fit``: a new run; ``rollouts``:
        of a round of episodes; ``questions``: the labelled questions a fitted start reads, None: the training
        stream's). Nothing by default."""

    def modules(self) -> dict[str, nn.Module]:
        """Everything a checkpoint saves, by name."""
        raise NotImplementedError

    def networks(self) -> dict[str, nn.Module]:
        """The networks the optimizer steps, by name (the names :attr:`Phase.learners` uses)."""
        return self.modules()

    def state_dict(self) -> dict[str, dict[str, Tensor]]:
        return {name: {k: v.detach().clone() for k, v in m.state_dict().items()} for name, m in self.modules().items()}

    def load(self, networks: Mapping[str, Mapping[str, Tensor]], source: str) -> None:
        """Load saved networks after checking them against these (names, tensor names, shapes, dtypes, finite
        values); ``source`` (the file) is named in the errors. A module with an ``upgrade_state_dict`` method (the
        team deciders, :meth:`ensemble_mappo.networks.TeamActor.upgrade_state_dict`) first renames the tensors of a
        checkpoint written before its tensors were renamed."""
        check_networks(networks, source)
        modules = self.modules()
        if sorted(networks) != sorted(modules):
            raise ValueError(f"{source}: networks: holds {show(sorted(networks), 200)}, expected {', '.join(modules)}")
        states = {}
        for name, module in modules.items():
            upgrade = getattr(module, "upgrade_state_dict", None)
            state = states[name] = dict(networks[name]) if upgrade is None else upgrade(networks[name])
            expected = module.state_dict()
            lacking = [key for key in expected if key not in state]
            extra = sorted(key for key in state if key not in expected)
            if lacking or extra:
                detail = f"lacks {show(lacking, 200)}" if lacking else f"holds unexpected {show(extra, 200)}"
                raise ValueError(f"{source}: networks.{name}: {detail}: a checkpoint of another kind of network")
            for key, reference in expected.items():
                value = state[key]
                if value.shape != reference.shape or value.dtype != reference.dtype:
                    raise ValueError(
                        f"{source}: networks.{name}.{key}: {value.dtype} of shape {tuple(value.shape)}, expected "
                        f"{reference.dtype} of shape {tuple(reference.shape)} (a checkpoint of another pool, "
                        "observation or hidden_size?)"
                    )
        for name, module in modules.items():
            module.load_state_dict(states[name])

    # -- one iteration
    def phase(self, iteration: int, iterations: int) -> Phase:
        """What iteration ``iteration`` (from 0) of ``iterations`` does; by default every network learns, sampling."""
        return Phase(LEARNING, tuple(self.networks()))

    def storage(self, venv: EnsembleVectorEnv, num_steps: int) -> Any:
        """Preallocated storage of ``num_steps`` steps of ``venv``'s copies, with ``rewards`` (T, B) among its fields
        (tensors and arrays: :func:`ensemble_mappo.budget.check_rollout_size` measures them)."""
        raise NotImplementedError

    def collect(
        self, venv: EnsembleVectorEnv, storage: Any, generator: torch.Generator, behaviour: Behaviour
    ) -> StepRecord:
        """Fill ``storage`` with steps of ``venv`` from where its copies stand (``venv.observations``); return what
        happened (the copies stand after the last step: the next rollout starts there)."""
        raise NotImplementedError

    def batch(self, storage: Any, next_state: np.ndarray, learners: Sequence[str]) -> dict[str, Tensor]:
        """The advantages and targets of a collected rollout (``next_state``: the state after it), flattened into
        one batch of samples by name (:func:`minibatches` walks it)."""
        raise NotImplementedError

    def loss(self, minibatch: Mapping[str, Tensor], learners: Sequence[str]) -> Loss:
        """The loss of one minibatch for the networks in ``learners``, its terms named."""
        raise NotImplementedError

    # -- the log
    @staticmethod
    def log_columns(models: Sequence[str]) -> list[str]:
        """This algorithm's columns of ``progress.csv`` after the frame's (its losses)."""
        return []

    def log_row(self, means: Mapping[str, Tensor], grad_norms: Mapping[str, float]) -> dict[str, float]:
        """The log's values of one update, from the means of :attr:`Loss.stats` over its minibatches and each stepped
        network's mean gradient norm."""
        return {}

    # -- randomness of its own (besides the loop's torch generator)
    def random_state(self) -> str:
        """The state of a generator of the learner's own, as text for the checkpoint ("" when it has none)."""
        return ""

    def set_random_state(self, state: str, source: str) -> None:
        """Restore :meth:`random_state` (``source`` names the checkpoint in errors)."""
        if state:
            raise ValueError(f"{source}: random: this algorithm has no generator of its own, got {show(state)}")

    def reseed(self, seed: int) -> None:
        """Seed the learner's own generator, if any (the online evaluation's seed)."""


def make_env(
    cache: LogitCache,
    env_options: Mapping[str, Any],
    *,
    num_envs: int,
    split: str,
    order: str = "sequential",
    episode_length: int | None = None,
) -> EnsembleVectorEnv:
    """``ensemble_env.vector_env`` over ``cache`` with a run's options (lists become tuples)."""
    options = {key: tuple(value) if isinstance(value, list) else value for key, value in env_options.items()}
    return ensemble_env.vector_env(num_envs, cache, split=split, order=order, episode_length=episode_length, **options)


def make_optimizer(learner: Learner, config: LearnerConfig, optimizer: str = "fused") -> Optimizer:
    """Adam over the learner's networks (eps 1e-5, as MAPPO and CleanRL), each network's gradient norm clipped to
    ``max_grad_norm``.

    ``optimizer`` (a key of :data:`~ensemble_mappo.optim.OPTIMIZERS`): "fused" (the default,
    :class:`~ensemble_mappo.optim.FlatAdam`: the networks' parameters become views of one buffer, so build it
    after the networks are final) or "adam" (:class:`~ensemble_mappo.optim.TorchAdam`, plain
    ``torch.optim.Adam`` and ``clip_grad_norm_``; the same update up to float rounding, slower).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r} is not one of {sorted(OPTIMIZERS)}")
    networks = learner.networks()
    return OPTIMIZERS[optimizer](networks, config.learning_rate, max_grad_norm=config.max_grad_norm, eps=1e-5)


def update(
    learner: Learner,
    optimizer: Optimizer,
    storage: Any,
    next_state: np.ndarray,
    config: LearnerConfig,
    generator: torch.Generator,
    learners: Sequence[str],
) -> dict[str, float]:
    """Steps 2 and 3 of an iteration: the advantages of the collected rollout, then ``update_epochs`` epochs of
    ``num_minibatches`` minibatch updates of the networks in ``learners``; returns the log's values (the means over
    the minibatches, :meth:`Learner.log_row`). A loss that is not finite stops the run with the fix."""
    batch = learner.batch(storage, next_state, learners)
    names: list[str] = []
    sums = torch.zeros(0)
    grad_norms = torch.zeros(len(optimizer.names))
    count = 0
    for _ in range(config.update_epochs):
        for minibatch in minibatches(batch, config.num_minibatches, generator):
            loss = learner.loss(minibatch, learners)
            optimizer.zero_grad()
            loss.total.backward()
            norms = optimizer.step(learners)
            with torch.no_grad():  # the statistics summed as one vector: two operations a minibatch, not two per name
                stats = torch.stack([value.detach() for value in loss.stats.values()])
                if count == 0:
                    names, sums = list(loss.stats), stats
                else:
                    sums += stats
                grad_norms += norms
            count += 1
    if not bool(torch.isfinite(loss.total.detach())):
        raise ValueError(
            f"training diverged: the loss became {float(loss.total):g} (learning_rate={config.learning_rate:g}); "
            "lower learning_rate or max_grad_norm"
        )
    means = dict(zip(names, sums / max(count, 1), strict=True))
    norms_by_name = dict(zip(optimizer.names, (grad_norms / max(count, 1)).tolist(), strict=True))
    return learner.log_row(means, {name: norms_by_name[name] for name in optimizer.names if name in learners})
