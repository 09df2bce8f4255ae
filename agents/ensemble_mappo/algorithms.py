"""The algorithm registry: every learner the frame trains, one entry each (BenchMARL's ``algorithms`` registry).

An entry names the algorithm's config class (a :class:`~ensemble_mappo.config.LearnerConfig`), the fields the entry
fixes (IPPO is MAPPO's config with ``critic="local"``), and its learner, the class that supplies what differs
between algorithms (networks, env options, collection, loss) to the one loop of :func:`ensemble_mappo.training.train`.
The learner is named by import path, so this module, like the configs, imports no torch: ``ensemble-env train
--help`` reads the registry to show each algorithm's own defaults. ``train --algorithm``, ``evaluate``, ``plot`` and
``benchmark`` read this table and nothing else; adding an algorithm is one :func:`register` call (or one entry
here) and a file with its config and learner (docs/mappo.md, "Adding an algorithm").

>>> [entry.name for entry in ALGORITHMS.values()]
['mappo', 'ippo', 'rlae_ppo', 'rlae_mappo']
>>> name_of(get("ippo").make_config())
'ippo'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ensemble_env.text import show
from ensemble_mappo.config import LearnerConfig, TrainConfig, config_from_dict
from ensemble_mappo.rlae_config import RLAEConfig

__all__ = ["ALGORITHMS", "Algorithm", "get", "name_of", "register"]


@dataclass(frozen=True)
class Algorithm:
    """One learner of the frame: its name, config class, the fields it fixes, and its learner class."""

    name: str
    summary: str
    """One line for ``--help`` and the docs."""
    config: type[LearnerConfig] | str
    """Its config class (a :class:`~ensemble_mappo.config.LearnerConfig`), or ``"module:Class"`` (imported when first
    needed: an algorithm's own file may hold its config and its learner together)."""
    learner: str
    """``"module:Class"`` of its :class:`~ensemble_mappo.frame.Learner` (imported when a run starts: torch)."""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    """Fields of the config this entry sets (its identity among the entries of one config class)."""
    baselines: tuple[str, ...] = ()
    """Baselines ``evaluate`` adds next to a run of it (its competitors beyond the default list)."""
    budgets: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    """The benchmark's ``--budget`` levels other than ``default`` (the config's own passes): name -> (passes,
    checkpoints kept for the choice on validation)."""

    @property
    def config_class(self) -> type[LearnerConfig]:
        """The config class (imported from its module when given as ``"module:Class"``)."""
        return _imported(self.config) if isinstance(self.config, str) else self.config

    def make_config(self, **values: Any) -> LearnerConfig:
        """The entry's config: its class's defaults, ``values``, then the fixed fields (a clash is refused)."""
        clash = {key: value for key, value in values.items() if key in self.fixed and value != self.fixed[key]}
        if clash:
            raise ValueError(f"algorithm {self.name}: {', '.join(clash)} is set by the algorithm to {dict(self.fixed)}")
        return self.config_class(**{**values, **self.fixed})

    def from_dict(self, values: Mapping[str, Any], where: str = "config", *, merge_env: bool = True) -> LearnerConfig:
        """The entry's config from field values (a config file's or a run's), each checked; the fixed fields must be
        absent or equal."""
        if not isinstance(values, Mapping):
            raise ValueError(f"{where}: expected a table of training options (field = value), got {show(values)}")
        for key, value in self.fixed.items():
            if key in values and values[key] != value:
                raise ValueError(f"{where}: {key}={show(values[key])}, but {self.name} sets {key}={show(value)}")
        merged = {**values, **self.fixed}
        return config_from_dict(merged, where, merge_env=merge_env, config_class=self.config_class)

    def learner_class(self) -> Any:
        """The learner class (imports torch)."""
        return _imported(self.learner)

    def budget(self, name: str) -> tuple[float, int]:
        """(passes, kept checkpoints) of the benchmark's budget ``name``: ``default`` is the config's own passes with
        5 checkpoints chosen among on validation."""
        if name == "default":
            return float(self.make_config().passes), 5
        if name not in self.budgets:
            raise ValueError(f"budget {name!r} is not one of default, {', '.join(self.budgets)}")
        passes, checkpoints = self.budgets[name]
        return float(passes), int(checkpoints)

    @property
    def options(self) -> list[str]:
        """The config fields a user sets for this algorithm (its fixed ones and ``env`` aside)."""
        return [item.name for item in fields(self.config_class) if item.name not in self.fixed and item.name != "env"]


#: every algorithm, by name (the first is the default of ``train``)
ALGORITHMS: dict[str, Algorithm] = {}


def register(entry: Algorithm) -> Algorithm:
    """Add ``entry`` to :data:`ALGORITHMS` (a name registered twice is refused)."""
    if entry.name in ALGORITHMS:
        raise ValueError(f"algorithm {entry.name!r} is registered already")
    ALGORITHMS[entry.name] = entry
    return entry


#: the benchmark's shorter budgets (passes, kept checkpoints); its default is the config's passes with 5 checkpoints
MAPPO_BUDGETS = {"tiny": (2.0, 2), "quick": (40.0, 4)}
RLAE_BUDGETS = {"tiny": (1.0, 1), "quick": (10.0, 2)}

register(
    Algorithm(
        "mappo",
        "MAPPO: decider and fusion actors, a centralized critic of the state (RL-Focal's two agents)",
        TrainConfig,
        "ensemble_mappo.mappo:MAPPOLearner",
        {"critic": "central"},
        budgets=MAPPO_BUDGETS,
    )
)
register(
    Algorithm(
        "ippo",
        "IPPO: MAPPO's actors, each agent's critic reads its own observation only",
        TrainConfig,
        "ensemble_mappo.mappo:MAPPOLearner",
        {"critic": "local"},
        budgets=MAPPO_BUDGETS,
    )
)
register(
    Algorithm(
        "rlae_ppo",
        "RLAE's PPO: one agent sets the N ensemble weights per question (arXiv 2506.00439)",
        RLAEConfig,
        "ensemble_mappo.rlae:RLAELearner",
        {"algorithm": "rlae_ppo"},
        ("per_task_weights", "per_question_weights"),
        RLAE_BUDGETS,
    )
)
register(
    Algorithm(
        "rlae_mappo",
        "RLAE's MAPPO: one agent per model sets its weight, a shared actor and a centralized critic",
        RLAEConfig,
        "ensemble_mappo.rlae:RLAELearner",
        {"algorithm": "rlae_mappo"},
        ("per_task_weights", "per_question_weights"),
        RLAE_BUDGETS,
    )
)


def _imported(path: str) -> Any:
    """The object ``"module:name"`` names."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def get(name: str) -> Algorithm:
    """The entry ``name``; a ValueError listing the algorithms otherwise."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {show(name)}; the algorithms are {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def name_of(config: LearnerConfig) -> str:
    """The name of the algorithm ``config`` configures: the entry of its class whose fixed fields it holds."""
    for entry in ALGORITHMS.values():
        if type(config) is entry.config_class and all(getattr(config, k) == v for k, v in entry.fixed.items()):
            return entry.name
    raise ValueError(f"no registered algorithm has a config like {type(config).__name__}")


def learner_of(config: LearnerConfig) -> Any:
    """The learner class of the algorithm ``config`` configures (imports torch)."""
    return get(name_of(config)).learner_class()
