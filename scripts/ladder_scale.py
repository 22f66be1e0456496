"""A match's result on the rated ladder's scale: where the in-run Elo of `evaluation=rated` would
put the player, from its games against a rung alone.

    python scripts/ladder_scale.py runs/sweep-control/final_match.json ... [--table package]

Each JSON is what `python -m evaluation.match --json` writes; one of its two players must be a
rung of the table (the other is rated). The fit is the evaluator's (evaluation.ladder.rungs.fit_all
with the table: the rungs fixed at its ratings, its draw term), so the figure can be set beside
a run's `eval/curve.csv`. The match's own "Elo" is the score's plain logistic difference, on
another scale wherever draws are common.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from checkerzero.config import compose
from evaluation.ladder.rungs import fit_all
from evaluation.ladder.table import read_table, table_path
from evaluation.stats.elo import PairResult


def ladder_rating(match: dict, table_setting: str) -> tuple[str, str, float, float, float]:
    """(rated player, rung, Elo, lower, upper) of the match's non-rung player on the table."""
    path = table_path(table_setting)
    if path is None:
        raise ValueError("--table: name a table (package or a path)")
    table = read_table(path)
    a, b = str(match["player_a"]), str(match["player_b"])
    wins, draws, losses = int(match["wins"]), int(match["draws"]), int(match["losses"])
    if b in table and a not in table:
        rated, rung, row = a, b, PairResult(a, b, wins, draws, losses)
    elif a in table and b not in table:
        rated, rung, row = b, a, PairResult(b, a, losses, draws, wins)
    else:
        raise ValueError(f"{a} vs {b}: exactly one of them must be a rung of {path}")
    elo_cfg = dict(compose([]).evaluation.elo)
    p = fit_all([row], elo_cfg, table=table)[rated]
    return rated, rung, p.elo, p.lower, p.upper


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matches", nargs="+", type=Path, help="final_match.json files")
    parser.add_argument("--table", default="package", help="package (the shipped one) or a path")
    args = parser.parse_args(argv)
    status = 0
    for path in args.matches:
        try:
            rated, rung, elo, lower, upper = ladder_rating(json.loads(path.read_text()), args.table)
        except (OSError, ValueError, KeyError) as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            status = 2
            continue
        interval = f"[{lower:+.0f}, {upper:+.0f}]"
        print(f"{path}: {rated} {elo:+.0f} {interval} (95%, from its games vs {rung})")
    return status


if __name__ == "__main__":
    sys.exit(main())
