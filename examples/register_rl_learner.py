"""Bring your own RL learner to ``ensemble-env benchmark``: a decider trained by policy gradient (docs/your-learner.md).

    ensemble-env benchmark --register examples/register_rl_learner.py \
        --algorithms reinforce_decider,static_team,best_single --seeds 3 --cache bbh5 --out runs/bench_rl

``reinforce_decider`` learns which team answers each question:

- **the game**: ``ensemble_env.vector_env`` on the cache's train split, 64 copies, shuffled episodes of 256
  questions, the reward the benchmark scores (the size penalty ``alpha`` it is given). The decider picks one of the
  2^N - 1 teams (``decider_action="subset"``) and sees its current team and the task of the question its next
  team answers (``decider_extras=("task",)``, ``metrics=()``: no statistics of revealed outcomes); the fusion agent
  is not learned here: the team's mean-probability vote (``ensemble_env.views.policies.MeanVote``) answers.
- **the learner**: REINFORCE with a learned baseline, a small torch network (observation -> 64 -> a logit per team,
  and a value). The team committed at step t answers the question of step t + 1, so the decider's action at t is
  credited with the reward of t + 1 (the course's lesson 3, delayed credit), never across an episode's end.
- **the choice**: the greedy policy (each question's most probable team) plays the whole validation split at the
  start and every ``eval_every`` updates; the best mean validation reward is deployed (ties: the earlier).
- **the answer**: the deployed policy plays the test split once, in the cache's order, greedily; the benchmark
  scores what it answered. Nothing the decider sees depends on a test label
  (``tests/learner/test_your_learner.py`` flips them all and gets the same answers).

The budget (``BUDGET``) is part of the run key: change it and the benchmark runs the algorithm again.
"""

# no `from __future__ import annotations`: --register runs this file outside sys.modules, where a dataclass could
# not resolve string annotations
import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

import ensemble_env
from ensemble_env.files import write_text
from ensemble_env.views.policies import MeanVote
from ensemble_mappo.benchmark import Answers, register_algorithm


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much the learner trains: ``updates`` x ``num_envs`` x ``num_steps`` env steps."""

    updates: int = 300
    num_envs: int = 64
    num_steps: int = 32
    eval_every: int = 30
    learning_rate: float = 1e-2
    entropy_coef: float = 0.01
    hidden: int = 64
    episode_length: int = 256


BUDGET = Budget()


def env_options(alpha: float) -> dict:
    """The game the decider plays: one action per team; it sees its current team and the task of the question its
    next team answers, and no statistics of revealed outcomes (``metrics=()``), so that its answers on test depend
    on no test label, not even those the stream reveals after each answer."""
    return {"alpha": alpha, "decider_action": "subset", "decider_extras": ("task",), "metrics": ()}


class Decider(torch.nn.Module):
    """Observation -> a logit per team (2^N - 1) and a value (the baseline of REINFORCE)."""

    def __init__(self, obs_size: int, n_teams: int, hidden: int) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(obs_size, hidden), torch.nn.Tanh())
        self.logits = torch.nn.Linear(hidden, n_teams)
        self.value = torch.nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.body(obs)
        return self.logits(hidden), self.value(hidden).squeeze(-1)


def play(decider: Decider, cache, split: str, alpha: float) -> dict[str, np.ndarray]:
    """The greedy policy plays every question of ``split`` once, in the cache's order: for each question its index,
    the answer, the team that answered (bool, N) and the reward."""
    env = ensemble_env.parallel_env(cache, split=split, **env_options(alpha))
    fuse, layout = MeanVote.from_env(env), env.engine.layout
    obs, _ = env.reset(seed=0)
    played: dict[str, list] = {"questions": [], "predictions": [], "teams": [], "rewards": []}
    while env.agents:
        answer = int(fuse(obs["fusion"])[0])
        played["teams"].append(obs["fusion"][layout.fusion["team_mask"]] > 0)  # the team that answers this question
        with torch.no_grad():
            team = int(decider(torch.as_tensor(obs["decider"])[None])[0].argmax())
        obs, rewards, _, _, infos = env.step({"decider": team, "fusion": answer})
        played["questions"].append(int(infos["fusion"]["question"]))
        played["predictions"].append(answer)
        played["rewards"].append(float(rewards["fusion"]))
    return {key: np.array(values) for key, values in played.items()}


def train(cache, seed: int, alpha: float, budget: Budget) -> tuple[Decider, dict]:
    """REINFORCE on the train stream; returns the decider chosen on validation and what the choice saw."""
    torch.set_num_threads(1)  # one thread is fastest for a network this small (and fair to the other runs)
    torch.manual_seed(seed)
    venv = ensemble_env.vector_env(
        budget.num_envs, cache, split="train", order="shuffled", episode_length=budget.episode_length,
        **env_options(alpha),
    )  # fmt: skip
    fuse = MeanVote.from_env(venv)
    n_teams = 2**cache.n_models - 1
    decider = Decider(venv.single_observation_space("decider").shape[0], n_teams, budget.hidden)
    optimizer = torch.optim.Adam(decider.parameters(), lr=budget.learning_rate)
    curve = [(0, play(decider, cache, "validation", alpha)["rewards"].mean())]
    best = (curve[0][1], 0, copy.deepcopy(decider.state_dict()))
    obs, _ = venv.reset(seed=seed)
    previous = None  # the last step's (decider obs, team, episode ended): its reward comes with the next step
    for update in range(1, budget.updates + 1):
        observed, teams, rewards = [], [], []
        for _ in range(budget.num_steps):
            with torch.no_grad():
                logits, _ = decider(torch.as_tensor(obs["decider"]))
            team = torch.distributions.Categorical(logits=logits).sample().numpy()
            actions = {"decider": team, "fusion": fuse(obs["fusion"])}
            next_obs, reward, terminated, truncated, _ = venv.step(actions)
            if previous is not None:  # the team committed one step ago answered this step's question
                last_obs, last_team, ended = previous
                observed.append(last_obs[~ended])
                teams.append(last_team[~ended])
                rewards.append(reward["fusion"][~ended])
            previous = (obs["decider"], team, terminated["fusion"] | truncated["fusion"])
            obs = next_obs
        batch = torch.as_tensor(np.concatenate(observed))
        chosen = torch.as_tensor(np.concatenate(teams))
        returns = torch.as_tensor(np.concatenate(rewards), dtype=torch.float32)
        logits, values = decider(batch)
        policy = torch.distributions.Categorical(logits=logits)
        advantage = returns - values.detach()
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        loss = -(policy.log_prob(chosen) * advantage).mean() + 0.5 * ((values - returns) ** 2).mean()
        loss = loss - budget.entropy_coef * policy.entropy().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if update % budget.eval_every == 0 or update == budget.updates:
            curve.append((update, play(decider, cache, "validation", alpha)["rewards"].mean()))
            if curve[-1][1] > best[0]:
                best = (curve[-1][1], update, copy.deepcopy(decider.state_dict()))
    decider.load_state_dict(best[2])
    info = {
        "chosen_update": best[1],
        "validation_reward": round(float(best[0]), 6),
        "validation_curve": [[step, round(float(value), 6)] for step, value in curve],
        "train_steps": budget.updates * budget.num_envs * budget.num_steps,
    }
    return decider, info


def make_learner(budget: Budget):
    """The benchmark's algorithm ``(cache, seed, alpha, out_dir) -> Answers`` at ``budget``."""

    def reinforce_decider(cache, seed: int, alpha: float, out_dir: Path) -> Answers:
        decider, info = train(cache, seed, alpha, budget)
        write_text(Path(out_dir) / "validation.json", json.dumps(info, indent=1) + "\n")  # what the choice saw
        played = play(decider, cache, "test", alpha)
        return Answers(played["questions"], played["predictions"], played["teams"], info)

    return reinforce_decider


register_algorithm("reinforce_decider", config={"version": 1, **dataclasses.asdict(BUDGET)})(make_learner(BUDGET))
