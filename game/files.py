"""Reading a file that must be a regular file of bounded size: the one opener for files that a
user, a request or another process may have replaced with something else.

A FIFO opened for reading blocks until a writer appears (forever, if none does), a device can
stream without end, and a sparse file can claim terabytes while its first read returns at
once. So a file is opened only after ``stat`` says it is regular, without blocking
(``O_NONBLOCK``: a FIFO swapped in between the two opens at once instead of waiting), is
checked again on the open descriptor (``fstat``), and is read to at most its cap plus one byte
(a file that grows while it is read is refused too). Links are followed: where a path may not
leave a folder, the caller checks that (``play.paths``).

Errors are ``FileRefused`` (a ValueError) with one line naming what the file is for and its
path; ``FileNotFoundError`` passes through unchanged for callers that treat absence apart.

A file this program writes at a path a user names (a match journal) must not follow a link
either: `regular_or_absent` looks without following one, and `open_regular_fd` opens for
writing with ``O_NOFOLLOW`` and checks what it opened, so a link, FIFO or device at that path
is refused by name, never written or replaced.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# O_NONBLOCK only matters for the open of a FIFO or device swapped in after the stat; it is
# cleared again before reading, so a regular file reads as usual.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | os.O_CLOEXEC


class FileRefused(ValueError):
    """A path that is not a regular file, or one larger than its cap."""


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words ("a FIFO")."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _check(st: os.stat_result, path: Path, max_bytes: int, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"{what} {path}: {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise FileRefused(f"{what} {path}: {st.st_size} bytes, over the {max_bytes}-byte cap")


@contextmanager
def open_regular(path: str | Path, max_bytes: int, what: str = "file") -> Iterator[BinaryIO]:
    """``path`` opened for binary reading once it is known to be a regular file of at most
    ``max_bytes`` bytes (FileRefused naming ``what`` and the path otherwise). The file object
    reads no further than ``max_bytes``: a file that grew past its cap since the check ends
    there, and ``read_regular_file`` refuses it."""
    path = Path(path)
    try:
        _check(os.stat(path), path, max_bytes, what)
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except FileRefused:
        raise
    except OSError as err:
        raise FileRefused(f"{what} {path}: cannot open: {err.strerror or err}") from None
    try:
        _check(os.fstat(fd), path, max_bytes, what)  # the file opened is the file checked
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", closefd=True) as raw:
        yield _Capped(raw, max_bytes + 1)  # type: ignore[misc]


class _Capped(io.RawIOBase):
    """A binary reader that returns at most ``limit`` bytes of ``inner`` in all."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: self._left]
        n = self._inner.readinto(view) or 0
        self._left -= n
        return n


def read_regular_file(path: str | Path, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes`` bytes;
    FileRefused (one line naming ``what`` and the path) when it is anything else or grew past
    the cap while it was read; FileNotFoundError when it is absent."""
    with open_regular(path, max_bytes, what) as f:
        data = f.read()
    if len(data) > max_bytes:
        raise FileRefused(f"{what} {path}: grew past the {max_bytes}-byte cap while read")
    return data


def read_regular_text(
    path: str | Path, max_bytes: int, what: str = "file", errors: str = "strict"
) -> str:
    """``read_regular_file`` decoded as UTF-8 (``errors`` as for ``bytes.decode``; a strict
    decode error is a FileRefused naming the file)."""
    data = read_regular_file(path, max_bytes, what)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as err:
        raise FileRefused(f"{what} {path}: not UTF-8 text (byte {err.start})") from None


@contextmanager
def open_regular_text(
    path: str | Path, max_bytes: int, what: str = "file", errors: str = "strict"
) -> Iterator[io.TextIOWrapper]:
    """``open_regular`` as UTF-8 text with universal newlines off (as ``open(newline="")``
    for the csv module)."""
    with open_regular(path, max_bytes, what) as raw:
        buffered = io.BufferedReader(raw)  # type: ignore[arg-type]
        yield io.TextIOWrapper(buffered, encoding="utf-8", errors=errors, newline="")


_WRITE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO never blocks the open


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


def open_regular_fd(path: str | Path, flags: int, where: str, mode: int = 0o644) -> int:
    """A blocking descriptor of the regular file ``path`` (``os.open`` ``flags``, such as
    ``O_RDONLY`` or ``O_WRONLY | O_APPEND``), opened without following a link or blocking on
    a FIFO; ValueError naming ``where`` when it is anything else."""
    try:
        fd = os.open(path, flags | _WRITE_FLAGS, mode)
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


__all__ = [
    "FileRefused",
    "kind_of",
    "open_regular",
    "open_regular_fd",
    "open_regular_text",
    "read_regular_file",
    "read_regular_text",
    "regular_or_absent",
]
