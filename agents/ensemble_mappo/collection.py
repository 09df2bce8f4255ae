"""Collecting a rollout: every copy of the vector environment steps ``num_steps`` times with the agents' actions.

:func:`collect` fills the preallocated :class:`~ensemble_mappo.ppo.Rollout` (what PPO learns from) and a
:class:`StepRecord` (what happened: correctness, teams, costs; what the log and the evaluation read).
:class:`Behaviour` says how each agent acts: it samples while learning, takes its mode when frozen, or the
team's plurality vote answers (the two-stage schedule's first stage).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.views.policies import PluralityVote
from ensemble_mappo.agents import Agents
from ensemble_mappo.ppo import Rollout

__all__ = ["RECORD_KEYS", "Behaviour", "StepRecord", "collect"]


@dataclass(frozen=True)
class Behaviour:
    """How each agent acts while collecting: sample (learning), its mode (frozen), or a scripted fuser.

    ``fusion="plurality"`` answers with the team's plurality vote (the two-stage schedule's first stage).
    """

    decider: str = "sample"
    fusion: str = "sample"


#: the info values :class:`StepRecord` keeps per step
RECORD_KEYS = ("correct", "team_size", "cost", "question", "answer")


@dataclass
class StepRecord:
    """What happened at each collected step, (T, B) numpy arrays, plus the episodes that ended.

    ``team`` (T, B, N) is the team that answered each step's question.
    """

    correct: np.ndarray
    team_size: np.ndarray
    cost: np.ndarray
    question: np.ndarray
    answer: np.ndarray
    team: np.ndarray
    episode_accuracy: list[float] = field(default_factory=list)
    episode_return: list[float] = field(default_factory=list)

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, n_models: int) -> StepRecord:
        shape = (num_steps, num_envs)
        values = [np.zeros(shape) for _ in RECORD_KEYS]
        return cls(*values, team=np.zeros((*shape, n_models), dtype=bool))


def collect(
    venv: EnsembleVectorEnv,
    agents: Agents,
    rollout: Rollout,
    obs: dict[str, np.ndarray],
    generator: torch.Generator,
    behaviour: Behaviour = Behaviour(),
) -> tuple[dict[str, np.ndarray], StepRecord]:
    """Fill ``rollout`` with ``rollout.num_steps`` steps from ``obs``; return the next observations and a record.

    Under ``torch.inference_mode``: each step prepares both observations once (stored for the PPO epochs),
    acts, and steps the environment; the critic's outputs at every collected state are computed after the
    loop in one batched pass. At a truncation the critic reads ``infos["final_state"]`` right away (the copy
    is reset in the same step); a termination needs no value.
    """
    num_steps, num_envs = rollout.num_steps, rollout.num_envs
    record = StepRecord.allocate(num_steps, num_envs, venv.n_models)
    plurality = PluralityVote.from_env(venv) if behaviour.fusion == "plurality" else None
    decider, fusion, critic = agents.decider, agents.fusion, agents.critic
    team_slice = venv.layout.decider["team_mask"]
    rollout.final_values.zero_()
    with torch.inference_mode():
        for t in range(num_steps):
            decider_inputs = rollout.inputs["decider"][t]
            decider_inputs.copy_(decider.prepare(torch.from_numpy(obs["decider"])))
            fusion_inputs = rollout.inputs["fusion"][t]
            fusion_inputs.copy_(fusion.prepare(torch.from_numpy(obs["fusion"])))
            rollout.states[t].copy_(torch.from_numpy(venv.state()))
            record.team[t] = obs["decider"][:, team_slice] > 0
            teams, log_probs, played = decider.act(decider_inputs, generator, behaviour.decider == "mode")
            rollout.actions["decider"][t] = teams
            rollout.log_probs[t, :, 0] = log_probs
            if plurality is not None:
                answers = plurality(obs["fusion"])
                rollout.actions["fusion"][t] = torch.from_numpy(answers)
                rollout.log_probs[t, :, 1] = 0.0
            else:
                chosen, log_probs, _ = fusion.act(fusion_inputs, generator, behaviour.fusion == "mode")
                rollout.actions["fusion"][t] = chosen
                rollout.log_probs[t, :, 1] = log_probs
                answers = chosen.numpy()
            obs, rewards, terminations, truncations, infos = venv.step(
                {"decider": played.numpy().astype(np.int8), "fusion": answers}
            )
            terminated = terminations["fusion"]
            done = terminated | truncations["fusion"]
            rollout.rewards[t] = rewards["fusion"]
            rollout.dones[t] = done
            rollout.terminated[t] = terminated
            step_infos = infos["fusion"]
            if done.any():
                truncated = done & ~terminated
                if truncated.any():
                    final_states = torch.from_numpy(np.asarray(infos["final_state"], dtype=np.float32)[truncated])
                    rollout.final_values[t, torch.from_numpy(truncated)] = critic(final_states)
                final = infos["final_info"]["fusion"]
                record.episode_accuracy.extend(np.asarray(final["accuracy"])[done].tolist())
                record.episode_return.extend(np.asarray(final["episode_return"])[done].tolist())
                step_infos = {key: np.where(done, final[key], step_infos[key]) for key in RECORD_KEYS}
            for key in RECORD_KEYS:
                getattr(record, key)[t] = step_infos[key]
        states = rollout.states.view(num_steps * num_envs, -1)
        rollout.values.copy_(critic(states).view(num_steps, num_envs, -1))
    return obs, record
