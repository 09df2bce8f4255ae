"""The optimizer of the learner's networks: Adam with each network's gradient norm clipped, in two forms.

Both take the networks by name (``{"decider": ..., "fusion": ..., "critic": ...}``, see
:meth:`~ensemble_mappo.agents.Agents.networks`) and have the interface of :class:`Optimizer`: ``zero_grad()``,
``loss.backward()``, then ``step(learners)`` clips the gradient of each network named in ``learners`` to
``max_grad_norm`` and takes one Adam step on those networks only (a frozen actor of the two-stage schedule
keeps its parameters, moments and step count). Their state dicts have the same format (the checkpoint's
``"optimizer"`` entry), so either form resumes the other's run. :data:`OPTIMIZERS` names them;
``make_optimizer(agents, config, "adam")`` or ``train(..., optimizer="adam")`` switches.

- :class:`TorchAdam`, the plain form: one ``torch.optim.Adam`` and ``torch.nn.utils.clip_grad_norm_`` per
  network, what CleanRL writes. Start here to change the optimizer.
- :class:`FlatAdam`, the fused form and the default: every parameter and its gradient moved into two flat
  buffers (the parameters become views of them; autograd accumulates into the gradient views in place), so
  that the gradient norms, the clipping and the Adam update are a handful of vectorised operations per step.
  PPO takes thousands of small steps (80 per update by default) on three small networks, and the plain
  form's Python bookkeeping costs more than its arithmetic: the default bbh5 run took 37.4 CPU seconds with
  the fused form against 49.9 with the plain one (one interleaved run; docs/mappo.md, "How the code reads";
  ``torch.optim.Adam(fused=True)`` and ``foreach=True`` are slower than this form too).

The update is ``torch.optim.Adam``'s (no weight decay, no amsgrad; ``eps`` added outside the square root) with
one step count per network; the two forms agree to float rounding (tests/learner/test_mappo_credit.py). State is
plain tensors, so checkpoints load with ``torch.load(weights_only=True)``.

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
from typing import Protocol

import torch
from torch import Tensor, nn

__all__ = ["OPTIMIZERS", "FlatAdam", "Optimizer", "TorchAdam"]


class Optimizer(Protocol):
    """What the PPO update needs of an optimizer over named networks (:class:`FlatAdam`, :class:`TorchAdam`)."""

    names: tuple[str, ...]
    """The networks, in the order of :meth:`step`'s gradient norms and of the state's ``steps``."""
    learning_rate: float
    """Adam's step size; the trainer sets it before each update (annealing)."""

    def zero_grad(self) -> None:
        """Clear the gradients before ``loss.backward()``."""

    def step(self, learners: Iterable[str]) -> Tensor:
        """Clip each learner's gradient norm, step the learners; every network's norm before clipping."""
        ...

    def state_dict(self) -> dict[str, Tensor]:
        """``{"exp_avg", "exp_avg_sq"}`` (flat, in the order of the networks' parameters) and ``"steps"``."""
        ...

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        """Restore a :meth:`state_dict` of either form."""


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

    Notes
    -----
    Call :meth:`zero_grad` before ``loss.backward()`` (it zeroes the gradient buffer; gradients are never set
    to None), then :meth:`step` with the names of the networks that learn. Build it once the networks are
    final: it redirects their parameters into its buffers, so a parameter replaced afterwards (a new
    ``nn.Parameter``, ``module.to(...)``, a deep copy) is no longer the one it updates; ``load_state_dict``
    on the modules is fine (it copies into the views).
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


class TorchAdam:
    """The plain form of :class:`FlatAdam`: ``torch.optim.Adam`` with ``clip_grad_norm_`` per network.

    One ``torch.optim.Adam`` over every network's parameters, as CleanRL writes it. :meth:`zero_grad` sets
    the gradients to None and :meth:`step` sets them to None again on the networks not in ``learners``, so
    Adam skips those (one step count per network, as in :class:`FlatAdam`). Any other ``torch.optim``
    optimizer fits the same place (``self.adam``); :meth:`state_dict` then needs its own state's format.
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
        self.max_grad_norm = max_grad_norm
        self.groups = {name: [p for p in net.parameters() if p.requires_grad] for name, net in networks.items()}
        everything = [p for group in self.groups.values() for p in group]
        self.adam = torch.optim.Adam(everything, lr=learning_rate, betas=betas, eps=eps)

    @property
    def learning_rate(self) -> float:
        return float(self.adam.param_groups[0]["lr"])

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        for group in self.adam.param_groups:
            group["lr"] = value

    def zero_grad(self) -> None:
        self.adam.zero_grad(set_to_none=True)

    def step(self, learners: Iterable[str]) -> Tensor:
        """Clip each learner's gradient to ``max_grad_norm`` and take one Adam step on the learners.

        Returns every network's gradient norm before clipping (n_networks,).
        """
        learning = set(learners)
        norms = []
        for name, group in self.groups.items():
            if name in learning:
                norms.append(nn.utils.clip_grad_norm_(group, self.max_grad_norm))
                continue
            grads = [p.grad.reshape(-1) for p in group if p.grad is not None]
            norms.append(torch.linalg.vector_norm(torch.cat(grads)) if grads else torch.zeros(()))
            for p in group:
                p.grad = None  # Adam skips a parameter without a gradient: the network does not step
        self.adam.step()
        return torch.stack(norms)

    def state_dict(self) -> dict[str, Tensor]:
        """:class:`FlatAdam`'s format: the moments flat in the order of the parameters, a step count per network."""
        exp_avg, exp_avg_sq, steps = [], [], []
        for group in self.groups.values():
            states = [self.adam.state.get(p, {}) for p in group]
            for p, state in zip(group, states, strict=True):
                exp_avg.append(state["exp_avg"].reshape(-1) if state else torch.zeros(p.numel(), dtype=p.dtype))
                exp_avg_sq.append(state["exp_avg_sq"].reshape(-1) if state else torch.zeros(p.numel(), dtype=p.dtype))
            steps.append(int(states[0]["step"]) if group and states[0] else 0)
        return {
            "exp_avg": torch.cat(exp_avg).clone(),
            "exp_avg_sq": torch.cat(exp_avg_sq).clone(),
            "steps": torch.tensor(steps, dtype=torch.int64),
        }

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        total = sum(p.numel() for group in self.groups.values() for p in group)
        for key in ("exp_avg", "exp_avg_sq"):
            if tuple(state[key].shape) != (total,):
                raise ValueError(f"optimizer state {key} has shape {tuple(state[key].shape)}, expected ({total},)")
        offset = 0
        for group, step in zip(self.groups.values(), (int(step) for step in state["steps"]), strict=True):
            for p in group:
                size = p.numel()
                self.adam.state.pop(p, None)
                if step > 0:
                    self.adam.state[p] = {
                        "step": torch.tensor(float(step)),
                        "exp_avg": state["exp_avg"][offset : offset + size].view_as(p).clone(),
                        "exp_avg_sq": state["exp_avg_sq"][offset : offset + size].view_as(p).clone(),
                    }
                offset += size


#: the optimizers by the name ``make_optimizer`` and ``train`` take: the fused form (the default) and the plain one
OPTIMIZERS: dict[str, type[FlatAdam] | type[TorchAdam]] = {"fused": FlatAdam, "adam": TorchAdam}
