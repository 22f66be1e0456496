"""What the Training view's Elo chart draws, from the run's own files.

The chart's points are the run's ``eval/curve.csv`` when it has one (the evaluator's table: each
rated candidate's version, the step and wall time it was published at, its Elo with the 95%
interval, its games), so the page and the file agree to the digit; a run without one (older, or
rated on the 6x6 board) falls back to ``play.runs.elo_curve`` (metrics.csv and ratings.csv).
The ladder's rungs come from the run's ``eval/ratings.csv`` (every player that is not a
candidate ``vN``), drawn as horizontal lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from checkerzero.run_files import CURVE_CSV, EVAL_DIR
from evaluation.ladder.report import read_curve_csv
from game.files import read_regular_text
from play import runs as run_files

CANDIDATE = re.compile(r"v\d+")  # a rated candidate's name in ratings.csv


def elo_chart(run_dir: Path, max_bytes: int) -> dict[str, Any]:
    """{points: [{version, step, wall_s, positions, elo, lower, upper, games}], rungs: [{player,
    elo}], source: the file the points were read from}."""
    curve = run_dir / EVAL_DIR / CURVE_CSV
    source = f"{EVAL_DIR}/{CURVE_CSV}"
    points: list[dict[str, Any]]
    try:
        text = read_regular_text(curve, max_bytes, "Elo curve")  # no FIFO, device or giant
        read = read_curve_csv(curve, text)
    except FileNotFoundError:
        read = None
    except (OSError, ValueError):
        read = None  # a file being written or of another layout: the metrics still tell
    if read is not None:
        points = [
            {
                "version": p.version,
                "step": p.step,
                "wall_s": p.wall_s,
                "positions": p.positions,
                "elo": p.elo,
                "lower": p.lower,
                "upper": p.upper,
                "games": p.games,
            }
            for p in read
        ]
    else:
        source = "metrics.csv"
        points = run_files.elo_curve(run_dir, max_bytes)
    rungs = [
        {"player": r["player"], "elo": r["elo"]}
        for r in run_files.ratings(run_dir, max_bytes)
        if not CANDIDATE.fullmatch(str(r["player"])) and isinstance(r.get("elo"), (int, float))
    ]
    return {"points": points, "rungs": sorted(rungs, key=lambda r: r["elo"]), "source": source}


__all__ = ["elo_chart"]
