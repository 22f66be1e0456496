"""The inference server's client: a search's inference whose network runs on the node's server.

`RemoteInference` is a ``game.mcts.Inference``: a search calls ``evaluate`` as it would call a
``NetworkInference``. When the server goes away (its process died), the client logs one line,
waits for the server to come back (Ray restarts it) and sends the same batch again: the games in
progress go on where they were. The server is `checkerzero.inference_server.server`; the messages
and the
shared buffer's layout are in `checkerzero.inference_server.protocol`.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import socket
import time
from collections.abc import Callable

import numpy as np

from checkerzero.inference_server.protocol import (
    HANDSHAKE_TIMEOUT_S,
    HELLO,
    MAX_CLIENT_ROWS,
    POLL_S,
    PROTOCOL,
    REFUSAL_BYTES,
    REPLY,
    REQUEST,
    WELCOME,
    Layout,
    recv_exact,
)
from game.encoding import NUM_WDL
from game.mcts import check_mask

logger = logging.getLogger(__name__)

WAITING_LOG_S = 30.0  # a client still waiting for its server says so this often


class ServerStopped(RuntimeError):
    """The client was asked to stop while it waited for its server."""


class RemoteInference:
    """A ``game.mcts.Inference`` whose network runs in an `InferenceServer` on this node."""

    def __init__(
        self,
        address: str,
        planes: int,
        size: int,
        actions: int,
        capacity: int,
        *,
        stop: Callable[[], bool] | None = None,
        name: str = "self-play",
    ) -> None:
        """`capacity`: the most rows one `evaluate` sends at once (more are sent in parts);
        `stop`: while waiting for a server, `evaluate` raises `ServerStopped` once it is True.
        Connects on the first `evaluate`."""
        if not 1 <= capacity <= MAX_CLIENT_ROWS:
            raise ValueError(f"capacity must be 1 to {MAX_CLIENT_ROWS}, got {capacity}")
        if not hasattr(os, "memfd_create"):
            raise RuntimeError(
                "the inference server needs Linux (memfd_create, abstract Unix sockets); "
                "set selfplay.inference_server.enabled=false"
            )
        self.address, self.name = address, name
        self.planes, self.size, self.num_actions = planes, size, actions
        self.layout = Layout(capacity, planes, size, actions)
        self._fd = os.memfd_create(f"checkerzero-leaves-{os.getpid()}", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, self.layout.nbytes)
        self._buf = mmap.mmap(self._fd, self.layout.nbytes)
        self._planes, self._mask, self._priors, self._wdl = self.layout.views(self._buf)
        self._stop = stop or (lambda: False)
        self._sock: socket.socket | None = None
        self._max_rows = capacity
        self._seq = 0
        self._inbox = b""  # bytes of a reply read so far
        self.version = -1  # weights version of the latest answer
        self.reconnects = 0  # times the server was lost and found again

    def _connect(self, lost: bool) -> None:
        """Connects (again), waiting for the server as long as it takes or until stopped."""
        t0 = time.monotonic()
        said = t0 if lost else t0 - WAITING_LOG_S + 5.0  # a first connect says so after 5 s
        while True:
            if self._stop():
                raise ServerStopped(f"stopped while waiting for inference server {self.address}")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect("\0" + self.address)
                hello = HELLO.pack(
                    b"CZIS", PROTOCOL, self.planes, self.size, self.num_actions,
                    self.layout.capacity,
                )  # fmt: skip
                sock.settimeout(HANDSHAKE_TIMEOUT_S)
                socket.send_fds(sock, [hello], [self._fd])
                welcome = recv_exact(sock, WELCOME.size)
                magic, max_rows, _ = WELCOME.unpack(welcome)
                if magic == b"CZNO":
                    reason = recv_exact(sock, REFUSAL_BYTES).rstrip(b"\0").decode()
                    sock.close()
                    raise ValueError(f"inference server {self.address} refused us: {reason}")
                sock.settimeout(POLL_S)
                self._sock, self._max_rows = sock, max_rows
                if lost:
                    self.reconnects += 1
                    logger.warning(
                        "%s: inference server %s is back after %.1f s; the games go on",
                        self.name,
                        self.address,
                        time.monotonic() - t0,
                    )
                return
            except (OSError, EOFError):
                sock.close()
            now = time.monotonic()
            if now - said >= WAITING_LOG_S:
                said = now
                logger.warning(
                    "%s: still waiting for inference server %s (%.0f s)",
                    self.name,
                    self.address,
                    now - t0,
                )
            time.sleep(0.1)

    def _lost(self, why: str) -> None:
        logger.warning(
            "%s: lost inference server %s (%s); waiting for it to come back, games in "
            "progress are kept",
            self.name,
            self.address,
            why,
        )
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._connect(lost=True)

    def _round_trip(self, rows: int) -> None:
        """One request of the rows in the buffer, repeated after a reconnect until answered."""
        while True:
            if self._sock is None:
                self._connect(lost=False)
            if rows > self._max_rows:  # a server with a smaller max_batch than before
                raise ValueError(f"a part of {rows} rows exceeds the server's {self._max_rows}")
            self._seq = (self._seq + 1) & 0xFFFFFFFF
            try:
                self._sock.sendall(REQUEST.pack(self._seq, rows))
                self._inbox = b""
                waited = 0.0
                while len(self._inbox) < REPLY.size:
                    try:
                        chunk = self._sock.recv(REPLY.size - len(self._inbox))
                        if not chunk:
                            raise EOFError("the server closed the connection")
                        self._inbox += chunk
                    except TimeoutError:
                        if self._stop():
                            raise ServerStopped("stopped while waiting for an answer") from None
                        waited += POLL_S
                        if waited >= WAITING_LOG_S and waited % WAITING_LOG_S < POLL_S:
                            logger.warning(
                                "%s: no answer from inference server %s for %.0f s",
                                self.name,
                                self.address,
                                waited,
                            )
            except (OSError, EOFError) as err:
                self._lost(str(err) or type(err).__name__)
                continue
            seq, got, version = REPLY.unpack(self._inbox)
            if seq != self._seq or got != rows:
                self._lost(f"answer {seq}/{got} to request {self._seq}/{rows}")
                continue
            self.version = version
            return

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        expected = (self.planes, self.size, self.size)
        if not isinstance(planes, np.ndarray) or planes.ndim != 4 or planes.shape[1:] != expected:
            raise ValueError(
                f"planes must be (N, {', '.join(map(str, expected))}), "
                f"got {getattr(planes, 'shape', type(planes))}"
            )
        check_mask(mask, self.num_actions)
        n = len(planes)
        if n != len(mask):
            raise ValueError(f"planes has {n} rows but mask has {len(mask)}")
        priors = np.empty((n, self.num_actions), np.float32)
        wdl = np.empty((n, NUM_WDL), np.float32)
        start = 0
        while start < n:
            part = min(n - start, self._max_rows, self.layout.capacity)
            np.copyto(self._planes[:part], planes[start : start + part], casting="same_kind")
            np.copyto(self._mask[:part], mask[start : start + part])
            self._round_trip(part)
            priors[start : start + part] = self._priors[:part]
            wdl[start : start + part] = self._wdl[:part]
            start += part
        return priors, wdl

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._planes = self._mask = self._priors = self._wdl = None  # release the views
        with contextlib.suppress(BufferError):
            self._buf.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)
