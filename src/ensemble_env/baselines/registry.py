"""The baseline registry: one entry per baseline, read by everything that lists or runs baselines.

``ensemble-env baselines`` (:func:`ensemble_env.baselines.comparison.compare`), the table of ``ensemble-env
evaluate``, the cost-accuracy frontier and ``ensemble-env benchmark`` all read :data:`BASELINES`; adding a
baseline is one :class:`Baseline` in :data:`BASELINES` (or a call of :func:`register` from your own code),
in the manner of BenchMARL's ``algorithms/__init__.py``.

Each entry says how the baseline runs (a function of one :class:`Setting`: the cache, its train and eval
questions, the reward, ...), whether it depends on the size penalty alpha (it chooses its teams by the
reward, so the frontier sweeps it), whether it enumerates every team (so it runs only on pools of at most
:data:`~ensemble_env.baselines.routing.MAX_TEAM_MODELS` models), whether ``evaluate`` shows it, and the
other names it answers to, and whether it reads the labels of the questions it is scored on (an oracle: a
reference that shows the headroom, never a competitor). The baselines of the unseen-task protocol
(:mod:`ensemble_env.baselines.online`: fitted on training tasks, streamed over held-out tasks) are marked
``unseen_tasks`` and run only by name; each says what it reads of a held-out task's answered questions
(``feedback``, :data:`FEEDBACK`), so that a protocol revealing less (the partial-feedback rules of
:mod:`ensemble_env.baselines.partial` see only the played team's outputs) shows a rule that reads more as a
reference (:func:`reference`).

>>> swept = [entry.name for entry in BASELINES.values() if entry.alpha_dependent and not entry.unseen_tasks]
>>> swept  # doctest: +NORMALIZE_WHITESPACE
['static_team', 'static_team(train+val)', 'static_team(pooled)', 'static_team(certified)', 'router', 'router(tasks)',
 'oracle_team(test)']
>>> [entry.name for entry in BASELINES.values() if entry.uses_test_labels and not entry.unseen_tasks]
['oracle_team(test)', 'oracle']
>>> lookup("stacking").name
'stacking(per_task)'
>>> [entry.name for entry in BASELINES.values() if entry.unseen_tasks]  # doctest: +NORMALIZE_WHITESPACE
['mean_probability_vote', 'global_single', 'global_team', 'ftl_single', 'ftl_team', 'ftl_team(no_delay)',
 'ftl_team(window)', 'ucb_team',
 'hindsight_team', 'greedy_team', 'etc_team', 'ucb_team(partial)', 'thompson_team', 'bayes_team']
>>> [(name, reference(name, "team")) for name in PARTIAL_DEFAULT_BASELINES]  # doctest: +NORMALIZE_WHITESPACE
[('global_team', None), ('mean_probability_vote', None), ('ucb_team', None), ('greedy_team', None),
 ('etc_team', None), ('ucb_team(partial)', None), ('thompson_team', None), ('bayes_team', None),
 ('ftl_team', 'full feedback'), ('hindsight_team', 'test labels')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ensemble_env.baselines import arguments, routing, simple, weights
from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.config import FEEDBACK_LEVELS
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings

__all__ = [
    "BASELINES",
    "FEEDBACK",
    "PARTIAL_DEFAULT_BASELINES",
    "Baseline",
    "Setting",
    "baseline_of",
    "lookup",
    "reference",
    "register",
]

#: what a baseline of the unseen-task protocol reads of a held-out task's answered questions, the one feedback
#: vocabulary (:data:`ensemble_env.game.config.FEEDBACK_LEVELS`), most first: every model's output (all: the
#: environment's statistics window), the label and the played team's members' outputs, so every sub-team's reward
#: (team: :mod:`ensemble_env.baselines.partial`), the played team's reward (bandit), nothing (none: a fixed team). A
#: rule plays under a protocol's feedback when it reads no more (:func:`reference`).
FEEDBACK = FEEDBACK_LEVELS
#: what a table of the unseen-task protocol under team feedback shows: the competitors (the fixed team, the mean
#: vote, the bandit, the partial-feedback rules and the Bayesian one), then the references: follow-the-leader
#: (full feedback) and the hindsight team (test labels)
PARTIAL_DEFAULT_BASELINES = (
    "global_team",
    "mean_probability_vote",
    "ucb_team",
    "greedy_team",
    "etc_team",
    "ucb_team(partial)",
    "thompson_team",
    "bayes_team",
    "ftl_team",
    "hindsight_team",
)


@dataclass(frozen=True)
class Setting:
    """What a baseline is run on: fitted on ``train``, answering ``test`` (question indices of ``cache``)."""

    cache: LogitCache
    train: np.ndarray
    test: np.ndarray
    reward: RewardSettings = DEFAULT_REWARD
    """The reward the baselines that choose teams maximise (the environment's, at its alpha)."""
    validation: np.ndarray | None = None
    """Held-out questions a baseline may tune on (neither train nor test), or None."""
    k: int = 3
    """Team size of the random and greedy-focal teams."""
    seed: int | None = 0
    """Seed of the random team."""
    fitted: dict[str, routing.RouterFit] = field(default_factory=dict)
    """Fits made beforehand (:attr:`Baseline.fit`), by baseline name, so a sweep fits once."""
    outcomes: Any = None
    """Every team's outcome on the cache's questions computed beforehand
    (:class:`~ensemble_env.baselines.outcomes.TeamOutcomes`, covering ``train``, ``validation`` and ``test``), shared
    by the baselines of the unseen-task protocol so that several of them on one cache compute it once; None: each
    computes its own."""
    choose_on: str = "training"
    """Where the partial-feedback rules and ``bayes_team`` choose their constants
    (:data:`ensemble_env.baselines.partial.CHOOSE_ON`): on the training tasks' streams (``train`` and ``validation``
    pooled), or on the ``validation`` tasks' streams with the ``train`` tasks as the prior (the generated-task
    protocol); the other baselines ignore it."""

    def __post_init__(self) -> None:
        arguments.seed(self.seed, "Setting.seed", optional=True)  # the project's rule: never True as seed 1


@dataclass(frozen=True)
class Baseline:
    """One baseline: its name, how it runs, and what the tables and sweeps need to know of it."""

    name: str
    run: Callable[[Setting], BaselineResult]
    """Fit on ``setting.train`` and answer ``setting.test``."""
    alpha_dependent: bool = False
    """It chooses its teams by the reward at alpha (the frontier sweeps it; the others stay put)."""
    enumerates_teams: bool = False
    """It scores every team: run only on pools of at most :data:`~ensemble_env.baselines.routing.MAX_TEAM_MODELS`."""
    in_evaluate: bool = True
    """Listed in the table of ``ensemble-env evaluate`` (next to a learned policy)."""
    needs_features: bool = False
    """Run by default only on caches with text features."""
    aliases: tuple[str, ...] = ()
    """Other names it answers to (``ensemble-env benchmark --algorithms stacking``)."""
    fit: Callable[[LogitCache, np.ndarray, np.ndarray | None], routing.RouterFit] | None = None
    """A fit independent of the reward, made once before a sweep (``fit(cache, train, validation)``)."""
    uses_test_labels: bool = False
    """It chooses with the labels of the questions it is scored on (``setting.test``): an oracle, a reference
    for the headroom, never a competitor (``ensemble-env benchmark`` marks it in its tables)."""
    by_default: bool = True
    """Run when no names are given (``ensemble-env baselines``, :func:`~ensemble_env.baselines.comparison.compare`);
    otherwise only by name (``--only``, ``ensemble-env benchmark --algorithms``)."""
    unseen_tasks: bool = False
    """A baseline of the unseen-task protocol (:mod:`ensemble_env.baselines.online`): fitted on training tasks,
    scored on held-out tasks streamed from an empty history (``setting.test`` holds only tasks that are neither in
    ``setting.train`` nor in ``setting.validation``)."""
    feedback: str = "all"
    """What it reads of a held-out task's answered questions (:data:`FEEDBACK`): under a protocol revealing less it
    is a reference, not a competitor (:func:`reference`). Baselines that stream nothing keep the default."""
    seeded: bool = False
    """Its answers depend on ``setting.seed`` (it draws at random); the others answer the same whatever the seed, so
    the benchmark may run them once for every seed (``ensemble-env benchmark --protocol generated``)."""

    def __post_init__(self) -> None:
        if self.feedback not in FEEDBACK:
            raise ValueError(f"baseline {self.name!r}: feedback {self.feedback!r} is not one of {', '.join(FEEDBACK)}")


def _router(name: str, inputs: str) -> Baseline:
    def run(s: Setting) -> BaselineResult:
        return routing.router(
            s.cache, s.train, s.test, reward=s.reward, inputs=inputs, validation=s.validation, fitted=s.fitted.get(name)
        )

    def fit(cache: LogitCache, train: np.ndarray, validation: np.ndarray | None) -> routing.RouterFit:
        return routing.fit_router(cache, train, inputs=inputs, validation=validation)

    return Baseline(
        name, run, alpha_dependent=True, enumerates_teams=True, in_evaluate=False, needs_features=inputs == "tasks",
        fit=fit,
    )  # fmt: skip


def _static_team(name: str, fitted_on: str, estimator: str = "mean") -> Baseline:
    """static_team fitted on the train and validation questions (``fitted_on="train+val"``; the train ones alone
    when the setting has no validation questions) or on the scored questions themselves (``"test"``: the best
    fixed team per task in hindsight, an oracle); ``estimator="pooled"``: each team's reward per task shrunk
    toward its reward over all tasks, the strength cross-validated on the fitting questions; ``"certified"``: each
    task's best single model unless the best team's gain over it is certified at 95% (one-sided bootstrap over the
    fitting questions) (:mod:`ensemble_env.baselines.pooling`)."""

    def run(s: Setting) -> BaselineResult:
        if fitted_on == "test":
            questions = s.test
        else:
            questions = s.train if s.validation is None else np.concatenate([s.train, s.validation])
        result = routing.static_team(s.cache, questions, s.test, reward=s.reward, estimator=estimator)
        return dataclasses.replace(result, name=name, info={**result.info, "fitted_on": fitted_on})

    return Baseline(
        name,
        run,
        alpha_dependent=True,
        enumerates_teams=True,
        in_evaluate=False,
        uses_test_labels=fitted_on == "test",
        by_default=False,
    )


#: every baseline, in the order the tables report them
BASELINES: dict[str, Baseline] = {}


def register(baseline: Baseline) -> Baseline:
    """Add ``baseline`` to :data:`BASELINES` (last in the tables); ValueError if its name or an alias is taken."""
    taken = {name for entry in BASELINES.values() for name in (entry.name, *entry.aliases)}
    clash = [name for name in (baseline.name, *baseline.aliases) if name in taken]
    if clash:
        raise ValueError(f"baseline name {clash[0]!r} is already registered")
    BASELINES[baseline.name] = baseline
    return baseline


def reference(name: str, feedback: str = "all") -> str | None:
    """Why baseline ``name`` is a reference, not a competitor, in a protocol whose held-out tasks reveal
    ``feedback`` (:data:`FEEDBACK`): ``"test labels"`` when it reads the labels it is scored on, ``"full
    feedback"`` (``"team feedback"``, ``"bandit feedback"``) when it reads more of the answered questions than the
    protocol reveals; None for a competitor. ValueError for an unknown name or feedback."""
    if feedback not in FEEDBACK:
        raise ValueError(f"feedback {feedback!r} is not one of {', '.join(FEEDBACK)}")
    entry = lookup(name)
    if entry.uses_test_labels:
        return "test labels"
    if FEEDBACK.index(entry.feedback) < FEEDBACK.index(feedback):  # it reads more than the protocol reveals
        return f"{'full' if entry.feedback == 'all' else entry.feedback} feedback"
    return None


def lookup(name: str) -> Baseline:
    """The baseline called ``name`` (or one of its aliases); ValueError listing the names when there is none."""
    if name in BASELINES:
        return BASELINES[name]
    for entry in BASELINES.values():
        if name in entry.aliases:
            return entry
    raise ValueError(f"unknown baseline {name!r}; the baselines are {', '.join(BASELINES)}")


def baseline_of(result: str) -> Baseline | None:
    """The baseline a result is named after: ``result`` itself or one of its aliases (``stacking``:
    ``stacking(per_task)``), else the name before its arguments (``random_team(k=3)``: ``random_team``); None for a
    result of no baseline (a learned policy, ``mappo``)."""
    for name in (result, result.split("(")[0]):
        try:
            return lookup(name)
        except ValueError:
            continue
    return None


for _entry in (
    Baseline("best_single", lambda s: simple.best_single(s.cache, s.train, s.test)),
    Baseline(
        "best_single(per_task)",
        lambda s: simple.best_single(s.cache, s.train, s.test, per_task=True),
        in_evaluate=False,
    ),
    Baseline(
        "static_team",
        lambda s: routing.static_team(s.cache, s.train, s.test, reward=s.reward),
        alpha_dependent=True,
        enumerates_teams=True,
    ),
    _static_team("static_team(train+val)", "train+val"),
    _static_team("static_team(pooled)", "train+val", "pooled"),
    _static_team("static_team(certified)", "train+val", "certified"),
    Baseline(
        "static_team_acc",
        lambda s: routing.static_team(s.cache, s.train, s.test, reward=s.reward, criterion="accuracy"),
        enumerates_teams=True,
        in_evaluate=False,
    ),
    _router("router", "auto"),
    _router("router(tasks)", "tasks"),
    Baseline("stacking(per_task)", lambda s: simple.stacking(s.cache, s.train, s.test), aliases=("stacking",)),
    Baseline("plurality_vote", lambda s: simple.plurality_vote(s.cache, s.train, s.test)),
    Baseline(
        "mean_probability_vote",
        lambda s: simple.mean_probability_vote(s.cache, s.train, s.test),
        aliases=("uniform_weights", "mean_vote"),
    ),
    Baseline(
        "per_task_weights",
        lambda s: weights.per_task_weights(s.cache, s.train, s.test, validation=s.validation),
        in_evaluate=False,  # evaluate adds the weight baselines next to RLAE runs (ensemble_mappo.cli)
        aliases=("task_weights",),
        by_default=False,
    ),
    Baseline(
        "per_question_weights",
        lambda s: weights.per_question_weights(s.cache, s.train, s.test, validation=s.validation),
        in_evaluate=False,
        aliases=("question_weights",),
        by_default=False,
    ),
    Baseline("random_team", lambda s: simple.random_team(s.cache, s.train, s.test, k=s.k, seed=s.seed), seeded=True),
    Baseline("greedy_focal_team", lambda s: simple.greedy_focal_team(s.cache, s.train, s.test, k=s.k)),
    _static_team("oracle_team(test)", "test"),
    Baseline("oracle", lambda s: simple.oracle(s.cache, s.train, s.test), uses_test_labels=True),
):
    register(_entry)


def _online(name: str, feedback: str, uses_test_labels: bool = False, seeded: bool = False) -> Baseline:
    """The baseline ``name`` of the unseen-task protocol (:data:`ensemble_env.baselines.online.UNSEEN_BASELINES`,
    or a partial-feedback rule, :func:`ensemble_env.baselines.partial.rules`, seeded by ``setting.seed``, or
    :func:`ensemble_env.baselines.bayes.bayes_team`; these choose their constants where ``setting.choose_on`` says),
    reading ``feedback``, run by name only. The modules are imported when the baseline runs, so that ``python -m
    ensemble_env.baselines.online`` does not find it imported already."""

    def run(s: Setting) -> BaselineResult:
        from ensemble_env.baselines import bayes, online, partial

        choosing = {**partial.rules(s.seed), "bayes_team": bayes.bayes_team}
        where: dict[str, Any] = {"choose_on": s.choose_on} if name in choosing else {}
        function = {**online.UNSEEN_BASELINES, **choosing}[name]
        return function(s.cache, s.train, s.test, reward=s.reward, validation=s.validation, outcomes=s.outcomes,
                        **where)  # fmt: skip

    return Baseline(
        name, run, alpha_dependent=True, enumerates_teams=True, in_evaluate=False, uses_test_labels=uses_test_labels,
        by_default=False, unseen_tasks=True, feedback=feedback, seeded=seeded,
    )  # fmt: skip


# the unseen-task protocol (issue 32, ensemble_env.baselines.online): fitted on training tasks, streamed over
# held-out ones; every one chooses among teams (or single models) by the reward at alpha. Then the rules under
# partial feedback (issue 40, ensemble_env.baselines.partial; issue 48, ensemble_env.baselines.bayes): each reads
# only the played team's outputs.
for _entry in (
    _online("global_single", "none"),
    _online("global_team", "none"),
    _online("ftl_single", "all"),
    _online("ftl_team", "all"),
    _online("ftl_team(no_delay)", "all"),
    _online("ftl_team(window)", "all"),
    _online("ucb_team", "bandit"),
    _online("hindsight_team", "all", uses_test_labels=True),
    _online("greedy_team", "team"),
    _online("etc_team", "team"),
    _online("ucb_team(partial)", "team"),
    _online("thompson_team", "team", seeded=True),
    _online("bayes_team", "team"),
):
    register(_entry)
# the mean vote fits nothing and reads nothing of the stream, so it is a baseline of the protocol too
BASELINES["mean_probability_vote"] = dataclasses.replace(
    BASELINES["mean_probability_vote"], unseen_tasks=True, feedback="none"
)
