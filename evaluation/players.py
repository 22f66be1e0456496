"""Players: anything that picks a move in a position, behind one small protocol.

A player is named by a *spec* string, so that matches, the gate and the ladder can all be
driven from the command line and from config:

``minimax:D``
    the alpha-beta baseline (``game._core.alphabeta_search``) searching D plies (1..64).
``minimax:tMS``
    the same, with MS milliseconds per move instead of a depth (not reproducible: it depends
    on the machine's speed).
``minimax:tMS,tm``
    the same with time management: MS milliseconds a move on average over a game, not a fixed
    share. A move whose best reply has held for several iterations stops at half of it, one whose
    best move just changed (or whose score just fell) may run on, drawing on the time the player
    saved earlier in the game (its *bank*); it never spends more in a game than MS times its
    moves, so under a clock that adds MS a move it never loses on time. ``,tm`` goes with every
    timed alpha-beta form below (``ab+nn:t200,tm``).
``minimax+db:D`` / ``minimax+db:tMS``
    the same search with the endgame database (``game.egdb``): positions in it below the root
    score their exact value, and at a root it knows the move keeps the database's value and makes
    progress (:func:`evaluation.endgame_play.database_move`: a won ending is won, not shuffled
    into a draw). Needs the ``egdb_dir`` and ``egdb_pieces`` options (conf/egdb); the database is
    built there first if missing.
``ab+nn:D`` / ``ab+nn:tMS`` / ``ab+nn:D:PATH``
    the same search with the learned evaluation (:mod:`game.nneval`) scoring its leaves instead
    of the hand-written one: the shipped weights file, or the one at PATH
    (``python -m learner.nneval.train`` writes one). ``ab+nn+db:...`` adds the database.
``random`` / ``random:SEED``
    a uniformly random legal move (the anchor of the Elo ladder, rated 0).
``uniform-mcts:...`` or a checkpoint path
    the MCTS players of :mod:`evaluation.network_player`. Any other spec is a ValueError
    naming it.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from evaluation.endgame_play import DEFAULT_PROGRESS_DEPTH, root_move
from evaluation.mcts_player import bank_after, time_lent_ms
from evaluation.network_player import mcts_player
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
MAX_DEPTH = 64  # the core's deepest iteration (kMaxSearchDepth)
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

_MINIMAX_SPEC = re.compile(r"minimax(?P<db>\+db)?:(?:(?P<depth>\d+)|t(?P<time_ms>\d+)(?P<tm>,tm)?)")
_NNEVAL_SPEC = re.compile(
    r"ab\+nn(?P<db>\+db)?:(?:(?P<depth>\d+)|t(?P<time_ms>\d+)(?P<tm>,tm)?)(?::(?P<path>.+))?"
)
_RANDOM_SPEC = re.compile(r"random(?::(?P<seed>\d+))?")
SPEC_FORMS = (
    "'minimax:D' (depth), 'minimax:tMS[,tm]' (milliseconds per move, ',tm': managed over the "
    "game), 'minimax+db:D' (with the endgame database), 'ab+nn:D' / 'ab+nn:tMS[,tm][:PATH]' "
    "(learned evaluation), 'random[:SEED]'"
)


@runtime_checkable
class Player(Protocol):
    """What a match needs from a player. ``choose`` must not change ``position``."""

    name: str

    def choose(self, position: Position) -> Move:
        """A legal move for the side to move (ValueError when the game is over)."""
        ...

    def reset(self) -> None:
        """Forget per-game state (called before every game)."""
        ...


def player_stats(player: Player) -> dict[str, int]:
    """A player's search counters since construction (``stats()``, plain counts such as moves,
    simulations, depth and nodes summed over its moves); empty for players that do not search."""
    stats = getattr(player, "stats", None)
    return {str(k): int(v) for k, v in stats().items()} if callable(stats) else {}


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

    ``manage_time`` (with ``time_ms``): ``time_ms`` is the average a move may take over a game.
    Each move is searched with ``time_ms`` as its target and ``time_ms`` plus at most
    TIME_MAX_EXTENSION budgets (evaluation.mcts_player) from the bank as its hard limit (the core
    stops settled searches at half the target and lets unsettled ones run on); the bank gains
    what a move leaves of its budget and pays what it takes beyond it, so the time spent in a
    game stays within ``time_ms`` times its moves (plus the overshoot of the last move, well
    under a millisecond).
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
        self.bank_ms = 0.0  # time saved so far in this game (time management)
        self._search = search or alphabeta
        self._clock = clock
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
        max_ms = 0
        if self.manage_time:
            max_ms = self.time_ms + int(time_lent_ms(self.bank_ms, self.time_ms))
        started = self._clock()
        if egdb is not None and (known := self._database_move(position, egdb)) is not None:
            self._count(None, started)
            self.egdb_moves += 1
            return known
        result = self._search(
            position,
            depth=self.depth,
            time_ms=self.time_ms,
            max_ms=max_ms,
            weights=self.weights,
            tt_mb=self.tt_mb,
            egdb=egdb,
            nneval=self._nneval_core,
        )
        if result.move is None:
            raise ValueError(f"{self.name}: the game is over in {position.fen()}")
        if egdb is not None and -MATE_THRESHOLD < result.score < DATABASE_LOSS_BELOW:
            result = self._resist(position, result, started)
        self._count(result, started)
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
        )
        return lost if again.move is None else again

    def _database_move(self, position: Position, egdb: EndgameDatabase) -> Move | None:
        """The database's move at a root it knows (None: search). Its progress search goes
        as deep as the network players' (egdb.play_depth's default, at most 6 pieces are left)."""
        depth = max(self.depth, DEFAULT_PROGRESS_DEPTH)
        return root_move(position, egdb, time_ms=self.time_ms, depth=depth)

    def _count(self, result: SearchResult | None, started: float) -> None:
        """Book-keeping of one chosen move: the clock's bank and the per-move counters (a
        database move has no search result: no depth or nodes)."""
        spent_ms = 1000.0 * (self._clock() - started)
        if self.manage_time:
            self.bank_ms = bank_after(self.bank_ms, self.time_ms, spent_ms)
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
        counts = {"moves": self.moves, "depth": self.depth_total, "nodes": self.nodes_total}
        return counts | timed | known

    def reset(self) -> None:
        self.last = None
        self.bank_ms = 0.0  # a new game: its clock starts empty

    def __repr__(self) -> str:
        return f"MinimaxPlayer({self.name!r}, {self.weights!r})"


class RandomPlayer:
    """A uniformly random legal move; ``reset`` restarts its generator from ``seed``."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.name = "random"
        self._rng = random.Random(seed)

    def choose(self, position: Position) -> Move:
        moves = position.legal_moves()
        if not moves or position.is_over():
            raise ValueError(f"random: the game is over in {position.fen()}")
        return self._rng.choice(moves)

    def reset(self) -> None:
        self._rng = random.Random(self.seed)

    def __repr__(self) -> str:
        return f"RandomPlayer(seed={self.seed})"


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
) -> SearchResult:
    """One alpha-beta search (the GIL is released while it runs), with the database if given and
    the learned evaluation instead of the hand-written one if given. ``max_ms`` > 0 manages the
    time: ``time_ms`` is then the target and ``max_ms`` the hard limit (MinimaxPlayer)."""
    game = position.game if isinstance(position, Position) else position
    core_db = egdb.core if egdb is not None else None
    weights_ = eval_weights(weights)
    return _core.alphabeta_search(game, depth, time_ms, weights_, tt_mb, core_db, nneval, max_ms)


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


def make_player(
    spec: str,
    *,
    weights: Mapping[str, Any] | EvalWeights | None = None,
    seed: int = 0,
    tt_mb: int = DEFAULT_TT_MB,
    egdb_dir: str | None = None,
    egdb_pieces: int = 0,
    **options: Any,
) -> Player:
    """The player a spec names (module docstring); ValueError naming the spec if unknown.

    ``weights`` and ``tt_mb`` configure minimax players, ``seed`` a random player without its own
    seed; ``egdb_dir`` and ``egdb_pieces`` name the endgame database of ``minimax+db`` players;
    any other ``options`` (``mcts``: search settings) go to the MCTS players.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"player spec must be a non-empty string, got {spec!r}; use {SPEC_FORMS}")
    text = spec.strip()
    nn_match = _NNEVAL_SPEC.fullmatch(text)
    if m := (_MINIMAX_SPEC.fullmatch(text) or nn_match):
        depth = int(m["depth"] or 0)
        time_ms = int(m["time_ms"] or 0)
        if depth == 0 and time_ms == 0:
            raise ValueError(f"player spec {spec!r}: depth and time must be positive")
        if m["db"] and (not egdb_dir or egdb_pieces < 1):
            raise ValueError(
                f"player spec {spec!r} needs an endgame database: give egdb_dir and egdb_pieces "
                f"(conf/egdb; python -m evaluation.match --egdb-dir DIR --egdb-pieces N)"
            )
        try:
            return MinimaxPlayer(
                depth,
                time_ms,
                weights,
                tt_mb=tt_mb,
                egdb_dir=egdb_dir if m["db"] else None,
                egdb_pieces=egdb_pieces if m["db"] else 0,
                nneval=(m["path"] or "") if nn_match else None,
                manage_time=bool(m["tm"]),
            )
        except ValueError as e:
            raise ValueError(f"player spec {spec!r}: {e}") from None
    if m := _RANDOM_SPEC.fullmatch(text):
        return RandomPlayer(int(m["seed"]) if m["seed"] is not None else seed)
    player = mcts_player(text, seed=seed, egdb_dir=egdb_dir, egdb_pieces=egdb_pieces, **options)
    if player is not None:
        return player
    if text.startswith(("minimax", "random", "ab+nn")):
        raise ValueError(f"malformed player spec {spec!r}; use {SPEC_FORMS}")
    raise ValueError(
        f"unknown player spec {spec!r}: not {SPEC_FORMS}, uniform-mcts[:...] or a "
        f"checkpoint path (*.safetensors[:...])"
    )


__all__ = [
    "MATE_SCORE",
    "MATE_THRESHOLD",
    "EvalWeights",
    "MinimaxPlayer",
    "Player",
    "RandomPlayer",
    "SearchResult",
    "alphabeta",
    "eval_weights",
    "make_player",
    "minimax_options",
    "player_stats",
    "weights_dict",
]
