"""What the MARL libraries demand of the environment, checked without any of them installed.

TorchRL and BenchMARL build their specs from the first reset's infos (numeric values, the same keys at every
step); RLlib and SB3 reject observations outside their Box or of another dtype; PettingZoo's tests, EPyMARL and
TorchRL read cached spaces and ``state_space``; RLlib, BenchMARL and SuperSuit each need a decider encoding other
than MultiBinary. The adapters' own tests (tests/adapters/) run where the libraries are installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.adapters.sb3 import SingleRoleEnv
from ensemble_env.adapters.torchrl import DeciderActionMask
from ensemble_env.game.actions import choose_encoding
from ensemble_env.synthetic import make_cache
from ensemble_env.views.policies import FixedTeam, MeanVote

ENCODINGS = ("multibinary", "multidiscrete", "subset")
ADAPTERS = {"sb3": "stable_baselines3", "rllib": "ray", "torchrl": "torchrl", "benchmarl": "benchmarl"}


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=3, n_questions=300, n_tasks=2, n_choices=(2, 4), seed=5)


def info_signature(info: dict) -> dict[str, tuple]:
    """Key -> (kind, shape) of one agent's info: what TorchRL turns into a spec at the first reset."""
    signature = {}
    for key, value in info.items():
        array = np.asarray(value)
        assert array.dtype.kind in "biuf", f"info[{key!r}] = {value!r} is not numeric"
        assert np.all(np.isfinite(array)), f"info[{key!r}] = {value!r} is not finite"
        signature[key] = (type(value).__name__, array.shape)
    return signature


def random_episode(env: ensemble_env.EnsembleParallelEnv, seed: int) -> list[tuple]:
    """(obs, infos) of every step of one episode with seeded random actions (reset included)."""
    for agent in env.possible_agents:
        env.action_space(agent).seed(seed)
    obs, infos = env.reset(seed=seed)
    trace = [(obs, infos)]
    while env.agents:
        obs, _, _, _, infos = env.step({agent: env.action_space(agent).sample() for agent in env.agents})
        trace.append((obs, infos))
    return trace


# -- infos, observations, spaces under every encoding ------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_infos_are_numeric_with_the_same_keys_and_shapes_at_reset_and_every_step(
    cache: LogitCache, encoding: str
) -> None:
    env = ensemble_env.parallel_env(cache, decider_action=encoding, episode_length=40, order="shuffled")
    trace = random_episode(env, seed=3)
    first = {agent: info_signature(info) for agent, info in trace[0][1].items()}
    assert set(first) == {"decider", "fusion"}
    assert first["fusion"]["action_mask"] == ("ndarray", (cache.max_choices,))
    assert set(first["decider"]) == set(first["fusion"]) - {"action_mask"}
    for _, infos in trace[1:]:  # the last step included: TorchRL drops keys that only appear at a step
        assert {agent: info_signature(info) for agent, info in infos.items()} == first


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_observations_and_state_are_float32_inside_their_spaces(cache: LogitCache, encoding: str) -> None:
    env = ensemble_env.parallel_env(
        cache, decider_action=encoding, window=20, decider_extras=["model_accuracy", "task"], episode_length=60
    )
    for obs, _ in random_episode(env, seed=4):
        for agent, observation in obs.items():
            assert observation.dtype == np.float32, agent
            assert env.observation_space(agent).contains(observation), agent
        state = env.state()
        assert state.dtype == np.float32 and env.state_space.contains(state)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_spaces_are_cached_objects_in_both_apis(cache: LogitCache, encoding: str) -> None:
    env = ensemble_env.parallel_env(cache, decider_action=encoding)
    state_space = env.state_space
    env.reset(seed=0)
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_spaces[agent] is env.observation_space(agent)
        assert env.action_space(agent) is env.action_spaces[agent] is env.action_space(agent)
    assert env.state_space is state_space
    assert env.observation_space("decider").dtype == env.observation_space("fusion").dtype == np.float32
    aec = ensemble_env.env(cache, decider_action=encoding)
    for agent in aec.possible_agents:
        assert aec.observation_space(agent) is aec.observation_space(agent)
        assert aec.action_space(agent) is aec.action_space(agent)


def test_every_agent_reports_on_the_last_step_then_agents_empty(cache: LogitCache) -> None:
    env = ensemble_env.parallel_env(cache, episode_length=5)
    env.reset(seed=0)
    for _ in range(5):
        obs, rewards, terminations, truncations, infos = env.step({"decider": np.ones(3, dtype=np.int8), "fusion": 0})
        for result in (obs, rewards, terminations, truncations, infos):
            assert list(result) == ["decider", "fusion"]  # a stable order, every step (RLlib, TorchRL)
    assert truncations == {"decider": True, "fusion": True} and env.agents == []
    env.reset()
    assert env.agents == ["decider", "fusion"]


# -- the decider's encodings ---------------------------------------------------------------------------


def teams(n_models: int) -> list[np.ndarray]:
    """Every non-empty team of ``n_models`` models as 0/1 masks."""
    masks = [np.array(bits, dtype=np.int8) for bits in itertools.product((0, 1), repeat=n_models)]
    return [mask for mask in masks if mask.any()]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_team_round_trips_through_each_encoding(cache: LogitCache, encoding: str) -> None:
    env = ensemble_env.parallel_env(cache, decider_action=encoding)
    space = env.action_space("decider")
    expected_space = {
        "multibinary": spaces.MultiBinary(3),
        "multidiscrete": spaces.MultiDiscrete([2, 2, 2]),
        "subset": spaces.Discrete(2**3 - 1),
    }[encoding]
    assert space == expected_space
    env.reset(seed=0)
    codes = set()
    for team in teams(3):
        action = FixedTeam(team, encoding)(np.zeros((1, 1)))[0]
        assert space.contains(action if encoding != "subset" else np.int64(action)), (team, action)
        decoded = env.engine.decode_decider(action[None])[0]
        np.testing.assert_array_equal(decoded, team.astype(bool))
        obs, *_ = env.step({"decider": action, "fusion": 0})
        np.testing.assert_array_equal(obs["decider"][env.engine.layout.decider["team_mask"]], team)
        if encoding == "subset":
            assert action == int((team.astype(np.int64) << np.arange(3)).sum()) - 1  # bit i of index+1 = model i
            codes.add(int(action))
    if encoding == "subset":
        assert codes == set(range(space.n))  # a bijection onto Discrete(2**N - 1)


def test_the_three_encodings_play_the_same_game(cache: LogitCache) -> None:
    rng = np.random.default_rng(0)
    plan = [teams(3)[i] for i in rng.integers(0, 7, size=50)]
    traces = []
    for encoding in ENCODINGS:
        env = ensemble_env.parallel_env(cache, decider_action=encoding, episode_length=50, order="shuffled")
        fuse = MeanVote.from_env(env)
        obs, _ = env.reset(seed=11)
        trace = []
        for team in plan:
            action = FixedTeam(team, encoding)(obs["decider"])[0]
            obs, rewards, _, _, infos = env.step({"decider": action, "fusion": int(fuse(obs["fusion"])[0])})
            trace.append((obs["decider"], obs["fusion"], rewards["fusion"], infos["fusion"]["accuracy"]))
        traces.append(trace)
    for other in traces[1:]:
        for a, b in zip(traces[0], other, strict=True):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
            assert a[2:] == b[2:]


def test_sample_from_every_decider_space_is_a_valid_action(cache: LogitCache) -> None:
    for encoding in ENCODINGS:
        env = ensemble_env.parallel_env(cache, decider_action=encoding, min_team_size=0)
        env.reset(seed=0)
        space = env.action_space("decider")
        space.seed(0)
        for _ in range(30):
            env.engine.decode_decider(np.asarray(space.sample())[None])  # never raises


def test_decider_encoding_picks_the_library_default_and_names_the_alternatives() -> None:
    assert choose_encoding({"alpha": 0.5}, "multidiscrete", "RLlib", ("multidiscrete", "subset")) == {
        "alpha": 0.5,
        "decider_action": "multidiscrete",
    }
    assert (
        choose_encoding({"decider_action": "subset"}, "multidiscrete", "RLlib", ("multidiscrete", "subset"))[
            "decider_action"
        ]
        == "subset"
    )
    with pytest.raises(ValueError, match="decider_action='multibinary' does not work with RLlib"):
        choose_encoding({"decider_action": "multibinary"}, "multidiscrete", "RLlib", ("multidiscrete", "subset"))


# -- the library-free parts of the adapters ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["decider", "fusion"])
def test_single_role_view_is_a_valid_gymnasium_env(cache: LogitCache, role: str) -> None:
    env = SingleRoleEnv(role, cache=cache, episode_length=30)
    check_env(env, skip_render_check=True)
    assert env.observation_space is env.parallel.observation_space(role)
    assert env.action_space is env.parallel.action_space(role)
    _, info = env.reset(seed=2)
    assert "accuracy" in info
    mask = env.action_masks()
    if role == "fusion":
        np.testing.assert_array_equal(mask, info["action_mask"].astype(bool))
    else:
        assert mask.shape == (2 * 3,) and mask.all()


def test_single_role_view_plays_the_other_role_with_the_given_policy(cache: LogitCache) -> None:
    env = SingleRoleEnv("fusion", FixedTeam, cache=cache, episode_length=10)  # default: every model
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs[env.parallel.engine.layout.fusion["team_mask"]], [1, 1, 1])
    first = np.array([1, 0, 0], dtype=np.int8)
    env = SingleRoleEnv("fusion", lambda decider_obs: np.tile(first, (len(decider_obs), 1)), cache=cache)
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(0)
    np.testing.assert_array_equal(obs[env.parallel.engine.layout.fusion["team_mask"]], first)
    assert isinstance(reward, float) and not terminated and not truncated
    with pytest.raises(TypeError, match="other must be"):
        SingleRoleEnv("decider", other=42, cache=cache)
    with pytest.raises(ValueError, match="role='judge'"):
        SingleRoleEnv("judge", cache=cache)


def test_decider_action_mask_wrapper_adds_an_all_valid_mask(cache: LogitCache) -> None:
    env = DeciderActionMask(ensemble_env.parallel_env(cache, decider_action="subset", episode_length=3))
    _, infos = env.reset(seed=0)
    assert infos["decider"]["action_mask"].shape == (7,) and infos["decider"]["action_mask"].all()
    assert env.state().shape == env.state_space.shape and env.agents == ["decider", "fusion"]
    while env.agents:
        *_, infos = env.step({"decider": 6, "fusion": 0})
        assert set(infos["decider"]) == set(infos["fusion"])  # now both roles carry an action mask
    with pytest.raises(ValueError, match="needs decider_action='subset'"):
        DeciderActionMask(ensemble_env.parallel_env(cache))


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_adapters_import_without_their_library_and_name_the_extra(
    adapter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(f"ensemble_env.adapters.{adapter}")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == ADAPTERS[adapter] else real_find_spec(name, *a)
    )
    factory = {"sb3": "sb3_env", "rllib": "ppo_config", "torchrl": "torchrl_env", "benchmarl": "benchmarl_task"}
    with pytest.raises(ImportError, match=rf"pip install 'ensemble-env\[{adapter}\]'"):
        getattr(module, factory[adapter])()
