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

Build (a few minutes here with the defaults; a deeper book: ``--sims 4000 --plies 6``)::

    python -m evaluation.book build --network game/data/long-320min.safetensors \
        [--selfplay runs/<run>/games/selfplay.pdn] [--sims 400 --plies 2] [--out FILE]
    python -m evaluation.book show game/data/long-320min.book.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkerzero.config import compose
from game.mcts import Evaluator, new_search, search
from game.openings import Opening, acf_deck
from game.pdn import iter_pdn
from game.position import Move, Position

logger = logging.getLogger(__name__)

BOOK_FORMAT = "checkerzero-book"
BOOK_VERSION = 1
BOOK_SUFFIX = ".book.json"
MAX_BOOK_BYTES = 64 << 20  # a book is a few hundred KB; a bigger file is not one
# Defaults of the build command (module docstring): a few minutes on a laptop core.
DEFAULT_SIMULATIONS = 400  # visits per book position: twice a 200-simulation match move
DEFAULT_PLIES = 2  # book moves per ballot line (the ballot's position and the reply after it)
DEFAULT_SELFPLAY_PLIES = 16  # plies of each self-play game whose positions are counted
DEFAULT_MIN_GAMES = 8  # games a position (and its move) must be seen in to enter the book
# Leaves of one tree per forward pass while building: the ballots are searched side by side.
BUILD_LEAVES_PER_GAME = 8
_PDN_SCORE = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}  # (Black, White)


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


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not strict JSON", name, 0)


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
        data = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise refuse(f"not a readable JSON book ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict) or data.get("format") != BOOK_FORMAT:
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


# --- building -----------------------------------------------------------------------------------


def searched_moves(
    positions: Sequence[Position],
    evaluator: Evaluator,
    simulations: int,
    mcts_settings: Mapping[str, Any],
) -> list[tuple[Move, list[float] | None]]:
    """The network's move in every position by one batched search of ``simulations`` visits
    (no noise, the most visited action; a multi-jump's later decisions searched in turn), with
    the root's win/draw/loss for the mover (None where the search skipped a forced root)."""
    settings = {
        **mcts_settings,
        "simulations": simulations,
        "dirichlet_epsilon": 0.0,
        "leaves_per_game": BUILD_LEAVES_PER_GAME,
    }
    if "fpu_reduction" in settings:  # as the players search (network_player.play_settings)
        settings["fpu_reduction_root"] = settings["fpu_reduction"]
    mcts = new_search(len(positions), positions[0].size, settings, seed=0)
    starts = [p.game.copy() for p in positions]
    for i, game in enumerate(starts):
        mcts.reset(i, game)
    search(mcts, evaluator, simulations)
    wdl = [[round(float(x), 4) for x in mcts.root_wdl(i)] for i in range(len(positions))]
    wdl = [None if any(math.isnan(x) for x in w) else w for w in wdl]  # a root never evaluated
    actions: list[list[int]] = [[] for _ in positions]
    pending = list(range(len(positions)))
    while pending:
        for i in pending:
            action = mcts.choose(i, 0.0)
            mcts.advance(i, action)
            actions[i].append(action)
        pending = [i for i in pending if not mcts.done(i) and mcts.game(i).mid_jump]
        if pending:
            search(mcts, evaluator, simulations)  # the kept subtrees, topped up
    return [(starts[i].move_of(actions[i]), wdl[i]) for i in range(len(positions))]


def search_entries(
    openings: Iterable[Opening],
    evaluator: Evaluator,
    *,
    simulations: int = DEFAULT_SIMULATIONS,
    plies: int = DEFAULT_PLIES,
    mcts_settings: Mapping[str, Any],
    replies: bool = False,
    progress: Any = logger.info,
) -> dict[str, dict[str, Any]]:
    """Entries from searches along each opening's main line, ``plies`` book moves deep (a
    position with one legal move is followed but gets no entry). ``replies``: also every
    position one move away from the line (each move of the side the book did not just play
    for, the ballot's position included), so that the book answers whichever colour it plays
    and whatever the opponent chose; about eight times the positions a ply."""

    def add(pos: Position, with_replies: bool) -> None:
        frontier.setdefault(pos.fen(), pos)
        if with_replies and not pos.is_over():
            for reply in pos.legal_moves():
                after = pos.copy()
                after.play(reply)
                frontier.setdefault(after.fen(), after)

    frontier: dict[str, Position] = {}
    for opening in openings:
        add(opening.position(), replies)
    entries: dict[str, dict[str, Any]] = {}
    searched: set[str] = set()
    for ply in range(plies):
        todo = [p for fen, p in frontier.items() if fen not in searched and not p.is_over()]
        if not todo:
            break
        start = time.perf_counter()
        found = searched_moves(todo, evaluator, simulations, mcts_settings)
        searched.update(p.fen() for p in todo)
        frontier = {}
        for pos, (move, wdl) in zip(todo, found, strict=True):
            if len(pos.legal_moves()) > 1:  # a forced move needs no book, its line does
                entries[pos.fen()] = {"move": str(move), "source": "search", "visits": simulations}
                if wdl is not None:
                    entries[pos.fen()]["wdl"] = wdl
            after = pos.copy()
            after.play(move)
            add(after, replies)
        progress(
            f"book: ply {ply + 1}/{plies}: {len(todo)} positions searched "
            f"({simulations} simulations each) in {time.perf_counter() - start:.0f} s"
        )
    return entries


def selfplay_entries(
    texts: Iterable[str],
    *,
    plies: int = DEFAULT_SELFPLAY_PLIES,
    min_games: int = DEFAULT_MIN_GAMES,
    size: int = 8,
) -> dict[str, dict[str, Any]]:
    """Entries from self-play games (PDN texts): module docstring. Games that do not replay
    are skipped (logged once each)."""
    # stats[fen][move] = [games, points for the mover]
    stats: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for text in texts:
        for game in iter_pdn(text, size=size, replay=False):
            score = _PDN_SCORE.get(game.result)
            if score is None:
                continue
            try:
                pos = game.start()
                for text_move in game.moves[:plies]:
                    fen, mover = pos.fen(), pos.turn
                    move = pos.play(text_move)
                    cell = stats[fen][str(move)]
                    cell[0] += 1
                    cell[1] += score[0] if mover == "B" else score[1]
            except ValueError as e:
                logger.warning("book: self-play game skipped: %s", e)
    entries = {}
    for fen, moves in stats.items():
        seen = [(points / games, games, move) for move, (games, points) in moves.items()]
        seen = [s for s in seen if s[1] >= min_games]
        if not seen:
            continue
        score, games, move = max(seen)
        entries[fen] = {
            "move": move,
            "source": "selfplay",
            "games": games,
            "score": round(score, 4),
        }
    return entries


def build_book(
    network: str | Path,
    out: str | Path | None = None,
    *,
    simulations: int = DEFAULT_SIMULATIONS,
    plies: int = DEFAULT_PLIES,
    selfplay: Sequence[str | Path] = (),
    selfplay_plies: int = DEFAULT_SELFPLAY_PLIES,
    min_games: int = DEFAULT_MIN_GAMES,
    replies: bool = False,
    openings: Sequence[Opening] | None = None,
    device: str = "cpu",
    threads: int | None = None,
    progress: Any = logger.info,
) -> Path:
    """Builds and writes the book of ``network`` (``out``: beside it by default)."""
    from checkerzero.network.inference import load_for_play  # torch: only the builder needs it

    evaluator, _ = load_for_play(network, None, device=device, threads=threads)
    size = evaluator.config.board_size
    if openings is None:
        openings = acf_deck() if size == 8 else []
    entries: dict[str, dict[str, Any]] = {}
    if selfplay:
        texts = [Path(p).read_text(encoding="utf-8") for p in selfplay]
        entries.update(
            selfplay_entries(texts, plies=selfplay_plies, min_games=min_games, size=size)
        )
        progress(f"book: {len(entries)} positions from self-play")
    if openings and plies > 0 and simulations > 0:
        entries.update(
            search_entries(
                openings,
                evaluator,
                simulations=simulations,
                plies=plies,
                replies=replies,
                mcts_settings=dict(compose()["mcts"]),
                progress=progress,
            )
        )
    settings = {
        "simulations": simulations,
        "plies": plies,
        "replies": replies,
        "openings": len(openings),
        "selfplay": [Path(p).name for p in selfplay],
        "selfplay_plies": selfplay_plies,
        "min_games": min_games,
    }
    path = write_book(
        out or book_path(network), entries, network=network, board=size, settings=settings
    )
    progress(f"book: {len(entries)} positions written to {path}")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.book", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a network's book")
    b.add_argument("--network", required=True, help="the network's .safetensors file")
    b.add_argument("--out", help="the book file (default: <network stem>.book.json beside it)")
    b.add_argument("--sims", type=int, default=DEFAULT_SIMULATIONS, help="visits per position")
    b.add_argument("--plies", type=int, default=DEFAULT_PLIES, help="book moves per ballot line")
    b.add_argument("--selfplay", action="append", default=[], help="a run's selfplay.pdn")
    b.add_argument("--selfplay-plies", type=int, default=DEFAULT_SELFPLAY_PLIES)
    b.add_argument("--min-games", type=int, default=DEFAULT_MIN_GAMES)
    b.add_argument("--ballots", type=int, default=0, help="the first N ACF ballots (0: all)")
    b.add_argument(
        "--replies",
        action="store_true",
        help="also every position one opponent move off the book's lines (both colours)",
    )
    b.add_argument("--threads", type=int, default=None, help="torch threads")
    s = sub.add_parser("show", help="check a book and print what it holds")
    s.add_argument("book")
    s.add_argument("--network", help="also check that it was built for this network file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "build":
            for name, value in (
                ("--sims", args.sims),
                ("--plies", args.plies),
                ("--ballots", args.ballots),
            ):
                if value < 0:
                    raise ValueError(f"{name} must be at least 0, got {value}")
            if not Path(args.network).is_file():
                raise ValueError(f"network {args.network} not found")
            build_book(
                args.network,
                args.out,
                simulations=args.sims,
                plies=args.plies,
                selfplay=args.selfplay,
                selfplay_plies=args.selfplay_plies,
                min_games=args.min_games,
                replies=args.replies,
                openings=acf_deck()[: args.ballots] if args.ballots else None,
                threads=args.threads,
                progress=print,
            )
        else:
            book = load_book(args.book, args.network)
            sources = defaultdict(int)
            for entry in book.entries.values():
                sources[entry.get("source", "?")] += 1
            shown = ", ".join(f"{n} from {s}" for s, n in sorted(sources.items()))
            print(f"{book.path}: {len(book)} positions ({shown}), network {book.network}")
    except (ValueError, OSError) as e:
        raise SystemExit(f"error: {e}") from None


__all__ = [
    "BOOK_FORMAT",
    "BOOK_VERSION",
    "Book",
    "BookError",
    "book_path",
    "build_book",
    "load_book",
    "search_entries",
    "selfplay_entries",
    "write_book",
]

if __name__ == "__main__":
    main()
