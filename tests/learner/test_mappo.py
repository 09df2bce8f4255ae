"""Unit tests of the reference MAPPO pieces: GAE, the clipped losses, value normalisation, masking, checkpoints."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ensemble_env.cache import LogitCache, load_default_cache  # noqa: E402
from ensemble_env.cache.digest import cache_digest  # noqa: E402
from ensemble_env.game.records import Counter  # noqa: E402
from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo import algorithms  # noqa: E402
from ensemble_mappo.agents import Agents  # noqa: E402
from ensemble_mappo.benchmark import protocols  # noqa: E402
from ensemble_mappo.checkpoint import load_checkpoint, save_checkpoint, unpack_arrays  # noqa: E402
from ensemble_mappo.collection import collect  # noqa: E402
from ensemble_mappo.config import TrainConfig, config_from_dict, field_docs, load_config  # noqa: E402
from ensemble_mappo.frame import make_env, make_optimizer, update  # noqa: E402
from ensemble_mappo.mappo import (  # noqa: E402
    AGENT_LOSS_KEYS,
    MAPPOLearner,
    advantages_and_returns,
    env_options,
    losses_row,
)
from ensemble_mappo.networks import (  # noqa: E402
    VALUE_HEADS,
    CentralCritic,
    DeciderActor,
    FusionActor,
    ValueNormalizer,
    bernoulli_entropy,
    bernoulli_log_prob,
    categorical_entropy,
)
from ensemble_mappo.ppo import (  # noqa: E402
    AGENTS,
    UpdateStats,
    bootstrap_values,
    clipped_policy_loss,
    clipped_value_loss,
    compute_gae,
)
from ensemble_mappo.presets import PARTIAL  # noqa: E402
from ensemble_mappo.progress_format import progress_columns  # noqa: E402
from ensemble_mappo.runs import RunFileError  # noqa: E402
from ensemble_mappo.training import episode_plan, train  # noqa: E402


# -- GAE ------------------------------------------------------------------------------------------------------
def test_compute_gae_by_hand_with_a_truncation() -> None:
    # copy 0: the episode is truncated after step 1 (its last state is worth 3.0); a new one starts at step 2.
    # copy 1: no episode end; the state after the rollout is worth 1.0.
    gamma, lam = 0.9, 0.5
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0]])
    values = torch.tensor([[0.5, 0.0], [1.0, 0.0], [0.0, 0.0]])
    dones = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    final_values = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 0.0]])
    last_value = torch.tensor([4.0, 1.0])

    next_values = bootstrap_values(values, last_value, dones, final_values)
    assert next_values.tolist() == [[1.0, 0.0], [3.0, 0.0], [4.0, 1.0]]
    advantages, returns = compute_gae(rewards, values, next_values, dones, gamma, lam)
    # copy 0: delta2 = 2 + 0.9 * 4 - 0 = 5.6; delta1 = 0 + 0.9 * 3 - 1 = 1.7 (no carry over the end);
    #         delta0 = 1 + 0.9 * 1 - 0.5 = 1.4, A0 = 1.4 + 0.45 * 1.7 = 2.165
    # copy 1: delta2 = 0.9, A1 = 0.45 * 0.9 = 0.405, A0 = 0.45 * 0.405 = 0.18225
    expected = [[2.165, 0.18225], [1.7, 0.405], [5.6, 0.9]]
    np.testing.assert_allclose(advantages.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(returns.numpy(), np.array(expected) + values.numpy(), rtol=1e-6)


def test_compute_gae_termination_bootstraps_from_zero() -> None:
    rewards = torch.tensor([[1.0], [1.0]])
    values = torch.tensor([[2.0], [2.0]])
    dones = torch.tensor([[0.0], [1.0]])
    # a terminated episode's final value is 0 (the trainer passes 0 there); the rollout's last value is ignored
    next_values = bootstrap_values(values, torch.tensor([100.0]), dones, torch.zeros(2, 1))
    advantages, _ = compute_gae(rewards, values, next_values, dones, gamma=1.0, gae_lambda=1.0)
    # delta1 = 1 - 2 = -1; delta0 = 1 + 2 - 2 = 1, A0 = 1 + (-1) = 0
    assert advantages.squeeze(1).tolist() == [0.0, -1.0]


def test_compute_gae_lambda_one_is_the_discounted_return() -> None:
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.zeros(3, 1)
    next_values = bootstrap_values(values, torch.tensor([10.0]), torch.zeros(3, 1), torch.zeros(3, 1))
    _, returns = compute_gae(rewards, values, next_values, torch.zeros(3, 1), gamma=0.5, gae_lambda=1.0)
    assert returns.squeeze(1).tolist() == pytest.approx([1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 10, 2 + 1.5 + 2.5, 3 + 5])


# -- losses ---------------------------------------------------------------------------------------------------
def test_clipped_policy_loss_by_hand() -> None:
    old = torch.zeros(3)
    log_probs = torch.log(torch.tensor([1.5, 0.5, 1.1])).requires_grad_()
    advantages = torch.tensor([1.0, 1.0, -1.0])
    loss, approx_kl, clip_fraction = clipped_policy_loss(log_probs, old, advantages, clip_coef=0.2)
    # min(1.5, 1.2) = 1.2 ; min(0.5, 0.8) = 0.5 ; min(-1.1, -1.1) = -1.1  -> loss = -(0.6) / 3
    assert loss.item() == pytest.approx(-0.2)
    assert clip_fraction.item() == pytest.approx(2 / 3)
    ratios = np.array([1.5, 0.5, 1.1])
    assert approx_kl.item() == pytest.approx(np.mean((ratios - 1) - np.log(ratios)), rel=1e-5)
    loss.backward()
    # the clipped sample (ratio 1.5 > 1.2 with A > 0) gives no gradient; the others -ratio * A / 3
    assert log_probs.grad is not None
    np.testing.assert_allclose(log_probs.grad.numpy(), [0.0, -0.5 / 3, 1.1 / 3], rtol=1e-5)


def test_clipped_value_loss_by_hand() -> None:
    values = torch.tensor([1.0, 0.0])
    old = torch.tensor([0.5, 0.5])
    targets = torch.tensor([2.0, 0.0])
    # sample 0: unclipped (1 - 2)^2 = 1, clipped (0.7 - 2)^2 = 1.69 -> 1.69
    # sample 1: unclipped 0, clipped (0.3 - 0)^2 = 0.09 -> 0.09
    assert clipped_value_loss(values, old, targets, 0.2).item() == pytest.approx(0.5 * (1.69 + 0.09) / 2)
    assert clipped_value_loss(values, old, targets, None).item() == pytest.approx(0.5 * (1.0 + 0.0) / 2)


# -- the update's statistics, by name ------------------------------------------------------------------------------
def _one_rollout(seed: int = 0) -> tuple[Any, Agents, Any, Any, Any, TrainConfig]:
    """A 2-copy, 16-step rollout on the default cache, its advantages and returns, and a config of one
    epoch of one minibatch (the update's statistics are then those of the networks before any step)."""
    cache = _default_cache()
    config = TrainConfig(update_epochs=1, num_minibatches=1, gamma=0.9)
    venv = make_env(cache, env_options(config, cache), num_envs=2, split="train", episode_length=32)
    torch.manual_seed(seed)
    agents = Agents.build(venv, hidden=8)
    rollout = agents.rollout(venv, 16)
    obs, _ = venv.reset(seed=seed)
    collect(venv, agents, rollout, obs, torch.Generator().manual_seed(seed))
    # as if another policy had collected: ratios from e^-0.4 to e^0.4, so that some are clipped and the policy
    # loss, the KL and the clip fraction all differ from 0 and from each other
    shift = torch.linspace(-0.4, 0.4, rollout.log_probs.numel()).reshape(rollout.log_probs.shape)
    rollout.log_probs.add_(shift)
    advantages, returns = advantages_and_returns(agents, rollout, venv.state(), config)
    return venv, agents, rollout, advantages, returns, config


def _standardised(values: Any) -> Any:
    flat = values.reshape(-1)
    return (flat - flat.mean()) / (flat.std() + 1e-8)


@pytest.mark.parametrize("learners", [("decider", "fusion"), ("fusion",)])
def test_ppo_update_names_each_statistic_after_what_it_measures(learners: tuple[str, ...]) -> None:
    venv, agents, rollout, advantages, returns, config = _one_rollout()
    # the same networks, built again from the same seed, measured by hand before the update steps
    torch.manual_seed(0)
    reference = Agents.build(venv, hidden=8)
    reference.value_norm.load_state_dict(agents.value_norm.state_dict())
    learner = MAPPOLearner(config, venv, agents)
    generator = torch.Generator().manual_seed(0)
    update(learner, make_optimizer(agents, config), rollout, venv.state(), config, generator, (*learners, "critic"))
    stats = learner.last_stats
    assert isinstance(stats, UpdateStats)

    states = rollout.states.reshape(-1, rollout.states.shape[-1])
    old_values = reference.value_norm.denormalize(rollout.values).reshape(-1, len(VALUE_HEADS))
    flat_returns = returns.reshape(-1, len(VALUE_HEADS))
    residual = (flat_returns - old_values).var(0) / flat_returns.var(0)
    for column, agent in enumerate(AGENTS):
        assert stats.explained_variance[agent] == pytest.approx(1.0 - float(residual[column]), rel=1e-4, abs=1e-6)
    reference.value_norm.update(returns)
    targets = reference.value_norm.normalize(returns).reshape(-1, len(VALUE_HEADS))
    value_loss = clipped_value_loss(
        reference.critic(states), rollout.values.reshape(-1, len(VALUE_HEADS)), targets, config.clip_coef
    )
    loss = value_loss.sum()
    for head, expected in zip(VALUE_HEADS, value_loss.tolist(), strict=True):
        assert stats.value_loss[head] == pytest.approx(expected, rel=1e-5)
    assert stats.total_value_loss == pytest.approx(sum(value_loss.tolist()), rel=1e-6)

    for agent in learners:
        actor = getattr(reference, agent)
        inputs = rollout.inputs[agent].reshape(-1, rollout.inputs[agent].shape[-1])
        actions = rollout.actions[agent].reshape(-1, *rollout.actions[agent].shape[2:])
        log_prob, entropy = actor.evaluate(inputs, actions)
        column = AGENTS.index(agent)
        old_log_prob = rollout.log_probs[..., column].reshape(-1)
        policy_loss, approx_kl, clip_fraction = clipped_policy_loss(
            log_prob, old_log_prob, _standardised(advantages[..., column]), config.clip_coef
        )
        assert stats.entropy[agent] == pytest.approx(float(entropy.detach().mean()), rel=1e-5)
        assert stats.policy_loss[agent] == pytest.approx(float(policy_loss.detach()), rel=1e-4)
        assert stats.approx_kl[agent] == pytest.approx(float(approx_kl), rel=1e-4)
        assert stats.clip_fraction[agent] == pytest.approx(float(clip_fraction))
        assert len({stats.policy_loss[agent], stats.approx_kl[agent], stats.clip_fraction[agent], 0.0}) == 4
        loss = loss + policy_loss - config.ent_coef * entropy.mean()
    loss.backward()
    for name in (*learners, "critic"):
        grads = torch.cat([p.grad.reshape(-1) for p in getattr(reference, name).parameters()])
        assert stats.grad_norm[name] == pytest.approx(float(torch.linalg.vector_norm(grads)), rel=1e-4)

    # an actor that does not learn has no statistics, and the log leaves its columns empty
    assert set(stats.policy_loss) == set(stats.entropy) == set(stats.approx_kl) == set(learners)
    assert set(stats.grad_norm) == {*learners, "critic"} and set(stats.value_loss) == set(VALUE_HEADS)
    row = losses_row(stats)
    assert (
        set(row) <= set(progress_columns(tuple(_default_cache().models)))
        and row["losses/value_loss"] == stats.total_value_loss
    )
    assert row["losses/fusion_entropy"] == stats.entropy["fusion"]
    assert row["losses/critic_grad_norm"] == stats.grad_norm["critic"]
    decider_columns = {f"losses/decider_{key}" for key in AGENT_LOSS_KEYS if key != "explained_variance"}
    if "decider" in learners:
        assert decider_columns <= set(row)
    else:
        assert not decider_columns & set(row) and "losses/decider_explained_variance" in row


# -- value normalisation ----------------------------------------------------------------------------------------
def test_value_normalizer_matches_the_statistics_of_everything_seen() -> None:
    rng = np.random.default_rng(0)
    # two heads with different scales: each keeps its own statistics
    batches = [np.stack([rng.normal(5.0, 3.0, size=n), rng.normal(-1.0, 0.1, size=n)], 1) for n in (7, 100, 33)]
    norm = ValueNormalizer(n_heads=2)
    assert norm.normalize(torch.tensor([[2.5, 1.0]])).tolist() == [[2.5, 1.0]]  # identity before any update
    for batch in batches:
        norm.update(torch.tensor(batch))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(norm.mean.numpy(), everything.mean(0))
    np.testing.assert_allclose(norm.var.numpy(), everything.var(0))
    x = torch.tensor([[0.0, -1.0], [5.0, -1.2], [11.0, 0.0]], dtype=torch.float64)
    expected = (x.numpy() - everything.mean(0)) / everything.std(0)
    np.testing.assert_allclose(norm.normalize(x).numpy(), expected, 1e-6)
    np.testing.assert_allclose(norm.denormalize(norm.normalize(x)).numpy(), x.numpy(), rtol=1e-9)
    restored = ValueNormalizer(n_heads=2)
    restored.load_state_dict(norm.state_dict())
    assert restored.normalize(x).tolist() == norm.normalize(x).tolist()


# -- actors and masking -------------------------------------------------------------------------------------------
def _fusion_setup(n_models: int = 3, n_choices: int = 4) -> tuple[FusionActor, dict[str, slice]]:
    slices = {
        "probs": slice(0, n_models * n_choices),
        "team_mask": slice(n_models * n_choices, n_models * n_choices + n_models),
        "rewards": slice(n_models * (n_choices + 1), n_models * (n_choices + 1) + 2),
        "action_mask": slice(n_models * (n_choices + 1) + 2, n_models * (n_choices + 1) + 2 + n_choices),
    }
    torch.manual_seed(0)
    return FusionActor(slices, n_models, n_choices), slices


def _fusion_obs(slices: dict[str, slice], valid: list[list[int]], seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    b, n, c = len(valid), 3, 4
    mask = np.array(valid, dtype=np.float32)
    probs = rng.random((b, n, c)).astype(np.float32) * mask[:, None, :]
    probs /= probs.sum(axis=2, keepdims=True)
    obs = np.zeros((b, slices["action_mask"].stop), dtype=np.float32)
    obs[:, slices["probs"]] = probs.reshape(b, n * c)
    obs[:, slices["team_mask"]] = 1.0
    obs[:, slices["rewards"]] = rng.normal(size=(b, 2))
    obs[:, slices["action_mask"]] = mask
    return torch.from_numpy(obs)


def test_fusion_actor_never_samples_a_masked_choice() -> None:
    actor, slices = _fusion_setup()
    with torch.no_grad():  # make the masked choices the most attractive ones if the mask were ignored
        actor.gate.bias[:] = -5.0
    valid = [[1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 0, 1], [0, 0, 1, 0]]
    obs = _fusion_obs(slices, valid)
    mask = torch.tensor(valid, dtype=torch.bool)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        logits = actor(actor.prepare(obs))
        for _ in range(200):
            actions = actor.sample(logits, generator)
            assert mask[torch.arange(4), actions].all()
        assert mask[torch.arange(4), actor.mode(logits)].all()
        assert actor.sample(logits, generator)[3].item() == 2  # the only valid choice
        masked_log_probs = torch.log_softmax(logits, -1)[~mask]
        assert (masked_log_probs < -1e30).all()
        entropy = categorical_entropy(logits)
        assert torch.isfinite(entropy).all() and entropy[3].item() == pytest.approx(0.0, abs=1e-6)
        assert (entropy[:3] <= torch.log(mask.sum(-1)[:3].float()) + 1e-6).all()


def test_fusion_actor_starts_as_the_mean_probability_vote() -> None:
    actor, slices = _fusion_setup()
    obs = _fusion_obs(slices, [[1, 1, 1, 1], [1, 1, 1, 0]], seed=3)
    probs = obs[:, slices["probs"]].reshape(2, 3, 4)
    with torch.no_grad():
        vote = torch.where(obs[:, slices["action_mask"]] > 0, probs.sum(1), -1.0).argmax(-1)
        assert actor.mode(actor(actor.prepare(obs))).tolist() == vote.tolist()


def test_a_fusion_agent_reading_its_team_size_starts_as_the_vote_and_can_weigh_each_size_apart() -> None:
    """``team_size``: the context ends with the team's size, one-hot; the start is still the vote; a weight on one
    size's column changes the answers of teams of that size only."""
    _, slices = _fusion_setup()
    torch.manual_seed(0)
    actor = FusionActor(slices, 3, 4, team_size=True)
    obs = _fusion_obs(slices, [[1, 1, 1, 1]] * 3, seed=3)
    obs[:, slices["team_mask"]] = torch.tensor([[1.0, 0, 0], [1, 1, 0], [1, 1, 1]])
    obs[:, slices["probs"]] *= obs[:, slices["team_mask"]].repeat_interleave(4, 1)  # a non-member shows nothing
    prepared = actor.prepare(obs)
    start = prepared.shape[1] - 4 - 3  # the size columns, before the valid-choice mask
    assert prepared[:, start : start + 3].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    plain, _ = _fusion_setup()
    assert actor.input_size == plain.input_size + 3
    with torch.no_grad():
        assert actor.mode(actor(prepared)).tolist() == plain.mode(plain(plain.prepare(obs))).tolist()
        actor.gate.weight[:3, actor.gate.in_features - 1] = -10.0  # teams of 3: against each member's probability
        logits = actor(prepared)
        reference = plain(plain.prepare(obs))
    assert torch.equal(logits[:2], reference[:2]) and not torch.equal(logits[2], reference[2])


def test_bernoulli_decider_distribution_by_hand() -> None:
    logits = torch.tensor([[0.0, math.log(3.0)]])  # p = 1/2 and 3/4
    assert bernoulli_log_prob(logits, torch.tensor([[1.0, 0.0]])).item() == pytest.approx(math.log(0.5 * 0.25))
    assert bernoulli_entropy(logits).item() == pytest.approx(
        math.log(2.0) - (0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    )
    actor = DeciderActor(obs_size=4, n_models=2, initial_prob=0.9)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        logits = actor(torch.zeros(2000, 4))
        bits = actor.sample(logits, generator)
        assert set(bits.unique().tolist()) <= {0.0, 1.0}
        assert bits.mean().item() == pytest.approx(0.9, abs=0.03)
        assert actor.mode(logits).tolist() == [[1.0, 1.0]] * 2000


def test_central_critic_outputs_one_value_per_head() -> None:
    critic = CentralCritic(state_size=7)
    assert critic(torch.zeros(5, 7)).shape == (5, len(VALUE_HEADS))


# -- config -------------------------------------------------------------------------------------------------------
def test_config_defaults_are_the_mappo_papers_and_every_field_is_documented() -> None:
    config = TrainConfig()
    assert (config.learning_rate, config.clip_coef, config.gae_lambda) == (5e-4, 0.2, 0.95)
    assert (config.gamma, config.fusion_gamma) == (0.0, 0.0)  # each action earns one question's reward
    docs = field_docs()
    assert set(docs) == set(config.to_dict())
    assert all(docs.values())


def test_config_files_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('seed = 4\nmode = "two-stage"\nlearning_rate = 1\n[env]\nalpha = 0.5\n')
    config = load_config(toml)
    assert (config.seed, config.mode, config.learning_rate) == (4, "two-stage", 1.0)
    assert config.env == {"decider_extras": ["task"], "fusion_extras": ["task"], "window": 32, "alpha": 0.5}
    as_json = tmp_path / "run.json"
    as_json.write_text(json.dumps(config.to_dict()))
    assert load_config(as_json) == config
    with pytest.raises(ValueError, match="unknown key"):
        config_from_dict({"sede": 1})
    with pytest.raises(ValueError, match="mode"):
        config_from_dict({"mode": "both"})
    with pytest.raises(ValueError, match="set by the trainer"):
        config_from_dict({"env": {"split": "test"}})


def test_episode_plan_aligns_episodes_with_rollouts() -> None:
    assert episode_plan(3000, 512, 64) == (512, 8)
    assert episode_plan(100, 512, 64) == (64, 1)
    assert episode_plan(5, 512, 8) == (4, 1)  # several short episodes per rollout


# -- checkpoints and resumption ---------------------------------------------------------------------------------------
_TINY = {
    "num_envs": 4,
    "num_steps": 8,
    "episode_length": 16,
    "total_steps": 4 * 8 * 5,
    "update_epochs": 2,
    "num_minibatches": 2,
    "checkpoint_every": 1,
}


def test_checkpoint_round_trip_is_plain_data(tmp_path: Path) -> None:
    venv = make_env(_default_cache(), {}, num_envs=2, split="train")
    config = TrainConfig()
    torch.manual_seed(0)
    agents = Agents.build(venv, hidden=16)
    optimizer = make_optimizer(agents, config)  # the parameters now live in one flat buffer
    agents.value_norm.update(torch.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 2.0]]))
    agents.critic(torch.ones(3, venv.layout.decider_size + venv.layout.fusion_size)).sum().backward()
    optimizer.step(["critic"])
    payload = {"networks": agents.state_dict(), "optimizer": optimizer.state_dict(), "iteration": 3, "note": "x"}
    save_checkpoint(tmp_path / "checkpoint.pt", payload)
    raw = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # no pickled objects inside
    assert raw["iteration"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # the temporary file is gone
    torch.manual_seed(1)
    other = Agents.build(venv, hidden=16)
    other_optimizer = make_optimizer(other, config)
    other.load_state_dict(load_checkpoint(tmp_path)["networks"])
    other_optimizer.load_state_dict(load_checkpoint(tmp_path)["optimizer"])
    for name, module in agents.modules().items():
        for key, value in module.state_dict().items():
            assert torch.equal(value, other.modules()[name].state_dict()[key]), (name, key)
    assert torch.equal(other_optimizer.params, optimizer.params)  # loading wrote through the parameter views
    assert torch.equal(other_optimizer.exp_avg_sq, optimizer.exp_avg_sq) and other_optimizer.steps["critic"] == 1


def _default_cache() -> LogitCache:
    return load_default_cache()


def _final_state(run: Path) -> dict[str, Any]:
    checkpoint = load_checkpoint(run)
    flat = {f"{name}.{key}": value for name, state in checkpoint["networks"].items() for key, value in state.items()}
    flat["generator"] = checkpoint["generator"]
    return flat


def _progress_without_times(run: Path) -> list[str]:
    lines = (run / "progress.csv").read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, name in enumerate(header) if not name.startswith("time/")]
    return [",".join(line.split(",")[i] for i in keep) for line in lines]


def _unseen_cache(seed: int = 1) -> LogitCache:
    """A small synthetic cache of 6 tasks of 60 questions (3 models) for the runs on tasks never seen."""
    return make_cache(n_models=3, n_questions=360, n_tasks=6, accuracy=[0.5, 0.6, 0.7], seed=seed)


def _resume_case(name: str) -> tuple[TrainConfig, LogitCache]:
    """(config, cache) of a run the resume tests interrupt: "standard", the default game on the default cache;
    "partial", the partial-feedback learner (presets.PARTIAL, model-permuted copies of the training tasks included) on
    the unseen-task game; "unseen-scorer", the team scorer with the offline start on tasks never seen (its network
    cannot play the record start, so a new run falls back to the fitted table start, and its KL is anchored there)."""
    if name == "standard":
        return config_from_dict({**_TINY, "seed": 7}), _default_cache()
    config_class = algorithms.get("mappo").config_class
    feedback = "team" if name == "partial" else "all"
    overrides = protocols.learner_overrides("mappo", config_class, 3, feedback)  # the unseen-task game (and PARTIAL)
    config = config_from_dict({**overrides, **_TINY, "seed": 3})
    if name == "partial":
        assert all(getattr(config, key) == value for key, value in PARTIAL.values.items() if key not in _TINY)
        assert config.model_permutations > 0 and config.env["episodes"] == "task"
    else:
        config = dataclasses.replace(config, decider_policy="scorer", decider_start="offline", decider_kl_coef=0.1)
    return config, _unseen_cache()


@pytest.mark.parametrize("case", ["standard", "partial", "unseen-scorer"])
def test_resume_reproduces_uninterrupted_training(tmp_path: Path, case: str) -> None:
    """A run interrupted after k updates and resumed to the end is the uninterrupted run, bit for bit: its final
    networks (and generator) and every progress.csv column but the times; also for the partial-feedback learner,
    whose training stream holds model-permuted copies of the cache (the resume is checked against the cache it was
    given), and for the unseen-task scorer, whose resumed run anchors its KL on the start the new run used."""
    config, cache = _resume_case(case)
    train(config, cache, tmp_path / "straight", progress=False)
    # stop after 3 updates: mid-round (2 updates per 16-question episode), so the copies are mid-episode
    train(config, cache, tmp_path / "resumed", progress=False, stop_after=3)
    checkpoint = load_checkpoint(tmp_path / "resumed")
    assert checkpoint["iteration"] == 3
    if case == "standard":
        snapshot = unpack_arrays(checkpoint["env"], "env")
        assert (snapshot["counters"][:, Counter.POS] == 8).all()  # 8 of the episode's 16 questions answered
    train(config, cache, tmp_path / "resumed", progress=False, resume=True)
    straight, resumed = _final_state(tmp_path / "straight"), _final_state(tmp_path / "resumed")
    assert straight.keys() == resumed.keys()
    for key in straight:
        assert torch.equal(straight[key], resumed[key]), key
    assert _progress_without_times(tmp_path / "straight") == _progress_without_times(tmp_path / "resumed")
    assert len(_progress_without_times(tmp_path / "straight")) == 1 + 5  # the header and the 5 updates
    if case != "standard":  # on a cache of the same models and other contents: refused, naming file, field, digests
        recorded = json.loads((tmp_path / "resumed" / "config.json").read_text())["run"]["digest"]
        assert recorded == cache_digest(cache)  # the cache as given, before any model-permuted copies
        other = _unseen_cache(seed=2)
        with pytest.raises(RunFileError) as refused:
            train(config, other, tmp_path / "resumed", progress=False, resume=True)
        message = str(refused.value)
        assert message.startswith(f"{tmp_path / 'resumed' / 'config.json'}: run.digest: the run trained on a cache")
        assert recorded[:12] in message and cache_digest(other)[:12] in message


def test_training_is_deterministic_given_the_seed(tmp_path: Path) -> None:
    cache = _default_cache()
    config = config_from_dict({**_TINY, "total_steps": 64, "mode": "two-stage"})
    train(config, cache, tmp_path / "a", progress=False)
    train(config, cache, tmp_path / "b", progress=False)
    a, b = _final_state(tmp_path / "a"), _final_state(tmp_path / "b")
    assert all(torch.equal(a[key], b[key]) for key in a)
    stages = [line.split(",")[5] for line in (tmp_path / "a" / "progress.csv").read_text().splitlines()[1:]]
    assert stages == ["1", "2"]  # two-stage: decider first, then fusion


def test_resume_refuses_a_different_config(tmp_path: Path) -> None:
    cache = _default_cache()
    train(config_from_dict({**_TINY, "total_steps": 32}), cache, tmp_path, progress=False)
    with pytest.raises(ValueError, match="different config"):
        train(config_from_dict({**_TINY, "seed": 1}), cache, tmp_path, progress=False, resume=True)
