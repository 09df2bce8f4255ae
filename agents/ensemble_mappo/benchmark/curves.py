"""Learning curves of the unseen-task protocol: each learner's reward per question on its fold's validation tasks
against environment steps, with the hand rules on the same tasks as horizontal lines (``learning_curves.png``).

A learner run keeps its start (update 0) and evenly spaced checkpoints, and plays each on the validation split of
its fold (the validation tasks, each streamed from an empty history) before choosing what to deploy
(:mod:`ensemble_mappo.selection`); the run's ``info`` keeps those plays (``validation``: the update and its mean
reward per question) and ``steps_per_iteration``. The hand rules (every baseline of the benchmark that reads no
label of the questions it is scored on) are fitted on the fold's training tasks and streamed over the same
validation tasks (:func:`validation_lines`): what a learner's curve has to cross. One panel per fold, since each
fold has its own validation tasks; a learner's curve is its mean over seeds, the band its range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.baselines import comparison
from ensemble_env.baselines import registry as baselines
from ensemble_env.files import check_output, save_figure
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo.benchmark import protocols
from ensemble_mappo.benchmark.registry import unit_outcomes

__all__ = ["BEST_RULE", "FILE", "best_rules", "learner_curves", "plot_learning_curves", "validation_lines"]

#: the figure's file in the benchmark's folder
FILE = "learning_curves.png"
#: the competitor that plays, on each fold, the hand rule best on that fold's validation tasks (:func:`best_rules`)
BEST_RULE = "best_rule(validation)"


def validation_lines(
    units: Sequence[protocols.Unit],
    names: Sequence[str],
    alpha: float,
    recorded: Sequence[Mapping[str, float]] = (),
) -> list[dict[str, float]]:
    """Per unit (fold), each baseline of the unseen-task protocol in ``names`` that reads no scored label: its mean
    reward per question on the unit's validation tasks, fitted on its training tasks (the learners' validation
    plays, on the same questions). ``recorded[k]`` holds the lines of unit ``k`` already known, by rule (the rules
    that chose their constants on the validation tasks, under ``--protocol generated``, recorded their reward there
    at the constants chosen): those rules are not replayed. Each line in the registry's order (ties of
    :func:`best_rules` go to the first)."""
    rules = [name for name in names if _is_rule(name)]
    canonical = {baselines.lookup(name).name for name in rules}
    lines = []
    for k, unit in enumerate(units):
        known = {name: value for name, value in (recorded[k] if k < len(recorded) else {}).items() if name in canonical}
        missing = [name for name in rules if baselines.lookup(name).name not in known]
        found = dict(known)
        if missing:
            reward = RewardSettings(alpha=alpha)
            results = comparison.compare(unit.cache, split="validation", train_split="train", reward=reward,
                                         names=missing, outcomes=unit_outcomes(unit.cache, reward))  # fmt: skip
            found.update({result.name: float(result.rewards(unit.cache, RewardSettings(alpha=alpha)).mean())
                          for result in results})  # fmt: skip
        lines.append({name: found[name] for name in baselines.BASELINES if name in found})  # the registry's order
    return lines


def _is_rule(name: str) -> bool:
    try:
        entry = baselines.lookup(name)
    except ValueError:
        return False
    return entry.unseen_tasks and not entry.uses_test_labels


def best_rules(lines: Sequence[Mapping[str, float]], feedback: str) -> list[str | None]:
    """Per unit, the rule with the best validation reward in ``lines`` among those the protocol's ``feedback``
    allows (:func:`ensemble_env.baselines.registry.reference` is None: not a reference); ties to the first in
    ``lines``' order; None where the unit has none."""
    chosen: list[str | None] = []
    for line in lines:
        playable = [name for name in line if baselines.reference(name, feedback) is None]
        chosen.append(max(playable, key=lambda name: (round(line[name], 12), -playable.index(name)), default=None))
    return chosen


def learner_curves(per_algorithm: Mapping[str, Any]) -> dict[str, list[dict[str, np.ndarray]]]:
    """Per learner whose runs kept their validation plays: per fold, ``steps`` (P,) and ``rewards`` (S, P), the
    validation reward per question of each seed's start and checkpoints. An ablation of a learner (``mappo(residual
    off)``: its info is the learner's, its validation plays the learner's own) draws no curve of its own."""
    curves: dict[str, list[dict[str, np.ndarray]]] = {}
    for name, entry in per_algorithm.items():
        runs = [run["info"] for run in entry.get("runs", [])]
        folds = [info.get("folds", [info]) for info in runs]
        if not folds or not all(fold and "validation" in fold[0] for fold in folds):
            continue
        if any("ablation_of" in fold[0] for fold in folds):
            continue
        per_fold = []
        for k in range(len(folds[0])):
            plays = [fold[k] for fold in folds]
            per_step = plays[0].get("steps_per_iteration", 1)
            steps = np.array([row["iteration"] * per_step for row in plays[0]["validation"]], dtype=np.float64)
            rewards = np.array([[row["validation_reward"] for row in play["validation"]] for play in plays])
            per_fold.append({"label": plays[0].get("unit", "all"), "steps": steps, "rewards": rewards})
        curves[name] = per_fold
    return curves


def plot_learning_curves(
    results: Mapping[str, Any], cache_name: str, path: Path, inputs: Sequence[str] = ()
) -> Path | None:
    """Draw the learning curves of ``results`` on ``cache_name`` into ``path``; None (nothing written) when no learner
    kept its validation plays, the protocol is the standard one, or ``cache_name`` has no validation lines (under
    ``--protocol generated`` the curves go with the generated tasks' results, ``generated(CACHE)``, not the real
    tasks'). ModuleNotFoundError without matplotlib."""
    curves = learner_curves(results["caches"][cache_name])
    if not curves or cache_name not in results.get("protocol", {}).get("validation_lines", {}):
        return None  # the standard protocol; or the real tasks of --protocol generated, whose curves are drawn once
    check_output(path, inputs)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    lines = results.get("protocol", {}).get("validation_lines", {}).get(cache_name, [])
    feedback = results.get("protocol", {}).get("feedback", "all")
    n_folds = max(len(folds) for folds in curves.values())
    columns = min(n_folds, 2)
    rows = -(-n_folds // columns)
    figure, grid = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.4 * rows), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    rules = sorted({rule for line in lines for rule in line})
    styles = {rule: (colors[(len(curves) + j) % len(colors)], (0, (4, 2)) if j % 2 else (0, (1, 1.5))) for j, rule
              in enumerate(rules)}  # fmt: skip
    for k, axis in enumerate(grid.flat):
        if k >= n_folds:
            axis.set_visible(False)
            continue
        for i, (name, folds) in enumerate(curves.items()):
            fold = folds[k]
            axis.plot(fold["steps"], fold["rewards"].mean(axis=0), marker="o", color=colors[i], label=name, lw=2)
            axis.fill_between(fold["steps"], fold["rewards"].min(axis=0), fold["rewards"].max(axis=0),
                              color=colors[i], alpha=0.15)  # fmt: skip
        for rule, value in (lines[k] if k < len(lines) else {}).items():
            reference = baselines.reference(rule, feedback)
            color, style = ("black", (0, (6, 3))) if reference else styles[rule]
            axis.axhline(
                value, color=color, linestyle=style, lw=1.2, label=rule + (f" ({reference})" if reference else "")
            )
        axis.set_title(f"{next(iter(curves.values()))[k]['label']}: validation tasks", fontsize=9)
        axis.set_xlabel("environment steps", fontsize=8)
        axis.set_ylabel("reward per question", fontsize=8)
        axis.grid(alpha=0.3)
    handles, labels = grid.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, -0.02), ncol=4, fontsize=8)
    tasks = "generated tasks" if results["protocol"].get("name") == "generated" else "tasks never seen"
    figure.suptitle(
        f"{cache_name}, {tasks} (feedback {feedback}): each learner's start (step 0) and checkpoints on its\n"
        "fold's validation tasks, mean over seeds (band: range); lines: the hand rules on the same tasks",
        fontsize=9,
    )
    figure.tight_layout(rect=(0, 0.1, 1, 1))
    saved = save_figure(figure, path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return saved
