"""``python -m play.engine``: an analysis engine over stdin/stdout, one JSON object per line.

Like KataGo's analysis engine: another program writes queries, one per line, and reads one
answer per query, tagged with the query's ``id``. A query::

    {"id": "q1", "fen": "B:W21,22,...:B1,2,...", "moves": ["11-15"], "sims": 400}
    {"id": "q2", "moves": ["11-15", "23-19"], "ms": 200, "network": "long-320min.safetensors"}
    {"id": "q3", "action": "move", "player": "minimax:6", "moves": ["11-15"]}
    {"id": "q4", "engine": "ab", "moves": ["11-15"], "ms": 300, "lines": 3}

``fen`` (optional, the initial position by default) and ``moves`` (optional) give the position;
``sims`` or ``ms`` the budget (the default simulations otherwise); ``network`` a checkpoint
relative to the models folder (the default network otherwise). ``"action": "move"`` asks any
player spec for its move instead (``player``; the play settings' ``default_opponent``, the
strongest player at equal time, otherwise). ``"engine": "ab"`` analyses with the alpha-beta and
the learned evaluation instead of the network (``play.ab_analysis``: the best ``lines`` moves
with scores and principal lines, ``ms`` and/or ``depth``; the server's default engine). The
answer carries the query's ``id`` and the analysis (move, wdl, score, visits, pv, top) with
the network and the budget it searched with (``"network": "long-320min.safetensors:sims=400"``,
``"budget": {"sims": 400}``), or ``{"id": ..., "error": "..."}``. Queries are answered in
order; an empty line is skipped, end of input or a closed output ends the engine.

Every line gets an answer and the engine carries on: a line longer than
``limits.max_request_bytes`` is refused unread, and JSON that Python will not read (an integer
of thousands of digits, arrays nested thousands deep) or a query that fails in any way gets an
error object, clipped to ``MAX_ERROR_CHARS``. A query's work is bounded by the play settings'
limits (simulations, time, depth, moves, and ``limits.max_request_simulations`` in all).

    echo '{"id": 1, "moves": ["11-15"], "sims": 100}' | python -m play.engine
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any, TextIO

from play.ab_analysis import AbEngine
from play.analysis import position_from
from play.paths import Roots
from play.players import Players
from play.settings import load_settings, models_dir

logger = logging.getLogger(__name__)

QUERY_KEYS = {"id", "fen", "moves", "sims", "ms", "network", "action", "player", "engine"}
QUERY_KEYS |= {"depth", "lines"}  # the alpha-beta's ("engine": "ab")
MAX_LINES = 64  # most best moves an alpha-beta query may ask for
MAX_ERROR_CHARS = 500  # an error quotes at most this much (a 20 MB move was echoed twice, 40 MB)
MAX_ID_CHARS = 100  # query ids are echoed back, as the server's
_SKIP_CHUNK = 1 << 16  # the rest of an over-long line is read and dropped this much at a time


class LineRefused:
    """A line answered with an error before it is parsed (too long, or not UTF-8)."""

    def __init__(self, why: str) -> None:
        self.why = why


def read_lines(stream: IO[Any], limit: int) -> Iterator[str | LineRefused]:
    """The lines of ``stream`` (bytes or text), each at most ``limit`` long without its newline;
    a longer line is read on in chunks and dropped, never held whole, and yields a LineRefused."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        newline = b"\n" if isinstance(line, bytes) else "\n"
        if len(line) > limit and not line.endswith(newline):
            while line and not line.endswith(newline):
                line = stream.readline(_SKIP_CHUNK)
            yield LineRefused(f"line longer than {limit} bytes; a query is a short JSON object")
            continue
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as e:
                yield LineRefused(f"not UTF-8: {e}")
                continue
        yield line


def _clip(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}... ({len(text)} characters)"


def _decode(line: str) -> Any:
    """The JSON value of ``line``; ValueError for anything Python's reader refuses."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    except RecursionError:
        raise ValueError("not a query: JSON nested too deep") from None
    except ValueError as e:  # an integer beyond Python's int-string limit
        raise ValueError(f"not a query: {e}") from None


def _query_id(query: Any) -> Any:
    qid = query.get("id") if isinstance(query, dict) else None
    if qid is None or (isinstance(qid, (int, float)) and not isinstance(qid, bool)):
        return qid
    if isinstance(qid, str) and len(qid) <= MAX_ID_CHARS:
        return qid
    raise ValueError(f"id must be a number or a string of at most {MAX_ID_CHARS} characters")


def answer(
    engines: Players, query: Any, default_network: str, default_opponent: str = ""
) -> dict[str, Any]:
    """The answer to one decoded query (errors become ``{"id", "error"}``)."""
    try:
        qid = _query_id(query)
    except ValueError as e:
        return {"id": None, "error": str(e)}
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
            spec = engines.parse(query.get("player") or default_opponent or default_network)
            return {"id": qid, **engines.move(pos, spec)}
        if action != "analyse":
            raise ValueError(f"unknown action {action!r}; use analyse or move")
        engine = query.get("engine", "network")
        if engine == "ab":
            return {"id": qid, **_ab_answer(engines, pos, query)}
        if engine != "network":
            raise ValueError(f"unknown engine {str(engine)[:40]!r}; use network or ab")
        spec = engines.parse(query.get("network") or default_network)
        if not spec.searches:
            raise ValueError(f"player {spec.text!r} does not analyse; name a network")
        sims, ms = query.get("sims"), query.get("ms")
        if sims is not None or ms is not None:
            spec = engines.with_budget(spec, engines.budget(sims, ms))
        result = engines.analyse([pos], spec)[0]
        budget = (
            {"sims": spec.budget.simulations} if spec.budget.simulations else {"ms": spec.budget.ms}
        )
        return {"id": qid, "network": spec.text, "budget": budget, **result.to_dict()}
    except (ValueError, TypeError) as e:
        return {"id": qid, "error": _clip(str(e))}


def _ab_answer(engines: Players, pos: Any, query: dict[str, Any]) -> dict[str, Any]:
    """The alpha-beta's analysis (play.ab_analysis): ``ms`` and/or ``depth``, ``lines``."""
    for key in ("sims", "network"):
        if key in query:
            raise ValueError(f"engine ab takes ms, depth and lines; {key} is the network's")
    lines = query.get("lines")
    if lines is not None and (not isinstance(lines, int) or not 1 <= lines <= MAX_LINES):
        raise ValueError(f"lines must be 1..{MAX_LINES}, got {str(lines)[:40]!r}")
    ab = AbEngine(engines.settings)
    budget = ab.budget(query.get("ms"), query.get("depth"))
    return {"engine": "ab", "budget": {"ms": budget.ms, "depth": budget.depth}} | ab.analyse(
        pos, budget, lines=lines
    ).to_dict()


def serve(
    engines: Players,
    lines: Iterable[str | LineRefused],
    default_network: str,
    default_opponent: str = "",
) -> Iterator[str]:
    """One JSON answer line per non-empty input line, whatever the line holds."""
    for line in lines:
        if isinstance(line, LineRefused):
            yield json.dumps({"id": None, "error": _clip(line.why)})
            continue
        if not line.strip():
            continue
        try:
            query = _decode(line)
        except ValueError as e:
            yield json.dumps({"id": None, "error": _clip(str(e))})
            continue
        try:
            out = answer(engines, query, default_network, default_opponent)
        except Exception as e:  # one bad query must not end the engine
            logger.exception("query failed")
            try:
                qid = _query_id(query)
            except ValueError:
                qid = None
            out = {"id": qid, "error": _clip(f"internal error: {type(e).__name__}: {e}")}
        yield json.dumps(out)


def main(argv: list[str] | None = None, stdin: TextIO | None = None) -> None:
    settings = load_settings()
    parser = argparse.ArgumentParser(
        prog="python -m play.engine", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--models", default=settings["models_dir"], help="the networks folder")
    parser.add_argument("--runs", default=settings["runs_dir"], help="the runs folder")
    parser.add_argument("--network", default=settings["default_player"], help="default network")
    parser.add_argument(
        "--player", default=settings["default_opponent"], help="default player of a move query"
    )
    args = parser.parse_args(argv)
    engines = Players(settings, Roots(args.runs, models_dir(args.models)))
    source = stdin or sys.stdin.buffer
    lines = read_lines(source, int(settings["limits"]["max_request_bytes"]))
    try:
        for out in serve(engines, lines, args.network, args.player):
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader has gone: stop quietly, and point stdout at /dev/null so that the flush
        # at exit does not report the broken pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
