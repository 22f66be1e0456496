"""Where the evaluator keeps its state: the Redis keys, all under the run's namespace.

With ``<ns>`` the run's namespace (``replay.namespace``):

==============================  ===========================================================
``<ns>:eval:results``           list, one JSON ``PairResult`` row per (match, first mover):
                                every gate, ladder and rung game ever finished
``<ns>:eval:decisions``         list, one JSON gate decision per candidate (GateDecision
                                fields + candidate, best, promoted)
``<ns>:eval:latest``            hash, the newest metrics for the learner to log
                                (:func:`read_eval_metrics`)
``<ns>:eval:done``              hash, finished units of work (``gate:V`` -> accept/reject,
                                ``ladder:V:SPEC``, ``rungs``) and ``last_version``
``<ns>:eval:gate:V:B``          list, the pairs of the unfinished gate of V against best B
                                (a restart resumes the test where it stopped)
``<ns>:eval:ladder``            hash, the rungs' ratings, fixed once they were played
``<ns>:eval:versions``          hash, version -> JSON {step, positions, t}: where each rated
                                candidate stands in the run (the Elo curve's x axes)
==============================  ===========================================================

A unit's results and its ``done`` mark are written in one transaction, so a unit is either
recorded once or replayed whole.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

METRIC_PREFIX = "eval/"


def results_key(namespace: str) -> str:
    return f"{namespace}:eval:results"


def decisions_key(namespace: str) -> str:
    return f"{namespace}:eval:decisions"


def latest_key(namespace: str) -> str:
    return f"{namespace}:eval:latest"


def done_key(namespace: str) -> str:
    return f"{namespace}:eval:done"


def gate_pairs_key(namespace: str, version: int, best: int) -> str:
    return f"{namespace}:eval:gate:{version}:{best}"


def ladder_key(namespace: str) -> str:
    return f"{namespace}:eval:ladder"


def versions_key(namespace: str) -> str:
    return f"{namespace}:eval:versions"


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
