"""Seeded fuzzing of ``EnsembleVectorEnv.set_state``: value corruptions of real snapshots (issue "Reliability,
round 2", problem 2).

Every case takes the snapshot of an engine that has played (``get_state()`` after 0, a few or many steps, across
episode ends), corrupts it (one element set to a hostile value, two elements swapped, an array filled, the
generator's words scrambled) and restores it in a fresh engine of the same configuration. Each must either be
refused with a ValueError naming the field (``refused``), or be a valid state that then steps fine: every
observation finite and inside its space, every reward inside ``reward_range``, every info finite
(``accepted``; ``equal`` when the corruption changed nothing). Anything else is ``wrong`` (accepted, then bad
values or an exception) or ``bad_error`` (another exception, or a message without the field).

The cases run in watchdog worker processes (tests/fuzzing.py), so a kernel reading or writing out of bounds
shows up as a ``crash`` (the worker killed by a signal) instead of taking pytest down. The default run tries a
few hundred corruptions; ``--run-slow`` thousands. ``python tests/game/test_fuzz_snapshots.py [--slow]`` prints the
table.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ensemble_env
from ensemble_env.cache import datasets
from ensemble_env.game.actions import decider_space
from ensemble_env.game.config import EnvConfig, unseen_game
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.game.records import Counter
from ensemble_env.metrics import METRICS
from ensemble_env.synthetic import make_cache

if __name__ == "__main__":  # run as a script: the helper is in tests/ (under pytest, tests/conftest.py adds it)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzing import BAD, bad, count, run_cases, slow_size, suites_main

#: a case may take this long (the first one of a worker may compile the validation kernel)
CASE_SECONDS = 120.0
#: the engines the snapshots come from: (cache, options, num_envs, autoreset); "parallel" is a PettingZoo view's
CONFIGS: dict[str, tuple[str, dict[str, Any], int, bool]] = {
    "bbh5": (
        "bbh5",
        dict(
            window=6,
            episode_length=10,
            metrics=tuple(METRICS),
            decider_extras=("model_accuracy", "task", "features"),
            fusion_extras=("task",),
            reward_history=5,
            diversity_bonus=0.3,
            split="all",
        ),
        3,
        True,
    ),
    "shuffled": (
        "costs4",
        dict(
            order="shuffled",
            episode_length=8,
            window=3,
            use_costs=True,
            min_team_size=1,
            size_penalty_mode="always",
            metrics=("focal_diversity", "plurality_accuracy", "fleiss_kappa"),
            initial_team=(0, 2),
            decider_action="subset",
        ),
        2,
        True,
    ),
    "rows": (
        "pool13",
        dict(window=5, metrics=("plurality_accuracy", "binary_entropy", "focal_diversity"), reward_history=0),
        2,
        False,
    ),
    "parallel": ("tiny3", dict(window=30, episode_length=12, split="all", decider_action="multidiscrete"), 1, False),
    # EnsembleUnseen-v1: one task per episode (cut by episode_length; whole, stepped past its end without a reset),
    # the task's records (with team_record), the deck of tasks
    "unseen": ("costs4", dict(unseen_game(4), episode_length=7, window=4, split="all", reward_history=3), 3, True),
    "unseen_past": ("uneven4", dict(unseen_game(4), window=9, split="all"), 2, False),
    # EnsembleUnseen-v2: partial feedback (what was revealed: the window's answering teams, the revealed counts)
    "unseen_v2": (
        "costs4",
        dict(unseen_game(4, version=2), episode_length=7, window=4, split="all", metrics=tuple(METRICS)),
        3,
        True,
    ),
    "team_past": ("uneven4", dict(unseen_game(4, version=2), window=9, split="all", diversity_bonus=0.3), 2, False),
}
#: steps played before each snapshot (across episode ends: the episodes are shorter)
VARIANTS = (0, 3, 27)


def _cache(name: str) -> Any:
    if name == "bbh5":
        return datasets.resolve("bbh5")
    if name == "costs4":
        return make_cache(n_models=4, n_questions=40, n_tasks=2, n_choices=(2, 4), costs=[1.0, 2.0, 0.5, 3.0], seed=1)
    if name == "uneven4":  # tasks of 5 and 20 questions: a copy past the end of the short one keeps answering
        pool = make_cache(n_models=4, n_questions=40, n_tasks=2, n_choices=(2, 4), seed=4)
        return pool.subset(np.flatnonzero((pool.tasks == 1) | (np.cumsum(pool.tasks == 0) <= 5)))
    if name == "pool13":
        return make_cache(n_models=13, n_questions=30, n_tasks=3, n_choices=3, seed=2)
    return make_cache(n_models=3, n_questions=20, n_tasks=1, n_choices=5, seed=3)


_BUILT: dict[str, Any] = {}


def _engine(config: str) -> EnsembleVectorEnv:
    cache_name, options, num_envs, autoreset = CONFIGS[config]
    if cache_name not in _BUILT:
        _BUILT[cache_name] = _cache(cache_name)
    cache = _BUILT[cache_name]
    if config == "parallel":
        return ensemble_env.parallel_env(cache, **options).engine
    return EnsembleVectorEnv(cache, EnvConfig.from_options(options), num_envs, autoreset=autoreset)


def _random_actions(engine: EnsembleVectorEnv, rng: np.random.Generator) -> dict[str, np.ndarray]:
    space = decider_space(engine.config.decider_action, engine.n_models)
    space.seed(int(rng.integers(2**31)))
    teams = []
    while len(teams) < engine.num_envs:
        action = space.sample()
        try:
            engine.decode_decider(np.stack([action] * engine.num_envs))
        except ValueError:  # below min_team_size
            continue
        teams.append(action)
    return {"decider": np.stack(teams), "fusion": rng.integers(-1, engine.max_choices + 1, size=engine.num_envs)}


def _advance(engine: EnsembleVectorEnv, actions: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One step without auto-reset (what the PettingZoo view does): the rewards and episode ends."""
    _, reward, done = engine.advance(engine.decode_decider(actions["decider"]), engine.decode_fusion(actions["fusion"]))
    return reward, done


def _play(engine: EnsembleVectorEnv, steps: int, rng: np.random.Generator) -> None:
    """``steps`` steps; an engine without auto-reset is reset when its episode is over (as the PettingZoo view)."""
    for _ in range(steps):
        actions = _random_actions(engine, rng)
        if engine.autoreset:
            engine.step(actions)
        else:
            _, done = _advance(engine, actions)
            if done.all():
                return  # the snapshot of a finished episode (POS == episode_length)


_BASES: dict[tuple[str, int], dict[str, np.ndarray]] = {}
_TARGETS: dict[str, EnsembleVectorEnv] = {}


def base_snapshot(config: str, variant: int) -> dict[str, np.ndarray]:
    key = (config, variant)
    if key not in _BASES:
        engine = _engine(config)
        engine.reset(seed=variant + 1)
        _play(engine, VARIANTS[variant], np.random.default_rng(variant))
        _BASES[key] = engine.get_state()
    return {name: array.copy() for name, array in _BASES[key].items()}


def _target(config: str) -> EnsembleVectorEnv:
    if config not in _TARGETS:
        _TARGETS[config] = _engine(config)
    return _TARGETS[config]


# -- corruptions ---------------------------------------------------------------------------------------------


def _hostile_values(array: np.ndarray, index: tuple[int, ...], engine: EnsembleVectorEnv, rng: np.random.Generator):
    """Candidate values for one element: boundaries of the game's dimensions, of the dtype, and random ones."""
    original = array[index]
    if array.dtype.kind == "f":
        candidates = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -original]
        candidates += [original + 0.5, np.nextafter(original, np.inf), float(rng.uniform(-3, 3))]
        return candidates
    info = np.iinfo(array.dtype)
    dims = [engine.cache.n_questions, engine.questions.size, engine.n_models, engine.config.window]
    dims += [engine.episode_length, engine.max_choices, 2**engine.n_models]
    candidates = [int(original) + 1, int(original) - 1, -1, 0, 1, 2, 3, 255, 256, 2**31 - 1, -(2**31), 2**62]
    drawn = int(rng.integers(info.min, info.max, dtype=np.int64 if info.min < 0 else np.uint64))
    candidates += [info.min, info.max, drawn]
    candidates += [d + delta for d in dims for delta in (-1, 0, 1)]
    candidates += [int(engine.questions[rng.integers(engine.questions.size)])]
    if array.dtype == np.uint64:
        candidates += [int(original) ^ (1 << int(rng.integers(64))), int(original) ^ 1]
    return [value for value in candidates if info.min <= value <= info.max]


def corrupt(snapshot: dict[str, np.ndarray], engine: EnsembleVectorEnv, rng: np.random.Generator) -> tuple[str, str]:
    """Corrupt ``snapshot`` in place; returns the field and a description."""
    names = sorted(name for name in snapshot if name != "signature" and snapshot[name].size > 0)
    field = names[rng.integers(len(names))]
    array = snapshot[field]
    how = rng.random()
    if array.size >= 2 and how < 0.15:  # two elements swapped (a permutation that may still look valid)
        flat = array.reshape(-1)
        i, j = rng.choice(flat.size, size=2, replace=False)
        flat[i], flat[j] = flat[j], flat[i]
        return field, f"swap {i} {j}"
    if how < 0.22:  # the whole array (or one copy's row) filled with one value
        index = tuple(int(rng.integers(size)) for size in array.shape)
        value = rng.choice(np.array(_hostile_values(array, index, engine, rng), dtype=object))
        if rng.random() < 0.5 and array.ndim >= 2:
            array[index[0]] = value
            return field, f"row {index[0]} = {value!r}"
        array[...] = value
        return field, f"all = {value!r}"
    if how < 0.3 and field == "counters":  # the counters of one copy moved together by d steps
        env, d = int(rng.integers(array.shape[0])), int(rng.choice([-2, -1, 1, 2, 5, 100]))
        for column in (Counter.POS, Counter.ANSWERED, Counter.COUNT, Counter.HEAD):
            array[env, column] += d
        return field, f"copy {env} counters moved by {d}"
    index = tuple(int(rng.integers(size)) for size in array.shape)
    values = _hostile_values(array, index, engine, rng)
    value = values[rng.integers(len(values))]
    array[index] = value
    return field, f"[{', '.join(map(str, index))}] = {value!r}"


def _check_plays(engine: EnsembleVectorEnv, rng: np.random.Generator) -> str | None:
    """Step a restored engine; None when every observation, reward and info stays valid, else what went wrong."""
    layout = engine.layout
    low, high = engine.reward_range
    steps = 2 * (engine.config.window + engine.episode_length) + 3
    for step in range(steps):
        obs = engine.observations
        for agent, lo, hi in (
            ("decider", layout.decider_low, layout.decider_high),
            ("fusion", layout.fusion_low, layout.fusion_high),
        ):
            values = obs[agent]
            if not np.isfinite(values).all():
                return f"step {step}: {agent} observation not finite"
            if (values < lo).any() or (values > hi).any():
                return f"step {step}: {agent} observation outside its space"
        for env in range(engine.num_envs):
            infos = engine.info_values(env)
            if not all(np.isfinite(value) for value in infos.values()):
                return f"step {step}: infos of copy {env} not finite: {infos}"
        actions = _random_actions(engine, rng)
        if engine.autoreset:
            _, rewards, _, _, _ = engine.step(actions)
            reward = rewards["fusion"]
        else:
            reward, done = _advance(engine, actions)
            if done.all():
                engine.reset()
        if (reward < np.float32(low) - 1e-6).any() or (reward > np.float32(high) + 1e-6).any():
            return f"step {step}: reward {reward} outside {engine.reward_range}"
    return None


def snapshot_case(case: dict[str, Any]) -> tuple[str, str]:
    """One corrupted snapshot restored in-process (run by the watchdog worker)."""
    config = case["config"]
    rng = np.random.default_rng(case["seed"])
    engine = _target(config)
    snapshot = base_snapshot(config, case["variant"])
    original = {name: array.copy() for name, array in snapshot.items()}
    if case["kind"] == "none":
        field, how = "", "unchanged"
    else:
        field, how = corrupt(snapshot, engine, rng)
    unchanged = all(
        snapshot[name].dtype == original[name].dtype
        and np.array_equal(snapshot[name], original[name], equal_nan=snapshot[name].dtype.kind == "f")
        for name in snapshot
    )
    try:
        engine.set_state(snapshot)
    except ValueError as error:
        message = str(error)
        if unchanged:
            return "wrong", f"{config}: the unchanged snapshot was refused: {message[:200]}"
        if field not in message or "\n" in message or len(message) > 700:
            return "bad_error", f"{config} {field} {how}: message does not name {field}: {message[:200]}"
        return "refused", f"{config} {field} {how}: {message[:200]}"
    except Exception as error:
        return "bad_error", f"{config} {field} {how}: {type(error).__name__}: {str(error)[:200]}"
    problem = _check_plays(engine, rng)
    if problem is not None:
        return "wrong", f"{config} {field} {how}: accepted, then {problem}"
    return ("equal" if unchanged else "accepted"), f"{config} {field} {how}"


def snapshot_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    cases = [
        {"kind": "none", "config": config, "variant": variant, "seed": 0}
        for config in CONFIGS
        for variant in range(len(VARIANTS))
    ]
    for _ in range(n):
        config = list(CONFIGS)[rng.integers(len(CONFIGS))]
        cases.append(
            {
                "kind": "corrupt",
                "config": config,
                "variant": int(rng.integers(len(VARIANTS))),
                "seed": int(rng.integers(2**31)),
            }
        )
    return cases


def suite_snapshots(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    cases = snapshot_cases(slow_size(3000) if slow else 240, seed=7 if slow else 1)
    return run_cases("test_fuzz_snapshots", "snapshot_case", cases, workdir, CASE_SECONDS), 0


# -- the tests -------------------------------------------------------------------------------------------------


def test_corrupted_snapshots_are_refused_or_play_validly(tmp_path: Path) -> None:
    results, _ = suite_snapshots(tmp_path, slow=False)
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    unchanged = [result for result in results if result["kind"] == "none"]
    assert [result["outcome"] for result in unchanged] == ["equal"] * len(unchanged)  # real snapshots restore
    assert counts["refused"] > len(results) // 2


@pytest.mark.slow
def test_many_corrupted_snapshots(tmp_path: Path) -> None:
    results, _ = suite_snapshots(tmp_path, slow=True)
    assert not set(count(results)) & set(BAD), f"{dict(count(results))}; first: {bad(results)[:5]}"


def main(argv: list[str] | None = None) -> int:
    return suites_main(
        "Run the crafted-snapshot fuzz and print its table row.", {"crafted snapshots": suite_snapshots}, argv
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
