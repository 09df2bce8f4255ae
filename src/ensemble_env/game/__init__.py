"""The game: the ensemble Dec-POMDP itself, as batched arrays and compiled kernels (``docs/environment-spec.md``).

Above the caches, below the views and the baselines. The layering inside, bottom to top:

================  ============================================================================================
module            what it holds
================  ============================================================================================
``jit``           the :func:`~ensemble_env.game.jit.kernel` decorator (numba, cached on disk, keyed on the
                  sources of every module of this folder)
``records``       the kernels' named records and index vocabularies (``Counter``, ``Info``, ``Tables``, ...)
``actions``       the decider's action encodings (space, decode, encode) and the fusion action
``reward``        the reward: formula, bounds, validation of its settings, the batch form baselines use
``window``        the sliding window of the last T questions and its diversity statistics
``dynamics``      the step and observation kernels
``task_record``   the record of the episode's task (``episodes="task"``): the record extras' counts and kernels,
                  which the step kernel never sees
``config``        :class:`~ensemble_env.game.config.EnvConfig`, every option validated
``layout``        :class:`~ensemble_env.game.layout.ObservationLayout`: where each part of the observations lies,
                  and its bounds; what a count feature counts (:func:`~ensemble_env.game.layout.count_of_feature`)
``build``         the builders of the kernels' records (settings, tables, the copies' state, a step's outputs)
``snapshot``      snapshots of the copies: taken, checked by value, restored (``get_state`` / ``set_state``)
``engine``        :class:`~ensemble_env.game.engine.EnsembleVectorEnv`: B copies stepped as arrays
================  ============================================================================================
"""
