"""The environment's options as one frozen, validated dataclass.

:func:`ensemble_env.parallel_env`, :func:`ensemble_env.views.parallel` and :func:`ensemble_env.vector_env` take these
fields as keyword arguments; the engine receives one :class:`EnvConfig`. Checks that need the cache (task and
model names, the subset encoding's model limit, features present) happen when the engine is built.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import SPLIT_CHOICES
from ensemble_env.game.actions import DECIDER_ENCODINGS
from ensemble_env.game.checks import MAX_REAL, integer_option, real_option
from ensemble_env.game.reward import SIZE_PENALTY_MODES, check_alpha
from ensemble_env.metrics import METRICS

__all__ = [
    "DECIDER_ACTIONS",
    "DECIDER_EXTRAS",
    "EPISODES",
    "FEEDBACK",
    "FEEDBACK_LEVELS",
    "FUSION_ACTIONS",
    "FUSION_AGENTS",
    "FUSION_EXTRAS",
    "LATER_DEFAULTS",
    "MAX_TEAM_RECORD_MODELS",
    "ORDERS",
    "RECORD_EXTRAS",
    "RLAE_DEFAULTS",
    "RLAE_GAME",
    "SIZE_PENALTY_MODES",
    "SPLIT_CHOICES",
    "UNSEEN_GAME",
    "UNSEEN_VERSIONS",
    "EnvConfig",
    "rlae_game",
    "unseen_game",
]

#: ``decider_action``: the decider's action encodings (:data:`ensemble_env.game.actions.DECIDER_ENCODINGS`)
DECIDER_ACTIONS = tuple(DECIDER_ENCODINGS)
#: ``decider_extras``: what the decider may see beyond the window's statistics
DECIDER_EXTRAS = ("model_accuracy", "task", "features", "task_record", "team_record")
#: ``fusion_extras``: what the fusion agent may see beyond the team's probabilities
FUSION_EXTRAS = ("task", "features", "member_record")
#: the extras that describe the history of the episode's task (they need ``episodes="task"``)
RECORD_EXTRAS = ("task_record", "team_record", "member_record")
#: ``team_record`` has a value per team, 2**N - 1 of them: pools of at most this many models (1,023 teams)
MAX_TEAM_RECORD_MODELS = 10
#: ``episodes``: one stream of questions (crossing tasks), or one task per episode
EPISODES = ("stream", "task")
#: the one feedback vocabulary: what is revealed of an answered question, most first: every model's output (``"all"``,
#: today's game), the label and the outputs of the team that answered it only (``"team"``, partial feedback:
#: ``game.feedback``; so every sub-team's reward), the played team's reward (``"bandit"``), nothing (``"none"``: a
#: fixed team). The game's option, the benchmark's ``--feedback`` and what a baseline reads
#: (``baselines.registry.reference``: a rule plays under a protocol's feedback when it reads no more) all use it
FEEDBACK_LEVELS = ("all", "team", "bandit", "none")
#: ``feedback``, the game's (and the benchmark protocols'): the levels a game can reveal, ``"all"`` or ``"team"``
FEEDBACK = FEEDBACK_LEVELS[:2]
#: ``fusion_action``: the answer index (RL-Focal) or a weight per model (RLAE)
FUSION_ACTIONS = ("answer", "weights")
#: ``fusion_agents``: one fusion agent, or one weighting agent per model (RLAE_MAPPO; needs weights)
FUSION_AGENTS = ("one", "per_model")
#: the RLAE options and their defaults (today's game); a snapshot's signature names them only when changed
RLAE_DEFAULTS: dict[str, object] = {"decider": True, "fusion_action": "answer", "fusion_agents": "one"}
#: ``order``: the questions in the cache's order, or a new permutation per reset
ORDERS = ("sequential", "shuffled")
#: options added after snapshots existed, and their defaults (today's game): a snapshot's signature names them only
#: when changed, so that snapshots of today's game keep the signature they had
LATER_DEFAULTS: dict[str, object] = {**RLAE_DEFAULTS, "episodes": "stream", "feedback": "all"}
#: what makes a game RLAE's (arXiv 2506.00439): no decider (every model answers), a weight per model as the action
RLAE_GAME: dict[str, object] = {"decider": False, "fusion_action": "weights"}


def rlae_game(fusion_agents: str = "one", *, has_features: bool = False) -> dict[str, Any]:
    """The environment options of RLAE's game as its reference learners play it (``docs/rlae.md``): :data:`RLAE_GAME`,
    the weights set by one agent (``fusion_agents="one"``, RLAE_PPO) or one per model (``"per_model"``, RLAE_MAPPO),
    the question's context (its task, and the cache's text features when ``has_features``) and no reward history
    (each question is a one-step bandit: the weights change nothing later). The adapters' weights views start
    from it.

    >>> game = rlae_game("per_model")
    >>> game["fusion_agents"], game["fusion_extras"], game["reward_history"], game["decider"]
    ('per_model', ('task',), 0, False)
    """
    if fusion_agents not in FUSION_AGENTS:
        raise ValueError(f"fusion_agents={fusion_agents!r} is not one of {', '.join(FUSION_AGENTS)}")
    extras = ("task", "features") if has_features else ("task",)
    return {**RLAE_GAME, "fusion_agents": fusion_agents, "fusion_extras": extras, "reward_history": 0}


#: what makes a game ``ensemble_env/EnsembleUnseen-v1`` (routing on tasks never seen), but ``team_record``, which
#: :func:`unseen_game` adds for pools of at most :data:`MAX_TEAM_RECORD_MODELS` models: one task per episode, and
#: the task's history instead of its identity
UNSEEN_GAME: dict[str, Any] = {
    "episodes": "task",
    "decider_extras": ("model_accuracy", "task_record"),
    "fusion_extras": ("member_record",),
}
#: the versions of ``ensemble_env/EnsembleUnseen-vN`` and the options each fixes (no keyword may change them): v1
#: reveals every model's output (``feedback="all"``), v2 only the outputs of the team that answered (partial
#: feedback, ``feedback="team"``); a version's game holds those that differ from :class:`EnvConfig`'s defaults
UNSEEN_VERSIONS: dict[int, dict[str, Any]] = {1: {"feedback": "all"}, 2: {"feedback": "team"}}


def unseen_game(n_models: int, options: dict[str, Any] | None = None, *, version: int = 1) -> dict[str, Any]:
    """The options of ``ensemble_env/EnsembleUnseen-v{version}`` for a pool of ``n_models`` models, ``options`` on
    top.

    :data:`UNSEEN_GAME` (every episode one task, played in cache order from an empty history; the decider sees
    each model's window accuracy and the task's record so far, the fusion agent its team's), with ``team_record``
    added to the decider's extras when the pool has at most :data:`MAX_TEAM_RECORD_MODELS` models, and the options
    :data:`UNSEEN_VERSIONS` fixes for ``version`` (v1: ``feedback="all"``, v2: ``feedback="team"``), which
    ``options`` may not change.
    ``options`` may change any other option (``split``, ``tasks``, ``alpha``, ``episode_length``, the extras, ...),
    but nothing may tell the agents which task they play: ``"task"`` extras, ``fusion_agents="per_model"`` (whose
    observation starts with the task one-hot) and ``episodes="stream"`` raise a ValueError.

    >>> game = unseen_game(5)
    >>> game["episodes"], game["decider_extras"], game["fusion_extras"]
    ('task', ('model_accuracy', 'task_record', 'team_record'), ('member_record',))
    >>> unseen_game(12)["decider_extras"]
    ('model_accuracy', 'task_record')
    >>> unseen_game(5, version=2)["feedback"]
    'team'
    >>> unseen_game(5, {"feedback": "team"}, version=1)
    Traceback (most recent call last):
    ...
    ValueError: EnsembleUnseen-v1 is the game with feedback='all', got feedback='team' (that is EnsembleUnseen-v2)
    >>> unseen_game(5, {"fusion_extras": ("task",)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: EnsembleUnseen-v1 hides the task's identity: fusion_extras=('task',) shows it ...
    """
    if isinstance(n_models, bool) or not isinstance(n_models, int | np.integer) or n_models < 1:
        raise ValueError(f"unseen_game: n_models must be a positive integer, got {n_models!r}")
    if isinstance(version, bool) or version not in UNSEEN_VERSIONS:
        raise ValueError(f"unseen_game: version={version!r} is not one of {', '.join(map(str, UNSEEN_VERSIONS))}")
    name = f"EnsembleUnseen-v{version}"
    defaults = {item.name: item.default for item in fields(EnvConfig)}
    fixed = UNSEEN_VERSIONS[version]
    game = {**UNSEEN_GAME, **{option: value for option, value in fixed.items() if value != defaults[option]}}
    if n_models <= MAX_TEAM_RECORD_MODELS:
        game["decider_extras"] = (*game["decider_extras"], "team_record")
    given = options or {}
    for option, value in fixed.items():
        if option in given and given[option] != value:
            other = [f"EnsembleUnseen-v{v}" for v, f in UNSEEN_VERSIONS.items() if f.get(option) == given[option]]
            raise ValueError(
                f"{name} is the game with {option}={value!r}, got {option}={given[option]!r}"
                + (f" (that is {other[0]})" if other else "")
            )
    game.update(given)
    for option in ("decider_extras", "fusion_extras"):
        extras = game.get(option) or ()
        if "task" in (() if isinstance(extras, str) else tuple(extras)):
            raise ValueError(
                f"{name} hides the task's identity: {option}={extras!r} shows it (leave out 'task'; the "
                f"records {', '.join(map(repr, RECORD_EXTRAS))} describe the task's history instead)"
            )
    if game["episodes"] != "task":
        raise ValueError(f"{name} plays one task per episode: episodes={game['episodes']!r} must be 'task'")
    if game.get("fusion_agents", "one") == "per_model":
        raise ValueError(
            f"{name} hides the task's identity: fusion_agents='per_model' observe the task one-hot "
            "(use fusion_agents='one')"
        )
    return game


def _names(value: Any, option: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ValueError(f"{option} must be a sequence of names, got the string {value!r} (write [{value!r}])")
    names = tuple(value)
    if not all(isinstance(name, str) for name in names):
        raise ValueError(f"{option} must hold strings, got {names!r}")
    return names


#: the ranges of the numeric options (beyond them a value is refused, never clipped)
MAX_WINDOW = 1_000_000
MAX_REWARD_HISTORY = 10_000
MAX_MODELS = 4096
MAX_QUESTIONS = 2**31 - 1


@dataclass(frozen=True)
class EnvConfig:
    """Options of the ensemble game (all keyword arguments of ``parallel_env``)."""

    alpha: float = 1.0
    """Size penalty: a wrong answer with team E earns -1 - alpha * ``|E|`` / N (see ``size_penalty_mode``)."""
    window: int = 500
    """T, the number of most recently answered questions the decider's statistics are computed over."""
    split: str = "train"
    """Questions of this split form the stream: "train", "test", "validation" or "all"."""
    tasks: tuple[str, ...] | None = None
    """Task names to keep (default: every task of the cache)."""
    order: str = "sequential"
    """"sequential": the cache's order (the paper's online stream); "shuffled": a new permutation per reset."""
    episode_length: int | None = None
    """Questions per episode; default the whole stream (with ``episodes="task"``: the whole task). Shorter episodes
    start at a random position (of the stream, or of the task)."""
    episodes: str = "stream"
    """"stream": an episode plays the stream (``split``, ``tasks``, ``order``) across tasks; "task": each episode
    plays one task's questions of the stream, in cache order, from an empty history (its window and records): the
    task dealt from a deck the engine shuffles at each ``reset()`` (every task of the stream once per deck)."""
    decider_action: str = "multibinary"
    """Encoding of the decider's action: "multibinary" (N bits, the paper), "multidiscrete" ([2]*N, for
    RLlib), "subset" (Discrete(2**N - 1) team index, bit i of index+1 = model i, N <= 12)."""
    metrics: tuple[str, ...] = ("focal_diversity", "plurality_accuracy")
    """Window statistics of the team in the decider's observation (names of ``ensemble_env.metrics.METRICS``)."""
    size_penalty_mode: str = "on_error"
    """"on_error" (the paper): the penalty is paid on wrong answers only; "always": on every step."""
    use_costs: bool = False
    """Penalise by the team's share of the cache's ``costs`` instead of its share of the model count."""
    diversity_bonus: float = 0.0
    """Added to the reward times the focal diversity of the team that answered (window before the answer)."""
    min_team_size: int = 0
    """Smallest team the decider may commit; a smaller one raises ValueError. 0 allows the empty team,
    whose step counts as a wrong answer."""
    initial_team: tuple[int | str, ...] | None = None
    """E_0, the team that answers the first question (model indices or names); default all models."""
    reward_history: int = 8
    """T', how many of the most recent rewards the fusion agent observes."""
    decider_extras: tuple[str, ...] = ()
    """Optional extra decider features: "model_accuracy" (each model's window accuracy, N),
    "task" (one-hot task of the next question), "features" (the cache's features of the next question),
    "task_record" (the count feature of the task's answered questions and each model's correct rate over them,
    1 + N) and "team_record" (each team's mean-vote correct rate over them, 2**N - 1, N <= 10); the records need
    ``episodes="task"``."""
    fusion_extras: tuple[str, ...] = ()
    """Optional extra fusion features (beyond the paper): "task" (one-hot task of the question it answers),
    "features" (the cache's features of that question), "member_record" (the count feature and its team members'
    correct rates over the task's answered questions, 1 + N; needs ``episodes="task"``)."""
    decider: bool = True
    """False: no decider agent; the team is every model on every question (RLAE as published)."""
    fusion_action: str = "answer"
    """"answer": the fusion agent answers with ``Discrete(C)`` (RL-Focal); "weights": it sets a weight in [0, 1]
    per model, ``Box(0, 1, (N,))``, and the answer is the valid choice with the largest weighted sum of the team's
    probabilities (RLAE)."""
    fusion_agents: str = "one"
    """"one": a single fusion agent; "per_model" (needs ``fusion_action="weights"``): agents ``weight_0`` ...
    ``weight_{N-1}``, each setting its own model's weight (RLAE_MAPPO)."""
    feedback: str = "all"
    """What answering q_t reveals: "all" (its label and every model's output, today's game) or "team" (its label
    and the outputs of the team that answered it only): every statistic the agents see then counts only what was
    revealed, and carries count features (``ensemble_env.game.feedback``)."""

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "tasks", _names(self.tasks, "tasks"))
        put(self, "metrics", _names(self.metrics, "metrics"))
        put(self, "decider_extras", _names(self.decider_extras, "decider_extras"))
        put(self, "fusion_extras", _names(self.fusion_extras, "fusion_extras"))
        if self.initial_team is not None:
            if isinstance(self.initial_team, str | int):
                raise ValueError(
                    f"initial_team must be a sequence of model indices or names, got {self.initial_team!r}"
                )
            put(self, "initial_team", tuple(self.initial_team))
        put(self, "alpha", check_alpha(self.alpha))
        put(self, "diversity_bonus", real_option(self.diversity_bonus, "diversity_bonus", -MAX_REAL, MAX_REAL))
        for option, low, high in (
            ("window", 1, MAX_WINDOW),
            ("reward_history", 0, MAX_REWARD_HISTORY),
            ("min_team_size", 0, MAX_MODELS),
        ):
            put(self, option, integer_option(getattr(self, option), option, low, high))
        if self.episode_length is not None:
            put(self, "episode_length", integer_option(self.episode_length, "episode_length", 1, MAX_QUESTIONS))
        for option in ("use_costs", "decider"):
            if isinstance(getattr(self, option), np.bool_):
                put(self, option, bool(getattr(self, option)))
        for option in (
            "split",
            "order",
            "episodes",
            "decider_action",
            "size_penalty_mode",
            "fusion_action",
            "fusion_agents",
            "feedback",
        ):
            if isinstance(getattr(self, option), np.str_):
                put(self, option, str(getattr(self, option)))
        choice_options: tuple[tuple[str, str, tuple[str, ...]], ...] = (
            ("split", self.split, SPLIT_CHOICES),
            ("order", self.order, ORDERS),
            ("episodes", self.episodes, EPISODES),
            ("decider_action", self.decider_action, DECIDER_ACTIONS),
            ("size_penalty_mode", self.size_penalty_mode, SIZE_PENALTY_MODES),
            ("fusion_action", self.fusion_action, FUSION_ACTIONS),
            ("fusion_agents", self.fusion_agents, FUSION_AGENTS),
            ("feedback", self.feedback, FEEDBACK),
        )
        for option, choice, allowed in choice_options:
            if choice not in allowed:
                raise ValueError(f"{option}={choice!r} is not one of {', '.join(map(repr, allowed))}")
        for name in self.metrics or ():
            if name not in METRICS:
                raise ValueError(f"metrics: unknown statistic {name!r}; choose from {', '.join(METRICS)}")
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError(f"metrics lists a statistic twice: {self.metrics!r}")
        extra_options: tuple[tuple[str, tuple[str, ...] | None, tuple[str, ...]], ...] = (
            ("decider_extras", self.decider_extras, DECIDER_EXTRAS),
            ("fusion_extras", self.fusion_extras, FUSION_EXTRAS),
        )
        for option, extras, allowed in extra_options:
            for name in extras or ():
                if name not in allowed:
                    raise ValueError(f"{option}: unknown extra {name!r}; choose from {', '.join(allowed)}")
        for option in ("use_costs", "decider"):
            if not isinstance(getattr(self, option), bool):
                raise ValueError(f"{option} must be True or False, got {getattr(self, option)!r}")
        if self.fusion_agents == "per_model" and self.fusion_action != "weights":
            raise ValueError(
                f"fusion_agents='per_model' needs fusion_action='weights' (each agent sets its model's weight), "
                f"got fusion_action={self.fusion_action!r}"
            )
        for option in ("decider_extras", "fusion_extras"):
            records = [name for name in getattr(self, option) or () if name in RECORD_EXTRAS]
            if records and self.episodes != "task":
                raise ValueError(
                    f"{option} {', '.join(map(repr, records))}: the task's record needs episodes='task' (one task per "
                    f"episode), got episodes={self.episodes!r}"
                )
        if self.episodes == "task" and self.order != "sequential":
            raise ValueError(
                f"episodes='task' plays each task in cache order: order={self.order!r} must be 'sequential' "
                "(with episode_length, an episode is a window of the task at a random position)"
            )
        if not self.decider:
            for option, value, default in (
                ("initial_team", self.initial_team, None),
                ("decider_extras", self.decider_extras, ()),
                ("min_team_size", self.min_team_size, 0),
            ):
                if value != default:
                    raise ValueError(
                        f"{option}={value!r} needs the decider: with decider=False the team is every model"
                    )

    def signature_text(self) -> str:
        """The options as ``repr`` gives them, but the later options (:data:`LATER_DEFAULTS`: RLAE's, ``episodes``,
        ``feedback``)
        at their defaults left out (so that a snapshot of today's game keeps the signature it had before those
        options existed)."""
        parts = [
            f"{item.name}={getattr(self, item.name)!r}"
            for item in fields(self)
            if item.name not in LATER_DEFAULTS or getattr(self, item.name) != LATER_DEFAULTS[item.name]
        ]
        return f"{type(self).__qualname__}({', '.join(parts)})"

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> EnvConfig:
        """Build from keyword options, naming any unknown option and listing the known ones."""
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)}; the options are {', '.join(sorted(known))}")
        return cls(**options)
