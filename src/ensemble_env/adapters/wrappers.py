"""Options that make the game learnable by generic networks, without changing the game.

Numpy only (no MARL library). Two things stand between a library's generic PPO and this game (issue 26):

- **The fusion observation is a flat N x C block.** A generic MLP must learn a position-equivariant argmax from
  +-1 rewards, and loses to the mean vote it could copy. :class:`PerChoiceFusion` lays the fusion observation
  out per choice: for each choice c, each model's probability of c (0 for non-members) and the team's mean
  probability of c, and whether c is valid; then the team mask and the extras. A scorer shared over the
  choices (:func:`per_choice_rows` gives the (C, N + 2) rows), or even a linear policy on the mean column,
  can rank the choices; one that starts as the mean vote starts level with the team.
- **The decider's credit is one step late.** The game rewards the decider's action at step t with r_{t+1},
  the reward of the question q_{t+1} its team E_{t+1} answers; a library that credits each action with the
  reward of its own step gives the decider r_t, earned by the team it chose one step earlier, and only GAE's
  tail (gamma lambda = 0.94: about 17 steps of other questions' rewards) carries its real consequence.
  :func:`aligned_decider_rewards` realigns a collected rollout (the TorchRL and BenchMARL examples);
  ``SingleRoleEnv("decider", credit="aligned")`` (:mod:`ensemble_env.adapters.sb3`) returns r_{t+1} at once,
  looking one question ahead with the fixed fuser.

Neither changes the game: the same seeds and actions give the same rewards, infos and episode ends as the raw
environment (``tests/adapters/test_adapter_wrappers.py``), and neither has rules of its own for what it takes:
a fusion action the aligned credit scores passes the game's own validation first (:func:`fusion_answer`, so
2.6 is refused as the game refuses it, never played as 2), and seeds go through the game's
:func:`~ensemble_env.game.engine.check_seed` (``tests/adapters/test_fuzz_wrappers.py`` checks both against the
game, value by value). What each changes is what the learner is shown:

=========================  =====================================================================================
wrapper                    what it changes
=========================  =====================================================================================
``PerChoiceFusion``        the fusion observation (a re-arrangement of the same values; the reward-history block
                           is dropped) and so ``state()``; rewards, actions, infos and episode ends are the game's
aligned decider credit     the decider's reward of step t is r_{t+1}, that of the question its team answers; its
                           last step of an episode has none (0): that team answers nothing in the episode. The
                           reward of the first question (answered by ``initial_team``, chosen by no decider
                           action) is in no decider reward. The fusion agent's rewards stay r_t
=========================  =====================================================================================

>>> import ensemble_env
>>> env = PerChoiceFusion(ensemble_env.parallel_env("toy8", fusion_extras=("task",)))
>>> obs, _ = env.reset(seed=0)
>>> env.layout.row_size, env.layout.n_choices, env.observation_space("fusion").shape
(10, 10, (113,))
>>> per_choice_rows(obs["fusion"], env.layout).shape
(10, 10)
>>> aligned_decider_rewards(np.array([1.0, -1.5, 1.0, 1.0]), np.array([False, False, False, True]))
(array([-1.5,  1. ,  1. ,  0. ]), array([ True,  True,  True, False]))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.wrappers import BaseParallelWrapper

from ensemble_env.game.layout import ObservationLayout
from ensemble_env.game.reward import model_costs, step_reward
from ensemble_env.text import show

__all__ = [
    "PER_CHOICE_TAIL",
    "PerChoiceFusion",
    "PerChoiceLayout",
    "aligned_decider_rewards",
    "answer_reward",
    "fusion_answer",
    "per_choice_observation",
    "per_choice_rows",
]

#: blocks of the raw fusion observation that follow the per-choice rows, in this order (those present)
PER_CHOICE_TAIL = ("team_mask", "task", "features")


@dataclass(frozen=True)
class PerChoiceLayout:
    """The per-choice fusion observation: C rows of N + 2 values, then the tail blocks.

    Row c (entries ``c * row_size`` to ``(c + 1) * row_size - 1``): ``probs[i, c]`` for each model i (0 when i
    is not in the team or c is not a valid choice), the team's mean of them (0 for an empty team), and 1 if c is
    a valid choice else 0. Then :data:`PER_CHOICE_TAIL`: ``team_mask`` (N), and ``task`` / ``features`` when the
    environment has those fusion extras. ``tail`` names the slices of the per-choice observation, ``source``
    those of the raw one.
    """

    n_models: int
    n_choices: int
    tail: dict[str, slice]
    source: dict[str, slice]
    low: np.ndarray
    high: np.ndarray

    @property
    def row_size(self) -> int:
        return self.n_models + 2

    @property
    def rows_size(self) -> int:
        return self.n_choices * self.row_size

    @property
    def size(self) -> int:
        return int(self.low.size)

    @classmethod
    def from_layout(cls, layout: ObservationLayout, n_models: int, n_choices: int) -> PerChoiceLayout:
        """The per-choice layout for an environment's raw :class:`ObservationLayout` (``env.engine.layout``)."""
        raw = layout.fusion
        if "probs" not in raw or "action_mask" not in raw:
            raise ValueError(
                f"the fusion observation has blocks {sorted(raw)}: the per-choice view needs 'probs' and "
                "'action_mask' (the default fusion agent, fusion_action='answer')"
            )
        expected = n_models * n_choices
        if raw["probs"].stop - raw["probs"].start != expected:
            raise ValueError(
                f"the probs block has {raw['probs'].stop - raw['probs'].start} entries, not N x C = {expected}"
            )
        rows = n_choices * (n_models + 2)
        lows, highs = [np.zeros(rows, np.float32)], [np.ones(rows, np.float32)]
        tail, source, start = {}, {}, rows
        for name in PER_CHOICE_TAIL:
            if name in raw:
                block = raw[name]
                size = block.stop - block.start
                tail[name], source[name] = slice(start, start + size), block
                lows.append(layout.fusion_low[block])
                highs.append(layout.fusion_high[block])
                start += size
        return cls(n_models, n_choices, tail, source, np.concatenate(lows), np.concatenate(highs))

    @classmethod
    def from_env(cls, env: Any) -> PerChoiceLayout:
        """The per-choice layout of a PettingZoo view (``ensemble_env.parallel_env``, wrapped or not). A game
        whose fusion agent sets weights (``fusion_action="weights"``) is refused: the per-choice rows are for an
        agent that picks a choice, and a weighting agent's action is a weight per model, not per choice."""
        engine = env.unwrapped.engine
        fusion_action = engine.config.fusion_action
        if fusion_action != "answer":
            raise ValueError(
                f"the per-choice fusion view needs fusion_action='answer' (a fusion agent that picks one of the "
                f"question's choices); this game has fusion_action={fusion_action!r}, whose fusion action is "
                f"{engine.single_action_space('fusion')}, a weight per model: leave its observation as it is"
            )
        return cls.from_layout(engine.layout, engine.n_models, engine.max_choices)

    def space(self) -> spaces.Box:
        return spaces.Box(self.low, self.high, dtype=np.float32)


def per_choice_observation(fusion_obs: np.ndarray, raw: ObservationLayout, layout: PerChoiceLayout) -> np.ndarray:
    """The per-choice observation (..., ``layout.size``) of raw fusion observations (..., raw fusion size).

    ``raw``: the environment's :class:`ObservationLayout`; ``layout``: :meth:`PerChoiceLayout.from_layout` of it.

    >>> import ensemble_env
    >>> env = ensemble_env.parallel_env("toy8")
    >>> obs, _ = env.reset(seed=0)
    >>> layout = PerChoiceLayout.from_env(env)
    >>> rows = per_choice_rows(per_choice_observation(obs["fusion"], env.engine.layout, layout), layout)
    >>> bool(np.allclose(rows[:, -2], obs["fusion"][env.engine.layout.fusion["probs"]].reshape(8, 10).mean(0)))
    True
    """
    obs = np.asarray(fusion_obs, dtype=np.float32)
    batch = obs.shape[:-1]
    n, c = layout.n_models, layout.n_choices
    probs = obs[..., raw.fusion["probs"]].reshape(*batch, n, c)
    team = obs[..., raw.fusion["team_mask"]]
    valid = obs[..., raw.fusion["action_mask"]]
    members = team.sum(axis=-1, keepdims=True)
    mean = np.divide(probs.sum(axis=-2), members, out=np.zeros((*batch, c), np.float32), where=members > 0)
    rows = np.concatenate([np.swapaxes(probs, -1, -2), mean[..., None], valid[..., None]], axis=-1)  # (..., C, N + 2)
    tail = [obs[..., layout.source[name]] for name in layout.tail]
    return np.concatenate([rows.reshape(*batch, layout.rows_size), *tail], axis=-1).astype(np.float32)


def per_choice_rows(observation: np.ndarray, layout: PerChoiceLayout) -> np.ndarray:
    """The (..., C, N + 2) rows of per-choice observations: N member probabilities, the team mean, valid."""
    obs = np.asarray(observation)
    return obs[..., : layout.rows_size].reshape(*obs.shape[:-1], layout.n_choices, layout.row_size)


class PerChoiceFusion(BaseParallelWrapper):
    """A PettingZoo parallel env whose fusion observation is laid out per choice (:class:`PerChoiceLayout`).

    The decider's observation, the actions, the rewards, the infos (the fusion agent's ``action_mask``
    included) and the episode ends are the wrapped environment's. ``state()`` is the decider's observation
    followed by the per-choice fusion observation, ``state_space`` its bounds. ``layout`` is the
    :class:`PerChoiceLayout`; ``raw_layout`` the wrapped environment's :class:`ObservationLayout`. A game without
    the agents decider and fusion, or whose fusion agent sets weights (``fusion_action="weights"``), is refused
    with a ValueError naming what it has.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        if list(env.possible_agents) != ["decider", "fusion"]:
            raise ValueError(
                f"PerChoiceFusion needs the agents ['decider', 'fusion'], got {list(env.possible_agents)} "
                "(decider=False or fusion_agents='per_model' have no fusion agent to re-lay out)"
            )
        # a weights game (fusion_action="weights") has those agents too: refused, naming the option
        layout = PerChoiceLayout.from_env(env)
        self.raw_layout: ObservationLayout = env.unwrapped.engine.layout
        self.layout = layout
        decider = env.observation_space("decider")
        self.observation_spaces = {"decider": decider, "fusion": self.layout.space()}
        self.action_spaces = {agent: env.action_space(agent) for agent in env.possible_agents}
        self.state_space = spaces.Box(
            np.concatenate([decider.low, self.layout.low]),
            np.concatenate([decider.high, self.layout.high]),
            dtype=np.float32,
        )
        self._decider_size = int(decider.shape[0])

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self.action_spaces[agent]

    def fusion_view(self, fusion_obs: np.ndarray) -> np.ndarray:
        """The per-choice observation of raw fusion observations (any leading batch dimensions)."""
        return per_choice_observation(fusion_obs, self.raw_layout, self.layout)

    def _view(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**obs, "fusion": self.fusion_view(obs["fusion"])}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._view(obs), infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return self._view(obs), rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        state = self.env.state()
        decider, fusion = state[: self._decider_size], state[self._decider_size :]
        return np.concatenate([decider, self.fusion_view(fusion)]).astype(np.float32)


def aligned_decider_rewards(rewards: np.ndarray, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The decider's aligned credit of a collected rollout, and where it is known.

    ``rewards``: (T, ...) the game's rewards r_t in collection order (one copy's steps along axis 0; extra axes
    are copies or agents); ``done``: (T, ...) True where step t ended its episode (terminated or truncated).
    Returns ``(aligned, known)``: ``aligned[t] = rewards[t + 1]``, the reward of the question answered by the team
    the decider committed at step t, when step t did not end its episode; 0 where it did (that team answers no
    question of the episode). ``known[t]`` is False at those ends and at the rollout's last step when it did not
    end an episode (the next reward is not collected yet): a learner drops those steps or bootstraps them.

    An empty rollout (T = 0: a batch collected no step) gives two empty arrays of its shape: there is no step to
    credit, and a caller's ``aligned[known]`` and ``known.any()`` work as for any other batch. ``rewards`` must
    hold real numbers and ``done`` booleans (or the integers or floats 0 and 1); text, objects or other values
    raise a ValueError naming the argument and the value, never read as numbers or truth values.
    """
    rewards, done = _real_array("rewards", rewards), _done_array(done)
    if rewards.shape != done.shape or rewards.ndim == 0:
        raise ValueError(f"rewards {rewards.shape} and done {done.shape} must share one shape with a time axis first")
    aligned = np.zeros_like(rewards)
    known = ~done
    if rewards.shape[0] == 0:
        return aligned, known
    aligned[:-1] = np.where(done[:-1], 0.0, rewards[1:])
    known[-1] = False
    return aligned, known


def _array(name: str, value: Any) -> np.ndarray:
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged nesting, objects numpy cannot read
        raise ValueError(f"{name} cannot be read as an array ({error}): got {show(value)}") from None


def _real_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array, refused unless it holds real numbers (booleans and integers included)."""
    array = _array(name, value)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real numbers, got {show(value)} (dtype {array.dtype})")
    return array.astype(np.float64)


def _done_array(value: Any) -> np.ndarray:
    """``value`` as a bool array: booleans, or numbers that are all 0 or 1; anything else is refused."""
    array = _array("done", value)
    if array.dtype.kind == "b":
        return array.astype(bool, copy=True)
    if array.dtype.kind in "iuf":
        binary = (array == 0) | (array == 1)  # False for NaN
        if binary.all():
            return array == 1
        bad = array.reshape(-1)[int(np.argmin(binary.reshape(-1)))]
        raise ValueError(f"done must hold booleans (or 0 and 1), found {bad.item()!r} in {show(value)}")
    raise ValueError(f"done must hold booleans (or 0 and 1), got {show(value)} (dtype {array.dtype})")


def fusion_answer(engine: Any, action: Any) -> int:
    """The answer the game gives when the fusion agent plays ``action`` at the engine's next step, or the
    game's own ValueError when the game refuses the action.

    ``engine``: a single-copy :class:`~ensemble_env.game.engine.EnsembleVectorEnv` (``env.unwrapped.engine``)
    between steps. The action is validated by the game's public validation of one agent's action,
    ``engine.decode_agent("fusion", action, None)`` (what the PettingZoo view's ``check_action`` and every step
    call), so this accepts exactly what the game accepts (an integer, a float holding an integer, a bool, of
    any width, in shape () or (1,)) and refuses the rest with the game's message (2.6, NaN, "2", shape (2,)).
    With ``fusion_action="weights"`` the action is the N weights, and the answer the one the game derives from
    them on the next question with the committed team (``engine.weighted_answers``). Changes nothing.

    >>> import ensemble_env
    >>> env = ensemble_env.parallel_env("toy8")
    >>> _ = env.reset(seed=0)
    >>> fusion_answer(env.engine, 2), fusion_answer(env.engine, np.float32(2.0)), fusion_answer(env.engine, [3])
    (2, 2, 3)
    >>> fusion_answer(env.engine, 2.6)
    Traceback (most recent call last):
    ...
    ValueError: fusion action: an answer must be an integer; expected Discrete(10), one answer index, got 2.6 ...)
    """
    # One check, shared with the game. Later, in game/: an engine method giving the answers a step plays for a
    # fusion action (what decode_actions computes inside), so that this function becomes a call to it.
    if engine.num_envs != 1:
        raise ValueError(f"fusion_answer needs a single-copy engine (num_envs=1), got num_envs={engine.num_envs}")
    decoded = engine.decode_agent("fusion", action, None)
    if engine.uses_weights:
        return int(engine.weighted_answers(decoded)[0])
    return int(decoded[0])


def answer_reward(engine: Any, action: Any) -> float:
    """The reward the game will pay when the fuser plays ``action`` on the question the engine answers next.

    ``engine``: a single-copy :class:`~ensemble_env.game.engine.EnsembleVectorEnv` (``env.unwrapped.engine``)
    between steps. ``action``: the fusion agent's action, validated as the game validates it
    (:func:`fusion_answer`: an action the game refuses raises its ValueError here, before anything is scored).
    The game's own reward function (:func:`~ensemble_env.game.reward.step_reward`, with the engine's settings)
    on that question, its label, the committed team (``engine.team``), its costs and the focal diversity the
    game scores it with (the info ``focal_diversity`` of the committed team). Reads the engine and changes
    nothing: the next step with this action pays exactly this reward, whatever the decider commits in that
    step (its team answers the question after). The aligned decider credit of ``SingleRoleEnv`` and of the
    RLlib env uses it to pay the decider r_{t+1} as soon as the fuser's answer to q_{t+1} is known.
    """
    answer = fusion_answer(engine, action)
    question = int(engine.next_questions()[0])
    team = engine.team[0]
    cache = engine.cache
    costs = model_costs(cache, np.array([question]))[0]
    right = bool(team.any()) and 0 <= answer < int(cache.n_choices[question]) and answer == int(cache.labels[question])
    focal = engine.info_values(0)["focal_diversity"]
    return float(
        step_reward(
            right,
            int(team.sum()),
            float(costs[team].sum()),
            float(costs.sum()),
            engine.n_models,
            focal,
            engine.settings,
        )
    )
