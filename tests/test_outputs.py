"""Where outputs go (issue "Reliability, round 2"): ensemble_env.files' one output check and one atomic writer,
through the API and through every writing command of ``ensemble-env cache``.

- An output that is one of the inputs (the same path, a hard link, a symbolic link either way, another
  spelling) is refused naming both, before anything is read and again just before the rename; the input
  is left as it was.
- An output that is a folder, an existing FIFO, a file name longer than the filesystem allows, a read-only
  filesystem (EROFS, simulated, and a real read-only bind mount where one can be made), a full disk or a
  quota (ENOSPC, EDQUOT) is an OutputError naming the output and the cause: no traceback on the command
  line, no temporary file left, a previous output intact.
- A legal 252-character name is written: the temporary's name is shortened to fit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testing.conversions import digest, write_run

from ensemble_env import files
from ensemble_env.cache import LogitCache, load_cache, save_cache
from ensemble_env.cli import main
from ensemble_env.files import OutputError, atomic_path, check_output, write_bytes, write_text

SAMPLES = "samples_suite_colors_2024-07-01T12-30-45.123456.jsonl"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def assert_one_error_line(err: str, *parts: str) -> None:
    """``err`` is one ``ensemble-env cache...: error: ...`` line holding every one of ``parts``; no traceback."""
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert re.match(r"ensemble-env cache( [a-z-]+)?: error: ", err), err
    for part in parts:
        assert part in err, (part, err)


# -- check_output: the output is none of the inputs -------------------------------------------------------------


def test_the_same_file_by_any_name_is_refused_naming_output_and_input(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("data")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path, tmp_path / "alias")  # a folder reached by a link: the same file by another path
    os.link(source, tmp_path / "hard.h5")
    os.symlink(source, tmp_path / "link.h5")
    os.symlink(tmp_path / "out.h5", tmp_path / "link-in.jsonl")  # the input is a link to the output
    (tmp_path / "out.h5").write_text("old")
    cases = [
        (source, source, ""),
        (tmp_path / "sub" / ".." / "in.jsonl", source, ""),
        (tmp_path / "alias" / "in.jsonl", source, "(the same file by another path)"),
        (tmp_path / "hard.h5", source, "(a hard link: the same file under two names)"),
        (tmp_path / "link.h5", source, "(a symbolic link leads from one to the other)"),
        (tmp_path / "out.h5", tmp_path / "link-in.jsonl", "(a symbolic link leads from one to the other)"),
    ]
    for output, given, how in cases:
        with pytest.raises(OutputError) as excinfo:
            check_output(output, [tmp_path / "other.jsonl", given])
        message = str(excinfo.value)
        assert message.startswith(f"{output}: the output would overwrite the input {given}"), message
        assert how in message and "choose another output" in message
        assert isinstance(excinfo.value, ValueError) and isinstance(excinfo.value, OSError)
    check_output(tmp_path / "new.h5", [source])  # no file there yet
    check_output(tmp_path / "out.h5", [tmp_path / "absent.jsonl", source])  # another file; a missing input
    with pytest.raises(TypeError, match="a list of paths"):
        check_output(tmp_path / "out.h5", str(source))  # type: ignore[arg-type]
    assert source.read_text() == "data" and (tmp_path / "out.h5").read_text() == "old"


def test_atomic_path_with_inputs_refuses_before_writing(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("0.5,0.5\n")
    os.link(source, tmp_path / "out.h5")
    entered = False
    with pytest.raises(OutputError, match=re.escape("out.h5: the output would overwrite the input")):
        with atomic_path(tmp_path / "out.h5", inputs=[source]):
            entered = True
    assert not entered and listing(tmp_path) == ["in.csv", "out.h5"] and source.read_text() == "0.5,0.5\n"


def test_an_output_that_becomes_an_input_while_written_is_refused_at_the_rename(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("keep")
    with pytest.raises(OutputError, match=re.escape("out.h5: the output would overwrite the input")):
        with atomic_path(tmp_path / "out.h5", inputs=(path for path in [source])) as temporary:
            temporary.write_text("new")
            os.link(source, tmp_path / "out.h5")  # someone links the input there meanwhile
    assert listing(tmp_path) == ["in.csv", "out.h5"] and source.read_text() == "keep"


# -- atomic_path: clear errors, nothing left, the previous file intact -------------------------------------------


def test_a_folder_or_a_fifo_as_the_output_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(OutputError, match=re.escape(f"{folder}: is a folder; give the path of a file")) as excinfo:
        write_text(folder, "x")
    assert excinfo.value.errno == errno.EISDIR and listing(folder) == []
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match=re.escape(f"{fifo}: exists and is not a regular file")):
        write_text(fifo, "x")
    (tmp_path / "file").write_text("a file")
    with pytest.raises(OutputError, match="is not a folder"):
        write_text(tmp_path / "file" / "out.h5", "x")
    with pytest.raises(FileNotFoundError, match="folder does not exist"):
        write_text(tmp_path / "absent" / "out.h5", "x")
    assert listing(tmp_path) == ["file", "out", "pipe.h5"]


@pytest.mark.parametrize(
    "name", ["a" * 249 + ".h5", "é" * 124 + ".h5", "€" * 83 + ".h5"], ids=["ascii", "2-byte", "3-byte"]
)
def test_a_name_of_up_to_255_bytes_is_written_through_a_shortened_temporary(tmp_path: Path, name: str) -> None:
    assert 250 <= len(name.encode()) <= 255
    seen = []
    with atomic_path(tmp_path / name) as temporary:
        seen.append(temporary.name)
        temporary.write_text("data")
    assert listing(tmp_path) == [name] and (tmp_path / name).read_text() == "data"
    assert len(os.fsencode(seen[0])) <= 255
    assert re.fullmatch(rf"\..+~[0-9a-f]{{8}}\.{os.getpid()}\.[a-z0-9_]{{8}}\.tmp", seen[0]), seen[0]
    other = name[:-4] + "b.h5"  # the same start: another hash, so another temporary name
    with atomic_path(tmp_path / other) as temporary:
        assert temporary.name.split("~")[1][:8] != seen[0].split("~")[1][:8]
        temporary.write_text("other")


def test_a_dead_writers_shortened_temporary_is_removed(tmp_path: Path) -> None:
    """Whatever the length of the dead writer's process id: the shortened ``<name>`` part depends on it (a longer
    id leaves fewer bytes for the name), so a file of a writer whose id is longer or shorter than ours is its own."""
    name = "c" * 252
    with atomic_path(tmp_path / name) as temporary:
        temporary.write_text("first")
    dead = subprocess.run(["python3", "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    for pid in (int(dead.stdout), 9_999_999, 99):  # 9,999,999 is above Linux's largest process id
        if pid == 99 and Path("/proc/99").exists():
            continue  # a live process: its file is not stale
        stem = files._temporary_stem(name, pid, limit)
        assert "~" in stem  # shortened
        (tmp_path / f".{stem}.{pid}.abcd1234.tmp").write_text("partial")
    other = tmp_path / f".{files._temporary_stem('d' * 252, 9_999_999, limit)}.9999999.abcd1234.tmp"
    other.write_text("another file's")
    write_text(tmp_path / name, "second")
    assert listing(tmp_path) == sorted([name, other.name])


def test_a_name_longer_than_the_filesystem_allows_is_refused(tmp_path: Path) -> None:
    name = "a" * 253 + ".h5"
    with pytest.raises(OutputError, match="the file name is 256 bytes long, more than the 255") as excinfo:
        write_text(tmp_path / name, "x")
    assert excinfo.value.errno == errno.ENAMETOOLONG and listing(tmp_path) == []


def _raise(code: int) -> OSError:
    return OSError(code, os.strerror(code))


@pytest.mark.parametrize("where", ["mkstemp", "replace"])
def test_a_read_only_filesystem_is_reported_and_the_previous_file_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    target = write_text(tmp_path / "out.h5", "previous")

    def refuse(*args: object, **kwargs: object) -> None:
        raise _raise(errno.EROFS)

    monkeypatch.setattr(tempfile if where == "mkstemp" else os, where, refuse)
    with pytest.raises(OutputError) as excinfo:
        write_text(target, "new")
    assert str(excinfo.value).startswith(f"{target}: cannot write: Read-only file system")
    assert excinfo.value.errno == errno.EROFS
    assert listing(tmp_path) == ["out.h5"] and target.read_text() == "previous"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
@pytest.mark.parametrize("where", ["write", "fsync"])
def test_a_full_disk_or_quota_is_reported_and_the_previous_file_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, where: str
) -> None:
    target = write_bytes(tmp_path / "out.bin", b"previous")
    if where == "fsync":
        monkeypatch.setattr(os, "fsync", lambda handle: (_ for _ in ()).throw(_raise(code)))
    with pytest.raises(OutputError) as excinfo, atomic_path(target) as temporary:
        temporary.write_bytes(b"half")
        if where == "write":
            raise _raise(code)
    assert str(excinfo.value) == f"{target}: cannot write: {os.strerror(code)}"
    assert excinfo.value.errno == code and isinstance(excinfo.value.__cause__, OSError)
    assert listing(tmp_path) == ["out.bin"] and target.read_bytes() == b"previous"


def test_a_nested_writer_reports_the_outer_output_not_its_temporary(tmp_path: Path) -> None:
    target = write_bytes(tmp_path / "out.bin", b"previous")
    with pytest.raises(OutputError) as excinfo, atomic_path(target) as temporary, atomic_path(temporary) as inner:
        inner.write_bytes(b"half")
        raise _raise(errno.ENOSPC)
    assert str(excinfo.value) == f"{target}: cannot write: No space left on device"
    assert listing(tmp_path) == ["out.bin"] and target.read_bytes() == b"previous"


@contextlib.contextmanager
def _mounted(source: str, folder: Path, *options: str) -> Iterator[None]:
    """Mount ``source`` on ``folder`` (root only; skips the test where mounting is not allowed)."""
    folder.mkdir()
    made = subprocess.run(["mount", *options, source, str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount here: {made.stderr.strip()[:100]}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, check=False)


def test_a_real_read_only_mount_is_reported(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "out.h5").write_text("previous")
    with _mounted(str(source), tmp_path / "ro", "--bind"):
        remounted = subprocess.run(["mount", "-o", "remount,ro,bind", str(tmp_path / "ro")], capture_output=True)
        if remounted.returncode != 0:
            pytest.skip("cannot remount read-only here")
        with pytest.raises(OutputError, match=re.escape(f"{tmp_path / 'ro' / 'out.h5'}: cannot write: Read-only")):
            write_text(tmp_path / "ro" / "out.h5", "new")
    assert listing(source) == ["out.h5"] and (source / "out.h5").read_text() == "previous"


def test_a_really_full_filesystem_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "small"
    with _mounted("tmpfs", folder, "-t", "tmpfs", "-o", "size=256k"):
        target = write_bytes(folder / "out.bin", b"previous")
        with pytest.raises(OutputError, match=re.escape(f"{target}: cannot write: No space left on device")):
            write_bytes(target, bytes(4 * 2**20))
        assert listing(folder) == ["out.bin"] and target.read_bytes() == b"previous"


# -- the cache commands: one check, every writer --------------------------------------------------------------------


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")


def test_from_lm_eval_onto_one_of_its_samples_files_is_refused(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported data loss: -o DIR/org__m/samples_task_<date>.jsonl wrote the cache over its own input."""
    target = samples / "org__alpha" / SAMPLES
    os.link(target, tmp_path / "hard.h5")
    os.symlink(target, tmp_path / "link.h5")
    before, files = digest(tmp_path), listing(samples / "org__alpha")
    for output in (target, tmp_path / "hard.h5", tmp_path / "link.h5", samples / "org__alpha"):
        code, out, err = run(capsys, "cache", "from-lm-eval", samples, "-o", output)
        assert code == 2 and out == ""
        assert_one_error_line(err, f"{output}: the output would overwrite the input ")
        assert digest(tmp_path) == before and listing(samples / "org__alpha") == files
    assert listing(tmp_path) == ["hard.h5", "link.h5", "run"]


def test_every_writing_command_refuses_an_input_as_its_output(
    samples: Path, tmp_path: Path, tiny_cache: LogitCache, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = save_cache(tmp_path / "pool.h5", tiny_cache)
    os.link(cache, tmp_path / "pool-hard.h5")
    scores, labels = tmp_path / "scores.csv", tmp_path / "labels.txt"
    scores.write_text("0.1,0.9\n0.7,0.3\n", encoding="utf-8")
    labels.write_text("1\n0\n", encoding="utf-8")
    os.link(labels, tmp_path / "labels-hard.h5")
    features = tmp_path / "features.npy"
    np.save(features, np.zeros((6, 2)))
    (tmp_path / "plots").mkdir()
    os.link(cache, tmp_path / "plots" / "error_correlation.png")
    before = digest(tmp_path)
    commands = [
        (["from-arrays", scores, "--labels", labels, "--models", "a", "--score-kind", "prob"], labels),
        (["from-arrays", scores, "--labels", labels, "--models", "a", "--score-kind", "prob"], "labels-hard.h5"),
        (["from-arrays", scores, "--labels", labels, "--models", "a", "--score-kind", "prob"], scores),
        (["split", cache], "pool-hard.h5"),
        (["split", cache], cache),
        (["features", cache, "--from", features], features),
        (["features", cache, "--from", features], "pool-hard.h5"),
    ]
    for arguments, output in commands:
        output = tmp_path / output
        code, _, err = run(capsys, "cache", *arguments, "-o", output)
        assert code == 2, (arguments, err)
        assert_one_error_line(err, f"{output}: the output would overwrite the input ")
    code, _, err = run(capsys, "cache", "plot", cache, "-o", tmp_path / "plots")
    assert code == 2
    assert_one_error_line(err, "error_correlation.png: the output would overwrite the input ", str(cache))
    assert digest(tmp_path) == before


def test_a_folder_as_the_output_is_an_error_not_a_traceback(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", folder)
    assert code == 2 and listing(folder) == []
    assert_one_error_line(err, f"{folder}: is a folder; give the path of a file to write")
    (tmp_path / "note.txt").write_text("a file")
    code, _, err = run(capsys, "cache", "plot", "toy8", "-o", tmp_path / "note.txt")
    assert code == 2 and (tmp_path / "note.txt").read_text() == "a file"
    assert_one_error_line(err, "note.txt: not a folder")


def test_a_252_character_output_name_is_written(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / ("c" * 249 + ".h5")
    code, out, err = run(capsys, "cache", "from-lm-eval", samples, "-o", output)
    assert code == 0 and err == "" and f"wrote {output}: 9 questions" in out
    assert load_cache(output).n_questions == 9 and listing(tmp_path) == [output.name, "run"]
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", tmp_path / ("c" * 253 + ".h5"))
    assert code == 2
    assert_one_error_line(err, "the file name is 256 bytes long, more than the 255 the filesystem allows")


def test_a_read_only_filesystem_is_an_error_naming_the_output(
    samples: Path,
    tmp_path: Path,
    tiny_cache: LogitCache,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = save_cache(tmp_path / "pool.h5", tiny_cache)
    before = output.read_bytes()

    def refuse(*args: object, **kwargs: object) -> None:
        raise _raise(errno.EROFS)

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", output)
    assert code == 2 and output.read_bytes() == before and listing(tmp_path) == ["pool.h5", "run"]
    assert_one_error_line(err, f"{output}: cannot write: Read-only file system (creating a temporary file in ")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_a_full_disk_while_writing_the_cache_keeps_the_previous_one(
    samples: Path,
    tmp_path: Path,
    tiny_cache: LogitCache,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    code: int,
) -> None:
    import ensemble_env.cache.hdf5_writer as cache_writer

    output = save_cache(tmp_path / "pool.h5", tiny_cache)
    before = output.read_bytes()

    def full(path: Path, data: bytes, *, inputs: Any = ()) -> None:  # the disk fills up half-way through
        with atomic_path(path, inputs=inputs) as temporary:
            temporary.write_bytes(data[: len(data) // 2])
            raise _raise(code)

    monkeypatch.setattr(cache_writer, "write_bytes", full)
    status, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", output)
    assert status == 2 and output.read_bytes() == before and listing(tmp_path) == ["pool.h5", "run"]
    assert_one_error_line(err, f"{output}: cannot write: {os.strerror(code)}")
    assert ".tmp" not in err  # the output's name, not the temporary's


def test_the_command_on_a_really_full_filesystem_keeps_the_previous_cache(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "small"
    with _mounted("tmpfs", folder, "-t", "tmpfs", "-o", "size=64k"):
        output = write_bytes(folder / "pool.h5", b"an earlier cache")
        with contextlib.suppress(OSError), (folder / "filler").open("wb") as filler:  # fill what is left
            for _ in range(64):
                filler.write(bytes(4096))
                filler.flush()
        code, _, err = run(capsys, "cache", "from-lm-eval", samples, "-o", output)
        assert code == 2 and output.read_bytes() == b"an earlier cache" and listing(folder) == ["filler", "pool.h5"]
        assert_one_error_line(err, f"{output}: cannot write: No space left on device")
        assert ".tmp" not in err


@pytest.mark.parametrize(
    ("option", "value"),
    [("--test-fraction", "０.５"), ("--validation-fraction", "nan"), ("--split-seed", "１"), ("--max-file-mb", "1_0")],
)
def test_number_options_are_plain_ascii(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["cache", "from-lm-eval", str(samples), "-o", str(tmp_path / "out.h5"), option, value])
    err = capsys.readouterr().err
    assert excinfo.value.code == 2 and f"argument {option}: " in err and repr(value) in err
    assert not (tmp_path / "out.h5").exists()
