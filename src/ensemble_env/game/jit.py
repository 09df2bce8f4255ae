"""``kernel``: numba's ``njit(cache=True)``, with a disk cache that goes stale when any kernel module changes.

numba keys a function's on-disk cache on its own source file only: after an edit to ``reward.py``, the
cached ``dynamics.step`` (which inlines ``step_reward``) would still load, silently running the old reward.
Every kernel of the package is compiled through :func:`kernel`, whose cache stamp also holds a digest of all
the modules of the game's folder (:data:`KERNEL_MODULES`), so editing any of them recompiles every kernel on next use
(about 20 s) instead of running stale code. If numba's cache classes ever move, :func:`kernel` falls back to plain
``njit(cache=True)``.

The first compile on a machine (a fresh install, an empty ``NUMBA_CACHE_DIR``, an edited kernel module) says
so once on stderr, :data:`COMPILE_MESSAGE`, so that the one-time wait (about 20 s of CPU for the first
``ensemble-env demo`` or ``train``) is never silent. The message is printed when numba's disk cache has no
entry for a kernel, just before numba compiles it (nothing is compiled to find out), and at most once per
disk cache and kernel sources: printing it leaves a marker file, :data:`MARKER`, in the cache folder, and a
later process that finds the marker compiles what it still lacks (a kernel a later command adds, such as the
baselines' reward: a second or so) without repeating it. Runs that load every kernel from the disk cache print
nothing. The callers cast arrays to one dtype and layout per kernel argument, so that an action of another
dtype (float64 teams, say) never compiles a new signature (``tests/game/test_jit.py`` counts them).
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import njit

from ensemble_env.files import write_text

__all__ = ["COMPILE_MESSAGE", "KERNEL_MODULES", "MARKER", "kernel", "kernel_sources_digest"]

#: the modules whose sources stamp every kernel: all of the game's folder (``ensemble_env/game``), found on disk
#: rather than listed by hand, so a new kernel module is covered by being put here
KERNEL_MODULES = tuple(sorted(path.name for path in Path(__file__).parent.glob("*.py")))

#: printed on stderr when a kernel is about to compile (``{where}``: the disk cache folder), once per disk cache
COMPILE_MESSAGE = (
    "ensemble-env: compiling the environment's kernels with numba (once, up to about 20 s; "
    "later runs load them from {where})..."
)

#: the file, in the disk cache folder, that says :data:`COMPILE_MESSAGE` was printed for these kernel sources
#: (``{digest}``: the first 16 hex digits of :func:`kernel_sources_digest`)
MARKER = "ensemble-env-compiled-{digest}.txt"

_announced = False


def _announce_compile(where: str) -> None:
    """Print :data:`COMPILE_MESSAGE` on stderr unless this process or an earlier one with the same disk cache
    and kernel sources did; leave the marker. A cache folder that cannot be written only costs the marker."""
    global _announced
    if _announced:
        return
    _announced = True
    marker = Path(where) / MARKER.format(digest=kernel_sources_digest()[:16])
    if marker.exists():
        return
    print(COMPILE_MESSAGE.format(where=where), file=sys.stderr, flush=True)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)  # numba makes it only when it saves the first kernel
        write_text(marker, "ensemble-env printed its compile message for these kernels\n")
    except OSError:  # a read-only cache folder: numba cannot cache there either, so it compiles every run
        pass


@functools.lru_cache(maxsize=1)
def kernel_sources_digest() -> str:
    """SHA-256 over the kernel modules' sources, as read when first asked (one value per process)."""
    digest = hashlib.sha256()
    folder = Path(__file__).parent
    for name in KERNEL_MODULES:
        try:
            digest.update((folder / name).read_bytes())
        except OSError:  # e.g. a zipped or frozen install: numba's own per-file stamp still applies
            digest.update(name.encode())
    return digest.hexdigest()


def _dependency_cache_class() -> type | None:
    try:
        from numba.core.caching import CompileResultCacheImpl, FunctionCache
    except ImportError:  # pragma: no cover - numba reorganised its internals
        return None

    class DependencyStamp:
        def get_source_stamp(self) -> Any:
            return (super().get_source_stamp(), kernel_sources_digest())  # type: ignore[misc]

    locators = [
        type(f"Kernel{locator.__name__}", (DependencyStamp, locator), {})
        for locator in CompileResultCacheImpl._locator_classes
    ]
    implementation: Any = type("KernelCacheImpl", (CompileResultCacheImpl,), {"_locator_classes": locators})

    class KernelFunctionCache(FunctionCache):
        _impl_class = implementation

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            loaded = super().load_overload(sig, target_context)
            if loaded is None:  # nothing usable on disk: numba compiles next
                _announce_compile(self._cache_path)
            return loaded

    return KernelFunctionCache


_KERNEL_CACHE = _dependency_cache_class()


def kernel(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``njit(cache=True, **options)`` whose disk cache is also keyed on :func:`kernel_sources_digest`."""

    def decorate(function: Callable[..., Any]) -> Any:
        dispatcher = njit(cache=True, **options)(function)
        if _KERNEL_CACHE is not None:
            dispatcher._cache = _KERNEL_CACHE(function)
        return dispatcher

    return decorate
