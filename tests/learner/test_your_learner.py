"""examples/register_rl_learner.py, the RL learner of docs/your-learner.md: it registers through ``--register``,
trains, chooses on validation and answers test through ``ensemble-env benchmark``, at a tiny budget on a synthetic
cache; it reads no test label, and a seed reproduces it."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("torch")

from testing.caches import flip_labels

from ensemble_env.cache import save_cache
from ensemble_env.synthetic import make_cache
from ensemble_mappo import benchmark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "register_rl_learner.py"


def _example() -> ModuleType:
    """The example loaded as ``--register`` loads it (a module outside sys.modules)."""
    spec = importlib.util.spec_from_file_location("register_rl_learner_under_test", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cache():
    """Three tasks, four models of different skill; a quarter of the train questions moved to validation."""
    cache = make_cache(n_models=4, n_questions=480, n_tasks=3, accuracy=[0.45, 0.55, 0.65, 0.8], seed=2)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2
    return dataclasses.replace(cache, split=split)


@pytest.mark.slow
def test_the_rl_learner_registers_and_runs_in_the_benchmark_at_a_tiny_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(benchmark.registry, "ALGORITHMS", dict(benchmark.registry.ALGORITHMS))  # left as found
    benchmark.load_plugins([str(EXAMPLE)])  # what --register does
    _, config = benchmark.registry.ALGORITHMS["reinforce_decider"]
    assert config["updates"] == 300 and config["version"] == 1  # the budget is part of the run key

    example = _example()
    tiny = example.Budget(updates=4, num_envs=8, num_steps=8, eval_every=2, episode_length=32)
    benchmark.register_algorithm("reinforce_tiny", config=dataclasses.asdict(tiny))(example.make_learner(tiny))
    cache = _cache()
    cache_file = str(save_cache(tmp_path / "pool.h5", cache))
    out = tmp_path / "bench"
    names = ["reinforce_tiny", "static_team", "best_single"]
    results = benchmark.benchmark(names, range(2), [cache_file], out, progress=False, plot=False)

    entry = results["caches"][cache_file]["reinforce_tiny"]
    assert [run["seed"] for run in entry["runs"]] == [0, 1] and not entry["uses_test_labels"]
    for run in entry["runs"]:
        info = run["info"]
        assert [update for update, _ in info["validation_curve"]] == [0, 2, 4]  # the start, then every 2 updates
        best = max(value for _, value in info["validation_curve"])
        assert info["validation_reward"] == best and info["chosen_update"] in (0, 2, 4)
        assert info["train_steps"] == 4 * 8 * 8
    saved = sorted((out / "runs").glob("*/reinforce_tiny-seed*/validation.json"))
    assert len(saved) == 2 and json.loads(saved[0].read_text())["chosen_update"] in (0, 2, 4)
    table = (out / "results.md").read_text(encoding="utf-8")
    assert all(f"| {name} |" in table for name in names) and "| reinforce_tiny | static_team |" in table


@pytest.mark.slow
def test_the_rl_learner_reads_no_test_label_and_a_seed_reproduces_it(tmp_path: Path) -> None:
    example = _example()
    tiny = example.Budget(updates=3, num_envs=8, num_steps=8, eval_every=1, episode_length=32)
    learner = example.make_learner(tiny)
    cache = _cache()
    test = cache.select("test")
    flipped = flip_labels(cache, test)  # every test answer now wrong
    runs = []
    for name, pool in (("first", cache), ("again", cache), ("flipped", flipped)):
        (tmp_path / name).mkdir()  # the benchmark gives each run a folder of its own
        runs.append(learner(pool, 0, 1.0, tmp_path / name))
    first, again, other = runs
    for answers in (again, other):
        np.testing.assert_array_equal(answers.questions, first.questions)
        np.testing.assert_array_equal(answers.predictions, first.predictions)
        np.testing.assert_array_equal(answers.teams, first.teams)
        assert answers.info == first.info
    np.testing.assert_array_equal(first.questions, test)  # the test split once, in the cache's order
    assert first.teams.dtype == np.bool_ and first.teams.any(axis=1).all()
