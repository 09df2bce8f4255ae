"""Collecting a rollout: every copy of the vector environment steps ``num_steps`` times with the agents' actions.

:func:`collect` fills the preallocated :class:`~ensemble_mappo.ppo.Rollout` (what PPO learns from) and a
:class:`StepRecord` (what happened: correctness, teams, costs; what the log and the evaluation read).
:class:`~ensemble_mappo.frame.Behaviour` says how each agent acts: it samples while learning, takes its mode when
frozen, or the team's plurality vote answers (the two-stage schedule's first stage).

**The decider's credit.** While the fusion agent learns it samples its answers, and a sampled answer is often
not the one it would give (at the start, the team's mean-probability vote as a softmax: nearly uniform for a
team of one). The reward the environment pays therefore mixes the decider's choice of team with the fusion
agent's exploration. :func:`collect` records, for every step, the reward of the question under three credits
(``Rollout.credits``, in the order of :data:`~ensemble_mappo.config.DECIDER_CREDITS`): the sampled answer's
(what was paid), the fusion agent's most probable answer's (``"greedy"``, the answer its frozen policy gives)
and the expectation over its policy (``"expected"``). The last two are the same team's reward with the
fusion agent's sampling noise taken out: ``r + (right' - right) * (r_right - r_wrong)``, where ``right'`` is
whether the greedy answer is the label (or the policy's probability of the label) and ``r_right - r_wrong``
the environment's reward gap for that team (:class:`~ensemble_env.game.reward.RewardSettings`). They read the
label of the train question just answered, as the reward itself does; nothing of it reaches an observation.
"""

from __future__ import annotations

import numpy as np
import torch

from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.reward import RewardSettings, model_costs
from ensemble_env.views.policies import PluralityVote
from ensemble_mappo.agents import Agents
from ensemble_mappo.frame import FROZEN, LEARNING, RECORD_KEYS, Behaviour, StepRecord
from ensemble_mappo.ppo import Rollout

__all__ = ["CreditGap", "collect"]


#: the info values a step's credits read (:class:`CreditGap`)
_STEP_KEYS = (*RECORD_KEYS, "label")


class CreditGap:
    """The environment's reward gap between a right and a wrong answer of the team that answered a question.

    ``gap(infos)`` is ``r_right - r_wrong`` per copy (2 + alpha x share under the default ``"on_error"``
    penalty, 2 under ``"always"``; a diversity bonus is paid either way and cancels), computed with the
    environment's own reward (:class:`~ensemble_env.game.reward.RewardSettings`) from the team's size and cost.
    """

    def __init__(self, venv: EnsembleVectorEnv) -> None:
        config = venv.config
        self.cache = venv.cache
        self.settings = RewardSettings(
            alpha=config.alpha, size_penalty_mode=config.size_penalty_mode, use_costs=config.use_costs
        )
        self.use_costs = bool(config.use_costs)
        n = self.cache.n_questions
        self.total_costs = model_costs(self.cache, np.arange(n)).sum(axis=1) if self.use_costs else np.ones(n)
        sizes = np.arange(self.cache.n_models + 1)  # without costs the gap depends on the team's size only
        self.by_size = self._gap(self.settings.share(self.cache, sizes, sizes, self.cache.n_models))

    def _gap(self, share: np.ndarray) -> np.ndarray:
        right = self.settings.rewards(np.ones(share.shape, dtype=bool), share)
        return right - self.settings.rewards(np.zeros(share.shape, dtype=bool), share)

    def __call__(self, infos: dict[str, np.ndarray]) -> np.ndarray:
        if not self.use_costs:
            return self.by_size[np.asarray(infos["team_size"]).astype(np.int64)]
        questions = np.asarray(infos["question"]).astype(np.int64)
        share = self.settings.share(self.cache, infos["team_size"], infos["cost"], self.total_costs[questions])
        return self._gap(share)


def collect(
    venv: EnsembleVectorEnv,
    agents: Agents,
    rollout: Rollout,
    obs: dict[str, np.ndarray],
    generator: torch.Generator,
    behaviour: Behaviour = LEARNING,
) -> tuple[dict[str, np.ndarray], StepRecord]:
    """Fill ``rollout`` with ``rollout.num_steps`` steps from ``obs``; return the next observations and a record.

    Under ``torch.inference_mode``: each step prepares both observations once (stored for the PPO epochs),
    acts, and steps the environment; the critic's outputs at every collected state are computed after the
    loop in one batched pass. At a truncation the critic reads ``infos["final_state"]`` right away (the copy
    is reset in the same step); a termination needs no value. A frozen policy (``behaviour`` is
    :data:`~ensemble_mappo.frame.FROZEN`: evaluation) learns nothing from the rollout, so its ``credits`` are left
    at 0.
    """
    num_steps, num_envs = rollout.num_steps, rollout.num_envs
    record = StepRecord.allocate(num_steps, num_envs, venv.n_models)
    plurality = PluralityVote.from_env(venv) if behaviour.fusion == "plurality" else None
    credits = behaviour != FROZEN  # a frozen policy learns nothing: its credits are not computed (left at 0)
    gap = CreditGap(venv) if credits else None
    copies = np.arange(num_envs)
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
                greedy, policy = answers, None
            else:
                logits = fusion(fusion_inputs)
                greedy_answers = fusion.mode(logits)
                chosen = greedy_answers if behaviour.fusion == "mode" else fusion.sample(logits, generator)
                rollout.actions["fusion"][t] = chosen
                rollout.log_probs[t, :, 1] = fusion.log_prob(logits, chosen)
                answers, greedy = chosen.numpy(), greedy_answers.numpy()
                policy = torch.softmax(logits, -1).numpy() if credits else None
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
                step_infos = {key: np.where(done, final[key], step_infos[key]) for key in _STEP_KEYS}
            for key in RECORD_KEYS:
                getattr(record, key)[t] = step_infos[key]
            if not credits:
                continue
            # the decider's credits: the same team's reward with the fusion agent's sampling taken out
            correct, labels = step_infos["correct"], step_infos["label"].astype(np.int64)
            answered = step_infos["team_size"] > 0  # an empty team never answers right
            step_gap = gap(step_infos)  # type: ignore[misc]
            rollout.credits[t, :, 0] = rewards["fusion"]
            greedy_right = ((greedy == labels) & answered).astype(np.float64)
            expected = greedy_right if policy is None else policy[copies, labels] * answered
            rollout.credits[t, :, 1] = rewards["fusion"] + (greedy_right - correct) * step_gap
            rollout.credits[t, :, 2] = rewards["fusion"] + (expected - correct) * step_gap
        states = rollout.states.view(num_steps * num_envs, -1)
        rollout.values.copy_(critic(states).view(num_steps, num_envs, -1))
    return obs, record
