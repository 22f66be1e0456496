"""Keeping a Ray actor's long `run()` call going: the one restart supervisor of the project.

Ray restarts a dead actor process by itself (``max_restarts=-1``) and retries the call it was
serving (``max_task_retries=-1``). What it cannot retry is a `run()` that ended: it returned, or
raised an error of its own. `RunLoop` notices that on `check()` and calls `run()` again, at once
the first time and at most every `backoff_s` after that, so a persistent error (a bad checkpoint,
Redis gone) logs one line per interval instead of spinning.
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from typing import Any

import ray

logger = logging.getLogger(__name__)


class RunLoop:
    """The `run()` call of one actor (which also has `stop()`), restarted when it ends."""

    def __init__(self, actor: Any, what: str, *, backoff_s: float = 0.0) -> None:
        self.actor = actor
        self.what = what  # names the actor in log lines
        self.backoff_s = backoff_s
        self.restarts = 0
        self.ref = actor.run.remote()
        self._failed_at: float | None = None

    def check(self) -> None:
        """Restarts `run()` if it ended, unless the backoff since the last restart is running."""
        if self._failed_at is None:
            done, _ = ray.wait([self.ref], timeout=0)
            if not done:
                return
            try:
                ray.get(self.ref)
                logger.warning("%s returned early; restarting its loop", self.what)
            except Exception as e:
                logger.warning("%s failed (%s); restarting its loop", self.what, e)
            self._failed_at = time.monotonic()
        if time.monotonic() - self._failed_at < self.backoff_s * min(self.restarts, 1):
            return
        self.restarts += 1
        self._failed_at = None
        self.ref = self.actor.run.remote()


def stop_loops(loops: list[RunLoop], timeout_s: float) -> None:
    """Asks every loop's actor to stop, waits up to `timeout_s` for all, then kills them."""
    for loop in loops:
        with suppress(Exception):  # an actor that is already dead needs no stop
            loop.actor.stop.remote()
    if loops:
        ray.wait([loop.ref for loop in loops], num_returns=len(loops), timeout=timeout_s)
    for loop in loops:
        ray.kill(loop.actor, no_restart=True)
