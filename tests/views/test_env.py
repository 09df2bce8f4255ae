"""The PettingZoo view: API conformance, the step order and reward of the spec, seeding, bad actions."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import api_test, parallel_api_test, render_test
from testing.game import assert_same

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.synthetic import make_cache
from ensemble_env.views.render import TEXT_WIDTH


def hand_cache() -> LogitCache:
    """3 models, 4 questions, 3 choices (question 2 has only 2); probabilities given directly.

    Correctness (rows = questions, columns = models m0 m1 m2), labels [0, 1, 1, 2]:
        q0: m0 right (0.7 on 0), m1 wrong (0.6 on 1), m2 right (0.5 on 0)
        q1: m0 wrong (0.8 on 0), m1 right (0.9 on 1), m2 right (0.6 on 1)
        q2: m0 right (0.6 on 1), m1 wrong (0.7 on 0), m2 wrong (0.9 on 0)
        q3: m0 wrong (0.5 on 1), m1 wrong (0.6 on 0), m2 right (0.8 on 2)
    """
    probs = np.array(
        [
            [[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.5, 0.3, 0.2]],
            [[0.8, 0.1, 0.1], [0.05, 0.9, 0.05], [0.2, 0.6, 0.2]],
            [[0.4, 0.6, 0.0], [0.7, 0.3, 0.0], [0.9, 0.1, 0.0]],
            [[0.3, 0.5, 0.2], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]],
        ]
    )
    return LogitCache(
        scores=probs,
        labels=np.array([0, 1, 1, 2]),
        models=("m0", "m1", "m2"),
        score_kind="prob",
        n_choices=np.array([3, 3, 2, 3]),
        split=np.array([0, 0, 1, 1]),
    )


@pytest.fixture(scope="module")
def synthetic() -> LogitCache:
    return make_cache(n_models=5, n_questions=700, n_tasks=3, n_choices=(2, 4, 3), seed=3)


def fusion_parts(env: ensemble_env.EnsembleParallelEnv, obs: np.ndarray) -> dict[str, np.ndarray]:
    return {name: obs[part] for name, part in env.engine.layout.fusion.items()}


# -- the contract of the spec on a hand-built cache -------------------------------------------------------


def test_team_timing_and_reward_on_hand_built_cache() -> None:
    env = ensemble_env.parallel_env(hand_cache(), alpha=0.5, order="sequential", split="all", reward_history=2)
    obs, infos = env.reset(seed=0)
    # E_0 is every model: fusion sees all three models' probabilities of q0.
    parts = fusion_parts(env, obs["fusion"])
    np.testing.assert_allclose(parts["probs"].reshape(3, 3), hand_cache().probs[0], rtol=1e-6)
    np.testing.assert_array_equal(parts["team_mask"], [1, 1, 1])
    np.testing.assert_array_equal(infos["fusion"]["action_mask"], [1, 1, 1])

    # Step 0: fusion answers q0 right with the full team (+1); the decider commits {m0}.
    obs, rewards, terminations, truncations, infos = env.step({"decider": np.array([1, 0, 0]), "fusion": 0})
    assert rewards == {"decider": 1.0, "fusion": 1.0}
    assert infos["fusion"]["team_size"] == 3.0 and infos["fusion"]["correct"] == 1.0
    # Fusion's next observation: q1 seen through {m0} only.
    parts = fusion_parts(env, obs["fusion"])
    expected = np.zeros((3, 3), dtype=np.float32)
    expected[0] = hand_cache().probs[1, 0]
    np.testing.assert_array_equal(parts["probs"].reshape(3, 3), expected)
    np.testing.assert_array_equal(parts["team_mask"], [1, 0, 0])
    np.testing.assert_array_equal(parts["rewards"], [0.0, 1.0])
    # The decider observes the team it committed.
    decider = obs["decider"]
    np.testing.assert_array_equal(decider[env.engine.layout.decider["team_mask"]], [1, 0, 0])
    assert decider[env.engine.layout.decider["team_size"]][0] == pytest.approx(1 / 3)

    # Step 1: a wrong answer with team {m0} earns -1 - 0.5 * 1/3.
    obs, rewards, *_ = env.step({"decider": np.array([0, 1, 1]), "fusion": 0})
    assert rewards["fusion"] == pytest.approx(-1 - 0.5 / 3)
    assert rewards["decider"] == rewards["fusion"]
    # q2 has two valid choices: the action mask says so and the third column is zero.
    parts = fusion_parts(env, obs["fusion"])
    np.testing.assert_array_equal(parts["action_mask"], [1, 1, 0])
    np.testing.assert_array_equal(parts["probs"].reshape(3, 3)[:, 2], [0, 0, 0])
    np.testing.assert_array_equal(parts["probs"].reshape(3, 3)[0], [0, 0, 0])  # m0 left the team

    # Step 2: a right answer with team {m1, m2} earns +1 whatever the team size.
    obs, rewards, *_ = env.step({"decider": np.array([1, 1, 1]), "fusion": 1})
    assert rewards["fusion"] == 1.0
    # Step 3 is the last of the stream: both agents terminated (no future reward), agents emptied.
    obs, rewards, terminations, truncations, infos = env.step({"decider": np.array([1, 1, 1]), "fusion": 2})
    assert rewards["fusion"] == 1.0
    assert terminations == {"decider": True, "fusion": True}
    assert truncations == {"decider": False, "fusion": False}
    assert env.agents == []
    assert infos["fusion"]["accuracy"] == pytest.approx(3 / 4)
    assert infos["fusion"]["episode_return"] == pytest.approx(3 - 1 - 0.5 / 3)
    for agent in ("decider", "fusion"):
        assert env.observation_space(agent).contains(obs[agent])
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"decider": np.array([1, 1, 1]), "fusion": 0})


def test_window_statistics_follow_answered_questions() -> None:
    from ensemble_env.metrics import focal_diversity, plurality_accuracy

    cache = hand_cache()
    env = ensemble_env.parallel_env(cache, split="all", metrics=["focal_diversity", "plurality_accuracy"])
    env.reset(seed=0)
    statistics = env.engine.layout.decider["statistics"]
    for t, team in enumerate(([1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1])):
        obs, *_ = env.step({"decider": np.array(team), "fusion": 0})
        members = np.flatnonzero(team)
        answered = np.arange(t + 1)  # the window holds q0..qt, never q_{t+1}
        expected = [
            focal_diversity(cache.correct[answered][:, members]),
            plurality_accuracy(cache.preds[answered][:, members], cache.labels[answered]),
        ]
        np.testing.assert_allclose(obs["decider"][statistics], expected, rtol=1e-6)


def test_size_penalty_always_and_costs() -> None:
    cache = hand_cache()
    env = ensemble_env.parallel_env(cache, alpha=0.6, split="all", size_penalty_mode="always")
    env.reset(seed=0)
    _, rewards, *_ = env.step({"decider": np.array([1, 0, 0]), "fusion": 0})  # right with 3 models
    assert rewards["fusion"] == pytest.approx(1 - 0.6)
    _, rewards, *_ = env.step({"decider": np.array([1, 0, 0]), "fusion": 0})  # wrong with 1 model
    assert rewards["fusion"] == pytest.approx(-1 - 0.6 / 3)

    costly = LogitCache(
        scores=cache.scores,
        labels=cache.labels,
        models=cache.models,
        score_kind="prob",
        n_choices=cache.n_choices,
        costs=np.array([1.0, 1.0, 8.0]),
    )
    env = ensemble_env.parallel_env(costly, alpha=1.0, split="all", use_costs=True, initial_team=["m2"])
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({"decider": np.array([1, 0, 0]), "fusion": 1})  # wrong with {m2}
    assert rewards["fusion"] == pytest.approx(-1 - 8 / 10)
    assert infos["fusion"]["cost"] == 8.0


def test_empty_team_and_out_of_range_answers_are_wrong_not_errors() -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all", alpha=1.0, initial_team=[])
    obs, _ = env.reset(seed=0)
    assert not obs["fusion"][env.engine.layout.fusion["probs"]].any()
    _, rewards, _, _, infos = env.step({"decider": np.array([1, 1, 1]), "fusion": 0})  # gold 0, empty team
    assert rewards["fusion"] == -1.0 and infos["fusion"]["correct"] == 0.0
    _, rewards, *_ = env.step({"decider": np.array([1, 1, 1]), "fusion": 7})  # beyond C
    assert rewards["fusion"] == -2.0
    _, rewards, *_ = env.step({"decider": np.array([1, 1, 1]), "fusion": 2})  # q2 has 2 choices
    assert rewards["fusion"] == -2.0
    _, rewards, *_ = env.step({"decider": np.array([1, 1, 1]), "fusion": -1})
    assert rewards["fusion"] == -2.0
    env.reset(seed=0)
    _, rewards, *_ = env.step({"decider": np.array([1, 1, 1]), "fusion": -(2**63)})  # int64's edge, a plain int
    assert rewards["fusion"] == -1.0  # the empty initial team answered


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (
            {"decider": np.array([1, 0]), "fusion": 0},
            r"decider action: shape must be \(3,\); expected MultiBinary\(3\), got \[1 0\]",
        ),
        (
            {"decider": np.array([1, 0, 2]), "fusion": 0},
            r"decider action: entries must be 0 or 1 \(found 2\); expected Multi",
        ),
        (
            {"decider": np.array([0.5, 0, 1]), "fusion": 0},
            r"entries must be 0 or 1 \(found 0\.5\).*got \[0\.5 0\. +1\. *\]",
        ),
        ({"decider": np.array(["1", "0", "1"]), "fusion": 0}, r"entries must be 0 or 1; .* \(dtype <U1"),
        (
            {"decider": np.array([1, 0, 0]), "fusion": np.array([0, 1])},
            r"fusion action: shape must be \(\); expected Discrete\(3\)",
        ),
        ({"decider": np.array([1, 0, 0]), "fusion": 1.5}, r"fusion action: an answer must be an integer; .*got 1\.5"),
        ({"decider": np.array([1, 0, 0]), "fusion": 2**70}, "an answer must be an integer.*1180591620717411303424"),
        ({"decider": np.array([1, 0, 0])}, "actions lacks fusion"),
    ],
)
def test_malformed_actions_raise_clear_errors(actions: dict, message: str) -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(actions)


def test_min_team_size_forbids_small_teams() -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all", min_team_size=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="below min_team_size=1"):
        env.step({"decider": np.array([0, 0, 0]), "fusion": 0})
    with pytest.raises(ValueError, match="smaller than min_team_size"):
        ensemble_env.parallel_env(hand_cache(), min_team_size=2, initial_team=["m1"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"alpha": -1}, r"alpha must be a finite number in \[0, 1e\+06\], got -1"),
        ({"alpha": float("inf")}, r"alpha must be a finite number in \[0, 1e\+06\], got inf"),
        ({"alpha": float("nan")}, "alpha must be a finite number"),
        ({"alpha": "1"}, "alpha must be a number"),
        ({"alpha": True}, "alpha must be a number"),
        ({"diversity_bonus": -float("inf")}, r"diversity_bonus must be a finite number in \[-1e\+06, 1e\+06\]"),
        ({"window": 0}, r"window must be an integer in \[1, 1,000,000\], got 0"),
        ({"window": 10**12}, r"window must be an integer in \[1, 1,000,000\], got 1000000000000"),
        ({"window": 50.0}, "window must be an integer"),
        ({"reward_history": 10**12}, r"reward_history must be an integer in \[0, 10,000\]"),
        ({"episode_length": np.int64(0)}, r"episode_length must be an integer in \[1,"),
        ({"split": "dev"}, "split='dev' is not one of"),
        ({"order": "random"}, "order='random' is not one of"),
        ({"decider_action": "binary"}, "decider_action='binary'"),
        ({"metrics": ["focal"]}, "unknown statistic 'focal'"),
        ({"metrics": "focal_diversity"}, "got the string"),
        ({"tasks": ["nope"]}, "unknown task 'nope'"),
        ({"episode_length": 99}, "episode_length=99 exceeds"),
        ({"initial_team": ["m9"]}, "unknown model 'm9'"),
        ({"use_costs": True}, "has no 'costs' dataset"),
        ({"decider_extras": ["features"]}, "has no 'features' dataset"),
        ({"size_penalty_mode": "sometimes"}, "size_penalty_mode='sometimes'"),
        ({"fusion_extras": ["model_accuracy"]}, "fusion_extras: unknown extra 'model_accuracy'"),
        ({"fusion_extras": ["features"]}, "fusion_extras includes 'features' but the cache .* has no 'features'"),
        ({"fusion_action": "logits"}, "fusion_action='logits' is not one of"),
        ({"fusion_agents": "per_model"}, "fusion_agents='per_model' needs fusion_action='weights'"),
        ({"decider": False, "initial_team": [0]}, "initial_team=.* needs the decider"),
        ({"decider": 0}, "decider must be True or False"),
    ],
)
def test_bad_options_name_the_option(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ensemble_env.parallel_env(hand_cache(), **options)


def test_numpy_scalars_are_taken_as_their_python_values() -> None:
    env = ensemble_env.parallel_env(
        hand_cache(), alpha=np.float32(0.5), window=np.int64(2), diversity_bonus=np.int32(0), use_costs=np.bool_(False)
    )
    config = env.config
    assert (config.alpha, config.window, config.diversity_bonus, config.use_costs) == (0.5, 2, 0.0, False)
    assert type(config.alpha) is float and type(config.window) is int and type(config.use_costs) is bool
    env.reset(seed=0)
    assert env.step({"decider": np.array([1, 1, 1]), "fusion": 0})[1]["fusion"] in (1.0, -1.5)


def test_too_many_copies_are_refused_before_allocating() -> None:
    with pytest.raises(ValueError, match=r"num_envs=1,000,000,000,000 copies .* GiB of state .* the limit is 8 GiB"):
        ensemble_env.vector_env(10**12, hand_cache())
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        ensemble_env.vector_env(np.bool_(True), hand_cache())
    assert ensemble_env.vector_env(np.int64(3), hand_cache()).num_envs == 3


def test_state_before_reset_unknown_agents_and_ignored_options() -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all")
    with pytest.raises(RuntimeError, match=r"state\(\) called before reset\(\)"):
        env.state()
    env.reset(seed=0, options={"anything": 1})  # accepted for the PettingZoo API, ignored (documented)
    with pytest.raises(ValueError, match=r"unknown agent.*'referee'"):
        env.step({"decider": np.array([1, 1, 1]), "fusion": 0, "referee": 1})
    with pytest.raises(ValueError, match="unknown agent 'referee'"):
        env.check_action("referee", 0)
    assert env.engine.info_values()["step"] == 0  # refused steps did not advance the game


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8, np.int16, np.uint64, np.bool_])
def test_actions_of_any_numeric_dtype_follow_one_rule(dtype: type) -> None:
    env = ensemble_env.parallel_env(hand_cache(), split="all")
    env.reset(seed=0)
    env.step({"decider": np.array([1, 0, 1], dtype=dtype), "fusion": np.array(1, dtype=dtype)})
    assert env.engine.info_values()["answer"] == 1 and env.engine.team[0].tolist() == [True, False, True]
    for bad in (np.array([1, 0, 1], dtype=np.complex64), np.array([1, 0, 1], dtype=object), np.array([0.5, 1, 1])):
        with pytest.raises(ValueError, match=r"decider action: entries must be 0 or 1.*; expected MultiBinary\(3\)"):
            env.step({"decider": bad, "fusion": 0})
    with pytest.raises(ValueError, match="fusion action: an answer must be an integer"):
        env.step({"decider": np.array([1, 1, 1]), "fusion": np.float16(0.5)})


def test_aec_view_stays_playable_after_a_refused_action() -> None:
    aec = ensemble_env.env(hand_cache(), split="all")
    aec.reset(seed=0)
    assert aec.agent_selection == "decider"
    with pytest.raises(ValueError, match="decider action: entries must be 0 or 1"):
        aec.step(np.array([2, 0, 0]))
    assert aec.agent_selection == "decider"  # nothing stored: the decider acts again
    aec.step(np.array([1, 1, 0]))
    with pytest.raises(ValueError, match="fusion action: an answer must be an integer"):
        aec.step("b")
    aec.step(1)
    assert aec.agent_selection == "decider" and aec.infos["fusion"]["step"] == 1
    aec.step(np.array([1, 1, 1]))
    aec.step(1)
    assert aec.infos["fusion"]["step"] == 2


def test_unknown_option_is_a_type_error_listing_options() -> None:
    with pytest.raises(TypeError, match=r"unknown option.*windw.*the options are"):
        ensemble_env.parallel_env(hand_cache(), windw=3)


# -- PettingZoo conformance ---------------------------------------------------------------------------------


@pytest.mark.parametrize("decider_action", ["multibinary", "multidiscrete", "subset"])
def test_parallel_api(synthetic: LogitCache, decider_action: str) -> None:
    parallel_api_test(ensemble_env.parallel_env(synthetic, window=40, decider_action=decider_action), num_cycles=300)


@pytest.mark.parametrize("decider_action", ["multibinary", "subset"])
def test_aec_api(synthetic: LogitCache, decider_action: str) -> None:
    api_test(ensemble_env.env(synthetic, window=40, decider_action=decider_action), num_cycles=200)


def test_render(synthetic: LogitCache, capsys: pytest.CaptureFixture[str]) -> None:
    render_test(lambda render_mode=None: ensemble_env.env(synthetic, render_mode=render_mode))
    env = ensemble_env.parallel_env(synthetic, render_mode="ansi", split="all")
    env.reset(seed=0)
    assert "episode start: 700 questions" in env.render()
    env.step({"decider": np.array([1, 1, 0, 0, 0]), "fusion": 0})
    text = env.render()
    assert "t=0" in text and "E_t+1 {model_0, model_1}" in text and "focal_diversity" in text
    human = ensemble_env.parallel_env(synthetic, render_mode="human")
    human.reset(seed=0)
    assert "initial team" in capsys.readouterr().out
    with pytest.raises(ValueError, match="render_mode='video'"):
        ensemble_env.parallel_env(synthetic, render_mode="video")


def test_render_shows_the_question_text_shortened() -> None:
    fields = {f.name: getattr(hand_cache(), f.name) for f in dataclasses.fields(LogitCache) if f.init}
    texts = ("What is 2 + 2?", "Which   word\nrhymes?", "x" * 300, "Sort these words.")
    env = ensemble_env.parallel_env(LogitCache(**{**fields, "question_text": texts}), render_mode="ansi", split="all")
    env.reset(seed=0)
    env.step({"decider": np.array([1, 1, 1]), "fusion": 0})
    assert "  text       What is 2 + 2?\n" in env.render()
    env.step({"decider": np.array([1, 1, 1]), "fusion": 0})
    assert "  text       Which word rhymes?\n" in env.render()  # one line, spaces collapsed
    env.step({"decider": np.array([1, 1, 1]), "fusion": 0})
    line = next(line for line in env.render().splitlines() if line.startswith("  text"))
    assert line == "  text       " + "x" * (TEXT_WIDTH - 3) + "..."
    plain = ensemble_env.parallel_env(hand_cache(), render_mode="ansi", split="all")
    plain.reset(seed=0)
    plain.step({"decider": np.array([1, 1, 1]), "fusion": 0})
    assert "text" not in plain.render()  # a cache without question text: no line


def test_spaces_are_built_once_and_hold_float32_observations(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(
        synthetic,
        window=30,
        metrics=list(ensemble_env.metrics.METRICS),
        decider_extras=["model_accuracy", "task"],
        fusion_extras=["task"],
    )
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent) is env.observation_spaces[agent]
        assert env.action_space(agent) is env.action_spaces[agent]
    assert isinstance(env.action_space("decider"), spaces.MultiBinary)
    assert env.action_space("fusion") == spaces.Discrete(4)
    assert isinstance(env.state_space, spaces.Box)
    obs, infos = env.reset(seed=1)
    keys = {agent: set(info) for agent, info in infos.items()}
    for _ in range(400):
        for agent in env.agents:
            assert obs[agent].dtype == np.float32
            assert env.observation_space(agent).contains(obs[agent]), agent
        state = env.state()
        assert state.dtype == np.float32 and env.state_space.contains(state)
        np.testing.assert_array_equal(state, np.concatenate([obs["decider"], obs["fusion"]]))
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        obs, _, _, _, infos = env.step(actions)
        assert {agent: set(info) for agent, info in infos.items()} == keys  # fixed keys at reset and step
        for info in infos.values():
            for key, value in info.items():
                assert isinstance(value, float) or (key == "action_mask" and value.dtype == np.int8)


def test_registered_in_pettingzoo() -> None:
    import pettingzoo

    env = pettingzoo.make("parallel", ensemble_env.ENV_ID, cache=hand_cache(), split="all")
    assert isinstance(env, ensemble_env.EnsembleParallelEnv)
    aec = pettingzoo.make("aec", ensemble_env.ENV_ID, cache=hand_cache(), split="all")
    aec.reset(seed=0)
    assert aec.agent_selection == "decider"


# -- seeding, determinism, pickling -------------------------------------------------------------------------


def rollout(env: ensemble_env.EnsembleParallelEnv, seed: int, steps: int) -> list:
    """Observations, rewards and infos of ``steps`` steps with actions drawn from a seeded generator."""
    rng = np.random.default_rng(1234)
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    n_models = env.engine.n_models
    for _ in range(steps):
        if not env.agents:
            obs, _ = env.reset()
            trace.append(obs)
        actions = {"decider": rng.integers(0, 2, n_models), "fusion": int(rng.integers(0, 4))}
        step = env.step(actions)
        trace.append(step)
    return trace


def test_500_steps_deterministic_from_one_seed(synthetic: LogitCache) -> None:
    options = {"order": "shuffled", "episode_length": 120, "window": 50}
    first = rollout(ensemble_env.parallel_env(synthetic, **options), seed=7, steps=500)
    second = rollout(ensemble_env.parallel_env(synthetic, **options), seed=7, steps=500)
    assert_same(first, second)
    other = rollout(ensemble_env.parallel_env(synthetic, **options), seed=8, steps=500)
    with pytest.raises(AssertionError):
        assert_same(first, other)


def test_reset_without_seed_continues_the_generator(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(synthetic, order="shuffled")
    env.reset(seed=3)
    first = env.engine.episode_questions(0).copy()
    env.reset()
    assert not np.array_equal(first, env.engine.episode_questions(0))
    env.reset(seed=3)
    np.testing.assert_array_equal(first, env.engine.episode_questions(0))


def test_sequential_order_and_random_start(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(synthetic, split="train", tasks=["task_1"])
    env.reset(seed=0)
    expected = synthetic.select("train", ["task_1"])
    np.testing.assert_array_equal(env.engine.episode_questions(0), expected)
    short = ensemble_env.parallel_env(synthetic, split="train", episode_length=10)
    starts = set()
    for seed in range(20):
        short.reset(seed=seed)
        stream = short.engine.episode_questions(0)
        assert np.all(np.diff(stream) > 0)  # contiguous piece of the sequential stream
        starts.add(int(stream[0]))
    assert len(starts) > 5


def test_pickle_round_trip_of_a_running_env(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(synthetic, order="shuffled", window=20)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(37):
        env.step({"decider": rng.integers(0, 2, 5), "fusion": int(rng.integers(0, 4))})
    clone = pickle.loads(pickle.dumps(env))
    np.testing.assert_array_equal(clone.state(), env.state())
    for _ in range(100):
        actions = {"decider": rng.integers(0, 2, 5), "fusion": int(rng.integers(0, 4))}
        if not env.agents:
            assert_same(env.reset(), clone.reset())
        assert_same(env.step(actions), clone.step(actions))


def test_default_cache_game_runs() -> None:
    env = ensemble_env.parallel_env()
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"decider", "fusion"}
    assert env.cache.models == ensemble_env.datasets.load("bbh5").models  # the real LLM pool by default
    assert env.engine.n_models == 5 and env.cache.n_tasks == 16
