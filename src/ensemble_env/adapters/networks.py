"""A fusion network for the per-choice observation: one scorer shared over the choices, starting as the mean vote.

PyTorch, imported only when a network is built (``import ensemble_env.adapters.networks`` works without it). The
network reads the per-choice fusion observation of :class:`~ensemble_env.adapters.wrappers.PerChoiceFusion` and
gives one logit per choice::

    logit_c = scale * mean_c + g([probs_1c .. probs_Nc, mean_c, valid_c, tail])

with ``g`` a small MLP shared by every choice (``tail``: the team mask and the fusion extras, e.g. the task) whose
last layer starts at zero, and ``scale`` a learned temperature (start: :data:`START_SCALE`). At the start the
greedy answer is the argmax of the team's mean probability, the mean vote; the scorer learns from there which
member to trust on which task. Because ``g`` is shared, what it learns on one choice position holds on every
other one, which a flat MLP over the N x C block has to learn C times. The libraries mask invalid choices
themselves (MaskablePPO, ``MaskedCategorical``, BenchMARL's masks).

Builders, one per library: :func:`per_choice_scorer` (a plain ``torch.nn.Module``; TorchRL, BenchMARL) and
:func:`sb3_policy` with :func:`sb3_policy_kwargs`
(``MaskablePPO(sb3_policy(), env, policy_kwargs=sb3_policy_kwargs(layout))``).

For a decider whose action is a team index (``decider_action="subset"``: BenchMARL, SuperSuit), :func:`team_scorer`
gives the 2**N - 1 team logits as a sum of per-model scores, ``logit_k = sum_i bit_i(k + 1) * s_i(obs)``: the
categorical over teams is then N independent Bernoullis conditioned on a non-empty team, the parametrisation of
the decider in the paper, SB3 and TorchRL. What it learns of one model (bad on this task) moves every team that
holds it, where a free logit per team has to learn each of the 2**N - 1 apart. ``s``'s last layer starts at
zero: the start is the uniform team, as BenchMARL's own MLP.
"""

from __future__ import annotations

import functools
from typing import Any

from ensemble_env.adapters import require
from ensemble_env.adapters.wrappers import PerChoiceLayout

__all__ = ["START_SCALE", "per_choice_scorer", "sb3_policy", "sb3_policy_kwargs", "scorer_for", "team_scorer"]

#: the scorer's starting temperature on the team's mean probability: a softmax over 10 x mean is close to
#: the mean vote's argmax yet still samples near-ties
START_SCALE = 10.0


@functools.cache
def _scorer_class() -> type:
    require("torch", "torchrl")
    import torch
    from torch import nn

    class PerChoiceScorer(nn.Module):
        """(..., per-choice observation size) -> (..., C) logits; see the module docstring."""

        def __init__(self, n_models: int, n_choices: int, size: int, hidden: int, scale: float) -> None:
            super().__init__()
            self.n_choices, self.row_size = n_choices, n_models + 2
            self.rows_size = n_choices * self.row_size
            tail = size - self.rows_size
            if tail < n_models:
                raise ValueError(
                    f"a per-choice observation of {size} entries cannot hold {n_choices} rows of {self.row_size} "
                    f"and the team mask ({n_models}): is it the per-choice view (fusion_view='per_choice')?"
                )
            self.shared = nn.Sequential(
                nn.Linear(self.row_size + tail, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
            )
            self.out = nn.Linear(hidden, 1)
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)
            self.scale = nn.Parameter(torch.tensor(float(scale)))

        def forward(self, observation: torch.Tensor) -> torch.Tensor:
            batch = observation.shape[:-1]
            rows = observation[..., : self.rows_size].reshape(*batch, self.n_choices, self.row_size)
            tail = observation[..., self.rows_size :].unsqueeze(-2).expand(*batch, self.n_choices, -1)
            correction = self.out(self.shared(torch.cat([rows, tail], dim=-1))).squeeze(-1)
            return self.scale * rows[..., -2] + correction

    PerChoiceScorer.__module__ = __name__
    return PerChoiceScorer


def per_choice_scorer(layout: PerChoiceLayout, hidden: int = 32, scale: float = START_SCALE) -> Any:
    """The per-choice scorer (a ``torch.nn.Module``) for observations of ``layout``; see the module docstring."""
    return scorer_for(layout.n_models, layout.n_choices, layout.size, hidden, scale)


def scorer_for(n_models: int, n_choices: int, size: int, hidden: int = 32, scale: float = START_SCALE) -> Any:
    """:func:`per_choice_scorer` from the layout's sizes: N models, C choices, ``size`` observation entries."""
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
        raise ValueError(f"hidden must be an integer >= 1, got {hidden!r}")
    return _scorer_class()(n_models, n_choices, size, hidden, scale)


@functools.cache
def _team_scorer_class() -> type:
    require("torch", "torchrl")
    import torch
    from torch import nn

    from ensemble_env.game.actions import subset_masks

    class TeamScorer(nn.Module):
        """(..., observation size) -> (..., 2**N - 1) team logits, a sum of per-model scores; see the module
        docstring."""

        def __init__(self, n_models: int, size: int, hidden: int) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(size, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
            self.out = nn.Linear(hidden, n_models)
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)
            self.register_buffer("bits", torch.from_numpy(subset_masks(n_models).astype("float32")))

        def forward(self, observation: torch.Tensor) -> torch.Tensor:
            return self.out(self.net(observation)) @ self.bits.T

    TeamScorer.__module__ = __name__
    return TeamScorer


def team_scorer(n_models: int, size: int, hidden: int = 64) -> Any:
    """The decider's factorised team logits (a ``torch.nn.Module``) over ``size`` observation entries, for the
    subset encoding of ``n_models`` models; see the module docstring."""
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
        raise ValueError(f"hidden must be an integer >= 1, got {hidden!r}")
    return _team_scorer_class()(n_models, size, hidden)


@functools.cache
def _sb3_classes() -> tuple[type, type]:
    require("stable_baselines3", "sb3")
    require("sb3_contrib", "sb3")
    import torch
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class PerChoiceExtractor(BaseFeaturesExtractor):
        """SB3 features: the C logits of a :func:`per_choice_scorer`."""

        def __init__(self, observation_space: Any, layout: PerChoiceLayout, hidden: int = 32) -> None:
            super().__init__(observation_space, layout.n_choices)
            self.scorer = per_choice_scorer(layout, hidden)

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.scorer(observations)

    class PerChoicePolicy(MaskableActorCriticPolicy):
        """MaskablePPO's policy with the scorer's logits as the action logits: ``action_net`` is the identity
        (frozen); the value is an MLP over the logits of its own scorer (``share_features_extractor=False``)."""

        def _build(self, lr_schedule: Any) -> None:
            super()._build(lr_schedule)
            with torch.no_grad():
                self.action_net.weight.copy_(torch.eye(self.action_net.out_features))
                self.action_net.bias.zero_()
            self.action_net.requires_grad_(False)

    PerChoiceExtractor.__module__ = PerChoicePolicy.__module__ = __name__
    return PerChoiceExtractor, PerChoicePolicy


def sb3_policy_kwargs(layout: PerChoiceLayout, hidden: int = 32) -> dict[str, Any]:
    """``MaskablePPO(sb3_policy(), env, policy_kwargs=...)`` arguments for a fuser over the per-choice view."""
    extractor, _ = _sb3_classes()
    return {
        "features_extractor_class": extractor,
        "features_extractor_kwargs": {"layout": layout, "hidden": hidden},
        "share_features_extractor": False,
        "net_arch": {"pi": [], "vf": [64, 64]},
        "ortho_init": False,
    }


def sb3_policy() -> type:
    """The MaskablePPO policy class of the per-choice fuser (its ``action_net`` frozen as the identity)."""
    return _sb3_classes()[1]
