"""Summaries and plots of a logit cache: what ``ensemble-env cache info`` and ``cache plot`` show.

- :func:`summarize` gathers sizes, choice counts, splits and, per task, each model's accuracy and the
  baselines of :mod:`ensemble_env.baselines` (plurality vote, mean-probability vote, best single model chosen
  on train, oracle) into a JSON-ready dict; :func:`format_summary` renders it as text.
- :func:`error_correlation` is the (N, N) matrix of pairwise correlations of the models' correctness;
  :func:`team_stats` the plurality accuracy and focal diversity of every team (or of seeded samples of them).
- :func:`plot_cache` writes three PNGs (matplotlib, the ``plot`` extra, imported only there).

>>> import numpy as np
>>> from ensemble_env.cache import LogitCache
>>> cache = LogitCache(scores=np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.3, 0.7], [0.6, 0.4]]]),
...                    labels=np.array([0, 1]), models=("a", "b"), score_kind="prob")
>>> summary = summarize(cache)
>>> summary["overall"]["models"], summary["overall"]["baselines"]["oracle"]
({'a': 1.0, 'b': 0.0}, 1.0)
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.baselines import simple as baselines
from ensemble_env.cache.logit_cache import SPLITS, LogitCache
from ensemble_env.files import make_folder, save_figure
from ensemble_env.metrics import correlation, focal_diversity, plurality_accuracy
from ensemble_env.seeds import check_seed
from ensemble_env.text import align_table

__all__ = [
    "PLOT_FILES",
    "SUMMARY_BASELINES",
    "TeamStat",
    "error_correlation",
    "format_summary",
    "plot_cache",
    "summarize",
    "team_stats",
]

#: the baselines :func:`summarize` reports, in column order
SUMMARY_BASELINES = ("plurality_vote", "mean_probability_vote", "best_single", "oracle")
#: the files :func:`plot_cache` writes
PLOT_FILES = ("accuracy_by_task.png", "error_correlation.png", "teams_by_size.png")
_COLUMN_NAMES = {
    "plurality_vote": "plurality",
    "mean_probability_vote": "mean_prob",
    "best_single": "best_single",
    "oracle": "oracle",
}


# -- summary ---------------------------------------------------------------------------------------


def _accuracies(
    cache: LogitCache, questions: np.ndarray, train: np.ndarray | None
) -> list[tuple[str, bool, baselines.BaselineResult]]:
    """(name, is_model, result) for every model and every reported baseline on ``questions``."""
    results: list[tuple[str, bool, baselines.BaselineResult]] = [
        (name, True, baselines.BaselineResult.from_cache(name, cache, questions, cache.preds[questions, m], 1.0))
        for m, name in enumerate(cache.models)
    ]
    results += [
        ("plurality_vote", False, baselines.plurality_vote(cache, questions, questions)),
        ("mean_probability_vote", False, baselines.mean_probability_vote(cache, questions, questions)),
    ]
    if train is not None:
        results.append(("best_single", False, baselines.best_single(cache, train, questions)))
    results.append(("oracle", False, baselines.oracle(cache, questions, questions)))
    return results


def _table_entry(results: list[tuple[str, bool, baselines.BaselineResult]], pick: Any) -> dict[str, Any]:
    return {
        "models": {name: pick(result) for name, is_model, result in results if is_model},
        "baselines": {name: pick(result) for name, is_model, result in results if not is_model},
    }


def summarize(cache: LogitCache, split: str = "all", train_split: str = "train") -> dict[str, Any]:
    """Sizes, choice counts, splits and per-task accuracies of a cache, as a JSON-ready dict.

    Accuracies are fractions over the questions of ``split`` ("all", "train", "test", "validation"): each
    model's (argmax of its scores over the valid choices, ties to the lowest index) and the baselines of
    :data:`SUMMARY_BASELINES`. The best single model is the one with the best accuracy on ``train_split``
    over all tasks (the RL-Focal comparison); it is left out (``None``) when ``train_split`` has no question.

    Keys: ``path``, ``score_kind``, ``source``, ``n_questions``, ``n_models``, ``n_tasks``, ``max_choices``,
    ``models``, ``split``, ``train_split``, ``n_eval``, ``splits`` (questions per split name),
    ``choice_counts`` (questions per choice count, keys as strings), ``question_text`` (whether the cache has
    the question texts), ``features`` (None, or ``n_features``, ``kind`` and ``names``), ``best_single_model``,
    ``tasks`` (per task with questions in ``split``: ``name``, ``n_questions``, ``n_eval`` (those in ``split``),
    ``n_choices`` [min, max], ``splits``, ``models`` and ``baselines`` accuracies on ``split``), ``macro``
    (unweighted mean over tasks) and ``overall`` (over every question of ``split``).
    """
    questions = cache.select(split)
    try:
        train: np.ndarray | None = cache.select(train_split)
    except ValueError:
        train = None
    results = _accuracies(cache, questions, train)
    per_task = {name: result.task_accuracy(cache) for name, _, result in results}
    split_names = {code: name for name, code in SPLITS.items()}
    tasks = []
    eval_tasks = cache.tasks[questions]
    for index, task in enumerate(cache.task_names):
        rows = np.flatnonzero(cache.tasks == index)
        n_eval = int((eval_tasks == index).sum())
        if n_eval == 0:
            continue
        choices = cache.n_choices[rows]
        entry = {
            "name": task,
            "n_questions": int(rows.size),
            "n_eval": n_eval,
            "n_choices": [int(choices.min()), int(choices.max())],
            "splits": {split_names[code]: int((cache.split[rows] == code).sum()) for code in sorted(split_names)},
        }
        entry.update(_table_entry(results, lambda result, task=task: per_task[result.name][task]))
        tasks.append(entry)
    counts = np.bincount(cache.n_choices)
    best = next((result for name, _, result in results if name == "best_single"), None)
    return {
        "path": cache.path,
        "score_kind": cache.score_kind,
        "source": cache.source,
        "n_questions": cache.n_questions,
        "n_models": cache.n_models,
        "n_tasks": cache.n_tasks,
        "max_choices": cache.max_choices,
        "models": list(cache.models),
        "split": split,
        "train_split": train_split,
        "n_eval": int(questions.size),
        "splits": {split_names[code]: int((cache.split == code).sum()) for code in sorted(split_names)},
        "choice_counts": {str(count): int(counts[count]) for count in np.flatnonzero(counts)},
        "question_text": cache.question_text is not None,
        "features": None
        if cache.features is None
        else {
            "n_features": int(cache.features.shape[1]),
            "kind": cache.feature_kind,
            "names": None if cache.feature_names is None else list(cache.feature_names),
        },
        "best_single_model": None if best is None else best.info["model"],
        "tasks": tasks,
        "macro": _table_entry(results, lambda result: result.macro_accuracy(cache)),
        "overall": _table_entry(results, lambda result: result.accuracy),
    }


def format_summary(summary: dict[str, Any]) -> str:
    """The text of ``cache info``: sizes, then one row per task of accuracies on the summary's split.

    Model columns are numbered (``m0``, ``m1``, ...) after the list of models printed above the table.
    """
    models = summary["models"]
    splits = ", ".join(f"{count} {name}" for name, count in summary["splits"].items() if count)
    choices = ", ".join(f"{count}: {n}" for count, n in summary["choice_counts"].items())
    lines = [
        f"{summary['path']}",
        f"  {summary['n_questions']} questions, {summary['n_models']} models, {summary['n_tasks']} tasks, "
        f"score_kind {summary['score_kind']!r}, splits: {splits}",
        f"  questions per choice count: {choices}",
    ]
    features = summary["features"]
    if features is not None or summary["question_text"]:
        described = "none" if features is None else f"{features['n_features']}"
        if features is not None and features["kind"]:
            described += f" ({features['kind']})"
        lines.append(f"  question text: {'yes' if summary['question_text'] else 'no'}; features: {described}")
    if summary["source"]:
        lines.append(f"  source: {summary['source']}")
    if summary["n_models"] == 1:
        lines.append("  note: one model: there is no team to choose and no answers to fuse")
    lines.append("  models:")
    overall = summary["overall"]["models"]
    lines += [f"    m{m} {name} (accuracy {overall[name]:.3f})" for m, name in enumerate(models)]
    best = summary["best_single_model"]
    chosen = (
        f"best_single = {best}, chosen on {summary['train_split']}" if best else "no best_single: no train question"
    )
    lines.append(
        f"\nAccuracy on split {summary['split']!r} ({summary['n_eval']} questions); {chosen}; oracle = any model right"
    )
    names = [name for name in SUMMARY_BASELINES if name in summary["overall"]["baselines"]]
    header = ["task", "n", "C", *(f"m{m}" for m in range(len(models))), *(_COLUMN_NAMES[name] for name in names)]

    def cells(entry: dict[str, Any]) -> list[str]:
        values = [entry["models"][model] for model in models] + [entry["baselines"][name] for name in names]
        return [f"{value:.3f}" for value in values]

    rows = [
        [task["name"], str(task["n_eval"]), "-".join(dict.fromkeys(map(str, task["n_choices"]))), *cells(task)]
        for task in summary["tasks"]
    ]
    if len(summary["tasks"]) > 1 and not _same_accuracies(summary["macro"], summary["overall"]):
        rows.append(["macro (mean of tasks)", "", "", *cells(summary["macro"])])
        rows.append(["all questions", str(summary["n_eval"]), "", *cells(summary["overall"])])
    else:  # one task, or tasks of one size: the mean of the tasks is the accuracy over all questions
        label = "all questions" + (" = mean of tasks" if len(summary["tasks"]) > 1 else "")
        rows.append([label, str(summary["n_eval"]), "", *cells(summary["overall"])])
    return "\n".join(lines + align_table(header, rows))


def _same_accuracies(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two rows of the summary hold the same accuracies (to rounding: 1e-9)."""
    return all(
        math.isclose(first[group][name], second[group][name], rel_tol=0.0, abs_tol=1e-9)
        for group in ("models", "baselines")
        for name in first[group]
    )


# -- teams -----------------------------------------------------------------------------------------


def error_correlation(cache: LogitCache, questions: np.ndarray | None = None) -> np.ndarray:
    """(N, N) correlation (phi coefficient) of each pair of models' correctness; 1 on the diagonal.

    The correlation of correctness equals that of errors. A pair where a model is always right (or always
    wrong) on ``questions`` scores 0 (see :func:`ensemble_env.metrics.correlation`).

    >>> import numpy as np
    >>> from ensemble_env.cache import LogitCache
    >>> cache = LogitCache(scores=np.eye(2)[[[0, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]]].astype(float),
    ...                    labels=np.array([0, 1, 0, 1]), models=("a", "b", "c"), score_kind="prob")
    >>> cache.correct.tolist()  # a always right, b and c never right together
    [[True, True, False], [True, False, True], [True, False, True], [True, True, False]]
    >>> error_correlation(cache).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, -1.0], [0.0, -1.0, 1.0]]
    """
    correct = cache.correct if questions is None else cache.correct[questions]
    matrix = np.eye(cache.n_models)
    for i, j in itertools.combinations(range(cache.n_models), 2):
        matrix[i, j] = matrix[j, i] = correlation(correct[:, [i, j]])
    return matrix


@dataclass(frozen=True)
class TeamStat:
    """A team (model indices, ascending), its plurality-vote accuracy and its focal diversity."""

    members: tuple[int, ...]
    accuracy: float
    focal_diversity: float

    @property
    def size(self) -> int:
        return len(self.members)


def _teams_of_size(n_models: int, size: int, limit: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Every team of ``size`` when there are at most ``limit``, else ``limit`` distinct random ones (sorted)."""
    if math.comb(n_models, size) <= limit:
        return list(itertools.combinations(range(n_models), size))
    teams: set[tuple[int, ...]] = set()
    while len(teams) < limit:
        teams.add(tuple(sorted(int(m) for m in rng.choice(n_models, size=size, replace=False))))
    return sorted(teams)


def team_stats(
    cache: LogitCache, questions: np.ndarray | None = None, *, max_teams_per_size: int = 256, seed: int = 0
) -> list[TeamStat]:
    """Accuracy of the plurality vote and focal diversity of teams of every size 1..N on ``questions``.

    All teams of a size are listed when there are at most ``max_teams_per_size``; otherwise that many
    distinct teams are drawn from ``np.random.default_rng(seed)`` (sizes in increasing order).

    >>> import numpy as np
    >>> from ensemble_env.cache import LogitCache
    >>> cache = LogitCache(scores=np.eye(2)[[[0, 0, 1], [1, 0, 1], [0, 1, 0], [1, 1, 0]]].astype(float),
    ...                    labels=np.array([0, 1, 0, 1]), models=("a", "b", "c"), score_kind="prob")
    >>> [(t.members, t.accuracy) for t in team_stats(cache)][:4]
    [((0,), 1.0), ((1,), 0.5), ((2,), 0.5), ((0, 1), 0.75)]
    """
    if isinstance(max_teams_per_size, bool) or not isinstance(max_teams_per_size, int) or max_teams_per_size < 1:
        raise ValueError(f"max_teams_per_size must be an integer >= 1, got {max_teams_per_size!r}")
    rows = np.arange(cache.n_questions) if questions is None else np.asarray(questions)
    preds, correct, labels = cache.preds[rows], cache.correct[rows], cache.labels[rows]
    rng = np.random.default_rng(check_seed(seed, "team_stats", optional=False))
    stats = []
    for size in range(1, cache.n_models + 1):
        for team in _teams_of_size(cache.n_models, size, max_teams_per_size, rng):
            members = list(team)
            stats.append(
                TeamStat(team, plurality_accuracy(preds[:, members], labels), focal_diversity(correct[:, members]))
            )
    return stats


# -- plots -----------------------------------------------------------------------------------------


def _short_names(models: Sequence[str]) -> list[str]:
    """Model names without a Hugging Face ``org__`` prefix, when that keeps them distinct."""
    short = [name.rsplit("__", 1)[-1] for name in models]
    return short if len(set(short)) == len(short) else list(models)


def _plot_accuracy(figure_cls: Any, summary: dict[str, Any], names: list[str]) -> Any:
    tasks = summary["tasks"]
    n_models = len(names)
    figure = figure_cls(figsize=(9, 1.2 + 0.42 * len(tasks) + 0.2 * n_models), layout="constrained")
    axes = figure.add_subplot()
    y = np.arange(len(tasks))[::-1]
    height = 0.8 / n_models
    for m, (model, label) in enumerate(zip(summary["models"], names, strict=True)):
        values = [task["models"][model] for task in tasks]
        axes.barh(y + 0.4 - height * (m + 0.5), values, height=height, label=label, color=f"C{m % 10}")
    for key, marker, label in (("plurality_vote", "D", "plurality vote"), ("oracle", "|", "oracle (any right)")):
        values = [task["baselines"][key] for task in tasks]
        axes.scatter(values, y, marker=marker, color="black", s=40 if marker == "|" else 18, zorder=3, label=label)
    axes.set_yticks(y, [task["name"] for task in tasks], fontsize=8)
    axes.set_xlim(0, 1)
    axes.set_xlabel(f"accuracy (split: {summary['split']})")
    axes.set_title("Per-model accuracy by task")
    axes.grid(axis="x", alpha=0.3)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.6 / max(len(tasks), 1) - 0.06), ncol=4)
    return figure


def _plot_correlation(figure_cls: Any, matrix: np.ndarray, names: list[str], split: str) -> Any:
    size = 2.5 + 0.55 * len(names)
    figure = figure_cls(figsize=(size + 1.2, size), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(matrix, cmap="RdBu_r", vmin=-1, vmax=1)
    ticks = np.arange(len(names))
    axes.set_xticks(ticks, names, rotation=45, ha="right", fontsize=8)
    axes.set_yticks(ticks, names, fontsize=8)
    if len(names) <= 16:
        for i, j in itertools.product(range(len(names)), repeat=2):
            color = "white" if abs(matrix[i, j]) > 0.6 else "black"
            axes.text(j, i, f"{round(matrix[i, j], 2) + 0.0:.2f}", ha="center", va="center", fontsize=7, color=color)
    figure.colorbar(image, ax=axes, shrink=0.8, label="correlation of errors (phi)")
    axes.set_title(f"Pairwise error correlation (split: {split})")
    return figure


def _plot_teams(figure_cls: Any, stats: list[TeamStat], n_models: int, split: str) -> Any:
    figure = figure_cls(figsize=(10, 4.2), layout="constrained")
    scatter_axes, size_axes = figure.subplots(1, 2)
    sizes = np.array([stat.size for stat in stats])
    accuracy = np.array([stat.accuracy for stat in stats])
    diversity = np.array([stat.focal_diversity for stat in stats])
    for size in range(2, n_models + 1):
        team = sizes == size
        scatter_axes.scatter(diversity[team], accuracy[team], s=14, color=f"C{size % 10}", label=f"size {size}")
    scatter_axes.axhline(accuracy[sizes == 1].max(), color="grey", linestyle="--", label="best single model")
    scatter_axes.set_xlabel("focal diversity")
    scatter_axes.set_ylabel("plurality-vote accuracy")
    scatter_axes.set_title("Teams: accuracy vs focal diversity")
    scatter_axes.legend(fontsize=7, loc="best", ncol=2)
    by_size = np.arange(1, n_models + 1)
    for values, label, color, first in ((accuracy, "accuracy", "C0", 1), (diversity, "focal diversity", "C1", 2)):
        shown = by_size[by_size >= first]  # a lone model's focal diversity is 0 by convention: not drawn
        mean = [values[sizes == k].mean() for k in shown]
        low = [values[sizes == k].min() for k in shown]
        high = [values[sizes == k].max() for k in shown]
        size_axes.fill_between(shown, low, high, color=color, alpha=0.2)
        size_axes.plot(shown, mean, marker="o", color=color, label=f"{label} (mean, min-max)")
    size_axes.set_xticks(list(by_size))
    size_axes.set_xlabel("team size")
    size_axes.set_ylabel("value over the teams of a size")
    size_axes.set_ylim(0, 1)
    size_axes.set_title("By team size")
    size_axes.legend(fontsize=8)
    size_axes.grid(alpha=0.3)
    figure.suptitle(f"Teams of the cache's models (split: {split}; plurality vote, ties to the lowest choice)")
    return figure


def plot_cache(
    cache: LogitCache,
    out_dir: str | os.PathLike[str],
    *,
    split: str = "all",
    train_split: str = "train",
    max_teams_per_size: int = 256,
    seed: int = 0,
    dpi: int = 100,
) -> list[Path]:
    """Write the PNGs of :data:`PLOT_FILES` into ``out_dir`` (created if missing) and return their paths.

    - ``accuracy_by_task.png``: per task, each model's accuracy (bars), the plurality vote and the oracle;
    - ``error_correlation.png``: :func:`error_correlation` as a heat map;
    - ``teams_by_size.png``: :func:`team_stats` as accuracy against focal diversity, and both by team size.

    All on the questions of ``split``. Needs matplotlib (the ``plot`` extra); raises ModuleNotFoundError saying so
    (:func:`ensemble_env.extras.message`) when it is missing. Each file is written atomically.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise extras.missing_error("plotting a cache", "plot", ["matplotlib"]) from error
    questions = cache.select(split)
    folder = make_folder(out_dir)
    names = _short_names(cache.models)
    figures = (
        _plot_accuracy(Figure, summarize(cache, split, train_split), names),
        _plot_correlation(Figure, error_correlation(cache, questions), names, split),
        _plot_teams(
            Figure,
            team_stats(cache, questions, max_teams_per_size=max_teams_per_size, seed=seed),
            cache.n_models,
            split,
        ),
    )
    written = []
    for figure, name in zip(figures, PLOT_FILES, strict=True):
        figure.set_dpi(dpi)
        written.append(save_figure(figure, folder / name))
    return written
