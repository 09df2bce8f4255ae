"""Issue 49 ("Reliability round 5"), class 3: a registered id's fixed options cannot be overridden by keywords.
``pettingzoo.make(..., "ensemble_env/EnsembleUnseen-v2", version=1)`` built the v1 game with full feedback; now
every id goes through one entry point (``ensemble_env._IdFactory``, its options in :data:`ensemble_env.ID_OPTIONS`)
that refuses a keyword contradicting the id, for both APIs, and each version of the unseen game fixes its feedback
(:data:`ensemble_env.game.config.UNSEEN_VERSIONS`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ensemble_env
from ensemble_env import ENV_ID, ID_OPTIONS, UNSEEN_ENV_ID, UNSEEN_V2_ENV_ID
from ensemble_env.game.config import unseen_game

pettingzoo = pytest.importorskip("pettingzoo")
pytest.importorskip("pettingzoo.env_registry")


def _make(api: str, env_id: str, **options: Any) -> Any:
    return pettingzoo.make(api, env_id, cache="toy8", **options)


def _feedback(env: Any) -> str:
    return env.unwrapped.engine.config.feedback


@pytest.mark.parametrize("api", ["parallel", "aec"])
@pytest.mark.parametrize(
    ("env_id", "options", "message"),
    [
        (UNSEEN_V2_ENV_ID, {"version": 1}, "ensemble_env/EnsembleUnseen-v2 is the game with version=2: a keyword"),
        (UNSEEN_V2_ENV_ID, {"version": True}, "got version=True"),
        (UNSEEN_V2_ENV_ID, {"version": 2.0}, "ensemble_env/EnsembleUnseen-v2 is the game with version=2"),
        (UNSEEN_V2_ENV_ID, {"version": np.int64(1)}, "ensemble_env/EnsembleUnseen-v2 is the game with version=2"),
        (
            UNSEEN_V2_ENV_ID,
            {"feedback": "all"},
            "EnsembleUnseen-v2 is the game with feedback='team', got feedback='all'",
        ),
        (UNSEEN_ENV_ID, {"version": 2}, "ensemble_env/EnsembleUnseen-v1 is the game with version=1: a keyword"),
        (UNSEEN_ENV_ID, {"feedback": "team"}, "EnsembleUnseen-v1 is the game with feedback='all', got feedback='team'"),
    ],
)
def test_a_keyword_contradicting_the_id_is_refused(
    api: str, env_id: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        _make(api, env_id, **options)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("api", ["parallel", "aec"])
def test_keywords_that_repeat_the_id_build_its_game(api: str) -> None:
    assert _feedback(_make(api, UNSEEN_V2_ENV_ID, version=2, feedback="team")) == "team"
    assert _feedback(_make(api, UNSEEN_V2_ENV_ID, version=np.int64(2))) == "team"
    assert _feedback(_make(api, UNSEEN_V2_ENV_ID)) == "team"
    assert _feedback(_make(api, UNSEEN_ENV_ID, version=1, feedback="all")) == "all"
    assert _feedback(_make(api, ENV_ID)) == "all"


def test_every_registered_id_has_its_fixed_options_and_the_direct_factories_agree() -> None:
    from pettingzoo.env_registry.registration import aec_registry, parallel_registry

    for env_id, fixed in ID_OPTIONS.items():
        for registry in (parallel_registry, aec_registry):
            assert registry[env_id].kwargs == fixed
    with pytest.raises(ValueError, match="EnsembleUnseen-v1 is the game with feedback='all'"):
        ensemble_env.unseen_parallel_env("toy8", feedback="team")
    assert "feedback" not in unseen_game(8)  # v1's game holds only what differs from the defaults (run keys unchanged)
