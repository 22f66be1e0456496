"""Building an opening book (``evaluation.book``): deeper searches along the ACF ballots' lines
and a run's self-play statistics; the command is ``python -m evaluation.book build``."""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from evaluation.players.alphabeta import alphabeta
from evaluation.players.book import book_path, write_book
from evaluation.players.defaults import default_mcts_settings
from evaluation.players.network import load_network
from game import nneval
from game.mcts import Inference, new_search, search
from game.openings import Opening, acf_deck
from game.pdn import iter_pdn
from game.position import Move, Position

logger = logging.getLogger(__name__)

# Defaults of the build command (evaluation.players.book's docstring): a few minutes on a laptop
# core.
DEFAULT_SIMULATIONS = 400  # visits per book position: twice a 200-simulation match move
DEFAULT_PLIES = 2  # book moves per ballot line (the ballot's position and the reply after it)
DEFAULT_AB_DEPTH = 16  # the fast player's book: its search depth (a 200 ms move reaches 11-14)
DEFAULT_SELFPLAY_PLIES = 16  # plies of each self-play game whose positions are counted
DEFAULT_MIN_GAMES = 8  # games a position (and its move) must be seen in to enter the book
# Leaves of one tree per forward pass while building: the ballots are searched side by side.
BUILD_LEAVES_PER_GAME = 8
_PDN_SCORE = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}  # (Black, White)


def searched_moves(
    positions: Sequence[Position],
    inference: Inference,
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
    if "fpu_reduction" in settings:  # as the players search (player_defaults.play_settings)
        settings["fpu_reduction_root"] = settings["fpu_reduction"]
    mcts = new_search(len(positions), positions[0].size, settings, seed=0)
    starts = [p.game.copy() for p in positions]
    for i, game in enumerate(starts):
        mcts.reset(i, game)
    search(mcts, inference, simulations)
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
            search(mcts, inference, simulations)  # the kept subtrees, topped up
    return [(starts[i].move_of(actions[i]), wdl[i]) for i in range(len(positions))]


# A book position's move and what its entry records beside it (source, visits, depth, score...).
Chooser = Callable[[list[Position]], list[tuple[Move, dict[str, Any]]]]


def line_entries(
    openings: Iterable[Opening],
    choose: Chooser,
    *,
    plies: int,
    replies: bool = False,
    progress: Any = logger.info,
    what: str = "",
) -> dict[str, dict[str, Any]]:
    """Entries along each opening's main line, ``plies`` book moves deep, each position's move
    from ``choose`` (all of a ply's positions at once); a position with one legal move is
    followed but gets no entry. ``replies``: also every position one move away from the line
    (each move of the side the book did not just play for, the ballot's position included), so
    that the book answers whichever colour it plays and whatever the opponent chose; about
    eight times the positions a ply."""

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
        found = choose(todo)
        searched.update(p.fen() for p in todo)
        frontier = {}
        for pos, (move, fields) in zip(todo, found, strict=True):
            if len(pos.legal_moves()) > 1:  # a forced move needs no book, its line does
                entries[pos.fen()] = {"move": str(move), **fields}
            after = pos.copy()
            after.play(move)
            add(after, replies)
        progress(
            f"book: ply {ply + 1}/{plies}: {len(todo)} positions searched "
            f"({what}) in {time.perf_counter() - start:.0f} s"
        )
    return entries


def search_entries(
    openings: Iterable[Opening],
    inference: Inference,
    *,
    simulations: int = DEFAULT_SIMULATIONS,
    plies: int = DEFAULT_PLIES,
    mcts_settings: Mapping[str, Any],
    replies: bool = False,
    progress: Any = logger.info,
) -> dict[str, dict[str, Any]]:
    """The network's entries (`line_entries`): each move the most visited of a search of
    ``simulations`` visits, with the root's win/draw/loss."""

    def choose(todo: list[Position]) -> list[tuple[Move, dict[str, Any]]]:
        found = searched_moves(todo, inference, simulations, mcts_settings)
        out = []
        for move, wdl in found:
            fields: dict[str, Any] = {"source": "search", "visits": simulations}
            if wdl is not None:
                fields["wdl"] = wdl
            out.append((move, fields))
        return out

    return line_entries(
        openings,
        choose,
        plies=plies,
        replies=replies,
        progress=progress,
        what=f"{simulations} simulations each",
    )


_AB_CORES: dict[str, Any] = {}  # a worker's loaded evaluation, by path


def _ab_search(job: tuple[str, str, int, int]) -> tuple[str, int, int, int]:
    """One book position's alpha-beta search in a worker: (move, score, depth, nodes)."""
    evaluation, fen, size, depth = job
    if evaluation not in _AB_CORES:
        _AB_CORES[evaluation] = nneval.load_core(evaluation)
    found = alphabeta(
        Position.from_fen(fen, size), depth=depth, nneval=_AB_CORES[evaluation], tt_mb=64
    )
    return str(found.move), int(found.score), int(found.depth), int(found.nodes)


def alphabeta_entries(
    openings: Iterable[Opening],
    evaluation: str | Path,
    *,
    depth: int = DEFAULT_AB_DEPTH,
    plies: int = DEFAULT_PLIES,
    replies: bool = False,
    workers: int = 1,
    progress: Any = logger.info,
) -> dict[str, dict[str, Any]]:
    """The fast player's entries (`line_entries`): each move that of the alpha-beta with the
    learned evaluation ``evaluation`` at the fixed ``depth`` (deterministic), with its score in
    centi-men for the mover; positions searched side by side in ``workers`` processes."""
    evaluation = str(evaluation)
    nneval.load(evaluation)  # a bad file is refused here, in one line, not in a worker

    def choose(todo: list[Position]) -> list[tuple[Move, dict[str, Any]]]:
        jobs = [(evaluation, p.fen(), p.size, depth) for p in todo]
        if workers > 1:
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                found = list(pool.map(_ab_search, jobs))
        else:
            found = [_ab_search(job) for job in jobs]
        out = []
        for pos, (text, score, reached, nodes) in zip(todo, found, strict=True):
            move = next(m for m in pos.legal_moves() if str(m) == text)
            fields = {"source": "alphabeta", "depth": reached, "score": score, "nodes": nodes}
            out.append((move, fields))
        return out

    return line_entries(
        openings,
        choose,
        plies=plies,
        replies=replies,
        progress=progress,
        what=f"alpha-beta to depth {depth}, {workers} worker(s)",
    )


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
    inference, _ = load_network(network, device, threads, "auto")
    size = inference.config.board_size
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
                inference,
                simulations=simulations,
                plies=plies,
                replies=replies,
                mcts_settings=default_mcts_settings(),
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


def build_alphabeta_book(
    evaluation: str | Path,
    out: str | Path | None = None,
    *,
    depth: int = DEFAULT_AB_DEPTH,
    plies: int = DEFAULT_PLIES,
    replies: bool = False,
    openings: Sequence[Opening] | None = None,
    workers: int = 1,
    progress: Any = logger.info,
) -> Path:
    """Builds and writes the book of the learned evaluation ``evaluation`` (the ``ab+nn``
    player's), beside it by default (``<stem>.book.json``), tied to it by its SHA-256."""
    size = int(nneval.load(evaluation).size)
    if openings is None:
        openings = acf_deck() if size == 8 else []
    entries = alphabeta_entries(
        openings,
        evaluation,
        depth=depth,
        plies=plies,
        replies=replies,
        workers=workers,
        progress=progress,
    )
    settings = {
        "player": "ab+nn",
        "depth": depth,
        "plies": plies,
        "replies": replies,
        "openings": len(openings),
    }
    path = write_book(
        out or book_path(evaluation), entries, network=evaluation, board=size, settings=settings
    )
    progress(f"book: {len(entries)} positions written to {path}")
    return path


__all__ = [
    "alphabeta_entries",
    "build_alphabeta_book",
    "build_book",
    "line_entries",
    "search_entries",
    "searched_moves",
    "selfplay_entries",
]
