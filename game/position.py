"""`Position`: the friendly API over the compiled rules core.

Everything is delegated to `game._core.Game` (C++); this layer adds notation, parsing and clear
errors. Moves are the core's `Move` objects, printed as ``11-15`` or ``15x22x29``.
"""

from __future__ import annotations

import re

from game import _core
from game.notation import BoardSetup, diagram, format_fen, num_squares, parse_fen

Move = _core.Move

# A move as written: ASCII digits, one '-' between the two squares of a step, or 'x' between the
# squares of a capture (all of them, or only some: ``15x29`` for ``15x22x29``). Python's \d and
# int() would also take other scripts' digits and underscores.
_MOVE_TEXT = re.compile(r"[0-9]+(?:-[0-9]+|(?:x[0-9]+)+)")
_MOVE_MARKS = "!?*+"  # annotations that may follow a move
_BITBOARD_LIMIT = 1 << 32

RESULT_TEXT = {1: "1-0", 2: "0-1", 3: "1/2-1/2"}  # PDN: "1-0" means Black (first mover) won
END_REASONS = {1: "no legal move", 2: "threefold repetition", 3: "forty-move rule", 4: "ply cap"}


class Position:
    """A game position with its history (for undo and the repetition rule).

    ``Position()`` is the 8x8 start with Black to move, ``Position(size=6)`` the 6x6 board.
    ``max_plies`` > 0 adds a ply cap that ends the game as a draw flagged ``"ply cap"``.
    """

    __slots__ = ("_game",)

    def __init__(self, size: int = 8, *, max_plies: int = 0) -> None:
        num_squares(size)  # validates the size
        self._game = _core.Game(size, max_plies)

    @classmethod
    def from_fen(cls, fen: str, size: int = 8, *, max_plies: int = 0) -> Position:
        setup = parse_fen(fen, size)
        return cls.from_setup(setup, max_plies=max_plies)

    @classmethod
    def from_setup(cls, setup: BoardSetup, *, max_plies: int = 0) -> Position:
        """The position a BoardSetup describes; ValueError if it is not a position of the rules."""
        num_squares(setup.size)
        for name in ("black", "white", "kings"):
            value = getattr(setup, name)
            if not isinstance(value, int) or not 0 <= value < _BITBOARD_LIMIT:
                raise ValueError(f"BoardSetup.{name} must be a 32-bit bitboard, got {value!r}")
        pos = cls.__new__(cls)
        pos._game = _core.Game.from_bitboards(
            setup.size, setup.black, setup.white, setup.kings, setup.white_to_move, max_plies
        )
        return pos

    @classmethod
    def from_game(cls, game: _core.Game) -> Position:
        """Wraps a core game (not copied)."""
        pos = cls.__new__(cls)
        pos._game = game
        return pos

    # --- state -----------------------------------------------------------------------------
    @property
    def game(self) -> _core.Game:
        """The underlying compiled game (shared, not a copy)."""
        return self._game

    @property
    def size(self) -> int:
        return self._game.size

    @property
    def turn(self) -> str:
        """'B' or 'W': the side to move."""
        return "W" if self._game.white_to_move else "B"

    @property
    def ply(self) -> int:
        return self._game.ply

    def setup(self) -> BoardSetup:
        g = self._game
        return BoardSetup(g.size, g.black, g.white, g.kings, g.white_to_move)

    def fen(self) -> str:
        return format_fen(self.setup())

    def copy(self) -> Position:
        return Position.from_game(self._game.copy())

    def __str__(self) -> str:
        return diagram(self.setup())

    def __repr__(self) -> str:
        return f"Position({self.fen()!r}, size={self.size})"

    # --- moves -----------------------------------------------------------------------------
    def legal_moves(self) -> list[Move]:
        return self._game.legal_moves()

    def parse_move(self, text: str) -> Move:
        """The legal move that ``text`` names: ``11-15``, ``15x22x29`` or the short ``15x29``.

        Squares are ASCII digits; ``-`` joins the two squares of a step and ``x`` the squares of a
        capture, never the other way round. A capture may leave out intermediate squares; when
        several capture paths then match and they all lead to the same position (the same pieces
        taken, the same destination), the first is returned, since the game continues
        identically. A capture written in full (every square it lands on) names that capture even
        when a longer one passes through the same squares. Raises ValueError otherwise.
        """
        if not isinstance(text, str):
            raise TypeError(f"a move is a str, got {type(text).__name__}")
        cleaned = text.strip().rstrip(_MOVE_MARKS).lower()
        if not _MOVE_TEXT.fullmatch(cleaned):
            raise ValueError(
                f"malformed move {text!r}: write squares in digits 0-9, joined by '-' for a step "
                "(11-15) or by 'x' for a capture (15x22x29)"
            )
        capture = "x" in cleaned
        parts = cleaned.split("x" if capture else "-")
        n = num_squares(self.size)
        if any(len(p) > 2 or not 1 <= int(p) <= n for p in parts):
            raise ValueError(f"malformed move {text!r}: squares must be 1-{n}")
        squares = [int(p) for p in parts]
        legal = self.legal_moves()
        candidates = [m for m in legal if m.is_capture == capture and _matches(m.squares, squares)]
        if not candidates:
            other = [m for m in legal if m.is_capture != capture and _matches(m.squares, squares)]
            if other:
                why = (
                    f"{other[0]} is a step, and 'x' is only for captures"
                    if capture
                    else f"{other[0]} is a capture, written with 'x'"
                )
                raise ValueError(f"illegal move {text!r} in {self.fen()}: {why}")
            listed = ", ".join(str(m) for m in legal) or "none"
            raise ValueError(f"illegal move {text!r} in {self.fen()} (legal: {listed})")
        exact = [m for m in candidates if list(m.squares) == squares]
        if exact:
            return exact[0]
        first = candidates[0]
        if any(
            m.captures != first.captures or m.destination != first.destination for m in candidates
        ):
            options = ", ".join(str(m) for m in candidates)
            raise ValueError(f"ambiguous move {text!r} in {self.fen()}: could be {options}")
        return first

    def play(self, move: Move | str) -> Move:
        """Plays a legal move (a Move or its text) and returns it; ValueError if illegal."""
        if isinstance(move, str):
            move = self.parse_move(move)
        elif move not in self._game.legal_moves():
            raise ValueError(f"illegal move {move} in {self.fen()}")
        self._game.make(move)
        return move

    def undo(self) -> None:
        self._game.undo()

    # --- outcome ---------------------------------------------------------------------------
    def result(self) -> str | None:
        """None while the game goes on, else '1-0' (Black won), '0-1' (White won) or '1/2-1/2'."""
        return RESULT_TEXT.get(self._game.result())

    @property
    def end_reason(self) -> str | None:
        return END_REASONS.get(self._game.end_reason())

    def is_over(self) -> bool:
        return self._game.result() != 0

    # --- search helpers --------------------------------------------------------------------
    def perft(self, depth: int) -> int:
        return self._game.perft(depth)

    def divide(self, depth: int) -> dict[str, int]:
        return {str(m): n for m, n in self._game.divide(depth)}


def _matches(path: list[int], given: list[int]) -> bool:
    """Whether a move's square path fits the squares written: same ends, the rest in order."""
    if path[0] != given[0] or path[-1] != given[-1]:
        return False
    if len(given) == len(path):
        return path == given
    it = iter(path[1:-1])
    return all(any(s == t for t in it) for s in given[1:-1])
