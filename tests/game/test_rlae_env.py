"""The RLAE options (arXiv 2506.00439): ``fusion_action="weights"``, ``decider=False``, ``fusion_agents="per_model"``.

Weighted answers against a hand-computed table, bad weights refused, reward bounds over random play, PettingZoo's
own tests, rendering, exact snapshots, determinism, and today's game left exactly as it was.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import api_test, parallel_api_test, render_test, seed_test

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.game.config import rlae_game
from ensemble_env.synthetic import make_cache
from ensemble_env.views.render import _PROB, FrameGeometry

#: every new configuration (each option alone, and composed)
CONFIGS = {
    "weights": {"fusion_action": "weights"},
    "no_decider": {"decider": False},
    "no_decider_weights": {"decider": False, "fusion_action": "weights"},
    "per_model": {"fusion_action": "weights", "fusion_agents": "per_model"},
    "per_model_no_decider": {"decider": False, "fusion_action": "weights", "fusion_agents": "per_model"},
}


def hand_cache(features: bool = False) -> LogitCache:
    """3 models, 5 questions, 3 choices (question 2 has 2), 2 tasks; labels [0, 1, 1, 2, 1].

    p_i(c), rows = models m0 m1 m2:
        q0 (task a): [.7 .2 .1] [.3 .6 .1] [.5 .3 .2]
        q1 (task a): [.8 .1 .1] [.05 .9 .05] [.2 .6 .2]
        q2 (task b): [.4 .6] [.7 .3] [.9 .1]          (2 choices)
        q3 (task b): [.3 .5 .2] [.6 .2 .2] [.1 .1 .8]
        q4 (task a): [.5 .5 0] [.25 .25 .5] [0 0 1]   (exact in float32: ties)
    """
    probs = np.array(
        [
            [[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.5, 0.3, 0.2]],
            [[0.8, 0.1, 0.1], [0.05, 0.9, 0.05], [0.2, 0.6, 0.2]],
            [[0.4, 0.6, 0.0], [0.7, 0.3, 0.0], [0.9, 0.1, 0.0]],
            [[0.3, 0.5, 0.2], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]],
            [[0.5, 0.5, 0.0], [0.25, 0.25, 0.5], [0.0, 0.0, 1.0]],
        ]
    )
    extra = {"features": np.arange(10, dtype=np.float32).reshape(5, 2) / 10} if features else {}
    return LogitCache(
        scores=probs,
        labels=np.array([0, 1, 1, 2, 1]),
        models=("m0", "m1", "m2"),
        score_kind="prob",
        n_choices=np.array([3, 3, 2, 3, 3]),
        tasks=np.array([0, 0, 1, 1, 0]),
        task_names=("a", "b"),
        split=np.zeros(5, dtype=int),
        **extra,
    )


@pytest.fixture(scope="module")
def synthetic() -> LogitCache:
    return make_cache(n_models=5, n_questions=700, n_tasks=3, n_choices=(2, 4, 3), seed=3)


def random_actions(env: ensemble_env.EnsembleParallelEnv, rng: np.random.Generator) -> dict:
    actions = {}
    for agent in env.agents:
        space = env.action_space(agent)
        if isinstance(space, spaces.Box):  # a few all-zero and all-one weights among the random ones
            draw = rng.random()
            shape = space.shape
            value = np.zeros(shape) if draw < 0.1 else np.ones(shape) if draw < 0.2 else rng.random(shape)
            actions[agent] = value.astype(np.float32)
        elif isinstance(space, spaces.Discrete):
            actions[agent] = int(rng.integers(space.n))
        else:
            actions[agent] = rng.integers(0, 2, space.shape).astype(np.int8)
    return actions


# -- the weighted answer ------------------------------------------------------------------------------------

#: (team E_t that answers, fusion weights, expected answer, why), one row per question q0..q4 in order; the
#: decider commits the next row's team
TABLE = [
    ((1, 1, 1), (0.0, 1.0, 0.0), 1, "m1 alone: argmax [.3 .6 .1]"),
    ((1, 0, 1), (1.0, 1.0, 0.0), 0, "m1 is outside the team: its weight is ignored (with it: choice 1)"),
    ((0, 1, 1), (1.0, 0.0, 0.0), 0, "the team's weights are all 0: equal weights, m1 + m2 = [1.6 .4]"),
    ((1, 1, 1), (0.2, 0.2, 0.9), 2, "[.27 .23 .8]"),
    ((1, 0, 0), (0.3, 0.0, 0.0), 0, "a tie [.15 .15 0]: the lowest choice index (the label is 1)"),
]


def test_weighted_answers_follow_the_hand_computed_table() -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all", fusion_action="weights")
    assert env.action_space("fusion") == spaces.Box(0.0, 1.0, (3,), np.float32)
    env.reset(seed=0)
    labels = [0, 1, 1, 2, 1]
    for t, (team, weights, expected, why) in enumerate(TABLE):
        assert env.engine.team[0].tolist() == list(map(bool, team)), t
        next_team = TABLE[t + 1][0] if t + 1 < len(TABLE) else (1, 1, 1)
        _, rewards, _, _, infos = env.step({"decider": np.array(next_team), "fusion": np.array(weights, np.float32)})
        assert infos["fusion"]["answer"] == expected, why
        right = expected == labels[t]
        assert infos["fusion"]["correct"] == right
        assert rewards["fusion"] == pytest.approx(1.0 if right else -1.0 - sum(team) / 3)
        np.testing.assert_array_equal(env.engine.last_weights[0], np.array(weights, np.float32))


def test_batched_weighted_answers_match_one_at_a_time() -> None:
    venv = ensemble_env.vector_env(2, hand_cache(), split="all", fusion_action="weights", decider=False)
    venv.reset(seed=0)
    weights = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)  # q0: m1 says 1, m2 says 0
    np.testing.assert_array_equal(venv.weighted_answers(weights), [1, 0])
    _, rewards, _, _, infos = venv.step({"fusion": weights})
    np.testing.assert_array_equal(infos["fusion"]["answer"], [1, 0])
    np.testing.assert_array_equal(rewards["fusion"], np.array([-2.0, 1.0], np.float32))  # penalty: all 3 models


def test_per_model_agents_set_their_own_weight() -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all", fusion_action="weights", fusion_agents="per_model")
    assert env.possible_agents == ["decider", "weight_0", "weight_1", "weight_2"]
    assert env.action_space("weight_1") == spaces.Box(0.0, 1.0, (1,), np.float32)
    env.reset(seed=0)
    for t, (_, weights, expected, why) in enumerate(TABLE):
        next_team = TABLE[t + 1][0] if t + 1 < len(TABLE) else (1, 1, 1)
        actions = {f"weight_{i}": np.array([w], np.float32) for i, w in enumerate(weights)}
        _, rewards, _, _, infos = env.step({"decider": np.array(next_team), **actions})
        assert infos["weight_0"]["answer"] == expected, why
        assert len(set(rewards.values())) == 1 and set(rewards) == set(env.possible_agents)


@pytest.mark.parametrize(
    ("options", "agent", "action", "message"),
    [
        (
            {},
            "fusion",
            [1.5, 0.0, 0.0],
            r"fusion action: weights must be in \[0, 1\] \(found 1.5\); expected "
            r"Box\(0.0, 1.0, \(3,\), float32\), got \[1.5 0. 0. \]",
        ),
        ({}, "fusion", [np.nan, 0.0, 0.0], r"fusion action: weights must be in \[0, 1\] \(found nan\)"),
        ({}, "fusion", [0.5, -0.01, 0.0], r"found -0.01"),
        ({}, "fusion", np.array([1 + 1e-12, 0, 0]), r"found 1.000000000001"),  # refused before float32 rounds it
        ({}, "fusion", [np.inf, 0.0, 0.0], r"found inf"),
        ({}, "fusion", [0.5, 0.5], r"fusion action: shape must be \(3,\)"),
        ({}, "fusion", np.array(["a", "b", "c"]), r"fusion action: a weight must be a real number"),
        ({}, "fusion", 2, r"fusion action: shape must be \(3,\)"),
        (
            {"fusion_agents": "per_model"},
            "weight_1",
            [2.0],
            r"weight_1 action: weights must be in \[0, 1\] \(found "
            r"2.0\); expected Box\(0.0, 1.0, \(1,\), float32\)",
        ),
        ({"fusion_agents": "per_model"}, "weight_2", [0.5, 0.5], r"weight_2 action: shape must be \(1,\)"),
    ],
)
def test_bad_weights_are_refused_naming_agent_space_and_value(options: dict, agent: str, action, message: str) -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all", fusion_action="weights", **options)
    env.reset(seed=0)
    actions = {a: env.action_space(a).sample() for a in env.agents}
    actions[agent] = action
    before = env.engine.get_state()
    with pytest.raises(ValueError, match=message):
        env.step(actions)
    after = env.engine.get_state()
    assert all(np.array_equal(before[k], after[k]) for k in before)  # nothing changed
    aec = ensemble_env.env(hand_cache(), split="all", fusion_action="weights", **options)
    aec.reset(seed=0)
    while aec.agent_selection != agent:
        aec.step(aec.action_space(aec.agent_selection).sample())
    with pytest.raises(ValueError, match=message):
        aec.step(action)


def test_integer_and_boolean_weights_are_taken_as_reals() -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all", fusion_action="weights", decider=False)
    env.reset(seed=0)
    _, _, _, _, infos = env.step({"fusion": np.array([False, True, False])})  # m1 alone on q0: choice 1
    assert infos["fusion"]["answer"] == 1
    _, _, _, _, infos = env.step({"fusion": [1, 0, 0]})  # m0 alone on q1: choice 0
    assert infos["fusion"]["answer"] == 0
    with pytest.raises(ValueError, match=r"found 2"):
        env.step({"fusion": np.array([2, 0, 0], dtype=np.uint8)})


# -- no decider ---------------------------------------------------------------------------------------------


def test_without_a_decider_every_model_answers_every_question(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(synthetic, decider=False, alpha=0.5)
    assert env.possible_agents == ["fusion"] and env.action_space("fusion") == spaces.Discrete(4)
    obs, infos = env.reset(seed=0)
    layout = env.engine.layout
    assert env.state_space.shape == env.observation_space("fusion").shape
    rng = np.random.default_rng(0)
    for _ in range(200):
        np.testing.assert_array_equal(obs["fusion"][layout.fusion["team_mask"]], 1.0)
        np.testing.assert_array_equal(env.state(), obs["fusion"])
        obs, rewards, _, _, infos = env.step({"fusion": int(rng.integers(4))})
        assert infos["fusion"]["team_size"] == 5
        assert rewards["fusion"] in (1.0, -1.5)  # the size penalty is constant: alpha * N / N
    with pytest.raises(ValueError, match="unknown agent"):
        env.step({"fusion": 0, "decider": np.ones(5)})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"decider": False, "decider_extras": ["task"]}, "decider_extras=.* needs the decider"),
        ({"decider": False, "min_team_size": 2}, "min_team_size=2 needs the decider"),
        ({"fusion_action": "answer", "fusion_agents": "per_model"}, "needs fusion_action='weights'"),
        ({"fusion_agents": "all"}, "fusion_agents='all' is not one of"),
    ],
)
def test_option_combinations_that_make_no_sense_are_refused(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ensemble_env.parallel_env(hand_cache(), **options)


# -- observations and state ---------------------------------------------------------------------------------


def test_per_model_observation_layout_and_state() -> None:
    cache = hand_cache(features=True)
    env = ensemble_env.parallel_env(
        cache, split="all", fusion_action="weights", fusion_agents="per_model", reward_history=2
    )
    parts = env.engine.layout.model
    assert list(parts) == ["task", "features", "probs", "member", "action_mask"]
    assert env.observation_space("weight_0").shape == (2 + 2 + 3 + 1 + 3,)
    obs, _ = env.reset(seed=0)
    weights = {f"weight_{i}": np.ones(1, np.float32) for i in range(3)}
    obs, *_ = env.step({"decider": np.array([1, 0, 1]), **weights})  # next: q1 (task a) with team {m0, m2}
    for i in range(3):
        row = obs[f"weight_{i}"]
        assert env.observation_space(f"weight_{i}").contains(row)
        np.testing.assert_array_equal(row[parts["task"]], [1, 0])
        np.testing.assert_array_equal(row[parts["features"]], cache.features[1])
        member = i != 1
        np.testing.assert_array_equal(row[parts["probs"]], cache.probs[1, i] * member)  # zero outside the team
        assert row[parts["member"]][0] == member
        np.testing.assert_array_equal(row[parts["action_mask"]], [1, 1, 1])
    obs, _, _, _, infos = env.step({"decider": np.array([1, 1, 1]), **weights})  # next: q2, two choices
    np.testing.assert_array_equal(obs["weight_2"][parts["action_mask"]], [1, 1, 0])
    np.testing.assert_array_equal(infos["weight_2"]["choice_mask"], [1, 1, 0])
    assert "action_mask" not in infos["weight_2"]  # a Box action has no action mask
    # the state: decider, fusion (the whole team), the question's context
    engine = env.engine
    state = env.state()
    assert env.state_space.contains(state)
    d, f = engine.layout.decider_size, engine.layout.fusion_size
    np.testing.assert_array_equal(state[:d], obs["decider"])
    np.testing.assert_array_equal(state[d : d + f], engine.fusion_observation[0])
    np.testing.assert_array_equal(state[d + f :], obs["weight_0"][:4])
    assert state.size == d + f + 4


def test_fusion_extras_features_give_the_single_agent_the_same_context() -> None:
    cache = hand_cache(features=True)
    env = ensemble_env.parallel_env(cache, split="all", fusion_action="weights", fusion_extras=["task", "features"])
    layout = env.engine.layout.fusion
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["fusion"][layout["task"]], [1, 0])
    np.testing.assert_array_equal(obs["fusion"][layout["features"]], cache.features[0])
    obs, *_ = env.step({"decider": np.ones(3), "fusion": np.ones(3, np.float32)})
    np.testing.assert_array_equal(obs["fusion"][layout["features"]], cache.features[1])


# -- reward bounds, PettingZoo's tests, determinism -------------------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_rewards_stay_in_bounds_over_random_play(synthetic: LogitCache, name: str) -> None:
    for extra in ({}, {"alpha": 2.5, "size_penalty_mode": "always", "diversity_bonus": 0.3}):
        venv = ensemble_env.vector_env(16, synthetic, window=30, episode_length=60, order="shuffled",
                                       **CONFIGS[name], **extra)  # fmt: skip
        env = ensemble_env.parallel_env(synthetic, window=30, **CONFIGS[name], **extra)  # for the spaces
        low, high = venv.reward_range
        venv.reset(seed=1)
        rng = np.random.default_rng(2)
        for _ in range(150):
            actions = {}
            for agent in venv.agents:
                space = env.action_space(agent)
                if isinstance(space, spaces.Box):
                    actions[agent] = rng.random((16, *space.shape)).astype(np.float32) * (rng.random() < 0.9)
                elif isinstance(space, spaces.Discrete):
                    actions[agent] = rng.integers(0, space.n, 16)
                else:
                    actions[agent] = rng.integers(0, 2, (16, 5))
            obs, rewards, _, _, infos = venv.step(actions)
            assert set(obs) == set(rewards) == set(venv.agents)
            for agent in venv.agents:
                assert np.all(rewards[agent] >= low - 1e-6) and np.all(rewards[agent] <= high + 1e-6)
                assert np.all(obs[agent] >= env.observation_space(agent).low)
                assert np.all(obs[agent] <= env.observation_space(agent).high)
            if not CONFIGS[name].get("decider", True):
                np.testing.assert_array_equal(infos[venv.agents[0]]["team_size"], 5)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pettingzoo_official_tests(synthetic: LogitCache, name: str) -> None:
    options = {"window": 40, **CONFIGS[name]}
    env = ensemble_env.parallel_env(synthetic, **options)
    for agent in env.possible_agents:  # built once
        assert env.action_space(agent) is env.action_spaces[agent] and env.observation_space(
            agent
        ) is env.observation_space(agent)
    parallel_api_test(env, num_cycles=200)
    api_test(ensemble_env.env(synthetic, **options), num_cycles=100)
    seed_test(lambda: ensemble_env.env(synthetic, **options), num_cycles=100)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_one_seed_one_trajectory(synthetic: LogitCache, name: str) -> None:
    def rollout(seed: int) -> list:
        env = ensemble_env.parallel_env(synthetic, window=40, order="shuffled", episode_length=80, **CONFIGS[name])
        rng = np.random.default_rng(5)
        trace = [env.reset(seed=seed)[0]]
        for _ in range(200):
            if not env.agents:
                trace.append(env.reset()[0])
            obs, rewards, terms, truncs, infos = env.step(random_actions(env, rng))
            trace.append((obs, rewards, terms, truncs, {a: info["answer"] for a, info in infos.items()}, env.state()))
        return trace

    def digest(trace: list) -> str:
        return hashlib.sha256(repr(trace).encode() + b"".join(
            a.tobytes() for item in trace for a in _arrays(item))).hexdigest()  # fmt: skip

    assert digest(rollout(3)) == digest(rollout(3))
    assert digest(rollout(3)) != digest(rollout(4))


def _arrays(item: object) -> list[np.ndarray]:
    if isinstance(item, np.ndarray):
        return [item]
    if isinstance(item, dict):
        return [a for key in sorted(item) for a in _arrays(item[key])]
    if isinstance(item, list | tuple):
        return [a for part in item for a in _arrays(part)]
    return []


# -- snapshots ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_snapshot_round_trip_is_exact(synthetic: LogitCache, name: str) -> None:
    def venv() -> ensemble_env.EnsembleVectorEnv:
        return ensemble_env.vector_env(4, synthetic, window=20, episode_length=25, order="shuffled", **CONFIGS[name])

    env = ensemble_env.parallel_env(synthetic, **CONFIGS[name])
    rng = np.random.default_rng(0)

    def actions() -> dict:
        out = {}
        for agent in env.possible_agents:
            space = env.action_space(agent)
            if isinstance(space, spaces.Box):
                out[agent] = rng.random((4, *space.shape)).astype(np.float32)
            elif isinstance(space, spaces.Discrete):
                out[agent] = rng.integers(0, space.n, 4)
            else:
                out[agent] = rng.integers(0, 2, (4, 5))
        return out

    first = venv()
    first.reset(seed=9)
    for _ in range(40):
        first.step(actions())
    snapshot = first.get_state()
    later = [actions() for _ in range(40)]
    expected = [first.step(a) for a in later]
    second = venv()
    second.reset(seed=123)
    second.set_state(snapshot)
    for a, want in zip(later, expected, strict=True):
        got = second.step(a)
        assert len(_arrays(got)) == len(_arrays(want)) > 0
        assert all(np.array_equal(x, y) for x, y in zip(_arrays(got), _arrays(want), strict=True))
    np.testing.assert_array_equal(second.state(), first.state())
    assert second.get_state()["signature"] == snapshot["signature"]


def test_snapshot_without_a_decider_refuses_a_partial_team(synthetic: LogitCache) -> None:
    venv = ensemble_env.vector_env(2, synthetic, decider=False)
    venv.reset(seed=0)
    snapshot = venv.get_state()
    snapshot["team"][1, 3] = 0
    with pytest.raises(ValueError, match=r"set_state: team\[1, 3\] = 0 is not 1: with decider=False"):
        venv.set_state(snapshot)


def test_snapshot_signature_of_todays_game_is_unchanged(synthetic: LogitCache) -> None:
    venv = ensemble_env.vector_env(1, synthetic)
    venv.reset(seed=0)
    text = str(venv.get_state()["signature"])
    assert "decider=" not in text.replace("decider_action", "").replace("decider_extras", "")
    assert "fusion_action" not in text and "fusion_agents" not in text
    weights = ensemble_env.vector_env(1, synthetic, fusion_action="weights")
    weights.reset(seed=0)
    assert "fusion_action='weights'" in str(weights.get_state()["signature"])
    with pytest.raises(ValueError, match="another configuration"):
        weights.set_state(venv.get_state())


# -- rendering ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["weights", "per_model_no_decider"])
def test_render_shows_the_weights(synthetic: LogitCache, name: str) -> None:
    render_test(lambda render_mode=None: ensemble_env.env(synthetic, render_mode=render_mode, **CONFIGS[name]))
    text_env = ensemble_env.parallel_env(synthetic, render_mode="ansi", split="all", **CONFIGS[name])
    rgb_env = ensemble_env.parallel_env(synthetic, render_mode="rgb_array", split="all", **CONFIGS[name])
    weights = np.array([1.0, 0.0, 0.25, 0.5, 1.0], np.float32)
    for env in (text_env, rgb_env):
        env.reset(seed=0)
        actions = {"decider": np.array([1, 1, 0, 1, 1])} if "decider" in env.agents else {}
        if "fusion" in env.agents:
            actions["fusion"] = weights
        else:
            actions.update({f"weight_{i}": weights[i : i + 1] for i in range(5)})
        env.step(actions)
    text = text_env.render()
    assert "  weights    model_0:1.00 model_1:0.00 model_2:0.25 model_3:0.50 model_4:1.00\n" in text
    image = rgb_env.render()
    geo = FrameGeometry.of(5)
    ink = _PROB.astype(np.uint8)
    for model, weight in enumerate(weights):
        x, y = geo.weight_cell(model)
        inked = np.all(image[y, x + 1 : x + 1 + geo.weight_width] == ink, axis=-1)
        assert inked.sum() == round(weight * geo.weight_width), model
    text_env.step({a: np.zeros(text_env.action_space(a).shape, np.float32) for a in text_env.agents
                   if a != "decider"} | ({"decider": np.ones(5)} if "decider" in text_env.agents else {}))  # fmt: skip
    assert "(all 0 on the team: equal weights)" in text_env.render()


# -- today's game unchanged -----------------------------------------------------------------------------------


def default_game_digest(**options: object) -> str:
    """A fixed-seed trajectory of today's game (parallel view, then a shuffled vector env with extras), hashed;
    the values below were recorded before the RLAE options existed (then re-recorded without the cost info when
    bbh5 gained real costs: the same values from the tree before and after that change)."""
    digest = hashlib.sha256()
    env = ensemble_env.parallel_env(**options)
    env.reset(seed=123)
    rng = np.random.default_rng(7)
    for _ in range(300):
        if not env.agents:
            break
        actions = {
            "decider": rng.integers(0, 2, env.engine.n_models).astype(np.int8),
            "fusion": int(rng.integers(0, env.engine.max_choices)),
        }
        obs, rewards, _, _, infos = env.step(actions)
        for agent in sorted(obs):
            digest.update(obs[agent].tobytes())
        digest.update(np.float64(rewards["fusion"]).tobytes())
        # the cost info is the cache's (bbh5 has carried real per-question costs since): hashed apart from it
        digest.update(repr(sorted((key, value) for key, value in infos["decider"].items() if key != "cost")).encode())
        digest.update(env.state().tobytes())
    venv = ensemble_env.vector_env(
        8, episode_length=50, order="shuffled", fusion_extras=("task",), decider_extras=("task", "model_accuracy")
    )
    obs, _ = venv.reset(seed=5)
    for _ in range(120):
        obs, rewards, terms, truncs, _ = venv.step(
            {"decider": rng.integers(0, 2, (8, venv.n_models)), "fusion": rng.integers(0, 4, 8)}
        )
        for agent in sorted(obs):
            digest.update(obs[agent].tobytes())
        digest.update(rewards["fusion"].tobytes())
        digest.update(terms["fusion"].tobytes())
        digest.update(truncs["fusion"].tobytes())
    return digest.hexdigest()


def test_todays_game_is_bit_identical_to_before_the_rlae_options() -> None:
    assert default_game_digest() == "c3b2ff91603c605a9e7bc435364b32446137ecda8dd56cc746ca08fc25bdd792"
    assert default_game_digest(cache="toy8", episode_length=100) == (
        "62e64bf6ec8c5610be6e575311bc331061c88e23aeb87969118e47961ccc6c2a"
    )


@pytest.mark.parametrize("bad", [float("nan"), -0.5, 1.5, float("inf")])
def test_weighted_answers_validates_its_weights_as_the_game_does(bad: float) -> None:
    """The public ``weighted_answers`` refuses what a weighting agent's action may not hold (issue 34)."""
    venv = ensemble_env.vector_env(2, "toy8", **rlae_game("one", has_features=False))
    venv.reset(seed=0)
    good = np.full((2, venv.n_models), 0.5)
    assert venv.weighted_answers(good).shape == (2,)
    weights = good.copy()
    weights[1, 3] = bad
    with pytest.raises(ValueError, match=r"weighted_answers action: weights must be in \[0, 1\]"):
        venv.weighted_answers(weights)
    with pytest.raises(ValueError, match="expected weights of shape"):
        venv.weighted_answers(good[:1])
