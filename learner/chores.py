"""The training loop's periodic chores: a list of (period, task) instead of hand-kept timers.

`learner.run` builds one `Chore` per thing it does every so many seconds (a checkpoint, a
metrics row and progress line, a copy of the live game, the plots) and calls `run_due` once per
pass of its loop; a task gets the loop's clock reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass
class Chore:
    """``task(now)`` once ``period_s`` seconds have passed since it last ran (or since
    ``last``, the loop's start); ``period_s`` None: never."""

    name: str
    period_s: float | None
    task: Callable[[float], None]
    last: float

    def due(self, now: float) -> bool:
        return self.period_s is not None and now - self.last >= self.period_s

    def run(self, now: float) -> None:
        """Runs the task now, due or not, and starts its period again."""
        self.task(now)
        self.last = now


def run_due(chores: Iterable[Chore], now: float) -> None:
    """Runs every chore that is due, in the list's order."""
    for chore in chores:
        if chore.due(now):
            chore.run(now)
