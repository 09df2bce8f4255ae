"""Seeded fuzzing of the online baselines' arguments (issue 41, "Reliability round 4", class 4), and of the
partial-feedback rules' (:mod:`ensemble_env.baselines.partial`, issue 40's newest surface).

Each case gives one public function of :mod:`ensemble_env.baselines.online` (and
:func:`~ensemble_env.baselines.unseen.leave_one_task_out`, and the rules of :mod:`ensemble_env.baselines.partial` with
their :func:`~ensemble_env.baselines.partial.partial_choices`) one hostile argument, every other argument valid: numbers
of every width and kind (NaN, infinities, integers beyond 64 bits, booleans, text, ``None``, decimals, fractions,
complex numbers), lists and arrays where one number is expected, strings and mappings where a list is expected, and
arrays of rewards, ranks, shares, priors and bounds with another shape, another dtype, a NaN, a value out of range.

The verdict is known in advance from the argument's documented domain (:func:`valid`): a valid value must be taken
(and ``ftl_choices`` must then choose what a reference loop chooses), an invalid one refused with a ValueError naming
the argument; anything else (a refusal of a valid value, an invalid value taken, another exception, a message
without the argument's name) is counted against the function.

Cases run in the watchdog workers of tests/fuzzing.py; the default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/baselines/test_fuzz_online.py --slow`` the full part and prints its row.
"""

from __future__ import annotations

import math
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

CASE_SECONDS = 60.0
MODULE = "test_fuzz_online"
A, T = 3, 6  # arms x questions of the array cases
MAX_WINDOW, MAX_DELAY, MAX_REAL, MAX_GRID = 1_000_000, 2**31 - 1, 1e6, 64
MAX_CONSTANT = 1e12  # the partial rules' largest constant (a seed is any integer >= 0: ensemble_env.seeds)
SCALARS = ("window", "delay", "exploration", "pseudo_count", "explore", "scale", "seed")
GRIDS = ("windows", "explorations", "pseudo_counts", "explores", "scales")
#: the partial-feedback rules (their constants' domains differ from the online baselines')
PARTIAL = ("greedy_team", "etc_team", "partial_ucb_team", "thompson_team", "partial_choices")
#: (function, argument) pairs of the scalar and grid cases
SCALAR_TARGETS = [
    ("ftl_choices", "window"), ("ftl_choices", "delay"), ("ucb_choices", "exploration"),
    ("ucb_choices", "pseudo_count"), ("ucb_choices", "delay"), ("ftl_team", "window"), ("ftl_team", "delay"),
    ("ftl_team_window", "windows"), ("ucb_team", "explorations"), ("ucb_team", "pseudo_counts"),
    ("leave_one_task_out", "names"), ("global_team", "reward"), ("team_outcomes", "reward"),
    ("reward_range", "reward"), ("ftl_single", "cache"),
    ("greedy_team", "pseudo_counts"), ("etc_team", "explores"), ("etc_team", "pseudo_counts"),
    ("partial_ucb_team", "explorations"), ("partial_ucb_team", "pseudo_counts"), ("thompson_team", "scales"),
    ("thompson_team", "seed"), ("partial_choices", "pseudo_count"), ("partial_choices", "exploration"),
    ("partial_choices", "explore"), ("partial_choices", "scale"), ("partial_choices", "delay"),
]  # fmt: skip
#: (function, argument) pairs of the array cases
ARRAY_TARGETS = [
    ("ftl_choices", "rewards"), ("ftl_choices", "rank"), ("ucb_choices", "rewards"), ("ucb_choices", "rank"),
    ("ucb_choices", "prior"), ("ucb_choices", "bounds"), ("prior_rank", "rewards"), ("prior_rank", "correct"),
    ("prior_rank", "share"),
]  # fmt: skip
MUTATIONS = ["none", "dtype", "shape", "nan", "inf", "range", "list", "string", "ragged"]


# -- the domain of each argument -------------------------------------------------------------------------------------
def _integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _real(value: Any) -> bool:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond float's range
        return False


def _scalar_valid(argument: str, value: Any, partial: bool = False, in_grid: bool = False) -> bool:
    if partial:  # ensemble_env.baselines.partial's domains: constants up to 1e12; a grid's m >= 1 and sigma > 0
        if argument in ("explore", "delay"):
            return _integer(value) and int(argument == "explore" and in_grid) <= value <= MAX_DELAY
        if argument == "seed":
            return _integer(value) and 0 <= value
        above = argument == "pseudo_count" or (argument == "scale" and in_grid)
        return _real(value) and (0 < float(value) if above else 0 <= float(value)) and float(value) <= MAX_CONSTANT
    if argument == "window":
        return value is None or (_integer(value) and 1 <= value <= MAX_WINDOW)
    if argument == "delay":
        return _integer(value) and 0 <= value <= MAX_DELAY
    if argument == "exploration":
        return _real(value) and 0 <= float(value) <= MAX_REAL
    return _real(value) and 0 < float(value) <= MAX_REAL  # pseudo_count


def valid(argument: str, value: Any, function: str = "") -> bool:
    """Whether ``value`` is in the documented domain of ``function``'s ``argument`` (of the scalar and grid cases)."""
    from ensemble_env.baselines.online import UNSEEN_BASELINES
    from ensemble_env.cache import LogitCache
    from ensemble_env.game.reward import RewardSettings

    partial = function in PARTIAL
    if argument in SCALARS:
        return _scalar_valid(argument, value, partial)
    if argument == "reward":
        return isinstance(value, RewardSettings)
    if argument == "cache":
        return isinstance(value, LogitCache)
    listed = isinstance(value, list | tuple | range) or (isinstance(value, np.ndarray) and value.ndim == 1)
    if not listed:
        return False
    items = list(value)
    if argument == "names":
        return all(isinstance(item, str) and item in UNSEEN_BASELINES for item in items)
    item = {"windows": "window", "explorations": "exploration", "pseudo_counts": "pseudo_count", "explores": "explore",
            "scales": "scale"}[argument]  # fmt: skip
    return 1 <= len(items) <= MAX_GRID and all(
        value is not None and _scalar_valid(item, value, partial, in_grid=True) for value in items
    )


# -- the values ------------------------------------------------------------------------------------------------------
def _scalar_value(case: dict[str, Any]) -> Any:
    from ensemble_env.cache import synthetic
    from ensemble_env.game.reward import RewardSettings

    spec = case["spec"]
    if spec["kind"] == "reward":
        return RewardSettings(alpha=0.5)
    if spec["kind"] == "cache":
        return synthetic.make_cache(n_models=2, n_questions=40, n_tasks=2, seed=0)  # the one the case's questions index
    if spec["kind"] == "names":
        return spec["names"] if spec.get("as") == "list" else ",".join(spec["names"])
    if spec["kind"] == "grid":
        items = [build(item) for item in spec["items"]]
        if spec["as"] == "tuple":
            return tuple(items)
        if spec["as"] == "array":
            with warnings.catch_warnings(), np.errstate(all="ignore"):  # a cast that overflows or drops a part
                warnings.simplefilter("ignore")
                return np.array(items, dtype=spec["dtype"])
        if spec["as"] == "range":
            return range(1, len(items) + 1)
        return items
    return build(spec)


def _scalar_spec(rng: np.random.Generator, argument: str) -> dict[str, Any]:
    roll = rng.random()
    if argument == "names":
        from ensemble_env.baselines.online import UNSEEN_BASELINES

        known = list(UNSEEN_BASELINES)
        names = [str(rng.choice([*known, "ftl_teams", "", "FTL_TEAM"])) for _ in range(int(rng.integers(1, 4)))]
        return {"kind": "names", "names": names, "as": "list" if roll < 0.6 else "string"}
    if argument in ("reward", "cache") and roll < 0.3:
        return {"kind": argument}
    if argument in GRIDS and roll < 0.7:
        size = int(rng.choice([0, 1, 2, 3, 5, MAX_GRID, MAX_GRID + 1]))
        items = [_number_spec(rng, valid_bias=0.8) for _ in range(min(size, 8))]
        items += [items[-1]] * (size - len(items)) if items else []
        shape = str(rng.choice(["list", "tuple", "array", "range"]))
        dtype = str(rng.choice(["int64", "float64", "uint8", "bool", "float16"]))
        return {"kind": "grid", "items": items, "as": shape, "dtype": dtype}
    return _number_spec(rng, valid_bias=0.3)


def _number_spec(rng: np.random.Generator, valid_bias: float) -> dict[str, Any]:
    """A spec of :func:`test_fuzz_wrappers.build`: mostly numbers (of ``valid_bias``: small ones), else anything."""
    roll = rng.random()
    if roll < valid_bias:
        return {"kind": "python", "value": int(rng.choice([1, 2, 8, 16, 32])) if rng.random() < 0.6 else 0.25}
    if roll < valid_bias + (1 - valid_bias) * 0.45:
        return {"kind": "python", "value": NUMBERS[int(rng.integers(len(NUMBERS)))], "bool": bool(rng.random() < 0.08)}
    if roll < valid_bias + (1 - valid_bias) * 0.8:
        dtype = str(rng.choice(DTYPES))
        return {"kind": "numpy", "values": [NUMBERS[int(rng.integers(len(NUMBERS)))]], "dtype": dtype, "shape": []}
    if roll < valid_bias + (1 - valid_bias) * 0.9:
        return {"kind": "list", "values": [int(rng.choice([1, 8]))], "depth": 1}
    return {"kind": "other", "name": str(rng.choice(OTHERS))}


def _array_value(case: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The arguments of an array case (the mutated one among valid ones) and whether they are valid."""
    rng = np.random.default_rng(case["seed"])
    rewards = np.round(rng.uniform(-2.0, 1.0, size=(A, T)), 3)
    arguments: dict[str, Any] = {"rewards": rewards, "rank": rng.permutation(A)}
    function, argument, mutation = case["function"], case["argument"], case["mutation"]
    if function == "ucb_choices":
        arguments.update(prior=np.round(rng.uniform(-2.0, 1.0, size=A), 3), bounds=(-2.0, 1.0))
        arguments.update(exploration=0.1, pseudo_count=2.0)
    if function == "prior_rank":
        arguments = {"rewards": rewards, "correct": rewards > 0, "share": np.round(rng.random((A, T)), 3)}
    value: Any = np.asarray(arguments[argument])
    if mutation == "dtype":
        with np.errstate(all="ignore"):
            value = value.astype(str(rng.choice(DTYPES)))
    elif mutation == "shape":
        shapes = [value.reshape(-1), value[None], value[..., :1], value[..., :0], value[:1], value[:0]]
        value = shapes[int(rng.integers(len(shapes)))]
    elif mutation in ("nan", "inf"):
        value = value.astype(np.float64)
        value.flat[int(rng.integers(value.size))] = np.nan if mutation == "nan" else -np.inf
    elif mutation == "range":
        value = value.astype(np.float64) if value.dtype.kind == "f" else value.copy()
        value.flat[int(rng.integers(value.size))] = (
            rng.choice([-3.0, 1.5, 5.0, -1e300]) if value.dtype.kind == "f" else A
        )
    elif mutation == "list":
        value = value.tolist()  # a list of the same numbers: the same array
    elif mutation == "string":
        value = str(value.tolist())
    elif mutation == "ragged":
        value = [[1.0], [1.0, 2.0]]
    arguments[argument] = value
    return arguments, _arrays_valid(function, arguments)


def _array(value: Any) -> np.ndarray | None:
    """``value`` as an array (None for a string or a ragged list)."""
    if isinstance(value, str | bytes):
        return None
    try:
        return np.asarray(value)
    except ValueError:
        return None


def _numbers(value: Any, ndim: int, kinds: str = "iuf") -> np.ndarray | None:
    """``value`` as float64 when it is an array of ``ndim`` dimensions of those dtype kinds and finite, else None."""
    array = _array(value)
    if array is None or array.dtype.kind not in kinds or array.ndim != ndim:
        return None
    with np.errstate(all="ignore"):
        numbers = array.astype(np.float64)
    return numbers if np.isfinite(numbers).all() else None


def _arrays_valid(function: str, arguments: dict[str, Any]) -> bool:
    """Whether the array arguments are in their documented domains (and agree with one another)."""
    rewards = _numbers(arguments["rewards"], 2)
    if rewards is None or rewards.shape[0] < 1:
        return False
    arms = rewards.shape[0]
    if function == "prior_rank":
        share = _numbers(arguments["share"], 2)
        correct = _array(arguments["correct"])
        return (
            rewards.shape[1] >= 1
            and correct is not None
            and correct.dtype == np.bool_
            and correct.shape == rewards.shape
            and share is not None
            and share.shape == rewards.shape
            and bool(((share >= 0) & (share <= 1)).all())
        )
    rank = _array(arguments["rank"])
    if rank is None or rank.dtype.kind not in "iu" or rank.shape != (arms,):
        return False
    if not np.array_equal(np.sort(rank.astype(np.int64)), np.arange(arms)):
        return False
    if function == "ftl_choices":
        return True
    bounds = _numbers(arguments["bounds"], 1)
    prior = _numbers(arguments["prior"], 1)
    if bounds is None or bounds.shape != (2,) or not bounds[0] < bounds[1] or prior is None or prior.shape != (arms,):
        return False
    return all(bool(((x >= bounds[0]) & (x <= bounds[1])).all()) for x in (rewards, prior))


def _reference_ftl(rewards: np.ndarray, rank: np.ndarray, window: int | None, delay: int) -> list[int]:
    """Follow the leader by a plain loop (ties to the lowest rank)."""
    window = None if window is None else int(window)  # Python arithmetic (a numpy uint64 would wrap below 0)
    choices = []
    for t in range(rewards.shape[1]):
        end = max(0, t - delay)
        start = 0 if window is None else max(0, end - window)
        scores = np.round(rewards[:, start:end].sum(axis=1), 9)
        best = scores.max()
        choices.append(min((k for k in range(rewards.shape[0]) if scores[k] == best), key=lambda k: rank[k]))
    return choices


def _call(function: str, arguments: dict[str, Any]) -> Any:
    from ensemble_env.baselines import online, partial, unseen
    from ensemble_env.baselines.outcomes import team_outcomes
    from ensemble_env.cache import synthetic

    if function in ("ftl_choices", "ucb_choices", "prior_rank", "reward_range"):
        return getattr(online, function)(**arguments)
    if function == "partial_choices":  # {a}, {b}, {a, b} on a stream of 5 questions (the function's example)
        stream = np.array([[-1.0] * 5, [1.0] * 5, [1.0] * 5])
        teams = np.array([[1, 0], [0, 1], [1, 1]], bool)
        return partial.partial_choices(
            stream, teams, [0.0, -1.0, -1.5], [0, 1, 2], **{"pseudo_count": 1.0, "noise": np.zeros((5, 3)), **arguments}
        )
    valid_cache = synthetic.make_cache(n_models=2, n_questions=40, n_tasks=2, seed=0)
    cache = arguments.pop("cache", valid_cache)
    if function == "team_outcomes":
        return team_outcomes(cache, **arguments)
    if function == "leave_one_task_out":
        return unseen.leave_one_task_out(cache, **arguments)
    held = valid_cache.select(tasks=["task_0"])
    train = np.setdiff1d(np.arange(valid_cache.n_questions), held)
    if function in PARTIAL:  # the rules choose their constants on two training tasks or more: three tasks here
        three = synthetic.make_cache(n_models=2, n_questions=60, n_tasks=3, seed=0)
        held = three.select(tasks=["task_0"])
        seeded = {"seed": 0, **arguments} if function == "thompson_team" else arguments
        return getattr(partial, function)(three, np.setdiff1d(np.arange(three.n_questions), held), held, **seeded)
    return getattr(online, function)(cache, train, held, **arguments)


def online_case(case: dict[str, Any]) -> tuple[str, str]:
    argument, function = case["argument"], case["function"]
    if "mutation" in case:
        arguments, ok = _array_value(case)
    else:
        value = _scalar_value(case)
        ok = valid(argument, value, function)
        arguments = {argument: value}
        if function == "ftl_choices":
            arguments = {"rewards": np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]]), "rank": [1, 0], **arguments}
        if function == "ucb_choices":
            arguments = {"rewards": [[1.0, -2.0], [0.0, 1.0]], "prior": [0.0, -1.0], "rank": [0, 1], "exploration": 0.1,
                         "pseudo_count": 2.0, **arguments}  # fmt: skip
    try:
        result = _call(function, dict(arguments))
    except ValueError as error:
        message = str(error)
        if ok:
            return "wrong", f"refused a valid {argument}: {message[:250]}"
        named = [argument] if "mutation" not in case else list(arguments)  # arrays must agree: any of them
        if not any(name in message for name in named) or "\n" in message or len(message) > 600:
            return "bad_error", f"the message does not name {argument} in one line: {message[:250]}"
        return "refused", message[:300]
    except Exception as error:  # anything but the documented refusal
        return "bad_error", f"{type(error).__name__}: {str(error)[:250]}"
    if not ok:
        return "wrong", f"took an invalid {argument}"
    if function == "ftl_choices":
        rewards = np.asarray(arguments["rewards"], dtype=np.float64)
        rank = np.asarray(arguments["rank"])
        expected = _reference_ftl(rewards, rank, arguments.get("window"), int(arguments.get("delay", 0)))
        if np.asarray(result).tolist() != expected:
            return "wrong", f"chose {np.asarray(result).tolist()}, the reference {expected}"
    return "accepted", ""


def _grid_buildable(spec: dict[str, Any]) -> bool:
    if not all(buildable(item) for item in spec["items"]):
        return False
    try:
        _scalar_value({"spec": spec})
    except (OverflowError, ValueError, TypeError):  # numpy refuses to build the array (2**31 into uint8, a list)
        return False
    return True


def online_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = []
    while len(cases) < n:
        if rng.random() < 0.5:
            function, argument = SCALAR_TARGETS[int(rng.integers(len(SCALAR_TARGETS)))]
            spec = _scalar_spec(rng, argument)
            if spec["kind"] in ("python", "numpy", "list", "other") and not buildable(spec):
                continue
            if spec["kind"] == "grid" and not _grid_buildable(spec):
                continue
            kind = spec.get("dtype", spec["kind"]) if spec["kind"] != "grid" else f"grid {spec['as']}"
            case = {"function": function, "argument": argument, "spec": spec, "kind": f"{function}.{argument} {kind}"}
        else:
            function, argument = ARRAY_TARGETS[int(rng.integers(len(ARRAY_TARGETS)))]
            mutation = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
            case = {"function": function, "argument": argument, "mutation": mutation,
                    "kind": f"{function}.{argument} {mutation}"}  # fmt: skip
        case["seed"] = int(seed * 1_000_003 + len(cases))
        cases.append(case)
    return cases


def suite_online(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = online_cases(slow_size(2000) if slow else 80, seed=41 if slow else 4)
    return run_cases(MODULE, "online_case", cases, workdir, CASE_SECONDS), 0


SUITES = {"online baselines' arguments": suite_online}


def test_online_arguments_are_refused_naming_them_or_taken(tmp_path: Path) -> None:
    results, _ = suite_online(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 20 and counts["accepted"] > 10, dict(counts)


@pytest.mark.slow
def test_many_online_arguments(tmp_path: Path) -> None:
    results, _ = suite_online(tmp_path, slow=True)
    assert len(results) == slow_size(2000) and not set(count(results)) & set(BAD), bad(results)[:5]


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the online baselines' argument fuzz and print its row.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
