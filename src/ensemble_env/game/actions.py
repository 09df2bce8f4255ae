"""The agents' action encodings in one place: spaces, validation, decoding to teams, encoding teams back.

The decider commits a team, a subset of the N models; libraries differ in the action spaces they accept,
so the team has three encodings (``EnvConfig.decider_action``):

================  ==========================  ==========================================================
encoding          space                       one action
================  ==========================  ==========================================================
``multibinary``   ``MultiBinary(N)``          N values 0/1, one per model (the paper; SB3, TorchRL)
``multidiscrete`` ``MultiDiscrete([2] * N)``  the same values (RLlib, which lacks MultiBinary)
``subset``        ``Discrete(2**N - 1)``      a team index: bit i of index + 1 is model i (N <= 12;
                                              BenchMARL, SuperSuit padding: one categorical)
================  ==========================  ==========================================================

The fusion agent answers with ``Discrete(C)``: any integer is accepted (an index outside the question's
valid choices is a wrong answer, never an error). With ``fusion_action="weights"`` (RLAE) it sets a weight per
model instead, ``Box(0, 1, (N,), float32)`` (:func:`weights_space`, :func:`decode_weights`); with
``fusion_agents="per_model"`` agent ``weight_i`` sets model i's, ``Box(0, 1, (1,), float32)``. Weights are
real numbers (booleans, integers and floats of any width) in [0, 1]; NaN, infinities and values outside [0, 1]
are refused, never clipped.

Every action passes through :func:`decode_decider` / :func:`decode_fusion` exactly once, batched ((B, ...)
for :class:`~ensemble_env.game.engine.EnsembleVectorEnv`) or single (PettingZoo, ``n_envs=None``). One rule for
dtypes: booleans and integers are taken as they are; floats (any width) only when every value is a finite
integer; anything else is refused. A refused action raises a ValueError that names the agent, the expected
space and the value received, and never changes the environment.

>>> import numpy as np
>>> encoding = DECIDER_ENCODINGS["subset"]
>>> encoding.space(3)
Discrete(7)
>>> encoding.encode(np.array([[1, 0, 1]], dtype=bool))
array([4])
>>> decode_decider(4, "subset", 3)
array([[1, 0, 1]], dtype=uint8)
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces

from ensemble_env.game.jit import kernel

__all__ = [
    "DECIDER_ENCODINGS",
    "MAX_SUBSET_MODELS",
    "DeciderEncoding",
    "choose_encoding",
    "decider_space",
    "decode_decider",
    "decode_fusion",
    "decode_weights",
    "encode_team",
    "fusion_space",
    "subset_masks",
    "weights_space",
]

#: the subset encoding enumerates 2**N - 1 teams; beyond this many models it is refused
MAX_SUBSET_MODELS = 12


def _show(value: Any, limit: int = 80) -> str:
    """A short description of a received value: its repr, cut, and its dtype."""
    array = np.asarray(value) if not isinstance(value, np.ndarray) else value
    text = np.array2string(array, threshold=12, max_line_width=limit) if array.dtype != object else repr(value)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{text} (dtype {array.dtype}, shape {array.shape})"


def _fail(agent: str, space: Any, value: Any, problem: str) -> ValueError:
    return ValueError(f"{agent} action: {problem}; expected {space}, got {_show(value)}")


def _integers(array: np.ndarray) -> np.ndarray | None:
    """int64 values of an array under the dtype rule, or None when it breaks it."""
    kind = array.dtype.kind
    if kind in "iub":
        return array.astype(np.int64, copy=False)
    if kind == "f" and bool(np.all(np.isfinite(array))) and bool(np.all(array == np.round(array))):
        if np.all(np.abs(array.astype(np.float64)) < 2.0**63):
            return array.astype(np.int64)
    return None


@kernel()
def _binary_teams(bits: np.ndarray) -> tuple[np.ndarray, int]:
    """(B, N) uint8 copy of 0/1 values, and the flat index of the first other value (-1 if none)."""
    n_envs, n_models = bits.shape
    teams = np.empty((n_envs, n_models), dtype=np.uint8)
    for env in range(n_envs):
        for i in range(n_models):
            value = bits[env, i]
            if value == 1:
                teams[env, i] = 1
            elif value == 0:
                teams[env, i] = 0
            else:
                return teams, env * n_models + i
    return teams, -1


class DeciderEncoding:
    """One encoding of the decider's team: its space, how actions decode to teams and teams encode back."""

    name = ""

    def space(self, n_models: int) -> spaces.Space[Any]:
        raise NotImplementedError

    def action_shape(self, n_models: int) -> tuple[int, ...]:
        """Shape of one action."""
        return (n_models,)

    def decode(self, array: np.ndarray, n_models: int) -> tuple[np.ndarray | None, str]:
        """(B, N) uint8 teams from (B, *action_shape) actions, or (None, what is wrong)."""
        raise NotImplementedError

    def encode(self, teams: np.ndarray) -> np.ndarray:
        """Actions (B, *action_shape) of (B, N) bool teams."""
        raise NotImplementedError


class _Bits(DeciderEncoding):
    """A value 0/1 per model."""

    def decode(self, array: np.ndarray, n_models: int) -> tuple[np.ndarray | None, str]:
        if array.dtype.kind == "b":
            return np.ascontiguousarray(array, dtype=np.uint8), ""
        if array.dtype.kind not in "iuf":
            return None, "entries must be 0 or 1"
        # two signatures for every dtype and layout (no compile per action dtype): int8, what the spaces sample,
        # as it is (the hot path: no copy), and float64 for every other dtype (an integer or float is 0 or 1
        # exactly when its float64 value is, so the cast changes no verdict)
        kind = np.int8 if array.dtype == np.int8 else np.float64
        teams, bad = _binary_teams(np.ascontiguousarray(array, dtype=kind))
        if bad >= 0:
            return None, f"entries must be 0 or 1 (found {array.reshape(-1)[bad].item()!r})"
        return teams, ""

    def encode(self, teams: np.ndarray) -> np.ndarray:
        return np.asarray(teams).astype(np.int8)


class _MultiBinary(_Bits):
    name = "multibinary"

    def space(self, n_models: int) -> spaces.Space[Any]:
        return spaces.MultiBinary(n_models)


class _MultiDiscrete(_Bits):
    name = "multidiscrete"

    def space(self, n_models: int) -> spaces.Space[Any]:
        return spaces.MultiDiscrete([2] * n_models)

    def encode(self, teams: np.ndarray) -> np.ndarray:
        return np.asarray(teams).astype(np.int64)


@functools.cache
def subset_masks(n_models: int) -> np.ndarray:
    """(2**N - 1, N) uint8: row k is the team of index k (bit i of k + 1 = model i)."""
    codes = np.arange(1, 2**n_models, dtype=np.int64)
    masks = ((codes[:, None] >> np.arange(n_models)[None, :]) & 1).astype(np.uint8)
    masks.flags.writeable = False
    return masks


class _Subset(DeciderEncoding):
    name = "subset"

    def space(self, n_models: int) -> spaces.Space[Any]:
        return spaces.Discrete(2**n_models - 1)

    def action_shape(self, n_models: int) -> tuple[int, ...]:
        return ()

    def decode(self, array: np.ndarray, n_models: int) -> tuple[np.ndarray | None, str]:
        codes = _integers(array)
        if codes is None:
            return None, "a team index must be an integer"
        bad = (codes < 0) | (codes >= 2**n_models - 1)
        if bad.any():
            return None, f"team index {int(codes[bad][0])} is outside 0..{2**n_models - 2}"
        return subset_masks(n_models)[codes], ""

    def encode(self, teams: np.ndarray) -> np.ndarray:
        teams = np.asarray(teams, dtype=np.int64)
        return (teams << np.arange(teams.shape[-1])).sum(axis=-1) - 1


#: the decider's encodings by name (``EnvConfig.decider_action``)
DECIDER_ENCODINGS: dict[str, DeciderEncoding] = {
    encoding.name: encoding for encoding in (_MultiBinary(), _MultiDiscrete(), _Subset())
}


def decider_space(encoding: str, n_models: int) -> spaces.Space[Any]:
    """The decider's action space (a new object: build it once and keep it)."""
    return DECIDER_ENCODINGS[encoding].space(n_models)


def fusion_space(max_choices: int) -> spaces.Discrete:
    """The fusion agent's action space: one answer index."""
    return spaces.Discrete(max_choices)


def decode_decider(
    action: Any, encoding: str, n_models: int, n_envs: int | None = None, min_team_size: int = 0
) -> np.ndarray:
    """(B, N) uint8 C-contiguous teams of decider actions, validated.

    ``n_envs``: B for a batch of actions of shape (B, *action_shape); None for one action (B = 1). A team
    smaller than ``min_team_size`` is refused.
    """
    coder = DECIDER_ENCODINGS[encoding]
    shape = coder.action_shape(n_models)
    batch = 1 if n_envs is None else n_envs
    array = action if isinstance(action, np.ndarray) else np.asarray(action)
    expected = shape if n_envs is None else (n_envs, *shape)
    if array.shape != expected and not (shape == () and array.shape in ((batch,), (batch, 1))):
        raise _decider_error(coder, n_models, n_envs, action, f"shape must be {expected}")
    teams, problem = coder.decode(array.reshape(batch, *shape), n_models)
    if teams is None:
        raise _decider_error(coder, n_models, n_envs, action, problem)
    if min_team_size:
        sizes = teams.sum(axis=1, dtype=np.int64)
        if (sizes < min_team_size).any():
            problem = f"a team of {int(sizes.min())} model(s) is below min_team_size={min_team_size}"
            raise _decider_error(coder, n_models, n_envs, action, problem)
    return teams


def _decider_error(coder: DeciderEncoding, n_models: int, n_envs: int | None, action: Any, problem: str) -> ValueError:
    space = coder.space(n_models)
    return _fail("decider", space if n_envs is None else f"{n_envs} actions of {space}", action, problem)


def decode_fusion(action: Any, n_envs: int | None = None, max_choices: int | None = None) -> np.ndarray:
    """(B,) int64 answers of fusion actions (any integer; out-of-range answers are wrong, never an error).

    ``max_choices`` (C) only names the space in error messages.
    """
    if type(action) is int and n_envs is None and -(2**63) <= action < 2**63:  # the common case, fast
        return np.array([action], dtype=np.int64)
    batch = 1 if n_envs is None else n_envs
    one = f"Discrete({'C' if max_choices is None else max_choices})"
    space = f"{one}, one answer index" if n_envs is None else f"{n_envs} answer indices of {one}"
    array = action if isinstance(action, np.ndarray) else np.asarray(action)
    if array.shape not in (((), (1,)) if n_envs is None else ((batch,), (batch, 1))):
        raise _fail("fusion", space, action, f"shape must be {() if n_envs is None else (batch,)}")
    answers = _integers(array)
    if answers is None:
        raise _fail("fusion", space, action, "an answer must be an integer")
    return np.ascontiguousarray(answers.reshape(batch))


def weights_space(n_models: int) -> spaces.Box:
    """The action space of a weighting agent: ``n_models`` weights in [0, 1] (a new object: build it once)."""
    return spaces.Box(0.0, 1.0, shape=(n_models,), dtype=np.float32)


def decode_weights(action: Any, n_models: int, n_envs: int | None = None, agent: str = "fusion") -> np.ndarray:
    """(B, n_models) float32 C-contiguous weights of ``agent``'s actions, validated (real numbers in [0, 1]).

    ``n_envs``: B for a batch of shape (B, n_models) (or (B,) when ``n_models`` is 1); None for one action of
    shape (n_models,) (or a scalar when ``n_models`` is 1). A refused action raises a ValueError naming the agent,
    the space and the value.
    """
    batch = 1 if n_envs is None else n_envs
    one = f"Box(0.0, 1.0, ({n_models},), float32)"
    space = one if n_envs is None else f"{n_envs} actions of {one}"
    array = action if isinstance(action, np.ndarray) else np.asarray(action)
    expected = (n_models,) if n_envs is None else (batch, n_models)
    loose = ((), (1,)) if n_envs is None else ((batch,),)
    if array.shape != expected and not (n_models == 1 and array.shape in loose):
        raise _fail(agent, space, action, f"shape must be {expected}")
    if array.dtype.kind not in "biuf":
        raise _fail(agent, space, action, "a weight must be a real number")
    if array.dtype.kind != "b":
        good = (array >= 0) & (array <= 1)  # False for NaN; compared in the action's own dtype, before rounding
        if not good.all():
            bad = array.reshape(-1)[int(np.argmin(good.reshape(-1)))]
            raise _fail(agent, space, action, f"weights must be in [0, 1] (found {bad.item()!r})")
    return np.ascontiguousarray(array.reshape(batch, n_models), dtype=np.float32)


def encode_team(team: Any, encoding: str) -> np.ndarray:
    """The action(s) of one team (N,) or a batch of teams (B, N) (bool or 0/1) in ``encoding``.

    >>> int(encode_team([1, 1, 0], "subset")), encode_team([1, 1, 0], "multibinary").tolist()
    (2, [1, 1, 0])
    """
    teams = np.asarray(team).astype(bool)
    single = teams.ndim == 1
    actions = DECIDER_ENCODINGS[encoding].encode(np.atleast_2d(teams))
    return actions[0] if single else actions


def choose_encoding(options: dict[str, Any], default: str, library: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    """``options`` with ``decider_action`` set to ``default`` unless the caller chose another one ``library`` takes.

    >>> choose_encoding({}, "multidiscrete", "RLlib", ("multidiscrete", "subset"))
    {'decider_action': 'multidiscrete'}
    >>> choose_encoding({"decider_action": "multibinary"}, "subset", "BenchMARL", ("subset",))
    Traceback (most recent call last):
    ...
    ValueError: decider_action='multibinary' does not work with BenchMARL: use 'subset' (default 'subset')
    """
    chosen = options.get("decider_action", default)
    if chosen not in allowed:
        raise ValueError(
            f"decider_action={chosen!r} does not work with {library}: use {' or '.join(map(repr, allowed))} "
            f"(default {default!r})"
        )
    return {**options, "decider_action": chosen}
