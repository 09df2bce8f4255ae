"""What each policy of a ``--protocol generated`` benchmark does on the first questions of a generated test task.

Reads a benchmark folder (``ensemble-env benchmark --protocol generated --out OUT``), rebuilds its folds (the same
cache, fold seed and default plan: the generated tasks are a function of them) and, from the stored runs, prints
per position of a question in its task (1 for a task's first question) the mean team size and the mean reward per
question of every algorithm found (the learners, their ablations, e.g. ``mappo(residual off)``, and the rules),
over every generated test task of every fold and seed; then the same over the rest of the tasks. With ``--figure``,
a two-panel figure of both against the position.

    python benchmarks/first_questions.py --out gen --figure first_questions.png
    python benchmarks/first_questions.py --out gen --per-seed --algorithms "mappo (seed 0)" "mappo (seed 4)" etc_team

Where a learner loses to a rule, this says whether it is in the exploration of a task's first questions (the rule
pays the size penalty early and reads every team's outcome) or after it. The folder is read as hostile input: each
run's file within the size its cache allows, its answers checked against the fold's questions
(``ensemble_mappo.benchmark.store``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.baselines.fusion import mean_vote as vote
from ensemble_env.baselines.fusion import valid_choices
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.errors import command
from ensemble_env.files import check_output, save_figure
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo import algorithms
from ensemble_mappo.benchmark import protocols, store
from ensemble_mappo.benchmark.learners import ABLATIONS, ablation_name

#: the script's name (its error messages)
PROG = "first_questions.py"
#: the suffix of a learner's teams answered by their members' mean vote (``--mean-vote``)
MEAN_VOTE = "mean vote"
#: the positions printed one by one; then the rest of the first ``--questions`` in one row, then the rest
SHOWN = (1, 2, 3, 4, 5, 6, 8, 10)


def _answers(place: Path, what: str, answers: Any, unit: protocols.Unit, questions: np.ndarray) -> dict[str, Any]:
    """``answers`` (a run's, or its ablation's) as arrays, checked against the unit's test questions: a ValueError
    naming the file and the field otherwise (checked as arrays: a run holds 100,000 answers)."""
    cache = unit.cache
    try:
        predictions = np.asarray(answers["predictions"], dtype=np.int64)
        teams = np.asarray(answers["teams"], dtype=np.int64)
    except (KeyError, TypeError, ValueError, OverflowError):
        raise ValueError(f"{place}: {what}: expected predictions and teams of whole numbers") from None
    n_choices = np.asarray(cache.n_choices)[questions]
    if predictions.shape != questions.shape or not ((predictions >= 0) & (predictions < n_choices)).all():
        raise ValueError(f"{place}: {what}.predictions: expected one valid answer per test question of the fold")
    if teams.shape != (questions.size, cache.n_models) or not np.isin(teams, (0, 1)).all() or (teams.sum(1) == 0).any():
        raise ValueError(f"{place}: {what}.teams: expected one 0/1 row of {cache.n_models} per question, each with a "
                         "member")  # fmt: skip
    return {"questions": questions, "predictions": predictions, "teams": teams}


def _records(folder: Path, unit: protocols.Unit) -> dict[tuple[str, int], dict[str, Any]]:
    """The stored runs of a unit, by (algorithm, seed) (a rule run once for every seed: seed -1), each read within
    the size its cache allows and its answers checked against the unit's test questions."""
    runs = folder / "runs"
    test = np.asarray(unit.cache.select("test"))
    found = {}
    for place in sorted(runs.glob(f"*-{cache_digest(unit.cache)[:12]}/*/{store.RESULT}")):
        data = store.read_input(place, limit=store.run_size_limit(unit.cache), root=runs)
        record = json.loads(store.decode_text(place, data))
        key = record.get("key") if isinstance(record, dict) else None
        if not isinstance(key, dict) or not isinstance(key.get("algorithm"), str):
            raise ValueError(f"{place}: key: expected the run's key with its algorithm")
        questions = np.asarray(record.get("questions"), dtype=np.int64)
        if not np.array_equal(questions, test):
            raise ValueError(f"{place}: questions: expected the fold's {test.size} test questions in order")
        algorithm, seed = key["algorithm"], key.get("seed")
        seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else -1
        found[(algorithm, seed)] = _answers(place, "answers", record, unit, questions)
        ablations = record.get("info", {}).get(ABLATIONS, {})
        for ablation, answers in ablations.items() if isinstance(ablations, dict) else ():
            found[(ablation_name(algorithm, str(ablation)), seed)] = _answers(
                place, f"info.{ABLATIONS}.{ablation}", answers, unit, questions
            )
    return found


def positions(
    folder: Path,
    cache_name: str,
    fold_seed: int,
    alpha: float,
    mean_vote: bool = False,
    *,
    plan: protocols.GeneratedPlan | None = None,
    folds: int = 4,
    per_seed: bool = False,
) -> dict[str, np.ndarray]:
    """Per algorithm, (Q, 3) rows [position, team size, reward] of every generated test question it answered over
    folds and seeds (a rule run once for every seed: once), the position of a question in its task from 1. With
    ``mean_vote``, each learner's teams also answered by their members' mean vote, the rules' fuser
    (``NAME(mean vote)``): what its fusion agent adds over that vote on the same teams. ``plan`` and ``folds``: the
    benchmark's (default: the protocol's plan, 4 folds). ``per_seed``: each seed of an algorithm run per seed on its
    own, ``NAME (seed S)`` (a rule run once for every seed keeps its name)."""
    cache = resolve_cache(cache_name)
    plan = protocols.GeneratedPlan() if plan is None else plan
    units, _ = protocols.generated_units(cache, plan, k=folds, seed=fold_seed)
    reward = RewardSettings(alpha=alpha)
    rows: dict[str, list[np.ndarray]] = {}
    for unit in units:
        test = unit.cache.select("test")
        generated = test[unit.parts() == 0]
        tasks = np.asarray(unit.cache.tasks)[generated]
        first = {task: index for index, task in reversed(list(enumerate(tasks)))}
        position = np.arange(generated.size) - np.array([first[task] for task in tasks]) + 1
        records = _records(folder, unit)
        if not records:
            raise ValueError(f"{folder}: no stored run of {unit.label}: is it a --protocol generated folder of "
                             f"{cache_name} (fold seed {fold_seed})?")  # fmt: skip
        for (algorithm, seed), record in sorted(records.items()):
            name = f"{algorithm} (seed {seed})" if per_seed and seed >= 0 else algorithm
            order = np.searchsorted(record["questions"], generated)
            predictions, teams = record["predictions"][order], record["teams"][order]
            correct = predictions == np.asarray(unit.cache.labels)[generated]
            size = teams.sum(axis=1)
            paid = reward.rewards(correct, size / unit.cache.n_models)
            rows.setdefault(name, []).append(np.column_stack([position, size, paid]))
            if mean_vote and algorithm in algorithms.ALGORITHMS:
                voted = vote(unit.cache.probs, teams.astype(bool), valid_choices(unit.cache, generated), rows=generated)
                paid = reward.rewards(voted == np.asarray(unit.cache.labels)[generated], size / unit.cache.n_models)
                rows.setdefault(f"{name}({MEAN_VOTE})", []).append(np.column_stack([position, size, paid]))
    return {name: np.concatenate(parts) for name, parts in rows.items()}


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the benchmark's folder (--protocol generated)")
    parser.add_argument("--cache", default="bbh5", help="the cache the benchmark ran on (default: bbh5)")
    parser.add_argument("--fold-seed", type=int, default=0, help="the benchmark's --fold-seed (default: 0)")
    parser.add_argument("--alpha", type=float, default=1.0, help="the reward's size penalty (default: 1.0)")
    parser.add_argument("--questions", type=int, default=30, help="the first questions shown (default: 30)")
    parser.add_argument("--figure", type=Path, help="a PNG of team size and reward against the position")
    parser.add_argument("--algorithms", nargs="+", metavar="NAME", help="the algorithms shown (default: every one)")
    voted = f"add each learner's teams answered by their members' mean vote, 'NAME({MEAN_VOTE})'"
    parser.add_argument("--mean-vote", action="store_true", help=voted)
    parser.add_argument("--per-seed", action="store_true", help="each seed of a learner (and of a rule run per seed) "
                        "in a column of its own, 'NAME (seed S)'")  # fmt: skip
    args = parser.parse_args(argv)
    if not 10 < args.questions <= 150:
        parser.error(f"--questions must be in 11..150, got {args.questions}")
    if args.figure is not None:
        check_output(args.figure, [])
    found = positions(args.out, args.cache, args.fold_seed, args.alpha, args.mean_vote, per_seed=args.per_seed)
    names = list(found) if args.algorithms is None else args.algorithms
    missing = [name for name in names if name not in found]
    if missing:
        parser.error(f"--algorithms: no run of {missing[0]!r} in {args.out} (found: {', '.join(found)})")
    buckets = [(f"{p}", lambda q, p=p: q == p) for p in SHOWN]
    buckets.append((f"{SHOWN[-1] + 1}-{args.questions}", lambda q: (q > SHOWN[-1]) & (q <= args.questions)))
    buckets.append((f"> {args.questions}", lambda q: q > args.questions))
    buckets.append(("all", lambda q: q > 0))
    print("mean team size / mean reward per question by a question's position in its generated test task "
          "(every fold; every seed, or once for a rule that draws nothing)")  # fmt: skip
    print("| position | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for label, where in buckets:
        cells = []
        for name in names:
            chosen = found[name][where(found[name][:, 0])]
            cells.append(f"{chosen[:, 1].mean():.2f} / {chosen[:, 2].mean():+.3f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    if args.figure is not None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print(f"{PROG}: matplotlib is not installed: no figure (pip install -e '.[plot]')", file=sys.stderr)
            return 0
        shown = np.arange(1, args.questions + 1)
        figure, axes = plt.subplots(1, 2, figsize=(11, 4))
        for name in names:
            means = np.array([found[name][found[name][:, 0] == p, 1:].mean(axis=0) for p in shown])
            style = "-" if name.startswith(("mappo", "ippo")) else "--"
            axes[0].plot(shown, means[:, 0], style, label=name)
            axes[1].plot(shown, means[:, 1], style, label=name)
        axes[0].set(xlabel="question of the task", ylabel="models in the team", title="team size")
        axes[1].set(xlabel="question of the task", ylabel="reward per question", title="reward")
        axes[1].legend(fontsize=7, ncol=2)
        figure.tight_layout()
        save_figure(figure, args.figure, dpi=110)
        print(f"wrote {args.figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
