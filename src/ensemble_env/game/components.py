"""The optional parts of the game (components): each one that a configuration enables, in one place.

The engine (:class:`~ensemble_env.game.engine.EnsembleVectorEnv`) builds its list once (:func:`game_components`) and
every site that an optional part touches loops over it: the byte count refused up front, the kernels of a step and
of an observation, a reset, the snapshot's arrays and their checks by value
(:class:`~ensemble_env.game.snapshot_check.SnapshotCheck` runs the same list), the agents' observations. What each
part is, in the order the list holds them (an option that is off has no part, and its kernels never run):

================  =====================================  ==========================================================
component         enabled by                             what it adds
================  =====================================  ==========================================================
``TaskDeck``      ``episodes="task"``                    the deck the episodes' tasks are dealt from (``task_deck``)
``PartialFeedback``  ``feedback="team"``                 what was revealed (:class:`~ensemble_env.game.records.
                                                         Feedback`, :mod:`ensemble_env.game.feedback`)
``TaskRecords``   a record extra (``task_record``,       the task's record (:class:`~ensemble_env.game.records.
                  ``team_record``, ``member_record``)    TaskRecord`, :mod:`ensemble_env.game.task_record`)
``WeightingAgents``  ``fusion_agents="per_model"``       the observations of ``weight_0`` ... ``weight_{N-1}``
================  =====================================  ==========================================================

The protocol (:class:`Component`, whose methods do nothing by default):

- ``state_bytes()``: the bytes of one copy's arrays (the engine refuses copies beyond ``MAX_STATE_BYTES``);
- ``build(tables, state, settings)``: allocate its arrays beside the copies' ``state``; ``arrays()``: them by
  snapshot name (a snapshot of a game holds exactly its components' arrays besides ``SNAPSHOT_KEYS``);
  ``over(state, arrays)``: the same part over other arrays (a snapshot's, which ``SnapshotCheck`` checks);
- ``reset(start)``: begin the episodes of ``start.env_ids`` (zero its counts; the deck deals their tasks);
- ``wrap_step(inner)``, ``wrap_observe(inner)``, ``wrap_statistics(inner)``: the step, an observation, the window
  statistics with its kernels around them (before the step kernel, after the observation). Partial feedback runs
  its kernels in the same numba call as the step kernel's (:func:`~ensemble_env.game.feedback.step_team`: a call
  costs about 1 microsecond of unboxing, a sixth of a step), so it comes first in the list and replaces the inner
  step;
- ``check()``: the checks by value of its arrays, over a snapshot's (``over``: :class:`~ensemble_env.game.
  snapshot_check.SnapshotCheck` runs them after the copies' own arrays);
- ``observations(obs)``, ``state_parts(parts)``, ``restored()``: what the agents observe (the weighting agents).

The modes the kernels read travel in :class:`~ensemble_env.game.records.Settings` (``revealed_only``), never in
an array's shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game import dynamics, feedback, task_record
from ensemble_env.game.build import build_feedback, build_record_tables, build_task_record, feedback_words, no_feedback
from ensemble_env.game.config import MAX_TEAM_RECORD_MODELS, RECORD_EXTRAS, EnvConfig
from ensemble_env.game.layout import ObservationLayout
from ensemble_env.game.records import (
    CopyState,
    Counter,
    FastKernel,
    Feedback,
    Info,
    Outputs,
    Settings,
    Tables,
    TaskRecord,
)
from ensemble_env.game.refusals import answered_questions, first, number, refusal
from ensemble_env.text import show

__all__ = [
    "Component",
    "EpisodeStart",
    "PartialFeedback",
    "TaskDeck",
    "TaskRecords",
    "WeightingAgents",
    "build_components",
    "game_components",
    "wrapped_observe",
    "wrapped_statistics",
    "wrapped_step",
]

#: a step: (next teams (B, N) uint8, answers (B,) int64, the step's outputs)
Step = Callable[[np.ndarray, np.ndarray, Outputs], None]
#: an observation of the copies ``env_ids``: (env_ids, the outputs written)
Observe = Callable[[np.ndarray, Outputs], None]
#: the (B, K) float64 window statistics of every copy's current team
Statistics = Callable[[], np.ndarray]


@dataclass
class EpisodeStart:
    """The copies whose episodes a reset begins, and where their streams start and end (the deck deals them)."""

    env_ids: np.ndarray
    generator: np.random.Generator
    #: shuffle a new deck of tasks first (a seeded reset)
    fresh_deck: bool
    #: (len(env_ids),) where each copy's stream ends in its order row
    ends: np.ndarray
    #: a component dealt the streams' starts (``counters[:, START]``) and ``ends``
    dealt: bool = False


class Component:
    """An optional part of the game: its arrays, byte count, kernels, reset and snapshot checks (the module's table).
    Every method does nothing by default."""

    #: what enables it, for messages
    name = "component"

    def state_bytes(self) -> int:
        """Bytes of one copy's arrays."""
        return 0

    def build(self, tables: Tables, state: CopyState, settings: Settings, earlier: Mapping[str, np.ndarray]) -> None:
        """Allocate its arrays (zeroed) beside the copies' ``state``; ``earlier``: the arrays of the parts before
        it in the list, by snapshot name."""

    def arrays(self) -> dict[str, np.ndarray]:
        """Its arrays by snapshot name (the live ones: a restore writes into them)."""
        return {}

    def over(self, state: CopyState, arrays: Mapping[str, np.ndarray]) -> Component:
        """The same part over ``state`` and the arrays ``arrays`` names (a snapshot's), for checking it."""
        return self

    def reset(self, start: EpisodeStart) -> None:
        """Begin the episodes of ``start.env_ids``."""

    def wrap_step(self, inner: Step) -> Step:
        """The step ``inner`` with this part's kernels around it."""
        return inner

    def wrap_observe(self, inner: Observe) -> Observe:
        """The observation ``inner`` followed by this part's kernels."""
        return inner

    def wrap_statistics(self, inner: Statistics) -> Statistics:
        """The window statistics, as this part shows them."""
        return inner

    def check(self) -> None:
        """Check its arrays in a snapshot by value (a ValueError naming the field, the copy and the value)."""

    def observations(self, obs: dict[str, np.ndarray]) -> None:
        """Add (or replace) agents' observations in ``obs``."""

    def state_parts(self, parts: list[np.ndarray]) -> None:
        """Add parts to the centralized state."""

    def restored(self) -> None:
        """After a snapshot was restored into the arrays."""


class TaskDeck(Component):
    """``episodes="task"``: every episode plays one task, dealt from a deck of the stream's tasks that ``reset()``
    shuffles with the engine's generator; auto-resets deal on (a used deck is shuffled anew). ``task_deck`` holds a
    permutation of the indices of ``stream_tasks`` and, last, how many are dealt."""

    name = "episodes='task'"

    def __init__(self, task_bounds: np.ndarray, episode_length: int, counters: np.ndarray | None = None) -> None:
        self.task_bounds, self.episode_length = task_bounds, episode_length
        self.n_tasks = task_bounds.size - 1
        self.deck = np.zeros(self.n_tasks + 1, dtype=np.int64)
        self.counters = counters

    def build(self, tables: Tables, state: CopyState, settings: Settings, earlier: Mapping[str, np.ndarray]) -> None:
        self.counters = state.counters

    def arrays(self) -> dict[str, np.ndarray]:
        return {"task_deck": self.deck}

    def over(self, state: CopyState, arrays: Mapping[str, np.ndarray]) -> Component:
        part = TaskDeck(self.task_bounds, self.episode_length, state.counters)
        part.deck = arrays["task_deck"]
        return part

    def reset(self, start: EpisodeStart) -> None:
        """Deal each copy a task (from a freshly shuffled deck when ``start.fresh_deck``) and a start in it (a window
        of ``episode_length`` questions of a longer task, drawn)."""
        assert self.counters is not None
        length, bounds = self.episode_length, self.task_bounds
        for k, env in enumerate(start.env_ids):
            task = self._deal(start.generator, start.fresh_deck and k == 0)
            first_question, start.ends[k] = bounds[task], bounds[task + 1]
            size = int(start.ends[k] - first_question)
            offset = int(start.generator.integers(0, size - length + 1)) if length < size else 0
            self.counters[env, Counter.START] = first_question + offset
        start.dealt = True

    def _deal(self, generator: np.random.Generator, shuffle: bool) -> int:
        """The next task of the deck (an index into ``stream_tasks``); a new deck is shuffled when ``shuffle`` or
        when every task of this one was dealt."""
        deck, n_tasks = self.deck, self.n_tasks
        if shuffle or deck[n_tasks] >= n_tasks:
            deck[:n_tasks] = generator.permutation(n_tasks)
            deck[n_tasks] = 0
        task = int(deck[deck[n_tasks]])
        deck[n_tasks] += 1
        return task

    def check(self) -> None:
        """A permutation of the stream's tasks, then how many are dealt (0..tasks)."""
        deck, n_tasks = self.deck, self.n_tasks
        index = first(np.sort(deck[:n_tasks]) != np.arange(n_tasks))
        if index is not None:
            raise ValueError(
                f"set_state: task_deck[:{n_tasks}] = {show(deck[:n_tasks].tolist())} is not a permutation of "
                f"0..{n_tasks - 1} (the deck of the stream's {n_tasks} tasks)"
            )
        if not 0 <= deck[n_tasks] <= n_tasks:
            raise refusal("task_deck", (n_tasks,), deck[n_tasks], f"is outside [0, {n_tasks}] (the tasks dealt)")


class CountRecord(Component):
    """A part whose arrays are one named tuple of per-copy counts (:attr:`record`), zeroed when a copy's episode
    begins: partial feedback's and the task records'."""

    record: Any = None  # a NamedTuple of arrays (Feedback, TaskRecord), None before build

    def arrays(self) -> dict[str, np.ndarray]:
        assert self.record is not None
        return self.record._asdict()

    def reset(self, start: EpisodeStart) -> None:
        assert self.record is not None
        for counts in self.record:
            counts[start.env_ids] = 0


class PartialFeedback(CountRecord):
    """``feedback="team"``: what was revealed (:class:`~ensemble_env.game.records.Feedback`); its kernels
    (:mod:`ensemble_env.game.feedback`) note E_t before the step kernel and rewrite the window blocks after each
    observation, in the step's and the observation's numba call; the window statistics are the revealed ones."""

    name = "feedback='team'"

    def __init__(self, config: EnvConfig, n_models: int, num_envs: int, records: bool, team_record: bool) -> None:
        self.config, self.n_models, self.num_envs = config, n_models, num_envs
        self.records, self.team_record = records, team_record
        self.record: Feedback | None = None
        self._step_kernel = FastKernel(feedback.step_team)
        self._observe_kernel = FastKernel(feedback.observe_team)
        self._statistics_kernel = FastKernel(feedback.revealed_statistics)

    def state_bytes(self) -> int:
        """The window's answering teams, the window's and the record's counts."""
        n, record_counts = self.n_models, _record_bytes(self.n_models, self.records, self.team_record)
        return 8 * self.config.window * feedback_words(n) + 8 * n + record_counts

    def build(self, tables: Tables, state: CopyState, settings: Settings, earlier: Mapping[str, np.ndarray]) -> None:
        self.tables, self.state, self.settings = tables, state, settings
        self.record = build_feedback(self.config.window, self.num_envs, self.n_models, self.records, self.team_record)

    def over(self, state: CopyState, arrays: Mapping[str, np.ndarray]) -> Component:
        part = PartialFeedback(self.config, self.n_models, self.num_envs, self.records, self.team_record)
        part.tables, part.state, part.settings = self.tables, state, self.settings
        part.record = Feedback(**{name: arrays[name] for name in Feedback._fields})
        return part

    def wrap_step(self, inner: Step) -> Step:
        """E_t noted, the step kernel and the window blocks over what was revealed, in one call
        (:func:`~ensemble_env.game.feedback.step_team`, which runs ``dynamics.step``: first in the list, it replaces
        the inner step)."""
        kernel, tables, state, record, settings = self._step_kernel, self.tables, self.state, self.record, self.settings

        def step(next_team: np.ndarray, answers: np.ndarray, out: Outputs) -> None:
            kernel(next_team, answers, tables, state, record, settings, out)

        return step

    def wrap_observe(self, inner: Observe) -> Observe:
        """The observation and the window blocks over what was revealed, in one call
        (:func:`~ensemble_env.game.feedback.observe_team`, which runs ``dynamics.observe``)."""
        kernel, tables, state, record, settings = (
            self._observe_kernel, self.tables, self.state, self.record, self.settings,
        )  # fmt: skip

        def observe(env_ids: np.ndarray, out: Outputs) -> None:
            kernel(env_ids, tables, state, record, settings, out)

        return observe

    def wrap_statistics(self, inner: Statistics) -> Statistics:
        kernel, tables, state, record, settings = (
            self._statistics_kernel, self.tables, self.state, self.record, self.settings,
        )  # fmt: skip
        return lambda: kernel(tables, state, record, settings)

    def check(self) -> None:
        """The answering team of each window slot, and the per-model counts over them."""
        assert self.record is not None
        state, record, n_models = self.state, self.record, self.n_models
        counters = state.counters
        count = counters[:, Counter.COUNT]
        written = np.arange(state.window.shape[1])[None, :] < count[:, None]  # (B, T) the slots the episode wrote
        bits = feedback.revealed_masks(record.revealed, 64 * record.revealed.shape[2])
        index = first(bits[..., n_models:].any(axis=-1) | (~written & bits.any(axis=-1)))
        if index is not None:
            env = index[0]
            problem = (
                f"sets a bit beyond the N={n_models} models" if written[index] else
                f"is not 0: copy {env}'s window has {count[env]} slots written (counters COUNT), not this one"
            )  # fmt: skip
            raise refusal("revealed", index, record.revealed[index][0], problem)
        masks = bits[..., :n_models].astype(np.int64)
        sizes = masks.sum(axis=-1)
        cfg = self.config
        smallest = n_models if not cfg.decider else cfg.min_team_size
        index = first(written & (sizes < smallest))
        if index is not None:
            raise refusal(
                "revealed",
                index,
                record.revealed[index][0],
                f"is a team of {sizes[index]} models, fewer than "
                + ("every model (decider=False)" if not cfg.decider else f"min_team_size={smallest}"),
            )
        played = np.flatnonzero(counters[:, Counter.POS] > 0)
        newest = (counters[played, Counter.HEAD] - 1) % state.window.shape[1]
        index = first(sizes[played, newest] != state.last[Info.TEAM_SIZE, played])
        if index is not None:
            env = int(played[index[0]])
            raise refusal(
                "revealed",
                (env, int(newest[index[0]])),
                record.revealed[env, newest[index[0]]][0],
                f"is a team of {sizes[env, newest[index[0]]]} models, not the info team_size "
                f"{state.last[Info.TEAM_SIZE, env]:g} of the team that answered copy {env}'s last question",
            )
        shown = masks * written[..., None]
        right = shown * self.tables.correct[state.window].astype(np.int64)
        for name, expected in (("seen", shown.sum(axis=1)), ("seen_right", right.sum(axis=1))):
            got = getattr(record, name)
            index = first(got != expected)
            if index is not None:
                env = index[0]
                raise refusal(
                    name,
                    index,
                    got[index],
                    f"is not {number(expected[index])}, the count the {count[env]} rows of copy {env}'s window and "
                    "their answering teams (revealed) give",
                )


def _record_bytes(n_models: int, records: bool, team_record: bool) -> int:
    """Bytes of one copy's counts of the task's record (and of its revealed counts, the same shapes)."""
    return 8 * (n_models + (2**n_models - 1 if team_record else 0)) if records else 0


class TaskRecords(CountRecord):
    """A record extra (``task_record``, ``team_record``, ``member_record``): the counts of the task's answered
    questions (:class:`~ensemble_env.game.records.TaskRecord`); its kernels (:mod:`ensemble_env.game.task_record`)
    add each answered question to them after the step kernel and write the record blocks after each observation.
    With ``feedback="team"`` they count what was revealed (the partial feedback's record, which comes first)."""

    name = "a record extra"

    def __init__(self, cache: LogitCache, questions: np.ndarray, num_envs: int, team_record: bool) -> None:
        self.cache, self.questions, self.num_envs, self.team_record = cache, questions, num_envs, team_record
        self.record: TaskRecord | None = None
        #: what was revealed: the partial feedback's record, or placeholders no kernel reads
        self.feedback: Feedback | None = None
        self._step_kernel = FastKernel(task_record.record_step)
        self._observe_kernel = FastKernel(task_record.observe_record)

    def state_bytes(self) -> int:
        return _record_bytes(self.cache.n_models, True, self.team_record)

    def build(self, tables: Tables, state: CopyState, settings: Settings, earlier: Mapping[str, np.ndarray]) -> None:
        self.state, self.settings = state, settings
        self.tables = build_record_tables(tables, self.cache, self.questions, self.team_record)
        self.record = build_task_record(self.num_envs, self.cache.n_models, self.team_record)
        self.feedback = self._revealed(earlier)

    def _revealed(self, arrays: Mapping[str, np.ndarray]) -> Feedback:
        """What was revealed: the partial feedback's record among ``arrays`` (``settings.revealed_only``), else
        placeholders no kernel reads."""
        if self.settings.revealed_only:
            return Feedback(**{name: arrays[name] for name in Feedback._fields})
        return no_feedback(self.num_envs)

    def over(self, state: CopyState, arrays: Mapping[str, np.ndarray]) -> Component:
        part = TaskRecords(self.cache, self.questions, self.num_envs, self.team_record)
        part.state, part.settings, part.tables = state, self.settings, self.tables
        part.record = TaskRecord(**{name: arrays[name] for name in TaskRecord._fields})
        part.feedback = part._revealed(arrays)
        return part

    def wrap_step(self, inner: Step) -> Step:
        """The step, then q_t's outcome joins the task's record and the record blocks are written."""
        kernel, tables, record, state, revealed, settings = (
            self._step_kernel, self.tables, self.record, self.state, self.feedback, self.settings,
        )  # fmt: skip

        def step(next_team: np.ndarray, answers: np.ndarray, out: Outputs) -> None:
            inner(next_team, answers, out)
            kernel(tables, record, state, revealed, settings, out)

        return step

    def wrap_observe(self, inner: Observe) -> Observe:
        kernel, record, state, revealed, settings = (
            self._observe_kernel, self.record, self.state, self.feedback, self.settings,
        )  # fmt: skip

        def observe(env_ids: np.ndarray, out: Outputs) -> None:
            inner(env_ids, out)
            kernel(env_ids, record, state, revealed, settings, out)

        return observe

    def check(self) -> None:
        """Each count is that of the questions the episode answered (with ``feedback="team"``: of what they
        revealed)."""
        assert self.record is not None
        if self.settings.revealed_only:
            self._check_revealed()
            return
        counters, tables = self.state.counters, self.tables
        for env in range(self.num_envs):
            pos = int(counters[env, Counter.POS])
            played = min(pos, min(self.settings.episode_length, int(counters[env, Counter.STREAM])))
            answered = answered_questions(self.state, self.settings, env, np.arange(played, dtype=np.int64))
            again = pos - played  # steps past the episode's end answer its last question again
            for name, table in (("model_right", tables.correct), ("team_right", tables.team_correct)):
                expected = table[answered].sum(axis=0, dtype=np.int64)
                if again and played:
                    expected = expected + again * table[answered[-1]].astype(np.int64)
                got = getattr(self.record, name)[env]
                index = first(got != expected)
                if index is not None:
                    raise refusal(
                        name,
                        (env, *index),
                        got[index],
                        f"is not {number(expected[index])}, the count the {pos} questions copy {env} answered in its "
                        f"episode give (counters START = {counters[env, Counter.START]}, POS = {pos})",
                    )

    def _check_revealed(self) -> None:
        """``feedback="team"``: the record counts only what was revealed. The window's rows (their answering teams:
        ``revealed``) give their part exactly; the POS - COUNT older steps, which left the window, add at most one
        each, and a right answer only where it was seen."""
        assert self.record is not None and self.feedback is not None
        state, tables, revealed = self.state, self.tables, self.feedback
        counters = state.counters
        written = np.arange(state.window.shape[1])[None, :] < counters[:, Counter.COUNT][:, None]
        masks = feedback.revealed_masks(revealed.revealed, self.cache.n_models).astype(np.int64) * written[..., None]
        older = counters[:, Counter.POS] - counters[:, Counter.COUNT]
        right = tables.correct[state.window].astype(np.int64)
        parts = [("model_seen", "model_right", masks.sum(axis=1), (masks * right).sum(axis=1))]
        if tables.team_correct.shape[1] > 0:
            parts.append(("team_seen", "team_right", *self._window_teams(masks, tables.team_correct)))
        for seen_name, right_name, window_seen, window_right in parts:
            seen, got_right = getattr(revealed, seen_name), getattr(self.record, right_name)
            more_seen, more_right = seen - window_seen, got_right - window_right
            for name, got, more, low, high, what in (
                (seen_name, seen, more_seen, 0, older[:, None], "the older steps that left the window"),
                (right_name, got_right, more_right, 0, more_seen, f"the older steps' {seen_name}"),
            ):
                index = first((more < low) | (more > high))
                if index is not None:
                    env = index[0]
                    raise refusal(
                        name,
                        index,
                        got[index],
                        f"is not the count of copy {env}'s window rows ({number((got - more)[index])}) plus 0 to "
                        f"{number(np.broadcast_to(high, more.shape)[index])} more from {what} (counters POS = "
                        f"{counters[env, Counter.POS]}, COUNT = {counters[env, Counter.COUNT]})",
                    )

    def _window_teams(self, masks: np.ndarray, team_correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(B, K) the window rows revealed for each team k (its answering team contained team k: bit i of k + 1 is
        model i) and of them the ones team k's mean vote got right, from the rows' revealed models ``masks``
        (B, T, N). Copies are taken in groups of about 2**24 (row, team) pairs, so that the memory stays some tens of
        MB at N = 10 and T = 500 (all at once: B x T x K integers, GBs)."""
        window = self.state.window
        codes = masks @ (np.int64(1) << np.arange(masks.shape[2], dtype=np.int64))  # (B, T) the rows' answering teams
        teams = np.arange(1, team_correct.shape[1] + 1, dtype=np.int64)  # team k's code, k + 1
        seen = np.zeros((window.shape[0], teams.size), dtype=np.int64)
        right = np.zeros_like(seen)
        group = max(1, 2**24 // max(1, window.shape[1] * teams.size))
        for start in range(0, window.shape[0], group):
            rows = slice(start, start + group)
            contains = (teams[None, None, :] & ~codes[rows, :, None]) == 0  # (b, T, K); an unwritten slot: none
            seen[rows] = contains.sum(axis=1)
            right[rows] = (contains & (team_correct[window[rows]] > 0)).sum(axis=1)
        return seen, right


class WeightingAgents(Component):
    """``fusion_agents="per_model"``: agents ``weight_0`` ... ``weight_{N-1}``, each observing its model's part of
    the question (:func:`~ensemble_env.game.dynamics.observe_models`, after every step and observation); the state
    gains the question's context (their shared first entries)."""

    name = "fusion_agents='per_model'"

    def __init__(self, layout: ObservationLayout, num_envs: int, n_models: int, agents: tuple[str, ...]) -> None:
        self.layout, self.num_envs, self.n_models, self.agents = layout, num_envs, n_models, agents
        self.out = np.zeros((num_envs, n_models, layout.model_size), dtype=np.float32)
        self._kernel = FastKernel(dynamics.observe_models)

    def state_bytes(self) -> int:
        return 8 * self.n_models * self.layout.model_size

    def build(self, tables: Tables, state: CopyState, settings: Settings, earlier: Mapping[str, np.ndarray]) -> None:
        self.tables, self.state, self.settings = tables, state, settings

    def _observe_models(self) -> None:
        """Fresh per-model observations of every copy."""
        self.out = np.empty((self.num_envs, self.n_models, self.layout.model_size), dtype=np.float32)
        self._kernel(self.tables, self.state, self.settings, self.out, "features" in self.layout.model)

    def wrap_step(self, inner: Step) -> Step:
        def step(next_team: np.ndarray, answers: np.ndarray, out: Outputs) -> None:
            inner(next_team, answers, out)
            self._observe_models()

        return step

    def wrap_observe(self, inner: Observe) -> Observe:
        def observe(env_ids: np.ndarray, out: Outputs) -> None:
            inner(env_ids, out)
            self._observe_models()

        return observe

    def restored(self) -> None:
        self._observe_models()

    def observations(self, obs: dict[str, np.ndarray]) -> None:
        """``weight_i``'s observations instead of the fusion agent's."""
        obs.pop("fusion", None)
        obs.update((agent, self.out[:, i]) for i, agent in enumerate(self.agents))

    def state_parts(self, parts: list[np.ndarray]) -> None:
        parts.append(self.out[:, 0, : self.layout.context_size])


def game_components(
    config: EnvConfig,
    cache: LogitCache,
    num_envs: int,
    questions: np.ndarray,
    task_bounds: np.ndarray,
    episode_length: int,
    layout: ObservationLayout,
    agents: tuple[str, ...],
) -> tuple[Component, ...]:
    """The components ``config`` enables, in the module table's order (not yet built: ``Component.build``). A
    ValueError names an option the cache cannot have (``team_record`` on a pool beyond
    :data:`~ensemble_env.game.config.MAX_TEAM_RECORD_MODELS` models)."""
    n = cache.n_models
    team_record = "team_record" in config.decider_extras
    if team_record and n > MAX_TEAM_RECORD_MODELS:
        raise ValueError(
            f"decider_extras 'team_record' has a value per team, 2**N - 1, for pools of N <= "
            f"{MAX_TEAM_RECORD_MODELS} models; the cache {cache.path} has N={n}: leave it out"
        )
    records = any(name in RECORD_EXTRAS for name in (*config.decider_extras, *config.fusion_extras))
    parts: list[Component] = []
    if config.episodes == "task":
        parts.append(TaskDeck(task_bounds, episode_length))
    if config.feedback == "team":
        parts.append(PartialFeedback(config, n, num_envs, records, team_record))
    if records:
        parts.append(TaskRecords(cache, questions, num_envs, team_record))
    if config.fusion_agents == "per_model":
        parts.append(WeightingAgents(layout, num_envs, n, tuple(a for a in agents if a.startswith("weight_"))))
    return tuple(parts)


def build_components(parts: tuple[Component, ...], tables: Tables, state: CopyState, settings: Settings) -> None:
    """Allocate every part's arrays, in the list's order (each sees the arrays of those before it)."""
    earlier: dict[str, np.ndarray] = {}
    for part in parts:
        part.build(tables, state, settings, earlier)
        earlier.update(part.arrays())


def wrapped_step(parts: tuple[Component, ...], inner: Step) -> Step:
    """The step with every part's kernels around it, in the list's order."""
    for part in parts:
        inner = part.wrap_step(inner)
    return inner


def wrapped_observe(parts: tuple[Component, ...], inner: Observe) -> Observe:
    """An observation followed by every part's kernels, in the list's order."""
    for part in parts:
        inner = part.wrap_observe(inner)
    return inner


def wrapped_statistics(parts: tuple[Component, ...], inner: Statistics) -> Statistics:
    """The window statistics as the parts show them."""
    for part in parts:
        inner = part.wrap_statistics(inner)
    return inner
