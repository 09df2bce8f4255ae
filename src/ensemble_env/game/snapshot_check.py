"""Checking a snapshot by value (:class:`SnapshotCheck`): what each array of a snapshot of this engine may hold,
given the configuration, the cache and the arrays checked before it, so that
:func:`~ensemble_env.game.snapshot.restore_snapshot` never hands the kernels a state they could not step safely.

The arrays reach it already checked by name, shape and dtype (:mod:`ensemble_env.game.snapshot`, which takes and
restores snapshots); a value that fails a check raises a ValueError naming the field, the copy and the value. The
engine is read through :class:`Game`. The arrays of the game's components (:mod:`ensemble_env.game.components`: the
deck, what was revealed, the task's record) are checked by the components themselves, each over the snapshot's
arrays, and the observations are rebuilt by the step's own kernels with the components' around them: this module
holds no case of its own for an option.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game import dynamics
from ensemble_env.game.build import initial_cost
from ensemble_env.game.components import Component, wrapped_observe
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.jit import kernel
from ensemble_env.game.layout import ObservationLayout
from ensemble_env.game.records import CopyState, Counter, Info, Outputs, Settings, Tables
from ensemble_env.game.refusals import answered_questions, first, number, refusal
from ensemble_env.game.reward import RewardSettings
from ensemble_env.game.window import add_agreement, add_failures, update_plurality

__all__ = ["MAX_STEPS", "Game", "SnapshotCheck"]

#: the most steps a copy's counters may hold in a snapshot (stepping on past an episode's end with ``advance``
#: keeps counting); 2**53, so that the info ``step`` (a float64) holds it exactly
MAX_STEPS = 2**53


class Game(Protocol):
    """What a snapshot reads of the engine (:class:`~ensemble_env.game.engine.EnsembleVectorEnv`): its copies,
    options, cache and stream, the records its kernels read and its components."""

    cache: LogitCache
    config: EnvConfig
    num_envs: int
    n_models: int
    episode_length: int
    questions: np.ndarray
    by_task: bool
    stream_tasks: np.ndarray
    task_bounds: np.ndarray
    initial_team: np.ndarray
    tables: Tables
    settings: Settings
    components: tuple[Component, ...]
    layout: ObservationLayout

    @property
    def reward_range(self) -> tuple[float, float]: ...


@kernel()
def _window_counts(rebuilt: CopyState, tables: Tables, settings: Settings) -> None:
    """The counts the step kernel keeps over each copy's window, rebuilt from the window's first COUNT questions
    (``rebuilt.counters``) into ``rebuilt``'s zeroed count arrays (``fail`` ... ``votes``), with the same updates
    as ``dynamics.step``, so that equal counts are bit-identical."""
    window, counters = rebuilt.window, rebuilt.counters
    fail, fail2, fail3, plural = rebuilt.fail, rebuilt.fail2, rebuilt.fail3, rebuilt.plural
    agree, votes = rebuilt.agree, rebuilt.votes
    carry = np.empty(plural.shape[2], dtype=np.uint64)
    borrow = np.empty(plural.shape[2], dtype=np.uint64)
    for env in range(window.shape[0]):
        for r in range(counters[env, Counter.COUNT]):
            q = window[env, r]
            add_failures(env, q, 1, tables.failing, tables.n_failing, fail, fail2, fail3)
            if settings.track_agreement:
                add_agreement(env, q, 1, tables.preds, agree, votes)
            if settings.use_table:
                row = tables.plural_table[tables.table_row[q]]
                update_plurality(plural[env], row, row, False, carry, borrow)


class SnapshotCheck:
    """The value checks of :meth:`~ensemble_env.game.engine.EnsembleVectorEnv.set_state`, in an order where each
    check relies only on what the earlier ones established (the kernels that rebuild the counts and the
    observations run last, on arrays whose indices are all known to be in range).

    What a snapshot of this engine holds, per copy b, with L = episode_length, T = window, S = the stream's size:

    - ``order``: sequential order, exactly the stream (the split's questions in cache order; grouped by task with
      ``episodes="task"``); shuffled order, per copy the first questions of a permutation of the stream (questions
      of the stream, none twice);
    - ``counters``: START in 0..S - L (0 when shuffled or when an episode is the whole stream; with
      ``episodes="task"``, within a task, at most min(L, its size) before its end), POS (steps answered) in
      0..MAX_STEPS, and the others follow from them: ANSWERED = POS, COUNT = min(POS, T), HEAD = POS mod T,
      STREAM = (order's width, or the end of START's task) - START, N_CORRECT in 0..ANSWERED;
    - ``team``: 0/1, at least ``min_team_size`` models (every model with ``decider=False``);
    - ``window``: question indices of the cache; the last COUNT slots written hold the questions answered at those
      steps (step t answered ``order[START + min(t, L - 1, STREAM - 1)]``);
    - ``fail`` ... ``votes``: exactly the counts of the window's questions (rebuilt and compared);
    - ``rewards``: finite, inside ``reward_range``, zero where the episode has not yet written one;
    - ``last`` (the infos): finite; at POS = 0 the values of a reset; after it, the last question, its label and
      task, the step, the running accuracy exactly, the answer an integer (the label when right), the team size
      and cost possible, the reward inside the bounds (and the history's last entry), the return within POS
      times the bounds, the focal diversity that of the team over the window;
    - ``rng``: a PCG64 state (odd increment, has_uint32 0 or 1, a 32-bit cached value);
    - ``task_deck`` (``episodes="task"``): a permutation of the stream's tasks, then how many are dealt (0..tasks);
    - ``model_right``, ``team_right`` (a record extra): exactly the counts of the questions the episode answered
      (rebuilt from the order, START and POS, and compared); with ``feedback="team"`` see below;
    - ``feedback="team"``: ``revealed``, in each of the window's COUNT slots written a team mask of N bits (at
      least ``min_team_size``, every model with ``decider=False``; the newest of |E_t| = the info ``team_size``),
      zeros in the others; ``seen``, ``seen_right`` exactly the counts of those rows (rebuilt and compared); the
      record's counts (``model_seen``, ``model_right``, ``team_seen``, ``team_right``) those of the window's rows
      plus, for the POS - COUNT older steps no longer in the window, 0 <= right <= seen <= POS - COUNT more (exact
      while the window holds the whole episode);
    - ``obs_decider``, ``obs_fusion``: finite (but features), inside their spaces, and equal to the observations
      the restored state gives (rebuilt by ``dynamics.observe``, with ``feedback="team"`` ``feedback.observe_team``).
    """

    def __init__(self, engine: Game, values: dict[str, np.ndarray]) -> None:
        self.engine = engine
        self.values = values
        self.state = CopyState(**{name: values[name] for name in CopyState._fields})
        self.sequential = engine.config.order != "shuffled"
        #: the engine's components over the snapshot's arrays
        self.components = tuple(part.over(self.state, values) for part in engine.components)

    def run(self) -> None:
        self.order()
        self.counters()
        self.team()
        self.window()
        self.counts()
        for part in self.components:
            part.check()
        self.rewards()
        self.infos()
        self.rng()
        self.observations()

    # -- where each copy is ---------------------------------------------------------------------------
    def _stream_text(self) -> str:
        cfg, n_stream = self.engine.config, self.engine.questions.size
        tasks = "" if cfg.tasks is None else f" and tasks {list(cfg.tasks)}"
        grouped = ", grouped by task (episodes='task')" if self.engine.by_task else ""
        return f"the {n_stream} questions of split {cfg.split!r}{tasks}, in cache order{grouped}"

    def order(self) -> None:
        order, questions = self.state.order, self.engine.questions
        if self.sequential:
            index = first(order != questions[None, :])
            if index is not None:
                raise refusal(
                    "order",
                    index,
                    order[index],
                    f"is not question {questions[index[1]]}: with order='sequential' the stream is "
                    f"{self._stream_text()}",
                )
            return
        index = first(~np.isin(order, questions))
        if index is not None:
            raise refusal("order", index, order[index], f"is not one of {self._stream_text()}")
        ordered = np.sort(order, axis=1)
        index = first(ordered[:, 1:] == ordered[:, :-1])
        if index is not None:
            raise ValueError(
                f"set_state: order[{index[0]}] holds question {ordered[index]} twice: a shuffled stream draws "
                f"each question of {self._stream_text()} at most once"
            )

    def counters(self) -> None:
        engine, counters = self.engine, self.state.counters
        window, length, n_stream = engine.config.window, engine.episode_length, engine.questions.size
        start, pos = counters[:, Counter.START], counters[:, Counter.POS]
        earliest: Any = 0
        end: Any = self.state.order.shape[1]  # where each copy's stream ends in its order row
        if engine.by_task:  # START lies in a task, at most min(L, its size) questions before its end
            bounds = engine.task_bounds
            task = np.clip(np.searchsorted(bounds, start, side="right") - 1, 0, bounds.size - 2)
            earliest, end = bounds[task], bounds[task + 1]
            latest = end - np.minimum(length, end - earliest)
            why = f"with episodes='task' an episode of at most {length} questions lies within a task"
        elif self.sequential and length < n_stream:
            latest, why = n_stream - length, f"an episode of {length} questions starts within a stream of {n_stream}"
        else:
            latest = 0
            why = "a shuffled episode starts its own stream" if not self.sequential else "an episode is the stream"
        self._in_range(Counter.START, earliest, latest, why)
        self._in_range(Counter.POS, 0, MAX_STEPS, "the steps answered in the episode")
        derived = {
            Counter.ANSWERED: (pos, "ANSWERED counts the steps answered, as POS"),
            Counter.COUNT: (np.minimum(pos, window), f"the window holds min(POS, window={window}) questions"),
            Counter.HEAD: (pos % window, f"the window's next slot is POS mod window={window}"),
            Counter.STREAM: (
                end - start,
                "STREAM is the questions of the copy's stream (its task, with episodes='task') from START on",
            ),
        }
        for column, (expected, why) in derived.items():
            index = first(counters[:, column] != expected)
            if index is not None:
                env = index[0]
                raise refusal(
                    "counters",
                    (env, column.name),
                    counters[env, column],
                    f"is not {expected[env]}, the value for POS = {pos[env]} and START = {start[env]} ({why})",
                )
        self._in_range(Counter.N_CORRECT, 0, counters[:, Counter.ANSWERED], "the right answers among ANSWERED")

    def _in_range(self, column: Counter, low: Any, high: Any, why: str) -> None:
        values = self.state.counters[:, column]
        lows, highs = np.broadcast_to(low, values.shape), np.broadcast_to(high, values.shape)
        index = first((values < lows) | (values > highs))
        if index is not None:
            env = index[0]
            raise refusal(
                "counters",
                (env, column.name),
                values[env],
                f"is outside [{number(lows[env])}, {number(highs[env])}] ({why})",
            )

    def answered(self, env: int, steps: np.ndarray) -> np.ndarray:
        """The questions copy ``env`` answered at the given steps of its episode (:func:`answered_questions`)."""
        return answered_questions(self.state, self.engine.settings, env, steps)

    # -- teams and windows ----------------------------------------------------------------------------
    def team(self) -> None:
        team, smallest = self.state.team, self.engine.config.min_team_size
        index = first(team > 1)
        if index is not None:
            raise refusal("team", index, team[index], "is not 0 or 1 (a team is a 0/1 mask over the models)")
        sizes = team.sum(axis=1, dtype=np.int64)
        if not self.engine.config.decider:
            index = first(team != 1)
            if index is not None:
                raise refusal("team", index, team[index], "is not 1: with decider=False the team is every model")
        index = first(sizes < smallest)
        if index is not None:
            raise ValueError(
                f"set_state: team[{index[0]}] has {sizes[index]} models, fewer than min_team_size={smallest}"
            )

    def window(self) -> None:
        engine, state = self.engine, self.state
        window, counters = state.window, state.counters
        n_questions, size = engine.cache.n_questions, engine.config.window
        index = first((window < 0) | (window >= n_questions))
        if index is not None:
            raise refusal("window", index, window[index], f"is not a question of the cache (0..{n_questions - 1})")
        for env in range(engine.num_envs):
            pos, start = int(counters[env, Counter.POS]), int(counters[env, Counter.START])
            last = min(engine.episode_length, int(counters[env, Counter.STREAM])) - 1
            steps = np.arange(pos - min(pos, size), pos, dtype=np.int64)
            expected = self.answered(env, steps)
            got = window[env, steps % size]
            wrong = first(got != expected)
            if wrong is not None:
                k = wrong[0]
                raise refusal(
                    "window",
                    (env, int(steps[k] % size)),
                    got[k],
                    f"is not question {expected[k]}, the one copy {env} answered at step {steps[k]} of its episode "
                    f"(order[{0 if self.sequential else env}, {start + min(int(steps[k]), last)}], with counters "
                    f"POS = {pos} and START = {start})",
                )

    def counts(self) -> None:
        engine, state = self.engine, self.state
        names = ("fail", "fail2", "fail3", "plural", "agree", "votes")
        rebuilt = {name: np.zeros_like(getattr(state, name)) for name in names}
        _window_counts(state._replace(**rebuilt), engine.tables, engine.settings)
        for name, expected in rebuilt.items():
            got = getattr(state, name)
            index = first(got != expected)
            if index is not None:
                env = index[0]
                count = int(state.counters[env, Counter.COUNT])
                raise refusal(
                    name,
                    index,
                    got[index],
                    f"is not {number(expected[index])}, the count the questions of copy {env}'s window give (its "
                    f"window's first {count} slots, counters COUNT = {count})",
                )

    # -- rewards and infos ----------------------------------------------------------------------------
    def rewards(self) -> None:
        rewards, pos = self.state.rewards, self.state.counters[:, Counter.POS]
        history = rewards.shape[1]
        if history == 0:
            return
        low, high = self.engine.reward_range
        index = first(~np.isfinite(rewards))
        if index is not None:
            raise refusal("rewards", index, rewards[index], "is not finite")
        index = first((rewards < np.float32(low)) | (rewards > np.float32(high)))
        if index is not None:
            raise refusal("rewards", index, rewards[index], f"is outside the reward range [{low:g}, {high:g}]")
        unset = np.arange(history)[None, :] < (history - np.minimum(pos, history))[:, None]
        index = first(unset & (rewards != 0))
        if index is not None:
            env = index[0]
            raise refusal(
                "rewards",
                index,
                rewards[index],
                f"is not 0: copy {env} has answered {pos[env]} questions of its episode, so only its last "
                f"{min(int(pos[env]), history)} rewards are set",
            )

    def infos(self) -> None:
        engine, state = self.engine, self.state
        last, counters, order = state.last, state.counters, state.order
        index = first(~np.isfinite(last))
        if index is not None:
            raise refusal("last", (Info(index[0]).name, index[1]), last[index], "is not finite (an info value)")
        pos = counters[:, Counter.POS]
        envs = np.arange(engine.num_envs)
        fresh, played = envs[pos == 0], envs[pos > 0]
        # at the start of an episode: the values of a reset
        firsts = order[0 if self.sequential else fresh, counters[fresh, Counter.START]]
        at_reset = {
            Info.CORRECT: 0.0,
            Info.ANSWER: -1.0,
            Info.LABEL: -1.0,
            Info.QUESTION: -1.0,
            Info.TASK: -1.0,
            Info.TEAM_SIZE: float(engine.initial_team.sum()),
            Info.COST: initial_cost(engine.tables, engine.settings, engine.initial_team, firsts),
            Info.REWARD: 0.0,
            Info.ACCURACY: 0.0,
            Info.EPISODE_RETURN: 0.0,
            Info.STEP: 0.0,
        }
        for row, expected in at_reset.items():
            self._expect(row, fresh, expected, "the value at the start of an episode (POS = 0)")
        if played.size == 0:
            return
        # after a step: what the last step wrote
        steps = pos[played]
        rows = 0 if self.sequential else played
        last_step = np.minimum(engine.episode_length, counters[played, Counter.STREAM]) - 1
        question = order[rows, counters[played, Counter.START] + np.minimum(steps - 1, last_step)]
        tables = engine.tables
        self._expect(Info.QUESTION, played, question, "the question the copy answered last")
        self._expect(Info.LABEL, played, tables.labels[question], "the label of the question answered last")
        self._expect(Info.TASK, played, tables.tasks[question], "the task of the question answered last")
        self._expect(Info.STEP, played, steps, "the steps answered (counters POS)")
        answered, right = counters[played, Counter.ANSWERED], counters[played, Counter.N_CORRECT]
        self._expect(Info.ACCURACY, played, right / answered, "N_CORRECT / ANSWERED of the counters")
        correct = last[Info.CORRECT, played]
        self._require(Info.CORRECT, played, (correct == 0) | (correct == 1), "is not 0 or 1")
        self._require(
            Info.CORRECT,
            played,
            (right >= correct) & (right <= answered - 1 + correct),
            "does not agree with the counters' N_CORRECT (the right answers of the episode)",
        )
        answer = last[Info.ANSWER, played]
        self._require(
            Info.ANSWER,
            played,
            (answer == np.round(answer)) & (np.abs(answer) <= 2.0**63),
            "is not an integer answer (an int64)",
        )
        self._require(Info.ANSWER, played, (correct == 0) | (answer == tables.labels[question]), "is not the label")
        n_models, smallest = engine.n_models, engine.config.min_team_size
        size = last[Info.TEAM_SIZE, played]
        self._require(
            Info.TEAM_SIZE,
            played,
            (size == np.round(size)) & (size >= smallest) & (size <= n_models),
            f"is not a team size in [min_team_size={smallest}, N={n_models}]",
        )
        self._require(Info.CORRECT, played, (size > 0) | (correct == 0), "is 1 for an empty team (never right)")
        cost = last[Info.COST, played]
        total_cost = np.zeros(played.size)
        for i in range(n_models):  # the question's cost for the whole pool, summed in the step kernel's order
            total_cost = total_cost + tables.costs[question if engine.cache.costs is not None else 0, i]
        if engine.cache.costs is None:
            self._require(Info.COST, played, cost == size, "is not the team size (the cache has no costs)")
        else:
            self._require(Info.COST, played, (cost >= 0) & (cost <= total_cost), "is not a cost of a team")
        low, high = engine.reward_range
        slack = 1e-9 * max(1.0, abs(low), abs(high))
        reward = last[Info.REWARD, played]
        self._require(
            Info.REWARD,
            played,
            (reward >= low - slack) & (reward <= high + slack),
            f"is outside the reward range [{low:g}, {high:g}]",
        )
        # the reward of the answer, team size and cost above (the same kernels as the step's), but the diversity
        # bonus: that is bonus x the focal diversity the answering team had, in [0, 1], exactly 0 without a bonus
        cfg = engine.config
        scoring = RewardSettings(alpha=cfg.alpha, size_penalty_mode=cfg.size_penalty_mode, use_costs=cfg.use_costs)
        base = scoring.rewards(correct == 1, scoring.share(engine.cache, size, cost, total_cost))
        bonus = cfg.diversity_bonus
        index = first((reward - base < min(bonus, 0.0) - slack) | (reward - base > max(bonus, 0.0) + slack))
        if index is not None:
            env = int(played[index[0]])
            raise refusal(
                "last",
                ("REWARD", env),
                reward[index],
                f"is not the reward of copy {env}'s last answer (its CORRECT, TEAM_SIZE and COST give "
                f"{number(base[index])}, plus the diversity bonus {bonus:g} times a focal diversity in [0, 1])",
            )
        if state.rewards.shape[1] > 0:
            self._require(
                Info.REWARD,
                played,
                reward.astype(np.float32) == state.rewards[played, -1],
                "is not the last reward of the history (rewards)",
            )
        total_return = last[Info.EPISODE_RETURN, played]
        self._require(
            Info.EPISODE_RETURN,
            played,
            (total_return >= steps * low - slack * steps) & (total_return <= steps * high + slack * steps),
            "is not a sum of POS rewards inside the reward range",
        )
        history = state.rewards.shape[1]
        whole = steps <= history  # every reward of the episode is in the history: the return is their sum
        if whole.any():
            envs, kept = played[whole], np.arange(history)[None, :] >= history - steps[whole][:, None]
            sums = np.where(kept, state.rewards[envs], 0.0).sum(axis=1, dtype=np.float64)
            self._require(
                Info.EPISODE_RETURN,
                envs,
                np.abs(last[Info.EPISODE_RETURN, envs] - sums) <= 1e-6 * max(1.0, abs(low), abs(high)) * steps[whole],
                "is not the sum of the episode's rewards (all in the history)",
            )

    def _expect(self, row: Info, envs: np.ndarray, expected: Any, what: str) -> None:
        got = self.state.last[row, envs]
        expected = np.broadcast_to(np.asarray(expected, dtype=np.float64), got.shape)
        index = first(got != expected)
        if index is not None:
            env = int(envs[index[0]])
            raise refusal(
                "last", (row.name, env), got[index], f"is not {number(expected[index])}, {what} of copy {env}"
            )

    def _require(self, row: Info, envs: np.ndarray, good: np.ndarray, problem: str) -> None:
        index = first(~good)
        if index is not None:
            env = int(envs[index[0]])
            raise refusal("last", (row.name, env), self.state.last[row, env], problem)

    # -- the generator and the observations -----------------------------------------------------------
    def rng(self) -> None:
        words = self.values["rng"]
        if not int(words[3]) & 1:
            raise refusal("rng", (3,), words[3], "is even: a PCG64 increment (words 2 and 3) is always odd")
        if words[4] > 1:
            raise refusal("rng", (4,), words[4], "is not 0 or 1 (PCG64's has_uint32 flag)")
        if words[5] >= 2**32:
            raise refusal("rng", (5,), words[5], "does not fit in 32 bits (PCG64's cached uinteger)")

    def observations(self) -> None:
        engine, state, layout = self.engine, self.state, self.engine.layout
        scratch = state._replace(last=state.last.copy())  # observing notes the focal diversity there
        b = engine.num_envs
        out = Outputs(
            decider=np.zeros((b, layout.decider_size), dtype=np.float32),
            fusion=np.zeros((b, layout.fusion_size), dtype=np.float32),
            reward=np.zeros(b, dtype=np.float64),
            done=np.zeros(b, dtype=np.bool_),
            terminated=np.zeros(b, dtype=np.bool_),
        )
        # the engine's observation, over the restored arrays: the components' kernels around dynamics.observe
        tables, settings = engine.tables, engine.settings
        observe = wrapped_observe(
            tuple(part.over(scratch, self.values) for part in engine.components),
            lambda env_ids, out: dynamics.observe(env_ids, tables, scratch, settings, out),
        )
        observe(np.arange(b), out)
        blocks = (
            ("obs_decider", out.decider, layout.decider, layout.decider_low, layout.decider_high),
            ("obs_fusion", out.fusion, layout.fusion, layout.fusion_low, layout.fusion_high),
        )
        for name, expected, parts, low, high in blocks:
            got = self.values[name]
            checked = np.ones(got.shape[1], dtype=bool)
            if "features" in parts:
                checked[parts["features"]] = False  # float32 features of a finite cache may overflow to inf
            index = first(~np.isfinite(got) & checked)
            if index is not None:
                raise refusal(
                    name, index, got[index], f"is not finite (block {_block(parts, index[1])!r}, entry {index[1]})"
                )
            index = first((got < low) | (got > high))
            if index is not None:
                raise refusal(
                    name,
                    index,
                    got[index],
                    f"is outside the observation space's bounds [{low[index[1]]}, {high[index[1]]}] "
                    f"(block {_block(parts, index[1])!r}, entry {index[1]})",
                )
            index = first((got != expected) & ~(np.isnan(got) & np.isnan(expected)))
            if index is not None:
                block = _block(parts, index[1])
                raise refusal(
                    name,
                    index,
                    got[index],
                    f"is not {number(expected[index])}, the observation the restored state gives (block {block!r}, "
                    f"entry {index[1]}, from {_SOURCES[name, block]})",
                )
        got, expected = state.last[Info.FOCAL_DIVERSITY], scratch.last[Info.FOCAL_DIVERSITY]
        index = first(got != expected)
        if index is not None:
            env = index[0]
            raise refusal(
                "last",
                ("FOCAL_DIVERSITY", env),
                got[env],
                f"is not {number(expected[env])}, the focal diversity of copy {env}'s team over its window",
            )


_STREAM = "order and counters"
#: what each observation block is made from, for the message of an observation the state does not give
_SOURCES = {
    ("obs_decider", "team_mask"): "team",
    ("obs_decider", "team_size"): "team",
    ("obs_decider", "statistics"): "team, window and its counts (fail, fail2, fail3, plural, agree, votes; with "
    "feedback='team': revealed)",
    ("obs_decider", "model_accuracy"): "fail and counters (with feedback='team': seen, seen_right)",
    ("obs_decider", "task"): _STREAM,
    ("obs_decider", "features"): _STREAM,
    ("obs_fusion", "probs"): f"{_STREAM} and team",
    ("obs_fusion", "team_mask"): "team",
    ("obs_fusion", "rewards"): "rewards",
    ("obs_fusion", "action_mask"): _STREAM,
    ("obs_fusion", "task"): _STREAM,
    ("obs_fusion", "features"): _STREAM,
    ("obs_decider", "task_record"): "model_right and counters (with feedback='team': model_seen)",
    ("obs_decider", "team_record"): "team_right and counters (with feedback='team': team_seen)",
    ("obs_fusion", "member_record"): "model_right, team and counters (with feedback='team': model_seen)",
    ("obs_decider", "statistics_count"): "team, window, counters and revealed",
    ("obs_decider", "model_accuracy_count"): "seen",
    ("obs_decider", "task_record_count"): "model_seen",
    ("obs_decider", "team_record_count"): "team_seen",
    ("obs_fusion", "member_record_count"): "model_seen and team",
}


def _block(parts: dict[str, slice], column: int) -> str:
    """The name of the observation block holding ``column``."""
    return next(name for name, part in parts.items() if part.start <= column < part.stop)
