"""Named presets of the learners' configs: the settings a protocol of ``ensemble-env benchmark`` trains them with.

A :class:`Preset` names config fields and the values it gives them, checked when it is made: every field is one of
MAPPO's config (:class:`~ensemble_mappo.config.TrainConfig`), every value one that config takes (the config's own
checks, which name the field). A learner of another config takes the preset's fields it has
(:meth:`Preset.overrides`: the fields every learner shares, such as the rollout's shape and the checkpoint rule),
but for the preset's ``mappo_only`` fields: shared by the configs, chosen for MAPPO's learners alone.
Torch-free, like the configs. The benchmark's protocols (:mod:`ensemble_mappo.benchmark.protocols`) apply them:

- :data:`PARTIAL`, the learner under partial feedback (``--protocol unseen-tasks --feedback team``), with its budget
  :data:`PARTIAL_BUDGET_STEPS`;
- :data:`GENERATED`, the learner under ``--protocol generated`` (either feedback), with its budget
  :data:`GENERATED_BUDGET_STEPS`.

>>> PARTIAL.values["decider_policy"], GENERATED.values["decider_policy"]
('index', 'residual')
>>> from ensemble_mappo.rlae_config import RLAEConfig
>>> GENERATED.overrides(RLAEConfig)  # RLAE has no decider: the shared fields only
{'selection': 'trained', 'num_envs': 64, 'num_steps': 64, 'update_epochs': 5, 'num_minibatches': 8}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from ensemble_env.text import show
from ensemble_mappo.config import LearnerConfig, TrainConfig

__all__ = ["GENERATED", "GENERATED_BUDGET_STEPS", "PARTIAL", "PARTIAL_BUDGET_STEPS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """Named values of config fields, checked once when the preset is made (a field MAPPO's config lacks, or a value
    it refuses, is a ValueError naming the preset and the field); ``values`` is read-only. ``mappo_only`` names fields
    of ``values`` chosen for MAPPO's config (and IPPO's) alone: a learner of another config keeps its own value."""

    name: str
    values: Mapping[str, Any]
    mappo_only: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.values, Mapping):
            raise ValueError(f"preset {self.name}: values must be a table of config fields, got {show(self.values)}")
        known = {item.name for item in fields(TrainConfig)}
        unknown = sorted(set(self.values) - known)
        if unknown:
            raise ValueError(f"preset {self.name}: {', '.join(unknown)} is not a field of the learners' configs")
        stray = sorted(set(self.mappo_only) - set(self.values))
        if stray:
            raise ValueError(f"preset {self.name}: mappo_only names {', '.join(stray)}, which it does not set")
        if "algorithm" in self.values:
            raise ValueError(f"preset {self.name}: algorithm is the registry's to set, not a preset's")
        try:
            TrainConfig(**self.values)
        except (TypeError, ValueError) as error:
            raise ValueError(f"preset {self.name}: {error}") from None
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def overrides(self, config_class: type[LearnerConfig]) -> dict[str, Any]:
        """The preset's values of the fields ``config_class`` has (a new dict, in the preset's order); the
        ``mappo_only`` fields for MAPPO's config (and its subclasses) only."""
        names = {item.name for item in fields(config_class)}
        if not issubclass(config_class, TrainConfig):
            names -= self.mappo_only
        return {name: value for name, value in self.values.items() if name in names}


#: the learner's settings under partial feedback: a start that encodes no hand rule (the size prior at 0.5: uniform
#: over the teams, no KL to it) and the decider whose logit for each team is an index of what the record shows of it
#: with learned constants (``"index"``: ensemble_mappo.networks.TeamIndexActor), chosen over the team scorer
#: (``"scorer"``) on the training tasks of every fold (benchmarks/partial_selection.py, docs/benchmark.md); its rollouts
#: and epochs are the shape MAPPO's defaults had before issue 47 (64 copies x 64 steps, 5 epochs x 8 minibatches):
#: on the folds' inner held-out tasks -0.143 against -0.161 for the new defaults' 256 x 16, 2 x 4 and -0.151 for 4
#: epochs (its constants need the gradient steps: 2,560 at the default budget instead of 128)
PARTIAL = Preset(
    "partial",
    {
        "decider_start": "prior",
        "decider_kl_coef": 0.0,
        "decider_policy": "index",
        "model_permutations": 2,
        "gamma": 0.9,
        "selection": "trained",
        "num_envs": 64,
        "num_steps": 64,
        "update_epochs": 5,
        "num_minibatches": 8,
    },
)
#: the learners' budget under partial feedback, in env steps per ``--budget`` level (the training stream holds each
#: training task three times, as it is and in two model-permuted copies); the default's 262,144 steps (64 updates)
#: were chosen with the decider on the folds' training tasks (65,536: worse), and keep the whole bbh5 benchmark,
#: 4 folds x 5 seeds x 2 learners, within 30 CPU minutes (docs/benchmark.md)
PARTIAL_BUDGET_STEPS: dict[str, int] = {"tiny": 4096, "quick": 16384, "default": 262144}
#: what ``--protocol generated`` adds to the learners' settings (``protocols.learner_overrides``), under either
#: feedback: :data:`PARTIAL`'s start, rollouts and checkpoint rule, no model-permuted copies of the training tasks (the
#: generator already makes tasks plentiful: 800 a fold), and the residual decider (the index
#: plus a network of each team's and its members' record, ``ensemble_mappo.residual``) at a discount of 0.99, every
#: network 32 wide (MAPPO's and IPPO's only: RLAE's width was not chosen here and stays its own).
#: Chosen with ``benchmarks/partial_selection.py --protocol generated`` (200 further tasks of each fold's validation
#: stream, 4 folds x 2 seeds): the residual decider at 0.99 +0.021 reward per question at 64 wide and +0.022 at 32
#: (39 CPU s a run instead of 65), the best of every setting tried, none reaching etc_team's +0.030 there; the
#: settings tried and their rewards are in docs/benchmark.md's selection table (one place for them). Then the fusion
#: agent reading its team's size (``fusion_team_size``): +0.029 there over 3 seeds (the same selection), level with
#: etc_team; +0.022 over 5 seeds, 0.008 under it (seeds 3 and 4 score lower, for twice the steps as well).
GENERATED = Preset(
    "generated",
    {
        **PARTIAL.values,
        "model_permutations": 0,
        "decider_policy": "residual",
        "gamma": 0.99,
        "hidden_size": 32,
        "fusion_team_size": True,
    },
    mappo_only=frozenset({"hidden_size"}),
)
#: the learners' budget under ``--protocol generated``, in env steps per ``--budget`` level, under either feedback:
#: partial feedback's (:data:`PARTIAL_BUDGET_STEPS`), since passes over a fold's 800 generated training tasks (about
#: 160,000 questions) would be 25 million steps at full feedback's 160 passes
GENERATED_BUDGET_STEPS: dict[str, int] = dict(PARTIAL_BUDGET_STEPS)
