"""The planted-structure test: MAPPO finds the team that ``ensemble_env.synthetic.planted_cache`` plants.

On ``"complementary"`` (two mediocre models with complementary errors, four redundant confident copies) it
must select models 0 and 1, drop the copies, and beat the best single model; on ``"dominant"`` (one strong
model, five weak correlated ones) it must learn a team of one, the strong model.

The size penalty is paid on every step here (``size_penalty_mode="always"``, a per-question cost). Under
the paper's default ("on_error") a fusion agent that learns to ignore a redundant member loses nothing by
keeping it once the team is almost always right (errors are ~0% and 5% on these pools), so which superset
of the planted team it keeps is arbitrary; with a cost per question the planted team is the unique optimum.
Everything else is the default configuration (3 to 9 CPU s per pool and start), whose decider starts from the
train outcomes of every team (the offline start); each test also runs with the decider learning from its
uniform prior alone (``decider_start="prior"``, no KL penalty), so that PPO itself must find the team.
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

#: 60 passes (issue 47: 25 CPU s for the four tests instead of 54 at 160): at 60, 80 and 160 every run selects the
#: planted team on 99.8% of the test questions and each of the others on 0.2%, with the test accuracy from the prior
#: 1.000 ("complementary") and 0.952 ("dominant") at each, from the offline start 0.898 / 0.902 / 1.000 and 0.950 (the
#: best single models: 0.698 and 0.952); at 40 the offline start's accuracy on "dominant" is 0.865, under the bound
CONFIG = {"passes": 60, "env": {"size_penalty_mode": "always"}}
#: the decider's starts: the default (offline, from the train outcomes) and learning from the uniform prior alone
STARTS = pytest.mark.parametrize(
    "start",
    # from the prior, PPO needs the gradient steps of the rollouts and epochs the defaults had before issue 47 (64 x
    # 64, 5 x 8; the partial-feedback learner keeps them too): with the new 2 x 4 no trained checkpoint passes the
    # safe rule within 160 passes and the start, uniform over the teams, is deployed
    [
        {},
        {
            "decider_start": "prior",
            "decider_kl_coef": 0.0,
            "num_envs": 64,
            "num_steps": 64,
            "update_epochs": 5,
            "num_minibatches": 8,
        },
    ],
    ids=["offline start", "from the prior"],
)


def _train_and_evaluate(kind: str, out: Path, start: dict[str, Any]) -> tuple[dict[str, Any], float]:
    cache = planted_cache(kind)
    train(config_from_dict({**CONFIG, **start}), cache, out, progress=False)
    summary = evaluate_run(out, cache, split="test").summary(cache)
    best = baselines.best_single(cache, cache.select("train"), cache.select("test")).accuracy
    return summary, best


@pytest.mark.slow
@STARTS
def test_mappo_picks_the_complementary_pair(tmp_path: Path, start: dict[str, Any]) -> None:
    summary, best_single = _train_and_evaluate("complementary", tmp_path, start)
    selection = summary["selection_frequency"]
    assert isinstance(selection, dict)
    assert selection["complement_a"] > 0.9 and selection["complement_b"] > 0.9, selection
    assert all(selection[f"copy_{i}"] < 0.1 for i in range(4)), selection
    assert summary["accuracy"] > best_single + 0.1, (summary["accuracy"], best_single)


@pytest.mark.slow
@STARTS
def test_mappo_learns_a_team_of_one_when_one_model_dominates(tmp_path: Path, start: dict[str, Any]) -> None:
    summary, best_single = _train_and_evaluate("dominant", tmp_path, start)
    selection = summary["selection_frequency"]
    assert isinstance(selection, dict)
    assert summary["mean_team_size"] < 1.1, summary["mean_team_size"]
    assert selection["strong"] > 0.95, selection
    assert summary["accuracy"] >= best_single - 0.01, (summary["accuracy"], best_single)
