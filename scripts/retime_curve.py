"""Puts the candidates of a run's Elo curve that lost their publication metadata back where they
were published: wall time on the run's own clock and self-play positions, read from the
learner's metrics.csv at the candidate's step.

    python scripts/retime_curve.py runs/NAME [--out CSV] [--plot PNG]

For runs whose evaluator read a candidate's publication metadata only after its games: when the
learner published more than the weights channel keeps (8 versions) during those games, as a
small network does, the curve lost the candidate's positions and took the time it was rated,
a minute or more late, as its wall time. The learner logs `learner/wall_s` and
`replay/positions_added` with the step every `logging.csv_every_s` (10 s), so each candidate's
values are interpolated between the two rows around its step. The step itself comes from the
weights' header and is right in any case. Ratings and intervals are left as they are.
``--plot`` redraws the curve (evaluation.ladder.report.plot_curve) with the rungs the run's
eval/ratings.csv lists as anchored.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from checkerzero.metric_names import REPLAY_POSITIONS_ADDED, WALL_S
from checkerzero.metrics import read_metrics
from checkerzero.run_files import CURVE_CSV, EVAL_DIR, RATINGS_PATH
from evaluation.ladder.report import CurvePoint, plot_curve, read_curve_csv, write_curve_csv

CURVE = Path(EVAL_DIR) / CURVE_CSV
RATINGS = Path(RATINGS_PATH)


def interpolate(series: Sequence[tuple[int, float, float]], step: int) -> float | None:
    """The series' value at ``step``, linear between the logged rows around it; None outside
    them (the metrics do not cover that step). Of several rows at one step (the learner waiting
    for self-play) the first counts: the step was reached, and its weights published, then."""
    first: dict[int, float] = {}
    for s, _t, v in sorted(series, key=lambda row: row[1]):
        first.setdefault(s, v)
    points = sorted(first.items())
    steps = [s for s, _ in points]
    i = bisect.bisect_left(steps, step)
    if i < len(steps) and steps[i] == step:
        return points[i][1]
    if i == 0 or i == len(steps):
        return None
    (s0, v0), (s1, v1) = points[i - 1], points[i]
    return v0 + (v1 - v0) * (step - s0) / (s1 - s0)


def retime(points: Sequence[CurvePoint], metrics: Path) -> list[CurvePoint]:
    """``points`` with wall_s and positions taken from ``metrics`` at the step of each one
    that lost them (no positions); the others, which the evaluator read in time, and a point
    the metrics do not cover, keep their values."""
    series = read_metrics(metrics)
    wall, positions = series.get(WALL_S, []), series.get(REPLAY_POSITIONS_ADDED, [])
    if not wall or not positions:
        raise ValueError(f"{metrics}: no learner/wall_s or replay/positions_added rows")
    out = []
    for p in points:
        if p.step is None or p.positions is not None:
            out.append(p)
            continue
        w, n = interpolate(wall, p.step), interpolate(positions, p.step)
        out.append(
            dataclasses.replace(
                p,
                wall_s=p.wall_s if w is None else round(w, 1),
                positions=p.positions if n is None else round(n),
            )
        )
    return out


def anchored_rungs(path: Path) -> dict[str, float]:
    """The rungs (anchored players) of an eval/ratings.csv and their ratings."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if not {"player", "elo", "anchored"} <= set(reader.fieldnames or ()):
            raise ValueError(f"{path}: not a ratings file (no player, elo and anchored columns)")
        return {r["player"]: float(r["elo"]) for r in reader if r["anchored"] == "True"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a run directory (eval/curve.csv, metrics.csv)")
    parser.add_argument("--out", type=Path, help="where to write (default: over eval/curve.csv)")
    parser.add_argument("--plot", type=Path, help="also draw the retimed curve to this PNG")
    args = parser.parse_args(argv)
    try:
        points = read_curve_csv(args.run_dir / CURVE)
        fixed = retime(points, args.run_dir / "metrics.csv")
        rungs = anchored_rungs(args.run_dir / RATINGS) if args.plot else {}
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or args.run_dir / CURVE
    write_curve_csv(fixed, out)
    if args.plot:
        plot_curve(fixed, rungs, args.plot)
    moved = [
        b.wall_s - a.wall_s
        for a, b in zip(points, fixed, strict=True)
        if a.wall_s is not None and b.wall_s is not None
    ]
    print(
        f"{out}: {len(fixed)} candidates; wall time moved by {min(moved, default=0):+.0f} to "
        f"{max(moved, default=0):+.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
