"""Seeded fuzzing of the environment's inputs: options and actions either work or are refused clearly.

"Clearly" means a ValueError or TypeError whose message names the option or the agent; never another
exception (numba's, numpy's, a KeyError), and a refused step never advances the game. The default run tries a
few hundred inputs; ``--run-slow`` tries thousands.
"""

from __future__ import annotations

import numpy as np
import pytest

import ensemble_env
from ensemble_env.game.config import EnvConfig
from ensemble_env.synthetic import make_cache

CACHE = make_cache(n_models=4, n_questions=60, n_tasks=2, n_choices=(2, 4), seed=0)
NUMERIC = ("alpha", "diversity_bonus", "window", "reward_history", "min_team_size", "episode_length")
VALUES = (
    0, 1, -1, 2, 3, 7, 10**12, -(10**12), 0.5, -0.5, 1e300, float("inf"), -float("inf"), float("nan"), True, False,
    None, "1", b"1", [1], (1,), {}, np.int8(3), np.uint64(2**63), np.float16(0.25), np.float32("nan"),
    np.bool_(True), np.str_("train"), 2**63, object(),
)  # fmt: skip
CHOICES = {
    "split": ("train", "test", "all", "dev", 1, None),
    "order": ("sequential", "shuffled", "random", 0),
    "decider_action": ("multibinary", "multidiscrete", "subset", "binary", None),
    "size_penalty_mode": ("on_error", "always", "never", 2),
    "use_costs": (False, True, 0, "yes"),
    "metrics": ((), ("focal_diversity",), ("nope",), "focal_diversity", ("kappa", "kappa"), [1]),
    "decider_extras": ((), ("task",), ("model_accuracy",), ("features",), ("x",), "task", ("task_record",)),
    "episodes": ("stream", "task", "tasks", 1, None),
    "decider": (True, False, np.bool_(False), 0, "no", None),
    "fusion_action": ("answer", "weights", "logits", None),
    "fusion_agents": ("one", "per_model", "all", 1),
    "feedback": ("all", "team", "none", 1, None),
}


def _random_options(rng: np.random.Generator) -> dict:
    options = {}
    for _ in range(int(rng.integers(1, 4))):
        if rng.random() < 0.5:
            name = NUMERIC[rng.integers(len(NUMERIC))]
            options[name] = VALUES[rng.integers(len(VALUES))]
        else:
            name = list(CHOICES)[rng.integers(len(CHOICES))]
            options[name] = CHOICES[name][rng.integers(len(CHOICES[name]))]
    return options


def _fuzz_options(count: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    built = refused = 0
    for _ in range(count):
        options = _random_options(rng)
        try:
            env = ensemble_env.parallel_env(CACHE, **options)
        except (ValueError, TypeError) as error:
            message = str(error)
            assert any(name in message for name in options) or "cache" in message, (options, message)
            assert len(message) < 600
            refused += 1
            continue
        env.reset(seed=0)  # what was accepted plays
        whole_pool = ensemble_env.game.actions.encode_team(np.ones(CACHE.n_models, bool), env.config.decider_action)
        actions = {
            agent: whole_pool
            if agent == "decider"
            else 0
            if config_answers(env)
            else np.ones(env.action_space(agent).shape)
            for agent in env.agents
        }
        env.step(actions)
        config = env.config
        assert np.isfinite(config.alpha) and np.isfinite(config.diversity_bonus)
        assert type(config.window) is int and type(config.alpha) is float
        built += 1
    return built, refused


def config_answers(env: ensemble_env.EnsembleParallelEnv) -> bool:
    """The fusion agent answers with an index (else agents set weights)."""
    return env.config.fusion_action == "answer"


ACTIONS = (
    0, 1, -1, 3, 2**70, 0.0, 1.5, float("nan"), True, None, "1", [1, 0, 1, 1], [1, 0], [[1, 0, 1, 1]], (1, 1, 1, 1),
    np.ones(4, np.float16), np.ones(4, np.complex64), np.ones(4, object), np.array([1, 0, 2, 1]),
    np.array([1, 0, 1, 1], np.uint64), np.full(4, np.nan), np.ones((2, 4)), np.array(3, np.int8), np.array([3]),
    np.array(["1", "0", "1", "1"]), {"a": 1},
)  # fmt: skip


def _fuzz_actions(count: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    stepped = refused = 0
    for encoding in ("multibinary", "multidiscrete", "subset"):
        env = ensemble_env.parallel_env(CACHE, decider_action=encoding)
        aec = ensemble_env.env(CACHE, decider_action=encoding)
        env.reset(seed=1)
        aec.reset(seed=1)
        for _ in range(count):
            action = {agent: ACTIONS[rng.integers(len(ACTIONS))] for agent in ("decider", "fusion")}
            before = env.engine.info_values()["step"]
            try:
                env.step(action)
                stepped += 1
            except ValueError as error:
                assert str(error).startswith(("decider action", "fusion action")), str(error)
                assert env.engine.info_values()["step"] == before  # a refused step changes nothing
                refused += 1
            if not env.agents:
                env.reset()
            agent = aec.agent_selection
            try:
                aec.step(action[agent])
            except ValueError as error:
                assert str(error).startswith(f"{agent} action"), str(error)
                assert aec.agent_selection == agent  # the same agent acts again: the view stays playable
            if all(aec.terminations.values()) or all(aec.truncations.values()):
                aec.reset()
    return stepped, refused


def test_fuzzed_options_build_or_are_refused_clearly() -> None:
    built, refused = _fuzz_options(300, seed=0)
    assert built > 20 and refused > 100


def test_fuzzed_actions_step_or_are_refused_clearly() -> None:
    stepped, refused = _fuzz_actions(150, seed=0)
    assert stepped > 10 and refused > 100


@pytest.mark.slow
def test_many_fuzzed_options_and_actions() -> None:
    for seed in range(1, 6):
        _fuzz_options(1000, seed=seed)
        _fuzz_actions(600, seed=seed)


def test_every_option_is_fuzzed() -> None:
    names = {field for field in EnvConfig.__dataclass_fields__}
    fuzzed = set(NUMERIC) | set(CHOICES)
    assert fuzzed <= names
    # the rest are names or teams validated against the cache (tasks, initial_team, fusion_extras)
    assert names - fuzzed == {"tasks", "initial_team", "fusion_extras"}
