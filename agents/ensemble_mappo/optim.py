"""Adam with per-network gradient clipping, over networks whose parameters share one flat buffer.

PPO takes thousands of small optimizer steps (160 per update by default), each on three small networks. With
``torch.optim.Adam`` (one per network, or one for all) and ``torch.nn.utils.clip_grad_norm_`` per network,
the Python bookkeeping of those calls cost more than the arithmetic (about 0.7 ms per step on the 2-core
machine, ~15% of training). :class:`FlatAdam` moves every parameter and its gradient into two flat buffers
(the parameters become views of them; autograd accumulates into the gradient views in place), so that the
gradient norms, the clipping and the Adam update are a handful of vectorised operations per step.

The update is ``torch.optim.Adam``'s (no weight decay, no amsgrad; ``eps`` added outside the square root)
with one step count per network: a network that did not learn in a step (a frozen actor of the two-stage
schedule) keeps its parameters, moments and step count. Its state is plain tensors, so checkpoints load with
``torch.load(weights_only=True)``.

>>> import torch
>>> from torch import nn
>>> net = nn.Linear(2, 1)
>>> optimizer = FlatAdam({"net": net}, learning_rate=0.1, max_grad_norm=1.0)
>>> before = net.weight.detach().clone()
>>> net(torch.ones(4, 2)).sum().backward()
>>> norms = optimizer.step(["net"])
>>> bool((net.weight != before).all()), net.weight.grad is not None
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor, nn

__all__ = ["FlatAdam"]


class FlatAdam:
    """Adam over ``networks`` (name -> module), their parameters and gradients moved into flat buffers.

    Parameters
    ----------
    networks
        The modules to optimise, by name; their parameters become views of one buffer, in this order.
    learning_rate, betas, eps
        Adam's settings (``learning_rate`` may be changed later through the attribute).
    max_grad_norm
        Each network's gradient is scaled down to at most this L2 norm before the update (MAPPO clips per
        network).

    Call :meth:`zero_grad` before ``loss.backward()`` (it zeroes the gradient buffer; gradients are never set
    to None), then :meth:`step` with the names of the networks that learn.
    """

    def __init__(
        self,
        networks: Mapping[str, nn.Module],
        learning_rate: float,
        *,
        max_grad_norm: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        self.names = tuple(networks)
        self.learning_rate, self.betas, self.eps, self.max_grad_norm = learning_rate, betas, eps, max_grad_norm
        parameters = {name: [p for p in network.parameters() if p.requires_grad] for name, network in networks.items()}
        total = sum(p.numel() for group in parameters.values() for p in group)
        first = next(p for group in parameters.values() for p in group)
        self.params = torch.zeros(total, dtype=first.dtype)
        self.grads = torch.zeros(total, dtype=first.dtype)
        self.slices: dict[str, slice] = {}
        offset = 0
        for name, group in parameters.items():
            start = offset
            for p in group:
                size = p.numel()
                with torch.no_grad():
                    self.params[offset : offset + size].copy_(p.reshape(-1))
                p.data = self.params[offset : offset + size].view_as(p)
                p.grad = self.grads[offset : offset + size].view_as(p)
                offset += size
            self.slices[name] = slice(start, offset)
        self.exp_avg = torch.zeros_like(self.params)
        self.exp_avg_sq = torch.zeros_like(self.params)
        self.steps = dict.fromkeys(self.names, 0)

    def zero_grad(self) -> None:
        self.grads.zero_()

    @torch.no_grad()
    def grad_norms(self) -> Tensor:
        """(n_networks,) each network's gradient L2 norm, in the order of ``names``."""
        return torch.stack([torch.linalg.vector_norm(self.grads[part]) for part in self.slices.values()])

    @torch.no_grad()
    def step(self, learners: Iterable[str]) -> Tensor:
        """Clip each learner's gradient to ``max_grad_norm`` and take one Adam step on the learners.

        Returns every network's gradient norm before clipping (n_networks,).
        """
        learners = [name for name in self.names if name in set(learners)]
        norms = self.grad_norms()
        scales = (self.max_grad_norm / (norms + 1e-6)).clamp_(max=1.0)
        for name in learners:
            self.grads[self.slices[name]].mul_(scales[self.names.index(name)])
            self.steps[name] += 1
        for part, step in self._runs(learners):
            beta1, beta2 = self.betas
            grad, exp_avg, exp_avg_sq = self.grads[part], self.exp_avg[part], self.exp_avg_sq[part]
            exp_avg.lerp_(grad, 1.0 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            denom = (exp_avg_sq.sqrt() / math.sqrt(1.0 - beta2**step)).add_(self.eps)
            self.params[part].addcdiv_(exp_avg, denom, value=-self.learning_rate / (1.0 - beta1**step))
        return norms

    def _runs(self, learners: list[str]) -> list[tuple[slice, int]]:
        """Adjacent learners with equal step counts merged into one slice (one set of operations)."""
        runs: list[tuple[slice, int]] = []
        for name in learners:
            part, step = self.slices[name], self.steps[name]
            if runs and runs[-1][0].stop == part.start and runs[-1][1] == step:
                runs[-1] = (slice(runs[-1][0].start, part.stop), step)
            else:
                runs.append((part, step))
        return runs

    def state_dict(self) -> dict[str, Tensor]:
        """The moments and the per-network step counts (plain tensors; the parameters are the networks')."""
        steps = torch.tensor([self.steps[name] for name in self.names], dtype=torch.int64)
        return {"exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone(), "steps": steps}

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        for key in ("exp_avg", "exp_avg_sq"):
            if tuple(state[key].shape) != tuple(self.params.shape):
                raise ValueError(
                    f"optimizer state {key} has shape {tuple(state[key].shape)}, expected {tuple(self.params.shape)}"
                )
            getattr(self, key).copy_(state[key])
        self.steps = dict(zip(self.names, (int(step) for step in state["steps"]), strict=True))
