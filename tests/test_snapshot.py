"""Engine snapshots: ``get_state()`` / ``set_state()`` restore every copy exactly, through ``numpy.savez``."""

from __future__ import annotations

import io

import numpy as np
import pytest

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.game.actions import DECIDER_ENCODINGS, decider_space
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.synthetic import make_cache

WINDOW_METRICS = ("plurality_accuracy", "focal_diversity", "disagreement", "q_statistic", "generalized_diversity")


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=4, n_questions=200, n_tasks=2, n_choices=(3, 5), seed=3)


def _engine(cache, autoreset: bool, **options) -> EnsembleVectorEnv:
    return EnsembleVectorEnv(cache, EnvConfig.from_options(options), num_envs=3, autoreset=autoreset)


def _actions(venv: EnsembleVectorEnv, rng: np.random.Generator) -> dict[str, np.ndarray]:
    space = decider_space(venv.config.decider_action, venv.n_models)
    space.seed(int(rng.integers(2**31)))
    return {
        "decider": np.stack([space.sample() for _ in range(venv.num_envs)]),
        "fusion": rng.integers(0, venv.max_choices, size=venv.num_envs),
    }


def _play(venv: EnsembleVectorEnv, actions: list[dict[str, np.ndarray]]) -> list[tuple]:
    """What every step returns, flattened to arrays (observations, rewards, ends, infos with final_*)."""
    trace = []
    for action in actions:
        obs, rewards, terminations, truncations, infos = venv.step(action)
        flat = [obs["decider"].copy(), obs["fusion"].copy(), rewards["fusion"], terminations["fusion"]]
        flat += [truncations["fusion"], venv.state(), venv.team]
        flat += [np.asarray(value) for _, value in sorted(infos["fusion"].items())]
        if "final_obs" in infos:
            flat += [infos["final_obs"]["decider"], infos["final_obs"]["fusion"], infos["final_state"]]
        trace.append(tuple(flat))
    return trace


def _through_savez(snapshot: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    np.savez(buffer, **snapshot)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}


@pytest.mark.parametrize("encoding", sorted(DECIDER_ENCODINGS))
@pytest.mark.parametrize("autoreset", [True, False])
@pytest.mark.parametrize("order", ["shuffled", "sequential"])
def test_set_state_replays_bit_identically(cache, encoding: str, autoreset: bool, order: str) -> None:
    options = dict(
        decider_action=encoding, order=order, episode_length=7, metrics=WINDOW_METRICS, window=4, split="train"
    )
    venv = _engine(cache, autoreset, **options)
    venv.reset(seed=5)
    rng = np.random.default_rng(0)
    before = [_actions(venv, rng) for _ in range(4)]  # mid-episode
    _play(venv, before)
    snapshot = venv.get_state()
    # without autoreset an episode ends after 3 more steps; with it, the actions cross two episode boundaries
    after = [_actions(venv, rng) for _ in range(3 if not autoreset else 12)]
    expected = _play(venv, after)

    restored = _engine(cache, autoreset, **options)
    restored.reset(seed=99)  # a different state, overwritten by set_state
    restored.set_state(_through_savez(snapshot))
    np.testing.assert_array_equal(restored.state(), _state_at(cache, autoreset, options, before))
    got = _play(restored, after)
    for step_expected, step_got in zip(expected, got, strict=True):
        for a, b in zip(step_expected, step_got, strict=True):
            np.testing.assert_array_equal(a, b)
    # the generator moved on identically: the next seeded-less reset shuffles the same way
    if order == "shuffled":
        venv.reset()
        restored.reset()
        np.testing.assert_array_equal(venv.episode_questions(2), restored.episode_questions(2))


def _state_at(cache, autoreset, options, actions) -> np.ndarray:
    venv = _engine(cache, autoreset, **options)
    venv.reset(seed=5)
    _play(venv, actions)
    return venv.state()


def test_set_state_before_any_reset(cache) -> None:
    source = ensemble_env.vector_env(2, cache=cache, episode_length=5)
    source.reset(seed=1)
    source.step({"decider": np.ones((2, source.n_models), dtype=np.int8), "fusion": np.zeros(2, dtype=np.int64)})
    fresh = ensemble_env.vector_env(2, cache=cache, episode_length=5)
    fresh.set_state(source.get_state())
    np.testing.assert_array_equal(fresh.state(), source.state())


def test_snapshot_is_a_copy(cache) -> None:
    venv = ensemble_env.vector_env(2, cache=cache)
    venv.reset(seed=1)
    snapshot = venv.get_state()
    kept = {name: array.copy() for name, array in snapshot.items()}
    venv.step({"decider": np.ones((2, venv.n_models), dtype=np.int8), "fusion": np.zeros(2, dtype=np.int64)})
    for name, array in snapshot.items():
        np.testing.assert_array_equal(array, kept[name], err_msg=name)


def test_get_state_before_reset_is_an_error(cache) -> None:
    with pytest.raises(RuntimeError, match="before reset"):
        ensemble_env.vector_env(2, cache=cache).get_state()


def test_set_state_rejects_other_configurations(cache) -> None:
    venv = ensemble_env.vector_env(2, cache=cache, alpha=1.0)
    venv.reset(seed=0)
    snapshot = venv.get_state()
    with pytest.raises(ValueError, match="another configuration or cache"):
        ensemble_env.vector_env(2, cache=cache, alpha=0.5).set_state(snapshot)
    with pytest.raises(ValueError, match="another configuration or cache"):
        ensemble_env.vector_env(3, cache=cache, alpha=1.0).set_state(snapshot)
    with pytest.raises(ValueError, match="lacks rng"):
        venv.set_state({name: value for name, value in snapshot.items() if name != "rng"})
    damaged = dict(snapshot, counters=snapshot["counters"].astype(np.int32)[:1])
    with pytest.raises(ValueError, match=r"counters has shape \(1, "):
        venv.set_state(damaged)
