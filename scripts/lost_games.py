"""Where a player's lost games were lost.

    python scripts/lost_games.py MATCH.pdn [--player NAME] [--depth 10] [--level -50]
        [--evaluation FILE] [--egdb-dir egdb]

For every game of MATCH.pdn that PLAYER (a Black or White tag, exactly; by default the Black
player of the first game) lost, the judge (an alpha-beta search of ``--depth`` plies with
``--evaluation``, the shipped learned evaluation by default) scores each position where the loser
was to move with no capture pending. Printed per game: the last such ply at which the judge still
called the loser's game level (a score of at least ``--level`` centi-men), the pieces on the
board and the judge's score there; the ply at which the game came into the endgame database
(when a folder is given and has one) and its value for the loser there; the game's length and
how it ended. Then the medians, and how many losses were already lost when the database was
reached (lost before the ending) against those that came into it drawn or won (lost in the
ending).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from game import _core, nneval
from game.egdb import EgdbError, available_pieces, open_database
from game.pdn import PdnGame, read_pdn

FLIP = {"win": "loss", "loss": "win", "draw": "draw", None: None}


class Loss(NamedTuple):
    round: str
    opening: str
    plies: int
    termination: str
    level_ply: int | None  # the last ply the judge called level for the loser (None: never)
    level_pieces: int | None
    level_score: int | None
    db_ply: int | None  # where the game came into the database
    db_pieces: int | None
    db_value: str | None  # the loser's value there: win, draw, loss


def _pieces(game: _core.Game) -> int:
    return (game.black | game.white).bit_count()


def read_loss(game: PdnGame, loser_is_black: bool, weights, depth: int, level: int, egdb) -> Loss:
    """One lost game's path, judged from the loser's side."""
    pos = game.start()
    found_level: tuple[int, int, int] | None = None
    db: tuple[int, int, str | None] | None = None
    for ply, move in enumerate(game.moves):
        g = pos.game
        loser_to_move = g.white_to_move != loser_is_black
        if loser_to_move and not g.legal_moves()[0].is_capture:
            score = _core.alphabeta_search(g, depth, 0, None, 16, None, weights).score
            if score >= level:
                found_level = (ply, _pieces(g), score)
        if db is None and egdb is not None and _pieces(g) <= egdb.max_pieces:
            value = egdb.probe(g)
            db = (ply, _pieces(g), value if loser_to_move else FLIP[value])
        pos.play(move)
    return Loss(
        game.tags.get("Round", "?"),
        game.tags.get("Opening", "?"),
        len(game.moves),
        game.tags.get("Termination") or pos.end_reason or "?",
        *(found_level or (None, None, None)),
        *(db or (None, None, None)),
    )


def lost_games(
    games: Sequence[PdnGame], player: str, *, depth: int, level: int, weights, egdb
) -> list[Loss]:
    out = []
    for game in games:
        black, white = game.tags.get("Black"), game.tags.get("White")
        if player not in (black, white) or game.result not in ("1-0", "0-1"):
            continue
        loser_is_black = game.result == "0-1"
        if (black if loser_is_black else white) == player:
            out.append(read_loss(game, loser_is_black, weights, depth, level, egdb))
    return out


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pdn", type=Path, help="a match's games")
    parser.add_argument("--player", help="the player whose losses are read (its exact tag)")
    parser.add_argument("--depth", type=int, default=10, help="the judge's depth (plies)")
    parser.add_argument("--level", type=int, default=-50, help="a level game's lowest score")
    parser.add_argument("--evaluation", type=Path, default=nneval.DEFAULT_PATH)
    parser.add_argument("--egdb-dir", type=Path, default=Path("egdb"))
    args = parser.parse_args(argv)
    if not 1 <= args.depth <= 30:
        print(f"--depth must be in 1..30, got {args.depth}", file=sys.stderr)
        return 2
    try:
        games = read_pdn(args.pdn.read_text())
        weights = nneval.load(args.evaluation).core()
        egdb = None
        pieces = available_pieces(args.egdb_dir, 8) if args.egdb_dir.is_dir() else 0
        if pieces:
            egdb = open_database(args.egdb_dir, 8, pieces)
    except (OSError, ValueError, EgdbError) as e:
        print(e, file=sys.stderr)
        return 2
    if not games:
        print(f"{args.pdn}: no games", file=sys.stderr)
        return 2
    player = args.player or games[0].tags.get("Black", "")
    if not any(player in (g.tags.get("Black"), g.tags.get("White")) for g in games):
        print(f"{args.pdn}: no game of {player!r}", file=sys.stderr)
        return 2
    losses = lost_games(
        games, player, depth=args.depth, level=args.level, weights=weights, egdb=egdb
    )
    print(
        f"{player}: {len(losses)} lost of {len(games)} games; judge: depth {args.depth}, "
        f"{args.evaluation.name}; level: score >= {args.level}; database: "
        + (f"{egdb.max_pieces} pieces" if egdb else "none")
    )
    print(
        f"{'round':<6} {'opening':<9} {'plies':>5}  {'last level: ply, pieces, score':<32} "
        f"{'database: ply, pieces, value':<29} end"
    )
    for x in losses:
        level = (
            "never" if x.level_ply is None else f"{x.level_ply}, {x.level_pieces}, {x.level_score}"
        )
        db = "-" if x.db_ply is None else f"{x.db_ply}, {x.db_pieces}, {x.db_value}"
        print(f"{x.round:<6} {x.opening:<9} {x.plies:>5}  {level:<32} {db:<29} {x.termination}")
    if losses:
        at = [x for x in losses if x.level_ply is not None]
        print(
            f"median: {_median([x.plies for x in losses])} plies; last level at ply "
            f"{_median([x.level_ply for x in at])} "
            f"with {_median([x.level_pieces for x in at])} pieces"
        )
        if egdb:
            entered = [x for x in losses if x.db_ply is not None]
            lost_before = sum(x.db_value == "loss" for x in entered)
            print(
                f"lost before the ending (a loss when the database was reached): {lost_before} of "
                f"{len(losses)}; lost in it (reached drawn or won): {len(entered) - lost_before}; "
                f"never reached: {len(losses) - len(entered)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
