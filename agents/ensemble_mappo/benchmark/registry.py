"""The algorithms the benchmark knows: the learners (:mod:`ensemble_mappo.benchmark.learners`), the baselines of
:data:`ensemble_env.baselines.registry.BASELINES` (under their names or aliases: ``stacking`` is
``stacking(per_task)``) and the algorithms registered with :func:`register_algorithm` (:data:`ALGORITHMS`).

:func:`resolve` is the one way a name becomes a function and the config recorded in its run key;
:func:`canonical` says which names are the same algorithm.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.baselines import comparison
from ensemble_env.baselines import registry as baselines
from ensemble_env.cache.digest import cache_digest
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import RewardSettings
from ensemble_mappo.benchmark.answers import Algorithm, Answers
from ensemble_mappo.benchmark.learners import LEARNERS, learner

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHMS",
    "GENERATED_CHOOSE_ON",
    "PARTIAL_DEFAULT_ALGORITHMS",
    "UNSEEN_DEFAULT_ALGORITHMS",
    "Algorithm",
    "Answers",
    "baseline",
    "canonical",
    "default_algorithms",
    "draws",
    "forget_outcomes",
    "reference_reason",
    "register_algorithm",
    "resolve",
    "streams",
    "unit_outcomes",
    "uses_test_labels",
]

#: what ``ensemble-env benchmark`` runs without --algorithms: the learners, the competitors, and the headroom (the
#: best fixed team per task chosen on train + validation, a competitor; and in hindsight on test, a reference)
DEFAULT_ALGORITHMS = (
    "mappo",
    "ippo",
    "static_team",
    "static_team(train+val)",
    "static_team(pooled)",
    "static_team(certified)",
    "router",
    "stacking",
    "best_single",
    "best_single(per_task)",
    "oracle_team(test)",
)
#: what ``ensemble-env benchmark --protocol unseen-tasks`` runs without --algorithms: the learners, every baseline of
#: the protocol (``ensemble_env.baselines.online``) and the hindsight team (a reference that reads the scored labels)
UNSEEN_DEFAULT_ALGORITHMS = (
    "mappo",
    "ippo",
    "global_team",
    "global_single",
    "mean_probability_vote",
    "ftl_team",
    "ftl_team(no_delay)",
    "ftl_single",
    "ftl_team(window)",
    "ucb_team",
    "hindsight_team",
)


#: what ``ensemble-env benchmark --protocol unseen-tasks --feedback team`` runs without --algorithms: the learners
#: (from a start that encodes no hand rule), the rules a router seeing only what it queried can play (the global
#: team, the vote, UCB on the played team's reward, ``ensemble_env.baselines.partial``'s rules) and two references
#: this game does not allow: follow-the-leader with every model's output revealed, and the hindsight team (it reads
#: the scored labels)
PARTIAL_DEFAULT_ALGORITHMS = ("mappo", "ippo", *baselines.PARTIAL_DEFAULT_BASELINES)


def default_algorithms(protocol: str = "standard", feedback: str = "all") -> tuple[str, ...]:
    """The algorithms ``ensemble-env benchmark --protocol PROTOCOL --feedback FEEDBACK`` runs without
    ``--algorithms`` (``generated`` runs those of ``unseen-tasks``)."""
    if protocol == "standard":
        return DEFAULT_ALGORITHMS
    return PARTIAL_DEFAULT_ALGORITHMS if feedback == "team" else UNSEEN_DEFAULT_ALGORITHMS


#: where the baselines choose their constants under ``--protocol generated``: on the generated validation tasks,
#: the generated train tasks their prior (:attr:`ensemble_env.baselines.registry.Setting.choose_on`)
GENERATED_CHOOSE_ON = "validation"

#: registered algorithms: name -> (function, config recorded in the run key)
ALGORITHMS: dict[str, tuple[Algorithm, dict[str, Any]]] = {}


def register_algorithm(name: str, *, config: dict[str, Any] | None = None) -> Callable[[Algorithm], Algorithm]:
    """Decorator: register ``function(cache, seed, alpha, out_dir) -> Answers`` as algorithm ``name``.

    The function must fit on ``cache.select("train")``, choose anything it tunes on
    ``cache.select("validation")``, and answer every question of ``cache.select("test")``; ``out_dir`` is
    its own folder (for checkpoints), ``seed`` seeds every random choice, ``alpha`` is the size penalty of
    the reward it is scored on. ``config`` (JSON-ready) is part of the run key: change it and runs are redone.
    """
    if not name or "/" in name or name in _builtin_names():
        raise ValueError(f"algorithm name {name!r} is empty, has a '/', or is a built-in name")

    def decorate(function: Algorithm) -> Algorithm:
        ALGORITHMS[name] = (function, dict(config or {}))
        return function

    return decorate


def _builtin_names() -> tuple[str, ...]:
    return (
        *LEARNERS,
        *baselines.BASELINES,
        *(alias for entry in baselines.BASELINES.values() for alias in entry.aliases),
    )


def baseline(name: str, choose_on: str = "training") -> Algorithm:
    """The baseline ``name`` of :data:`~ensemble_env.baselines.registry.BASELINES` as an algorithm: fitted on
    train (its own choices on validation), answering the test split; ``choose_on`` is
    :attr:`~ensemble_env.baselines.registry.Setting.choose_on` (``"validation"``: the partial-feedback rules and
    ``bayes_team`` choose their constants on the validation tasks, the train tasks their prior)."""

    streamed = streams(name)

    def run(cache: LogitCache, seed: int, alpha: float, out_dir: Path) -> Answers:
        reward = RewardSettings(alpha=alpha)
        (result,) = comparison.compare(
            cache, split="test", train_split="train", reward=reward, seed=seed, names=[name], choose_on=choose_on,
            outcomes=unit_outcomes(cache, reward) if streamed else None,
        )  # fmt: skip
        teams = result.teams
        if teams is None:  # a result without members (e.g. a vote): every model was consulted
            teams = np.ones((result.n_questions, cache.n_models), dtype=bool)
        info = {key: value for key, value in result.info.items() if isinstance(value, str | int | float | list)}
        return Answers(np.asarray(result.questions), np.asarray(result.predictions), np.asarray(teams), info)

    return run


#: the teams' outcomes on the caches the baselines of the unseen-task protocol ran on in this process, by the
#: cache's content digest and the reward (:func:`unit_outcomes`; emptied by :func:`forget_outcomes`)
_OUTCOMES: dict[tuple[str, RewardSettings], Any] = {}


def unit_outcomes(cache: LogitCache, reward: RewardSettings) -> Any:
    """Every team's outcome on every question of ``cache`` under ``reward``
    (:func:`ensemble_env.baselines.outcomes.team_outcomes`), computed once per cache and reward in this process: the
    baselines of the unseen-task protocol that run on one fold (and its validation lines) share it, where each would
    compute its own (seconds each on a fold of generated tasks). The same numbers as each baseline's own."""
    from ensemble_env.baselines.outcomes import team_outcomes

    key = (cache_digest(cache), reward)
    if key not in _OUTCOMES:
        _OUTCOMES[key] = team_outcomes(cache, reward=reward)
    return _OUTCOMES[key]


def forget_outcomes() -> None:
    """Empty :func:`unit_outcomes`' store (the benchmark does before its runs, filling it for its folds, and after
    them)."""
    _OUTCOMES.clear()


def _unknown(name: str) -> ValueError:
    known = ", ".join([*_builtin_names(), *ALGORITHMS])
    return ValueError(f"--algorithms: unknown algorithm {name!r}; known: {known}")


def canonical(name: str) -> str:
    """The name the algorithm ``name`` is stored under: a baseline's own name for an alias (``stacking`` is
    ``stacking(per_task)``), any other name as it is; ValueError naming the known ones for an unknown name."""
    if name in LEARNERS or name in ALGORITHMS:
        return name
    try:
        return baselines.lookup(name).name
    except ValueError:
        raise _unknown(name) from None


def resolve(
    name: str, budget: str, protocol: str = "standard", feedback: str = "all"
) -> tuple[Algorithm, dict[str, Any]]:
    """The function and key config of algorithm ``name`` under ``protocol``: a learner, a baseline, or a registered
    one (a baseline or a registered algorithm runs the same under every protocol: the protocol is its cache's
    splits; under ``generated`` the baselines choose on the validation tasks, :data:`GENERATED_CHOOSE_ON`, which
    their key says)."""
    found = learner(name, budget, protocol, feedback)
    if found is not None:
        return found
    with contextlib.suppress(ValueError):
        if protocol == "generated":
            return baseline(baselines.lookup(name).name, GENERATED_CHOOSE_ON), {"choose_on": GENERATED_CHOOSE_ON}
        return baseline(baselines.lookup(name).name), {}
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    raise _unknown(name)


def reference_reason(name: str, feedback: str = "all") -> str | None:
    """Why algorithm ``name`` is a reference rather than a competitor under the protocol's ``feedback``
    (:func:`ensemble_env.baselines.registry.reference`: ``"test labels"``, ``"full feedback"``, ...); None for a
    competitor (learners, registered algorithms and names no registry knows)."""
    if name in LEARNERS or name in ALGORITHMS:
        return None
    try:
        return baselines.reference(name, feedback)
    except ValueError:
        return None


def draws(name: str) -> bool:
    """Whether algorithm ``name``'s answers may depend on its seed: a learner or a registered algorithm always (the
    benchmark cannot tell), a baseline when :attr:`~ensemble_env.baselines.registry.Baseline.seeded` (it draws at
    random)."""
    return _baseline_flag(name, "seeded", otherwise=True)


def streams(name: str) -> bool:
    """Whether algorithm ``name`` is a baseline of the unseen-task protocol (it streams each held-out task, and reads
    a fold's team outcomes: :func:`unit_outcomes`)."""
    return _baseline_flag(name, "unseen_tasks", otherwise=False)


def uses_test_labels(name: str) -> bool:
    """Whether algorithm ``name`` chooses with the labels of the test questions it is scored on (a baseline marked
    ``uses_test_labels`` in :data:`ensemble_env.baselines.registry.BASELINES`); learners and registered algorithms
    never do."""
    return _baseline_flag(name, "uses_test_labels", otherwise=False)


def _baseline_flag(name: str, flag: str, *, otherwise: bool) -> bool:
    """The ``flag`` of the baseline ``name``; ``otherwise`` for a learner, a registered algorithm or an unknown name."""
    if name in LEARNERS or name in ALGORITHMS:
        return otherwise
    try:
        return bool(getattr(baselines.lookup(name), flag))
    except ValueError:
        return otherwise
