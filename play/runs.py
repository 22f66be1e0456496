"""Training runs as the server shows them, read (never written) from their folders.

A run folder (``python -m learner``) holds ``metrics.csv`` (long form: time_s, step, key,
value), ``summary.json`` once it has ended, ``eval/ratings.csv`` (the Elo fit), PDN games under
``games/`` (self-play samples) and ``eval/`` (gate and ladder games), and checkpoints under
``checkpoints/``. A run is *finished* when summary.json is there, *running* when metrics.csv
changed recently, else *stopped* (killed, or waiting to be resumed).

Every file is read through ``game.files``: regular files only, at most ``max_bytes`` each
(``runs.max_file_bytes``). A run one of whose files is refused (a FIFO, a device, a file over
the cap) or unreadable (deeply nested JSON) is listed without what that file would say, and
the route that serves the file itself answers with one line naming it.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from checkerzero import metric_names as M
from checkerzero.metrics import read_metrics
from checkerzero.run_files import (
    GAME_FOLDERS,
    LIVE_FILE,
    METRICS_CSV,
    MODEL_PATH,
    RATINGS_PATH,
    SUMMARY_FILE,
)
from checkerzero.store.live import read_live_file
from game.files import FileRefused, open_regular_text, read_regular_file, read_regular_text
from game.pdn import read_pdn
from play.paths import NotFound, Roots

logger = logging.getLogger(__name__)

# The numbers a run's line shows: label -> metric key (its newest value).
STATUS_KEYS = {
    "weights_version": M.WEIGHTS_VERSION,
    "games": "selfplay/games",
    "positions_per_s": M.SELFPLAY_POSITIONS_PER_S,
    "games_per_s": M.SELFPLAY_GAMES_PER_S,
    "loss_total": M.LOSS_TOTAL,
    "elo": M.EVAL_ELO,
}
ELO_KEYS = (M.EVAL_ELO, M.EVAL_ELO_LOWER, M.EVAL_ELO_UPPER, M.EVAL_VERSION)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def is_run(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in (METRICS_CSV, SUMMARY_FILE))


def _quiet_series(run_dir: Path, max_bytes: int) -> dict[str, list[tuple[int, float, float]]]:
    """The run's metrics for its line in a listing: none (and a warning) when the file is
    refused, so one bad run folder does not hide the others."""
    try:
        return read_metrics(run_dir / METRICS_CSV, max_bytes)
    except (OSError, FileRefused) as e:
        logger.warning("run %s: metrics not read: %s", run_dir.name, e)
        return {}


def _summary(path: Path, max_bytes: int) -> Any:
    """summary.json's contents; None when it is refused or not JSON this reader can hold."""
    try:
        return json.loads(read_regular_file(path, max_bytes, "summary"))
    except (OSError, ValueError, RecursionError) as e:  # FileRefused is a ValueError
        reason = "nested too deeply" if isinstance(e, RecursionError) else e
        logger.warning("run %s: summary.json not read: %s", path.parent.name, reason)
        return None


def run_status(
    run_dir: Path, roots: Roots, running_within_s: float, max_bytes: int
) -> dict[str, Any]:
    """One run's line: status, step, weights version, games, positions/s, newest Elo."""
    metrics = run_dir / METRICS_CSV
    summary_file = run_dir / SUMMARY_FILE
    series = _quiet_series(run_dir, max_bytes)
    out: dict[str, Any] = {"name": run_dir.name, "step": 0}
    steps = [points[-1][0] for points in series.values() if points]
    if steps:
        out["step"] = max(steps)
    for label, key in STATUS_KEYS.items():
        if series.get(key):
            out[label] = _finite(series[key][-1][2])
    if summary_file.is_file():
        out["status"] = "finished"
        out["summary"] = _summary(summary_file, max_bytes)
    elif metrics.is_file() and time.time() - metrics.stat().st_mtime < running_within_s:
        out["status"] = "running"
    else:
        out["status"] = "stopped"
    if metrics.is_file():
        out["updated"] = metrics.stat().st_mtime
    try:
        curve = elo_curve(run_dir, max_bytes, series)
    except (OSError, FileRefused) as e:
        logger.warning("run %s: ratings not read: %s", run_dir.name, e)
        curve = []
    if curve:  # the newest fit of the newest rated candidate (metrics.csv may lag behind it)
        out["elo"], out["elo_version"] = curve[-1]["elo"], curve[-1]["version"]
    latest = run_dir / MODEL_PATH
    if latest.is_file():
        try:
            out["network"] = roots.relative(latest)
        except ValueError:
            out["network"] = None  # a link out of the roots is never offered
    return out


def list_runs(roots: Roots, running_within_s: float, max_bytes: int) -> list[dict[str, Any]]:
    """Every run in the runs folder, newest first."""
    if not roots.runs.is_dir():
        return []
    runs = [p for p in roots.runs.iterdir() if is_run(p)]
    lines = [run_status(p, roots, running_within_s, max_bytes) for p in runs]
    lines.sort(key=lambda r: r.get("updated", 0.0), reverse=True)
    return lines


def metrics(
    run_dir: Path, max_bytes: int, keys: list[str] | None = None
) -> dict[str, list[list[float]]]:
    """key -> [[step, time_s, value], ...] for the wanted keys (all when None)."""
    series = read_metrics(run_dir / METRICS_CSV, max_bytes)
    wanted = keys if keys is not None else sorted(series)
    return {k: [[s, t, v] for s, t, v in series.get(k, []) if math.isfinite(v)] for k in wanted}


def elo_curve(
    run_dir: Path, max_bytes: int, series: dict[str, list[tuple[int, float, float]]] | None = None
) -> list[dict[str, float | int | None]]:
    """Each rated candidate by weights version: Elo, its interval, the step it was published at.

    The newest fit (eval/ratings.csv, rows ``vN``) wins over the figures metrics.csv logged when
    each candidate was first rated, since every later game refines the whole fit.
    """
    if series is None:
        series = read_metrics(run_dir / METRICS_CSV, max_bytes)
    first_step: dict[int, int] = {}
    for step, _t, value in series.get(M.WEIGHTS_VERSION, []):
        if math.isfinite(value):
            first_step.setdefault(int(value), step)
    logged: dict[int, dict[str, float | None]] = defaultdict(dict)
    for key in ELO_KEYS:
        for step, _t, value in series.get(key, []):
            logged[step][key.removeprefix(M.EVAL_PREFIX)] = _finite(value)
    points: dict[int, dict[str, float | None]] = {}
    for row in logged.values():
        if row.get("version") is not None and row.get("elo") is not None:
            points[int(row["version"])] = {
                "elo": row["elo"],
                "lower": row.get("elo_lower"),
                "upper": row.get("elo_upper"),
            }
    for row in ratings(run_dir, max_bytes):
        if re.fullmatch(r"v\d+", row["player"]):
            points[int(row["player"][1:])] = {
                "elo": _finite(row["elo"]),
                "lower": _finite(row["lower"]),
                "upper": _finite(row["upper"]),
            }
    return [
        {"version": v, "step": first_step.get(v), **points[v]}
        for v in sorted(points)
        if points[v]["elo"] is not None
    ]


def ratings(run_dir: Path, max_bytes: int) -> list[dict[str, Any]]:
    """The rows of eval/ratings.csv (player, elo, lower, upper, games, points, anchored)."""
    path = run_dir / RATINGS_PATH
    if not path.exists():
        return []
    rows = []
    with open_regular_text(path, max_bytes, "ratings", errors="replace") as f:
        for row in csv.DictReader(f):
            try:
                rows.append(
                    {
                        "player": row["player"],
                        "elo": float(row["elo"]),
                        "lower": float(row["lower"]),
                        "upper": float(row["upper"]),
                        "games": int(row["games"]),
                        "points": float(row["points"]),
                        "anchored": row.get("anchored") == "True",
                    }
                )
            except (KeyError, ValueError):
                continue  # a row cut short while the evaluator rewrote the file
    return rows


def game_files(run_dir: Path) -> list[dict[str, Any]]:
    """PDN files of the run (self-play samples first, newest first within a folder)."""
    out = []
    for folder in GAME_FOLDERS:
        d = run_dir / folder
        if not d.is_dir():
            continue
        files = sorted(d.glob("*.pdn"), key=lambda p: p.name, reverse=True)
        for p in files:
            if p.is_file() and p.resolve().is_relative_to(run_dir.resolve()):
                out.append({"file": f"{folder}/{p.name}", "bytes": p.stat().st_size})
    return out


def pdn_text(path: Path, max_bytes: int) -> str:
    """A PDN file's text (undecodable bytes replaced)."""
    return read_regular_text(path, max_bytes, "games", errors="replace")


def games_json(path: Path, max_games: int, max_bytes: int) -> list[dict[str, Any]]:
    """The newest ``max_games`` games of a PDN file, newest first (self-play appends to one
    file), each with its number in the file, tags, start FEN and moves."""
    games = read_pdn(pdn_text(path, max_bytes))
    first = max(0, len(games) - max_games)
    return [
        {
            "number": k + 1,
            "tags": g.tags,
            "fen": g.start().fen(),
            "moves": g.moves,
            "result": g.result,
        }
        for k, g in reversed(list(enumerate(games[first:], start=first)))
    ]


def live_game(roots: Roots, run: str, within_s: float) -> dict[str, Any]:
    """The run's live game (``games/live.json``, read through the path checks) with its age in
    seconds; NotFound when there is none, it is older than ``within_s`` or the run has
    finished (its summary is written: the last game it left is not in progress)."""
    path = roots.run_file(run, LIVE_FILE)  # the path checks first: a link out is refused
    if (roots.run(run) / SUMMARY_FILE).is_file():
        raise NotFound(f"run {run!r} has finished: no game in progress")
    live = read_live_file(path)
    age = max(0.0, time.time() - live["updated"])
    if age > within_s:
        raise NotFound(f"run {run!r}: no game in progress (the newest is {age:.0f} s old)")
    return live | {"age_s": age}


__all__ = [
    "elo_curve",
    "game_files",
    "games_json",
    "is_run",
    "list_runs",
    "live_game",
    "metrics",
    "pdn_text",
    "ratings",
    "run_status",
]
