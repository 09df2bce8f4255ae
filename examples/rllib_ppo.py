"""RLlib PPO on the ensemble game: one policy per role, rollouts in 2 env-runner processes.

    pip install -e ".[rllib]"
    python examples/rllib_ppo.py --smoke                  # a short local run (about a minute on 2 CPU cores)
    python examples/rllib_ppo.py --iterations 50
    python examples/rllib_ppo.py --address auto --num-env-runners 16 --num-learners 2   # on a Ray cluster

On a cluster, start Ray first (``ray start --head`` on the head node, ``ray start --address=HEAD_IP:6379`` on
the others, each with ``ensemble-env[rllib]`` installed); the code is the same, only ``--address`` and the
counts change (docs/adapters.md).

It prints the greedy test-split accuracy and reward per question of the two policies before and after training.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np


def evaluate(algo: Any, seed: int = 0) -> dict[str, float]:
    """Greedy play of both trained RLModules over the whole test stream (in the driver, no env runner)."""
    import torch

    from ensemble_env.adapters.rllib import rllib_env

    env = rllib_env(split="test")
    modules = {agent: algo.get_module(agent) for agent in env.possible_agents}
    obs, infos = env.reset(seed=seed)
    team_sizes = []
    while env.agents:
        actions = {}
        for agent, module in modules.items():
            with torch.no_grad():
                logits = module.forward_inference({"obs": torch.as_tensor(obs[agent][None])})["action_dist_inputs"]
            greedy = module.get_inference_action_dist_cls().from_logits(logits).to_deterministic().sample()
            actions[agent] = greedy[0].numpy()
        obs, _, _, _, infos = env.step(actions)
        team_sizes.append(infos["fusion"]["team_size"])
    info = infos["fusion"]
    return {
        "accuracy": info["accuracy"],
        "reward_per_question": info["episode_return"] / info["step"],
        "team_size": float(np.mean(team_sizes)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--num-env-runners", type=int, default=2)
    parser.add_argument("--num-learners", type=int, default=0, help="0: the update runs in the driver")
    parser.add_argument("--address", default=None, help="a running Ray cluster ('auto'); default: start one here")
    parser.add_argument("--episode-length", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a short run (about a minute)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.iterations = 8

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray
    import torch
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from ensemble_env.adapters.rllib import ppo_config

    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    if args.address is None:
        ray.init(num_cpus=args.num_env_runners + 1, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.address)
    config = ppo_config(
        {"split": "train", "order": "shuffled", "episode_length": args.episode_length},
        num_env_runners=args.num_env_runners,
        num_learners=args.num_learners,
        seed=args.seed,
        lr=1e-3,
        lambda_=0.95,
        use_kl_loss=False,
        train_batch_size_per_learner=2048,
        minibatch_size=128,
        num_epochs=8,
        vf_clip_param=1e4,  # returns reach the hundreds: RLlib's default 10 would flatten the value loss
    ).rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh"))
    algo = config.build_algo()
    before = evaluate(algo, args.seed)
    for iteration in range(args.iterations):
        result = algo.train()
        episode_return = result["env_runners"].get("episode_return_mean", float("nan"))
        print(f"iteration {iteration + 1:3d}  episode_return_mean {episode_return:9.2f}", flush=True)
    after = evaluate(algo, args.seed)
    algo.stop()
    ray.shutdown()
    print(f"[rllib] {args.iterations} iterations, {args.num_env_runners} env runners")
    for key in before:
        print(f"  test {key:<20s} before {before[key]:7.3f}   after {after[key]:7.3f}")


if __name__ == "__main__":
    main()
