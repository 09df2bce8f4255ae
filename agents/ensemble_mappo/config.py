"""The learners' configurations: one frozen dataclass per algorithm over one base, a docstring per field.

:class:`LearnerConfig` holds the fields every learner shares (the budget, the rollout's shape, the PPO epochs,
the optimizer, the checkpoints chosen on validation, the environment's options), each declared once, with its
validation. An algorithm's config subclasses it: :class:`TrainConfig` is MAPPO's (and IPPO's, ``critic="local"``),
:class:`~ensemble_mappo.rlae_config.RLAEConfig` RLAE's. A config names its algorithm (``algorithm``, set by the
registry, :mod:`ensemble_mappo.algorithms`), and a field the algorithm fixes that says otherwise is refused when the
config is made (``ALGORITHMS``: each algorithm of the class and its fixed fields); a subclass adds its own fields and
gives shared fields
defaults of its own, with the reason in their docstrings (re-declared, or in one table: ``defaults=`` of the class
statement, :meth:`LearnerConfig.__init_subclass__`). The ``ensemble-env train`` options and
the hyperparameter tables of docs/mappo.md and docs/rlae.md are generated from the fields (:func:`field_docs`,
:func:`defaults_table`), and ``--config FILE`` reads a TOML or JSON object whose keys are field names (TOML with
:mod:`tomllib`, JSON with :mod:`json`; nothing is unpickled): :func:`load_config`, :func:`config_from_dict`.

>>> config = TrainConfig(seed=3, mode="two-stage")
>>> config.learning_rate, config.clip_coef, config.gae_lambda
(0.0005, 0.2, 0.95)
>>> config_from_dict({"seed": 1, "env": {"alpha": 0.5}}).env["alpha"]
0.5
>>> config.gamma, config.fusion_gamma  # each action's consequence is one question's reward
(0.0, 0.0)
>>> config.algorithm, config_from_dict({"algorithm": "ippo"}).critic  # IPPO: MAPPO's config, critic="local"
('mappo', 'local')
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import math
import re
import sys
import textwrap
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ensemble_env.cache.convert.common import DuplicateKeyError, decode_text, json_decoder, read_input
from ensemble_env.game.config import EnvConfig
from ensemble_env.text import show

__all__ = [
    "CHOICES",
    "CRITICS",
    "DECIDER_CREDITS",
    "DECIDER_POLICIES",
    "DECIDER_STARTS",
    "DEFAULT_ENV_OPTIONS",
    "LIMITS",
    "LOGGERS",
    "MAX_CONFIG_BYTES",
    "MAX_ROLLOUT_BYTES",
    "MAX_TOTAL_STEPS",
    "MODES",
    "ORDERS",
    "RETIRED_FIELDS",
    "SELECTIONS",
    "SHARED_RANGES",
    "LearnerConfig",
    "TrainConfig",
    "config_from_dict",
    "defaults_table",
    "field_docs",
    "load_config",
]

#: training schedules: ``joint`` trains both actors at once (MAPPO proper); ``two-stage`` is the paper's
MODES = ("joint", "two-stage")
#: orders of the training stream
ORDERS = ("sequential", "shuffled")
#: critics: "central" (MAPPO) or "local" (IPPO, each agent's values from its own observation)
CRITICS = ("central", "local")
#: the decider's policy: one Bernoulli per model, a categorical over the non-empty teams (an MLP of the observation;
#: the team scorer; the index of each team's record), or "auto" (teams for pools of up to
#: ensemble_env.baselines.routing.MAX_TEAM_MODELS models, else Bernoulli)
DECIDER_POLICIES = ("auto", "teams", "scorer", "index", "residual", "bernoulli")
#: the reward a decider's team is credited with: the fusion agent's sampled answer's, its most probable answer's,
#: or the expectation over its policy (see ensemble_mappo.collection.decider_credit)
DECIDER_CREDITS = ("sampled", "greedy", "expected")
#: the team decider's start policy: the size prior of decider_initial_prob, or the offline start from every team's
#: train outcomes (ensemble_mappo.start)
DECIDER_STARTS = ("prior", "offline")
#: the rules that choose, on the validation split, the policy a run deploys (ensemble_mappo.selection)
SELECTIONS = ("safe", "best", "trained")
#: the choices of the str fields (for the command line)
CHOICES: dict[str, tuple[str, ...]] = {
    "mode": MODES,
    "order": ORDERS,
    "critic": CRITICS,
    "decider_policy": DECIDER_POLICIES,
    "decider_credit": DECIDER_CREDITS,
    "decider_start": DECIDER_STARTS,
    "selection": SELECTIONS,
    "offline_estimator": ("certified", "pooled", "mean"),
}

#: where ``train`` logs each update (``train --logger``, ``train(loggers=...)``): "csv" (``progress.csv``, always
#: written) and "tensorboard" (the same rows as TensorBoard event files, ``DIR/tensorboard/``). Not a config field: a
#: logger changes no number of the run, so a run's config, its resume and the benchmark's run key leave it out
LOGGERS = ("csv", "tensorboard")
#: fields configs once had and have no longer, each with its default then (what the benchmark's stored runs hold)
#: and where the option went. None of them changed a run's numbers. A run's saved config (config.json, a checkpoint)
#: may hold one: it is checked and dropped (ensemble_mappo.runs.config_entry); a --config file that names one is
#: refused, naming the new place; the benchmark's run key keeps them, so that the runs it stored before still match
RETIRED_FIELDS: dict[str, tuple[Any, str]] = {
    "tensorboard": (False, "choose the logger per command: `ensemble-env train --logger tensorboard`"),
}

#: the largest budget of one run, in env steps (``total_steps``, or ``passes`` x the train questions): about two
#: weeks of CPU at the 8,000 steps/s of the default run, forty thousand times its 256k steps
MAX_TOTAL_STEPS = 10**10
#: the largest value of each size and budget field: beyond it a config is refused before anything is allocated or
#: run (each far above any run of these learners: the default is 160 passes, 64 copies x 64 steps, hidden size 64)
LIMITS: dict[str, float] = {
    "total_steps": MAX_TOTAL_STEPS,
    "passes": 10**6,
    "num_envs": 2**16,
    "num_steps": 2**20,
    "episode_length": 2**31 - 1,
    "hidden_size": 4096,
    "update_epochs": 1000,
    "num_minibatches": 2**20,
    "checkpoints": 1000,
    "checkpoint_every": 2**31 - 1,
    "threads": 1024,
    "seed": 2**63 - 1,
    "model_permutations": 64,
}
#: the most memory a rollout's storage may take (num_envs x num_steps transitions), checked before it is
#: allocated (:func:`ensemble_mappo.progress.check_rollout_size`); the default rollout on bbh5 takes 10.5 MB
MAX_ROLLOUT_BYTES = 8 * 2**30
#: the largest config file read (``--config``, a run's ``config.json``: about 2 KB)
MAX_CONFIG_BYTES = 2**20

#: environment options of MAPPO's training stream unless the config overrides them (see ``TrainConfig.env``)
DEFAULT_ENV_OPTIONS: dict[str, Any] = {"decider_extras": ["task"], "fusion_extras": ["task"], "window": 32}

#: the ranges of the float fields shared by every learner: (low, high, low excluded)
SHARED_RANGES: dict[str, tuple[float, float, bool]] = {
    "passes": (0.0, float(LIMITS["passes"]), True),
    "learning_rate": (0.0, 1.0, True),
    "clip_coef": (0.0, math.inf, True),
    "ent_coef": (0.0, math.inf, False),
    "max_grad_norm": (0.0, math.inf, True),
}
#: int fields that may be 0 (the others are at least 1)
_ZERO_ALLOWED = ("seed", "total_steps", "checkpoints", "model_permutations")

C = TypeVar("C", bound="LearnerConfig")


@dataclass(frozen=True)
class LearnerConfig:
    """The fields every learner shares: its algorithm, budget, rollout, PPO epochs, optimizer, checkpoints,
    environment."""

    algorithm: str = ""
    """The algorithm the config configures: a name of :data:`ensemble_mappo.algorithms.ALGORITHMS` whose config is
    this class (one of its :attr:`ALGORITHMS`); a field the algorithm fixes that says otherwise is refused. The
    registry sets it (``train --algorithm``); a run's ``config.json`` records it."""
    seed: int = 0
    """Seed of every random choice: network initialisation, action sampling, minibatches, episode starts."""
    passes: float = 160.0
    """Budget in passes over the training stream: total env steps = passes x questions in the stream
    (summed over the parallel copies), rounded up to whole rollouts of num_envs x num_steps (train prints what it
    runs). Ignored when ``total_steps`` is set. MAPPO's 160 passes over bbh5's 2,560 train questions (410k env steps)
    take about 9 CPU seconds (benchmarks/train_speed.py); on its validation split the reward was still rising at 100
    passes and flat from about 100 to 160 (docs/mappo.md)."""
    total_steps: int = 0
    """Budget in env steps (questions answered, summed over copies); 0 uses ``passes``."""
    num_envs: int = 256
    """Copies of the game stepped together by ``ensemble_env.vector_env``."""
    num_steps: int = 16
    """Steps per copy in one rollout; a rollout holds num_envs x num_steps transitions."""
    episode_length: int = 512
    """Questions per training episode, a contiguous run of the stream from a random start (the decider's window
    grows from empty at each start, as in evaluation). Cut to a multiple of num_steps (or, for streams
    shorter than a rollout, a divisor of it) so every copy starts a new episode at the same rollout boundary."""
    order: str = "sequential"
    """Order of the training stream: "sequential" (the cache's order, as the test stream is played) or
    "shuffled"."""
    learning_rate: float = 5e-4
    """Adam learning rate of every network (MAPPO default), in (0, 1]."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the budget."""
    update_epochs: int = 2
    """Passes of PPO over each rollout (2 epochs x 4 minibatches of 1,024 over rollouts of 256 copies x 16 steps: on
    bbh5's validation split as good as 5 x 8 minibatches of 512 over 64 x 64, the defaults until issue 47, at 40% of
    their CPU; 1 epoch no better, and noisier; docs/mappo.md)."""
    num_minibatches: int = 4
    """Minibatches per epoch (4 of 1,024 transitions by default; see ``update_epochs``)."""
    clip_coef: float = 0.2
    """PPO clipping range of the probability ratio, and of the value change (MAPPO default)."""
    ent_coef: float = 0.01
    """Entropy bonus of each actor (MAPPO default)."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip of each network (MAPPO default)."""
    hidden_size: int = 64
    """Width of the two hidden layers of every network (MAPPO default)."""
    checkpoints: int = 0
    """Evenly spaced points of the budget at which the networks are kept (``checkpoints/update_N.pt``, with the
    start as ``update_0``); at the end of the run each plays the validation split and ``selection`` chooses the
    policy the run deploys (``selection.json``; ``evaluate`` plays it). 0: none, the run's policy is its last
    checkpoint."""
    selection: str = "safe"
    """The rule that chooses among the start and the kept checkpoints on the validation split
    (ensemble_mappo.selection): "safe" deploys a checkpoint only where its paired gain over the start is positive
    with confidence, "best" the highest mean validation reward, "trained" the trained checkpoint (never the start)
    with the highest mean validation reward (for a start that encodes nothing to fall back on)."""
    checkpoint_every: int = 20
    """Write the resumable checkpoint (``checkpoint.pt``) every this many updates, and after the last one."""
    threads: int = 1
    """torch.set_num_threads: CPU threads for the networks. One is fastest for these small networks on the
    2-core machine: the environment steps in between, and a second thread mostly waits (measured in
    benchmarks/train_speed.py)."""
    env: dict[str, Any] = field(default_factory=dict)
    """Options of the environment (``ensemble_env.EnvConfig`` fields such as alpha, window, tasks), the same for
    training and evaluation."""

    #: the environment options a partial ``env`` table of a config file adds to (see :func:`config_from_dict`)
    DEFAULT_ENV: ClassVar[dict[str, Any]] = {}
    #: this config's float fields and their ranges (low, high, low excluded), the shared ones included
    RANGES: ClassVar[dict[str, tuple[float, float, bool]]] = SHARED_RANGES
    #: environment options the algorithm sets itself (refused in ``env``), with the reason
    RESERVED_ENV: ClassVar[tuple[tuple[str, ...], str]] = (
        ("split", "order", "episode_length"),
        "set by the trainer (training uses the train split, the config's order and episode_length; evaluation "
        "plays the whole chosen split in order)",
    )
    #: the docstrings of the shared fields a subclass gave its own defaults (see :meth:`__init_subclass__`)
    DEFAULT_DOCS: ClassVar[dict[str, str]] = {}
    #: the algorithms this class configures (the values of ``algorithm``), each with the fields it fixes: IPPO is
    #: MAPPO's config with ``critic="local"``. The registry's entries (:mod:`ensemble_mappo.algorithms`) read them
    ALGORITHMS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init_subclass__(cls, defaults: dict[str, tuple[Any, str | None]] | None = None, **options: Any) -> None:
        """``class X(LearnerConfig, defaults={name: (value, docstring)})``: X's own defaults of shared fields, in one
        table, each with the docstring X's options and defaults table show (None: the shared one); ``@dataclass``
        then declares each field again in its place, as if written in X's body with that default."""
        super().__init_subclass__(**options)
        if "__annotations__" not in vars(cls):
            cls.__annotations__ = {}
        for name, (value, _) in (defaults or {}).items():
            if name not in LearnerConfig.__annotations__:
                raise TypeError(f"{cls.__name__}: defaults: {name} is not a field of LearnerConfig")
            cls.__annotations__[name] = LearnerConfig.__annotations__[name]
            setattr(cls, name, value)
        docs = {name: doc for name, (_, doc) in (defaults or {}).items() if doc is not None}
        cls.DEFAULT_DOCS = {**cls.DEFAULT_DOCS, **docs}

    def __post_init__(self) -> None:
        if not isinstance(self.algorithm, str) or self.algorithm not in self.ALGORITHMS:
            raise ValueError(
                f"algorithm={show(self.algorithm)} is not one of {', '.join(map(repr, self.ALGORITHMS))} (the "
                f"algorithms {type(self).__name__} configures)"
            )
        choices = {name: values for name, values in CHOICES.items() if hasattr(self, name)}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={show(getattr(self, name))} is not one of {', '.join(map(repr, allowed))}")
        for item in fields(self):
            value = getattr(self, item.name)
            if item.type == "int":
                low = 0 if item.name in _ZERO_ALLOWED else 1
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    what = " (0: use passes)" if item.name == "total_steps" else ""
                    raise ValueError(f"{item.name} must be an integer >= {low}{what}, got {show(value)}")
            elif item.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"{item.name} must be true or false, got {show(value)}")
            elif item.type == "float":
                low, high, open_low = self.RANGES.get(item.name, (-math.inf, math.inf, False))
                inside = low < value <= high if open_low else low <= value <= high
                if isinstance(value, bool) or not isinstance(value, int | float) or not inside:
                    bracket = "(" if open_low else "["
                    raise ValueError(f"{item.name} must be a number in {bracket}{low:g}, {high:g}], got {show(value)}")
                if not math.isfinite(value):  # a config is saved as JSON, which holds finite numbers only
                    raise ValueError(f"{item.name} must be a finite number, got {show(value)}")
            if item.name in LIMITS and value > LIMITS[item.name]:
                raise ValueError(
                    f"{item.name}={show(value)} is above its limit of {LIMITS[item.name]:,} (ensemble_mappo.config."
                    "LIMITS bounds every size and budget before anything is allocated or run)"
                )
        if self.num_envs * self.num_steps < self.num_minibatches:
            raise ValueError(
                f"num_minibatches={self.num_minibatches} exceeds the rollout size num_envs x num_steps = "
                f"{self.num_envs * self.num_steps}"
            )
        if not isinstance(self.env, dict):
            raise ValueError(f"env must be a table of environment options, got {show(self.env)}")
        names, reason = self.RESERVED_ENV
        reserved = sorted(set(names) & set(self.env))
        if reserved:
            raise ValueError(f"env: {', '.join(reserved)} are {reason}; drop them")
        try:  # the options by value, before any cache is read (task and model names are checked against it later)
            EnvConfig.from_options({key: tuple(v) if isinstance(v, list) else v for key, v in self.env.items()})
        except (TypeError, ValueError) as error:
            raise ValueError(f"env: {error}") from None
        object.__setattr__(self, "env", {key: _plain(value) for key, value in self.env.items()})
        self._check_algorithm()

    def _check_algorithm(self) -> None:
        """Refuse a field the config's algorithm fixes that says otherwise (``critic="local"`` is IPPO's, not
        MAPPO's), naming the field, its value and the algorithm it belongs to."""
        for name, fixed in self.ALGORITHMS[self.algorithm].items():
            value = getattr(self, name)
            if value != fixed:
                owners = [other for other, sets in self.ALGORITHMS.items() if name in sets and sets[name] == value]
                hint = f" ({name}={show(value)} is algorithm={owners[0]!r})" if owners else ""
                raise ValueError(
                    f"{name}={show(value)} contradicts algorithm={self.algorithm!r}, which sets "
                    f"{name}={show(fixed)}{hint}"
                )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (what ``config.json`` of a run holds)."""
        return asdict(self)


@dataclass(frozen=True)
class TrainConfig(LearnerConfig):
    """Hyperparameters of one MAPPO or IPPO run (``ensemble-env train``); defaults follow the MAPPO paper where it has
    one."""

    algorithm: str = "mappo"
    """"mappo": a centralized critic of the state (``critic="central"``). "ippo": each agent's critic reads its own
    observation only (``critic="local"``). Set by ``train --algorithm``; the registry's entries fix ``critic``."""
    mode: str = "joint"
    """"joint": both actors learn together (MAPPO proper). "two-stage" (the RL-Focal paper's schedule): the
    decider learns first with the plurality vote as the fuser, then the fusion agent learns with the decider
    frozen (it acts by its mode)."""
    critic: str = "central"
    """"central": one critic of the state (both agents' observations), MAPPO. "local": each agent's values
    from its own observation only (IPPO, the Dec-POMDP ablation; ensemble_mappo.networks.LocalCritics)."""
    decider_policy: str = "auto"
    """"teams": a categorical over the 2**N - 1 non-empty teams (N <= 12; ensemble_mappo.networks.TeamDeciderActor),
    which compares whole teams. "scorer": the same categorical, each team's logit from one network shared by the
    teams reading what the task's record shows of that team (the record extras, tasks never seen;
    ensemble_mappo.networks.TeamScorerActor). "index": the same categorical, each team's logit an index of its record
    (a shrunk mean of its rate and an uncertainty term, every constant learned from a start that plays the size
    prior; ensemble_mappo.networks.TeamIndexActor; the record extras, tasks never seen). "residual": the index plus one
    network, shared by the teams, of what the record shows of each team and of its members, starting at zero
    (ensemble_mappo.residual.TeamResidualActor; generated tasks). "bernoulli": the decider
    draws each model in or out (one Bernoulli per model, starting at ``decider_initial_prob``), changing a team one
    model at a time. "auto": teams for pools of
    up to 12 models, else bernoulli. Chosen on bbh5's validation split (docs/mappo.md)."""
    decider_residual_gain: float = 1.0
    """The residual decider's (``decider_policy="residual"``) multiple of its network's output added to the index;
    0 switches the network off: the same checkpoint then plays the index decider with the constants the run learned
    (the generated-task benchmark's ablation, ``mappo(residual off)``). Other deciders ignore it."""
    fusion_team_size: bool = False
    """The fusion agent also reads its team's size (one-hot, beside its other context), so that its weights can
    differ for a team of one, two, ... models; its start is the members' mean vote either way. Chosen under
    ``--protocol generated`` (ensemble_mappo.presets.GENERATED), where the decider commits to teams of 1 to 2 models
    after exploring with 3 to 4 (docs/benchmark.md)."""
    decider_credit: str = "expected"
    """The reward the decider's team is credited with for the question it answers. "sampled": the reward of the
    fusion agent's sampled answer (what the environment paid). "greedy": the reward the fusion agent's most
    probable answer would have earned, the answer it gives when frozen (evaluation). "expected": the reward
    expected under the fusion agent's policy. The last two take the fusion agent's exploration out of the
    decider's credit (they read the train question's label, as the reward does). Chosen on bbh5's validation
    split (docs/mappo.md)."""
    stage_one_fraction: float = 0.5
    """Two-stage mode: share of the step budget spent in the first (decider) stage."""
    checkpoints: int = 5
    """Evenly spaced points of the budget at which the networks are kept (``checkpoints/update_N.pt``, with the start
    as ``update_0``); at the end of the run each plays the validation split and ``selection`` chooses the policy
    ``evaluate`` plays (``selection.json``): what ``train`` leaves is what would be deployed. 0: none, the run's
    policy is its last checkpoint."""
    env: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_ENV_OPTIONS))
    """Options of the environment (``ensemble_env.EnvConfig`` fields such as alpha, window, tasks,
    decider_extras), the same for training and evaluation. The default adds the one-hot task to both
    observations (for the decider: of the question its team will answer; it names the task, never the
    answer) and sets the decider's statistics window to T = 32 answered questions (the environment's default,
    500, spans a dozen tasks of a stream sorted by task; 32 fits inside one task's block of bbh5's validation
    and test streams, and paid on its validation split: docs/mappo.md). A config file's ``[env]`` table is merged
    into these defaults (write ``decider_extras = []`` to drop one)."""
    question_features: bool = True
    """Let the decider read the cache's per-question features of the question its team will answer (adds
    "features" to env.decider_extras) when the cache holds features; a cache without them is played
    without. Never a label or a model's output."""
    gamma: float = 0.0
    """The decider's discount. Its action at step t commits the team that answers the next question, so its
    reward stream is r_{t+1}, r_{t+2}, ... (see ensemble_mappo.ppo). The default 0 credits each team with
    the reward of the one question it answers: what the decider observes next does not depend on its team,
    so later rewards carry no credit for it, only noise (bbh5's validation split, 3 seeds: macro reward
    -0.05 with 0 against -0.13 with the MAPPO paper's 0.99, at equal accuracy; docs/mappo.md)."""
    gae_lambda: float = 0.95
    """The decider's lambda of the generalised advantage estimate (MAPPO default; no effect when gamma is 0)."""
    fusion_gamma: float = 0.0
    """The fusion agent's discount. Its answer at step t earns r_t and changes nothing later, so the default 0
    makes each answer a one-step bandit (advantage r_t - E[r_t | s_t]); 0.99 with lambda 0.95 (for both
    agents) is the shared discounted return of the MAPPO paper."""
    fusion_gae_lambda: float = 0.95
    """The fusion agent's GAE lambda (no effect when fusion_gamma is 0)."""
    clip_value: bool = True
    """Clip the value update around the rollout's predictions, as MAPPO does."""
    decider_initial_prob: float = 0.5
    """Probability with which the untrained decider puts each model in the team (the bias of its output; for the
    team decider, a prior over teams whose size is binomial, conditioned on a non-empty team; 0.5: uniform)."""
    decider_start: str = "offline"
    """The team decider's start policy. "prior": the size prior of ``decider_initial_prob``, the same for every
    question. "offline": per task, a softmax (at ``offline_temperature``) of every team's mean reward on the task's
    train questions under its mean-probability vote, read from the cache's logged outputs; the decider is fitted
    to it before PPO starts (ensemble_mappo.start). Chosen on bbh5's validation split (docs/mappo.md)."""
    offline_temperature: float = 0.05
    """Temperature of the offline start's softmax over teams, in reward units (the median gap between a bbh5 task's
    best and second-best team on train is 0.044)."""
    offline_estimator: str = "certified"
    """How the offline start estimates each team's reward per task: "certified", the task's best single model unless
    the best team's paired gain over it is certified at ``offline_level`` (a one-sided bootstrap over the task's
    train questions: a team of 31 candidates wins the in-sample comparison by chance more often than a single model
    does); "pooled", shrunk toward the team's reward over all tasks with a strength chosen by 5-fold
    cross-validation on the train questions; or "mean", the task's own mean (ensemble_env.baselines.pooling). When
    the run deploys its start, the start is refitted on train + validation."""
    offline_level: float = 0.95
    """The confidence level of the certified start (``offline_estimator="certified"``): a team replaces the task's
    best single model only where its gain is above 0 at this one-sided level."""
    model_permutations: int = 0
    """Copies of each training task whose models' outputs are shuffled by a seeded permutation, added to the training
    stream (ensemble_env.cache.augment.permuted_copies; tasks never seen only: episodes of one task, no task
    one-hot). In a copy no model is best on every task, so a policy earns more than the best fixed team only by
    reading the task's record; 0: none."""
    decider_kl_coef: float = 0.05
    """Weight of the KL divergence of the decider's policy from its start policy (``decider_start``) in its loss:
    the trust region that keeps PPO's fine-tuning near the start; 0: none (team decider only)."""
    decider_ent_coef: float = -1.0
    """The decider's entropy bonus; negative: ``ent_coef`` (the fusion agent's)."""
    normalize_advantages: bool = True
    """Standardise each agent's advantages over each rollout (as MAPPO does)."""

    DEFAULT_ENV: ClassVar[dict[str, Any]] = DEFAULT_ENV_OPTIONS
    ALGORITHMS: ClassVar[dict[str, dict[str, Any]]] = {"mappo": {"critic": "central"}, "ippo": {"critic": "local"}}
    RANGES: ClassVar[dict[str, tuple[float, float, bool]]] = {
        **SHARED_RANGES,
        "gamma": (0.0, 1.0, False),
        "gae_lambda": (0.0, 1.0, False),
        "fusion_gamma": (0.0, 1.0, False),
        "fusion_gae_lambda": (0.0, 1.0, False),
        "stage_one_fraction": (0.0, 1.0, False),
        "decider_initial_prob": (1e-3, 1.0 - 1e-3, False),
        "offline_temperature": (1e-6, math.inf, False),
        "offline_level": (0.5, 0.999, False),
        "decider_kl_coef": (0.0, math.inf, False),
        "decider_ent_coef": (-1.0, math.inf, False),
        "decider_residual_gain": (0.0, 100.0, False),
    }
    #: the game this learner plays, by environment option: the values it plays and why (any other is refused when
    #: the config is made, before a run directory is written: a rollout would fail on it)
    PLAYED_ENV: ClassVar[dict[str, tuple[tuple[Any, ...], str]]] = {
        "decider": ((True,), "it trains a decider; RLAE's learners play without one: --algorithm rlae_ppo"),
        "decider_action": (("multibinary", "multidiscrete"), "its decider acts with team masks, one 0/1 per model"),
        "fusion_action": (("answer",), "its fusion agent answers; RLAE's learners set weights: --algorithm rlae_ppo"),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        for option, (played, why) in self.PLAYED_ENV.items():
            if option in self.env and self.env[option] not in played:
                raise ValueError(
                    f"env: {option}={show(self.env[option])} is not a game this learner plays ({why}); it plays "
                    f"{option} {' or '.join(map(repr, played))}"
                )
        if self.decider_policy in ("index", "residual") and self.decider_start == "offline":
            raise ValueError(
                f"decider_policy={self.decider_policy!r} with decider_start='offline': the {self.decider_policy} "
                "decider starts from the size prior (its constants are learned from there; the offline start fits a "
                "network it does not have): set decider_start='prior'"
            )


def _plain(value: Any) -> Any:
    """Tuples as lists, so a config compares equal after a JSON round-trip."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


@functools.cache
def field_docs(config_class: type[LearnerConfig] = TrainConfig) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body, the subclass's where it re-declares
    the field or gives it a default of its own: ``DEFAULT_DOCS``), whitespace collapsed, in the order of the
    dataclass's fields."""
    docs: dict[str, str] = {}
    for klass in reversed(config_class.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, LearnerConfig)):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for statement, following in itertools.pairwise(body):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[statement.target.id] = " ".join(following.value.value.split())
        docs.update((name, " ".join(doc.split())) for name, doc in vars(klass).get("DEFAULT_DOCS", {}).items())
    return {item.name: docs.get(item.name, "") for item in fields(config_class)}


def defaults_table(config_class: type[LearnerConfig], fixed: dict[str, Any] | None = None) -> str:
    """The Markdown table of ``config_class``'s fields, defaults and docstrings (docs/mappo.md and docs/rlae.md hold
    it between ``<!-- defaults:NAME -->`` markers; a test compares them). ``fixed``: fields an algorithm sets."""
    fixed = fixed or {}
    defaults = config_class(**fixed).to_dict()
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for name, doc in field_docs(config_class).items():
        value = defaults[name]
        if isinstance(value, float):
            shown = f"{value:g}"
        else:
            shown = json.dumps(value) if isinstance(value, dict | list | str | bool) else str(value)
        cell = doc.replace("|", "\\|")
        lines.append(f"| `{name}` | `{shown}` | {cell} |")
    return "\n".join(lines) + "\n"


def config_from_dict(
    values: dict[str, Any],
    where: str = "config",
    *,
    merge_env: bool = True,
    config_class: type[C] = TrainConfig,  # type: ignore[assignment]
) -> C:
    """Build a config of ``config_class`` (MAPPO's :class:`TrainConfig` by default) from field values, naming unknown
    keys and mistyped values.

    ``merge_env``: a partial ``env`` table adds to the class's default environment options (a config file's); False
    takes it as it is (a run's saved config, which holds the options the run was trained with). A field the config's
    ``algorithm`` fixes that ``values`` leaves out takes the algorithm's value (``{"algorithm": "ippo"}`` is IPPO's
    config, ``critic="local"``); one that ``values`` gives otherwise is refused.
    """
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a table of training options (field = value), got {show(values)}")
    known = {item.name: item for item in fields(config_class)}
    retired = sorted(set(values) & set(RETIRED_FIELDS))
    if retired:
        raise ValueError(f"{where}: {retired[0]} is no longer a training option; {RETIRED_FIELDS[retired[0]][1]}")
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(known)}")
    algorithm = values.get("algorithm", known["algorithm"].default)
    fixed = config_class.ALGORITHMS.get(algorithm, {}) if isinstance(algorithm, str) else {}
    cleaned = {**{name: value for name, value in fixed.items() if name not in values}, **values}
    if merge_env and isinstance(values.get("env"), dict):  # a partial env table adds to the default options
        cleaned["env"] = {**config_class.DEFAULT_ENV, **values["env"]}
    for name, value in values.items():
        if known[name].type == "float" and isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > 2**53:  # beyond every limit, and beyond what a float holds exactly
                raise ValueError(f"{where}: {name} must be a number in its range, got {show(value)}")
            cleaned[name] = float(value)
    try:
        return config_class(**cleaned)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


def _toml_module() -> Any:
    """The TOML reader: tomllib (Python >= 3.11) or tomli, if installed."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:  # pragma: no cover - Python 3.10
        import tomli
    except ModuleNotFoundError:  # pragma: no cover
        raise ValueError(
            "TOML configs need Python >= 3.11 or `pip install tomli`; a JSON config works anywhere"
        ) from None
    return tomli  # pragma: no cover


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The object of a config file: TOML (``.toml``) or JSON (anything else), a regular UTF-8 file of at most
    :data:`MAX_CONFIG_BYTES`, read as the converters read their inputs
    (:func:`ensemble_env.cache.convert.common.read_input`: never a FIFO or a device); errors name the file, and the
    line and the key of a key given twice (TOML refuses it, JSON would keep the last silently: both are refused)."""
    path = Path(path)
    try:
        text = decode_text(path, read_input(path, limit=MAX_CONFIG_BYTES))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such config file") from None
    try:
        if path.suffix == ".toml":
            values = _toml_module().loads(text)
        else:
            values = json_decoder(bounded_numbers=False).decode(text)  # the config's checks refuse infinities
    except DuplicateKeyError as error:
        raise ValueError(f"{path}: {error}") from None
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{path}: cannot parse the config ({_parse_problem(error, text)})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: a config must be an object of field names, got {type(values).__name__}")
    return values


#: where a TOML or JSON parser says the problem is: ``(at line 3, column 21)`` or ``line 3 column 21``
_WHERE = re.compile(r"line (?P<line>[0-9]+),? column [0-9]+")


def _parse_problem(error: BaseException, text: str) -> str:
    """The parser's message, with the line it names quoted; for a TOML key set twice (``Cannot overwrite a value``,
    which does not name it), the key."""
    message = show(str(error), 300)[1:-1]
    found = _WHERE.search(str(error))
    if found is None:
        return message
    number = int(found.group("line"))
    lines = text.splitlines()
    line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    if str(error).startswith("Cannot overwrite a value") and "=" in line:
        key = line.split("=", 1)[0].strip()
        return f"line {number}: the key {key} is set twice ({show(line, 120)})"
    return f"{message}: {show(line, 120)}" if line else message


def load_config(path: str | Path, config_class: type[C] = TrainConfig) -> C:  # type: ignore[assignment]
    """Read a config file (:func:`read_config_file`) as a config of ``config_class`` (MAPPO's by default)."""
    return config_from_dict(read_config_file(path), where=str(path), config_class=config_class)
