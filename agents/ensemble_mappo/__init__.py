"""ensemble_mappo: the reference MAPPO learner for ensemble_env (RL-Focal's two agents, a centralized critic).

Install a torch >= 2.1 first (CPU build: ``pip install torch --index-url https://download.pytorch.org/whl/cpu``; the
README says how on each machine), then the ``mappo`` extra: ``pip install -e ".[mappo]"``.

- :class:`DeciderActor` (one Bernoulli per model) and :class:`FusionActor` (a categorical over the valid
  choices), both :class:`Actor`; :class:`CentralCritic` on ``venv.state()``; :class:`ValueNormalizer`.
- :func:`agent_targets` (each agent's advantages: the decider earns r_{t+1}, the fusion agent r_t),
  :func:`compute_gae`, :func:`clipped_policy_loss`, :func:`clipped_value_loss` (MAPPO's loss is written in
  one place, ``MAPPOLearner.loss``; its statistics by name: :class:`UpdateStats`); the optimizer,
  :class:`FlatAdam` (fused, the default) or :class:`TorchAdam` (plain ``torch.optim.Adam``).
- The learner frame: one loop for every algorithm of :data:`ALGORITHMS` (MAPPO, IPPO, RLAE's two), each a
  :class:`Learner` (:mod:`ensemble_mappo.frame`) with its config (:class:`TrainConfig`, :class:`RLAEConfig`, over
  :class:`LearnerConfig`): :func:`train` (one iteration in order: collect, advantages, PPO epochs, log and
  checkpoint), :func:`evaluate_run`, :func:`evaluate_agents`; the ``ensemble-env train | evaluate | plot |
  benchmark`` commands of :mod:`ensemble_mappo.cli` wrap them.

Only :mod:`ensemble_mappo.config`, :mod:`ensemble_mappo.rlae_config`, :mod:`ensemble_mappo.algorithms` and
:mod:`ensemble_mappo.cli` are importable without torch (the command line builds its options from the configs);
the other names load torch on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ALGORITHMS",
    "Actor",
    "CentralCritic",
    "DeciderActor",
    "Evaluation",
    "FlatAdam",
    "FusionActor",
    "Learner",
    "LearnerConfig",
    "RLAEConfig",
    "TeamDeciderActor",
    "TorchAdam",
    "TrainConfig",
    "UpdateStats",
    "ValueNormalizer",
    "agent_targets",
    "clipped_policy_loss",
    "clipped_value_loss",
    "compute_gae",
    "evaluate_agents",
    "evaluate_run",
    "load_checkpoint",
    "load_config",
    "save_checkpoint",
    "train",
]

_WHERE = {
    "Actor": "networks",
    "CentralCritic": "networks",
    "DeciderActor": "networks",
    "FusionActor": "networks",
    "TeamDeciderActor": "networks",
    "ValueNormalizer": "networks",
    "clipped_policy_loss": "ppo",
    "clipped_value_loss": "ppo",
    "compute_gae": "ppo",
    "agent_targets": "ppo",
    "UpdateStats": "ppo",
    "FlatAdam": "optim",
    "TorchAdam": "optim",
    "TrainConfig": "config",
    "LearnerConfig": "config",
    "RLAEConfig": "rlae_config",
    "ALGORITHMS": "algorithms",
    "Learner": "frame",
    "load_config": "config",
    "train": "training",
    "Evaluation": "evaluation",
    "evaluate_run": "evaluation",
    "evaluate_agents": "evaluation",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ensemble_mappo' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ensemble_mappo.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
