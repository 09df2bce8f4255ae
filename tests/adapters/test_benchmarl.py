"""BenchMARL adapter: the task's specs (the state included), pickling, and MAPPO / IPPO experiments."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

pytest.importorskip("benchmarl")

import torch
from benchmarl.algorithms import IppoConfig, MappoConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.models.mlp import MlpConfig
from testing.benchmarl_runs import run_benchmarl

import ensemble_env
from ensemble_env import save_cache
from ensemble_env.adapters.benchmarl import EnsembleTask, benchmarl_task
from ensemble_env.synthetic import make_cache

torch.set_num_threads(1)

# Warnings BenchMARL 1.5 triggers in torchrl 0.11 and torch, which this project cannot fix:
BENCHMARL_WARNINGS = [
    "ignore:SyncDataCollector has been deprecated:DeprecationWarning",  # BenchMARL builds its collector with it
    "ignore:size_average and reduce args will be deprecated:UserWarning",  # torch, from BenchMARL's l2 critic loss
]


@pytest.fixture(scope="module")
def cache_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cache") / "tiny.h5"
    save_cache(path, make_cache(n_models=3, n_questions=200, n_tasks=2, n_choices=(2, 4), seed=4))
    return path


def make_env(task: object, num_envs: int = 1, seed: int = 0) -> object:
    return task.get_env_fun(num_envs=num_envs, continuous_actions=False, seed=seed, device="cpu")()


def test_task_specs_hold_both_groups_the_masks_and_the_state(cache_path: Path) -> None:
    task = benchmarl_task(cache_path, episode_length=16)
    env = make_env(task)
    parallel = ensemble_env.parallel_env(str(cache_path))
    assert task.group_map(env) == {"decider": ["decider"], "fusion": ["fusion"]}
    assert task.state_spec(env)["state"].shape == parallel.state_space.shape  # MAPPO's critics read it
    assert set(task.observation_spec(env).keys()) == {"decider", "fusion"}
    assert set(task.action_mask_spec(env).keys()) == {"decider", "fusion"}  # BenchMARL masks all or none
    assert task.action_mask_spec(env)["decider", "action_mask"].shape == (1, 2**3 - 1)
    assert task.action_spec(env)["decider", "action"].space.n == 2**3 - 1  # the subset index
    assert "accuracy" in task.info_spec(env)["fusion", "info"].keys()
    assert task.max_steps(env) == 16
    assert not task.supports_continuous_actions() and task.supports_discrete_actions()


def test_task_pickles_and_refuses_other_encodings(cache_path: Path) -> None:
    task = benchmarl_task(cache_path, episode_length=16, alpha=0.5)
    copy = pickle.loads(pickle.dumps(task))
    assert isinstance(copy, EnsembleTask) and copy == task and copy.config["alpha"] == 0.5
    with pytest.raises(ValueError, match="does not work with BenchMARL: use 'subset'"):
        benchmarl_task(decider_action="multibinary")


def test_log_info_reports_accuracy_and_team_size(cache_path: Path) -> None:
    env = make_env(benchmarl_task(cache_path, episode_length=8))
    logged = EnsembleTask.log_info(env.rollout(8))
    assert set(logged) == {"env/accuracy", "env/team_size"} and 0.0 <= logged["env/accuracy"] <= 1.0


def test_copies_play_distinct_streams_and_one_seed_repeats_them(cache_path: Path) -> None:
    """BenchMARL hands get_env_fun one seed for all its copies: copy i must get its own stream."""
    task = benchmarl_task(cache_path, order="shuffled", episode_length=16)

    def questions(seed: int) -> torch.Tensor:
        env = make_env(task, num_envs=4, seed=seed)
        return env.rollout(16)["next", "fusion", "info", "question"][..., 0]

    first = questions(0)
    assert first.shape == (4, 16)
    assert len({tuple(row.tolist()) for row in first}) == 4  # four different question streams
    torch.testing.assert_close(first, questions(0))  # and the same ones again from the same seed
    assert not torch.equal(first, questions(1))


@pytest.mark.parametrize(("options", "terminated"), [({"episode_length": 6}, False), ({"split": "test"}, True)])
def test_termination_and_truncation_reach_benchmarl_apart(cache_path: Path, options: dict, terminated: bool) -> None:
    env = make_env(benchmarl_task(cache_path, **options), num_envs=2)
    last = env.rollout(500)[:, -1]["next"]
    for group in ("decider", "fusion"):
        assert last[group, "done"].all()
        assert (last[group, "terminated"] == terminated).all()
        assert (last[group, "truncated"] != terminated).all()


def test_the_task_is_registered_for_benchmarls_command_line(cache_path: Path) -> None:
    from benchmarl.environments import task_config_registry
    from benchmarl.hydra_config import load_task_config_from_hydra
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from ensemble_env.adapters.benchmarl import HYDRA_DEFAULTS, register

    register()
    assert "ensemble_env/ensemble" in task_config_registry
    node = ConfigStore.instance().load("task/ensemble_env/ensemble.yaml").node
    assert OmegaConf.to_container(node) == HYDRA_DEFAULTS
    config = OmegaConf.create({**HYDRA_DEFAULTS, "cache": str(cache_path), "alpha": 0.5, "episode_length": 20})
    with pytest.warns(UserWarning, match="TaskConfig python dataclass not found"):
        task = load_task_config_from_hydra(config, "ensemble_env/ensemble")
    assert isinstance(task, EnsembleTask) and task.config["alpha"] == 0.5
    assert task.max_steps(None) == 20


@pytest.mark.slow
@pytest.mark.filterwarnings(*BENCHMARL_WARNINGS)
@pytest.mark.parametrize("algorithm", [MappoConfig, IppoConfig])
def test_mappo_and_ippo_run_one_iteration(cache_path: Path, tmp_path: Path, algorithm: type) -> None:
    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = config.on_policy_collected_frames_per_batch = 64
    config.on_policy_n_envs_per_worker = 2
    config.on_policy_n_minibatch_iters = 1
    config.on_policy_minibatch_size = 32
    config.evaluation = False
    config.loggers = []
    config.create_json = False
    config.checkpoint_at_end = False
    config.save_folder = str(tmp_path)
    experiment = Experiment(
        task=benchmarl_task(cache_path, episode_length=16),
        algorithm_config=algorithm.get_from_yaml(),
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=0,
        config=config,
    )
    critic_inputs = experiment.losses["fusion"].critic_network.in_keys
    if algorithm is MappoConfig:
        assert "state" in critic_inputs  # the centralized critic sees the state
    else:
        assert "state" not in critic_inputs
    experiment.run()
    assert experiment.total_frames == 64


#: one tiny MAPPO iteration of the decider-and-fusion task
TINY_RUN = [
    "algorithm=mappo",
    "task=ensemble_env/ensemble",
    "task.episode_length=16",
    "experiment.max_n_frames=64",
    "experiment.on_policy_collected_frames_per_batch=64",
    "experiment.on_policy_n_envs_per_worker=2",
    "experiment.on_policy_minibatch_size=32",
    "experiment.on_policy_n_minibatch_iters=1",
]


@pytest.mark.slow
def test_benchmarls_own_run_finds_the_task_through_the_hydra_plugin(tmp_path: Path) -> None:
    """``python -m benchmarl.run ... task=ensemble_env/ensemble``: BenchMARL's own entry point, no code of ours
    called first; the Hydra plugin (src/hydra_plugins/ensemble_env_benchmarl) registers the task."""
    printed = run_benchmarl("benchmarl.run", TINY_RUN, tmp_path)
    assert "Task: ensemble_env/ensemble" in printed
    assert "decider_action: subset" in printed  # the task's config, HYDRA_DEFAULTS


@pytest.mark.filterwarnings(*BENCHMARL_WARNINGS)
def test_the_aligned_credit_callback_and_the_per_choice_model(cache_path: Path, tmp_path: Path) -> None:
    from ensemble_env.adapters.benchmarl import AlignDeciderCredit, EnsembleModelConfig, align_decider_credit

    options = {"episode_length": 16, "decider_extras": ("task",), "fusion_extras": ("task",)}
    task = benchmarl_task(cache_path, fusion_view="per_choice", **options)
    env = make_env(task, num_envs=2)
    batch = env.rollout(20, break_when_any_done=False)  # (2 copies, 20 steps): an episode ends at step 15
    game = batch["next", "fusion", "reward"].clone()
    align_decider_credit(batch)
    aligned = batch["next", "decider", "reward"]
    assert torch.equal(aligned[:, :15], game[:, 1:16])  # r_{t+1}: the question the committed team answers
    assert (aligned[:, 15] == 0).all()  # the episode's last step: its team answers nothing in the episode
    assert torch.equal(batch["next", "fusion", "reward"], game)  # the fusion agent's rewards are the game's
    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = config.on_policy_collected_frames_per_batch = 64
    config.on_policy_n_envs_per_worker = 2
    config.on_policy_n_minibatch_iters = 1
    config.on_policy_minibatch_size = 32
    config.evaluation = False
    config.loggers = []
    config.create_json = False
    config.checkpoint_at_end = False
    config.save_folder = str(tmp_path)
    pool = ensemble_env.load_cache(cache_path)

    def experiment_of(team_logits: str, callbacks: list) -> Experiment:
        model = EnsembleModelConfig(
            **_mlp_fields(), n_models=pool.n_models, n_choices=pool.max_choices, team_logits=team_logits
        )
        return Experiment(
            task=task,
            algorithm_config=MappoConfig.get_from_yaml(),
            model_config=model,
            critic_model_config=MlpConfig.get_from_yaml(),
            seed=0,
            config=config,
            callbacks=callbacks,
        )

    def modules_of(experiment: Experiment, group: str) -> list[str]:
        return [type(module).__name__ for module in experiment.group_policies[group].modules()]

    experiment = experiment_of("mlp", [AlignDeciderCredit()])
    assert modules_of(experiment, "fusion").count("PerChoiceScorer") == 1  # the shared scorer answers
    assert "TeamScorer" not in modules_of(experiment, "decider")  # the default decider: BenchMARL's MLP
    experiment.run()
    assert experiment.total_frames == 64
    config.save_folder = str(tmp_path / "per_model")
    (tmp_path / "per_model").mkdir()
    assert modules_of(experiment_of("per_model", []), "decider").count("TeamScorer") == 1
    with pytest.raises(ValueError, match="team_logits must be one of"):
        experiment_of("x", [])


def _mlp_fields() -> dict:
    from dataclasses import asdict

    return asdict(MlpConfig.get_from_yaml())


@pytest.mark.slow
def test_benchmarls_command_line_runs_the_task(tmp_path: Path) -> None:
    """The Hydra command line as BenchMARL's users launch it, one tiny MAPPO iteration."""
    printed = run_benchmarl("ensemble_env.adapters.benchmarl", TINY_RUN, tmp_path)
    assert "Task: ensemble_env/ensemble" in printed
