"""The inference server's wire format, shared by the server and its clients.

One Unix-domain socket per client (Linux abstract address, so nothing to clean up on disk) for an
8-byte request and a 16-byte reply per batch, and one shared-memory buffer per client (a ``memfd``
the client creates and hands over the socket) holding its planes, masks, priors and WDL, laid out
by `Layout`. No leaf crosses a pipe or a pickle. The server is
`checkerzero.inference_server.server`, the
client `checkerzero.inference_server.client`.
"""

from __future__ import annotations

import math
import mmap
import socket
import struct

import numpy as np

from game.encoding import NUM_WDL

PROTOCOL = 1  # version of the messages below; a client of another version is refused
HELLO = struct.Struct("<4sIIIII")  # b"CZIS", protocol, planes, board size, actions, capacity
WELCOME = struct.Struct("<4sIq")  # b"CZOK" (or b"CZNO" + a reason), max rows a request, version
REFUSAL_BYTES = 300  # the reason that follows b"CZNO", UTF-8, zero padded
REQUEST = struct.Struct("<II")  # sequence number, rows
REPLY = struct.Struct("<IIq")  # sequence number, rows, weights version that computed them
ALIGN = 64  # byte alignment of each array in a client's buffer (a cache line)
MAX_CLIENT_ROWS = 1 << 16  # most rows a client's buffer may hold (a sanity bound: 64 k leaves)
HANDSHAKE_TIMEOUT_S = 5.0  # a client that connects and says nothing for this long is dropped
POLL_S = 0.25  # how often blocked threads look at the stop flag


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
            offset += -(-nbytes // ALIGN) * ALIGN
        self.nbytes = max(offset, ALIGN)

    def views(self, buf: mmap.mmap) -> tuple[np.ndarray, ...]:
        """(planes, mask, priors, wdl) over `buf`."""
        return tuple(
            np.ndarray(shape, dtype, buffer=buf, offset=offset)
            for offset, shape, dtype in self._fields
        )


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from `sock`; EOFError when the other end closes first."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data
