"""One inference server per GPU: the leaves of every self-play process on a node in large batches.

A self-play process that holds its own network runs it on batches of its own leaves (a few
hundred); a GPU needs thousands to run near its speed, and a process per share of the card pays
the host's per-batch work (encoding, copies, launches) once per small batch. The server holds
the network once per GPU and its clients, the search processes of the node, send it whole
batches of leaves:

- Transport: one Unix-domain socket per client (Linux abstract address, so nothing to clean up
  on disk) for an 8-byte request and a 16-byte reply per batch, and one shared-memory buffer per
  client (a ``memfd`` the client creates and hands over the socket) holding its planes, masks,
  priors and WDL. No leaf crosses a pipe or a pickle. On CUDA the server page-locks each
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
  network runs as ``NetworkEvaluator`` runs it, unpadded.
- Weights: ``load_weights(model, version)`` hands a new version to the workers; each copies it
  into its own network before its next batch, so a swap never pauses the others and no batch
  mixes two versions. Replies carry the version that computed them.

`RemoteEvaluator` is the client, a ``game.mcts.Evaluator``: a search calls ``evaluate`` as it
would call a ``NetworkEvaluator``. When the server goes away (its process died), the client logs
one line, waits for the server to come back (Ray restarts it) and sends the same batch again:
the games in progress go on where they were. `actors/inference_server.py` places a server with
each GPU and feeds it the weights channel.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import logging
import math
import mmap
import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from checkerzero.network.inference import compute_dtype, preferred_memory_format, select_device
from checkerzero.network.model import CheckersNet
from game.encoding import NUM_WDL
from game.mcts import check_mask

logger = logging.getLogger(__name__)

PROTOCOL = 1  # version of the messages below; a client of another version is refused
_HELLO = struct.Struct("<4sIIIII")  # b"CZIS", protocol, planes, board size, actions, capacity
_WELCOME = struct.Struct("<4sIq")  # b"CZOK" (or b"CZNO" + a reason), max rows a request, version
_REFUSAL_BYTES = 300  # the reason that follows b"CZNO", UTF-8, zero padded
_REQUEST = struct.Struct("<II")  # sequence number, rows
_REPLY = struct.Struct("<IIq")  # sequence number, rows, weights version that computed them
_ALIGN = 64  # byte alignment of each array in a client's buffer (a cache line)
MAX_CLIENT_ROWS = 1 << 16  # most rows a client's buffer may hold (a sanity bound: 64 k leaves)
HANDSHAKE_TIMEOUT_S = 5.0  # a client that connects and says nothing for this long is dropped
POLL_S = 0.25  # how often blocked threads look at the stop flag
WAITING_LOG_S = 30.0  # a client still waiting for its server says so this often
SMALLEST_BUCKET = 64  # smallest captured batch size; below it padding costs nothing that matters
_CUDA_HOST_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable: page-locked for every CUDA context


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


def buckets(max_batch: int) -> list[int]:
    """The fixed batch sizes captured on CUDA: powers of two from SMALLEST_BUCKET, and max_batch."""
    sizes = []
    b = SMALLEST_BUCKET
    while b < max_batch:
        sizes.append(b)
        b *= 2
    return [*sizes, max_batch]


class Layout:
    """Where a client's arrays sit in its shared buffer: planes, mask, priors, WDL."""

    def __init__(self, capacity: int, planes: int, size: int, actions: int) -> None:
        self.capacity, self.planes, self.size, self.actions = capacity, planes, size, actions
        shapes = [
            ((capacity, planes, size, size), np.float32),
            ((capacity, actions), np.bool_),
            ((capacity, actions), np.float32),
            ((capacity, NUM_WDL), np.float32),
        ]
        self._fields = []
        offset = 0
        for shape, dtype in shapes:
            self._fields.append((offset, shape, dtype))
            nbytes = math.prod(shape) * np.dtype(dtype).itemsize
            offset += -(-nbytes // _ALIGN) * _ALIGN
        self.nbytes = max(offset, _ALIGN)

    def views(self, buf: mmap.mmap) -> tuple[np.ndarray, ...]:
        """(planes, mask, priors, wdl) over `buf`."""
        return tuple(
            np.ndarray(shape, dtype, buffer=buf, offset=offset)
            for offset, shape, dtype in self._fields
        )


class ServerStopped(RuntimeError):
    """The client was asked to stop while it waited for its server."""


# ----------------------------------------------------------------------------------------------
# Server
# ----------------------------------------------------------------------------------------------


class _Client:
    """One connected search process: its socket, its shared buffer, what it has asked for."""

    def __init__(self, sock: socket.socket, buf: mmap.mmap, layout: Layout, cid: int) -> None:
        self.sock, self.buf, self.layout, self.id = sock, buf, layout, cid
        self.planes, self.mask, self.priors, self.wdl = layout.views(buf)
        self.inbox = bytearray()
        self.alive = True
        self.send_lock = threading.Lock()
        self.registered = 0  # the buffer's address once page-locked for CUDA (0: not)
        self.tensors: tuple[torch.Tensor, ...] = ()

    def page_lock(self) -> bool:
        """Registers the buffer with CUDA (page-locked), so batches are copied to and from the
        device straight from it by DMA, with no copy on the host; False where CUDA refuses."""
        cudart = torch.cuda.cudart()
        address = np.frombuffer(self.buf, np.uint8).ctypes.data
        err = cudart.cudaHostRegister(address, self.layout.nbytes, _CUDA_HOST_REGISTER_PORTABLE)
        if err != cudart.cudaError.success:
            logger.warning(
                "inference client %d: CUDA would not page-lock its buffer (%s); its batches "
                "go through the server's pinned buffers",
                self.id,
                err,
            )
            return False
        self.registered = address
        self.tensors = tuple(torch.from_numpy(v) for v in (self.planes, self.mask, self.priors,
                                                            self.wdl))  # fmt: skip
        return True

    def __del__(self) -> None:
        if self.registered:  # no batch holds the client any more: no copy is in flight
            with contextlib.suppress(Exception):
                torch.cuda.cudart().cudaHostUnregister(self.registered)

    def close(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):
            self.sock.close()
        # The buffer stays mapped until the last view of it is gone (a worker may hold one).


@dataclass
class _Request:
    client: _Client
    seq: int
    rows: int
    t: float


class _Worker:
    """One of the `pipeline` batch workers: its own network, stream, buffers and graphs."""

    def __init__(self, server: InferenceServer, index: int) -> None:
        self.server, self.index = server, index
        self.model: CheckersNet | None = None
        self.version = -1
        self.cuda = server.device.type == "cuda"
        self.stream = torch.cuda.Stream(server.device) if self.cuda else None
        n, p, s, a = server.settings.max_batch, server.planes, server.size, server.actions
        self.in_planes = torch.zeros((n, p, s, s), dtype=torch.float32, pin_memory=self.cuda)
        self.in_mask = torch.ones((n, a), dtype=torch.bool, pin_memory=self.cuda)
        self.out_priors = torch.zeros((n, a), dtype=torch.float32, pin_memory=self.cuda)
        self.out_wdl = torch.zeros((n, NUM_WDL), dtype=torch.float32, pin_memory=self.cuda)
        self.np = [t.numpy() for t in (self.in_planes, self.in_mask, self.out_priors, self.out_wdl)]
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        if self.cuda:
            dev = server.device
            self.d_planes = torch.zeros((n, p, s, s), dtype=torch.float32, device=dev)
            self.d_mask = torch.ones((n, a), dtype=torch.bool, device=dev)
            self.d_priors = torch.zeros((n, a), dtype=torch.float32, device=dev)
            self.d_wdl = torch.zeros((n, NUM_WDL), dtype=torch.float32, device=dev)
        self.thread = threading.Thread(
            target=self._loop, name=f"inference-worker-{index}", daemon=True
        )

    # -- the network -------------------------------------------------------------------------

    def _forward(self, planes: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        srv = self.server
        x = planes.contiguous(memory_format=srv.memory_format)
        with torch.autocast(
            device_type=srv.device.type,
            dtype=srv.dtype,
            enabled=srv.dtype != torch.float32,
            cache_enabled=False,  # required inside CUDA graph capture; costs nothing here
        ):
            assert self.model is not None
            logits, wdl_logits = self.model(x)
        priors = torch.softmax(logits.float().masked_fill(~mask, float("-inf")), dim=-1)
        return priors, torch.softmax(wdl_logits.float(), dim=-1)

    def _take_weights(self) -> None:
        """Copies the server's newest weights into this worker's network, if it is behind."""
        model, version = self.server.weights()
        if model is None or version == self.version:
            return
        with torch.inference_mode(), self._on_stream():
            if self.model is None or self.model.config != model.config:
                self.model = (
                    copy.deepcopy(model)
                    .to(self.server.device, memory_format=self.server.memory_format)
                    .eval()
                )
                self.graphs = {}
                if self.cuda and self.server.settings.capture:
                    with self.server.capture_lock:
                        self._capture()
            else:
                self.model.load_state_dict(model.state_dict(), strict=True)
        self.version = version
        logger.debug("inference worker %d now computes with weights v%d", self.index, version)

    def _on_stream(self):
        return torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext()

    def _capture(self) -> None:
        """One CUDA graph per fixed batch size, largest first (they share one memory pool)."""
        pool = None
        for b in sorted(buckets(self.server.settings.max_batch), reverse=True):
            for _ in range(3):  # warm-up on this stream: cuDNN picks its algorithms here
                self._eager(b)
            self.stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(
                graph, stream=self.stream, pool=pool, capture_error_mode="thread_local"
            ):
                self._eager(b)
            pool = graph.pool()
            self.graphs[b] = graph
        self.stream.synchronize()
        logger.info("inference worker %d captured batch sizes %s", self.index, sorted(self.graphs))

    def _eager(self, b: int) -> None:
        """The whole device part of a batch of `b` rows, static tensors in and out."""
        priors, wdl = self._forward(self.d_planes[:b], self.d_mask[:b])
        self.d_priors[:b].copy_(priors)
        self.d_wdl[:b].copy_(wdl)

    def run_batch(self, rows: int) -> None:
        """The network on the first `rows` rows of the input buffers, into the output buffers."""
        with torch.inference_mode():
            if not self.cuda:
                priors, wdl = self._forward(self.in_planes[:rows], self.in_mask[:rows])
                self.out_priors[:rows].copy_(priors)
                self.out_wdl[:rows].copy_(wdl)
                return
            b = next((b for b in sorted(self.graphs) if b >= rows), rows)
            with torch.cuda.stream(self.stream):
                self.d_planes[:b].copy_(self.in_planes[:b], non_blocking=True)
                self.d_mask[:b].copy_(self.in_mask[:b], non_blocking=True)
                if b in self.graphs:
                    self.graphs[b].replay()
                else:
                    self._eager(b)
                self.out_priors[:rows].copy_(self.d_priors[:rows], non_blocking=True)
                self.out_wdl[:rows].copy_(self.d_wdl[:rows], non_blocking=True)
            self.stream.synchronize()  # releases the GIL: the other worker assembles meanwhile

    # -- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        srv = self.server
        while not srv.stopping:
            batch = srv.next_batch()
            if not batch:
                continue
            try:
                self._take_weights()
                self._serve(batch)
            except Exception:
                logger.exception(
                    "inference worker %d failed a batch; its clients retry", self.index
                )
                for req in batch:  # their clients reconnect and send the batch again
                    srv.drop(req.client, "a batch failed")
            finally:
                srv.done(batch)

    def _serve_direct(self, batch: list[_Request]) -> None:
        """On CUDA with every client's buffer page-locked: one DMA per request each way
        between its buffer and the device, no copy on the host."""
        t0 = time.perf_counter()
        rows = sum(r.rows for r in batch)
        b = next((b for b in sorted(self.graphs) if b >= rows), rows)
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            offset = 0
            for req in batch:
                n = req.rows
                planes, mask, _, _ = req.client.tensors
                self.d_planes[offset : offset + n].copy_(planes[:n], non_blocking=True)
                self.d_mask[offset : offset + n].copy_(mask[:n], non_blocking=True)
                offset += n
            if b > rows:  # padding rows: any legal mask keeps the softmax finite
                self.d_mask[rows:b].fill_(True)
            t1 = time.perf_counter()
            if b in self.graphs:
                self.graphs[b].replay()
            else:
                self._eager(b)
            offset = 0
            for req in batch:
                n = req.rows
                _, _, priors, wdl = req.client.tensors
                priors[:n].copy_(self.d_priors[offset : offset + n], non_blocking=True)
                wdl[:n].copy_(self.d_wdl[offset : offset + n], non_blocking=True)
                offset += n
        self.stream.synchronize()  # releases the GIL: the other worker assembles meanwhile
        t3 = time.perf_counter()
        self.server.count(len(batch), rows, t1 - t0, t3 - t1, 0.0)  # no host copy to count
        for req in batch:
            if req.client.alive:
                self.server.reply(req.client, req.seq, req.rows, self.version)

    def _serve(self, batch: list[_Request]) -> None:
        if self.cuda and all(req.client.registered for req in batch):
            self._serve_direct(batch)
            return
        in_planes, in_mask, out_priors, out_wdl = self.np
        t0 = time.perf_counter()
        offset = 0
        for req in batch:
            n = req.rows
            np.copyto(in_planes[offset : offset + n], req.client.planes[:n])
            np.copyto(in_mask[offset : offset + n], req.client.mask[:n])
            offset += n
        if self.cuda and self.graphs:  # padding rows: any legal mask keeps the softmax finite
            b = next((b for b in sorted(self.graphs) if b >= offset), offset)
            in_mask[offset:b] = True
        t1 = time.perf_counter()
        self.run_batch(offset)
        t2 = time.perf_counter()
        offset = 0
        for req in batch:
            n = req.rows
            if req.client.alive:
                np.copyto(req.client.priors[:n], out_priors[offset : offset + n])
                np.copyto(req.client.wdl[:n], out_wdl[offset : offset + n])
            offset += n
        self.server.count(len(batch), offset, t1 - t0, t2 - t1, time.perf_counter() - t2)
        for req in batch:  # counted first, so a client that has its answer sees it counted
            if req.client.alive:
                self.server.reply(req.client, req.seq, req.rows, self.version)


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
        self._pending: collections.deque[_Request] = collections.deque()
        self._in_flight = 0  # requests taken by a worker and not yet answered
        self._clients: dict[int, _Client] = {}
        self._closing: list[_Client] = []
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
        self._workers = [_Worker(self, i) for i in range(self.settings.pipeline)]
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

    def next_batch(self) -> list[_Request]:
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
            batch: list[_Request] = []
            total = 0
            while self._pending and total + self._pending[0].rows <= s.max_batch:
                req = self._pending.popleft()
                if req.client.alive:
                    batch.append(req)
                    total += req.rows
            self._in_flight += len(batch)
            return batch

    def done(self, batch: list[_Request]) -> None:
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

    def reply(self, client: _Client, seq: int, rows: int, version: int) -> None:
        try:
            with client.send_lock:
                client.sock.sendall(_REPLY.pack(seq, rows, version))
        except OSError:
            self.drop(client, "its socket closed")

    # -- connections -------------------------------------------------------------------------

    def drop(self, client: _Client, why: str) -> None:
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
            msg, fds, _, _ = socket.recv_fds(sock, _HELLO.size, 1)
            if len(msg) != _HELLO.size or len(fds) != 1:
                raise ValueError("a hello without its buffer")
            fd = fds[0]
            try:
                magic, protocol, planes, size, actions, capacity = _HELLO.unpack(msg)
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
            client = _Client(sock, buf, layout, -1)
        except (OSError, ValueError, struct.error) as err:
            logger.warning("inference server refused a client: %s", err)
            with contextlib.suppress(OSError):
                reason = str(err).encode()[:_REFUSAL_BYTES].ljust(_REFUSAL_BYTES, b"\0")
                sock.sendall(_WELCOME.pack(b"CZNO", 0, -1) + reason)
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
        sock.sendall(_WELCOME.pack(b"CZOK", max_rows, version))
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_READ, client)
        logger.info("inference client %d connected (%d rows)", cid, capacity)

    def _read(self, client: _Client) -> None:
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
            while len(client.inbox) >= _REQUEST.size:
                seq, rows = _REQUEST.unpack_from(client.inbox)
                del client.inbox[: _REQUEST.size]
                if not 1 <= rows <= min(client.layout.capacity, self.settings.max_batch):
                    break
                self._pending.append(_Request(client, seq, rows, now))
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


# ----------------------------------------------------------------------------------------------
# Client
# ----------------------------------------------------------------------------------------------


class RemoteEvaluator:
    """A ``game.mcts.Evaluator`` whose network runs in an `InferenceServer` on this node."""

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
                hello = _HELLO.pack(
                    b"CZIS", PROTOCOL, self.planes, self.size, self.num_actions,
                    self.layout.capacity,
                )  # fmt: skip
                sock.settimeout(HANDSHAKE_TIMEOUT_S)
                socket.send_fds(sock, [hello], [self._fd])
                welcome = _recv_exact(sock, _WELCOME.size)
                magic, max_rows, _ = _WELCOME.unpack(welcome)
                if magic == b"CZNO":
                    reason = _recv_exact(sock, _REFUSAL_BYTES).rstrip(b"\0").decode()
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
                self._sock.sendall(_REQUEST.pack(self._seq, rows))
                self._inbox = b""
                waited = 0.0
                while len(self._inbox) < _REPLY.size:
                    try:
                        chunk = self._sock.recv(_REPLY.size - len(self._inbox))
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
            seq, got, version = _REPLY.unpack(self._inbox)
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


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data
