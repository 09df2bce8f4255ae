"""The training configuration: one frozen dataclass, a docstring per field, loadable from TOML or JSON.

Every field is declared once, here. The ``ensemble-env train`` options are generated from the fields (name
``--field-name``, help text from the field's docstring), and ``--config FILE`` reads a TOML or JSON object
whose keys are field names (TOML is read with :mod:`tomllib`, JSON with :mod:`json`; nothing is unpickled).

>>> config = TrainConfig(seed=3, mode="two-stage")
>>> config.learning_rate, config.clip_coef, config.gae_lambda
(0.0005, 0.2, 0.95)
>>> config_from_dict({"seed": 1, "env": {"alpha": 0.5}}).env["alpha"]
0.5
>>> config.gamma, config.fusion_gamma  # each action's consequence is one question's reward
(0.0, 0.0)
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import math
import sys
import textwrap
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

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
    "MAX_CONFIG_BYTES",
    "MAX_ROLLOUT_BYTES",
    "MAX_TOTAL_STEPS",
    "MODES",
    "ORDERS",
    "TrainConfig",
    "config_from_dict",
    "field_docs",
    "load_config",
]

#: training schedules: ``joint`` trains both actors at once (MAPPO proper); ``two-stage`` is the paper's
MODES = ("joint", "two-stage")
#: orders of the training stream
ORDERS = ("sequential", "shuffled")
#: critics: "central" (MAPPO) or "local" (IPPO, each agent's values from its own observation)
CRITICS = ("central", "local")
#: the decider's policy: one Bernoulli per model, a categorical over the non-empty teams, or "auto" (teams for
#: pools of up to ensemble_env.baselines.routing.MAX_TEAM_MODELS models, else Bernoulli)
DECIDER_POLICIES = ("auto", "teams", "bernoulli")
#: the reward a decider's team is credited with: the fusion agent's sampled answer's, its most probable answer's,
#: or the expectation over its policy (see ensemble_mappo.collection.decider_credit)
DECIDER_CREDITS = ("sampled", "greedy", "expected")
#: the team decider's start policy: the size prior of decider_initial_prob, or the offline start from every team's
#: train outcomes (ensemble_mappo.start)
DECIDER_STARTS = ("prior", "offline")
#: the choices of the str fields (for the command line)
CHOICES: dict[str, tuple[str, ...]] = {
    "mode": MODES,
    "order": ORDERS,
    "critic": CRITICS,
    "decider_policy": DECIDER_POLICIES,
    "decider_credit": DECIDER_CREDITS,
    "decider_start": DECIDER_STARTS,
}

#: the largest budget of one run, in env steps (``total_steps``, or ``passes`` x the train questions): about two
#: weeks of CPU at the 8,000 steps/s of the default run, forty thousand times its 256k steps
MAX_TOTAL_STEPS = 10**10
#: the largest value of each size and budget field: beyond it a config is refused before anything is allocated or
#: run (each far above any run of this learner: the default is 160 passes, 64 copies x 64 steps, hidden size 64)
LIMITS: dict[str, int] = {
    "total_steps": MAX_TOTAL_STEPS,
    "passes": 10**6,
    "num_envs": 2**16,
    "num_steps": 2**20,
    "episode_length": 2**31 - 1,
    "hidden_size": 4096,
    "update_epochs": 1000,
    "num_minibatches": 2**20,
    "threads": 1024,
    "seed": 2**63 - 1,
}
#: the most memory a rollout's storage may take (num_envs x num_steps transitions), checked before it is
#: allocated (:func:`ensemble_mappo.progress.check_rollout_size`); the default rollout on bbh5 takes 10.5 MB
MAX_ROLLOUT_BYTES = 8 * 2**30
#: the largest config file read (``--config``, a run's ``config.json``: about 2 KB)
MAX_CONFIG_BYTES = 2**20

#: environment options of the training stream unless the config overrides them (see ``TrainConfig.env``)
DEFAULT_ENV_OPTIONS: dict[str, Any] = {"decider_extras": ["task"], "fusion_extras": ["task"], "window": 32}


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of one MAPPO run (``ensemble-env train``); defaults follow the MAPPO paper where it has one."""

    seed: int = 0
    """Seed of every random choice: network initialisation, action sampling, minibatches, episode starts."""
    mode: str = "joint"
    """"joint": both actors learn together (MAPPO proper). "two-stage" (the RL-Focal paper's schedule): the
    decider learns first with the plurality vote as the fuser, then the fusion agent learns with the decider
    frozen (it acts by its mode)."""
    critic: str = "central"
    """"central": one critic of the state (both agents' observations), MAPPO. "local": each agent's values
    from its own observation only (IPPO, the Dec-POMDP ablation; ensemble_mappo.networks.LocalCritics)."""
    decider_policy: str = "auto"
    """"teams": a categorical over the 2**N - 1 non-empty teams (N <= 12; ensemble_mappo.networks.TeamDeciderActor),
    which compares whole teams. "bernoulli": the decider draws each model in or out (one Bernoulli per model,
    starting at ``decider_initial_prob``), changing a team one model at a time. "auto": teams for pools of up to 12
    models, else bernoulli. Chosen on bbh5's validation split (docs/mappo.md)."""
    decider_credit: str = "expected"
    """The reward the decider's team is credited with for the question it answers. "sampled": the reward of the
    fusion agent's sampled answer (what the environment paid). "greedy": the reward the fusion agent's most
    probable answer would have earned, the answer it gives when frozen (evaluation). "expected": the reward
    expected under the fusion agent's policy. The last two take the fusion agent's exploration out of the
    decider's credit (they read the train question's label, as the reward does). Chosen on bbh5's validation
    split (docs/mappo.md)."""
    stage_one_fraction: float = 0.5
    """Two-stage mode: share of the step budget spent in the first (decider) stage."""
    passes: float = 160.0
    """Budget in passes over the training stream: total env steps = passes x questions in the stream
    (summed over the parallel copies), rounded up to whole rollouts of num_envs x num_steps (train prints what it
    runs). Ignored when ``total_steps`` is set. 160 passes over bbh5's 2,560 train questions (410k env steps, 8
    minibatches per epoch) take about 45 CPU seconds; on its validation split the reward was still rising at 100
    passes and flat from about 100 to 160 (docs/mappo.md)."""
    total_steps: int = 0
    """Budget in env steps (questions answered, summed over copies); 0 uses ``passes``."""
    num_envs: int = 64
    """Copies of the game stepped together by ``ensemble_env.vector_env``."""
    num_steps: int = 64
    """Steps per copy in one rollout; a rollout holds num_envs x num_steps transitions."""
    episode_length: int = 512
    """Questions per training episode, a contiguous run of the stream from a random start (the decider's window
    grows from empty at each start, as in evaluation). Cut to a multiple of num_steps (or, for streams
    shorter than a rollout, a divisor of it) so every copy starts a new episode at the same rollout boundary."""
    order: str = "sequential"
    """Order of the training stream: "sequential" (the cache's order, as the test stream is played) or
    "shuffled"."""
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
    learning_rate: float = 5e-4
    """Adam learning rate of the two actors and the critic (MAPPO default)."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the budget."""
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
    clip_coef: float = 0.2
    """PPO clipping range of the probability ratio, and of the value change (MAPPO default)."""
    clip_value: bool = True
    """Clip the value update around the rollout's predictions, as MAPPO does."""
    update_epochs: int = 5
    """Passes of PPO over each rollout (5: as good as 10 on bbh5's validation split, at half the cost)."""
    num_minibatches: int = 8
    """Minibatches per epoch (8 of 512 transitions by default: with 160 passes, as good on bbh5's validation split
    as 16 with 200 passes at 60% of its CPU; 16 with 100 passes learned faster than CleanRL's 4 x 4 or MAPPO's 15
    epochs of one minibatch)."""
    ent_coef: float = 0.01
    """Entropy bonus of each actor (MAPPO default)."""
    max_grad_norm: float = 10.0
    """Gradient-norm clip of each network (MAPPO default)."""
    hidden_size: int = 64
    """Width of the two hidden layers of every network (MAPPO default)."""
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
    decider_kl_coef: float = 0.05
    """Weight of the KL divergence of the decider's policy from its start policy (``decider_start``) in its loss:
    the trust region that keeps PPO's fine-tuning near the start; 0: none (team decider only)."""
    decider_ent_coef: float = -1.0
    """The decider's entropy bonus; negative: ``ent_coef`` (the fusion agent's)."""
    normalize_advantages: bool = True
    """Standardise each agent's advantages over each rollout (as MAPPO does)."""
    checkpoint_every: int = 20
    """Write the checkpoint every this many updates, and after the last one."""
    threads: int = 1
    """torch.set_num_threads: CPU threads for the networks. One is fastest for these small networks on the
    2-core machine: the environment steps in between, and a second thread mostly waits (measured in
    benchmarks/train_speed.py)."""
    tensorboard: bool = False
    """Also write TensorBoard event files (when the tensorboard package is installed)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} is not one of {', '.join(map(repr, MODES))}")
        if self.critic not in CRITICS:
            raise ValueError(f"critic={self.critic!r} is not one of {', '.join(map(repr, CRITICS))}")
        if self.decider_policy not in DECIDER_POLICIES:
            raise ValueError(
                f"decider_policy={self.decider_policy!r} is not one of {', '.join(map(repr, DECIDER_POLICIES))}"
            )
        if self.decider_credit not in DECIDER_CREDITS:
            raise ValueError(
                f"decider_credit={self.decider_credit!r} is not one of {', '.join(map(repr, DECIDER_CREDITS))}"
            )
        if self.decider_start not in DECIDER_STARTS:
            raise ValueError(
                f"decider_start={self.decider_start!r} is not one of {', '.join(map(repr, DECIDER_STARTS))}"
            )
        if self.order not in ORDERS:
            raise ValueError(f"order={self.order!r} is not one of {', '.join(map(repr, ORDERS))}")
        positive_ints = ("num_envs", "num_steps", "episode_length", "update_epochs", "num_minibatches")
        for name in (*positive_ints, "hidden_size", "checkpoint_every", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {show(value)}")
        if isinstance(self.total_steps, bool) or not isinstance(self.total_steps, int) or self.total_steps < 0:
            raise ValueError(f"total_steps must be an integer >= 0 (0: use passes), got {show(self.total_steps)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {show(self.seed)}")
        for name, limit in LIMITS.items():  # every value is finite and a number by now (passes: checked below)
            value = getattr(self, name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
                raise ValueError(
                    f"{name}={show(value)} is above its limit of {limit:,} (ensemble_mappo.config.LIMITS bounds every "
                    "size and budget before anything is allocated or run)"
                )
        for name, low, high in (
            ("passes", 0.0, float(LIMITS["passes"])),
            ("learning_rate", 0.0, float("inf")),
            ("gamma", 0.0, 1.0),
            ("gae_lambda", 0.0, 1.0),
            ("fusion_gamma", 0.0, 1.0),
            ("fusion_gae_lambda", 0.0, 1.0),
            ("clip_coef", 0.0, float("inf")),
            ("ent_coef", 0.0, float("inf")),
            ("max_grad_norm", 0.0, float("inf")),
            ("stage_one_fraction", 0.0, 1.0),
            ("decider_initial_prob", 1e-3, 1.0 - 1e-3),
            ("offline_temperature", 1e-6, float("inf")),
            ("decider_kl_coef", 0.0, float("inf")),
            ("decider_ent_coef", -1.0, float("inf")),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {show(value)}")
            if not math.isfinite(value):  # a config is saved as JSON, which holds finite numbers only
                raise ValueError(f"{name} must be a finite number, got {show(value)}")
        if self.num_envs * self.num_steps < self.num_minibatches:
            raise ValueError(
                f"num_minibatches={self.num_minibatches} exceeds the rollout size num_envs x num_steps = "
                f"{self.num_envs * self.num_steps}"
            )
        if not isinstance(self.env, dict):
            raise ValueError(f"env must be a table of environment options, got {show(self.env)}")
        reserved = sorted({"split", "order", "episode_length"} & set(self.env))
        if reserved:
            raise ValueError(
                f"env: {', '.join(reserved)} are set by the trainer (training uses the train split, the config's "
                f"order and episode_length; evaluation plays the whole chosen split in order)"
            )
        try:  # the options by value, before any cache is read (task and model names are checked against it later)
            EnvConfig.from_options({key: tuple(v) if isinstance(v, list) else v for key, v in self.env.items()})
        except (TypeError, ValueError) as error:
            raise ValueError(f"env: {error}") from None
        for name in ("anneal_lr", "clip_value", "normalize_advantages", "question_features", "tensorboard"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {show(getattr(self, name))}")
        object.__setattr__(self, "env", {key: _plain(value) for key, value in self.env.items()})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (what ``config.json`` of a run holds)."""
        return asdict(self)


def _plain(value: Any) -> Any:
    """Tuples as lists, so a config compares equal after a JSON round-trip."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


@functools.cache
def field_docs() -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), whitespace collapsed."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(TrainConfig)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = " ".join(following.value.value.split())
    return docs


def config_from_dict(values: dict[str, Any], where: str = "config", *, merge_env: bool = True) -> TrainConfig:
    """Build a :class:`TrainConfig` from field values, naming unknown keys and mistyped values.

    ``merge_env``: a partial ``env`` table adds to the default environment options (a config file's); False
    takes it as it is (a run's saved config, which holds the options the run was trained with).
    """
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a table of training options (field = value), got {show(values)}")
    known = {item.name: item for item in fields(TrainConfig)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(known)}")
    cleaned = dict(values)
    if merge_env and isinstance(values.get("env"), dict):  # a partial env table adds to the default options
        cleaned["env"] = {**DEFAULT_ENV_OPTIONS, **values["env"]}
    for name, value in values.items():
        default = getattr(TrainConfig(), name)
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > 2**53:  # beyond every limit, and beyond what a float holds exactly
                raise ValueError(f"{where}: {name} must be a number in its range, got {show(value)}")
            cleaned[name] = float(value)
    try:
        return TrainConfig(**cleaned)
    except ValueError as error:
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


def load_config(path: str | Path) -> TrainConfig:
    """Read a config file: TOML (``.toml``) or JSON (anything else), an object of :class:`TrainConfig` fields."""
    path = Path(path)
    try:
        if not path.is_file():  # a folder, a FIFO or a device (/dev/zero) is no config, and reading one may not end
            raise ValueError(f"{path}: not a regular file; a config is a TOML or JSON file")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ValueError(f"{path}: {path.stat().st_size:,} bytes, more than a config's {MAX_CONFIG_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such config file") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: a config is UTF-8 text (TOML or JSON); byte {error.start} is not") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read the config ({error.strerror or error})") from None
    try:
        if path.suffix == ".toml":
            values = _toml_module().loads(text)
        else:
            values = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{path}: cannot parse the config ({show(str(error), 300)})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: a config must be an object of field names, got {type(values).__name__}")
    return config_from_dict(values, where=str(path))
