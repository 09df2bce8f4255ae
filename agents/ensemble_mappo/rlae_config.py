"""The configuration of the RLAE learners (``rlae_ppo``, ``rlae_mappo``): one frozen dataclass, a docstring per field.

Torch-free, like :mod:`ensemble_mappo.config` (the command line imports it to build its options). The learners are in
:mod:`ensemble_mappo.rlae`; their settings were chosen on bbh5's validation split (docs/rlae.md).

>>> config = RLAEConfig(algorithm="rlae_mappo")
>>> config.env_options(has_features=True)["fusion_agents"]
'per_model'
>>> rlae_config_from_dict({"algorithm": "rlae_ppo", "seed": 2}).seed
2
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ensemble_env.game.config import EnvConfig, rlae_game
from ensemble_env.text import show
from ensemble_mappo.config import MAX_CONFIG_BYTES

__all__ = ["RLAE_ALGORITHMS", "RLAE_LIMITS", "RLAEConfig", "load_rlae_config", "rlae_config_from_dict"]

#: the RLAE learners: one weighting agent (``fusion_agents="one"``) or one agent per model (``"per_model"``)
RLAE_ALGORITHMS = ("rlae_ppo", "rlae_mappo")
#: the largest value of each size and budget field (refused above it before anything is allocated)
RLAE_LIMITS: dict[str, float] = {
    "passes": 10**5,
    "num_envs": 2**14,
    "num_steps": 2**16,
    "episode_length": 2**31 - 1,
    "hidden_size": 4096,
    "update_epochs": 1000,
    "num_minibatches": 2**16,
    "checkpoints": 1000,
    "threads": 1024,
    "initial_concentration": 1e6,
    "seed": 2**63 - 1,
}


@dataclass(frozen=True)
class RLAEConfig:
    """Hyperparameters of one RLAE run (``ensemble-env train --algorithm rlae_ppo|rlae_mappo``)."""

    algorithm: str = "rlae_ppo"
    """"rlae_ppo": one agent sets the N weights from the fusion observation (``fusion_agents="one"``). "rlae_mappo":
    N agents ``weight_i`` each set their model's weight from their own observation, one shared actor that also reads
    the agent's one-hot id, a centralized critic of ``state()``."""
    seed: int = 0
    """Seed of every random choice: network initialisation, the Beta samples, minibatches, episode starts."""
    passes: float = 80.0
    """Budget in passes over the train stream (env steps = passes x train questions, rounded up to whole rollouts).
    80 passes over bbh5's 2,560 train questions are 100 updates; on its validation split (3 seeds) rlae_ppo's reward
    was still rising from 40 to 80 passes (docs/rlae.md)."""
    num_envs: int = 32
    """Copies of the game stepped together by ``ensemble_env.vector_env``."""
    num_steps: int = 64
    """Steps per copy in one rollout."""
    episode_length: int = 512
    """Questions per training episode, a window of the train stream from a random start (as the MAPPO learner)."""
    learning_rate: float = 3e-3
    """Adam learning rate of the actor and the critic (3e-3 against 1e-3 on bbh5's validation split)."""
    update_epochs: int = 4
    """Passes of PPO over each rollout."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    clip_coef: float = 0.2
    """PPO clipping range of the probability ratio."""
    ent_coef: float = 0.0
    """Entropy bonus of the Beta policy (its differential entropy, which is negative when concentrated)."""
    vf_coef: float = 0.5
    """Weight of the critic's loss."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip of each network."""
    hidden_size: int = 64
    """Width of the two hidden layers of the actor and the critic."""
    initial_concentration: float = 5.0
    """The untrained policy's Beta concentration kappa (alpha = 1 + kappa mu, beta = 1 + kappa (1 - mu), mu = 1/2 at
    the start): every weight starts near 1/2, so the first answers are near the mean vote, with a spread of about
    1 / (2 sqrt(kappa + 3)) around it (5: about 0.18; 5 against 20 on bbh5's validation split)."""
    checkpoints: int = 5
    """Evenly spaced points of the budget (and the start) at which the mean policy plays the validation split; the
    one with the best mean reward there is the run's policy."""
    threads: int = 1
    """torch.set_num_threads."""
    env: dict[str, Any] = field(default_factory=dict)
    """Environment options added to the RLAE game's (``decider=False``, ``fusion_action="weights"``, the context
    extras, ``reward_history=0``; see :meth:`env_options`), e.g. ``{"alpha": 0.5}``."""

    def __post_init__(self) -> None:
        if self.algorithm not in RLAE_ALGORITHMS:
            raise ValueError(f"algorithm={show(self.algorithm)} is not one of {', '.join(RLAE_ALGORITHMS)}")
        for item in fields(self):
            value = getattr(self, item.name)
            if item.type == "int":
                low = 0 if item.name == "seed" else 1
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    raise ValueError(f"{item.name} must be an integer >= {low}, got {show(value)}")
            elif item.type == "float":
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise ValueError(f"{item.name} must be a finite number, got {show(value)}")
                positive = item.name not in ("ent_coef",)
                if positive and value <= 0:
                    raise ValueError(f"{item.name} must be > 0, got {show(value)}")
            if item.name in RLAE_LIMITS and value > RLAE_LIMITS[item.name]:
                raise ValueError(f"{item.name}={show(value)} is above its limit of {RLAE_LIMITS[item.name]:,}")
        if not isinstance(self.env, dict):
            raise ValueError(f"env must be a table of environment options, got {show(self.env)}")
        fixed = {"decider", "fusion_action", "fusion_agents"} & set(self.env)
        if fixed:
            raise ValueError(f"env: {', '.join(sorted(fixed))} are set by the algorithm; drop them")
        known = {item.name for item in fields(EnvConfig)} | {"split", "order", "episode_length"}
        unknown = sorted(set(self.env) - known)
        if unknown:
            raise ValueError(f"env: unknown environment option {unknown[0]!r}")
        if {"split", "order", "episode_length"} & set(self.env):
            raise ValueError("env: split, order and episode_length are set by the learner; drop them")

    def env_options(self, *, has_features: bool) -> dict[str, Any]:
        """The environment options of the run: the RLAE game and its context (task one-hot, and the cache's features
        when it has them), then ``env``. ``reward_history=0``: each question is a one-step bandit."""
        agents = "one" if self.algorithm == "rlae_ppo" else "per_model"
        return {**rlae_game(agents, has_features=has_features), **self.env}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rlae_config_from_dict(values: dict[str, Any], where: str = "config") -> RLAEConfig:
    """An :class:`RLAEConfig` from a dict of its fields; an unknown key or a bad value raises ValueError naming
    ``where``, the field and the value."""
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a table of RLAE options, got {show(values)}")
    names = [item.name for item in fields(RLAEConfig)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown RLAE option {unknown[0]!r}; the options are {', '.join(names)}")
    cleaned = dict(values)
    for item in fields(RLAEConfig):
        value = values.get(item.name)
        if item.type == "float" and isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2**53:
            cleaned[item.name] = float(value)
    try:
        return RLAEConfig(**cleaned)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


def load_rlae_config(path: str | Path) -> RLAEConfig:
    """Read an RLAE config file: TOML (``.toml``) or JSON (anything else), an object of :class:`RLAEConfig` fields."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file; a config is a TOML or JSON file")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size:,} bytes, more than a config's {MAX_CONFIG_BYTES:,}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: a config is UTF-8 text (TOML or JSON); byte {error.start} is not") from None
    try:
        if path.suffix == ".toml":
            try:
                import tomllib as toml  # Python >= 3.11
            except ModuleNotFoundError:  # pragma: no cover - Python 3.10
                try:
                    import tomli as toml
                except ModuleNotFoundError:
                    raise ValueError(f"{path}: TOML needs Python >= 3.11 or tomli; a JSON config works") from None
            values = toml.loads(text)
        else:
            values = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{path}: cannot parse the config ({show(str(error), 300)})") from None
    return rlae_config_from_dict(values, where=str(path))
