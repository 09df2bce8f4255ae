"""What an algorithm answers on the test split: :class:`Answers`, the :data:`Algorithm` that returns them, the
check of answers against their cache, and their JSON form in a stored run (``runs/.../result.json``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.baselines.simple import BaselineResult
from ensemble_env.cache.logit_cache import LogitCache

__all__ = ["Algorithm", "Answers", "answers_from_json", "answers_to_json", "check_answers"]


@dataclasses.dataclass(frozen=True)
class Answers:
    """What an algorithm answered on the test split.

    ``questions``: (Q,) the test questions, ``cache.select("test")`` in that order; ``predictions``: (Q,) the
    chosen answer index; ``teams``: (Q, N) bool, the models consulted (at least one per question);
    ``info``: JSON-ready facts for the report (e.g. the checkpoint chosen on validation).
    """

    questions: np.ndarray
    predictions: np.ndarray
    teams: np.ndarray
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


#: ``(cache, seed, alpha, out_dir) -> Answers``
Algorithm = Callable[[LogitCache, int, float, Path], Answers]


def check_answers(answers: Answers, cache: LogitCache, name: str) -> BaselineResult:
    """``answers`` of algorithm ``name`` as a result to score, or ValueError naming the algorithm and the field:
    the questions must be ``cache.select("test")`` in order, the predictions (Q,) integers in -1..n_choices-1
    (-1: no answer), the teams (Q, N) bool with a model in every row."""
    test = cache.select("test")
    questions = np.asarray(answers.questions)
    if not np.array_equal(questions, test):
        raise ValueError(f"algorithm {name!r}: answers.questions must be cache.select('test') in order")
    teams = np.asarray(answers.teams)
    if teams.dtype != np.bool_ or teams.shape != (test.size, cache.n_models) or not teams.any(axis=1).all():
        raise ValueError(f"algorithm {name!r}: answers.teams must be (Q, N) bool with a model in every row")
    predictions = np.asarray(answers.predictions)
    if predictions.shape != test.shape or predictions.dtype.kind not in "iu":
        raise ValueError(
            f"algorithm {name!r}: answers.predictions must be (Q,) = {test.shape} integers, got "
            f"{predictions.dtype} {predictions.shape}"
        )
    outside = np.flatnonzero((predictions < -1) | (predictions >= np.asarray(cache.n_choices)[test]))
    if outside.size:
        q = int(outside[0])
        raise ValueError(
            f"algorithm {name!r}: answers.predictions[{q}] = {predictions[q]} is outside "
            f"-1..{int(cache.n_choices[test[q]]) - 1} (test question {int(test[q])})"
        )
    return BaselineResult.from_cache(name, cache, questions, predictions, teams.sum(axis=1), teams=teams)


def answers_to_json(answers: Answers) -> dict[str, Any]:
    """The JSON form of ``answers`` stored in a run: lists of ints, the teams as 0/1 rows."""
    return {
        "questions": np.asarray(answers.questions).tolist(),
        "predictions": np.asarray(answers.predictions).tolist(),
        "teams": np.asarray(answers.teams, dtype=bool).astype(np.int8).tolist(),
        "info": answers.info,
    }


def answers_from_json(run: Mapping[str, Any]) -> Answers:
    """The answers of a stored run (checked first: :func:`ensemble_mappo.benchmark.store.read_run`)."""
    return Answers(
        np.asarray(run["questions"], dtype=np.int64),
        np.asarray(run["predictions"], dtype=np.int64),
        np.asarray(run["teams"], dtype=np.int8).astype(bool),
        run.get("info", {}),
    )
