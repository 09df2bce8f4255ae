"""Fitting the model of one task (:mod:`ensemble_env.cache.task_model`) to a real task's questions: :func:`fit_task`.

Every parameter is fitted on all the task's questions, every split, labels included:

- positions: frequencies with a pseudo-count of 0.5 (labels; each model's wrong answers over the choices open to
  them; ``distractor_logits`` the models' mean);
- ``skill`` and ``label_bias``: each model's accuracy per gold position, shrunk toward its accuracy by 5
  pseudo-questions and clipped to [0.005, 0.995], on the probit scale; ``skill`` then set so that the expected
  accuracy over the generated labels is the model's accuracy exactly;
- ``loading``: each pair's correlation of correctness solved so that the copula reproduces the pair's rate of both
  being right (a bivariate normal integral over the task's labels), then a weighted one-factor least-squares fit;
- ``distractor_boost``: solved so that two wrong models give the same answer as often as in the cache (pairs, on the
  questions of 3 or more choices both got wrong); ``gold_boost``: so that the gold answer is the runner-up of a wrong
  answer as often as in the cache;
- margins and gaps: empirical quantiles of ``log max(gap, 1e-3)``; ``ease_right`` and ``ease_wrong``: the
  correlation of a margin's normal score with the share of the other models right, divided by the correlation the
  copula gives the ease itself (a seeded simulation), clipped to [-0.95, 0.95].

Numpy only (the bivariate normal integral by Gauss-Legendre quadrature); deterministic.

>>> import numpy as np
>>> from ensemble_env.cache import synthetic
>>> real = synthetic.make_cache(n_models=3, n_questions=400, accuracy=[0.5, 0.7, 0.9], error_correlation=0.5, seed=0)
>>> fit = fit_task(real, "task_0", np.arange(400))
>>> fit.n_questions, fit.max_choices, [round(float(a), 2) for a in real.model_accuracy()]
(400, 4, [0.53, 0.72, 0.91])
>>> bool(fit.loading.min() > 0.5)  # errors correlated (error_correlation=0.5: loadings near sqrt(0.5))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.cache.synthetic import norm_ppf
from ensemble_env.cache.task_draw import branch_scores
from ensemble_env.cache.task_model import MARGIN_QUANTILES, MAX_LOADING, MIN_MARGIN, TaskFit, norm_cdf

__all__ = ["fit_task"]

_PROBIT_CLIP = (0.005, 0.995)  # accuracies are kept inside this before the probit
_LABEL_PSEUDO = 0.5  # pseudo-count per position of the label and wrong-answer frequencies
_SKILL_PSEUDO = 5.0  # pseudo-questions shrinking a per-position accuracy toward the model's accuracy
_BOOST_RANGE = (0.0, 20.0)  # distractor_boost as fitted
_EASE_SEED, _EASE_SIMULATION = 53, 8_000  # the seeded simulation the ease links are fitted with
_GAUSS_LEGENDRE = np.polynomial.legendre.leggauss(40)


# -- normal distribution helpers (numpy only) --------------------------------------------------------------------
def _both_below(a: np.ndarray, b: np.ndarray, rho: float, independent: np.ndarray) -> np.ndarray:
    """P(X < a, Y < b) for standard normals of correlation ``rho``: ``independent`` (Phi(a) Phi(b)) plus the integral
    over r from 0 to ``rho`` of the bivariate density at (a, b) (Gauss-Legendre, 40 nodes; |rho| <= 0.99)."""
    nodes, weights = _GAUSS_LEGENDRE
    r = 0.5 * rho * (nodes + 1.0)[:, None]
    one = 1.0 - r * r
    density = np.exp(-(a * a - 2.0 * r * a * b + b * b) / (2.0 * one)) / (2.0 * np.pi * np.sqrt(one))
    return np.asarray(independent + 0.5 * rho * (weights[:, None] * density).sum(axis=0))


def _bisect(function: Any, low: float, high: float, target: float, steps: int = 40) -> float:
    """The x in [low, high] where the increasing ``function`` reaches ``target`` (an end when it does not)."""
    if function(low) >= target:
        return low
    if function(high) <= target:
        return high
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if function(middle) < target:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


# -- fitting --------------------------------------------------------------------------------------------------------
def fit_task(cache: LogitCache, name: str, rows: np.ndarray) -> TaskFit:
    """The parameters of the task whose questions are ``rows`` (all its questions, all splits)."""
    n_choices_q = cache.n_choices[rows]
    n_choices = int(n_choices_q.max())
    labels, preds, correct = cache.labels[rows], cache.preds[rows], cache.correct[rows]
    positions = np.arange(n_choices)
    valid = positions[None, :] < n_choices_q[:, None]  # (Q, C)
    counts, weights = np.unique(n_choices_q, return_counts=True)

    label_counts = np.bincount(labels, minlength=n_choices).astype(np.float64)
    label_logits = np.log((label_counts + _LABEL_PSEUDO) / valid.sum(axis=0).clip(1))
    label_logits -= label_logits.mean()

    accuracy = correct.mean(axis=0)
    skill = norm_ppf(np.clip(accuracy, *_PROBIT_CLIP))
    at_label = labels[:, None] == positions[None, :]  # (Q, C)
    right_at = correct.T.astype(np.float64) @ at_label  # (N, C)
    seen_at = at_label.sum(axis=0)[None, :]
    shrunk = (right_at + _SKILL_PSEUDO * accuracy[:, None]) / (seen_at + _SKILL_PSEUDO)
    label_bias = norm_ppf(np.clip(shrunk, *_PROBIT_CLIP)) - skill[:, None]
    skill = _calibrated_skill(accuracy, label_bias, label_logits, counts, weights / weights.sum())

    wrong = ~correct
    chosen = (preds[:, :, None] == positions) & wrong[:, :, None]  # (Q, N, C) the wrong answers' positions
    open_to = (valid & ~at_label)[:, None, :] & wrong[:, :, None]  # a wrong answer could fall on c
    wrong_logits = np.log((chosen.sum(axis=0) + _LABEL_PSEUDO) / (open_to.sum(axis=0) + 2 * _LABEL_PSEUDO))
    wrong_logits -= wrong_logits.mean(axis=1, keepdims=True)
    distractor_logits = wrong_logits.mean(axis=0)

    thresholds = skill[:, None] + label_bias  # (N, C)
    loading = _fit_loadings(correct, labels, thresholds)
    boost = _fit_boost(preds, wrong, labels, n_choices_q, wrong_logits, distractor_logits)
    margin_right, margin_wrong, margin = _fit_confidence(cache, rows, correct)
    gold_boost, rest_gap = _fit_rest(cache, rows, wrong_logits, distractor_logits, boost)
    ease_right, ease_wrong = _fit_ease(margin, correct, thresholds[:, labels].T, loading)
    return TaskFit(
        name=name,
        n_questions=int(rows.size),
        choice_counts=counts,
        choice_weights=weights.astype(np.float64),
        label_logits=label_logits,
        skill=skill,
        label_bias=label_bias,
        loading=loading,
        wrong_logits=wrong_logits,
        distractor_logits=distractor_logits - distractor_logits.mean(),
        distractor_boost=boost,
        margin_right=margin_right,
        margin_wrong=margin_wrong,
        ease_right=ease_right,
        ease_wrong=ease_wrong,
        gold_boost=gold_boost,
        rest_gap=rest_gap,
        path=cache.path,
    )


def _calibrated_skill(
    accuracy: np.ndarray, label_bias: np.ndarray, label_logits: np.ndarray, counts: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """(N,) the skills whose expected accuracy over the generated labels, ``sum_l p(l) Phi(skill + label_bias[l])``,
    is each model's accuracy (clipped to [0.005, 0.995]): the shrinkage and the smoothed labels leave it unchanged."""
    label_share = np.zeros(label_logits.size)
    for count, weight in zip(counts.tolist(), weights.tolist(), strict=True):
        exp = np.exp(label_logits[:count] - label_logits[:count].max())
        label_share[:count] += weight * exp / exp.sum()
    skill = np.empty(accuracy.size)
    for m, target in enumerate(np.clip(accuracy, *_PROBIT_CLIP).tolist()):
        bias = label_bias[m]
        skill[m] = _bisect(lambda x, bias=bias: float(label_share @ norm_cdf(x + bias)), -4.0, 4.0, target, steps=40)
    return skill


def _fit_loadings(correct: np.ndarray, labels: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(N,) loadings whose products reproduce each pair's rate of both being right (``thresholds`` (N, C): each
    model's probit threshold at each gold position)."""
    n_models = correct.shape[1]
    if n_models == 1:
        return np.zeros(1)
    positions, counts = np.unique(labels, return_counts=True)
    share = counts / counts.sum()
    rho = np.zeros((n_models, n_models))
    weight = np.zeros((n_models, n_models))
    spread = correct.mean(axis=0) * (1.0 - correct.mean(axis=0))
    for i in range(n_models):
        for j in range(i + 1, n_models):
            target = float(np.mean(correct[:, i] & correct[:, j]))
            a, b = thresholds[i, positions], thresholds[j, positions]
            independent = norm_cdf(a) * norm_cdf(b)

            def both(r: float, a: np.ndarray = a, b: np.ndarray = b, base: np.ndarray = independent) -> float:
                return float(share @ _both_below(a, b, r, base))

            rho[i, j] = rho[j, i] = _bisect(both, -MAX_LOADING, MAX_LOADING, target, steps=30)
            weight[i, j] = weight[j, i] = np.sqrt(spread[i] * spread[j])
    loading = np.full(n_models, 0.5)
    for _ in range(100):  # weighted least squares of rho_ij ~ loading_i loading_j, one model at a time
        before = loading.copy()
        for i in range(n_models):
            others = np.arange(n_models) != i
            w, lam = weight[i, others], loading[others]
            denominator = float((w * lam * lam).sum())
            if denominator > 1e-12:
                loading[i] = np.clip((w * rho[i, others] * lam).sum() / denominator, -MAX_LOADING, MAX_LOADING)
        if np.max(np.abs(loading - before)) < 1e-6:
            break
    return loading if loading.sum() >= 0 else -loading


def _same_wrong_rate(
    groups: list[tuple[int, int, int, np.ndarray]], wrong_logits: np.ndarray, distractor: np.ndarray, boost: float
) -> float:
    """The model's rate of two wrong models giving the same answer over ``groups`` (models i and j, a choice count
    C and the (C,) count of their both-wrong questions at each gold position)."""
    same = total = 0.0
    for i, j, count, at_label in groups:
        open_ = ~np.eye(count, dtype=bool)  # [label, choice]: the wrong choices of each label
        prior = np.where(open_, np.exp(distractor[:count] - distractor[:count].max()), 0.0)
        prior /= prior.sum(axis=1, keepdims=True)  # [label, w]
        boosted = np.exp(np.eye(count) * boost)  # [w, choice]
        answers = []
        for m in (i, j):
            weights = open_[:, None, :] * (np.exp(wrong_logits[m, :count]) * boosted)[None]  # [label, w, choice]
            answers.append(weights / weights.sum(axis=2, keepdims=True))
        rate = (prior * (answers[0] * answers[1]).sum(axis=2)).sum(axis=1)  # [label]
        same += float(at_label @ rate)
        total += float(at_label.sum())
    return same / total if total else 0.0


def _fit_boost(
    preds: np.ndarray,
    wrong: np.ndarray,
    labels: np.ndarray,
    n_choices: np.ndarray,
    wrong_logits: np.ndarray,
    distractor: np.ndarray,
) -> float:
    """The distractor boost that reproduces how often two wrong models agree (questions of 3 or more choices)."""
    groups, same, total = [], 0, 0
    for i in range(preds.shape[1]):
        for j in range(i + 1, preds.shape[1]):
            both = wrong[:, i] & wrong[:, j] & (n_choices >= 3)
            same += int(np.sum(preds[both, i] == preds[both, j]))
            total += int(both.sum())
            for count in np.unique(n_choices[both]):
                rows = both & (n_choices == count)
                groups.append((i, j, int(count), np.bincount(labels[rows], minlength=int(count)).astype(np.float64)))
    if total == 0:
        return 0.0
    target = same / total
    return _bisect(lambda k: _same_wrong_rate(groups, wrong_logits, distractor, k), *_BOOST_RANGE, target, steps=30)


def _fit_confidence(
    cache: LogitCache, rows: np.ndarray, correct: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Margin quantiles (right, wrong) and the (Q, N) log margins."""
    n_choices_q = cache.n_choices[rows]
    valid = np.arange(cache.max_choices)[None, :] < n_choices_q[:, None]
    with np.errstate(divide="ignore"):
        logp = np.where(valid[:, None, :], np.log(cache.probs[rows].astype(np.float64)), -np.inf)
    logp = np.maximum(logp, -1e4)
    logp = np.where(valid[:, None, :], logp, -np.inf)
    order = np.argsort(-logp, axis=2, kind="stable")
    ranked = np.take_along_axis(logp, order, axis=2)
    margin = np.log(np.maximum(ranked[:, :, 0] - ranked[:, :, 1], MIN_MARGIN))  # (Q, N)
    knots = np.asarray(MARGIN_QUANTILES)
    n_models = cache.n_models
    right_q = np.empty((n_models, knots.size))
    wrong_q = np.empty((n_models, knots.size))
    for m in range(n_models):
        right, wrong = margin[correct[:, m], m], margin[~correct[:, m], m]
        right = right if right.size else wrong
        wrong = wrong if wrong.size else right
        right_q[m], wrong_q[m] = np.quantile(right, knots), np.quantile(wrong, knots)
    return right_q, wrong_q, margin


def _distractor_posterior(
    labels: np.ndarray,
    answers: np.ndarray,
    valid: np.ndarray,
    wrong_logits: np.ndarray,
    distractor: np.ndarray,
    boost: float,
) -> np.ndarray:
    """(Q, C) the probability of each shared wrong answer given each question's label and a model's ``answers``
    (Q,): the prior ``softmax(distractor_logits)`` over the wrong choices, times the chance of that answer (a right
    answer tells nothing)."""
    positions = np.arange(valid.shape[1])
    open_ = valid & (positions != labels[:, None])
    prior = np.where(open_, np.exp(distractor - distractor.max()), 0.0)
    wrong = answers != labels
    # p(answer | w): exp(wrong_logits[answer] + boost [answer == w]) / sum over the open choices c of the same
    base = np.where(open_, np.exp(wrong_logits), 0.0)  # (Q, C)
    total = base.sum(axis=1, keepdims=True) + base * (np.exp(boost) - 1.0)  # the sum when w is each choice
    chosen = np.take_along_axis(base, np.where(wrong, answers, 0)[:, None], axis=1)
    likelihood = chosen * np.where(positions == answers[:, None], np.exp(boost), 1.0) / total
    posterior = prior * np.where(wrong[:, None], likelihood, 1.0)
    return posterior / np.maximum(posterior.sum(axis=1, keepdims=True), 1e-300)


def _fit_rest(
    cache: LogitCache, rows: np.ndarray, wrong_logits: np.ndarray, distractor: np.ndarray, boost: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per model, ``gold_boost`` (so that the gold answer is the runner-up of a wrong answer as often as in the cache,
    given each wrong answer, the shared wrong answer averaged over its posterior) and ``rest_gap`` (the quantiles of
    the log gaps below the runner-up), on the questions of 3 or more choices."""
    n_models = cache.n_models
    gold_boost = np.zeros(n_models)
    rest_gap = np.zeros((n_models, len(MARGIN_QUANTILES)))
    several = rows[cache.n_choices[rows] >= 3]
    if several.size == 0:
        return gold_boost, rest_gap
    labels, preds, n_choices = cache.labels[several], cache.preds[several], cache.n_choices[several]
    width = int(wrong_logits.shape[1])
    positions = np.arange(width)
    valid = positions[None, :] < n_choices[:, None]
    with np.errstate(divide="ignore"):
        logp = np.where(valid[:, None, :], np.log(cache.probs[several, :, :width].astype(np.float64)), -np.inf)
    logp = np.where(valid[:, None, :], np.maximum(logp, -1e4), -np.inf)
    ranked = -np.sort(-logp, axis=2)
    second_is_gold = np.argsort(-logp, axis=2, kind="stable")[:, :, 1] == labels[:, None]
    for m in range(n_models):
        answers = preds[:, m]
        posterior = _distractor_posterior(labels, answers, valid, wrong_logits[m], distractor, boost)
        wrong = answers != labels
        if wrong.any():
            # P(the gold is the runner-up | answer, w) = e^(g + wl_gold) / (e^(g + wl_gold) + rest(w)), averaged over w
            open_ = valid & (positions != labels[:, None]) & (positions != answers[:, None])
            weights = np.where(open_, np.exp(wrong_logits[m]), 0.0)[wrong]
            rest = weights.sum(axis=1, keepdims=True) + weights * (np.exp(boost) - 1.0)  # (n, C): given w
            gold = np.exp(wrong_logits[m][labels[wrong]])[:, None]
            post = posterior[wrong]

            def rate(g: float, gold: np.ndarray = gold, rest: np.ndarray = rest, post: np.ndarray = post) -> float:
                share = np.exp(g) * gold / (np.exp(g) * gold + rest)
                return float((post * share).sum(axis=1).mean())

            gold_boost[m] = _bisect(rate, -10.0, 10.0, float(second_is_gold[wrong, m].mean()), steps=30)
        observed = (ranked[:, m, 1][:, None] - ranked[:, m, 2:])[valid[:, 2:]]
        if observed.size:
            rest_gap[m] = np.quantile(np.log(np.maximum(observed, MIN_MARGIN)), MARGIN_QUANTILES)
    return gold_boost, rest_gap


def _others_right(correct: np.ndarray) -> np.ndarray:
    """(Q, N): per model, the share of the other models right on each question."""
    n_models = correct.shape[1]
    return (correct.sum(axis=1, keepdims=True) - correct) / max(n_models - 1, 1)


def _branch_correlation(values: np.ndarray, others: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """(N,) per model, the correlation of ``values`` with ``others`` over the questions of ``branch`` (0 when fewer
    than 5 questions or no spread)."""
    out = np.zeros(values.shape[1])
    for m in range(values.shape[1]):
        rows = branch[:, m]
        if rows.sum() >= 5 and np.std(values[rows, m]) > 0 and np.std(others[rows, m]) > 0:
            out[m] = np.corrcoef(values[rows, m], others[rows, m])[0, 1]
    return out


def _fit_ease(
    margin: np.ndarray, correct: np.ndarray, thresholds: np.ndarray, loading: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The links of the margins to the question's ease, per model and branch: the correlation of the margin's normal
    score with the share of the other models right, divided by the same correlation of the ease's normal score in a
    simulation of the fitted copula (:data:`_EASE_SIMULATION` question draws of the task's labels, seeded)."""
    if correct.shape[1] < 2:
        return np.zeros(1), np.zeros(1)
    rng = np.random.default_rng(_EASE_SEED)
    rows = rng.integers(correct.shape[0], size=_EASE_SIMULATION)
    difficulty = rng.standard_normal(rows.size)
    noise = rng.standard_normal((rows.size, loading.size))
    simulated = loading * difficulty[:, None] + np.sqrt(1.0 - loading**2) * noise < thresholds[rows]
    links = []
    for branch, simulated_branch in ((correct, simulated), (~correct, ~simulated)):
        observed = _branch_correlation(_margin_scores(margin, branch), _others_right(correct), branch)
        ease = branch_scores(-difficulty, simulated_branch)
        expected = _branch_correlation(ease, _others_right(simulated), simulated_branch)
        ratio = np.where(np.abs(expected) > 0.05, observed / np.where(expected == 0, 1.0, expected), 0.0)
        links.append(np.clip(ratio, -MAX_LOADING, MAX_LOADING))
    return links[0], links[1]


def _margin_scores(margin: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """(Q, N): each model's margins as normal scores of their ranks within ``branch`` (ties at their mean rank)."""
    scores = np.zeros(margin.shape)
    for m in range(margin.shape[1]):
        rows = np.flatnonzero(branch[:, m])
        if rows.size:
            values = margin[rows, m]
            low = np.searchsorted(np.sort(values), values, side="left")
            high = np.searchsorted(np.sort(values), values, side="right")
            scores[rows, m] = norm_ppf((0.5 * (low + high)) / rows.size)
    return scores
