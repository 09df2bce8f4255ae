"""Seeded fuzzing of issue 49's ("Reliability round 5") class 3: an id's fixed options cannot be overridden by
keywords. Each case makes one of the three registered ids through ``pettingzoo.make`` (either API) with a random
``version`` and ``feedback`` keyword (absent, the id's own, another version, ``True``, a numpy integer, text, a float,
``None``; ``"all"``, ``"team"``, other spellings, ``None``, a number). The verdict is known in advance: a keyword that
repeats the id's options builds the id's game (its feedback checked on the built environment), any other is refused
in one line naming the keyword; a game built with another feedback than the id's is ``wrong``.

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/views/test_fuzz_env_ids.py --slow`` the full part and prints its row.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helper is in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main

CASE_SECONDS = 120.0
MODULE = "test_fuzz_env_ids"
IDS = ("ensemble_env/Ensemble-v1", "ensemble_env/EnsembleUnseen-v1", "ensemble_env/EnsembleUnseen-v2")
#: each id's version (None: the id has no version keyword) and feedback
GAMES = {IDS[0]: (None, "all"), IDS[1]: (1, "all"), IDS[2]: (2, "team")}
VERSIONS = ["absent", 1, 2, 3, 0, "true", "np1", "np2", "text2", "float2", "none"]
FEEDBACKS = ["absent", "all", "team", "ALL", "Team", "none", "number", "partial"]


def _value(name: str) -> Any:
    return {"true": True, "np1": np.int64(1), "np2": np.int64(2), "text2": "2", "float2": 2.0, "none": None,
            "number": 1}.get(name, name)  # fmt: skip


def _expected(env_id: str, version: Any, feedback: Any) -> str | None:
    """The feedback of the game built, or None when the keywords must be refused."""
    fixed_version, fixed_feedback = GAMES[env_id]
    if isinstance(version, str) and version == "absent":
        pass
    elif fixed_version is None or isinstance(version, bool) or not isinstance(version, int | np.integer):
        return None
    elif version != fixed_version:
        return None
    if feedback == "absent":
        return fixed_feedback
    if fixed_version is not None:
        return fixed_feedback if feedback == fixed_feedback else None
    return feedback if feedback in ("all", "team") else None


def env_id_case(case: dict[str, Any]) -> tuple[str, str]:
    import pettingzoo

    import ensemble_env  # noqa: F401  (registers the ids)

    options = {key: _value(case[key]) for key in ("version", "feedback") if case[key] != "absent"}
    expected = _expected(case["id"], options.get("version", "absent"), options.get("feedback", "absent"))
    try:
        env = pettingzoo.make(case["api"], case["id"], cache="toy8", **options)
    except (ValueError, TypeError) as error:  # TypeError: a keyword the game does not know (version on Ensemble-v1)
        message = str(error)
        if expected is not None:
            return "wrong", f"refused {options} of {case['id']}: {message[:250]}"
        if not any(name in message for name in options) or "\n" in message or len(message) > 600:
            return "bad_error", f"the message names no keyword in one line: {message[:250]}"
        return "refused", message[:300]
    except Exception as error:
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    built = env.unwrapped.engine.config
    if expected is None:
        return "wrong", f"{case['id']} with {options} built a game with feedback={built.feedback!r}"
    if built.feedback != expected or (GAMES[case["id"]][0] is not None and built.episodes != "task"):
        return "wrong", f"{case['id']} with {options} built feedback={built.feedback!r}, not {expected!r}"
    return "accepted", ""


def cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    found = []
    for index in range(n):
        version = VERSIONS[int(rng.integers(len(VERSIONS)))] if rng.random() < 0.7 else "absent"
        feedback = FEEDBACKS[int(rng.integers(len(FEEDBACKS)))] if rng.random() < 0.6 else "absent"
        env_id, api = IDS[int(rng.integers(len(IDS)))], str(rng.choice(["parallel", "aec"]))
        found.append({"id": env_id, "api": api, "version": version, "feedback": feedback, "seed": index,
                      "kind": f"{env_id.split('/')[1]} {api} version={version} feedback={feedback}"})  # fmt: skip
    return found


def suite(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    chosen = cases(slow_size(500) if slow else 40, seed=49 if slow else 3)
    return run_cases(MODULE, "env_id_case", chosen, workdir, CASE_SECONDS), 0


SUITES = {"env ids' fixed options": suite}


def test_env_id_keywords_are_refused_or_build_the_id_s_game(tmp_path: Path) -> None:
    pytest.importorskip("pettingzoo.env_registry")
    results, _ = suite(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 10 and counts["accepted"] > 5, dict(counts)


@pytest.mark.slow
def test_many_env_id_keywords(tmp_path: Path) -> None:
    pytest.importorskip("pettingzoo.env_registry")
    results, _ = suite(tmp_path, slow=True)
    assert len(results) == slow_size(500) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the env ids' fixed options fuzz and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
