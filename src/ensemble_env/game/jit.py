"""``kernel``: numba's ``njit(cache=True)``, with a disk cache that goes stale when any kernel module changes.

numba keys a function's on-disk cache on its own source file only: after an edit to ``reward.py``, the
cached ``dynamics.step`` (which inlines ``step_reward``) would still load, silently running the old reward.
Every kernel of the package is compiled through :func:`kernel`, whose cache stamp also holds a digest of all
the modules of the game's folder (:data:`KERNEL_MODULES`), so editing any of them recompiles every kernel on next use
(about 20 s) instead of running stale code. If numba's cache classes ever move, :func:`kernel` falls back to plain
``njit(cache=True)``.

The first compile of a process that finds no usable compiled copy on disk (a fresh install, an empty
``NUMBA_CACHE_DIR``, an edited kernel module) says so once on stderr, :data:`COMPILE_MESSAGE`, so that the
one-time wait (about 20 s of CPU for the first ``ensemble-env demo`` or ``train``, a second for a kernel a
later command adds, such as the baselines' reward) is never silent; runs that load the kernels from the
disk cache print nothing. The message is printed when numba's disk cache has no entry for a kernel, just
before numba compiles it: nothing is compiled to find out.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import njit

__all__ = ["COMPILE_MESSAGE", "KERNEL_MODULES", "kernel", "kernel_sources_digest"]

#: the modules whose sources stamp every kernel: all of the game's folder (``ensemble_env/game``), found on disk
#: rather than listed by hand, so a new kernel module is covered by being put here
KERNEL_MODULES = tuple(sorted(path.name for path in Path(__file__).parent.glob("*.py")))

#: printed once per process on stderr when a kernel is about to compile (``{where}``: the disk cache folder)
COMPILE_MESSAGE = (
    "ensemble-env: compiling the environment's kernels with numba (once, up to about 20 s; "
    "later runs load them from {where})..."
)

_announced = False


def _announce_compile(where: str) -> None:
    """Print :data:`COMPILE_MESSAGE` on stderr, the first time only."""
    global _announced
    if _announced:
        return
    _announced = True
    print(COMPILE_MESSAGE.format(where=where), file=sys.stderr, flush=True)


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
