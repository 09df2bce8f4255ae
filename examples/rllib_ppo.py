"""RLlib PPO on the ensemble game: one policy per role, rollouts in 2 env-runner processes.

    pip install -e ".[rllib]"
    python examples/rllib_ppo.py --smoke                  # 16 iterations on bbh5, about a minute on 2 CPU cores
    python examples/rllib_ppo.py                          # 80 iterations on toy8
    python examples/rllib_ppo.py --cache bbh5             # the 5 LLMs on BIG-Bench-Hard
    python examples/rllib_ppo.py --recipe plain           # the game's own credit and views, gamma 0.99
    python examples/rllib_ppo.py --address auto --num-env-runners 16 --num-learners 2   # on a Ray cluster

On a cluster, start Ray first (docs/adapters.md gives the commands, token authentication included); the code is
the same, only ``--address`` and the counts change.

The settings that make RLlib learn here live in :func:`ensemble_env.adapters.rllib.ppo_config`: separate value
layers, a value clip that fits the returns, the fusion valid-choice mask. The default recipe, ``options``, adds
what makes the game learnable by generic networks (docs/adapters.md, "Learnable by generic networks"): both
roles see the question's task; the fuser reads the per-choice view through a scorer shared over the choices that
starts as the mean vote (``PerChoicePPOTorchRLModule``); the decider is credited with the reward of the question
its team answers (``credit="aligned"``: the env plays by turns, fuser then decider), so each decision is a
one-step bandit and gamma is 0. Its settings were chosen on bbh5's validation split (``--eval-split
validation``), never on test; the script prints them. It prints a progress line per iteration, then the greedy
accuracy, reward per question and team size before and after training next to the fixed baselines, and the teams
the decider committed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.cache.datasets import resolve as resolve_cache

ENV_OPTIONS = {"split": "train", "order": "shuffled", "episode_length": 256}
#: per recipe: the game's options (RLlib's env_config) and ``PPOConfig.training`` settings over ppo_config's
RECIPES: dict[str, dict[str, Any]] = {
    "options": {
        "env": {
            "decider_extras": ("task",),
            "fusion_extras": ("task",),
            "fusion_view": "per_choice",
            "credit": "aligned",
        },
        # by turns an iteration of 2048 env steps plays 1024 questions
        "training": {"gamma": 0.0, "entropy_coeff": 0.01},
        "iterations": 80,  # chosen on bbh5's validation split over 40 (docs/adapters.md)
    },
    "plain": {"env": {}, "training": {}, "iterations": 40},
}
#: RLlib iterates over sets of agent ids, so the order in which the two policies draw their random numbers
#: follows Python's hash seed: the script re-runs itself with this one, and hands it to every Ray worker.
HASH_SEED = "0"


def evaluate(algo: Any, cache: str, env_options: dict[str, Any], split: str, seed: int = 0) -> EpisodeTally:
    """Greedy play of both trained RLModules over the whole ``split`` stream (in the driver, no env runner),
    on the game itself (both agents act at every step, whatever the training credit)."""
    import torch
    from ray.rllib.core.columns import Columns

    from ensemble_env.adapters.rllib import rllib_env

    env = rllib_env(cache=cache, **{**env_options, "credit": "game"}, split=split).env
    engine = env.unwrapped.engine
    modules = {agent: algo.get_module(agent) for agent in env.possible_agents}
    tally = EpisodeTally(engine.cache.models)
    obs, _ = env.reset(seed=seed)
    while env.agents:
        actions = {}
        for agent, module in modules.items():
            with torch.no_grad():
                batch = {Columns.OBS: torch.as_tensor(obs[agent][None])}
                logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]
            greedy = module.get_inference_action_dist_cls().from_logits(logits).to_deterministic().sample()
            actions[agent] = greedy[0].numpy()
        team = team_mask_of(obs["decider"], engine.layout, "decider")  # the team answering this question
        obs, _, _, _, infos = env.step(actions)
        tally.add(team, infos["fusion"])
    return tally


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="a built-in cache (toy8, bbh5) or a cache file; default toy8 (--smoke: bbh5)")
    parser.add_argument("--recipe", choices=tuple(RECIPES), default="options")
    parser.add_argument("--iterations", type=int, default=None, help="training iterations of 2048 env steps")
    parser.add_argument(
        "--eval-split", choices=("test", "validation"), default="test", help="validation: to choose settings"
    )
    parser.add_argument("--num-env-runners", type=int, default=2)
    parser.add_argument("--num-learners", type=int, default=0, help="0: the update runs in the driver")
    parser.add_argument("--address", default=None, help="a running Ray cluster ('auto'); default: start one here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="16 iterations on bbh5 (about a minute)")
    args = parser.parse_args(argv)
    recipe = RECIPES[args.recipe]
    iterations = 16 if args.smoke else args.iterations or recipe["iterations"]
    if iterations < 1:
        parser.error(f"--iterations must be >= 1, got {iterations}")
    cache = args.cache or ("bbh5" if args.smoke else "toy8")

    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:  # see HASH_SEED
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.argv])
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray
    import torch

    from ensemble_env.adapters.rllib import ppo_config, seed_everything

    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    runtime = {"env_vars": {"PYTHONHASHSEED": HASH_SEED}}  # the env runners' and learners' hash seed too
    if args.address is None:
        ray.init(num_cpus=args.num_env_runners + 1, include_dashboard=False, log_to_driver=False, runtime_env=runtime)
    else:
        ray.init(address=args.address, log_to_driver=False, runtime_env=runtime)
    print(f"settings: recipe {args.recipe} {recipe}", flush=True)
    config = ppo_config(
        {"cache": cache, **ENV_OPTIONS, **recipe["env"]},
        num_env_runners=args.num_env_runners,
        num_learners=args.num_learners,
        seed=args.seed,
        **recipe["training"],
    )
    seed_everything(args.seed)
    algo = config.build_algo()
    before = evaluate(algo, cache, recipe["env"], args.eval_split, args.seed)
    progress = Progress("iteration", iterations)
    for iteration in range(1, iterations + 1):
        result = algo.train()
        runners = result["env_runners"]
        progress.update(
            iteration,
            episode_return_mean=runners.get("episode_return_mean", float("nan")),
            steps=runners.get("num_env_steps_sampled_lifetime", float("nan")),
        )
    after = evaluate(algo, cache, recipe["env"], args.eval_split, args.seed)
    algo.stop()
    ray.shutdown()

    steps = iteration * config.train_batch_size_per_learner * max(args.num_learners, 1)
    title = f"[rllib ppo] {cache}: recipe {args.recipe}, {iterations} iterations ({steps} env steps), seed {args.seed}"
    reference = baseline_figures(resolve_cache(cache), args.eval_split)
    split = args.eval_split
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after), split=split))
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line("rllib", before.figures(), after.figures(), split))


if __name__ == "__main__":
    main()
