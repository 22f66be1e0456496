"""How far apart two matches over the same deck are, opening by opening.

    python scripts/paired_diff.py BASE.pdn OTHER.pdn [OTHER.pdn ...] [--player NAME]

Each PDN is one `python -m evaluation.match` run of the same player pair over the same openings
with both colours (a setting changed on one side). For every opening both files played with
both colours, the player's points in OTHER minus those in BASE; printed is the mean difference
in score terms with its standard error over the openings, so two search settings can be told
apart on the same games. ``--player`` names the side to score by the start of its name (by
default: the Black player of BASE's first game).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from game.pdn import read_pdn

POINTS = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}


def points_by_game(path: Path, player: str) -> dict[tuple[str, bool], float]:
    """``(opening, player has Black) -> the player's points`` of each game in ``path``."""
    out: dict[tuple[str, bool], float] = {}
    for game in read_pdn(path.read_text(), replay=False):
        black, white = game.tags.get("Black", ""), game.tags.get("White", "")
        if game.result not in POINTS or not (black.startswith(player) ^ white.startswith(player)):
            raise ValueError(
                f"{path}: a game ({black} - {white}, {game.result}) without {player!r} on exactly "
                "one side or without a result"
            )
        as_black = black.startswith(player)
        key = (game.tags.get("Opening", ""), as_black)
        if key in out:
            raise ValueError(f"{path}: opening {key[0]!r} played twice with the same colours")
        out[key] = POINTS[game.result][0 if as_black else 1]
    return out


def paired_difference(
    base: dict[tuple[str, bool], float], other: dict[tuple[str, bool], float]
) -> tuple[float, float, int]:
    """``(mean score difference, its standard error, openings)`` over the openings both played
    with both colours, in score terms (0.05 is 5 points in 100 games)."""
    openings = sorted({o for o, _ in base} & {o for o, _ in other})
    diffs = [
        sum(other[(o, c)] - base[(o, c)] for c in (True, False)) / 2
        for o in openings
        if all((o, c) in base and (o, c) in other for c in (True, False))
    ]
    n = len(diffs)
    if n < 2:
        raise ValueError(f"only {n} opening(s) played with both colours in both files")
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    return mean, sd / math.sqrt(n), n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the reference match's PDN")
    parser.add_argument("others", type=Path, nargs="+", help="matches to compare with it")
    parser.add_argument("--player", help="the side to score (the start of its name)")
    args = parser.parse_args(argv)
    try:
        player = args.player
        if player is None:
            first = read_pdn(args.base.read_text(), replay=False)
            if not first:
                raise ValueError(f"{args.base}: no games")
            player = first[0].tags.get("Black", "")
        base = points_by_game(args.base, player)
        print(f"{args.base.name}: {player}, {100 * sum(base.values()) / len(base):.1f}%")
        for path in args.others:
            other = points_by_game(path, player)
            mean, se, n = paired_difference(base, other)
            print(
                f"{path.name}: {100 * sum(other.values()) / len(other):.1f}%, "
                f"{100 * mean:+.1f} points in 100 against the base (SE {100 * se:.1f}, "
                f"{n} openings paired)"
            )
    except (OSError, ValueError) as err:
        print(f"paired_diff: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
