"""BenchMARL's MAPPO (centralized critics on the state) or IPPO on the ensemble game.

    pip install -e ".[benchmarl]"                     # its own environment: BenchMARL needs torchrl<0.12
    python examples/benchmarl_mappo.py --smoke        # MAPPO, 4 iterations of 1024 frames on toy8
    python examples/benchmarl_mappo.py                # MAPPO, 40 iterations of 1024 frames on toy8
    python examples/benchmarl_mappo.py --cache bbh5 --algorithm ippo
    python examples/benchmarl_mappo.py --recipe plain # BenchMARL's MLPs and the game's own credit, gamma 0.9

The task is :func:`ensemble_env.adapters.benchmarl.benchmarl_task` (decider as a subset index). Both groups,
"decider" and "fusion", train with their own policy; MAPPO's critic of each group reads the centralized state.
The default recipe, ``options``, uses what makes the game learnable by generic networks (docs/adapters.md,
"Learnable by generic networks"): both roles see the question's task; the fuser reads the per-choice view
through a scorer shared over the choices that starts as the mean vote, the decider's team logits are sums of
per-model scores (``EnsembleModelConfig``); the decider is credited with the reward of the question its team
answers (the ``AlignDeciderCredit`` callback), with gamma 0. Its settings were chosen on bbh5's validation
split (``--eval-split validation``), never on test; the script prints them.
BenchMARL collects from 4 copies of the game, copy i seeded ``seed + i``: the script first prints the questions
each copy starts with, to show that their streams differ. Then a progress line per iteration, and at the end the
greedy test-split accuracy, reward per question and team size before and after training next to the fixed
baselines, and the teams the decider committed.

The same experiment from BenchMARL's own command line (Hydra; docs/adapters.md):

    python -m ensemble_env.adapters.benchmarl algorithm=mappo task=ensemble_env/ensemble
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import asdict
from typing import Any

import torch
from benchmarl.algorithms import IppoConfig, MappoConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models.mlp import MlpConfig
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ensemble_env.adapters.benchmarl import TEAM_LOGITS, AlignDeciderCredit, EnsembleModelConfig, benchmarl_task
from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.adapters.torchrl import torchrl_env
from ensemble_env.cache.datasets import resolve as resolve_cache

ALGORITHMS = {"mappo": MappoConfig, "ippo": IppoConfig}
#: BenchMARL's experiment settings changed from its defaults (benchmarl/conf/experiment/base_experiment.yaml).
#: TorchRL's PettingZooWrapper costs about 3 ms a step here (the game itself 0.03 ms), so the settings take
#: several updates from each frame.
SETTINGS = {
    "on_policy_collected_frames_per_batch": 1024,
    "on_policy_n_envs_per_worker": 4,
    "on_policy_n_minibatch_iters": 8,
    "on_policy_minibatch_size": 128,
    "lr": 1e-3,
    "evaluation": False,  # evaluate() below plays the whole split instead
    "loggers": [],
    "create_json": False,
    "checkpoint_interval": 0,
    "checkpoint_at_end": False,
}
#: per recipe: the game's options, BenchMARL's gamma, the default budget (frames) and the MLPs' hidden layers
RECIPES: dict[str, dict[str, Any]] = {
    # the options; with the aligned credit each decision is a one-step bandit, so gamma 0
    "options": {
        "env": {"decider_extras": ("task",), "fusion_extras": ("task",), "fusion_view": "per_choice"},
        "gamma": 0.0,
        "frames": 40_960,
        "hidden": [64, 64],
        "team_logits": "mlp",  # level with "per_model" on validation (docs/adapters.md)
    },
    # BenchMARL as it comes: rewards come at once (the fuser's) or one step later (the decider's), and gamma 0.9
    # keeps returns near +-10, which BenchMARL's critic (no value normalisation) fits far sooner than 0.99's
    "plain": {"env": {}, "gamma": 0.9, "frames": 40_960, "hidden": [256, 256]},
}
ENV_OPTIONS = {"split": "train", "order": "shuffled", "episode_length": 256}


class PrintProgress(Callback):
    """A progress line per collected batch: its accuracy, reward and team size."""

    def __init__(self, iterations: int) -> None:
        super().__init__()
        self.progress = Progress("iteration", iterations)
        self.done = 0

    def on_batch_collected(self, batch: Any) -> None:
        self.done += 1
        info = batch["next", "fusion", "info"]
        self.progress.update(
            self.done,
            reward=info["reward"].mean().item(),
            accuracy=info["correct"].mean().item(),
            team_size=info["team_size"].mean().item(),
        )


def show_streams(task: Any, seed: int, steps: int = 6) -> None:
    """The first questions each of the training copies plays (BenchMARL builds them with ``get_env_fun``)."""
    copies = SETTINGS["on_policy_n_envs_per_worker"]
    env = task.get_env_fun(num_envs=copies, continuous_actions=False, seed=seed, device="cpu")()
    env.set_seed(seed)  # as BenchMARL's collector leaves them: each copy keeps its own seed
    rollout = env.rollout(steps)
    questions = rollout["next", "fusion", "info", "question"][..., 0].long()
    for copy in range(copies):
        print(f"copy {copy}: first questions {questions[copy].tolist()}")
    env.close()


def evaluate(policy: Any, cache: str, seed: int, split: str, env_options: dict[str, Any]) -> EpisodeTally:
    """Greedy play of the experiment's policy over the whole ``split`` stream."""
    env = torchrl_env(cache, split=split, decider_action="subset", decider_action_mask=True, seed=seed, **env_options)
    engine = env._env.engine
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(engine.episode_length, policy)
    teams = team_mask_of(rollout["decider", "observation"][:, 0].numpy(), engine.layout, "decider")
    info = rollout["next", "fusion", "info"][:, 0]
    return EpisodeTally.from_steps(engine.cache.models, teams, info["correct"].numpy(), info["reward"].numpy())


def run(algorithm: str, recipe: str, cache: str, frames: int, seed: int, split: str, team_logits: str | None) -> None:
    chosen = {**RECIPES[recipe], **({"team_logits": team_logits} if team_logits else {})}
    print(f"settings: recipe {recipe} {chosen}, {SETTINGS}", flush=True)
    task = benchmarl_task(cache, **ENV_OPTIONS, **chosen["env"])
    show_streams(task, seed)
    algorithm_config = ALGORITHMS[algorithm].get_from_yaml()
    algorithm_config.entropy_coef = 0.01
    iterations = frames // SETTINGS["on_policy_collected_frames_per_batch"]
    pool = resolve_cache(cache)
    mlp = MlpConfig.get_from_yaml()
    mlp.num_cells = list(chosen["hidden"])
    model, callbacks = mlp, [PrintProgress(iterations)]
    if recipe == "options":
        model = EnsembleModelConfig(
            **asdict(mlp), n_models=pool.n_models, n_choices=pool.max_choices, team_logits=chosen["team_logits"]
        )
        callbacks.insert(0, AlignDeciderCredit())  # before PrintProgress, which reports the fuser's rewards only
    with tempfile.TemporaryDirectory() as folder:
        config = ExperimentConfig.get_from_yaml()
        for name, value in {
            **SETTINGS,
            "gamma": chosen["gamma"],
            "max_n_frames": frames,
            "save_folder": folder,
        }.items():
            setattr(config, name, value)
        experiment = Experiment(
            task=task,
            algorithm_config=algorithm_config,
            model_config=model,
            critic_model_config=mlp,
            seed=seed,
            config=config,
            callbacks=callbacks,
        )
        before = evaluate(experiment.policy, cache, seed, split, chosen["env"])
        experiment.run()
        after = evaluate(experiment.policy, cache, seed, split, chosen["env"])
    critic = "centralized critics on the state" if algorithm == "mappo" else "critics on each group's observation"
    title = f"[benchmarl {algorithm}] {cache}: recipe {recipe}, {frames} frames, {critic}, seed {seed}"
    reference = baseline_figures(pool, split)
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after), split=split))
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line(f"benchmarl {algorithm}", before.figures(), after.figures(), split), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="toy8", help="a built-in cache (toy8, bbh5) or a cache file")
    parser.add_argument("--algorithm", choices=tuple(ALGORITHMS), default="mappo")
    parser.add_argument("--recipe", choices=tuple(RECIPES), default="options")
    parser.add_argument("--frames", type=int, default=None, help="environment steps (default: the recipe's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument(
        "--team-logits", choices=TEAM_LOGITS, default=None, help="the decider's actor (recipe options; default mlp)"
    )
    parser.add_argument("--smoke", action="store_true", help="4096 frames (4 iterations)")
    args = parser.parse_args(argv)
    if args.team_logits and args.recipe != "options":
        parser.error("--team-logits is part of the options recipe")
    frames = 4096 if args.smoke else args.frames or RECIPES[args.recipe]["frames"]
    batch = SETTINGS["on_policy_collected_frames_per_batch"]
    if frames < batch or frames % batch:
        parser.error(f"--frames must be a positive multiple of {batch}, got {frames}")
    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    run(args.algorithm, args.recipe, args.cache, frames, args.seed, args.eval_split, args.team_logits)


if __name__ == "__main__":
    main()
