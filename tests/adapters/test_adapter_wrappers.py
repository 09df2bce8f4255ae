"""The adapters' learnability options keep the game: ``ensemble_env.adapters.wrappers`` and the aligned decider
credit of ``SingleRoleEnv`` (no MARL library needed).

Same seeds and same actions give the same rewards, infos, episode ends (terminated vs truncated) and decider
observations as the raw environment over whole episodes; the per-choice layout matches a hand-computed example;
the aligned credit is the game's reward sequence shifted by one question.
"""

from __future__ import annotations

import numpy as np
import pytest

import ensemble_env
from ensemble_env.adapters.sb3 import SingleRoleEnv
from ensemble_env.adapters.wrappers import (
    PerChoiceFusion,
    PerChoiceLayout,
    aligned_decider_rewards,
    answer_reward,
    fusion_answer,
    per_choice_observation,
    per_choice_rows,
)
from ensemble_env.cache import LogitCache
from ensemble_env.game.engine import check_seed


def _random_actions(env, rng: np.random.Generator) -> dict:
    team = rng.integers(0, 2, env.cache.n_models).astype(np.int8)
    team[rng.integers(env.cache.n_models)] = 1
    return {"decider": team, "fusion": int(rng.integers(env.cache.max_choices))}


def _play(env, seed: int, episodes: int = 2) -> list[tuple]:
    """Every step of ``episodes`` episodes under seeded random actions: (obs, rewards, ends, infos)."""
    rng = np.random.default_rng(seed)
    record = []
    for episode in range(episodes):
        obs, infos = env.reset(seed=seed + episode)
        record.append((obs, None, None, None, infos))
        while env.agents:
            obs, rewards, terminations, truncations, infos = env.step(_random_actions(env, rng))
            record.append((obs, rewards, terminations, truncations, infos))
    return record


def _same_infos(left: dict, right: dict) -> bool:
    if left.keys() != right.keys():
        return False
    return all(
        left[agent].keys() == right[agent].keys()
        and all(np.array_equal(left[agent][key], right[agent][key]) for key in left[agent])
        for agent in left
    )


@pytest.mark.parametrize(
    "options",
    [
        {"cache": "toy8", "split": "train", "order": "shuffled", "episode_length": 64},  # truncated episodes
        {"cache": "toy8", "split": "test", "fusion_extras": ("task",)},  # the whole stream: terminated
        {
            "cache": "bbh5",
            "split": "validation",
            "order": "shuffled",
            "episode_length": 50,
            "decider_extras": ("task",),
        },
    ],
    ids=["toy8-truncated", "toy8-terminated-task", "bbh5-task"],
)
def test_per_choice_fusion_keeps_the_game(options: dict) -> None:
    raw = ensemble_env.parallel_env(**options)
    wrapped = PerChoiceFusion(ensemble_env.parallel_env(**options))
    raw_steps, wrapped_steps = _play(raw, seed=5), _play(wrapped, seed=5)
    assert len(raw_steps) == len(wrapped_steps)
    ends = set()
    for (obs, rewards, terms, truncs, infos), (w_obs, w_rewards, w_terms, w_truncs, w_infos) in zip(
        raw_steps, wrapped_steps, strict=True
    ):
        assert rewards == w_rewards and terms == w_terms and truncs == w_truncs
        assert _same_infos(infos, w_infos)
        assert np.array_equal(obs["decider"], w_obs["decider"])
        expected = per_choice_observation(obs["fusion"], raw.engine.layout, wrapped.layout)
        assert np.array_equal(w_obs["fusion"], expected)
        assert wrapped.observation_space("fusion").contains(w_obs["fusion"])
        if terms is not None and (terms["fusion"] or truncs["fusion"]):
            ends.add("terminated" if terms["fusion"] else "truncated")
    assert ends == ({"truncated"} if "episode_length" in options else {"terminated"})
    total = sum(step[1]["fusion"] for step in raw_steps if step[1] is not None)
    assert total == sum(step[1]["fusion"] for step in wrapped_steps if step[1] is not None)


def test_per_choice_state_and_spaces() -> None:
    env = PerChoiceFusion(ensemble_env.parallel_env("toy8", fusion_extras=("task",), decider_extras=("task",)))
    obs, _ = env.reset(seed=0)
    assert env.observation_space("fusion") is env.observation_space("fusion")
    assert env.observation_spaces["fusion"] is env.observation_space("fusion")
    state = env.state()
    assert state.dtype == np.float32 and env.state_space.contains(state)
    assert np.array_equal(state, np.concatenate([obs["decider"], obs["fusion"]]))
    assert env.layout.size == 10 * (8 + 2) + 8 + 5  # C rows of N + 2, the team mask, the task one-hot


def test_per_choice_layout_by_hand(tiny_cache: LogitCache) -> None:
    """N = 3, C = 3: model 1 outside the team, choice 2 invalid, task "beta"."""
    env = ensemble_env.parallel_env(tiny_cache, fusion_extras=("task",))
    raw = env.engine.layout
    layout = PerChoiceLayout.from_env(env)
    obs = np.zeros(raw.fusion_size, dtype=np.float32)
    obs[raw.fusion["probs"]] = [0.8, 0.2, 0.0, 0.0, 0.0, 0.0, 0.4, 0.6, 0.0]  # model-major: model i, choice c
    obs[raw.fusion["team_mask"]] = [1, 0, 1]
    obs[raw.fusion["action_mask"]] = [1, 1, 0]
    obs[raw.fusion["task"]] = [0, 1]
    obs[raw.fusion["rewards"]] = -1.0  # the reward history is not part of the per-choice view
    expected = np.array(
        [
            *[0.8, 0.0, 0.4, 0.6, 1.0],  # choice 0: m0 0.8, m1 0 (not a member), m2 0.4, mean (0.8 + 0.4) / 2, valid
            *[0.2, 0.0, 0.6, 0.4, 1.0],  # choice 1: mean (0.2 + 0.6) / 2
            *[0.0, 0.0, 0.0, 0.0, 0.0],  # choice 2: not a valid choice
            *[1.0, 0.0, 1.0],  # the team mask
            *[0.0, 1.0],  # the task one-hot
        ],
        dtype=np.float32,
    )
    view = per_choice_observation(obs, raw, layout)
    np.testing.assert_allclose(view, expected, rtol=0, atol=1e-7)
    np.testing.assert_allclose(per_choice_rows(view, layout)[:, 3], [0.6, 0.4, 0.0], atol=1e-7)
    assert layout.tail == {"team_mask": slice(15, 18), "task": slice(18, 20)}
    # batched: the same rows for every copy; an empty team has a zero mean
    batch = np.stack([obs, obs])
    batch[1, raw.fusion["team_mask"]] = 0
    batch[1, raw.fusion["probs"]] = 0
    views = per_choice_observation(batch, raw, layout)
    np.testing.assert_allclose(views[0], expected, atol=1e-7)
    assert np.all(per_choice_rows(views[1], layout)[:, :4] == 0)


def test_per_choice_refuses_games_without_a_fusion_agent(tiny_cache: LogitCache) -> None:
    with pytest.raises(ValueError, match="decider"):
        PerChoiceFusion(
            ensemble_env.parallel_env(tiny_cache, fusion_agents="per_model", fusion_action="weights", decider=False)
        )


def test_aligned_decider_rewards_by_hand() -> None:
    rewards = np.array([1.0, -1.5, 1.0, -2.0, 1.0, 1.0])
    done = np.array([False, False, True, False, False, False])  # an episode ends at step 2; the rollout goes on
    aligned, known = aligned_decider_rewards(rewards, done)
    np.testing.assert_array_equal(aligned, [-1.5, 1.0, 0.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(known, [True, True, False, True, True, False])
    columns, known_columns = aligned_decider_rewards(np.stack([rewards, rewards], 1), np.stack([done, done], 1))
    np.testing.assert_array_equal(columns[:, 1], aligned)
    assert known_columns.shape == (6, 2)
    with pytest.raises(ValueError, match="share one shape"):
        aligned_decider_rewards(rewards, done[:-1])


def _decider_steps(env: SingleRoleEnv, seed: int, steps: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    record = []
    for _ in range(steps):
        team = rng.integers(0, 2, env.action_space.shape).astype(np.int8)
        team[0] = 1
        obs, reward, terminated, truncated, info = env.step(team)
        record.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            env.reset(seed=seed + len(record))
    return record


@pytest.mark.parametrize(
    "options",
    [
        {"cache": "toy8", "order": "shuffled", "episode_length": 40},
        {"cache": "toy8", "split": "test", "diversity_bonus": 0.3, "alpha": 0.5, "size_penalty_mode": "always"},
        {"cache": "bbh5", "order": "shuffled", "episode_length": 30, "decider_extras": ("task",)},
        {"cache": "tiny", "use_costs": True, "alpha": 2.0},
    ],
    ids=["toy8", "toy8-bonus-always", "bbh5-task", "tiny-costs"],
)
def test_aligned_credit_is_the_next_questions_reward(options: dict, tiny_cache: LogitCache) -> None:
    if options["cache"] == "tiny":
        options = {**options, "cache": tiny_cache}
    game, aligned = SingleRoleEnv("decider", **options), SingleRoleEnv("decider", credit="aligned", **options)
    game_steps, aligned_steps = _decider_steps(game, 3, 90), _decider_steps(aligned, 3, 90)
    for step, (game_step, aligned_step) in enumerate(zip(game_steps, aligned_steps, strict=True)):
        obs, _, terminated, truncated, info = game_step
        assert np.array_equal(obs, aligned_step[0]) and info == aligned_step[4]  # the same game, step by step
        assert (terminated, truncated) == aligned_step[2:4]
        if terminated or truncated:
            assert aligned_step[1] == 0.0  # the committed team answers nothing in this episode
        elif step + 1 < len(game_steps):  # credited with the reward the game pays at the next step
            assert aligned_step[1] == game_steps[step + 1][1] == game_steps[step + 1][4]["reward"]
    if options.get("split") != "test":  # (the test stream of toy8 is longer than the steps played)
        assert any(step[2] or step[3] for step in game_steps)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="credit='aligned'"):
        SingleRoleEnv("fusion", cache="toy8", credit="aligned")
    with pytest.raises(ValueError, match="credit='late'"):
        SingleRoleEnv("decider", cache="toy8", credit="late")
    with pytest.raises(ValueError, match="fusion_view='per_choice'"):
        SingleRoleEnv("decider", cache="toy8", fusion_view="per_choice")
    env = SingleRoleEnv("fusion", cache="toy8", fusion_view="per_choice", fusion_extras=("task",))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (113,) and env.observation_space.contains(obs)
    assert env.action_masks().shape == (10,)


# -- reliability round 3 (issue 34, item 5): the wrappers take exactly what the game takes -------------------------


class _Script:
    """A fixed fuser playing the given actions in turn (the last one from then on)."""

    def __init__(self, *actions: object) -> None:
        self.actions, self.calls = list(actions), 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        action = self.actions[min(self.calls, len(self.actions) - 1)]
        self.calls += 1
        return np.array([action], dtype=object if isinstance(action, str) else None)


def test_aligned_credit_refuses_a_fused_answer_the_game_refuses() -> None:
    """The look-ahead played 2.6 as answer 2 (int()); the game refuses it: so does the look-ahead now, with the
    game's own message."""
    env = SingleRoleEnv("decider", cache="toy8", credit="aligned", other=_Script(1, 2.6))
    env.reset(seed=0)
    with pytest.raises(ValueError) as excinfo:
        env.step(np.ones(8, np.int8))  # plays answer 1, then looks ahead with 2.6
    game = ensemble_env.parallel_env("toy8")
    game.reset(seed=0)
    with pytest.raises(ValueError) as refused:
        game.step({"decider": np.ones(8, np.int8), "fusion": 2.6})
    assert str(excinfo.value) == str(refused.value)
    assert "an answer must be an integer" in str(excinfo.value) and "2.6" in str(excinfo.value)


@pytest.mark.parametrize(
    "answer", [2, 2.0, np.int8(2), np.uint64(2), np.float32(2.0), np.array([2]), True, -3, 10**6], ids=repr
)
def test_aligned_credit_accepts_what_the_game_accepts_and_pays_its_reward(answer: object) -> None:
    aligned = SingleRoleEnv("decider", cache="toy8", credit="aligned", other=_Script(answer))
    game = SingleRoleEnv("decider", cache="toy8", other=_Script(answer))
    aligned.reset(seed=4)
    game.reset(seed=4)
    team = np.ones(8, np.int8)
    credits = [aligned.step(team)[1] for _ in range(6)]
    rewards = [game.step(team)[1] for _ in range(7)]
    assert credits == rewards[1:]  # the game's next reward, for an answer the game takes as it is


def test_answer_reward_validates_as_the_game_does() -> None:
    env = ensemble_env.parallel_env("toy8")
    env.reset(seed=1)
    engine = env.unwrapped.engine
    assert answer_reward(engine, 3) == answer_reward(engine, 3.0) == answer_reward(engine, np.int16(3))
    for action in (2.6, float("nan"), float("inf"), "2", None, [1, 2], np.array([[1, 2]]), 2**64):
        with pytest.raises(ValueError) as wrapper:
            answer_reward(engine, action)
        with pytest.raises(ValueError) as game:
            env.check_action("fusion", action)
        assert str(wrapper.value) == str(game.value)
    assert fusion_answer(engine, np.array([7.0])) == 7


def test_fusion_answer_of_a_weights_game_is_the_games_answer() -> None:
    """A weighting fuser's action is its N weights; the aligned credit scores the answer the game derives."""
    env = ensemble_env.parallel_env("toy8", fusion_action="weights")
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        weights = rng.random(8).astype(np.float32)
        expected, reward = fusion_answer(env.engine, weights), answer_reward(env.engine, weights)
        _, rewards, _, _, infos = env.step({"decider": np.ones(8, np.int8), "fusion": weights})
        assert infos["fusion"]["answer"] == expected and rewards["fusion"] == reward
    with pytest.raises(ValueError, match=r"weights must be in \[0, 1\]"):
        answer_reward(env.engine, np.full(8, 1.5))


def test_per_choice_view_refuses_a_weights_game_naming_the_option() -> None:
    with pytest.raises(ValueError, match=r"needs fusion_action='answer'.*fusion_action='weights'"):
        PerChoiceFusion(ensemble_env.parallel_env("toy8", fusion_action="weights"))
    with pytest.raises(ValueError, match=r"needs fusion_action='answer'.*fusion_action='weights'"):
        SingleRoleEnv("fusion", cache="toy8", fusion_view="per_choice", decider=False, fusion_action="weights")


def test_aligned_decider_rewards_of_an_empty_rollout_is_empty() -> None:
    """A batch with no step: nothing to credit (callers index and average it as any other batch)."""
    for shape in [(0,), (0, 3)]:
        aligned, known = aligned_decider_rewards(np.zeros(shape), np.zeros(shape, bool))
        assert aligned.shape == known.shape == shape and aligned.dtype == np.float64 and known.dtype == bool
        assert not known.any() and aligned[known].size == 0
    aligned, known = aligned_decider_rewards([], [])
    assert aligned.shape == known.shape == (0,)


def test_aligned_decider_rewards_takes_numbers_and_truth_values_only() -> None:
    np.testing.assert_array_equal(aligned_decider_rewards([1, 2, 3], [0, 1, 0])[0], [2.0, 0.0, 0.0])
    for rewards, done, message in (
        (["1.5", "2"], [False, False], "rewards must hold real numbers"),
        ([1.0, 2.0], ["no", "no"], "done must hold booleans"),
        ([1.0, 2.0], [0.5, 0.0], r"done must hold booleans \(or 0 and 1\), found 0.5"),
        ([1.0, 2.0], [2, 0], "found 2"),
        ([1.0, None], [0, 0], "rewards must hold real numbers"),
        ([[1.0], [2.0, 3.0]], [0, 0], "rewards cannot be read as an array"),
    ):
        with pytest.raises(ValueError, match=message):
            aligned_decider_rewards(rewards, done)


@pytest.mark.parametrize("seed", [np.int64(7), np.uint8(7), np.int32(7), 7], ids=repr)
def test_wrappers_take_the_seeds_the_game_takes(seed: object) -> None:
    raw = ensemble_env.parallel_env("toy8")
    expected, _ = raw.reset(seed=7)
    for role in ("decider", "fusion"):
        obs, _ = SingleRoleEnv(role, cache="toy8").reset(seed=seed)
        assert np.array_equal(obs, expected[role])
    obs, _ = PerChoiceFusion(ensemble_env.parallel_env("toy8")).reset(seed=seed)
    assert np.array_equal(obs["decider"], expected["decider"])


@pytest.mark.parametrize("seed", [True, np.bool_(False), -1, np.int64(-1), 7.0, "7", [7]], ids=repr)
def test_wrappers_refuse_the_seeds_the_game_refuses(seed: object) -> None:
    with pytest.raises(ValueError, match="seed must be None or a non-negative integer"):
        check_seed(seed)
    with pytest.raises(ValueError, match=r"SingleRoleEnv\.reset: seed must be None or a non-negative integer"):
        SingleRoleEnv("decider", cache="toy8").reset(seed=seed)
    with pytest.raises(ValueError, match="seed must be None or a non-negative integer"):
        PerChoiceFusion(ensemble_env.parallel_env("toy8")).reset(seed=seed)


def test_rllib_aligned_turn_refuses_what_the_game_refuses() -> None:
    """RLlib's aligned credit scores the fuser's turn at once: 2.6 is refused there, and the turn is not taken."""
    pytest.importorskip("ray")
    from ensemble_env.adapters.rllib import EnsembleMultiAgentEnv

    env = EnsembleMultiAgentEnv({"cache": "toy8", "credit": "aligned"})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="an answer must be an integer"):
        env.step({"fusion": 2.6})
    _, rewards, _, _, _ = env.step({"fusion": 2.0})  # still the fuser's turn; 2.0 is answer 2, as in the game
    assert set(rewards) == {"fusion"}
