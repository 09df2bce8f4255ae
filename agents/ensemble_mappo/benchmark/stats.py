"""The statistics of the benchmark: per-question metrics of stored runs, means over seeds with bootstrap
intervals (seeds and test questions resampled together; or seeds and tasks, :data:`RESAMPLING`), paired
differences, and how teams vary within a task.

Runs are the records of :mod:`ensemble_mappo.benchmark.store` (read back and checked) with their
``algorithm`` and ``seed``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ensemble_env.baselines.routing import team_vote
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import RewardSettings
from ensemble_env.metrics.votes import row_counts
from ensemble_env.seeds import check_seed
from ensemble_mappo.benchmark.answers import answers_from_json, check_answers

__all__ = [
    "METRICS",
    "REFERENCES",
    "RESAMPLING",
    "aggregate",
    "bootstrap_interval",
    "mode_teams",
    "paired_differences",
    "question_metrics",
    "question_scores",
    "routing",
    "run_summary",
    "task_scores",
    "team_changes",
]

#: what the baselines of the benchmark are called in ensemble_env.baselines.comparison
METRICS = ("accuracy", "reward", "team_size", "cost")
#: the references every algorithm is compared with, paired by seed and test question (where the run has them): the
#: fixed teams and single models, and on tasks never seen the online rules (under partial feedback the strongest
#: simple opponents: the bandit, the rules of ensemble_env.baselines.partial and bayes_team)
REFERENCES = (
    "static_team",
    "static_team(train+val)",
    "static_team(pooled)",
    "static_team(certified)",
    "best_single",
    "best_single(per_task)",
    "global_team",
    "ucb_team",
    "greedy_team",
    "etc_team",
    "ucb_team(partial)",
    "thompson_team",
    "bayes_team",
    "ftl_team",
    "ftl_team(no_delay)",
    "best_rule(validation)",
)


#: what a bootstrap interval resamples besides the seeds: each task's test questions (the tasks fixed: a cache of a
#: few real tasks), or the tasks themselves, each with its questions as they are (a cache of many tasks drawn from a
#: generator, ``--protocol generated``: the tasks are the draws, and resampling 400,000 questions 2,000 times would
#: cost tens of seconds an interval)
RESAMPLING = ("questions", "tasks")


def question_metrics(cache: LogitCache, result: BaselineResult, alpha: float) -> dict[str, np.ndarray]:
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
    resample: str = "questions",
) -> tuple[float, float, float]:
    """Mean over seeds of a per-question metric ``values`` (S seeds, Q questions), with a bootstrap interval.

    The point is the mean over seeds of the mean over questions (``macro``: of the per-task means, averaged
    over tasks). Each resample draws S seeds with replacement and, within each task, its questions with
    replacement (the same questions for every seed); the interval is the central ``level`` quantile range.
    ``resample="tasks"`` (:data:`RESAMPLING`) draws the tasks with replacement instead, each with all its questions
    (the same tasks for every seed): a resample's value is the total over its tasks divided by their questions
    (``macro``: the mean of their task means).
    """
    values = np.asarray(values, dtype=np.float64)
    tasks = np.asarray(tasks)
    if values.ndim != 2 or values.shape[1] != tasks.size:
        raise ValueError(f"values must be (seeds, questions) with {tasks.size} questions, got {values.shape}")
    if resample not in RESAMPLING:
        raise ValueError(f"resample must be one of {', '.join(RESAMPLING)}, got {resample!r}")
    seed = check_seed(seed, "bootstrap_interval", optional=False)
    n_seeds = values.shape[0]
    if resample == "tasks":
        n_tasks = np.unique(tasks).size
        return _task_bootstrap(values, tasks, macro, *_task_draws(seed, n_resamples, n_seeds, n_tasks), level)
    task_rows = _task_rows(tasks)
    sizes = tuple(rows.size for rows in task_rows)
    draws = _question_draws if n_resamples * tasks.size <= _KEPT_DRAWS else _question_draws.__wrapped__
    weights, picks = draws(seed, n_resamples, n_seeds, sizes)
    per_task, sums, point_tasks = [], np.zeros(n_resamples), []
    for rows, pick in zip(task_rows, picks, strict=True):
        # resample r: the mean over its seeds of each question (the same for every seed), summed over its questions
        chosen = _seed_means(values[:, rows], weights).ravel().take(pick).sum(axis=1)
        per_task.append(chosen / rows.size)
        sums += chosen
        point_tasks.append(values[:, rows].mean())
    if macro:
        samples, point = np.mean(per_task, axis=0), float(np.mean(point_tasks))
    else:
        samples, point = sums / tasks.size, float(values.mean())
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return point, float(low), float(high)


def _seed_means(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(R, Q): each resample's mean over its drawn seeds (``weights``, (R, S)) of ``values`` (S, Q); NaN where a seed it
    drew is NaN, as the mean of the drawn values themselves would be."""
    missing = np.isnan(values)
    if not missing.any():
        return weights @ values
    means = weights @ np.where(missing, 0.0, values)
    means[(weights > 0) @ missing] = np.nan
    return means


def _seed_weights(rng: np.random.Generator, n_resamples: int, n_seeds: int) -> np.ndarray:
    """(R, S): each seed's share of a resample's S draws of the seeds with replacement."""
    return row_counts(rng.integers(0, n_seeds, (n_resamples, n_seeds)), n_seeds) / n_seeds


#: the largest question bootstrap whose draws are kept for the next interval (resamples x questions: 64 MB of
#: positions, a few kept); a larger one draws them anew each time, as a kept copy would hold them all at once
_KEPT_DRAWS = 2**23


@functools.lru_cache(maxsize=4)
def _question_draws(
    seed: int, n_resamples: int, n_seeds: int, sizes: tuple[int, ...]
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The draws of a bootstrap over seeds and questions: (R, S) each seed's share of a resample's draws, then per
    task of ``sizes`` questions (in task order) the (R, size) positions drawn among its questions, from the generator
    seeded ``seed`` in that order, as flat positions in an (R, size) array (row r's draws + r x size: one ``take``).
    They depend on nothing else, so the intervals of one results.json that resample the same seeds and tasks (every
    metric, algorithm and pair; each task's own) share them; read-only."""
    rng = np.random.default_rng(seed)
    weights = _seed_weights(rng, n_resamples, n_seeds)
    offsets = np.arange(n_resamples)[:, None]
    picks = tuple(rng.integers(0, size, (n_resamples, size)) + offsets * size for size in sizes)
    for array in (weights, *picks):
        array.flags.writeable = False
    return weights, picks


@functools.lru_cache(maxsize=2)
def _task_draws(seed: int, n_resamples: int, n_seeds: int, n_tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """The draws of a bootstrap over seeds and tasks: (R, S) each seed's share of a resample's draws and (R, T) how
    often each task is drawn, from the generator seeded ``seed``, seeds first. They depend on nothing else, so the
    hundreds of intervals of one results.json (every metric, algorithm and pair, the same seeds and tasks) share
    one draw instead of drawing R x T = 4 million task indices each time; read-only."""
    rng = np.random.default_rng(seed)
    weights = _seed_weights(rng, n_resamples, n_seeds)
    times = row_counts(rng.integers(0, n_tasks, (n_resamples, n_tasks)), n_tasks)  # each task's draws
    weights.flags.writeable = times.flags.writeable = False
    return weights, times


def _task_bootstrap(
    values: np.ndarray, tasks: np.ndarray, macro: bool, weights: np.ndarray, times: np.ndarray, level: float
) -> tuple[float, float, float]:
    """:func:`bootstrap_interval` resampling the seeds (``weights``, (R, S): each seed's share of a resample's draws)
    and the tasks (``times``, (R, T): how often a resample draws each task, in the order of ``np.unique(tasks)``)."""
    _, inverse, sizes = np.unique(tasks, return_inverse=True, return_counts=True)
    n_tasks = sizes.size
    sums = np.stack([np.bincount(inverse, weights=row, minlength=n_tasks) for row in values])  # (S, T)
    per_task = weights @ sums  # (R, T): each task's total, averaged over the resample's seeds
    if macro:
        samples, point = (times * per_task) @ (1.0 / sizes) / n_tasks, float((sums.mean(axis=0) / sizes).mean())
    else:
        samples, point = (times * per_task).sum(axis=1) / (times @ sizes), float(values.mean())
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return point, float(low), float(high)


def _matrices(cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float) -> dict[str, np.ndarray]:
    """(seeds, Q) per metric of :data:`METRICS`, one row per run."""
    stacked: dict[str, list[np.ndarray]] = {}
    for run in runs:
        result = check_answers(answers_from_json(run), cache, run["algorithm"])
        for key, column in question_metrics(cache, result, alpha).items():
            stacked.setdefault(key, []).append(column)
    return {key: np.vstack(columns) for key, columns in stacked.items()}


def question_scores(cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float) -> dict[str, np.ndarray]:
    """(seeds, Q) per metric of :data:`METRICS`, one row per run (checked): what :func:`aggregate` and
    :func:`paired_differences` read, to compute once per algorithm (``scores=``)."""
    return _matrices(cache, runs, alpha)


def paired_differences(
    cache: LogitCache,
    runs: Sequence[dict[str, Any]],
    reference: Sequence[dict[str, Any]],
    alpha: float,
    *,
    resample: str = "questions",
    scores: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None,
) -> dict[str, dict[str, float]]:
    """Accuracy and reward of ``runs`` minus ``reference`` (same seeds, same test questions), with a 95%
    bootstrap interval resampling seeds and questions together (``resample="tasks"``: seeds and tasks; see
    :func:`bootstrap_interval`). ``scores``: both sides' :func:`question_scores`, when computed already."""
    tasks = np.asarray(cache.tasks)[cache.select("test")]
    mine, theirs = scores if scores is not None else (_matrices(cache, runs, alpha), _matrices(cache, reference, alpha))
    return {
        key: _interval(mine[key] - theirs[key], tasks, key == "accuracy", resample) for key in ("accuracy", "reward")
    }


def _interval(values: np.ndarray, tasks: np.ndarray, macro: bool, resample: str) -> dict[str, float]:
    return dict(zip(("mean", "low", "high"), bootstrap_interval(values, tasks, macro=macro, resample=resample),
                    strict=True))  # fmt: skip


def team_changes(teams: np.ndarray, tasks: np.ndarray) -> dict[str, float]:
    """How a sequence of teams ((Q, N) bool, questions in playing order) varies within each task.

    ``mode_share``: share of the questions answered by their task's most used team; ``teams_per_task``: distinct
    teams per task (mean over tasks); ``change_rate``: share of consecutive questions of a task whose teams
    differ; ``flip_flops``: share of those changes that return to the team before (A-B-A). Whole arrays, no loop over
    the tasks (thousands of generated tasks a run).
    """
    teams, tasks = np.asarray(teams, dtype=bool), np.asarray(tasks)
    order = np.argsort(tasks, kind="stable")  # each task's questions together, in playing order
    codes, grouped = _team_codes(teams)[order], tasks[order]
    same = grouped[1:] == grouped[:-1]  # consecutive questions of one task
    changed = same & (codes[1:] != codes[:-1])
    flips = int((changed[1:] & same[:-1] & (codes[2:] == codes[:-2])).sum())
    _, task_of_pair, counts = _team_counts(grouped, codes)
    n_tasks = np.unique(tasks).size
    changes = int(changed.sum())
    return {
        "mode_share": float(np.maximum.reduceat(counts, _starts(task_of_pair)).sum()) / max(tasks.size, 1)
        if counts.size
        else 0.0,
        "teams_per_task": counts.size / n_tasks if n_tasks else 0.0,
        "change_rate": changes / max(int(same.sum()), 1),
        "flip_flops": flips / max(changes, 1),
    }


def mode_teams(teams: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """(Q, N): each question gets its task's most used team (ties to the team first used)."""
    teams, tasks = np.asarray(teams), np.asarray(tasks)
    codes = _team_codes(teams)
    first, task_of_pair, counts = _team_counts(tasks, codes)
    # per task, the pair of the largest count, then of the earliest first use: the last after sorting by both
    best = np.lexsort((-first, counts, task_of_pair))
    last_of_task = np.r_[_starts(task_of_pair[best])[1:], best.size] - 1
    chosen = best[last_of_task]  # one pair per task, in task order
    _, inverse = np.unique(tasks, return_inverse=True)
    return teams[first[chosen]][inverse.reshape(-1)]


def _team_counts(tasks: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (task, team code) pairs of a sequence, sorted by task then code: each pair's first position in
    the sequence, its task, and how often it occurs."""
    _, task_index = np.unique(tasks, return_inverse=True)
    keys = task_index.reshape(-1).astype(np.int64) * (int(codes.max(initial=0)) + 1) + codes
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    return first, task_index.reshape(-1)[first], counts


def _starts(sorted_groups: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins in ``sorted_groups`` (non-empty)."""
    return np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])


def _team_codes(teams: np.ndarray) -> np.ndarray:
    """(Q,) int64: each row's team as a number (bit n for model n)."""
    teams = np.asarray(teams, dtype=bool)
    return teams.astype(np.int64) @ (1 << np.arange(teams.shape[1], dtype=np.int64))


def _task_rows(tasks: np.ndarray) -> list[np.ndarray]:
    """The positions of each task's questions in ``tasks``, ascending, one array per task in task order (as
    ``np.flatnonzero(tasks == task)`` for each task of ``np.unique(tasks)``, without a pass over every question per
    task: thousands of generated tasks)."""
    order = np.argsort(tasks, kind="stable")
    _, starts = np.unique(tasks[order], return_index=True)
    return np.split(order, starts[1:])


def routing(
    cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float, *, resample: str = "questions"
) -> dict[str, Any]:
    """What an algorithm's teams do on test (means over its runs) and two counterfactuals with intervals
    (``resample``: :func:`bootstrap_interval`'s): its own teams answered by their mean-probability vote
    (``teams_by_vote``: without its fusion step), and each task's most used team on every question of the task, by
    vote (``task_team_by_vote``: without per-question routing). Questions are taken in the order the environment
    plays them (the cache's)."""
    test = cache.select("test")
    tasks = np.asarray(cache.tasks)[test]
    changes = [team_changes(answers_from_json(run).teams, tasks) for run in runs]
    summary: dict[str, Any] = {key: float(np.mean([c[key] for c in changes])) for key in changes[0]}
    for label, transform in (("teams_by_vote", lambda t: t), ("task_team_by_vote", lambda t: mode_teams(t, tasks))):
        variants = []
        for run in runs:
            members = transform(answers_from_json(run).teams)
            result = team_vote(label, cache, test, members)
            variants.append({**run, "predictions": result.predictions, "teams": members.astype(np.int8)})
        matrices = _matrices(cache, variants, alpha)
        summary[label] = {
            key: _interval(matrices[key], tasks, key == "accuracy", resample)
            for key in ("accuracy", "reward", "team_size")
        }
    return summary


def aggregate(
    cache: LogitCache,
    runs: Sequence[dict[str, Any]],
    alpha: float,
    *,
    resample: str = "questions",
    scores: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Means over the seeds of one algorithm's runs with 95% intervals: macro and per task, every metric.

    ``resample="tasks"`` (:func:`bootstrap_interval`): the overall intervals resample seeds and tasks, and each
    task holds its means alone (``{"mean": m}``: one task is one draw; an interval over its questions on thousands of
    tasks would cost minutes). ``scores``: the runs' :func:`question_scores`, when computed already."""
    test = cache.select("test")
    tasks = np.asarray(cache.tasks)[test]
    names = list(cache.task_names)
    matrices = scores if scores is not None else _matrices(cache, runs, alpha)
    overall: dict[str, dict[str, float] | None] = {}
    for key, matrix in matrices.items():
        overall[key] = None if np.isnan(matrix).any() else _interval(matrix, tasks, key == "accuracy", resample)
    per_task = {}
    if resample == "tasks":
        ids, inverse, sizes = np.unique(tasks, return_inverse=True, return_counts=True)
        means = {key: np.bincount(inverse, weights=matrix.mean(axis=0), minlength=ids.size) / sizes
                 for key, matrix in matrices.items()}  # fmt: skip
        for k, task in enumerate(ids):
            per_task[names[task]] = {key: None if np.isnan(mean[k]) else {"mean": float(mean[k])}
                                     for key, mean in means.items()}  # fmt: skip
        return {"seeds": [run["seed"] for run in runs], **overall, "tasks": per_task}
    for task in np.unique(tasks):
        rows = tasks == task
        per_task[names[task]] = {
            key: None if np.isnan(matrix).any() else _interval(matrix[:, rows], tasks[rows], False, resample)
            for key, matrix in matrices.items()
        }
    return {"seeds": [run["seed"] for run in runs], **overall, "tasks": per_task}


def task_scores(cache: LogitCache, runs: Sequence[dict[str, Any]], alpha: float) -> dict[str, dict[str, list[float]]]:
    """Per task with test questions (in the cache's task order), each metric of :data:`METRICS` per run (in the order
    of ``runs``): the mean over the task's test questions (accuracy: the task's share of right answers)."""
    test = cache.select("test")
    tasks = np.asarray(cache.tasks)[test]
    names = list(cache.task_names)
    matrices = _matrices(cache, runs, alpha)
    return {
        names[task]: {key: matrix[:, tasks == task].mean(axis=1).tolist() for key, matrix in matrices.items()}
        for task in np.unique(tasks)
    }


def run_summary(cache: LogitCache, run: dict[str, Any], alpha: float) -> dict[str, Any]:
    """One run's seed, its ``info`` and its scores (:data:`METRICS`) on the test split."""
    result = check_answers(answers_from_json(run), cache, run["algorithm"])
    scores = result.scores(cache, RewardSettings(alpha=alpha))
    return {"seed": run["seed"], "info": run.get("info", {}), **{key: scores[key] for key in METRICS}}
