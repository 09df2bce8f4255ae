"""The benchmark's report: the markdown tables of ``results.md`` (:func:`format_markdown`) and the frontier plots
(:func:`write_plots`: test accuracy against team size, and cost on a cache with costs, with the 95% intervals as
error bars and the algorithms that read the test labels drawn as references; one PNG per cache, named by
:func:`plot_names`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env import extras
from ensemble_env.baselines import frontier_plot
from ensemble_env.baselines.frontier import FrontierPoint
from ensemble_env.baselines.simple import describe_costs, fixed_decimals
from ensemble_env.files import check_output
from ensemble_mappo.benchmark import curves

__all__ = ["PLOT_EXTRA", "TEST_LABELS_ROLE", "format_markdown", "plot_names", "plot_skipped", "write_plots"]

#: how the tables mark an algorithm that reads the test labels (an oracle: the headroom, never a competitor)
TEST_LABELS_ROLE = "reference (uses test labels)"
#: how to install what the frontier plot needs (matplotlib)
PLOT_EXTRA = extras.install_line("plot")


def plot_skipped() -> str:
    """What the benchmark says when it skips the frontier plot for want of matplotlib: the one message of
    :mod:`ensemble_env.extras`."""
    return "skipped: " + extras.message("the frontier plot", "plot", ["matplotlib"])


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
    units = results.get("cost_units", {})  # absent from the results of earlier versions: the unit is then unknown
    for cache_name, per_algorithm in results["caches"].items():
        lines += [f"## {cache_name}", ""]
        if results.get("resampling", {}).get(cache_name) == "tasks":
            n_tasks = len(next(iter(per_algorithm.values()))["aggregate"]["tasks"])
            lines += [
                f"{n_tasks:,} generated test tasks: the intervals here resample the seeds and the tasks (each task a "
                "draw of the generator, with all its questions), not the questions within a task.",
                "",
            ]
        lines += ["| algorithm | role | accuracy | reward | team size | cost |", "|---|---|---|---|---|---|"]
        costs = [entry["aggregate"]["cost"]["mean"] for entry in per_algorithm.values() if entry["aggregate"]["cost"]]
        digits = fixed_decimals(min((cost for cost in costs if cost > 0), default=1.0))
        for name, entry in per_algorithm.items():
            aggregate_ = entry["aggregate"]
            cells = [_role(entry), _interval(aggregate_["accuracy"]), _interval(aggregate_["reward"])]
            cells += [_interval(aggregate_["team_size"], 2), _interval(aggregate_["cost"], digits)]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            points = [_frontier_point(name, entry, results["alpha"]) for name, entry in per_algorithm.items()]
        note = describe_costs(frontier_plot.priced(points), units.get(cache_name))
        lines += ["", f"Cost: mean per question; {note}.", ""]
        if results.get("protocol", {}).get("feedback") == "team":
            lines += _gap_closed(per_algorithm)
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
    if entry.get("uses_test_labels"):
        return TEST_LABELS_ROLE
    reason = entry.get("reference")
    return f"reference ({reason}: not playable in this game)" if reason else "competitor"


def _gap_closed(per_algorithm: Mapping[str, Any]) -> list[str]:
    """Under partial feedback: the share of the gap between the best hand rule (chosen per fold on validation) and
    follow-the-leader with every output revealed that each competitor closes, on the reward."""
    if curves.BEST_RULE not in per_algorithm or "ftl_team" not in per_algorithm:
        return []
    best = per_algorithm[curves.BEST_RULE]["aggregate"]["reward"]["mean"]
    full = per_algorithm["ftl_team"]["aggregate"]["reward"]["mean"]
    if full <= best:
        return []
    lines = [f"Share of the gap between {curves.BEST_RULE} ({best:+.3f}) and ftl_team with every output revealed "
             f"({full:+.3f}) closed, on the reward:", ""]  # fmt: skip
    for name, entry in per_algorithm.items():
        if name != curves.BEST_RULE and not entry.get("reference") and not entry.get("uses_test_labels"):
            share = (entry["aggregate"]["reward"]["mean"] - best) / (full - best)
            lines.append(f"- {name}: {share:+.0%}")
    return [*lines, ""]


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


def plot_names(caches: Sequence[str], digests: Mapping[str, str]) -> dict[str, str]:
    """The frontier plot's file name of each cache: ``frontier.png`` for one cache; else ``frontier_STEM.png``
    (``frontier_TRAIN-to-EVAL.png`` for the results of several training caches on one ``--eval-cache``),
    with the start of the cache's content digest added (``frontier_STEM-1a2b3c4d5e6f.png``) where two caches
    share a file name (``a/pool.h5`` and ``b/pool.h5``)."""
    if len(caches) == 1:
        return {caches[0]: "frontier.png"}
    stems = {name: _stem(name) for name in caches}
    counts = {stem: list(stems.values()).count(stem) for stem in stems.values()}
    return {
        name: f"frontier_{stem}.png" if counts[stem] == 1 else f"frontier_{stem}-{digests[name][:12]}.png"
        for name, stem in stems.items()
    }


def _stem(cache_name: str) -> str:
    """The file-name stem of a cache's results: ``pool`` for ``a/pool.h5``; ``first-to-other`` for the results of
    ``first.h5 -> other.h5`` (a training cache scored on ``--eval-cache``); ``generated-pool`` for
    ``generated(a/pool.h5)`` (its generated tasks under ``--protocol generated``)."""
    if cache_name.startswith("generated(") and cache_name.endswith(")"):
        return "generated-" + _stem(cache_name[len("generated(") : -1])
    return "-to-".join(Path(part).stem or "cache" for part in cache_name.split(" -> "))


def _span(entry: Mapping[str, float] | None) -> tuple[float, float] | None:
    """A metric's 95% interval as (low, high), or None without one."""
    return None if entry is None else (float(entry["low"]), float(entry["high"]))


def _frontier_point(name: str, entry: Mapping[str, Any], alpha: float) -> FrontierPoint:
    """An algorithm's aggregate as a point of the frontier: the means over seeds, with their 95% intervals; an
    algorithm that reads the test labels is marked so (drawn as a reference)."""
    scores = entry["aggregate"]
    cost = scores["cost"]
    return FrontierPoint(
        name,
        alpha,
        scores["accuracy"]["mean"],
        scores["reward"]["mean"],
        scores["team_size"]["mean"],
        None if cost is None else cost["mean"],
        uses_test_labels=bool(entry.get("uses_test_labels")),
        accuracy_interval=_span(scores["accuracy"]),
        team_size_interval=_span(scores["team_size"]),
        cost_interval=_span(cost),
    )


def write_plots(results: Mapping[str, Any], out: Path, inputs: Sequence[str]) -> list[Path] | None:
    """Draw each cache's frontier into ``out`` (names: :func:`plot_names`; never over one of ``inputs``, the
    caches), and under the unseen-task protocol its learners' learning curves (:mod:`~ensemble_mappo.benchmark.curves`:
    ``learning_curves.png``, named as the frontier is); the paths written, or None when matplotlib is missing."""
    names = plot_names(list(results["caches"]), results["cache_digests"])
    for name in names.values():
        check_output(out / name, inputs)
    written = []
    for cache_name, per_algorithm in results["caches"].items():
        points = [_frontier_point(name, entry, results["alpha"]) for name, entry in per_algorithm.items()]
        priced = frontier_plot.priced(points)
        seeds = len(results["seeds"])
        title = (
            f"{cache_name}: test accuracy against team size{' and cost' if priced else ''} (alpha "
            f"{results['alpha']:g}); mean over {seeds} seed{'s' if seeds != 1 else ''}, bars: 95% intervals"
        )
        try:
            path = frontier_plot.plot_frontier(
                points, out / names[cache_name], title=title, cost_unit=results.get("cost_units", {}).get(cache_name)
            )
            written.append(path)
            curve = curves.plot_learning_curves(
                results, cache_name, out / names[cache_name].replace("frontier", "learning_curves"), inputs
            )
            written += [curve] if curve is not None else []
        except ModuleNotFoundError:
            return None
    return written
