"""Annotated PDN lines: moves with their marks, NAGs, comments and variations.

A game read from an annotated PDN keeps, beside its main line of moves, the line as a tree:

    1. 11-15 {the Old Fourteenth} 23-19 2. 8-11 (2. 9-14!? $1 {sharper} 22-17) 22-17 *

is ``[PdnMove("11-15", comment="the Old Fourteenth"), PdnMove("23-19"),
PdnMove("8-11", variations=[[PdnMove("9-14", mark="!?", nags=[1], comment="sharper"),
PdnMove("22-17")]]), PdnMove("22-17")]``: a variation in brackets after a move is an
alternative to that move, played from the position before it, and may hold variations itself.
A comment before the first move of a line is that move's ``before``. Comments are kept as one
line of text (runs of white space become one space), which is how they are written back.

The same tree travels as JSON to and from the play page (``line_to_json``, ``line_from_json``);
``check_line`` replays every move of it, variations included, and ``line_tokens`` writes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from game.position import Position

MARKS = ("!", "?", "!!", "??", "!?", "?!")  # move marks as PDN writes them after a move
MAX_NAG = 255  # PDN's (and PGN's) NAGs are $0..$255
MAX_COMMENT_CHARS = 10_000  # a longer comment is not one a person wrote
MAX_DEPTH = 50  # variations nested deeper than this are refused (JSON from a request)
_STRICT_MOVE = re.compile(r"[0-9]{1,2}(?:-[0-9]{1,2}|(?:x[0-9]{1,2})+)")
_SPACE = re.compile(r"\s+")


@dataclass(slots=True)
class PdnMove:
    """One move of a line and what was written with it."""

    move: str
    mark: str = ""  # one of MARKS, or ""
    nags: list[int] = field(default_factory=list)  # $n after the move, in order
    comment: str = ""  # {text} after the move (several are joined by a space)
    before: str = ""  # {text} before the move: only on the first move of a line
    variations: list[list[PdnMove]] = field(default_factory=list)  # alternatives to this move

    @property
    def annotated(self) -> bool:
        return bool(self.mark or self.nags or self.comment or self.before or self.variations)


def clean_comment(text: str) -> str:
    """A comment as kept and written: its text on one line, without the braces."""
    return _SPACE.sub(" ", text).strip()


def annotated(line: list[PdnMove]) -> bool:
    return any(m.annotated for m in line)


def line_to_json(line: list[PdnMove]) -> list[dict[str, Any]]:
    out = []
    for m in line:
        item: dict[str, Any] = {"move": m.move}
        if m.mark:
            item["mark"] = m.mark
        if m.nags:
            item["nags"] = list(m.nags)
        if m.comment:
            item["comment"] = m.comment
        if m.before:
            item["before"] = m.before
        if m.variations:
            item["variations"] = [line_to_json(v) for v in m.variations]
        out.append(item)
    return out


def line_from_json(items: Any, where: str = "line", depth: int = 0) -> list[PdnMove]:
    """The line a JSON list describes; ValueError naming the item that is not one."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: variations nested deeper than {MAX_DEPTH}")
    if not isinstance(items, list):
        raise ValueError(f"{where}: a list of moves expected")
    line = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("move"), str):
            raise ValueError(f"{at}: an object with a 'move' expected")
        unknown = set(item) - {"move", "mark", "nags", "comment", "before", "variations"}
        if unknown:
            raise ValueError(f"{at}: unknown field {sorted(unknown)[0]!r}")
        nags = item.get("nags") or []
        if not isinstance(nags, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in nags
        ):
            raise ValueError(f"{at}: nags must be whole numbers")
        texts = {k: item.get(k) or "" for k in ("mark", "comment", "before")}
        for k, v in texts.items():
            if not isinstance(v, str):
                raise ValueError(f"{at}: {k} must be text")
        variations = item.get("variations") or []
        if not isinstance(variations, list):
            raise ValueError(f"{at}: variations must be a list of lines")
        line.append(
            PdnMove(
                item["move"],
                texts["mark"],
                list(nags),
                clean_comment(texts["comment"]),
                clean_comment(texts["before"]),
                [
                    line_from_json(v, f"{at}.variations[{k}]", depth + 1)
                    for k, v in enumerate(variations)
                ],
            )
        )
    return line


def check_line(
    start: Position,
    line: list[PdnMove],
    where: str = "main line",
    first_ply: int = 0,
    white_first: bool | None = None,
) -> list[str]:
    """Replays ``line`` from ``start`` and every variation from the position before the move it
    replaces; the moves in strict notation are written back into the tree, and the main line's
    moves are returned. ValueError naming the line and move that is illegal or badly marked."""
    if white_first is None:
        white_first = start.turn == "W"
    pos = start.copy()
    for i, m in enumerate(line):
        at = f"{where}, {move_label(first_ply + i, white_first)} ({m.move!r})"
        check_annotation(m, at)
        if i and m.before:
            raise ValueError(f"{at}: a comment before a move is kept only on a line's first move")
        for k, variation in enumerate(m.variations):
            name = f"variation {k + 1} of {move_label(first_ply + i, white_first)} {m.move}"
            check_line(pos, variation, name, first_ply + i, white_first)
        try:
            m.move = str(pos.play(m.move))
        except ValueError as e:
            raise ValueError(f"{at}: {e}") from None
    return [m.move for m in line]


def check_annotation(m: PdnMove, at: str) -> None:
    """ValueError when a mark, NAG or comment of ``m`` cannot be written as PDN."""
    if m.mark not in ("", *MARKS):
        raise ValueError(f"{at}: mark {m.mark[:10]!r} is not one of {' '.join(MARKS)}")
    for n in m.nags:
        if not 0 <= n <= MAX_NAG:
            raise ValueError(f"{at}: NAG ${n} is not one of $0..${MAX_NAG}")
    for name, text in (("comment", m.comment), ("comment before", m.before)):
        if "}" in text:
            raise ValueError(f"{at}: a {name} cannot hold '}}' (PDN ends a comment there)")
        if len(text) > MAX_COMMENT_CHARS:
            raise ValueError(f"{at}: a {name} longer than {MAX_COMMENT_CHARS} characters")


def move_label(index: int, white_first: bool) -> str:
    """``move 12`` or ``move 12...`` for the game's ply ``index`` (0: its first move)."""
    ply = index + (1 if white_first else 0)
    return f"move {ply // 2 + 1}{'' if ply % 2 == 0 else '...'}"


def line_tokens(line: list[PdnMove], first_ply: int, white_first: bool) -> list[str]:
    """The movetext tokens of ``line`` whose first move is the game's ply ``first_ply`` (0: the
    first move of the game); ValueError naming a move, mark, NAG or comment PDN cannot carry."""
    tokens: list[str] = []
    numbered = True  # a line, and a move after a comment or variation, start with a number
    for i, m in enumerate(line):
        ply = first_ply + i + (1 if white_first else 0)
        number = ply // 2 + 1
        at = f"{move_label(first_ply + i, white_first)} ({m.move!r})"
        if not _STRICT_MOVE.fullmatch(m.move):
            raise ValueError(
                f"{move_label(first_ply + i, white_first)}: {m.move[:40]!r} is not a move in PDN "
                "form (11-15, or 15x22x31 for a capture)"
            )
        check_annotation(m, at)
        if m.before:
            tokens.append("{" + m.before + "}")
            numbered = True
        if ply % 2 == 0:
            tokens.append(f"{number}. {m.move}{m.mark}")
        elif numbered:
            tokens.append(f"{number}... {m.move}{m.mark}")
        else:
            tokens.append(f"{m.move}{m.mark}")
        tokens.extend(f"${n}" for n in m.nags)
        numbered = False
        if m.comment:
            tokens.append("{" + m.comment + "}")
            numbered = True
        for variation in m.variations:
            inner = line_tokens(variation, first_ply + i, white_first)
            if inner:
                tokens.append("(" + inner[0])
                tokens.extend(inner[1:])
                tokens[-1] += ")"
                numbered = True
    return tokens


def count_moves(lines: Iterable[list[PdnMove]]) -> int:
    """Moves in ``lines`` and all their variations."""
    return sum(1 + count_moves(m.variations) for line in lines for m in line)
