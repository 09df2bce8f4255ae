"""The views of the game people and libraries use, over :class:`~ensemble_env.game.engine.EnsembleVectorEnv`.

================  ============================================================================================
module            what it holds
================  ============================================================================================
``parallel``      the PettingZoo views: :func:`~ensemble_env.views.parallel.parallel_env` (the env card is its
                  module docstring), the AEC :func:`~ensemble_env.views.parallel.env`, and
                  :func:`~ensemble_env.views.parallel.vector_env`
``render``        the ``ansi`` / ``human`` / ``rgb_array`` renderings
``policies``      scripted policies that play on any view (mean vote, plurality vote, a fixed team)
``play``          a person plays one role in the terminal
================  ============================================================================================
"""
