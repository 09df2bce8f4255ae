"""Seeded fuzzing of issue 49's ("Reliability round 5") classes 7 and 8: the partial-feedback rules' choice function
(:func:`ensemble_env.baselines.partial.partial_choices`) and every entry of a seed.

- Choice cases: one of ``rewards``, ``prior``, ``rank``, ``bounds`` and ``noise`` mutated (another dtype or shape, a
  NaN, an infinity, a value out of the bounds, a list, a string, a ragged list, a rank that is not a permutation,
  bounds reversed, equal or narrower than the rewards), every other argument valid, with random constants (n0, c, m,
  sigma, delay). The verdict is known in advance from the documented domain (the same as ``ucb_choices``'s): a valid
  call must choose what a naive re-simulation of the rule chooses, an invalid one be refused with a ValueError naming
  one of the arguments in one line.
- Seed cases: a number of every width and kind (booleans, negative, floats, text, bytes, lists, ``None``, numpy
  integers) at one of the seed entries (the certified and pooled estimators, ``Setting``, ``permuted_copies``,
  ``thompson_team``, ``random_team``, ``make_cache``, ``split_by_task``): taken exactly when it is a non-negative
  integer (None where the entry allows an unseeded draw), refused otherwise with a ValueError naming the seed.

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/baselines/test_fuzz_partial_seeds.py --slow`` the full part and prints its row.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helpers are in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main
from testing.hostile import DTYPES, NUMBERS, OTHERS, build, buildable
from testing.rules import naive_choices

CASE_SECONDS = 60.0
MODULE = "test_fuzz_partial_seeds"
TEAMS = [[1, 0], [0, 1], [1, 1]]  # {a}, {b}, {a, b}: K = 3 teams of N = 2 models
K, T = 3, 6
ARGUMENTS = ("rewards", "prior", "rank", "bounds", "noise")
MUTATIONS = ["none", "dtype", "shape", "nan", "inf", "range", "list", "string", "ragged", "order"]
#: the seed entries: (name, None allowed)
SEED_ENTRIES = {
    "certified_teams": False,
    "choose_strength": False,
    "estimate_teams": False,
    "Setting": True,
    "permuted_copies": False,
    "thompson_team": False,
    "random_team": True,
    "make_cache": False,
    "split_by_task": True,
}


# -- the choice function ---------------------------------------------------------------------------------------------
def _base(rng: np.random.Generator) -> dict[str, Any]:
    rewards = np.round(rng.uniform(-2.0, 1.0, size=(K, T)), 3)
    scale = float(rng.choice([0.0, 0.1]))
    return {
        "rewards": rewards,
        "prior": np.round(rng.uniform(-2.0, 1.0, size=K), 3),
        "rank": rng.permutation(K),
        "bounds": (-2.0, 1.0),
        "noise": np.round(rng.standard_normal((T, K)), 3) if scale or rng.random() < 0.5 else None,
        "constants": {
            "pseudo_count": float(rng.choice([0.5, 1.0, 4.0])),
            "exploration": float(rng.choice([0.0, 0.2])),
            "explore": int(rng.integers(0, 3)),
            "scale": scale,
            "delay": int(rng.integers(0, 3)),
        },
    }


def _mutate(value: Any, argument: str, mutation: str, rng: np.random.Generator) -> Any:
    array = np.asarray(value)
    if mutation == "dtype":
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a complex or float cast that drops a part
            return array.astype(str(rng.choice(DTYPES)))
    if mutation == "shape":
        shapes = [array.reshape(-1), array[None], array[..., :1], array[..., :0], array[:1], array[:0]]
        return shapes[int(rng.integers(len(shapes)))]
    if mutation in ("nan", "inf"):
        changed = array.astype(np.float64)
        changed.flat[int(rng.integers(changed.size))] = np.nan if mutation == "nan" else -np.inf
        return changed
    if mutation == "range":
        changed = array.astype(np.float64) if argument != "rank" else array.copy()
        if argument == "rank":
            changed[int(rng.integers(changed.size))] = K  # beyond the teams
        elif argument == "bounds":
            changed = np.array([-1.0, 0.5])  # narrower than the rewards
        else:
            changed.flat[int(rng.integers(changed.size))] = float(rng.choice([-3.0, 1.5, 5.0, -1e300]))
        return changed
    if mutation == "list":
        return array.tolist()  # the same numbers: the same array
    if mutation == "string":
        return str(array.tolist())
    if mutation == "ragged":
        return [[1.0], [1.0, 2.0]]
    if mutation == "order":  # a rank with a repeat, bounds reversed or equal, rewards reversed in time (valid)
        if argument == "rank":
            changed = array.copy()
            changed[0] = changed[1]
            return changed
        if argument == "bounds":
            return [1.0, -2.0] if rng.random() < 0.5 else [0.5, 0.5]
        return array[..., ::-1].copy()
    return value


def _real(value: Any, kinds: str = "iuf") -> np.ndarray | None:
    """``value`` as float64 when it is an array of these dtype kinds holding finite numbers, else None."""
    if isinstance(value, str | bytes):
        return None
    try:
        array = np.asarray(value)
    except ValueError:
        return None
    if array.dtype.kind not in kinds:
        return None
    with np.errstate(all="ignore"):
        numbers = array.astype(np.float64)
    return numbers if np.isfinite(numbers).all() else None


def _choice_valid(arguments: dict[str, Any]) -> bool:
    rewards, prior, bounds = (_real(arguments[name]) for name in ("rewards", "prior", "bounds"))
    rank = _real(arguments["rank"], "iu")
    if rewards is None or rewards.ndim != 2 or rewards.shape[0] != K:
        return False
    if bounds is None or bounds.shape != (2,) or not bounds[0] < bounds[1]:
        return False
    if prior is None or prior.shape != (K,) or rank is None or rank.shape != (K,):
        return False
    if not np.array_equal(np.sort(rank), np.arange(K)):
        return False
    if any(((x < bounds[0]) | (x > bounds[1])).any() for x in (rewards, prior)):
        return False
    noise = arguments["noise"]
    if noise is None:
        return arguments["constants"]["scale"] == 0.0
    noise = _real(noise)
    return noise is not None and noise.shape == rewards.shape[::-1]


def _naive(arguments: dict[str, Any]) -> list[int]:
    rewards = np.asarray(arguments["rewards"], dtype=np.float64)
    constants = arguments["constants"]
    bounds = np.asarray(arguments["bounds"], dtype=np.float64)
    noise = arguments["noise"]
    noise = np.zeros(rewards.shape[::-1]) if noise is None else np.asarray(noise, dtype=np.float64)
    return naive_choices(
        rewards, np.asarray(TEAMS, bool), np.asarray(arguments["prior"], dtype=np.float64),
        np.asarray(arguments["rank"]).astype(np.int64), constants["pseudo_count"], constants["exploration"],
        constants["explore"], constants["scale"], noise, float(bounds[1] - bounds[0]), constants["delay"],
    )  # fmt: skip


def choice_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_env.baselines import partial

    rng = np.random.default_rng(case["seed"])
    arguments = _base(rng)
    argument, mutation = case["argument"], case["mutation"]
    if arguments[argument] is None:
        arguments[argument] = np.zeros((T, K))
    arguments[argument] = _mutate(arguments[argument], argument, mutation, rng)
    ok = _choice_valid(arguments)
    try:
        chosen = partial.partial_choices(
            arguments["rewards"], np.asarray(TEAMS, bool), arguments["prior"], arguments["rank"],
            bounds=arguments["bounds"], noise=arguments["noise"], **arguments["constants"],
        )  # fmt: skip
    except ValueError as error:
        message = str(error)
        if ok:
            return "wrong", f"refused a valid {argument}: {message[:250]}"
        if not any(name in message for name in (*ARGUMENTS, "scale")) or "\n" in message or len(message) > 600:
            return "bad_error", f"the message names no argument in one line: {message[:250]}"
        return "refused", message[:300]
    except Exception as error:  # anything but the documented refusal
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    if not ok:
        return "wrong", f"took an invalid {argument} ({mutation})"
    expected = _naive(arguments)
    if np.asarray(chosen).tolist() != expected:
        return "wrong", f"chose {np.asarray(chosen).tolist()}, the naive rule {expected}"
    return "accepted", ""


# -- the seeds -------------------------------------------------------------------------------------------------------
def _seed_value(spec: dict[str, Any]) -> Any:
    if spec["kind"] == "pair":
        return [1, 2]
    return build(spec)


def _seed_valid(seed: Any, optional: bool) -> bool:
    if seed is None:
        return optional
    return isinstance(seed, int | np.integer) and not isinstance(seed, bool | np.bool_) and seed >= 0


def _at_entry(entry: str, seed: Any) -> Any:
    from ensemble_env.baselines import partial, pooling, registry, simple
    from ensemble_env.baselines.outcomes import team_outcomes
    from ensemble_env.cache.augment import permuted_copies
    from ensemble_env.cache.convert.splits import split_by_task
    from ensemble_env.synthetic import make_cache

    cache = make_cache(n_models=2, n_questions=60, n_tasks=3, seed=0)
    if entry == "certified_teams":
        return pooling.certified_teams(np.zeros((2, 4)), np.zeros((2, 4), bool), np.ones((2, 4)), np.zeros(4, int), 1,
                                       np.array([1, 2]), seed=seed)  # fmt: skip
    if entry == "choose_strength":
        return pooling.choose_strength(np.zeros((2, 6)), np.array([0, 0, 0, 1, 1, 1]), 2, np.ones(2), seed=seed)
    if entry == "estimate_teams":
        outcomes = team_outcomes(cache, np.arange(cache.n_questions))
        return pooling.estimate_teams(cache, outcomes.rewards, np.asarray(cache.tasks), outcomes.share, seed=seed)
    if entry == "Setting":
        return registry.Setting(cache, cache.select("train"), cache.select("test"), seed=seed)
    if entry == "permuted_copies":
        return permuted_copies(cache, 1, seed=seed).scores
    if entry == "thompson_team":
        held = cache.select(tasks=["task_0"])
        return partial.thompson_team(cache, np.setdiff1d(np.arange(cache.n_questions), held), held, seed=seed,
                                     scales=(0.1,), pseudo_counts=(1.0,)).teams  # fmt: skip
    if entry == "random_team":
        return simple.random_team(cache, cache.select("train"), cache.select("test"), k=1, seed=seed).teams
    if entry == "make_cache":
        return make_cache(n_models=2, n_questions=10, seed=seed).scores
    return split_by_task(np.zeros(10, dtype=int), 0.2, seed=seed)


def seed_case(case: dict[str, Any]) -> tuple[str, str]:
    entry = case["entry"]
    seed = _seed_value(case["spec"])
    ok = _seed_valid(seed, SEED_ENTRIES[entry])
    try:
        first = _at_entry(entry, seed)
    except ValueError as error:
        message = str(error)
        if ok:
            return "wrong", f"{entry} refused the valid seed {seed!r}: {message[:200]}"
        if "seed" not in message or "\n" in message or len(message) > 400:
            return "bad_error", f"{entry}: the message does not name the seed in one line: {message[:250]}"
        return "refused", message[:300]
    except Exception as error:
        return "bad_error", f"{entry}: {type(error).__name__}: {str(error)[:250]}"
    if not ok:
        return "wrong", f"{entry} took the seed {seed!r} ({type(seed).__name__})"
    if seed is not None and isinstance(first, np.ndarray) and not np.array_equal(first, _at_entry(entry, seed)):
        return "wrong", f"{entry}: the same seed {seed!r} drew differently"
    return "accepted", ""


def _seed_spec(rng: np.random.Generator) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.35:
        return {"kind": "python", "value": NUMBERS[int(rng.integers(len(NUMBERS)))], "bool": bool(rng.random() < 0.1)}
    if roll < 0.7:
        value = NUMBERS[int(rng.integers(len(NUMBERS)))]
        return {"kind": "numpy", "values": [value], "dtype": str(rng.choice(DTYPES)), "shape": []}
    if roll < 0.8:
        return {"kind": "pair"}
    if roll < 0.88:
        return {"kind": "list", "values": [int(rng.choice([0, 1]))], "depth": 1}
    return {"kind": "other", "name": str(rng.choice(OTHERS))}


def cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    found: list[dict[str, Any]] = []
    while len(found) < n:
        if rng.random() < 0.5:
            argument, mutation = str(rng.choice(ARGUMENTS)), str(rng.choice(MUTATIONS))
            case = {"type": "choice", "argument": argument, "mutation": mutation,
                    "kind": f"partial_choices.{argument} {mutation}"}  # fmt: skip
        else:
            entry, spec = str(rng.choice(list(SEED_ENTRIES))), _seed_spec(rng)
            if spec["kind"] not in ("pair",) and not buildable(spec):
                continue
            case = {
                "type": "seed",
                "entry": entry,
                "spec": spec,
                "kind": f"seed at {entry} {spec.get('dtype', spec['kind'])}",
            }
        case["seed"] = int(seed * 1_000_003 + len(found))
        found.append(case)
    return found


def partial_seeds_case(case: dict[str, Any]) -> tuple[str, str]:
    return choice_case(case) if case["type"] == "choice" else seed_case(case)


def suite(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    chosen = cases(slow_size(1000) if slow else 60, seed=49 if slow else 5)
    return run_cases(MODULE, "partial_seeds_case", chosen, workdir, CASE_SECONDS), 0


SUITES = {"partial rules' choice function and seeds": suite}


def test_partial_choices_and_seeds_are_refused_naming_them_or_taken(tmp_path: Path) -> None:
    results, _ = suite(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 15 and counts["accepted"] > 10, dict(counts)


@pytest.mark.slow
def test_many_partial_choices_and_seeds(tmp_path: Path) -> None:
    results, _ = suite(tmp_path, slow=True)
    assert len(results) == slow_size(1000) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the partial rules' choice function and seed fuzz and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
