"""``ensemble-env benchmark``: algorithms x seeds x caches, scored on the test split with the environment's reward.

The protocol (``docs/benchmark.md``): every algorithm fits on the cache's train split, makes every choice
(checkpoint, hyperparameter) on its validation split, and answers each test question once; the benchmark
scores the answers with the environment's reward (:func:`ensemble_env.game.reward.question_rewards`, through
:class:`ensemble_env.game.reward.RewardSettings` at the run's ``alpha``) and reports means over seeds with
95% bootstrap intervals (seeds and test questions resampled together), per task and macro.

A researcher adds an algorithm with :func:`register_algorithm`: a function ``(cache, seed, alpha, out_dir)
-> Answers`` (see ``examples/register_algorithm.py``)::

    @register_algorithm("my_router")
    def my_router(cache, seed, alpha, out_dir):
        test = cache.select("test")
        ...  # fit on cache.select("train"), choose on cache.select("validation")
        return Answers(test, predictions, teams)

Built in: ``mappo`` and ``ippo`` (:mod:`ensemble_mappo.training`; IPPO is the same learner with
``critic="local"``), ``rlae_ppo`` and ``rlae_mappo`` (:mod:`ensemble_mappo.rlae`; docs/rlae.md), and the
baselines of :data:`ensemble_env.baselines.registry.BASELINES` (under their names or aliases: ``stacking`` is
``stacking(per_task)``). A finished run is stored under ``DIR/runs/`` with its key (algorithm, seed, cache, alpha,
config) and is not redone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.baselines import comparison, registry
from ensemble_env.baselines.routing import team_vote
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache import datasets
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import write_text
from ensemble_env.game.reward import RewardSettings, check_alpha
from ensemble_env.text import show
from ensemble_mappo.config import TrainConfig
from ensemble_mappo.rlae_config import RLAE_ALGORITHMS, RLAEConfig
from ensemble_mappo.selection import DEFAULT_SELECTION, select

__all__ = [
    "ALGORITHMS",
    "BUDGETS",
    "LEARNERS",
    "RLAE_BUDGETS",
    "Answers",
    "benchmark",
    "bootstrap_interval",
    "learner_answers",
    "register_algorithm",
    "register_command",
    "rlae_answers",
    "uses_test_labels",
]

#: MAPPO/IPPO budgets in passes over the train stream, and how many evaluations on validation choose the
#: checkpoint; ``default`` is :class:`~ensemble_mappo.config.TrainConfig`'s own budget
BUDGETS: dict[str, dict[str, float]] = {
    "tiny": {"passes": 2.0, "checkpoints": 2},
    "quick": {"passes": 40.0, "checkpoints": 4},
    "default": {"passes": TrainConfig().passes, "checkpoints": 5},
}
#: what ``ensemble-env benchmark`` runs without --algorithms: the learners, the competitors, and the headroom (the
#: best fixed team per task chosen on train + validation, a competitor; and in hindsight on test, a reference)
DEFAULT_ALGORITHMS = (
    "mappo",
    "ippo",
    "static_team",
    "static_team(train+val)",
    "router",
    "stacking",
    "best_single",
    "oracle_team(test)",
)
#: what the baselines of the benchmark are called in ensemble_env.baselines.comparison
METRICS = ("accuracy", "reward", "team_size", "cost")


@dataclasses.dataclass(frozen=True)
class Answers:
    """What an algorithm answered on the test split.

    ``questions``: (Q,) the test questions, ``cache.select("test")`` in that order; ``predictions``: (Q,) the
    chosen answer index; ``teams``: (Q, N) bool, the models consulted (at least one per question);
    ``info``: JSON-ready facts for the report (e.g. the checkpoint chosen on validation).
    """

    questions: np.ndarray
    predictions: np.ndarray
    teams: np.ndarray
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


#: ``(cache, seed, alpha, out_dir) -> Answers``
Algorithm = Callable[[LogitCache, int, float, Path], Answers]
#: registered algorithms: name -> (function, config recorded in the run key)
ALGORITHMS: dict[str, tuple[Algorithm, dict[str, Any]]] = {}


def register_algorithm(name: str, *, config: dict[str, Any] | None = None) -> Callable[[Algorithm], Algorithm]:
    """Decorator: register ``function(cache, seed, alpha, out_dir) -> Answers`` as algorithm ``name``.

    The function must fit on ``cache.select("train")``, choose anything it tunes on
    ``cache.select("validation")``, and answer every question of ``cache.select("test")``; ``out_dir`` is
    its own folder (for checkpoints), ``seed`` seeds every random choice, ``alpha`` is the size penalty of
    the reward it is scored on. ``config`` (JSON-ready) is part of the run key: change it and runs are redone.
    """
    if not name or "/" in name or name in _builtin_names():
        raise ValueError(f"algorithm name {name!r} is empty, has a '/', or is a built-in name")

    def decorate(function: Algorithm) -> Algorithm:
        ALGORITHMS[name] = (function, dict(config or {}))
        return function

    return decorate


#: the learners built in: MAPPO/IPPO (ensemble_mappo.training) and the RLAE learners (ensemble_mappo.rlae)
LEARNERS = ("mappo", "ippo", *RLAE_ALGORITHMS)
#: RLAE budgets in passes over the train stream and validation checkpoints; ``default`` is RLAEConfig's own
RLAE_BUDGETS: dict[str, dict[str, float]] = {
    "tiny": {"passes": 1.0, "checkpoints": 1},
    "quick": {"passes": 10.0, "checkpoints": 2},
    "default": {"passes": RLAEConfig().passes, "checkpoints": RLAEConfig().checkpoints},
}


def _builtin_names() -> tuple[str, ...]:
    return (
        *LEARNERS,
        *registry.BASELINES,
        *(alias for entry in registry.BASELINES.values() for alias in entry.aliases),
    )


# -- built-in algorithms -----------------------------------------------------------------------------------


def _baseline(name: str) -> Algorithm:
    def run(cache: LogitCache, seed: int, alpha: float, out_dir: Path) -> Answers:
        (result,) = comparison.compare(
            cache, split="test", train_split="train", reward=RewardSettings(alpha=alpha), seed=seed, names=[name]
        )
        teams = result.teams
        if teams is None:  # a result without members (e.g. a vote): every model was consulted
            teams = np.ones((result.n_questions, cache.n_models), dtype=bool)
        info = {key: value for key, value in result.info.items() if isinstance(value, str | int | float | list)}
        return Answers(np.asarray(result.questions), np.asarray(result.predictions), np.asarray(teams), info)

    return run


def _require_validation(cache: LogitCache) -> None:
    """The learners choose their checkpoint on the validation split: a cache without one is refused, with the fix."""
    try:
        cache.select("validation")
    except ValueError as error:  # no validation question
        raise ValueError(
            f"{error}: the learners choose their checkpoint on the validation split; add one with "
            "`ensemble-env cache split CACHE -o OUT.h5 --validation-fraction 0.2`"
        ) from None


def learner_answers(
    cache: LogitCache,
    seed: int,
    alpha: float,
    out_dir: Path,
    *,
    critic: str = "central",
    passes: float = TrainConfig().passes,
    checkpoints: int = 5,
    progress: bool = False,
    overrides: Mapping[str, Any] | None = None,
    selection: str = DEFAULT_SELECTION,
) -> Answers:
    """Train MAPPO (``critic="central"``) or IPPO (``"local"``) on train, choose on validation the policy to
    deploy among its start (update 0) and ``checkpoints`` evenly spaced checkpoints, and answer the test split
    with it.

    ``selection`` is the rule (:mod:`ensemble_mappo.selection`): ``"safe"`` (the default) deploys a checkpoint
    only where its paired validation gain over the start is positive with confidence, else the start;
    ``"best"`` the highest mean validation reward. ``overrides``: fields of
    :class:`~ensemble_mappo.config.TrainConfig` other than the defaults (an ``env`` table adds to the default
    environment options). Test is played once, after the choice; the choice reads the validation split only.
    """
    from ensemble_mappo.checkpoint import load_checkpoint
    from ensemble_mappo.evaluation import evaluate_agents
    from ensemble_mappo.training import Budget, start_networks, train

    _require_validation(cache)
    changes = dict(overrides or {})
    base = dataclasses.replace(TrainConfig(seed=seed, passes=passes, critic=critic), **changes)
    config = dataclasses.replace(base, env={**TrainConfig().env, **base.env, "alpha": float(alpha)})
    iterations = Budget.plan(config, int(cache.select("train").size)).iterations
    stops = sorted({max(1, round(iterations * (k + 1) / checkpoints)) for k in range(checkpoints)})
    candidates = [(0, start_networks(config, cache))]
    for index, stop in enumerate(stops):
        train(config, cache, out_dir, resume=index > 0, progress=progress, stop_after=stop)
        candidates.append((stop, load_checkpoint(out_dir)["networks"]))
    rewards = [
        np.asarray(evaluate_agents(networks, config, cache, split="validation", seed=seed).rewards, dtype=np.float64)
        for _, networks in candidates
    ]
    chosen = select(rewards, selection)
    history = [{"iteration": stop, **chosen.row(k)} for k, (stop, _) in enumerate(candidates)]
    iteration, networks = candidates[chosen.index]
    test = evaluate_agents(networks, config, cache, split="test", seed=seed)
    teams = np.asarray(test.teams, dtype=bool)
    info = {
        "selected_iteration": iteration,
        "of_iterations": iterations,
        "selection": {"rule": chosen.rule, "delta": chosen.delta, "z": chosen.z},
        "validation": history,
    }
    return Answers(test.questions, test.answers, teams, info)


def _learner(critic: str, budget: str) -> tuple[Algorithm, dict[str, Any]]:
    settings = BUDGETS[budget]

    def run(cache: LogitCache, seed: int, alpha: float, out_dir: Path) -> Answers:
        return learner_answers(
            cache,
            seed,
            alpha,
            out_dir,
            critic=critic,
            passes=settings["passes"],
            checkpoints=int(settings["checkpoints"]),
        )

    # the learner's whole configuration is part of the run key: a run of other defaults is not reused
    defaults = {key: value for key, value in dataclasses.asdict(TrainConfig()).items() if key != "seed"}
    return run, {"budget": budget, **settings, "selection": DEFAULT_SELECTION, "train_config": defaults}


def rlae_answers(
    cache: LogitCache, seed: int, alpha: float, out_dir: Path, *, algorithm: str, passes: float, checkpoints: int
) -> Answers:
    """Train ``rlae_ppo`` or ``rlae_mappo`` on train (the policy kept: the best mean validation reward among the
    start and ``checkpoints`` evenly spaced ones, :func:`ensemble_mappo.rlae.train_rlae`) and answer the test split
    once with it. Every model answers every question (no decider)."""
    from ensemble_mappo.rlae import evaluate_rlae_run, train_rlae

    _require_validation(cache)
    config = RLAEConfig(algorithm=algorithm, seed=seed, passes=passes, checkpoints=checkpoints, env={"alpha": alpha})
    fit = train_rlae(config, cache, out_dir, progress=False)
    test = evaluate_rlae_run(out_dir, cache, split="test")
    info = {"selected_iteration": fit["selected_iteration"], "of_iterations": fit["iterations"]}
    return Answers(
        test.questions, test.answers, np.asarray(test.teams, dtype=bool), {**info, "validation": fit["validation"]}
    )


def _rlae_learner(algorithm: str, budget: str) -> tuple[Algorithm, dict[str, Any]]:
    settings = RLAE_BUDGETS[budget]

    def run(cache: LogitCache, seed: int, alpha: float, out_dir: Path) -> Answers:
        passes, checkpoints = settings["passes"], int(settings["checkpoints"])
        return rlae_answers(cache, seed, alpha, out_dir, algorithm=algorithm, passes=passes, checkpoints=checkpoints)

    # the learner's whole configuration is part of the run key: a run of other defaults is not reused
    defaults = {key: value for key, value in RLAEConfig(algorithm=algorithm).to_dict().items() if key != "seed"}
    return run, {"budget": budget, **settings, "rlae_config": defaults}


def resolve(name: str, budget: str) -> tuple[Algorithm, dict[str, Any]]:
    """The function and key config of algorithm ``name``: a learner, a baseline, or a registered one."""
    if name in ("mappo", "ippo"):
        return _learner("central" if name == "mappo" else "local", budget)
    if name in RLAE_ALGORITHMS:
        return _rlae_learner(name, budget)
    with contextlib.suppress(ValueError):
        return _baseline(registry.lookup(name).name), {}
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    known = ", ".join([*_builtin_names(), *ALGORITHMS])
    raise ValueError(f"--algorithms: unknown algorithm {name!r}; known: {known}")


# -- scoring ------------------------------------------------------------------------------------------


def _check(answers: Answers, cache: LogitCache, name: str) -> BaselineResult:
    test = cache.select("test")
    questions = np.asarray(answers.questions)
    if not np.array_equal(questions, test):
        raise ValueError(f"algorithm {name!r}: answers.questions must be cache.select('test') in order")
    teams = np.asarray(answers.teams)
    if teams.dtype != np.bool_ or teams.shape != (test.size, cache.n_models) or not teams.any(axis=1).all():
        raise ValueError(f"algorithm {name!r}: answers.teams must be (Q, N) bool with a model in every row")
    return BaselineResult.from_cache(name, cache, questions, answers.predictions, teams.sum(axis=1), teams=teams)


def _question_metrics(cache: LogitCache, result: BaselineResult, alpha: float) -> dict[str, np.ndarray]:
    """(Q,) per test question: correct, the environment's reward at alpha, team size, cost."""
    return {
        "accuracy": result.correct.astype(np.float64),
        "reward": result.rewards(cache, RewardSettings(alpha=alpha)),
        "team_size": result.team_size,
        "cost": result.costs(cache),
    }


def bootstrap_interval(
    values: np.ndarray,
    tasks: np.ndarray,
    *,
    macro: bool,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean over seeds of a per-question metric ``values`` (S seeds, Q questions), with a bootstrap interval.

    The point is the mean over seeds of the mean over questions (``macro``: of the per-task means, averaged
    over tasks). Each resample draws S seeds with replacement and, within each task, its questions with
    replacement (the same questions for every seed); the interval is the central ``level`` quantile range.
    """
    values = np.asarray(values, dtype=np.float64)
    tasks = np.asarray(tasks)
    if values.ndim != 2 or values.shape[1] != tasks.size:
        raise ValueError(f"values must be (seeds, questions) with {tasks.size} questions, got {values.shape}")
    rng = np.random.default_rng(seed)
    n_seeds = values.shape[0]
    draws = rng.integers(0, n_seeds, (n_resamples, n_seeds))
    per_task, sums, point_tasks = [], np.zeros(n_resamples), []
    for task in np.unique(tasks):
        rows = np.flatnonzero(tasks == task)
        pick = rows[rng.integers(0, rows.size, (n_resamples, rows.size))]
        # resample r: mean over its seeds of the mean over its questions
        chosen = values[draws[:, :, None], pick[:, None, :]]  # (R, S, rows)
        per_task.append(chosen.mean(axis=(1, 2)))
        sums += chosen.sum(axis=2).mean(axis=1)
        point_tasks.append(values[:, rows].mean())
    if macro:
        samples, point = np.mean(per_task, axis=0), float(np.mean(point_tasks))
    else:
        samples, point = sums / tasks.size, float(values.mean())
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return point, float(low), float(high)


#: the references every algorithm is compared with, paired by seed and test question
REFERENCES = ("static_team", "static_team(train+val)", "best_single")
#: how the tables mark an algorithm that reads the test labels (an oracle: the headroom, never a competitor)
TEST_LABELS_ROLE = "reference (uses test labels)"


def uses_test_labels(name: str) -> bool:
    """Whether algorithm ``name`` chooses with the labels of the test questions it is scored on (a baseline marked
    ``uses_test_labels`` in :data:`ensemble_env.baselines.registry.BASELINES`); learners and registered algorithms
    never do."""
    if name in LEARNERS or name in ALGORITHMS:
        return False
    try:
        return registry.lookup(name).uses_test_labels
    except ValueError:
        return False


def _matrices(cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float) -> dict[str, np.ndarray]:
    """(seeds, Q) per metric of :data:`METRICS`, one row per run."""
    stacked: dict[str, list[np.ndarray]] = {}
    for run in runs:
        result = _check(_answers_from_json(run), cache, run["algorithm"])
        for key, column in _question_metrics(cache, result, alpha).items():
            stacked.setdefault(key, []).append(column)
    return {key: np.vstack(columns) for key, columns in stacked.items()}


def paired_differences(
    cache: LogitCache, runs: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]], alpha: float
) -> dict[str, dict[str, float]]:
    """Accuracy and reward of ``runs`` minus ``reference`` (same seeds, same test questions), with a 95%
    bootstrap interval resampling seeds and questions together (see :func:`bootstrap_interval`)."""
    tasks = np.asarray(cache.tasks)[cache.select("test")]
    mine, theirs = _matrices(cache, runs, alpha), _matrices(cache, reference, alpha)
    return {
        key: dict(
            zip(
                ("mean", "low", "high"),
                bootstrap_interval(mine[key] - theirs[key], tasks, macro=key == "accuracy"),
                strict=True,
            )
        )
        for key in ("accuracy", "reward")
    }


def team_changes(teams: np.ndarray, tasks: np.ndarray) -> dict[str, float]:
    """How a sequence of teams ((Q, N) bool, questions in playing order) varies within each task.

    ``mode_share``: share of the questions answered by their task's most used team; ``teams_per_task``: distinct
    teams per task (mean over tasks); ``change_rate``: share of consecutive questions of a task whose teams
    differ; ``flip_flops``: share of those changes that return to the team before (A-B-A).
    """
    teams, tasks = np.asarray(teams, dtype=bool), np.asarray(tasks)
    codes = teams.astype(np.int64) @ (1 << np.arange(teams.shape[1], dtype=np.int64))
    on_mode, distinct, changes, pairs, flips = 0, [], 0, 0, 0
    for task in np.unique(tasks):
        sequence = codes[tasks == task]
        _, counts = np.unique(sequence, return_counts=True)
        on_mode += int(counts.max())
        distinct.append(counts.size)
        changed = sequence[1:] != sequence[:-1]
        changes += int(changed.sum())
        pairs += max(sequence.size - 1, 0)
        flips += int((changed[1:] & (sequence[2:] == sequence[:-2])).sum())
    return {
        "mode_share": on_mode / max(tasks.size, 1),
        "teams_per_task": float(np.mean(distinct)) if distinct else 0.0,
        "change_rate": changes / max(pairs, 1),
        "flip_flops": flips / max(changes, 1),
    }


def _mode_teams(teams: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """(Q, N): each question gets its task's most used team (ties to the team first used)."""
    replaced = np.empty_like(teams)
    for task in np.unique(tasks):
        rows = np.flatnonzero(tasks == task)
        unique, first, counts = np.unique(teams[rows], axis=0, return_index=True, return_counts=True)
        best = max(range(len(unique)), key=lambda k: (counts[k], -first[k]))
        replaced[rows] = unique[best]
    return replaced


def routing(cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float) -> dict[str, Any]:
    """What an algorithm's teams do on test (means over its runs) and two counterfactuals with intervals: its
    own teams answered by their mean-probability vote (``teams_by_vote``: without its fusion step), and each
    task's most used team on every question of the task, by vote (``task_team_by_vote``: without per-question
    routing). Questions are taken in the order the environment plays them (the cache's)."""
    test = cache.select("test")
    tasks = np.asarray(cache.tasks)[test]
    changes = [team_changes(_answers_from_json(run).teams, tasks) for run in runs]
    summary: dict[str, Any] = {key: float(np.mean([c[key] for c in changes])) for key in changes[0]}
    for label, transform in (("teams_by_vote", lambda t: t), ("task_team_by_vote", lambda t: _mode_teams(t, tasks))):
        variants = []
        for run in runs:
            members = transform(_answers_from_json(run).teams)
            result = team_vote(label, cache, test, members)
            variants.append(
                {**run, "predictions": result.predictions.tolist(), "teams": members.astype(np.int8).tolist()}
            )
        matrices = _matrices(cache, variants, alpha)
        summary[label] = {
            key: dict(
                zip(
                    ("mean", "low", "high"),
                    bootstrap_interval(matrices[key], tasks, macro=key == "accuracy"),
                    strict=True,
                )
            )
            for key in ("accuracy", "reward", "team_size")
        }
    return summary


def aggregate(cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float) -> dict[str, Any]:
    """Means over the seeds of one algorithm's runs with 95% intervals: macro and per task, every metric."""
    test = cache.select("test")
    tasks = np.asarray(cache.tasks)[test]
    names = list(cache.task_names)
    matrices = _matrices(cache, runs, alpha)
    overall: dict[str, dict[str, float] | None] = {}
    for key, matrix in matrices.items():
        if np.isnan(matrix).any():
            overall[key] = None
            continue
        overall[key] = dict(
            zip(("mean", "low", "high"), bootstrap_interval(matrix, tasks, macro=key == "accuracy"), strict=True)
        )
    per_task = {}
    for task in np.unique(tasks):
        rows = tasks == task
        per_task[names[task]] = {
            key: None
            if np.isnan(matrix).any()
            else dict(
                zip(("mean", "low", "high"), bootstrap_interval(matrix[:, rows], tasks[rows], macro=False), strict=True)
            )
            for key, matrix in matrices.items()
        }
    return {"seeds": [run["seed"] for run in runs], **overall, "tasks": per_task}


# -- runs on disk ----------------------------------------------------------------------------------------


def _answers_to_json(answers: Answers) -> dict[str, Any]:
    return {
        "questions": np.asarray(answers.questions).tolist(),
        "predictions": np.asarray(answers.predictions).tolist(),
        "teams": np.asarray(answers.teams, dtype=bool).astype(np.int8).tolist(),
        "info": answers.info,
    }


def _answers_from_json(run: dict[str, Any]) -> Answers:
    return Answers(
        np.asarray(run["questions"], dtype=np.int64),
        np.asarray(run["predictions"], dtype=np.int64),
        np.asarray(run["teams"], dtype=np.int8).astype(bool),
        run.get("info", {}),
    )


def _key(algorithm: str, seed: int, cache_name: str, alpha: float, config: dict[str, Any]) -> dict[str, Any]:
    return {"algorithm": algorithm, "seed": seed, "cache": cache_name, "alpha": alpha, "config": config}


def _run_dir(out: Path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key["algorithm"])
    return out / "runs" / Path(key["cache"]).name / f"{safe}-seed{key['seed']}-{digest}"


def _write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=1) + "\n")


def benchmark(
    algorithms: Sequence[str],
    seeds: Iterable[int],
    caches: Sequence[str],
    out: str | os.PathLike[str],
    *,
    alpha: float = 1.0,
    budget: str = "default",
    progress: bool = True,
    plot: bool = True,
) -> dict[str, Any]:
    """Run every algorithm x seed x cache (finished runs are read back, not redone); write ``results.json``,
    ``results.md`` and ``frontier.png`` in ``out``; return the results."""
    if budget not in BUDGETS:
        raise ValueError(f"budget={budget!r} is not one of {', '.join(BUDGETS)}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: give at least one seed (the means and intervals are over seeds)")
    if not all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in seeds):
        raise ValueError(f"seeds must be integers >= 0, got {show(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {show(seeds)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = [(cache_name, name, seed) for cache_name in caches for name in algorithms for seed in seeds]
    resolved = {name: resolve(name, budget) for name in algorithms}
    loaded = {cache_name: resolve_cache(cache_name) for cache_name in caches}
    bar = _bar(len(plan), progress)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    done = 0
    for cache_name, name, seed in plan:
        function, config = resolved[name]
        key = _key(name, seed, cache_name, float(alpha), config)
        folder = _run_dir(out, key)
        path = folder / "result.json"
        record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        if record is None or record.get("key") != key:
            if bar is not None:
                bar.set_postfix_str(f"{name} seed {seed} on {cache_name}")
            folder.mkdir(parents=True, exist_ok=True)
            answers = function(loaded[cache_name], seed, float(alpha), folder)
            _check(answers, loaded[cache_name], name)
            record = {"key": key, **_answers_to_json(answers)}
            _write_json(path, record)
        else:
            done += 1
        runs.setdefault((cache_name, name), []).append({**record, "algorithm": name, "seed": seed})
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    results: dict[str, Any] = {"alpha": alpha, "budget": budget, "seeds": seeds, "reused_runs": done, "caches": {}}
    for cache_name in caches:
        cache = loaded[cache_name]
        per_algorithm = {}
        for name in algorithms:
            group = runs[(cache_name, name)]
            per_algorithm[name] = {
                "uses_test_labels": uses_test_labels(name),
                "aggregate": aggregate(cache, group, alpha),
                "runs": [_run_summary(cache, run, alpha) for run in group],
                "routing": routing(cache, group, alpha),
                "n_models": cache.n_models,
                "versus": {
                    reference: paired_differences(cache, group, runs[(cache_name, reference)], alpha)
                    for reference in REFERENCES
                    if reference in algorithms and reference != name
                },
            }
        results["caches"][cache_name] = per_algorithm
    _write_json(out / "results.json", results)
    write_text(out / "results.md", format_markdown(results))
    if plot:
        for cache_name in caches:
            name = "frontier.png" if len(caches) == 1 else f"frontier_{Path(cache_name).stem}.png"
            _plot(results["caches"][cache_name], out / name, cache_name, alpha)
    return results


def _run_summary(cache: LogitCache, run: dict[str, Any], alpha: float) -> dict[str, Any]:
    result = _check(_answers_from_json(run), cache, run["algorithm"])
    scores = result.scores(cache, RewardSettings(alpha=alpha))
    return {"seed": run["seed"], "info": run.get("info", {}), **{key: scores[key] for key in METRICS}}


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="benchmark", unit="run")


def _interval(entry: dict[str, float] | None, digits: int = 3) -> str:
    if entry is None:
        return "-"
    return f"{entry['mean']:.{digits}f} [{entry['low']:.{digits}f}, {entry['high']:.{digits}f}]"


def format_markdown(results: dict[str, Any]) -> str:
    """The markdown tables of ``results.md``: one row per algorithm, mean over seeds [95% interval]."""
    lines = [
        f"Test split; alpha = {results['alpha']:g}; seeds {', '.join(map(str, results['seeds']))}; "
        f"learner budget {results['budget']!r}. Mean over seeds [95% bootstrap interval over seeds and test "
        "questions]. Accuracy: macro over tasks; reward, team size, cost: mean per question. Role: a competitor "
        f"fits on train and chooses on validation; a {TEST_LABELS_ROLE} chooses with the labels of the test "
        "questions it is scored on, so it shows the headroom and is never a competitor.",
        "",
    ]
    for cache_name, per_algorithm in results["caches"].items():
        lines += [
            f"## {cache_name}",
            "",
            "| algorithm | role | accuracy | reward | team size | cost |",
            "|---|---|---|---|---|---|",
        ]
        for name, entry in per_algorithm.items():
            aggregate_ = entry["aggregate"]
            cells = [_role(entry), _interval(aggregate_["accuracy"]), _interval(aggregate_["reward"])]
            cells += [_interval(aggregate_["team_size"], 2), _interval(aggregate_["cost"], 2)]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
        lines += _routing_table(per_algorithm)
        pairs = [(name, entry["versus"]) for name, entry in per_algorithm.items() if entry.get("versus")]
        if pairs:
            lines += [
                "Paired differences (algorithm minus reference, same seeds and test questions) [95% interval]:",
                "",
                "| algorithm | reference | accuracy difference | reward difference |",
                "|---|---|---|---|",
            ]
            for name, versus in pairs:
                for reference, difference in versus.items():
                    cells = [_interval(difference["accuracy"]), _interval(difference["reward"])]
                    lines.append(f"| {name} | {reference} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def _role(entry: dict[str, Any]) -> str:
    return TEST_LABELS_ROLE if entry.get("uses_test_labels") else "competitor"


def _routing_table(per_algorithm: dict[str, Any]) -> list[str]:
    """How each algorithm's teams vary within a task, and what its teams earn by the mean vote."""
    rows = [
        (name, entry["routing"])
        for name, entry in per_algorithm.items()
        if entry.get("routing") and entry["aggregate"]["team_size"]["low"] < entry.get("n_models", np.inf)
    ]
    if not rows:
        return []
    lines = [
        "How the teams vary within a task (test questions in playing order; mean over seeds), and what the "
        "algorithm's own teams earn when their mean-probability vote answers (no fusion step), and when every "
        "question of a task gets the task's most used team (no per-question routing) [95% interval]; algorithms "
        "that consult every model on every question are left out:",
        "",
        "| algorithm | on the task's most used team | teams per task | team changes | A-B-A share of changes "
        "| own teams by vote: accuracy | reward | task's most used team by vote: accuracy | reward |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in rows:
        cells = [f"{entry['mode_share']:.0%}", f"{entry['teams_per_task']:.1f}", f"{entry['change_rate']:.0%}"]
        cells.append(f"{entry['flip_flops']:.0%}")
        for label in ("teams_by_vote", "task_team_by_vote"):
            cells += [_interval(entry[label]["accuracy"]), _interval(entry[label]["reward"])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _plot(per_algorithm: dict[str, Any], path: Path, cache_name: str, alpha: float) -> None:
    points = [
        comparison.FrontierPoint(
            f"{name} (test labels)" if entry.get("uses_test_labels") else name,
            alpha,
            entry["aggregate"]["accuracy"]["mean"],
            entry["aggregate"]["reward"]["mean"],
            entry["aggregate"]["team_size"]["mean"],
            None if entry["aggregate"]["cost"] is None else entry["aggregate"]["cost"]["mean"],
        )
        for name, entry in per_algorithm.items()
    ]
    try:
        comparison.plot_frontier(points, path, title=f"{cache_name}: test accuracy vs team size (alpha {alpha:g})")
    except ModuleNotFoundError as error:
        print(f"benchmark: no frontier plot ({error})")


# -- command line ------------------------------------------------------------------------------------------


def _load_plugins(paths: Sequence[str]) -> None:
    import importlib.util

    for index, file in enumerate(paths):
        spec = importlib.util.spec_from_file_location(f"_benchmark_plugin_{index}", file)
        if spec is None or spec.loader is None:
            raise ValueError(f"--register {file}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


#: the most seeds one benchmark runs (``--seeds``)
MAX_SEEDS = 1000


def _command(args: Any) -> int:
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise ValueError(f"--seeds must be at least 1 and at most {MAX_SEEDS} (seeds 0..S-1), got {show(args.seeds)}")
    check_alpha(args.alpha)
    _load_plugins(args.register or [])
    results = benchmark(
        args.algorithms or list(DEFAULT_ALGORITHMS),
        range(args.seeds),
        args.cache or [datasets.DEFAULT],
        args.out,
        alpha=args.alpha,
        budget=args.budget,
        progress=args.progress,
    )
    print(format_markdown(results))
    print(f"wrote {Path(args.out) / 'results.json'}, results.md and the frontier plot")
    return 0


def register_command(commands: Any) -> None:
    """Add ``benchmark`` to the ``ensemble-env`` sub-parsers (called by :func:`ensemble_mappo.cli.register`)."""
    import argparse

    from ensemble_env.cli.options import ListOption

    parser = commands.add_parser(
        "benchmark",
        help="run algorithms x seeds x caches on the test split, with confidence intervals",
        description="Run each algorithm with each seed on each cache: fit on train, choose on validation, "
        "answer test once. Writes OUT/results.json (per run and means over seeds with 95% bootstrap intervals, "
        "per task and macro: accuracy, reward at alpha, team size, cost), OUT/results.md (the tables: scores, each "
        "algorithm's role, how its teams vary within a task, paired differences to static_team, "
        "static_team(train+val) and best_single) and OUT/frontier.png. The defaults show the headroom: "
        "static_team(train+val) (the best fixed team per task on train + validation, a competitor) and "
        "oracle_team(test) (the best fixed team per task on test: it reads the test labels, a reference marked as "
        "such, never a competitor). Finished runs (same algorithm, seed, cache, alpha, config) are read back, not "
        "redone. The defaults on bbh5 (5 seeds, MAPPO and IPPO at the default budget, six baselines) take about 8 "
        "minutes on 2 CPU cores, almost all of it the learners.",
        epilog="example: ensemble-env benchmark --algorithms mappo,static_team,static_team(train+val),stacking,"
        "best_single,oracle_team(test) --seeds 5 --cache bbh5 --out bench",
    )
    parser.add_argument(
        "--algorithms",
        action=ListOption,
        metavar="NAME",
        help="mappo, ippo, rlae_ppo, rlae_mappo, stacking, uniform_weights, per_task_weights, per_question_weights, "
        "any baseline of `ensemble-env baselines`, or a name registered by a "
        f"--register file; a,b or a b (default: {','.join(DEFAULT_ALGORITHMS)})",
    )
    parser.add_argument("--seeds", type=int, default=5, metavar="S", help="seeds 0..S-1 (default: %(default)s)")
    parser.add_argument(
        "--cache",
        action=ListOption,
        metavar="CACHE",
        help=f"built-in name or cache file; several: a,b or a b (default: {datasets.DEFAULT})",
    )
    parser.add_argument(
        "--out",
        default="bench",
        metavar="DIR",
        help="results folder (reused runs live in DIR/runs; default: %(default)s)",
    )
    parser.add_argument("--alpha", type=float, default=1.0, help="size penalty of the reward (default: %(default)s)")
    parser.add_argument(
        "--budget",
        choices=tuple(BUDGETS),
        default="default",
        help="MAPPO/IPPO training budget: "
        + "; ".join(f"{k}: {v['passes']:g} passes, {v['checkpoints']:g} checkpoints" for k, v in BUDGETS.items())
        + "; RLAE: "
        + "; ".join(f"{k}: {v['passes']:g} passes, {v['checkpoints']:g} checkpoints" for k, v in RLAE_BUDGETS.items())
        + " (default: %(default)s, the train command's own budget)",
    )
    parser.add_argument(
        "--register",
        action=ListOption,
        metavar="FILE",
        help="Python file(s) that register algorithms with register_algorithm (e.g. examples/register_algorithm.py)",
    )
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar")
    parser.set_defaults(run=_command)
