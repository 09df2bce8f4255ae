"""The residual decider (``decider_policy="residual"``): the index decider plus a network that reads the task's record.

:class:`ResidualLogits` scores team k with the index of :class:`~ensemble_mappo.team_logits.IndexLogits` (a shrunk mean
of the team's own record and an uncertainty term, every constant learned), which it holds (``index``), plus ``g(x_k)``:
one small network, shared by every team, of what the record shows of the team *and of its members*::

    logit_k = index_k + g(x_k),    x_k = [r_k, c_k, z_k / N, members' rates (mean, min, max),
                                          members' count features (mean, min, max), the best rate seen, c_task]

r_k and c_k are team k's own rate and count feature (``team_record``, ``team_record_count``), the members' rates and
counts are the per-model record (``task_record``: model i's rate on the questions whose answering team held it, and
its count feature), "the best rate seen" is the largest rate of a team seen at least once and c_task the count
feature of the task's answered questions. Under partial feedback a team that was never played has no record of its
own, but its members may have one (each was in some played team): g can read them, which the index cannot, so that
observing one team informs every team that shares its members (what :func:`~ensemble_env.baselines.bayes` does
with a prior covariance). g sees no model's identity (no member bits): a fixed team can only come from the index's
per-team prior, so the network cannot learn one; it can only learn to read records.

At the start g's output layer is zero: the decider is exactly the index decider at its start (the size prior, uniform
over the teams at ``initial_prob`` 0.5), and encodes no rule. :attr:`ResidualLogits.residual` (1, or 0 to switch the
network off) scales g: the same checkpoint with the network off is the index decider with the constants the run
learned, which measures the network's share (``decider_residual_gain=0``: the benchmark's ``mappo(residual off)``).
:class:`TeamResidualActor` is the team decider's categorical head (:class:`~ensemble_mappo.networks.TeamActor`)
composed with these logits.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from ensemble_mappo.layers import layer_init
from ensemble_mappo.networks import TeamActor
from ensemble_mappo.team_logits import IndexLogits, team_masks

__all__ = ["RESIDUAL_FEATURES", "RESIDUAL_GAIN", "ResidualLogits", "TeamResidualActor"]

#: the default multiple of g's output added to the index (``TrainConfig.decider_residual_gain``; a smaller gain
#: moves the network's share more slowly under Adam)
RESIDUAL_GAIN = 1.0
#: the features g reads of each team, in order
RESIDUAL_FEATURES = (
    "rate",
    "count",
    "size",
    "members_rate_mean",
    "members_rate_min",
    "members_rate_max",
    "members_count_mean",
    "members_count_min",
    "members_count_max",
    "best_rate_seen",
    "task_count",
)


class ResidualLogits(nn.Module):
    """The index of each team's record plus a network of each team's and its members' record (see the module
    docstring): (B, K) logits of the decider's prepared inputs.

    Parameters
    ----------
    layout
        The decider's observation layout (``venv.layout.decider``): it must hold ``task_record`` and ``team_record``
        (the record extras of tasks never seen).
    teams
        The (K, N) team masks (:func:`~ensemble_mappo.team_logits.team_masks`).
    hidden
        Width of g's two hidden layers.
    initial_prob
        The size prior the index starts at (:class:`~ensemble_mappo.team_logits.IndexLogits`).
    gain
        The multiple of g's output added to the index (the config's ``decider_residual_gain``; 0: the network off).
    """

    members: Tensor  # (K, N) bool: team k's members
    member_positions: Tensor  # (K * N,) the models of team k at [k * N, (k + 1) * N), its first repeated to fill them
    residual: Tensor  # () the multiple of g's output added to the index

    def __init__(
        self,
        layout: Mapping[str, slice],
        teams: Tensor,
        hidden: int = 64,
        initial_prob: float = 0.5,
        *,
        gain: float = RESIDUAL_GAIN,
    ) -> None:
        super().__init__()
        self.index = IndexLogits(layout, teams, initial_prob, policy="residual")
        if "task_record" not in layout:
            raise ValueError(
                "decider_policy='residual' reads the models' record: the decider's extras must include 'task_record' "
                "and 'team_record' (ensemble_env/EnsembleUnseen-v1 and -v2 have them)"
            )
        n_models = teams.shape[1]
        record = layout["task_record"]
        self.task_count_column = record.start
        self.model_rates = slice(record.start + 1, record.start + 1 + n_models)
        self.model_counts = layout.get("task_record_count")  # None under full feedback: every model's count is n
        self.register_buffer("members", teams.bool(), persistent=False)
        # each team's members, padded to N with its first member (a repeat changes no min or max): (K * N,) positions
        padded = [[i for i in range(n_models) if team[i]] for team in teams.tolist()]
        positions = [row + row[:1] * (n_models - len(row)) for row in padded]
        self.register_buffer("member_positions", torch.tensor(positions).flatten(), persistent=False)
        self.register_buffer("residual", torch.full((), float(gain)), persistent=False)
        self.g = nn.Sequential(
            layer_init(nn.Linear(len(RESIDUAL_FEATURES), hidden)),
            nn.ReLU(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.ReLU(),
            layer_init(nn.Linear(hidden, 1), gain=0.0),  # zero: the start is the index decider's
        )

    def features(self, inputs: Tensor) -> Tensor:
        """(B, K, F) the features of :data:`RESIDUAL_FEATURES` of every team."""
        index = self.index
        rates = inputs[:, index.rate_slice]  # (B, K)
        counts = inputs[:, index.count_slice].expand_as(rates)
        task_count = inputs[:, self.task_count_column : self.task_count_column + 1]  # (B, 1)
        model_rates = inputs[:, self.model_rates]  # (B, N)
        model_counts = task_count.expand_as(model_rates) if self.model_counts is None else inputs[:, self.model_counts]
        sizes = index.sizes  # (K,)
        members = self.members  # (K, N)

        def member_stats(values: Tensor) -> list[Tensor]:
            mean = (values @ members.T.float()) / sizes
            spread = values.index_select(1, self.member_positions).view(len(values), *members.shape)  # (B, K, N)
            return [mean, spread.amin(-1), spread.amax(-1)]

        seen = counts > 0
        best = torch.where(seen, rates, 0.0).amax(-1, keepdim=True).expand_as(rates)
        columns = [
            rates,
            counts,
            (sizes / members.shape[1]).expand_as(rates),
            *member_stats(model_rates),
            *member_stats(model_counts),
            best,
            task_count.expand_as(rates),
        ]
        return torch.stack(columns, -1)

    def forward(self, inputs: Tensor) -> Tensor:
        residual = self.residual * self.g(self.features(inputs)).squeeze(-1)
        return self.index(inputs) + residual

    def prior_logits(self) -> Tensor:
        """(K,) the index's logits before the task's first answer (g's output starts at zero): the size prior."""
        return self.index.prior_logits()


class TeamResidualActor(TeamActor):
    """The residual decider: the team decider's categorical head composed with :class:`ResidualLogits`.

    Parameters
    ----------
    layout, hidden, gain
        As :class:`ResidualLogits`'.
    n_models
        N, the pool's size.
    min_team_size, initial_prob
        The smallest team it may play, and the size prior it starts at.
    """

    logits: ResidualLogits

    def __init__(
        self,
        layout: Mapping[str, slice],
        n_models: int,
        hidden: int = 64,
        min_team_size: int = 0,
        initial_prob: float = 0.5,
        *,
        gain: float = RESIDUAL_GAIN,
    ) -> None:
        teams = team_masks(n_models, min_team_size, initial_prob)
        super().__init__(ResidualLogits(layout, teams, hidden, initial_prob, gain=gain), teams, min_team_size)
