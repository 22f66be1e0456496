"""The rated ladder's table: made once by ``python -m evaluation.rate_ladder``, read by the
evaluator through ``evaluation.ladder_table``.

- :class:`LadderTable` with :func:`write_table` / :func:`read_table`: every rung's rating with
  its interval, the draw and first-move terms of the fit, when, at which revision and with which
  minimax weights it was rated.
- :func:`write_results` / :func:`read_results`: the game counts beside a table (everything its
  fit reads), so that anyone can refit it and check.
- :func:`table_path`: what the ``evaluation.ladder_table`` setting names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluation.players.alphabeta import WEIGHT_NAMES, eval_weights, weights_dict
from evaluation.stats.elo import PairResult, Ratings

TABLE_SCHEMA_VERSION = 1  # the CSV's layout; read_table refuses a newer one


PACKAGE_TABLE = Path(__file__).resolve().parent / "data" / "ladder_ratings.csv"
# The same table with rungs added above its top (``rate_ladder --extend``): its rows begin with
# every row of PACKAGE_TABLE unchanged. The fast player's generations are rated on it.
EXTENDED_TABLE = PACKAGE_TABLE.with_name("ladder_ratings_extended.csv")
NAMED_TABLES = {"package": PACKAGE_TABLE, "extended": EXTENDED_TABLE}


TABLE_COLUMNS = ("player", "elo", "lower", "upper", "stderr", "games", "points")


@dataclass(frozen=True)
class TableRow:
    player: str
    elo: float
    lower: float
    upper: float
    stderr: float
    games: int
    points: float


@dataclass(frozen=True)
class LadderTable:
    """A rated ladder: rungs (weakest first) and the fit's global terms and provenance."""

    rows: tuple[TableRow, ...]
    draw_elo: float
    first_move_elo: float | None
    confidence: float
    meta: dict[str, str] = field(default_factory=dict)  # status, date, git_revision, weights...

    @property
    def ratings(self) -> dict[str, float]:
        return {r.player: r.elo for r in self.rows}

    def __contains__(self, name: object) -> bool:
        return any(r.player == name for r in self.rows)


def weights_text(weights: Mapping[str, Any] | None) -> str:
    """The minimax evaluation weights as ``man=100;king=130;...`` (core defaults filled in)."""
    w = weights_dict(eval_weights(dict(weights) if weights is not None else None))
    return ";".join(f"{k}={w[k]}" for k in WEIGHT_NAMES)


def table_from_ratings(
    ratings: Ratings, rungs: Sequence[str], meta: Mapping[str, Any]
) -> LadderTable:
    """The rows of ``rungs`` (in that order) from a fit, with ``meta`` (str values)."""
    rows = tuple(
        TableRow(
            player=p.name,
            elo=p.elo,
            lower=p.lower,
            upper=p.upper,
            stderr=p.stderr,
            games=p.games,
            points=p.points,
        )
        for p in (ratings[name] for name in rungs)
    )
    return LadderTable(
        rows=rows,
        draw_elo=ratings.draw_elo,
        first_move_elo=ratings.first_move_elo,
        confidence=ratings.confidence,
        meta={k: str(v) for k, v in meta.items()},
    )


def write_table(table: LadderTable, path: str | Path) -> None:
    """The table as CSV: ``# key: value`` lines (schema, status, date, revision, fit terms),
    then one row per rung. Written to a temporary file and renamed: whole or absent."""
    head = {
        "schema_version": TABLE_SCHEMA_VERSION,
        **table.meta,
        "confidence": table.confidence,
        "draw_elo": f"{table.draw_elo:.2f}",
        "first_move_elo": "" if table.first_move_elo is None else f"{table.first_move_elo:.2f}",
    }
    lines = ["# checkerzero ladder ratings (python -m evaluation.rate_ladder); random = 0"]
    lines += [f"# {k}: {v}" for k, v in head.items()]
    lines.append(",".join(TABLE_COLUMNS))
    lines += [
        f"{r.player},{r.elo:.2f},{r.lower:.2f},{r.upper:.2f},{r.stderr:.2f},{r.games},{r.points:g}"
        for r in table.rows
    ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_table(path: str | Path) -> LadderTable:
    """A table written by :func:`write_table`; ValueError naming the file and line if not."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"cannot read the ladder table {path}: {e}") from None
    meta: dict[str, str] = {}
    for line in text.splitlines():  # the header lines first: a newer layout is not parsed
        key, sep, value = line[1:].partition(":") if line.startswith("#") else ("", "", "")
        if sep:
            meta[key.strip()] = value.strip()
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise ValueError(f"{path}: no '# schema_version: N' line; not a ladder table") from None
    if version > TABLE_SCHEMA_VERSION:
        raise ValueError(
            f"{path}: ladder table schema {version} is newer than this code reads "
            f"({TABLE_SCHEMA_VERSION})"
        )
    rows: list[TableRow] = []
    header_seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path}, line {number}"
        if not line.strip():
            continue
        if line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if not header_seen:
            if tuple(cells) != TABLE_COLUMNS:
                raise ValueError(f"{where}: expected the columns {','.join(TABLE_COLUMNS)}")
            header_seen = True
            continue
        try:
            name, elo, lower, upper, stderr, games, points = cells
            row = TableRow(
                name,
                float(elo),
                float(lower),
                float(upper),
                float(stderr),
                int(games),
                float(points),
            )
        except ValueError:
            raise ValueError(
                f"{where}: a row needs {len(TABLE_COLUMNS)} values: {line!r}"
            ) from None
        if not name or not all(map(math.isfinite, (row.elo, row.lower, row.upper))):
            raise ValueError(f"{where}: a rung needs a name and finite ratings: {line!r}")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: the ladder table has no rungs")
    try:
        draw_elo = float(meta.pop("draw_elo"))
        first = meta.pop("first_move_elo", "")
        confidence = float(meta.pop("confidence", "0.95"))
    except (KeyError, ValueError):
        raise ValueError(f"{path}: needs '# draw_elo: X' and a numeric confidence") from None
    meta.pop("schema_version")
    return LadderTable(
        rows=tuple(rows),
        draw_elo=draw_elo,
        first_move_elo=float(first) if first else None,
        confidence=confidence,
        meta=meta,
    )


RESULTS_COLUMNS = ("a", "b", "first_mover", "wins", "draws", "losses")


def results_path(table: str | Path) -> Path:
    """Where a table's game counts live: beside it, ``<name>.results.csv``."""
    table = Path(table)
    return table.with_name(table.stem + ".results.csv")


def write_results(rows: Iterable[PairResult], path: str | Path) -> None:
    """The games a table was fitted from, as counts: one row per match and first mover, from
    the match's ``a`` side (everything the fit reads; the games themselves stay in the games
    file). Written whole or not at all, as the table."""
    lines = [",".join(RESULTS_COLUMNS)]
    lines += [f"{r.a},{r.b},{r.first_mover or ''},{r.wins},{r.draws},{r.losses}" for r in rows]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_results(path: str | Path) -> list[PairResult]:
    """Rows written by :func:`write_results`; ValueError naming the file and line if not."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ValueError(f"cannot read the ladder results {path}: {e}") from None
    if not lines or tuple(c.strip() for c in lines[0].split(",")) != RESULTS_COLUMNS:
        raise ValueError(f"{path}, line 1: expected the columns {','.join(RESULTS_COLUMNS)}")
    rows: list[PairResult] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            a, b, mover, wins, draws, losses = (c.strip() for c in line.split(","))
            counts = int(wins), int(draws), int(losses)
        except ValueError:
            raise ValueError(f"{path}, line {number}: a row needs 6 values: {line!r}") from None
        if not a or not b or min(counts) < 0 or mover not in ("", a, b):
            raise ValueError(
                f"{path}, line {number}: needs two players, counts >= 0 and a first mover "
                f"that is one of them (or empty): {line!r}"
            )
        rows.append(PairResult(a, b, *counts, first_mover=mover or None))
    return rows


def table_path(setting: str | None) -> Path | None:
    """``evaluation.ladder_table``: null (None) = no table, ``package`` = the table shipped in
    evaluation/ladder/data/, ``extended`` = the same with rungs above it, anything else a path
    to one."""
    if setting is None or str(setting).strip().lower() in ("", "null", "none"):
        return None
    if str(setting).strip() in NAMED_TABLES:
        return NAMED_TABLES[str(setting).strip()]
    return Path(str(setting)).expanduser()
