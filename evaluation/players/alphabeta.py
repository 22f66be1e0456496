"""The alpha-beta players: the C++ search with the hand-written or the learned evaluation.

:class:`MinimaxPlayer` plays the ``minimax:...`` and ``ab+nn:...`` specs
(:mod:`evaluation.players.spec` says what each form means): a fixed depth or a time per move,
time management over the game (``,tm``), the endgame database (``+db``) and the learned
evaluation (:mod:`game.nneval`). :func:`alphabeta` is one search; :func:`minimax_options` the
players' options from the ``evaluation.baseline`` config group.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import astuple
from typing import Any

from evaluation.players.ab_clock import GAME_MOVES, SPREAD_MOVES, bank_after, move_time
from evaluation.players.book import Book, book_path, load_book
from evaluation.players.endgame import DEFAULT_PROGRESS_DEPTH, root_move
from evaluation.players.spec import DEFAULT_SWITCHES, MAX_DEPTH, SWITCH_OPTIONS
from game import _core
from game.egdb import EndgameDatabase
from game.egdb.build import cached_database
from game.nneval import DEFAULT_PATH as NNEVAL_DEFAULT_PATH
from game.nneval import load_core as load_nneval
from game.position import Move, Position

logger = logging.getLogger(__name__)

EvalWeights = _core.EvalWeights
SearchResult = _core.SearchResult
MATE_SCORE: int = _core.MATE_SCORE  # a win found n plies ahead scores MATE_SCORE - n
MATE_THRESHOLD: int = _core.MATE_THRESHOLD  # |score| >= this: a forced win or loss was found
MIN_RESIST_MS = 5  # a search without the database in a lost position needs at least this
# A result of the database below the root scores DATABASE_WIN - plies (or its negation): above
# every evaluation, below every forced result the search finds itself (MATE_THRESHOLD).
DATABASE_LOSS_BELOW: int = -(2 * _core.DATABASE_WIN - MATE_THRESHOLD)  # score < this: lost in it

DEFAULT_TT_MB = 16  # transposition table per searching thread; depth 8 needs a few MB at most
WEIGHT_NAMES = (
    "man",
    "king",
    "advancement",
    "back_rank",
    "centre",
    "mobility",
    "runaway",
    "king_centre",
)


def eval_weights(values: Mapping[str, Any] | EvalWeights | None = None) -> EvalWeights:
    """EvalWeights from a mapping (e.g. ``cfg.evaluation.baseline.weights``); missing keys keep
    the core's defaults, unknown keys or non-integers raise ValueError naming them."""
    if values is None:
        return EvalWeights()
    if isinstance(values, EvalWeights):
        return values
    unknown = sorted(set(values) - set(WEIGHT_NAMES))
    if unknown:
        raise ValueError(f"unknown evaluation weight(s) {unknown}; known: {list(WEIGHT_NAMES)}")
    clean: dict[str, int] = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise ValueError(f"evaluation weight {key!r} must be an integer, got {value!r}")
        clean[key] = int(value)
    return EvalWeights(**clean)


def weights_dict(weights: EvalWeights) -> dict[str, int]:
    return {name: getattr(weights, name) for name in WEIGHT_NAMES}


class MinimaxPlayer:
    """The alpha-beta baseline at a fixed depth or a fixed time per move.

    At a fixed depth it is deterministic: the same position always gives the same move.
    ``last`` holds the SearchResult of the latest move (score, depth, nodes, principal variation);
    ``stats()`` the moves, depths, nodes and milliseconds searched since construction.

    ``manage_time`` (with ``time_ms``): ``time_ms`` is the average a move may take over a game,
    on an increment clock that starts each game at ``game_ms`` (:mod:`evaluation.players.ab_clock`):
    each move gets a target and a hard limit from what the clock holds, so the time spent in a
    game stays within ``game_ms`` plus ``time_ms`` times its moves.
    ``nodes_per_ms`` > 0 times the searches on the core's node clock (that many nodes a
    millisecond) and the player's bank with it: deterministic, for tests and measurements.
    ``switches``: the core's optional search techniques (SearchSwitches); with ``tt_keep`` the
    player owns its searcher, whose table outlives each move (cleared at ``reset``).
    ``name_table``: the name says the table's size (the spec asked for it: ``,tt=MB``).
    ``search`` and ``clock`` replace the core's search and the wall clock (tests inject both).
    """

    def __init__(
        self,
        depth: int = 0,
        time_ms: int = 0,
        weights: Mapping[str, Any] | EvalWeights | None = None,
        *,
        tt_mb: int = DEFAULT_TT_MB,
        egdb_dir: str | None = None,
        egdb_pieces: int = 0,
        nneval: str | None = None,
        manage_time: bool = False,
        game_ms: int = 0,
        nodes_per_ms: int = 0,
        switches: _core.SearchSwitches | None = None,
        name_table: bool = False,
        book: bool = False,
        search: Callable[..., SearchResult] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if manage_time and time_ms == 0:
            raise ValueError("MinimaxPlayer time management (',tm') needs a time, not a depth")
        if egdb_dir is not None and egdb_pieces < 1:
            raise ValueError(
                f"MinimaxPlayer with an endgame database needs egdb_pieces >= 1, got {egdb_pieces}"
            )
        if depth < 0 or time_ms < 0 or (depth == 0) == (time_ms == 0):
            raise ValueError(
                f"MinimaxPlayer needs exactly one of depth or time_ms > 0, got depth={depth}, "
                f"time_ms={time_ms}"
            )
        if depth > MAX_DEPTH:
            raise ValueError(f"MinimaxPlayer depth must be at most {MAX_DEPTH}, got {depth}")
        self.depth = depth
        self.time_ms = time_ms
        self.weights = eval_weights(weights)
        self.tt_mb = tt_mb
        self.egdb_dir = egdb_dir
        self.egdb_pieces = egdb_pieces
        # The learned evaluation's weights file ("" for the shipped one), loaded and checked here.
        self.nneval = None if nneval is None else (nneval or str(NNEVAL_DEFAULT_PATH))
        self._nneval_core = None if self.nneval is None else load_nneval(self.nneval)
        kind = "ab+nn" if nneval is not None else "minimax"
        kind += "+db" if egdb_dir is not None else ""
        self.name = f"{kind}:{depth}" if depth else f"{kind}:t{time_ms}"
        self.manage_time = manage_time
        self.name += ",tm" if manage_time else ""
        if game_ms < 0 or (game_ms and not manage_time):
            raise ValueError(f"MinimaxPlayer game_ms needs time management and >= 0, got {game_ms}")
        self.game_ms = game_ms
        self.name += f",game={game_ms}" if game_ms else ""
        self.bank_ms = float(game_ms)  # the clock beyond this move's increment (time management)
        self.overshoot_ms = 0.0  # the most a move of this game spent beyond its hard limit
        self._spread = GAME_MOVES if game_ms else SPREAD_MOVES
        self.nodes_per_ms = nodes_per_ms
        # The kind's default switches, for a timed player only (evaluation.players.spec).
        kind_defaults = DEFAULT_SWITCHES["ab+nn" if nneval is not None else "minimax"]
        kind_defaults = kind_defaults if time_ms else frozenset()
        if switches is None:
            switches = _core.SearchSwitches(**{SWITCH_OPTIONS[k]: True for k in kind_defaults})
        self.switches = switches
        if self.switches.policy and not (self._nneval_core and self._nneval_core.has_policy):
            raise ValueError(
                "the policy switch orders moves by the learned evaluation's move-ordering head: "
                + (
                    f"{self.nneval} has none (python -m learner.nneval.policy adds one)"
                    if self.nneval
                    else "use an ab+nn player whose evaluation file has one"
                )
            )
        # The name says what differs from the kind's defaults: switches on, and defaults off.
        on = {k for k, field_ in SWITCH_OPTIONS.items() if getattr(self.switches, field_)}
        self.name += "".join(
            f",{k}" if k in on else f",{k}=0"
            for k in SWITCH_OPTIONS
            if (k in on) != (k in kind_defaults)
        ) + (f",tt={tt_mb}" if name_table else "")
        if self.switches.probcut_min_pieces != _core.SearchSwitches().probcut_min_pieces:
            self.name += f",pcpieces={self.switches.probcut_min_pieces}"
        self._searcher = None
        if self.switches.tt_keep:  # its own table: another player's entries must not be read
            self._searcher = _core.AlphaBetaSearcher(tt_mb)
        self._search = search or alphabeta
        self._clock = clock
        # The opening book of the learned evaluation (<stem>.book.json beside its file, built
        # with python -m evaluation.book build --evaluation): refused unless built for it.
        self._book: Book | None = None
        if book:
            if self.nneval is None:
                raise ValueError("a book belongs to a learned evaluation: use an ab+nn player")
            self._book = load_book(book_path(self.nneval), self.nneval)
            self.name += ",book"
        self.book_moves = 0  # moves played from the book
        if nneval:  # a file other than the shipped one is part of the name
            self.name += f":{nneval}"
        self.last: SearchResult | None = None
        self.moves = 0  # moves chosen since construction (reset() keeps the counters)
        self.depth_total = 0  # depths reached, summed over those moves
        self.nodes_total = 0  # nodes searched, summed over those moves
        self.ms_total = 0.0  # wall-clock milliseconds of those moves' searches
        self.egdb_moves = 0  # moves chosen at a root the database knows

    def choose(self, position: Position) -> Move:
        egdb = None
        if self.egdb_dir is not None:  # opened (built if missing) once per process and board
            egdb = cached_database(self.egdb_dir, position.size, self.egdb_pieces)
        time_ms, max_ms = self.time_ms, 0
        if self.manage_time:
            clock = move_time(self.bank_ms, self.time_ms, self._spread, self.overshoot_ms)
            time_ms, max_ms = astuple(clock)
        started = self._clock()
        if self._book is not None and (move := self._book.move(position)) is not None:
            self._count(None, started)
            self.book_moves += 1
            return move
        if egdb is not None and (known := self._database_move(position, egdb, time_ms)) is not None:
            self._count(None, started)
            self.egdb_moves += 1
            return known
        result = self._search(
            position,
            depth=self.depth,
            time_ms=time_ms,
            max_ms=max_ms,
            weights=self.weights,
            tt_mb=self.tt_mb,
            egdb=egdb,
            nneval=self._nneval_core,
            **self._search_options(),
        )
        if result.move is None:
            raise ValueError(f"{self.name}: the game is over in {position.fen()}")
        if egdb is not None and -MATE_THRESHOLD < result.score < DATABASE_LOSS_BELOW:
            result = self._resist(position, result, started)
        self._count(result, started, max_ms)
        return result.move

    def _resist(self, position: Position, lost: SearchResult, started: float) -> SearchResult:
        """Every move leads to a database loss: the database ranks them only by how soon it
        is reached, so the search is run again without it, whose evaluation keeps the most
        material and the best position, where an opponent without perfect play may still go
        wrong (a player that took the first lost line gave up games such an opponent could not
        win). A timed player spends what is left of the move's time on it."""
        if self.time_ms:
            spent_ms = 1000.0 * (self._clock() - started)
            left_ms = int(self.time_ms - spent_ms)  # the move's share, not the bank
            if left_ms < MIN_RESIST_MS:
                return lost
        again = self._search(
            position,
            depth=self.depth,
            time_ms=left_ms if self.time_ms else 0,
            max_ms=0,
            weights=self.weights,
            tt_mb=self.tt_mb,
            egdb=None,
            nneval=self._nneval_core,
            **self._search_options(),
        )
        return lost if again.move is None else again

    def _search_options(self) -> dict[str, Any]:
        """The core's clock, switches and searcher, passed only where set (an injected search
        need not know them)."""
        options: dict[str, Any] = {}
        if self.nodes_per_ms:
            options["nodes_per_ms"] = self.nodes_per_ms
        if any(getattr(self.switches, f) for f in SWITCH_OPTIONS.values()):
            options["switches"] = self.switches
        if self._searcher is not None:
            options["searcher"] = self._searcher
        return options

    def _database_move(
        self, position: Position, egdb: EndgameDatabase, time_ms: int
    ) -> Move | None:
        """The database's move at a root it knows (None: search) within the move's time (its
        target under time management). Its progress search goes as deep as the network
        players' (egdb.play_depth's default, at most 6 pieces are left)."""
        depth = max(self.depth, DEFAULT_PROGRESS_DEPTH)
        return root_move(position, egdb, time_ms=time_ms, depth=depth)

    def _count(self, result: SearchResult | None, started: float, max_ms: int = 0) -> None:
        """Book-keeping of one chosen move: the clock's bank and the per-move counters (a
        database move has no search result: no depth or nodes)."""
        spent_ms = 1000.0 * (self._clock() - started)
        if self.nodes_per_ms:  # the node clock: what the searches counted
            spent_ms = result.clock_ms if result is not None else 0.0
        if self.manage_time:
            self.bank_ms = bank_after(self.bank_ms, self.time_ms, spent_ms)
            if max_ms:  # a search's overshoot of its hard limit (the reserve grows to cover it)
                self.overshoot_ms = max(self.overshoot_ms, spent_ms - max_ms)
        self.last = result
        self.moves += 1
        self.depth_total += result.depth if result is not None else 0
        self.nodes_total += result.nodes if result is not None else 0
        self.ms_total += spent_ms

    def stats(self) -> dict[str, int]:
        """Moves chosen since construction with the depths and nodes their searches reached
        (summed; a match divides by the moves), and with a database, the moves it chose."""
        timed = {"ms": round(self.ms_total)} if self.time_ms else {}
        known = {"egdb_moves": self.egdb_moves} if self.egdb_dir is not None else {}
        known |= {"book_moves": self.book_moves} if self._book is not None else {}
        counts = {"moves": self.moves, "depth": self.depth_total, "nodes": self.nodes_total}
        return counts | timed | known

    def reset(self) -> None:
        self.last = None
        self.bank_ms = float(self.game_ms)  # a new game: its clock starts again
        self.overshoot_ms = 0.0
        if self._searcher is not None:  # a new game: a fresh table
            self._searcher = _core.AlphaBetaSearcher(self.tt_mb)

    def __repr__(self) -> str:
        return f"MinimaxPlayer({self.name!r}, {self.weights!r})"


def alphabeta(
    position: Position | _core.Game,
    *,
    depth: int = 0,
    time_ms: int = 0,
    max_ms: int = 0,
    weights: Mapping[str, Any] | EvalWeights | None = None,
    tt_mb: int = DEFAULT_TT_MB,
    egdb: EndgameDatabase | None = None,
    nneval: _core.NNEvalWeights | None = None,
    nodes_per_ms: int = 0,
    switches: _core.SearchSwitches | None = None,
    searcher: _core.AlphaBetaSearcher | None = None,
) -> SearchResult:
    """One alpha-beta search (the GIL is released while it runs), with the database if given and
    the learned evaluation instead of the hand-written one if given. ``max_ms`` > 0 manages the
    time: ``time_ms`` is then the target and ``max_ms`` the hard limit (MinimaxPlayer).
    ``nodes_per_ms``, ``switches`` and ``searcher``: the core's node clock, search switches and
    a searcher with its own table (``game._core.alphabeta_search``)."""
    game = position.game if isinstance(position, Position) else position
    core_db = egdb.core if egdb is not None else None
    weights_ = eval_weights(weights)
    return _core.alphabeta_search(
        game,
        depth,
        time_ms,
        weights_,
        tt_mb,
        core_db,
        nneval,
        max_ms,
        nodes_per_ms,
        switches,
        searcher,
    )


def minimax_options(baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """make_player options of the minimax players from the ``evaluation.baseline`` config
    group: its evaluation ``weights`` and the ``search.tt_mb`` table size."""
    baseline = baseline or {}
    options: dict[str, Any] = {}
    if baseline.get("weights") is not None:
        options["weights"] = dict(baseline["weights"])
    if (baseline.get("search") or {}).get("tt_mb") is not None:
        options["tt_mb"] = int(baseline["search"]["tt_mb"])
    return options


__all__ = [
    "MATE_SCORE",
    "MATE_THRESHOLD",
    "EvalWeights",
    "MinimaxPlayer",
    "SearchResult",
    "alphabeta",
    "eval_weights",
    "minimax_options",
    "weights_dict",
]
