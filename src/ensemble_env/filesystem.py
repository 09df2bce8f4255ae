"""What the operating system says of a file, in the words the project reports: shared by the writers
(:mod:`ensemble_env.files`) and the run lock (:mod:`ensemble_env.run_lock`), which import nothing of each other.

- :func:`cause`: an OSError's reason in words, without the paths it may repeat.
- :func:`file_id`: the (device, inode) of a file, by which an output is told from an input and a lock file from
  its replacement.

>>> import errno
>>> cause(OSError(errno.ENOSPC, "No space left on device", "runs/a/model.pt"))
'No space left on device'
>>> file_id("no/such/file") is None
True
"""

from __future__ import annotations

import os

__all__ = ["cause", "file_id"]


def cause(error: OSError) -> str:
    """An OSError's reason in words, without the paths it may repeat (``No space left on device``)."""
    if error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def file_id(path: str | os.PathLike[str], *, follow_links: bool = True) -> tuple[int, int] | None:
    """(device, inode) of the file ``path`` names (the file a symbolic link leads to, unless ``follow_links`` is
    False: then the link itself); None when there is none."""
    try:
        status = os.stat(path, follow_symlinks=follow_links)
    except (OSError, ValueError):  # missing, a loop of links, a name too long, a NUL: no file known to be there
        return None
    return status.st_dev, status.st_ino
