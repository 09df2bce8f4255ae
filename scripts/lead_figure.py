"""The README's lead figure from a benchmark's results.json: the learners beside the hand rules, with intervals.

One row per algorithm of one cache of ``ensemble-env benchmark``'s ``results.json``, its mean reward per question as a
dot and its 95% interval (over seeds and questions, as results.json holds it) as a bar, best at the top. The
learners (``--learners``) are drawn in orange, the rules they are compared with in blue, and the references (entries
results.json marks with ``reference``: they read what the protocol does not give, e.g. follow-the-leader on full
feedback, or the test labels) in grey under a line, so that a reader sees at once where the learner stands among
rules that play the same game. Each row is labelled with its mean and interval and, on the right, its models per
question.

    python scripts/lead_figure.py OUT/results.json -o docs/img/lead_partial_feedback.png \\
        --title "Tasks never seen, partial feedback (EnsembleUnseen-v2)" --omit mean_probability_vote

Needs matplotlib (the ``plot`` extra). Prints the path it wrote; a results.json it cannot read ends in one line,
``lead_figure.py: error: ...`` (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from ensemble_env.errors import command

#: the learners of the reference package (ensemble_mappo's registry), drawn as the learners by default
LEARNERS = ("mappo", "ippo", "rlae_ppo", "rlae_mappo")
#: colours: learners, rules, references
COLOURS = {"learner": "#d95f02", "rule": "#1f5fa8", "reference": "#8c8c8c"}


class FigureError(ValueError):
    """A results.json this script cannot draw (named in one line)."""


def rows(
    results: dict[str, Any], cache: str | None, metric: str, learners: tuple[str, ...] = LEARNERS
) -> tuple[str, list[dict[str, Any]]]:
    """The cache drawn and one row per algorithm: name, kind (learner, rule, reference), mean, low, high, team size."""
    caches = results.get("caches")
    if not isinstance(caches, dict) or not caches:
        raise FigureError("no 'caches' object: not a results.json of ensemble-env benchmark")
    if cache is None:
        cache = next(iter(caches))
    if cache not in caches:
        raise FigureError(f"no cache {cache!r}; it holds {', '.join(map(repr, caches))}")
    drawn = []
    for name, entry in caches[cache].items():
        try:
            interval = entry["aggregate"][metric]
            mean, low, high = (float(interval[key]) for key in ("mean", "low", "high"))
        except (KeyError, TypeError, ValueError):
            raise FigureError(f"{cache}/{name}: no aggregate.{metric} with mean, low and high") from None
        team = entry.get("aggregate", {}).get("team_size", {}).get("mean")
        reference = entry.get("reference") or (entry.get("uses_test_labels") and "test labels")
        kind = "reference" if reference else "learner" if name in learners else "rule"
        drawn.append({"name": name, "kind": kind, "mean": mean, "low": low, "high": high, "team": team,
                      "reference": reference})  # fmt: skip
    return cache, drawn


def draw(
    drawn: list[dict[str, Any]], path: Path, title: str, metric: str, note: str = ""
) -> Path:  # pragma: no cover - drawing
    """Draw the rows (learners and rules by mean, best at the top; references under a line) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ensemble_env import files

    playing = sorted((row for row in drawn if row["kind"] != "reference"), key=lambda row: -row["mean"])
    references = sorted((row for row in drawn if row["kind"] == "reference"), key=lambda row: -row["mean"])
    ordered = playing + references
    height = 1.0 + 0.42 * len(ordered) + (0.3 if references else 0.0)
    figure, axes = plt.subplots(figsize=(9.0, height))
    positions = []
    y = 0.0
    for index in range(len(ordered)):
        if references and index == len(playing):
            y += 0.5
        positions.append(y)
        y += 1.0
    low = min(row["low"] for row in ordered)
    high = max(row["high"] for row in ordered)
    span = high - low or 1.0
    for row, at in zip(ordered, positions, strict=True):
        colour = COLOURS[row["kind"]]
        learner = row["kind"] == "learner"
        axes.plot([row["low"], row["high"]], [at, at], color=colour, linewidth=3.0 if learner else 2.0,
                  solid_capstyle="round", alpha=0.9)  # fmt: skip
        axes.plot(row["mean"], at, "o", color=colour if row["kind"] != "reference" else "white",
                  markeredgecolor=colour, markersize=9 if learner else 7, markeredgewidth=1.8, zorder=3)  # fmt: skip
        team = f",  {row['team']:.2f} models" if isinstance(row["team"], int | float) else ""
        axes.text(row["high"] + 0.015 * span, at, f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]{team}",
                  va="center", fontsize=8.5, color="#333333")  # fmt: skip
    labels = []
    for row in ordered:
        label = row["name"]
        if row["kind"] == "reference":
            label += f"  (reference: {row['reference']})" if isinstance(row["reference"], str) else "  (reference)"
        labels.append(label)
    axes.set_yticks(positions, labels)
    for tick, row in zip(axes.get_yticklabels(), ordered, strict=True):
        tick.set_color(COLOURS[row["kind"]] if row["kind"] != "rule" else "#222222")
        if row["kind"] == "learner":
            tick.set_fontweight("bold")
    if references:
        axes.axhline((positions[len(playing) - 1] + positions[len(playing)]) / 2, color="#bbbbbb", linewidth=0.8,
                     linestyle="--")  # fmt: skip
    axes.invert_yaxis()
    axes.set_xlim(low - 0.05 * span, high + 0.8 * span)
    words = {"reward": "reward per question", "accuracy": "accuracy"}.get(metric, metric)
    axes.set_xlabel(f"{words} (higher is better): mean, 95% interval over seeds and questions")
    axes.grid(axis="x", color="#e6e6e6")
    axes.set_axisbelow(True)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    axes.tick_params(axis="y", length=0)
    axes.set_title(title, loc="left", fontsize=11, fontweight="bold", pad=24)
    kinds = [kind for kind in ("learner", "rule", "reference") if any(row["kind"] == kind for row in ordered)]
    words_of = {"learner": "learners", "rule": "rules fixed in advance", "reference": "references (not the same game)"}
    handles = [
        matplotlib.lines.Line2D([], [], color=COLOURS[kind], marker="o", linewidth=2,
                                markerfacecolor="white" if kind == "reference" else COLOURS[kind])
        for kind in kinds
    ]  # fmt: skip
    axes.legend(
        handles,
        [words_of[kind] for kind in kinds],
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncol=3,
        fontsize=8.5,
        frameon=False,
        borderaxespad=0.2,
    )
    lines = textwrap.wrap(note, 140) if note else []
    if lines:
        figure.text(0.01, 0.005, "\n".join(lines), fontsize=8, color="#555555", ha="left", va="bottom")
    figure.tight_layout(rect=(0, 0.03 * len(lines), 1, 1))
    files.save_figure(figure, path, dpi=130, bbox_inches="tight")
    plt.close(figure)
    return path


@command("lead_figure.py")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lead_figure.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results.json of ensemble-env benchmark")
    parser.add_argument("-o", "--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--cache", help="the cache of results.json to draw (default: its first)")
    parser.add_argument("--metric", default="reward", choices=("reward", "accuracy"), help="default: reward")
    parser.add_argument("--title", default="", help="the figure's title (default: the cache and the metric)")
    parser.add_argument("--note", default="", help="a line under the figure (the protocol, the seeds)")
    parser.add_argument("--omit", default="", help="comma-separated names left out of the axis (named under it)")
    parser.add_argument("--learners", default=",".join(LEARNERS),
                        help=f"comma-separated names drawn as learners (default: {','.join(LEARNERS)})")  # fmt: skip
    args = parser.parse_args(argv)
    learners = tuple(name for name in args.learners.split(",") if name)
    try:
        text = args.results.read_text(encoding="utf-8")
        results = json.loads(text)
        if not isinstance(results, dict):
            raise FigureError("expected a JSON object")
        cache, drawn = rows(results, args.cache, args.metric, learners)
    except (OSError, ValueError) as error:
        print(f"lead_figure.py: error: {args.results}: {error}", file=sys.stderr)
        return 2
    omit = {name for name in args.omit.split(",") if name}
    unknown = sorted(omit - {row["name"] for row in drawn})
    if unknown:
        print(f"lead_figure.py: error: --omit {', '.join(unknown)}: not in {cache} of {args.results}", file=sys.stderr)
        return 2
    left_out = [f"{row['name']} ({row['mean']:+.3f})" for row in drawn if row["name"] in omit]
    note = "; ".join(filter(None, [args.note, f"off the scale: {', '.join(left_out)}" if left_out else ""]))
    title = args.title or f"{cache}: {args.metric} per question, the learners beside the rules"
    draw([row for row in drawn if row["name"] not in omit], args.out, title, args.metric, note)
    print(f"figure written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
