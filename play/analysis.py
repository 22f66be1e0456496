"""What the network thinks of positions: the batched C++ search, read back as moves.

One call searches many positions at once: every position is one game of a single
``BatchedMCTS``, so each forward pass carries leaves from all of them (as self-play does). The
budget is a number of simulations, or a time in milliseconds (``game.mcts.search_until``: the
search is extended a chunk of visits at a time, the clock read between batches, until the time is
spent).

What is read back per position (KataGo's analysis engine reports the same things):

- ``wdl``: the root's value as (win, draw, loss) probabilities for the side to move;
- ``top``: whole moves (a multi-jump is one move) with the network's prior, the visits the move
  got and its mean value ``q`` (win - loss, mover's view; a multi-jump shares the value of its
  first jump, the only one the core reports per root action);
- ``pv``: the principal variation, following the most visited child down the tree;
- ``move``: the move to play, the most visited one (ties to the higher prior).

The root is always searched, even with one legal move (``skip_forced_root`` off), so a forced
position still gets a value.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evaluation.players.book import Book
from evaluation.players.endgame import DEFAULT_PROGRESS_DEPTH, database_move
from game import _core
from game.egdb import EndgameDatabase, describe
from game.mcts import Inference, new_search, search_until, step
from game.position import Move, Position

# The longest move in notation takes all 12 pieces: 13 squares of up to 2 digits and 12
# separators, 38 characters; a longer text is not a move, and an error shows only its start.
MAX_MOVE_CHARS = 64


@dataclass(frozen=True)
class Budget:
    """How long to search each position: ``simulations`` visits, or ``ms`` milliseconds."""

    simulations: int = 0
    ms: int = 0
    chunk: int = 16  # visits added per round while a time budget lasts

    def __post_init__(self) -> None:
        if self.simulations < 0 or self.ms < 0:
            raise ValueError(f"budget: simulations and ms must be >= 0, got {self}")
        if (self.simulations == 0) == (self.ms == 0):
            raise ValueError("budget: give exactly one of simulations or ms")
        if self.chunk < 1:
            raise ValueError(f"budget: chunk must be >= 1, got {self.chunk}")


class Cancelled(RuntimeError):
    """A search stopped because the one who asked for it has gone."""


class Stop:
    """Ends a search early, read between batches (so it ends at most one batch later): when
    ``cancel`` was called (the client has gone) or, with ``max_s``, when that many seconds of
    ``clock`` have passed since it was made (the request's wall-time cap)."""

    def __init__(
        self, max_s: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.clock = clock
        self.max_s = max_s
        self.deadline = None if max_s is None else clock() + max_s
        self.reason: str | None = None  # "cancelled" or "time"

    def cancel(self) -> None:
        self.reason = "cancelled"

    def __call__(self) -> bool:
        if self.reason is None and self.deadline is not None and self.clock() >= self.deadline:
            self.reason = "time"
        return self.reason is not None


@dataclass
class MoveInfo:
    move: str  # standard notation, 11-15 or 15x22x29
    prior: float  # the network's probability of the move (product over the jumps of a capture)
    visits: int  # visits below the move
    q: float | None  # mean value win - loss after the move, mover's view; None if unvisited


@dataclass
class Analysis:
    fen: str
    turn: str  # 'B' or 'W'
    legal: list[str]
    result: str | None = None  # set when the game is already over ('1-0', '0-1', '1/2-1/2')
    end_reason: str | None = None
    move: str | None = None
    wdl: list[float] | None = None  # (win, draw, loss) for the side to move
    score: float | None = None  # expected score win + draw / 2 for the side to move
    visits: int = 0
    pv: list[str] = field(default_factory=list)
    top: list[MoveInfo] = field(default_factory=list)
    # Set when the move is not the search's: "book" (the network's opening book) or "database
    # win" / "database draw" / "database loss" (the endgame database's value, converted).
    known: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def position_from(
    fen: str | None = None, moves: Sequence[str] = (), *, max_moves: int | None = None
) -> Position:
    """The position after ``moves`` played from ``fen`` (the initial position when None).

    The moves become the position's history (the network's input planes include it). Raises
    ValueError naming the move that does not parse or is illegal.
    """
    if max_moves is not None and len(moves) > max_moves:
        raise ValueError(f"too many moves: {len(moves)} (at most {max_moves})")
    pos = Position.from_fen(fen) if fen else Position()
    for i, text in enumerate(moves):
        if not isinstance(text, str):
            raise ValueError(f"move {i + 1}: expected a string like '11-15', got {text!r:.40}")
        if len(text) > MAX_MOVE_CHARS:
            raise ValueError(
                f"move {i + 1}: {len(text)} characters, not a move (at most {MAX_MOVE_CHARS}; "
                f"it begins {text[:20]!r})"
            )
        try:
            pos.play(text)
        except ValueError as e:
            raise ValueError(f"move {i + 1} ({text!r}): {e}") from None
    return pos


def _run(mcts: _core.BatchedMCTS, inference: Inference, budget: Budget, stop: Stop) -> None:
    if budget.simulations:
        # One batch at a time, ``stop`` read between them; the first batch always runs, so every
        # root has its priors even when the search is stopped at once.
        mcts.simulations = budget.simulations
        while step(mcts, inference) and not stop():
            pass
        return

    # The time-budget driver the match players use too: the clock is read between batches, and
    # reads as past the deadline once ``stop`` says so.
    def clock() -> float:
        return math.inf if stop() else time.perf_counter()

    search_until(
        mcts, inference, time.perf_counter() + budget.ms / 1000.0, chunk=budget.chunk, clock=clock
    )


def _as_move(game: _core.Game, actions: list[int]) -> str:
    return str(game.move_of(actions))


def _pv(
    mcts: _core.BatchedMCTS, i: int, root: _core.Game, first: _core.Move, max_plies: int
) -> list[str]:
    """``first``, then the moves along the most visited children (a multi-jump is one move)."""
    game = root.copy()
    path = list(root.actions_of(first))
    game.make(first)
    pending: list[int] = []
    start = game.copy()
    moves: list[str] = [str(first)]
    while len(moves) < max_plies and game.result() == 0:
        try:
            priors, visits = mcts.node_stats(i, path)
        except ValueError:
            break
        if visits.max(initial=0) <= 0:
            break
        best = int(np.lexsort((priors, visits))[-1])
        game.step(best)
        path.append(best)
        pending.append(best)
        if not game.mid_jump:
            moves.append(_as_move(start, pending))
            pending = []
            start = game.copy()
    return moves


def _move_stats(
    mcts: _core.BatchedMCTS, i: int, root: _core.Game, moves: list[_core.Move]
) -> list[MoveInfo]:
    root_priors = mcts.root_priors(i)
    root_visits = mcts.root_visits(i)
    root_q = mcts.root_q(i)
    out = []
    for move in moves:
        actions = root.actions_of(move)
        prior = float(root_priors[actions[0]])
        visits = int(root_visits[actions[0]])
        for k in range(1, len(actions)):
            if visits == 0:
                break
            try:
                priors, child_visits = mcts.node_stats(i, actions[:k])
            except ValueError:
                visits = 0
                break
            prior *= float(priors[actions[k]])
            visits = int(child_visits[actions[k]])
        q = float(root_q[actions[0]])
        out.append(
            MoveInfo(str(move), round(prior, 4), visits, None if math.isnan(q) else round(q, 4))
        )
    out.sort(key=lambda m: (m.visits, m.prior), reverse=True)
    return out


def analyse(
    positions: Sequence[Position],
    inference: Inference,
    budget: Budget,
    mcts_settings: Mapping[str, Any],
    *,
    top_moves: int = 8,
    pv_max_plies: int = 20,
    stop: Stop | None = None,
    egdb: EndgameDatabase | None = None,
    book: Book | None = None,
    egdb_depth: int = DEFAULT_PROGRESS_DEPTH,
) -> list[Analysis]:
    """Searches every position in one batched search and reads back each one's analysis.

    ``stop`` ends the search early: Cancelled when it was cancelled; when its time is up, the
    analysis of what was searched (fewer visits than the budget). ``egdb``: the endgame
    database's values at the search's leaves, and at a root it knows the move that keeps its
    value and makes progress (``evaluation.players.endgame``, ``egdb_depth`` plies); ``book``: a
    position in the opening book gets the book's move. Either sets ``known``."""
    out: list[Analysis] = []
    live: list[int] = []
    for k, pos in enumerate(positions):
        a = Analysis(pos.fen(), pos.turn, [str(m) for m in pos.legal_moves()])
        if pos.is_over():
            a.result, a.end_reason = pos.result(), pos.end_reason
        else:
            live.append(k)
        out.append(a)
    if not live:
        return out
    size = positions[live[0]].size
    settings = dict(mcts_settings)
    settings["skip_forced_root"] = False
    settings["simulations"] = budget.simulations or budget.chunk
    mcts = new_search(len(live), size, settings)
    if egdb is not None and egdb.size == size:
        mcts.set_egdb(egdb.core)
    for slot, k in enumerate(live):
        if positions[k].size != size:
            raise ValueError(f"position {k}: every position of one batch must be {size}x{size}")
        mcts.reset(slot, positions[k].game)
    stop = stop or Stop()
    _run(mcts, inference, budget, stop)
    if stop.reason == "cancelled":
        raise Cancelled("the search was cancelled: its client has gone")
    for slot, k in enumerate(live):
        a = out[k]
        root = positions[k].game
        wdl = mcts.root_wdl(slot)
        if not np.isnan(wdl).any():
            a.wdl = [round(float(x), 4) for x in wdl]
            a.score = round(float(wdl[0] + wdl[1] / 2), 4)
        moves = root.legal_moves()
        stats = _move_stats(mcts, slot, root, moves)
        a.visits = int(sum(m.visits for m in stats))
        a.top = stats[:top_moves]
        known = _known_move(positions[k], egdb, book, egdb_depth, budget.ms)
        if known is not None:
            a.known = known[1]
            a.move = str(known[0])
        elif stats:
            a.move = stats[0].move
        if a.move is not None:
            best = next(m for m in moves if str(m) == a.move)
            a.pv = _pv(mcts, slot, root, best, pv_max_plies)
    return out


def _known_move(
    position: Position, egdb: EndgameDatabase | None, book: Book | None, depth: int, ms: int
) -> tuple[Move, str] | None:
    """The book's move, or the database's at a root it knows, with what it is; None. With a
    time budget (``ms``) the database's progress search takes four fifths of it, else ``depth``
    plies."""
    if book is not None and (move := book.move(position)) is not None:
        return move, "book"
    if egdb is not None and egdb.size == position.size:
        found = database_move(
            position, egdb, depth=0 if ms else depth, time_ms=max(1, ms * 4 // 5) if ms else 0
        )
        if found is not None:
            return found[0], describe(found[1])
    return None


__all__ = [
    "Analysis",
    "Budget",
    "Cancelled",
    "MoveInfo",
    "Stop",
    "analyse",
    "position_from",
]
