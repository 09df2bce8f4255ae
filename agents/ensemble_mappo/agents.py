"""The learnable parts of MAPPO (:class:`Agents`: two actors, the critic, its value normaliser).

To add a network: give :class:`Agents` a field, build it in :meth:`Agents.build` and list it in
:meth:`Agents.networks` (checkpoints save it; the optimizer holds it under that name, and
:meth:`ensemble_mappo.mappo.MAPPOLearner.phase` names it among the networks that step), then give it a term in
:meth:`ensemble_mappo.mappo.MAPPOLearner.loss`, the one place MAPPO's loss is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch import Tensor, nn

from ensemble_env.game.actions import MAX_SUBSET_MODELS
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_mappo.networks import (
    CentralCritic,
    DeciderActor,
    FusionActor,
    LocalCritics,
    TeamActor,
    TeamDeciderActor,
    TeamIndexActor,
    TeamScorerActor,
    ValueNormalizer,
)
from ensemble_mappo.ppo import Rollout
from ensemble_mappo.residual import TeamResidualActor

__all__ = ["Agents"]


@dataclass
class Agents:
    """The learnable parts of MAPPO: the two actors, the centralized critic and its value normaliser."""

    decider: DeciderActor | TeamActor
    fusion: FusionActor
    critic: CentralCritic | LocalCritics
    value_norm: ValueNormalizer

    @classmethod
    def build(
        cls,
        venv: EnsembleVectorEnv,
        hidden: int,
        decider_initial_prob: float = 0.5,
        critic: str = "central",
        decider_policy: str = "auto",
        residual_gain: float = 1.0,
        fusion_team_size: bool = False,
    ) -> Agents:
        """Networks sized for ``venv``'s observations (the global torch seed decides the initial weights).

        The decider's greedy and played teams honour the environment's ``min_team_size``. ``critic``:
        "central" (MAPPO: one critic of the state) or "local" (IPPO: :class:`LocalCritics`, each agent's
        values from its own observation). ``decider_initial_prob``: each model's probability of being in the
        untrained decider's team (either policy). ``decider_policy``: "bernoulli" (:class:`DeciderActor`), "teams"
        (:class:`TeamDeciderActor`, a categorical over the non-empty teams), "scorer" (:class:`TeamScorerActor`,
        the same categorical scored per team from the task's record), "index" (:class:`TeamIndexActor`, the same
        categorical, each team's logit an index of its record with learned constants), "residual"
        (:class:`~ensemble_mappo.residual.TeamResidualActor`, the index plus a network of the team's and its members'
        record, its network's output times ``residual_gain``) or "auto" (teams for pools of up to
        :data:`ensemble_env.game.actions.MAX_SUBSET_MODELS` models). The four team deciders are one categorical head
        (:class:`~ensemble_mappo.networks.TeamActor`) around each's logits module (``decider.logits``,
        :mod:`ensemble_mappo.team_logits`). ``fusion_team_size``: the fusion agent also reads its team's size
        (:class:`FusionActor`'s ``team_size``).
        """
        layout = venv.layout
        if critic == "local":
            critics: CentralCritic | LocalCritics = LocalCritics(layout.decider_size, layout.fusion_size, hidden)
        else:
            critics = CentralCritic(layout.decider_size + layout.fusion_size, hidden)
        min_size = venv.config.min_team_size
        if decider_policy == "auto":
            decider_policy = "teams" if venv.n_models <= MAX_SUBSET_MODELS else "bernoulli"
        decider: DeciderActor | TeamActor
        if decider_policy == "teams":
            decider = TeamDeciderActor(layout.decider_size, venv.n_models, hidden, min_size, decider_initial_prob)
        elif decider_policy == "scorer":
            decider = TeamScorerActor(
                layout.decider, layout.decider_size, venv.n_models, hidden, min_size, decider_initial_prob
            )
        elif decider_policy == "index":
            decider = TeamIndexActor(layout.decider, venv.n_models, min_size, decider_initial_prob)
        elif decider_policy == "residual":
            decider = TeamResidualActor(
                layout.decider, venv.n_models, hidden, min_size, decider_initial_prob, gain=residual_gain
            )
        elif decider_policy == "bernoulli":
            decider = DeciderActor(layout.decider_size, venv.n_models, hidden, decider_initial_prob, min_size)
        else:
            raise ValueError(
                f"decider_policy={decider_policy!r} is not 'auto', 'teams', 'scorer', 'index', 'residual' or "
                "'bernoulli'"
            )
        return cls(
            decider=decider,
            fusion=FusionActor(layout.fusion, venv.n_models, venv.max_choices, team_size=fusion_team_size),
            critic=critics,
            value_norm=ValueNormalizer(),
        )

    def modules(self) -> dict[str, nn.Module]:
        """Everything a checkpoint saves, by name: the networks and the value normaliser."""
        return {**self.networks(), "value_norm": self.value_norm}

    def networks(self) -> dict[str, nn.Module]:
        """The networks with parameters: the two actors and the critic."""
        return {"decider": self.decider, "fusion": self.fusion, "critic": self.critic}

    def state_dict(self) -> dict[str, dict[str, Tensor]]:
        return {name: module.state_dict() for name, module in self.modules().items()}

    def load_state_dict(self, state: Mapping[str, Mapping[str, Tensor]]) -> None:
        """Load saved networks; a checkpoint of local critics (IPPO) replaces a central one and vice versa."""
        saved = state["critic"]
        if "decider_net.0.weight" in saved and isinstance(self.critic, CentralCritic):
            decider, fusion = saved["decider_net.0.weight"].shape[1], saved["fusion_net.0.weight"].shape[1]
            self.critic = LocalCritics(decider, fusion, saved["decider_net.0.weight"].shape[0])
        elif "net.0.weight" in saved and isinstance(self.critic, LocalCritics):
            self.critic = CentralCritic(saved["net.0.weight"].shape[1], saved["net.0.weight"].shape[0])
        for name, module in self.modules().items():
            module.load_state_dict(state[name])

    def value(self, states: Tensor) -> Tensor:
        """Denormalised critic outputs (B, H), one column per head of ``VALUE_HEADS`` (returns' units)."""
        return self.value_norm.denormalize(self.critic(states))

    def rollout(self, venv: EnsembleVectorEnv, num_steps: int) -> Rollout:
        """Storage for ``num_steps`` steps of ``venv``'s copies, sized for these networks' inputs."""
        layout = venv.layout
        sizes = {"decider": layout.decider_size, "fusion": self.fusion.input_size}
        return Rollout.allocate(
            num_steps, venv.num_envs, sizes, layout.decider_size + layout.fusion_size, venv.n_models
        )
