"""Drawing the questions of generated tasks: steps 1-5 of :mod:`ensemble_env.cache.task_model`, vectorised.

:func:`task_draws` takes the random numbers of one task from the task's own generator, in a fixed order, so a task's
questions depend on its parameters and its generator only; :func:`draw_questions` turns the random numbers of many
tasks into their questions at once (numpy, no loop over questions or models); :func:`draw_task` is the two for one
task. :mod:`ensemble_env.cache.generator` draws samples of tasks with them, and :mod:`ensemble_env.cache.task_fit`
uses :func:`branch_scores` to fit the margins' links to a question's ease.

>>> import numpy as np
>>> from ensemble_env.cache import synthetic
>>> from ensemble_env.cache.task_fit import fit_task
>>> real = synthetic.make_cache(n_models=2, n_questions=300, accuracy=[0.6, 0.8], seed=0)
>>> fit = fit_task(real, "task_0", np.arange(300))
>>> logp, labels, n_choices = draw_task(fit.parameters(), 1000, np.random.default_rng(0))
>>> logp.shape, bool(np.allclose(np.exp(logp).sum(axis=2), 1.0))
((1000, 2, 4), True)
>>> [round(float(a), 1) for a in (logp.argmax(axis=2) == labels[:, None]).mean(axis=0)]
[0.6, 0.8]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ensemble_env.cache.synthetic import norm_ppf
from ensemble_env.cache.task_model import MIN_MARGIN, norm_cdf

__all__ = ["TaskDraws", "branch_scores", "draw_questions", "draw_task", "rest_utilities", "task_draws"]


@dataclass(frozen=True)
class TaskDraws:
    """The random numbers of one task's questions, drawn by :func:`task_draws` from the task's own generator in a
    fixed order (so a task's questions depend on its parameters and its generator only, whatever is drawn with it).
    ``Q`` questions, ``N`` models, ``C`` the task's choices."""

    parameters: Mapping[str, Any]
    """The task's parameters (:meth:`TaskFit.parameters`, possibly jittered)."""
    choice: np.ndarray
    """(Q,) the index into ``choice_counts`` of each question's number of choices."""
    label: np.ndarray
    """(Q,) uniforms that pick the labels."""
    difficulty: np.ndarray
    """(Q,) standard normals: the shared difficulty ``d``."""
    noise: np.ndarray
    """(Q, N) standard normals: each model's own term ``e`` of the copula."""
    distractor: np.ndarray
    """(Q,) uniforms that pick the shared wrong answer."""
    wrong: np.ndarray
    """(Q, N) uniforms that pick each model's wrong answer."""
    margin: np.ndarray
    """(Q, N) standard normals: the margins' own noise ``n``."""
    utility: np.ndarray
    """(Q, N, C) standard exponentials: ``G = -log E``, the Gumbel terms of the other choices' utilities."""
    gap: np.ndarray
    """(Q, N, C) uniforms: the gaps below the runner-up, through the ``rest_gap`` quantiles."""


def task_draws(parameters: Mapping[str, Any], n_questions: int, rng: np.random.Generator) -> TaskDraws:
    """The random numbers of ``n_questions`` questions of the task of ``parameters``, from ``rng``."""
    counts = np.asarray(parameters["choice_counts"])
    n_models, n_choices, q = np.asarray(parameters["skill"]).size, int(counts.max()), int(n_questions)
    weights = np.asarray(parameters["choice_weights"])
    choice = rng.choice(counts.size, size=q, p=weights) if counts.size > 1 else np.zeros(q, dtype=np.int64)
    return TaskDraws(
        parameters=parameters,
        choice=choice,
        label=rng.random(q),
        difficulty=rng.standard_normal(q),
        noise=rng.standard_normal((q, n_models)),
        distractor=rng.random(q),
        wrong=rng.random((q, n_models)),
        margin=rng.standard_normal((q, n_models)),
        utility=rng.standard_exponential((q, n_models, n_choices), dtype=np.float32),
        gap=rng.random((q, n_models, n_choices), dtype=np.float32),
    )


def _categorical(logits: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """One index per row of ``logits`` (..., C), drawn from ``softmax`` over its finite entries by the inverse CDF at
    ``uniform`` (...) (a row without a finite entry gives 0)."""
    top = logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
    cumulative = np.cumsum(weights, axis=-1)
    index = (cumulative <= (uniform * cumulative[..., -1])[..., None]).sum(axis=-1)
    return np.minimum(index, logits.shape[-1] - 1)


def branch_scores(key: np.ndarray, branch: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
    """(Q, N): the normal score ``Phi^-1((rank + 0.5) / count)`` of ``key`` (Q,) among the questions of the same
    ``group`` (Q,) (default: one group) where ``branch`` (Q, N) holds, per model; 0 where it does not."""
    group = np.zeros(key.size, dtype=np.int64) if group is None else np.asarray(group)
    order = np.lexsort((key, group))  # by group, then key
    inside = branch[order].astype(np.int64)  # (Q, N) in that order
    before = np.cumsum(inside, axis=0) - inside  # members of the branch earlier in the order
    first = np.searchsorted(group[order], group[order], side="left")  # where each question's group starts
    last = np.searchsorted(group[order], group[order], side="right") - 1
    rank = before - before[first]
    count = before[last] + inside[last] - before[first]
    score = norm_ppf(np.clip((rank + 0.5) / np.maximum(count, 1), 1e-9, 1.0 - 1e-9))
    scores = np.empty(branch.shape)
    scores[order] = np.where(inside == 1, score, 0.0)
    return scores


def rest_utilities(
    parameters: Mapping[str, Any],
    labels: np.ndarray,
    distractor: np.ndarray,
    answer: np.ndarray,
    valid: np.ndarray,
    exponentials: np.ndarray,
) -> np.ndarray:
    """(Q, N, C) the utilities that rank each model's choices other than its answer (step 4 of the module's
    docstring): ``wrong_logits + distractor_boost * [c == w] + gold_boost * [c == label] + G``, ``G = -log E`` a
    standard Gumbel from ``exponentials``; ``-inf`` at the answer and beyond the valid choices. The parameters are
    one task's ((N, C) ``wrong_logits``, scalar ``distractor_boost``, (N,) ``gold_boost``) or per question
    ((Q, N, C), (Q,), (Q, N))."""
    positions = np.arange(valid.shape[1])
    boost = np.asarray(parameters["distractor_boost"], dtype=np.float32).reshape(-1, 1)  # (1, 1) or (Q, 1)
    gold_boost = np.asarray(parameters["gold_boost"], dtype=np.float32)
    gold_boost = gold_boost if gold_boost.ndim == 2 else gold_boost[None]  # (1, N) or (Q, N)
    wrong_logits = np.asarray(parameters["wrong_logits"], dtype=np.float32)
    wrong_logits = wrong_logits if wrong_logits.ndim == 3 else wrong_logits[None]
    shared = np.where(positions == distractor[:, None], boost, np.float32(0.0))[:, None, :]
    gold = np.where((positions == labels[:, None])[:, None, :], gold_boost[:, :, None], np.float32(0.0))
    gumbel = -np.log(np.maximum(exponentials, np.float32(1e-30)), dtype=np.float32)
    utility = wrong_logits + shared + gold + gumbel
    return np.where(valid[:, None, :] & (positions != answer[..., None]), utility, -np.inf)


def _quantiles(knots: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The quantile functions ``knots`` (Q, N, KN) (at :data:`MARGIN_QUANTILES`, linear between them) at ``u``
    (Q, N) or (Q, N, C), in ``u``'s precision."""
    flat = u if u.ndim == 3 else u[..., None]
    count = knots.shape[-1]
    position = flat * np.asarray(count - 1, dtype=flat.dtype)
    low = np.minimum(position.astype(np.int32), count - 2)
    rows = np.arange(knots.shape[0] * knots.shape[1], dtype=np.int64).reshape(knots.shape[0], knots.shape[1], 1)
    index = rows * count + low  # into the flattened knots
    table = knots.astype(flat.dtype).ravel()
    below = table[index]
    value = below + (position - low) * (table[index + 1] - below)
    return value if u.ndim == 3 else value[..., 0]


def _stacked(draws: Sequence[TaskDraws], width: int) -> dict[str, np.ndarray]:
    """The tasks' parameters stacked along a task axis, position vectors padded to ``width`` (with -inf logits)."""

    def padded(name: str, fill: float) -> np.ndarray:
        arrays = [np.asarray(d.parameters[name], dtype=np.float64) for d in draws]
        out = np.full((len(arrays), *arrays[0].shape[:-1], width), fill)
        for t, array in enumerate(arrays):
            out[t, ..., : array.shape[-1]] = array
        return out

    stacked = {name: padded(name, -np.inf) for name in ("label_logits", "wrong_logits", "distractor_logits")}
    stacked["label_bias"] = padded("label_bias", 0.0)
    for name in ("skill", "loading", "ease_right", "ease_wrong", "gold_boost", "margin_right", "margin_wrong",
                 "rest_gap", "distractor_boost"):  # fmt: skip
        stacked[name] = np.stack([np.asarray(d.parameters[name], dtype=np.float64) for d in draws])
    return stacked


def draw_questions(draws: Sequence[TaskDraws]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The questions of several tasks (the module's steps 1-5) from their random numbers, vectorised over all of
    them; a task's questions are the same whichever tasks are drawn with it.

    Returns
    -------
    tuple of numpy.ndarray
        ``logp`` (Q, N, C) float32 (Q the tasks' questions in task order, C their largest choice count), every
        model's log-probabilities normalised over each question's valid choices (``-inf`` beyond them);
        ``labels`` (Q,) int64; ``n_choices`` (Q,) int64.
    """
    width = max(int(np.asarray(d.parameters["choice_counts"]).max()) for d in draws)
    p = _stacked(draws, width)
    task = np.concatenate([np.full(d.label.size, t) for t, d in enumerate(draws)])
    n_models = p["skill"].shape[1]

    def joined(name: str) -> np.ndarray:
        arrays = [getattr(d, name) for d in draws]
        if arrays[0].ndim < 3 or all(array.shape[2] == width for array in arrays):
            return np.concatenate(arrays)
        out = np.ones((task.size, n_models, width), dtype=np.float32)  # padding: E = 1, u = 1 (never read)
        start = 0
        for array in arrays:
            out[start : start + array.shape[0], :, : array.shape[2]] = array
            start += array.shape[0]
        return out

    counts = [np.asarray(d.parameters["choice_counts"]) for d in draws]
    n_choices = np.concatenate([c[d.choice] for c, d in zip(counts, draws, strict=True)]).astype(np.int64)
    positions = np.arange(width)
    valid = positions[None, :] < n_choices[:, None]  # (Q, C)
    labels = _categorical(np.where(valid, p["label_logits"][task], -np.inf), joined("label"))
    is_label = positions[None, :] == labels[:, None]

    difficulty = joined("difficulty")
    loading = p["loading"][task]
    latent = loading * difficulty[:, None] + np.sqrt(1.0 - loading**2) * joined("noise")
    correct = (
        latent < p["skill"][task] + np.take_along_axis(p["label_bias"][task], labels[:, None, None], axis=2)[..., 0]
    )

    open_ = valid & ~is_label
    distractor = _categorical(np.where(open_, p["distractor_logits"][task], -np.inf), joined("distractor"))
    boost = p["distractor_boost"][task]
    wrong_logits = p["wrong_logits"][task].astype(np.float32)  # (Q, N, C)
    shared = np.where(positions[None, :] == distractor[:, None], boost[:, None], 0.0)
    wrong_answer = _categorical(
        np.where(open_[:, None, :], wrong_logits + shared[:, None, :], -np.inf), joined("wrong")
    )
    answer = np.where(correct, labels[:, None], wrong_answer)  # (Q, N)

    link = np.where(correct, p["ease_right"][task], p["ease_wrong"][task])
    ease = np.where(correct, branch_scores(-difficulty, correct, task), branch_scores(-difficulty, ~correct, task))
    u = np.clip(norm_cdf(link * ease + np.sqrt(1.0 - link**2) * joined("margin")), 0.0, 1.0)
    knots = np.where(correct[..., None], p["margin_right"][task], p["margin_wrong"][task])
    margin = np.maximum(np.exp(_quantiles(knots, u)), MIN_MARGIN).astype(np.float32)[..., None]

    per_question = {"wrong_logits": wrong_logits, "distractor_boost": boost, "gold_boost": p["gold_boost"][task]}
    utility = rest_utilities(per_question, labels, distractor, answer, valid, joined("utility"))
    order = np.argsort(-utility, axis=2)  # the runner-up first, then the other choices; the answer and padding last
    # the gaps below the runner-up: n_choices - 2 draws of the rest_gap quantiles, sorted (the smallest to the choice
    # ranked third); the quantile function does not decrease, so sorting the uniforms sorts the gaps
    uniforms = np.where((positions < n_choices[:, None] - 2)[:, None, :], joined("gap"), 1.0)
    gaps = np.maximum(np.exp(_quantiles(p["rest_gap"][task], np.sort(uniforms, axis=2))), MIN_MARGIN)
    ranked = np.concatenate([-margin, -(margin + gaps[:, :, : width - 1])], axis=2)
    logp = np.empty_like(ranked)
    np.put_along_axis(logp, order, ranked, axis=2)
    logp = np.where(positions == answer[..., None], 0.0, logp)
    logp = np.where(valid[:, None, :], logp, -np.inf)
    logp -= np.log(np.exp(logp).sum(axis=2, keepdims=True))  # the answer holds the maximum, 0: no overflow
    return logp.astype(np.float32, copy=False), labels.astype(np.int64), n_choices


def draw_task(
    parameters: Mapping[str, Any], n_questions: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n_questions`` questions of the task of ``parameters`` drawn from ``rng``: :func:`draw_questions` of
    :func:`task_draws` (``logp`` (Q, N, C), ``labels``, ``n_choices``)."""
    return draw_questions([task_draws(parameters, n_questions, rng)])
