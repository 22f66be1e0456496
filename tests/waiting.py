"""Waiting on a condition in a test: poll until it holds, or fail naming what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

POLL_S = 0.25  # a poll's pause: the conditions waited on take seconds


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str):
    """The first truthy value of ``predicate()``; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(POLL_S)


def read_while_no_game_arrives(store, client, namespace: str, records: Callable, timeout_s: float):
    """``(records(), store.stats(), the actors' own game count)`` read while no game arrived.

    Self-play actors keep writing while a test reads, so a game stored between two reads would
    look lost or extra; the read is retried until the store's counts are the same around it. The
    actors' counter is written after each game is stored, so it is never ahead of the store."""
    from checkerzero.store.keys import selfplay_stats_key

    def read() -> tuple | None:
        before = store.stats()
        found = records()
        counted = int(client.hget(selfplay_stats_key(namespace), "games") or 0)
        return (found, before, counted) if store.stats() == before else None

    return wait_until(read, timeout_s, "a read with no game arriving")
