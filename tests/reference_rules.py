"""A slow, independent reference for the rules of English checkers, for differential tests.

Written from the rules in DESIGN.md (ACF/WCDF English draughts) on plain (row, column)
coordinates, deliberately sharing nothing with the compiled core: no bitboards, no shifts,
no tables. Speed is not a goal; obviousness is.

Board: ``size`` x ``size`` (8 or 6), row 0 is Black's back rank drawn at the top. Dark squares
are those with ``(row + col)`` odd; they are numbered 1.. from the top-left, ``size // 2`` per
row. Black moves first, its men towards higher rows; White's men towards lower rows. A man
reaching the far row is crowned and, if it got there by a jump, its move ends. Captures are
compulsory (any capture, not the longest) and a capturing piece jumps on while it can; the same
piece cannot be taken twice; kings move and jump one square in all four diagonals. Every
distinct sequence of landing squares is a distinct move.

A move is a tuple of 1-based squares: the origin then every landing square (``(11, 15)`` for a
step, ``(15, 22, 29)`` for a double jump).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

BLACK, WHITE = "b", "w"
DIAGONALS = ((1, -1), (1, 1), (-1, -1), (-1, 1))  # (d_row, d_col)


@dataclass(frozen=True)
class RefPosition:
    """Sorted (square, piece) pairs: b/w men, B/W kings; ``turn`` is "b" or "w"."""

    size: int
    pieces: tuple[tuple[int, str], ...]  # sorted (square, piece) pairs
    turn: str

    def board(self) -> dict[tuple[int, int], str]:
        return {square_to_rc(sq, self.size): p for sq, p in self.pieces}


def square_to_rc(square: int, size: int) -> tuple[int, int]:
    """(row, col) of a 1-based square, by walking the dark squares in reading order."""
    count = 0
    for row in range(size):
        for col in range(size):
            if (row + col) % 2 == 1:
                count += 1
                if count == square:
                    return row, col
    raise ValueError(f"no square {square} on a {size}x{size} board")


def rc_to_square(row: int, col: int, size: int) -> int | None:
    """The 1-based square at (row, col), or None for a light square or one off the board."""
    if not (0 <= row < size and 0 <= col < size) or (row + col) % 2 == 0:
        return None
    count = 0
    for r in range(size):
        for c in range(size):
            if (r + c) % 2 == 1:
                count += 1
                if (r, c) == (row, col):
                    return count
    return None


def start_position(size: int = 8) -> RefPosition:
    """Men on the first ``size // 2 - 1`` rows of each side, Black to move."""
    rows_each = size // 2 - 1
    pieces = []
    for row in range(size):
        for col in range(size):
            sq = rc_to_square(row, col, size)
            if sq is None:
                continue
            if row < rows_each:
                pieces.append((sq, "b"))
            elif row >= size - rows_each:
                pieces.append((sq, "w"))
    return RefPosition(size, tuple(sorted(pieces)), BLACK)


def from_fen(fen: str, size: int = 8) -> RefPosition:
    """A minimal FEN reader (``B:W21,K30:B1,2``), independent of game.notation."""
    turn_text, *fields = fen.strip().split(":")
    pieces = []
    for field in fields:
        colour = field[0].lower()
        for item in filter(None, field[1:].split(",")):
            king = item.startswith("K")
            pieces.append((int(item.lstrip("K")), colour.upper() if king else colour))
    return RefPosition(size, tuple(sorted(pieces)), turn_text.strip().lower())


def to_fen(pos: RefPosition) -> str:
    def side(colour: str) -> str:
        items = [
            ("K" if p.isupper() else "") + str(sq) for sq, p in pos.pieces if p.lower() == colour
        ]
        return colour.upper() + ",".join(items)

    return f"{pos.turn.upper()}:{side('w')}:{side('b')}"


def _forward(colour: str) -> int:
    return 1 if colour == BLACK else -1


def _piece_dirs(piece: str) -> list[tuple[int, int]]:
    if piece.isupper():
        return list(DIAGONALS)
    return [d for d in DIAGONALS if d[0] == _forward(piece)]


def _crown_row(colour: str, size: int) -> int:
    return size - 1 if colour == BLACK else 0


def _on_board(r: int, c: int, size: int) -> bool:
    return 0 <= r < size and 0 <= c < size


def _jump_paths(
    board: dict[tuple[int, int], str],
    size: int,
    at: tuple[int, int],
    piece: str,
    taken: frozenset[tuple[int, int]],
    path: list[tuple[int, int]],
    out: list[list[tuple[int, int]]],
) -> None:
    """Every maximal capture sequence of ``piece`` standing on ``at`` (origin already vacated)."""
    colour = piece.lower()
    extended = False
    for dr, dc in _piece_dirs(piece):
        mid = (at[0] + dr, at[1] + dc)
        land = (at[0] + 2 * dr, at[1] + 2 * dc)
        if not _on_board(*land, size):
            continue
        victim = board.get(mid)
        if victim is None or victim.lower() == colour or mid in taken:
            continue
        if land in board:  # occupied (the origin was removed from the board by the caller)
            continue
        extended = True
        path.append(land)
        if piece.islower() and land[0] == _crown_row(colour, size):
            out.append(list(path))  # crowned by this jump: the move ends here
        else:
            _jump_paths(board, size, land, piece, taken | {mid}, path, out)
        path.pop()
    if not extended and len(path) > 1:
        out.append(list(path))


def legal_moves(pos: RefPosition) -> list[tuple[int, ...]]:
    """All legal moves as square paths, captures only when any capture exists."""
    board = pos.board()
    size = pos.size
    captures: list[list[tuple[int, int]]] = []
    steps: list[list[tuple[int, int]]] = []
    for (r, c), piece in board.items():
        if piece.lower() != pos.turn:
            continue
        rest = dict(board)
        del rest[(r, c)]
        _jump_paths(rest, size, (r, c), piece, frozenset(), [(r, c)], captures)
        for dr, dc in _piece_dirs(piece):
            to = (r + dr, c + dc)
            if _on_board(*to, size) and to not in board:
                steps.append([(r, c), to])
    chosen = captures if captures else steps
    return sorted(tuple(rc_to_square(r, c, size) for r, c in path) for path in chosen)


def apply_move(pos: RefPosition, move: tuple[int, ...]) -> RefPosition:
    """The position after a legal move (not validated): captures removed, crowning, turn passed."""
    size = pos.size
    board = pos.board()
    cells = [square_to_rc(sq, size) for sq in move]
    piece = board.pop(cells[0])
    is_jump = abs(cells[1][0] - cells[0][0]) == 2
    if is_jump:
        for a, b in itertools.pairwise(cells):
            del board[((a[0] + b[0]) // 2, (a[1] + b[1]) // 2)]
    end = cells[-1]
    if piece.islower() and end[0] == _crown_row(piece, size):
        piece = piece.upper()
    board[end] = piece
    pieces = tuple(sorted((rc_to_square(r, c, size), p) for (r, c), p in board.items()))
    return RefPosition(size, pieces, WHITE if pos.turn == BLACK else BLACK)


def perft(pos: RefPosition, depth: int) -> int:
    if depth == 0:
        return 1
    moves = legal_moves(pos)
    if depth == 1:
        return len(moves)
    return sum(perft(apply_move(pos, m), depth - 1) for m in moves)
