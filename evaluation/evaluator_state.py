"""What the evaluator keeps: its state in the run's Redis and its files in the run directory.

:class:`EvalState` reads and writes the evaluator's Redis keys (checkerzero.store.keys): the
finished units of work, every result row, the gate decisions, where each rated version stood in
the run. A unit's results and its done mark go in one transaction, so that a restarted
evaluator loses nothing and repeats nothing. Files go under ``<run_dir>/EVAL_DIR``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from checkerzero.store.keys import decisions_key, done_key, latest_key, results_key, versions_key
from evaluation.elo import PairResult
from evaluation.ladder_play import result_from_json, result_to_json

logger = logging.getLogger(__name__)


class Stopped(Exception):
    """Raised inside a unit of work when stop() was requested; nothing of the unit is kept."""


class EvalState:
    """The evaluator's state in Redis under the run's ``namespace``."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.ns = namespace
        self.units_played = 0  # units of work recorded by this object (gates, ladder matches)

    def done(self, unit: str) -> str | None:
        value = self.client.hget(done_key(self.ns), unit)
        return value.decode() if isinstance(value, bytes) else value

    def last_version(self) -> int:
        return int(self.done("last_version") or 0)

    def last_started(self) -> float:
        """When the newest rating began (unix seconds; 0 before the first)."""
        try:
            return float(self.done("last_started") or 0)
        except ValueError:
            return 0.0

    def mark_started(self) -> None:
        self.client.hset(done_key(self.ns), "last_started", repr(round(time.time(), 3)))

    def results(self) -> list[PairResult]:
        return [result_from_json(x) for x in self.client.lrange(results_key(self.ns), 0, -1)]

    def decisions(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.client.lrange(decisions_key(self.ns), 0, -1)]

    def record(
        self,
        unit: str,
        value: str,
        rows: Sequence[PairResult],
        *,
        kind: str,
        version: int | None,
        decision: Mapping[str, Any] | None = None,
        extra: Callable[[Any], None] | None = None,
    ) -> None:
        """Results, decision and the unit's done mark in one transaction."""
        pipe = self.client.pipeline(transaction=True)
        stamp = round(time.time(), 3)
        for row in rows:
            pipe.rpush(
                results_key(self.ns), result_to_json(row, kind=kind, version=version, t=stamp)
            )
        if decision is not None:
            pipe.rpush(decisions_key(self.ns), json.dumps(dict(decision), sort_keys=True))
        pipe.hset(done_key(self.ns), unit, value)
        if extra is not None:
            extra(pipe)
        pipe.execute()
        self.units_played += 1

    def candidate_rows(self, version: int) -> list[PairResult]:
        """The ladder games of ``version`` recorded so far (a restart goes on from them)."""
        rows = []
        for raw in self.client.lrange(results_key(self.ns), 0, -1):
            d = json.loads(raw)
            if d.get("kind") == "ladder" and d.get("version") == version:
                rows.append(result_from_json(raw))
        return rows

    def previous_estimate(self) -> float | None:
        """The newest rated candidate's Elo (where a new candidate probably is), if any."""
        raw = self.client.hget(latest_key(self.ns), "elo")
        try:
            value = float(raw) if raw is not None else None
        except ValueError:
            return None
        return value if value is not None and math.isfinite(value) else None

    def versions(self) -> dict[int, dict[str, Any]]:
        infos: dict[int, dict[str, Any]] = {}
        for k, v in self.client.hgetall(versions_key(self.ns)).items():
            with contextlib.suppress(ValueError, TypeError):
                infos[int(k)] = dict(json.loads(v))
        return infos
