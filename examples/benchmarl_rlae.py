"""RLAE_MAPPO with BenchMARL: one agent per model sets that model's weight per question (continuous actions).

    pip install -e ".[benchmarl]"                        # its own environment: BenchMARL needs torchrl<0.12
    python examples/benchmarl_rlae.py --smoke            # MAPPO, 3 iterations of 1024 questions on bbh5
    python examples/benchmarl_rlae.py                    # MAPPO on bbh5, the default budget (SETTINGS)
    python examples/benchmarl_rlae.py --algorithm masac  # any of BenchMARL's continuous algorithms (ALGORITHMS)
    python examples/benchmarl_rlae.py --eval-split validation   # how SETTINGS were chosen (never on test)

The task is :func:`ensemble_env.adapters.benchmarl.benchmarl_weights_task`, RLAE_MAPPO's game (arXiv 2506.00439;
``docs/rlae.md``) with the reference learner's options (``RLAEConfig.env_options``): no decider, every model
answers, N agents ``weight_0 ... weight_{N-1}`` in one group, "weights", each setting its model's weight in [0, 1]
from the question's context and its own model's probabilities. BenchMARL's continuous policies are TanhNormals
scaled to [0, 1]; an untrained network's mean is near 1/2 for every agent, near the mean vote. Each agent has its
own actor network (``share_policy_params=False``: the observations do not say which model an agent weighs);
MAPPO's critic reads the centralized state, IPPO's each agent's observation.

The same game from BenchMARL's own command line (Hydra; docs/adapters.md):

    python -m benchmarl.run algorithm=mappo task=ensemble_env/weights task.cache=bbh5

It prints SETTINGS, a progress line per iteration, then the test-split accuracy and reward per question of the
policy's mean before and after training next to the mean vote (uniform weights), per_task_weights and the others.
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

import torch
from benchmarl.algorithms import IddpgConfig, IppoConfig, IsacConfig, MaddpgConfig, MappoConfig, MasacConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models.mlp import MlpConfig
from torchrl_rlae import evaluate, game_options  # the sibling example's (examples/ is on sys.path)

from ensemble_env.adapters.benchmarl import benchmarl_weights_task
from ensemble_env.adapters.scoring import Progress, comparison, gain_line, weight_baseline_figures
from ensemble_env.adapters.torchrl import WEIGHTS_GROUP
from ensemble_env.cache.datasets import resolve as resolve_cache

ALGORITHMS = {
    "mappo": MappoConfig,
    "ippo": IppoConfig,
    "masac": MasacConfig,
    "isac": IsacConfig,
    "maddpg": MaddpgConfig,
    "iddpg": IddpgConfig,
}
GROUP = WEIGHTS_GROUP
#: the run's settings, chosen on bbh5's validation split (``--eval-split validation``; docs/adapters.md);
#: ``experiment`` changes BenchMARL's experiment config (benchmarl/conf/experiment/base_experiment.yaml)
SETTINGS: dict[str, Any] = {
    "frames": 40_960,  # questions played in training (N agents act on each)
    "episode_length": 512,  # questions per training episode (the shuffled train split)
    "hidden": [64, 64],  # the MLPs' hidden layers (BenchMARL's default: 256, 256)
    "experiment": {
        "on_policy_collected_frames_per_batch": 1024,
        "on_policy_n_envs_per_worker": 4,
        "on_policy_n_minibatch_iters": 4,  # passes over each batch
        "on_policy_minibatch_size": 256,
        "off_policy_collected_frames_per_batch": 1024,
        "off_policy_n_envs_per_worker": 4,
        "off_policy_n_optimizer_steps": 64,
        "off_policy_train_batch_size": 256,
        "lr": 3e-3,  # the reference learner's
        "gamma": 0.0,  # a question is a one-step bandit: the weights change nothing later
        "share_policy_params": False,
        "evaluation": False,  # evaluate() below plays the whole split instead
        "loggers": [],
        "create_json": False,
        "checkpoint_interval": 0,
        "checkpoint_at_end": False,
    },
}
#: --smoke: a short run of the same settings
SMOKE = {"frames": 3072}
#: the baselines printed next to the run (the registry's names)


class PrintProgress(Callback):
    """A progress line per collected batch: its reward, accuracy and the spread of a question's weights."""

    def __init__(self, iterations: int) -> None:
        super().__init__()
        self.progress = Progress("iteration", iterations)
        self.done = 0

    def on_batch_collected(self, batch: Any) -> None:
        self.done += 1
        info = batch["next", GROUP, "info"]
        self.progress.update(
            self.done,
            reward=info["reward"].mean().item(),
            accuracy=info["correct"].mean().item(),
            weight_spread=batch[GROUP, "action"][..., 0].std(dim=-1).mean().item(),
        )


def run(algorithm: str, cache_name: str, seed: int, split: str, settings: dict[str, Any]) -> None:
    print(f"SETTINGS: {settings}", flush=True)
    cache = resolve_cache(cache_name)
    options = {"split": "train", "order": "shuffled", "episode_length": settings["episode_length"]}
    task = benchmarl_weights_task(cache_name, **options, **game_options(cache))
    print(f"task: {task}", flush=True)
    algorithm_config = ALGORITHMS[algorithm].get_from_yaml()
    on_policy = algorithm in ("mappo", "ippo")
    frames_per_batch = settings["experiment"][f"{'on' if on_policy else 'off'}_policy_collected_frames_per_batch"]
    iterations = -(-settings["frames"] // frames_per_batch)
    model = MlpConfig.get_from_yaml()
    model.num_cells = list(settings["hidden"])
    with tempfile.TemporaryDirectory() as folder:
        config = ExperimentConfig.get_from_yaml()
        for name, value in {
            **settings["experiment"],
            "max_n_frames": settings["frames"],
            "save_folder": folder,
        }.items():
            setattr(config, name, value)
        experiment = Experiment(
            task=task,
            algorithm_config=algorithm_config,
            model_config=model,
            critic_model_config=model,
            seed=seed,
            config=config,
            callbacks=[PrintProgress(iterations)],
        )
        before = evaluate(experiment.policy, cache_name, seed, split)
        experiment.run()
        after = evaluate(experiment.policy, cache_name, seed, split)
    title = f"[benchmarl {algorithm}] {cache_name}: {settings['frames']} questions, per-model weights, seed {seed}"
    print(
        comparison(
            title,
            before.figures(),
            after.figures(),
            weight_baseline_figures(cache, split),
            questions=len(after),
            split=split,
        )
    )
    print(gain_line(f"benchmarl {algorithm} rlae", before.figures(), after.figures(), split), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="bbh5", help="a built-in cache (bbh5, toy8) or a cache file")
    parser.add_argument("--algorithm", choices=tuple(ALGORITHMS), default="mappo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument("--frames", type=int, default=SETTINGS["frames"], help="questions played in training")
    parser.add_argument("--lr", type=float, default=SETTINGS["experiment"]["lr"])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE['frames']} questions")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.lr <= 0:
        parser.error(f"--frames must be >= 1 and --lr > 0, got {args.frames} and {args.lr}")
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    settings = {**SETTINGS, "frames": args.frames, "experiment": {**SETTINGS["experiment"], "lr": args.lr}}
    settings.update(SMOKE if args.smoke else {})
    run(args.algorithm, args.cache, args.seed, args.eval_split, settings)


if __name__ == "__main__":
    main()
