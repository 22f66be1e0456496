"""Search slots shared fairly between the server's clients, on its event loop.

At most ``total`` searches run at once and at most ``per_client`` of them for one client (a
client is its address). Requests that find no free slot wait in a queue per client, at most
``max_waiting`` each; a freed slot goes to the client that was served least recently (round
robin: the client running fewest searches first, then the one served least recently), so one
client sending many requests delays another by at most one search per slot.
Waiting uses no thread: the queue lives on the event loop, and every method is called from it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque


class Busy(RuntimeError):
    """No search slot for this request: it waited too long, or its client queues too many."""


class Slots:
    def __init__(self, total: int, per_client: int, max_waiting: int, wait_s: float) -> None:
        self.total = total
        self.per_client = per_client
        self.max_waiting = max_waiting
        self.wait_s = wait_s
        self.running: dict[str, int] = {}
        # Clients with waiting requests, in the order they are next served (round robin).
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._served: dict[str, int] = {}  # client -> when it was last granted a slot
        self._count = 0

    @property
    def busy(self) -> int:
        """Slots held now."""
        return sum(self.running.values())

    @property
    def queued(self) -> int:
        """Requests waiting for a slot now."""
        return sum(len(q) for q in self._waiting.values())

    async def acquire(self, client: str, gone: asyncio.Event | None = None) -> bool:
        """Waits for a slot of ``client``; True once held (``release`` it), False when ``gone``
        was set first (the client left; no slot is held). Busy when the wait passes ``wait_s``
        or the client already has ``max_waiting`` requests waiting."""
        queue = self._waiting.get(client)
        if queue is not None and len(queue) >= self.max_waiting:
            raise Busy(
                f"{len(queue)} requests of this client already wait for a search slot "
                "(limits.max_waiting_per_client); try again when one is answered"
            )
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(client, deque()).append(ticket)
        self._dispatch()
        if not ticket.done():
            watch = [ticket]
            gone_task = asyncio.ensure_future(gone.wait()) if gone is not None else None
            if gone_task is not None:
                watch.append(gone_task)
            try:
                await asyncio.wait(watch, timeout=self.wait_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if gone_task is not None:
                    gone_task.cancel()
                if not ticket.done():
                    ticket.cancel()
                    self._forget(client, ticket)
        if ticket.cancelled():
            if gone is not None and gone.is_set():
                return False
            raise Busy(
                f"all {self.total} search slots stayed busy for {self.wait_s:g} s "
                "(limits.queue_wait_s); try again"
            )
        return True

    def release(self, client: str) -> None:
        """Gives back a slot ``acquire`` granted to ``client``."""
        self.running[client] -= 1
        if not self.running[client]:
            del self.running[client]
            if client not in self._waiting:
                self._served.pop(client, None)  # bounded by the clients with work now
        self._dispatch()

    def _forget(self, client: str, ticket: asyncio.Future[None]) -> None:
        queue = self._waiting.get(client)
        if queue is not None and ticket in queue:
            queue.remove(ticket)
            if not queue:
                del self._waiting[client]

    def _dispatch(self) -> None:
        """Hands free slots to waiting requests: first to the client running fewest searches,
        among equals to the one served least recently."""
        while self.busy < self.total:
            eligible = [c for c in self._waiting if self.running.get(c, 0) < self.per_client]
            if not eligible:
                return
            client = min(eligible, key=lambda c: (self.running.get(c, 0), self._served.get(c, -1)))
            queue = self._waiting[client]
            ticket = queue.popleft()
            if not queue:
                del self._waiting[client]
            self.running[client] = self.running.get(client, 0) + 1
            self._count += 1
            self._served[client] = self._count
            ticket.set_result(None)


__all__ = ["Busy", "Slots"]
