"""RLlib PPO on the ensemble game: one policy per role, rollouts in 2 env-runner processes.

    pip install -e ".[rllib]"
    python examples/rllib_ppo.py --smoke                  # 4 iterations, about a minute on 2 CPU cores
    python examples/rllib_ppo.py                          # 40 iterations on toy8 (about 6 minutes)
    python examples/rllib_ppo.py --cache bbh5             # the 5 LLMs on BIG-Bench-Hard
    python examples/rllib_ppo.py --address auto --num-env-runners 16 --num-learners 2   # on a Ray cluster

On a cluster, start Ray first (docs/adapters.md gives the commands, token authentication included); the code is
the same, only ``--address`` and the counts change.

The settings that make RLlib learn here live in :func:`ensemble_env.adapters.rllib.ppo_config`: separate value
layers, a value clip that fits the returns, the fusion valid-choice mask. It prints a progress line per
iteration, then the greedy test-split accuracy, reward per question and team size before and after training
next to the fixed baselines, and the teams the decider committed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ensemble_env.adapters.scoring import EpisodeTally, Progress, baseline_figures, comparison, gain_line, team_mask_of
from ensemble_env.cache.datasets import resolve as resolve_cache

ENV_OPTIONS = {"split": "train", "order": "shuffled", "episode_length": 256}
#: RLlib iterates over sets of agent ids, so the order in which the two policies draw their random numbers
#: follows Python's hash seed: the script re-runs itself with this one, and hands it to every Ray worker.
HASH_SEED = "0"


def evaluate(algo: Any, cache: str, seed: int = 0) -> EpisodeTally:
    """Greedy play of both trained RLModules over the whole test stream (in the driver, no env runner)."""
    import torch
    from ray.rllib.core.columns import Columns

    from ensemble_env.adapters.rllib import rllib_env

    env = rllib_env(cache=cache, split="test")
    engine = env.env.engine
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
        team = team_mask_of(obs["fusion"], engine.layout, "fusion")  # the team answering this question
        obs, _, _, _, infos = env.step(actions)
        tally.add(team, infos["fusion"])
    return tally


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default="toy8", help="a built-in cache (toy8, bbh5) or a cache file")
    parser.add_argument("--iterations", type=int, default=40, help="training iterations of 2048 steps")
    parser.add_argument("--num-env-runners", type=int, default=2)
    parser.add_argument("--num-learners", type=int, default=0, help="0: the update runs in the driver")
    parser.add_argument("--address", default=None, help="a running Ray cluster ('auto'); default: start one here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="4 iterations (about a minute)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.iterations = 4

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
    config = ppo_config(
        {"cache": args.cache, **ENV_OPTIONS},
        num_env_runners=args.num_env_runners,
        num_learners=args.num_learners,
        seed=args.seed,
    )
    seed_everything(args.seed)
    algo = config.build_algo()
    before = evaluate(algo, args.cache, args.seed)
    progress = Progress("iteration", args.iterations)
    for iteration in range(1, args.iterations + 1):
        result = algo.train()
        runners = result["env_runners"]
        progress.update(
            iteration,
            episode_return_mean=runners.get("episode_return_mean", float("nan")),
            steps=runners.get("num_env_steps_sampled_lifetime", float("nan")),
        )
    after = evaluate(algo, args.cache, args.seed)
    algo.stop()
    ray.shutdown()

    steps = iteration * config.train_batch_size_per_learner * max(args.num_learners, 1)
    title = f"[rllib ppo] {args.cache}: {args.iterations} iterations ({steps} steps), seed {args.seed}"
    reference = baseline_figures(resolve_cache(args.cache))
    print(comparison(title, before.figures(), after.figures(), reference, questions=len(after)))
    print(f"  decider's teams before: {before.describe_teams()}")
    print(f"  decider's teams after:  {after.describe_teams()}")
    print(gain_line("rllib", before.figures(), after.figures()))


if __name__ == "__main__":
    main()
