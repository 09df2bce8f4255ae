"""Text renderings of the game: what ``render_mode="ansi"`` returns and ``"human"`` prints.

They read the engine's public accessors only (``info_values``, ``observations``, ``statistic_names``,
``team``, ``cache``, ``config``).
"""

from __future__ import annotations

import numpy as np

from ensemble_env.cache import LogitCache
from ensemble_env.engine import EnsembleVectorEnv

__all__ = ["TEXT_WIDTH", "describe_reset", "describe_step", "question_excerpt"]


def _team_names(cache: LogitCache, team: np.ndarray) -> str:
    members = [cache.models[i] for i in np.flatnonzero(team)]
    return "{" + ", ".join(members) + "}" if members else "{} (empty)"


def describe_reset(engine: EnsembleVectorEnv, env: int = 0) -> str:
    """Text of a reset: the stream and the initial team."""
    cfg = engine.config
    tasks = "all tasks" if cfg.tasks is None else ", ".join(cfg.tasks)
    return (
        f"episode start: {engine.episode_length} questions ({cfg.split} split, {tasks}, {cfg.order}); "
        f"window T={cfg.window}, alpha={cfg.alpha}\n"
        f"  initial team E_0 {_team_names(engine.cache, engine.team[env])}"
    )


#: characters of a question's text the rendering shows
TEXT_WIDTH = 100


def question_excerpt(cache: LogitCache, question: int, width: int = TEXT_WIDTH) -> str | None:
    """The question's text on one line, shortened to ``width`` characters, or None if the cache has none."""
    if cache.question_text is None:
        return None
    text = " ".join(cache.question_text[question].split())
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def describe_step(engine: EnsembleVectorEnv, used_team: np.ndarray, env: int = 0) -> str:
    """Text of the step just taken by copy ``env``: the question, the team, the answer, the next team."""
    cache, info = engine.cache, engine.info_values(env)
    question, answer, label = int(info["question"]), int(info["answer"]), int(info["label"])
    step = int(info["step"]) - 1
    names = engine.statistic_names
    statistics = engine.observations["decider"][env, engine.layout.decider["statistics"]]
    stats = "  ".join(f"{name} {value:.3f}" for name, value in zip(names, statistics, strict=True))
    gold = cache.probs[question, :, label]
    members = np.flatnonzero(used_team)
    support = " ".join(f"{cache.models[i]}:{gold[i]:.2f}" for i in members) or "-"
    verdict = "right" if info["correct"] else "wrong"
    excerpt = question_excerpt(cache, question)
    text = "" if excerpt is None else f"  text       {excerpt}\n"
    return (
        f"t={step:<4d} task {cache.task_names[cache.tasks[question]]} | question {question} "
        f"({cache.n_choices[question]} choices, gold {label})\n"
        f"{text}"
        f"  team E_t   {_team_names(cache, used_team)} ({len(members)}/{engine.n_models})  p(gold): {support}\n"
        f"  fusion  -> answer {answer}: {verdict}   reward {info['reward']:+.3f}   "
        f"running accuracy {info['accuracy']:.3f}\n"
        f"  decider -> E_t+1 {_team_names(cache, engine.team[env])}   {stats}"
    )
