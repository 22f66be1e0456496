"""PDN (Portable Draughts Notation) for English checkers: reading and writing games.

Reads single games and whole collections: tag pairs, ``{comments}``, ``;`` line comments,
``(variations)`` (skipped, nested), NAGs and move marks (``!``, ``?``), move numbers (``12.``
and ``12...``), results (``1-0``, ``0-1``, ``1/2-1/2``, ``*``, and the ``2-0`` style), and
set-up positions through ``[SetUp "1"]`` / ``[FEN "..."]``. "1-0" means Black, the first mover,
won. Every move is checked against the rules as it is read (``replay=True``); a bad game raises
ValueError naming the game (its number and Event/players), the move number and the offending text.
Moves are ASCII digits with ``-`` for steps and ``x`` (or ``:``) for captures; a comment, tag or
variation left open raises ValueError naming its offset.

Reading is tolerant, writing strict. Collections in the wild write ``x`` for some plain moves
(``4. 10x14 19x10`` where 10-14 is no capture) or ``-`` for a capture: such a move is accepted
where its squares, read with the other separator, name exactly one legal move, and a warning
naming the game and the move is added to the game's ``warnings``; a move that is still illegal
or ambiguous is refused. The writer accepts only the four results, tag names of letters, digits
and ``_``, tag values on one line, and moves in strict form (``11-15``, ``15x22x31``), so no
field can inject movetext; games read with ``replay=True`` always hold their moves in that form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from game.position import Move, Position

RESULTS = {
    "1-0": "1-0",
    "0-1": "0-1",
    "1/2-1/2": "1/2-1/2",
    "*": "*",
    "2-0": "1-0",
    "0-2": "0-1",
    "1-1": "1/2-1/2",
}
WRITTEN_RESULTS = ("1-0", "0-1", "1/2-1/2", "*")  # the only results the writer writes
# Tags written first, in this order (PDN's seven-tag roster adapted to checkers).
TAG_ORDER = ("Event", "Site", "Date", "Round", "Black", "White", "Result")
LINE_WIDTH = 79  # movetext wrapping when writing

# Every alternative matches in time linear in what it consumes, and none can fail after scanning
# far ahead: a tag or comment left open matches to where it stops (the reader then raises),
# instead of failing and being rescanned from each later bracket, which made a megabyte of
# unclosed "{" take minutes. Digits are ASCII ([0-9]): Python's \d takes other scripts' digits.
_TOKEN = re.compile(
    r"""
      (?P<tag>\[\s*(?P<tag_name>[A-Za-z0-9_]+)\s+"(?P<tag_value>(?:[^"\\]|\\.)*)(?P<tag_end>"\s*\])?)
    | (?P<comment>\{[^}]*\}?)
    | (?P<line_comment>;[^\n]*)
    | (?P<open>\()
    | (?P<close>\))
    | (?P<result>1/2-1/2|1-0|0-1|2-0|0-2|1-1|\*)(?![0-9\-x])
    | (?P<number>[0-9]+\.(?:\.\.)?)
    | (?P<move>[0-9]+(?:[-x:][0-9]+)+)(?P<mark>[!?]+)?
    | (?P<nag>\$[0-9]+)
    | (?P<space>\s+)
    | (?P<other>[^\s(){};]+|\S)
    """,
    re.VERBOSE,
)


class PdnTooLong(ValueError):
    """A PDN text with more moves than the reader was allowed to read (``max_moves``)."""


@dataclass
class PdnGame:
    """One game: its tags, its moves as written (validated text), and its result."""

    tags: dict[str, str] = field(default_factory=dict)
    moves: list[str] = field(default_factory=list)
    result: str = "*"
    size: int = 8
    # What the reader accepted but would not write so (a move with the wrong separator), each
    # naming the game and the move; not part of the game's identity.
    warnings: list[str] = field(default_factory=list, compare=False)

    @property
    def fen(self) -> str | None:
        return self.tags.get("FEN")

    def start(self) -> Position:
        if self.fen:
            return Position.from_fen(self.fen, self.size)
        return Position(self.size)

    def replay(self) -> Position:
        """The final position after playing every move from the start (ValueError if illegal)."""
        pos = self.start()
        for i, text in enumerate(self.moves):
            try:
                pos.play(text)
            except ValueError as e:
                raise ValueError(
                    f"{self.describe()}, {_move_label(i, self.start_white())}: {e}"
                ) from None
        return pos

    def start_white(self) -> bool:
        return bool(self.fen) and self.fen.strip().strip('"').upper().startswith("W")

    def describe(self) -> str:
        event = self.tags.get("Event", "?")
        return f"game '{event}' ({self.tags.get('Black', '?')} - {self.tags.get('White', '?')})"


def _move_label(index: int, white_first: bool) -> str:
    ply = index + (1 if white_first else 0)
    number = ply // 2 + 1
    return f"move {number}{'' if ply % 2 == 0 else '...'}"


def iter_pdn(
    text: str, *, size: int = 8, replay: bool = True, max_moves: int | None = None
) -> Iterator[PdnGame]:
    """Yields the games of a PDN collection in order; see the module docstring.

    ``max_moves`` bounds the moves read in all (ValueError naming it once more are found), so a
    caller that also stops after some games bounds the work of one text.
    """
    game: PdnGame | None = None
    pos: Position | None = None
    index = 0
    in_moves = False

    def finish() -> Iterator[PdnGame]:
        nonlocal game, pos, in_moves
        if game is not None and (game.moves or game.tags):
            if replay and pos is None and game.fen:  # no move was read: check the set-up alone
                try:
                    game.start()
                except ValueError as e:
                    where = f"game {index}, {game.describe()}"
                    raise ValueError(f"{where}: bad [FEN] tag: {e}") from None
            yield game
        game, pos, in_moves = None, None, False

    if not isinstance(text, str):
        raise TypeError(f"PDN text is a str, got {type(text).__name__}")
    opened: list[int] = []  # offsets of the "(" of the variations open here (nesting)
    moves_read = 0
    for m in _TOKEN.finditer(text):
        kind = _KIND_OF_GROUP.get(m.lastgroup, m.lastgroup)
        _check_token(kind, m)
        if kind in ("space", "comment", "line_comment", "nag"):
            continue
        if kind == "open":
            opened.append(m.start())
            continue
        if kind == "close":
            if opened:
                opened.pop()
            continue
        if opened:
            continue
        if kind == "tag":
            if in_moves:  # a tag after movetext starts the next game (missing result)
                yield from finish()
            if game is None:
                index += 1
                game = PdnGame(size=size)
            game.tags[m.group("tag_name")] = _unescape(m.group("tag_value"))
            continue
        if game is None:
            index += 1
            game = PdnGame(size=size)
        where = f"game {index}, {game.describe()}"
        if kind == "result":
            game.result = RESULTS[m.group("result")]
            game.tags.setdefault("Result", game.result)
            yield from finish()
            continue
        if kind == "number":
            in_moves = True
            continue
        if kind == "move":
            in_moves = True
            moves_read += 1
            if max_moves is not None and moves_read > max_moves:
                raise PdnTooLong(f"{where}: more than {max_moves} moves in this PDN text")
            text_move = m.group("move").replace(":", "x")
            if replay:
                pos = _replay_move(game, pos, text_move, where)
            else:
                game.moves.append(text_move)
            continue
        raise ValueError(f"{where}: unexpected text {_excerpt(m.group(0))!r} at offset {m.start()}")
    if opened:
        raise ValueError(f"PDN variation '(' at offset {opened[0]} is never closed")
    yield from finish()


def _check_token(kind: str, m: re.Match[str]) -> None:
    """ValueError for a comment never closed or a tag not of the form [Name "value"]."""
    if kind == "comment" and not m.group(0).endswith("}"):
        raise ValueError(f"PDN comment '{{' at offset {m.start()} is never closed")
    if kind == "tag" and m.group("tag_end") is None:
        raise ValueError(
            f"malformed tag at offset {m.start()}: {_excerpt(m.group(0))!r} "
            'needs the form [Name "value"]'
        )


def _replay_move(game: PdnGame, pos: Position | None, text_move: str, where: str) -> Position:
    """Plays `text_move` on `pos` (the game's set-up when None), appending it to `game` in full
    notation; the position after it. ValueError naming `where` and the move when it is not
    legal there."""
    if pos is None:
        try:
            pos = game.start()
        except ValueError as e:
            raise ValueError(f"{where}: bad [FEN] tag: {e}") from None
    label = _move_label(len(game.moves), game.start_white())
    try:
        move, fixed = parse_tolerant(pos, text_move)
        pos.play(move)
    except ValueError as e:
        raise ValueError(f"{where}, {label} ({text_move!r}): {e}") from None
    if fixed:
        game.warnings.append(f"{where}, {label}: {fixed}")
    # Store the move in full notation so written games are unambiguous.
    game.moves.append(str(move))
    return pos


def read_pdn(text: str, *, size: int = 8, replay: bool = True) -> list[PdnGame]:
    return list(iter_pdn(text, size=size, replay=replay))


def parse_tolerant(pos: Position, text: str) -> tuple[Move, str | None]:
    """The legal move ``text`` names, and a warning when it was written with the wrong separator.

    ``text`` is first read strictly (``Position.parse_move``); when that fails, its squares are
    read with the other separator (``-`` for ``x`` and the reverse): if they name exactly one
    legal move (a short capture whose paths all take the same pieces counts as one), that move
    is returned with a warning. Otherwise the strict reading's error is raised, or the
    ambiguity when the other reading finds several moves.
    """
    try:
        return pos.parse_move(text), None
    except ValueError as strict:
        cleaned = text.strip().rstrip(_MOVE_MARKS).lower()
        squares = re.split(r"[-x]", cleaned)
        if len(squares) < 2 or not _SQUARES_JOINED.fullmatch(cleaned):
            raise
        moves = []
        for other in ("-".join(squares), "x".join(squares)):
            if other == cleaned:
                continue
            try:
                moves.append(pos.parse_move(other))
            except ValueError as e:
                if str(e).startswith("ambiguous"):
                    raise ValueError(
                        f"{text!r} has the wrong separator and read as {other!r} is ambiguous: {e}"
                    ) from None
        if len(moves) != 1:  # a step and a capture cannot join the same squares: 0 or 1
            raise strict from None
        move = moves[0]
        kind = "a capture" if move.is_capture else "a step"
        return move, f"{text!r} read as {move} ({kind}, written with the wrong separator)"


def write_game(game: PdnGame) -> str:
    """One game as strict PDN; ValueError naming a result, tag or move that PDN cannot carry."""
    tags = dict(game.tags)
    if game.result not in WRITTEN_RESULTS:
        raise ValueError(
            f"result {_excerpt(str(game.result))!r}: write one of {', '.join(WRITTEN_RESULTS)}"
        )
    tags["Result"] = game.result
    if game.fen:
        tags.setdefault("SetUp", "1")
    for name, value in tags.items():
        if not isinstance(name, str) or not _TAG_NAME.fullmatch(name):
            raise ValueError(
                f"tag name {_excerpt(str(name))!r}: use letters, digits and '_' (like Event)"
            )
        if not isinstance(value, str) or _CONTROL.search(value):
            raise ValueError(
                f"tag {name}: the value {_excerpt(str(value))!r} must be text on one line"
            )
    ordered = [k for k in TAG_ORDER if k in tags] + [k for k in tags if k not in TAG_ORDER]
    lines = [f'[{k} "{_escape(tags[k])}"]' for k in ordered]
    tokens: list[str] = []
    white_first = game.start_white()
    for i, move in enumerate(game.moves):
        if not isinstance(move, str) or not _STRICT_MOVE.fullmatch(move):
            raise ValueError(
                f"{game.describe()}, {_move_label(i, white_first)}: {_excerpt(str(move))!r} is "
                "not a move in PDN form (11-15, or 15x22x31 for a capture)"
            )
        ply = i + (1 if white_first else 0)
        # A move number stays on the line of the move it numbers.
        if ply % 2 == 0:
            tokens.append(f"{ply // 2 + 1}. {move}")
        elif i == 0:
            tokens.append(f"{ply // 2 + 1}... {move}")
        else:
            tokens.append(move)
    tokens.append(game.result)
    lines.extend(_wrap(tokens))
    return "\n".join(lines) + "\n"


def write_pdn(games: Iterable[PdnGame]) -> str:
    return "\n".join(write_game(g) for g in games)


def game_from_position(
    start: Position, moves: Iterable[str], result: str, tags: dict[str, str] | None = None
) -> PdnGame:
    """A PdnGame for moves played from ``start`` (adds the FEN tag when it is not the start)."""
    game = PdnGame(tags=dict(tags or {}), moves=list(moves), result=result, size=start.size)
    if start.fen() != Position(start.size).fen() or start.turn == "W":
        game.tags["SetUp"] = "1"
        game.tags["FEN"] = start.fen()
    return game


# What the writer accepts: a tag name as the reader reads it, a move in the form
# Position.parse_move reads (1-2 digit squares), no control character (a newline) in a value.
_TAG_NAME = re.compile(r"[A-Za-z0-9_]+")
_STRICT_MOVE = re.compile(r"[0-9]{1,2}(?:-[0-9]{1,2}|(?:x[0-9]{1,2})+)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Squares joined by '-' or 'x' in any mix: what a move with the wrong separator looks like.
_SQUARES_JOINED = re.compile(r"[0-9]+(?:[-x][0-9]+)+")
_MOVE_MARKS = "!?*+"  # annotations that may follow a move (as Position.parse_move strips)

# The token kind of a match from the last group it closed (a tag's inner groups, a move's mark).
_KIND_OF_GROUP = {"tag_name": "tag", "tag_value": "tag", "tag_end": "tag", "mark": "move"}
EXCERPT = 40  # characters of bad input quoted in an error message


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _wrap(tokens: list[str]) -> list[str]:
    lines, line = [], ""
    for t in tokens:
        if line and len(line) + 1 + len(t) > LINE_WIDTH:
            lines.append(line)
            line = t
        else:
            line = f"{line} {t}" if line else t
    if line:
        lines.append(line)
    return lines
