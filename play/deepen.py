"""Deepening analysis: a search that runs on until it is stopped, read by polling.

The board's "Deepen" starts one (``POST /api/deepen``: a position and an engine), reads what it
has found so far as often as it likes (``GET /api/deepen/{id}``) and stops it
(``DELETE /api/deepen/{id}``, which answers with the last result). The alpha-beta
(``play.ab_analysis``) reports each complete iteration, one ply deeper each time; the network's
search is run again with twice the time each round (0.5 s, 1 s, 2 s, ...), so it is bounded by
time, not by a number of visits.

Bounds: one client (address) runs at most ``analysis.deepen_per_client`` at once (a new one
stops its oldest), the server at most ``analysis.deepen_sessions`` (more get 503); a deepening
stops by itself after ``analysis.deepen_max_s`` seconds, or when nobody has polled it for
``analysis.deepen_idle_s`` seconds (its page has gone). A stop is heard between two root moves
of the alpha-beta (``analysis.ab_slice_ms`` at most) or two batches of the network's search.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from play.analysis import Cancelled, Stop
from play.slots import Busy

logger = logging.getLogger(__name__)

# work(stop, publish): runs until stop() is true, publishing each result it has as a dict.
Work = Callable[[Callable[[], bool], Callable[[dict[str, Any]], None]], None]


@dataclass
class Deepening:
    id: str
    client: str
    engine: str
    started: float
    last_poll: float
    result: dict[str, Any] | None = None
    running: bool = True
    stopped: str | None = None  # "stopped", "time", "idle", "replaced", "done" or an error
    flag: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def view(self, now: float) -> dict[str, Any]:
        with self.lock:
            return {
                "id": self.id,
                "engine": self.engine,
                "running": self.running,
                "stopped": self.stopped,
                "elapsed_s": round(now - self.started, 2),
                "analysis": self.result,
            }


class Deepenings:
    """The deepenings under way, bounded per client and in all (module docstring)."""

    def __init__(
        self,
        max_sessions: int,
        per_client: int,
        max_s: float,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions
        self.per_client = per_client
        self.max_s = max_s
        self.idle_s = idle_s
        self.clock = clock
        self._all: dict[str, Deepening] = {}
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        with self._lock:
            return sum(d.running for d in self._all.values())

    def start(self, client: str, engine: str, work: Work) -> Deepening:
        """A new deepening of ``client`` running ``work`` on a thread of its own; Busy when
        the server runs its most already."""
        now = self.clock()
        with self._lock:
            self._forget_finished(now)
            mine = sorted(
                (d for d in self._all.values() if d.client == client and d.running),
                key=lambda d: d.started,
            )
            for old in mine[: max(0, len(mine) - self.per_client + 1)]:
                self._end(old, "replaced")
            if sum(d.running for d in self._all.values()) >= self.max_sessions:
                raise Busy(
                    f"{self.max_sessions} deepening analyses are running "
                    "(analysis.deepen_sessions); try again when one stops"
                )
            d = Deepening(secrets.token_hex(8), client, engine, now, now)
            self._all[d.id] = d
        threading.Thread(
            target=self._run, args=(d, work), name=f"deepen-{d.id}", daemon=True
        ).start()
        return d

    def _run(self, d: Deepening, work: Work) -> None:
        def stop() -> bool:
            now = self.clock()
            if not d.flag.is_set():
                if now - d.started >= self.max_s:
                    self._end(d, "time")
                elif now - d.last_poll >= self.idle_s:
                    self._end(d, "idle")
            return d.flag.is_set()

        def publish(result: dict[str, Any]) -> None:
            with d.lock:
                d.result = result

        try:
            work(stop, publish)
            reason = "done"
        except Cancelled:
            reason = "stopped"
        except Exception as e:  # one deepening's failure is its own answer, not the server's
            logger.exception("deepening %s failed", d.id)
            reason = f"error: {type(e).__name__}: {e}"
        with d.lock:
            d.running = False
            if d.stopped is None:
                d.stopped = reason

    def _end(self, d: Deepening, why: str) -> None:
        with d.lock:
            if d.stopped is None:
                d.stopped = why
        d.flag.set()

    def get(self, ident: str, client: str) -> Deepening:
        """The client's deepening ``ident`` (polled now); KeyError when there is none."""
        with self._lock:
            d = self._all.get(ident)
        if d is None or d.client != client:
            raise KeyError(f"no deepening {ident[:40]!r} of this client (it ended long ago?)")
        d.last_poll = self.clock()
        return d

    def stop(self, ident: str, client: str) -> Deepening:
        d = self.get(ident, client)
        self._end(d, "stopped")
        return d

    def _forget_finished(self, now: float) -> None:
        """Finished deepenings are kept for their last poll, then forgotten."""
        for key, d in list(self._all.items()):
            if not d.running and now - d.last_poll > self.idle_s:
                del self._all[key]


class FlagStop(Stop):
    """A play.analysis Stop that also ends when ``stop()`` says so (a deepening's stop)."""

    def __init__(self, stop: Callable[[], bool]) -> None:
        super().__init__()
        self._outer = stop

    def __call__(self) -> bool:
        if self.reason is None and self._outer():
            self.reason = "cancelled"
        return super().__call__()


__all__ = ["Deepening", "Deepenings", "FlagStop", "Work"]
