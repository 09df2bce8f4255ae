"""Snapshots of the engine's copies: taken, checked by value and restored (``EnsembleVectorEnv.get_state`` and
``set_state``).

A snapshot is a dict of plain numpy arrays: the copies' state (the fields of
:class:`~ensemble_env.game.records.CopyState`), the current observations (``obs_decider``, ``obs_fusion``), the
generator's words (``rng``, PCG64) and the engine's ``signature`` (its copies, cache and options); with
``episodes="task"`` also the deck of tasks (``task_deck``), with a record extra the counts of the task's record
(``model_right``, ``team_right``: :class:`~ensemble_env.game.records.TaskRecord`), and with ``feedback="team"``
what was revealed (``revealed``, ``seen``, ``seen_right``, ``model_seen``, ``team_seen``:
:class:`~ensemble_env.game.records.Feedback`), so that a snapshot of a game without them holds the arrays it always
held (:data:`OPTIONAL_KEYS`).
``numpy.savez(path, **snapshot)`` stores it and ``dict(numpy.load(path))`` reads it back, without pickle.

:func:`restore_snapshot` checks every array before anything changes: its name, shape and dtype here, then its values
against the configuration and the cache (:class:`~ensemble_env.game.snapshot_check.SnapshotCheck`), so that the
kernels never see a state they could not step safely. The engine's methods are thin: they pass the engine (read
through :class:`~ensemble_env.game.snapshot_check.Game`), its private records and its optional arrays by snapshot
name.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ensemble_env.game.build import new_outputs
from ensemble_env.game.records import CopyState, Feedback, Outputs, TaskRecord
from ensemble_env.game.snapshot_check import MAX_STEPS, Game, SnapshotCheck
from ensemble_env.text import show

__all__ = [
    "MAX_STEPS",
    "OPTIONAL_KEYS",
    "SNAPSHOT_KEYS",
    "Game",
    "restore_snapshot",
    "snapshot_signature",
    "take_snapshot",
]

#: the arrays of every snapshot, by name
SNAPSHOT_KEYS = (*CopyState._fields, "obs_decider", "obs_fusion", "rng", "signature")
#: the arrays of some snapshots: the deck of tasks (``episodes="task"``), the task's record (a record extra), what was
#: revealed (``feedback="team"``)
OPTIONAL_KEYS = ("task_deck", *TaskRecord._fields, *Feedback._fields)


def snapshot_signature(game: Game) -> str:
    """What a snapshot may be restored into: the engine's copies, cache and options (the RLAE options named only
    when they differ from the defaults)."""
    cfg, cache = game.config, game.cache
    return (
        f"num_envs={game.num_envs} models={list(cache.models)} n_questions={cache.n_questions} "
        f"tasks={list(cache.task_names)} config={cfg.signature_text()}"
    )


def take_snapshot(
    game: Game, state: CopyState, out: Outputs, generator: np.random.Generator, optional: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """A snapshot of every copy of ``game``: copies of its ``state``, its ``optional`` arrays (by name, those of
    :data:`OPTIONAL_KEYS` the game has) and observations (``out``), the words of its ``generator`` and its
    signature."""
    snapshot = {name: array.copy() for name, array in state._asdict().items()}
    snapshot.update((name, array.copy()) for name, array in optional.items())
    snapshot["obs_decider"] = out.decider.copy()
    snapshot["obs_fusion"] = out.fusion.copy()
    snapshot["rng"] = _rng_to_array(generator)
    snapshot["signature"] = np.array(snapshot_signature(game))
    return snapshot


def restore_snapshot(
    game: Game,
    state: CopyState,
    out: Outputs,
    generator: np.random.Generator,
    snapshot: Mapping[str, np.ndarray],
    optional: Mapping[str, np.ndarray],
) -> tuple[Outputs, np.random.Generator]:
    """Check ``snapshot`` against ``game`` (its current ``state``, ``optional`` arrays, observations ``out`` and
    ``generator`` give the shapes and dtypes), then write it into ``state``'s and the ``optional`` arrays; return the
    restored observations and generator.

    A snapshot that fails a check raises a ValueError naming the field, the copy and the value, before anything
    changes."""
    live = {**state._asdict(), **optional}
    values = _checked_snapshot(game, live, out, generator, snapshot)
    for name, array in live.items():
        array[...] = values[name]
    restored = new_outputs(game.num_envs, game.layout)
    restored.decider[...] = values["obs_decider"]
    restored.fusion[...] = values["obs_fusion"]
    return restored, _rng_from_array(values["rng"])


def _checked_snapshot(
    game: Game,
    live: dict[str, np.ndarray],
    out: Outputs,
    generator: np.random.Generator,
    snapshot: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Copies of the snapshot's arrays (C order, the engine's dtypes: those of its ``live`` arrays by name),
    checked by shape, dtype and value."""
    if not isinstance(snapshot, Mapping):
        raise ValueError(f"set_state: the snapshot must be the dict get_state() returns, got {show(snapshot)}")
    expected = (*SNAPSHOT_KEYS, *(name for name in OPTIONAL_KEYS if name in live))
    missing = [name for name in expected if name not in snapshot]
    if missing:
        raise ValueError(f"set_state: the snapshot lacks {', '.join(missing)}; give the dict get_state() returns")
    signature = str(np.asarray(snapshot["signature"]))
    if signature != snapshot_signature(game):
        raise ValueError(
            f"set_state: the snapshot was taken from another configuration or cache ({show(signature, 2000)}); "
            f"this engine is {snapshot_signature(game)}"
        )
    references = dict(live)
    references["obs_decider"], references["obs_fusion"] = out.decider, out.fusion
    references["rng"] = _rng_to_array(generator)
    values: dict[str, np.ndarray] = {}
    for name, reference in references.items():
        try:
            value = np.asarray(snapshot[name])
        except (ValueError, TypeError) as error:
            raise ValueError(f"set_state: {name} is not an array ({type(error).__name__}: {error})") from None
        if value.shape != reference.shape or value.dtype != reference.dtype:
            raise ValueError(
                f"set_state: {name} has shape {value.shape} and dtype {value.dtype}, expected "
                f"{reference.shape} and {reference.dtype}"
            )
        values[name] = np.array(value, order="C", copy=True)  # what is checked is what is restored
    SnapshotCheck(game, values).run()
    return values


def _rng_to_array(generator: np.random.Generator) -> np.ndarray:
    """(6,) uint64: a PCG64 generator's 128-bit state and increment (high, low words) and its cached bits."""
    state = generator.bit_generator.state
    if state["bit_generator"] != "PCG64":
        raise ValueError(f"snapshots support PCG64 generators, got {state['bit_generator']}")
    inner, mask = state["state"], (1 << 64) - 1
    words = [inner["state"] >> 64, inner["state"] & mask, inner["inc"] >> 64, inner["inc"] & mask]
    return np.array([*words, state["has_uint32"], state["uinteger"]], dtype=np.uint64)


def _rng_from_array(words: np.ndarray) -> np.random.Generator:
    values = [int(value) for value in words]
    generator = np.random.Generator(np.random.PCG64())
    generator.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (values[0] << 64) | values[1], "inc": (values[2] << 64) | values[3]},
        "has_uint32": values[4],
        "uinteger": values[5],
    }
    return generator
