"""Seeded fuzzing of the adapters' wrappers against the game (issue 34, "Reliability round 3", item 5).

The wrappers (``ensemble_env.adapters.wrappers`` and the single-role view of ``adapters.sb3``) must take exactly
what the game takes, and say what the game says when they refuse. Each suite is a differential test: the same
hostile input goes to the game and to the wrapper, and the two verdicts must agree.

- **fusion actions** (aligned credit): a hostile fusion action (Python and numpy numbers of every width, NaN,
  infinities, integers beyond 64 bits, booleans, text, ``None``, lists, arrays of odd shapes; in the weights game,
  weight vectors with values outside [0, 1], NaN, odd dtypes and shapes) is played by the game and scored by
  the wrappers at two entry points: :func:`~ensemble_env.adapters.wrappers.answer_reward` on the engine, and the
  look-ahead of ``SingleRoleEnv("decider", credit="aligned")`` whose fixed fuser plays it. Both refuse it with
  the game's own message when the game refuses it; otherwise the credit is the reward the game pays for it.
- **seeds**: every seed kind at ``SingleRoleEnv.reset`` (both roles) and ``PerChoiceFusion.reset``, against the
  game's :func:`~ensemble_env.game.engine.check_seed`: refused exactly when it refuses, and an accepted seed
  gives the game's observation for that seed.
- **aligned rollouts**: :func:`~ensemble_env.adapters.wrappers.aligned_decider_rewards` on random rollouts (empty
  ones included, any extra axes, every dtype, mismatched shapes), against a reference loop.
- **per-choice games**: ``PerChoiceFusion`` and ``SingleRoleEnv(fusion_view="per_choice")`` over every game the
  options build: accepted exactly for a decider and an answering fuser (``fusion_action="answer"``), refused
  naming the option otherwise.

Cases run in the watchdog workers of tests/fuzzing.py. The default ``pytest`` runs a quick part, ``--run-slow`` a
tenth of the full part, ``python tests/adapters/test_fuzz_wrappers.py --slow`` the full part and prints the rows of
docs/reliability.md.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the helpers are in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main
from testing.hostile import DTYPES, NUMBERS, OTHERS, build, buildable

CASE_SECONDS = 60.0
N_MODELS = 8  # toy8
MODULE = "test_fuzz_wrappers"


def _random_spec(rng: np.random.Generator, weights_game: bool) -> dict[str, Any]:
    """A random hostile fusion action: an answer (or, in the weights game, N weights) of every kind."""
    roll = rng.random()
    pool = NUMBERS if not weights_game else [*NUMBERS, 0.25, 0.75, 0.125, 1.0, 0.0] * 2
    if roll < 0.08:
        return {"kind": "other", "name": str(rng.choice(OTHERS))}
    if roll < 0.3 and not weights_game:
        return {"kind": "python", "value": pool[int(rng.integers(len(pool)))], "bool": bool(rng.random() < 0.1)}
    size = N_MODELS if weights_game else 1
    if rng.random() < 0.25:  # another size than the space's
        size = int(rng.choice([0, 1, 2, N_MODELS - 1, N_MODELS + 1, 2 * N_MODELS]))
    if weights_game:  # mostly valid weights, one or two entries hostile
        values: list[Any] = [float(x) for x in np.round(rng.random(size), 3)]
        for _ in range(int(rng.integers(0, 3))):
            if values:
                values[int(rng.integers(size))] = pool[int(rng.integers(len(pool)))]
    else:
        values = [pool[int(rng.integers(len(pool)))] for _ in range(size)]
    if rng.random() < 0.15:
        return {"kind": "list", "values": values, "depth": int(rng.integers(1, 3))}
    shapes: list[Any] = [[size]]
    if size == 1:
        shapes += [[], [1, 1]]
    if size and size % 2 == 0:
        shapes.append([2, size // 2])
    shape = shapes[int(rng.integers(len(shapes)))]
    dtype = str(rng.choice(DTYPES))
    if size == 1 and shape == [] and rng.random() < 0.5:
        return {"kind": "numpy", "values": values, "dtype": dtype, "shape": []}
    return {"kind": "array", "values": values, "dtype": dtype, "shape": shape}


# -- fusion actions --------------------------------------------------------------------------------------------------


class _Script:
    """A fixed fuser playing ``first``, then ``then`` from its second call on, each exactly as it is."""

    def __init__(self, first: Any, then: Any) -> None:
        self.actions, self.calls = [first, then], 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        out = np.empty(1, dtype=object)  # SingleRoleEnv takes element 0: the value itself, not a numpy copy of it
        out[0] = self.actions[min(self.calls, 1)]
        self.calls += 1
        return out


def _verdict(call: Any) -> tuple[str, Any]:
    """("ok", result), ("refused", message) for a ValueError, ("error", description) for another exception."""
    try:
        return "ok", call()
    except ValueError as error:
        return "refused", str(error)
    except Exception as error:
        return "error", f"{type(error).__name__}: {str(error)[:200]}"


def _same(game: tuple[str, Any], wrapper: tuple[str, Any], where: str) -> tuple[str, str] | None:
    """None when the wrapper's verdict is the game's; else the outcome and why."""
    if game[0] == "error":
        return "bad_error", f"the game itself: {game[1]}"
    if wrapper[0] == "error":
        return "bad_error", f"{where}: {wrapper[1]}"
    if game[0] != wrapper[0]:
        what = "accepted what the game refuses" if wrapper[0] == "ok" else "refused what the game accepts"
        return "wrong", f"{where} {what}: game {str(game[1])[:120]}, wrapper {str(wrapper[1])[:120]}"
    if game[1] != wrapper[1]:
        return "wrong", f"{where}: game {str(game[1])[:120]} but wrapper {str(wrapper[1])[:120]}"
    return None


def action_case(case: dict[str, Any]) -> tuple[str, str]:
    """One hostile fusion action, played by the game and scored by the wrappers (see the module docstring)."""
    import ensemble_env
    from ensemble_env.adapters.sb3 import SingleRoleEnv
    from ensemble_env.adapters.wrappers import answer_reward

    options = {"cache": "toy8", "episode_length": 20, "order": "shuffled", **case["options"]}
    value = build(case["spec"])
    rng = np.random.default_rng(case["seed"])
    seed, steps = int(rng.integers(2**31)), int(rng.integers(0, 6))
    team = np.ones(N_MODELS, np.int8)
    valid: Any = np.full(N_MODELS, 0.5, np.float32) if case["options"].get("fusion_action") == "weights" else 1

    def played(env: Any) -> Any:
        env.reset(seed=seed)
        for _ in range(steps):
            env.step({"decider": team, "fusion": valid})
        return env

    # 1. answer_reward on the engine, against the game's step with that action (the reward of the next question)
    game, wrapped = played(ensemble_env.parallel_env(**options)), played(ensemble_env.parallel_env(**options))
    game_verdict = _verdict(lambda: game.step({"decider": team, "fusion": value})[1]["fusion"])
    problem = _same(game_verdict, _verdict(lambda: answer_reward(wrapped.unwrapped.engine, value)), "answer_reward")
    if problem:
        return problem
    # 2. the aligned credit's look-ahead: the fixed fuser plays a valid action, then this one
    aligned = SingleRoleEnv("decider", credit="aligned", other=_Script(valid, value), **options)
    plain = SingleRoleEnv("decider", other=_Script(valid, value), **options)
    aligned.reset(seed=seed)
    plain.reset(seed=seed)
    first = plain.step(team)
    if first[2] or first[3]:  # an episode of one step: nothing to look ahead to (the credit is 0)
        return ("refused" if game_verdict[0] == "refused" else "accepted"), "one-step episode"
    game_verdict = _verdict(lambda: plain.step(team)[1])
    problem = _same(game_verdict, _verdict(lambda: aligned.step(team)[1]), "SingleRoleEnv aligned credit")
    if problem:
        return problem
    return ("refused", str(game_verdict[1])[:300]) if game_verdict[0] == "refused" else ("accepted", "")


def action_cases(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded fusion actions, a quarter of them in the weights game (a decider and a weighting fuser)."""
    rng = np.random.default_rng(seed)
    cases: list[dict[str, Any]] = []
    while len(cases) < n:
        weights = rng.random() < 0.25
        spec = _random_spec(rng, weights)
        if not buildable(spec):
            continue
        options = {"fusion_action": "weights"} if weights else {}
        kind = f"{'weights' if weights else 'answer'} {spec['kind']} {spec.get('dtype', '')}".strip()
        cases.append({"kind": kind, "spec": spec, "options": options, "seed": int(seed * 1_000_003 + len(cases))})
    return cases


def suite_actions(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = action_cases(slow_size(2000) if slow else 120, seed=31 if slow else 3)
    return run_cases(MODULE, "action_case", cases, workdir, CASE_SECONDS), 0


# -- seeds -----------------------------------------------------------------------------------------------------------

SEEDS: list[dict[str, Any]] = [
    *({"kind": "python", "value": value} for value in [0, 1, 7, "2**31", "2**32", "2**63", "2**64", "2**100", -1]),
    {"kind": "python", "value": "-2**70"},
    {"kind": "python", "value": 1, "bool": True},
    {"kind": "python", "value": 0, "bool": True},
    *({"kind": "numpy", "values": [7], "dtype": dtype, "shape": []} for dtype in DTYPES),
    {"kind": "numpy", "values": [-1], "dtype": "int64", "shape": []},
    {"kind": "numpy", "values": [-5], "dtype": "int8", "shape": []},
    {"kind": "numpy", "values": ["2**64-1"], "dtype": "uint64", "shape": []},
    {"kind": "numpy", "values": [255], "dtype": "uint8", "shape": []},
    *({"kind": "python", "value": value} for value in [7.0, 7.5, "nan", "inf", "-0.0"]),
    *({"kind": "array", "values": [7], "dtype": "int64", "shape": shape} for shape in ([], [1])),
    {"kind": "list", "values": [7], "depth": 1},
    *({"kind": "other", "name": name} for name in OTHERS),
]
#: where a seed goes in: (wrapper, role or None)
SEED_ENTRIES = [("SingleRoleEnv", "decider"), ("SingleRoleEnv", "fusion"), ("PerChoiceFusion", None)]


def seed_case(case: dict[str, Any]) -> tuple[str, str]:
    import ensemble_env
    from ensemble_env.adapters.sb3 import SingleRoleEnv
    from ensemble_env.adapters.wrappers import PerChoiceFusion
    from ensemble_env.game.engine import check_seed

    seed = build(case["spec"])
    wrapper, role = case["entry"]
    game = _verdict(lambda: check_seed(seed))
    if game[0] == "error":
        return "bad_error", f"check_seed: {game[1]}"
    if wrapper == "SingleRoleEnv":
        env: Any = SingleRoleEnv(role, cache="toy8")
        got = _verdict(lambda: env.reset(seed=seed)[0])
    else:
        env = PerChoiceFusion(ensemble_env.parallel_env("toy8"))
        got = _verdict(lambda: env.reset(seed=seed)[0]["decider"])
    if got[0] == "error":
        return "bad_error", got[1]
    if got[0] != game[0]:
        what = "accepted a seed the game refuses" if got[0] == "ok" else f"refused a seed the game takes: {got[1]}"
        return "wrong", what[:300]
    if got[0] == "refused":
        if (
            "seed must be None or a non-negative integer" not in got[1]
            or f"of type {type(seed).__name__}" not in got[1]
        ):
            return "bad_error", f"the message does not name the seed: {got[1][:200]}"
        if got[1].split(": ", 1)[1] != game[1].split(": ", 1)[1]:  # the game's words, after the entry point's name
            return "bad_error", f"not the game's message: {got[1][:200]}"
        return "refused", got[1][:300]
    expected, _ = ensemble_env.parallel_env("toy8").reset(seed=game[1])
    if not np.array_equal(got[1], expected[role or "decider"]):
        return "wrong", "another observation than the game's for this seed"
    return "accepted", ""


def seed_cases() -> list[dict[str, Any]]:
    return [
        {"kind": f"{entry[0]}({entry[1] or ''}) {spec.get('dtype', spec['kind'])}", "spec": spec, "entry": list(entry)}
        for spec in SEEDS
        for entry in SEED_ENTRIES
    ]


def suite_seeds(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    return run_cases(MODULE, "seed_case", seed_cases(), workdir, CASE_SECONDS), 0


# -- aligned rollouts ------------------------------------------------------------------------------------------------


def _reference(rewards: np.ndarray, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """aligned_decider_rewards by a plain loop over the time axis."""
    aligned = np.zeros(rewards.shape, dtype=np.float64)
    known = np.zeros(rewards.shape, dtype=bool)
    for index in np.ndindex(rewards.shape[1:]):
        for t in range(rewards.shape[0]):
            if done[(t, *index)]:
                continue
            if t + 1 < rewards.shape[0]:
                aligned[(t, *index)] = rewards[(t + 1, *index)]
                known[(t, *index)] = True
    return aligned, known


def _rollout_array(spec: dict[str, Any], shape: list[int], rng: np.random.Generator, done: bool) -> Any:
    size = math.prod(shape)
    kind = spec["dtype"]
    if kind == "str":
        return np.array([str(int(x)) for x in rng.integers(0, 2, size)]).reshape(shape)
    if kind == "object":
        return np.array([int(x) for x in rng.integers(0, 2, size)], dtype=object).reshape(shape)
    if kind == "list":
        return (rng.integers(0, 2, size) if done else rng.normal(size=size)).reshape(shape).tolist()
    if done:
        values = rng.integers(0, 2, size).astype(np.float64)
        if spec.get("odd") and size:
            values[int(rng.integers(size))] = spec["odd"]
        return values.astype(kind).reshape(shape)
    values = rng.normal(size=size) * 2
    if spec.get("odd") and size:
        values[int(rng.integers(size))] = spec["odd"]
    return values.astype(kind).reshape(shape)


def rollout_case(case: dict[str, Any]) -> tuple[str, str]:
    from ensemble_env.adapters.wrappers import aligned_decider_rewards

    rng = np.random.default_rng(case["seed"])
    rewards = _rollout_array(case["rewards"], case["shape"], rng, done=False)
    done = _rollout_array(case["done"], case["done_shape"], rng, done=True)
    r_array, d_array = np.asarray(rewards), np.asarray(done)
    done_ok = d_array.dtype.kind == "b" or (
        d_array.dtype.kind in "iuf" and bool(np.all((d_array == 0) | (d_array == 1)))
    )
    valid = r_array.dtype.kind in "biuf" and done_ok and r_array.shape == d_array.shape and r_array.ndim >= 1
    got = _verdict(lambda: aligned_decider_rewards(rewards, done))
    if got[0] == "error":
        return "bad_error", got[1]
    if got[0] == "refused":
        if valid:
            return "wrong", f"refused a valid rollout: {got[1][:200]}"
        if "rewards" not in got[1] and "done" not in got[1]:
            return "bad_error", f"the message names neither argument: {got[1][:200]}"
        return "refused", got[1][:300]
    if not valid:
        return "wrong", "accepted an invalid rollout"
    aligned, known = got[1]
    expected, expected_known = _reference(r_array.astype(np.float64), d_array.astype(bool))
    if not (np.array_equal(aligned, expected, equal_nan=True) and np.array_equal(known, expected_known)):
        return "wrong", "another result than the reference loop's"
    return "accepted", ""


def rollout_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    reward_kinds = ["float64", "float64", "float32", "float16", "int64", "int8", "bool", "str", "object", "list"]
    done_kinds = ["bool", "bool", "bool", "int64", "uint8", "float64", "str", "object", "list"]
    odd_values = [0, 0, 0, float("nan"), float("inf"), 0.5, 2.0, -1.0]
    cases = []
    for index in range(n):
        steps = int(rng.choice([0, 0, 1, 2, 3, 7, 40]))
        shape = [steps, *[int(x) for x in rng.integers(0, 4, int(rng.integers(0, 3)))]]
        done_shape = list(shape)
        if rng.random() < 0.1:
            done_shape = done_shape[:-1] if len(done_shape) > 1 else [steps + 1]
        if rng.random() < 0.03:
            shape, done_shape = [], []
        rewards = {"dtype": str(rng.choice(reward_kinds)), "odd": float(rng.choice(odd_values))}
        done = {"dtype": str(rng.choice(done_kinds)), "odd": float(rng.choice(odd_values))}
        cases.append(
            {
                "kind": f"T={steps} rewards {rewards['dtype']} done {done['dtype']}",
                "shape": shape,
                "done_shape": done_shape,
                "rewards": rewards,
                "done": done,
                "seed": int(seed * 1_000_003 + index),
            }
        )
    return cases


def suite_rollouts(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = rollout_cases(slow_size(1000) if slow else 100, seed=41 if slow else 4)
    return run_cases(MODULE, "rollout_case", cases, workdir, CASE_SECONDS), 0


# -- per-choice games ------------------------------------------------------------------------------------------------

GAME_OPTIONS = {
    "decider": [True, False],
    "fusion_action": ["answer", "weights"],
    "fusion_agents": ["one", "per_model"],
    "fusion_extras": [(), ("task",)],
    "decider_action": ["multibinary", "subset"],
}


def per_choice_case(case: dict[str, Any]) -> tuple[str, str]:
    import ensemble_env
    from ensemble_env.adapters.sb3 import SingleRoleEnv
    from ensemble_env.adapters.wrappers import PerChoiceFusion

    options = {key: tuple(value) if isinstance(value, list) else value for key, value in case["options"].items()}
    built = _verdict(lambda: ensemble_env.parallel_env("toy8", **options))
    if built[0] != "ok":
        return "bad_error", f"not a game: {built[1]}"  # the cases hold only games the options build
    env = built[1]
    answering = env.possible_agents == ["decider", "fusion"] and options["fusion_action"] == "answer"
    if case["entry"] == "PerChoiceFusion":
        got = _verdict(lambda: PerChoiceFusion(env))
        expected_words = "fusion_action=" if env.possible_agents == ["decider", "fusion"] else "needs the agents"
    else:
        got = _verdict(lambda: SingleRoleEnv("fusion", cache="toy8", fusion_view="per_choice", **options))
        if "fusion" not in env.possible_agents:
            expected_words = "not an agent of this game"
        else:
            expected_words = "fusion_action="
        answering = options["fusion_action"] == "answer" and "fusion" in env.possible_agents
    if got[0] == "error":
        return "bad_error", got[1]
    if got[0] == "refused":
        if answering:
            return "wrong", f"refused an answering game: {got[1][:200]}"
        if expected_words not in got[1]:
            return "bad_error", f"the message does not name the option: {got[1][:200]}"
        return "refused", got[1][:300]
    if not answering:
        return "wrong", "accepted a game without an answering fusion agent"
    wrapped = got[1]
    if case["entry"] == "PerChoiceFusion":
        obs, _ = wrapped.reset(seed=0)
        for _ in range(5):
            if not wrapped.observation_space("fusion").contains(obs["fusion"]):
                return "wrong", "a per-choice observation outside its space"
            actions = {agent: wrapped.action_space(agent).sample() for agent in wrapped.agents}
            obs = wrapped.step(actions)[0]
    else:
        obs, _ = wrapped.reset(seed=0)
        if not wrapped.observation_space.contains(obs):
            return "wrong", "a per-choice observation outside its space"
    return "accepted", ""


def per_choice_cases() -> list[dict[str, Any]]:
    import itertools

    import ensemble_env

    cases = []
    for values in itertools.product(*GAME_OPTIONS.values()):
        options = dict(zip(GAME_OPTIONS, values, strict=True))
        try:
            ensemble_env.parallel_env("toy8", **options)
        except ValueError:
            continue  # not a game: the game refuses the options itself
        for entry in ("PerChoiceFusion", "SingleRoleEnv"):
            kind = f"{entry} " + " ".join(f"{key}={value}" for key, value in options.items())
            cases.append(
                {
                    "kind": kind,
                    "entry": entry,
                    "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
                }
            )
    return cases


def suite_per_choice(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    return run_cases(MODULE, "per_choice_case", per_choice_cases(), workdir, CASE_SECONDS), 0


SUITES = {
    "wrapper fusion actions": suite_actions,
    "wrapper seeds": suite_seeds,
    "aligned rollouts": suite_rollouts,
    "per-choice games": suite_per_choice,
}


# -- the tests -------------------------------------------------------------------------------------------------------


def test_fusion_actions_are_judged_as_the_game_judges_them(tmp_path: Path) -> None:
    results, _ = suite_actions(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 20 and counts["accepted"] > 20, dict(counts)


def test_seeds_are_taken_as_the_game_takes_them(tmp_path: Path) -> None:
    results, _ = suite_seeds(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["accepted"] >= 3 * 19 and counts["refused"] >= 3 * 29, dict(counts)


def test_aligned_rollouts_match_the_reference_or_are_refused(tmp_path: Path) -> None:
    results, _ = suite_rollouts(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 10 and counts["accepted"] > 30, dict(counts)


def test_per_choice_views_take_only_answering_games(tmp_path: Path) -> None:
    results, _ = suite_per_choice(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert counts["refused"] > 0 and counts["accepted"] > 0, dict(counts)


@pytest.mark.slow
def test_many_fusion_actions_and_rollouts(tmp_path: Path) -> None:
    for suite in (suite_actions, suite_rollouts):
        results, _ = suite(tmp_path / suite.__name__, slow=True)
        assert not set(count(results)) & set(BAD), f"{dict(count(results))}; first: {bad(results)[:5]}"


def main(argv: list[str] | None = None) -> int:
    return suites_main("Run the wrapper fuzz suites and print their table rows.", SUITES, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
