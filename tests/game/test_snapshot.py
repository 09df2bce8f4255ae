"""Engine snapshots: ``get_state()`` / ``set_state()`` restore every copy exactly, through ``numpy.savez``."""

from __future__ import annotations

import numpy as np
import pytest
from testing.game import through_savez

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.game.actions import DECIDER_ENCODINGS, decider_space
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.records import Counter, Info
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
    restored.set_state(through_savez(snapshot))
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


# -- values (issue "Reliability, round 2", problem 2): a snapshot is checked against the configuration and cache --


def _played(cache, **options) -> EnsembleVectorEnv:
    options = {"episode_length": 9, "window": 4, "metrics": WINDOW_METRICS, **options}
    venv = _engine(cache, True, **options)
    venv.reset(seed=5)
    _play(venv, [_actions(venv, np.random.default_rng(step)) for step in range(6)])
    return venv


def _corrupted(snapshot: dict[str, np.ndarray], name: str, index: tuple, value) -> dict[str, np.ndarray]:
    damaged = {key: array.copy() for key, array in snapshot.items()}
    damaged[name][index] = value
    return damaged


# the crafted cases of the issue (each made the kernels read or write out of bounds) and the values it names
CRAFTED = {
    "START far past the stream": (
        "counters",
        (0, Counter.START),
        10**9,
        r"counters\[0, START\] = 1000000000 is outside",
    ),
    "POS negative": ("counters", (1, Counter.POS), -5, r"counters\[1, POS\] = -5 is outside"),
    "HEAD past the window": ("counters", (2, Counter.HEAD), 4, r"counters\[2, HEAD\] = 4 is not "),
    "COUNT above the window": ("counters", (0, Counter.COUNT), 99, r"counters\[0, COUNT\] = 99 is not "),
    "STREAM beyond the order": ("counters", (1, Counter.STREAM), 2**40, r"counters\[1, STREAM\] = 1099511627776"),
    "stream order out of the cache": ("order", (0, 3), 10**6, r"order\[0, 3\] = 1000000 is not question"),
    "negative stream order": ("order", (0, 0), -7, r"order\[0, 0\] = -7 is not question"),
    "window position out of the cache": ("window", (1, 2), 2**31 - 1, r"window\[1, 2\] = 2147483647 is not a question"),
    "team 255": ("team", (0, 1), 255, r"team\[0, 1\] = 255 is not 0 or 1"),
    "NaN observation": ("obs_fusion", (2, 0), np.nan, r"obs_fusion\[2, 0\] = nan is not finite"),
    "observation outside its space": ("obs_decider", (0, 0), 2.0, r"obs_decider\[0, 0\] = 2.0 is outside"),
    "reward outside the bounds": ("rewards", (0, 7), -2.5, r"rewards\[0, 7\] = -2.5 is outside the reward range"),
    "info not finite": ("last", (Info.REWARD, 1), np.inf, r"last\[REWARD, 1\] = inf is not finite"),
    "failure count off by one": ("fail", (2, 1), None, r"fail\[2, 1\] = \d+ is not \d+, the count"),
    "even PCG64 increment": ("rng", (3,), None, r"rng\[3\] = \d+ is even"),
    "has_uint32 not a flag": ("rng", (4,), 2, r"rng\[4\] = 2 is not 0 or 1"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_set_state_refuses_values_no_play_could_give(cache, case: str) -> None:
    venv = _played(cache, order="sequential")
    snapshot = venv.get_state()
    name, index, value, message = CRAFTED[case]
    if value is None:  # relative to the real value
        value = snapshot[name][index] + 1 if name == "fail" else snapshot[name][index] & ~np.uint64(1)
    target = _played(cache, order="sequential")
    before = target.get_state()
    with pytest.raises(ValueError, match="^set_state: " + message):
        target.set_state(_corrupted(snapshot, name, index, value))
    after = target.get_state()  # a refused snapshot changes nothing
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)


def test_set_state_refuses_a_shuffled_stream_that_repeats_a_question(cache) -> None:
    venv = _played(cache, order="shuffled")
    snapshot = venv.get_state()
    order = snapshot["order"]
    damaged = _corrupted(snapshot, "order", (1, order.shape[1] - 1), order[1, 0])
    with pytest.raises(ValueError, match=r"^set_state: order\[1\] holds question \d+ twice"):
        venv.set_state(damaged)
    foreign = np.setdiff1d(np.arange(cache.n_questions), venv.questions)[0]  # a test question
    with pytest.raises(ValueError, match=rf"^set_state: order\[0, 2\] = {foreign} is not one of the \d+ questions"):
        venv.set_state(_corrupted(snapshot, "order", (0, 2), foreign))


def test_set_state_refuses_a_window_inconsistent_with_the_stream(cache) -> None:
    venv = _played(cache)
    snapshot = venv.get_state()
    pos = int(snapshot["counters"][0, Counter.POS])
    slot = (pos - 1) % 4  # the question answered last
    other = int(venv.questions[(np.flatnonzero(venv.questions == snapshot["window"][0, slot])[0] + 1) % 10])
    with pytest.raises(ValueError, match=rf"^set_state: window\[0, {slot}\] = {other} is not question"):
        venv.set_state(_corrupted(snapshot, "window", (0, slot), other))


def test_set_state_refuses_observations_the_state_does_not_give(cache) -> None:
    venv = _played(cache)
    snapshot = venv.get_state()
    layout = venv.layout
    team = layout.fusion["team_mask"].start
    flipped = 1.0 - snapshot["obs_fusion"][0, team]  # inside the space, but not the team of the state
    with pytest.raises(ValueError, match=r"the observation the restored state gives \(block 'team_mask'"):
        venv.set_state(_corrupted(snapshot, "obs_fusion", (0, team), flipped))


def test_set_state_refuses_a_team_smaller_than_min_team_size(cache) -> None:
    venv = _engine(cache, True, min_team_size=2, window=4)
    venv.reset(seed=0)
    venv.step({"decider": np.ones((3, cache.n_models), dtype=np.int8), "fusion": np.zeros(3, dtype=np.int64)})
    snapshot = venv.get_state()
    with pytest.raises(ValueError, match=r"^set_state: team\[1\] has 1 models, fewer than min_team_size=2"):
        venv.set_state(_corrupted(snapshot, "team", (1, slice(None)), [1, 0, 0, 0]))


@pytest.mark.parametrize("autoreset", [True, False])
def test_every_reachable_state_restores(cache, autoreset: bool) -> None:
    """Snapshots after each step of several episodes (shuffled and sequential, ends included) all restore."""
    for order in ("shuffled", "sequential"):
        options = dict(order=order, episode_length=5, window=3, metrics=WINDOW_METRICS, reward_history=3)
        venv, target = _engine(cache, autoreset, **options), _engine(cache, autoreset, **options)
        venv.reset(seed=2)
        rng = np.random.default_rng(1)
        for _ in range(13):
            if autoreset:
                venv.step(_actions(venv, rng))
            else:  # past the episode's end without a reset (the copies answer its last question again)
                actions = _actions(venv, rng)
                venv.advance(venv.decode_decider(actions["decider"]), venv.decode_fusion(actions["fusion"]))
            target.set_state(venv.get_state())
            np.testing.assert_array_equal(target.state(), venv.state())


def test_a_finished_parallel_episode_restores(cache) -> None:
    env = ensemble_env.parallel_env(cache, episode_length=4, window=10)
    env.reset(seed=0)
    while env.agents:
        env.step({"decider": np.ones(cache.n_models, dtype=np.int8), "fusion": 1})
    other = ensemble_env.parallel_env(cache, episode_length=4, window=10)
    other.engine.set_state(env.engine.get_state())
    np.testing.assert_array_equal(other.state(), env.state())
