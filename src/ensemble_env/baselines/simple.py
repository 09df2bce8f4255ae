"""Baselines shown next to every learned policy: single models, votes, teams, stacking, oracle.

Each baseline is fitted on the *train* questions of a :class:`~ensemble_env.cache.LogitCache`
and evaluated on the *eval* questions (both given as index arrays into the cache). Every
public function has the signature ``(cache, train, test, **options) -> BaselineResult`` and
returns per-question predictions and teams, so results can be broken down by task and scored on
the environment's own axes (:meth:`BaselineResult.scores`: accuracy, reward under
:class:`RewardSettings`, team size, cost). The routing baselines (a fixed team per task, a
per-question router) are in :mod:`ensemble_env.baselines.routing`; :mod:`ensemble_env.baselines.comparison` runs them
all.

=============================  ====  =========================================================
baseline                       team  how it answers a question
=============================  ====  =========================================================
:func:`best_single`            1     the model with the best train accuracy (per task optional)
:func:`plurality_vote`         N     every model votes its argmax; ties to the lowest choice
:func:`mean_probability_vote`  N     argmax of the mean of the models' probabilities
:func:`random_team`            k     a uniformly random team per question, mean-probability vote
:func:`greedy_focal_team`      k     a static team grown on train by focal diversity
:func:`stacking`               N     a conditional-logit model over the models' probabilities
:func:`oracle`                 N     right whenever any model is right (an upper bound)
=============================  ====  =========================================================

Only numpy is used (no torch, scikit-learn or scipy); every computation is vectorised over
questions and deterministic (the random team draws from a seeded ``np.random.default_rng``).
:func:`run_all` runs every baseline on a cache's splits and :func:`format_table` renders the
results as aligned plain-text tables. The parts they share have modules of their own, whose names this module
publishes too: the record (:mod:`~ensemble_env.baselines.result`), the votes
(:mod:`~ensemble_env.baselines.fusion`), stacking's model (:mod:`~ensemble_env.baselines.conditional_logit`) and the
tables (:mod:`~ensemble_env.baselines.tables`).

>>> import numpy as np
>>> from ensemble_env.cache import LogitCache
>>> cache = LogitCache(
...     scores=np.array([
...         [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]],
...         [[0.2, 0.8], [0.6, 0.4], [0.1, 0.9]],
...         [[0.7, 0.3], [0.4, 0.6], [0.2, 0.8]],
...         [[0.6, 0.4], [0.3, 0.7], [0.4, 0.6]],
...     ]),
...     labels=np.array([0, 1, 1, 0]), models=("a", "b", "c"), score_kind="prob",
...     split=np.array([0, 0, 1, 1]))
>>> train, test = cache.select("train"), cache.select("test")
>>> result = plurality_vote(cache, train, test)
>>> result.predictions.tolist(), result.accuracy, result.task_accuracy(cache)
([1, 1], 0.5, {'default': 0.5})
>>> oracle(cache, train, test).accuracy
1.0
>>> [r.name for r in run_all(cache, k=2)]  # doctest: +NORMALIZE_WHITESPACE
['best_single', 'plurality_vote', 'mean_probability_vote', 'random_team(k=2)',
 'greedy_focal_team(k=2)', 'stacking(per_task)', 'oracle']
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# The record, the votes, stacking and the tables live in their own modules; their names are published here too
# (``ensemble_env.baselines.simple.X`` and ``ensemble_env.baselines.X`` keep working).
from ensemble_env.baselines.conditional_logit import STACKING_EPS, stacking
from ensemble_env.baselines.fusion import fixed_teams, full_teams, mean_vote, plurality_answers, valid_choices
from ensemble_env.baselines.result import BaselineResult, question_indices, task_ids, task_names, train_test_indices
from ensemble_env.baselines.tables import cost_format, cost_note, describe_costs, fixed_decimals, format_table
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.metrics import focal_diversity
from ensemble_env.seeds import check_seed

__all__ = [
    "FUSIONS",
    "STACKING_EPS",
    "BaselineResult",
    "best_single",
    "cost_format",
    "cost_note",
    "describe_costs",
    "fixed_decimals",
    "format_table",
    "greedy_focal_team",
    "mean_probability_vote",
    "mean_vote",
    "oracle",
    "plurality_vote",
    "question_indices",
    "random_team",
    "run_all",
    "stacking",
    "task_ids",
    "task_names",
    "train_test_indices",
    "valid_choices",
]

#: fusion rules accepted by :func:`greedy_focal_team`
FUSIONS = ("plurality", "mean")
_TIE_TOLERANCE = 1e-12  # focal diversities closer than this count as equal


def _team_size_k(cache: LogitCache, k: int) -> int:
    try:
        size = operator.index(k)
    except TypeError:
        raise ValueError(f"k must be an integer team size in 1..{cache.n_models}, got {k!r}") from None
    if not 1 <= size <= cache.n_models:
        raise ValueError(f"k={size} is outside 1..{cache.n_models} (the cache has {cache.n_models} models)")
    return size


# -- baselines ---------------------------------------------------------------------------------


def best_single(cache: LogitCache, train: ArrayLike, test: ArrayLike, *, per_task: bool = False) -> BaselineResult:
    """Answer with the single model that has the best train accuracy.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices (or boolean masks) to fit on and to evaluate on.
    per_task
        ``False`` (default, as the RL-Focal paper compares): one model for the whole benchmark.
        ``True``: for each task, the model with the best accuracy on that task's train
        questions; a task without train questions falls back to the overall best model.

    Returns
    -------
    BaselineResult
        Named ``"best_single"`` (or ``"best_single(per_task)"``), team size 1; ``info["model"]``
        is the chosen model name, or ``info["models"]`` maps each eval task to its model.

    Notes
    -----
    Ties in train accuracy go to the lower model index.
    """
    train, test = train_test_indices(cache, train, test)
    overall = int(np.argmax(cache.correct[train].mean(axis=0)))
    chosen = np.full(cache.n_tasks, overall, dtype=np.int64)
    eval_tasks = np.unique(task_ids(cache)[test])
    if per_task:
        for task in eval_tasks:
            rows = train[task_ids(cache)[train] == task]
            if rows.size:
                chosen[task] = int(np.argmax(cache.correct[rows].mean(axis=0)))
        info: dict[str, Any] = {"models": {task_names(cache)[t]: cache.models[chosen[t]] for t in eval_tasks}}
    else:
        info = {"model": cache.models[overall]}
    model = chosen[task_ids(cache)[test]]
    predictions = cache.preds[test, model]
    name = "best_single(per_task)" if per_task else "best_single"
    teams = np.eye(cache.n_models, dtype=bool)[model]
    return BaselineResult(name, predictions, np.ones(test.size), test, cache.labels[test], info, teams)


def plurality_vote(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> BaselineResult:
    """All N models vote their argmax; the most voted choice wins, ties to the lowest index.

    ``train`` is validated but unused (nothing is fitted). Team size N.
    """
    _, test = train_test_indices(cache, train, test)
    predictions = plurality_answers(cache.preds[test], cache.max_choices)
    return BaselineResult.from_cache(
        "plurality_vote", cache, test, predictions, cache.n_models, teams=full_teams(test.size, cache.n_models)
    )


def mean_probability_vote(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> BaselineResult:
    """Argmax over the valid choices of the mean of the N models' probabilities (ties lowest).

    ``train`` is validated but unused (nothing is fitted). Team size N.
    """
    _, test = train_test_indices(cache, train, test)
    teams = full_teams(test.size, cache.n_models)
    predictions = mean_vote(cache.probs, teams, valid_choices(cache, test), rows=test)
    return BaselineResult.from_cache("mean_probability_vote", cache, test, predictions, cache.n_models, teams=teams)


def random_team(
    cache: LogitCache, train: ArrayLike, test: ArrayLike, *, k: int = 3, seed: int | None = 0
) -> BaselineResult:
    """Per question, a uniformly random team of ``k`` models fused by mean-probability vote.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices; ``train`` is validated but unused.
    k
        Team size, 1..N. With ``k = N`` the result equals :func:`mean_probability_vote`.
    seed
        Seed of ``np.random.default_rng``; the same seed gives the same teams.

    Returns
    -------
    BaselineResult
        Named ``"random_team(k=...)"``, team size ``k``.
    """
    _, test = train_test_indices(cache, train, test)
    size = _team_size_k(cache, k)
    rng = np.random.default_rng(check_seed(seed, "random_team"))
    order = np.argsort(rng.random((test.size, cache.n_models)), axis=1)  # uniform permutations
    members = np.zeros((test.size, cache.n_models), dtype=bool)
    np.put_along_axis(members, order[:, :size], True, axis=1)
    predictions = mean_vote(cache.probs, members, valid_choices(cache, test), rows=test)
    return BaselineResult(
        f"random_team(k={size})",
        predictions,
        np.full(test.size, float(size)),
        test,
        cache.labels[test],
        {"k": size, "seed": seed},
        members,
    )


def greedy_focal_team(
    cache: LogitCache,
    train: ArrayLike,
    test: ArrayLike,
    *,
    k: int = 3,
    fuse: str = "plurality",
) -> BaselineResult:
    """A static team of ``k`` models grown greedily on train by focal diversity.

    The team starts from the model with the best train accuracy; then, ``k - 1`` times, the
    model that maximises the focal diversity (:func:`ensemble_env.metrics.focal_diversity`) of
    the enlarged team on the train correctness matrix joins it. Ties (within 1e-12) go to the
    higher train accuracy, then to the lower model index. The same team answers every eval
    question.

    Parameters
    ----------
    cache
        The logit cache.
    train, test
        Question indices to choose the team on and to evaluate on.
    k
        Team size, 1..N (default 3).
    fuse
        ``"plurality"`` (default: the members vote their argmax, ties to the lowest choice) or
        ``"mean"`` (argmax of the members' mean probabilities).

    Returns
    -------
    BaselineResult
        Named ``"greedy_focal_team(k=...)"`` (with ``",mean"`` for mean fusion), team size
        ``k``; ``info["team"]`` holds the member names in the order they joined and
        ``info["focal_diversity"]`` the team's focal diversity on train.
    """
    train, test = train_test_indices(cache, train, test)
    size = _team_size_k(cache, k)
    if fuse not in FUSIONS:
        raise ValueError(f"fuse={fuse!r} is not one of {', '.join(FUSIONS)}")
    correct = cache.correct[train]
    accuracy = correct.mean(axis=0)
    team = [int(np.argmax(accuracy))]
    while len(team) < size:
        candidates = [m for m in range(cache.n_models) if m not in team]
        scores = np.array([focal_diversity(correct[:, [*team, m]]) for m in candidates])
        tied = [m for m, s in zip(candidates, scores, strict=True) if s >= scores.max() - _TIE_TOLERANCE]
        team.append(min(tied, key=lambda m: (-accuracy[m], m)))
    members = np.array(team)
    teams = fixed_teams(test.size, cache.n_models, members)
    if fuse == "plurality":
        predictions = plurality_answers(cache.preds[test][:, members], cache.max_choices)
    else:
        predictions = mean_vote(cache.probs, teams, valid_choices(cache, test), rows=test)
    name = f"greedy_focal_team(k={size})" if fuse == "plurality" else f"greedy_focal_team(k={size},mean)"
    info = {
        "team": tuple(cache.models[m] for m in team),
        "focal_diversity": focal_diversity(correct[:, members]),
        "fuse": fuse,
    }
    return BaselineResult(name, predictions, np.full(test.size, float(size)), test, cache.labels[test], info, teams)


def oracle(cache: LogitCache, train: ArrayLike, test: ArrayLike) -> BaselineResult:
    """Right whenever any of the N models is right, else the plurality vote: an upper bound.

    It bounds, question by question, every rule that answers with some model's argmax (a
    single model, a plurality vote of any team). Probability fusion (mean vote, stacking) can
    be right on a question where no model's argmax is, so for those it is an upper bound in
    practice rather than by construction.
    ``train`` is validated but unused. Team size N.
    """
    _, test = train_test_indices(cache, train, test)
    fallback = plurality_answers(cache.preds[test], cache.max_choices)
    predictions = np.where(cache.correct[test].any(axis=1), cache.labels[test], fallback)
    teams = full_teams(test.size, cache.n_models)
    return BaselineResult.from_cache("oracle", cache, test, predictions, cache.n_models, teams=teams)


# -- all at once -------------------------------------------------------------------------------


def run_all(
    cache: LogitCache,
    split: str = "test",
    train_split: str = "train",
    k: int = 3,
    seed: int | None = 0,
) -> list[BaselineResult]:
    """Run every baseline with its default options, fitted on ``train_split``, evaluated on ``split``.

    Order: best_single, plurality_vote, mean_probability_vote, random_team (``k``, ``seed``),
    greedy_focal_team (``k``), stacking, oracle. Split names are those of
    :meth:`LogitCache.select` (ValueError when unknown or empty); ``k`` must be in 1..N.
    """
    train = cache.select(train_split)
    test = cache.select(split)
    _team_size_k(cache, k)
    return [
        best_single(cache, train, test),
        plurality_vote(cache, train, test),
        mean_probability_vote(cache, train, test),
        random_team(cache, train, test, k=k, seed=seed),
        greedy_focal_team(cache, train, test, k=k),
        stacking(cache, train, test),
        oracle(cache, train, test),
    ]
