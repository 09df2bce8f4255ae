"""BenchMARL's MAPPO (centralized critics on the state) or IPPO on the ensemble game.

    pip install -e ".[benchmarl]"                     # its own environment: BenchMARL needs torchrl<0.12
    python examples/benchmarl_mappo.py --smoke        # MAPPO then IPPO, 4096 frames each, one process each
    python examples/benchmarl_mappo.py --algorithm mappo --frames 300000

The task is :func:`ensemble_env.adapters.benchmarl.benchmarl_task` (decider as a subset index). Both groups,
"decider" and "fusion", train with their own policy; MAPPO's critic of each group reads the centralized state.
It prints the greedy test-split accuracy and reward per question before and after training.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from typing import Any

import torch
from benchmarl.algorithms import IppoConfig, MappoConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.models.mlp import MlpConfig
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ensemble_env.adapters.benchmarl import benchmarl_task
from ensemble_env.adapters.torchrl import torchrl_env

ALGORITHMS = {"mappo": MappoConfig, "ippo": IppoConfig}


def evaluate(policy: Any, seed: int) -> dict[str, float]:
    """Greedy play of the experiment's policy over the whole test stream."""
    env = torchrl_env(split="test", decider_action="subset", decider_action_mask=True, seed=seed)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(env._env.engine.episode_length, policy)
    info = rollout[-1]["next", "fusion", "info"]
    return {
        "accuracy": float(info["accuracy"]),
        "reward_per_question": float(info["episode_return"] / info["step"]),
        "team_size": float(rollout["next", "fusion", "info", "team_size"].mean()),
    }


#: BenchMARL's experiment settings changed from its defaults (benchmarl/conf/experiment/base_experiment.yaml)
SETTINGS = {
    "on_policy_collected_frames_per_batch": 2048,
    "on_policy_n_envs_per_worker": 4,
    "on_policy_n_minibatch_iters": 4,
    "on_policy_minibatch_size": 256,
    "lr": 1e-3,
    "evaluation": False,  # evaluate() below plays the whole test stream instead
    "loggers": [],
    "create_json": False,
    "checkpoint_interval": 0,
    "checkpoint_at_end": False,
}
EPISODE_LENGTH = 256


def run(algorithm: str, frames: int, seed: int) -> None:
    task = benchmarl_task(split="train", order="shuffled", episode_length=EPISODE_LENGTH)
    algorithm_config = ALGORITHMS[algorithm].get_from_yaml()
    algorithm_config.entropy_coef = 0.01
    with tempfile.TemporaryDirectory() as folder:
        config = ExperimentConfig.get_from_yaml()
        for name, value in {**SETTINGS, "max_n_frames": frames, "save_folder": folder}.items():
            setattr(config, name, value)
        experiment = Experiment(
            task=task,
            algorithm_config=algorithm_config,
            model_config=MlpConfig.get_from_yaml(),
            critic_model_config=MlpConfig.get_from_yaml(),
            seed=seed,
            config=config,
        )
        before = evaluate(experiment.policy, seed)
        experiment.run()
        after = evaluate(experiment.policy, seed)
    critic = "centralized critics on the state" if algorithm == "mappo" else "critics on each group's observation"
    print(f"[benchmarl {algorithm}] {frames} frames, {critic}")
    for key in before:
        print(f"  test {key:<20s} before {before[key]:7.3f}   after {after[key]:7.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithm", choices=(*ALGORITHMS, "both"), default="both")
    parser.add_argument("--frames", type=int, default=200_000, help="environment steps per algorithm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="4096 frames of each algorithm (about a minute in all)")
    args = parser.parse_args(argv)
    frames = 4096 if args.smoke else args.frames
    if args.algorithm == "both":
        # One process per algorithm: a second BenchMARL experiment in the same process ran its matrix products
        # up to ten times slower here (IPPO after MAPPO: 60-120 s per iteration instead of 6-9 s).
        for algorithm in ALGORITHMS:
            command = [sys.executable, __file__, "--algorithm", algorithm, "--frames", str(frames)]
            subprocess.run([*command, "--seed", str(args.seed)], check=True)
        return
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    run(args.algorithm, frames, args.seed)


if __name__ == "__main__":
    main()
