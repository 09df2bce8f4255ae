"""The layers every network of the learners is built of: linear layers initialised as MAPPO and CleanRL do
(orthogonal weights, constant biases) and the two-hidden-layer ReLU network.

Below the networks (:mod:`ensemble_mappo.networks`, which re-exports both) and the team deciders' logits modules
(:mod:`ensemble_mappo.team_logits`), so that either can build layers without importing the other.

>>> import torch
>>> net = mlp(3, 8, 2, output_gain=0.0)
>>> net(torch.ones(5, 3)).abs().max().item()  # an output gain of 0: zero weights, zero bias
0.0
"""

from __future__ import annotations

import math

from torch import nn

__all__ = ["layer_init", "mlp"]


def layer_init(layer: nn.Linear, gain: float = math.sqrt(2.0), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights with ``gain``, constant bias (the PPO/MAPPO initialisation)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(n_inputs: int, hidden: int, n_outputs: int, output_gain: float) -> nn.Sequential:
    """Two ReLU hidden layers of width ``hidden`` (MAPPO's default activation), orthogonally initialised."""
    return nn.Sequential(
        layer_init(nn.Linear(n_inputs, hidden)),
        nn.ReLU(),
        layer_init(nn.Linear(hidden, hidden)),
        nn.ReLU(),
        layer_init(nn.Linear(hidden, n_outputs), gain=output_gain),
    )
