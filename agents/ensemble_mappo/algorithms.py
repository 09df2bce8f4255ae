"""The algorithm registry: every learner the frame trains, one entry each (BenchMARL's ``algorithms`` registry).

An entry names the algorithm's config class (a :class:`~ensemble_mappo.config.LearnerConfig`, whose
``ALGORITHMS`` holds the fields the entry fixes: IPPO is MAPPO's config with ``critic="local"``), and its learner,
the class that supplies what differs between algorithms (networks, env options, collection, loss) to the one loop of
:func:`ensemble_mappo.training.train`. The learner is named by import path, so this module, like the configs, imports
no torch: ``ensemble-env train --help`` reads the registry to show each algorithm's own defaults. ``train
--algorithm``, ``evaluate``, ``plot`` and ``benchmark`` read this table and nothing else; adding an algorithm is one
:func:`register` call (or one entry here) and a file with its config and learner (docs/mappo.md, "Adding an
algorithm").

A config names its algorithm (``config.algorithm``, set here when an entry builds it: :meth:`Algorithm.make_config`,
:meth:`Algorithm.from_dict`): every reader takes it from there. The one inference of an algorithm from a config's
fields is :func:`saved_name`, for a run saved before configs named theirs.

>>> [entry.name for entry in ALGORITHMS.values()]
['mappo', 'ippo', 'rlae_ppo', 'rlae_mappo']
>>> get("ippo").make_config().algorithm, get("ippo").fixed
('ippo', {'critic': 'local'})
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ensemble_env.text import show
from ensemble_mappo.config import LearnerConfig, TrainConfig, config_from_dict
from ensemble_mappo.rlae_config import RLAEConfig

__all__ = ["ALGORITHMS", "UNSEEN_GAMES", "Algorithm", "get", "learner_of", "register", "saved_name"]

#: how the benchmark poses an algorithm on tasks never seen (``Algorithm.unseen``): "decider", the scenario as it is
#: (its decider reads each team's record on the task); "weights", one weighting agent that reads each model's record
#: on the task instead of the task one-hot, every model answering. Any other value says why it is not posed (``NAME's
#: VALUE``: "per-model agents observe the task one-hot")
UNSEEN_GAMES = ("decider", "weights")


@dataclass(frozen=True)
class Algorithm:
    """One learner of the frame: its name, config class (with the fields it fixes), and its learner class."""

    name: str
    summary: str
    """One line for ``--help`` and the docs."""
    config: type[LearnerConfig] | str
    """Its config class (a :class:`~ensemble_mappo.config.LearnerConfig` whose ``ALGORITHMS`` names this entry and
    the fields it fixes), or ``"module:Class"`` (imported when first needed: an algorithm's own file may hold its
    config and its learner together)."""
    learner: str
    """``"module:Class"`` of its :class:`~ensemble_mappo.frame.Learner` (imported when a run starts: torch)."""
    baselines: tuple[str, ...] = ()
    """Baselines ``evaluate`` adds next to a run of it (its competitors beyond the default list)."""
    budgets: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    """The benchmark's ``--budget`` levels other than ``default`` (the config's own passes): name -> (passes,
    checkpoints kept for the choice on validation)."""
    unseen: str = "decider"
    """How ``ensemble-env benchmark --protocol unseen-tasks|generated`` poses it (one of :data:`UNSEEN_GAMES`:
    :func:`ensemble_mappo.benchmark.protocols.learner_overrides`), or why it is not posed."""

    @property
    def config_class(self) -> type[LearnerConfig]:
        """The config class (imported from its module when given as ``"module:Class"``)."""
        return _imported(self.config) if isinstance(self.config, str) else self.config

    @property
    def fixed(self) -> dict[str, Any]:
        """The fields of the config this entry fixes (its identity among the algorithms of one config class: its
        config class's ``ALGORITHMS``)."""
        table = self.config_class.ALGORITHMS
        if self.name not in table:
            raise ValueError(
                f"algorithm {self.name}: its config {self.config_class.__name__} does not configure it (its "
                f"ALGORITHMS are {', '.join(table) or 'none'})"
            )
        return dict(table[self.name])

    @property
    def sets(self) -> dict[str, Any]:
        """The fields the entry sets in its configs: ``algorithm`` (its name) and its fixed fields."""
        return {"algorithm": self.name, **self.fixed}

    def make_config(self, **values: Any) -> LearnerConfig:
        """The entry's config: its class's defaults, ``values``, then :attr:`sets` (a clash is refused)."""
        sets = self.sets
        clash = {key: value for key, value in values.items() if key in sets and value != sets[key]}
        if clash:
            raise ValueError(f"algorithm {self.name}: {', '.join(clash)} is set by the algorithm to {sets}")
        return self.config_class(**{**values, **sets})

    def from_dict(self, values: Mapping[str, Any], where: str = "config", *, merge_env: bool = True) -> LearnerConfig:
        """The entry's config from field values (a config file's or a run's), each checked; the fields the entry
        sets (:attr:`sets`: its name, its fixed fields) must be absent or equal."""
        if not isinstance(values, Mapping):
            raise ValueError(f"{where}: expected a table of training options (field = value), got {show(values)}")
        sets = self.sets
        for key, value in sets.items():
            if key in values and values[key] != value:
                raise ValueError(f"{where}: {key}={show(values[key])}, but {self.name} sets {key}={show(value)}")
        merged = {**values, **sets}
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
        """The config fields a user sets for this algorithm (the ones it sets and ``env`` aside)."""
        sets = self.sets
        return [item.name for item in fields(self.config_class) if item.name not in sets and item.name != "env"]


#: every algorithm, by name (the first is the default of ``train``)
ALGORITHMS: dict[str, Algorithm] = {}


def register(entry: Algorithm) -> Algorithm:
    """Add ``entry`` to :data:`ALGORITHMS` (a name registered twice is refused)."""
    if entry.name in ALGORITHMS:
        raise ValueError(f"algorithm {entry.name!r} is registered already")
    if not isinstance(entry.unseen, str) or not entry.unseen:
        raise ValueError(f"algorithm {entry.name!r}: unseen must be one of {', '.join(UNSEEN_GAMES)} or a reason")
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
        budgets=MAPPO_BUDGETS,
    )
)
register(
    Algorithm(
        "ippo",
        "IPPO: MAPPO's actors, each agent's critic reads its own observation only",
        TrainConfig,
        "ensemble_mappo.mappo:MAPPOLearner",
        budgets=MAPPO_BUDGETS,
    )
)
register(
    Algorithm(
        "rlae_ppo",
        "RLAE's PPO: one agent sets the N ensemble weights per question (arXiv 2506.00439)",
        RLAEConfig,
        "ensemble_mappo.rlae:RLAELearner",
        ("per_task_weights", "per_question_weights"),
        RLAE_BUDGETS,
        unseen="weights",
    )
)
register(
    Algorithm(
        "rlae_mappo",
        "RLAE's MAPPO: one agent per model sets its weight, a shared actor and a centralized critic",
        RLAEConfig,
        "ensemble_mappo.rlae:RLAELearner",
        ("per_task_weights", "per_question_weights"),
        RLAE_BUDGETS,
        unseen="per-model agents observe the task one-hot",
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


def learner_of(config: LearnerConfig) -> Any:
    """The learner class of the algorithm ``config`` names (``config.algorithm``; imports torch)."""
    return get(config.algorithm).learner_class()


def saved_name(saved: Mapping[str, Any]) -> str:
    """The algorithm of a run's saved config (``config.json``'s or a checkpoint's ``config``) whose file does not name
    it: the config's own ``algorithm``; a run written before configs named their algorithm (and before the registry,
    when MAPPO's config was the only one) is MAPPO's config, of the algorithm whose fixed fields it holds (a field it
    lacks at its default: ``critic="local"`` is IPPO). The one place an algorithm is inferred from a config's fields;
    a value of none of them is left to the entry's checks (the first entry of that config, which names the field)."""
    name = saved.get("algorithm")
    if isinstance(name, str) and name in ALGORITHMS:
        return name
    legacy = [entry for entry in ALGORITHMS.values() if entry.config_class is TrainConfig]
    defaults = TrainConfig()
    for entry in legacy:
        if all(saved.get(key, getattr(defaults, key)) == value for key, value in entry.fixed.items()):
            return entry.name
    return legacy[0].name
