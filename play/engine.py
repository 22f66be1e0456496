"""``python -m play.engine``: an analysis engine over stdin/stdout, one JSON object per line.

Like KataGo's analysis engine: another program writes queries, one per line, and reads one
answer per query, tagged with the query's ``id``. A query::

    {"id": "q1", "fen": "B:W21,22,...:B1,2,...", "moves": ["11-15"], "sims": 400}
    {"id": "q2", "moves": ["11-15", "23-19"], "ms": 200, "network": "long-320min.safetensors"}
    {"id": "q3", "action": "move", "player": "minimax:6", "moves": ["11-15"]}

``fen`` (optional, the initial position by default) and ``moves`` (optional) give the position;
``sims`` or ``ms`` the budget (the default simulations otherwise); ``network`` a checkpoint
relative to the models folder (the default network otherwise). ``"action": "move"`` asks any
player spec for its move instead. The answer carries the query's ``id`` and the analysis (move,
wdl, score, visits, pv, top) or ``{"id": ..., "error": "..."}``. Queries are answered in order;
an empty line is skipped, end of input ends the engine.

    echo '{"id": 1, "moves": ["11-15"], "sims": 100}' | python -m play.engine
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from play.analysis import position_from
from play.engines import Engines
from play.paths import Roots
from play.settings import load_settings, models_dir

QUERY_KEYS = {"id", "fen", "moves", "sims", "ms", "network", "action", "player"}


def answer(engines: Engines, query: Any, default_network: str) -> dict[str, Any]:
    """The answer to one decoded query (errors become ``{"id", "error"}``)."""
    qid = query.get("id") if isinstance(query, dict) else None
    try:
        if not isinstance(query, dict):
            raise ValueError("a query is a JSON object")
        unknown = sorted(set(query) - QUERY_KEYS)
        if unknown:
            raise ValueError(f"unknown keys {unknown}; known: {sorted(QUERY_KEYS)}")
        moves = query.get("moves") or []
        if not isinstance(moves, list):
            raise ValueError("moves must be a list of moves like '11-15'")
        pos = position_from(query.get("fen"), moves, max_moves=int(engines.limits["max_moves"]))
        action = query.get("action", "analyse")
        if action == "move":
            spec = engines.parse(query.get("player") or default_network)
            return {"id": qid, **engines.move(pos, spec)}
        if action != "analyse":
            raise ValueError(f"unknown action {action!r}; use analyse or move")
        spec = engines.parse(query.get("network") or default_network)
        sims, ms = query.get("sims"), query.get("ms")
        budget = engines.budget(sims, ms) if (sims or ms) else None
        result = engines.analyse([pos], spec, budget)[0]
        return {"id": qid, "network": spec.text, **result.to_dict()}
    except (ValueError, TypeError) as e:
        return {"id": qid, "error": str(e)}


def serve(engines: Engines, lines: Iterable[str], default_network: str) -> Iterator[str]:
    """One JSON answer line per non-empty input line."""
    for line in lines:
        if not line.strip():
            continue
        try:
            query = json.loads(line)
        except json.JSONDecodeError as e:
            yield json.dumps({"id": None, "error": f"not JSON: {e}"})
            continue
        yield json.dumps(answer(engines, query, default_network))


def main(argv: list[str] | None = None, stdin: TextIO | None = None) -> None:
    settings = load_settings()
    parser = argparse.ArgumentParser(
        prog="python -m play.engine", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--models", default=settings["models_dir"], help="the networks folder")
    parser.add_argument("--runs", default=settings["runs_dir"], help="the runs folder")
    parser.add_argument("--network", default=settings["default_player"], help="default network")
    args = parser.parse_args(argv)
    engines = Engines(settings, Roots(args.runs, models_dir(args.models)))
    for out in serve(engines, stdin or sys.stdin, args.network):
        print(out, flush=True)


if __name__ == "__main__":
    main()
