"""The rules of English checkers (and a 6x6 training board), notation, and network encoding.

The rules live in the compiled core (`game._core`, C++); `Position` is the Python API over it,
`game.pdn` reads and writes games, `game.encoding` turns positions into network input.
"""

from game._core import HISTORY, NUM_PLANES, Game, Move
from game.notation import BoardSetup, format_fen, parse_fen
from game.position import Position

__all__ = [
    "HISTORY",
    "NUM_PLANES",
    "BoardSetup",
    "Game",
    "Move",
    "Position",
    "format_fen",
    "parse_fen",
]
