"""Each task held out in turn: the unseen-task baselines of :mod:`ensemble_env.baselines.online` (and, under team
feedback, the rules of :mod:`ensemble_env.baselines.partial`) over a whole cache, their summary and its command
(``python -m ensemble_env.baselines.unseen [CACHE] [--alpha A] [--feedback team]``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ensemble_env.baselines import arguments, bayes, partial, registry
from ensemble_env.baselines.online import UNSEEN_BASELINES
from ensemble_env.baselines.outcomes import team_outcomes
from ensemble_env.baselines.simple import BaselineResult, question_indices, task_ids, task_names
from ensemble_env.cache import datasets
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.errors import command
from ensemble_env.game.config import FEEDBACK
from ensemble_env.game.reward import DEFAULT_REWARD, SIZE_PENALTY_MODES, RewardSettings
from ensemble_env.text import align_table

__all__ = ["format_summary", "leave_one_task_out", "main", "summarize"]


# -- leave one task out ---------------------------------------------------------------------------------


def leave_one_task_out(
    cache: LogitCache,
    *,
    reward: RewardSettings = DEFAULT_REWARD,
    names: Iterable[str] | None = None,
    questions: ArrayLike | None = None,
    feedback: str = "all",
    seed: int | None = 0,
) -> dict[str, list[BaselineResult]]:
    """Each task held out in turn: the baselines ``names`` fitted on the other tasks' questions (training tasks:
    every question of them, whatever its split), scored on every question of the held-out task.

    ``names`` default: every one of :data:`UNSEEN_BASELINES` with ``feedback="all"`` (the held-out tasks reveal
    every model's output), :data:`~ensemble_env.baselines.registry.PARTIAL_DEFAULT_BASELINES` with
    ``feedback="team"`` (only the played team's; the rules that read more are references there). ``seed`` seeds
    :func:`~ensemble_env.baselines.partial.thompson_team`. ``questions`` restricts both sides to some questions
    (default: all). Returns ``{name: [one result per task, in task order]}``. One :class:`TeamOutcomes` serves
    every fold.
    """
    defaults = {"all": tuple(UNSEEN_BASELINES), "team": registry.PARTIAL_DEFAULT_BASELINES}
    if not isinstance(feedback, str) or feedback not in defaults:
        raise ValueError(f"feedback {feedback!r}: the protocol's held-out tasks reveal {' or '.join(defaults)}")
    functions = {**UNSEEN_BASELINES, **partial.rules(seed), "bayes_team": bayes.bayes_team}
    chosen = list(defaults[feedback]) if names is None else arguments.names(names, "names", functions)
    rows = np.arange(cache.n_questions) if questions is None else question_indices(cache, questions, "questions")
    rows = np.unique(rows)
    tasks = task_ids(cache)[rows]
    held_out = np.unique(tasks)
    if held_out.size < 2:
        found = ", ".join(repr(task_names(cache)[t]) for t in held_out) or "none"
        raise ValueError(
            f"{cache.path}: leave_one_task_out holds out each task in turn and needs questions of at least two "
            f"tasks; the questions are of one task ({found})"
        )
    outcomes = team_outcomes(cache, rows, reward)
    results: dict[str, list[BaselineResult]] = {name: [] for name in chosen}
    for task in held_out:
        train, test = rows[tasks != task], rows[tasks == task]
        for name in chosen:
            results[name].append(functions[name](cache, train, test, reward=reward, outcomes=outcomes))
    return results


def summarize(
    cache: LogitCache, results: Mapping[str, Sequence[BaselineResult]], reward: RewardSettings = DEFAULT_REWARD
) -> dict[str, dict[str, float]]:
    """``{name: {"reward", "accuracy", "team_size"}}``: means over the folds of each fold's mean reward per question,
    accuracy and team size (with one held-out task per fold, ``accuracy`` is the macro accuracy)."""
    summary = {}
    for name, folds in results.items():
        summary[name] = {
            "reward": float(np.mean([result.rewards(cache, reward).mean() for result in folds])),
            "accuracy": float(np.mean([result.macro_accuracy(cache) for result in folds])),
            "team_size": float(np.mean([result.mean_team_size for result in folds])),
        }
    return summary


def format_summary(
    summary: Mapping[str, Mapping[str, float]], reward: RewardSettings = DEFAULT_REWARD, feedback: str = "all"
) -> str:
    """:func:`summarize`'s numbers as an aligned plain-text table, the references of a protocol revealing
    ``feedback`` marked (:func:`~ensemble_env.baselines.registry.reference`: ``(test labels)``, ``(full
    feedback)``)."""
    notes = {name: registry.reference(name, feedback) for name in summary}
    rows = [
        [
            name if notes[name] is None else f"{name} ({notes[name]})",
            f"{values['reward']:+.4f}",
            f"{values['accuracy']:.4f}",
            f"{values['team_size']:.2f}",
        ]
        for name, values in summary.items()
    ]
    return "\n".join(align_table(["baseline", f"reward(alpha={reward.alpha:g})", "accuracy", "team"], rows))


#: the constants each baseline chooses on the training tasks, printed per fold by :func:`main`
_CONSTANTS = {
    "ftl_team(window)": ("W", ("window",)),
    "ucb_team": ("(c, n0)", ("exploration", "pseudo_count")),
    "greedy_team": ("n0", ("pseudo_count",)),
    "etc_team": ("(m, n0)", ("explore", "pseudo_count")),
    "ucb_team(partial)": ("(c, n0)", ("exploration", "pseudo_count")),
    "thompson_team": ("(sigma, n0)", ("scale", "pseudo_count")),
    "bayes_team": ("(s, lambda)", ("prior_scale", "shrinkage")),
}
PROG = "python -m ensemble_env.baselines.unseen"


@command(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ensemble_env.baselines.unseen [CACHE] [--alpha A] [--size-penalty-mode M] [--use-costs]
    [--feedback {all,team}] [--seed S]``: print the leave-one-task-out table of the unseen-task baselines on a
    cache (a built-in name or a file): every one of ``online`` under full feedback, the partial-feedback rules and
    their references under ``--feedback team``. Bad input (a cache that cannot be read, an alpha or a mode out of
    range, costs the cache lacks, a cache of one task) is one error line, as with ``ensemble-env``."""
    parser = argparse.ArgumentParser(prog=PROG, description=main.__doc__)
    parser.add_argument("cache", nargs="?", default="bbh5", help="a built-in cache name or a cache file (bbh5)")
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--size-penalty-mode", default="on_error", choices=SIZE_PENALTY_MODES)
    parser.add_argument("--use-costs", action="store_true")
    parser.add_argument("--feedback", choices=FEEDBACK, default="all", help="what a held-out task reveals")
    parser.add_argument("--seed", type=int, default=0, help="the seed of thompson_team's draws (0)")
    options = parser.parse_args(argv)
    cache = datasets.resolve(options.cache)
    reward = RewardSettings(options.alpha, options.size_penalty_mode, options.use_costs)
    results = leave_one_task_out(cache, reward=reward, feedback=options.feedback, seed=options.seed)
    print(
        f"{options.cache}: {cache.n_questions} questions, {cache.n_models} models, {cache.n_tasks} tasks; "
        "each task held out in turn (trained on every question of the others, streamed over every question of it)"
        + ("; team feedback (only the played team's outputs are revealed)" if options.feedback == "team" else "")
    )
    print("means over the held-out tasks of the mean reward per question, the accuracy and the team size")
    print(format_summary(summarize(cache, results, reward), reward, options.feedback))
    for name, (label, keys) in _CONSTANTS.items():
        values = [[r.info[key] for key in keys] for r in results.get(name, [])]
        if values:
            shown = [f"{v[0]:g}" if len(v) == 1 else f"({', '.join(f'{x:g}' for x in v)})" for v in values]
            print(f"{name}: {label} per fold [{', '.join(shown)}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
