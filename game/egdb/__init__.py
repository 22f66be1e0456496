"""Endgame database: the exact win/draw/loss of every position with few pieces.

The database is built by retrograde analysis in the compiled core (``game/cpp/egdb.cpp``), one
file per material signature (black men, black kings, white men, white kings) holding the value
for Black to move of every placement at 2 bits each; a position with White to move is looked up
turned round. Files are memory-mapped and checked (magic, format version, board, signature,
length, CRC-32) when opened; a bad one is refused with an error that names it. A manifest
(``game.egdb.manifest``) lists the folder's files: a missing, extra or non-regular file is refused
by name before anything is opened.

Build one with ``python -m game.egdb build --pieces 4``; open it with :func:`open_database` and
ask ``db.probe(position)`` for ``"win"``, ``"draw"``, ``"loss"`` (side to move) or ``None``.
The 40-move and repetition rules are outside the database, as in the published ones.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from game import _core
from game.notation import num_squares

log = logging.getLogger(__name__)

Signature = tuple[int, int, int, int]  # black men, black kings, white men, white kings

UNKNOWN, WIN, LOSS, DRAW = 0, 1, 2, 3
VALUE_TEXT = {WIN: "win", LOSS: "loss", DRAW: "draw"}


class EgdbError(RuntimeError):
    """A database folder or file that cannot be used: missing, wrong, truncated or damaged."""


def signatures(size: int, max_pieces: int) -> list[Signature]:
    """Every signature of 1..max_pieces pieces, each after every one a move from it reaches."""
    num_squares(size)
    return [tuple(s) for s in _core.egdb_signatures(size, max_pieces)]


def swapped(sig: Signature) -> Signature:
    return (sig[2], sig[3], sig[0], sig[1])


def pairs(size: int, max_pieces: int) -> list[Signature]:
    """One signature per colour-swap pair (the unit the solver builds), in build order."""
    seen: set[Signature] = set()
    out = []
    for s in signatures(size, max_pieces):
        if s not in seen:
            seen.update((s, swapped(s)))
            out.append(s)
    return out


def pair_dependencies(size: int, sig: Signature) -> set[Signature]:
    """The pairs (by their representative in ``pairs()``) a pair needs solved first."""
    reps = {}
    for s in pairs(size, sum(sig)):
        reps[s] = reps[swapped(s)] = s
    return {reps[tuple(d)] for d in _core.egdb_dependencies(size, sig)}


def file_path(folder: str | Path, size: int, sig: Signature) -> Path:
    return Path(folder) / _core.egdb_file_name(size, sig)


def check_file(path: str | Path, size: int, sig: Signature) -> int:
    """Maps and checks one file; returns its position count. Raises EgdbError naming the file."""
    regular_size(Path(path))  # never open a FIFO or a device: the open would wait
    try:
        return _core.egdb_check_file(str(path), size, sig)
    except RuntimeError as e:
        raise EgdbError(str(e)) from None


def distance_path(folder: str | Path, size: int, sig: Signature) -> Path:
    return Path(folder) / _core.egdb_distance_file_name(size, sig)


def pair_complete(folder: str | Path, size: int, sig: Signature) -> bool:
    """The pair's value and distance files are present and pass their checks. Raises EgdbError
    naming a path that is there but not a regular file (a build would not replace a directory
    or a FIFO)."""
    for s in {sig, swapped(sig)}:
        for path in (file_path(folder, size, s), distance_path(folder, size, s)):
            if not os.path.lexists(path):
                return False
            regular_size(path)  # raises, naming a directory, FIFO or link in the file's place
        try:
            check_any_file(file_path(folder, size, s), size, s)
            check_any_file(distance_path(folder, size, s), size, s)
        except EgdbError as e:
            log.warning("%s: will rebuild", e)
            return False
    return True


def available_pieces(folder: str | Path, size: int, limit: int = 8) -> int:
    """The largest N such that every signature file of up to N pieces is in the folder (0: none)."""
    n = 0
    for pieces in range(1, limit + 1):
        if not all(
            file_path(folder, size, s).exists()
            for s in signatures(size, pieces)
            if sum(s) == pieces
        ):
            break
        n = pieces
    return n


class EndgameDatabase:
    """A checked, memory-mapped database of one board size and up to ``max_pieces`` pieces."""

    def __init__(
        self, folder: str | Path, size: int, max_pieces: int, distances: bool | None = None
    ) -> None:
        num_squares(size)
        if max_pieces < 1:
            raise ValueError(f"max_pieces must be at least 1, got {max_pieces}")
        self.folder = Path(folder)
        manifest = check_folder(folder, size, max_pieces)  # names a missing, extra, wrong file
        # The distances to conversion come along when the manifest lists all of them (a folder
        # built before them has values only: players then fall back to a progress search);
        # ``distances=False`` leaves them out, ``True`` requires them.
        listed = manifest.get("distance_pieces", 0) >= max_pieces
        if distances and not listed:
            raise EgdbError(
                f"the {size}x{size} endgame database in {folder} has no distance files up to "
                f"{max_pieces} pieces (its manifest); build it again with: python -m game.egdb "
                f"build --pieces {max_pieces} --board {size} --out {folder}"
            )
        distances = listed if distances is None else distances
        try:
            self.core = _core.EndgameDatabase(str(folder), size, max_pieces, distances)
        except RuntimeError as e:
            raise EgdbError(
                f"{e} (build it with: python -m game.egdb build --pieces {max_pieces} "
                f"--board {size} --out {folder})"
            ) from None

    @property
    def size(self) -> int:
        return self.core.size

    @property
    def max_pieces(self) -> int:
        return self.core.max_pieces

    @property
    def bytes(self) -> int:
        return self.core.bytes

    def value(self, position) -> int:
        """UNKNOWN (not in the database), WIN, LOSS or DRAW for the side to move.

        ``position`` is a ``game.Position`` or a core ``game.Game`` of the database's board size.
        """
        game = getattr(position, "game", position)
        if game.size != self.size:
            raise ValueError(
                f"a {game.size}x{game.size} position probed in the {self.size}x{self.size} database"
            )
        return self.core.probe_game(game)

    @property
    def distances(self) -> bool:
        """Whether the distances to conversion are loaded (``distance()`` answers)."""
        return self.core.distances

    def distance(self, position) -> tuple[int, int]:
        """``(value, plies)``: ``value()`` and the distance to conversion for the side to move
        (plies until a capture, a crowning or the end with the winner hurrying and the loser
        holding out; 0 for a draw), -1 when the distances are not loaded or not in it."""
        game = getattr(position, "game", position)
        if game.size != self.size:
            raise ValueError(
                f"a {game.size}x{game.size} position probed in the {self.size}x{self.size} database"
            )
        return self.core.probe_distance_game(game)

    def probe(self, position) -> str | None:
        """'win', 'draw' or 'loss' for the side to move, or None when not in the database."""
        return VALUE_TEXT.get(self.value(position))

    def probe_states(self, states: np.ndarray) -> np.ndarray:
        """Values of states (n, 4) uint32: black, white, kings, meta (bit 0: White to move)."""
        return self.core.probe_states(np.ascontiguousarray(states, dtype=np.uint32))

    def probe_many(self, positions: Iterable) -> np.ndarray:
        """Values (uint8: 0 unknown, 1 win, 2 loss, 3 draw) of many positions in one call."""
        states = [
            (g.black, g.white, g.kings, int(g.white_to_move))
            for g in (getattr(p, "game", p) for p in positions)
        ]
        return self.probe_states(np.array(states, dtype=np.uint32).reshape(-1, 4))

    def verify(self, sig: Signature) -> int:
        """Positions of a signature whose value is not the best over their moves (0: consistent)."""
        return self.core.verify(sig)


def open_database(folder: str | Path, size: int, max_pieces: int) -> EndgameDatabase:
    return EndgameDatabase(folder, size, max_pieces)


def describe(value: int, side_to_move: str | None = None) -> str:
    """Text for users: 'database win' (for the side to move), or 'database loss for Black' with
    the side to move named ('B' or 'W'); a draw is 'database draw'; '' when not in the database."""
    text = VALUE_TEXT.get(value)
    if text is None:
        return ""
    who = {"B": "Black", "W": "White"}.get(side_to_move or "")
    return f"database {text}" + (f" for {who}" if who and value != DRAW else "")


def result_of(value: int, side_to_move: str) -> str | None:
    """PDN result ('1-0': Black won) of a database value for the side to move ('B' or 'W')."""
    if value == DRAW:
        return "1/2-1/2"
    if value not in (WIN, LOSS):
        return None
    return "1-0" if (value == WIN) == (side_to_move == "B") else "0-1"


__all__ = [
    "DRAW",
    "LOSS",
    "UNKNOWN",
    "VALUE_TEXT",
    "WIN",
    "EgdbError",
    "EndgameDatabase",
    "Signature",
    "available_pieces",
    "check_file",
    "describe",
    "distance_path",
    "file_path",
    "open_database",
    "pair_complete",
    "pair_dependencies",
    "pairs",
    "result_of",
    "signatures",
    "swapped",
]

# The manifest's checks use this module's names (EgdbError, check_file, signatures) and this
# module's functions use its checks: it is imported here, at the end, once every name it takes
# from this module exists.
from game.egdb.manifest import check_any_file, check_folder, regular_size  # noqa: E402
