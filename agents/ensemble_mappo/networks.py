"""The two actors, the centralized critic and the running value normaliser.

- :class:`DeciderActor`: the decider's observation -> one Bernoulli per model (the ``MultiBinary`` team mask);
  its greedy team is never smaller than ``max(1, min_team_size)``. :class:`TeamDeciderActor`
  (``decider_policy="teams"``): a categorical over the 2**N - 1 non-empty teams instead. :class:`TeamScorerActor`
  (``decider_policy="scorer"``): the same categorical, each team's logit from one network shared by the teams,
  reading what the task's record shows of that team (tasks never seen). :class:`TeamIndexActor`
  (``decider_policy="index"``): the same categorical, each team's logit an index of its record (a shrunk mean and an
  uncertainty term) whose constants are learned.
- :class:`FusionActor`: the fusion observation -> a categorical over the answer choices, masked by the
  valid-choice mask (a masked choice has probability exactly 0). It scores every choice by a weighted sum
  of that choice's features (each team member's probability of it, its log-probability and whether the
  member votes for it), the weights a linear function of the question's context (team mask, reward history,
  task extras): what it learns about "model i is reliable on this task" carries over between choice
  positions and choice counts, as in the conditional-logit stacking baseline.
- :class:`CentralCritic`: the centralized state ``venv.state()`` -> one output per head of :data:`VALUE_HEADS`
  (in normalised units): each agent's value and the expected reward of the question being answered.
- :class:`ValueNormalizer`: running mean and variance of each head's targets (MAPPO's value normalisation).

An actor reads a *prepared input*: :meth:`Actor.prepare` turns a batch of observations into the tensor its
:meth:`~torch.nn.Module.forward` reads, without parameters (the decider's is the observation itself, the fusion
actor's the choice features below). The trainer prepares each observation once, while collecting, and the
PPO epochs reuse it.

Every linear layer is initialised orthogonally (gain sqrt(2) inside, 0.01 on the actors' outputs, 1 on the
critic's), biases at 0, as in the MAPPO and CleanRL implementations; the one exception is the fusion actor's
gate, which by default starts with no weight on the context and a bias of 1 on the members' probabilities, so that
it starts as exactly the team's mean-probability vote on every question.

The distribution helpers are pure functions of logits, so the actors stay small and the tests can check them:

>>> import torch
>>> logits = masked_logits(torch.tensor([[1.0, 5.0, 2.0]]), torch.tensor([[1.0, 0.0, 1.0]]))
>>> categorical_log_prob(logits, torch.tensor([1])).item() < -1e30
True
>>> round(bernoulli_entropy(torch.zeros(1, 3)).item(), 4)  # 3 fair coins: 3 ln 2
2.0794
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, cast

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional

from ensemble_env.game.actions import MAX_SUBSET_MODELS, subset_masks
from ensemble_env.game.task_record import RECORD_COUNT_HALF

__all__ = [
    "INDEX_SCALES",
    "LOG_EPS",
    "VALUE_HEADS",
    "Actor",
    "CentralCritic",
    "DeciderActor",
    "FusionActor",
    "LocalCritics",
    "StartLogProbs",
    "TeamDeciderActor",
    "TeamIndexActor",
    "TeamScorerActor",
    "ValueNormalizer",
    "bernoulli_entropy",
    "bernoulli_log_prob",
    "categorical_entropy",
    "categorical_log_prob",
    "complete_team",
    "layer_init",
    "masked_logits",
    "mlp",
]

#: added to a probability before its logarithm in the fusion actor's features
LOG_EPS = 1e-6
#: the critic's outputs, in order: the decider's value (return from the question its team answers on), the
#: fusion agent's value (return from the question it answers now) and the expected reward of that question
VALUE_HEADS = ("decider", "fusion", "reward")


# -- layers -------------------------------------------------------------------------------------------------
def layer_init(layer: nn.Linear, gain: float = math.sqrt(2.0), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights with ``gain``, constant bias (the PPO/MAPPO initialisation)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(n_inputs: int, hidden: int, n_outputs: int, output_gain: float) -> nn.Sequential:
    """Two ReLU hidden layers of width ``hidden`` (MAPPO's default activation), orthogonally initialised."""
    return nn.Sequential(
        layer_init(nn.Linear(n_inputs, hidden)),
        nn.ReLU(),
        layer_init(nn.Linear(hidden, hidden)),
        nn.ReLU(),
        layer_init(nn.Linear(hidden, n_outputs), gain=output_gain),
    )


# -- distributions as functions of logits -------------------------------------------------------------------
def masked_logits(logits: Tensor, mask: Tensor) -> Tensor:
    """Logits with the entries where ``mask`` is 0 set to the most negative float (probability 0)."""
    return torch.where(mask > 0, logits, torch.finfo(logits.dtype).min)


def categorical_log_prob(logits: Tensor, actions: Tensor) -> Tensor:
    """(B,) log-probability of integer ``actions`` (B,) under the categorical of ``logits`` (B, C)."""
    return functional.log_softmax(logits, dim=-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def categorical_entropy(logits: Tensor) -> Tensor:
    """(B,) entropy in nats; masked entries (probability 0) contribute 0.

    The probabilities come from ``softmax``, not from exponentiating the log-probabilities: ``exp`` of a
    masked entry's log-probability (about -3e38) takes a slow path on CPU, ~20 times the cost of the rest.
    """
    return -(functional.softmax(logits, dim=-1) * functional.log_softmax(logits, dim=-1)).sum(-1)


def bernoulli_log_prob(logits: Tensor, bits: Tensor) -> Tensor:
    """(B,) log-probability of the 0/1 vector ``bits`` (B, N) under N independent Bernoullis (summed).

    ``log sigmoid(-x) = log sigmoid(x) - x``, so one ``logsigmoid`` serves both outcomes.
    """
    return (functional.logsigmoid(logits) - (1.0 - bits) * logits).sum(-1)


def bernoulli_entropy(logits: Tensor) -> Tensor:
    """(B,) entropy in nats of N independent Bernoullis (summed over the N bits)."""
    p = torch.sigmoid(logits)
    return ((1.0 - p) * logits - functional.logsigmoid(logits)).sum(-1)


def complete_team(bits: Tensor, logits: Tensor, min_size: int) -> Tensor:
    """``bits`` (B, N) with the most probable missing models added where fewer than ``min_size`` are in.

    A row with at least ``min_size`` models is returned as it is; a smaller one keeps its models and gains
    the highest-logit others until it has ``min_size``.

    >>> complete_team(torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 1.0]]), torch.tensor([[-3.0, -1.0, -2.0]] * 2), 2)
    tensor([[0., 1., 1.],
            [1., 0., 1.]])
    """
    if min_size <= 0:
        return bits
    bonus = torch.finfo(logits.dtype).max / 4  # the chosen models rank first, by their logits
    top = torch.topk(torch.where(bits > 0, logits.clamp(max=1e30) + bonus, logits), min_size, dim=-1).indices
    return torch.maximum(bits, torch.zeros_like(bits).scatter_(-1, top, 1.0))


# -- actors -------------------------------------------------------------------------------------------------
class Actor(nn.Module):
    """An agent's policy: prepared observations -> logits of its action distribution.

    Subclasses define :meth:`forward` (the logits, already masked), may override :meth:`prepare` and
    :meth:`executed`, and define the distribution by overriding :meth:`log_prob`, :meth:`entropy`,
    :meth:`sample` and :meth:`mode`.
    """

    def prepare(self, obs: Tensor) -> Tensor:
        """The input of :meth:`forward` for a batch of observations (no parameters: computed once per step)."""
        return obs

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        raise NotImplementedError

    def entropy(self, logits: Tensor) -> Tensor:
        raise NotImplementedError

    def sample(self, logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
        raise NotImplementedError

    def mode(self, logits: Tensor) -> Tensor:
        raise NotImplementedError

    def executed(self, actions: Tensor, logits: Tensor) -> Tensor:
        """The action the environment receives for the policy's ``actions`` (the same, unless overridden)."""
        return actions

    def act(
        self, inputs: Tensor, generator: torch.Generator | None = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(the policy's actions, their log-probabilities, the actions the environment receives).

        ``inputs`` are prepared observations (:meth:`prepare`).
        """
        logits = self(inputs)
        actions = self.mode(logits) if deterministic else self.sample(logits, generator)
        return actions, self.log_prob(logits, actions), self.executed(actions, logits)

    def evaluate(self, inputs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """(log-probabilities of ``actions``, entropies) under the current parameters, for the PPO loss."""
        logits = self(inputs)
        return self.log_prob(logits, actions), self.entropy(logits)

    def evaluate_with_start(self, inputs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`evaluate` and the KL divergence of the policy from its start policy at ``inputs`` (B,): 0 for an
        actor without one (see :meth:`TeamDeciderActor.evaluate_with_start`)."""
        log_prob, entropy = self.evaluate(inputs, actions)
        return log_prob, entropy, torch.zeros_like(log_prob)


class DeciderActor(Actor):
    """Decider: an MLP of the decider's observation -> N logits, one Bernoulli (model in the team) per model.

    Actions are float 0/1 tensors (B, N). The deterministic action (:meth:`mode`) keeps the models with
    probability > 1/2 and, where those are fewer than ``max(1, min_team_size)``, the most probable ones up to
    that size: the greedy team is never empty. A sampled team smaller than ``min_team_size`` (the environment
    refuses it) is completed the same way before it is played (:meth:`executed`); PPO scores the sampled
    bits, so the completion acts as part of the environment.
    """

    def __init__(
        self, obs_size: int, n_models: int, hidden: int = 64, initial_prob: float = 0.5, min_team_size: int = 0
    ) -> None:
        super().__init__()
        if not 0 <= min_team_size <= n_models:
            raise ValueError(f"min_team_size must be in [0, {n_models}], got {min_team_size}")
        self.min_team_size = min_team_size
        self.net = mlp(obs_size, hidden, n_models, output_gain=0.01)
        with torch.no_grad():
            cast(nn.Linear, self.net[-1]).bias.fill_(math.log(initial_prob / (1.0 - initial_prob)))

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(inputs)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return bernoulli_log_prob(logits, actions)

    def entropy(self, logits: Tensor) -> Tensor:
        return bernoulli_entropy(logits)

    def sample(self, logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
        uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype)
        return (uniform < torch.sigmoid(logits)).to(logits.dtype)

    def mode(self, logits: Tensor) -> Tensor:
        return complete_team((logits > 0).to(logits.dtype), logits, max(1, self.min_team_size))

    def evaluate(self, inputs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """As :meth:`Actor.evaluate`, with ``log sigmoid(logits)`` computed once for both terms."""
        logits = self(inputs)
        log_p = functional.logsigmoid(logits)
        log_prob = (log_p - (1.0 - actions) * logits).sum(-1)
        entropy = ((1.0 - torch.sigmoid(logits)) * logits - log_p).sum(-1)
        return log_prob, entropy

    def executed(self, actions: Tensor, logits: Tensor) -> Tensor:
        return complete_team(actions, logits, self.min_team_size)


class TeamDeciderActor(Actor):
    """Decider: an MLP of the decider's observation -> one logit per non-empty team, a categorical over the
    2**N - 1 teams (N <= 12).

    Team k (0-based) holds model i when bit i of k + 1 is set (the environment's ``"subset"`` encoding), so
    the empty team cannot be drawn; teams smaller than ``min_team_size`` get probability 0. Actions are float
    0/1 team masks (B, N), like :class:`DeciderActor`'s, so the rollout, the environment and the PPO loss do
    not depend on the policy's form. Where the Bernoulli decider changes a team one model at a time, this one
    compares whole teams: per task (from the task one-hot) a contextual bandit over teams.

    The untrained decider draws each model with probability ``initial_prob``, independently, given that the team
    is allowed (the output bias of team k is ``|k| * logit(initial_prob)``; the output weights start near 0):
    its team size follows the binomial (N, ``initial_prob``) conditioned on at least ``max(1, min_team_size)``
    models. ``initial_prob = 0.5`` is uniform over the teams (mean size about N / 2).
    """

    teams: Tensor  # (2**N - 1, N) float 0/1: team k's members
    allowed: Tensor  # (2**N - 1,) 1 where the team is large enough
    powers: Tensor  # (N,) 2**i
    start: StartLogProbs | None
    """The start policy PPO's KL penalty holds the decider near (set by the trainer; ensemble_mappo.start)."""

    def __init__(
        self, obs_size: int, n_models: int, hidden: int = 64, min_team_size: int = 0, initial_prob: float = 0.5
    ) -> None:
        super().__init__()
        teams = self._register_teams(n_models, min_team_size, initial_prob)
        self.net = mlp(obs_size, hidden, teams.shape[0], output_gain=0.01)
        with torch.no_grad():
            cast(nn.Linear, self.net[-1]).bias.copy_(teams.sum(-1) * math.log(initial_prob / (1.0 - initial_prob)))
        self.start = None

    def _register_teams(self, n_models: int, min_team_size: int, initial_prob: float) -> Tensor:
        """Check the pool, register :attr:`teams`, :attr:`allowed` and :attr:`powers`; the (K, N) team masks."""
        if not 0.0 < initial_prob < 1.0:
            raise ValueError(f"initial_prob must be in (0, 1), got {initial_prob}")
        if not 1 <= n_models <= MAX_SUBSET_MODELS:
            raise ValueError(f"the team decider enumerates the teams of 1..{MAX_SUBSET_MODELS} models, got {n_models}")
        if not 0 <= min_team_size <= n_models:
            raise ValueError(f"min_team_size must be in [0, {n_models}], got {min_team_size}")
        teams = torch.from_numpy(subset_masks(n_models).astype(np.float32))  # the environment's "subset" order
        self.register_buffer("teams", teams, persistent=False)
        self.register_buffer("allowed", (teams.sum(-1) >= max(1, min_team_size)).to(torch.float32), persistent=False)
        self.register_buffer("powers", 2.0 ** torch.arange(n_models, dtype=torch.float32), persistent=False)
        return teams

    def forward(self, inputs: Tensor) -> Tensor:
        return masked_logits(self.net(inputs), self.allowed)

    def prior_logits(self) -> Tensor:
        """(K,) the untrained decider's logits, the same for every observation: the size prior of its
        ``initial_prob`` (its output bias)."""
        return cast(nn.Linear, self.net[-1]).bias

    def team_index(self, actions: Tensor) -> Tensor:
        """(B,) the index of each team mask (B, N)."""
        return (actions @ self.powers).long() - 1

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return categorical_log_prob(logits, self.team_index(actions))

    def entropy(self, logits: Tensor) -> Tensor:
        return categorical_entropy(logits)

    def sample(self, logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
        uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype).clamp_(min=1e-20)
        return self.teams[(logits - torch.log(-torch.log(uniform))).argmax(-1)]  # Gumbel-max

    def mode(self, logits: Tensor) -> Tensor:
        return self.teams[logits.argmax(-1)]

    def evaluate_with_start(self, inputs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(log-probabilities of ``actions``, entropies, KL(policy || start policy)) at ``inputs``, one forward
        pass; the KL is 0 without a start policy (:attr:`start`)."""
        logits = self(inputs)
        log_probs = functional.log_softmax(logits, dim=-1)
        probs = functional.softmax(logits, dim=-1)
        log_prob = log_probs.gather(-1, self.team_index(actions).unsqueeze(-1)).squeeze(-1)
        entropy = -(probs * log_probs).sum(-1)
        if self.start is None:
            return log_prob, entropy, torch.zeros_like(log_prob)
        # masked teams have probability 0: their terms vanish (log-probabilities clamped, so 0 x finite)
        kl = (probs * (log_probs.clamp(min=-1e4) - self.start.of(inputs))).sum(-1)
        return log_prob, entropy, kl


class TeamScorerActor(TeamDeciderActor):
    """Decider on the task's record: a categorical over the teams whose logit for team k is one network, shared by
    every team, of what the record shows of team k and of the whole observation.

    Team k's inputs: its record's rate and count feature (``team_record`` and ``team_record_count`` under partial
    feedback; with every output revealed, every team's count is the task's, ``task_record``'s first entry), its
    members (N bits) and its size / N; the whole observation enters as context. The logit is
    ``g(W_t [rate_k, count_k, members_k, size_k] + W_o obs) + b_k``: a two-layer ReLU network g, and a per-team bias b
    that starts at the size prior of ``initial_prob`` (:class:`TeamDeciderActor`'s), with g's output near 0 (gain
    0.01): the untrained scorer plays the size prior, uniform over the teams at 0.5, and encodes no rule of which
    team to play. What it learns about "a team whose record is high and long" holds for every team at once: an index
    policy over the teams, learned rather than written.
    """

    def __init__(
        self,
        layout: Mapping[str, slice],
        obs_size: int,
        n_models: int,
        hidden: int = 64,
        min_team_size: int = 0,
        initial_prob: float = 0.5,
    ) -> None:
        super().__init__(obs_size, n_models, hidden, min_team_size, initial_prob)
        self.rate_slice, self.count_slice = record_slices(layout, "scorer")
        features = torch.cat([self.teams, self.teams.sum(-1, keepdim=True) / n_models], -1)  # (K, N + 1)
        self.register_buffer("team_features", features, persistent=False)
        self.team_in = layer_init(nn.Linear(2 + n_models + 1, hidden))
        self.context_in = layer_init(nn.Linear(obs_size, hidden))
        self.net = nn.Sequential(
            nn.ReLU(), layer_init(nn.Linear(hidden, hidden)), nn.ReLU(), layer_init(nn.Linear(hidden, 1), gain=0.01)
        )
        self.team_bias = nn.Parameter(self.teams.sum(-1) * math.log(initial_prob / (1.0 - initial_prob)))

    def prior_logits(self) -> Tensor:
        return self.team_bias

    def forward(self, inputs: Tensor) -> Tensor:
        rates = inputs[:, self.rate_slice]  # (B, K)
        counts = inputs[:, self.count_slice].expand_as(rates)
        batch, n_teams = rates.shape
        teams = torch.cat(
            [rates.unsqueeze(-1), counts.unsqueeze(-1), self.team_features.expand(batch, n_teams, -1)], -1
        )
        hidden = self.team_in(teams) + self.context_in(inputs).unsqueeze(1)  # (B, K, H)
        return masked_logits(self.net(hidden).squeeze(-1) + self.team_bias, self.allowed)


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


#: :class:`TeamIndexActor`'s step sizes: each of its quantities is this multiple of its parameter (Adam moves a
#: parameter by about ``learning_rate`` a step, 2,560 steps at the partial-feedback default budget, so these let each
#: quantity cross its range within a few hundred steps): the weight of the estimate (logits per unit of rate), the
#: prior rate, log n0, the uncertainty term's weight and the size bias
INDEX_SCALES = {"weight": 50.0, "prior": 2.0, "log_pseudo_count": 5.0, "bonus": 10.0, "size": 10.0}
#: :class:`TeamIndexActor`'s start: the prior rate b_k and the pseudo-count n0 of every team
INDEX_START_PRIOR, INDEX_START_PSEUDO_COUNT = 0.5, 4.0


class TeamIndexActor(TeamDeciderActor):
    """Decider on the task's record with the form of an index policy: team k's logit is ::

        s(z_k) + w(z_k) * m_k + u / sqrt(n0 + n_k),    m_k = (n0 * b_k + n_k * r_k) / (n0 + n_k)

    where z_k is team k's size, r_k and n_k are what the record shows of team k on the task so far (``team_record``,
    and its count feature n / (n + 16) turned back into n; :func:`record_slices`), b_k a prior rate per team, n0 the
    prior's weight in pseudo-observations, w(z) = w_0 + w_1 z / N the weight of the estimate m_k, u the weight of an
    uncertainty term (u > 0: optimism, a bonus for teams seen little; u < 0: caution) and s(z) a bias per team size.
    Every one of them is learned by PPO, from a start where w = u = 0, b_k = 1/2, n0 = 4 and s is the size prior of
    ``initial_prob``: the untrained decider plays the size prior (uniform over the teams at 0.5) whatever the record
    shows, and encodes no rule of which team to play.

    The form is the one of the hand rules of :mod:`ensemble_env.baselines.partial` (greedy: the shrunk mean; UCB:
    plus a bonus), whose constants are chosen on the training tasks and whose prior is the training tasks' mean
    reward; here the prior, its weight, the weights and the bonus are learned from the reward of whole tasks. Where
    :class:`TeamScorerActor`'s network learns a fixed team before it learns to read the record (docs/benchmark.md),
    this decider can only tell teams apart by their record, their size and the learned prior, and its estimate's
    weight is one number shared by every team. Each quantity is a fixed multiple of its parameter
    (:data:`INDEX_SCALES`).
    """

    def __init__(
        self, layout: Mapping[str, slice], n_models: int, min_team_size: int = 0, initial_prob: float = 0.5
    ) -> None:
        nn.Module.__init__(self)
        teams = self._register_teams(n_models, min_team_size, initial_prob)
        self.rate_slice, self.count_slice = record_slices(layout, "index")
        self.register_buffer("sizes", teams.sum(-1), persistent=False)
        self.prior = nn.Parameter(torch.zeros(teams.shape[0]))
        self.weight = nn.Parameter(torch.zeros(2))
        self.log_pseudo_count = nn.Parameter(torch.zeros(1))
        self.bonus = nn.Parameter(torch.zeros(1))
        size_logit = math.log(initial_prob / (1.0 - initial_prob))
        start = torch.arange(1, n_models + 1, dtype=torch.float32) * size_logit / INDEX_SCALES["size"]
        self.size_bias = nn.Parameter(start)
        self.start = None

    def terms(self) -> dict[str, Tensor]:
        """The decider's learned quantities, in their own units: ``prior`` (K,) b_k, ``pseudo_count`` n0,
        ``weight`` (K,) w(z_k), ``bonus`` u and ``size_bias`` (K,) s(z_k), z_k team k's size."""
        return {
            "prior": INDEX_START_PRIOR + INDEX_SCALES["prior"] * self.prior,
            "pseudo_count": INDEX_START_PSEUDO_COUNT
            * torch.exp(INDEX_SCALES["log_pseudo_count"] * self.log_pseudo_count),
            "weight": INDEX_SCALES["weight"] * (self.weight[0] + self.weight[1] * self.sizes / self.teams.shape[1]),
            "bonus": INDEX_SCALES["bonus"] * self.bonus,
            "size_bias": INDEX_SCALES["size"] * self.size_bias[(self.sizes - 1).long()],
        }

    def prior_logits(self) -> Tensor:
        """(K,) the logits before the task's first answer (every count 0): the size prior at the start."""
        t = self.terms()
        return t["size_bias"] + t["weight"] * t["prior"] + t["bonus"] / torch.sqrt(t["pseudo_count"])

    def index(self, inputs: Tensor) -> Tensor:
        """(B, K) every team's index, before the mask of the teams too small to play."""
        rates = inputs[:, self.rate_slice]  # (B, K)
        fraction = inputs[:, self.count_slice].expand_as(rates).clamp(0.0, 1.0 - 1e-6)
        counts = RECORD_COUNT_HALF * fraction / (1.0 - fraction)  # n from n / (n + 16)
        t = self.terms()
        n0 = t["pseudo_count"]
        estimate = (n0 * t["prior"] + counts * rates) / (n0 + counts)
        return t["size_bias"] + t["weight"] * estimate + t["bonus"] / torch.sqrt(n0 + counts)

    def forward(self, inputs: Tensor) -> Tensor:
        return masked_logits(self.index(inputs), self.allowed)


class StartLogProbs(Protocol):
    """What :attr:`TeamDeciderActor.start` holds: the start policy's log-probabilities over the teams at a
    batch of decider observations (:class:`ensemble_mappo.start.StartPolicy`)."""

    def of(self, inputs: Tensor) -> Tensor: ...


class FusionActor(Actor):
    """Fusion: a context-gated conditional logit over the answer choices, masked by the valid-choice mask.

    Parameters
    ----------
    fusion_slices
        Where the parts of the fusion observation lie (``venv.layout.fusion``): ``probs`` (N x C, model-major),
        ``team_mask`` (N) and ``action_mask`` (C) are read by name; every other part (team mask, reward
        history, task one-hot, ...) is the question's *context*.
    n_models, n_choices
        N and C of the cache.
    init_vote
        Start as exactly the team's mean-probability vote (weight 1 on every member's probability, none on the
        context) instead of the uniform policy.

    Notes
    -----
    Choice c of a question is described by ``phi_c = [p_1c .. p_Nc, l_1c .. l_Nc, v_1c .. v_Nc]``: member i's
    probability of c (0 outside the team), ``l_ic = log(p_ic + 1e-6)`` for members (0 otherwise) and
    ``v_ic`` = 1 when c is member i's most probable valid choice. The logit of c is ``phi_c . w(context)``
    with ``w`` a linear function of the context: one set of 3N weights shared by every choice position,
    chosen by the task and the team. With the task one-hot in the context this is the per-task stacking
    model (a weighted mean and product of the members' probabilities plus a weighted vote) learned from the
    reward, and a member's weight applies whatever the question's choice count. An MLP scorer of the same
    features overfits the 200 training questions per BBH task (measured: test macro accuracy 0.57 vs 0.60).
    Actions are int64 answer indices (B,); the deterministic action is the most probable valid choice.

    The prepared input (:meth:`prepare`) is ``[phi (C x 3N, choice-major), context, valid-choice mask (C)]``.
    """

    def __init__(
        self, fusion_slices: Mapping[str, slice], n_models: int, n_choices: int, *, init_vote: bool = True
    ) -> None:
        super().__init__()
        self.n_models, self.n_choices = n_models, n_choices
        self.probs_slice = fusion_slices["probs"]
        self.team_slice = fusion_slices["team_mask"]
        self.mask_slice = fusion_slices["action_mask"]
        size = max(part.stop for part in fusion_slices.values())
        context = [i for i in range(size) if not (_inside(i, self.probs_slice) or _inside(i, self.mask_slice))]
        self.context_columns = np.array(context, dtype=np.int64)
        self.n_features = n_choices * 3 * n_models
        self.n_context = len(context)
        self.gate = layer_init(nn.Linear(len(context), 3 * n_models), gain=0.01)
        if init_vote:  # exactly the vote, whatever the context: no weight on it yet (the gradient still reaches it)
            with torch.no_grad():
                self.gate.weight.zero_()
                self.gate.bias[:n_models] = 1.0

    @property
    def input_size(self) -> int:
        """Width of the prepared input."""
        return self.n_features + self.n_context + self.n_choices

    def choice_features(self, obs: Tensor) -> Tensor:
        """(B, C, 3N) features phi_c of every choice."""
        return self.prepare(obs)[:, : self.n_features].reshape(obs.shape[0], self.n_choices, 3 * self.n_models)

    def prepare(self, obs: Tensor) -> Tensor:
        """``[phi (C x 3N, choice-major), context, valid-choice mask]`` per row, computed with numpy (observations
        carry no gradient, and numpy's cost per call is a fraction of torch's at these sizes)."""
        x = obs.detach().cpu().numpy()
        b, n, c, f = x.shape[0], self.n_models, self.n_choices, self.n_features
        out = np.empty((b, self.input_size), dtype=x.dtype)
        probs = x[:, self.probs_slice].reshape(b, n, c)
        members = x[:, self.team_slice][:, :, None]  # (B, N, 1)
        valid = x[:, self.mask_slice][:, None, :] > 0  # (B, 1, C)
        votes = np.where(valid, probs, -1.0).argmax(-1)[..., None] == np.arange(c)  # (B, N, C)
        phi = out[:, :f].reshape(b, c, 3, n)
        phi[:, :, 0] = probs.transpose(0, 2, 1)
        phi[:, :, 1] = (np.log(probs + LOG_EPS) * members).transpose(0, 2, 1)
        phi[:, :, 2] = (votes * members).transpose(0, 2, 1)
        out[:, f : f + self.n_context] = x[:, self.context_columns]
        out[:, f + self.n_context :] = x[:, self.mask_slice]
        return torch.from_numpy(out)

    def forward(self, inputs: Tensor) -> Tensor:
        b, f, k = inputs.shape[0], self.n_features, self.n_context
        weights = self.gate(inputs[:, f : f + k])  # (B, 3N)
        features = inputs[:, :f].view(b, self.n_choices, 3 * self.n_models)
        scores = (features * weights.unsqueeze(1)).sum(-1)  # (B, C); a third of bmm's time at these sizes
        return masked_logits(scores, inputs[:, f + k :])

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return categorical_log_prob(logits, actions)

    def entropy(self, logits: Tensor) -> Tensor:
        return categorical_entropy(logits)

    def sample(self, logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Gumbel-max: ``argmax(logits + Gumbel noise)`` (a masked choice, at the most negative float, never wins;
        a tenth of ``torch.multinomial``'s time for a batch of small categoricals)."""
        uniform = torch.rand(logits.shape, generator=generator, dtype=logits.dtype).clamp_(min=1e-20)
        return (logits - torch.log(-torch.log(uniform))).argmax(-1)

    def mode(self, logits: Tensor) -> Tensor:
        return logits.argmax(-1)


def _inside(index: int, part: slice) -> bool:
    return bool(part.start <= index < part.stop)


# -- critic -------------------------------------------------------------------------------------------------
class CentralCritic(nn.Module):
    """An MLP of the centralized state (both agents' observations, no label) -> (B, H) normalised outputs.

    One output per head (:data:`VALUE_HEADS` by default): the heads share the two hidden layers.
    """

    def __init__(self, state_size: int, hidden: int = 64, n_heads: int = len(VALUE_HEADS)) -> None:
        super().__init__()
        self.net = mlp(state_size, hidden, n_heads, output_gain=1.0)

    def forward(self, state: Tensor) -> Tensor:
        return self.net(state)


class LocalCritics(nn.Module):
    """IPPO's critics (the Dec-POMDP ablation): each agent's value from its own observation only.

    Reads the same state as :class:`CentralCritic` (the decider's observation, then the fusion agent's) and
    splits it: one MLP of the decider's part gives the "decider" and "reward" heads (the reward head
    estimates the reward of the question its team answers, the decider's r_{t+1}), one MLP of the fusion
    agent's part gives the "fusion" head. Outputs (B, 3) in the order of :data:`VALUE_HEADS`.
    """

    def __init__(self, decider_size: int, fusion_size: int, hidden: int = 64) -> None:
        super().__init__()
        self.decider_size = decider_size
        self.decider_net = mlp(decider_size, hidden, 2, output_gain=1.0)
        self.fusion_net = mlp(fusion_size, hidden, 1, output_gain=1.0)

    def forward(self, state: Tensor) -> Tensor:
        decider = self.decider_net(state[..., : self.decider_size])
        fusion = self.fusion_net(state[..., self.decider_size :])
        return torch.cat([decider[..., :1], fusion, decider[..., 1:]], dim=-1)


class ValueNormalizer(nn.Module):
    """Running mean and variance of each head's targets; the critic learns targets in normalised units.

    ``update(x)`` merges a batch (..., H) into the H statistics (Chan et al.'s parallel algorithm, in
    float64); ``normalize`` and ``denormalize`` map (..., H) tensors between targets and the critic's units.
    Before the first update it is the identity. The statistics are buffers, so they travel in the state dict.

    >>> norm = ValueNormalizer(n_heads=2)
    >>> norm.update(torch.tensor([[1.0, 0.0], [3.0, 0.0]]))
    >>> norm.normalize(torch.tensor([[3.0, 0.0]])).tolist()
    [[1.0, 0.0]]
    >>> norm.denormalize(torch.tensor([[-1.0, 0.0]])).tolist()
    [[1.0, 0.0]]
    """

    mean: Tensor
    var: Tensor
    count: Tensor

    def __init__(self, n_heads: int = len(VALUE_HEADS), eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros(n_heads, dtype=torch.float64))
        self.register_buffer("var", torch.ones(n_heads, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, values: Tensor) -> None:
        x = values.detach().to(torch.float64).reshape(-1, self.mean.shape[0])
        batch_count = float(x.shape[0])
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, values: Tensor) -> Tensor:
        return ((values - self.mean) / torch.sqrt(self.var + self.eps)).to(values.dtype)

    def denormalize(self, values: Tensor) -> Tensor:
        return (values * torch.sqrt(self.var + self.eps) + self.mean).to(values.dtype)
