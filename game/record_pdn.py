"""Game records as PDN: the moves of a record in notation, and a record as a PDN game.

A record (game.records) keeps positions and actions; a person reads moves. `record_moves`
replays a record's actions into moves (a multi-jump is one move of several actions), and
`record_to_pdn` writes a record as a PDN game with the standard tags, from the ballot's
opening when it started from one. Self-play's PDN file and ``python -m actors --out`` use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from game import _core
from game import openings as op
from game.pdn import PdnGame, game_from_position
from game.position import END_REASONS, RESULT_TEXT, Position
from game.records import RESIGNED, GameRecord, Termination

PDN_GAME_TYPE_ENGLISH = "21"  # PDN's GameType for English draughts (8x8, Black moves first)

TERMINATION_TEXT = {
    **END_REASONS,
    Termination.RESIGNATION: "resignation",
    Termination.DATABASE: "endgame database",
}


def start_game(record: GameRecord) -> _core.Game:
    """The game at the record's first position (no history)."""
    if record.num_decisions == 0:
        raise ValueError("an empty record has no start position")
    return _core.Game.from_packed(record.board_size, record.positions[0])


def record_moves(record: GameRecord) -> list[str]:
    """The record's moves in notation (a multi-jump is one move made of several decisions)."""
    game = start_game(record)
    moves: list[str] = []
    turn: list[int] = []
    before = game.copy()
    for action in record.played:
        if action == RESIGNED:
            break
        turn.append(int(action))
        game.step(int(action))
        if not game.mid_jump:
            moves.append(str(before.move_of(turn)))
            turn = []
            before = game.copy()
    return moves


def record_to_pdn(
    record: GameRecord,
    index: int = 0,
    openings: Sequence[op.Opening] = (),
    tags: Mapping[str, str] | None = None,
) -> PdnGame:
    """A PdnGame for a record, with the standard tags (``tags`` adds to or replaces them).

    A game that started from a ballot of ``openings`` (the record's ``opening_id``) is written
    from the initial position with the ballot's moves first, as a person replays it; any other
    start is a FEN set-up at the record's first position.
    """
    player = f"checkerzero v{record.network_version}"
    game_tags = {
        "Event": "checkerzero self-play",
        "Round": str(index + 1),
        "Black": player,
        "White": player,
    }
    if record.board_size == 8:
        game_tags["GameType"] = PDN_GAME_TYPE_ENGLISH
    game_tags |= dict(tags or {})
    game_tags["Termination"] = TERMINATION_TEXT[record.termination]
    result = RESULT_TEXT[record.result]
    start = Position.from_game(start_game(record))
    moves = record_moves(record)
    ballot = next((o for o in openings if o.id == record.opening_id), None)
    if ballot is not None and ballot.moves:
        game_tags["Opening"] = f"{ballot.name}: {' '.join(ballot.moves)}"
        if ballot.size == record.board_size and ballot.fen == start.fen():
            initial = Position(record.board_size)
            return game_from_position(initial, [*ballot.moves, *moves], result, game_tags)
    return game_from_position(start, moves, result, game_tags)
