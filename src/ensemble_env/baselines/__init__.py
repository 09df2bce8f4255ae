"""The baselines: what every learned policy is compared against, on the environment's own reward.

Above the caches and the game (they score answers with :mod:`ensemble_env.game.reward`'s batch form).

=====================  ===============================================================================================
module                 what it holds
=====================  ===============================================================================================
``simple``             single models, votes, random and greedy-focal teams, stacking, oracle
                       (:func:`~ensemble_env.baselines.simple.run_all`); it publishes the names of the four modules
                       below, and this package publishes its names
``result``             :class:`~ensemble_env.baselines.result.BaselineResult`: what a baseline answered, its scores
``fusion``             the votes that turn a team's answers into one (plurality, mean probability)
``conditional_logit``  stacking's model: a conditional logit over the models' probabilities
``tables``             :func:`~ensemble_env.baselines.tables.format_table`: results as plain-text tables
``routing``            a fixed team per task (``static_team``) and a per-question router
``weights``            weighted votes (RLAE's competitors): per-task weights, per-question weights from the features
``registry``           :data:`~ensemble_env.baselines.registry.BASELINES`: one entry per baseline, read by the
                       comparison, the command line, ``evaluate`` and ``benchmark``
``comparison``         every baseline on a cache, their scores and table, paired bootstrap intervals
``frontier``           the cost-accuracy frontier: the baselines over a sweep of the size penalty alpha
``frontier_plot``      the frontier's plot (accuracy against team size and cost)
``report``             a cache's summary and plots (``ensemble-env cache info`` / ``cache plot``)
=====================  ===============================================================================================
"""

from __future__ import annotations

from ensemble_env.baselines.registry import BASELINES, Baseline, Setting, lookup, register
from ensemble_env.baselines.simple import *  # noqa: F403  (the simple baselines, as ensemble_env.baselines.X)
from ensemble_env.baselines.simple import __all__ as _simple_names

__all__ = ["BASELINES", "Baseline", "Setting", "lookup", "register", *_simple_names]
