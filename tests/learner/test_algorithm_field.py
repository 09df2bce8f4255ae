"""A learner's config names its algorithm (``config.algorithm``): the registry sets it for every entry, a config
whose fixed fields contradict it is refused naming the field and the value, a run's ``config.json`` records it, and
a run saved before the field existed still loads, with the algorithm it was trained as. The benchmark's presets
(:mod:`ensemble_mappo.presets`) are typed, checked and read-only."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from ensemble_env import datasets
from ensemble_mappo import algorithms, presets, runs
from ensemble_mappo.benchmark import protocols
from ensemble_mappo.config import TrainConfig, config_from_dict
from ensemble_mappo.rlae_config import RLAEConfig

NAMES = list(algorithms.ALGORITHMS)


@pytest.mark.parametrize("name", NAMES)
def test_the_registry_sets_the_algorithm_of_every_entry(name: str) -> None:
    entry = algorithms.get(name)
    for config in (entry.make_config(), entry.make_config(seed=3), entry.from_dict({"seed": 2})):
        assert config.algorithm == name
        assert all(getattr(config, key) == value for key, value in entry.fixed.items())
    assert name in entry.config_class.ALGORITHMS and entry.fixed == entry.config_class.ALGORITHMS[name]
    assert "algorithm" not in entry.options  # train --algorithm chooses it, not a training option
    assert entry.make_config().to_dict()["algorithm"] == name


def test_the_classes_default_to_their_first_algorithm_and_name_only_their_own() -> None:
    assert TrainConfig().algorithm == "mappo" and RLAEConfig().algorithm == "rlae_ppo"
    assert config_from_dict({"algorithm": "ippo"}).critic == "local"  # a fixed field left out is the algorithm's
    assert TrainConfig(algorithm="ippo", critic="local") == algorithms.get("ippo").make_config()
    owners = {entry.config_class for entry in algorithms.ALGORITHMS.values()}
    for config_class in owners:  # each class configures exactly its registered algorithms
        assert set(config_class.ALGORITHMS) == {
            entry.name for entry in algorithms.ALGORITHMS.values() if entry.config_class is config_class
        }
    with pytest.raises(ValueError, match=r"algorithm='rlae_ppo' is not one of 'mappo', 'ippo'"):
        TrainConfig(algorithm="rlae_ppo")
    with pytest.raises(ValueError, match=r"algorithm=7 is not one of"):
        RLAEConfig(algorithm=7)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: TrainConfig(critic="local"), "critic='local' contradicts algorithm='mappo', which sets critic="),
        (lambda: TrainConfig(algorithm="ippo", critic="central"), "critic='central' contradicts algorithm='ippo'"),
        (lambda: config_from_dict({"critic": "local"}), "critic='local' is algorithm='ippo'"),
        (lambda: algorithms.get("mappo").make_config(critic="local"), "critic is set by the algorithm"),
        (lambda: algorithms.get("ippo").make_config(algorithm="mappo"), "algorithm is set by the algorithm"),
        (lambda: algorithms.get("rlae_ppo").from_dict({"algorithm": "rlae_mappo"}), "algorithm='rlae_mappo', but"),
        (lambda: algorithms.get("mappo").from_dict({"critic": "local"}), "critic='local', but mappo sets"),
    ],
    ids=["default", "named", "from dict", "make_config", "make_config name", "from_dict name", "from_dict field"],
)
def test_a_config_that_contradicts_its_algorithm_is_refused(make, needle: str) -> None:
    with pytest.raises(ValueError) as error:
        make()
    assert needle in str(error.value)


@pytest.mark.parametrize("name", NAMES)
def test_the_run_records_its_algorithm_in_config_json(name: str, tmp_path: Path) -> None:
    cache = datasets.load("toy8")
    config = algorithms.get(name).make_config(seed=4)
    runs.write_config(tmp_path, config, cache, "toy8")
    saved = json.loads((tmp_path / runs.CONFIG_NAME).read_text(encoding="utf-8"))
    assert saved["algorithm"] == saved["config"]["algorithm"] == name
    run = runs.read_config(tmp_path)
    assert run.algorithm == run.config.algorithm == name and run.config == config


def _saved(tmp_path: Path, name: str) -> dict:
    runs.write_config(tmp_path, algorithms.get(name).make_config(), datasets.load("toy8"), "toy8")
    return json.loads((tmp_path / runs.CONFIG_NAME).read_text(encoding="utf-8"))


def _rewrite(tmp_path: Path, data: dict) -> None:
    (tmp_path / runs.CONFIG_NAME).write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_a_config_json_written_before_the_field_loads_as_its_algorithm(name: str, tmp_path: Path) -> None:
    """A run of the registry's first version: config.json names the algorithm, its config does not (RLAE's always
    did; MAPPO's and IPPO's gained the field)."""
    data = _saved(tmp_path, name)
    del data["config"]["algorithm"]
    _rewrite(tmp_path, data)
    run = runs.read_config(tmp_path)
    assert run.algorithm == run.config.algorithm == name


@pytest.mark.parametrize("name", ["mappo", "ippo"])
def test_a_run_written_before_the_registry_is_told_by_its_fixed_fields(name: str, tmp_path: Path) -> None:
    """Before the registry, config.json held ``config`` and ``run`` only, and MAPPO's config was the only one: its
    ``critic`` tells IPPO's runs from MAPPO's (:func:`ensemble_mappo.algorithms.saved_name`, the one inference)."""
    data = _saved(tmp_path, name)
    del data["algorithm"], data["config"]["algorithm"]
    _rewrite(tmp_path, data)
    assert runs.read_config(tmp_path).config.algorithm == name
    assert algorithms.saved_name(data["config"]) == name


def test_a_config_json_whose_config_names_another_algorithm_is_refused(tmp_path: Path) -> None:
    data = _saved(tmp_path, "mappo")
    data["algorithm"] = "ippo"
    _rewrite(tmp_path, data)
    with pytest.raises(runs.RunFileError, match=r"config\.json: config: algorithm='mappo', but ippo sets"):
        runs.read_config(tmp_path)


def test_the_presets_are_the_protocols_settings_read_only_and_checked() -> None:
    partial = {
        "decider_start": "prior", "decider_kl_coef": 0.0, "decider_policy": "index", "model_permutations": 2,
        "gamma": 0.9, "selection": "trained", "num_envs": 64, "num_steps": 64, "update_epochs": 5,
        "num_minibatches": 8,
    }  # fmt: skip
    assert protocols.PARTIAL_LEARNER == partial and protocols.PARTIAL_LEARNER is presets.PARTIAL.values
    generated = {**partial, "model_permutations": 0, "decider_policy": "residual", "gamma": 0.99, "hidden_size": 32,
                 "fusion_team_size": True}  # fmt: skip
    assert protocols.GENERATED_LEARNER == generated and protocols.GENERATED_LEARNER is presets.GENERATED.values
    assert protocols.PARTIAL_BUDGET_STEPS is presets.PARTIAL_BUDGET_STEPS
    assert isinstance(protocols.GENERATED_LEARNER, MappingProxyType)
    with pytest.raises(TypeError):
        protocols.GENERATED_LEARNER["gamma"] = 0.5  # type: ignore[index]
    assert presets.GENERATED.overrides(RLAEConfig) == {key: generated[key] for key in
                                                       ("selection", "num_envs", "num_steps", "update_epochs",
                                                        "num_minibatches")}  # fmt: skip
    assert presets.GENERATED.overrides(TrainConfig)["hidden_size"] == 32  # MAPPO's and IPPO's width, not RLAE's
    with pytest.raises(ValueError, match="preset x: mappo_only names hidden_size, which it does not set"):
        presets.Preset("x", {"gamma": 0.5}, mappo_only=frozenset({"hidden_size"}))
    with pytest.raises(ValueError, match="preset x: decider_polcy is not a field"):
        presets.Preset("x", {"decider_polcy": "index"})
    with pytest.raises(ValueError, match="preset x: gamma must be a number in"):
        presets.Preset("x", {"gamma": 2.0})
    with pytest.raises(ValueError, match="preset x: algorithm is the registry's"):
        presets.Preset("x", {"algorithm": "ippo"})


def test_the_protocols_ask_the_registry_how_an_algorithm_is_posed() -> None:
    assert {name: entry.unseen in algorithms.UNSEEN_GAMES for name, entry in algorithms.ALGORITHMS.items()} == {
        "mappo": True, "ippo": True, "rlae_ppo": True, "rlae_mappo": False,
    }  # fmt: skip
    with pytest.raises(ValueError, match="mappo's config is TrainConfig"):
        protocols.learner_overrides("mappo", RLAEConfig, 3)


@pytest.mark.parametrize("unseen", [False, True], ids=["task table", "record start"])
def test_the_offline_start_scores_the_teams_once(unseen: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline start computes every team's train outcomes once (the table's estimator and the record start's
    prior read the same ones), and the record start of tasks never seen runs no estimator it would not use."""
    pytest.importorskip("torch")
    from ensemble_mappo import start
    from ensemble_mappo.training import start_networks

    calls = {"outcomes": 0, "estimator": 0}
    outcomes, estimate = start.team_outcomes, start.pooling.estimate_teams

    def counted_outcomes(*args, **kwargs):
        calls["outcomes"] += 1
        return outcomes(*args, **kwargs)

    def counted_estimate(*args, **kwargs):
        calls["estimator"] += 1
        return estimate(*args, **kwargs)

    monkeypatch.setattr(start, "team_outcomes", counted_outcomes)
    monkeypatch.setattr(start.pooling, "estimate_teams", counted_estimate)
    cache = datasets.load("bbh5")  # 31 teams: the record start fits the default hidden layers (K + 1 units)
    entry = algorithms.get("mappo")
    shape = {"num_envs": 4, "num_steps": 8}
    if unseen:
        (unit, *_), _ = protocols.units(cache, k=2, seed=0)
        cache = unit.cache
        shape.update(protocols.learner_overrides("mappo", entry.config_class, cache.n_models))
    start_networks(entry.make_config(**shape), cache)
    assert calls == {"outcomes": 1, "estimator": 0 if unseen else 1}
