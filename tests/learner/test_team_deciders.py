"""The team deciders composed (issue 50): one categorical head over the teams (``TeamActor``) around a logits module
(``ensemble_mappo.team_logits``, ``ensemble_mappo.residual``), and the checkpoints written before the composition,
whose tensors were the actor's own, still load."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ensemble_env.synthetic import make_cache  # noqa: E402
from ensemble_mappo import algorithms  # noqa: E402
from ensemble_mappo.benchmark import protocols  # noqa: E402
from ensemble_mappo.config import TrainConfig, config_from_dict  # noqa: E402
from ensemble_mappo.networks import (  # noqa: E402
    TeamActor,
    TeamDeciderActor,
    TeamIndexActor,
    TeamScorerActor,
    legacy_name,
    masked_logits,
)
from ensemble_mappo.residual import ResidualLogits, TeamResidualActor  # noqa: E402
from ensemble_mappo.team_logits import IndexLogits, MLPLogits, ScorerLogits  # noqa: E402
from ensemble_mappo.training import setup  # noqa: E402

#: each decider's tensors in a checkpoint written before the composition, in the order of its parameters (the
#: optimizer's moments are one flat buffer in that order)
BEFORE = {
    "teams": ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias", "net.4.weight", "net.4.bias"],
    "scorer": ["team_bias", "net.1.weight", "net.1.bias", "net.3.weight", "net.3.bias", "team_in.weight",
               "team_in.bias", "context_in.weight", "context_in.bias"],
    "index": ["prior", "weight", "log_pseudo_count", "bonus", "size_bias"],
    "residual": ["prior", "weight", "log_pseudo_count", "bonus", "size_bias", "g.0.weight", "g.0.bias", "g.2.weight",
                 "g.2.bias", "g.4.weight", "g.4.bias"],
}  # fmt: skip
KINDS = {
    "teams": (TeamDeciderActor, MLPLogits),
    "scorer": (TeamScorerActor, ScorerLogits),
    "index": (TeamIndexActor, IndexLogits),
    "residual": (TeamResidualActor, ResidualLogits),
}


def _learner(policy: str):
    cache = make_cache(n_models=3, n_questions=480, n_tasks=8, accuracy=[0.5, 0.6, 0.7], seed=1)
    unseen = protocols.learner_overrides("mappo", algorithms.get("mappo").config_class, 3) if policy != "teams" else {}
    values = {**unseen, "decider_policy": policy, "decider_start": "prior", "num_envs": 2, "num_steps": 8}
    config = config_from_dict({**values, "hidden_size": 8, "episode_length": 16})
    assert isinstance(config, TrainConfig)
    run = setup(config, cache, fit=False)
    return run.learner, torch.from_numpy(run.venv.reset(seed=0)[0]["decider"])


@pytest.mark.parametrize("policy", list(BEFORE))
def test_every_team_decider_is_the_one_head_around_its_logits_module(policy: str) -> None:
    learner, inputs = _learner(policy)
    decider = learner.agents.decider
    actor, logits = KINDS[policy]
    assert isinstance(decider, TeamActor) and type(decider) is actor and type(decider.logits) is logits
    names = [name for name, _ in decider.named_parameters()]
    assert all(name.startswith("logits.") for name in names)  # the head holds no parameter
    assert [legacy_name(name) for name in names] == BEFORE[policy]  # and they come in the order they always came
    with torch.no_grad():
        assert torch.equal(decider(inputs), masked_logits(decider.logits(inputs), decider.allowed))
        assert torch.equal(decider.prior_logits(), decider.logits.prior_logits())


@pytest.mark.parametrize("policy", list(BEFORE))
def test_a_checkpoint_written_before_the_composition_loads_to_the_same_networks(policy: str) -> None:
    learner, _ = _learner(policy)
    networks = learner.state_dict()
    changed = {key: value + 0.25 for key, value in networks["decider"].items()}  # other values than the learner's
    old = {legacy_name(key): value for key, value in changed.items()}
    assert list(old) == BEFORE[policy]
    learner.load({**networks, "decider": old}, "old.pt")  # the checked path: names, shapes, finite values
    assert learner.state_dict()["decider"].keys() == changed.keys()
    for key, value in learner.state_dict()["decider"].items():
        assert torch.equal(value, changed[key]), key
    decider = learner.agents.decider
    decider.load_state_dict({legacy_name(key): value for key, value in networks["decider"].items()})  # nn.Module's
    for key, value in decider.state_dict().items():
        assert torch.equal(value, networks["decider"][key]), key
    mixed = {**old, next(iter(changed)): next(iter(changed.values()))}  # today's names and the old: refused
    with pytest.raises(ValueError, match=r"networks\.decider: lacks"):
        learner.load({**networks, "decider": mixed}, "mixed.pt")
