"""Who a request comes from, for the per-client bounds (``ClientLimit`` here, ``play.slots``).

A remote client is its address. Clients on this machine all share a loopback address, and a
peer port names one connection, not a client (a program that opens 300 connections would be
300 clients, and the per-client bounds would bound nothing). So a local client is the user
that owns its socket, as the kernel's socket table says (``/proc/net/tcp`` and ``tcp6``, Linux):
one user's programs are one client, another user's are another, and no one can pass for
another user. Where the table cannot be read, every local client is one.

Behind a reverse proxy every request comes from the proxy, which is then one client: bounds
per user are the proxy's to enforce. Forwarded-for headers are not read, since any client can
write them.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import sys
from typing import Any

logger = logging.getLogger(__name__)

SCOPE_KEY = "play.client"  # where ClientLimit leaves the client's name in the ASGI scope
SOCKET_TABLES = {4: "/proc/net/tcp", 6: "/proc/net/tcp6"}
MAX_TABLE_BYTES = 64 << 20  # the socket table of a machine with ~400,000 TCP sockets


def _proc_hex(host: str, port: int) -> tuple[str, int]:
    """``host:port`` as the kernel's socket table writes it, and the table's IP version."""
    addr = ipaddress.ip_address(host)
    packed = socket.inet_pton(socket.AF_INET if addr.version == 4 else socket.AF_INET6, host)
    words = [packed[i : i + 4] for i in range(0, len(packed), 4)]
    text = "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words)
    return f"{text}:{port:04X}", addr.version


def socket_owner(peer: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The user id owning the local socket at ``peer`` connected to ``server``; None when the
    table has no such socket or cannot be read."""
    try:
        local, version = _proc_hex(*peer)
        remote, _ = _proc_hex(*server)
        with open(SOCKET_TABLES[version], "rb") as f:  # procfs: a regular, bounded table
            table = f.read(MAX_TABLE_BYTES)
    except (OSError, ValueError):
        return None
    needle = f" {local} {remote} ".encode()
    at = table.find(needle)
    if at < 0:
        return None
    fields = table[at : table.find(b"\n", at)].split()
    # local, remote, state, queues, timer, retransmits, uid
    try:
        return int(fields[6])
    except (IndexError, ValueError):
        return None


def client_of(scope: dict[str, Any]) -> str:
    """The client a request comes from: its address, or for a local one ``uid N@address``."""
    client, server = scope.get("client"), scope.get("server")
    if not client:
        return ""
    host = str(client[0])
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host
    if local and server and isinstance(client[1], int) and isinstance(server[1], int):
        uid = socket_owner((host, client[1]), (str(server[0]), server[1]))
        if uid is not None:
            return f"uid {uid}@{host}"
    return host


class ClientLimit:
    """ASGI middleware: at most ``limit`` requests of one client inside the server at once
    (``limits.max_requests_per_client``), any route; the next gets 429 at once. It names the
    client (``client_of``) in the scope for the routes (``SCOPE_KEY``)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.inside: dict[str, int] = {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = client_of(scope)
        scope[SCOPE_KEY] = client
        if self.inside.get(client, 0) >= self.limit:
            body = json.dumps(
                {
                    "detail": f"{self.limit} requests of this client are already being answered "
                    "(limits.max_requests_per_client); try again when one is"
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 429,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"1"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        self.inside[client] = self.inside.get(client, 0) + 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.inside[client] -= 1
            if not self.inside[client]:
                del self.inside[client]


__all__ = ["SCOPE_KEY", "ClientLimit", "client_of", "socket_owner"]
