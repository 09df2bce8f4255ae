"""render_mode="rgb_array": PettingZoo's render test, same episode -> same image, and what the picture shows."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from pettingzoo.test import render_test

import ensemble_env
from ensemble_env.cache import LogitCache
from ensemble_env.synthetic import make_cache
from ensemble_env.views.render import _FONT, _RIGHT, _WRONG, STRIP_STEPS, FrameGeometry, draw_text, short_names


@pytest.fixture(scope="module")
def synthetic() -> LogitCache:
    return make_cache(n_models=5, n_questions=400, n_tasks=3, n_choices=(2, 4, 3), seed=3)


def play(cache: LogitCache, seed: int, steps: int, **options: object) -> list[np.ndarray]:
    """The frames of an episode with random teams and answers drawn from ``seed``, one per reset and step."""
    env = ensemble_env.parallel_env(cache, render_mode="rgb_array", **options)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    frames = [env.render()]
    for _ in range(steps):
        team = (rng.random(cache.n_models) < 0.5).astype(np.int8)
        env.step({"decider": team, "fusion": int(rng.integers(cache.max_choices))})
        frames.append(env.render())
    return frames


def test_render_test_passes_every_mode(synthetic: LogitCache) -> None:
    render_test(lambda render_mode=None: ensemble_env.env(synthetic, render_mode=render_mode))
    assert "rgb_array" in ensemble_env.parallel_env(synthetic).metadata["render_modes"]


def test_the_same_seeded_episode_gives_the_same_images(synthetic: LogitCache) -> None:
    first = play(synthetic, seed=4, steps=90, order="shuffled", split="all")
    second = play(synthetic, seed=4, steps=90, order="shuffled", split="all")
    other = play(synthetic, seed=5, steps=90, order="shuffled", split="all")
    shape = first[0].shape
    for a, b in zip(first, second, strict=True):
        assert a.dtype == np.uint8 and a.shape == shape and a.flags.c_contiguous
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    assert not np.array_equal(first[10], first[11])  # every step changes the picture


def test_strip_cells_show_team_correctness_answer_and_next_team(tiny_cache: LogitCache) -> None:
    # tiny cache, split "all", sequential: questions 0..5; model correctness (m0, m1, m2):
    # q0 (T, T, F), q1 (T, F, T), q2 (T, T, F)
    env = ensemble_env.parallel_env(tiny_cache, render_mode="rgb_array", split="all", initial_team=[0, 2])
    env.reset(seed=0)
    geo = FrameGeometry.of(3)
    env.step({"decider": np.array([0, 1, 1]), "fusion": 0})  # q0 answered 0 (gold 0): right, team {m0, m2}
    env.step({"decider": np.array([1, 0, 0]), "fusion": 2})  # q1 answered 2 (gold 1): wrong, team {m1, m2}
    image = env.render()
    assert image.shape == (geo.height, geo.width, 3)

    def color(model: int, column: int) -> tuple[int, ...]:
        x, y = geo.strip_cell(model, column)
        return tuple(int(v) for v in image[y + 1, x + 1])

    newest, before = STRIP_STEPS - 1, STRIP_STEPS - 2
    # step 0 (team {m0, m2} on q0): m0 in and right, m1 out and right (pale), m2 in and wrong
    assert color(0, before) == _RIGHT and color(2, before) == _WRONG
    assert color(1, before) not in (_RIGHT, _WRONG) and color(1, before) != (255, 255, 255)
    assert color(-1, before) == _RIGHT  # the answer was right
    # step 1 (team {m1, m2} on q1): m1 in and wrong, m2 in and right, m0 out (pale); the answer was wrong
    assert color(1, newest) == _WRONG and color(2, newest) == _RIGHT and color(-1, newest) == _WRONG
    assert color(0, newest) not in (_RIGHT, _WRONG)
    assert color(0, before - 1) == (255, 255, 255)  # no step there yet
    # NEXT column: the committed team {m0}
    filled = [image[geo.next_cell(m)[1] + 2, geo.next_cell(m)[0] + 2].tolist() for m in range(3)]
    assert filled[0] != [255, 255, 255] and filled[1] == filled[2] == [255, 255, 255]


def test_question_panel_shades_members_by_probability(tiny_cache: LogitCache) -> None:
    env = ensemble_env.parallel_env(tiny_cache, render_mode="rgb_array", split="all", initial_team=[0, 1])
    env.reset(seed=0)
    env.step({"decider": np.array([1, 1, 1]), "fusion": 0})  # q0 with team {m0, m1}
    image, geo = env.render(), FrameGeometry.of(3)
    n_choices = int(tiny_cache.n_choices[0])

    def shade(model: int, choice: int) -> int:
        x, y = geo.choice_cell(model, choice, n_choices)
        return int(image[y + 2, x + 2].sum())

    probs = tiny_cache.probs[0]
    for model in (0, 1):  # members: the more probable the choice, the darker its cell
        order = np.argsort(probs[model])
        shades = [shade(model, int(choice)) for choice in order]
        assert shades == sorted(shades, reverse=True)
    assert len({shade(2, choice) for choice in range(n_choices)}) == 1  # m2 is not in the team: one grey


def test_strip_keeps_the_last_steps_only(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(synthetic, render_mode="rgb_array", split="all")
    env.reset(seed=0)
    for _ in range(STRIP_STEPS + 10):
        env.step({"decider": np.ones(5, dtype=np.int8), "fusion": 0})
    assert len(env._trace.teams) == STRIP_STEPS
    geo = FrameGeometry.of(5)
    x, y = geo.strip_cell(-1, 0)
    assert tuple(int(v) for v in env.render()[y + 1, x + 1]) in (_RIGHT, _WRONG)  # the strip is full
    env.reset(seed=0)
    assert len(env._trace.teams) == 0
    assert tuple(int(v) for v in env.render()[y + 1, x + 1]) == (255, 255, 255)


def test_the_picture_fits_large_pools() -> None:
    cache = make_cache(n_models=32, n_questions=200, seed=1)
    frames = play(cache, seed=0, steps=5, split="all")
    geo = FrameGeometry.of(32)
    assert frames[-1].shape == (geo.height, geo.width, 3)
    assert geo.answer_y + geo.row <= geo.accuracy_y


def test_draw_text_writes_the_glyphs() -> None:
    image = np.zeros((9, 14, 3), dtype=np.uint8)
    end = draw_text(image, 1, 1, "a1", color=(255, 0, 0))
    assert end == 13
    np.testing.assert_array_equal(image[1:8, 1:6, 0] > 0, _FONT["A"])  # upper-cased
    np.testing.assert_array_equal(image[1:8, 7:12, 0] > 0, _FONT["1"])
    assert not image[:, :, 1:].any() and not image[0].any() and not image[8].any()
    draw_text(image, 10, 5, "W")  # clipped at the border, no error


def test_short_names_stay_distinct() -> None:
    assert short_names(["org__gemma-7b", "complement_a", "complement_b", "x" * 12]) == [
        "gemma-7b",
        "complem~_a",
        "complem~_b",
        "x" * 10,
    ]


def test_render_before_reset_is_an_error(synthetic: LogitCache) -> None:
    env = ensemble_env.parallel_env(synthetic, render_mode="rgb_array")
    with pytest.raises(RuntimeError, match="before reset"):
        env.render()


def test_rgb_array_needs_no_plotting_library() -> None:
    code = (
        "import sys, numpy as np, ensemble_env\n"
        "from ensemble_env.synthetic import make_cache\n"
        "env = ensemble_env.parallel_env(make_cache(n_models=3, n_questions=50, seed=0), render_mode='rgb_array')\n"
        "env.reset(seed=0); env.step({'decider': np.ones(3, dtype=np.int8), 'fusion': 0})\n"
        "assert env.render().shape[2] == 3\n"
        "print(sorted(m for m in ('matplotlib', 'PIL') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
