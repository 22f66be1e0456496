"""game.files: a file is read only when it is a regular file within its cap, at once or not at
all (a FIFO, a device, a folder or a sparse terabyte is refused in one line naming it)."""

from __future__ import annotations

import csv
import os
import threading

import pytest

from game.files import (
    FileRefused,
    open_regular_text,
    read_regular_file,
    read_regular_text,
)

WAIT_S = 20  # a read that blocks fails here instead of hanging the run


def refused(path, cap: int = 100) -> str:
    """The message a read of ``path`` is refused with, read on a thread (a block is a fail)."""
    out: dict[str, BaseException] = {}

    def read() -> None:
        try:
            read_regular_file(path, cap, "metrics")
        except BaseException as e:  # what it raised is the outcome
            out["error"] = e

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), f"reading {path} blocked"
    assert isinstance(out.get("error"), FileRefused), out
    message = str(out["error"])
    assert "\n" not in message and str(path) in message
    return message


def test_only_regular_files_within_their_cap_are_read(tmp_path):
    fifo = tmp_path / "metrics.csv"
    os.mkfifo(fifo)
    assert refused(fifo).endswith("a FIFO, not a regular file")
    sparse = tmp_path / "sparse"
    with sparse.open("wb") as f:
        f.truncate(1 << 40)
    assert refused(sparse).endswith("1099511627776 bytes, over the 100-byte cap")
    assert refused(tmp_path).endswith("a directory, not a regular file")
    assert refused("/dev/zero").endswith("a character device, not a regular file")
    link = tmp_path / "link"
    link.symlink_to(fifo)
    assert refused(link).endswith("a FIFO, not a regular file")  # links are followed, checked
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "absent", 100)


def test_a_regular_file_reads_whole_as_bytes_text_or_csv(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_bytes(b"player,elo\nv1,5\n")
    assert read_regular_file(path, 16) == b"player,elo\nv1,5\n"  # exactly at the cap
    assert refused(path, 15).endswith("16 bytes, over the 15-byte cap")
    with open_regular_text(path, 100, "ratings") as f:
        assert list(csv.DictReader(f)) == [{"player": "v1", "elo": "5"}]
    path.write_bytes(b"caf\xe9")
    assert read_regular_text(path, 100, errors="replace") == "caf\ufffd"
    with pytest.raises(FileRefused, match=r"not UTF-8 text \(byte 3\)"):
        read_regular_text(path, 100, "book")


def test_a_fifo_in_a_network_files_place_is_refused_not_waited_on(tmp_path) -> None:
    """The header reader of network files (learner.init_weights, the play server's list of
    networks) opens regular files only: a FIFO named like a network would block an open."""
    from checkerzero.network.header import read_model_shape

    fifo = tmp_path / "net.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="a FIFO, not a regular file"):
        read_model_shape(fifo)
