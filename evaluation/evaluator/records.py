"""The evaluator's records in the run's Redis: the one module that writes and reads them.

:class:`EvalState` is the evaluator's side (the keys are named in checkerzero.store.keys): the
finished units of work, every result row, the gate decisions, where each rated version stood in
the run, the ladder's fixed ratings and the newest metrics. A unit's results and its done mark go
in one transaction, so that a restarted evaluator loses nothing and repeats nothing.
:func:`read_eval_metrics` and :func:`promoted_versions` are the learner's side.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from checkerzero.metric_names import EVAL_PREFIX
from checkerzero.store.keys import (
    decisions_key,
    done_key,
    ladder_key,
    latest_key,
    results_key,
    versions_key,
)
from evaluation.ladder.rungs import result_from_json, result_to_json
from evaluation.stats.elo import PairResult

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

    def version_info(
        self, version: int, meta: Callable[[], Mapping[str, Any]], step: int | None
    ) -> dict[str, Any]:
        """``version``'s training step, self-play positions and publication time (unix s),
        kept in Redis once read: from the weights channel's metadata (``meta()``, read only
        when nothing is kept yet), else (weights published by an older learner) ``step`` from
        the weights' header and the time now."""
        raw = self.client.hget(versions_key(self.ns), str(version))
        if raw is not None:
            with contextlib.suppress(ValueError, TypeError):
                return dict(json.loads(raw))
        published = meta()
        info = {
            "step": published.get("step", step),
            "positions": published.get("positions"),
            "t": published.get("t", round(time.time(), 3)),
        }
        if (run_s := seconds(published.get("run_s"))) is not None:  # the run's own clock
            info["run_s"] = run_s
        self.client.hset(versions_key(self.ns), str(version), json.dumps(info))
        return info

    def fixed_ratings(self) -> dict[str, float]:
        """The rungs' ratings fixed once per run (:meth:`store_fixed`)."""
        raw = self.client.hgetall(ladder_key(self.ns))
        return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}

    def store_fixed(self, pipe: Any, fixed: Mapping[str, float]) -> None:
        """Adds the rungs' fixed ratings to a transaction (:meth:`record`'s ``extra``)."""
        if fixed:
            pipe.hset(ladder_key(self.ns), mapping={k: repr(v) for k, v in fixed.items()})

    def write_metrics(self, metrics: Mapping[str, float]) -> None:
        """The newest metrics (names of checkerzero.metric_names, ``eval/...``), replacing the
        previous ones in one transaction; :func:`read_eval_metrics` reads them."""
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(latest_key(self.ns))
        fields = {k.removeprefix(EVAL_PREFIX): repr(float(v)) for k, v in metrics.items()}
        pipe.hset(latest_key(self.ns), mapping=fields)
        pipe.execute()


def seconds(value: Any) -> float | None:
    """A time in seconds from the weights' metadata, or None where it is absent or no finite
    number >= 0 (a malformed record must not break the curve)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def read_eval_metrics(client: Any, namespace: str) -> dict[str, float]:
    """The newest evaluator metrics, keys ``eval/...`` (checkerzero.metric_names: ``eval/elo``,
    ``eval/elo_lower``, ``eval/version``, ``eval/best_elo``, ...); empty before the first
    evaluation. For the learner to log."""
    raw = client.hgetall(latest_key(namespace))
    out: dict[str, float] = {}
    for k, v in raw.items():
        key = k.decode() if isinstance(k, bytes) else str(k)
        with contextlib.suppress(ValueError):
            out[EVAL_PREFIX + key] = float(v)
    return out


def promoted_versions(client: Any, namespace: str) -> list[int]:
    """Every weights version the gate ever promoted (the first best included), oldest first,
    from the decision records; a record that does not parse is skipped."""
    versions = []
    for raw in client.lrange(decisions_key(namespace), 0, -1):
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            decision = json.loads(raw)
            if decision.get("promoted") and isinstance(decision.get("version"), int):
                versions.append(decision["version"])
    return versions
