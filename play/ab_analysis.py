"""The alpha-beta's analysis: the best moves with scores and lines, deepened by time.

The analysis board's default engine is the strongest player the project has at equal time, the
compiled alpha-beta with the learned evaluation (the ``ab+nn`` players of
``evaluation.players.alphabeta``). The core's search returns one best move; the board wants the
best N
(multi-PV). Each root move is searched on its own: the position after the move is searched to
depth ``d - 1`` (``evaluation.players.alphabeta``, the GIL released), its score negated and its
principal variation put after the move. Every root move thus gets an exact score at the same
depth, which is the multi-PV of N = all moves (checkers has few legal moves: 7 at the start, one
or two when a capture is on). The iterations deepen ``d`` = 2, 3, ... until the depth limit, the
time budget, a stop, or until every move's score is a proven result; each complete iteration is
reported (``on_iteration``), so a caller can show the lines while the search deepens. An
iteration that runs out of time is dropped: every line of an answer is of one depth.

Scores are centi-men from the mover's view (a man is 100). A forced win found by the search
scores ``MATE_SCORE - plies``; a position the endgame database knows scores ``DATABASE_WIN -
plies`` (its exact value, reached that many plies ahead). ``expected_score`` turns a score into
the mover's expected score (win + draw / 2) with the learned evaluation's own scale (its output is
``output_scale`` centi-men per unit of logit of the expected score), so the board's mistake marks
read the alpha-beta's scores on the same 0..1 scale as the network's.

At a root in the database the answer carries ``database``: the exact result for the mover, and
the distance in plies when the search proved the end of the game within its horizon (the
database holds no distances), else None.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from evaluation.players.alphabeta import MATE_SCORE, MATE_THRESHOLD, alphabeta
from evaluation.players.defaults import default_knowledge
from evaluation.players.endgame import open_for_play
from game import _core
from game.egdb import DRAW, LOSS, UNKNOWN, WIN, EndgameDatabase
from game.nneval import DEFAULT_PATH, load
from game.position import Move, Position

DATABASE_WIN: int = _core.DATABASE_WIN  # a database result n plies ahead: DATABASE_WIN - n
MAX_DEPTH = 64  # the core's deepest iteration (kMaxSearchDepth)
FIRST_DEPTH = 2  # the first iteration: each root move's position searched one ply deep
DATABASE_TEXT = {WIN: "win", DRAW: "draw", LOSS: "loss"}


@dataclass
class Line:
    move: str  # the root move, standard notation
    score_cp: int  # centi-men from the mover's view; see the module docstring for results
    line: list[str]  # the move and the principal variation after it
    depth: int  # the iteration that scored it (plies from the root)
    result: str | None = None  # "win" / "loss" when the score is a proven result, else None
    plies: int | None = None  # plies to that result (the game's end, or the database position)


@dataclass
class AbAnalysis:
    fen: str
    turn: str  # 'B' or 'W'
    legal: list[str]
    engine: str = "ab"
    result: str | None = None  # set when the game is already over
    end_reason: str | None = None
    move: str | None = None  # the best move (the first line's)
    score_cp: int | None = None  # the best line's score
    score: float | None = None  # the mover's expected score (win + draw/2) of the best line
    pv: list[str] = field(default_factory=list)  # the best line
    lines: list[Line] = field(default_factory=list)  # best first
    depth: int = 0  # the deepest complete iteration
    nodes: int = 0  # nodes searched in all
    ms: float = 0.0  # wall time spent
    database: dict[str, Any] | None = None  # {"result", "distance"} at a database root
    known: str | None = None  # "database win" / "database draw" / "database loss"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AbBudget:
    """How deep and how long: ``depth`` iterations at most (0: no limit but the time), ``ms``
    milliseconds in all (0: no limit but the depth), ``slice_ms`` the longest one root move's
    search may take (a stop is read between root moves, so it bounds how late a stop is heard)."""

    depth: int = 0
    ms: int = 0
    slice_ms: int = 5000

    def __post_init__(self) -> None:
        if self.depth < 0 or self.ms < 0 or self.slice_ms < 1:
            raise ValueError(f"ab budget: depth and ms must be >= 0, slice_ms >= 1, got {self}")
        if self.depth == 0 and self.ms == 0:
            raise ValueError("ab budget: give a depth, a time (ms) or both")
        if self.depth > MAX_DEPTH:
            raise ValueError(f"ab budget: depth must be at most {MAX_DEPTH}, got {self.depth}")


@functools.cache
def learned_evaluation(path: str = "") -> tuple[_core.NNEvalWeights, int]:
    """The learned evaluation's core weights and its ``output_scale`` (the shipped file when
    ``path`` is empty), read once per process."""
    net = load(path or DEFAULT_PATH)
    return net.core(), int(net.output_scale)


def expected_score(score_cp: int, scale: int) -> float:
    """The mover's expected score of an alpha-beta score: 1 or 0 for a proven result (a forced
    one or the database's), else the logistic of ``score_cp / scale`` (module docstring)."""
    if score_cp >= MATE_THRESHOLD or score_cp > DATABASE_WIN - MAX_DEPTH * 2:
        return 1.0
    if score_cp <= -MATE_THRESHOLD or score_cp < -(DATABASE_WIN - MAX_DEPTH * 2):
        return 0.0
    return 1.0 / (1.0 + math.exp(-score_cp / scale))


def proven(score_cp: int) -> tuple[str, int | None] | None:
    """``("win" | "loss", plies)`` when the score is a proven result: a forced end of the game
    (MATE_SCORE - plies), or ``plies`` None for a position the database knows (DATABASE_WIN -
    plies: the plies to that position, not to the end); None otherwise."""
    size = abs(score_cp)
    word = "win" if score_cp > 0 else "loss"
    if size >= MATE_THRESHOLD:
        return word, MATE_SCORE - size
    if size > DATABASE_WIN - 2 * MAX_DEPTH:
        return word, None
    return None


def _child_line(
    position: Position,
    move: Move,
    depth: int,
    time_ms: int,
    nneval: _core.NNEvalWeights,
    egdb: EndgameDatabase | None,
    tt_mb: int,
) -> tuple[Line, int, bool]:
    """The root move's line at ``depth``: (line, nodes, complete). Forced replies are played
    out first (the core's search stops a timed search with one legal move after one ply; its
    search extends forced replies too), and a move that ends the game scores its result."""
    child = position.copy()
    played = [move]
    child.play(move)
    while not child.is_over() and len(forced := child.legal_moves()) == 1:
        played.append(forced[0])
        child.play(forced[0])
    line = [str(m) for m in played]
    ours = len(played) % 2 == 0  # the root's mover is to move again in ``child``
    if child.is_over():
        result = child.result()
        won = {"1-0": "B", "0-1": "W"}.get(result or "")
        score = 0 if won is None else MATE_SCORE - len(played)
        if won is not None and won != position.turn:
            score = -score
        return _line(move, score, line, depth), 0, True
    r = alphabeta(child, depth=depth - 1, time_ms=time_ms, nneval=nneval, egdb=egdb, tt_mb=tt_mb)
    score = r.score if ours else -r.score
    # The child's result n plies from it is n + len(played) plies from the root.
    if proven(score) is not None:
        score += -len(played) if score > 0 else len(played)
    complete = r.depth >= depth - 1 or proven(score) is not None
    return _line(move, score, line + [str(m) for m in r.pv], depth), int(r.nodes), complete


def _line(move: Move, score: int, line: list[str], depth: int) -> Line:
    result = proven(score)
    return Line(
        str(move),
        int(score),
        line,
        depth,
        None if result is None else result[0],
        None if result is None else result[1],
    )


def analyse_ab(
    position: Position,
    budget: AbBudget,
    *,
    lines: int = 5,
    nneval: tuple[_core.NNEvalWeights, int] | None = None,
    egdb: EndgameDatabase | None = None,
    tt_mb: int = 16,
    stop: Callable[[], bool] | None = None,
    on_iteration: Callable[[AbAnalysis], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> AbAnalysis:
    """The best ``lines`` moves of ``position`` (module docstring), deepened within ``budget``;
    ``stop`` (read between root moves) ends it with the last complete iteration; ``egdb``: the
    database's exact values below the root and the exact result at a root it knows."""
    weights, scale = nneval or learned_evaluation()
    started = clock()
    out = AbAnalysis(position.fen(), position.turn, [str(m) for m in position.legal_moves()])
    if position.is_over():
        out.result, out.end_reason = position.result(), position.end_reason
        return out
    if egdb is not None and egdb.size == position.size and not position.game.mid_jump:
        value = egdb.value(position)
        if value != UNKNOWN:
            out.database = {"result": DATABASE_TEXT[value], "distance": None}
            out.known = f"database {DATABASE_TEXT[value]}"
    deadline = started + budget.ms / 1000.0 if budget.ms else math.inf
    last_depth = min(budget.depth or MAX_DEPTH, MAX_DEPTH)
    order = position.legal_moves()
    for depth in range(FIRST_DEPTH, last_depth + 1):
        found: list[Line] = []
        complete = True
        for move in order:
            left_ms = (deadline - clock()) * 1000.0
            if (stop is not None and stop()) or left_ms < 1:
                complete = False
                break
            time_ms = int(min(left_ms, budget.slice_ms))
            line, nodes, done = _child_line(position, move, depth, time_ms, weights, egdb, tt_mb)
            out.nodes += nodes
            if not done:
                complete = False
                break
            found.append(line)
        if not complete:
            break
        found.sort(key=lambda x: x.score_cp, reverse=True)
        order = [next(m for m in order if str(m) == x.move) for x in found]
        _fill(out, found[: max(1, lines)], depth, scale)
        out.ms = round((clock() - started) * 1000.0, 1)
        if on_iteration is not None:
            on_iteration(out)
        if all(x.result is not None for x in found):
            break  # every move's value is proven: deeper iterations say the same
    if out.database is not None and out.database["distance"] is None and out.lines:
        _distance(out, position, weights, deadline, budget, tt_mb, clock, stop)
        if on_iteration is not None and out.database["distance"] is not None:
            on_iteration(out)
    out.ms = round((clock() - started) * 1000.0, 1)
    return out


def _distance(
    out: AbAnalysis,
    position: Position,
    weights: _core.NNEvalWeights,
    deadline: float,
    budget: AbBudget,
    tt_mb: int,
    clock: Callable[[], float],
    stop: Callable[[], bool] | None,
) -> None:
    """The database holds no distances: at a won or lost root, one search without it (within
    what is left of the time, at most a slice) may prove the end of the game and its distance."""
    assert out.database is not None
    left_ms = min((deadline - clock()) * 1000.0, budget.slice_ms)
    if out.database["result"] == "draw" or left_ms < 1 or (stop is not None and stop()):
        return
    depth = budget.depth if not budget.ms else 0
    r = alphabeta(position, depth=depth, time_ms=int(left_ms), nneval=weights, tt_mb=tt_mb)
    if abs(r.score) >= MATE_THRESHOLD and (r.score > 0) == (out.database["result"] == "win"):
        out.database["distance"] = MATE_SCORE - abs(r.score)


def _fill(out: AbAnalysis, found: list[Line], depth: int, scale: int) -> None:
    best = found[0]
    out.lines = found
    out.depth = depth
    out.move = best.move
    out.pv = list(best.line)
    out.score_cp = best.score_cp
    out.score = round(expected_score(best.score_cp, scale), 4)
    if out.database is not None:
        # The exact value wins over the evaluation; a proven result of the search gives the
        # distance (a database win below the root is a distance to that position, not the end).
        exact = {"win": 1.0, "draw": 0.5, "loss": 0.0}[out.database["result"]]
        out.score = exact
        if best.plies is not None:
            out.database["distance"] = best.plies


class AbEngine:
    """The alpha-beta analysis within the play settings (``analysis.ab_*`` and ``limits``):
    the learned evaluation loaded once, the endgame database when ``analysis.ab_egdb`` is on and
    its files are there (``egdb.dir``, ``egdb.pieces``; one warning line when absent)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.cfg = settings["analysis"]
        self.limits = settings["limits"]

    def egdb(self) -> EndgameDatabase | None:
        if not self.cfg["ab_egdb"]:
            return None
        defaults, _ = default_knowledge()
        return open_for_play(defaults["dir"], 8, defaults["pieces"])

    def budget(self, ms: int | None = None, depth: int | None = None) -> AbBudget:
        """A budget per position within the limits: ``ms`` (``analysis.ab_ms`` when neither is
        given) and/or ``depth``; ValueError naming what is out of range."""
        for name, value in (("ms", ms), ("depth", depth)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"{name} must be a whole number, got {str(value)[:40]!r}")
        if ms is None and depth is None:
            ms = int(self.cfg["ab_ms"])
        if ms is not None and not 1 <= ms <= self.limits["max_ms"]:
            raise ValueError(f"ms must be 1..{self.limits['max_ms']}, got {ms}")
        if depth is not None and not FIRST_DEPTH <= depth <= self.limits["max_minimax_depth"]:
            raise ValueError(
                f"depth must be {FIRST_DEPTH}..{self.limits['max_minimax_depth']}, got {depth}"
            )
        return AbBudget(depth or 0, ms or 0, int(self.cfg["ab_slice_ms"]))

    def analyse(
        self,
        position: Position,
        budget: AbBudget,
        *,
        lines: int | None = None,
        stop: Callable[[], bool] | None = None,
        on_iteration: Callable[[AbAnalysis], None] | None = None,
    ) -> AbAnalysis:
        return analyse_ab(
            position,
            budget,
            lines=int(self.cfg["ab_lines"]) if lines is None else lines,
            egdb=self.egdb(),
            tt_mb=int(self.cfg["ab_tt_mb"]),
            stop=stop,
            on_iteration=on_iteration,
        )


__all__ = [
    "AbAnalysis",
    "AbBudget",
    "AbEngine",
    "Line",
    "analyse_ab",
    "expected_score",
    "learned_evaluation",
    "proven",
]
