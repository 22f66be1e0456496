"""What the learner reads of the evaluator's records in Redis: its newest metrics and every
version the gate promoted (the keys are ``checkerzero.store.keys``)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from checkerzero.store.keys import decisions_key, latest_key

METRIC_PREFIX = "eval/"


def read_eval_metrics(client: Any, namespace: str) -> dict[str, float]:
    """The newest evaluator metrics, keys ``eval/...`` (``eval/elo``, ``eval/elo_lower``,
    ``eval/elo_upper``, ``eval/version``, ``eval/best_version``, ``eval/best_elo``, ...);
    empty before the first evaluation. For the learner to log."""
    raw = client.hgetall(latest_key(namespace))
    out: dict[str, float] = {}
    for k, v in raw.items():
        key = k.decode() if isinstance(k, bytes) else str(k)
        with contextlib.suppress(ValueError):
            out[METRIC_PREFIX + key] = float(v)
    return out


def promoted_versions(client: Any, namespace: str) -> list[int]:
    """Every weights version the gate ever promoted (the first best included), oldest first,
    from the evaluator's decision records; a record that does not parse is skipped."""
    versions = []
    for raw in client.lrange(decisions_key(namespace), 0, -1):
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            decision = json.loads(raw)
            if decision.get("promoted") and isinstance(decision.get("version"), int):
                versions.append(decision["version"])
    return versions
