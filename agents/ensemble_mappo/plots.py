"""PNG plots of MAPPO runs (``ensemble-env plot``): learning curves, team size, selection, accuracy vs team size.

Several run directories (e.g. the seeds of one setting, of one pool) are drawn together: each run thin, their
mean thick. Needs matplotlib (the ``plot`` extra). The accuracy-vs-team-size plot places the runs' test
evaluations (``evaluation_test.json``, written by ``ensemble-env evaluate``; computed here, frozen, when missing)
among the baselines of :mod:`ensemble_env.baselines`. Every file of a run is read through
:mod:`ensemble_mappo.runs`, checked whole; every figure is written through :func:`ensemble_env.files.save_figure`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import save_figure
from ensemble_mappo.runs import RunConfig, read_config, read_evaluation, read_progress, run_cache

__all__ = ["PLOT_NAMES", "plot_runs", "read_progress"]

#: the files :func:`plot_runs` writes, in order
PLOT_NAMES = (
    "mappo_learning_curves.png",
    "mappo_team_size.png",
    "mappo_selection_frequency.png",
    "mappo_accuracy_vs_team_size.png",
)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ValueError('plotting needs matplotlib: pip install -e ".[plot]"') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _smooth(values: np.ndarray, window: int = 5) -> np.ndarray:
    """Trailing moving average that ignores NaN (keeps the length)."""
    out = np.full(values.shape, np.nan)
    for i in range(values.size):
        part = values[max(0, i - window + 1) : i + 1]
        if np.isfinite(part).any():
            out[i] = np.nanmean(part)
    return out


def _curves(ax: Any, logs: list[dict[str, np.ndarray]], key: str, label: str, color: str | None = None) -> None:
    """One thin line per run and the mean over runs (on the shortest common step grid) thick."""
    length = min(log[key].size for log in logs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # steps where no run has a value stay NaN
        mean = np.nanmean(np.stack([_smooth(log[key])[:length] for log in logs]), axis=0)
    (mean_line,) = ax.plot(logs[0]["global_step"][:length], mean, lw=2.0, label=label, color=color)
    if len(logs) > 1:
        for log in logs:
            ax.plot(log["global_step"], _smooth(log[key]), lw=0.8, alpha=0.35, color=mean_line.get_color())


def _evaluation(run_dir: Path, run: RunConfig, cache: LogitCache) -> dict[str, Any]:
    from ensemble_mappo.evaluation import evaluate_run, evaluation_path

    path = evaluation_path(run_dir, "test", "frozen")
    if path.exists():
        return read_evaluation(path, run.models)
    return evaluate_run(run_dir, cache).summary(cache)


def plot_runs(run_dirs: Sequence[Path], out_dir: Path | None = None, cache_arg: str | None = None) -> list[Path]:
    """Write the :data:`PLOT_NAMES` PNGs for ``run_dirs`` into ``out_dir`` (default: the first run's folder).

    The runs must share a pool (their per-model curves are drawn together); each run's files are checked whole.
    """
    from ensemble_env import baselines

    plt = _pyplot()
    if not run_dirs:
        raise ValueError("plot needs at least one run directory")
    runs = [read_config(Path(run_dir)) for run_dir in run_dirs]
    for run in runs[1:]:
        if run.models != runs[0].models:
            raise ValueError(
                f"{run.path}: the run's pool {list(run.models)} is not {run_dirs[0]}'s {list(runs[0].models)}; "
                "plot runs of one pool together"
            )
    logs = [read_progress(Path(run_dir), run) for run_dir, run in zip(run_dirs, runs, strict=True)]
    out = Path(out_dir) if out_dir is not None else Path(run_dirs[0])
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ValueError(f"--out {out}: is a file; give a folder for the plots") from None
    except OSError as error:
        raise ValueError(f"--out {out}: cannot create the folder ({error.strerror or error})") from None
    cache = run_cache(runs[0], cache_arg)
    evaluations = [_evaluation(Path(run_dir), run, cache) for run_dir, run in zip(run_dirs, runs, strict=True)]
    config, run = runs[0].config, runs[0].description  # every input read and checked: now the figures
    models = list(run["models"])
    title = f"MAPPO ({config.mode}), {len(run_dirs)} run(s)"
    paths = [out / name for name in PLOT_NAMES]

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    _curves(axes[0], logs, "env/reward", "mean reward per step")
    axes[0].set_ylabel("reward (sampled actions)")
    _curves(axes[1], logs, "env/accuracy", "accuracy (sampled actions)")
    if any(np.isfinite(log["env/episode_accuracy"]).any() for log in logs):
        _curves(axes[1], logs, "env/episode_accuracy", "accuracy of finished episodes")
    axes[1].set_ylabel("accuracy on the train stream")
    for ax in axes:
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(f"{title}: learning curves")
    fig.tight_layout()
    save_figure(fig, paths[0], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    _curves(ax, logs, "env/team_size", "mean team size")
    ax.axhline(len(models), color="grey", ls=":", label=f"whole pool ({len(models)})")
    ax.set_xlabel("env steps")
    ax.set_ylabel("models per question")
    ax.set_ylim(0, len(models) + 0.5)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{title}: team size during training")
    fig.tight_layout()
    save_figure(fig, paths[1], dpi=120)
    plt.close(fig)

    fig, (ax, bars) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    colors = plt.get_cmap("tab20" if len(models) > 10 else "tab10")
    for index, model in enumerate(models):
        _curves(ax, logs, f"env/select/{model}", model, color=colors(index % colors.N))
    ax.set_xlabel("env steps")
    ax.set_ylabel("selection frequency (sampled teams)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
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
    bars.set_title("frozen policy on the test split")
    bars.grid(alpha=0.3, axis="x")
    fig.suptitle(f"{title}: how often each model is in the team")
    fig.tight_layout()
    save_figure(fig, paths[2], dpi=120)
    plt.close(fig)

    results = baselines.run_all(cache, k=min(3, cache.n_models))
    results.insert(1, baselines.best_single(cache, cache.select("train"), cache.select("test"), per_task=True))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for result in results:
        ax.scatter(result.mean_team_size, result.macro_accuracy(cache), marker="s", color="grey")
        ax.annotate(
            result.name,
            (result.mean_team_size, result.macro_accuracy(cache)),
            fontsize=7,
            xytext=(4, 2),
            textcoords="offset points",
        )
    sizes = [evaluation["mean_team_size"] for evaluation in evaluations]
    accuracies = [evaluation["macro_accuracy"] for evaluation in evaluations]
    ax.scatter(sizes, accuracies, color="tab:red", alpha=0.5, label="MAPPO runs (frozen, test)")
    ax.errorbar(
        np.mean(sizes),
        np.mean(accuracies),
        yerr=np.std(accuracies) if len(accuracies) > 1 else None,
        xerr=np.std(sizes) if len(sizes) > 1 else None,
        fmt="*",
        ms=14,
        color="tab:red",
        label="MAPPO mean +- std",
    )
    ax.set_xlabel("mean team size (models consulted per question)")
    ax.set_ylabel("test macro accuracy")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("accuracy against team size: MAPPO and the baselines (test split)")
    fig.tight_layout()
    save_figure(fig, paths[3], dpi=120)
    plt.close(fig)
    return paths
