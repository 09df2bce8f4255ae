"""Credit assignment of the reference MAPPO: the decider earns r_{t+1}, the fusion agent's one-step bandit,
bootstrapping at terminations and truncations, the never-empty greedy team, and the optimizer's two forms
(the flat-buffer Adam and the plain torch.optim.Adam) and the switch between them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from ensemble_env import datasets  # noqa: E402
from ensemble_mappo.agents import Agents  # noqa: E402
from ensemble_mappo.checkpoint import load_checkpoint  # noqa: E402
from ensemble_mappo.collection import collect  # noqa: E402
from ensemble_mappo.config import TrainConfig, config_from_dict  # noqa: E402
from ensemble_mappo.frame import Behaviour, make_env, make_optimizer  # noqa: E402
from ensemble_mappo.mappo import advantages_and_returns, env_options  # noqa: E402
from ensemble_mappo.networks import VALUE_HEADS, DeciderActor, complete_team  # noqa: E402
from ensemble_mappo.optim import OPTIMIZERS, FlatAdam, TorchAdam  # noqa: E402
from ensemble_mappo.ppo import agent_targets, decider_rewards  # noqa: E402
from ensemble_mappo.training import train  # noqa: E402


# -- the decider earns the reward of the question its team answers ---------------------------------------------
def _heads(decider: list[float], fusion: list[float], reward: list[float]) -> Any:
    return torch.tensor([decider, fusion, reward]).T  # (T, 3) in the order of VALUE_HEADS


def test_the_decider_advantage_uses_the_next_reward_by_hand() -> None:
    assert VALUE_HEADS == ("decider", "fusion", "reward")
    # three copies, three steps; rewards r_t of the answers at t
    rewards = torch.tensor([[1.0, 1.0, 1.0], [-1.0, 1.0, 1.0], [1.0, -1.0, -1.0]])
    # copy 0 runs on; copy 1's episode terminates after step 1 (the stream is exhausted); copy 2's is
    # truncated after step 1 (episode_length cut it: its next question exists)
    dones = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    values = torch.stack(
        [
            _heads([0.5, 0.2, 0.1], [0.3, -0.1, 0.4], [0.3, -0.1, 0.4]),
            _heads([0.4, 0.3, 0.2], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
            _heads([0.4, 0.3, 0.2], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
        ],
        dim=1,
    )  # (T, B, 3)
    last_values = torch.tensor([[0.6, 0.2, 0.25]] * 3)  # the critic at the state after the rollout
    final_values = torch.zeros(3, 3, 3)
    final_values[1, 2] = torch.tensor([0.7, 0.5, 0.45])  # the critic at copy 2's final (truncated) state
    advantages, returns = agent_targets(
        rewards, values, last_values, dones, final_values, gammas=(0.9, 0.0), lambdas=(0.5, 0.95)
    )
    # copy 0. The decider's rewards are r_1, r_2 and, after the rollout, the critic's reward estimate 0.25:
    #   delta_0 = -1 + 0.9 * 0.2 - 0.5 = -1.32; delta_1 = 1 + 0.9 * 0.1 - 0.2 = 0.89;
    #   delta_2 = 0.25 + 0.9 * 0.6 - 0.1 = 0.69
    #   A_2 = 0.69; A_1 = 0.89 + 0.45 * 0.69 = 1.2005; A_0 = -1.32 + 0.45 * 1.2005 = -0.779775
    # copy 1 (termination after step 1: its last team answers nothing, reward 0 and value 0 follow):
    #   delta_0 = 1 + 0.9 * 0.3 - 0.4 = 0.87; delta_1 = 0 + 0 - 0.3 = -0.3; delta_2 = 0.25 + 0.54 - 0.2 = 0.59
    #   A_1 = -0.3 (the recursion stops), A_0 = 0.87 + 0.45 * -0.3 = 0.735
    # copy 2 (truncation after step 1: the unseen answer's reward is the critic's estimate 0.45 at the final
    # state, plus 0.9 x its decider value 0.7): delta_1 = 0.45 + 0.63 - 0.3 = 0.78, A_0 = 0.87 + 0.45 * 0.78
    expected_decider = [[-0.779775, 0.735, 1.221], [1.2005, -0.3, 0.78], [0.69, 0.59, 0.59]]
    np.testing.assert_allclose(advantages[..., 0].numpy(), expected_decider, rtol=1e-5)
    # the fusion agent (gamma 0): A_t = r_t - V_fusion(s_t), whatever follows
    expected_fusion = rewards - values[..., 1]
    np.testing.assert_allclose(advantages[..., 1].numpy(), expected_fusion.numpy(), rtol=1e-6)
    # targets: each agent's lambda-return, and the reward itself for the reward head
    np.testing.assert_allclose(returns[..., 0].numpy(), advantages[..., 0].numpy() + values[..., 0].numpy(), 1e-6)
    np.testing.assert_allclose(returns[..., 1].numpy(), rewards.numpy(), rtol=1e-6)
    np.testing.assert_allclose(returns[..., 2].numpy(), rewards.numpy(), rtol=1e-6)


def test_decider_rewards_shift_by_one_step_and_stop_at_episode_ends() -> None:
    rewards = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    estimates = torch.tensor([[10.0], [20.0], [0.0], [40.0]])
    dones = torch.tensor([[0.0], [1.0], [0.0], [0.0]])
    # r_1; the episode ended after step 1 (the estimate of what follows); r_3; the rollout's end (estimate)
    assert decider_rewards(rewards, estimates, dones).squeeze(1).tolist() == [2.0, 20.0, 4.0, 40.0]


def test_a_shared_gamma_for_the_fusion_agent_is_plain_gae_on_its_own_rewards() -> None:
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    values = torch.zeros(3, 1, 3)
    last = torch.tensor([[0.0, 4.0, 0.0]])
    advantages, _ = agent_targets(
        rewards, values, last, torch.zeros(3, 1), torch.zeros(3, 1, 3), gammas=(0.0, 0.5), lambdas=(0.0, 1.0)
    )
    # fusion: A_2 = 2 + 0.5 * 4 = 4; A_1 = 0 + 0.5 * 4 = 2; A_0 = 1 + 0.5 * 2 = 2
    assert advantages[:, 0, 1].tolist() == [2.0, 2.0, 4.0]
    assert advantages[:, 0, 0].tolist() == [0.0, 2.0, 0.0]  # decider with gamma 0: just r_{t+1} (0 estimate last)


# -- bootstrapping follows the environment's termination and truncation --------------------------------------------
class _Recorder:
    """A vector env that remembers the infos of every step (everything else is the wrapped env's)."""

    def __init__(self, venv: Any) -> None:
        self.venv, self.infos = venv, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.venv, name)

    def step(self, actions: Any) -> Any:
        result = self.venv.step(actions)
        self.infos.append(result[4])
        return result


def _collect(episode_length: int | None, num_steps: int) -> tuple[Any, Any, Any, _Recorder]:
    cache = datasets.load("bbh5")
    options = env_options(TrainConfig(), cache)
    venv = make_env(cache, {**options, "tasks": ["navigate"]}, num_envs=2, split="train", episode_length=episode_length)
    torch.manual_seed(0)
    agents = Agents.build(venv, hidden=8)
    agents.value_norm.update(torch.tensor([[5.0, 3.0, 1.0], [7.0, 2.0, 0.0]]))  # not the identity: 0 maps to 6
    rollout = agents.rollout(venv, num_steps)
    recorder = _Recorder(venv)
    obs, _ = venv.reset(seed=0)
    collect(recorder, agents, rollout, obs, torch.Generator().manual_seed(0))  # type: ignore[arg-type]
    return agents, rollout, venv, recorder


def test_a_truncated_episode_bootstraps_from_its_final_state() -> None:
    agents, rollout, venv, recorder = _collect(episode_length=10, num_steps=12)
    assert rollout.dones[9].all() and not rollout.terminated.any()  # cut after 10 questions: truncated
    assert rollout.dones.sum() == 2
    final_state = torch.from_numpy(np.asarray(recorder.infos[9]["final_state"], dtype=np.float32))
    with torch.no_grad():
        np.testing.assert_allclose(rollout.final_values[9].numpy(), agents.critic(final_state).numpy(), rtol=1e-6)
        assert not rollout.final_values[[0, 8, 10]].any()
        config = TrainConfig(gamma=0.99)
        advantages, _ = advantages_and_returns(agents, rollout, venv.state(), config)
        final = agents.value(final_state)
        values = agents.value_norm.denormalize(rollout.values)
    # the decider's last action of the episode: the critic's reward estimate and decider value at the final state
    gamma = config.gamma
    expected = final[:, 2] + gamma * final[:, 0] - values[9, :, 0]
    np.testing.assert_allclose(advantages[9, :, 0].numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_an_exhausted_stream_terminates_without_bootstrap() -> None:
    n_stream = datasets.load("bbh5").select("train", ("navigate",)).size
    agents, rollout, venv, _ = _collect(episode_length=None, num_steps=n_stream)
    assert rollout.terminated[-1].all() and rollout.dones[-1].all() and rollout.dones.sum() == 2
    assert not rollout.final_values.any()  # a termination needs no value
    config = TrainConfig(gamma=0.99, gae_lambda=1.0)
    with torch.no_grad():
        advantages, returns = advantages_and_returns(agents, rollout, venv.state(), config)
        values = agents.value_norm.denormalize(rollout.values)
    # the last team answers nothing: the decider's return there is 0, whatever the state after the rollout is worth
    assert returns[-1, :, 0].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(advantages[-1, :, 0].numpy(), -values[-1, :, 0].numpy(), rtol=1e-6)
    # the decider's second-to-last action earns the last question's reward (as its credit counts it) and no more
    # (lambda 1: the return)
    reward = torch.from_numpy(rollout.credit(config.decider_credit)[-1])
    np.testing.assert_allclose(returns[-2, :, 0].numpy(), reward.numpy(), rtol=1e-6)


# -- the decider's credit without the fusion agent's sampling noise ------------------------------------------------
def _rollout_with_fusion_noise(fusion_seed: int, *, alpha: float = 1.0, mode: str = "on_error") -> tuple[Any, ...]:
    """One rollout on bbh5's train split: the decider plays its mode (the same teams whatever the fusion agent
    does), the fusion agent samples with its own seed. The critic outputs 0 and the fusion agent is the team's
    mean-probability vote (gate weights 0), so neither reads the sampled rewards of the fusion observation."""
    cache = datasets.load("bbh5")
    options = {**env_options(TrainConfig(), cache), "alpha": alpha, "size_penalty_mode": mode}
    venv = make_env(cache, options, num_envs=6, split="train", episode_length=32)
    torch.manual_seed(0)
    agents = Agents.build(venv, hidden=8, decider_initial_prob=0.3)
    with torch.no_grad():
        agents.critic.net[-1].weight.zero_()
        agents.critic.net[-1].bias.zero_()
        agents.fusion.gate.weight.zero_()
    rollout = agents.rollout(venv, 32)
    obs, _ = venv.reset(seed=0)
    _, record = collect(venv, agents, rollout, obs, torch.Generator().manual_seed(fusion_seed), Behaviour("mode"))
    return agents, rollout, venv, record, cache


def test_the_deciders_advantage_is_unchanged_by_the_fusion_agents_sampling_noise() -> None:
    first, second = _rollout_with_fusion_noise(1), _rollout_with_fusion_noise(2)
    assert torch.equal(first[1].actions["decider"], second[1].actions["decider"])  # the same teams
    assert not torch.equal(first[1].actions["fusion"], second[1].actions["fusion"])  # other sampled answers
    assert not np.array_equal(first[1].rewards, second[1].rewards)
    advantages = {}
    for credit in ("sampled", "greedy", "expected"):
        config = TrainConfig(decider_credit=credit)
        advantages[credit] = [advantages_and_returns(a, r, v.state(), config)[0] for a, r, v, *_ in (first, second)]
    # the decider's advantage (column 0) is its credit minus the critic's 0: sampling noise only in "sampled"
    assert not torch.equal(advantages["sampled"][0][..., 0], advantages["sampled"][1][..., 0])
    for credit in ("greedy", "expected"):
        torch.testing.assert_close(advantages[credit][0][..., 0], advantages[credit][1][..., 0])
        # the fusion agent still learns from the rewards of its own sampled answers
        torch.testing.assert_close(advantages[credit][0][..., 1], advantages["sampled"][0][..., 1])


@pytest.mark.parametrize(("alpha", "mode"), [(1.0, "on_error"), (0.5, "always")])
def test_the_credits_are_the_rewards_of_the_greedy_answer_and_of_the_policy(alpha: float, mode: str) -> None:
    agents, rollout, _, record, cache = _rollout_with_fusion_noise(3, alpha=alpha, mode=mode)
    questions = record.question.astype(np.int64)
    labels = np.asarray(cache.labels)[questions]
    share = record.team_size / cache.n_models
    with torch.no_grad():
        logits = agents.fusion(rollout.inputs["fusion"].reshape(-1, agents.fusion.input_size))
    greedy = logits.argmax(-1).numpy().reshape(labels.shape)
    p_label = torch.softmax(logits, -1).numpy().reshape(*labels.shape, -1)
    p_label = np.take_along_axis(p_label, labels[..., None], -1)[..., 0]
    penalty = alpha * share
    right, wrong = (1.0 - penalty, -1.0 - penalty) if mode == "always" else (np.ones_like(share), -1.0 - penalty)
    np.testing.assert_allclose(rollout.credit("sampled"), np.where(record.correct > 0, right, wrong), atol=1e-6)
    np.testing.assert_allclose(rollout.credit("greedy"), np.where(greedy == labels, right, wrong), atol=1e-6)
    np.testing.assert_allclose(rollout.credit("expected"), p_label * right + (1 - p_label) * wrong, atol=1e-5)
    assert (greedy != rollout.actions["fusion"].numpy()).any()  # the sampled answers are not all greedy ones
    with pytest.raises(ValueError, match="decider_credit='best' is not one of"):
        TrainConfig(decider_credit="best")


# -- the greedy team is never empty ------------------------------------------------------------------------------------
def test_the_greedy_team_is_never_empty_and_honours_min_team_size() -> None:
    logits = torch.tensor([[-3.0, -1.0, -2.0, -5.0], [2.0, -1.0, 3.0, -2.0], [-1.0, 4.0, -2.0, -3.0]])
    actor = DeciderActor(obs_size=1, n_models=4)
    # all below 1/2: the most probable model alone; two above: kept as they are; one above: kept
    assert actor.mode(logits).tolist() == [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0]]
    actor = DeciderActor(obs_size=1, n_models=4, min_team_size=2)
    assert actor.mode(logits).tolist() == [[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0]]
    # a sampled team below the minimum is completed before it is played; PPO keeps the sampled bits
    bits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    assert actor.executed(bits, logits).tolist() == [[0, 1, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]]
    assert DeciderActor(obs_size=1, n_models=4).executed(bits, logits).tolist() == bits.tolist()
    assert complete_team(bits, logits, 0) is bits


def test_a_frozen_decider_that_wants_no_model_still_plays_one() -> None:
    cache = datasets.load("bbh5")
    venv = make_env(cache, env_options(TrainConfig(), cache), num_envs=1, split="validation")
    torch.manual_seed(0)
    agents = Agents.build(venv, hidden=8, decider_initial_prob=0.01, decider_policy="bernoulli")  # all below 1/2
    rollout = agents.rollout(venv, venv.episode_length)
    obs, _ = venv.reset(seed=0)
    _, record = collect(venv, agents, rollout, obs, torch.Generator().manual_seed(0), Behaviour("mode", "mode"))
    sizes = record.team[1:, 0].sum(-1)  # the first question is answered by the initial team (all models)
    assert sizes.min() == 1 and sizes.max() == 1


def test_the_decider_reads_the_next_questions_task_and_features() -> None:
    bbh5, toy8 = datasets.load("bbh5"), datasets.load("toy8")
    assert env_options(TrainConfig(), bbh5)["decider_extras"] == ["task", "features"]
    assert env_options(TrainConfig(question_features=False), bbh5)["decider_extras"] == ["task"]
    assert env_options(TrainConfig(), toy8)["decider_extras"] == ["task"]
    venv = make_env(bbh5, env_options(TrainConfig(), bbh5), num_envs=1, split="train")
    assert venv.layout.decider["features"].stop - venv.layout.decider["features"].start == 64


# -- the optimizer -------------------------------------------------------------------------------------------------
def test_flat_adam_equals_torch_adam_with_per_network_clipping() -> None:
    torch.manual_seed(0)
    nets = {"a": nn.Linear(3, 2), "b": nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))}
    copies = _clones(nets)
    flat = FlatAdam(nets, 0.01, max_grad_norm=0.5)
    references = {name: torch.optim.Adam(net.parameters(), lr=0.01, eps=1e-5) for name, net in copies.items()}
    frozen_before = [p.detach().clone() for p in nets["a"].parameters()]
    for step in range(6):
        x = torch.randn(5, 3) * (step + 1)
        learners = ["a", "b"] if step < 3 else ["b"]  # from step 3 on, "a" is frozen (as in two-stage)
        for models, optimizers in ((nets, None), (copies, references)):
            out = models["b"](models["a"](x)).pow(2).sum()
            if optimizers is None:
                flat.zero_grad()
                out.backward()
                norms = flat.step(learners)
            else:
                for optimizer in optimizers.values():
                    optimizer.zero_grad()
                out.backward()
                expected = [nn.utils.clip_grad_norm_(models[name].parameters(), 0.5) for name in ("a", "b")]
                for name in learners:
                    optimizers[name].step()
        np.testing.assert_allclose(norms.numpy(), torch.stack(expected).numpy(), rtol=1e-5)
        if step == 2:
            frozen_before = [p.detach().clone() for p in nets["a"].parameters()]
        for name in nets:
            for mine, reference in zip(nets[name].parameters(), copies[name].parameters(), strict=True):
                np.testing.assert_allclose(mine.detach().numpy(), reference.detach().numpy(), rtol=1e-5, atol=1e-7)
    assert all(torch.equal(p, q) for p, q in zip(nets["a"].parameters(), frozen_before, strict=True))
    assert flat.steps == {"a": 3, "b": 6}


def _clones(nets: dict[str, nn.Module]) -> dict[str, nn.Module]:
    return {name: copy.deepcopy(net) for name, net in nets.items()}


def _two_networks() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {"a": nn.Linear(3, 2), "b": nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))}


def _steps(optimizer: Any, nets: dict[str, nn.Module], schedule: list[list[str]], seed: int = 1) -> list[Any]:
    """Take one step per entry of ``schedule`` (the networks that learn) on a fixed loss; the gradient norms."""
    generator = torch.Generator().manual_seed(seed)
    norms = []
    for learners in schedule:
        optimizer.zero_grad()
        nets["b"](nets["a"](torch.randn(5, 3, generator=generator) * 3)).pow(2).sum().backward()
        norms.append(optimizer.step(learners))
    return norms


def test_the_plain_adam_takes_the_fused_ones_steps_and_shares_its_state_format() -> None:
    fused_nets = _two_networks()
    plain_nets = _clones(fused_nets)
    fused = FlatAdam(fused_nets, 0.01, max_grad_norm=0.5)
    plain = TorchAdam(plain_nets, 0.01, max_grad_norm=0.5)
    frozen = [p.detach().clone() for p in plain_nets["a"].parameters()]
    schedule = [["b"], ["b"], ["a", "b"], ["a", "b"], ["b"]]  # "a" frozen at first (two-stage), then learning
    for mine, theirs in zip(
        _steps(plain, plain_nets, schedule[:2]), _steps(fused, fused_nets, schedule[:2]), strict=True
    ):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5)
    assert all(torch.equal(p, q) for p, q in zip(plain_nets["a"].parameters(), frozen, strict=True))
    for mine, theirs in zip(
        _steps(plain, plain_nets, schedule[2:]), _steps(fused, fused_nets, schedule[2:]), strict=True
    ):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5)
    for name in fused_nets:
        for p, q in zip(plain_nets[name].parameters(), fused_nets[name].parameters(), strict=True):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)
    # one checkpoint format: the same keys and shapes, one step count per network
    plain_state, fused_state = plain.state_dict(), fused.state_dict()
    assert plain_state.keys() == fused_state.keys() and plain_state["steps"].tolist() == [2, 5]
    for key in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_allclose(plain_state[key].numpy(), fused_state[key].numpy(), rtol=1e-4, atol=1e-9)
    # each form resumes the other's state and goes on taking the same steps
    swapped_plain_nets, swapped_fused_nets = _clones(fused_nets), _clones(plain_nets)
    swapped_plain = TorchAdam(swapped_plain_nets, 0.01, max_grad_norm=0.5)
    swapped_plain.load_state_dict(fused_state)
    swapped_fused = FlatAdam(swapped_fused_nets, 0.01, max_grad_norm=0.5)
    swapped_fused.load_state_dict(plain_state)
    _steps(swapped_plain, swapped_plain_nets, [["a", "b"]], seed=2)
    _steps(fused, fused_nets, [["a", "b"]], seed=2)
    _steps(swapped_fused, swapped_fused_nets, [["a", "b"]], seed=2)
    for name in fused_nets:
        mine, fused_params, theirs = (
            nets[name].parameters() for nets in (swapped_plain_nets, fused_nets, swapped_fused_nets)
        )
        for p, q, r in zip(mine, fused_params, theirs, strict=True):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(r.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)
    assert swapped_plain.state_dict()["steps"].tolist() == swapped_fused.state_dict()["steps"].tolist() == [3, 6]
    with pytest.raises(ValueError, match="exp_avg has shape"):
        TorchAdam(_two_networks(), 0.01, max_grad_norm=0.5).load_state_dict({**fused_state, "exp_avg": torch.zeros(3)})


_TINY = {"num_envs": 4, "num_steps": 8, "episode_length": 16, "total_steps": 96, "update_epochs": 2}


def test_the_optimizer_switch_trains_the_same_run_and_resumes_across_forms(tmp_path: Path) -> None:
    cache = datasets.load("toy8")
    config = config_from_dict({**_TINY, "num_minibatches": 2, "checkpoint_every": 1})
    assert set(OPTIMIZERS) == {"fused", "adam"}
    venv = make_env(cache, {}, num_envs=1, split="train")
    assert isinstance(make_optimizer(Agents.build(venv, 8), config), FlatAdam)
    assert isinstance(make_optimizer(Agents.build(venv, 8), config, "adam"), TorchAdam)
    with pytest.raises(ValueError, match="optimizer='sgd' is not one of"):
        make_optimizer(Agents.build(venv, 8), config, "sgd")

    runs = {name: tmp_path / name for name in ("fused", "adam", "fused-then-adam")}
    train(config, cache, runs["fused"], progress=False)
    train(config, cache, runs["adam"], progress=False, optimizer="adam")
    train(config, cache, runs["fused-then-adam"], progress=False, stop_after=1)
    train(config, cache, runs["fused-then-adam"], progress=False, resume=True, optimizer="adam")
    checkpoints = {name: load_checkpoint(run) for name, run in runs.items()}
    fused = checkpoints["fused"]
    for name in ("adam", "fused-then-adam"):
        other = checkpoints[name]
        assert other["iteration"] == fused["iteration"] == 3
        assert other["optimizer"].keys() == fused["optimizer"].keys()
        assert other["optimizer"]["steps"].tolist() == fused["optimizer"]["steps"].tolist() == [12, 12, 12]
        for network, state in fused["networks"].items():
            for key, value in state.items():  # the same update: equal up to float rounding
                np.testing.assert_allclose(other["networks"][network][key].numpy(), value.numpy(), atol=1e-4)
