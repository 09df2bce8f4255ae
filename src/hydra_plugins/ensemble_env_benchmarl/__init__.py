"""Hydra plugin that makes BenchMARL's own command line know the ensemble tasks.

With it, ``python -m benchmarl.run algorithm=mappo task=ensemble_env/ensemble`` (the decider and the fusion
agent) and ``python -m benchmarl.run algorithm=mappo task=ensemble_env/weights`` (RLAE_MAPPO's per-model weights,
for BenchMARL's continuous algorithms) work as with BenchMARL's own tasks. BenchMARL 1.5 has no entry point for
outside tasks: its task registry is a dict filled from a fixed list (``benchmarl/environments/__init__.py``) and
its task configs are YAML files inside its package. Hydra, which runs its command line, imports every module of
the ``hydra_plugins`` namespace package when it starts and asks each ``SearchPathPlugin`` for config locations
before it composes the config. This plugin answers by calling :func:`ensemble_env.adapters.benchmarl.register`,
which adds the tasks to BenchMARL's registry and their configs, ``HYDRA_DEFAULTS`` and ``WEIGHTS_HYDRA_DEFAULTS``,
to Hydra's config store (group ``task/ensemble_env``); the search path is left as it is.

Hydra runs it for every Hydra application in an environment with ``ensemble-env`` installed; it does nothing
where BenchMARL is not installed (and the module imports without Hydra).
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["EnsembleEnvSearchPathPlugin"]

try:
    from hydra.plugins.search_path_plugin import SearchPathPlugin
except ImportError:  # no Hydra: nothing to plug into
    SearchPathPlugin = object  # type: ignore[assignment,misc]


class EnsembleEnvSearchPathPlugin(SearchPathPlugin):  # type: ignore[misc,valid-type]
    """Registers the ``ensemble_env/ensemble`` and ``ensemble_env/weights`` tasks with BenchMARL when Hydra builds
    its config search path."""

    def manipulate_search_path(self, search_path: Any) -> None:
        if importlib.util.find_spec("benchmarl") is None:
            return
        from ensemble_env.adapters.benchmarl import register

        register()
