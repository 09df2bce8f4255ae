"""Evaluation of a trained run on a split of the cache, frozen (default) or the paper's online protocol, for every
algorithm of the frame; and the choice, on the validation split, of the policy a run deploys (:func:`choose`).

- **frozen**: the run's policy plays the split's stream once, in the cache's order, each agent acting by its
  mode (MAPPO's decider keeps the models with probability > 1/2, and never fewer than ``max(1, min_team_size)``;
  its fusion agent takes its most probable valid choice; RLAE's weights are their Betas' means). Nothing is learned
  from the split's labels.
- **online** (RL-Focal's protocol): the agents sample their actions and, every ``update_every`` questions, run
  an update of their algorithm on the questions just answered, whose labels have been revealed by then (the run's
  hyperparameters and optimizer state; the block is one minibatch). Every answer is given before its label
  is used. The result is labelled online in every output, because it is not a frozen policy's score.

The run's policy: the one ``selection.json`` names when the run kept checkpoints (``checkpoints`` > 0:
:func:`choose` played each on the validation split and the config's ``selection`` rule chose), else its last
checkpoint; any kept one by name (``evaluate --checkpoint update_40``, or ``last``).

Reports per-task accuracy, mean reward per question (the environment's reward at the run's options), mean
team size, per-model selection frequency and cost, and (as a table) the baselines of
:mod:`ensemble_env.baselines.comparison` fitted on train (:data:`BASELINES`: ``static_team``, the best fixed team per
task, is the strongest simple opponent), scored on the run's reward, with the learned policy as one more row.
Any split works, ``validation`` included (choose settings there; report test).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
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
from ensemble_mappo import algorithms
from ensemble_mappo.checkpoint import Checkpoint, load_networks, load_optimizer, read_checkpoint
from ensemble_mappo.config import LIMITS, LearnerConfig
from ensemble_mappo.frame import FROZEN, LEARNING, make_env, make_optimizer, update
from ensemble_mappo.runs import (
    CANDIDATES_DIR,
    CHECKPOINT_NAME,
    MAX_CONFIG_BYTES,
    SELECTION_NAME,
    RunConfig,
    describe,
    read_config,
    read_json,
    refuse,
    whole_number,
)

__all__ = [
    "BASELINES",
    "PROTOCOLS",
    "Evaluation",
    "baseline_summary",
    "candidates",
    "evaluate_agents",
    "evaluate_candidates",
    "evaluate_run",
    "evaluation_path",
    "format_report",
    "policy_checkpoint",
    "read_evaluation",
    "read_selection",
    "reward_settings",
    "run_baselines",
    "save_evaluation",
]

#: the baselines ``evaluate`` lists: those of the registry (:data:`ensemble_env.baselines.registry.BASELINES`) marked
#: ``in_evaluate``, in its order (the team-enumerating ``static_team`` only on pools of at most
#: :data:`ensemble_env.baselines.routing.MAX_TEAM_MODELS` models)
BASELINES = tuple(name for name, entry in registry.BASELINES.items() if entry.in_evaluate)

#: the evaluation protocols, each with the words reports print for it
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
    algorithm: str = "mappo"
    """The run's algorithm (:data:`ensemble_mappo.algorithms.ALGORITHMS`)."""
    checkpoint: str = ""
    """Which of the run's checkpoints played: ``"last"``, a kept ``"update_N"`` or ``"deployed"`` (the start refitted
    on train + validation); empty for networks given directly."""

    @property
    def name(self) -> str:
        """Row name in tables: the algorithm's, e.g. ``mappo`` or ``mappo(online)``."""
        return self.algorithm if self.protocol == "frozen" else f"{self.algorithm}(online)"

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
            "checkpoint": self.checkpoint,
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
    checkpoint: str | None = None,
) -> Evaluation:
    """Play ``split`` of ``cache`` once, in order, with the run's policy (see the module docstring; ``checkpoint``
    names another: ``"last"`` or a kept ``"update_N"``).

    The run's files are read and checked whole first (:func:`ensemble_mappo.runs.read_config`,
    :func:`~ensemble_mappo.checkpoint.read_checkpoint`): a bad one is refused naming the file, the field and the
    value.
    """
    run_config = read_config(run_dir)
    if list(cache.models) != list(run_config.models):
        raise ValueError(
            f"the cache's models {list(cache.models)} differ from the run's {list(run_config.models)} "
            f"({run_config.path}): evaluate with the cache the run was trained on"
        )
    chosen = policy_checkpoint(run_dir, run_config, checkpoint)
    evaluation = evaluate_agents(
        chosen.networks,
        run_config.config,
        cache,
        split=split,
        online=online,
        update_every=update_every,
        seed=seed,
        optimizer_state=chosen.optimizer if online else None,
        run=str(run_dir),
        iteration=chosen.iteration,
        global_step=chosen.global_step,
        source=str(chosen.path),
    )
    return dataclasses.replace(
        evaluation, checkpoint=chosen.path.stem if chosen.path.parent.name == CANDIDATES_DIR else "last"
    )


def evaluate_agents(
    networks: Mapping[str, Mapping[str, torch.Tensor]],
    config: LearnerConfig,
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
    """Play ``split`` of ``cache`` once, in order, with the networks (:meth:`~ensemble_mappo.frame.Learner.state_dict`)
    of a run trained with ``config`` (a checkpoint's, or the live learner's). The networks are copied: the online
    protocol learns on its copy. They are checked against the networks ``config`` builds on ``cache`` (names, shapes,
    finite values: a NaN policy is refused), and so is ``optimizer_state``; ``source`` (e.g. the checkpoint file) is
    named in the errors."""
    if isinstance(update_every, bool) or not isinstance(update_every, int) or update_every < 1:
        raise ValueError(f"update_every must be an integer >= 1, got {show(update_every)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= LIMITS["seed"]:
        raise ValueError(f"seed must be an integer in [0, {LIMITS['seed']}], got {show(seed)}")
    torch.set_num_threads(config.threads)
    name = config.algorithm
    kind = algorithms.get(name).learner_class()
    options = kind.env_options(config, cache)
    if options.get("episodes") == "task":  # tasks never seen: each task played once, from an empty history
        if online:
            raise ValueError("online: the online protocol plays one stream; a run of task episodes is evaluated frozen")
        return _task_episodes(networks, config, cache, options, split, seed, source, (run, iteration, global_step))
    venv = make_env(cache, options, num_envs=1, split=split)
    learner = kind(config, venv)
    load_networks(learner, networks, source)
    learner.reseed(seed)
    n_stream = venv.episode_length
    generator = torch.Generator().manual_seed(seed)
    venv.reset(seed=seed)

    blocks = [n_stream] if not online else [min(update_every, n_stream - s) for s in range(0, n_stream, update_every)]
    optimizer = make_optimizer(learner, config) if online else None
    if optimizer is not None and optimizer_state is not None:
        load_optimizer(optimizer, optimizer_state, source)
    online_config = dataclasses.replace(config, num_minibatches=1)  # each block of questions is one minibatch
    learners = learner.phase(0, 1).learners if online else ()
    parts: dict[str, list[np.ndarray]] = {
        key: [] for key in ("question", "answer", "correct", "cost", "teams", "reward")
    }
    for steps in blocks:
        storage = learner.storage(venv, steps)
        record = learner.collect(venv, storage, generator, LEARNING if online else FROZEN)
        next_state = venv.state()
        for key in ("question", "answer", "correct", "cost"):
            parts[key].append(getattr(record, key)[:, 0])
        parts["teams"].append(record.team[:, 0])
        parts["reward"].append(np.asarray(storage.rewards[:, 0], dtype=np.float64))
        if optimizer is not None:
            update(learner, optimizer, storage, next_state, online_config, generator, learners)
    joined = {key: np.concatenate(value) for key, value in parts.items()}
    where = (run, iteration, global_step)
    evaluation = _evaluation(joined, cache, venv, name, split, where, update_every if online else None)
    return _exact_rewards(evaluation, cache)


def evaluate_candidates(
    networks: Sequence[Mapping[str, Mapping[str, torch.Tensor]]],
    config: LearnerConfig,
    cache: LogitCache,
    *,
    split: str = "validation",
    seed: int = 0,
    sources: Sequence[str] = (),
) -> list[Evaluation]:
    """:func:`evaluate_agents` (frozen) of each of several networks of one run, e.g. the checkpoints :func:`choose
    <ensemble_mappo.training.choose>` reads: the same evaluations, played in one vector environment.

    Copy k of the environment plays the split's stream with networks ``k``; the copies play the same questions in
    lockstep (a frozen policy's stream starts at the split's first question), each network acting on its own copy's
    rows exactly as it would alone (a batch of one row), so each evaluation equals :func:`evaluate_agents`'s, bit for
    bit; only the environment's step, the fusion features and the bookkeeping are shared. A learner without MAPPO's
    agents, and task episodes (already one copy per task), are evaluated one network at a time."""
    from ensemble_mappo.agents import Agents
    from ensemble_mappo.mappo import MAPPOLearner

    names = list(sources) or [f"networks {k}" for k in range(len(networks))]
    kind = algorithms.learner_of(config)
    options = kind.env_options(config, cache)
    if len(networks) < 2 or options.get("episodes") == "task" or not issubclass(kind, MAPPOLearner):
        return [
            evaluate_agents(n, config, cache, split=split, seed=seed, source=s)
            for n, s in zip(networks, names, strict=True)
        ]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= LIMITS["seed"]:
        raise ValueError(f"seed must be an integer in [0, {LIMITS['seed']}], got {show(seed)}")
    torch.set_num_threads(config.threads)
    venv = make_env(cache, options, num_envs=len(networks), split=split)
    single = make_env(cache, options, num_envs=1, split=split)
    learners = []
    for state, source in zip(networks, names, strict=True):
        learner = kind(config, single)
        load_networks(learner, state, source)
        learners.append(learner)
    parts = [learner.agents for learner in learners]  # type: ignore[attr-defined]
    agents = Agents(
        decider=_rowwise([a.decider for a in parts]),
        fusion=_rowwise([a.fusion for a in parts]),
        critic=_rowwise([a.critic for a in parts]),
        value_norm=parts[0].value_norm,
    )
    batch = MAPPOLearner(config, venv, agents)  # type: ignore[arg-type]
    venv.reset(seed=seed)
    storage = batch.storage(venv, venv.episode_length)
    record = batch.collect(venv, storage, torch.Generator().manual_seed(seed), FROZEN)
    evaluations = []
    for k in range(len(networks)):
        joined = {key: getattr(record, key)[:, k] for key in ("question", "answer", "correct", "cost")}
        joined |= {"teams": record.team[:, k], "reward": np.asarray(storage.rewards[:, k], dtype=np.float64)}
        evaluation = _evaluation(joined, cache, venv, config.algorithm, split, ("", 0, 0), None)
        evaluations.append(_exact_rewards(evaluation, cache))
    return evaluations


def _rowwise(modules: Sequence[torch.nn.Module]) -> Any:
    """A stand-in for ``modules[0]`` over a batch of rows of K copies, copy-major within each step (rows t * K + k):
    its forward applies ``modules[k]`` to copy k's rows alone (the rest of its methods, which hold no parameters, are
    the module's own)."""
    stand_in = copy.copy(modules[0])
    n_copies = len(modules)

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        if inputs.shape[0] % n_copies:
            raise RuntimeError(f"{inputs.shape[0]} rows are not whole steps of the {n_copies} copies")
        steps = inputs.reshape(-1, n_copies, *inputs.shape[1:])
        return torch.stack([module(steps[:, k]) for k, module in enumerate(modules)], 1).flatten(0, 1)

    stand_in.forward = forward
    return stand_in


def _evaluation(
    joined: Mapping[str, np.ndarray],
    cache: LogitCache,
    venv: Any,
    algorithm: str,
    split: str,
    where: tuple[str, int, int],
    update_every: int | None,
) -> Evaluation:
    """The :class:`Evaluation` of per-question arrays (``question``, ``answer``, ``correct``, ``cost``, ``teams``,
    ``reward``) played on ``venv``; ``where`` is (run, update, training steps); online when ``update_every``."""
    return Evaluation(
        protocol="frozen" if update_every is None else "online",
        split=split,
        update_every=update_every,
        run=where[0],
        iteration=where[1],
        global_step=where[2],
        models=tuple(cache.models),
        questions=np.asarray(joined["question"]).astype(np.int64),
        answers=np.asarray(joined["answer"]).astype(np.int64),
        correct=np.asarray(joined["correct"]) > 0,
        teams=np.asarray(joined["teams"]),
        cost=np.asarray(joined["cost"]),
        rewards=np.asarray(joined["reward"], dtype=np.float64),
        reward=RewardSettings.of(venv.config),
        diversity_bonus=float(venv.config.diversity_bonus),
        algorithm=algorithm,
    )


def _exact_rewards(evaluation: Evaluation, cache: LogitCache) -> Evaluation:
    """The evaluation with its rewards recomputed in float64 (the environment's travel as float32) by the same
    reward function (:func:`ensemble_env.game.reward.reward_value`), so that the summary and the baselines table
    print the same numbers; a mismatch beyond float32 rounding is an error."""
    if evaluation.diversity_bonus:
        return evaluation
    exact = evaluation.result(cache).rewards(cache, evaluation.reward)
    if not np.allclose(exact, evaluation.rewards, rtol=0, atol=1e-5):
        raise RuntimeError("the evaluation's rewards differ from the environment's reward of its answers")
    return dataclasses.replace(evaluation, rewards=exact)


def _task_episodes(
    networks: Mapping[str, Mapping[str, torch.Tensor]],
    config: LearnerConfig,
    cache: LogitCache,
    options: Mapping[str, Any],
    split: str,
    seed: int,
    source: str,
    where: tuple[str, int, int],
) -> Evaluation:
    """A frozen evaluation of task episodes (``episodes="task"``): one copy per task of the split, each dealt its
    own task and playing all of its questions in cache order from an empty history; the answers are gathered in
    the cache's order. Every question of the split is answered once."""
    name = config.algorithm
    kind = algorithms.get(name).learner_class()
    questions = cache.select(split, tasks=options.get("tasks"))
    tasks = np.asarray(cache.tasks)[questions]
    counts = np.bincount(tasks, minlength=cache.n_tasks)
    present = np.flatnonzero(counts)
    venv = make_env(cache, options, num_envs=present.size, split=split)
    learner = kind(config, venv)
    load_networks(learner, networks, source)
    learner.reseed(seed)
    venv.reset(seed=seed)
    steps = int(counts.max())
    storage = learner.storage(venv, steps)
    record = learner.collect(venv, storage, torch.Generator().manual_seed(seed), FROZEN)
    first = np.asarray(cache.tasks)[record.question[0].astype(np.int64)]
    if sorted(first.tolist()) != present.tolist():
        raise RuntimeError("the task episodes were not dealt one task per copy")
    keep = np.arange(steps)[:, None] < counts[first][None, :]  # each copy's first episode: its task, once
    order = np.argsort(record.question[keep], kind="stable")
    parts = {"question": record.question, "answer": record.answer, "correct": record.correct, "cost": record.cost}
    joined = {
        key: value[keep][order] for key, value in {**parts, "teams": record.team, "reward": storage.rewards}.items()
    }
    evaluation = _evaluation(joined, cache, venv, name, split, where, None)
    if not np.array_equal(evaluation.questions, questions):
        raise RuntimeError("the task episodes did not answer every question of the split once")
    return _exact_rewards(evaluation, cache)


# -- the run's policy, chosen on validation ---------------------------------------------------------------------
_CANDIDATE = re.compile(r"update_(0|[1-9][0-9]{0,11})\.pt")
#: the name of the deployed start, refitted on train + validation (``checkpoints/deployed.pt``)
DEPLOYED = "deployed"


def candidates(run_dir: str | Path) -> list[tuple[int, Path]]:
    """The run's kept checkpoints, ``(update, file)`` in the order of their updates."""
    folder = Path(run_dir) / CANDIDATES_DIR
    if not folder.is_dir():
        return []
    matches = (_CANDIDATE.fullmatch(name) for name in os.listdir(folder))
    return sorted((int(match.group(1)), folder / match.group(0)) for match in matches if match)


def read_selection(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's ``selection.json``, checked (None when the run has none)."""
    path = Path(run_dir) / SELECTION_NAME
    if not os.path.lexists(path):
        return None
    data = read_json(path, MAX_CONFIG_BYTES, "")
    if not isinstance(data, dict):
        raise refuse(path, "", f"expected an object with the chosen update, got {describe(data)}")
    whole_number(path, "update", data.get("update"), low=0)
    if not isinstance(data.get("rule"), str) or not isinstance(data.get("candidates"), list):
        raise refuse(path, "", "expected the rule, the chosen update and the candidates")
    checkpoint = data.get("checkpoint")
    if checkpoint not in (DEPLOYED, f"update_{data['update']}"):
        raise refuse(path, "checkpoint", f"expected update_{data['update']} or {DEPLOYED}, got {describe(checkpoint)}")
    return data


def policy_checkpoint(run_dir: str | Path, run: RunConfig, name: str | None = None) -> Checkpoint:
    """The checkpoint of the run's policy: ``name`` (``"last"``, ``"update_N"`` of the kept ones, or ``"deployed"``,
    the start refitted on train + validation), else the one ``selection.json`` names, else the last."""
    folder = Path(run_dir)
    if name is None:
        selection = read_selection(folder)
        name = "last" if selection is None else selection["checkpoint"]
    if name == "last":
        return read_checkpoint(folder / CHECKPOINT_NAME, run)
    if name == DEPLOYED and os.path.lexists(folder / CANDIDATES_DIR / f"{DEPLOYED}.pt"):
        return read_checkpoint(folder / CANDIDATES_DIR / f"{DEPLOYED}.pt", run)  # a folder, FIFO, device: named so
    kept = dict(candidates(folder))
    match = _CANDIDATE.fullmatch(f"{name}.pt")
    if match is None or int(match.group(1)) not in kept:
        names = ", ".join(["last", *(f"update_{update}" for update in kept)])
        raise ValueError(f"{folder}: no checkpoint {show(name)}; the run's checkpoints are {names}")
    return read_checkpoint(kept[int(match.group(1))], run)


def save_evaluation(evaluation: Evaluation, summary: dict[str, Any]) -> Path:
    """Write the summary JSON next to the checkpoint (``plot`` and the benchmarks read it)."""
    path = evaluation_path(evaluation.run, evaluation.split, evaluation.protocol)
    return files.write_text(path, json.dumps(summary, indent=2) + "\n")


def reward_settings(config: LearnerConfig, cache: LogitCache) -> RewardSettings:
    """The environment's reward of a run on ``cache`` (its ``alpha``, ``size_penalty_mode`` and ``use_costs``
    options), without the diversity bonus, which :class:`~ensemble_env.game.reward.RewardSettings` leaves out."""
    options = algorithms.learner_of(config).env_options(config, cache)
    defaults = ensemble_env.EnvConfig()
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


def _which(evaluation: Evaluation) -> str:
    """The policy an evaluation played, in words: its update, its training steps, and which checkpoint."""
    if evaluation.checkpoint == DEPLOYED:
        return "its start, refitted on train + validation: the policy the validation split chose"
    where = f"update {evaluation.iteration}, {evaluation.global_step:,} training steps"
    if evaluation.checkpoint == "last":
        return where + ", its last checkpoint"
    return where + (f", {evaluation.checkpoint}" if evaluation.checkpoint else "")


def format_report(evaluation: Evaluation, cache: LogitCache, baseline_results: list[BaselineResult] | None) -> str:
    """The text ``ensemble-env evaluate`` prints: names in full, each column's numbers with one format
    (accuracies and rewards 4 decimals, team sizes 2, costs :func:`ensemble_env.baselines.cost_format`, in fixed
    notation, their unit said under the first line: :func:`ensemble_env.baselines.cost_note`)."""

    summary = evaluation.summary(cache)
    cost = baselines.cost_format(cache)
    n_models = len(evaluation.models)
    lines = [
        f"{evaluation.name} evaluation [{evaluation.protocol}] - {evaluation.description}",
        f"run {evaluation.run} ({_which(evaluation)}); "
        f"split {evaluation.split}: {summary['n_questions']} questions in the cache's order",
        f"macro accuracy {summary['macro_accuracy']:.4f}   macro reward {summary['macro_reward']:+.4f}   "
        f"accuracy {summary['accuracy']:.4f}   reward {summary['reward']:+.4f}   "
        f"mean team size {summary['mean_team_size']:.2f} of {n_models}   "
        f"mean cost {cost.format(summary['mean_cost'])} ({100 * summary['relative_cost']:.0f}% of the whole pool)",
        baselines.cost_note(cache),
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


# -- reading back ---------------------------------------------------------------------------------------------
#: the largest evaluation summary read (one of bbh5's test split: about 10 KB)
MAX_EVALUATION_BYTES = 64 * 2**20


def read_evaluation(path: str | Path, models: Sequence[str]) -> dict[str, Any]:
    """Read an evaluation summary (``evaluate``'s ``evaluation_*.json``) and check what ``plot`` reads of it:
    ``macro_accuracy`` in [0, 1], ``mean_team_size`` in [0, N], a ``selection_frequency`` in [0, 1] for each
    of ``models``."""
    path = Path(path)
    # an evaluation may hold a NaN where nothing was measured (json writes it so); what plot reads is checked below
    data = read_json(path, MAX_EVALUATION_BYTES, "evaluate the run first (`ensemble-env evaluate DIR`)", constants=True)
    if not isinstance(data, dict):
        raise refuse(path, "", f"expected a JSON object (an evaluation summary), got {describe(data)}")
    checks = {"macro_accuracy": 1.0, "mean_team_size": float(len(models))}
    for key, high in checks.items():
        _number(path, key, data.get(key, None), high, key in data)
    frequencies = data.get("selection_frequency")
    if not isinstance(frequencies, dict):
        raise refuse(path, "selection_frequency", f"expected an object of models, got {describe(frequencies)}")
    for model in models:
        _number(path, f"selection_frequency.{model}", frequencies.get(model), 1.0, model in frequencies)
    return data


def _number(path: Path, field: str, value: Any, high: float, present: bool) -> None:
    if not present:
        raise refuse(path, field, "missing")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= high:
        raise refuse(path, field, f"expected a number in [0, {high:g}], got {describe(value)}")
