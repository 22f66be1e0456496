"""Standard notation: squares 1..N, FEN (``B:W21,22,K30:B1,2,K9``) and board diagrams.

Squares are numbered from Black's side, four per row on 8x8 (three on 6x6), as in every checkers
book; Black's men start on 1-12 and move towards 32. Bitboards put square ``s`` on bit ``s-1``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

BOARD_SIZES = (6, 8)
# A FEN item: an optional K, then a square or a range of squares, in ASCII digits only (Python's
# \d and int() also take other scripts' digits and underscores, which no FEN means).
_FEN_SQUARE = re.compile(r"^(K?)([0-9]{1,3})(?:-([0-9]{1,3}))?$")


def num_squares(size: int) -> int:
    if size not in BOARD_SIZES:
        raise ValueError(f"board size must be one of {BOARD_SIZES}, got {size}")
    return size * size // 2


def pieces_per_side(size: int) -> int:
    """Pieces a side starts with, and the most it can have: 12 on 8x8, 6 on 6x6."""
    return (size // 2) * (size // 2 - 1)


def square_rc(square: int, size: int) -> tuple[int, int]:
    """Row and column (0-based, row 0 at Black's back rank) of a 1-based square."""
    per_row = size // 2
    index = square - 1
    row = index // per_row
    col = 2 * (index % per_row) + (1 if row % 2 == 0 else 0)
    return row, col


def squares_of(bitboard: int) -> list[int]:
    """1-based squares set in a bitboard, ascending."""
    out = []
    while bitboard:
        low = bitboard & -bitboard
        out.append(low.bit_length())
        bitboard ^= low
    return out


@dataclass(frozen=True)
class BoardSetup:
    """A position as FEN describes it: pieces, and the side to move."""

    size: int
    black: int  # bitboards, bit s-1 for square s
    white: int
    kings: int
    white_to_move: bool


def parse_fen(fen: str, size: int = 8) -> BoardSetup:
    """Parses a checkers FEN such as ``B:W21,22,K30:B1,2,K9`` (ranges like ``W21-32`` accepted).

    Raises ValueError naming the FEN and the offending part: a square off the board or given
    twice, a man on the row where it would have been crowned, more pieces on a side than it
    starts with.
    """
    if not isinstance(fen, str):
        raise TypeError(f"a FEN is a str, got {type(fen).__name__}")
    n = num_squares(size)
    text = fen.strip().rstrip(".").strip()
    if text.startswith("[FEN") or text.startswith('"'):
        text = text.removeprefix("[FEN").strip().strip('[]"').strip()

    def fail(why: str) -> ValueError:
        return ValueError(f"malformed FEN {fen!r}: {why}")

    fields = [f.strip() for f in text.split(":")]
    if len(fields) != 3:
        raise fail("expected three ':'-separated fields: turn, then the white and black pieces")
    turn = fields[0].upper()
    if turn not in ("B", "W"):
        raise fail(f"turn must be 'B' or 'W', got {fields[0]!r}")
    pieces = {"B": (0, 0), "W": (0, 0)}  # colour -> (men bitboard, kings bitboard)
    seen_colours = set()
    occupied = 0
    for field in fields[1:]:
        if not field or field[0].upper() not in ("B", "W"):
            raise fail(f"piece field {field!r} must start with 'W' or 'B'")
        colour = field[0].upper()
        if colour in seen_colours:
            raise fail(f"colour {colour!r} appears twice")
        seen_colours.add(colour)
        men, kings, occupied = _fen_squares(field[1:].strip(), n, occupied, fail)
        count = (men | kings).bit_count()
        if count > pieces_per_side(size):
            name = "black" if colour == "B" else "white"
            raise fail(
                f"{count} {name} pieces: at most {pieces_per_side(size)} a side on {size}x{size}"
            )
        pieces[colour] = (men, kings)
    black_men, black_kings = pieces["B"]
    white_men, white_kings = pieces["W"]
    per_row = size // 2
    black_crown_row = ((1 << per_row) - 1) << (n - per_row)
    white_crown_row = (1 << per_row) - 1
    for name, men, row, crowner in (
        ("black", black_men, black_crown_row, "White"),
        ("white", white_men, white_crown_row, "Black"),
    ):
        if men & row:
            squares = ", ".join(str(s) for s in squares_of(men & row))
            raise fail(
                f"{name} man on {crowner}'s back rank (square {squares}): a man there is crowned"
            )
    return BoardSetup(
        size=size,
        black=black_men | black_kings,
        white=white_men | white_kings,
        kings=black_kings | white_kings,
        white_to_move=turn == "W",
    )


def _fen_squares(
    body: str, n: int, occupied: int, fail: Callable[[str], ValueError]
) -> tuple[int, int, int]:
    """(men, kings, occupied) of one FEN piece field's squares (``21,22,K30`` or ``21-32``):
    bitboards of this colour, and `occupied` with them added; `fail(why)` raised for a bad square
    or range, one off the board or one already occupied."""
    men, kings = 0, 0
    for item in filter(None, (s.strip() for s in body.split(","))):
        m = _FEN_SQUARE.match(item.upper())
        if not m:
            raise fail(f"bad square {item!r}")
        first = int(m.group(2))
        last = int(m.group(3)) if m.group(3) else first
        if first > last:
            raise fail(f"bad range {item!r}")
        for square in range(first, last + 1):
            if not 1 <= square <= n:
                raise fail(f"square {square} out of range 1-{n}")
            b = 1 << (square - 1)
            if occupied & b:
                raise fail(f"square {square} is given twice")
            occupied |= b
            if m.group(1):
                kings |= b
            else:
                men |= b
    return men, kings, occupied


def format_fen(setup: BoardSetup) -> str:
    """FEN of a position, squares ascending, kings prefixed with K: ``B:W21,22,K30:B1,2,K9``."""

    def side(letter: str, bitboard: int) -> str:
        items = [
            ("K" if setup.kings & (1 << (s - 1)) else "") + str(s) for s in squares_of(bitboard)
        ]
        return letter + ",".join(items)

    turn = "W" if setup.white_to_move else "B"
    return f"{turn}:{side('W', setup.white)}:{side('B', setup.black)}"


def board_rows(setup: BoardSetup) -> list[list[tuple[int | None, str]]]:
    """The board row by row, Black at the top: ``(square, piece)`` for each cell, the square's
    number (None on a light square, never played on) and its piece: b/w men, B/W kings, '.'
    empty, ' ' light. The one reading of a position's squares every board print uses."""
    size = setup.size
    per_row = size // 2
    rows = []
    for row in range(size):
        cells: list[tuple[int | None, str]] = []
        for col in range(size):
            if (row + col) % 2 == 0:
                cells.append((None, " "))
                continue
            square = row * per_row + col // 2 + 1
            b = 1 << (square - 1)
            king = bool(setup.kings & b)
            if setup.black & b:
                cells.append((square, "B" if king else "b"))
            elif setup.white & b:
                cells.append((square, "W" if king else "w"))
            else:
                cells.append((square, "."))
        rows.append(cells)
    return rows


def diagram(setup: BoardSetup) -> str:
    """A board diagram with Black at the top: b/w men, B/W kings, '.' empty dark squares.

    The square numbers of each row are printed beside it, so positions can be read in notation.
    """
    size = setup.size
    per_row = size // 2
    lines = []
    border = "  +" + "-" * (2 * size + 1) + "+"
    lines.append(border)
    for row, cells in enumerate(board_rows(setup)):
        first = row * per_row + 1
        pieces = " ".join(piece for _, piece in cells)
        lines.append(f"  | {pieces} |  {first:>2}-{first + per_row - 1}")
    lines.append(border)
    lines.append(f"  {'White' if setup.white_to_move else 'Black'} to move")
    return "\n".join(lines)
