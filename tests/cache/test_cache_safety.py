"""Tests of safe cache loading and atomic writes (issue 13): checksums, refusals before reading, the time guard of
files without checksums (ensemble_env.cache.guard), and atomic_path's temporary files.

The seeded fuzz suites over many inputs are in tests/cache/test_fuzz_caches.py; these are the named cases.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from testing.caches import TEXTS, assert_same_cache, names_field, rebuild

from ensemble_env.cache import CacheError, LogitCache, load_cache, save_cache
from ensemble_env.cache import guard as cache_guard
from ensemble_env.cache.hdf5 import superblock_version
from ensemble_env.cache.hdf5_writer import CacheWriteError, cache_image
from ensemble_env.files import atomic_path

# -- checksums, safe loading, the time guard (issue 13) ----------------------------------------------------------


def test_saved_file_carries_checksums_on_data_and_metadata(tiny_cache: LogitCache, tmp_path: Path) -> None:
    cache = rebuild(tiny_cache, question_text=TEXTS, feature_names=("f0", "f1"), feature_kind="k")
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
    first = save_cache(tmp_path / "a.h5", rebuild(tiny_cache, question_text=TEXTS))
    second = save_cache(tmp_path / "b.h5", rebuild(tiny_cache, question_text=TEXTS))
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("name", ["models", "task_names", "question_ids", "feature_names"])
def test_strings_hdf5_cannot_store_are_refused(tiny_cache: LogitCache, name: str) -> None:
    values = list(getattr(tiny_cache, name) or ("f0", "f1"))
    for bad in ("a\x00b", "a\ud800b"):
        values[1] = bad
        with pytest.raises(CacheError, match=names_field("<memory>", name) + ".*(NUL|UTF-8)"):
            rebuild(tiny_cache, **{name: tuple(values)})


def test_a_small_file_declaring_a_huge_dataset_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as h5file:  # about 10 KB on disk, 6.4 GB declared, as in issue 13
        h5file.attrs.update({"format": "ensemble-logit-cache", "format_version": 1, "score_kind": "logit"})
        h5file.create_dataset("scores", shape=(2**26, 3, 4), dtype=np.float64, chunks=True, compression="gzip")
        h5file.create_dataset("labels", shape=(2**26,), dtype=np.int64, chunks=True, compression="gzip")
        h5file.create_dataset("models", data=["a", "b", "c"], dtype=h5py.string_dtype())
    assert path.stat().st_size < 20_000
    with pytest.raises(
        CacheError, match=names_field(path, "scores") + ": declares 6442450944 bytes of data, more than"
    ):
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
    with pytest.raises(CacheError, match=names_field(path, "labels") + r": cannot be read \(" + type(error).__name__):
        load_cache(path)


def test_messages_stay_short_whatever_the_value(tiny_cache: LogitCache, tmp_path: Path) -> None:
    long_name = "m" * 100_000
    with pytest.raises(CacheError) as excinfo:
        rebuild(tiny_cache, models=(long_name, "m1", long_name))
    assert len(str(excinfo.value)) < 500
    path = save_cache(tmp_path / "cache.h5", rebuild(tiny_cache, question_text=("q" * 100_000,) * 6))
    with h5py.File(path, "r+") as h5file:
        h5file.attrs.create("score_kind", np.bytes_(b"k" * 100_000))
    with pytest.raises(CacheError, match=names_field(path, "score_kind")) as excinfo:
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
    return rebuild(tiny_cache, question_text=texts, feature_names=("a", "b"), feature_kind="kind")


def test_caches_in_the_old_format_still_load(tiny_cache: LogitCache, tmp_path: Path) -> None:
    path = _old_format(tmp_path / "old.h5", _old_cache(tiny_cache))
    assert superblock_version(path) == 0
    assert_same_cache(load_cache(path), _old_cache(tiny_cache))


def _hanging_file(path: Path, tiny_cache: LogitCache) -> Path:
    """The old format with the size of its global heap (holding the string attributes) 255 bytes too large:
    HDF5 2.0 then loops forever reading the 'format' attribute (one of the hangs of issue 13)."""
    path = _old_format(path, _old_cache(tiny_cache))
    data = bytearray(path.read_bytes())
    heap = data.index(b"GCOL")
    assert data[heap + 8] == 0  # the low byte of the collection's size (4096)
    data[heap + 8] = 0xFF
    path.write_bytes(bytes(data))
    return path


def test_a_file_without_checksums_that_hangs_hdf5_is_refused_in_time(tiny_cache: LogitCache, tmp_path: Path) -> None:
    path = _hanging_file(tmp_path / "old.h5", tiny_cache)
    with pytest.raises(CacheError, match=names_field(path, "format") + ": reading did not finish within 2 s; "):
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


# -- the helper dies with its parent (issue "Reliability, round 2", problem 4) -----------------------------------

_PARENT = (
    "import json, sys, threading, time\n"
    "sys.path[:] = json.loads(sys.argv[1])\n"
    "from ensemble_env.cache import guard, load_cache\n"
    "threading.Thread(target=load_cache, args=(sys.argv[2],), kwargs={'timeout': 600}, daemon=True).start()\n"
    "while guard._helper is None:\n"
    "    time.sleep(0.01)\n"
    "print(guard._helper.process.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    return True


def _wait_until_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.05)
    return not _running(pid)


def test_the_helper_dies_with_its_parent_when_stuck_in_a_file(tiny_cache: LogitCache, tmp_path: Path) -> None:
    """SIGKILL the parent while its helper spins in a file that hangs HDF5: the helper goes too, at once."""
    path = _hanging_file(tmp_path / "old.h5", tiny_cache)
    paths = [entry for entry in sys.path if entry]
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, json.dumps(paths), str(path)], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        helper = int(parent.stdout.readline())
        time.sleep(1.5)  # the helper has started reading the file and spins in it
        assert _running(helper) and parent.poll() is None
        parent.kill()
        parent.wait()
        gone = _wait_until_gone(helper, 5.0)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()  # type: ignore[union-attr]
    if not gone:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)  # do not leave it spinning, whatever the outcome
    assert gone, f"the helper {helper} outlived its parent"


def test_a_helper_whose_parent_is_already_gone_does_not_serve() -> None:
    """The race the parent-death signal leaves open (the parent dies before the helper asks for it) is closed
    by the helper's check of its parent: here it is told another parent, and quits before reading anything."""
    paths = json.dumps([entry for entry in sys.path if entry])
    package = str(Path(cache_guard.__file__).resolve().parent.parent)
    command = [sys.executable, "-c", cache_guard._BOOTSTRAP, paths, package, str(os.getpid() + 10**6)]
    with pytest.raises(RuntimeError, match="did not start: the process that started this helper is gone"):
        cache_guard._Helper(command)


def test_a_helper_started_from_a_thread_outlives_the_thread(tiny_cache: LogitCache, tmp_path: Path) -> None:
    """Linux sends the parent-death signal when the thread that started the helper ends: the helpers are started
    by the guard's own long-lived thread, so a caller's thread ending does not kill the helper."""
    path = _old_format(tmp_path / "old.h5", _old_cache(tiny_cache))
    worker = threading.Thread(target=load_cache, args=(path,))
    worker.start()
    worker.join()
    helper = cache_guard._helper
    assert helper is not None
    time.sleep(0.3)
    assert helper.process.poll() is None
    assert load_cache(path).n_questions == 6 and cache_guard._helper is helper  # the same helper serves on


def test_a_stuck_helper_ends_itself_by_its_alarm(tiny_cache: LogitCache, tmp_path: Path) -> None:
    """Where there is no parent-death signal (macOS, the BSDs), a helper stuck in a file is ended by its own
    alarm, at twice the parent's limit plus a grace: here nobody kills it, and it is gone by then."""
    path = _hanging_file(tmp_path / "old.h5", tiny_cache)
    helper = cache_guard._Helper()
    try:
        started = time.monotonic()
        helper.process.stdin.write(json.dumps({"path": str(path), "seconds": 0.2}) + "\n")  # type: ignore[union-attr]
        helper.process.stdin.flush()  # type: ignore[union-attr]
        code = helper.process.wait(timeout=30)
        elapsed = time.monotonic() - started
    finally:
        helper.stop()
    assert code == -signal.SIGALRM
    assert cache_guard.alarm_seconds(0.2) - 0.5 < elapsed < cache_guard.alarm_seconds(0.2) + 5


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


# -- a disk that fails while a cache is written (issue "Reliability, round 2", problem 1) ------------------------
# HDF5 used to write to the disk itself: on a full disk it went on writing and closing a damaged file, printed ~100
# lines of tracebacks, and the process died of SIGSEGV when Python freed the file's objects. Now the file is made
# in memory and written with plain Python I/O. The writers run in a subprocess, so a crash is seen as a signal.

_WRITER = (
    "import gc, json, resource, signal, sys\n"
    "sys.path[:] = json.loads(sys.argv[1])\n"
    "from ensemble_env.cache import CacheError, datasets, save_cache\n"
    "cache = datasets.resolve('bbh5')\n"
    "if sys.argv[3] != 'disk':  # a real write failure without root: the file-size limit (EFBIG)\n"
    "    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))\n"
    "try:\n"
    "    save_cache(sys.argv[2], cache)\n"
    "except Exception as error:\n"
    "    found = {'type': type(error).__name__, 'errno': error.errno if isinstance(error, OSError) else None,\n"
    "             'message': str(error), 'cache_error': isinstance(error, CacheError),\n"
    "             'os_error': isinstance(error, OSError)}\n"
    "else:\n"
    "    found = {'written': True}\n"
    "gc.collect()  # whatever the failure left to free (it used to crash here)\n"
    "print(json.dumps(found), flush=True)\n"
)


def _write_bbh5(target: Path, limit: str = "disk") -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    paths = json.dumps([entry for entry in sys.path if entry])
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, paths, str(target), limit], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"the writer ended with {done.returncode} (a negative code is a signal): {done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1]), done


def _assert_clean_failure(
    target: Path, before: bytes, found: dict[str, Any], done: subprocess.CompletedProcess[str], code: int
) -> None:
    assert found["type"] == "CacheWriteError" and found["cache_error"] and found["os_error"], found
    assert found["errno"] == code, found
    assert found["message"].startswith(f"{target}: ") and os.strerror(code) in found["message"], found
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 1, done.stderr  # no HDF5 noise
    assert target.read_bytes() == before  # the previous file is intact
    assert sorted(os.listdir(target.parent)) == [target.name]  # no temporary file is left


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Any:
    """A 64 KiB tmpfs (mounting needs root on Linux; skipped elsewhere: the file-size limit test covers it)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_full_disk_is_a_clear_error_not_a_crash(tiny_cache: LogitCache, small_filesystem: Path) -> None:
    target = save_cache(small_filesystem / "cache.h5", tiny_cache)  # the previous file: fits in the 64 KiB
    before = target.read_bytes()
    found, done = _write_bbh5(target)  # bbh5 is 1.8 MB
    _assert_clean_failure(target, before, found, done, errno.ENOSPC)
    assert_same_cache(load_cache(target), tiny_cache)


def test_a_read_only_file_system_is_a_clear_error(tiny_cache: LogitCache, small_filesystem: Path) -> None:
    target = save_cache(small_filesystem / "cache.h5", tiny_cache)
    before = target.read_bytes()
    remounted = subprocess.run(["mount", "-o", "remount,ro", str(small_filesystem)], capture_output=True)
    if remounted.returncode != 0:
        pytest.skip("cannot remount the tmpfs read-only")
    found, done = _write_bbh5(target)
    _assert_clean_failure(target, before, found, done, errno.EROFS)


def test_the_command_line_reports_a_full_disk_in_one_line(small_filesystem: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = tmp_path / "pool.npz"  # about 500 KB of scores: more than the 64 KiB file system holds
    np.savez(arrays, scores=rng.normal(size=(3000, 5, 4)), labels=rng.integers(0, 4, 3000), models=list("abcde"))
    target = small_filesystem / "pool.h5"
    command = [sys.executable, "-m", "ensemble_env.cli", "cache", "from-arrays", str(arrays), "--score-kind", "logit"]
    done = subprocess.run([*command, "-o", str(target)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{target}: " in done.stderr and "No space left on device" in done.stderr
    assert os.listdir(small_filesystem) == []


def test_a_write_failing_past_a_size_limit_is_a_clear_error(tiny_cache: LogitCache, tmp_path: Path) -> None:
    """The same without root: the kernel refuses every write past RLIMIT_FSIZE with EFBIG, as a full disk would."""
    target = save_cache(tmp_path / "cache.h5", tiny_cache)
    before = target.read_bytes()
    found, done = _write_bbh5(target, limit=str(200_000))
    _assert_clean_failure(target, before, found, done, errno.EFBIG)


@pytest.mark.slow
@pytest.mark.parametrize("limit", [0, 1, 4096, 50_000, 300_000, 1_000_000, 1_836_858])
def test_writes_failing_at_any_offset_are_clear_errors(tiny_cache: LogitCache, tmp_path: Path, limit: int) -> None:
    """The file-size limit at offsets from the first byte to the last one of bbh5 (1,836,859 bytes)."""
    target = save_cache(tmp_path / "cache.h5", tiny_cache)
    before = target.read_bytes()
    found, done = _write_bbh5(target, limit=str(limit))
    _assert_clean_failure(target, before, found, done, errno.EFBIG)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_disk_failing_when_the_file_is_synced_is_a_clear_error(
    tiny_cache: LogitCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Injected: a network file system reports a full disk or an exceeded quota when the file is synced."""
    target = save_cache(tmp_path / "cache.h5", tiny_cache)
    before = target.read_bytes()

    def fsync(handle: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as excinfo:
        save_cache(target, rebuild(tiny_cache, source="another"))
    error = excinfo.value
    assert isinstance(error, CacheWriteError) and isinstance(error, CacheError) and error.errno == code
    assert error.strerror == os.strerror(code) and error.filename == str(target)
    assert str(error).startswith(f"{target}: cannot write: {os.strerror(code)}")
    assert errno.errorcode[code] in str(error) and "no partial or temporary file is left" in str(error)
    assert target.read_bytes() == before and os.listdir(tmp_path) == ["cache.h5"]


def test_a_file_name_too_long_is_a_clear_error(tiny_cache: LogitCache, tmp_path: Path) -> None:
    target = tmp_path / ("c" * 300 + ".h5")
    with pytest.raises(CacheWriteError, match=re.escape(f"{target}: ")) as excinfo:
        save_cache(target, tiny_cache)
    assert excinfo.value.errno == errno.ENAMETOOLONG and os.listdir(tmp_path) == []


def test_caches_saved_at_once_from_threads_are_all_whole(tiny_cache: LogitCache, tmp_path: Path) -> None:
    """The files made in memory at the same time are told apart (HDF5 refuses a second in-memory file of a name)."""
    caches = [rebuild(tiny_cache, source=f"copy {k}") for k in range(6)]
    failures: list[BaseException] = []

    def save(k: int) -> None:
        try:
            for turn in range(4):
                save_cache(tmp_path / f"{k}-{turn}.h5", caches[k])
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=save, args=(k,)) for k in range(len(caches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for k, cache in enumerate(caches):
        assert_same_cache(load_cache(tmp_path / f"{k}-3.h5"), cache)


def test_the_in_memory_writer_gives_the_bytes_hdf5_wrote_to_disk(tmp_path: Path) -> None:
    """The file made in memory is the one HDF5 used to write itself: the built-in bbh5, byte for byte."""
    from ensemble_env.cache import datasets

    assert cache_image(datasets.resolve("bbh5"), "gzip") == datasets.path("bbh5").read_bytes()
