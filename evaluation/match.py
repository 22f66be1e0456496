"""`python -m evaluation.match A B`: a match between two players, printed and saved.

    python -m evaluation.match minimax:6 minimax:4 --games 40 --out games.pdn

It prints the progress, W/D/L from A's side, the score, an Elo difference with its 95%
interval, the pentanomial counts and what each player's search did per move (simulations of an
MCTS player, depth and nodes of alpha-beta; ``a_search`` / ``b_search`` in the JSON), and writes
every game as PDN (tags: players, opening, result, termination) and the figures as JSON. A
network that searches to a number of simulations plays ``--side-by-side`` pairs at once in each
worker, its games' searches batched into one forward pass. With ``--journal FILE`` each
finished game pair is written to FILE as it ends, and a match started again with the same FILE
plays only the pairs it lacks (`evaluation.matches.journal`): a four-hour timed match can stop and
go on. The matches themselves are `evaluation.matches.workers`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from checkerzero.config import compose
from evaluation.matches.games import DEFAULT_MAX_PLIES
from evaluation.matches.journal import MatchJournal
from evaluation.matches.records import PairRecord
from evaluation.matches.workers import SIDE_BY_SIDE, run_match
from evaluation.players.alphabeta import minimax_options
from evaluation.players.defaults import eval_mcts_settings
from game.openings import KINDS as OPENING_KINDS
from game.openings import load_openings
from game.pdn import write_pdn


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.match",
        description="Play a match between two players from an opening deck, colours reversed.",
    )
    parser.add_argument(
        "a",
        help="player A: minimax:D, minimax:tMS[,tm] (,tm: time managed over the game), "
        "ab+nn:D or ab+nn:tMS[,tm] (the learned evaluation), random[:SEED], uniform-mcts[:...], "
        "or a checkpoint with :sims=N or :tMS",
    )
    parser.add_argument("b", help="player B (same forms)")
    parser.add_argument("--games", type=int, default=20, help="number of games (even; default 20)")
    parser.add_argument("--out", type=Path, help="write every game to this PDN file")
    parser.add_argument("--json", type=Path, help="write the result's figures to this JSON file")
    parser.add_argument(
        "--journal",
        type=Path,
        help="write each finished game pair to this file as it ends; a match started again with "
        "the same journal plays only the pairs it lacks (an interrupted match goes on)",
    )
    parser.add_argument("--openings", choices=OPENING_KINDS, default="deck")
    parser.add_argument("--seed", type=int, default=0, help="opening order (default 0)")
    parser.add_argument("--max-plies", type=int, default=DEFAULT_MAX_PLIES)
    parser.add_argument("--size", type=int, choices=(6, 8), default=8, help="board side")
    parser.add_argument("--ray", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--side-by-side",
        type=int,
        default=SIDE_BY_SIDE,
        metavar="N",
        help=f"game pairs each worker plays at once when a network searches to a number of "
        f"simulations: their searches share forward passes (default {SIDE_BY_SIDE}; 1: one "
        f"pair after another; the moves are the same)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="config overrides, key=value (the minimax players read evaluation.baseline)",
    )
    parser.add_argument(
        "--adjudicate",
        action="store_true",
        help="end each game as soon as it reaches the endgame database (exact result)",
    )
    parser.add_argument(
        "--egdb-dir", default=None, help="endgame database folder (default: the egdb.dir key)"
    )
    parser.add_argument(
        "--egdb-pieces", type=int, default=None, help="its most pieces (default: egdb.pieces)"
    )
    return parser


def _journal_header(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    """What makes two runs the same match: a journal of any other is refused."""
    return {
        "a": args.a,
        "b": args.b,
        "games": args.games,
        "openings": args.openings,
        "seed": args.seed,
        "size": args.size,
        "max_plies": args.max_plies,
        "adjudicate": args.adjudicate,
        "egdb_pieces": options["egdb_pieces"],
        "overrides": list(args.overrides),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        openings = load_openings(args.openings, size=args.size)
        cfg = compose(args.overrides)
        options = minimax_options(cfg.evaluation.baseline) | {"mcts": eval_mcts_settings(cfg)}
        options["egdb_dir"] = args.egdb_dir or str(cfg.egdb.dir)
        options["egdb_pieces"] = args.egdb_pieces or int(cfg.egdb.pieces)
        # the network players' switches as the overrides set them (a spec's egdb=/book= wins)
        options["play_egdb"] = bool(cfg.egdb.play)
        options["play_book"] = bool(cfg.evaluation.book)
        started = time.monotonic()
        played: list[PairRecord] = []
        journal = None
        if args.journal:
            journal = MatchJournal(args.journal, _journal_header(args, options))
            played = journal.open()
            if played:
                print(f"{len(played)} game pairs already played, from {args.journal}", flush=True)

        def report(pair: PairRecord, done: int, total: int) -> None:
            if journal is not None:
                journal.add(pair)
            print(
                f"[{done}/{total}] {pair.opening}: {pair.a_black.result} / {pair.a_white.result}"
                f" -> {pair.a_points:g} for {args.a} ({time.monotonic() - started:.0f} s)",
                flush=True,
            )

        result = run_match(
            args.a,
            args.b,
            openings,
            games=args.games,
            seed=args.seed,
            max_plies=args.max_plies,
            size=args.size,
            workers=args.workers,
            ray_mode=args.ray,
            player_options=options,
            progress=report,
            adjudicate=args.adjudicate,
            side_by_side=args.side_by_side,
            played=played,
        )
    except ValueError as e:  # ConfigError included
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(result.summary())
    for line in result.search_summary():
        print(f"  {line}")
    if args.out:
        args.out.write_text(write_pdn(result.pdn_games()))
        print(f"wrote {result.num_games} games to {args.out}")
    if args.json:
        args.json.write_text(json.dumps(result.summary_dict(), indent=1, allow_nan=False) + "\n")
        print(f"wrote the figures to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
