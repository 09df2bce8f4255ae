"""What a team decider scores: modules that map the decider's prepared input (B, D) to one logit per team (B, K).

A team decider (:class:`~ensemble_mappo.networks.TeamActor`) is one categorical head over the K = 2**N - 1 non-empty
teams (the mask of the teams allowed, sampling, the mode, log-probabilities, entropy, the KL divergence from the start
policy) composed with one of these *logits modules*, as BenchMARL and TorchRL compose a model with a distribution
rather than subclass one policy per model. Each module maps a batch of decider observations to (B, K) unmasked
logits and tells its logits before the task's first answer (``prior_logits()``, the size prior at the start):

- :class:`MLPLogits` (``decider_policy="teams"``): an MLP of the whole observation, one output per team.
- :class:`ScorerLogits` (``"scorer"``): one network shared by the teams, of what the task's record shows of each.
- :class:`IndexLogits` (``"index"``): an index of each team's record, every constant learned.
- :class:`~ensemble_mappo.residual.ResidualLogits` (``"residual"``): the index plus a network of each team's and its
  members' record.

Team k (0-based) holds model i when bit i of k + 1 is set (:func:`team_masks`, the environment's ``"subset"``
encoding); every module starts at the size prior of ``initial_prob`` (:func:`size_prior`): each model in the team with
that probability, independently.

>>> teams = team_masks(2)
>>> teams.tolist(), size_prior(teams, 0.5).tolist()
([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [0.0, 0.0, 0.0])
>>> index = IndexLogits({"team_record": slice(0, 3), "task_record": slice(3, 6)}, teams, initial_prob=0.5)
>>> index(torch.rand(4, 6)).abs().max().item()  # the untrained index plays the size prior whatever the record
0.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, cast

import numpy as np
import torch
from torch import Tensor, nn

from ensemble_env.game.actions import MAX_SUBSET_MODELS, subset_masks
from ensemble_env.game.layout import count_of_feature
from ensemble_mappo.layers import layer_init, mlp

__all__ = [
    "INDEX_SCALES",
    "INDEX_START_PRIOR",
    "INDEX_START_PSEUDO_COUNT",
    "IndexLogits",
    "MLPLogits",
    "ScorerLogits",
    "TeamLogits",
    "record_slices",
    "size_prior",
    "team_masks",
]

#: :class:`IndexLogits`' step sizes: each of its quantities is this multiple of its parameter (Adam moves a parameter
#: by about ``learning_rate`` a step, 2,560 steps at the partial-feedback default budget, so these let each quantity
#: cross its range within a few hundred steps): the weight of the estimate (logits per unit of rate), the prior rate,
#: log n0, the uncertainty term's weight and the size bias
INDEX_SCALES = {"weight": 50.0, "prior": 2.0, "log_pseudo_count": 5.0, "bonus": 10.0, "size": 10.0}
#: :class:`IndexLogits`' start: the prior rate b_k and the pseudo-count n0 of every team
INDEX_START_PRIOR, INDEX_START_PSEUDO_COUNT = 0.5, 4.0


class TeamLogits(Protocol):
    """What a team decider's head reads of its logits module (an ``nn.Module``)."""

    def __call__(self, inputs: Tensor) -> Tensor:
        """(B, K) every team's logit at the prepared inputs (B, D), before the mask of the teams allowed."""
        ...

    def prior_logits(self) -> Tensor:
        """(K,) the logits before the task's first answer: the size prior at the start."""
        ...


def team_masks(n_models: int, min_team_size: int = 0, initial_prob: float = 0.5) -> Tensor:
    """The (2**N - 1, N) float 0/1 masks of the non-empty teams, in the environment's ``"subset"`` order, once a team
    decider's options are checked: ValueError for an ``initial_prob`` outside (0, 1), a pool of more than
    :data:`~ensemble_env.game.actions.MAX_SUBSET_MODELS` models or a ``min_team_size`` outside [0, N]."""
    if not 0.0 < initial_prob < 1.0:
        raise ValueError(f"initial_prob must be in (0, 1), got {initial_prob}")
    if not 1 <= n_models <= MAX_SUBSET_MODELS:
        raise ValueError(f"the team decider enumerates the teams of 1..{MAX_SUBSET_MODELS} models, got {n_models}")
    if not 0 <= min_team_size <= n_models:
        raise ValueError(f"min_team_size must be in [0, {n_models}], got {min_team_size}")
    return torch.from_numpy(subset_masks(n_models).astype(np.float32))


def size_prior(teams: Tensor, initial_prob: float) -> Tensor:
    """(K,) the size prior's logits: ``|k| * logit(initial_prob)`` for team k (each model in with ``initial_prob``,
    independently; uniform over the teams at 0.5)."""
    return teams.sum(-1) * math.log(initial_prob / (1.0 - initial_prob))


def record_slices(layout: Mapping[str, slice], policy: str) -> tuple[slice, slice]:
    """Where the decider's observation holds each team's record: (the rates, ``team_record``; the count features,
    ``team_record_count`` under partial feedback, else ``task_record``'s first entry, the task's count, which every
    team shares when every output is revealed). ValueError naming ``policy`` without the record extras."""
    if "team_record" not in layout or ("team_record_count" not in layout and "task_record" not in layout):
        raise ValueError(
            f"decider_policy={policy!r} reads the task's team record: the decider's extras must include "
            "'task_record' and 'team_record' (ensemble_env/EnsembleUnseen-v1 and -v2 have them)"
        )
    count = layout.get("team_record_count")
    if count is None:  # every output revealed: every team's count is the task's (task_record's first entry)
        count = slice(layout["task_record"].start, layout["task_record"].start + 1)
    return layout["team_record"], count


class MLPLogits(nn.Module):
    """An MLP of the decider's observation, one output per team (``decider_policy="teams"``): per task (from the task
    one-hot) a contextual bandit over the teams. Its output bias starts at the size prior of ``initial_prob`` and its
    output weights near 0 (gain 0.01), so the untrained decider plays the size prior whatever it observes."""

    def __init__(self, obs_size: int, teams: Tensor, hidden: int = 64, initial_prob: float = 0.5) -> None:
        super().__init__()
        self.net = mlp(obs_size, hidden, teams.shape[0], output_gain=0.01)
        with torch.no_grad():
            cast(nn.Linear, self.net[-1]).bias.copy_(size_prior(teams, initial_prob))

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(inputs)

    def prior_logits(self) -> Tensor:
        """(K,) the untrained decider's logits, the same for every observation: its output bias."""
        return cast(nn.Linear, self.net[-1]).bias


class ScorerLogits(nn.Module):
    """Each team's logit one network, shared by every team, of what the task's record shows of that team and of the
    whole observation (``decider_policy="scorer"``; tasks never seen).

    Team k's inputs: its record's rate and count feature (``team_record`` and ``team_record_count`` under partial
    feedback; with every output revealed, every team's count is the task's, ``task_record``'s first entry), its
    members (N bits) and its size / N; the whole observation enters as context. The logit is
    ``g(W_t [rate_k, count_k, members_k, size_k] + W_o obs) + b_k``: a two-layer ReLU network g, and a per-team bias b
    that starts at the size prior of ``initial_prob``, with g's output near 0 (gain 0.01): the untrained scorer plays
    the size prior, uniform over the teams at 0.5, and encodes no rule of which team to play. What it learns about "a
    team whose record is high and long" holds for every team at once: an index policy over the teams, learned rather
    than written.

    The scorer first draws, and drops, the initial weights of an :class:`MLPLogits` of the same sizes (it once built
    that network before its own, as a subclass of the MLP decider): a seed gives the networks it always gave, so runs
    and checkpoints of earlier versions are reproduced.
    """

    def __init__(
        self, layout: Mapping[str, slice], obs_size: int, teams: Tensor, hidden: int = 64, initial_prob: float = 0.5
    ) -> None:
        super().__init__()
        n_models = teams.shape[1]
        mlp(obs_size, hidden, teams.shape[0], output_gain=0.01)  # drawn and dropped: the same weights per seed
        self.rate_slice, self.count_slice = record_slices(layout, "scorer")
        features = torch.cat([teams, teams.sum(-1, keepdim=True) / n_models], -1)  # (K, N + 1)
        self.register_buffer("team_features", features, persistent=False)
        team_in = layer_init(nn.Linear(2 + n_models + 1, hidden))
        context_in = layer_init(nn.Linear(obs_size, hidden))
        net = nn.Sequential(
            nn.ReLU(), layer_init(nn.Linear(hidden, hidden)), nn.ReLU(), layer_init(nn.Linear(hidden, 1), gain=0.01)
        )
        # registered in the order of the scorer's parameters before the composition (the optimizer's moments of a
        # checkpoint are one flat buffer in that order); created above in the order of the draws
        self.net, self.team_in, self.context_in = net, team_in, context_in
        self.team_bias = nn.Parameter(size_prior(teams, initial_prob))

    def forward(self, inputs: Tensor) -> Tensor:
        rates = inputs[:, self.rate_slice]  # (B, K)
        counts = inputs[:, self.count_slice].expand_as(rates)
        batch, n_teams = rates.shape
        teams = torch.cat(
            [rates.unsqueeze(-1), counts.unsqueeze(-1), self.team_features.expand(batch, n_teams, -1)], -1
        )
        hidden = self.team_in(teams) + self.context_in(inputs).unsqueeze(1)  # (B, K, H)
        return self.net(hidden).squeeze(-1) + self.team_bias

    def prior_logits(self) -> Tensor:
        """(K,) the per-team bias b (the size prior at the start; g's output starts near 0)."""
        return self.team_bias


class IndexLogits(nn.Module):
    """Each team's logit an index of its record, with the form of an index policy (``decider_policy="index"``)::

        s(z_k) + w(z_k) * m_k + u / sqrt(n0 + n_k),    m_k = (n0 * b_k + n_k * r_k) / (n0 + n_k)

    where z_k is team k's size, r_k and n_k are what the record shows of team k on the task so far (``team_record``,
    and its count feature n / (n + 16) turned back into n: :func:`ensemble_env.game.layout.count_of_feature`;
    :func:`record_slices`), b_k a prior rate per team, n0 the prior's weight in pseudo-observations, w(z) = w_0 + w_1 z
    / N the weight of the estimate m_k, u the weight of an uncertainty term (u > 0: optimism, a bonus for teams seen
    little; u < 0: caution) and s(z) a bias per team size. Every one of them is learned by PPO, from a start where w =
    u = 0, b_k = 1/2, n0 = 4 and s is the size prior of ``initial_prob``: the untrained decider plays the size prior
    (uniform over the teams at 0.5) whatever the record shows, and encodes no rule of which team to play.

    The form is the one of the hand rules of :mod:`ensemble_env.baselines.partial` (greedy: the shrunk mean; UCB:
    plus a bonus), whose constants are chosen on the training tasks and whose prior is the training tasks' mean
    reward; here the prior, its weight, the weights and the bonus are learned from the reward of whole tasks. Where
    :class:`ScorerLogits`' network learns a fixed team before it learns to read the record (docs/benchmark.md), this
    decider can only tell teams apart by their record, their size and the learned prior, and its estimate's weight is
    one number shared by every team. Each quantity is a fixed multiple of its parameter (:data:`INDEX_SCALES`):
    :meth:`terms` gives them in their own units. ``policy`` names the decider in the refusal of a layout without the
    team record.
    """

    sizes: Tensor  # (K,) each team's size

    def __init__(
        self, layout: Mapping[str, slice], teams: Tensor, initial_prob: float = 0.5, policy: str = "index"
    ) -> None:
        super().__init__()
        n_models = teams.shape[1]
        self.n_models = n_models
        self.rate_slice, self.count_slice = record_slices(layout, policy)
        self.register_buffer("sizes", teams.sum(-1), persistent=False)
        self.prior = nn.Parameter(torch.zeros(teams.shape[0]))
        self.weight = nn.Parameter(torch.zeros(2))
        self.log_pseudo_count = nn.Parameter(torch.zeros(1))
        self.bonus = nn.Parameter(torch.zeros(1))
        size_logit = math.log(initial_prob / (1.0 - initial_prob))
        start = torch.arange(1, n_models + 1, dtype=torch.float32) * size_logit / INDEX_SCALES["size"]
        self.size_bias = nn.Parameter(start)

    def terms(self) -> dict[str, Tensor]:
        """The decider's learned quantities, in their own units: ``prior`` (K,) b_k, ``pseudo_count`` n0,
        ``weight`` (K,) w(z_k), ``bonus`` u and ``size_bias`` (K,) s(z_k), z_k team k's size."""
        return {
            "prior": INDEX_START_PRIOR + INDEX_SCALES["prior"] * self.prior,
            "pseudo_count": INDEX_START_PSEUDO_COUNT
            * torch.exp(INDEX_SCALES["log_pseudo_count"] * self.log_pseudo_count),
            "weight": INDEX_SCALES["weight"] * (self.weight[0] + self.weight[1] * self.sizes / self.n_models),
            "bonus": INDEX_SCALES["bonus"] * self.bonus,
            "size_bias": INDEX_SCALES["size"] * self.size_bias[(self.sizes - 1).long()],
        }

    def prior_logits(self) -> Tensor:
        """(K,) the logits before the task's first answer (every count 0): the size prior at the start."""
        t = self.terms()
        return t["size_bias"] + t["weight"] * t["prior"] + t["bonus"] / torch.sqrt(t["pseudo_count"])

    def forward(self, inputs: Tensor) -> Tensor:
        """(B, K) every team's index."""
        rates = inputs[:, self.rate_slice]  # (B, K)
        fraction = inputs[:, self.count_slice].expand_as(rates).clamp(0.0, 1.0 - 1e-6)
        counts = count_of_feature(fraction)  # n from n / (n + 16)
        t = self.terms()
        n0 = t["pseudo_count"]
        estimate = (n0 * t["prior"] + counts * rates) / (n0 + counts)
        return t["size_bias"] + t["weight"] * estimate + t["bonus"] / torch.sqrt(n0 + counts)
