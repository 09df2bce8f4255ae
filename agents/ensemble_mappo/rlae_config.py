"""The configuration of the RLAE learners (``rlae_ppo``, ``rlae_mappo``): :class:`RLAEConfig`, over the shared base.

Torch-free, like :mod:`ensemble_mappo.config` (the command line imports it to build its options). It adds RLAE's own
fields to :class:`~ensemble_mappo.config.LearnerConfig` and re-declares the shared fields whose defaults differ from
MAPPO's; the learners are in :mod:`ensemble_mappo.rlae`; their settings were chosen on bbh5's validation split
(docs/rlae.md).

>>> config = RLAEConfig(algorithm="rlae_mappo")
>>> config.env_options(has_features=True)["fusion_agents"]
'per_model'
>>> config_from_dict({"algorithm": "rlae_ppo", "seed": 2}, config_class=RLAEConfig).seed
2
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ensemble_env.game.config import rlae_game
from ensemble_mappo.config import SHARED_RANGES, LearnerConfig, config_from_dict

__all__ = ["RLAE_ALGORITHMS", "RLAE_DEFAULTS", "RLAEConfig"]

#: the RLAE learners: one weighting agent (``fusion_agents="one"``) or one agent per model (``"per_model"``)
RLAE_ALGORITHMS = ("rlae_ppo", "rlae_mappo")


#: RLAE's defaults of the fields every learner shares, where they differ from MAPPO's (chosen on bbh5's validation
#: split, docs/rlae.md), each with the docstring the options and docs/rlae.md's table show (None: the shared one)
RLAE_DEFAULTS: dict[str, tuple[Any, str | None]] = {
    "passes": (
        80.0,
        "Budget in passes over the train stream (env steps = passes x train questions, rounded up to whole rollouts). "
        "80 passes over bbh5's 2,560 train questions are 100 updates; on its validation split (3 seeds) rlae_ppo's "
        "reward was still rising from 40 to 80 passes (docs/rlae.md).",
    ),
    "num_envs": (32, None),
    "num_steps": (64, None),
    "learning_rate": (
        3e-3,
        "Adam learning rate of the actor and the critic (3e-3 against 1e-3 on bbh5's validation split).",
    ),
    "update_epochs": (4, "Passes of PPO over each rollout."),
    "num_minibatches": (4, "Minibatches per epoch."),
    "ent_coef": (
        0.0,
        "Entropy bonus of the Beta policy (its differential entropy, which is negative when concentrated).",
    ),
    "max_grad_norm": (1.0, "Gradient-norm clip of each network."),
    "checkpoints": (
        5,
        "Evenly spaced points of the budget (and the start) at which the networks are kept; at the end of the run the "
        "mean policy of each plays the validation split and the best mean reward there (``selection``) is the run's "
        "policy.",
    ),
    "selection": (
        "best",
        'The rule that chooses the run\'s policy on the validation split: the highest mean reward ("best").',
    ),
}


@dataclass(frozen=True)
class RLAEConfig(LearnerConfig, defaults=RLAE_DEFAULTS):
    """Hyperparameters of one RLAE run (``ensemble-env train --algorithm rlae_ppo|rlae_mappo``); its defaults of the
    shared fields are :data:`RLAE_DEFAULTS`."""

    algorithm: str = "rlae_ppo"
    """"rlae_ppo": one agent sets the N weights from the fusion observation (``fusion_agents="one"``). "rlae_mappo":
    N agents ``weight_i`` each set their model's weight from their own observation, one shared actor that also reads
    the agent's one-hot id, a centralized critic of ``state()``."""
    env: dict[str, Any] = field(default_factory=dict)
    """Environment options added to the RLAE game's (``decider=False``, ``fusion_action="weights"``, the context
    extras, ``reward_history=0``; see :meth:`env_options`), e.g. ``{"alpha": 0.5}``."""
    vf_coef: float = 0.5
    """Weight of the critic's loss."""
    initial_concentration: float = 5.0
    """The untrained policy's Beta concentration kappa (alpha = 1 + kappa mu, beta = 1 + kappa (1 - mu), mu = 1/2 at
    the start): every weight starts near 1/2, so the first answers are near the mean vote, with a spread of about
    1 / (2 sqrt(kappa + 3)) around it (5: about 0.18; 5 against 20 on bbh5's validation split)."""

    ALGORITHMS: ClassVar[dict[str, dict[str, Any]]] = {name: {} for name in RLAE_ALGORITHMS}
    RANGES: ClassVar[dict[str, tuple[float, float, bool]]] = {
        **SHARED_RANGES,
        "vf_coef": (0.0, math.inf, True),
        "initial_concentration": (0.0, 1e6, True),
    }
    RESERVED_ENV: ClassVar[tuple[tuple[str, ...], str]] = (
        ("decider", "fusion_action", "fusion_agents", "split", "order", "episode_length"),
        "set by the algorithm and the trainer",
    )

    def env_options(self, *, has_features: bool) -> dict[str, Any]:
        """The environment options of the run: the RLAE game and its context (task one-hot, and the cache's features
        when it has them), then ``env``. ``reward_history=0``: each question is a one-step bandit."""
        agents = "one" if self.algorithm == "rlae_ppo" else "per_model"
        return {**rlae_game(agents, has_features=has_features), **self.env}


def rlae_config_from_dict(values: dict[str, Any], where: str = "config") -> RLAEConfig:
    """An :class:`RLAEConfig` from a dict of its fields (:func:`~ensemble_mappo.config.config_from_dict`)."""
    return config_from_dict(values, where, config_class=RLAEConfig)
