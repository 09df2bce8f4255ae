"""Evaluation of a trained run on a split of the cache: frozen (default) or the paper's online protocol.

- **frozen**: the checkpoint's actors play the split's stream once, in the cache's order, each acting by its
  mode (the decider keeps the models with probability > 1/2, and never fewer than ``max(1, min_team_size)``;
  the fusion agent takes its most probable valid choice). Nothing is learned from the split's labels.
- **online** (RL-Focal's protocol): the actors sample their actions and, every ``update_every`` questions, run
  a MAPPO update on the questions just answered, whose labels have been revealed by then (the run's
  hyperparameters and optimizer state; the block is one minibatch). Every answer is given before its label
  is used. The result is labelled online in every output, because it is not a frozen
  policy's score.

Reports per-task accuracy, mean reward per question (the environment's reward at the run's options), mean
team size, per-model selection frequency and cost, and (as a table) the baselines of
:mod:`ensemble_env.baselines.comparison` fitted on train (:data:`BASELINES`: ``static_team``, the best fixed team per
task, is the strongest simple opponent), scored on the run's reward, with the learned policy as one more row.
Any split works, ``validation`` included (choose settings there; report test).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import ensemble_env
from ensemble_env import baselines, files
from ensemble_env.baselines import comparison, registry
from ensemble_env.baselines.report import align_table  # the tables of ensemble_env.baselines.format_table
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings
from ensemble_env.text import show
from ensemble_mappo.config import LIMITS, TrainConfig
from ensemble_mappo.runs import load_networks, load_optimizer, read_checkpoint, read_config
from ensemble_mappo.training import (
    Agents,
    Behaviour,
    collect,
    env_options,
    make_env,
    make_optimizer,
    update,
)

__all__ = [
    "BASELINES",
    "PROTOCOLS",
    "Evaluation",
    "baseline_summary",
    "evaluate_agents",
    "evaluate_run",
    "evaluation_path",
    "format_report",
    "reward_settings",
    "run_baselines",
    "save_evaluation",
]

#: the baselines ``evaluate`` lists: those of the registry (:data:`ensemble_env.baselines.registry.BASELINES`) marked
#: ``in_evaluate``, in its order (the team-enumerating ``static_team`` only on pools of at most
#: :data:`ensemble_env.baselines.routing.MAX_TEAM_MODELS` models)
BASELINES = tuple(name for name, entry in registry.BASELINES.items() if entry.in_evaluate)

PROTOCOLS = {
    "frozen": "frozen policy: no learning on the evaluated questions",
    "online": "ONLINE protocol: the agents keep learning on the evaluated stream (updates every {n} questions "
    "from revealed labels); not a frozen policy's score",
}


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a run: what was answered, by which team, and at what cost, question by question."""

    protocol: str
    split: str
    update_every: int | None
    run: str
    iteration: int
    global_step: int
    models: tuple[str, ...]
    questions: np.ndarray
    answers: np.ndarray
    correct: np.ndarray
    teams: np.ndarray
    cost: np.ndarray
    rewards: np.ndarray
    reward: RewardSettings = DEFAULT_REWARD
    """The reward the run plays for (:func:`reward_settings`): the baselines are scored on it."""
    diversity_bonus: float = 0.0
    """The run's diversity bonus, in ``rewards`` but not in the baselines' reward."""

    @property
    def name(self) -> str:
        """Row name in tables: ``mappo`` or ``mappo(online)``."""
        return "mappo" if self.protocol == "frozen" else "mappo(online)"

    @property
    def description(self) -> str:
        return PROTOCOLS[self.protocol].format(n=self.update_every)

    def result(self, cache: LogitCache) -> BaselineResult:
        """The evaluation as a :class:`~ensemble_env.baselines.BaselineResult` (an empty team answers -1)."""
        team_size = self.teams.sum(axis=1)
        predictions = np.where(team_size > 0, self.answers, -1)
        teams = self.teams.astype(bool)  # with the teams, the costs and a cost-aware reward (use_costs) are known
        return BaselineResult.from_cache(self.name, cache, self.questions, predictions, team_size, teams=teams)

    def summary(self, cache: LogitCache) -> dict[str, Any]:
        """The JSON object of ``ensemble-env evaluate --json``."""
        tasks = np.asarray(cache.tasks)[self.questions]
        task_names = tuple(cache.task_names or ())
        full_cost = self._full_team_cost(cache)
        per_task: dict[str, Any] = {}
        for index in np.unique(tasks):
            rows = tasks == index
            per_task[task_names[index]] = {
                "n_questions": int(rows.sum()),
                "accuracy": float(self.correct[rows].mean()),
                "reward": float(self.rewards[rows].mean()),
                "mean_team_size": float(self.teams[rows].sum(axis=1).mean()),
                "mean_cost": float(self.cost[rows].mean()),
                "selection_frequency": _frequencies(self.models, self.teams[rows]),
            }
        return {
            "protocol": self.protocol,
            "protocol_description": self.description,
            "update_every": self.update_every,
            "split": self.split,
            "run": self.run,
            "iteration": self.iteration,
            "global_step": self.global_step,
            "n_questions": int(self.questions.size),
            "macro_accuracy": float(np.mean([task["accuracy"] for task in per_task.values()])),
            "macro_reward": float(np.mean([task["reward"] for task in per_task.values()])),
            "accuracy": float(self.correct.mean()),
            "reward": float(self.rewards.mean()),
            "mean_team_size": float(self.teams.sum(axis=1).mean()),
            "mean_cost": float(self.cost.mean()),
            "relative_cost": float(self.cost.mean() / full_cost) if full_cost > 0 else 0.0,
            "selection_frequency": _frequencies(self.models, self.teams),
            "model_cost": dict(zip(self.models, self._model_costs(cache).tolist(), strict=True)),
            "tasks": per_task,
        }

    def _model_costs(self, cache: LogitCache) -> np.ndarray:
        """(N,) mean cost per question of each model (1 per question without cache costs)."""
        if cache.costs is None:
            return np.ones(len(self.models))
        costs = np.broadcast_to(np.asarray(cache.costs, dtype=np.float64), (cache.n_questions, len(self.models)))
        return np.asarray(costs[self.questions].mean(axis=0))

    def _full_team_cost(self, cache: LogitCache) -> float:
        return float(self._model_costs(cache).sum())


def _frequencies(models: tuple[str, ...], teams: np.ndarray) -> dict[str, float]:
    return {model: float(value) for model, value in zip(models, teams.mean(axis=0), strict=True)}


def evaluation_path(run_dir: str | Path, split: str, protocol: str) -> Path:
    """Where ``evaluate`` saves its JSON inside the run directory (``evaluation_test.json``, ...)."""
    suffix = "" if protocol == "frozen" else f"_{protocol}"
    return Path(run_dir) / f"evaluation_{split}{suffix}.json"


def evaluate_run(
    run_dir: str | Path,
    cache: LogitCache,
    *,
    split: str = "test",
    online: bool = False,
    update_every: int = 64,
    seed: int = 0,
) -> Evaluation:
    """Play ``split`` of ``cache`` once, in order, with the run's checkpoint (see the module docstring).

    The run's files are read and checked whole first (:func:`ensemble_mappo.runs.read_config`,
    :func:`~ensemble_mappo.runs.read_checkpoint`): a bad one is refused naming the file, the field and the value.
    """
    run_config = read_config(run_dir)
    if list(cache.models) != list(run_config.models):
        raise ValueError(
            f"the cache's models {list(cache.models)} differ from the run's {list(run_config.models)} "
            f"({run_config.path}): evaluate with the cache the run was trained on"
        )
    checkpoint = read_checkpoint(run_dir, run_config)
    return evaluate_agents(
        checkpoint.networks,
        run_config.config,
        cache,
        split=split,
        online=online,
        update_every=update_every,
        seed=seed,
        optimizer_state=checkpoint.optimizer if online else None,
        run=str(run_dir),
        iteration=checkpoint.iteration,
        global_step=checkpoint.global_step,
        source=str(checkpoint.path),
    )


def evaluate_agents(
    networks: Mapping[str, Mapping[str, torch.Tensor]],
    config: TrainConfig,
    cache: LogitCache,
    *,
    split: str = "validation",
    online: bool = False,
    update_every: int = 64,
    seed: int = 0,
    optimizer_state: Mapping[str, torch.Tensor] | None = None,
    run: str = "",
    iteration: int = 0,
    global_step: int = 0,
    source: str = "networks",
) -> Evaluation:
    """Play ``split`` of ``cache`` once, in order, with the networks of ``Agents.state_dict()`` of a run
    trained with ``config`` (e.g. a checkpoint's, or the live agents' during training, for model selection on
    the validation split). The networks are copied: the online protocol learns on its copy. They are checked
    against the networks ``config`` builds on ``cache`` (names, shapes, finite values: a NaN policy is refused),
    and so is ``optimizer_state``; ``source`` (e.g. the checkpoint file) is named in the errors."""
    if isinstance(update_every, bool) or not isinstance(update_every, int) or update_every < 1:
        raise ValueError(f"update_every must be an integer >= 1, got {show(update_every)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= LIMITS["seed"]:
        raise ValueError(f"seed must be an integer in [0, {LIMITS['seed']}], got {show(seed)}")
    torch.set_num_threads(config.threads)
    venv = make_env(cache, env_options(config, cache), num_envs=1, split=split)
    agents = Agents.build(venv, config.hidden_size, critic=config.critic, decider_policy=config.decider_policy)
    load_networks(agents, networks, source)
    n_stream = venv.episode_length
    generator = torch.Generator().manual_seed(seed)
    obs, _ = venv.reset(seed=seed)

    blocks = [n_stream] if not online else [min(update_every, n_stream - s) for s in range(0, n_stream, update_every)]
    behaviour = Behaviour(decider="sample", fusion="sample") if online else Behaviour(decider="mode", fusion="mode")
    optimizer = make_optimizer(agents, config) if online else None
    if optimizer is not None and optimizer_state is not None:
        load_optimizer(optimizer, optimizer_state, source)
    online_config = dataclasses.replace(config, num_minibatches=1)  # each block of questions is one minibatch
    parts: dict[str, list[np.ndarray]] = {
        key: [] for key in ("question", "answer", "correct", "cost", "teams", "reward")
    }
    for steps in blocks:
        rollout = agents.rollout(venv, steps)
        obs, record = collect(venv, agents, rollout, obs, generator, behaviour)
        next_state = venv.state()
        for key in ("question", "answer", "correct", "cost"):
            parts[key].append(getattr(record, key)[:, 0])
        parts["teams"].append(record.team[:, 0])
        parts["reward"].append(rollout.rewards[:, 0].astype(np.float64))
        if optimizer is not None:
            update(agents, optimizer, rollout, next_state, online_config, generator)
    joined = {key: np.concatenate(value) for key, value in parts.items()}
    evaluation = Evaluation(
        protocol="online" if online else "frozen",
        split=split,
        update_every=update_every if online else None,
        run=run,
        iteration=iteration,
        global_step=global_step,
        models=tuple(cache.models),
        questions=joined["question"].astype(np.int64),
        answers=joined["answer"].astype(np.int64),
        correct=joined["correct"] > 0,
        teams=joined["teams"],
        cost=joined["cost"],
        rewards=joined["reward"],
        reward=reward_settings(config, cache),
        diversity_bonus=float(venv.config.diversity_bonus),
    )
    if evaluation.diversity_bonus:
        return evaluation
    # the environment's rewards travel as float32: recomputed in float64 by the same reward function
    # (ensemble_env.game.reward.reward_value), so that the summary and the baselines table print the same numbers
    exact = evaluation.result(cache).rewards(cache, evaluation.reward)
    if not np.allclose(exact, evaluation.rewards, rtol=0, atol=1e-5):
        raise RuntimeError("the evaluation's rewards differ from the environment's reward of its answers")
    return dataclasses.replace(evaluation, rewards=exact)


def save_evaluation(evaluation: Evaluation, summary: dict[str, Any]) -> Path:
    """Write the summary JSON next to the checkpoint (``plot`` and the benchmarks read it)."""
    path = evaluation_path(evaluation.run, evaluation.split, evaluation.protocol)
    return files.write_text(path, json.dumps(summary, indent=2) + "\n")


def reward_settings(config: TrainConfig, cache: LogitCache) -> RewardSettings:
    """The environment's reward of a run on ``cache`` (its ``alpha``, ``size_penalty_mode`` and ``use_costs``
    options), without the diversity bonus, which :class:`~ensemble_env.game.reward.RewardSettings` leaves out."""
    options, defaults = env_options(config, cache), ensemble_env.EnvConfig()
    return RewardSettings(
        alpha=options.get("alpha", defaults.alpha),
        size_penalty_mode=options.get("size_penalty_mode", defaults.size_penalty_mode),
        use_costs=options.get("use_costs", defaults.use_costs),
    )


def baseline_summary(
    cache: LogitCache, results: list[BaselineResult], reward: RewardSettings = DEFAULT_REWARD
) -> dict[str, dict[str, float]]:
    """Each baseline's accuracy and mean reward (at ``reward``) as the evaluation's summary gives them: macro
    (mean over tasks) and over all questions, and its mean team size; by name."""
    summary = {}
    for result in results:
        scores = result.scores(cache, reward)
        summary[result.name] = {
            "macro_accuracy": scores["accuracy"],
            "accuracy": result.accuracy,
            "macro_reward": float(np.mean([task["reward"] for task in scores["tasks"].values()])),
            "reward": scores["reward"],
            "mean_team_size": result.mean_team_size,
        }
    return summary


def run_baselines(
    cache: LogitCache, split: str, seed: int = 0, reward: RewardSettings = DEFAULT_REWARD
) -> list[BaselineResult]:
    """The :data:`BASELINES` fitted on train, scored on ``split``; the routing one (``static_team``) chooses
    its teams by ``reward``. The random and greedy teams have ``min(3, N)`` models."""
    names = comparison.evaluate_baselines(cache)  # demo's too: the same baselines under the same ids
    return comparison.compare(cache, split=split, reward=reward, k=min(3, cache.n_models), seed=seed, names=names)


def format_report(evaluation: Evaluation, cache: LogitCache, baseline_results: list[BaselineResult] | None) -> str:
    """The text ``ensemble-env evaluate`` prints: names in full, each column's numbers with one format
    (accuracies and rewards 4 decimals, team sizes 2, costs :func:`ensemble_env.baselines.cost_format`)."""

    summary = evaluation.summary(cache)
    cost = baselines.cost_format(cache)
    n_models = len(evaluation.models)
    lines = [
        f"MAPPO evaluation [{evaluation.protocol}] - {evaluation.description}",
        f"run {evaluation.run} (update {evaluation.iteration}, {evaluation.global_step:,} training steps); "
        f"split {evaluation.split}: {summary['n_questions']} questions in the cache's order",
        f"macro accuracy {summary['macro_accuracy']:.4f}   macro reward {summary['macro_reward']:+.4f}   "
        f"accuracy {summary['accuracy']:.4f}   reward {summary['reward']:+.4f}   "
        f"mean team size {summary['mean_team_size']:.2f} of {n_models}   "
        f"mean cost {cost.format(summary['mean_cost'])} ({100 * summary['relative_cost']:.0f}% of the whole pool)",
        "",
    ]
    task_rows = [
        [
            name,
            str(task["n_questions"]),
            f"{task['accuracy']:.4f}",
            f"{task['reward']:+.4f}",
            f"{task['mean_team_size']:.2f}",
            cost.format(task["mean_cost"]),
        ]
        for name, task in summary["tasks"].items()
    ]
    lines += align_table(["task", "questions", "accuracy", "reward", "team size", "mean cost"], task_rows)
    lines.append("")
    total = sum(summary["model_cost"][m] * summary["selection_frequency"][m] for m in evaluation.models)
    model_rows = []
    for model in evaluation.models:
        spent = summary["model_cost"][model] * summary["selection_frequency"][model]
        share = spent / total if total > 0 else 0.0
        model_rows.append(
            [
                model,
                f"{summary['selection_frequency'][model]:.3f}",
                cost.format(summary["model_cost"][model]),
                f"{100 * share:.1f}%",
            ]
        )
    lines += align_table(["model", "selected", "cost/question", "cost share"], model_rows)
    if baseline_results is not None:
        reward = evaluation.reward
        lines += [
            "",
            f"against the baselines (fitted on train, scored on {evaluation.split}; {evaluation.name} is "
            f"{'frozen' if evaluation.protocol == 'frozen' else 'ONLINE'}; reward: the run's, "
            f"{reward.size_penalty_mode}{', cost shares' if reward.use_costs else ''}; static_team: the best fixed "
            "team per task on train):",
        ]
        if evaluation.diversity_bonus:
            lines.append(
                f"(the run's diversity bonus, {evaluation.diversity_bonus:g}, is in the macro reward above, not in "
                "this table)"
            )
        lines.append(comparison.format_table(cache, [*baseline_results, evaluation.result(cache)], reward))
    return "\n".join(lines)
