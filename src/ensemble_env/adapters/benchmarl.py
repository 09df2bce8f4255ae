"""BenchMARL adapter: the game as a BenchMARL task, for its MAPPO, IPPO and other algorithms.

BenchMARL's discrete actions are one Categorical per agent, so the decider acts with the ``"subset"`` encoding,
``Discrete(2**N - 1)`` (bit i of index + 1 = model i; N <= 12). The env is the TorchRL one of
:func:`ensemble_env.adapters.torchrl.torchrl_env`: groups "decider" and "fusion", the fusion valid-choice mask as
``("fusion", "action_mask")``, the numeric infos as ``(group, "info")`` and the centralized ``"state"``, which
BenchMARL's MAPPO critics read (IPPO's critics read each group's own observation). BenchMARL masks the actions
of every group once one group has a mask, so the decider gets an all-valid ``("decider", "action_mask")``.

>>> from benchmarl.algorithms import MappoConfig  # doctest: +SKIP
>>> from benchmarl.experiment import Experiment, ExperimentConfig  # doctest: +SKIP
>>> from benchmarl.models.mlp import MlpConfig  # doctest: +SKIP
>>> task = benchmarl_task(episode_length=256)  # doctest: +SKIP
>>> Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
...            critic_model_config=MlpConfig.get_from_yaml(), seed=0, config=ExperimentConfig.get_from_yaml()).run()
... # doctest: +SKIP

BenchMARL 1.5 needs ``torchrl>=0.10,<0.12``, so it lives in its own environment (``pip install
'ensemble-env[benchmarl]'``). ``EnsembleTask`` (the ``TaskClass``) is built on first access, so importing this
module does not import BenchMARL.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ensemble_env.actions import choose_encoding
from ensemble_env.adapters import lazy_class, require
from ensemble_env.env import resolve_cache

__all__ = ["TASK_NAME", "EnsembleTask", "benchmarl_task"]  # noqa: F822 (EnsembleTask: module __getattr__)

TASK_NAME = "ensemble_v0"


def _build_task_class() -> type:
    require("benchmarl", "benchmarl")
    from benchmarl.environments.common import TaskClass

    from ensemble_env.adapters.torchrl import torchrl_env

    def _keep(spec: Any, groups: Any, key: str) -> Any:
        """The env's observation spec with only ``(group, key)`` entries (and no state)."""
        spec = spec.clone()
        for group in groups:
            for name in list(spec[group].keys()):
                if name != key:
                    del spec[group][name]
            if spec[group].is_empty():
                del spec[group]
        if "state" in spec.keys():
            del spec["state"]
        return None if spec.is_empty() else spec

    class EnsembleTask(TaskClass):
        """The ensemble game as a BenchMARL task; ``config`` holds the options of ``parallel_env``."""

        def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None, device: Any) -> Any:
            return functools.partial(
                torchrl_env, seed=seed, device=device, categorical_actions=True, decider_action_mask=True, **self.config
            )

        def supports_continuous_actions(self) -> bool:
            return False

        def supports_discrete_actions(self) -> bool:
            return True

        def has_render(self, env: Any) -> bool:
            return False  # the game renders text; BenchMARL's render callback records video frames

        def max_steps(self, env: Any) -> int:
            base = getattr(env, "base_env", env)  # BenchMARL passes the env under its transforms
            return int(base._env.unwrapped.engine.episode_length)

        def group_map(self, env: Any) -> dict[str, list[str]]:
            return env.group_map

        def observation_spec(self, env: Any) -> Any:
            return _keep(env.observation_spec, self.group_map(env), "observation")

        def info_spec(self, env: Any) -> Any:
            return _keep(env.observation_spec, self.group_map(env), "info")

        def action_mask_spec(self, env: Any) -> Any:
            return _keep(env.observation_spec, self.group_map(env), "action_mask")

        def state_spec(self, env: Any) -> Any:
            from torchrl.data import Composite

            return Composite({"state": env.observation_spec["state"].clone()})

        def action_spec(self, env: Any) -> Any:
            return env.full_action_spec

        @staticmethod
        def env_name() -> str:
            return "ensemble_env"

        @staticmethod
        def log_info(batch: Any) -> dict[str, float]:
            """Logged each iteration: the collected batch's accuracy and mean team size."""
            info = batch.get(("next", "fusion", "info"), None)
            if info is None:
                return {}
            return {"env/accuracy": info["correct"].mean().item(), "env/team_size": info["team_size"].mean().item()}

    return EnsembleTask


# Built on first access, so that importing this module does not import BenchMARL; a pickled task (the experiment
# saves one in its folder) finds the class by reference.
__getattr__ = lazy_class(__name__, "EnsembleTask", _build_task_class)


def benchmarl_task(cache: str | os.PathLike[str] | None = None, **options: Any) -> Any:
    """A BenchMARL task (``TaskClass``) of the game, for ``Experiment(task=...)``.

    ``cache``: a path (it is stored in the task's config, which BenchMARL logs and pickles) or None for the
    embedded cache. ``options``: :func:`ensemble_env.parallel_env`'s; ``decider_action`` must be ``"subset"``
    (the default here). Set ``episode_length``: BenchMARL's evaluation plays whole episodes.
    Needs ``pip install 'ensemble-env[benchmarl]'``.
    """
    require("benchmarl", "benchmarl")
    options = choose_encoding(options, "subset", "BenchMARL", ("subset",))
    if cache is not None:
        cache = os.fspath(cache)
        resolve_cache(cache)  # fail here, naming the file, rather than inside BenchMARL
    return __getattr__("EnsembleTask")(name=TASK_NAME, config={"cache": cache, **options})
