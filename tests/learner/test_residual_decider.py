"""The residual decider (``decider_policy="residual"``): the index decider plus a network of each team's and its
members' record, starting at zero."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo import algorithms  # noqa: E402
from ensemble_mappo.agents import Agents  # noqa: E402
from ensemble_mappo.benchmark import protocols  # noqa: E402
from ensemble_mappo.config import TrainConfig  # noqa: E402
from ensemble_mappo.frame import make_env  # noqa: E402
from ensemble_mappo.residual import RESIDUAL_FEATURES, TeamResidualActor  # noqa: E402


def _deciders(feedback: str) -> tuple[TeamResidualActor, torch.Tensor, torch.nn.Module]:
    cache = make_cache(n_models=3, n_questions=480, n_tasks=8, accuracy=[0.5, 0.6, 0.7], seed=1)
    options = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, 3, feedback)["env"]
    venv = make_env(cache, options, num_envs=4, split="train", episode_length=32)
    torch.manual_seed(0)
    residual = Agents.build(venv, 16, decider_policy="residual").decider
    torch.manual_seed(0)
    index = Agents.build(venv, 16, decider_policy="index").decider
    assert isinstance(residual, TeamResidualActor)
    obs, _ = venv.reset(seed=0)
    for _ in range(5):  # a few answered questions, so the record is not empty
        obs, *_ = venv.step({"decider": np.eye(3, dtype=np.int8)[[0, 1, 2, 0]], "fusion": np.zeros(4, dtype=np.int64)})
    return residual, torch.from_numpy(obs["decider"]), index


@pytest.mark.parametrize("feedback", ["team", "all"])
def test_the_untrained_residual_decider_is_the_untrained_index_decider(feedback: str) -> None:
    residual, inputs, index = _deciders(feedback)
    with torch.no_grad():
        np.testing.assert_array_equal(residual(inputs).numpy(), index(inputs).numpy())
        np.testing.assert_allclose(residual(inputs).numpy(), 0.0)  # the size prior at 0.5: uniform over the teams


def test_the_residual_reads_each_team_s_members_and_can_be_switched_off() -> None:
    residual, inputs, _ = _deciders("team")
    features = residual.logits.features(inputs)
    assert features.shape == (inputs.shape[0], 7, len(RESIDUAL_FEATURES))
    rates = inputs[:, residual.logits.model_rates]
    team_ab = 2  # team 3 in the subset encoding: models 0 and 1
    column = {name: k for k, name in enumerate(RESIDUAL_FEATURES)}
    np.testing.assert_allclose(features[:, team_ab, column["members_rate_mean"]], rates[:, :2].mean(-1), rtol=1e-6)
    np.testing.assert_allclose(features[:, team_ab, column["members_rate_min"]], rates[:, :2].amin(-1))
    np.testing.assert_allclose(features[:, 6, column["members_rate_max"]], rates.amax(-1))  # the whole pool
    counts_of_models = inputs[:, residual.logits.model_counts]
    for k, team in enumerate(residual.logits.members.tolist()):  # every team, by hand: its members' min and max
        members = [i for i, member in enumerate(team) if member]
        for name, values in (("rate", rates), ("count", counts_of_models)):
            assert torch.equal(features[:, k, column[f"members_{name}_min"]], values[:, members].amin(-1)), (k, name)
            assert torch.equal(features[:, k, column[f"members_{name}_max"]], values[:, members].amax(-1)), (k, name)
    with torch.no_grad():
        residual.logits.g[-1].bias.fill_(0.0)
        residual.logits.g[-1].weight.normal_()
        on = residual(inputs)
        residual.logits.residual.fill_(0.0)
        off = residual(inputs)
    assert not torch.allclose(on, off)
    np.testing.assert_allclose(off.numpy(), residual.logits.index(inputs).detach().numpy())  # off: the index's logits
    counts = features[:, :, column["count"]]
    assert float(counts.max()) < 1.0 and float(counts.min()) >= 0.0  # count features n / (n + 16)


def test_the_residual_decider_starts_from_the_size_prior_only() -> None:
    with pytest.raises(ValueError, match="decider_policy='residual' with decider_start='offline'"):
        TrainConfig(decider_policy="residual", decider_start="offline")
    cache = make_cache(n_models=3, n_questions=120, n_tasks=2, seed=0)
    venv = make_env(cache, {"decider_extras": ("model_accuracy",)}, num_envs=2, split="train", episode_length=32)
    with pytest.raises(ValueError, match="team_record"):
        Agents.build(venv, 16, decider_policy="residual")


def test_the_config_s_gain_scales_the_network_and_zero_plays_the_index_alone() -> None:
    cache = make_cache(n_models=3, n_questions=480, n_tasks=8, accuracy=[0.5, 0.6, 0.7], seed=1)
    options = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, 3, "team")["env"]
    venv = make_env(cache, options, num_envs=4, split="train", episode_length=32)
    obs, _ = venv.reset(seed=0)
    for _ in range(5):
        obs, *_ = venv.step({"decider": np.eye(3, dtype=np.int8)[[0, 1, 2, 0]], "fusion": np.zeros(4, dtype=np.int64)})
    inputs = torch.from_numpy(obs["decider"])
    deciders = {}
    for gain in (1.0, 0.0, 2.0):
        torch.manual_seed(0)
        deciders[gain] = Agents.build(venv, 16, decider_policy="residual", residual_gain=gain).decider
    state = deciders[1.0].state_dict()
    state["logits.g.4.weight"] = torch.randn_like(state["logits.g.4.weight"])
    for decider in deciders.values():
        decider.load_state_dict(state)  # the same checkpoint: the gain is not part of it
    with torch.no_grad():
        on, off, double = (deciders[gain](inputs) for gain in (1.0, 0.0, 2.0))
        index = deciders[0.0].logits.index(inputs)
    assert not torch.allclose(on, off)
    torch.testing.assert_close(off, index)
    torch.testing.assert_close(double - index, 2.0 * (on - index))
    assert TrainConfig(decider_residual_gain=0.0).decider_residual_gain == 0.0
    with pytest.raises(ValueError, match="decider_residual_gain"):
        TrainConfig(decider_residual_gain=-1.0)
