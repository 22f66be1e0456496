"""PDN (Portable Draughts Notation) for English checkers: reading and writing games.

Reads single games and whole collections: tag pairs, ``{comments}``, ``;`` line comments,
``(variations)`` (skipped, nested), NAGs and move marks (``!``, ``?``), move numbers (``12.``
and ``12...``), results (``1-0``, ``0-1``, ``1/2-1/2``, ``*``, and the ``2-0`` style), and
set-up positions through ``[SetUp "1"]`` / ``[FEN "..."]``. "1-0" means Black, the first mover,
won. Every move is checked against the rules as it is read (``replay=True``); a bad game raises
ValueError naming the game (its number and Event/players), the move number and the offending text.
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

_TOKEN = re.compile(
    r"""
      (?P<tag>\[\s*(?P<tag_name>[A-Za-z0-9_]+)\s+"(?P<tag_value>(?:[^"\\]|\\.)*)"\s*\])
    | (?P<comment>\{[^}]*\})
    | (?P<line_comment>;[^\n]*)
    | (?P<open>\()
    | (?P<close>\))
    | (?P<result>1/2-1/2|1-0|0-1|2-0|0-2|1-1|\*)(?![\d\-x])
    | (?P<number>\d+\.(?:\.\.)?)
    | (?P<move>\d+(?:[-x:]\d+)+)(?P<mark>[!?]+)?
    | (?P<nag>\$\d+)
    | (?P<space>\s+)
    | (?P<other>\S+)
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
    depth = 0  # variation nesting
    in_moves = False

    def finish() -> Iterator[PdnGame]:
        nonlocal game, pos, in_moves
        if game is not None and (game.moves or game.tags):
            yield game
        game, pos, in_moves = None, None, False

    for m in _TOKEN.finditer(text):
        kind = m.lastgroup if m.lastgroup not in ("tag_name", "tag_value", "mark") else None
        if kind is None:
            kind = next(k for k in ("tag", "move") if m.group(k))
        if kind in ("space", "comment", "line_comment", "nag"):
            continue
        if kind == "open":
            depth += 1
            continue
        if kind == "close":
            depth = max(0, depth - 1)
            continue
        if depth:
            continue
        if kind == "tag":
            if in_moves:  # a tag after movetext starts the next game (missing result)
                yield from finish()
            if game is None:
                index += 1
                game = PdnGame(size=size)
            game.tags[m.group("tag_name")] = m.group("tag_value").replace('\\"', '"')
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
        raise ValueError(f"{where}: unexpected text {m.group(0)!r} at offset {m.start()}")
    if game is not None and (game.moves or game.tags):
        yield game


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
        if ply % 2 == 0:
            tokens.append(f"{ply // 2 + 1}.")
        elif i == 0:
            tokens.append(f"{ply // 2 + 1}...")
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
