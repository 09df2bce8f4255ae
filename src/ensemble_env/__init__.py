"""ensemble_env: learn to route and fuse LLM ensembles with multi-agent RL.

A pool of N models has answered every question of a benchmark (their per-choice scores sit in an HDF5
"logit cache"). Two cooperating agents play on the stream of questions: the *decider* picks a small team of
models for each question, the *fusion* agent reads the team's probabilities and answers. This is the
two-stage Dec-POMDP of RL-Focal (arXiv 2502.04492).

>>> import ensemble_env
>>> env = ensemble_env.parallel_env()          # the default built-in cache, bbh5
>>> obs, infos = env.reset(seed=0)
>>> env.agents
['decider', 'fusion']
"""

import sys

from ensemble_env import baselines, metrics
from ensemble_env.cache import datasets, synthetic
from ensemble_env.cache.datasets import default_cache_path, load_default_cache
from ensemble_env.cache.io import load_cache, save_cache
from ensemble_env.cache.logit_cache import CacheError, LogitCache
from ensemble_env.game.config import EnvConfig
from ensemble_env.game.engine import EnsembleVectorEnv
from ensemble_env.views.parallel import EnsembleParallelEnv, env, parallel_env, vector_env

# ``import ensemble_env.datasets`` and ``import ensemble_env.synthetic`` keep working: the modules live in the
# caches part (ensemble_env/cache/) and are published under these names too.
sys.modules.setdefault("ensemble_env.datasets", datasets)
sys.modules.setdefault("ensemble_env.synthetic", synthetic)

__all__ = [
    "ENV_ID",
    "CacheError",
    "EnsembleParallelEnv",
    "EnsembleVectorEnv",
    "EnvConfig",
    "LogitCache",
    "baselines",
    "datasets",
    "default_cache_path",
    "env",
    "load_cache",
    "load_default_cache",
    "metrics",
    "parallel_env",
    "save_cache",
    "synthetic",
    "vector_env",
]
__version__ = "0.1.0"

ENV_ID = "ensemble_env/Ensemble-v1"


def _register() -> None:
    """Register the env in PettingZoo's registry (PettingZoo >= 1.25 has one) as ``ensemble_env/Ensemble-v1``."""
    try:
        from pettingzoo.env_registry.registration import aec_registry, parallel_registry, register
    except ImportError:  # older PettingZoo: no registry
        return
    if ENV_ID not in parallel_registry:
        register("parallel", ENV_ID, entry_point="ensemble_env.views.parallel:parallel_env")
    if ENV_ID not in aec_registry:
        register("aec", ENV_ID, entry_point="ensemble_env.views.parallel:env")


_register()
