"""The inference server's batch side: a connected client, a request, and the batch workers.

`Client` is one connected search process (its socket and shared buffer, page-locked on CUDA);
`Request` one batch it asked for; `BatchWorker` one of the server's ``pipeline`` workers, each
with its own copy of the network, CUDA stream, pinned buffers and CUDA graphs (one per size of
`buckets`). A worker sees its server only as a `BatchHost` (what it needs of it);
`checkerzero.inference_server.server.InferenceServer` is that host, and this module does not
import it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import mmap
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from checkerzero.inference_server.protocol import Layout
from checkerzero.network.model import CheckersNet
from game.encoding import NUM_WDL

logger = logging.getLogger(__name__)

SMALLEST_BUCKET = 64  # smallest captured batch size; below it padding costs nothing that matters
_CUDA_HOST_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable: page-locked for every CUDA context


def buckets(max_batch: int) -> list[int]:
    """The fixed batch sizes captured on CUDA: powers of two from SMALLEST_BUCKET, and max_batch."""
    sizes = []
    b = SMALLEST_BUCKET
    while b < max_batch:
        sizes.append(b)
        b *= 2
    return [*sizes, max_batch]


class Client:
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
class Request:
    client: Client
    seq: int
    rows: int
    t: float


class BatchHost(Protocol):
    """What a batch worker needs of the server that owns it: the settings and shapes of its
    batches, the newest weights, the queue of requests, and where answers and counts go."""

    settings: Any  # checkerzero.inference_server.server.ServerSettings
    device: torch.device
    dtype: torch.dtype
    memory_format: torch.memory_format
    capture_lock: threading.Lock
    planes: int
    size: int
    actions: int
    stopping: bool

    def weights(self) -> tuple[CheckersNet | None, int]: ...

    def next_batch(self) -> list[Request]: ...

    def done(self, batch: list[Request]) -> None: ...

    def count(self, requests: int, rows: int, host_in: float, device: float, host_out: float): ...

    def reply(self, client: Client, seq: int, rows: int, version: int) -> None: ...

    def drop(self, client: Client, why: str) -> None: ...


class BatchWorker:
    """One of the `pipeline` batch workers: its own network, stream, buffers and graphs."""

    def __init__(self, server: BatchHost, index: int) -> None:
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

    def _serve_direct(self, batch: list[Request]) -> None:
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

    def _serve(self, batch: list[Request]) -> None:
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
