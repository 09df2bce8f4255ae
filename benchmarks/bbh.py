"""MAPPO on real data: 16 BIG-Bench-Hard tasks answered by five open LLMs, against every baseline.

    python benchmarks/bbh.py            # convert, train 3 seeds, evaluate, write the table and the plots
    python benchmarks/bbh.py --seeds 0 --passes 5 --no-write    # a quick look that writes nothing

1. Converts ``../shared/data/bbh-leaderboard`` (relative to the repository root; ``--data`` to change it)
   with ``ensemble_env.convert.from_lm_eval`` (per task, the first 80% of the questions by ``doc_id`` are
   train, the rest test) into a cache in ``--workdir`` (outside the repository: the data is never copied in).
2. Trains MAPPO with the default configuration, jointly on the 16 tasks (one policy; the task one-hot is in
   both observations by default), for each seed. Finished runs are reused, interrupted ones resumed.
3. Evaluates each run on the test split, frozen (the headline) and with the paper's online protocol
   (labelled ONLINE), and runs every baseline (fitted on train).
4. Writes the table (per task and macro, mean ± std over the seeds) into the ``## MAPPO`` section of
   ``benchmarks/README.md`` and the plots into ``docs/img/mappo_*.png``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from ensemble_mappo.checkpoint import CHECKPOINT_NAME, load_checkpoint
from ensemble_mappo.config import TrainConfig, config_from_dict, load_config
from ensemble_mappo.evaluation import baseline_summary, evaluate_run, save_evaluation
from ensemble_mappo.plots import plot_runs, read_progress
from ensemble_mappo.training import train
from reporting import mean_std, write_block

from ensemble_env import baselines
from ensemble_env.cache import LogitCache, load_cache, save_cache

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "bbh-leaderboard"
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "ensemble_env_bbh"
#: extra settings run by default: the joint mode with one option changed (an ablation)
DEFAULT_VARIANTS = ("gae_lambda=0.5",)
#: baseline columns of the table, in order (names of ``ensemble_env.baselines`` results)
BASELINES = (
    "best_single",
    "best_single(per_task)",
    "plurality_vote",
    "mean_probability_vote",
    "random_team(k=3)",
    "greedy_focal_team(k=3)",
    "stacking(per_task)",
    "oracle",
)


def convert(data: Path, workdir: Path) -> Path:
    """The BBH cache in ``workdir`` (converted on first use)."""
    from ensemble_env.convert import from_lm_eval

    path = workdir / "bbh.h5"
    if not path.exists():
        if not data.is_dir():
            raise SystemExit(f"BBH data not found at {data}: pass --data PATH (the bbh-leaderboard folder)")
        print(f"converting {data} -> {path}")
        save_cache(path, from_lm_eval([data]))
    return path


def train_seed(config: TrainConfig, cache: LogitCache, cache_path: Path, run_dir: Path) -> float:
    """Train (or finish, or reuse) one seed's run; returns its training time (``progress.csv``'s last row)."""
    checkpoint = run_dir / CHECKPOINT_NAME
    if checkpoint.exists():
        saved = load_checkpoint(checkpoint)
        if saved["config"] != config.to_dict():
            raise SystemExit(f"{run_dir} holds a run with another config: remove it or use another --workdir")
        if not saved["complete"]:
            print(f"resuming {run_dir}")
            train(config, cache, run_dir, cache_path=str(cache_path), resume=True)
    else:
        print(f"training seed {config.seed} -> {run_dir}")
        train(config, cache, run_dir, cache_path=str(cache_path))
    return float(read_progress(run_dir)["time/elapsed"][-1])


def _row(name: str, cells: list[str]) -> str:
    return "| " + " | ".join([name, *cells]) + " |"


def table(
    cache: LogitCache,
    learned: dict[str, list[dict[str, Any]]],
    baseline_runs: list[list[baselines.BaselineResult]],
) -> str:
    """Markdown: one row per task, then macro accuracy and mean team size; one column per method.

    ``learned`` maps a column name to the evaluation summaries of its seeds.
    """
    by_name = [{result.name: result for result in results} for results in baseline_runs]
    columns = [*learned, *BASELINES]
    tasks = list(next(iter(learned.values()))[0]["tasks"])
    lines = [_row("task", columns), "|" + "---|" * (len(columns) + 1)]

    def cells(summary_metric: Any, baseline_metric: Any, digits: int = 3) -> list[str]:
        return [mean_std([summary_metric(s) for s in runs], digits) for runs in learned.values()] + [
            mean_std([baseline_metric(run[name]) for run in by_name], digits) for name in BASELINES
        ]

    for task in tasks:
        lines.append(
            _row(
                task,
                cells(
                    lambda s, task=task: s["tasks"][task]["accuracy"],
                    lambda result, task=task: result.task_accuracy(cache)[task],
                ),
            )
        )
    macro = cells(lambda s: s["macro_accuracy"], lambda result: result.macro_accuracy(cache))
    lines.append(_row("**macro accuracy**", [f"**{cell}**" for cell in macro]))
    lines.append(_row("mean team size", cells(lambda s: s["mean_team_size"], lambda r: r.mean_team_size, 2)))
    return "\n".join(lines)


def verdict(mode: str, frozen: list[dict[str, Any]], reference: dict[str, float]) -> str:
    """Plain sentences: where MAPPO stands against the targets."""
    macro = np.array([s["macro_accuracy"] for s in frozen])
    team = np.array([s["mean_team_size"] for s in frozen])
    parts = [
        f"MAPPO ({mode}, frozen policy, test split) reaches a macro accuracy of {mean_std(macro)} over "
        f"{macro.size} seeds with {mean_std(team, 2)} models per question (of 5)."
    ]
    comparisons = []
    for name, label in (
        ("best_single(per_task)", "the best single model chosen on train for each task"),
        ("best_single", "the best single model chosen on train over all tasks"),
        ("plurality_vote", "the plurality vote of all five"),
        ("stacking(per_task)", "supervised stacking, the strong non-RL reference"),
    ):
        comparisons.append(f"{macro.mean() - reference[name]:+.3f} against {label} ({reference[name]:.3f})")
    parts.append("Difference in macro accuracy: " + "; ".join(comparisons) + ".")
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the bbh-leaderboard folder")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="cache and runs (outside the repo)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--modes", nargs="+", default=["joint", "two-stage"], choices=["joint", "two-stage"])
    parser.add_argument(
        "--variant",
        action="append",
        metavar="KEY=VALUE",
        help=f"an extra joint setting changing one option (repeatable; default {' '.join(DEFAULT_VARIANTS)})",
    )
    parser.add_argument("--config", type=Path, default=None, help="training options (default: the defaults)")
    parser.add_argument("--passes", type=float, default=None, help="override the budget (quick looks)")
    parser.add_argument("--update-every", type=int, default=64, help="online protocol: questions per update")
    parser.add_argument("--no-write", action="store_true", help="print only; leave README and docs/img alone")
    args = parser.parse_args()

    args.workdir.mkdir(parents=True, exist_ok=True)
    cache_path = convert(args.data, args.workdir)
    cache = load_cache(cache_path)
    base = load_config(args.config).to_dict() if args.config else TrainConfig().to_dict()
    if args.passes is not None:
        base["passes"] = args.passes
    tag = "default" if args.config is None and args.passes is None else "custom"

    settings = [(mode, {"mode": mode}) for mode in args.modes]
    for variant in args.variant if args.variant is not None else DEFAULT_VARIANTS:
        key, _, value = variant.partition("=")
        settings.append((f"joint, {key}={value}", {"mode": "joint", key: json.loads(value)}))
    run_dirs: dict[str, list[Path]] = {}
    learned: dict[str, list[dict[str, Any]]] = {}
    seconds: dict[str, list[float]] = {}
    for index, (label, overrides) in enumerate(settings):
        frozen, online = learned.setdefault(f"**MAPPO {label}**", []), []
        for seed in args.seeds:
            config = config_from_dict({**base, **overrides, "seed": seed})
            slug = label.replace(", ", "-").replace("=", "")
            run_dir = args.workdir / f"{slug}-{tag}-seed{seed}"
            seconds.setdefault(label, []).append(train_seed(config, cache, cache_path, run_dir))
            run_dirs.setdefault(label, []).append(run_dir)
            evaluation = evaluate_run(run_dir, cache, split="test")
            frozen.append(evaluation.summary(cache))
            save_evaluation(evaluation, frozen[-1])
            summary = frozen[-1]
            print(f"{label} seed {seed}: macro {summary['macro_accuracy']:.4f}, team {summary['mean_team_size']:.2f}")
            if index == 0:  # the paper's online protocol, for the headline setting
                online_run = evaluate_run(run_dir, cache, split="test", online=True, update_every=args.update_every)
                online.append(online_run.summary(cache))
                save_evaluation(online_run, online[-1])
        if online:
            learned[f"MAPPO {label} (ONLINE)"] = online

    baseline_runs = [baselines.run_all(cache, k=3, seed=seed) for seed in args.seeds]
    for results in baseline_runs:
        train_questions, test_questions = cache.select("train"), cache.select("test")
        results.insert(1, baselines.best_single(cache, train_questions, test_questions, per_task=True))
    reference = {name: value["macro_accuracy"] for name, value in baseline_summary(cache, baseline_runs[0]).items()}
    headline, overrides = settings[0]
    config = config_from_dict({**base, **overrides, "seed": args.seeds[0]})
    steps = load_checkpoint(run_dirs[headline][0])["global_step"]
    timing = "; ".join(f"{label}: {mean_std(values, 0)} s" for label, values in seconds.items())
    text = "\n".join(
        [
            "### BBH: 16 tasks, 5 open LLMs (test split)",
            "",
            f"Data: `{args.data.name}` (Open LLM Leaderboard v2 log-likelihoods; {cache.n_questions} questions, "
            f"{cache.select('train').size} train / {cache.select('test').size} test, split per task by `doc_id`). "
            f"One policy per run, trained on the 16 tasks together with the {tag} configuration "
            f"({steps:,} env steps = {config.passes:g} passes over the train stream, "
            f"lr {config.learning_rate:g}, clip {config.clip_coef:g}, gamma {config.gamma:g}, "
            f"lambda {config.gae_lambda:g}, {config.update_epochs} epochs x {config.num_minibatches} minibatches; "
            f"env options {json.dumps(config.env)}), seeds {args.seeds}. Settings: "
            f"{'; '.join(label for label, _ in settings)} (the first is the headline; a `key=value` setting "
            f"changes that one option of the {tag} configuration). "
            f"Training took {timing} per seed on this machine. Accuracies are mean ± std over the seeds (the "
            "baselines are deterministic except the random team, drawn with the same seeds). The MAPPO "
            "columns in bold are frozen policies acting by their mode, which learn nothing on the test "
            f"questions; MAPPO (ONLINE) is the paper's protocol (updates every {args.update_every} test "
            "questions from revealed labels), not a frozen policy's score.",
            "",
            verdict(headline, learned[f"**MAPPO {headline}**"], reference),
            "",
            table(cache, learned, baseline_runs),
            "",
            f"Plots of the {headline} runs (`ensemble-env plot` over the seeds):",
            "",
            "![accuracy vs team size](../docs/img/mappo_accuracy_vs_team_size.png)",
            "![learning curves](../docs/img/mappo_learning_curves.png)",
            "![selection](../docs/img/mappo_selection_frequency.png)",
            "![team size](../docs/img/mappo_team_size.png)",
            "",
            "Regenerate: `python benchmarks/bbh.py` (needs the `mappo` and `plot` extras).",
        ]
    )
    print(text)
    if not args.no_write:
        write_block(REPO / "benchmarks" / "README.md", "bbh", text)
        for path in plot_runs(run_dirs[headline], REPO / "docs" / "img", str(cache_path)):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
