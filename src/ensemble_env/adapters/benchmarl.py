"""BenchMARL adapter: the game as a BenchMARL task, for its MAPPO, IPPO and other algorithms.

BenchMARL's discrete actions are one Categorical per agent, so the decider acts with the ``"subset"`` encoding,
``Discrete(2**N - 1)`` (bit i of index + 1 = model i; N <= 12). The env is the TorchRL one of
:func:`ensemble_env.adapters.torchrl.torchrl_env`: groups "decider" and "fusion", the fusion valid-choice mask as
``("fusion", "action_mask")``, the numeric infos as ``(group, "info")`` and the centralized ``"state"``, which
BenchMARL's MAPPO critics read (IPPO's critics read each group's own observation). BenchMARL masks the actions
of every group once one group has a mask, so the decider gets an all-valid ``("decider", "action_mask")``.

A second task, ``weights`` (:func:`benchmarl_weights_task`; ``task=ensemble_env/weights`` on the command line), is
RLAE_MAPPO's game (arXiv 2506.00439; ``docs/rlae.md``): no decider, every model in the team, and N agents
``weight_0 ... weight_{N-1}`` in one group, "weights", each setting its own model's weight in [0, 1] per question
(continuous actions: BenchMARL's MAPPO, IPPO, MASAC, ISAC, MADDPG and IDDPG take it), the state (the fusion
observation and the question's context) for centralized critics.

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

from ensemble_env.adapters import game_env, lazy_class, require
from ensemble_env.cache.datasets import resolve as resolve_cache
from ensemble_env.errors import command
from ensemble_env.game.actions import choose_encoding
from ensemble_env.game.config import rlae_game
from ensemble_env.game.engine import check_seed

# EnsembleTask and EnsembleEnvTask come from the module __getattr__
__all__ = [  # noqa: F822
    "ADAPTER_OPTIONS",
    "ENV_NAME",
    "HYDRA_DEFAULTS",
    "TASK_NAME",
    "WEIGHTS_GAME",
    "WEIGHTS_HYDRA_DEFAULTS",
    "WEIGHTS_TASK_NAME",
    "AlignDeciderCredit",
    "EnsembleEnvTask",
    "EnsembleModel",
    "EnsembleModelConfig",
    "EnsembleTask",
    "align_decider_credit",
    "benchmarl_task",
    "benchmarl_weights_task",
    "main",
    "register",
]

#: task options that choose the adapter's view, not the game's (``torchrl_env``'s, not ``parallel_env``'s)
ADAPTER_OPTIONS = ("fusion_view",)
#: the decider actor's choices in :class:`EnsembleModelConfig`
TEAM_LOGITS = ("per_model", "mlp")

#: the task's name (``task=ensemble_env/ensemble`` on BenchMARL's command line)
TASK_NAME = "ensemble"
#: BenchMARL's name of the environment (``task=ensemble_env/ensemble`` on its command line)
ENV_NAME = "ensemble_env"
#: the task config BenchMARL's command line starts from (``task.NAME=VALUE`` changes one, ``+task.NAME=VALUE``
#: adds another option of ``parallel_env``)
HYDRA_DEFAULTS: dict[str, Any] = {
    "cache": "toy8",
    "split": "train",
    "order": "shuffled",
    "episode_length": 256,
    "decider_action": "subset",
}
#: the per-model weights task (``task=ensemble_env/weights``): RLAE_MAPPO's game
WEIGHTS_TASK_NAME = "weights"
#: the options that make the game RLAE_MAPPO's: no decider (every model answers), a weight per model, one agent
#: per model; ``reward_history=0``: a question is a one-step bandit (the reference learner's setting)
WEIGHTS_GAME: dict[str, Any] = {key: value for key, value in rlae_game("per_model").items() if key != "fusion_extras"}
#: the weights task's command-line config (the per-model agents' observations and the state carry the question's
#: task and, on caches with them, its features whatever ``fusion_extras`` says)
WEIGHTS_HYDRA_DEFAULTS: dict[str, Any] = {
    "cache": "toy8",
    "split": "train",
    "order": "shuffled",
    "episode_length": 256,
    **WEIGHTS_GAME,
}


def _copies(num_envs: int, seed: int | None, device: Any, options: dict[str, Any]) -> Any:
    """A TorchRL ``SerialEnv`` of ``num_envs`` copies of the game, copy i seeded ``seed + i``.

    BenchMARL gives ``get_env_fun`` one seed; a ``SerialEnv`` over one factory would build every copy with it,
    and the copies would play the identical question stream.
    """
    from torchrl.envs import SerialEnv

    from ensemble_env.adapters.torchrl import torchrl_env

    masked = _has_decider(options)  # BenchMARL masks every group or none: the decider's mask is all-valid
    seed = check_seed(seed, "get_env_fun")  # the game's rule; a Python int, so seed + index never wraps around

    def copy(index: int) -> Any:
        return functools.partial(
            torchrl_env,
            seed=None if seed is None else seed + index,
            device=device,
            categorical_actions=True,
            decider_action_mask=masked,
            **options,
        )

    env = SerialEnv(num_envs, [copy(index) for index in range(num_envs)], device=device)
    env.start()  # BenchMARL closes its test env unconditionally, and a SerialEnv never started refuses to close
    return env


def _build_task_class() -> type:
    require("benchmarl", "benchmarl")
    from benchmarl.environments.common import TaskClass
    from torchrl.data import Composite

    def _keep(spec: Any, key: str) -> Any:
        """The groups' ``(group, key)`` entries of an unbatched observation spec (nothing else, no state)."""
        spec = spec.clone()
        if "state" in spec.keys():
            del spec["state"]
        for group in list(spec.keys()):
            for name in list(spec[group].keys()):
                if name != key:
                    del spec[group][name]
            if spec[group].is_empty():
                del spec[group]
        return None if spec.is_empty() else spec

    class EnsembleTask(TaskClass):
        """The ensemble game as a BenchMARL task; ``config`` holds ``cache`` and the options of ``parallel_env``.

        Its envs are already vectorised: ``get_env_fun(num_envs, ...)`` builds a ``SerialEnv`` whose copy i is
        seeded ``seed + i`` (distinct question streams), and BenchMARL uses it as it is. The config decides the
        groups and the kind of actions: discrete (the decider's team index, the fusion agent's answer) or, with
        ``fusion_action="weights"`` and no decider (the ``weights`` task), continuous weights in [0, 1].
        """

        def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None, device: Any) -> Any:
            _check_action_kinds(self.config)
            return functools.partial(_copies, num_envs, seed, device, dict(self.config))

        def supports_continuous_actions(self) -> bool:
            return _weighs(self.config)

        def supports_discrete_actions(self) -> bool:
            return not _weighs(self.config)

        def has_render(self, env: Any) -> bool:
            return False  # the game renders text; BenchMARL's render callback records video frames

        def max_steps(self, env: Any) -> int:
            return _episode_length(self.config)

        def group_map(self, env: Any) -> dict[str, list[str]]:
            return {group: list(agents) for group, agents in _game_facts(self.config)[1].items()}

        def observation_spec(self, env: Any) -> Any:
            return _keep(env.full_observation_spec_unbatched, "observation")

        def info_spec(self, env: Any) -> Any:
            return _keep(env.full_observation_spec_unbatched, "info")

        def action_mask_spec(self, env: Any) -> Any:
            return _keep(env.full_observation_spec_unbatched, "action_mask")

        def state_spec(self, env: Any) -> Any:
            return Composite({"state": env.full_observation_spec_unbatched["state"].clone()})

        def action_spec(self, env: Any) -> Any:
            return env.full_action_spec_unbatched

        @staticmethod
        def env_name() -> str:
            return ENV_NAME

        @staticmethod
        def log_info(batch: Any) -> dict[str, float]:
            """Logged each iteration: the collected batch's accuracy and mean team size."""
            from ensemble_env.adapters.torchrl import WEIGHTS_GROUP

            for group in ("fusion", WEIGHTS_GROUP):
                info = batch.get(("next", group, "info"), None)
                if info is not None:
                    return {
                        "env/accuracy": info["correct"].mean().item(),
                        "env/team_size": info["team_size"].mean().item(),
                    }
            return {}

    return EnsembleTask


@functools.cache
def _game_facts_of(items: tuple[tuple[str, Any], ...]) -> tuple[int, dict[str, tuple[str, ...]]]:
    from ensemble_env.adapters.torchrl import group_map_of

    options = {key: value for key, value in items if key not in ADAPTER_OPTIONS}
    cache, env_id = options.pop("cache", None), options.pop("env_id", None)
    env = game_env(env_id, cache, options)
    groups = {group: tuple(agents) for group, agents in group_map_of(env.possible_agents).items()}
    return int(env.engine.episode_length), groups


def _game_facts(config: dict[str, Any]) -> tuple[int, dict[str, tuple[str, ...]]]:
    """(steps of one episode, TorchRL's groups) under a task config."""
    return _game_facts_of(tuple(sorted((key, _hashable(value)) for key, value in config.items())))


def _episode_length(config: dict[str, Any]) -> int:
    """Steps of one episode under a task config (BenchMARL's evaluation plays whole episodes)."""
    return _game_facts(config)[0]


def _has_decider(config: dict[str, Any]) -> bool:
    return bool(config.get("decider", True))


def _weighs(config: dict[str, Any]) -> bool:
    """Whether a task config's actions are continuous: weights (``fusion_action="weights"``) and no decider."""
    return config.get("fusion_action", "answer") == "weights" and not _has_decider(config)


def _check_action_kinds(config: dict[str, Any]) -> None:
    """BenchMARL trains all groups with discrete actions or all with continuous ones, never both."""
    if config.get("fusion_action", "answer") == "weights" and _has_decider(config):
        raise ValueError(
            f"fusion_action={config['fusion_action']!r} with the decider (decider={config.get('decider', True)!r}) "
            "mixes a discrete group (the team index) and a continuous one (the weights), and BenchMARL trains "
            "either kind alone: set decider=False (the 'weights' task) or fusion_action='answer'"
        )


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _build_task_enum() -> type:
    require("benchmarl", "benchmarl")
    from benchmarl.environments.common import Task

    task_class = _task_class("EnsembleTask")

    class EnsembleEnvTask(Task):
        """BenchMARL's enum of this environment's tasks: ``ensemble`` (the decider and the fusion agent) and
        ``weights`` (RLAE_MAPPO's per-model weights); every option is in the task's config."""

        ENSEMBLE = None
        WEIGHTS = None

        @staticmethod
        def associated_class() -> type:
            return task_class

    return EnsembleEnvTask


def align_decider_credit(batch: Any) -> None:
    """Credit the decider of a collected BenchMARL batch with the reward of the question its team answers.

    ``batch``: BenchMARL's collected batch (copies first, time last). Sets ``("next", "decider", "reward")``
    to :func:`~ensemble_env.adapters.wrappers.aligned_decider_rewards` of the fusion agent's (the game's)
    rewards along each copy's time axis. The steps whose next reward is not in the batch (each copy's last
    step, when its episode goes on) get the batch's mean aligned reward, a neutral credit; a step that ended its
    episode gets 0 (its team answers nothing in the episode). Only the decider's reward changes.
    """
    import numpy as np
    import torch

    from ensemble_env.adapters.wrappers import aligned_decider_rewards

    copies, steps = batch.batch_size[0], batch.batch_size[1]
    rewards = batch["next", "fusion", "reward"].reshape(copies, steps).T.numpy()  # (T, copies)
    done = batch["next", "fusion", "done"].reshape(copies, steps).T.numpy()
    aligned, known = aligned_decider_rewards(rewards, done)
    pending = ~known & ~done
    if known.any():
        aligned[pending] = aligned[known].mean()
    target = batch["next", "decider", "reward"]
    batch["next", "decider", "reward"] = torch.as_tensor(np.ascontiguousarray(aligned.T), dtype=target.dtype).reshape(
        target.shape
    )


def _build_callback() -> type:
    require("benchmarl", "benchmarl")
    from benchmarl.experiment.callback import Callback

    class AlignDeciderCredit(Callback):
        """A BenchMARL callback: :func:`align_decider_credit` on every collected batch, before training."""

        def on_batch_collected(self, batch: Any) -> None:
            align_decider_credit(batch)

    return AlignDeciderCredit


def _build_model() -> type:
    require("benchmarl", "benchmarl")
    from benchmarl.models.mlp import Mlp

    from ensemble_env.adapters.networks import scorer_for, team_scorer

    class EnsembleModel(Mlp):
        """BenchMARL's MLP, except for the actors: the fusion group's is the per-choice scorer on the per-choice
        observation (``fusion_view="per_choice"``), the decider's (``team_logits="per_model"``) the factorised
        team scorer (:mod:`ensemble_env.adapters.networks`)."""

        def __init__(self, **kwargs: Any) -> None:
            n_models, n_choices = kwargs.pop("n_models"), kwargs.pop("n_choices")
            scorer_hidden, team_logits = kwargs.pop("scorer_hidden"), kwargs.pop("team_logits")
            if team_logits not in TEAM_LOGITS:
                raise ValueError(f"team_logits must be one of {TEAM_LOGITS}, got {team_logits!r}")
            super().__init__(**kwargs)
            self.scorer = None
            if self.agent_group == "fusion" and not self.is_critic:
                self.scorer = scorer_for(n_models, n_choices, self.input_features, scorer_hidden)
            elif self.agent_group == "decider" and not self.is_critic and team_logits == "per_model":
                if self.output_features != 2**n_models - 1:
                    raise ValueError(
                        f"team_logits='per_model' needs the decider's subset action (2**{n_models} - 1 teams), "
                        f"got {self.output_features} action logits"
                    )
                self.scorer = team_scorer(n_models, self.input_features)

        def _forward(self, tensordict: Any) -> Any:
            if self.scorer is None:
                return super()._forward(tensordict)
            import torch

            observation = torch.cat([tensordict.get(key) for key in self.in_keys], dim=-1)
            tensordict.set(self.out_key, self.scorer(observation))
            return tensordict

    return EnsembleModel


def _build_model_config() -> type:
    require("benchmarl", "benchmarl")
    from dataclasses import dataclass

    from benchmarl.models.mlp import MlpConfig

    model = _model_class("EnsembleModel")

    @dataclass
    class EnsembleModelConfig(MlpConfig):
        """:class:`EnsembleModel`'s config: BenchMARL's MLP settings, plus the pool's N and C for the scorer."""

        n_models: int = 0
        n_choices: int = 0
        scorer_hidden: int = 32
        #: the decider's actor: "per_model" (team logits as sums of per-model scores) or "mlp" (a logit per team)
        team_logits: str = "mlp"

        @staticmethod
        def associated_class() -> type:
            return model

    return EnsembleModelConfig


# Built on first access, so that importing this module does not import BenchMARL; a pickled task (the experiment
# saves one in its folder) finds the class by reference.
_task_class = lazy_class(__name__, "EnsembleTask", _build_task_class)
_task_enum = lazy_class(__name__, "EnsembleEnvTask", _build_task_enum)
_callback_class = lazy_class(__name__, "AlignDeciderCredit", _build_callback)
_model_class = lazy_class(__name__, "EnsembleModel", _build_model)
_model_config_class = lazy_class(__name__, "EnsembleModelConfig", _build_model_config)
_LAZY = {
    "EnsembleEnvTask": _task_enum,
    "AlignDeciderCredit": _callback_class,
    "EnsembleModel": _model_class,
    "EnsembleModelConfig": _model_config_class,
}


def __getattr__(attribute: str) -> Any:
    return _LAZY.get(attribute, _task_class)(attribute)


def register() -> Any:
    """Make the tasks known to BenchMARL's command line, as ``task=ensemble_env/ensemble`` and
    ``task=ensemble_env/weights``.

    Adds them to BenchMARL's task registry and their configs, :data:`HYDRA_DEFAULTS` and
    :data:`WEIGHTS_HYDRA_DEFAULTS`, to Hydra's config store (group ``task/ensemble_env``). Returns the task enum;
    ``EnsembleEnvTask.ENSEMBLE.get_task(config)`` gives the task for a config dict. :func:`main` calls it before
    BenchMARL's own ``run.py`` entry point.
    """
    require("benchmarl", "benchmarl")
    from benchmarl.environments import task_config_registry
    from hydra.core.config_store import ConfigStore

    enum = __getattr__("EnsembleEnvTask")
    for member, name, defaults in (
        (enum.ENSEMBLE, TASK_NAME, HYDRA_DEFAULTS),
        (enum.WEIGHTS, WEIGHTS_TASK_NAME, WEIGHTS_HYDRA_DEFAULTS),
    ):
        task_config_registry[f"{ENV_NAME}/{name}"] = member
        ConfigStore.instance().store(group=f"task/{ENV_NAME}", name=name, node=dict(defaults))
    return enum


@command("python -m ensemble_env.adapters.benchmarl")
def main() -> None:
    """BenchMARL's command line (``benchmarl/run.py``) with this task registered (BenchMARL missing, or a cache that
    cannot be read, is one error line: :func:`ensemble_env.errors.run_command`)::

        python -m ensemble_env.adapters.benchmarl algorithm=mappo task=ensemble_env/ensemble
        python -m ensemble_env.adapters.benchmarl algorithm=ippo task=ensemble_env/ensemble task.cache=bbh5 \
            +task.alpha=0.5 experiment.max_n_frames=200000 seed=1
        python -m ensemble_env.adapters.benchmarl -m algorithm=mappo,ippo task=ensemble_env/ensemble seed=0,1,2

    Every override of BenchMARL's Hydra config works as with its own tasks (``experiment.*``, ``algorithm.*``,
    ``model=...``, ``-m`` sweeps). Hydra runs in its own output folder: give ``task.cache`` a built-in name or an
    absolute path.
    """
    register()
    from benchmarl.run import hydra_experiment

    hydra_experiment()


def benchmarl_task(cache: str | os.PathLike[str] | None = None, *, env_id: str | None = None, **options: Any) -> Any:
    """A BenchMARL task (``TaskClass``) of the game, for ``Experiment(task=...)``.

    ``cache``: a built-in name (``"toy8"``, ``"bbh5"``) or a path (it is stored in the task's config, which
    BenchMARL logs and pickles), or None for the default built-in cache. ``options``: the options of
    :func:`ensemble_env.parallel_env`; ``decider_action`` must be ``"subset"``
    (the default here). Set ``episode_length``: BenchMARL's evaluation plays whole episodes.
    ``env_id``: a registered scenario, ``cache`` and ``options`` its keywords (:func:`ensemble_env.adapters.game_env`;
    ``"ensemble_env/EnsembleUnseen-v2"``; ``"ensemble_env/EnsembleGen-v0"`` with ``generator`` a path or None,
    ``seed``, ``first``, ``deck_size``: its episodes are whole tasks, no ``episode_length`` needed); on the command
    line ``+task.env_id=...``.
    Needs ``pip install 'ensemble-env[benchmarl]'``.
    """
    require("benchmarl", "benchmarl")
    options = choose_encoding(options, "subset", "BenchMARL", ("subset",))
    return _task("ENSEMBLE", cache, options if env_id is None else {"env_id": env_id, **options})


def benchmarl_weights_task(cache: str | os.PathLike[str] | None = None, **options: Any) -> Any:
    """The ``weights`` task: RLAE_MAPPO's per-model weights game (:data:`WEIGHTS_GAME`) as a BenchMARL task.

    Agents ``weight_0 ... weight_{N-1}`` in one group, "weights", each with a continuous action in [0, 1] (its
    model's weight) and an observation of the question's context and its own model's probabilities; the state
    (the fusion observation and the context) for centralized critics (MAPPO, MASAC, MADDPG). ``cache`` as in
    :func:`benchmarl_task`; ``options``: the other options of :func:`ensemble_env.parallel_env` (``alpha``,
    ``fusion_extras``, ...); a different ``decider``, ``fusion_action`` or ``fusion_agents`` is refused, naming it.
    Set ``episode_length``: BenchMARL's evaluation plays whole episodes.
    """
    require("benchmarl", "benchmarl")
    for name in ("decider", "fusion_action", "fusion_agents"):
        if name in options and options[name] != WEIGHTS_GAME[name]:
            raise ValueError(
                f"{name}={options[name]!r} is not the weights task's {WEIGHTS_GAME[name]!r} "
                "(for the decider's game use benchmarl_task)"
            )
    return _task("WEIGHTS", cache, {**WEIGHTS_GAME, **options})


def _task(member: str, cache: str | os.PathLike[str] | None, options: dict[str, Any]) -> Any:
    if cache is not None:
        cache = os.fspath(cache)
        resolve_cache(cache)  # fail here, naming the file, rather than inside BenchMARL
    config = {"cache": cache, **options}
    _game_facts(config)  # a scenario's keywords checked here too (its game built once, as BenchMARL will)
    return getattr(__getattr__("EnsembleEnvTask"), member).get_task(config)


if __name__ == "__main__":  # python -m ensemble_env.adapters.benchmarl: run as the importable module, for pickling
    from ensemble_env.adapters import benchmarl as _module

    raise SystemExit(_module.main())
