"""PDN (Portable Draughts Notation) for English checkers: reading and writing games.

Reads single games and whole collections: tag pairs, ``{comments}``, ``;`` line comments,
``(variations)`` (nested), NAGs (``$1``) and move marks (``!``, ``?``, ``!?``...), move numbers
(``12.`` and ``12...``), results (``1-0``, ``0-1``, ``1/2-1/2``, ``*``, and the ``2-0`` style),
and set-up positions through ``[SetUp "1"]`` / ``[FEN "..."]``. "1-0" means Black, the first
mover, won. A game with any annotation keeps it in ``PdnGame.line`` (``game.pdn_lines``), and
the writer writes it back, so open-then-save keeps a file's notes. Every move is checked against
the rules as it is read (``replay=True``), variations' too: an illegal move in a variation drops
the rest of that variation with a warning; a bad main line raises ValueError naming the game (its
number and Event/players), the move number and the offending text, or, with an ``errors`` list,
is listed there (``PdnError``) while reading goes on with the next game.
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

from game.pdn_lines import (
    PdnMove,
    annotated,
    clean_comment,
    line_tokens,
)
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
    # The main line with its marks, NAGs, comments and variations (game.pdn_lines), when the
    # game has any; empty for a game of plain moves, which ``moves`` alone describes.
    line: list[PdnMove] = field(default_factory=list)
    comment: str = ""  # a comment of a game without moves

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


@dataclass(frozen=True)
class PdnError:
    """A game of a collection that could not be read: its number (1 for the first game of the
    text), its players and event as tagged, the move where reading stopped, and why."""

    number: int
    names: str
    move: str | None
    message: str


@dataclass
class _Line:
    """A line being read: its moves and the position after them (None when not replayed)."""

    moves: list[PdnMove]
    pos: Position | None
    first_ply: int = 0
    pending: str = ""  # a comment read before the line's first move
    opened_at: int = 0  # the offset of the '(' of a variation
    dropped: bool = False  # a variation with an illegal move: the rest of it is not kept


class _GameReader:
    """Reads one game's movetext token by token into ``game`` (its main line, and the annotated
    tree in ``game.line`` when anything is annotated)."""

    def __init__(self, game: PdnGame, index: int, replay: bool) -> None:
        self.game, self.index, self.replay = game, index, replay
        self.lines: list[_Line] = []
        self.annotated = False  # anything besides moves read: the tree is kept

    @property
    def where(self) -> str:
        return f"game {self.index}, {self.game.describe()}"

    def _main(self) -> _Line:
        if not self.lines:
            pos = None
            if self.replay:
                try:
                    pos = self.game.start()
                except ValueError as e:
                    raise ValueError(f"{self.where}: bad [FEN] tag: {e}") from None
            self.lines.append(_Line([], pos))
        return self.lines[-1]

    def _label(self, line: _Line) -> str:
        """The move about to be read in ``line``, as an error names it (made only then)."""
        label = _move_label(line.first_ply + len(line.moves), self.game.start_white())
        return f"variation, {label}" if len(self.lines) > 1 else label

    def move(self, text: str, mark: str) -> str | None:
        line = self.lines[-1] if self.lines else self._main()
        if line.dropped:
            return None
        strict, warning = text, None
        if self.replay:
            try:
                move, fixed = parse_tolerant(line.pos, text)
                line.pos.play(move)
            except ValueError as e:
                where = f"{self.where}, {self._label(line)} ({text!r}): {e}"
                if len(self.lines) == 1:
                    raise ValueError(where) from None
                line.dropped = True  # a side line's error costs the side line, not the game
                return f"{where}; the variation is not kept from there"
            strict = str(move)
            if fixed:
                warning = f"{self.where}, {self._label(line)}: {fixed}"
        if mark or line.pending:
            self.annotated = True
            line.moves.append(PdnMove(strict, mark, before=line.pending))
            line.pending = ""
        else:
            line.moves.append(PdnMove(strict))
        if len(self.lines) == 1:
            self.game.moves.append(strict)
        return warning

    def text(self, text: str, offset: int) -> None:
        """Words that are no PDN: kept as a comment inside a variation, refused elsewhere."""
        if len(self.lines) < 2:
            raise ValueError(f"{self.where}: unexpected text {_excerpt(text)!r} at offset {offset}")
        if not self.lines[-1].dropped:
            self.comment(text)

    def comment(self, text: str) -> None:
        line = self._main()
        text = clean_comment(text)
        if not text or line.dropped:
            return
        self.annotated = True
        if line.moves:
            last = line.moves[-1]
            last.comment = f"{last.comment} {text}" if last.comment else text
        else:
            line.pending = f"{line.pending} {text}" if line.pending else text

    def nag(self, value: int) -> None:
        line = self._main()
        if line.moves and not line.dropped:  # a NAG before any move qualifies none: dropped
            line.moves[-1].nags.append(value)
            self.annotated = True

    def open(self, offset: int) -> None:
        line = self._main()
        if not line.moves and not line.dropped:
            raise ValueError(f"{self.where}: variation '(' at offset {offset} before any move")
        variation: list[PdnMove] = []
        self.annotated = True
        if not line.dropped:
            line.moves[-1].variations.append(variation)
        pos = None
        if line.pos is not None and not line.dropped:  # the position before the last move
            pos = line.pos.copy()
            pos.undo()
        first = line.first_ply + len(line.moves) - 1
        self.lines.append(_Line(variation, pos, first, opened_at=offset))
        self.lines[-1].dropped = line.dropped

    def close(self, offset: int) -> None:
        if len(self.lines) < 2:
            raise ValueError(f"{self.where}: ')' at offset {offset} closes no variation")
        done = self.lines.pop()
        if done.pending and done.moves:
            done.moves[-1].comment = done.pending  # pragma: no cover - a comment before ')'

    def finish(self) -> None:
        if len(self.lines) > 1:
            raise ValueError(
                f"{self.where}: PDN variation '(' at offset {self.lines[1].opened_at} "
                "is never closed"
            )
        main = self.lines[0] if self.lines else None
        if main is not None and self.annotated and annotated(main.moves):
            self.game.line = main.moves
        elif main is not None and main.pending:  # a comment and no move
            self.game.comment = main.pending
        if self.replay and main is None and self.game.fen:  # no move: check the set-up alone
            try:
                self.game.start()
            except ValueError as e:
                raise ValueError(f"{self.where}: bad [FEN] tag: {e}") from None


def iter_pdn(
    text: str,
    *,
    size: int = 8,
    replay: bool = True,
    max_moves: int | None = None,
    errors: list[PdnError] | None = None,
) -> Iterator[PdnGame]:
    """Yields the games of a PDN collection in order; see the module docstring.

    ``max_moves`` bounds the moves read in all, variations included (PdnTooLong naming it once
    more are found), so a caller that also stops after some games bounds the work of one text.
    A bad game raises ValueError naming it; with an ``errors`` list, it is added there instead
    (a PdnError) and reading goes on with the next game.
    """
    if not isinstance(text, str):
        raise TypeError(f"PDN text is a str, got {type(text).__name__}")
    index = 0
    reader: _GameReader | None = None
    in_moves = False
    skipping = False  # the rest of a bad game, up to its end
    moves_read = 0

    def new_game() -> _GameReader:
        nonlocal index
        index += 1
        return _GameReader(PdnGame(size=size), index, replay)

    def failed(e: ValueError) -> None:
        nonlocal reader, skipping, in_moves, index
        if errors is None:
            raise e
        if reader is None:
            index += 1
        game = reader.game if reader is not None else PdnGame(size=size)
        found = _MOVE_IN_ERROR.search(str(e))
        errors.append(PdnError(index, game.describe(), found.group(1) if found else None, str(e)))
        reader, skipping = None, True

    def finish() -> Iterator[PdnGame]:
        nonlocal reader, in_moves, skipping
        if reader is not None and (reader.game.moves or reader.game.tags or reader.lines):
            try:
                reader.finish()
            except ValueError as e:
                failed(e)
                skipping = False  # the game had ended
                reader, in_moves = None, False
                return
            yield reader.game
        reader, in_moves = None, False

    for m in _TOKEN.finditer(text):
        kind = _KIND_OF_GROUP.get(m.lastgroup, m.lastgroup)
        if kind == "space":
            continue
        if skipping:  # the rest of a bad game: up to its result or the next game's tags
            if kind == "result":
                skipping, in_moves = False, False
                continue
            if not (kind == "tag" and in_moves):
                in_moves = in_moves or kind in ("number", "move")
                continue
            skipping, in_moves = False, False
        try:
            if kind == "tag":
                if in_moves:  # a tag after movetext starts the next game (missing result)
                    yield from finish()
                _check_token(kind, m)
                if reader is None:
                    reader = new_game()
                reader.game.tags[m.group("tag_name")] = _unescape(m.group("tag_value"))
                continue
            _check_token(kind, m)
            if kind == "result" and reader is not None and len(reader.lines) > 1:
                continue  # a result inside a variation ends it, not the game
            if reader is None:
                if kind in ("comment", "line_comment"):
                    continue  # a comment between games belongs to none
                reader = new_game()
            if kind == "result":
                reader.game.result = RESULTS[m.group("result")]
                reader.game.tags.setdefault("Result", reader.game.result)
                yield from finish()
            elif kind == "comment":
                reader.comment(m.group(0)[1:-1])
            elif kind == "line_comment":
                reader.comment(m.group(0)[1:])
            elif kind == "nag":
                reader.nag(int(m.group(0)[1:]))
            elif kind == "open":
                reader.open(m.start())
            elif kind == "close":
                reader.close(m.start())
            elif kind == "number":
                in_moves = True
            elif kind == "move":
                in_moves = True
                moves_read += 1
                if max_moves is not None and moves_read > max_moves:
                    raise PdnTooLong(
                        f"{reader.where}: more than {max_moves} moves in this PDN text"
                    )
                warning = reader.move(m.group("move").replace(":", "x"), m.group("mark") or "")
                if warning:
                    reader.game.warnings.append(warning)
            else:
                reader.text(m.group(0), m.start())
        except PdnTooLong:
            raise
        except ValueError as e:
            failed(e)
    if not skipping:
        yield from finish()


# The move named in a reader's error ("..., move 12... ('15x24'): ..."), for PdnError.move.
_MOVE_IN_ERROR = re.compile(r"((?:variation, )?move [0-9]+(?:\.\.\.)? \('[^']*'\))")


def _check_token(kind: str, m: re.Match[str]) -> None:
    """ValueError for a comment never closed or a tag not of the form [Name "value"]."""
    if kind == "comment" and not m.group(0).endswith("}"):
        raise ValueError(f"PDN comment '{{' at offset {m.start()} is never closed")
    if kind == "tag" and m.group("tag_end") is None:
        raise ValueError(
            f"malformed tag at offset {m.start()}: {_excerpt(m.group(0))!r} "
            'needs the form [Name "value"]'
        )


def read_pdn(
    text: str, *, size: int = 8, replay: bool = True, errors: list[PdnError] | None = None
) -> list[PdnGame]:
    return list(iter_pdn(text, size=size, replay=replay, errors=errors))


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
    white_first = game.start_white()
    if game.line and [m.move for m in game.line] != list(game.moves):
        raise ValueError(f"{game.describe()}: its annotated line is not its moves")
    line = game.line or [PdnMove(m if isinstance(m, str) else repr(m)) for m in game.moves]
    try:
        tokens = line_tokens(line, 0, white_first)
    except ValueError as e:
        raise ValueError(f"{game.describe()}, {e}") from None
    if game.comment:
        tokens.insert(0, "{" + clean_comment(game.comment).replace("}", ")") + "}")
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
