"""Fuzzing cache loading and writing (issue 13): byte flips, truncations, hostile files, kill -9 during save.

Every input must be refused with a CacheError naming the file in one short line, or read back equal to what
was written (a flip in unused bytes); nothing may hang, crash or raise anything else, and a killed
``save_cache`` never leaves a partial file, nor (after the next write) a temporary one. The cases are seeded
and run in a watchdog worker (tests/fuzzing.py). The default run tries a fast subset; ``--run-slow`` thousands.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from fuzzing import BAD, bad, count, judge_error, run_cases, slow_size
from testing.caches import tiny_fields

from ensemble_env import datasets
from ensemble_env.cache import CacheError, LogitCache, load_cache, save_cache

#: seconds a file without checksums may take in the loader's guard, and a case in the watchdog
GUARD_SECONDS = 3.0
CASE_SECONDS = 60.0
TEXTS = ("Is red a colour?", "2 + 2 = ?", "Café or tea?", "A\nmulti-line question", "", "x" * 300)


# -- the caches fuzzed -----------------------------------------------------------------------------------


def rich_tiny() -> LogitCache:
    """The tiny cache of testing/caches.py with every optional field: texts, feature names and kind, (Q, N) costs."""
    fields = tiny_fields()
    fields["costs"] = np.arange(18, dtype=np.float64).reshape(6, 3) / 4
    return LogitCache(**fields, question_text=TEXTS, feature_names=("f0", "f1"), feature_kind="hand")


def medium(seed: int, n_questions: int = 1500, n_models: int = 4, source: str = "medium") -> LogitCache:
    """A seeded cache big enough for several chunks per dataset."""
    rng = np.random.default_rng(seed)
    n_choices = rng.integers(2, 5, size=n_questions)
    return LogitCache(
        scores=rng.normal(size=(n_questions, n_models, 4)).astype(np.float32),
        labels=rng.integers(0, n_choices),
        models=tuple(f"model-{i}" for i in range(n_models)),
        score_kind="logit",
        n_choices=n_choices,
        tasks=rng.integers(0, 3, size=n_questions),
        task_names=("alpha", "beta", "gamma"),
        split=rng.integers(0, 3, size=n_questions),
        question_ids=tuple(f"q{i}" for i in range(n_questions)),
        features=rng.normal(size=(n_questions, 8)),
        question_text=tuple(
            f"question {i}: " + "word " * int(k) for i, k in enumerate(rng.integers(0, 30, n_questions))
        ),
        source=source,
    )


def write_plain(path: Path, cache: LogitCache, edit: Callable[[h5py.File], None] | None = None) -> Path:
    """``cache`` written the way a third party would: h5py's defaults (superblock 0, no checksums, vlen strings)."""
    strings = h5py.string_dtype("utf-8")
    with h5py.File(path, "w") as h5file:
        h5file.attrs.update({"format": "ensemble-logit-cache", "format_version": 1, "score_kind": cache.score_kind})
        h5file.attrs["source"] = cache.source
        for name in ("scores", "labels", "n_choices", "tasks", "split", "costs", "features"):
            if getattr(cache, name) is not None:
                h5file.create_dataset(name, data=getattr(cache, name))
        for name in ("models", "task_names", "question_ids", "question_text"):
            if getattr(cache, name) is not None:
                h5file.create_dataset(name, data=list(getattr(cache, name)), dtype=strings)
        if cache.feature_names is not None:
            h5file["features"].attrs.create("feature_names", list(cache.feature_names), dtype=strings)
        if cache.feature_kind:
            h5file["features"].attrs["feature_kind"] = cache.feature_kind
        if edit is not None:
            edit(h5file)
    return path


def write_checked(path: Path, cache: LogitCache, edit: Callable[[h5py.File], None] | None = None) -> Path:
    """``cache`` written by save_cache, then (optionally) edited in place with h5py."""
    save_cache(path, cache)
    if edit is not None:
        with h5py.File(path, "r+") as h5file:
            edit(h5file)
    return path


CACHE_FIELDS = (
    "scores labels models score_kind n_choices tasks task_names split question_ids costs features feature_names "
    "feature_kind question_text source"
).split()


def same_cache(actual: LogitCache, expected: LogitCache) -> bool:
    for name in CACHE_FIELDS:
        got, want = getattr(actual, name), getattr(expected, name)
        if isinstance(want, np.ndarray):
            if not (isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape):
                return False
            if got.tobytes() != want.tobytes():
                return False
        elif got != want:
            return False
    return True


# -- one case ----------------------------------------------------------------------------------------------


@functools.cache
def _bytes(path: str) -> bytes:
    return Path(path).read_bytes()


@functools.cache
def _reference(path: str) -> LogitCache:
    return load_cache(path)


def judge_load(path: Path, reference: LogitCache | None, checked: bool) -> tuple[str, str]:
    """Load ``path`` and name the outcome: refused, equal, accepted (a file without checksums) or wrong."""
    try:
        cache = load_cache(path, timeout=GUARD_SECONDS)
    except Exception as error:
        return judge_error(error, (CacheError,), str(path))
    if reference is not None and same_cache(cache, reference):
        return "equal", ""
    return ("wrong" if checked else "accepted"), "read back different values"


def mutated_case(case: dict[str, Any]) -> tuple[str, str]:
    """A byte flip (``offset``, ``xor``) or a truncation (``length``) of the file ``base``."""
    data = bytearray(_bytes(case["base"]))
    if "length" in case:
        data = data[: case["length"]]
    else:
        data[case["offset"]] ^= case["xor"]
    target = Path(f"case-{os.getpid()}.h5").resolve()
    target.write_bytes(bytes(data))
    return judge_load(target, _reference(case["base"]), case["checked"])


def hostile_case(case: dict[str, Any]) -> tuple[str, str]:
    """A file made by one of HOSTILE's builders; ``expect`` is ``refused`` or ``equal``."""
    folder = Path(f"hostile-{os.getpid()}").resolve()
    folder.mkdir(exist_ok=True)
    path, reference = HOSTILE[case["name"]](folder, case["checked"])
    if case["name"] == "missing-file":
        try:
            load_cache(path, timeout=GUARD_SECONDS)
        except Exception as error:
            return judge_error(error, (FileNotFoundError,), str(path))
        return "wrong", "a missing file loaded"
    outcome, detail = judge_load(path, reference, True)
    if outcome in ("refused", "equal") and outcome != case["expect"]:
        return "wrong", f"expected {case['expect']}, got {outcome}: {detail}"
    return outcome, detail


# -- hostile files: each builder returns the file and the cache it must read back as (None: must be refused) --


def _other(folder: Path) -> Path:
    """Another valid cache file, which a hostile file points into."""
    other = folder / "other.h5"
    if not other.exists():
        save_cache(other, medium(7, n_questions=6, n_models=3, source="other"))
    return other


def _replace(name: str, make: Callable[[h5py.File, str], Any]) -> Callable[[h5py.File], None]:
    def edit(h5file: h5py.File) -> None:
        del h5file[name]
        make(h5file, name)

    return edit


def _virtual(source: Path) -> Callable[[h5py.File, str], Any]:
    def make(h5file: h5py.File, name: str) -> None:
        layout = h5py.VirtualLayout(shape=(6,), dtype=np.int64)
        layout[:] = h5py.VirtualSource(str(source), "labels", shape=(6,))
        h5file.create_virtual_dataset(name, layout, fillvalue=0)

    return make


def _optional_plugin_filter(h5file: h5py.File, name: str) -> None:
    """labels with a filter id of no installed plugin, marked optional so HDF5 writes the data without it."""
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_chunk((6,))
    plist.set_filter(32004, h5py.h5z.FLAG_OPTIONAL, ())
    space = h5py.h5s.create_simple((6,))
    dataset = h5py.h5d.create(h5file.id, name.encode(), h5py.h5t.STD_I64LE, space, dcpl=plist)
    dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([0, 1, 2, 1, 0, 2], dtype=np.int64))


def _build(
    edit: Callable[[Path], Callable[[h5py.File], None]],
    cache: Callable[[], LogitCache] = rich_tiny,
    equal: bool = False,
) -> Callable[[Path, bool], tuple[Path, LogitCache | None]]:
    def build(folder: Path, checked: bool) -> tuple[Path, LogitCache | None]:
        path = folder / "hostile.h5"
        path.unlink(missing_ok=True)
        (write_checked if checked else write_plain)(path, cache(), edit(folder))
        return path, (_reference(str(write_checked(folder / "reference.h5", cache()))) if equal else None)

    return build


def _bomb(n_questions: int, contiguous: bool) -> Callable[[Path], Callable[[h5py.File], None]]:
    """Every per-question dataset declares ``n_questions`` rows, and no data is stored."""

    def edit(folder: Path) -> Callable[[h5py.File], None]:
        def apply(h5file: h5py.File) -> None:
            for name in ("scores", "labels", "n_choices", "tasks", "split", "question_ids", "question_text", "costs"):
                if name in h5file:
                    del h5file[name]
            options = {} if contiguous else {"chunks": True, "compression": "gzip"}
            h5file.create_dataset("scores", shape=(n_questions, 3, 4), dtype=np.float64, **options)
            h5file.create_dataset("labels", shape=(n_questions,), dtype=np.int64, **options)
            h5file.create_dataset("features", shape=(n_questions, 2), dtype=np.float64, **options)

        return lambda h5file: (h5file.pop("features"), apply(h5file))

    return edit


def _special(kind: str) -> Callable[[Path, bool], tuple[Path, LogitCache | None]]:
    def build(folder: Path, checked: bool) -> tuple[Path, LogitCache | None]:
        path = folder / f"special-{kind}"
        if kind == "folder":
            path.mkdir(exist_ok=True)
        elif kind == "fifo" and not path.exists():
            os.mkfifo(path)
        elif kind == "dev-zero" and not path.is_symlink():
            path.symlink_to("/dev/zero")
        elif kind in ("empty", "text"):
            path.write_bytes(b"" if kind == "empty" else b"scores,labels\n0.1,0\n")
        return path, None

    return build


def _userblock(folder: Path, checked: bool) -> tuple[Path, LogitCache | None]:
    """A valid cache behind a 512-byte user block: HDF5 finds its superblock at byte 512, so must the reader."""
    path = folder / "userblock.h5"
    path.unlink(missing_ok=True)
    plain = write_plain(folder / "plain.h5", rich_tiny())
    with h5py.File(plain, "r") as source, h5py.File(path, "w", userblock_size=512) as target:
        for key, value in source.attrs.items():
            target.attrs[key] = value
        for key in source:
            source.copy(key, target)
    return path, _reference(str(write_checked(folder / "reference.h5", rich_tiny())))


def _strings(values: list[bytes], width: int | None = None) -> Callable[[h5py.File, str], Any]:
    def make(h5file: h5py.File, name: str) -> None:
        dtype = h5py.string_dtype("utf-8", width or max(len(value) for value in values))
        h5file.create_dataset(name, data=np.array(values, dtype=dtype), chunks=True)

    return make


def _many_models(h5file: h5py.File) -> None:
    """70000 models (above LIMITS["N"]), consistent across the fields that name them."""
    for name in ("scores", "models", "costs"):
        del h5file[name]
    h5file.create_dataset("scores", data=np.zeros((6, 70000, 2), dtype=np.float16), compression="gzip")
    _strings([f"m{i}".encode() for i in range(70000)])(h5file, "models")


HOSTILE: dict[str, Callable[[Path, bool], tuple[Path, LogitCache | None]]] = {
    "external-link": _build(
        lambda d: _replace("labels", lambda f, n: f.__setitem__(n, h5py.ExternalLink(str(_other(d)), "/labels")))
    ),
    "soft-link-through-external": _build(
        lambda d: (
            lambda f: (
                f.__setitem__("elsewhere", h5py.ExternalLink(str(_other(d)), "/")),
                _replace("labels", lambda g, n: g.__setitem__(n, h5py.SoftLink("/elsewhere/labels")))(f),
            )
        )
    ),
    "soft-link-loop": _build(lambda d: _replace("labels", lambda f, n: f.__setitem__(n, h5py.SoftLink("/labels")))),
    "soft-link-dangling": _build(lambda d: _replace("labels", lambda f, n: f.__setitem__(n, h5py.SoftLink("/gone")))),
    "soft-link-inside": _build(
        lambda d: lambda f: (f.move("labels", "kept_labels"), f.__setitem__("labels", h5py.SoftLink("/kept_labels"))),
        equal=True,
    ),
    "external-storage": _build(
        lambda d: _replace(
            "labels", lambda f, n: f.create_dataset(n, shape=(6,), dtype=np.int64, external=[(str(_other(d)), 0, 48)])
        )
    ),
    "virtual-dataset": _build(lambda d: _replace("labels", _virtual(_other(d)))),
    "virtual-dataset-missing-source": _build(lambda d: _replace("labels", _virtual(d / "absent.h5"))),
    "memory-bomb-chunked": _build(_bomb(2**26, contiguous=False)),
    "memory-bomb-contiguous": _build(_bomb(2**26, contiguous=True)),
    "memory-bomb-beyond-limits": _build(_bomb(2**40, contiguous=False)),
    "chunks-missing": _build(
        lambda d: _replace(
            "scores",
            lambda f, n: f.create_dataset(n, shape=(6, 3, 3), dtype=np.float64, chunks=(1, 3, 3)).__setitem__(
                slice(0, 2), np.zeros((2, 3, 3))
            ),
        )
    ),
    "data-never-written": _build(
        lambda d: _replace("labels", lambda f, n: f.create_dataset(n, shape=(6,), dtype=np.int64))
    ),
    "filter-scaleoffset": _build(
        lambda d: _replace("labels", lambda f, n: f.create_dataset(n, data=np.array([0, 1, 2, 1, 0, 2]), scaleoffset=0))
    ),
    "filter-plugin": _build(lambda d: _replace("labels", _optional_plugin_filter)),
    "compound-scores": _build(
        lambda d: _replace(
            "scores", lambda f, n: f.create_dataset(n, shape=(6, 3, 3), dtype=[("a", "<f8"), ("b", "<i4")])
        )
    ),
    "bool-labels": _build(lambda d: _replace("labels", lambda f, n: f.create_dataset(n, data=np.ones(6, dtype=bool)))),
    "array-type-labels": _build(
        lambda d: _replace("labels", lambda f, n: f.create_dataset(n, shape=(6,), dtype="(2,)i8"))
    ),
    "long-double-scores": _build(
        lambda d: _replace("scores", lambda f, n: f.create_dataset(n, data=np.zeros((6, 3, 3), dtype=np.longdouble)))
    ),
    "vlen-integers-labels": _build(
        lambda d: _replace("labels", lambda f, n: f.create_dataset(n, shape=(6,), dtype=h5py.vlen_dtype(np.int64)))
    ),
    "reference-models": _build(
        lambda d: _replace("models", lambda f, n: f.create_dataset(n, data=[f.ref] * 3, dtype=h5py.ref_dtype))
    ),
    "scalar-labels": _build(lambda d: _replace("labels", lambda f, n: f.create_dataset(n, data=np.int64(1)))),
    "empty-dataspace-models": _build(
        lambda d: _replace("models", lambda f, n: f.create_dataset(n, data=h5py.Empty("S1")))
    ),
    "group-labels": _build(lambda d: _replace("labels", lambda f, n: f.create_group(n))),
    "named-datatype-labels": _build(lambda d: _replace("labels", lambda f, n: f.__setitem__(n, np.dtype("<i8")))),
    "models-above-limit": _build(lambda d: _many_models),
    "string-width-above-limit": _build(
        lambda d: _replace(
            "question_text", lambda f, n: f.create_dataset(n, shape=(6,), dtype="S16777217", chunks=(1,))
        )
    ),
    "invalid-utf8-models": _build(lambda d: _replace("models", _strings([b"m0", b"\xff\xfe", b"m2"]))),
    "nul-in-models": _build(lambda d: _replace("models", _strings([b"m0", b"a\x00b", b"m2"]))),
    "huge-attribute": _build(lambda d: lambda f: f.attrs.create("source", np.zeros(2**21, dtype=np.int8))),
    "compound-attribute": _build(lambda d: lambda f: f.attrs.create("format", np.zeros(1, dtype=[("a", "<i4")])[0])),
    "userblock": _userblock,
    "folder": _special("folder"),
    "fifo": _special("fifo"),
    "dev-zero": _special("dev-zero"),
    "empty-file": _special("empty"),
    "text-file": _special("text"),
    "missing-file": lambda folder, checked: (folder / "absent-cache.h5", None),
}
#: builders that do not depend on the writer (run once, as "checked"), or need the newer format (attributes
#: above 64 KB)
_WRITER_FREE = {"userblock", "folder", "fifo", "dev-zero", "empty-file", "text-file", "missing-file", "huge-attribute"}


def hostile_cases() -> list[dict[str, Any]]:
    cases = []
    for name in HOSTILE:
        for checked in (True,) if name in _WRITER_FREE else (True, False):
            expect = "equal" if name in ("soft-link-inside", "userblock") else "refused"
            cases.append({"kind": f"hostile {name}", "name": name, "checked": checked, "expect": expect})
    return cases


# -- suites --------------------------------------------------------------------------------------------------------


def _bases(workdir: Path) -> dict[str, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    return {
        "tiny": write_checked(workdir / "tiny.h5", rich_tiny()),
        "medium": write_checked(workdir / "medium.h5", medium(3)),
        "plain": write_plain(workdir / "plain.h5", rich_tiny()),
    }


def flip_cases(base: Path, n: int, seed: int, checked: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    size = base.stat().st_size
    return [
        {
            "kind": f"flip {base.name}",
            "base": str(base),
            "offset": int(rng.integers(size)),
            "xor": int(rng.integers(1, 256)),
            "checked": checked,
        }
        for _ in range(n)
    ]


def truncation_cases(base: Path, n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, base.stat().st_size, size=n)
    return [{"kind": f"truncate {base.name}", "base": str(base), "length": int(k), "checked": True} for k in lengths]


def suite_flips(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    bases = _bases(workdir)
    n_tiny, n_medium = (slow_size(3000), slow_size(2000)) if slow else (200, 100)
    cases = flip_cases(bases["tiny"], n_tiny, 1, True) + flip_cases(bases["medium"], n_medium, 2, True)
    return run_cases("test_fuzz_caches", "mutated_case", cases, workdir, CASE_SECONDS), 0


def suite_builtin_flips(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    """Byte flips of the built-in bbh5 (written by save_cache: question texts, features, 4000 questions)."""
    workdir.mkdir(parents=True, exist_ok=True)
    base = workdir / "bbh5.h5"
    base.write_bytes(datasets.path("bbh5").read_bytes())
    cases = flip_cases(base, slow_size(1000) if slow else 10, 6, True)
    return run_cases("test_fuzz_caches", "mutated_case", cases, workdir, CASE_SECONDS), 0


def suite_truncations(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    bases = _bases(workdir)
    n = slow_size(300) if slow else 20
    cases = truncation_cases(bases["tiny"], n, 3) + truncation_cases(bases["medium"], n, 4)
    return run_cases("test_fuzz_caches", "mutated_case", cases, workdir, CASE_SECONDS), 0


def suite_plain_flips(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    bases = _bases(workdir)
    cases = flip_cases(bases["plain"], slow_size(1000) if slow else 25, 5, False)
    return run_cases("test_fuzz_caches", "mutated_case", cases, workdir, CASE_SECONDS), 0


def suite_hostile(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    return run_cases("test_fuzz_caches", "hostile_case", hostile_cases(), workdir, CASE_SECONDS), 0


# -- kill -9 during save_cache ------------------------------------------------------------------------------

_SAVER = (
    "import json, sys\n"
    "sys.path[:] = json.loads(sys.argv[1])\n"
    "from test_fuzz_caches import kill_victim\n"
    "kill_victim(sys.argv[2])\n"
)


def kill_caches() -> tuple[LogitCache, LogitCache]:
    """Two caches of a few MB, so that a save takes a while and a kill lands inside it."""
    return medium(11, 12000, 8, "first"), medium(12, 12000, 8, "second")


def kill_victim(target: str) -> None:
    """Save the two caches to ``target`` in turn, forever (until killed); say when ready and after each save."""
    caches = kill_caches()
    print("ready", flush=True)
    for turn in range(10**9):
        save_cache(target, caches[turn % 2])
        print("saved", flush=True)


def temporaries(target: Path) -> list[str]:
    return sorted(name for name in os.listdir(target.parent) if name.startswith(f".{target.name}."))


def suite_kills(workdir: Path, slow: bool) -> tuple[list[dict[str, Any]], int]:
    """kill -9 a process while it saves; the target must be absent or whole, and the next save leaves no temporary."""
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "killed.h5"
    target.unlink(missing_ok=True)
    caches = kill_caches()
    rng = np.random.default_rng(13)
    paths = [str(Path(__file__).resolve().parent)] + [entry for entry in sys.path if entry]
    import json

    results, orphans = [], 0
    for kill in range(slow_size(40) if slow else 1):
        victim = subprocess.Popen(
            [sys.executable, "-c", _SAVER, json.dumps(paths), str(target)], stdout=subprocess.PIPE, text=True
        )
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.0, 1.5)))
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        victim.stdout.close()
        left = temporaries(target)
        if target.exists():
            try:
                loaded = load_cache(target, timeout=GUARD_SECONDS)
            except Exception as error:
                outcome, detail = "wrong", f"partial target after kill {kill}: {error}"
            else:
                whole = any(same_cache(loaded, cache) for cache in caches)
                outcome, detail = ("equal", "whole") if whole else ("wrong", f"other values after kill {kill}")
        else:
            outcome, detail = "equal", "no target yet"
        save_cache(target, caches[0])
        orphans += len(temporaries(target))
        results.append({"kind": "kill -9 during save_cache", "outcome": outcome, "detail": f"{detail}; left {left}"})
    return results, orphans


SUITES: dict[str, Callable[[Path, bool], tuple[list[dict[str, Any]], int]]] = {
    "cache byte flips (save_cache)": suite_flips,
    "cache byte flips (built-in bbh5)": suite_builtin_flips,
    "cache truncations (save_cache)": suite_truncations,
    "cache byte flips (h5py defaults, guarded)": suite_plain_flips,
    "hostile cache files": suite_hostile,
    "kill -9 during save_cache": suite_kills,
}


# -- the tests -------------------------------------------------------------------------------------------------


def _check(results: list[dict[str, Any]], orphans: int = 0) -> Any:
    counts = count(results)
    assert not bad(results), f"{dict(counts)}; first: {bad(results)[:5]}"
    assert orphans == 0
    return counts


def test_byte_flips_of_saved_caches_are_refused_or_read_back_equal(tmp_path: Path) -> None:
    counts = _check(*suite_flips(tmp_path, slow=False))
    assert counts["refused"] > 0 and counts["equal"] > 0  # both happen: the cases reach data and padding


def test_byte_flips_of_the_built_in_cache_are_refused_or_read_back_equal(tmp_path: Path) -> None:
    _check(*suite_builtin_flips(tmp_path, slow=False))


def test_truncated_saved_caches_are_refused(tmp_path: Path) -> None:
    counts = _check(*suite_truncations(tmp_path, slow=False))
    assert counts["refused"] == sum(counts.values())


def test_byte_flips_of_files_without_checksums_never_hang(tmp_path: Path) -> None:
    _check(*suite_plain_flips(tmp_path, slow=False))


def test_hostile_files_are_refused(tmp_path: Path) -> None:
    results, _ = suite_hostile(tmp_path, slow=False)
    _check(results)
    assert count(results)["refused"] == len(results) - 3  # soft-link-inside (twice) and userblock read back equal


def test_kill_during_save_leaves_no_partial_and_no_temporary_file(tmp_path: Path) -> None:
    _check(*suite_kills(tmp_path, slow=False))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SUITES))
def test_large_fuzz_suites(tmp_path: Path, name: str) -> None:
    counts = _check(*SUITES[name](tmp_path, True))
    assert sum(counts.values()) >= slow_size(40) and not set(counts) & set(BAD)


def test_the_watchdog_reports_hangs_and_crashes(tmp_path: Path) -> None:
    cases = [{"kind": "ok"}, {"kind": "hang"}, {"kind": "crash"}, {"kind": "ok"}]
    results = run_cases("fuzzing", "selftest_case", cases, tmp_path, case_seconds=1.0)
    assert [result["outcome"] for result in results] == ["refused", "hang", "crash", "refused"]


@pytest.mark.parametrize("name", ["external-link", "external-storage", "virtual-dataset"])
def test_info_and_split_refuse_a_cache_pointing_at_another_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    from ensemble_env.cli import main

    path, _ = HOSTILE[name](tmp_path, True)
    for command in (["info", str(path)], ["split", str(path), "-o", str(tmp_path / "copy.h5")]):
        assert main(["cache", *command]) == 2
        err = capsys.readouterr().err
        assert f"{path}: field 'labels': " in err and "refused" in err and "Traceback" not in err
    assert not (tmp_path / "copy.h5").exists() and not list(tmp_path.glob(".copy.h5.*"))
