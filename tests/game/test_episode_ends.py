"""The decider sees the question it routes, and episodes end as they should (ensemble_v1).

- The decider's question extras (task one-hot, features) at step t describe q_{t+1}, the question its committed
  team answers at the next step; when the stream has no next question they are zeros.
- An exhausted stream terminates; an ``episode_length`` cut of a longer stream truncates, and the final
  observation shows the stream's real next question (its probabilities under the committed team, its mask).
Each holds in the PettingZoo parallel view, the AEC view and ``vector_env`` (with auto-reset).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.synthetic import make_cache

EXTRAS = {"decider_extras": ("task", "features"), "split": "train"}


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    base = make_cache(n_models=4, n_questions=120, n_tasks=3, n_choices=(2, 3, 5), seed=5)
    features = np.random.default_rng(0).normal(size=(base.n_questions, 3)).astype(np.float32)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.init}
    return LogitCache(**{**fields, "features": features, "feature_names": ("f0", "f1", "f2"), "feature_kind": "test"})


def _describes(cache: LogitCache, layout, decider_obs: np.ndarray, question: int | None) -> None:
    """The decider's extras describe ``question`` (None: zeros)."""
    task = decider_obs[layout.decider["task"]]
    features = decider_obs[layout.decider["features"]]
    if question is None:
        np.testing.assert_array_equal(task, 0)
        np.testing.assert_array_equal(features, 0)
    else:
        np.testing.assert_array_equal(task, np.eye(cache.n_tasks)[cache.tasks[question]])
        np.testing.assert_array_equal(features, cache.features[question])


def _shows(cache: LogitCache, layout, fusion_obs: np.ndarray, question: int, team: np.ndarray) -> None:
    """The fusion observation shows ``question`` through ``team``."""
    probs = fusion_obs[layout.fusion["probs"]].reshape(cache.n_models, cache.max_choices)
    np.testing.assert_array_equal(probs, np.where(team[:, None], cache.probs[question], 0))
    mask = fusion_obs[layout.fusion["action_mask"]]
    np.testing.assert_array_equal(mask, np.arange(cache.max_choices) < cache.n_choices[question])


def _stream_next(venv, question: int) -> int | None:
    """The question after ``question`` in the (sequential) stream of the split, or None at its end."""
    position = int(np.flatnonzero(venv.questions == question)[0])
    return int(venv.questions[position + 1]) if position + 1 < venv.questions.size else None


def _random_team(rng: np.random.Generator, n: int) -> np.ndarray:
    team = rng.integers(0, 2, n).astype(np.int8)
    team[rng.integers(n)] = 1
    return team


@pytest.mark.parametrize("episode_length", [None, 15])
def test_parallel_view_lookahead_and_episode_end(cache: LogitCache, episode_length: int | None) -> None:
    env = ensemble_env.parallel_env(cache, episode_length=episode_length, **EXTRAS)
    layout = env.engine.layout
    rng = np.random.default_rng(0)
    for seed in range(4):
        obs, infos = env.reset(seed=seed)
        seen = [obs["decider"]]
        answered = []
        while env.agents:
            team = _random_team(rng, cache.n_models)
            obs, _, terminations, truncations, infos = env.step({"decider": team, "fusion": int(rng.integers(3))})
            answered.append(int(infos["fusion"]["question"]))
            seen.append(obs["decider"])
        for t in range(len(answered) - 1):  # the decider at step t saw q_{t+1}, answered at step t + 1
            _describes(cache, layout, seen[t], answered[t + 1])
        following = _stream_next(env.engine, answered[-1])
        # the episode's questions are consecutive in the stream
        assert answered == [
            int(q) for q in env.engine.questions[np.searchsorted(env.engine.questions, answered[0]) :][: len(answered)]
        ]
        if following is None:  # the stream is exhausted: terminated, no next question anywhere
            assert terminations == {"decider": True, "fusion": True}
            assert truncations == {"decider": False, "fusion": False}
            _describes(cache, layout, obs["decider"], None)
        else:  # cut by episode_length: truncated, the final observation shows the real next question
            assert episode_length is not None
            assert truncations == {"decider": True, "fusion": True}
            assert terminations == {"decider": False, "fusion": False}
            _shows(cache, layout, obs["fusion"], following, team.astype(bool))
            _describes(cache, layout, obs["decider"], _stream_next(env.engine, following))
        if episode_length is None:
            assert following is None and len(answered) == env.engine.questions.size


def test_aec_view_lookahead_and_termination(cache: LogitCache) -> None:
    aec = ensemble_env.env(cache, **EXTRAS)
    aec.reset(seed=1)
    rng = np.random.default_rng(1)
    seen_decider: list[np.ndarray] = []
    answered: list[int] = []
    ended = {}
    for agent in aec.agent_iter():
        observation, _, termination, truncation, _ = aec.last()
        if termination or truncation:
            ended[agent] = (termination, truncation)
            aec.step(None)
            continue
        if agent == "decider":
            seen_decider.append(observation.copy())
            aec.step(_random_team(rng, cache.n_models))
        else:
            aec.step(int(rng.integers(3)))
            answered.append(int(aec.infos["fusion"]["question"]))
    assert ended == {"decider": (True, False), "fusion": (True, False)}  # the whole stream: terminated
    engine = ensemble_env.parallel_env(cache, **EXTRAS).engine
    layout = engine.layout
    assert len(answered) == engine.questions.size
    for t in range(len(answered) - 1):
        _describes(cache, layout, seen_decider[t], answered[t + 1])  # the decider at t sees q_{t+1}


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_vector_env_lookahead_and_final_observations(cache: LogitCache, order: str) -> None:
    length = 12
    venv = ensemble_env.vector_env(3, cache, episode_length=length, order=order, **EXTRAS)
    layout = venv.layout
    obs, _ = venv.reset(seed=2)
    _check_current(venv, cache, obs)
    rng = np.random.default_rng(2)
    ends = 0
    for _ in range(4 * length):
        teams = np.stack([_random_team(rng, cache.n_models) for _ in range(3)])
        obs, _, terminations, truncations, infos = venv.step({"decider": teams, "fusion": rng.integers(0, 3, 3)})
        _check_current(venv, cache, obs)  # auto-reset copies included: their new episode's first observation
        finished = terminations["fusion"] | truncations["fusion"]
        assert not (terminations["fusion"] & truncations["fusion"]).any()
        for env in np.flatnonzero(finished):
            ends += 1
            final = infos["final_obs"]
            np.testing.assert_array_equal(
                infos["final_state"][env], np.concatenate([final["decider"][env], final["fusion"][env]])
            )
            answered = int(infos["final_info"]["fusion"]["question"][env])
            if order == "sequential":
                following = _stream_next(venv, answered)
                assert bool(terminations["fusion"][env]) == (following is None)
                if following is not None:
                    _shows(cache, layout, final["fusion"][env], following, teams[env].astype(bool))
                    _describes(cache, layout, final["decider"][env], _stream_next(venv, following))
            else:  # 12 of the 80 train questions: always cut; the final observation shows a real question
                assert truncations["fusion"][env]
                shown = final["fusion"][env][layout.fusion["action_mask"]].sum()
                assert shown in set(cache.n_choices.tolist())
    assert ends >= 9


def _check_current(venv, cache: LogitCache, obs) -> None:
    """Every copy's fusion observation shows the question it answers next; its decider's, the one after."""
    layout = venv.layout
    for env in range(venv.num_envs):
        episode = venv.episode_questions(env)
        step = int(venv.info_values(env)["step"])
        _shows(cache, layout, obs["fusion"][env], int(episode[step]), venv.team[env])
        if step + 1 < episode.size:
            _describes(cache, layout, obs["decider"][env], int(episode[step + 1]))
