"""TorchRL adapter: two groups, the centralized state, numeric infos as specs, every decider encoding."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torchrl")

import torch
from torchrl.envs.utils import check_env_specs

import ensemble_env
from ensemble_env import LogitCache
from ensemble_env.adapters.torchrl import GROUP_MAP, torchrl_env
from ensemble_env.game.engine import INFO_KEYS
from ensemble_env.synthetic import make_cache

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def cache() -> LogitCache:
    return make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=3)


@pytest.mark.parametrize("encoding", ["multibinary", "multidiscrete", "subset"])
def test_specs_are_consistent_for_every_encoding(cache: LogitCache, encoding: str) -> None:
    env = torchrl_env(cache, seed=0, decider_action=encoding, episode_length=10)
    check_env_specs(env, seed=0)  # a rollout whose every tensor matches its spec
    assert env.group_map == GROUP_MAP
    action = env.full_action_spec["decider", "action"]
    assert action.shape == {"multibinary": (1, 3), "multidiscrete": (1, 3), "subset": (1,)}[encoding]
    assert env.full_action_spec["fusion", "action"].space.n == 4


def test_the_centralized_state_is_both_observations(cache: LogitCache) -> None:
    env = torchrl_env(cache, seed=0, episode_length=6)
    parallel = ensemble_env.parallel_env(cache)
    assert env.observation_spec["state"].shape == parallel.state_space.shape
    assert env.observation_spec["state"].dtype == torch.float32
    rollout = env.rollout(12, break_when_any_done=False)  # two episodes
    for td in (rollout, rollout["next"]):
        state = td["state"]
        joined = torch.cat([td["decider", "observation"][:, 0], td["fusion", "observation"][:, 0]], dim=-1)
        torch.testing.assert_close(state, joined)
    assert torch.all(rollout["state"] >= torch.as_tensor(parallel.state_space.low))
    assert torch.all(rollout["state"] <= torch.as_tensor(parallel.state_space.high))


def test_infos_become_per_group_specs_and_the_mask_follows_the_question(cache: LogitCache) -> None:
    env = torchrl_env(cache, seed=1, episode_length=8)
    for group in GROUP_MAP:
        assert set(env.observation_spec[group, "info"].keys()) == set(INFO_KEYS)
    rollout = env.rollout(8)
    accuracy = rollout["next", "fusion", "info", "accuracy"][:, 0]
    correct = rollout["next", "fusion", "info", "correct"][:, 0]
    torch.testing.assert_close(accuracy, torch.cumsum(correct, 0) / torch.arange(1, 9))
    torch.testing.assert_close(rollout["next", "decider", "reward"], rollout["next", "fusion", "reward"])
    masks = rollout["fusion", "action_mask"][:, 0]
    questions = rollout["next", "fusion", "info", "question"][:, 0].long()
    np.testing.assert_array_equal(masks.sum(-1).numpy(), cache.n_choices[questions.numpy()])
    assert rollout["next", "done"][-1].item() and not rollout["next", "done"][:-1].any()


def test_seed_makes_rollouts_reproducible(cache: LogitCache) -> None:
    rollouts = []
    for _ in range(2):
        env = torchrl_env(cache, seed=5, order="shuffled", episode_length=20)
        torch.manual_seed(0)
        rollouts.append(env.rollout(20))
    torch.testing.assert_close(rollouts[0]["state"], rollouts[1]["state"])
    torch.testing.assert_close(rollouts[0]["next", "fusion", "reward"], rollouts[1]["next", "fusion", "reward"])


def test_subset_actions_decode_to_their_teams(cache: LogitCache) -> None:
    env = torchrl_env(cache, seed=0, decider_action="subset", episode_length=10)
    td = env.reset()
    for code in range(7):
        td["decider", "action"] = torch.tensor([code])
        td["fusion", "action"] = torch.tensor([0])
        td = env.step(td)["next"]
        team = td["decider", "observation"][0, :3]
        np.testing.assert_array_equal(team.numpy(), (code + 1) >> np.arange(3) & 1)


@pytest.mark.parametrize(("options", "terminated"), [({"episode_length": 7}, False), ({"split": "test"}, True)])
def test_termination_and_truncation_stay_apart(cache: LogitCache, options: dict, terminated: bool) -> None:
    """GAE stops bootstrapping on ``terminated`` only: an exhausted stream terminates, an episode_length cut
    truncates, and the final observation then shows the real next question."""
    env = torchrl_env(cache, seed=0, **options)
    rollout = env.rollout(500)
    last = rollout[-1]["next"]
    for group in GROUP_MAP:
        assert last[group, "done"].item()
        assert last[group, "terminated"].item() is terminated
        assert last[group, "truncated"].item() is not terminated
    assert not rollout["next", "fusion", "done"][:-1].any()
    assert last["terminated"].item() is terminated and last["truncated"].item() is not terminated
    if not terminated:  # a real question: its valid-choice mask marks 2 to 4 choices
        assert 2 <= last["fusion", "action_mask"].sum().item() <= 4


def test_the_per_choice_view_and_scorer() -> None:
    """``fusion_view="per_choice"``: the specs hold, the state follows the view, and the untrained per-choice
    scorer's greedy answer is the mean vote of the team."""
    from ensemble_env.adapters.networks import per_choice_scorer
    from ensemble_env.adapters.wrappers import PerChoiceLayout, per_choice_rows

    env = torchrl_env("bbh5", split="validation", episode_length=32, seed=0, fusion_view="per_choice")
    check_env_specs(env)
    layout = PerChoiceLayout.from_env(env._env)
    rollout = env.rollout(32)
    observation = rollout["fusion", "observation"][:, 0]
    assert observation.shape == (32, layout.size)
    assert rollout["state"].shape[-1] == env._env.state_space.shape[0]
    scorer = per_choice_scorer(layout)
    with torch.no_grad():
        logits = scorer(observation)
    mask = rollout["fusion", "action_mask"][:, 0]
    greedy = torch.where(mask, logits, torch.tensor(-torch.inf)).argmax(-1).numpy()
    rows = per_choice_rows(observation.numpy(), layout)
    vote = np.where(mask.numpy(), rows[..., -2], -np.inf).argmax(-1)
    assert (greedy == vote).all()
    with pytest.raises(ValueError, match="fusion_view='flat'"):
        torchrl_env("toy8", fusion_view="flat")


def test_the_team_scorer_sums_per_model_scores() -> None:
    """The decider's factorised team logits: logit of team k = the sum of its members' scores, so a model's score
    moves every team that holds it; untrained, every team is equally likely."""
    from ensemble_env.adapters.networks import team_scorer
    from ensemble_env.game.actions import subset_masks

    scorer = team_scorer(3, size=6, hidden=8)
    observation = torch.randn(4, 6)
    with torch.no_grad():
        assert torch.equal(scorer(observation), torch.zeros(4, 7))  # the start: the uniform team
        torch.nn.init.normal_(scorer.out.weight)
        torch.nn.init.normal_(scorer.out.bias)
        logits = scorer(observation)
        scores = scorer.out(scorer.net(observation))
    assert logits.shape == (4, 7)
    bits = torch.as_tensor(subset_masks(3).astype(np.float32))
    torch.testing.assert_close(logits, scores @ bits.T)
    torch.testing.assert_close(logits[:, 2], scores[:, 0] + scores[:, 1])  # index 2: team 0b011, models 0 and 1
    with pytest.raises(ValueError, match="hidden must be an integer >= 1"):
        team_scorer(3, size=6, hidden=0)
