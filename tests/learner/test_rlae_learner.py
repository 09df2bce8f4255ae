"""The RLAE learners (``rlae_ppo``, ``rlae_mappo``) and the weighted-vote baselines.

The Beta policy against torch.distributions, its bounds and start, learning on a cache whose right per-task weights
are known, checkpoints (round trip, crafted ones refused), the command line, the benchmark, selection that never
reads a test label; the weighted vote against a hand-computed table, per-task weights recovering a planted weighting.
"""

from __future__ import annotations

import doctest
import importlib
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from testing.caches import flip_labels  # noqa: E402

from ensemble_env import LogitCache  # noqa: E402
from ensemble_env.baselines import registry, weights  # noqa: E402
from ensemble_env.cache import save_cache  # noqa: E402
from ensemble_env.cli import main  # noqa: E402
from ensemble_mappo import benchmark  # noqa: E402
from ensemble_mappo.checkpoint import read_checkpoint  # noqa: E402
from ensemble_mappo.evaluation import evaluate_agents, evaluate_run, read_selection  # noqa: E402
from ensemble_mappo.frame import make_env  # noqa: E402
from ensemble_mappo.rlae import (  # noqa: E402
    ACTION_EPS,
    BanditRollout,
    BetaActor,
    RLAENetworks,
    beta_entropy,
    beta_log_prob,
    collect,
)
from ensemble_mappo.rlae_config import RLAEConfig, rlae_config_from_dict  # noqa: E402
from ensemble_mappo.runs import read_config  # noqa: E402
from ensemble_mappo.training import train  # noqa: E402


def make_rlae_env(config: RLAEConfig, cache: LogitCache, **options):
    """The run's game (RLAEConfig.env_options) on a split of ``cache``."""
    return make_env(cache, config.env_options(has_features=cache.features is not None), **options)


def fit(config: RLAEConfig, cache: LogitCache, out: Path) -> dict:
    """Train through the frame's loop; the run's choice on validation (selection.json)."""
    train(config, cache, out, progress=False)
    return read_selection(out)


def planted_cache(n_questions: int = 600, seed: int = 0) -> LogitCache:
    """3 models, 2 tasks, 4 choices. In task "a" model 0 gives the label 0.55 (0.15 to each other choice) and models
    1 and 2 give one shared wrong answer 0.45 (0.55 / 3 to each other); in task "b" model 1 is the right one. The
    mean vote is always wrong (0.917 against 1.05); a weighting is right when the right model's weight exceeds 2/3 of
    the sum of the other two's. Splits: 4/6 train, 1/6 validation, 1/6 test."""
    rng = np.random.default_rng(seed)
    n_choices = 4
    labels = rng.integers(0, n_choices, n_questions)
    wrong = (labels + rng.integers(1, n_choices, n_questions)) % n_choices
    tasks = np.arange(n_questions) % 2
    probs = np.zeros((n_questions, 3, n_choices))
    rows = np.arange(n_questions)
    for model in range(3):
        right = tasks == model  # model 0 in task a, model 1 in task b, model 2 never
        probs[rows[right], model, :] = 0.15
        probs[rows[right], model, labels[right]] = 0.55
        probs[rows[~right], model, :] = 0.55 / 3
        probs[rows[~right], model, wrong[~right]] = 0.45
    split = np.zeros(n_questions, dtype=np.int64)
    split[np.arange(n_questions) % 6 == 4] = 2
    split[np.arange(n_questions) % 6 == 5] = 1
    return LogitCache(
        scores=probs,
        labels=labels,
        models=("m0", "m1", "m2"),
        score_kind="prob",
        tasks=tasks,
        task_names=("a", "b"),
        split=split,
    )


# -- the Beta policy ------------------------------------------------------------------------------------------
def test_beta_log_prob_and_entropy_match_torch_distributions() -> None:
    alpha = torch.tensor([1.0, 1.5, 3.0, 20.0, 1.0])
    beta = torch.tensor([1.0, 4.0, 3.0, 2.0, 30.0])
    x = torch.tensor([0.3, 1e-4, 0.5, 0.9999, 0.02])
    reference = torch.distributions.Beta(alpha, beta)
    torch.testing.assert_close(beta_log_prob(alpha, beta, x), reference.log_prob(x))
    torch.testing.assert_close(beta_entropy(alpha, beta), reference.entropy())


def test_actor_starts_near_the_mean_vote_and_its_actions_stay_in_bounds() -> None:
    cache = planted_cache()
    config = RLAEConfig(num_envs=8, initial_concentration=20.0)
    venv = make_rlae_env(config, cache, num_envs=8, split="train", episode_length=64)
    torch.manual_seed(0)
    networks = RLAENetworks.build(venv, config)
    obs, _ = venv.reset(seed=0)
    alpha, beta = networks.actor(networks.inputs(obs))
    assert alpha.shape == beta.shape == (8, 1, 3) and bool((alpha >= 1).all() and (beta >= 1).all())
    torch.testing.assert_close(alpha / (alpha + beta), torch.full_like(alpha, 0.5), atol=0.02, rtol=0)
    torch.testing.assert_close(alpha + beta - 2, torch.full_like(alpha, 20.0), atol=0.5, rtol=0)
    rollout = BanditRollout.allocate(16, 8, networks, venv.state_space.shape[-1])
    collect(venv, networks, rollout, obs, np.random.default_rng(0))
    assert rollout.actions.shape == (16, 8, 1, 3)
    assert float(rollout.actions.min()) >= ACTION_EPS and float(rollout.actions.max()) <= 1 - ACTION_EPS
    assert bool(torch.isfinite(rollout.log_probs).all())
    # an extreme Beta's samples are clamped, and their log-probability stays finite
    actor = BetaActor(4, 2, 8, 1e4)
    with torch.no_grad():
        actor.net[-1].bias[:2] = 30.0  # mu -> 1
    with torch.no_grad():
        a, b = actor(torch.zeros(1, 4))
    sample = np.clip(np.random.default_rng(0).beta(a.numpy(), b.numpy()), ACTION_EPS, 1 - ACTION_EPS)
    assert float(sample.max()) <= 1 - ACTION_EPS
    assert bool(torch.isfinite(beta_log_prob(a, b, torch.from_numpy(sample).float())).all())


def test_per_model_networks_share_one_actor_with_an_agent_id() -> None:
    cache = planted_cache()
    config = RLAEConfig(algorithm="rlae_mappo", num_envs=4)
    venv = make_rlae_env(config, cache, num_envs=4, split="train", episode_length=32)
    networks = RLAENetworks.build(venv, config)
    obs, _ = venv.reset(seed=0)
    inputs = networks.inputs(obs)
    assert inputs.shape == (4, 3, venv.observation_space("weight_0").shape[-1] + 3)
    np.testing.assert_array_equal(inputs[0, :, -3:].numpy(), np.eye(3))
    assert networks.critic[0].in_features == venv.state_space.shape[-1]
    actions = networks.actions(np.full((4, 3), 0.5))
    assert sorted(actions) == ["weight_0", "weight_1", "weight_2"] and actions["weight_1"].shape == (4, 1)


def test_config_refuses_bad_values_naming_them() -> None:
    with pytest.raises(ValueError, match="algorithm"):
        RLAEConfig(algorithm="rlae")
    with pytest.raises(ValueError, match="learning_rate"):
        RLAEConfig(learning_rate=-1.0)
    with pytest.raises(ValueError, match="num_envs"):
        RLAEConfig(num_envs=0)
    with pytest.raises(ValueError, match="set by the algorithm"):
        RLAEConfig(env={"decider": True})
    with pytest.raises(ValueError, match=r"unknown key.*critic"):
        rlae_config_from_dict({"critic": "central"})
    assert rlae_config_from_dict({"passes": 3}).passes == 3.0


# -- learning -------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["rlae_ppo", "rlae_mappo"])
def test_learner_finds_the_planted_per_task_weights(tmp_path: Path, algorithm: str) -> None:
    """The mean vote is always wrong on this cache; the learner must beat its start by far on validation and test."""
    cache = planted_cache()
    config = RLAEConfig(algorithm=algorithm, passes=30.0, num_envs=16, checkpoints=3, learning_rate=3e-3)
    chosen = fit(config, cache, tmp_path / "run")
    history = chosen["candidates"]
    start, best = history[0]["validation_reward"], max(h["validation_reward"] for h in history)
    assert start < -1.5  # near the mean vote: about every answer wrong (-2)
    assert best > 0.5 and chosen["update"] > 0
    test = evaluate_run(tmp_path / "run", cache, split="test")
    assert test.correct.mean() > 0.8


def test_learning_is_deterministic_under_a_seed(tmp_path: Path) -> None:
    cache = planted_cache(300)
    config = RLAEConfig(passes=2.0, num_envs=8, num_steps=16, checkpoints=2)
    first = fit(config, cache, tmp_path / "a")
    second = fit(config, cache, tmp_path / "b")
    assert first == second
    a, b = (evaluate_run(tmp_path / name, cache, split="test") for name in ("a", "b"))
    np.testing.assert_array_equal(a.answers, b.answers)


# -- checkpoints ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RLAEConfig, LogitCache]:
    cache = planted_cache(300)
    config = RLAEConfig(algorithm="rlae_mappo", passes=2.0, num_envs=8, num_steps=16, checkpoints=2)
    out = tmp_path_factory.mktemp("rlae") / "run"
    train(config, cache, out, progress=False)
    return out, config, cache


def test_checkpoint_round_trip_gives_the_same_answers(tiny_run: tuple[Path, RLAEConfig, LogitCache]) -> None:
    out, config, cache = tiny_run
    selection = read_selection(out)
    history = selection["candidates"]
    assert history[0]["update"] == 0 and len(history) == 3
    chosen = max(history, key=lambda h: h["validation_reward"])
    payload = read_checkpoint(out / "checkpoints" / f"update_{selection['update']}.pt", read_config(out))
    from_file = evaluate_run(out, cache, split="validation")
    from_memory = evaluate_agents(payload.networks, config, cache, split="validation")
    np.testing.assert_array_equal(from_file.answers, from_memory.answers)
    assert from_file.iteration == payload.iteration == selection["update"] == chosen["update"]
    assert from_file.global_step == payload.iteration * config.num_envs * config.num_steps
    np.testing.assert_allclose(from_file.rewards.mean(), chosen["validation_reward"], atol=1e-6)


class Evil:
    def __reduce__(self):  # what a pickle-loading reader would run
        return (print, ("pwned",))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.update(algorithm="mappo"), "config"),
        (lambda p: p.pop("networks"), "networks"),
        (lambda p: p.pop("iteration"), "lacks iteration"),
        (lambda p: p.update(iteration=3.5), "iteration"),
        (lambda p: p["networks"]["actor"]["net.0.weight"].fill_(float("nan")), "finite"),
        (lambda p: p["config"].update(seed=99), "config"),
        (lambda p: p.update(evil=Evil()), "not a readable checkpoint"),
    ],
    ids=["algorithm", "no networks", "missing", "float count", "nan", "other config", "pickled object"],
)
def test_crafted_checkpoints_are_refused(
    tiny_run: tuple[Path, RLAEConfig, LogitCache], tmp_path: Path, change, message: str
) -> None:
    out, _config, cache = tiny_run
    crafted = tmp_path / "run"
    (crafted / "checkpoints").mkdir(parents=True)
    chosen = f"checkpoints/update_{read_selection(out)['update']}.pt"
    for name in ("config.json", "progress.csv", "selection.json", "checkpoint.pt", chosen):
        (crafted / name).write_bytes((out / name).read_bytes())
    payload = torch.load(out / chosen, weights_only=True)
    change(payload)
    torch.save(payload, crafted / chosen)
    with pytest.raises(ValueError, match=message):
        evaluate_run(crafted, cache, split="test")


# -- the command line and the benchmark -----------------------------------------------------------------------
TINY = ["--passes", "1", "--num-envs", "8", "--num-steps", "16", "--no-progress"]


@pytest.mark.parametrize("algorithm", ["rlae_ppo", "rlae_mappo"])
def test_cli_trains_and_evaluates(tmp_path: Path, algorithm: str, capsys: pytest.CaptureFixture[str]) -> None:
    cache_file = tmp_path / "planted.h5"
    save_cache(cache_file, planted_cache(300))
    out = tmp_path / "run"
    assert main(["train", "--algorithm", algorithm, "--cache", str(cache_file), "--out", str(out), *TINY]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["algorithm"] == algorithm and saved["config"]["passes"] == 1.0
    assert "evaluate with: ensemble-env evaluate" in capsys.readouterr().out
    assert main(["evaluate", str(out), "--split", "test", "--json", "--no-baselines"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == algorithm
    assert main(["evaluate", str(out), "--split", "test", "--json"]) == 0
    capsys.readouterr()
    result = json.loads((out / "evaluation_test.json").read_text())
    assert result["algorithm"] == algorithm and result["mean_team_size"] == 3.0
    assert {"per_task_weights", "per_question_weights", "mean_probability_vote"} <= set(result["baselines"])
    assert main(["evaluate", str(out)]) == 0
    assert f"{algorithm} evaluation" in capsys.readouterr().out
    foreign = ["--decider-policy", "teams"]
    assert main(["train", "--algorithm", algorithm, "--out", str(tmp_path / "x"), *foreign, *TINY]) == 2
    assert "--decider-policy is not one of its options" in capsys.readouterr().err
    assert main(["train", "--algorithm", algorithm, "--cache", str(cache_file), "--out", str(out), *TINY]) == 2
    assert "already holds a run" in capsys.readouterr().err


def test_benchmark_runs_both_learners_and_the_weight_baselines(tmp_path: Path) -> None:
    cache_file = tmp_path / "planted.h5"
    save_cache(cache_file, planted_cache(300))
    names = ["rlae_ppo", "rlae_mappo", "uniform_weights", "per_task_weights", "per_question_weights", "stacking"]
    results = benchmark.benchmark(
        names, range(1), [str(cache_file)], tmp_path / "bench", budget="tiny", progress=False, plot=False
    )
    table = (tmp_path / "bench" / "results.md").read_text(encoding="utf-8")
    for name in names:
        assert f"| {name} | competitor |" in table
    per = results["caches"][str(cache_file)]
    assert per["per_task_weights"]["aggregate"]["accuracy"]["mean"] == 1.0
    assert per["uniform_weights"]["aggregate"]["accuracy"]["mean"] == 0.0
    assert per["rlae_ppo"]["aggregate"]["team_size"]["mean"] == 3.0
    assert not benchmark.uses_test_labels("rlae_ppo")


def test_test_labels_do_not_influence_the_rlae_selection(tmp_path: Path) -> None:
    cache = planted_cache(300)
    test = cache.select("test")
    flipped = flip_labels(cache, test)
    chosen = []
    for index, which in enumerate((cache, flipped)):
        answers = benchmark.learner_answers(
            which, 0, 1.0, tmp_path / str(index), algorithm="rlae_ppo", passes=3.0, checkpoints=2
        )
        chosen.append((answers.info["selected_iteration"], answers.info["validation"], answers.predictions.tolist()))
    assert chosen[0] == chosen[1]


# -- the weighted-vote baselines ------------------------------------------------------------------------------
def test_weighted_vote_follows_a_hand_computed_table() -> None:
    probs = np.array(
        [
            [[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.5, 0.3, 0.2]],
            [[0.4, 0.6, 0.0], [0.7, 0.3, 0.0], [0.9, 0.1, 0.0]],
            [[0.5, 0.5, 0.0], [0.25, 0.25, 0.5], [0.0, 0.0, 1.0]],
        ]
    )
    valid = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1]], dtype=bool)
    table = [
        # weights, answers: q0 sums, q1 sums (2 valid choices), q2 sums (ties to the lowest choice)
        ([1, 1, 1], [0, 0, 2]),  # q0 1.5 1.1 .4; q1 2.0 1.0; q2 .75 .75 1.5
        ([0, 1, 0], [1, 0, 2]),  # model 1 alone
        ([1, 0, 0], [0, 1, 0]),  # model 0 alone: q2 ties 0.5 0.5 -> 0
        ([0, 0, 0], [0, 0, 2]),  # all zero: the mean vote
        ([1, 0.5, 0], [0, 0, 0]),  # q2: .625 .625 .25 -> tie to 0
        ([0.2, 1, 0], [1, 0, 2]),  # q0: .44 .64 .12
    ]
    for row, expected in table:
        weight_rows = np.tile(np.asarray(row, dtype=float), (3, 1))
        assert weights.weighted_vote(probs, weight_rows, valid).tolist() == expected, row
    with pytest.raises(ValueError, match="weights"):
        weights.weighted_vote(probs, -np.ones((3, 3)), valid)


def test_per_task_weights_recover_a_planted_weighting() -> None:
    cache = planted_cache()
    train, validation, test = (cache.select(split) for split in ("train", "validation", "test"))
    result = weights.per_task_weights(cache, train, test, validation=validation)
    assert result.accuracy == 1.0 and result.info["shrink"] < 1.0
    fitted = result.info["weights"]
    assert np.argmax(fitted["a"]) == 0 and np.argmax(fitted["b"]) == 1
    raw = weights.fit_mixture_weights(weights._label_probs(cache, train[cache.tasks[train] == 0]))
    assert raw[0] > 0.99  # the likelihood-optimal mixture puts its weight on the right model
    uniform = weights.per_task_weights(cache, train, test, shrink=1.0)
    assert (
        uniform.accuracy == registry.lookup("uniform_weights").run(registry.Setting(cache, train, test)).accuracy == 0.0
    )


def test_per_question_weights_learn_the_task_weighting_and_choose_on_validation() -> None:
    cache = planted_cache()
    train, validation, test = (cache.select(split) for split in ("train", "validation", "test"))
    result = weights.per_question_weights(cache, train, test, validation=validation)
    assert result.accuracy == 1.0
    assert set(result.info["validation_accuracy"]) == {f"{p:g}" for p in weights.L2_GRID}
    # choosing never reads the test labels
    flipped = flip_labels(cache, test)
    again = weights.per_question_weights(flipped, train, test, validation=validation)
    assert again.info["l2"] == result.info["l2"]
    np.testing.assert_array_equal(again.predictions, result.predictions)


def test_the_weight_baselines_are_registered() -> None:
    assert registry.lookup("uniform_weights").name == "mean_probability_vote"
    for name in ("per_task_weights", "per_question_weights"):  # run by name: benchmark, evaluate of an RLAE run
        entry = registry.lookup(name)
        assert not entry.by_default and not entry.in_evaluate and not entry.uses_test_labels


@pytest.mark.parametrize(
    "module", ["ensemble_mappo.rlae", "ensemble_mappo.rlae_config", "ensemble_env.baselines.weights"]
)
def test_docstring_examples(module: str) -> None:
    failures, attempted = doctest.testmod(importlib.import_module(module))
    assert failures == 0 and attempted > 0


# -- the frame's shared paths: resume, online evaluation, plot ----------------------------------------------------
@pytest.mark.parametrize("algorithm", ["rlae_ppo", "rlae_mappo"])
def test_a_resumed_run_is_the_uninterrupted_one(tmp_path: Path, algorithm: str) -> None:
    cache = planted_cache(300)
    config = RLAEConfig(algorithm=algorithm, passes=4.0, num_envs=8, num_steps=16, checkpoints=2, checkpoint_every=1)
    whole = tmp_path / "whole"
    train(config, cache, whole, progress=False)
    parted = tmp_path / "parted"
    train(config, cache, parted, progress=False, stop_after=3)
    assert read_selection(parted) is None  # chosen only once the budget is spent
    train(config, cache, parted, progress=False, resume=True)
    assert read_selection(parted) == read_selection(whole)
    run = read_config(whole)
    first, second = (read_checkpoint(folder / "checkpoint.pt", run) for folder in (whole, parted))
    assert first.iteration == second.iteration and first.random == second.random
    for name, state in first.networks.items():
        for key, tensor in state.items():
            torch.testing.assert_close(tensor, second.networks[name][key], rtol=0, atol=0)
    rows = [(folder / "progress.csv").read_text().splitlines() for folder in (whole, parted)]
    drop_time = [",".join(line.split(",")[:2] + line.split(",")[4:]) for line in rows[0]]
    assert drop_time == [",".join(line.split(",")[:2] + line.split(",")[4:]) for line in rows[1]]


def test_online_evaluation_learns_on_the_stream_and_is_labelled(tiny_run: tuple[Path, RLAEConfig, LogitCache]) -> None:
    out, _config, cache = tiny_run
    frozen = evaluate_run(out, cache, split="test")
    online = evaluate_run(out, cache, split="test", online=True, update_every=16, seed=3)
    assert online.name.endswith("(online)") and online.protocol == "online" and frozen.protocol == "frozen"
    assert online.questions.tolist() == frozen.questions.tolist()
    assert online.update_every == 16
    again = evaluate_run(out, cache, split="test", online=True, update_every=16, seed=3)
    np.testing.assert_array_equal(online.answers, again.answers)  # seeded


def test_plot_draws_an_rlae_run(tiny_run: tuple[Path, RLAEConfig, LogitCache], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from ensemble_mappo.plots import PLOT_NAMES, plot_runs

    out, _config, cache = tiny_run
    cache_file = tmp_path / "planted.h5"
    save_cache(cache_file, cache)
    written = plot_runs([out], tmp_path / "plots", str(cache_file))
    assert [path.name for path in written] == list(PLOT_NAMES)
    assert all(path.stat().st_size > 1000 for path in written)
