"""Writing files safely: every file the project writes (caches, reports, plots, run directories) goes
through :func:`atomic_path` or one of the helpers built on it, so a failure or a crash never leaves a partial
file where a complete one was expected, and an output never replaces one of the inputs it was made from.

- :func:`atomic_path`: the one atomic writer (a temporary file beside the target, synced, then renamed).
- :func:`writing`: the writes that cannot be atomic (a line appended to a log, the event files a library writes
  in a folder): a failing disk is reported as :func:`atomic_path` reports it; :func:`make_folder` makes a folder.
- :func:`check_output`: the one check that an output is none of the inputs (same device and inode).
- :func:`output_folder`: the one rule for a command's output folder: new, empty, or marked as made by the command.
- :class:`OutputError`: what both raise when an output cannot be written; a ValueError and an OSError,
  naming the output and the cause.

The one writer of a folder (a run directory) is :class:`ensemble_env.run_lock.RunLock`, in a module of its own.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_text(folder / "config.json", "{}")
PosixPath('...config.json')
>>> (folder / "config.json").read_text()
'{}'
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ensemble_env.filesystem import cause, file_id
from ensemble_env.run_lock import RunLock  # noqa: F401  (kept importable from here: benchmarks/partial_selection.py)
from ensemble_env.text import show

__all__ = [
    "OUTPUT_MARK",
    "OutputError",
    "atomic_path",
    "check_output",
    "make_folder",
    "output_folder",
    "save_figure",
    "write_bytes",
    "write_text",
    "writing",
]

#: the mark of a folder a command made for its outputs (:func:`output_folder`): ``{"command": NAME}``
OUTPUT_MARK = "made-by.json"
#: the most bytes a mark may hold
_MARK_BYTES = 4096

#: the temporary files of :func:`atomic_path`: ``.<name>.<pid>.<8 random characters>.tmp`` beside the target
#: (``<name>`` shortened to ``<start of name>~<8 hex digits of its hash>`` when the whole would be too long)
_TEMPORARY = ".{name}.{pid}."
_TEMPORARY_SUFFIX = ".tmp"
_RANDOM_CHARACTERS = 8  # what tempfile.mkstemp puts between the prefix and the suffix
#: the longest file name, in bytes, where the filesystem does not say
_DEFAULT_NAME_MAX = 255


class OutputError(OSError, ValueError):
    """An output that cannot be written, or must not be: the message names the output and the cause.

    An OSError (``errno`` is the cause's, when there is one) and a ValueError, so that the command line
    reports it as an error of the command, as it reports any bad argument, and never as a traceback.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows), or the folder cannot tell
        return _DEFAULT_NAME_MAX


def _temporary_stem(name: str, pid: int, limit: int) -> str:
    """The ``<name>`` part of the temporary file's name: ``name`` itself, or its start and a hash of the whole
    when ``.<name>.<pid>.<random>.tmp`` would be longer than ``limit`` bytes (the filesystem's name limit)."""
    fixed = len(os.fsencode(_TEMPORARY.format(name="", pid=pid))) + _RANDOM_CHARACTERS + len(_TEMPORARY_SUFFIX)
    if fixed + len(os.fsencode(name)) <= limit:
        return name
    digest = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
    budget = max(limit - fixed - len(digest), 0)
    start = name[:budget]
    while len(os.fsencode(start)) > budget:  # multi-byte characters: cut on a character boundary
        start = start[:-1]
    return start + digest


def _remove_stale_temporaries(target: Path, limit: int) -> None:
    """Remove the temporary files of ``target`` left by writers that were killed (their process is gone). A
    writer's ``<name>`` part depends on its process id's length when the name is shortened
    (:func:`_temporary_stem`), so each candidate is matched against the part its own process id gives."""
    pattern = re.compile(r"\.(.+)\.([0-9]+)\.[a-z0-9_]{8}" + re.escape(_TEMPORARY_SUFFIX))
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or match.group(1) != _temporary_stem(target.name, int(match.group(2)), limit):
            continue
        if _process_alive(int(match.group(2))):
            continue
        with contextlib.suppress(OSError):
            (target.parent / name).unlink()


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or we cannot tell): leave its file alone
    return True


def _sync(path: Path, directory: bool = False) -> None:
    """Flush a file (or a folder's entries) to disk; folders are skipped where they cannot be opened."""
    try:
        handle = os.open(path, os.O_RDONLY if directory else os.O_RDWR)
    except OSError:
        if directory:
            return  # e.g. Windows: folders cannot be opened, and renames are durable there
        raise
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def check_output(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> None:
    """Raise :class:`OutputError` when the output ``path`` is one of ``inputs``: the same file by device and
    inode (``os.stat``, following symbolic links), so that a hard link or a symbolic link to an input, or an
    input reached through another spelling of its path, is refused too. Inputs that do not exist are passed
    over; so is an output that does not exist yet.
    """
    if isinstance(inputs, str | bytes | os.PathLike):
        raise TypeError(f"inputs must be a list of paths, got the single path {inputs!r}")
    output = file_id(path)
    if output is None:
        return
    for source in inputs:
        if file_id(source) != output:
            continue
        if os.path.abspath(path) == os.path.abspath(source):
            how = ""
        elif os.path.islink(path) or os.path.islink(source):
            how = " (a symbolic link leads from one to the other)"
        elif os.path.realpath(path) == os.path.realpath(source):
            how = " (the same file by another path)"
        else:
            how = " (a hard link: the same file under two names)"
        raise OutputError(
            f"{path}: the output would overwrite the input {source}{how}; inputs are never modified: "
            "choose another output"
        )


def _check_target(target: Path, limit: int) -> None:
    """Refuse an output that is a folder, an existing non-regular file, or a name the filesystem cannot hold."""
    if not target.parent.is_dir():
        if not target.parent.exists():
            raise FileNotFoundError(f"{target.parent}: folder does not exist (cannot write {target.name})")
        raise OutputError(f"{target}: cannot write: {target.parent} is not a folder", errno.ENOTDIR)
    try:
        status = os.stat(target)
    except OSError:
        status = None  # no file there (or a broken link, replaced as any file is)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise OutputError(
            f"{target}: is a folder; give the path of a file to write (e.g. {target / 'out.h5'})", errno.EISDIR
        )
    if status is not None and not stat.S_ISREG(status.st_mode):
        raise OutputError(
            f"{target}: exists and is not a regular file (a device, FIFO or socket); it is not replaced",
            errno.EEXIST,
        )
    size = len(os.fsencode(target.name))
    if size > limit:
        raise OutputError(
            f"{target}: the file name is {size} bytes long, more than the {limit} the filesystem allows",
            errno.ENAMETOOLONG,
        )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = ()) -> Iterator[Path]:
    """A temporary path in the folder of ``path`` to write to; synced to disk and renamed to ``path`` when the
    block ends normally (with the usual permissions for the umask), removed when it raises (any exception,
    KeyboardInterrupt too).

    The temporary file is ``.<name>.<pid>.<random>.tmp`` beside ``path``, ``<name>`` shortened (its start and
    a hash of it) when the whole would exceed the filesystem's name limit. One left by a writer that was
    killed (its process no longer runs) is removed at the next write of the same ``path``. The folder must
    exist (FileNotFoundError otherwise). An existing file at ``path`` is replaced only once the new one is
    complete and on disk, so a failure or a crash never leaves a partial file at ``path``.

    ``inputs``: the files the output is made from; an output that is one of them is refused
    (:func:`check_output`) before anything is written and again just before the rename.

    Raises :class:`OutputError` naming ``path`` and the cause when ``path`` is a folder, an existing device,
    FIFO or socket, a name longer than the filesystem allows, one of ``inputs``, or when the filesystem
    refuses the write (read-only, full, over quota: any OSError, from the block too, is reported so, with
    its ``errno``); the temporary file is removed and a previous file at ``path`` is left as it was.
    """
    target = Path(path)
    if not isinstance(inputs, str | bytes | os.PathLike):
        inputs = list(inputs)  # read twice: before the write and before the rename
    check_output(target, inputs)
    limit = _name_max(target.parent)
    _check_target(target, limit)
    stem = _temporary_stem(target.name, os.getpid(), limit)
    _remove_stale_temporaries(target, limit)
    try:
        handle, name = tempfile.mkstemp(
            dir=target.parent, prefix=_TEMPORARY.format(name=stem, pid=os.getpid()), suffix=_TEMPORARY_SUFFIX
        )
    except OSError as error:
        raise OutputError(
            f"{target}: cannot write: {cause(error)} (creating a temporary file in {target.parent})", error.errno
        ) from error
    os.close(handle)
    temporary = Path(name)
    try:
        try:
            yield temporary
            _sync(temporary)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
            check_output(target, inputs)  # again: the output may have become an input while it was written
            os.replace(temporary, target)
            _sync(target.parent, directory=True)
        except OSError as error:  # the temporary is no business of the caller's: name the output
            named = isinstance(error, OutputError) or str(error).startswith(f"{temporary}:")  # a nested writer's
            message = str(error) if named else f"{target}: cannot write: {cause(error)}"
            raise OutputError(message.replace(str(temporary), str(target)), error.errno) from error
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A block that writes ``path`` in place, where a temporary file renamed into place cannot be used: a line
    appended to a log (``progress.csv``), the event files a library writes in a folder (TensorBoard's). An OSError
    the block raises (a full or read-only disk, a quota, no permission) becomes an :class:`OutputError` naming
    ``path`` and the cause, with its ``errno``, as :func:`atomic_path` reports it; an OutputError passes as it is.
    What the block wrote before the failure stays: the caller keeps its file readable (a log keeps its complete
    rows; a resumed run rewrites what came after its checkpoint).

    >>> import errno
    >>> with writing("runs/a/progress.csv"):
    ...     raise OSError(errno.ENOSPC, "No space left on device")
    Traceback (most recent call last):
    ...
    ensemble_env.files.OutputError: runs/a/progress.csv: cannot write: No space left on device
    """
    try:
        yield Path(path)
    except OutputError:
        raise
    except OSError as error:
        raise OutputError(f"{path}: cannot write: {cause(error)}", error.errno) from error


def make_folder(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` (and its parents; nothing to do when it is there); :class:`OutputError` naming it
    and the cause when it cannot be (a file in the way, a read-only or full disk, no permission)."""
    path = Path(path)
    blocker = next((parent for parent in (path, *path.parents) if parent.exists() or parent.is_symlink()), None)
    if blocker is not None and not blocker.is_dir():
        where = "" if blocker == path else f" (in the way of {path})"
        raise OutputError(f"{blocker}: is a file, not a folder{where}", errno.ENOTDIR)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{path}: cannot create the folder ({cause(error)})", error.errno) from None
    return path


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`); returns the path."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes, *, inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_path`, which refuses an output that is one of
    ``inputs``); returns the path."""
    with atomic_path(path, inputs=inputs) as temporary:
        temporary.write_bytes(data)
    return Path(path)


def save_figure(figure: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """Write a matplotlib figure as PNG atomically (:func:`atomic_path`), without a timestamp in its metadata;
    ``options`` go to ``savefig`` (e.g. ``dpi=120``)."""
    with atomic_path(path) as temporary:
        figure.savefig(temporary, format="png", metadata={"Software": None}, **options)
    return Path(path)


# -- the folder of a command's outputs --------------------------------------------------------------------------
def output_folder(path: str | os.PathLike[str], command: str, *, option: str = "--out") -> Path:
    """The folder ``path`` that ``command`` (``"partial_selection.py"``) writes its outputs into, made or taken back:
    the one rule for an output folder. A command writes only into a folder that is new or empty, which it then marks
    as its own (:data:`OUTPUT_MARK`, a small JSON file naming ``command``), or into one it marked before (a rerun
    reads back its finished work); never into a folder of another command's files (a ``train`` run, another
    script's outputs, anything else), which it could overwrite.

    :class:`OutputError` naming ``option``, the folder and the reason: an empty path, a file, a folder holding files
    and no mark or another command's mark, a mark that is not one (a folder, a link, not this JSON), or a folder that
    cannot be made or written.

    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "sel"
    >>> output_folder(folder, "partial_selection.py") == folder, sorted(p.name for p in folder.iterdir())
    (True, ['made-by.json'])
    >>> output_folder(folder, "small_sample.py")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ensemble_env.files.OutputError: --out ...sel: holds the outputs of partial_selection.py (made-by.json); ...
    """
    text = os.fspath(path)
    if not text.strip():
        raise OutputError(f"{option} is empty: give the folder {command} writes its outputs into")
    folder = Path(text)
    where = f"{option} {folder}"
    if os.path.lexists(folder) and not folder.is_dir():
        raise OutputError(f"{where}: is not a folder; {command} writes its outputs into a folder", errno.ENOTDIR)
    if not folder.exists():
        try:
            make_folder(folder)
        except OutputError as error:
            raise OutputError(f"{where}: {error}", error.errno) from None
    try:
        names = sorted(os.listdir(folder))
    except OSError as error:
        raise OutputError(f"{where}: cannot list the folder ({cause(error)})", error.errno) from None
    if OUTPUT_MARK in names:
        maker = _read_mark(folder / OUTPUT_MARK)
        if maker is None:
            raise OutputError(
                f"{where}: holds {OUTPUT_MARK}, which is not the mark of a command of this project (a small regular "
                f"JSON file naming it); {command} leaves the folder alone: give another {option}"
            )
        if maker != command:
            raise OutputError(
                f"{where}: holds the outputs of {show(maker, 80)[1:-1]} ({OUTPUT_MARK}); {command} writes only into a "
                f"new or empty folder or one it made, never over another command's files: give another {option}"
            )
        return folder
    if names:
        shown = ", ".join(show(name, 60)[1:-1] for name in names[:3]) + (", ..." if len(names) > 3 else "")
        raise OutputError(
            f"{where}: the folder holds files {command} did not write ({shown}); it writes only into a new or empty "
            f"folder or one it made (marked by {OUTPUT_MARK}), never over another command's files: give another "
            f"{option}"
        )
    try:
        write_text(folder / OUTPUT_MARK, json.dumps({"command": command}) + "\n")
    except OutputError as error:
        raise OutputError(f"{where}: {error}", error.errno) from None
    return folder


def _read_mark(path: Path) -> str | None:
    """The command named by the mark ``path`` of an output folder; None unless it is a small regular JSON file
    ``{"command": NAME}`` (never a FIFO, a device or a link: opened without following links, non-blocking)."""
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        data = os.read(handle, _MARK_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(handle)
    try:
        record = json.loads(data.decode("utf-8")) if len(data) <= _MARK_BYTES else None
    except (ValueError, RecursionError):
        return None
    command = record.get("command") if isinstance(record, dict) else None
    return command if isinstance(command, str) and command else None
