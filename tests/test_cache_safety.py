"""Tests of safe cache loading and atomic writes (issue 13): checksums, refusals before reading, the time guard of
files without checksums (ensemble_env.cache.guard), and atomic_path's temporary files.

The seeded fuzz suites over many inputs are in tests/test_fuzz_caches.py; these are the named cases.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from test_cache import TEXTS, _assert_same_cache, _names, _rebuild

from ensemble_env.cache import CacheError, LogitCache, load_cache, save_cache
from ensemble_env.cache import guard as cache_guard
from ensemble_env.cache.hdf5 import superblock_version
from ensemble_env.files import atomic_path

# -- checksums, safe loading, the time guard (issue 13) ----------------------------------------------------------


def test_saved_file_carries_checksums_on_data_and_metadata(tiny_cache: LogitCache, tmp_path: Path) -> None:
    cache = _rebuild(tiny_cache, question_text=TEXTS, feature_names=("f0", "f1"), feature_kind="k")
    target = save_cache(tmp_path / "cache.h5", cache)
    assert superblock_version(target) == 3  # HDF5 1.10 format: superblock, object headers, chunk indexes checksummed
    with h5py.File(target, "r") as h5file:
        assert h5py.h5o.get_info(h5file.id).hdr.version == 2
        for name, node in h5file.items():
            assert node.fletcher32 and h5py.h5o.get_info(node.id).hdr.version == 2, name
            string = h5py.check_string_dtype(node.dtype)
            assert string is None or string.length is not None, name  # no variable-length (unchecked) strings
        attributes = [*h5file.attrs.values(), *h5file["features"].attrs.values()]
        assert all(not isinstance(value, str) for value in attributes)  # fixed-length: bytes, not heap strings


def test_saving_twice_gives_identical_bytes(tiny_cache: LogitCache, tmp_path: Path) -> None:
    first = save_cache(tmp_path / "a.h5", _rebuild(tiny_cache, question_text=TEXTS))
    second = save_cache(tmp_path / "b.h5", _rebuild(tiny_cache, question_text=TEXTS))
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("name", ["models", "task_names", "question_ids", "feature_names"])
def test_strings_hdf5_cannot_store_are_refused(tiny_cache: LogitCache, name: str) -> None:
    values = list(getattr(tiny_cache, name) or ("f0", "f1"))
    for bad in ("a\x00b", "a\ud800b"):
        values[1] = bad
        with pytest.raises(CacheError, match=_names("<memory>", name) + ".*(NUL|UTF-8)"):
            _rebuild(tiny_cache, **{name: tuple(values)})


def test_a_small_file_declaring_a_huge_dataset_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as h5file:  # about 10 KB on disk, 6.4 GB declared, as in issue 13
        h5file.attrs.update({"format": "ensemble-logit-cache", "format_version": 1, "score_kind": "logit"})
        h5file.create_dataset("scores", shape=(2**26, 3, 4), dtype=np.float64, chunks=True, compression="gzip")
        h5file.create_dataset("labels", shape=(2**26,), dtype=np.int64, chunks=True, compression="gzip")
        h5file.create_dataset("models", data=["a", "b", "c"], dtype=h5py.string_dtype())
    assert path.stat().st_size < 20_000
    with pytest.raises(CacheError, match=_names(path, "scores") + ": declares 6442450944 bytes of data, more than"):
        load_cache(path)


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyError("k"), TypeError("t"), MemoryError()])
def test_every_h5py_failure_becomes_a_cache_error_naming_the_field(
    tiny_cache: LogitCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    path = save_cache(tmp_path / "cache.h5", tiny_cache)
    original = h5py.Dataset.__getitem__

    def getitem(self: h5py.Dataset, key: Any) -> Any:
        if self.name == "/labels":
            raise error
        return original(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", getitem)
    with pytest.raises(CacheError, match=_names(path, "labels") + r": cannot be read \(" + type(error).__name__):
        load_cache(path)


def test_messages_stay_short_whatever_the_value(tiny_cache: LogitCache, tmp_path: Path) -> None:
    long_name = "m" * 100_000
    with pytest.raises(CacheError) as excinfo:
        _rebuild(tiny_cache, models=(long_name, "m1", long_name))
    assert len(str(excinfo.value)) < 500
    path = save_cache(tmp_path / "cache.h5", _rebuild(tiny_cache, question_text=("q" * 100_000,) * 6))
    with h5py.File(path, "r+") as h5file:
        h5file.attrs.create("score_kind", np.bytes_(b"k" * 100_000))
    with pytest.raises(CacheError, match=_names(path, "score_kind")) as excinfo:
        load_cache(path)
    assert len(str(excinfo.value)) < len(str(path)) + 500


@pytest.mark.parametrize("kind", ["folder", "device"])
def test_what_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path if kind == "folder" else Path(os.devnull)
    with pytest.raises(
        CacheError, match=re.escape(f"{path}: is ") + ("a folder" if kind == "folder" else "not a regular")
    ):
        load_cache(path)


def _old_format(path: Path, cache: LogitCache) -> Path:
    """``cache`` written as save_cache wrote it before issue 13 (h5py's default format: superblock 0, no
    checksums, variable-length strings): the caches users already have."""
    strings = h5py.string_dtype("utf-8")
    with h5py.File(path, "w") as h5file:
        h5file.attrs.update({"format": "ensemble-logit-cache", "format_version": 1, "score_kind": cache.score_kind})
        h5file.attrs["source"] = cache.source
        h5file.create_dataset("scores", data=cache.scores, compression="gzip")
        for name in ("labels", "models", "n_choices", "tasks", "task_names", "split", "question_ids", "costs"):
            value = getattr(cache, name)
            if isinstance(value, tuple):
                h5file.create_dataset(name, data=list(value), dtype=strings)
            else:
                h5file.create_dataset(name, data=value)
        node = h5file.create_dataset("features", data=cache.features, compression="gzip")
        node.attrs.create("feature_names", list(cache.feature_names or ()), dtype=strings)
        node.attrs["feature_kind"] = cache.feature_kind
        texts = [text.encode("utf-8") for text in cache.question_text or ()]
        fixed = h5py.string_dtype("utf-8", max(len(text) for text in texts))
        h5file.create_dataset("question_text", data=np.array(texts, dtype=fixed), compression="gzip")
    return path


def _old_cache(tiny_cache: LogitCache) -> LogitCache:
    texts = tuple(f"question {i}" for i in range(6))
    return _rebuild(tiny_cache, question_text=texts, feature_names=("a", "b"), feature_kind="kind")


def test_caches_in_the_old_format_still_load(tiny_cache: LogitCache, tmp_path: Path) -> None:
    path = _old_format(tmp_path / "old.h5", _old_cache(tiny_cache))
    assert superblock_version(path) == 0
    _assert_same_cache(load_cache(path), _old_cache(tiny_cache))


def test_a_file_without_checksums_that_hangs_hdf5_is_refused_in_time(tiny_cache: LogitCache, tmp_path: Path) -> None:
    """The old format with the size of its global heap (holding the string attributes) 255 bytes too large:
    HDF5 2.0 then loops forever reading the 'format' attribute (one of the hangs of issue 13)."""
    path = _old_format(tmp_path / "old.h5", _old_cache(tiny_cache))
    data = bytearray(path.read_bytes())
    heap = data.index(b"GCOL")
    assert data[heap + 8] == 0  # the low byte of the collection's size (4096)
    data[heap + 8] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match=_names(path, "format") + ": reading did not finish within 2 s; "):
        load_cache(path, timeout=2)
    fine = _old_format(tmp_path / "fine.h5", _old_cache(tiny_cache))
    assert load_cache(fine, timeout=2).n_questions == 6  # a new helper serves the next file


_FAKE_HELPER = (
    "import json, sys, time\n"
    "print(json.dumps({'ready': True}), flush=True)\n"
    "for line in sys.stdin:\n"
    "    print('a warning on stderr', flush=True)\n"
    "    print(json.dumps({'field': 'labels'}), flush=True)\n"
    "    time.sleep(60) if sys.argv[1] == 'hang' else sys.exit(3)\n"
)


@pytest.mark.parametrize("behaviour", ["hang", "crash"])
def test_the_guard_refuses_a_file_the_helper_hangs_or_dies_on(behaviour: str) -> None:
    helper = cache_guard._Helper([sys.executable, "-c", _FAKE_HELPER, behaviour])
    try:
        with pytest.raises(CacheError, match=re.escape("some.h5: field 'labels': ")) as excinfo:
            helper.ask("some.h5", 0.5)
    finally:
        helper.stop()
    expected = "reading did not finish within 0.5 s" if behaviour == "hang" else "ended with exit status 3"
    assert expected in str(excinfo.value) and "refused" in str(excinfo.value)
    assert helper.process.poll() is not None  # a hung helper is killed, not left behind


def test_the_guard_reports_a_helper_that_cannot_start() -> None:
    with pytest.raises(RuntimeError, match="did not start: no module here"):
        cache_guard._Helper([sys.executable, "-c", "print('no module here'); raise SystemExit(1)"])


# -- atomic writes: temporary files, fsync, leftovers of killed writers -------------------------------------------


def test_the_temporary_file_is_beside_the_target_under_a_recognisable_name(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "out.h5") as temporary:
        assert temporary.parent == tmp_path
        assert re.fullmatch(rf"\.out\.h5\.{os.getpid()}\.[a-z0-9_]{{8}}\.tmp", temporary.name)
        temporary.write_bytes(b"data")
    assert sorted(os.listdir(tmp_path)) == ["out.h5"]


def test_the_file_is_synced_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda handle: (events.append("fsync"), fsync(handle))[1])
    monkeypatch.setattr(os, "replace", lambda *args: (events.append("replace"), replace(*args))[1])
    with atomic_path(tmp_path / "out.bin") as temporary:
        temporary.write_bytes(b"data")
    assert events == ["fsync", "replace", "fsync"]  # the file, the rename, the folder's entry


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_the_temporary_file_is_removed_on_any_exception(tmp_path: Path, error: type[BaseException]) -> None:
    with pytest.raises(error), atomic_path(tmp_path / "out.bin") as temporary:
        temporary.write_bytes(b"half")
        raise error
    assert os.listdir(tmp_path) == []


def test_leftovers_of_killed_writers_are_removed_at_the_next_write(tiny_cache: LogitCache, tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid, live_pid = int(dead.stdout), os.getppid()
    names = {
        "dead": f".cache.h5.{dead_pid}.abcd1234.tmp",  # its writer is gone: removed
        "live": f".cache.h5.{live_pid}.abcd1234.tmp",  # its writer still runs: kept
        "other": f".other.h5.{dead_pid}.abcd1234.tmp",  # another target's: not this write's business
        "lookalike": f".cache.h5.{dead_pid}.notours.tmp",  # not a name atomic_path makes: kept
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"partial")
    save_cache(tmp_path / "cache.h5", tiny_cache)
    left = set(os.listdir(tmp_path))
    assert left == {"cache.h5", names["live"], names["other"], names["lookalike"]}
