"""Bounds on the server's connections: how many, how long a request may take to arrive, and how
much of a body is held.

uvicorn gives some of this and not the rest. It closes an idle kept-alive connection after
``timeout_keep_alive`` and caps the header block (h11's ``max_incomplete_event_size``), but it
has no deadline for a request that is being sent slowly (a connection that sends half its
headers, or half its body, stays open for ever), and its ``limit_concurrency`` answers 503 only
once a whole request has arrived, leaving every connection it counts open. So:

- ``BoundedH11Protocol`` (uvicorn's h11 protocol, ``make_protocol``): a new connection beyond
  ``limits.max_connections_per_client`` of its client (``play.clients``), or beyond
  ``limits.max_connections`` in all, is answered 503 and closed at once (so one client's flood
  of connections leaves room for the others); a request's headers must have
  arrived ``limits.header_timeout_s`` after the connection opened (or the previous answer was
  sent), its body ``limits.body_timeout_s`` after its headers, else the connection is closed.
  While a route works the connection has no read deadline (``limits.max_request_s`` bounds
  the work).
- ``BodyLimit`` (ASGI middleware): a body over ``limits.max_request_bytes`` is refused with
  413 as soon as its declared length or the bytes streamed so far pass the cap; nothing is
  buffered here (uvicorn holds at most 64 KiB of a body the application has not read yet, and
  stops reading the socket beyond that).
- ``release_memory``: the C allocator keeps the freed blocks of a burst of large bodies (RSS
  stayed at the burst's peak); a second after a request with a large body is done, or after a
  connection that carried one closes, the server hands the free memory back to the system (at
  most once a second).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from play.clients import client_of

logger = logging.getLogger(__name__)


def _refusal(status: int, reason: str, detail: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection (written before any request)."""
    body = json.dumps({"detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\nretry-after: 1\r\n\r\n"
    )
    return head.encode("latin-1") + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection cap and read deadlines (module docstring).
    The bounds are class attributes, set by ``make_protocol``."""

    max_connections = 0
    max_per_client = 0
    per_client: ClassVar[dict[str, int]] = {}  # open connections by client, one per class
    header_timeout_s = 0.0
    body_timeout_s = 0.0
    on_large_close: Any = None  # called a second after a connection that read much closes
    _received = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase = ""
        self._client = client_of({"client": self.client, "server": self.server})
        held = self.per_client.get(self._client, 0)
        self.per_client[self._client] = held + 1
        if held >= self.max_per_client:
            self._refuse(
                f"this client has {held} connections open (limits.max_connections_per_client)"
            )
        elif len(self.connections) > self.max_connections:
            self._refuse(
                f"the server has {self.max_connections} connections open (limits.max_connections)"
            )
        else:
            self._track()

    def _refuse(self, why: str) -> None:
        logger.warning("connection from %s refused: %s", self._client, why)
        self.transport.write(_refusal(503, "Service Unavailable", f"{why}; try again"))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._received += len(data)
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm("", 0.0)
        left = self.per_client.get(self._client, 1) - 1
        if left > 0:
            self.per_client[self._client] = left
        else:
            self.per_client.pop(self._client, None)
        super().connection_lost(exc)
        if self._received >= LARGE_BYTES and self.on_large_close is not None:
            _release_soon(self.loop, self.on_large_close)

    def handle_events(self) -> None:
        super().handle_events()
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()

    def _track(self) -> None:
        """The read deadline of the phase the connection is in: waiting for headers, for the
        rest of a body, or none (the application is answering)."""
        if self.transport is None or self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            self._arm("headers", self.header_timeout_s)
        elif state is h11.SEND_BODY:  # answered or not (a 429 or 413 before the body ended)
            self._arm("body", self.body_timeout_s)
        else:
            self._arm("", 0.0)

    def _arm(self, phase: str, seconds: float) -> None:
        if phase == self._phase:
            return  # the deadline runs from the start of the phase, not from the last byte
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        if phase:
            self._deadline = self.loop.call_later(seconds, self._expired, phase, seconds)

    def _expired(self, phase: str, seconds: float) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        limit = "header_timeout_s" if phase == "headers" else "body_timeout_s"
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        if phase == "body" or self.conn.trailing_data[0]:  # a request was under way
            logger.warning(
                "%s: request %s not received in %g s (limits.%s); closed",
                client,
                phase,
                seconds,
                limit,
            )
        self.transport.close()


LARGE_BYTES = 256 * 1024  # a connection that read this much leaves memory worth returning
RELEASE_AFTER_S = 1.0  # the wait before returning it, so a burst is returned once, at its end
_pending: list[asyncio.TimerHandle] = []


def _release_soon(loop: asyncio.AbstractEventLoop, release: Any) -> None:
    """``release()`` RELEASE_AFTER_S from now, unless one is already due."""
    if _pending and not _pending[0].cancelled() and _pending[0].when() > loop.time():
        return
    _pending[:] = [loop.call_later(RELEASE_AFTER_S, release)]


def make_protocol(
    limits: Mapping[str, Any], on_large_close: Any = None
) -> type[BoundedH11Protocol]:
    """The protocol class for uvicorn's ``http`` option, with the bounds of ``limits``;
    ``on_large_close`` (e.g. ``release_memory``) runs after connections that read much close."""
    return type(
        "PlayH11Protocol",
        (BoundedH11Protocol,),
        {
            "max_connections": int(limits["max_connections"]),
            "max_per_client": int(limits["max_connections_per_client"]),
            "per_client": {},
            "header_timeout_s": float(limits["header_timeout_s"]),
            "body_timeout_s": float(limits["body_timeout_s"]),
            "on_large_close": staticmethod(on_large_close) if on_large_close else None,
        },
    )


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``limit`` bytes, declared or streamed.

    The body passes through as it arrives. When the bytes so far pass the cap, the application
    is told the client has gone (``http.disconnect``), whatever it answers is dropped, and the
    413 goes out instead, closing the connection (the rest of the body is never read)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._refuse(send)
                return
        seen = 0
        over = False
        started = False

        async def counted() -> dict:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: dict) -> None:
            nonlocal started
            if over and not started:
                return  # the application's answer to a body it never got whole
            started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not over:
                raise
        finally:
            if seen >= LARGE_BYTES:  # the body's chunks are free now: give them back soon
                _release_soon(asyncio.get_running_loop(), release_memory)
        if over and not started:
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"detail": f"request body larger than {self.limit} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


def release_memory() -> None:
    """Hands the C allocator's free memory back to the system (glibc's ``malloc_trim``; a
    no-op elsewhere). A burst of large bodies leaves the heap at its peak otherwise."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


_TRIM: list[Any] = []


def _malloc_trim() -> Any:
    if not _TRIM:
        name = ctypes.util.find_library("c")
        try:
            _TRIM.append(ctypes.CDLL(name).malloc_trim if name else None)
        except (OSError, AttributeError):
            _TRIM.append(None)
    return _TRIM[0]


__all__ = ["BodyLimit", "BoundedH11Protocol", "make_protocol", "release_memory"]
