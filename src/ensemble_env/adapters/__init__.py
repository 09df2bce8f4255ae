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

Every factory takes ``env_id``: a registered scenario (``"ensemble_env/EnsembleUnseen-v1"``, ``-v2``, the generated
tasks of ``"ensemble_env/EnsembleGen-v0"``) built by :func:`game_env`, its keywords among the factory's (``cache=``
for the unseen ids; ``generator=``, ``seed=``, ``first=``, ``deck_size=``, ``n_models=`` for the generated one).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = ["game_env", "lazy_class", "require"]


def require(module: str, extra: str) -> None:
    """Raise an ImportError naming the extra to install when ``module`` is not importable."""
    if importlib.util.find_spec(module) is None:
        raise ImportError(
            f"this adapter needs {module!r}, which is not installed: pip install 'ensemble-env[{extra}]' "
            f"(see docs/adapters.md for the pinned versions)"
        )


def game_env(env_id: str | None, cache: Any, options: dict[str, Any], render_mode: str | None = None) -> Any:
    """The PettingZoo parallel env an adapter wraps: :func:`ensemble_env.parallel_env` (``cache``, ``options``), or
    with ``env_id`` the registered id's game (:func:`ensemble_env.make_env`): ``cache`` (when given) and ``options``
    are then the id's factory's keywords, and one contradicting the id's fixed options is refused.

    >>> game_env("ensemble_env/EnsembleUnseen-v2", "toy8", {"window": 50}).engine.config.feedback
    'team'
    """
    from ensemble_env.views.parallel import parallel_env

    if env_id is None:
        return parallel_env(cache, render_mode=render_mode, **options)
    import ensemble_env

    keywords = dict(options) if cache is None else {"cache": cache, **options}
    return ensemble_env.make_env(env_id, render_mode=render_mode, **keywords)


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
