"""The planted-structure test: MAPPO finds the team that ``ensemble_env.synthetic.planted_cache`` plants.

On ``"complementary"`` (two mediocre models with complementary errors, four redundant confident copies) it
must select models 0 and 1, drop the copies, and beat the best single model; on ``"dominant"`` (one strong
model, five weak correlated ones) it must learn a team of one, the strong model.

The size penalty is paid on every step here (``size_penalty_mode="always"``, a per-question cost). Under
the paper's default ("on_error") a fusion agent that learns to ignore a redundant member loses nothing by
keeping it once the team is almost always right (errors are ~0% and 5% on these pools), so which superset
of the planted team it keeps is arbitrary; with a cost per question the planted team is the unique optimum.
Everything else is the default configuration (about a minute per pool on two cores).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from ensemble_env import baselines
from ensemble_env.synthetic import planted_cache
from ensemble_mappo.config import config_from_dict
from ensemble_mappo.evaluation import evaluate_run
from ensemble_mappo.training import train

CONFIG = {"passes": 60, "env": {"size_penalty_mode": "always"}}


def _train_and_evaluate(kind: str, out: Path) -> tuple[dict[str, Any], float]:
    cache = planted_cache(kind)
    train(config_from_dict(CONFIG), cache, out, progress=False)
    summary = evaluate_run(out, cache, split="test").summary(cache)
    best = baselines.best_single(cache, cache.select("train"), cache.select("test")).accuracy
    return summary, best


@pytest.mark.slow
def test_mappo_picks_the_complementary_pair(tmp_path: Path) -> None:
    summary, best_single = _train_and_evaluate("complementary", tmp_path)
    selection = summary["selection_frequency"]
    assert isinstance(selection, dict)
    assert selection["complement_a"] > 0.9 and selection["complement_b"] > 0.9, selection
    assert all(selection[f"copy_{i}"] < 0.1 for i in range(4)), selection
    assert summary["accuracy"] > best_single + 0.1, (summary["accuracy"], best_single)


@pytest.mark.slow
def test_mappo_learns_a_team_of_one_when_one_model_dominates(tmp_path: Path) -> None:
    summary, best_single = _train_and_evaluate("dominant", tmp_path)
    selection = summary["selection_frequency"]
    assert isinstance(selection, dict)
    assert summary["mean_team_size"] < 1.1, summary["mean_team_size"]
    assert selection["strong"] > 0.95, selection
    assert summary["accuracy"] >= best_single - 0.01, (summary["accuracy"], best_single)
