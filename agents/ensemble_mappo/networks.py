"""The two actors, the centralized critic and the running value normaliser.

- :class:`DeciderActor`: the decider's observation -> one Bernoulli per model (the ``MultiBinary`` team mask);
  its greedy team is never smaller than ``max(1, min_team_size)``.
- :class:`TeamActor`: a categorical over the 2**N - 1 non-empty teams instead, one head composed with a *logits
  module* of :mod:`ensemble_mappo.team_logits` (the decider's observation -> one logit per team) rather than one
  subclass per form. :class:`TeamDeciderActor` (``decider_policy="teams"``) composes it with an MLP of the
  observation; :class:`TeamScorerActor` (``decider_policy="scorer"``) with one network shared by the teams, reading
  what the task's record shows of each team (tasks never seen); :class:`TeamIndexActor` (``decider_policy="index"``)
  with an index of each team's record (a shrunk mean and an uncertainty term) whose constants are learned, and
  :class:`~ensemble_mappo.residual.TeamResidualActor` with that index plus a network.
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
critic's), biases at 0, as in the MAPPO and CleanRL implementations (:mod:`ensemble_mappo.layers`); the one
exception is the fusion actor's gate, which by default starts with no weight on the context and a bias of 1 on the
members' probabilities, so that it starts as exactly the team's mean-probability vote on every question.

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
from typing import Any, Protocol, cast

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional

from ensemble_mappo.layers import layer_init, mlp
from ensemble_mappo.team_logits import INDEX_SCALES, IndexLogits, MLPLogits, ScorerLogits, TeamLogits, team_masks

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
    "TeamActor",
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
    "legacy_name",
    "masked_logits",
    "mlp",
]

#: added to a probability before its logarithm in the fusion actor's features
LOG_EPS = 1e-6
#: the critic's outputs, in order: the decider's value (return from the question its team answers on), the
#: fusion agent's value (return from the question it answers now) and the expected reward of that question
VALUE_HEADS = ("decider", "fusion", "reward")


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
        actor without one (see :meth:`TeamActor.evaluate_with_start`)."""
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


class TeamActor(Actor):
    """A team decider: one categorical head over the 2**N - 1 non-empty teams (N <= 12), composed with a logits module
    that maps the decider's prepared inputs to one logit per team (:mod:`ensemble_mappo.team_logits`), as BenchMARL
    and TorchRL compose a model with a distribution.

    The head holds what every team decider shares: the teams (:attr:`teams`), the mask of the teams allowed
    (:attr:`allowed`), sampling (Gumbel-max), the mode, log-probabilities, entropies and the KL divergence from the
    start policy (:attr:`start`); the logits module (:attr:`logits`) holds every parameter. Team k (0-based) holds
    model i when bit i of k + 1 is set (the environment's ``"subset"`` encoding), so the empty team cannot be drawn;
    teams smaller than ``min_team_size`` get probability 0. Actions are float 0/1 team masks (B, N), like
    :class:`DeciderActor`'s, so the rollout, the environment and the PPO loss do not depend on the policy's form.
    Where the Bernoulli decider changes a team one model at a time, a team decider compares whole teams.

    The deciders of ``decider_policy`` are this head with one logits module each: :class:`TeamDeciderActor`
    (``"teams"``), :class:`TeamScorerActor` (``"scorer"``), :class:`TeamIndexActor` (``"index"``) and
    :class:`~ensemble_mappo.residual.TeamResidualActor` (``"residual"``).
    """

    teams: Tensor  # (2**N - 1, N) float 0/1: team k's members
    allowed: Tensor  # (2**N - 1,) 1 where the team is large enough
    powers: Tensor  # (N,) 2**i
    start: StartLogProbs | None
    """The start policy PPO's KL penalty holds the decider near (set by the trainer; ensemble_mappo.start)."""

    def __init__(self, logits: nn.Module, teams: Tensor, min_team_size: int = 0) -> None:
        super().__init__()
        self.register_buffer("teams", teams, persistent=False)
        self.register_buffer("allowed", (teams.sum(-1) >= max(1, min_team_size)).to(torch.float32), persistent=False)
        self.register_buffer("powers", 2.0 ** torch.arange(teams.shape[1], dtype=torch.float32), persistent=False)
        self.logits = logits
        self.start = None

    def forward(self, inputs: Tensor) -> Tensor:
        return masked_logits(self.logits(inputs), self.allowed)

    def prior_logits(self) -> Tensor:
        """(K,) the logits before the task's first answer, the same for every observation at the start: the size prior
        of ``initial_prob`` (the logits module's ``prior_logits``)."""
        return cast(TeamLogits, self.logits).prior_logits()

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

    def upgrade_state_dict(self, state: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """``state`` with the tensor names of a checkpoint written before the team deciders were composed (issue 50)
        turned into today's (:func:`legacy_name`: ``net.0.weight`` -> ``logits.net.0.weight``, ``prior`` ->
        ``logits.prior``, the residual decider's ``prior`` -> ``logits.index.prior``); a state holding any of today's
        names is returned as it is (what it lacks or holds besides is refused by the loader's checks)."""
        current = list(self.state_dict())
        if any(name in state for name in current):
            return dict(state)
        renamed = {legacy_name(name): name for name in current}
        return {renamed.get(key, key): value for key, value in state.items()}

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """``nn.Module.load_state_dict`` of today's tensor names or of a checkpoint's before the composition
        (:meth:`upgrade_state_dict`)."""
        return super().load_state_dict(self.upgrade_state_dict(state_dict), strict, assign)


def legacy_name(name: str) -> str:
    """The name a tensor of a team decider's state dict (``name``, today's) had before the team deciders were composed
    (issue 50): the logits module's tensors were the actor's own (``logits.net.0.weight`` was ``net.0.weight``), and
    the residual decider's index's too (``logits.index.prior`` was ``prior``)."""
    return name.removeprefix("logits.").removeprefix("index.")


class TeamDeciderActor(TeamActor):
    """The team decider of ``decider_policy="teams"``: the categorical head composed with an MLP of the decider's
    observation (:class:`~ensemble_mappo.team_logits.MLPLogits`), per task (from the task one-hot) a contextual
    bandit over the teams.

    The untrained decider draws each model with probability ``initial_prob``, independently, given that the team
    is allowed (the output bias of team k is ``|k| * logit(initial_prob)``; the output weights start near 0):
    its team size follows the binomial (N, ``initial_prob``) conditioned on at least ``max(1, min_team_size)``
    models. ``initial_prob = 0.5`` is uniform over the teams (mean size about N / 2).
    """

    logits: MLPLogits

    def __init__(
        self, obs_size: int, n_models: int, hidden: int = 64, min_team_size: int = 0, initial_prob: float = 0.5
    ) -> None:
        teams = team_masks(n_models, min_team_size, initial_prob)
        super().__init__(MLPLogits(obs_size, teams, hidden, initial_prob), teams, min_team_size)


class TeamScorerActor(TeamActor):
    """The team decider of ``decider_policy="scorer"`` (tasks never seen): the categorical head composed with
    :class:`~ensemble_mappo.team_logits.ScorerLogits`, each team's logit one network, shared by every team, of what
    the task's record shows of that team and of the whole observation; the untrained scorer plays the size prior of
    ``initial_prob``. ``layout``: the decider's observation layout (``venv.layout.decider``), with the record extras.
    """

    logits: ScorerLogits

    def __init__(
        self,
        layout: Mapping[str, slice],
        obs_size: int,
        n_models: int,
        hidden: int = 64,
        min_team_size: int = 0,
        initial_prob: float = 0.5,
    ) -> None:
        teams = team_masks(n_models, min_team_size, initial_prob)
        super().__init__(ScorerLogits(layout, obs_size, teams, hidden, initial_prob), teams, min_team_size)


class TeamIndexActor(TeamActor):
    """The team decider of ``decider_policy="index"`` (tasks never seen): the categorical head composed with
    :class:`~ensemble_mappo.team_logits.IndexLogits`, each team's logit an index of its record (a shrunk mean and an
    uncertainty term) whose constants are learned (``decider.logits.terms()`` in their own units), from a start that
    plays the size prior of ``initial_prob`` whatever the record shows. ``layout``: the decider's observation layout
    (``venv.layout.decider``), with the record extras.
    """

    logits: IndexLogits

    def __init__(
        self, layout: Mapping[str, slice], n_models: int, min_team_size: int = 0, initial_prob: float = 0.5
    ) -> None:
        teams = team_masks(n_models, min_team_size, initial_prob)
        super().__init__(IndexLogits(layout, teams, initial_prob), teams, min_team_size)


class StartLogProbs(Protocol):
    """What :attr:`TeamActor.start` holds: the start policy's log-probabilities over the teams at a
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
    team_size
        Also read the team's size, one-hot (N columns appended to the context): the weights can then differ for a
        team of one, two, ... models (``TrainConfig.fusion_team_size``; the start is the vote either way).

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

    The prepared input (:meth:`prepare`) is ``[phi (C x 3N, choice-major), context, valid-choice mask (C)]``, the
    context ending with the team's size, one-hot, with ``team_size``.
    """

    def __init__(
        self,
        fusion_slices: Mapping[str, slice],
        n_models: int,
        n_choices: int,
        *,
        init_vote: bool = True,
        team_size: bool = False,
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
        self.team_size = team_size
        self.n_context = len(context) + (n_models if team_size else 0)
        self.gate = layer_init(nn.Linear(self.n_context, 3 * n_models), gain=0.01)
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
        given = f + len(self.context_columns)
        out[:, f:given] = x[:, self.context_columns]
        if self.team_size:  # the team's size, one-hot (1 .. N models)
            sizes = members.sum((1, 2)).round().astype(np.int64)
            out[:, given : f + self.n_context] = sizes[:, None] == np.arange(1, n + 1)
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
