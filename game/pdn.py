"""PDN (Portable Draughts Notation) for English checkers: reading and writing games.

Reads single games and whole collections: tag pairs, ``{comments}``, ``;`` line comments,
``(variations)`` (skipped, nested), NAGs and move marks (``!``, ``?``), move numbers (``12.``
and ``12...``), results (``1-0``, ``0-1``, ``1/2-1/2``, ``*``, and the ``2-0`` style), and
set-up positions through ``[SetUp "1"]`` / ``[FEN "..."]``. "1-0" means Black, the first mover,
won. Every move is checked against the rules as it is read (``replay=True``); a bad game raises
ValueError naming the game (its number and Event/players), the move number and the offending text.
Moves are ASCII digits with ``-`` for steps and ``x`` (or ``:``) for captures; a comment, tag or
variation left open raises ValueError naming its offset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from game.position import Position

RESULTS = {
    "1-0": "1-0",
    "0-1": "0-1",
    "1/2-1/2": "1/2-1/2",
    "*": "*",
    "2-0": "1-0",
    "0-2": "0-1",
    "1-1": "1/2-1/2",
}
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


@dataclass
class PdnGame:
    """One game: its tags, its moves as written (validated text), and its result."""

    tags: dict[str, str] = field(default_factory=dict)
    moves: list[str] = field(default_factory=list)
    result: str = "*"
    size: int = 8

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


def iter_pdn(text: str, *, size: int = 8, replay: bool = True) -> Iterator[PdnGame]:
    """Yields the games of a PDN collection in order; see the module docstring."""
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
    for m in _TOKEN.finditer(text):
        kind = _KIND_OF_GROUP.get(m.lastgroup, m.lastgroup)
        if kind == "comment" and not m.group(0).endswith("}"):
            raise ValueError(f"PDN comment '{{' at offset {m.start()} is never closed")
        if kind == "tag" and m.group("tag_end") is None:
            raise ValueError(
                f"malformed tag at offset {m.start()}: {_excerpt(m.group(0))!r} "
                'needs the form [Name "value"]'
            )
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
            text_move = m.group("move").replace(":", "x")
            if replay:
                if pos is None:
                    try:
                        pos = game.start()
                    except ValueError as e:
                        raise ValueError(f"{where}: bad [FEN] tag: {e}") from None
                label = _move_label(len(game.moves), game.start_white())
                try:
                    move = pos.parse_move(text_move)
                    pos.play(move)
                except ValueError as e:
                    raise ValueError(f"{where}, {label} ({text_move!r}): {e}") from None
                # Store the move in full notation so written games are unambiguous.
                game.moves.append(str(move))
            else:
                game.moves.append(text_move)
            continue
        raise ValueError(f"{where}: unexpected text {_excerpt(m.group(0))!r} at offset {m.start()}")
    if opened:
        raise ValueError(f"PDN variation '(' at offset {opened[0]} is never closed")
    yield from finish()


def read_pdn(text: str, *, size: int = 8, replay: bool = True) -> list[PdnGame]:
    return list(iter_pdn(text, size=size, replay=replay))


def write_game(game: PdnGame) -> str:
    tags = dict(game.tags)
    tags["Result"] = game.result
    if game.fen:
        tags.setdefault("SetUp", "1")
    ordered = [k for k in TAG_ORDER if k in tags] + [k for k in tags if k not in TAG_ORDER]
    lines = [f'[{k} "{_escape(tags[k])}"]' for k in ordered]
    tokens: list[str] = []
    white_first = game.start_white()
    for i, move in enumerate(game.moves):
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
