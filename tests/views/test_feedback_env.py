"""The PettingZoo views under partial feedback: PettingZoo's API, parallel API and seed tests on ``Ensemble-v1`` with
``feedback="team"`` (``ensemble_env/EnsembleUnseen-v2``'s registration and tests are with v1's, in
tests/game/test_unseen.py), and the pictures, which show no output of a model outside the team."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, render_test, seed_test

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.synthetic import make_cache
from ensemble_env.views.render import _ABSENT, _RIGHT, _WRONG, STRIP_STEPS, FrameGeometry


@pytest.fixture(scope="module")
def synthetic() -> LogitCache:
    return make_cache(n_models=4, n_questions=300, n_tasks=3, n_choices=(2, 4, 3), seed=5)


def test_pettingzoo_api_tests_with_team_feedback(synthetic: LogitCache) -> None:
    options = {"feedback": "team", "window": 40, "decider_extras": ("model_accuracy",)}
    parallel_api_test(ensemble_env.parallel_env(synthetic, **options), num_cycles=300)
    api_test(ensemble_env.env(synthetic, **options), num_cycles=200)
    seed_test(lambda: ensemble_env.env(synthetic, order="shuffled", episode_length=60, **options), num_cycles=200)
    render_test(lambda render_mode=None: ensemble_env.env(synthetic, render_mode=render_mode, **options))


def test_the_picture_shows_no_output_outside_the_team(tiny_cache: LogitCache) -> None:
    """The tiny cache's q0 (m0 right, m1 right, m2 wrong) answered by {m0, m2}: m1's cell is grey under
    ``feedback="team"``, pale blue (right, not in the team) under ``"all"``."""
    geo = FrameGeometry.of(3)
    cells = {}
    for feedback in ("all", "team"):
        env = ensemble_env.parallel_env(
            tiny_cache, render_mode="rgb_array", split="all", initial_team=[0, 2], feedback=feedback
        )
        env.reset(seed=0)
        env.step({"decider": np.array([0, 1, 1]), "fusion": 0})
        image = env.render()
        x, y = geo.strip_cell(1, STRIP_STEPS - 1)
        member = geo.strip_cell(0, STRIP_STEPS - 1)
        cells[feedback] = (tuple(int(v) for v in image[y + 1, x + 1]), tuple(image[member[1] + 1, member[0] + 1]))
    assert cells["team"][0] == _ABSENT and cells["all"][0] not in (_ABSENT, _RIGHT, _WRONG)
    assert cells["team"][1] == cells["all"][1] == _RIGHT  # a member's cell is the same
