"""The team decider's start policy: a prior over team sizes, or an offline start from the cache's train outcomes.

A run's decider starts from one of two policies (``TrainConfig.decider_start``), and PPO's fine-tuning can be
held near it by a KL penalty (``TrainConfig.decider_kl_coef``, the trust region):

- ``"prior"``: each model in the team with probability ``decider_initial_prob``, independently (the team's size
  binomial, conditioned on a non-empty team), the same for every question (:meth:`StartPolicy.size_prior`; the
  team decider's :meth:`~ensemble_mappo.networks.TeamActor.prior_logits`).
- ``"offline"``: per task, a softmax over the teams of their mean reward on the task's *train* questions when
  the team's mean-probability vote answers (the environment's reward at the run's alpha), at temperature
  ``offline_temperature`` (:meth:`StartPolicy.offline`). Its most probable team per task is the team the
  ``static_team`` baseline picks (ties aside). The cache logs every model's output on every train question, so
  every team's train outcome is known without playing it: this is the logged-bandit start of an
  offline-to-online learner. The decider's network is set to play it exactly (:func:`write_table`: a lookup on
  the task one-hot) before PPO starts, or, where it cannot be (no task in the observation, hidden layers narrower
  than the number of tasks), fitted to it (:func:`fit_decider`, a few hundred cross-entropy steps on the decider's
  observations of one rollout). By default each task keeps its best single model unless a team's gain over it
  is certified on the fitting questions (``offline_estimator="certified"``, :mod:`ensemble_env.baselines.pooling`).

Only the train stream's labels are read (``venv.questions``, the questions the run trains on); the policy
depends on the task of the question the team will answer (the decider's ``"task"`` extra), and is the pooled
table over every train question where the observation carries no task. It is recomputed from the cache when a
run resumes (nothing of it is in the checkpoint), so a resumed run is the same as an uninterrupted one; which start
applies (on tasks never seen, the record start where the decider can play it, :func:`plays_record`, else the table)
is decided by one rule, from the decider's shape, for both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ensemble_env.baselines import pooling
from ensemble_env.baselines.routing import team_correct, team_shares
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo.agents import Agents
from ensemble_mappo.collection import Behaviour, collect
from ensemble_mappo.config import DECIDER_STARTS, TrainConfig
from ensemble_mappo.networks import TeamActor
from ensemble_mappo.optim import FlatAdam
from ensemble_mappo.team_logits import MLPLogits

__all__ = [
    "DECIDER_STARTS",
    "StartPolicy",
    "TeamOutcomes",
    "fit_decider",
    "plays_record",
    "start_decider",
    "team_outcomes",
    "team_train_rewards",
    "write_table",
]


@dataclass(frozen=True)
class TeamOutcomes:
    """Every team's logged outcomes on the questions a start is fitted to (:func:`team_outcomes`), computed once and
    read by both offline starts: the estimator of the per-task table (:func:`team_train_rewards`) and the record
    start's prior (its ``pooled`` row)."""

    members: np.ndarray
    """(K, N) bool: the teams."""
    tasks: np.ndarray
    """(Q,) the task of each fitting question."""
    correct: np.ndarray
    """(K, Q) whether each team's mean-probability vote answers the question right."""
    share: np.ndarray
    """(K, Q) each team's share of the pool (its cost share with costs)."""
    rewards: np.ndarray
    """(K, Q) the run's reward of each team's vote."""

    @property
    def pooled(self) -> np.ndarray:
        """(K,) each team's mean reward over every fitting question."""
        return self.rewards.mean(axis=1)


def team_outcomes(venv: EnsembleVectorEnv, teams: np.ndarray, questions: np.ndarray | None = None) -> TeamOutcomes:
    """The K ``teams``' ((K, N) 0/1) outcomes on ``questions`` (None: the training stream's, ``venv.questions``, the
    train split of the tasks it plays) under the run's reward (``venv``'s alpha, size penalty mode, costs; a diversity
    bonus is left out), from the cache's logged outputs."""
    cache = venv.cache
    questions = np.asarray(venv.questions if questions is None else questions, dtype=np.int64)
    members = np.asarray(teams, dtype=bool)
    correct = team_correct(cache, questions, members)  # (K, Q)
    settings = RewardSettings.of(venv.config)
    share = team_shares(cache, questions, members, settings)  # (K, Q)
    rewards = settings.rewards(correct, share)  # (K, Q)
    return TeamOutcomes(members, np.asarray(cache.tasks)[questions], correct, share, rewards)


def team_train_rewards(
    venv: EnsembleVectorEnv,
    teams: np.ndarray,
    *,
    estimator: str = "mean",
    questions: np.ndarray | None = None,
    seed: int = 0,
    level: float = pooling.CERTIFIED_LEVEL,
    outcomes: TeamOutcomes | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each team's estimated mean reward when its mean-probability vote answers: ``(per_task (n_tasks, K),
    pooled (K,))`` for the K ``teams`` ((K, N) 0/1), from the logged outcomes of ``questions`` (None: the training
    stream's, ``venv.questions``, the train split of the tasks it plays): :func:`team_outcomes`, or ``outcomes`` when
    they are computed already (of these teams and questions).

    ``venv`` gives the run's reward (alpha, size penalty mode, costs; a diversity bonus is left out).
    ``estimator`` (:data:`ensemble_env.baselines.pooling.ESTIMATORS`): "mean", each task's own mean (a task without
    questions gets the pooled row); "pooled", shrunk toward the team's reward over all tasks with a strength chosen
    by cross-validation on these questions (seeded by ``seed``); "certified", the per-task means with every team set
    below the task's best single model unless the best team's gain over it is certified at ``level``
    (:func:`ensemble_env.baselines.pooling.certified_teams`, resampled from ``seed``).
    """
    cache = venv.cache
    found = outcomes if outcomes is not None else team_outcomes(venv, teams, questions)
    rewards, tasks, pooled = found.rewards, found.tasks, found.pooled
    if estimator in ("pooled", "certified"):
        fit = pooling.estimate_teams(
            cache, rewards, tasks, found.share, estimator=estimator, seed=seed, correct=found.correct,
            teams=found.members, level=level,
        )  # fmt: skip
        return fit.estimates, pooled
    per_task = np.tile(pooled, (cache.n_tasks, 1))
    for task in np.unique(tasks):
        per_task[task] = rewards[:, tasks == task].mean(axis=1)
    return per_task, pooled


@dataclass(frozen=True)
class StartPolicy:
    """The decider's start policy: log-probabilities over its teams, per task of the next question.

    ``log_probs`` (n_tasks + 1, K): one row per task, the last for an observation without a task (the decider
    reads no task, or the stream is exhausted and the extras are zeros); ``task_slice``: where the one-hot task
    lies in the decider's observation (None: the last row everywhere).
    """

    log_probs: Tensor
    task_slice: slice | None

    @classmethod
    def size_prior(cls, decider: TeamActor, n_tasks: int, task_slice: slice | None) -> StartPolicy:
        """The untrained decider's own policy (its output bias: the size prior), the same for every task."""
        with torch.no_grad():
            bias = decider.prior_logits().detach().clone()
            logits = bias.masked_fill(decider.allowed <= 0, torch.finfo(bias.dtype).min)
            row = torch.log_softmax(logits, -1)
        return cls(row.expand(n_tasks + 1, -1).clone(), task_slice)

    @classmethod
    def offline(
        cls,
        decider: TeamActor,
        venv: EnsembleVectorEnv,
        temperature: float,
        *,
        estimator: str = "mean",
        questions: np.ndarray | None = None,
        seed: int = 0,
        level: float = pooling.CERTIFIED_LEVEL,
        outcomes: TeamOutcomes | None = None,
    ) -> StartPolicy:
        """Per task, the softmax of each team's estimated reward under its vote, at ``temperature``
        (:func:`team_train_rewards` of ``questions``, by ``estimator``; ``outcomes``: the decider's teams' outcomes
        on them, when computed already); teams the decider may not play get probability 0."""
        teams = decider.teams.numpy()
        per_task, pooled = team_train_rewards(
            venv, teams, estimator=estimator, questions=questions, seed=seed, level=level, outcomes=outcomes
        )
        table = torch.from_numpy(np.vstack([per_task, pooled[None, :]]) / temperature).to(torch.float32)
        table = table.masked_fill(decider.allowed <= 0, torch.finfo(torch.float32).min)
        return cls(torch.log_softmax(table, -1), venv.layout.decider.get("task"))

    def of(self, inputs: Tensor) -> Tensor:
        """(B, K) the start policy's log-probabilities at the decider's observations ``inputs`` (B, D)."""
        if self.task_slice is None:
            return self.log_probs[-1].expand(inputs.shape[0], -1)
        onehot = inputs[:, self.task_slice]
        weights = torch.cat([onehot, (1.0 - onehot.sum(-1, keepdim=True)).clamp(min=0.0)], dim=-1)
        return weights @ self.log_probs.clamp(min=-1e4)  # masked teams stay at -1e4 (probability 0 after softmax)


def fit_decider(
    decider: TeamActor,
    inputs: Tensor,
    start: StartPolicy,
    generator: torch.Generator,
    *,
    steps: int = 300,
    batch_size: int = 256,
    learning_rate: float = 1e-2,
) -> float:
    """Fit ``decider`` to ``start`` on the observations ``inputs`` (M, D): Adam on the cross-entropy of the start
    policy's probabilities to the decider's (the KL up to a constant), ``steps`` minibatches drawn with
    ``generator``. Returns the mean KL(start || decider) on ``inputs`` afterwards."""
    targets = start.of(inputs).exp()
    # the learner's own Adam (FlatAdam: torch.optim's first use costs seconds of imports); the trainer's optimizer,
    # built afterwards, takes the fitted parameters over
    adam = FlatAdam({"decider": decider}, learning_rate, max_grad_norm=float("inf"))
    for _ in range(steps):
        rows = torch.randint(0, inputs.shape[0], (min(batch_size, inputs.shape[0]),), generator=generator)
        log_probs = torch.log_softmax(decider(inputs[rows]), -1).clamp(min=-1e4)
        loss = -(targets[rows] * log_probs).sum(-1).mean()
        adam.zero_grad()
        loss.backward()
        adam.step(["decider"])
    with torch.no_grad():
        log_probs = torch.log_softmax(decider(inputs), -1).clamp(min=-1e4)
        kl = (targets * (start.of(inputs) - log_probs)).sum(-1).mean()
    return float(kl)


#: the weight of the prior that breaks follow-the-leader's ties (a reward difference far below one question's)
LEADER_TIE = 1e-3


@dataclass(frozen=True)
class RecordStart:
    """The start policy of a decider that sees the task's record and not the task (``team_record``, ``task_record``:
    tasks never seen): per team k, the logit ``beta * (c * rhat_k + (1 - c) * prior_k)``, where ``rhat_k = rho_k *
    gap_k + wrong_k`` is the team's mean reward on the task's answered questions (``rho_k`` its correct rate, ``gap_k``
    and ``wrong_k`` the reward's gap and wrong-answer reward at its share of the pool), ``prior_k`` its pooled reward on
    the training tasks, and ``c = n / (n + 16)`` the record's count feature: the training tasks' best team on an empty
    history, follow-the-leader once the record is long. Every term is linear in the observation, so the network
    plays it exactly (:func:`write_record`)."""

    rate_slice: slice
    count_index: int
    gap: Tensor
    wrong: Tensor
    prior: Tensor
    beta: float
    allowed: Tensor
    """(K,) 1 where the decider may play the team."""
    prior_weight: float = 1.0
    leader: bool = False

    def logits(self, inputs: Tensor) -> Tensor:
        """(B, K) the start policy's logits at decider observations (B, D)."""
        rates, count = inputs[:, self.rate_slice], inputs[:, self.count_index : self.count_index + 1]
        if self.leader:  # follow the leader: the record's mean reward, ties (and an empty record) to the prior
            return self.beta * (rates * self.gap + self.wrong + LEADER_TIE * self.prior)
        return self.beta * (count * (rates * self.gap + self.wrong) + (1.0 - count) * self.prior_weight * self.prior)

    def of(self, inputs: Tensor) -> Tensor:
        """(B, K) its log-probabilities (the teams of the decider's mask)."""
        return torch.log_softmax(self.logits(inputs).masked_fill(self.allowed <= 0, -1e4), -1).clamp(min=-1e4)


def record_start(
    decider: TeamActor,
    venv: EnsembleVectorEnv,
    temperature: float,
    pooled: np.ndarray,
    prior_weight: float = 1.0,
    leader: bool = True,
) -> RecordStart | None:
    """The :class:`RecordStart` of ``decider`` on ``venv`` (None when the observation has no team record). By default
    (``leader``) follow the leader, ties and the empty record to the training tasks' best team: on bbh5's training
    folds' validation tasks (4 folds) it earned 0.0355 per question against 0.0309 for the blend of the record and
    the prior by the count feature (``leader=False``, ``prior_weight`` 1; 0.024 and 0.019 at 0.25 and 0.05)."""
    layout = venv.layout.decider
    if "team_record" not in layout or "task_record" not in layout or "task" in layout:
        return None
    settings = RewardSettings.of(venv.config)
    teams = decider.teams.numpy().astype(bool)
    questions = np.asarray(venv.questions, dtype=np.int64)
    share = team_shares(venv.cache, questions, teams, settings).mean(axis=1)
    right = settings.rewards(np.ones(share.shape, dtype=bool), share)
    wrong = settings.rewards(np.zeros(share.shape, dtype=bool), share)
    start = RecordStart(
        layout["team_record"],
        layout["task_record"].start,
        torch.from_numpy(right - wrong).float(),
        torch.from_numpy(wrong).float(),
        torch.from_numpy(np.asarray(pooled)).float(),
        1.0 / temperature,
        decider.allowed,
        prior_weight,
        leader,
    )
    return start


def write_record(decider: TeamActor, start: RecordStart) -> bool:
    """Make ``decider`` play ``start`` exactly: its logits become :meth:`RecordStart.logits` (a linear function of the
    record, through the first K + 1 units of each hidden layer; the other units keep their random start and their
    output weights start at 0). False (nothing changed) when it cannot (:func:`plays_record`)."""
    if not plays_record(decider, start):
        return False
    first, second, out = _mlp_layers(decider)
    k = start.prior.shape[0]
    teams = torch.arange(k)
    rates = torch.arange(start.rate_slice.start, start.rate_slice.stop)
    with torch.no_grad():
        for layer in (first, second):
            layer.weight[: k + 1] = 0.0
            layer.bias[: k + 1] = 0.0
        first.weight[teams, rates] = 1.0
        first.weight[k, start.count_index] = 1.0
        second.weight[teams, teams] = 1.0
        second.weight[k, k] = 1.0
        out.weight.zero_()
        out.weight[teams, teams] = start.beta * start.gap
        if start.leader:
            out.bias.copy_(start.beta * (start.wrong + LEADER_TIE * start.prior))
        else:
            out.weight[:, k] = start.beta * (start.wrong - start.prior_weight * start.prior)
            out.bias.copy_(start.beta * start.prior_weight * start.prior)
    return True


def plays_record(decider: TeamActor, start: RecordStart) -> bool:
    """Whether :func:`write_record` can make ``decider`` play ``start`` exactly: its logits are an MLP of the
    observation (:class:`~ensemble_mappo.team_logits.MLPLogits`) of two hidden layers, each at least K + 1 wide. What
    :func:`start_decider` decides the record start by, in a new run and in a resumed one alike: it depends on the
    decider's shape only, never on whether the network is fitted."""
    layers = _mlp_layers(decider)
    k = start.prior.shape[0]
    return len(layers) == 3 and all(layer.out_features >= k + 1 for layer in layers[:2])


def _mlp_layers(decider: TeamActor) -> list[torch.nn.Linear]:
    """The linear layers of the decider's MLP, in order (none when its logits are another module's)."""
    if not isinstance(decider.logits, MLPLogits):
        return []
    return [module for module in decider.logits.net if isinstance(module, torch.nn.Linear)]


def write_table(decider: TeamActor, start: StartPolicy) -> bool:
    """Make ``decider`` play ``start`` exactly: its logits become the start policy's log-probabilities of the task
    of each observation (a lookup on the task one-hot), with no approximation. True when done; False (nothing
    changed) when the observation has no task one-hot, the decider's logits are not an MLP of the observation
    (:class:`~ensemble_mappo.team_logits.MLPLogits`) or its hidden layers are narrower than the number of tasks.

    The first ``n_tasks`` units of each hidden layer carry the one-hot (unit j: task j), and the output layer reads
    only them, as ``table[j] - table[none]`` plus the bias ``table[none]`` (the row of an observation without a task).
    The other hidden units keep their random initialisation: they are alive, read every input, and PPO's
    fine-tuning can route through them (their output weights start at 0).
    """
    task_slice = start.task_slice
    layers = _mlp_layers(decider)
    n_tasks = start.log_probs.shape[0] - 1
    if task_slice is None or len(layers) != 3 or any(layer.out_features < n_tasks for layer in layers[:2]):
        return False
    first, second, out = layers
    table = start.log_probs.clamp(min=-1e4)  # masked teams stay at -1e4 (probability 0 after the mask)
    tasks = torch.arange(n_tasks)
    with torch.no_grad():
        first.weight[:n_tasks] = 0.0
        first.bias[:n_tasks] = 0.0
        first.weight[tasks, task_slice.start + tasks] = 1.0
        second.weight[:n_tasks] = 0.0
        second.bias[:n_tasks] = 0.0
        second.weight[tasks, tasks] = 1.0
        out.weight.zero_()
        out.weight[:, :n_tasks] = (table[:n_tasks] - table[n_tasks]).T
        out.bias.copy_(table[n_tasks])
    return True


def start_decider(
    agents: Agents,
    venv: EnsembleVectorEnv,
    config: TrainConfig,
    *,
    fit: bool,
    rollouts: int = 1,
    questions: np.ndarray | None = None,
) -> StartPolicy | None:
    """Give the team decider of ``agents`` its start policy (``config.decider_start``) and, for the offline start
    with ``fit`` (a new run, not a resumed one), fit its network to it on the decider's observations of
    ``rollouts`` rollouts of ``venv`` (the decider sampling, the plurality vote answering; the trainer resets the
    environment afterwards). ``questions``: the labelled questions the offline start reads (None: the training
    stream's; the deployed start is refitted on train + validation). Returns the start policy, or None for the
    Bernoulli decider (pools of more than 12
    models under ``decider_policy="auto"``): it starts from its output bias (``decider_initial_prob``) whatever
    ``decider_start`` says, and has no KL penalty. Call it before the optimizer is built."""
    decider = agents.decider
    if not isinstance(decider, TeamActor):
        return None
    task_slice = venv.layout.decider.get("task")
    if config.decider_start == "prior":
        start = StartPolicy.size_prior(decider, venv.cache.n_tasks, task_slice)
    else:
        outcomes = team_outcomes(venv, decider.teams.numpy(), questions)  # every team's, once for both starts
        record = record_start(decider, venv, config.offline_temperature, outcomes.pooled)
        # the record start where the decider can play it exactly (plays_record: its shape, the same rule whether the
        # run is new or resumed, so a resumed run anchors its KL where the uninterrupted one did); else the table
        if record is not None and plays_record(decider, record):
            if fit:
                write_record(decider, record)
            decider.start = record  # tasks never seen: the training tasks' best team, then follow the leader
            return record
        start = StartPolicy.offline(
            decider, venv, config.offline_temperature, estimator=config.offline_estimator, questions=questions,
            seed=config.seed, level=config.offline_level, outcomes=outcomes,
        )  # fmt: skip
        if fit and write_table(decider, start):
            pass  # the decider plays the start policy exactly
        elif fit:
            generator = torch.Generator().manual_seed(config.seed)
            seed = int(np.random.SeedSequence([config.seed, 1 << 20]).generate_state(1)[0])
            obs, _ = venv.reset(seed=seed)
            rollout = agents.rollout(venv, config.num_steps)
            seen = []
            for _ in range(max(1, rollouts)):
                obs, _ = collect(venv, agents, rollout, obs, generator, Behaviour(fusion="plurality"))
                seen.append(rollout.inputs["decider"].reshape(-1, rollout.inputs["decider"].shape[-1]).clone())
            fit_decider(decider, torch.cat(seen), start, generator)
    decider.start = start
    return start
