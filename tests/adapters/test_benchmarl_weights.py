"""BenchMARL adapter, the ``weights`` task (RLAE_MAPPO's per-model weights game): its specs, its registration for
BenchMARL's command line, every continuous algorithm BenchMARL has, and learning on toy8."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("benchmarl")

import numpy as np
import torch
from benchmarl.algorithms import IddpgConfig, IppoConfig, IsacConfig, MaddpgConfig, MappoConfig, MasacConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.models.mlp import MlpConfig
from testing.benchmarl_runs import run_benchmarl
from torchrl.envs.utils import ExplorationType, set_exploration_type

import ensemble_env
from ensemble_env import save_cache
from ensemble_env.adapters.benchmarl import (
    WEIGHTS_GAME,
    WEIGHTS_HYDRA_DEFAULTS,
    EnsembleTask,
    benchmarl_task,
    benchmarl_weights_task,
)
from ensemble_env.adapters.torchrl import WEIGHTS_GROUP, torchrl_env
from ensemble_env.synthetic import make_cache

torch.set_num_threads(1)

BENCHMARL_WARNINGS = [
    "ignore:SyncDataCollector has been deprecated:DeprecationWarning",  # BenchMARL builds its collector with it
    "ignore:size_average and reduce args will be deprecated:UserWarning",  # torch, from BenchMARL's l2 critic loss
    # BenchMARL's note when a batch ends no episode (512-question episodes, 256 frames a copy per batch)
    "ignore:No episode terminated this iteration:UserWarning",
]
#: BenchMARL's continuous algorithms, and whether their critic reads the centralized state
CONTINUOUS = {
    MappoConfig: True,
    IppoConfig: False,
    MasacConfig: True,
    IsacConfig: False,
    MaddpgConfig: True,
    IddpgConfig: False,
}


@pytest.fixture(scope="module")
def cache_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cache") / "tiny.h5"
    save_cache(path, make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=4))
    return path


def make_env(task: object, num_envs: int = 1, seed: int = 0) -> object:
    return task.get_env_fun(num_envs=num_envs, continuous_actions=True, seed=seed, device="cpu")()


def tiny_config(tmp_path: Path, frames: int = 64) -> ExperimentConfig:
    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = frames
    config.on_policy_collected_frames_per_batch = config.off_policy_collected_frames_per_batch = 32
    config.on_policy_n_envs_per_worker = config.off_policy_n_envs_per_worker = 2
    config.on_policy_n_minibatch_iters = 1
    config.on_policy_minibatch_size = 16
    config.off_policy_train_batch_size = 16
    config.off_policy_n_optimizer_steps = 2
    config.off_policy_init_random_frames = 0
    config.evaluation = False
    config.loggers = []
    config.create_json = False
    config.checkpoint_at_end = False
    config.save_folder = str(tmp_path)
    return config


def test_the_weights_task_has_one_continuous_group_and_the_state(cache_path: Path) -> None:
    task = benchmarl_weights_task(cache_path, episode_length=16)
    assert task.name == "WEIGHTS" and {**task.config, "cache": None} == {
        "cache": None,
        **WEIGHTS_GAME,
        "episode_length": 16,
    }
    assert task.supports_continuous_actions() and not task.supports_discrete_actions()
    env = make_env(task)
    parallel = ensemble_env.parallel_env(str(cache_path), **WEIGHTS_GAME)
    assert task.group_map(env) == {WEIGHTS_GROUP: ["weight_0", "weight_1", "weight_2"]}
    action = task.action_spec(env)[WEIGHTS_GROUP, "action"]
    assert action.shape == (3, 1) and action.dtype == torch.float32
    assert torch.equal(action.space.low, torch.zeros(3, 1)) and torch.equal(action.space.high, torch.ones(3, 1))
    assert task.observation_spec(env)[WEIGHTS_GROUP, "observation"].shape == (
        3,
        *parallel.observation_space("weight_0").shape,
    )
    assert set(task.observation_spec(env).keys()) == {WEIGHTS_GROUP}
    assert task.state_spec(env)["state"].shape == parallel.state_space.shape  # centralized critics read it
    assert task.action_mask_spec(env) is None  # weights are not a discrete choice
    assert "accuracy" in task.info_spec(env)[WEIGHTS_GROUP, "info"].keys()
    assert task.max_steps(env) == 16
    logged = EnsembleTask.log_info(env.rollout(8))
    assert set(logged) == {"env/accuracy", "env/team_size"} and logged["env/team_size"] == 3.0


def test_the_decider_task_stays_discrete_and_mixing_is_refused(cache_path: Path) -> None:
    assert not benchmarl_task(cache_path).supports_continuous_actions()
    with pytest.raises(ValueError, match="decider=True is not the weights task's False"):
        benchmarl_weights_task(cache_path, decider=True)
    with pytest.raises(ValueError, match="fusion_agents='one' is not the weights task's 'per_model'"):
        benchmarl_weights_task(cache_path, fusion_agents="one")
    mixed = benchmarl_task(cache_path, fusion_action="weights", fusion_agents="per_model")
    with pytest.raises(ValueError, match=r"mixes a discrete group .* set decider=False"):
        make_env(mixed)


def test_copies_play_distinct_streams(cache_path: Path) -> None:
    env = make_env(benchmarl_weights_task(cache_path, order="shuffled", episode_length=16), num_envs=3)
    questions = env.rollout(16)["next", WEIGHTS_GROUP, "info", "question"][..., 0]
    assert questions.shape == (3, 16) and len({tuple(row.tolist()) for row in questions}) == 3


def test_the_weights_task_is_registered_for_benchmarls_command_line(cache_path: Path) -> None:
    from benchmarl.environments import task_config_registry
    from benchmarl.hydra_config import load_task_config_from_hydra
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from ensemble_env.adapters.benchmarl import register

    register()
    assert {"ensemble_env/ensemble", "ensemble_env/weights"} <= set(task_config_registry)
    node = ConfigStore.instance().load("task/ensemble_env/weights.yaml").node
    assert OmegaConf.to_container(node) == WEIGHTS_HYDRA_DEFAULTS
    config = OmegaConf.create({**WEIGHTS_HYDRA_DEFAULTS, "cache": str(cache_path), "alpha": 0.5})
    with pytest.warns(UserWarning, match="TaskConfig python dataclass not found"):
        task = load_task_config_from_hydra(config, "ensemble_env/weights")
    assert isinstance(task, EnsembleTask) and task.supports_continuous_actions() and task.config["alpha"] == 0.5


@pytest.mark.slow
@pytest.mark.filterwarnings(*BENCHMARL_WARNINGS)
@pytest.mark.parametrize("algorithm", list(CONTINUOUS), ids=lambda config: config.__name__)
def test_every_continuous_algorithm_runs_two_iterations(cache_path: Path, tmp_path: Path, algorithm: type) -> None:
    experiment = Experiment(
        task=benchmarl_weights_task(cache_path, episode_length=16),
        algorithm_config=algorithm.get_from_yaml(),
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=0,
        config=tiny_config(tmp_path),
    )
    assert experiment.continuous_actions
    critic = experiment.losses[WEIGHTS_GROUP]
    critic_network = getattr(critic, "critic_network", None) or getattr(critic, "qvalue_network", None)
    critic_network = critic_network or critic.value_network
    assert ("state" in critic_network.in_keys) is CONTINUOUS[algorithm]
    experiment.run()
    assert experiment.total_frames == 64 and experiment.n_iters_performed == 2


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["mappo", "masac"])
def test_benchmarls_own_run_trains_the_weights_task(tmp_path: Path, algorithm: str) -> None:
    """``python -m benchmarl.run algorithm=... task=ensemble_env/weights``: BenchMARL's own entry point; the Hydra
    plugin (src/hydra_plugins/ensemble_env_benchmarl) registers the task."""
    overrides = [
        f"algorithm={algorithm}",
        "task=ensemble_env/weights",
        "task.episode_length=16",
        "experiment.max_n_frames=64",
        "experiment.on_policy_collected_frames_per_batch=32",
        "experiment.off_policy_collected_frames_per_batch=32",
        "experiment.on_policy_n_envs_per_worker=2",
        "experiment.off_policy_n_envs_per_worker=2",
        "experiment.on_policy_minibatch_size=16",
        "experiment.on_policy_n_minibatch_iters=1",
        "experiment.off_policy_train_batch_size=16",
        "experiment.off_policy_n_optimizer_steps=2",
        "experiment.off_policy_init_random_frames=0",
    ]
    printed = run_benchmarl("benchmarl.run", overrides, tmp_path)
    assert "Task: ensemble_env/weights" in printed
    assert "fusion_agents: per_model" in printed  # the task's config, WEIGHTS_HYDRA_DEFAULTS


def _mean_weights(policy: object, split: str) -> tuple[np.ndarray, float]:
    """(N,) the policy's mean weight of each model over toy8's ``split``, and its accuracy there."""
    env = torchrl_env("toy8", split=split, seed=0, **WEIGHTS_GAME)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(env._env.engine.episode_length, policy)
    weights = rollout[WEIGHTS_GROUP, "action"][..., 0].mean(0).numpy()
    return weights, rollout["next", WEIGHTS_GROUP, "info", "correct"][:, 0].mean().item()


@pytest.mark.slow
@pytest.mark.filterwarnings(*BENCHMARL_WARNINGS)
def test_mappo_learns_to_weigh_toy8s_better_models_up(tmp_path: Path) -> None:
    """A short MAPPO on toy8 (8 models, train accuracy 0.51 to 0.80): starting from weights near 1/2 for every
    model, it learns to give the most accurate models (svm_rbf, mlp: 0.80, 0.78 on train) more weight than the
    least accurate (knn_raw, tree_d6: 0.51, 0.54), and its test accuracy stays at the mean vote's or above."""
    cache = ensemble_env.cache.datasets.resolve("toy8")
    train = cache.select("train")
    accuracy = (cache.probs[train].argmax(-1) == cache.labels[train][:, None]).mean(0)
    best, worst = np.argsort(accuracy)[-2:], np.argsort(accuracy)[:2]
    config = tiny_config(tmp_path, frames=8192)
    config.on_policy_collected_frames_per_batch = 1024
    config.on_policy_n_envs_per_worker = 4
    config.on_policy_n_minibatch_iters = 4
    config.on_policy_minibatch_size = 256
    config.lr = 3e-3
    config.gamma = 0.0
    config.share_policy_params = False
    model = MlpConfig.get_from_yaml()
    model.num_cells = [64, 64]
    task = benchmarl_weights_task("toy8", split="train", order="shuffled", episode_length=512)
    experiment = Experiment(
        task=task,
        algorithm_config=MappoConfig.get_from_yaml(),
        model_config=model,
        critic_model_config=model,
        seed=0,
        config=config,
    )
    start, start_accuracy = _mean_weights(experiment.policy, "test")
    assert np.abs(start - 0.5).max() < 0.1  # the untrained policy: near the mean vote
    experiment.run()
    learned, learned_accuracy = _mean_weights(experiment.policy, "test")
    gap_before = start[best].mean() - start[worst].mean()
    gap_after = learned[best].mean() - learned[worst].mean()
    assert gap_after > gap_before + 0.05, (start.round(3), learned.round(3))  # seed 0: -0.004 -> +0.105
    assert learned_accuracy >= start_accuracy - 0.005, (start_accuracy, learned_accuracy)  # seed 0: 0.833 -> 0.844
