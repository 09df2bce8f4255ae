"""PNG plots of runs of any algorithm (``ensemble-env plot``): learning curves, team size, selection, accuracy.

Several run directories (e.g. the seeds of one setting, of one pool) are drawn together: each run thin, their
mean thick. Curves are trailing means over :data:`SMOOTHING` updates, said in every legend, with each update's
value thin and the last one marked (the figure ``train`` prints last); a series of one value is a marker. Needs
matplotlib (the ``mappo`` or ``plot`` extra). The accuracy-vs-team-size plot places each run's test evaluation
(``evaluation_test.json``, written by ``ensemble-env evaluate``; computed here, frozen, when missing) among every
baseline ``ensemble-env baselines`` runs (:func:`ensemble_env.baselines.frontier.frontier` at the run's alpha,
drawn by :func:`~ensemble_env.baselines.frontier_plot.plot_frontier`, names in the legend), and against cost too on a
cache with costs. Every file of a run is read through
:mod:`ensemble_mappo.runs`, checked whole; every figure is written through :func:`ensemble_env.files.save_figure`.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.cache.datasets import cost_unit
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import OutputError, make_folder, save_figure
from ensemble_mappo.progress_format import read_progress
from ensemble_mappo.runs import RunConfig, read_config, run_cache

__all__ = ["PLOT_NAMES", "plot_runs", "pyplot", "read_progress", "step_label"]

#: the files :func:`plot_runs` writes, in order
PLOT_NAMES = (
    "mappo_learning_curves.png",
    "mappo_team_size.png",
    "mappo_selection_frequency.png",
    "mappo_accuracy_vs_team_size.png",
)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (files only, no window); ValueError with the one message of
    :mod:`ensemble_env.extras` when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError(extras.message("plotting runs", "plot", ["matplotlib"])) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: how :func:`plot_runs` says what it is doing: ``status(message)``, a context manager around each step that takes
#: seconds (``ensemble-env plot`` passes :func:`ensemble_env.cli.options.status`); the default says nothing
Status = Callable[[str], AbstractContextManager[Any]]


def _quiet(message: str) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


#: the most ticks on an axis of env steps (with their labels as 50k, 1.5M: they never run together)
MAX_STEP_TICKS = 6


def _steps_axis(ax: Any) -> None:
    """An x axis of env steps: at most :data:`MAX_STEP_TICKS` round ticks, labelled short (``250k``, ``1.5M``)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=MAX_STEP_TICKS, steps=[1, 2, 2.5, 5, 10], integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: step_label(value)))
    ax.set_xlabel("env steps")


def step_label(steps: float) -> str:
    """A tick label of env steps: ``0``, ``800``, ``50k``, ``1.5M``.

    >>> [step_label(value) for value in (0, 800, 50_000, 262_144, 1_500_000, 2e9)]
    ['0', '800', '50k', '262k', '1.5M', '2G']
    """
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(steps) >= scale:
            return f"{steps / scale:.3g}{suffix}"
    return f"{steps:.0f}"


#: the learning curves' smoothing: a trailing mean over this many updates (said in every legend)
SMOOTHING = 5


def _smooth(values: np.ndarray, window: int = SMOOTHING) -> np.ndarray:
    """Trailing moving average that ignores NaN (keeps the length)."""
    out = np.full(values.shape, np.nan)
    for i in range(values.size):
        part = values[max(0, i - window + 1) : i + 1]
        if np.isfinite(part).any():
            out[i] = np.nanmean(part)
    return out


def _curves(ax: Any, logs: list[dict[str, np.ndarray]], key: str, label: str, color: str | None = None) -> None:
    """A learning curve: each update's value thin (one run) or each run's smoothed curve thin (several), the
    trailing mean over :data:`SMOOTHING` updates (of the runs' mean) thick, and the last update's value marked, so
    that the end of the curve reads as ``train``'s last line (the last rollout) does. A series with a single value
    (e.g. one finished episode) is a marker, never a line; a sparse one (values at fewer than half the updates) its
    values joined, unsmoothed."""
    length = min(log[key].size for log in logs)
    steps = logs[0]["global_step"][:length]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # steps where no run has a value stay NaN
        raw = np.nanmean(np.stack([log[key][:length] for log in logs]), axis=0)
    finite = np.flatnonzero(np.isfinite(raw))
    if finite.size == 0:
        return
    runs = "" if len(logs) == 1 else f", mean of {len(logs)} runs"
    if finite.size == 1:
        ax.plot(
            steps[finite], raw[finite], ls="none", marker="o", ms=7, color=color, label=f"{label}{runs} (one value)"
        )
        return
    if finite.size < raw.size / 2:  # a sparse series (e.g. finished episodes): its values, joined, unsmoothed
        (line,) = ax.plot(
            steps[finite], raw[finite], marker="o", ms=3, lw=1.2, color=color, label=f"{label}{runs} (each value)"
        )
        ax.plot(
            steps[finite[-1]], raw[finite[-1]], ls="none", marker="o", ms=5, color=line.get_color(),
            markeredgecolor="black", label=f"last value: {raw[finite[-1]]:.3f}",
        )  # fmt: skip
        return
    smoothed = _smooth(raw)
    window = f"trailing mean of {SMOOTHING} updates" if SMOOTHING > 1 else "each update"
    (line,) = ax.plot(steps, smoothed, lw=2.0, color=color, label=f"{label}{runs} ({window})")
    if len(logs) == 1:
        ax.plot(steps, raw, lw=0.7, alpha=0.45, color=line.get_color())
    else:
        for log in logs:
            ax.plot(log["global_step"], _smooth(log[key]), lw=0.8, alpha=0.35, color=line.get_color())
    last = finite[-1]
    ax.plot(
        steps[last], raw[last], ls="none", marker="o", ms=5, color=line.get_color(), markeredgecolor="black",
        label=f"last update: {raw[last]:.3f}",
    )  # fmt: skip


def _selection_curve(ax: Any, logs: list[dict[str, np.ndarray]], key: str, label: str, color: Any) -> None:
    """A model's selection frequency during training: the trailing mean (of the runs' mean), one line per model."""
    length = min(log[key].size for log in logs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        raw = np.nanmean(np.stack([log[key][:length] for log in logs]), axis=0)
    steps = logs[0]["global_step"][:length]
    if np.isfinite(raw).sum() == 1:
        ax.plot(steps, raw, ls="none", marker="o", color=color, label=label)
    else:
        ax.plot(steps, _smooth(raw), lw=1.6, color=color, label=label)


def _policy_point(name: str, alpha: float, evaluation: dict[str, Any]) -> Any:
    """A frozen policy's test evaluation as a point of the frontier plot."""
    from ensemble_env.baselines.frontier import FrontierPoint

    size, cost = float(evaluation["mean_team_size"]), evaluation.get("mean_cost")
    cost = None if cost is None else float(cost)
    return FrontierPoint(name, alpha, float(evaluation["macro_accuracy"]), float("nan"), size, cost)


def _evaluation(run_dir: Path, run: RunConfig, cache: LogitCache, status: Status = _quiet) -> dict[str, Any]:
    from ensemble_mappo.evaluation import evaluate_run, evaluation_path, read_evaluation

    path = evaluation_path(run_dir, "test", "frozen")
    if path.exists():
        return read_evaluation(path, run.models)
    with status(f"playing the test split with the policy of {run_dir} (it has no {path.name} yet)"):
        return evaluate_run(run_dir, cache).summary(cache)


def plot_runs(
    run_dirs: Sequence[Path],
    out_dir: Path | None = None,
    cache_arg: str | None = None,
    *,
    status: Status = _quiet,
) -> list[Path]:
    """Write the :data:`PLOT_NAMES` PNGs for ``run_dirs`` into ``out_dir`` (default: the first run's folder).

    The runs must share a pool (their per-model curves are drawn together); each run's files are checked whole.
    ``status(message)`` wraps each step that takes seconds: playing a run's test split when it has no
    ``evaluation_test.json``, fitting the baselines, drawing the figures.
    """
    from ensemble_env.baselines import frontier, frontier_plot
    from ensemble_mappo.evaluation import reward_settings

    plt = pyplot()
    if not run_dirs:
        raise ValueError("plot needs at least one run directory")
    runs = [read_config(Path(run_dir)) for run_dir in run_dirs]
    for run in runs[1:]:
        if run.algorithm != runs[0].algorithm:
            raise ValueError(
                f"{run.path}: a run of {run.algorithm}, not {runs[0].algorithm} like {run_dirs[0]}; plot the runs of "
                "one algorithm together (the benchmark compares algorithms: ensemble-env benchmark)"
            )
        if run.models != runs[0].models:
            raise ValueError(
                f"{run.path}: the run's pool {list(run.models)} is not {run_dirs[0]}'s {list(runs[0].models)}; "
                "plot runs of one pool together"
            )
    logs = [read_progress(Path(run_dir), run) for run_dir, run in zip(run_dirs, runs, strict=True)]
    out = Path(out_dir) if out_dir is not None else Path(run_dirs[0])
    try:
        make_folder(out)
    except OutputError as error:
        raise OutputError(f"--out {out}: {error}; give a folder for the plots", error.errno) from None
    cache = run_cache(runs[0], cache_arg)
    evaluations = [_evaluation(Path(run_dir), run, cache, status) for run_dir, run in zip(run_dirs, runs, strict=True)]
    config, run = runs[0].config, runs[0].description  # every input read and checked: now the baselines
    models = list(run["models"])
    label = runs[0].algorithm + (f" ({config.mode})" if hasattr(config, "mode") else "")
    reward = reward_settings(config, cache)
    with (
        status(f"fitting the baselines on train and scoring them on test (alpha {reward.alpha:g})"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", RuntimeWarning)
        points = frontier.frontier(cache, (reward.alpha,), reward=reward, k=min(3, cache.n_models), progress=False)
    name = f"{label}, frozen policy" + ("" if len(evaluations) == 1 else f": {len(evaluations)} runs")
    for evaluation in evaluations:
        points.append(_policy_point(name, reward.alpha, evaluation))
    if len(evaluations) > 1:
        keys = ("macro_accuracy", "mean_team_size", "mean_cost")
        mean = {key: float(np.mean([e[key] for e in evaluations])) for key in keys if key in evaluations[0]}
        points.append(_policy_point(f"{label} mean of {len(evaluations)} runs", reward.alpha, mean))
    title = f"{label}, {len(run_dirs)} run(s)"
    paths = [out / name for name in PLOT_NAMES]
    with status(f"drawing {len(paths)} plots into {out}"):
        _draw_learning_curves(plt, logs, title, paths[0])
        _draw_team_size(plt, logs, title, len(models), paths[1])
        _draw_selection(plt, logs, evaluations, models, title, paths[2])
        frontier_plot.plot_frontier(
            points,
            paths[3],
            title=f"test accuracy against team size{' and cost' if cache.costs is not None else ''}: {label} and "
            f"every baseline of `ensemble-env baselines` (alpha {reward.alpha:g})",
            dpi=120,
            cost_unit=cost_unit(cache),
        )
    return paths


def _draw_learning_curves(plt: Any, logs: list[dict[str, np.ndarray]], title: str, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    _curves(axes[0], logs, "env/reward", "mean reward per step")
    axes[0].set_ylabel("reward (sampled actions)")
    _curves(axes[1], logs, "env/accuracy", "accuracy (sampled actions)")
    if any(np.isfinite(log["env/episode_accuracy"]).any() for log in logs):
        _curves(axes[1], logs, "env/episode_accuracy", "accuracy of finished episodes")
    axes[1].set_ylabel("accuracy on the train stream")
    for ax in axes:
        _steps_axis(ax)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=7)
    fig.suptitle(
        f"{title}: learning curves (thick: trailing mean of {SMOOTHING} updates; thin: each update; "
        "dot: the last update, train's last line)",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def _draw_team_size(plt: Any, logs: list[dict[str, np.ndarray]], title: str, n_models: int, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    _curves(ax, logs, "env/team_size", "mean team size")
    ax.axhline(n_models, color="grey", ls=":", label=f"whole pool ({n_models})")
    _steps_axis(ax)
    ax.set_ylabel("models per question")
    ax.set_ylim(0, n_models + 0.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{title}: team size during training", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def _draw_selection(
    plt: Any,
    logs: list[dict[str, np.ndarray]],
    evaluations: list[dict[str, Any]],
    models: list[str],
    title: str,
    path: Path,
) -> None:
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    colors = plt.get_cmap("tab20" if len(models) > 10 else "tab10")
    for index, model in enumerate(models):
        _selection_curve(ax, logs, f"env/select/{model}", model.split("__")[-1], colors(index % colors.N))
    _steps_axis(ax)
    ax.set_ylabel("selection frequency (sampled teams)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", title=f"trailing mean of {SMOOTHING} updates", title_fontsize=7)
    ax.set_title("during training")
    frequencies = np.array([[e["selection_frequency"][model] for model in models] for e in evaluations])
    bars.barh(
        np.arange(len(models)),
        frequencies.mean(axis=0),
        xerr=frequencies.std(axis=0) if len(evaluations) > 1 else None,
        color=[colors(index % colors.N) for index in range(len(models))],
    )
    bars.set_yticks(np.arange(len(models)), [model.split("__")[-1] for model in models], fontsize=7)
    bars.invert_yaxis()
    bars.set_xlim(0, 1.02)
    bars.set_xlabel("selection frequency")
    bars.set_title(
        "frozen policy on the test split"
        + ("" if len(evaluations) == 1 else f"\n(mean of {len(evaluations)} runs, +- std)"),
        fontsize=10,
    )
    bars.grid(alpha=0.3, axis="x")
    fig.suptitle(f"{title}: how often each model is in the team")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
