"""Thin adapters to the MARL libraries researchers already use: one module per library, each its own extra.

=============  ===========================  ==================================  ===================================
module         extra                        public factory                      what trains
=============  ===========================  ==================================  ===================================
``sb3``        ``ensemble-env[sb3]``        :func:`~.sb3.sb3_env`               one role (the other fixed or
                                                                                frozen), or one parameter-shared
                                                                                policy (SuperSuit)
``rllib``      ``ensemble-env[rllib]``      :func:`~.rllib.ppo_config`          one PPO policy per role; scales out
                                                                                on Ray
``torchrl``    ``ensemble-env[torchrl]``    :func:`~.torchrl.torchrl_env`       two groups + the centralized state
                                                                                (MAPPO with TorchRL's losses)
``benchmarl``  ``ensemble-env[benchmarl]``  :func:`~.benchmarl.benchmarl_task`  BenchMARL's MAPPO / IPPO (and the
                                                                                rest of its on-policy algorithms)
=============  ===========================  ==================================  ===================================

Shared by them: ``wrappers`` (numpy only: the per-choice fusion view and the aligned decider credit, options that
make the game learnable by generic networks without changing it), ``networks`` (the per-choice scorer, built
with PyTorch on demand, and its SB3 policy) and ``scoring`` (what the examples print).

Nothing here imports a library at module level: ``import ensemble_env.adapters.rllib`` works without Ray, and
the factory raises an ImportError naming the extra to install when the library is missing. Each adapter picks
the decider encoding its library supports (:func:`ensemble_env.game.actions.choose_encoding`; see ``docs/adapters.md``).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_class", "require"]


def require(module: str, extra: str) -> None:
    """Raise an ImportError naming the extra to install when ``module`` is not importable."""
    if importlib.util.find_spec(module) is None:
        raise ImportError(
            f"this adapter needs {module!r}, which is not installed: pip install 'ensemble-env[{extra}]' "
            f"(see docs/adapters.md for the pinned versions)"
        )


def lazy_class(module: str, name: str, build: Callable[[], type]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that gives ``name`` as the class ``build()`` returns, built once.

    For adapter classes that subclass a library's base class: the module imports without the library, and the
    class is named ``module.name`` so that pickle finds it by reference (Ray and BenchMARL pickle it).
    """

    @functools.cache
    def built() -> type:
        cls = build()
        cls.__module__, cls.__qualname__, cls.__name__ = module, name, name
        return cls

    def __getattr__(attribute: str) -> Any:
        if attribute == name:
            return built()
        raise AttributeError(f"module {module!r} has no attribute {attribute!r}")

    return __getattr__
