"""The unseen-task protocol's rules in the tests: a pool of four tasks on which different models are good (the
full-feedback rules of ``ensemble_env.baselines.online`` and the partial-feedback rules of ``baselines.partial`` are
checked on it), and the partial-feedback rules written out naively, the reference of the rules' tests and of their
fuzz suite."""

from __future__ import annotations

import math

import numpy as np

from ensemble_env.cache import LogitCache, synthetic


def four_task_cache(seed: int = 0, n_questions: int = 240) -> LogitCache:
    """3 models, 4 tasks on which different models are good (the best team differs by task; tasks interleaved in cache
    order)."""
    accuracy = np.array([[0.8, 0.4, 0.5, 0.6], [0.45, 0.8, 0.5, 0.6], [0.5, 0.5, 0.8, 0.6]])
    return synthetic.make_cache(n_models=3, n_questions=n_questions, n_tasks=4, accuracy=accuracy, seed=seed)


def naive_choices(rewards, teams, prior, rank, n0, c, m, sigma, noise, width, delay):  # type: ignore[no-untyped-def]
    """The rule written out: at each question recount, from the played teams so far, which teams each revealed
    question showed (sub-teams of the one that answered it), then the index; ties to the lowest rank."""
    n_teams, length = rewards.shape
    played: list[int] = []
    for t in range(length):
        if t < m:
            played.append(int(np.flatnonzero(teams.all(axis=1))[0]))
            continue
        revealed = max(0, t - delay)
        best, best_key = -1, None
        for k in range(n_teams):
            seen = [s for s in range(revealed) if not (teams[k] & ~teams[played[s]]).any()]
            plays = n0 + len(seen)
            value = (sum(rewards[k, s] for s in seen) + n0 * prior[k]) / plays
            value += width * c * math.sqrt(2 * math.log1p(revealed) / plays)
            value += width * sigma * noise[t, k] / math.sqrt(plays)
            key = (round(value, 9), -rank[k])
            if best_key is None or key > best_key:
                best, best_key = k, key
        played.append(best)
    return played
