"""The library adapters take the registered scenarios (``env_id``): the tasks never seen (``EnsembleUnseen-v1``,
``-v2``) and the generated tasks (``EnsembleGen-v0``). Each adapter's factory builds the id's game (its feedback, one
task per episode, the deck's tasks), plays it, and refuses a keyword that contradicts the id. Each test skips without
its library (``.ci/adapters.sh`` runs this file in every library's environment).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ensemble_env import GEN_ENV_ID, UNSEEN_ENV_ID, UNSEEN_V2_ENV_ID

#: each scenario, its keywords (small: toy8's tasks, a deck of 4 generated tasks) and the feedback it plays with
SCENARIOS: list[tuple[str, dict[str, Any], str]] = [
    (UNSEEN_ENV_ID, {"cache": "toy8", "split": "test"}, "all"),
    (UNSEEN_V2_ENV_ID, {"cache": "toy8", "split": "test"}, "team"),
    (GEN_ENV_ID, {"deck_size": 4, "questions": (20, 30)}, "team"),
    (GEN_ENV_ID, {"deck_size": 4, "questions": (20, 30), "feedback": "all", "first": 10**9}, "all"),
]
IDS = ["unseen-v1", "unseen-v2", "gen-v0", "gen-v0-all"]


def check_game(engine: Any, env_id: str, keywords: dict[str, Any], feedback: str) -> None:
    """The engine plays the id's game: one task per episode, no task one-hot, the feedback, the generated deck."""
    config = engine.config
    assert config.episodes == "task" and config.feedback == feedback
    assert "task" not in engine.layout.decider and "task_record" in engine.layout.decider
    if env_id == GEN_ENV_ID:
        first = keywords.get("first", 0)
        assert engine.cache.task_names == tuple(f"gen-{i:06d}" for i in range(first, first + 4))
        assert config.split == "all"


@pytest.mark.parametrize(("env_id", "keywords", "feedback"), SCENARIOS, ids=IDS)
def test_sb3_takes_the_scenarios(env_id: str, keywords: dict[str, Any], feedback: str) -> None:
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("supersuit")
    from ensemble_env.adapters.sb3 import sb3_env

    for train in ("decider", "fusion"):
        venv = sb3_env(train, num_envs=2, seed=0, env_id=env_id, **keywords)
        copies = [copy.parallel for copy in venv.venv.envs]
        check_game(copies[0].engine, env_id, keywords, feedback)
        if env_id == GEN_ENV_ID:
            assert copies[0].cache is copies[1].cache  # the copies share one deck
        venv.reset()
        for _ in range(40):  # across the end of a task (20-30 questions, or toy8's test tasks)
            obs, _, _, _ = venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
            assert all(venv.observation_space.contains(row) for row in obs)
    shared = sb3_env("shared", num_envs=1, seed=0, env_id=env_id, **keywords)
    assert shared.reset().shape[0] == 2  # the decider's row and the fusion agent's
    with pytest.raises(ValueError, match="train='weights' is RLAE's game"):
        sb3_env("weights", env_id=env_id, **keywords)


def test_sb3_refuses_a_keyword_contradicting_the_id() -> None:
    pytest.importorskip("stable_baselines3")
    from ensemble_env.adapters.sb3 import sb3_env

    with pytest.raises(ValueError, match="EnsembleUnseen-v2 is the game with version=2: a keyword cannot change it"):
        sb3_env("decider", env_id=UNSEEN_V2_ENV_ID, cache="toy8", version=1)
    with pytest.raises(ValueError, match="EnsembleGen-v0 plays every question of its deck's generated tasks: split"):
        sb3_env("decider", env_id=GEN_ENV_ID, deck_size=4, split="train")
    with pytest.raises(ValueError, match="env_id='ensemble_env/Nothing-v0' is not a registered id"):
        sb3_env("decider", env_id="ensemble_env/Nothing-v0")


@pytest.mark.parametrize(("env_id", "keywords", "feedback"), SCENARIOS, ids=IDS)
def test_rllib_takes_the_scenarios(env_id: str, keywords: dict[str, Any], feedback: str) -> None:
    pytest.importorskip("ray.rllib")
    from ensemble_env.adapters.rllib import ppo_config, rllib_env

    env = rllib_env(env_id=env_id, **keywords)
    check_game(env.engine, env_id, keywords, feedback)
    obs, _ = env.reset(seed=0)
    for _ in range(40):
        actions = {agent: env.action_spaces[agent].sample() for agent in obs}
        obs, _, terminateds, _, _ = env.step(actions)
        if terminateds["__all__"]:
            obs, _ = env.reset()
    config = ppo_config({"env_id": env_id, **keywords}, num_env_runners=0, seed=0)
    assert config.env_config["env_id"] == env_id
    with pytest.raises(ValueError, match="is the game with version=2"):
        rllib_env(env_id=UNSEEN_V2_ENV_ID, cache="toy8", version=1)


@pytest.mark.parametrize(("env_id", "keywords", "feedback"), SCENARIOS, ids=IDS)
def test_torchrl_takes_the_scenarios(env_id: str, keywords: dict[str, Any], feedback: str) -> None:
    pytest.importorskip("torchrl")
    from ensemble_env.adapters.torchrl import torchrl_env

    env = torchrl_env(seed=0, env_id=env_id, **keywords)
    check_game(env._env.engine, env_id, keywords, feedback)
    rollout = env.rollout(40, break_when_any_done=False)
    assert rollout["next", "fusion", "info", "accuracy"].shape == (40, 1)
    assert "state" in rollout.keys()
    with pytest.raises(ValueError, match="is the game with version=2"):
        torchrl_env(env_id=UNSEEN_V2_ENV_ID, cache="toy8", version=1)


@pytest.mark.parametrize(("env_id", "keywords", "feedback"), SCENARIOS, ids=IDS)
def test_benchmarl_takes_the_scenarios(env_id: str, keywords: dict[str, Any], feedback: str) -> None:
    pytest.importorskip("benchmarl")
    from ensemble_env.adapters.benchmarl import benchmarl_task

    cache = keywords.get("cache")
    options = {key: value for key, value in keywords.items() if key != "cache"}
    task = benchmarl_task(cache, env_id=env_id, **options)
    assert task.config["env_id"] == env_id
    env = task.get_env_fun(2, False, 0, "cpu")()
    for copy in env._envs if hasattr(env, "_envs") else ():
        check_game(copy._env.engine, env_id, keywords, feedback)
    rollout = env.rollout(30, break_when_any_done=False)
    assert rollout["next", "fusion", "reward"].shape[:2] == (2, 30)
    env.close()
    with pytest.raises(ValueError, match="is the game with version=2"):
        benchmarl_task("toy8", env_id=UNSEEN_V2_ENV_ID, version=1)
