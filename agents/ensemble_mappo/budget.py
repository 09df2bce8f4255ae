"""The budget of a training run: how many rollouts it runs, and how much memory one takes.

- :class:`Budget`: how many rollouts a budget (``passes`` or ``total_steps``) runs, and the line that says so;
  a budget above :data:`~ensemble_mappo.config.MAX_TOTAL_STEPS` is refused.
- :func:`check_rollout_size` refuses a rollout storage above :data:`~ensemble_mappo.config.MAX_ROLLOUT_BYTES`
  before it is allocated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_mappo.config import MAX_ROLLOUT_BYTES, MAX_TOTAL_STEPS, LearnerConfig
from ensemble_mappo.frame import Learner

__all__ = ["Budget", "check_rollout_size"]


@dataclass(frozen=True)
class Budget:
    """What a training budget runs: whole rollouts of ``num_envs x num_steps`` steps, at least the steps asked.

    >>> from ensemble_mappo.config import TrainConfig
    >>> shape = {"num_envs": 64, "num_steps": 64}
    >>> print(Budget.plan(TrainConfig(passes=5, **shape), 20).describe())  # doctest: +NORMALIZE_WHITESPACE
    budget: 5 passes x 20 train questions = 100 steps, rounded up to 1 rollout of 64 copies x 64 steps
    = 4,096 steps (204.8 passes)
    >>> print(Budget.plan(TrainConfig(total_steps=8192, **shape), 2560).describe())
    budget: 8,192 steps (--total-steps) = 2 rollouts of 64 copies x 64 steps (3.2 passes of 2,560 train questions)
    >>> print(Budget.plan(TrainConfig(passes=2, model_permutations=2, **shape), 3000).describe())
    ... # doctest: +NORMALIZE_WHITESPACE
    budget: 2 passes x 3,000 train questions = 6,000 steps, rounded up to 2 rollouts of 64 copies x 64 steps
    = 8,192 steps (2.731 passes); the train questions include 2 model-permuted copies of each training task

    A run's budget is :func:`ensemble_mappo.training.run_budget`'s: over the stream it trains on, its copies included.
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
    copies: int = 0
    """Model-permuted copies of each training task in the stream (``model_permutations``; counted in ``questions``)."""

    @classmethod
    def plan(cls, config: LearnerConfig, questions: int) -> Budget:
        """The budget of ``config`` over a stream of ``questions``; a ValueError when the steps asked for exceed
        :data:`~ensemble_mappo.config.MAX_TOTAL_STEPS` (the rounding up to whole rollouts adds less than one)."""
        batch_size = config.num_envs * config.num_steps
        asked = config.total_steps or config.passes * questions  # a float for passes: no huge integer is made
        if not asked <= MAX_TOTAL_STEPS:
            what = (
                f"{config.total_steps:,} steps"
                if config.total_steps
                else (f"passes={config.passes:g} x {questions:,} train questions = {asked:.4g} steps")
            )
            raise ValueError(
                f"budget: {what} is more than the limit of {MAX_TOTAL_STEPS:,} env steps of one run "
                "(ensemble_mappo.config.MAX_TOTAL_STEPS, about two weeks of CPU)"
            )
        requested = config.total_steps or math.ceil(config.passes * questions)
        return cls(
            questions=questions,
            passes=None if config.total_steps else config.passes,
            requested=requested,
            num_envs=config.num_envs,
            num_steps=config.num_steps,
            iterations=max(1, math.ceil(requested / batch_size)),
            copies=int(getattr(config, "model_permutations", 0)),
        )

    @classmethod
    def of_cache(cls, config: LearnerConfig, cache: LogitCache) -> Budget:
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
        copies = ""
        if self.copies:
            copies = (
                f"; the train questions include {self.copies} model-permuted "
                f"cop{'y' if self.copies == 1 else 'ies'} of each training task"
            )
        if self.steps == self.requested:
            return f"budget: {asked} = {shape} ({passes}){copies}"
        return f"budget: {asked}, rounded up to {shape} = {self.steps:,} steps ({passes}){copies}"


def _tasks(config: LearnerConfig) -> tuple[str, ...] | None:
    tasks = config.env.get("tasks")
    return None if tasks is None else tuple(tasks)


def check_rollout_size(learner: Learner, venv: EnsembleVectorEnv, num_steps: int) -> int:
    """The bytes of a rollout of ``num_steps`` steps of ``venv``'s copies (:meth:`Learner.storage`), measured on
    one step before the whole is allocated; a ValueError when they exceed
    :data:`~ensemble_mappo.config.MAX_ROLLOUT_BYTES`."""
    one = learner.storage(venv, 1)
    per_step = 0
    for item in dataclasses.fields(one):
        value = getattr(one, item.name)
        for array in value.values() if isinstance(value, dict) else [value]:
            per_step += array.element_size() * array.numel() if hasattr(array, "element_size") else array.nbytes
    total = per_step * num_steps
    if total > MAX_ROLLOUT_BYTES:
        raise ValueError(
            f"a rollout of num_envs={venv.num_envs:,} copies x num_steps={num_steps:,} steps would take "
            f"{total / 2**30:,.1f} GiB of storage, more than the limit of {MAX_ROLLOUT_BYTES / 2**30:g} GiB "
            "(ensemble_mappo.config.MAX_ROLLOUT_BYTES): lower num_envs or num_steps"
        )
    return total
