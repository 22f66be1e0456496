"""An opening book built by the system itself, keyed by position, stored beside its network.

Match openings come from the ACF 3-move ballots (``game.openings``), so the book's work starts
after the ballot's moves. It is keyed by position (the FEN: pieces and side to move, not the
move list), so every move order that reaches a position finds its entry. Two sources:

- **deeper searches over the ballots**: every ballot's position is searched by the network with
  a larger budget than a match move gets (``--sims``, 400 by default), the most visited move is
  the entry, and the position it leads to is searched in turn, ``--plies`` deep (a main line per
  ballot; both sides' moves, since the player may have either colour); ``--replies`` adds every
  position one move off those lines, so the book also answers an opponent that left them;
- **self-play statistics**: a run's ``games/selfplay.pdn`` (``--selfplay``, repeatable): in the
  first ``--selfplay-plies`` plies of its games, a position seen in at least ``--min-games``
  games gets the move that scored best for the mover among those played that often. A searched
  entry wins over a statistical one for the same position.

File (``<network stem>.book.json`` beside the network; JSON, never pickled)::

    {"format": "checkerzero-book", "version": 1, "board": 8,
     "network": "long-320min.safetensors", "network_sha256": "<hex>",
     "settings": {...how it was built...},
     "entries": {"<FEN>": {"move": "11-15", "source": "search", "visits": 800,
                           "wdl": [w, d, l]} | {"move": ..., "source": "selfplay",
                           "games": 41, "score": 0.61}, ...},
     "checksum": "<sha256 of the entries as canonical JSON>"}

:func:`load_book` refuses, with one line naming the file, a file that is not JSON, another
format or version, another board, a checksum that does not match, a network other than the one
it is used with (by SHA-256), or an entry whose move is not legal in its position. At play,
:meth:`Book.move` checks the entry's move against the position's legal moves once more.

The builder is :mod:`evaluation.book.build`, the command :mod:`evaluation.book.__main__`.
Build (a few minutes here with the defaults; a deeper book: ``--sims 4000 --plies 4 --replies``)::

    python -m evaluation.book build --network game/data/long-320min.safetensors \
        [--selfplay runs/<run>/games/selfplay.pdn] [--sims 400 --plies 2] [--out FILE]
    python -m evaluation.book show game/data/long-320min.book.json
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from game.files import FileRefused, read_regular_file
from game.json_header import parse_object
from game.position import Move, Position

logger = logging.getLogger(__name__)

BOOK_FORMAT = "checkerzero-book"
BOOK_VERSION = 1
BOOK_SUFFIX = ".book.json"
MAX_BOOK_BYTES = 64 << 20  # a book is a few hundred KB; a bigger file is not one


class BookError(ValueError):
    """A book file that cannot be used; the message names the file."""


def book_path(network: str | Path) -> Path:
    """Where the book of ``network`` lives: beside it, ``<stem>.book.json``."""
    network = Path(network)
    return network.with_name(network.name.removesuffix(".safetensors") + BOOK_SUFFIX)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def entries_checksum(entries: Mapping[str, Any]) -> str:
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Book:
    """Book moves by position (FEN) for one board and one network."""

    path: Path
    board: int
    network: str
    network_sha256: str
    entries: Mapping[str, Mapping[str, Any]]

    def __len__(self) -> int:
        return len(self.entries)

    def move(self, position: Position) -> Move | None:
        """The book's move in ``position``, None when it has none; a move that is not legal
        there (never, for a checked book) is logged and not played."""
        if position.size != self.board or position.game.mid_jump or position.is_over():
            return None
        entry = self.entries.get(position.fen())
        if entry is None:
            return None
        text = entry["move"]
        for move in position.legal_moves():
            if str(move) == text:
                return move
        logger.warning("book %s: move %s is not legal in %s; not played", self.path, text, position)
        return None


def _check_entry(fen: str, entry: Any, board: int) -> str | None:
    """Why an entry is unusable, None when it is fine (its move legal in its position)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("move"), str):
        return f"entry {fen!r} has no move"
    try:
        pos = Position.from_fen(fen, board)
    except ValueError as e:
        return f"entry {fen!r}: {e}"
    if pos.is_over():
        return f"entry {fen!r}: the game is over there"
    if entry["move"] not in {str(m) for m in pos.legal_moves()}:
        return f"entry {fen!r}: move {entry['move']} is not legal there"
    return None


def load_book(path: str | Path, network: str | Path | None = None) -> Book:
    """The book in ``path``, every part checked (module docstring); ``network``: the network
    file it will play with (its SHA-256 must be the book's). BookError naming the file."""
    path = Path(path)

    def refuse(why: str) -> BookError:
        return BookError(f"book {path}: {why}")

    try:
        if not path.is_file():
            raise refuse("not found (build it with: python -m evaluation.book build --network ...)")
        if path.stat().st_size > MAX_BOOK_BYTES:
            raise refuse(f"larger than {MAX_BOOK_BYTES} bytes; not a book")
        raw = read_regular_file(path, MAX_BOOK_BYTES, "book")  # a FIFO swapped in is refused
    except FileRefused as e:
        raise BookError(str(e)) from None
    except OSError as e:
        raise refuse(f"not readable ({e.strerror or e})") from None
    try:
        data = parse_object(raw, "not a readable JSON book")
    except ValueError as e:
        raise refuse(str(e)) from None
    if data.get("format") != BOOK_FORMAT:
        raise refuse(f"not a {BOOK_FORMAT} file")
    if data.get("version") != BOOK_VERSION:
        raise refuse(f"format version {data.get('version')!r}; this program reads {BOOK_VERSION}")
    board, entries = data.get("board"), data.get("entries")
    if board not in (6, 8) or not isinstance(entries, dict):
        raise refuse("no board size or no entries")
    if data.get("checksum") != entries_checksum(entries):
        raise refuse("checksum does not match its entries (damaged or edited)")
    sha = str(data.get("network_sha256", ""))
    if network is not None and sha != file_sha256(network):
        raise refuse(
            f"built for network {data.get('network')!r}, not {Path(network).name} (another "
            "file); build one for it with python -m evaluation.book build"
        )
    for fen, entry in entries.items():
        if why := _check_entry(fen, entry, board):
            raise refuse(why)
    return Book(path, int(board), str(data.get("network", "")), sha, entries)


def write_book(
    path: str | Path,
    entries: Mapping[str, Mapping[str, Any]],
    *,
    network: str | Path,
    board: int = 8,
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Writes a book file (module docstring), each entry checked first (ValueError)."""
    path = Path(path)
    for fen, entry in entries.items():
        if why := _check_entry(fen, entry, board):
            raise ValueError(f"book {path}: {why}")
    clean = {fen: dict(entries[fen]) for fen in sorted(entries)}
    data = {
        "format": BOOK_FORMAT,
        "version": BOOK_VERSION,
        "board": board,
        "network": Path(network).name,
        "network_sha256": file_sha256(network),
        "settings": dict(settings or {}),
        "entries": clean,
        "checksum": entries_checksum(clean),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"
    )
    tmp.replace(path)
    return path


__all__ = [
    "BOOK_FORMAT",
    "BOOK_VERSION",
    "Book",
    "BookError",
    "book_path",
    "load_book",
    "write_book",
]
