"""One inference server per GPU: the leaves of every self-play process on a node in large batches.

A self-play process that holds its own network runs it on batches of its own leaves (a few
hundred); a GPU needs thousands to run near its speed, and a process per share of the card pays
the host's per-batch work (encoding, copies, launches) once per small batch. The server holds
the network once per GPU and its clients, the search processes of the node, send it whole
batches of leaves:

- Transport: one socket and one shared-memory buffer per client (`server_protocol` holds the
  wire format). No leaf crosses a pipe or a pickle. On CUDA the server page-locks each
  client's buffer (``cudaHostRegister``), so a batch travels to the device and back by one DMA
  per client each way with no copy on the host; where CUDA refuses, and on CPU, the server
  copies each request into its own (pinned) batch buffer and the answers back.
- Batching: a request is a client's whole batch. A worker takes the waiting requests once they
  are a ``1 / pipeline`` share of the connected clients, or ``max_batch`` rows, or the oldest has
  waited ``max_wait_ms``; so with two workers half the clients are searching while the other half
  are on the device, and no batch ever waits for one client (a dead or slow one costs at most
  ``max_wait_ms``).
- ``pipeline`` workers (default 2), each with its own copy of the network, its own CUDA stream,
  its own pinned buffers and its own CUDA graphs: while one batch runs on the device the next is
  assembled, so the device does not wait on the host.
- On CUDA, with ``capture``: every batch is padded to the next of a few fixed sizes (powers of
  two up to ``max_batch``) whose forward pass (bf16 autocast, channels_last, masked softmax) was
  captured once as a CUDA graph: one launch a batch whatever the network's depth. On CPU the
  network runs as ``NetworkInference`` runs it, unpadded.
- Weights: ``load_weights(model, version)`` hands a new version to the workers; each copies it
  into its own network before its next batch, so a swap never pauses the others and no batch
  mixes two versions. Replies carry the version that computed them.

`checkerzero.inference_server.client.RemoteInference` is the client, a ``game.mcts.Inference``: a
search
calls ``evaluate`` as it would call a ``NetworkInference``. When the server goes away (its process
died), the client logs one line, waits for the server to come back (Ray restarts it) and sends the
same batch again: the games in progress go on where they were. `actors/inference_server.py` places
a server with each GPU and feeds it the weights channel. The clients, requests and batch workers
are in `checkerzero.inference_server.batching`, the wire format in `server_protocol`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import mmap
import os
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from checkerzero.inference_server.batching import BatchWorker, Client, Request
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
)
from checkerzero.network.inference import compute_dtype, preferred_memory_format, select_device
from checkerzero.network.model import CheckersNet

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerSettings:
    """The batching knobs (`selfplay.inference_server` in conf/selfplay/default.yaml)."""

    max_batch: int = 4096
    max_wait_ms: float = 2.0
    pipeline: int = 2
    capture: bool = True

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError(f"inference_server.max_batch must be >= 1, got {self.max_batch}")
        if self.max_wait_ms < 0:
            raise ValueError(f"inference_server.max_wait_ms must be >= 0, got {self.max_wait_ms}")
        if self.pipeline < 1:
            raise ValueError(f"inference_server.pipeline must be >= 1, got {self.pipeline}")

    @classmethod
    def from_config(cls, section: Any) -> ServerSettings:
        return cls(
            max_batch=int(section["max_batch"]),
            max_wait_ms=float(section["max_wait_ms"]),
            pipeline=int(section["pipeline"]),
            capture=bool(section["capture"]),
        )


class InferenceServer:
    """The server: a listening socket, an I/O thread and `pipeline` batch workers."""

    def __init__(
        self,
        address: str,
        planes: int,
        size: int,
        actions: int,
        settings: ServerSettings | None = None,
        *,
        device: str | torch.device = "auto",
        precision: str = "auto",
    ) -> None:
        """Listens on the abstract Unix address `address`; computes nothing until the first
        `load_weights` (requests wait for it). `planes`, `size`, `actions`: the game's input
        planes, board side and action count, which every client must match."""
        self.address = address
        self.planes, self.size, self.actions = planes, size, actions
        self.settings = settings or ServerSettings()
        self.device = select_device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = compute_dtype(precision, self.device)
        self.memory_format = preferred_memory_format(self.device)
        self.stopping = False
        self._model: CheckersNet | None = None
        self._version = -1
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._pending: collections.deque[Request] = collections.deque()
        self._in_flight = 0  # requests taken by a worker and not yet answered
        self._clients: dict[int, Client] = {}
        self._closing: list[Client] = []
        self.capture_lock = threading.Lock()  # one worker captures its CUDA graphs at a time
        self._next_id = 0
        self._stats = collections.Counter()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind("\0" + address)
        except OSError as err:
            self._listener.close()
            raise RuntimeError(f"inference server address {address!r} is taken ({err})") from err
        self._listener.listen(256)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._workers = [BatchWorker(self, i) for i in range(self.settings.pipeline)]
        self._io = threading.Thread(target=self._io_loop, name="inference-io", daemon=True)
        self._io.start()
        for w in self._workers:
            w.thread.start()
        logger.info(
            "inference server at %s on %s (%s), batches up to %d, %d in flight, capture %s",
            address,
            self.device,
            self.dtype,
            self.settings.max_batch,
            self.settings.pipeline,
            self.settings.capture and self.device.type == "cuda",
        )

    # -- weights -----------------------------------------------------------------------------

    def load_weights(self, model: CheckersNet, version: int) -> None:
        """Makes `model` (a CPU copy the server keeps) the weights of every batch from now on;
        each worker takes it before its next batch. ValueError when it plays another game."""
        cfg = model.config
        if (cfg.in_planes, cfg.board_size, cfg.num_actions) != (
            self.planes,
            self.size,
            self.actions,
        ):
            raise ValueError(
                f"weights v{version} take {cfg.in_planes} planes of {cfg.board_size}x"
                f"{cfg.board_size} with {cfg.num_actions} actions; this server serves "
                f"{self.planes} of {self.size}x{self.size} with {self.actions}"
            )
        with self._cv:
            self._model, self._version = model, version
            self._cv.notify_all()

    def weights(self) -> tuple[CheckersNet | None, int]:
        with self._lock:
            return self._model, self._version

    @property
    def version(self) -> int:
        return self._version

    # -- batches -----------------------------------------------------------------------------

    def next_batch(self) -> list[Request]:
        """Waits for a batch worth taking (module docstring); [] to look at the stop flag."""
        s = self.settings
        with self._cv:
            if not self._pending or self._model is None:
                self._cv.wait(POLL_S)
                return []
            # A share of the clients, but no more than those not waiting on a batch already.
            clients = len(self._clients)
            target = max(1, min(math.ceil(clients / s.pipeline), clients - self._in_flight))
            rows = sum(r.rows for r in self._pending)
            wait = self._pending[0].t + s.max_wait_ms / 1000 - time.monotonic()
            if len(self._pending) < target and rows < s.max_batch and wait > 0:
                self._cv.wait(wait)
                return []
            batch: list[Request] = []
            total = 0
            while self._pending and total + self._pending[0].rows <= s.max_batch:
                req = self._pending.popleft()
                if req.client.alive:
                    batch.append(req)
                    total += req.rows
            self._in_flight += len(batch)
            return batch

    def done(self, batch: list[Request]) -> None:
        """A worker has answered (or dropped) `batch`."""
        with self._cv:
            self._in_flight -= len(batch)
            self._cv.notify_all()

    def count(self, requests: int, rows: int, host_in: float, device: float, host_out: float):
        with self._lock:
            st = self._stats
            st["batches"] += 1
            st["requests"] += requests
            st["rows"] += rows
            st["max_rows"] = max(st["max_rows"], rows)
            st["host_in_us"] += int(host_in * 1e6)
            st["device_us"] += int(device * 1e6)
            st["host_out_us"] += int(host_out * 1e6)

    def stats(self) -> dict[str, int]:
        """Counters since start: batches, requests, rows (leaves), max_rows, clients (and of
        them page_locked: copied to and from the device straight from their buffers), version,
        and the microseconds spent assembling, on the device and scattering."""
        with self._lock:
            return {
                **self._stats,
                "clients": len(self._clients),
                "page_locked": sum(1 for c in self._clients.values() if c.registered),
                "version": self._version,
            }

    def reply(self, client: Client, seq: int, rows: int, version: int) -> None:
        try:
            with client.send_lock:
                client.sock.sendall(REPLY.pack(seq, rows, version))
        except OSError:
            self.drop(client, "its socket closed")

    # -- connections -------------------------------------------------------------------------

    def drop(self, client: Client, why: str) -> None:
        """Forgets a client; its socket is closed by the I/O thread (the selector's owner)."""
        with self._cv:
            if self._clients.pop(client.id, None) is None:
                return
            client.alive = False
            self._closing.append(client)
            self._cv.notify_all()  # fewer clients: a smaller share makes a batch
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        logger.info("inference client %d gone (%s)", client.id, why)

    def _close_dropped(self) -> None:
        with self._lock:
            closing, self._closing = self._closing, []
        for client in closing:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(client.sock)
            client.close()

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except BlockingIOError:
            return
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            msg, fds, _, _ = socket.recv_fds(sock, HELLO.size, 1)
            if len(msg) != HELLO.size or len(fds) != 1:
                raise ValueError("a hello without its buffer")
            fd = fds[0]
            try:
                magic, protocol, planes, size, actions, capacity = HELLO.unpack(msg)
                if magic != b"CZIS" or protocol != PROTOCOL:
                    raise ValueError(f"protocol {protocol}, this server speaks {PROTOCOL}")
                if (planes, size, actions) != (self.planes, self.size, self.actions):
                    raise ValueError(
                        f"client sends {planes} planes of {size}x{size} with {actions} actions, "
                        f"this server takes {self.planes} of {self.size}x{self.size} with "
                        f"{self.actions}"
                    )
                if not 1 <= capacity <= MAX_CLIENT_ROWS:
                    raise ValueError(f"buffer of {capacity} rows (1 to {MAX_CLIENT_ROWS})")
                layout = Layout(capacity, planes, size, actions)
                if os.fstat(fd).st_size < layout.nbytes:
                    raise ValueError("shared buffer smaller than its layout")
                buf = mmap.mmap(fd, layout.nbytes)
            finally:
                os.close(fd)
            client = Client(sock, buf, layout, -1)
        except (OSError, ValueError, struct.error) as err:
            logger.warning("inference server refused a client: %s", err)
            with contextlib.suppress(OSError):
                reason = str(err).encode()[:REFUSAL_BYTES].ljust(REFUSAL_BYTES, b"\0")
                sock.sendall(WELCOME.pack(b"CZNO", 0, -1) + reason)
            sock.close()
            return
        with self._cv:
            cid = self._next_id
            self._next_id += 1
            client.id = cid
            max_rows = min(capacity, self.settings.max_batch)
            version = self._version
        if self.device.type == "cuda":
            client.page_lock()
        with self._cv:
            self._clients[cid] = client
        sock.settimeout(None)
        sock.sendall(WELCOME.pack(b"CZOK", max_rows, version))
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_READ, client)
        logger.info("inference client %d connected (%d rows)", cid, capacity)

    def _read(self, client: Client) -> None:
        try:
            data = client.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError as err:
            self.drop(client, str(err))
            return
        if not data:
            self.drop(client, "it closed its socket")
            return
        client.inbox += data
        now = time.monotonic()
        with self._cv:
            while len(client.inbox) >= REQUEST.size:
                seq, rows = REQUEST.unpack_from(client.inbox)
                del client.inbox[: REQUEST.size]
                if not 1 <= rows <= min(client.layout.capacity, self.settings.max_batch):
                    break
                self._pending.append(Request(client, seq, rows, now))
            else:
                self._cv.notify_all()
                return
        self.drop(client, f"a request of {rows} rows")

    def _io_loop(self) -> None:
        while not self.stopping:
            for key, _ in self._selector.select(POLL_S):
                if key.fileobj is self._listener:
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(64)
                else:
                    self._read(key.data)
            self._close_dropped()

    def close(self) -> None:
        """Stops the threads and drops every client (they wait for a server to come back)."""
        self.stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        with self._cv:
            self._cv.notify_all()
        self._io.join(timeout=5)
        for w in self._workers:
            w.thread.join(timeout=5)
        for client in list(self._clients.values()):
            self.drop(client, "the server stopped")
        self._close_dropped()
        self._selector.close()
        for s in (self._listener, self._wake_r, self._wake_w):
            s.close()
