"""Openings for self-play, matches and the evaluator: one type, one deck loader.

An `Opening` is a named sequence of moves from the initial position. Matches play the moves (so
every game's PDN starts at the real start); self-play starts its games at the position after
them with no history (`Opening.start_game`), so that a record's positions alone rebuild the
network's history planes exactly (see game.records.histories).

Decks:

- ``deck``: the ACF three-move deck, its 156 tournament ballots (crossboard + mail-play; the 18
  barred ballots are left out), shipped in game/data/acf_3move_ballots.csv. The small board has
  no published deck: there ``deck`` is every 3-ply start instead (106 on 6x6).
- ``start``: the initial position only.
- ``random``: distinct seeded random starts (for deterministic players on a small board).
- `extend_openings` continues each opening by a few random moves for more distinct starts.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from game import _core
from game.position import Position

DECK_PATH = Path(__file__).resolve().parent / "data" / "acf_3move_ballots.csv"
TOURNAMENT_DECKS = frozenset({"crossboard", "mailplay"})  # the 156-ballot deck; "barred" is out
KINDS = ("deck", "start", "random")
NO_BALLOT = -1  # Opening.id of an opening that is not an ACF ballot
SMALL_BOARD_PLIES = 3  # the small board's deck: every 3-ply start, as the ACF deck is 3 moves
RANDOM_PLIES = 4  # plies of a random opening
RANDOM_COUNT = 200  # random openings wanted
RANDOM_TRIES = 20  # draws per wanted opening before settling for fewer distinct ones
_COLUMNS = ("acf_number", "moves", "deck", "fen_after")


@dataclass(frozen=True)
class Opening:
    name: str  # "ACF 12", "start", "6x6 #3", "random 7", "ACF 12 +2"
    moves: tuple[str, ...] = ()  # played from the initial position
    id: int = NO_BALLOT  # the ACF ballot number where there is one (kept in game records)
    size: int = 8

    def position(self, max_plies: int = 0) -> Position:
        """The position after the moves, with them as its history (ValueError if illegal)."""
        pos = Position(self.size, max_plies=max_plies)
        for i, text in enumerate(self.moves):
            try:
                pos.play(text)
            except ValueError as e:
                raise ValueError(f"opening {self.name!r}, ply {i + 1}: {e}") from None
        return pos

    @cached_property
    def fen(self) -> str:
        return self.position().fen()

    def start_game(self, max_plies: int = 0) -> _core.Game:
        """A new game at the position after the moves, without their history (self-play)."""
        return Position.from_fen(self.fen, self.size, max_plies=max_plies).game


def start_opening(size: int = 8) -> Opening:
    return Opening("start", (), NO_BALLOT, size)


def acf_deck(*, tournament_only: bool = True, path: str | Path = DECK_PATH) -> list[Opening]:
    """The ACF ballots; each must replay to its listed position (ValueError naming the row)."""
    path = Path(path)
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    except OSError as err:
        raise ValueError(f"cannot read the opening deck {path}: {err}") from err
    if not rows or any(c not in rows[0] for c in _COLUMNS):
        raise ValueError(f"{path}: expected a CSV with columns {', '.join(_COLUMNS)}")
    deck = []
    for line, row in enumerate(rows, start=2):
        if tournament_only and row["deck"] not in TOURNAMENT_DECKS:
            continue
        try:
            number = int(row["acf_number"])
            opening = Opening(f"ACF {number}", tuple(row["moves"].split()), number, 8)
            if opening.fen != Position.from_fen(row["fen_after"]).fen():
                raise ValueError(f"the moves lead to {opening.fen}, not {row['fen_after']}")
        except ValueError as err:
            raise ValueError(f"{path}, line {line}: {err}") from err
        deck.append(opening)
    return deck


def small_board_deck(size: int, plies: int = SMALL_BOARD_PLIES) -> list[Opening]:
    """Every sequence of ``plies`` moves from the start of a small board (106 on 6x6)."""
    out: list[Opening] = []

    def walk(pos: Position, moves: tuple[str, ...]) -> None:
        if len(moves) == plies or pos.is_over():
            out.append(Opening(f"{size}x{size} #{len(out) + 1}", moves, NO_BALLOT, size))
            return
        for move in pos.legal_moves():
            child = pos.copy()
            child.play(move)
            walk(child, (*moves, str(move)))

    walk(Position(size), ())
    return out


def random_openings(
    size: int, *, plies: int = RANDOM_PLIES, count: int = RANDOM_COUNT, seed: int = 0
) -> list[Opening]:
    """Up to ``count`` distinct openings of ``plies`` uniformly random moves (seeded)."""
    rng = random.Random(seed)
    seen: set[int] = set()
    out: list[Opening] = []
    for _ in range(count * RANDOM_TRIES):
        if len(out) >= count:
            break
        pos = Position(size)
        moves = []
        for _ in range(plies):
            legal = pos.legal_moves()
            if not legal or pos.is_over():
                break
            moves.append(str(pos.play(rng.choice(legal))))
        if pos.is_over() or pos.game.hash in seen:
            continue
        seen.add(pos.game.hash)
        out.append(Opening(f"random {len(out) + 1}", tuple(moves), NO_BALLOT, size))
    return out


def extend_openings(openings: Sequence[Opening], plies: int, *, seed: int = 0) -> list[Opening]:
    """A copy of each opening continued by ``plies`` random legal moves (seeded), keeping only
    positions that differ from each other and from the originals: more distinct starting points
    for deterministic players, who replay the same game from a repeated opening."""
    rng = random.Random(seed)
    ends = [(o, o.position()) for o in openings]
    seen = {pos.game.hash for _, pos in ends}
    out: list[Opening] = []
    for o, pos in ends:
        moves = list(o.moves)
        for _ in range(plies):
            legal = pos.legal_moves() if not pos.is_over() else []
            if not legal:
                break
            moves.append(str(pos.play(rng.choice(legal))))
        if pos.is_over() or pos.game.hash in seen:
            continue
        seen.add(pos.game.hash)
        out.append(Opening(f"{o.name} +{plies}", tuple(moves), NO_BALLOT, o.size))
    return out


def load_openings(kind: str = "deck", size: int = 8, *, seed: int = 0) -> list[Opening]:
    """The openings of ``kind`` (see the module docstring) for a board of side ``size``."""
    if kind == "start":
        return [start_opening(size)]
    if kind == "random":
        return random_openings(size, seed=seed)
    if kind == "deck":
        return acf_deck() if size == 8 else small_board_deck(size)
    raise ValueError(f"unknown openings {kind!r}; use one of {KINDS}")


def pick(openings: Sequence[Opening], rng: np.random.Generator) -> Opening:
    """One opening, uniformly at random."""
    if not openings:
        raise ValueError("no openings to pick from")
    return openings[int(rng.integers(len(openings)))]
