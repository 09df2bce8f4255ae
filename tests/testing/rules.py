"""The partial-feedback rules (``ensemble_env.baselines.partial``) written out naively, the reference of the rules'
tests and of their fuzz suite."""

from __future__ import annotations

import math

import numpy as np


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
