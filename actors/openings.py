"""Openings for self-play and matches: the ACF three-move deck, or the start position.

The deck (game/data/acf_3move_ballots.csv, shipped with the project) lists the 174 ballots of
the American Checker Federation's three-move restriction with the position after them as FEN.
A game from a ballot starts at that position with no history: the recorded positions then
reproduce the network's history planes exactly (see actors.records.histories).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from game import _core
from game.notation import BoardSetup, format_fen, parse_fen
from game.position import Position

DECK_PATH = Path(__file__).resolve().parent.parent / "game" / "data" / "acf_3move_ballots.csv"
START_ID = -1  # opening_id of a game from the initial position
_COLUMNS = ("acf_number", "moves", "deck", "fen_after")


@dataclass(frozen=True)
class Opening:
    id: int  # ACF ballot number, or START_ID
    moves: str  # the ballot's moves, e.g. "9-13 21-17 5-9" ("" for the start position)
    fen: str  # the position to play from


def start_opening(size: int = 8) -> Opening:
    game = _core.Game(size)
    setup = BoardSetup(size, game.black, game.white, game.kings, game.white_to_move)
    return Opening(id=START_ID, moves="", fen=format_fen(setup))


def load_deck(path: str | Path = DECK_PATH) -> list[Opening]:
    """The ACF three-move ballots; raises ValueError naming the file and row on bad input."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"cannot read the opening deck {path}: {err}") from err
    rows = list(csv.DictReader(text.splitlines()))
    if not rows or any(c not in rows[0] for c in _COLUMNS):
        raise ValueError(f"{path}: expected a CSV with columns {', '.join(_COLUMNS)}")
    deck = []
    for line, row in enumerate(rows, start=2):
        try:
            opening = Opening(id=int(row["acf_number"]), moves=row["moves"], fen=row["fen_after"])
            parse_fen(opening.fen, 8)
        except ValueError as err:
            raise ValueError(f"{path}, line {line}: {err}") from err
        deck.append(opening)
    return deck


def opening_game(opening: Opening, size: int = 8, max_plies: int = 0) -> _core.Game:
    """A new game at the opening's position (no history), with the given ply cap."""
    return Position.from_fen(opening.fen, size, max_plies=max_plies).game


def choose_openings(kind: str, size: int) -> list[Opening]:
    """The openings a self-play config asks for: "deck" (8x8 only) or "start"."""
    if kind == "start":
        return [start_opening(size)]
    if kind == "deck":
        if size != 8:
            raise ValueError(f"selfplay.openings=deck needs the 8x8 board, got size {size}")
        return load_deck()
    raise ValueError(f"selfplay.openings must be 'deck' or 'start', got {kind!r}")


def pick(openings: list[Opening], rng: np.random.Generator) -> Opening:
    """One opening, uniformly at random."""
    if not openings:
        raise ValueError("no openings to pick from")
    return openings[int(rng.integers(len(openings)))]
