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
