"""Endgame database at play: the share of won endings a database player wins within the 40-move
rule, with the distances to conversion and with the win/draw/loss values alone.

    python benchmarks/egdb_convert.py --dir egdb --pieces 6 [--board 8] [--positions 200]
        [--seed 0] [--min-distance 0] [--values-depth 4]

Positions: drawn uniformly over every position of exactly ``--pieces`` pieces (either side to
move) that the database scores a win for the side to move, that is not over and that is at least
``--min-distance`` plies from conversion. Each is played out under the rules from a fresh 40-move
count: the winner and the loser are both
``evaluation.players.endgame.database_move`` on the database, the loser holding out as long as
the distances allow. With distances the winner plays the shortest conversion; the control plays
the same positions with the values alone (the winner keeps the win and picks among those moves by
a ``--values-depth``-ply progress search). Printed: wins, draws (the 40-move rule or repetition)
and losses of each, the mean game length, seconds, and the machine's load. The database must be
built with its distance files (``python -m game.egdb build --pieces N``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from evaluation.players.endgame import database_move
from game import Position, _core
from game.egdb import WIN, EndgameDatabase, signatures


def won_positions(
    db: EndgameDatabase, pieces: int, n: int, seed: int, min_distance: int = 0
) -> list[str]:
    rng = random.Random(seed)
    sigs = [s for s in signatures(db.size, pieces) if sum(s) == pieces]
    weights = [_core.egdb_index_size(db.size, s) for s in sigs]  # uniform over positions
    out: list[str] = []
    while len(out) < n:
        sig = rng.choices(sigs, weights=weights)[0]
        black, white, kings = _core.egdb_board_at(
            db.size, sig, rng.randrange(_core.egdb_index_size(db.size, sig))
        )
        game = _core.Game.from_bitboards(db.size, black, white, kings, bool(rng.getrandbits(1)))
        pos = Position.from_game(game)
        value, plies = db.distance(pos)
        if not pos.is_over() and value == WIN and plies >= min_distance:
            out.append(pos.fen())
    return out


def play_out(fen: str, size: int, winner_db, loser_db, depth: int) -> tuple[str, int]:
    """("win" | "draw" | "loss" for the side to move at the start, plies played)."""
    pos = Position.from_fen(fen, size)
    winner = pos.turn
    plies = 0
    while not pos.is_over():
        db = winner_db if pos.turn == winner else loser_db
        found = database_move(pos, db, depth=depth)
        if found is None:  # left the database (cannot happen: moves only shrink it)
            raise RuntimeError(f"{pos.fen()}: not in the database")
        pos.play(found[0])
        plies += 1
    result = pos.game.result()
    if result == 3:
        return "draw", plies
    return ("win" if (result == 1) == (winner == "B") else "loss"), plies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="egdb", help="database folder (with distance files)")
    parser.add_argument("--pieces", type=int, default=6, help="pieces of the test positions")
    parser.add_argument("--board", type=int, default=8, choices=(6, 8))
    parser.add_argument("--positions", type=int, default=200, help="won positions to play out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--min-distance",
        type=int,
        default=0,
        help="only positions at least this many plies from conversion (most random wins convert "
        "at once)",
    )
    parser.add_argument(
        "--values-depth", type=int, default=4, help="progress-search plies of the control"
    )
    args = parser.parse_args(argv)
    db = EndgameDatabase(args.dir, args.board, args.pieces, distances=True)
    plain = EndgameDatabase(args.dir, args.board, args.pieces, distances=False)
    fens = won_positions(db, args.pieces, args.positions, args.seed, args.min_distance)
    start_plies = sorted(db.distance(Position.from_fen(f, args.board))[1] for f in fens)
    print(
        f"{len(fens)} won {args.pieces}-piece positions on {args.board}x{args.board} "
        f"(seed {args.seed}); distance to conversion median {start_plies[len(fens) // 2]}, "
        f"longest {start_plies[-1]} plies, {sum(p >= 80 for p in start_plies)} at 80 or more; "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    for label, winner_db, depth in (
        ("distances", db, 1),
        (f"values + {args.values_depth}-ply progress search", plain, args.values_depth),
    ):
        start = time.monotonic()
        games = [play_out(f, args.board, winner_db, db, depth) for f in fens]
        outcomes = [o for o, _ in games]
        won = outcomes.count("win")
        won_plies = [p for o, p in games if o == "win"] or [0]
        print(
            f"{label}: won {won}/{len(fens)} ({100 * won / len(fens):.1f}%) within the 40-move "
            f"rule, drawn {outcomes.count('draw')}, lost {outcomes.count('loss')}; won games "
            f"{sum(won_plies) / len(won_plies):.1f} plies on average; "
            f"{time.monotonic() - start:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
