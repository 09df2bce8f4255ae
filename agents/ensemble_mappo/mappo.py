"""MAPPO (and IPPO) as a learner of the frame: RL-Focal's decider and fusion actors and a critic of the state.

What MAPPO supplies to the one loop (:class:`~ensemble_mappo.frame.Learner`): the networks (:class:`~ensemble_mappo.
agents.Agents`: two actors, the critic, the value normaliser), the decider's start policy
(:func:`~ensemble_mappo.start.start_decider`), collection with the decider's credits
(:func:`~ensemble_mappo.collection.collect`), the schedule (joint, or the paper's two stages: :func:`schedule`),
each agent's advantages from its own reward stream (:func:`advantages_and_returns`,
:func:`~ensemble_mappo.ppo.agent_targets`), and the loss, in one place (:meth:`MAPPOLearner.loss`): the critic's
clipped value loss per head, each learning actor's clipped surrogate, less its entropy bonus, plus its KL penalty
to its start policy. IPPO is the same learner with ``critic="local"``.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ensemble_env.baselines.routing import all_teams, team_correct, team_shares
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo.agents import Agents
from ensemble_mappo.collection import collect
from ensemble_mappo.config import TrainConfig
from ensemble_mappo.frame import Behaviour, Learner, Loss, Phase, StepRecord
from ensemble_mappo.networks import VALUE_HEADS
from ensemble_mappo.ppo import (
    AGENTS,
    Rollout,
    UpdateStats,
    agent_targets,
    batch_of,
    clipped_policy_loss,
    clipped_value_loss,
    coefficients,
    explained_variance,
)
from ensemble_mappo.start import start_decider

__all__ = [
    "AGENT_LOSS_KEYS",
    "MAPPOLearner",
    "advantages_and_returns",
    "env_options",
    "first_team",
    "losses_row",
    "schedule",
]

#: the per-agent statistics of the log, ``losses/<agent>_<key>`` (grad_norm per network, explained_variance per
#: agent; the other four from :class:`~ensemble_mappo.ppo.UpdateStats` per learning actor)
AGENT_LOSS_KEYS = ("policy_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm", "explained_variance")


def env_options(config: TrainConfig, cache: LogitCache) -> dict[str, Any]:
    """The environment options of a run on ``cache``: ``config.env`` plus, with ``question_features`` and a
    cache that holds features, ``"features"`` in the decider's extras. Training and evaluation both use it.

    >>> from ensemble_env import datasets
    >>> env_options(TrainConfig(), datasets.load("toy8"))["decider_extras"]  # toy8 has no features
    ['task']
    """
    options = dict(config.env)
    extras = list(options.get("decider_extras", ()))
    if config.question_features and cache.features is not None and "features" not in extras:
        options["decider_extras"] = [*extras, "features"]
    if options.get("episodes") == "task" and "initial_team" not in options:
        options["initial_team"] = first_team(cache, options)
    return options


#: :func:`first_team`'s answers by cache (held weakly: gone with the cache) and by the options it reads; a run asks
#: for it at its set-up and at every validation play of a checkpoint, and each answer reads every train question of
#: every team (on a generated fold, 160,000 questions x 31 teams: 1.7 CPU s, a fifth of a learner run's time)
_FIRST_TEAMS: weakref.WeakKeyDictionary[LogitCache, dict[str, list[int]]] = weakref.WeakKeyDictionary()


def first_team(cache: LogitCache, options: dict[str, Any]) -> list[int]:
    """The team that answers a task's first question when every episode is one task never seen (``initial_team``,
    E_0, which no decider action chooses): the team with the best mean reward over the train questions of the
    training tasks (ties to the smaller share of the pool), as follow-the-leader starts. Computed once per cache
    object and options (a cache is read-only)."""
    key = repr(sorted((name, repr(value)) for name, value in options.items()))
    known = _FIRST_TEAMS.setdefault(cache, {})
    if key not in known:
        known[key] = _first_team(cache, options)
    return list(known[key])


def _first_team(cache: LogitCache, options: dict[str, Any]) -> list[int]:
    questions = cache.select("train", tasks=options.get("tasks"))
    teams = all_teams(cache.n_models)
    config = EnvConfig.from_options({key: tuple(v) if isinstance(v, list) else v for key, v in options.items()})
    settings = RewardSettings.of(config)
    share = team_shares(cache, questions, teams, settings)
    rewards = settings.rewards(team_correct(cache, questions, teams), share).mean(axis=1)
    best = int(np.lexsort((np.arange(teams.shape[0]), np.round(share.mean(axis=1), 10), -np.round(rewards, 10)))[0])
    return np.flatnonzero(teams[best]).tolist()


def schedule(mode: str, stage_two: bool) -> tuple[Behaviour, tuple[str, ...]]:
    """How the agents act and which actors learn: joint, or the two-stage schedule's current stage.

    >>> schedule("two-stage", stage_two=False)
    (Behaviour(decider='sample', fusion='plurality'), ('decider',))
    """
    if mode == "joint":
        return Behaviour(), ("decider", "fusion")
    if not stage_two:  # stage one: the decider learns; the plurality vote of the team answers
        return Behaviour(fusion="plurality"), ("decider",)
    return Behaviour(decider="mode"), ("fusion",)  # stage two: the decider is frozen, the fusion agent learns


def advantages_and_returns(
    agents: Agents, rollout: Rollout, next_state: np.ndarray, config: TrainConfig
) -> tuple[Tensor, Tensor]:
    """Per-agent advantages (T, B, 2) and the critic's targets (T, B, H) of a collected rollout.

    See :func:`~ensemble_mappo.ppo.agent_targets`: the decider's stream is r_{t+1} with ``gamma`` and
    ``gae_lambda`` (r credited as ``config.decider_credit`` says), the fusion agent's r_t with ``fusion_gamma``
    and ``fusion_gae_lambda``; the state after the rollout (``next_state``) and the truncated episodes' final
    states bootstrap them.
    """
    with torch.no_grad():
        norm = agents.value_norm
        values = norm.denormalize(rollout.values)
        last_values = agents.value(torch.from_numpy(next_state))
        truncated = torch.from_numpy(rollout.dones & ~rollout.terminated).unsqueeze(-1)
        final_values = torch.where(truncated, norm.denormalize(rollout.final_values), 0.0)
        return agent_targets(
            torch.from_numpy(rollout.rewards),
            values,
            last_values,
            torch.from_numpy(rollout.dones),
            final_values,
            (config.gamma, config.fusion_gamma),
            (config.gae_lambda, config.fusion_gae_lambda),
            torch.from_numpy(rollout.credit(config.decider_credit)),
        )


def losses_row(stats: UpdateStats) -> dict[str, float]:
    """The ``losses/`` columns of one update: ``losses/value_loss`` (all heads), ``losses/<head>_value_loss``,
    ``losses/<agent>_<key>`` for each key of :data:`AGENT_LOSS_KEYS` the update measured, and
    ``losses/critic_grad_norm`` (an actor that did not learn has no entry; its columns stay empty)."""
    row = {"losses/value_loss": stats.total_value_loss}
    row.update({f"losses/{head}_value_loss": value for head, value in stats.value_loss.items()})
    for key in AGENT_LOSS_KEYS:
        values: dict[str, float] = getattr(stats, key)
        row.update({f"losses/{name}_{key}": value for name, value in values.items()})
    return row


class MAPPOLearner(Learner):
    """MAPPO's part of the frame (see the module docstring); ``config.critic`` picks MAPPO or IPPO."""

    seeded_rounds = True

    def __init__(self, config: TrainConfig, venv: EnsembleVectorEnv, agents: Agents | None = None) -> None:
        super().__init__(config, venv)
        self.config: TrainConfig = config
        self.agents = agents or Agents.build(
            venv,
            config.hidden_size,
            config.decider_initial_prob,
            config.critic,
            config.decider_policy,
            config.decider_residual_gain,
            config.fusion_team_size,
        )
        self.explained: dict[str, float] = {}
        self.last_stats: UpdateStats | None = None
        """The statistics of the last update, by name (what :meth:`log_row` logged)."""

    @staticmethod
    def env_options(config: TrainConfig, cache: LogitCache) -> dict[str, Any]:  # type: ignore[override]
        return env_options(config, cache)

    @staticmethod
    def fits_start(config: TrainConfig) -> bool:  # type: ignore[override]
        return config.decider_start == "offline"

    def start(self, venv: EnsembleVectorEnv, *, fit: bool, rollouts: int, questions: np.ndarray | None = None) -> None:
        # the size prior, or the offline start from the logged outcomes of ``questions``
        start_decider(self.agents, venv, self.config, fit=fit, rollouts=rollouts, questions=questions)

    def modules(self) -> dict[str, nn.Module]:
        return self.agents.modules()

    def networks(self) -> dict[str, nn.Module]:
        return self.agents.networks()

    def load(self, networks: Mapping[str, Mapping[str, Tensor]], source: str) -> None:
        super().load(networks, source)
        norm = networks["value_norm"]
        for key in ("var", "count"):
            if key in norm and bool((norm[key] < 0).any()):
                raise ValueError(f"{source}: networks.value_norm.{key}: holds a negative value; a variance or count")

    def phase(self, iteration: int, iterations: int) -> Phase:
        two_stage = self.config.mode == "two-stage"
        stage_two = two_stage and iteration >= round(self.config.stage_one_fraction * iterations)
        behaviour, actors = schedule(self.config.mode, stage_two)
        return Phase(behaviour, (*actors, "critic"), 2 if stage_two else 1)

    def storage(self, venv: EnsembleVectorEnv, num_steps: int) -> Rollout:
        return self.agents.rollout(venv, num_steps)

    def collect(
        self, venv: EnsembleVectorEnv, storage: Rollout, generator: torch.Generator, behaviour: Behaviour
    ) -> StepRecord:
        return collect(venv, self.agents, storage, venv.observations, generator, behaviour)[1]

    def batch(self, storage: Rollout, next_state: np.ndarray, learners: Sequence[str]) -> dict[str, Tensor]:
        """The agents' advantages and the critic's targets; the value normaliser is updated with this rollout's
        returns first (and the critic's explained variance before the update kept for the log)."""
        advantages, returns = advantages_and_returns(self.agents, storage, next_state, self.config)
        norm = self.agents.value_norm
        explained = explained_variance(returns, norm.denormalize(storage.values))
        self.explained = {agent: explained[VALUE_HEADS.index(agent)] for agent in AGENTS}
        norm.update(returns)
        actors = [agent for agent in AGENTS if agent in learners]
        return batch_of(storage, advantages, norm.normalize(returns), actors, self.config.normalize_advantages)

    def loss(self, minibatch: Mapping[str, Tensor], learners: Sequence[str]) -> Loss:
        """The critic's clipped value loss (summed over its heads), each learning actor's clipped surrogate less its
        entropy bonus, plus its KL divergence from its start policy (``decider_kl_coef``)."""
        config, agents = self.config, self.agents
        actors = [agent for agent in AGENTS if agent in learners]
        ent_coefs, kl_coefs = coefficients(config, actors)
        value_clip = config.clip_coef if config.clip_value else None
        value_loss = clipped_value_loss(
            agents.critic(minibatch["states"]), minibatch["values"], minibatch["targets"], value_clip
        )
        terms = []
        for agent, kl_coef in zip(actors, kl_coefs.tolist(), strict=True):
            actor, inputs, actions = getattr(agents, agent), minibatch[f"inputs/{agent}"], minibatch[f"actions/{agent}"]
            if kl_coef > 0:
                terms.append(actor.evaluate_with_start(inputs, actions))
            else:
                log_prob, entropy = actor.evaluate(inputs, actions)
                terms.append((log_prob, entropy, torch.zeros_like(log_prob)))
        log_probs, entropy, start_kl = (torch.stack([term[k] for term in terms], 1) for k in range(3))
        entropy, start_kl = entropy.mean(0), start_kl.mean(0)
        policy_loss, approx_kl, clip_fraction = clipped_policy_loss(
            log_probs, minibatch["log_probs"], minibatch["advantages"], config.clip_coef
        )
        regulariser = kl_coefs * start_kl - ent_coefs * entropy
        total = value_loss.sum() + policy_loss.sum() + regulariser.sum()
        stats = {f"value_loss/{head}": value_loss[k].detach() for k, head in enumerate(VALUE_HEADS)}
        for k, agent in enumerate(actors):
            stats[f"policy_loss/{agent}"] = policy_loss[k].detach()
            stats[f"entropy/{agent}"] = entropy[k].detach()
            stats[f"approx_kl/{agent}"] = approx_kl[k]
            stats[f"clip_fraction/{agent}"] = clip_fraction[k]
            if kl_coefs[k] > 0:
                stats[f"start_kl/{agent}"] = start_kl[k].detach()
        return Loss(total, stats)

    @staticmethod
    def log_columns(models: Sequence[str]) -> list[str]:
        columns = ["losses/value_loss", *(f"losses/{head}_value_loss" for head in VALUE_HEADS)]
        columns.append("losses/critic_grad_norm")
        return columns + [f"losses/{agent}_{key}" for agent in AGENTS for key in AGENT_LOSS_KEYS]

    def log_row(self, means: Mapping[str, Tensor], grad_norms: Mapping[str, float]) -> dict[str, float]:
        self.last_stats = self.update_stats(means, grad_norms)
        return losses_row(self.last_stats)

    def update_stats(self, means: Mapping[str, Tensor], grad_norms: Mapping[str, float]) -> UpdateStats:
        """The update's statistics by name (:class:`~ensemble_mappo.ppo.UpdateStats`)."""

        def group(prefix: str) -> dict[str, float]:
            parts = ((name.partition("/"), value) for name, value in means.items())
            return {key: float(value) for (kind, _, key), value in parts if kind == prefix}

        return UpdateStats(
            value_loss=group("value_loss"),
            policy_loss=group("policy_loss"),
            entropy=group("entropy"),
            approx_kl=group("approx_kl"),
            clip_fraction=group("clip_fraction"),
            start_kl=group("start_kl"),
            grad_norm=dict(grad_norms),
            explained_variance=dict(self.explained),
        )
