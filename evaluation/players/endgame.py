"""The endgame database at play: exact values at the root, converted into a result.

A position in the database (``game.egdb``) has an exact win, draw or loss; a player that only
keeps the value can shuffle a won ending into a draw by the 40-move rule. A database built with
its distances to conversion (plies until a capture, a crowning or the end, ``game/cpp/egdb.h``)
converts: at a won root :func:`database_move` plays, among the moves that keep the win, the one
with the shortest distance (a capture or crowning that keeps it first), and at a lost root the
one with the longest, with no search. Each conversion lands in a smaller slice, so the win is
reached; and a distance under 80 plies is reached within the 40-move rule.

Without distances (a folder built before them), and at a drawn root, it picks in two steps:

1. keep the value: only the moves whose resulting position the database scores best for the
   mover (a win kept, else a draw, else any loss);
2. make progress among them: each kept move is searched by the alpha-beta (``game._core``)
   from the position it leads to and with the game's history, with the database only below the
   root's number of pieces: a capture into a smaller ending of the same value is reached by the
   shortest line (``DATABASE_WIN - n``; each one is progress the database can see, where the
   value alone scores every winning move alike), a forced win within the horizon scores by its
   distance (``MATE_SCORE - n``), a repetition or the 40-move rule as a draw, and otherwise the
   hand evaluation (material, advancement, kings in the centre) ranks them. Ties go to the move
   that leaves the opponent fewest pieces, then to the first.

A lost root plays the longest resistance the same way (the alpha-beta's score of a loss is
largest when it is furthest away). The MCTS players also take the database's values at their
search leaves (``BatchedMCTS.set_egdb``); see :class:`evaluation.players.mcts.MCTSPlayer`.

:func:`open_for_play` opens the database the ``egdb`` config group names without building it: a
player asked to use an absent database says so in one line and plays without it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from game import _core
from game.egdb import DRAW, LOSS, UNKNOWN, WIN, EgdbError, EndgameDatabase
from game.position import Move, Position

logger = logging.getLogger(__name__)

# The mover's preference among the values the database gives the position after a move (the
# opponent to move): the opponent lost is best, a draw next, the opponent won worst.
_KEEP_ORDER = {LOSS: 0, DRAW: 1, WIN: 2}
# Transposition table of the progress search, per call: a 4-6 piece ending fits in a few MB.
PROGRESS_TT_MB = 8
# Milliseconds of progress search a timed player keeps for itself at least per kept move (a
# tiny time budget still searches a few plies rather than none).
MIN_PROGRESS_MS = 2


def _pieces(game: _core.Game) -> int:
    return (game.black | game.white).bit_count()


def _opponent_pieces(game: _core.Game) -> int:
    """Pieces of the side to move in ``game`` (after our move: the opponent's)."""
    return (game.white if game.white_to_move else game.black).bit_count()


def database_move(
    position: Position,
    db: EndgameDatabase,
    *,
    depth: int = 0,
    time_ms: int = 0,
) -> tuple[Move, int] | None:
    """``(move, value)`` at a root the database knows (value for the side to move: WIN, DRAW or
    LOSS), None when the position is not in it or the game is over.

    The move keeps the database's value and is the best of those by an alpha-beta search without
    the database from each kept move's position (``depth`` plies, or ``time_ms`` split over the
    kept moves; exactly one of them > 0): module docstring.
    """
    if (depth > 0) == (time_ms > 0):
        raise ValueError(f"give depth or time_ms, got depth={depth}, time_ms={time_ms}")
    if position.is_over() or position.game.mid_jump:
        return None
    value = db.value(position)
    if value == UNKNOWN:
        return None
    moves = position.legal_moves()
    children: list[tuple[Move, _core.Game, int]] = []
    for move in moves:
        child = position.copy()
        child.play(move)
        after = db.value(child) if not child.is_over() else _ended_value(child)
        children.append((move, child.game, after))
    best = min(_KEEP_ORDER.get(after, 3) for _, _, after in children)
    kept = [(m, g) for m, g, after in children if _KEEP_ORDER.get(after, 3) == best]
    if value in (WIN, LOSS) and db.distances:
        return _distance_move(position.game, kept, db, value), value
    smaller = _smaller_database(db, _pieces(position.game))
    share = max(MIN_PROGRESS_MS, time_ms // max(1, len(kept))) if time_ms else 0
    scored = []
    for index, (move, game) in enumerate(kept):
        if game.result() != 0:  # the move ends the game: a win now is the best progress
            score = _core.MATE_SCORE if _ended_value_game(game) == LOSS else 0
        elif len(kept) == 1:
            score = 0  # nothing to compare
        else:
            result = _core.alphabeta_search(
                game, depth, share, _core.EvalWeights(), PROGRESS_TT_MB, smaller, None
            )
            score = -result.score
        scored.append((-score, _opponent_pieces(game), index, move))
    scored.sort(key=lambda t: t[:3])
    return scored[0][3], value


def _men(game: _core.Game) -> int:
    return ((game.black | game.white) & ~game.kings).bit_count()


def _distance_move(root: _core.Game, kept: list[tuple[Move, _core.Game]], db, value: int) -> Move:
    """The kept move with the shortest distance to conversion at a won root (the longest at a
    lost one). A move that captures, crowns or ends the game converts now (distance 1); a quiet
    one is one ply more than its position's distance. Ties: the position after it by its own
    distance (shorter for the winner, longer for the loser), then the first."""
    sign = 1 if value == WIN else -1
    ranked = []
    for index, (move, game) in enumerate(kept):
        converts = _pieces(game) < _pieces(root) or _men(game) < _men(root)
        after = 0 if game.result() != 0 else max(db.distance(game)[1], 0)
        plies = 1 if converts or game.result() != 0 else after + 1
        ranked.append((sign * plies, sign * after, index, move))
    return min(ranked, key=lambda t: t[:3])[3]


def root_move(position: Position, db: EndgameDatabase, *, time_ms: int, depth: int) -> Move | None:
    """A player's move at a root ``db`` knows (None: not in it, or of another board: search).
    A timed player (``time_ms`` > 0) gives the progress search four fifths of its time and keeps
    a fifth for that search's overshoot; one without a time searches ``depth`` plies."""
    if db.size != position.size:
        return None
    found = database_move(
        position,
        db,
        depth=0 if time_ms else depth,
        time_ms=max(1, time_ms * 4 // 5) if time_ms else 0,
    )
    return None if found is None else found[0]


def _smaller_database(db: EndgameDatabase, pieces: int) -> Any:
    """The core database of ``db``'s endings with fewer than ``pieces`` pieces (None below two
    pieces, or where it cannot be opened): what the progress search probes."""
    fewer = min(db.max_pieces, pieces - 1)
    if fewer < 2:
        return None
    smaller = open_for_play(db.folder, db.size, fewer, distances=db.distances)
    return smaller.core if smaller is not None else None


def _ended_value_game(game: _core.Game) -> int:
    """The value for the side to move of a finished game (a loss when it has no move)."""
    result = game.result()  # 1: Black won, 2: White won, 3: draw (game.position RESULT_TEXT)
    if result == 3:
        return DRAW
    black_won = result == 1
    return LOSS if black_won == game.white_to_move else WIN


def _ended_value(position: Position) -> int:
    return _ended_value_game(position.game)


@functools.cache
def _open(folder: str, size: int, pieces: int, distances: bool | None) -> EndgameDatabase | None:
    try:
        return EndgameDatabase(folder, size, pieces, distances=distances)
    except (EgdbError, ValueError, OSError) as e:
        first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
        logger.warning(
            "endgame database at play: %s x %s up to %d pieces not usable in %s (%s); playing "
            "without it (build it with: python -m game.egdb build --pieces %d --board %d --out %s)",
            size,
            size,
            pieces,
            folder,
            first_line,
            pieces,
            size,
            folder,
        )
        return None


def open_for_play(
    folder: str | Path, size: int, pieces: int, distances: bool | None = None
) -> EndgameDatabase | None:
    """The database in ``folder`` for play, or None (with one warning line naming the folder and
    the build command) when it is absent or damaged; never builds it. Opened once per process.
    ``distances``: with its distance files when listed (None), without (False), required (True)."""
    return _open(str(folder), int(size), int(pieces), distances)


def play_database_settings(egdb_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``{"on", "dir", "pieces", "depth"}`` of the ``egdb`` config group for players."""
    return {
        "on": bool(egdb_cfg.get("play", False)),
        "dir": str(egdb_cfg["dir"]),
        "pieces": int(egdb_cfg["pieces"]),
        "depth": int(egdb_cfg.get("play_depth", DEFAULT_PROGRESS_DEPTH)),
    }


# Plies of the progress search at a database root for players without a time per move
# (conf/egdb play_depth): 3- and 4-piece wins on 8x8 fit in it (tests/test_play_knowledge.py).
DEFAULT_PROGRESS_DEPTH = 16


__all__ = [
    "DEFAULT_PROGRESS_DEPTH",
    "database_move",
    "open_for_play",
    "play_database_settings",
]
