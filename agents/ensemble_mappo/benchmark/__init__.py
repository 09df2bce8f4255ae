"""``ensemble-env benchmark``: algorithms x seeds x caches, scored on the test split with the environment's reward.

The protocol (``docs/benchmark.md``): every algorithm fits on the cache's train split, makes every choice
(checkpoint, hyperparameter) on its validation split, and answers each test question once; the benchmark
scores the answers with the environment's reward (:func:`ensemble_env.game.reward.question_rewards`, through
:class:`ensemble_env.game.reward.RewardSettings` at the run's ``alpha``) and reports means over seeds with
95% bootstrap intervals (seeds and test questions resampled together), per task and macro.

A researcher adds an algorithm with :func:`register_algorithm`: a function ``(cache, seed, alpha, out_dir)
-> Answers`` (see ``examples/register_algorithm.py``)::

    @register_algorithm("my_router")
    def my_router(cache, seed, alpha, out_dir):
        test = cache.select("test")
        ...  # fit on cache.select("train"), choose on cache.select("validation")
        return Answers(test, predictions, teams)

Built in: every algorithm of the learner frame (:data:`ensemble_mappo.algorithms.ALGORITHMS`: ``mappo``, ``ippo``
(``critic="local"``), ``rlae_ppo``, ``rlae_mappo``: docs/rlae.md), and the
baselines of :data:`ensemble_env.baselines.registry.BASELINES` (under their names or aliases: ``stacking`` is
``stacking(per_task)``). A finished run is stored under ``DIR/runs/`` with its key (algorithm, seed, the cache's
content digest, alpha, config), is read back (checked by value) and is not redone.

=============  ===============================================================================================
module         what it holds
=============  ===============================================================================================
``answers``    :class:`Answers`, the ``Algorithm`` signature, the check of answers and their JSON form
``learners``   every algorithm of the learner frame (ensemble_mappo.algorithms) as one, and ``--budget``
``registry``   every algorithm by name: :func:`register_algorithm`, the baselines, ``resolve``, ``canonical``
``protocols``  ``--protocol``: the folds of tasks never seen, their caches, and the generated tasks of each fold
``curves``     the learning curves on each fold's validation tasks, the hand rules as lines
``stats``      :func:`bootstrap_interval`, :func:`aggregate`, :func:`paired_differences`, :func:`routing`
``store``      the results folder and the runs in it: run keys and folders, the one checked reader of a run
``report``     :func:`format_markdown` (``results.md``) and the frontier plots
``marl_eval``  ``--format marl-eval``: the results per task and seed in marl-eval's JSON (``marl_eval.json``)
``runner``     :func:`benchmark`, the one loop over algorithms x seeds x caches
``cli``        the ``benchmark`` command (:func:`register_command`) and ``--register`` files
=============  ===============================================================================================
"""

from __future__ import annotations

from ensemble_mappo.benchmark.answers import Algorithm, Answers
from ensemble_mappo.benchmark.cli import MAX_SEEDS, load_plugins, register_command
from ensemble_mappo.benchmark.learners import BUDGETS, LEARNERS, learner_answers
from ensemble_mappo.benchmark.registry import ALGORITHMS, DEFAULT_ALGORITHMS, register_algorithm, uses_test_labels
from ensemble_mappo.benchmark.report import TEST_LABELS_ROLE, format_markdown
from ensemble_mappo.benchmark.runner import Interrupted, benchmark
from ensemble_mappo.benchmark.stats import (
    METRICS,
    REFERENCES,
    aggregate,
    bootstrap_interval,
    paired_differences,
    routing,
    team_changes,
)

__all__ = [
    "ALGORITHMS",
    "BUDGETS",
    "DEFAULT_ALGORITHMS",
    "LEARNERS",
    "MAX_SEEDS",
    "METRICS",
    "REFERENCES",
    "TEST_LABELS_ROLE",
    "Algorithm",
    "Answers",
    "Interrupted",
    "aggregate",
    "benchmark",
    "bootstrap_interval",
    "format_markdown",
    "learner_answers",
    "load_plugins",
    "paired_differences",
    "register_algorithm",
    "register_command",
    "routing",
    "team_changes",
    "uses_test_labels",
]
