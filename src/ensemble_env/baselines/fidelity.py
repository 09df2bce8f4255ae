"""How faithful a task generator is to the real tasks it was fitted on, and where real tasks it never saw fall.

A generated benchmark is worth what its tasks resemble real ones (the SMACv2 practice: show the generator's fidelity
to the data it was fitted on, keep real held-out tasks as the transfer test). Two comparisons, on the statistics a
router meets (:class:`TaskStatistics`; teams and rewards are the baselines' own: every non-empty team of
:func:`~ensemble_env.baselines.routing.all_teams`, answering by its mean-probability vote, scored by
:class:`~ensemble_env.game.reward.RewardSettings`):

- :func:`fidelity` (in sample): each real task against replicas of it (the generator's draws of its own parameters,
  no jitter, as many questions), statistics averaged over the replicas. The training tasks' global team of a task is
  the team with the best mean reward over the questions of the other tasks (real ones for the real task, replicas
  for the replicas), the hindsight team the task's own best, the hindsight gap the difference of their rewards.
- :func:`held_out` (out of sample): a generator fitted on some tasks draws new (jittered) tasks; each real task held
  out of the fit is placed among them, statistic by statistic, by its quantile (0: below every generated task, 1:
  above every one). The global team is the one the real training tasks choose, as the unseen-task protocol has it.

:func:`write_report` writes both as ``fidelity.md`` (tables), ``fidelity.json`` (every number) and ``fidelity.png``
(matplotlib, the ``plot`` extra); ``ensemble-env cache fit-generator CACHE -o GEN --report DIR`` runs it
(``docs/generated-tasks.md`` shows it on bbh5).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.baselines.fusion import plurality_answers
from ensemble_env.baselines.outcomes import prior_rank, team_outcomes
from ensemble_env.cache.generator import TaskGenerator, fit_generator
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.files import make_folder, save_figure, write_text
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings

__all__ = [
    "PLACED",
    "REPORT_FILES",
    "FidelityReport",
    "HeldOutTask",
    "TaskComparison",
    "TaskStatistics",
    "fidelity",
    "fidelity_report",
    "format_report",
    "held_out",
    "held_out_tasks",
    "plot_report",
    "task_statistics",
    "write_report",
]

#: the statistics a held-out task is placed by (fields of :class:`TaskStatistics`)
PLACED = ("best_single", "best_team_reward", "global_team_reward", "hindsight_gap", "agreement", "confidence")
#: the files :func:`write_report` writes
REPORT_FILES = ("fidelity.md", "fidelity.json", "fidelity.png")


@dataclass(frozen=True)
class TaskStatistics:
    """What a router meets on one task (or the mean over replicas of it); K = 2**N - 1 teams."""

    best_single: float
    """The best single model's accuracy."""
    best_team_reward: float
    """The hindsight team's mean reward: the task's best fixed team on its own labels."""
    best_team_accuracy: float
    """The hindsight team's accuracy."""
    global_team_reward: float
    """The mean reward of the training tasks' global team on the task."""
    hindsight_gap: float
    """``best_team_reward - global_team_reward``: what routing per task can gain over one global team."""
    mean_vote: np.ndarray
    """(K,) every team's mean-probability vote accuracy, in :func:`~ensemble_env.baselines.routing.all_teams` order."""
    plurality: np.ndarray
    """(K,) every team's plurality vote accuracy (ties to the lowest choice)."""
    agreement: float
    """The mean over model pairs of the share of questions on which both give the same answer."""
    confidence: float
    """The mean over models and questions of the probability of the model's answer."""


def task_statistics(
    cache: LogitCache, rows: np.ndarray, global_team: int, reward: RewardSettings = DEFAULT_REWARD
) -> TaskStatistics:
    """:class:`TaskStatistics` of the questions ``rows`` (one task), the global team being row ``global_team`` of
    :func:`~ensemble_env.baselines.routing.all_teams`."""
    outcomes = team_outcomes(cache, rows, reward)
    best = int(np.argmin(prior_rank(outcomes.rewards, outcomes.correct, outcomes.share)))
    preds, labels = cache.preds[outcomes.questions], cache.labels[outcomes.questions]
    plurality = np.array(
        [(plurality_answers(preds[:, team], cache.max_choices) == labels).mean() for team in outcomes.teams]
    )
    n_models = cache.n_models
    pairs = [(i, j) for i in range(n_models) for j in range(i + 1, n_models)]
    agreement = float(np.mean([(preds[:, i] == preds[:, j]).mean() for i, j in pairs])) if pairs else 1.0
    best_reward, global_reward = outcomes.rewards[best].mean(), outcomes.rewards[global_team].mean()
    return TaskStatistics(
        best_single=float(cache.correct[outcomes.questions].mean(axis=0).max()),
        best_team_reward=float(best_reward),
        best_team_accuracy=float(outcomes.correct[best].mean()),
        global_team_reward=float(global_reward),
        hindsight_gap=float(best_reward - global_reward),
        mean_vote=outcomes.correct.mean(axis=1),
        plurality=plurality,
        agreement=agreement,
        confidence=float(cache.probs[outcomes.questions].max(axis=2).mean()),
    )


def _mean(statistics: Sequence[TaskStatistics]) -> TaskStatistics:
    """The statistics averaged over tasks (each field its mean)."""
    fields: dict[str, Any] = {}
    for key in asdict(statistics[0]):
        value = np.mean([getattr(s, key) for s in statistics], axis=0)
        fields[key] = value if np.ndim(value) else float(value)
    return TaskStatistics(**fields)


def _global_team(cache: LogitCache, rows: np.ndarray, reward: RewardSettings) -> int:
    """The team with the best mean reward over ``rows`` (the keys of the unseen-task protocol's ``global_team``)."""
    outcomes = team_outcomes(cache, rows, reward)
    return int(np.argmin(prior_rank(outcomes.rewards, outcomes.correct, outcomes.share)))


@dataclass(frozen=True)
class TaskComparison:
    """One real task beside the mean of its replicas; ``mae`` and ``correlation`` compare the K team accuracies."""

    name: str
    n_choices: int
    real: TaskStatistics
    generated: TaskStatistics

    def mae(self, vote: str = "mean_vote") -> float:
        """The mean absolute difference of the K team accuracies (``vote``: ``"mean_vote"`` or ``"plurality"``)."""
        return float(np.abs(getattr(self.real, vote) - getattr(self.generated, vote)).mean())

    def correlation(self, vote: str = "mean_vote") -> float:
        """The correlation of the K team accuracies, real against generated (0 when either is constant)."""
        real, generated = getattr(self.real, vote), getattr(self.generated, vote)
        if np.std(real) == 0 or np.std(generated) == 0:
            return 0.0
        return float(np.corrcoef(real, generated)[0, 1])


@dataclass(frozen=True)
class HeldOutTask:
    """A real task held out of the fit: its statistics, and per statistic of :data:`PLACED` its quantile among the
    generated tasks and their 5%, 50% and 95% quantiles."""

    name: str
    real: TaskStatistics
    quantile: dict[str, float]
    generated: dict[str, tuple[float, float, float]]


@dataclass(frozen=True)
class FidelityReport:
    """:func:`fidelity`'s comparisons and :func:`held_out`'s placements, with what they were computed from."""

    source: str
    replicas: int
    seed: int
    alpha: float
    tasks: tuple[TaskComparison, ...]
    held_out: tuple[HeldOutTask, ...] = ()
    training_tasks: tuple[str, ...] = ()
    n_generated: int = 0


def fidelity(
    cache: LogitCache,
    generator: TaskGenerator | None = None,
    *,
    replicas: int = 8,
    seed: int = 0,
    reward: RewardSettings = DEFAULT_REWARD,
) -> tuple[TaskComparison, ...]:
    """Each task ``generator`` was fitted on (default: a generator fitted on every task of ``cache``) against
    ``replicas`` replicas of it (jitter 0, as many questions as the real task; task seeds from ``seed``)."""
    generator = fit_generator(cache) if generator is None else generator
    real_rows = {name: cache.select(tasks=[name]) for name in generator.task_names}
    drawn = {
        name: generator.sample(replicas, seed, parents=[name], jitter=0.0, questions=(rows.size, rows.size))
        for name, rows in real_rows.items()
    }
    comparisons = []
    for name, rows in real_rows.items():
        others = np.setdiff1d(np.concatenate(list(real_rows.values())), rows)
        real_global = _global_team(cache, others, reward) if others.size else 0
        replica_global = _replica_global_team(drawn, name, reward) if len(drawn) > 1 else 0
        replica = drawn[name]
        generated = _mean(
            [task_statistics(replica, np.flatnonzero(replica.tasks == t), replica_global, reward) for t in
             range(replicas)]
        )  # fmt: skip
        comparisons.append(
            TaskComparison(name, int(cache.n_choices[rows].max()), task_statistics(cache, rows, real_global, reward),
                           generated)
        )  # fmt: skip
    return tuple(comparisons)


def _replica_global_team(drawn: dict[str, LogitCache], held: str, reward: RewardSettings) -> int:
    """The best team over the pooled replicas of every task but ``held`` (the replicas' own unseen protocol)."""
    outcomes = [team_outcomes(replica, None, reward) for name, replica in drawn.items() if name != held]
    pooled = (np.concatenate([getattr(o, key) for o in outcomes], axis=1) for key in ("rewards", "correct", "share"))
    return int(np.argmin(prior_rank(*pooled)))


def held_out_tasks(names: Sequence[str], count: int, seed: int = 0) -> tuple[str, ...]:
    """``count`` of ``names`` drawn by a permutation seeded with ``SeedSequence([seed, 55])``, in their order.

    >>> held_out_tasks(("a", "b", "c", "d", "e"), 2, seed=0)
    ('d', 'e')
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count < len(names):
        raise ValueError(f"hold out 1..{len(names) - 1} of the {len(names)} tasks, got {count!r}")
    order = np.random.default_rng(np.random.SeedSequence([seed, 55])).permutation(len(names))
    return tuple(names[i] for i in sorted(order[:count]))


def held_out(
    cache: LogitCache,
    held: Sequence[str],
    *,
    tasks: Sequence[str] | None = None,
    n_tasks: int = 200,
    seed: int = 0,
    reward: RewardSettings = DEFAULT_REWARD,
) -> tuple[tuple[HeldOutTask, ...], tuple[str, ...]]:
    """Fit a generator on the tasks of ``cache`` (or of ``tasks``) not in ``held``, draw ``n_tasks`` tasks from it
    (seed ``seed``, the held-out tasks' range of question counts) and place each held-out real task among them.

    Returns the placements and the training tasks' names.
    """
    names = tuple(cache.task_names[t] for t in np.unique(cache.tasks)) if tasks is None else tuple(tasks)
    unknown = [name for name in held if name not in names]
    if unknown or not held or len(held) >= len(names):
        raise ValueError(f"held-out tasks {list(held)}: name 1..{len(names) - 1} of the tasks {list(names)}")
    training = tuple(name for name in names if name not in held)
    generator = fit_generator(cache, tasks=list(training))
    global_team = _global_team(cache, cache.select(tasks=list(training)), reward)
    sizes = [cache.select(tasks=[name]).size for name in held]
    drawn = generator.sample(n_tasks, seed, questions=(min(sizes), max(sizes)))
    generated = [task_statistics(drawn, np.flatnonzero(drawn.tasks == t), global_team, reward) for t in range(n_tasks)]
    placed = []
    for name in held:
        real = task_statistics(cache, cache.select(tasks=[name]), global_team, reward)
        quantile, bands = {}, {}
        for key in PLACED:
            values = np.array([getattr(s, key) for s in generated])
            value = getattr(real, key)
            quantile[key] = float((np.sum(values < value) + 0.5 * np.sum(values == value)) / values.size)
            low, middle, high = np.quantile(values, [0.05, 0.5, 0.95])
            bands[key] = (float(low), float(middle), float(high))
        placed.append(HeldOutTask(name, real, quantile, bands))
    return tuple(placed), training


def fidelity_report(
    cache: LogitCache,
    generator: TaskGenerator | None = None,
    *,
    replicas: int = 8,
    held_out_count: int = 4,
    n_generated: int = 200,
    seed: int = 0,
    reward: RewardSettings = DEFAULT_REWARD,
    source: str | None = None,
) -> FidelityReport:
    """Both comparisons: :func:`fidelity` of ``generator`` (default: fitted on every task of ``cache``) on its tasks,
    and, with ``held_out_count`` > 0, :func:`held_out` of that many of its tasks (:func:`held_out_tasks`, seeded
    with ``seed``) among ``n_generated`` tasks of a generator fitted on the others. ``source`` names the cache in the
    report (default: its path)."""
    generator = fit_generator(cache) if generator is None else generator
    comparisons = fidelity(cache, generator, replicas=replicas, seed=seed, reward=reward)
    placed: tuple[HeldOutTask, ...] = ()
    training: tuple[str, ...] = ()
    if held_out_count:
        held = held_out_tasks(generator.task_names, held_out_count, seed)
        placed, training = held_out(
            cache, held, tasks=generator.task_names, n_tasks=n_generated, seed=seed, reward=reward
        )
    return FidelityReport(
        source=cache.path if source is None else source,
        replicas=replicas,
        seed=seed,
        alpha=reward.alpha,
        tasks=comparisons,
        held_out=placed,
        training_tasks=training,
        n_generated=n_generated if held_out_count else 0,
    )


# -- the report -------------------------------------------------------------------------------------------------
def _pair(real: float, generated: float, digits: int = 3) -> str:
    return f"{real:.{digits}f} / {generated:.{digits}f}"


def format_report(report: FidelityReport) -> str:
    """The report as Markdown: the in-sample table, its summary, and the held-out placements."""
    rows = [
        [
            comparison.name,
            str(comparison.n_choices),
            _pair(comparison.real.best_single, comparison.generated.best_single),
            _pair(comparison.real.best_team_reward, comparison.generated.best_team_reward),
            _pair(comparison.real.global_team_reward, comparison.generated.global_team_reward),
            _pair(comparison.real.hindsight_gap, comparison.generated.hindsight_gap),
            f"{comparison.mae():.3f} / {comparison.correlation():.2f}",
            f"{comparison.mae('plurality'):.3f} / {comparison.correlation('plurality'):.2f}",
            _pair(comparison.real.agreement, comparison.generated.agreement, 2),
            _pair(comparison.real.confidence, comparison.generated.confidence, 2),
        ]
        for comparison in report.tasks
    ]
    header = ["task", "C", "best single", "best team reward", "global team reward", "hindsight gap",
              "mean-vote MAE / corr", "plurality MAE / corr", "agreement", "confidence"]  # fmt: skip
    maes = np.array([[c.mae(), c.correlation(), c.mae("plurality"), c.correlation("plurality")] for c in report.tasks])
    lines = [
        f"# Generator fidelity: {report.source}",
        "",
        f"Each real task against {report.replicas} replicas of it (no jitter, as many questions; seed {report.seed}),"
        f" reward alpha = {report.alpha:g}; cells are real / generated (the mean over the replicas).",
        "",
        *_markdown(header, rows),
        "",
        f"Over the {len(report.tasks)} tasks, the {len(report.tasks[0].real.mean_vote)} team mean-vote accuracies: "
        f"MAE {maes[:, 0].mean():.4f} (from {maes[:, 0].min():.3f} to {maes[:, 0].max():.3f}), correlation "
        f"{maes[:, 1].mean():.3f} (from {maes[:, 1].min():.2f} to {maes[:, 1].max():.2f}); plurality votes: MAE "
        f"{maes[:, 2].mean():.4f} ({maes[:, 2].min():.3f} to {maes[:, 2].max():.3f}), correlation "
        f"{maes[:, 3].mean():.3f} ({maes[:, 3].min():.2f} to {maes[:, 3].max():.2f}).",
    ]
    if report.held_out:
        lines += [
            "",
            f"## Held-out tasks: fitted on {len(report.training_tasks)} tasks, {report.n_generated} tasks drawn",
            "",
            "The generated tasks' 5%, 50% and 95% quantiles of each statistic, then each held-out real task's value "
            "and its quantile among the generated tasks (the global team: the training tasks' best).",
            "",
        ]
        bands = report.held_out[0].generated  # the same generated tasks for every held-out one
        placed_rows = [["generated: 5% / 50% / 95%", *(" / ".join(f"{v:.2f}" for v in bands[key]) for key in PLACED)]]
        placed_rows += [
            [task.name, *(f"{getattr(task.real, key):.3f} ({task.quantile[key]:.2f})" for key in PLACED)]
            for task in report.held_out
        ]
        lines += _markdown(["held-out task: value (quantile)", *(key.replace("_", " ") for key in PLACED)], placed_rows)
        inside = np.mean([0.05 <= task.quantile[key] <= 0.95 for task in report.held_out for key in PLACED])
        lines += ["", f"{inside:.0%} of the held-out values lie within the generated tasks' 5%-95% range."]
    return "\n".join(lines) + "\n"


def _markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _as_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [round(float(x), 6) for x in value]
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    return value


def plot_report(report: FidelityReport, path: str | os.PathLike[str], *, dpi: int = 110) -> Path:
    """The report's figure: every team's mean-vote accuracy real against generated, the per-task statistics real
    against generated, and the held-out tasks' quantiles. Needs matplotlib (the ``plot`` extra)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise extras.missing_error("plotting the generator's fidelity", "plot", ["matplotlib"]) from error
    panels = 3 if report.held_out else 2
    figure = Figure(figsize=(5.2 * panels, 5.4), layout="constrained")
    axes = figure.subplots(1, panels)
    for index, comparison in enumerate(report.tasks):
        axes[0].scatter(comparison.real.mean_vote, comparison.generated.mean_vote, s=9, alpha=0.8,
                        color=f"C{index % 10}", marker="os^D"[index // 10 % 4], label=comparison.name[:22])  # fmt: skip
    for panel in axes[:2]:
        panel.axline((0, 0), slope=1, color="grey", linewidth=0.8)
        panel.set_xlabel("real task")
        panel.set_ylabel("generated replicas (mean)")
        panel.grid(alpha=0.3)
    axes[0].set_title(f"Team mean-vote accuracies ({len(report.tasks[0].real.mean_vote)} teams per task)")
    axes[0].legend(fontsize=5.5, ncol=2, loc="upper left", markerscale=1.5)
    for key, marker, label in (("best_single", "o", "best single accuracy"), ("best_team_reward", "s",
                               "best team reward"), ("global_team_reward", "^", "global team reward"),
                               ("hindsight_gap", "D", "hindsight gap")):  # fmt: skip
        real = [getattr(c.real, key) for c in report.tasks]
        generated = [getattr(c.generated, key) for c in report.tasks]
        axes[1].scatter(real, generated, marker=marker, s=22, label=label)
    axes[1].set_title("Per-task statistics")
    axes[1].legend(fontsize=7)
    if report.held_out:
        panel = axes[2]
        for index, task in enumerate(report.held_out):
            offsets = np.arange(len(PLACED)) + 0.12 * (index - (len(report.held_out) - 1) / 2)
            panel.scatter(offsets, [task.quantile[key] for key in PLACED], s=28, label=task.name[:28],
                          color=f"C{index % 10}")  # fmt: skip
        panel.axhspan(0.05, 0.95, color="grey", alpha=0.15, label="generated 5%-95%")
        panel.set_xticks(np.arange(len(PLACED)), [key.replace("_", " ") for key in PLACED], rotation=30, ha="right",
                         fontsize=8)  # fmt: skip
        panel.set_ylim(-0.02, 1.02)
        panel.set_ylabel("quantile among the generated tasks")
        panel.set_title(f"Held-out real tasks (fit on {len(report.training_tasks)} tasks)")
        panel.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2)
    figure.set_dpi(dpi)
    return save_figure(figure, path)


def write_report(report: FidelityReport, folder: str | os.PathLike[str], *, plot: bool = True) -> list[Path]:
    """Write :data:`REPORT_FILES` into ``folder`` (created if missing; each file atomically): the Markdown tables,
    every number as JSON and, with ``plot``, the figure. Returns the paths written."""
    out = make_folder(folder)
    record = {
        "source": report.source,
        "replicas": report.replicas,
        "seed": report.seed,
        "alpha": report.alpha,
        "tasks": [
            {"name": c.name, "n_choices": c.n_choices, "real": asdict(c.real), "generated": asdict(c.generated),
             "mean_vote_mae": c.mae(), "mean_vote_correlation": c.correlation(),
             "plurality_mae": c.mae("plurality"), "plurality_correlation": c.correlation("plurality")}
            for c in report.tasks
        ],
        "training_tasks": list(report.training_tasks),
        "n_generated": report.n_generated,
        "held_out": [asdict(task) for task in report.held_out],
    }  # fmt: skip
    written = [
        write_text(out / REPORT_FILES[0], format_report(report)),
        write_text(out / REPORT_FILES[1], json.dumps(_as_json(record), indent=1) + "\n"),
    ]
    if plot:
        written.append(plot_report(report, out / REPORT_FILES[2]))
    return written
