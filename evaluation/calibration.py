"""`python -m evaluation.calibration CHECKPOINT`: the value head's W/D/L on expert positions.

    python -m evaluation.calibration runs/x/checkpoints/latest.safetensors --games 2000

Samples positions from the OCA archive (shipped with the package, or --archive), evaluates them
without search and prints the mean predicted win/draw/loss per game result
(`evaluation.value_head_wdl` holds the measurement itself).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from checkerzero.network.inference import load_for_play
from evaluation.value_head_wdl import calibrate, format_table, sample_positions
from game.archive import ArchiveError, read_archive
from game.pdn import iter_pdn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.calibration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("checkpoint", help="network checkpoint (.safetensors)")
    parser.add_argument(
        "--archive",
        type=Path,
        default=None,
        help="PDN of expert games, .pdn or .pdn.xz (default: the shipped OCA archive)",
    )
    parser.add_argument("--games", type=int, default=2000, help="games sampled from the archive")
    parser.add_argument("--per-game", type=int, default=4, help="positions sampled per game")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, help="also write the table as CSV")
    args = parser.parse_args(argv)
    try:
        text = read_archive(args.archive)
    except ArchiveError as err:
        sys.exit(f"error: {err}")
    rng = np.random.default_rng(args.seed)
    games = list(iter_pdn(text))
    picked = [
        games[i] for i in rng.choice(len(games), size=min(args.games, len(games)), replace=False)
    ]
    packed, outcome = sample_positions(picked, args.per_game, rng)
    inference, _ = load_for_play(args.checkpoint, 8)
    rows = calibrate(inference, packed, outcome)
    print(format_table(rows))
    if args.csv:
        with args.csv.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["outcome", "positions", "win", "draw", "loss"])
            for r in rows:
                w.writerow([r.outcome, r.positions, *r.mean_wdl])


if __name__ == "__main__":
    main()
