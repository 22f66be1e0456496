"""Opening a file that must be a plain file: never a link, a FIFO, a device or a directory.

A path a user names (a match journal) may hold anything: ``/dev/null``, a FIFO whose open would
wait forever, a link to a file elsewhere. These helpers look before they open (``lstat``), open
without following a link and without blocking (``O_NOFOLLOW | O_NONBLOCK``), and check again
what was opened (``fstat``), so such a path is refused by name, never read, written or replaced.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO never blocks the open


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words ("a FIFO")."""
    for test, text in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return text
    return "not a regular file"


def regular_or_absent(path: str | Path, where: str) -> os.stat_result | None:
    """The ``lstat`` of ``path`` when it is a regular file, None when nothing is there;
    ValueError("<where>: a FIFO, not a regular file") for anything else (links not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"{where}: cannot look at it ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{where}: {kind_of(st.st_mode)}, not a regular file")
    return st


def open_regular(path: str | Path, flags: int, where: str, mode: int = 0o644) -> int:
    """A blocking descriptor of the regular file ``path`` (``os.open`` ``flags``, such as
    ``O_RDONLY`` or ``O_WRONLY | O_APPEND``), opened without following a link or blocking on
    a FIFO; ValueError naming ``where`` when it is anything else."""
    try:
        fd = os.open(path, flags | _FLAGS, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValueError(f"{where}: a symbolic link, not a regular file") from None
        raise ValueError(f"{where}: cannot open it ({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # replaced since it was looked at, or a FIFO opened
        os.close(fd)
        raise ValueError(f"{where}: {kind_of(st.st_mode)}, not a regular file")
    os.set_blocking(fd, True)
    return fd
