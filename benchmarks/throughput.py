"""Throughput of the ensemble environment, measured as ratios in one run (the machines are noisy).

    python benchmarks/throughput.py             # the full table (a few minutes)
    python benchmarks/throughput.py --quick     # fewer steps, for a smoke check

For N = 8 and N = 12 models, C = 4 choices, T = 500, a 14,000-question synthetic cache and random valid
actions, it prints steps/s of

(a) the yardstick: a straightforward environment step that recomputes focal diversity and plurality
    accuracy of the team from the window's T x M rows with numpy every step (written here, using the plain
    definitions of ``ensemble_env.metrics``), as the RL-Focal code and a first numpy port do;
(b) ``ensemble_env.parallel_env`` (PettingZoo API, one game);
(c) ``ensemble_env.vector_env(1024)`` (env-steps/s over the 1024 copies);
(d) ``parallel_env`` with T = 50 and T = 5000 (the step cost must not depend on T);
(e) the RLAE options (``--rlae``, on by default; ``--no-rlae`` skips them): ``parallel_env`` and
    ``vector_env(1024)`` with ``fusion_action="weights"`` (the decider's team, weighted fusion), with
    ``decider=False, fusion_action="weights"`` (RLAE_PPO) and with ``fusion_agents="per_model"`` and no decider
    (RLAE_MAPPO: N weighting agents), random weights in [0, 1];
(f) partial feedback (``--feedback``, on by default; ``--no-feedback`` skips it): ``parallel_env`` and
    ``vector_env(1024)`` with ``feedback="team"`` (only the answering team's outputs revealed: the statistics
    re-read the window's rows), random teams and answers as in (b) and (c);
(g) the task scenarios (``--scenarios``, on by default; ``--no-scenarios`` skips them), ``vector_env(1024)`` with
    random teams and answers, beside the yardstick on a 14,000 x N cache: ``ensemble_env/EnsembleUnseen-v2`` (on
    ``bbh5`` at N = 5; at N = 10 on a synthetic cache of 70 tasks of 200 questions) and
    ``ensemble_env/EnsembleGen-v0`` (``gen_vector_env``: its default deck of 2,048 tasks drawn by the generator
    fitted to ``bbh5``, with ``n_models=N``; the time to draw the deck and build the engine is printed too);

each the median of ``--repeats`` timed blocks of this process's CPU time (``--wall`` for wall time), the
five measurements taking turns block by block so that they share the machine's conditions, and the ratios
to the yardstick; then the setup time and
peak memory (cache load + tables, measured in a fresh process) for the 14,000 x 12 cache and for the
embedded default cache, and the one-time numba compile time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np

import ensemble_env
from ensemble_env import metrics
from ensemble_env.errors import command
from ensemble_env.files import write_text
from ensemble_env.synthetic import make_cache

N_QUESTIONS, N_CHOICES, WINDOW, BATCH = 14_000, 4, 500, 1024


class Yardstick:
    """The straightforward step: recompute the team's window statistics from the rows every step.

    Focal diversity is computed as it is defined, member by member (generalized diversity on the rows where
    that member fails), and plurality accuracy from the vote counts of every row; ``--vectorised-yardstick``
    uses the fully vectorised ``ensemble_env.metrics`` functions instead (a faster, less naive reference).
    """

    vectorised = False

    def __init__(self, cache: ensemble_env.LogitCache, window: int) -> None:
        self.cache, self.window = cache, window
        self.rows: deque[int] = deque(maxlen=window)
        self.team = np.ones(cache.n_models, dtype=bool)
        self.position = 0

    @staticmethod
    def generalized_diversity(correct: np.ndarray) -> float:
        n_members = correct.shape[1]
        failing = (~correct).sum(axis=1)  # members failing on each row
        p = np.bincount(failing, minlength=n_members + 1) / correct.shape[0]
        i = np.arange(n_members + 1)
        p1 = (i / n_members * p).sum()
        if p1 == 0:
            return 1.0
        if n_members == 1:
            return 0.0
        p2 = (i * (i - 1) / (n_members * (n_members - 1)) * p).sum()
        return 1.0 - p2 / p1

    def focal_diversity(self, correct: np.ndarray) -> float:
        if correct.shape[1] == 0:
            return 0.0
        scores = []
        for focal in range(correct.shape[1]):  # GD on the rows where the focal member fails
            rows = correct[~correct[:, focal]]
            scores.append(self.generalized_diversity(rows) if rows.shape[0] else 1.0)
        return float(np.mean(scores))

    @staticmethod
    def plurality_accuracy(preds: np.ndarray, labels: np.ndarray) -> float:
        if preds.shape[0] == 0 or preds.shape[1] == 0:
            return 0.0
        votes = np.zeros((preds.shape[0], N_CHOICES), dtype=np.int64)
        np.add.at(votes, (np.arange(preds.shape[0])[:, None], preds), 1)
        return float((votes.argmax(axis=1) == labels).mean())

    def step(self, team: np.ndarray, answer: int) -> tuple[np.ndarray, float]:
        cache, q = self.cache, self.position % self.cache.n_questions
        size = self.team.sum()
        right = size > 0 and answer == cache.labels[q]
        reward = 1.0 if right else -1.0 - size / cache.n_models
        self.rows.append(q)
        self.team = team.astype(bool)
        self.position += 1
        rows = np.fromiter(self.rows, dtype=np.int64)
        members = np.flatnonzero(self.team)
        statistics_ = [
            (metrics.focal_diversity if self.vectorised else self.focal_diversity)(cache.correct[rows][:, members]),
            (metrics.plurality_accuracy if self.vectorised else self.plurality_accuracy)(
                cache.preds[rows][:, members], cache.labels[rows]
            ),
        ]
        probs = cache.probs[self.position % cache.n_questions] * self.team[:, None]
        return np.concatenate([self.team, statistics_, probs.ravel()]).astype(np.float32), reward


#: the clock: this process's CPU time (everything measured is single-threaded), so that other load on a
#: shared machine slows the numbers far less than it slows wall time; ``--wall`` switches to wall time
CLOCK = time.process_time


Runner = tuple[Callable[[int], None], int, int]  # run(n steps), steps per block, env steps per step


def interleaved(runners: dict[str, Runner], repeats: int) -> dict[str, float]:
    """Median env-steps/s of each runner over ``repeats`` blocks, the runners taking turns block by block.

    Each runner first runs one warm-up block; then round after round every runner times one block, so
    all of them are measured over the same stretch of time (load from other jobs hits them alike).
    """
    for run, steps, _ in runners.values():
        run(max(steps // 10, 1))
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, (run, steps, per_step) in runners.items():
            start = CLOCK()
            run(steps)
            rates[name].append(steps * per_step / (CLOCK() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def random_actions(rng: np.random.Generator, n_models: int, count: int) -> list[dict[str, object]]:
    return [
        {"decider": rng.integers(0, 2, n_models).astype(np.int8), "fusion": int(rng.integers(0, N_CHOICES))}
        for _ in range(count)
    ]


def parallel_runner(cache: ensemble_env.LogitCache, window: int, steps: int, **options: object) -> Runner:
    env = ensemble_env.parallel_env(cache, split="all", window=window, **options)
    env.reset(seed=0)
    actions = random_actions(np.random.default_rng(0), cache.n_models, 4096)

    def run(n: int) -> None:
        for i in range(n):
            if not env.agents:
                env.reset()
            env.step(actions[i % len(actions)])

    return run, steps, 1


def vector_runner(cache: ensemble_env.LogitCache, window: int, batch_steps: int, **options: object) -> Runner:
    venv = ensemble_env.vector_env(BATCH, cache, split="all", window=window, order="shuffled", **options)
    return engine_runner(venv, batch_steps)


def engine_runner(venv: ensemble_env.EnsembleVectorEnv, batch_steps: int) -> Runner:
    """Random teams and answers (0..3) on ``venv``, reset with seed 0."""
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = [
        {"decider": rng.integers(0, 2, (venv.num_envs, venv.n_models)).astype(np.int8),
         "fusion": rng.integers(0, 4, venv.num_envs)}
        for _ in range(16)
    ]  # fmt: skip

    def run(n: int) -> None:
        for i in range(n):
            venv.step(actions[i % len(actions)])

    return run, batch_steps, BATCH


#: the RLAE configurations of (e), by row name
RLAE_CONFIGS: dict[str, dict[str, object]] = {
    "weights": {"fusion_action": "weights"},
    "rlae_ppo": {"decider": False, "fusion_action": "weights"},
    "rlae_mappo": {"decider": False, "fusion_action": "weights", "fusion_agents": "per_model"},
}


#: the options of (f), by row name: the game's own actions, other options
OPTION_CONFIGS: dict[str, dict[str, object]] = {"feedback team": {"feedback": "team"}}


def rlae_actions(env: ensemble_env.EnsembleParallelEnv, rng: np.random.Generator, batch: int | None) -> dict:
    """Random actions of every agent of ``env`` (one each, or ``batch`` each): teams, weights in [0, 1]."""
    n_models, lead = env.engine.n_models, () if batch is None else (batch,)
    actions: dict[str, object] = {}
    for agent in env.possible_agents:
        if agent == "decider":
            actions[agent] = rng.integers(0, 2, (*lead, n_models)).astype(np.int8)
        else:
            actions[agent] = rng.random((*lead, *env.action_space(agent).shape)).astype(np.float32)
    return actions


def rlae_parallel_runner(cache: ensemble_env.LogitCache, steps: int, options: dict[str, object]) -> Runner:
    env = ensemble_env.parallel_env(cache, split="all", window=WINDOW, **options)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = [rlae_actions(env, rng, None) for _ in range(1024)]

    def run(n: int) -> None:
        for i in range(n):
            if not env.agents:
                env.reset()
            env.step(actions[i % len(actions)])

    return run, steps, 1


def rlae_vector_runner(cache: ensemble_env.LogitCache, batch_steps: int, options: dict[str, object]) -> Runner:
    venv = ensemble_env.vector_env(BATCH, cache, split="all", window=WINDOW, order="shuffled", **options)
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    spaces_env = ensemble_env.parallel_env(cache, split="all", window=WINDOW, **options)
    actions = [rlae_actions(spaces_env, rng, BATCH) for _ in range(16)]

    def run(n: int) -> None:
        for i in range(n):
            venv.step(actions[i % len(actions)])

    return run, batch_steps, BATCH


def yardstick_runner(cache: ensemble_env.LogitCache, steps: int) -> Runner:
    env = Yardstick(cache, WINDOW)
    actions = random_actions(np.random.default_rng(0), cache.n_models, 4096)
    for i in range(WINDOW):  # a full window, as in the long run
        env.step(actions[i]["decider"], 0)  # type: ignore[arg-type]

    def run(n: int) -> None:
        for i in range(n):
            action = actions[i % len(actions)]
            env.step(action["decider"], action["fusion"])  # type: ignore[arg-type]

    return run, steps, 1


def scenarios(n_models: int, repeats: int, yard_steps: int, batch_steps: int) -> dict[str, float]:
    """Rows (g) at N = ``n_models``: the yardstick, ``EnsembleUnseen-v2`` and ``EnsembleGen-v0`` in
    ``vector_env(1024)``, taking turns; prints them and returns the rates and the deck's setup seconds."""
    cache = make_cache(n_models=n_models, n_questions=N_QUESTIONS, n_choices=N_CHOICES, seed=0)
    if n_models == 5:
        unseen, where = ensemble_env.load_cache("bbh5"), "bbh5"
    else:
        unseen = make_cache(n_models=n_models, n_questions=N_QUESTIONS, n_tasks=70, seed=0)
        where = "70 synthetic tasks of 200 questions"
    start = CLOCK()
    generated = ensemble_env.gen_vector_env(BATCH, n_models=n_models)
    setup = CLOCK() - start
    runners = {
        "yardstick": yardstick_runner(cache, yard_steps),
        "unseen_v2": engine_runner(ensemble_env.unseen_vector_env(BATCH, unseen, version=2, split="all"), batch_steps),
        "gen_v0": engine_runner(generated, batch_steps),
    }
    row = {**interleaved(runners, repeats), "gen_setup_seconds": setup}
    yard = row["yardstick"]
    print(
        f"N={n_models:<2d} scenarios, vector_env(B={BATCH}), T={WINDOW}: yardstick {yard:>9,.0f} steps/s | "
        f"EnsembleUnseen-v2 ({where}) {row['unseen_v2']:>9,.0f} ({row['unseen_v2'] / yard:.0f}x) | EnsembleGen-v0 "
        f"(deck of {generated.cache.n_tasks:,} tasks, {generated.cache.n_questions:,} questions, drawn and built in "
        f"{setup:.1f} s of the clock) {row['gen_v0']:>9,.0f} ({row['gen_v0'] / yard:.0f}x; "
        f"{row['gen_v0'] / row['unseen_v2']:.2f}x EnsembleUnseen-v2's)",
        flush=True,
    )
    return row


SETUP_SCRIPT = """
import json, sys, time
def peak_mib():  # VmHWM: this process's peak resident memory (ru_maxrss would include the forking parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
import ensemble_env
import_mib = peak_mib()
t0 = time.perf_counter()
env = ensemble_env.parallel_env(None if sys.argv[1] == "default" else sys.argv[1], split="all")
env.reset(seed=0)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "peak_mib": peak_mib(), "import_mib": import_mib}))
"""


COMPILE_SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np, ensemble_env
env = ensemble_env.vector_env(2, window=50, metrics=("focal_diversity", "plurality_accuracy"))
env.reset(seed=0)
env.step({"decider": np.ones((2, env.n_models), dtype=np.int8), "fusion": np.zeros(2, dtype=np.int64)})
print(time.perf_counter() - t0)
"""


def compile_cost() -> float:
    """Import + first reset and step in a fresh process with an empty numba cache: the one-time compile."""
    with tempfile.TemporaryDirectory() as folder:
        output = subprocess.run(
            [sys.executable, "-c", COMPILE_SCRIPT],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "NUMBA_CACHE_DIR": folder},
        ).stdout
    return float(output.strip().splitlines()[-1])


def setup_cost(cache_arg: str) -> dict[str, float]:
    """Cache load + tables + first reset, in a fresh process: seconds and peak RSS (MiB)."""
    output = subprocess.run(
        [sys.executable, "-c", SETUP_SCRIPT, cache_arg], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


@command("throughput.py")
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke check, noisier)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--vectorised-yardstick", action="store_true", help="yardstick with the vectorised ensemble_env.metrics"
    )
    parser.add_argument("--wall", action="store_true", help="time with the wall clock instead of CPU time")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this file")
    parser.add_argument(
        "--rlae", action=argparse.BooleanOptionalAction, default=True, help="also time the RLAE options (rows e)"
    )
    parser.add_argument(
        "--feedback", action=argparse.BooleanOptionalAction, default=True, help="also time feedback='team' (rows f)"
    )
    parser.add_argument(
        "--scenarios",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time EnsembleUnseen-v2 and EnsembleGen-v0 (rows g)",
    )
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    Yardstick.vectorised = args.vectorised_yardstick
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    print(
        f"clock: {'wall' if args.wall else 'process CPU'} time; {args.repeats} interleaved repeats, median", flush=True
    )
    steps, batch_steps, yard_steps = int(20_000 * scale) or 1, int(200 * scale) or 1, int(2_000 * scale) or 1

    compile_seconds = compile_cost()

    results: dict[str, dict[str, float]] = {}
    for n_models in (8, 12):
        cache = make_cache(n_models=n_models, n_questions=N_QUESTIONS, n_choices=N_CHOICES, seed=0)
        runners = {
            "yardstick": yardstick_runner(cache, yard_steps),
            "parallel_env": parallel_runner(cache, WINDOW, steps),
            "vector_env": vector_runner(cache, WINDOW, batch_steps),
            "parallel_T50": parallel_runner(cache, 50, steps),
            "parallel_T5000": parallel_runner(cache, 5000, steps),
        }
        if args.rlae:
            for name, options in RLAE_CONFIGS.items():
                runners[f"parallel_{name}"] = rlae_parallel_runner(cache, steps, options)
                runners[f"vector_{name}"] = rlae_vector_runner(cache, batch_steps, options)
        for name, options in OPTION_CONFIGS.items() if args.feedback else ():
            runners[f"parallel_{name}"] = parallel_runner(cache, WINDOW, steps, **options)
            runners[f"vector_{name}"] = vector_runner(cache, WINDOW, batch_steps, **options)
        row = interleaved(runners, args.repeats)
        results[f"N={n_models}"] = row
        print(
            f"N={n_models:<2d} C={N_CHOICES} T={WINDOW}: yardstick {row['yardstick']:>9,.0f} steps/s | "
            f"parallel_env {row['parallel_env']:>9,.0f} ({row['parallel_env'] / row['yardstick']:.0f}x) | "
            f"vector_env(B={BATCH}) {row['vector_env']:>11,.0f} ({row['vector_env'] / row['yardstick']:.0f}x) | "
            f"T=50 {row['parallel_T50']:,.0f} vs T=5000 {row['parallel_T5000']:,.0f} "
            f"(cost ratio {row['parallel_T50'] / row['parallel_T5000']:.2f})",
            flush=True,
        )
        shown = [(f"RLAE {name:<10s}", name, RLAE_CONFIGS[name]) for name in RLAE_CONFIGS if args.rlae]
        shown += [(f"{name:<15s}", name, OPTION_CONFIGS[name]) for name in OPTION_CONFIGS if args.feedback]
        for label, name, options in shown:
            print(
                f"      {label} {options}: parallel_env {row[f'parallel_{name}']:>9,.0f} steps/s "
                f"({row[f'parallel_{name}'] / row['parallel_env']:.2f}x today's) | vector_env(B={BATCH}) "
                f"{row[f'vector_{name}']:>11,.0f} ({row[f'vector_{name}'] / row['vector_env']:.2f}x today's)",
                flush=True,
            )

    for n_models in (5, 10) if args.scenarios else ():
        results[f"scenarios N={n_models}"] = scenarios(n_models, args.repeats, yard_steps, batch_steps)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pool.h5"
        ensemble_env.save_cache(path, make_cache(n_models=12, n_questions=N_QUESTIONS, n_choices=4, seed=0))
        large = setup_cost(str(path))
    default = setup_cost("default")
    print(
        f"setup (load + tables + reset, fresh process): {N_QUESTIONS:,} x 12 cache {large['seconds']:.2f} s, "
        f"peak RSS {large['peak_mib']:.0f} MiB ({large['import_mib']:.0f} MiB after import alone); "
        f"default cache {default['seconds']:.2f} s, peak RSS {default['peak_mib']:.0f} MiB"
    )
    print(
        f"one-time numba compile (import + first step with an empty numba cache; later imports load the "
        f"compiled kernels from disk): {compile_seconds:.1f} s"
    )
    if args.json:
        write_text(args.json, json.dumps({"rates": results, "setup_large": large, "setup_default": default}, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
