"""Scripted policies that act from the agents' observations (batched), for demos, baselines and fixed roles.

They read the observation layout of an environment (``venv.layout`` of a vector env, or
``env.engine.layout`` of the PettingZoo env), so they see exactly what a learned agent sees.

>>> import numpy as np, ensemble_env
>>> venv = ensemble_env.vector_env(2)
>>> obs, _ = venv.reset(seed=0)
>>> fuse = MeanVote.from_env(venv)
>>> fuse(obs["fusion"]).shape
(2,)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.game.actions import encode_team
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.layout import ObservationLayout

__all__ = ["FixedTeam", "MeanVote", "PluralityVote"]


def _engine(env: Any) -> EnsembleVectorEnv:
    engine = getattr(env, "engine", env)
    if not isinstance(engine, EnsembleVectorEnv):
        raise TypeError(f"expected an ensemble_env environment, got {type(env).__name__}")
    return engine


@dataclass(frozen=True)
class MeanVote:
    """Fusion policy: argmax over the valid choices of the team members' summed probabilities.

    With an empty team every score is zero and the answer is the first valid choice.
    """

    layout: ObservationLayout
    n_models: int
    max_choices: int

    @classmethod
    def from_env(cls, env: Any) -> MeanVote:
        engine = _engine(env)
        return cls(engine.layout, engine.n_models, engine.max_choices)

    def scores(self, fusion_obs: np.ndarray) -> np.ndarray:
        obs = np.atleast_2d(fusion_obs)
        probs = obs[:, self.layout.fusion["probs"]].reshape(-1, self.n_models, self.max_choices)
        return probs.sum(axis=1)

    def __call__(self, fusion_obs: np.ndarray) -> np.ndarray:
        obs = np.atleast_2d(fusion_obs)
        valid = obs[:, self.layout.fusion["action_mask"]] > 0
        scores = np.where(valid, self.scores(obs), -np.inf)
        return np.argmax(scores, axis=1)


@dataclass(frozen=True)
class PluralityVote(MeanVote):
    """Fusion policy: each member votes its most probable valid choice; ties go to the lowest index."""

    def scores(self, fusion_obs: np.ndarray) -> np.ndarray:
        obs = np.atleast_2d(fusion_obs)
        probs = obs[:, self.layout.fusion["probs"]].reshape(-1, self.n_models, self.max_choices)
        valid = obs[:, self.layout.fusion["action_mask"]] > 0
        members = obs[:, self.layout.fusion["team_mask"]] > 0
        votes = np.argmax(np.where(valid[:, None, :], probs, -np.inf), axis=2)  # (B, N)
        counts = np.zeros((obs.shape[0], self.max_choices))
        rows = np.repeat(np.arange(obs.shape[0]), self.n_models)
        np.add.at(counts, (rows, votes.reshape(-1)), members.reshape(-1))
        return counts


@dataclass(frozen=True)
class FixedTeam:
    """Decider policy that always commits the same team, in the environment's action encoding."""

    team: np.ndarray
    encoding: str

    @classmethod
    def from_env(cls, env: Any, members: list[int | str] | None = None) -> FixedTeam:
        """``members``: model indices or names (default: every model)."""
        engine = _engine(env)
        team = np.zeros(engine.n_models, dtype=np.int8)
        if members is None:
            team[:] = 1
        else:
            team[[engine.cache.model_index(model) for model in members]] = 1
        return cls(team, engine.config.decider_action)

    def __call__(self, decider_obs: np.ndarray) -> np.ndarray:
        batch = np.atleast_2d(decider_obs).shape[0]
        return encode_team(np.tile(self.team, (batch, 1)), self.encoding)
