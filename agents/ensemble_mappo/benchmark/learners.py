"""The learners of the frame as benchmark algorithms: every entry of :data:`ensemble_mappo.algorithms.ALGORITHMS`
(MAPPO, IPPO, ``rlae_ppo``, ``rlae_mappo`` and any algorithm registered there) through one adapter.

:func:`learner_answers` trains the algorithm on the train split with the frame's loop, keeping the start and
evenly spaced checkpoints; the loop's choice on the validation split (:func:`ensemble_mappo.evaluation.choose`,
the config's ``selection`` rule) names the policy, which answers the test split once.

What the rest of the benchmark reads from here: :data:`LEARNERS` (their names), :data:`BUDGETS` (the budget
names of ``--budget``), :func:`budget_help` (its help text) and :func:`learner` (a learner's function and the
config recorded in its run key; None for any other name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_mappo import algorithms, presets
from ensemble_mappo.benchmark import protocols
from ensemble_mappo.benchmark.answers import Algorithm, Answers
from ensemble_mappo.config import RETIRED_FIELDS

__all__ = ["ABLATIONS", "BUDGETS", "LEARNERS", "RESIDUAL_OFF", "ablation_name", "budget_help", "learner",
           "learner_answers"]  # fmt: skip

#: the budget levels of ``--budget`` (each algorithm's passes and kept checkpoints: :meth:`Algorithm.budget`)
BUDGETS = ("tiny", "quick", "default")
#: the learners: every registered algorithm
LEARNERS = tuple(algorithms.ALGORITHMS)
#: the key of a learner run's ``info`` that keeps its deployed checkpoint's test answers under each ablation (the
#: residual decider's: the same checkpoint with its network switched off, :data:`RESIDUAL_OFF`), which the runner
#: scores as an entry of their own (:func:`ablation_name`), paired with the learner
ABLATIONS = "ablations"
#: the residual decider's ablation: ``decider_residual_gain=0``, the index decider with the constants the run learned
RESIDUAL_OFF = "residual off"
#: the algorithms whose runs were stored before their config had an ``algorithm`` field (MAPPO's config gained it in
#: issue 50): their run keys leave the field out (the key names the algorithm already), so those runs are still read
#: back; RLAE's config always had it, and its keys keep it
KEYS_WITHOUT_ALGORITHM = ("mappo", "ippo")


def _require_validation(cache: LogitCache) -> None:
    """The learners choose their checkpoint on the validation split: a cache without one is refused, with the fix."""
    try:
        cache.select("validation")
    except ValueError as error:  # no validation question
        raise ValueError(
            f"{error}: the learners choose their checkpoint on the validation split; add one with "
            "`ensemble-env cache split CACHE -o OUT.h5 --validation-fraction 0.2`"
        ) from None


def learner_config(
    name: str, seed: int, alpha: float, *, passes: float, checkpoints: int, overrides: Mapping[str, Any] | None = None
) -> Any:
    """The config the benchmark trains algorithm ``name`` with: its defaults, ``overrides`` (an ``env`` table adds to
    the default environment options), the budget, the seed and the reward's ``alpha``."""
    entry = algorithms.get(name)
    changes = dict(overrides or {})
    env = {**entry.make_config().env, **changes.pop("env", {}), "alpha": float(alpha)}
    return entry.make_config(**{**changes, "seed": seed, "passes": passes, "checkpoints": checkpoints, "env": env})


def learner_answers(
    cache: LogitCache,
    seed: int,
    alpha: float,
    out_dir: Path,
    *,
    algorithm: str = "mappo",
    passes: float | None = None,
    checkpoints: int = 5,
    progress: bool = False,
    overrides: Mapping[str, Any] | None = None,
    selection: str | None = None,
) -> Answers:
    """Train ``algorithm`` on train, choose on validation the policy to deploy among its start (update 0) and
    ``checkpoints`` evenly spaced checkpoints, and answer the test split with it.

    ``selection`` is the rule (:mod:`ensemble_mappo.selection`; None: the algorithm's own, ``"safe"`` for MAPPO:
    a checkpoint only where its paired validation gain over the start is positive with confidence, else the start;
    ``"best"`` for RLAE). ``overrides``: config fields other than the defaults. Test is played once, after the
    choice; the choice reads the validation split only. A residual decider's checkpoint plays test a second time
    with its network off (``info[ABLATIONS][RESIDUAL_OFF]``: its predictions and teams).
    """
    from ensemble_mappo.evaluation import evaluate_agents, policy_checkpoint, read_selection
    from ensemble_mappo.runs import read_config
    from ensemble_mappo.training import train

    _require_validation(cache)
    entry = algorithms.get(algorithm)
    changes = {**(overrides or {}), **({"selection": selection} if selection is not None else {})}
    config = learner_config(
        algorithm, seed, alpha, passes=passes if passes is not None else entry.make_config().passes,
        checkpoints=checkpoints, overrides=changes,
    )  # fmt: skip
    train(config, cache, out_dir, progress=progress)
    chosen = read_selection(out_dir)
    assert chosen is not None  # a run that keeps checkpoints chooses among them when it completes
    policy = policy_checkpoint(out_dir, read_config(out_dir))
    test = evaluate_agents(policy.networks, config, cache, split="test", seed=seed, source=str(policy.path))
    info = {
        "selected_iteration": chosen["update"],
        "steps_per_iteration": config.num_envs * config.num_steps,
        "checkpoint": chosen["checkpoint"],
        "of_iterations": policy.num_iterations,
        "selection": {key: chosen[key] for key in ("rule", "delta", "z") if key in chosen},
        "validation": [{"iteration": row["update"], **{k: v for k, v in row.items() if k != "update"}}
                       for row in chosen["candidates"]],
    }  # fmt: skip
    if getattr(config, "decider_policy", None) == "residual" and config.decider_residual_gain > 0:
        off = dataclasses.replace(config, decider_residual_gain=0.0)
        ablation = evaluate_agents(policy.networks, off, cache, split="test", seed=seed, source=str(policy.path))
        info[ABLATIONS] = {RESIDUAL_OFF: {"predictions": np.asarray(ablation.answers).tolist(),
                                          "teams": np.asarray(ablation.teams, dtype=np.int8).tolist()}}  # fmt: skip
    return Answers(test.questions, test.answers, np.asarray(test.teams, dtype=bool), info)


def ablation_name(name: str, ablation: str) -> str:
    """The results' name of learner ``name``'s deployed checkpoint played with ``ablation`` (e.g.
    ``mappo(residual off)``)."""
    return f"{name}({ablation})"


def learner(
    name: str, budget: str, protocol: str = "standard", feedback: str = "all"
) -> tuple[Algorithm, dict[str, Any]] | None:
    """The function and run-key config of the learner ``name`` at ``budget`` (one of :data:`BUDGETS`) under
    ``protocol`` (``"unseen-tasks"`` and ``"generated"``: the scenario of tasks never seen,
    :func:`protocols.learner_overrides`, with ``feedback``; the budget in env steps under partial feedback,
    :data:`protocols.PARTIAL_BUDGET_STEPS`, and under ``"generated"``, :data:`protocols.GENERATED_BUDGET_STEPS`);
    None when ``name`` is not a learner."""
    if name not in algorithms.ALGORITHMS:
        return None
    entry = algorithms.get(name)
    passes, checkpoints = entry.budget(budget)
    unseen = protocol != "standard"
    if unseen:  # a learner not posed is refused now
        protocols.learner_overrides(name, entry.config_class, 1, feedback, protocol)

    steps = {}
    if protocol == "generated":
        steps = {"total_steps": protocols.GENERATED_BUDGET_STEPS[budget]}
    elif unseen and feedback == "team":
        steps = {"total_steps": protocols.PARTIAL_BUDGET_STEPS[budget]}

    def run(cache: LogitCache, seed: int, alpha: float, out_dir: Path) -> Answers:
        overrides = None
        if unseen:
            overrides = {**protocols.learner_overrides(name, entry.config_class, cache.n_models, feedback, protocol),
                         **steps}  # fmt: skip
        if protocol == "generated" and entry.unseen == "decider":  # a decider's first team, computed once
            overrides = _with_first_team(name, cache, seed, alpha, overrides, passes, checkpoints)
        return learner_answers(
            cache, seed, alpha, out_dir, algorithm=name, passes=passes, checkpoints=checkpoints, overrides=overrides
        )

    # the learner's whole configuration is part of the run key: a run of other defaults is not reused
    config = learner_config(name, 0, 1.0, passes=passes, checkpoints=checkpoints).to_dict()
    left_out = ("seed", "env", *(("algorithm",) if name in KEYS_WITHOUT_ALGORITHM else ()))
    defaults = {key: value for key, value in config.items() if key not in left_out}
    defaults.update({key: value for key, (value, _) in RETIRED_FIELDS.items()})  # the keys of the runs stored before
    key = {"budget": budget, "passes": passes, "checkpoints": checkpoints, "config": defaults}
    if not unseen:
        return run, key
    partial = {"feedback": feedback, "learner": dict(protocols.PARTIAL_LEARNER), **steps} if feedback != "all" else {}
    if protocol == "generated":  # what this learner's config takes of the preset (RLAE keeps its own width)
        partial = {**partial, "generated": presets.GENERATED.overrides(entry.config_class), **steps}
    return run, {**key, "protocol": protocol, **partial}


def _with_first_team(
    name: str,
    cache: LogitCache,
    seed: int,
    alpha: float,
    overrides: Mapping[str, Any],
    passes: float,
    checkpoints: int,
) -> dict[str, Any]:
    """``overrides`` with the game's ``initial_team`` set to the team the learner would compute itself
    (:func:`ensemble_mappo.mappo.first_team`: the training tasks' best team, which answers each task's first
    question): computed once per run on the unit's train questions instead of at every evaluation of the run, which
    on a fold's 160,000 generated training questions costs seconds each time."""
    from ensemble_mappo.mappo import first_team

    options = learner_config(name, seed, alpha, passes=passes, checkpoints=checkpoints, overrides=overrides).env
    env = {**overrides.get("env", {}), "initial_team": first_team(cache, dict(options))}
    return {**overrides, "env": env}


def budget_help() -> str:
    """What each ``--budget`` means for the learners (the option's help text, without its default)."""
    parts = []
    for entry in algorithms.ALGORITHMS.values():
        levels = ", ".join(f"{level} {entry.budget(level)[0]:g}" for level in BUDGETS)
        parts.append(f"{entry.name}: {levels} passes")
    for where, table in (("unseen-tasks --feedback team", protocols.PARTIAL_BUDGET_STEPS),
                         ("--protocol generated", protocols.GENERATED_BUDGET_STEPS)):  # fmt: skip
        parts.append(f"{where}: " + ", ".join(f"{level} {table[level]:,}" for level in BUDGETS) + " env steps")
    return (
        "the learners' training budget, in passes over the train stream (tiny, quick, default; the default is "
        "each algorithm's own, with 5 checkpoints chosen among on validation): " + "; ".join(parts)
    )
