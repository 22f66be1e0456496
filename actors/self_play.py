"""Self-play: many games at once in one batched search, each finished game a `GameRecord`.

`play_games` keeps `selfplay.games_in_parallel` games in one `BatchedMCTS`. Each round trip
gathers leaves from every game still searching, runs one forward pass over them and expands
them; games whose search for the current decision is complete then choose an action (visit
sampling with temperature for the first plies, the most visited after), and a finished game's
slot starts the next game at once, so the batch stays full.

Resignation: a side whose root value says it loses with probability above
`resign_threshold` for `resign_consecutive` of its own decisions in a row resigns, except in a
`resign_disabled_share` of the games, which play on and record where they would have resigned
(`GameRecord.resign_trigger`); the share of those that the resigning side did not lose is the
false-positive rate (`resign_false_positive_rate`).

Playout cap randomization (`selfplay.playout_cap`, off by default): each decision is searched
fully with probability `full_share`, else fast (`fast_simulations`, no root noise); the record
says which per position (`GameRecord.full_search`), so that only full ones train the policy.
With `mcts.forced_playouts_k` > 0 the recorded visits are the pruned policy target
(`BatchedMCTS.root_target`); the move played is chosen from the plain visit counts.

The command line is `python -m actors` (actors/__main__.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from checkerzero.store.live import make_live
from game import openings as op
from game.egdb import DRAW, WIN
from game.egdb.build import database_from_config
from game.encoding import META_WHITE_TO_MOVE
from game.mcts import Inference, PlayoutCap, StepTimes, draw_search, new_search, step
from game.position import RESULT_TEXT, Position
from game.records import RESIGNED, GameRecord, Result, Termination, sparse_visits

log = logging.getLogger(__name__)

_META_JUMPING_SHIFT, _META_JUMPING_MASK = 1, 0x3F  # square + 1 of a piece in mid multi-jump
# Root WDL index of a loss for the side to move.
_LOSS = 2
# Second word of the seed of the playout-cap draws: their own stream, so turning the cap on
# leaves the openings and resignation draws of a seed as they were.
_PLAYOUT_CAP_STREAM = 1


@dataclass(frozen=True)
class SelfPlaySettings:
    """The `selfplay` config group plus the game's size and ply cap (conf/game)."""

    size: int
    max_plies: int
    games_in_parallel: int
    openings: str
    temperature: float
    temperature_plies: int
    final_temperature: float
    resign: bool
    resign_threshold: float
    resign_consecutive: int
    resign_disabled_share: float
    playout_cap: PlayoutCap | None = None  # None: every decision is searched fully

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SelfPlaySettings:
        """From a composed config with groups `game` and `selfplay`; names a missing/bad key."""

        def get(group: str, key: str) -> Any:
            try:
                return cfg[group][key]
            except (KeyError, TypeError) as err:
                raise ValueError(f"config key {group}.{key} is missing") from err

        s = cls(
            size=int(get("game", "size")),
            max_plies=int(get("game", "max_plies")),
            **{
                k: get("selfplay", k)
                for k in (
                    "games_in_parallel",
                    "openings",
                    "temperature",
                    "temperature_plies",
                    "final_temperature",
                    "resign",
                    "resign_threshold",
                    "resign_consecutive",
                    "resign_disabled_share",
                )
            },
            playout_cap=PlayoutCap.from_config(cfg["selfplay"], cfg.get("mcts") or {}),
        )
        if s.games_in_parallel < 1:
            raise ValueError(f"selfplay.games_in_parallel must be >= 1, got {s.games_in_parallel}")
        if not 0.0 <= s.resign_disabled_share <= 1.0:
            raise ValueError("selfplay.resign_disabled_share must be in [0, 1]")
        if s.resign_consecutive < 1:
            raise ValueError("selfplay.resign_consecutive must be >= 1")
        return s


@dataclass(frozen=True)
class SelfPlayStats:
    games: int
    positions: int  # decisions made (every action, forced ones included; unfinished games too)
    evaluations: int  # leaves sent to the network
    batches: int  # forward passes
    seconds: float
    network_s: float  # inside inference.evaluate
    tree_s: float  # inside gather() and expand() (C++)
    full_positions: int = 0  # of `positions`, those searched fully (all without a playout cap)
    dropped: int = 0  # finished games whose record failed validation: logged, not kept or sent

    @property
    def glue_s(self) -> float:
        """Everything else: Python decisions, records, array plumbing."""
        return self.seconds - self.network_s - self.tree_s


@dataclass
class _Slot:
    """A game in progress in one slot of the batched search."""

    opening: op.Opening
    resign_enabled: bool
    positions: list[np.ndarray] = field(default_factory=list)
    played: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=lambda: [0])
    actions: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    wdl: list[np.ndarray] = field(default_factory=list)
    streak: list[int] = field(default_factory=lambda: [0, 0])  # per side (Black, White)
    resign_trigger: int = -1
    full: list[bool] = field(default_factory=list)

    def add(
        self,
        packed: np.ndarray,
        action: int,
        visits: np.ndarray,
        wdl: np.ndarray,
        best: int,
        full: bool = True,
    ) -> None:
        """Records a decision; `best` stands in for the visits when there was no search;
        `full`: a full search (False: a fast one of playout cap randomization)."""
        a, c = sparse_visits(visits)
        if len(a) == 0:  # no search (a forced move, or simulations 0): one visit to `best`
            a, c = np.array([best], np.uint8), np.array([1], np.uint16)
        self.positions.append(packed)
        self.played.append(action)
        self.actions.append(a)
        self.counts.append(c)
        self.offsets.append(self.offsets[-1] + len(a))
        self.wdl.append(wdl)
        self.full.append(full)

    def record(
        self, size: int, result: Result, termination: Termination, version: int, actor: int
    ) -> GameRecord:
        t = len(self.positions)
        return GameRecord(
            board_size=size,
            positions=np.array(self.positions, np.uint32).reshape(t, 4),
            played=np.array(self.played, np.uint8),
            visit_offsets=np.array(self.offsets, np.uint32),
            visit_actions=np.concatenate(self.actions or [np.zeros(0, np.uint8)]),
            visit_counts=np.concatenate(self.counts or [np.zeros(0, np.uint16)]),
            root_wdl=np.array(self.wdl, np.float16).reshape(t, 3),
            result=result,
            termination=termination,
            opening_id=self.opening.id,
            network_version=version,
            actor_id=actor,
            resign_enabled=self.resign_enabled,
            resign_trigger=self.resign_trigger,
            full_search=np.array(self.full, np.bool_),
        )


class _LiveTracker:
    """The moves so far of the game in one slot, in notation, for `on_live` (slot 0 only)."""

    def __init__(self, opening: op.Opening, max_plies: int) -> None:
        self.opening = opening
        self.fen = Position(opening.size).fen()
        self.moves = list(opening.moves)
        self.game = opening.start_game(max_plies)
        self.before = self.game.copy()
        self.turn: list[int] = []

    def step(self, action: int) -> bool:
        """Plays a decision; True when it completed a move (a multi-jump is one move)."""
        self.turn.append(int(action))
        self.game.step(int(action))
        if self.game.mid_jump:
            return False
        self.moves.append(str(self.before.move_of(self.turn)))
        self.turn = []
        self.before = self.game.copy()
        return True

    def report(self, version: int, actor: int) -> dict[str, Any]:
        return make_live(
            actor=actor,
            version=version,
            opening=self.opening.name,
            fen=self.fen,
            moves=self.moves,
            opening_plies=len(self.opening.moves),
            updated=time.time(),
        )


def play_games(
    inference: Inference,
    cfg: Mapping[str, Any],
    n_games: int,
    openings: Sequence[op.Opening] | None = None,
    seed: int = 0,
    *,
    network_version: int = 0,
    actor_id: int = 0,
    stop: Callable[[], bool] | None = None,
    on_live: Callable[[dict[str, Any]], None] | None = None,
) -> list[GameRecord]:
    """Plays `n_games` games (config groups game, mcts, selfplay) and returns their records.

    `openings` None takes them from the config (`selfplay.openings`: deck or start). The same
    seed, inference and config give the same games. `stop`, checked once per forward pass,
    ends early when it returns True: the finished games are returned, games in progress dropped.
    `on_live`, when given, gets slot 0's game so far (a `checkerzero.store.live.make_live`
    dict: the moves in notation, the opening, the weights version, the actor id) at its start
    and after each move.
    """
    return run_self_play(
        inference,
        cfg,
        n_games,
        openings,
        seed,
        network_version=network_version,
        actor_id=actor_id,
        observer=_Hooks(stop, on_live),
    )[0]


class SelfPlayObserver:
    """What `run_self_play` tells, and asks, the one who runs it: one object instead of a row
    of callbacks. Every method has a default that changes nothing, so an observer overrides
    only what it needs.

    ``live``: whether slot 0's game is reported to `on_live` (a report per move, so it is
    built only when someone listens).
    """

    live: bool = False

    def should_stop(self) -> bool:
        """Checked once per forward pass: True ends the call (games in progress are dropped)."""
        return False

    def record_version(self, default: int) -> int:
        """The weights version a finished game is recorded with (``default``: the one the call
        was given); an actor answers the version of its newest weights."""
        return default

    def on_record(self, record: GameRecord) -> None:
        """Every finished game, as it ends."""

    def on_batch(self, evaluations: int, network_s: float, tree_s: float) -> None:
        """After every batch: the positions the network evaluated and the seconds it and the
        tree took."""

    def on_live(self, live: dict[str, Any]) -> None:
        """Slot 0's game so far (a `checkerzero.store.live.make_live` dict) at its start and
        after each move; called only when ``live`` is true."""

    def on_drop(self) -> None:
        """A finished game whose record failed validation was dropped (it is logged too)."""


class StopAt(SelfPlayObserver):
    """Stops the call once ``clock()`` reaches ``deadline`` (benchmarks' timed runs)."""

    def __init__(self, deadline: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline, self.clock = deadline, clock

    def should_stop(self) -> bool:
        return self.clock() >= self.deadline


class _Hooks(SelfPlayObserver):
    """`play_games`'s two optional hooks as an observer."""

    def __init__(
        self,
        stop: Callable[[], bool] | None,
        on_live: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self._stop, self._on_live = stop, on_live
        self.live = on_live is not None

    def should_stop(self) -> bool:
        return self._stop is not None and self._stop()

    def on_live(self, live: dict[str, Any]) -> None:
        if self._on_live is not None:
            self._on_live(live)


def run_self_play(
    inference: Inference,
    cfg: Mapping[str, Any],
    n_games: int,
    openings: Sequence[op.Opening] | None = None,
    seed: int = 0,
    *,
    network_version: int = 0,
    actor_id: int = 0,
    observer: SelfPlayObserver | None = None,
    keep_records: bool = True,
) -> tuple[list[GameRecord], SelfPlayStats]:
    """`play_games` plus where the time went, reporting to an `observer` (a long-running actor).

    `n_games` None plays until `observer.should_stop()` says so (checked between batches, so
    weights swapped in meanwhile take effect between moves). The observer hears of every
    finished game, batch, dropped game and (when it asks) slot 0's live game, and names the
    weights version each finished game is recorded with (the one that played its last move).
    With `keep_records=False` finished records are not kept in memory (only counted). A
    finished game whose record fails validation (a defect of the search or the record, never
    expected) is logged as an error, counted in `SelfPlayStats.dropped` and reported to
    `observer.on_drop()`; the other games play on.

    Longer than most functions on purpose: `start`, `finish` and `decide` are one game slot's
    steps and share the loop's state (slots, counters, the RNGs, the search), which as
    closures stays in one place a reader can follow from top to bottom.
    """
    observer = observer if observer is not None else SelfPlayObserver()
    s = SelfPlaySettings.from_config(cfg)
    if n_games is not None and n_games < 0:
        raise ValueError(f"n_games must be >= 0, got {n_games}")
    limit = float("inf") if n_games is None else n_games
    deck = list(openings) if openings is not None else op.load_openings(s.openings, s.size)
    rng = np.random.default_rng(seed)
    cap = s.playout_cap
    cap_rng = np.random.default_rng((seed, _PLAYOUT_CAP_STREAM)) if cap is not None else None
    n_slots = max(1, int(min(s.games_in_parallel, limit)))
    mcts = new_search(n_slots, s.size, cfg["mcts"], seed=seed)
    egdb_cfg = cfg.get("egdb") or {}
    adjudicate = bool(egdb_cfg.get("adjudicate_selfplay", False))
    egdb = None
    if adjudicate or egdb_cfg.get("mcts_leaves", False):
        egdb = database_from_config(egdb_cfg, s.size)
        if egdb_cfg.get("mcts_leaves", False):
            mcts.set_egdb(egdb.core)
    slots: list[_Slot | None] = [None] * n_slots
    records: list[GameRecord] = []
    started = 0
    live: _LiveTracker | None = None

    finished = 0
    dropped = 0

    def current_version() -> int:
        return observer.record_version(network_version)

    def start(i: int) -> None:
        nonlocal started, live
        if started >= limit:
            slots[i] = None
            mcts.stop(i)
            return
        opening = op.pick(deck, rng)
        enabled = s.resign and rng.random() >= s.resign_disabled_share
        slots[i] = _Slot(opening=opening, resign_enabled=enabled)
        mcts.reset(i, opening.start_game(s.max_plies))
        if cap is not None:
            draw_search(mcts, i, cap, cap_rng)
        started += 1
        if i == 0 and observer.live:
            live = _LiveTracker(opening, s.max_plies)
            observer.on_live(live.report(current_version(), actor_id))

    def finish(i: int, result: Result, termination: Termination) -> None:
        nonlocal finished, dropped
        slot = slots[i]
        assert slot is not None
        version = current_version()
        try:
            record = slot.record(s.size, result, termination, version, actor_id)
        except ValueError as err:  # a search or record defect: lose this game, not the others
            dropped += 1
            log.error(
                "actor %s dropped a finished game (opening %s, %d decisions, %s): its record "
                "is invalid: %s",
                actor_id,
                slot.opening.name,
                len(slot.positions),
                RESULT_TEXT.get(int(result), str(result)),
                err,
            )
            observer.on_drop()
            start(i)
            return
        finished += 1
        if keep_records:
            records.append(record)
        observer.on_record(record)
        start(i)

    def decide(i: int) -> None:
        nonlocal decisions, full_decisions
        slot = slots[i]
        assert slot is not None
        packed = mcts.root_packed(i)
        side = int(packed[3] & META_WHITE_TO_MOVE)
        visits = mcts.root_target(i)  # root_visits, less forced visits when they were on
        full = mcts.full_search(i)
        wdl = mcts.root_wdl(i)
        if s.resign and not np.isnan(wdl[_LOSS]):  # NaN: a forced move played unsearched
            slot.streak[side] = slot.streak[side] + 1 if wdl[_LOSS] > s.resign_threshold else 0
            if slot.streak[side] >= s.resign_consecutive and slot.resign_trigger < 0:
                slot.resign_trigger = len(slot.positions)
                if slot.resign_enabled:
                    slot.add(packed, RESIGNED, visits, wdl, best=mcts.choose(i, 0.0), full=full)
                    mcts.stop(i)
                    winner = Result.BLACK_WIN if side else Result.WHITE_WIN
                    finish(i, winner, Termination.RESIGNATION)
                    return
        hot = mcts.ply(i) < s.temperature_plies
        action = mcts.choose(i, s.temperature if hot else s.final_temperature)
        slot.add(packed, action, visits, wdl, best=action, full=full)
        decisions += 1
        full_decisions += full
        mcts.advance(i, action)
        if cap is not None and not mcts.done(i):
            draw_search(mcts, i, cap, cap_rng)
        if i == 0 and live is not None and live.step(action):
            observer.on_live(live.report(current_version(), actor_id))
        if mcts.done(i):
            finish(i, Result(mcts.result(i)), Termination(mcts.end_reason(i)))
        elif adjudicate and (result := _database_result(egdb, mcts.root_packed(i))) is not None:
            mcts.stop(i)
            finish(i, result, Termination.DATABASE)

    for i in range(n_slots):
        start(i)
    evaluations = batches = decisions = full_decisions = 0
    times = StepTimes()
    t_start = time.perf_counter()
    while any(slot is not None for slot in slots) and not observer.should_stop():
        for i in mcts.ready():
            decide(i)
        network_before, tree_before = times.network_s, times.tree_s
        n = step(mcts, inference, times)
        if n == 0:
            continue
        evaluations += n
        batches += 1
        observer.on_batch(n, times.network_s - network_before, times.tree_s - tree_before)
    stats = SelfPlayStats(
        games=finished,
        positions=decisions,
        full_positions=full_decisions,
        evaluations=evaluations,
        batches=batches,
        seconds=time.perf_counter() - t_start,
        network_s=times.network_s,
        tree_s=times.tree_s,
        dropped=dropped,
    )
    log.debug(
        "self-play: %d games, %d positions, %d evaluations in %d batches, %.1f s "
        "(network %.1f s, tree %.1f s)",
        stats.games,
        stats.positions,
        stats.evaluations,
        stats.batches,
        stats.seconds,
        stats.network_s,
        stats.tree_s,
    )
    return records, stats


def _database_result(egdb, packed: np.ndarray) -> Result | None:
    """The exact result of a position between turns that is in the database, else None."""
    meta = int(packed[3])
    if (meta >> _META_JUMPING_SHIFT) & _META_JUMPING_MASK:
        return None
    white = bool(meta & META_WHITE_TO_MOVE)
    value = egdb.core.probe(int(packed[0]), int(packed[1]), int(packed[2]), white)
    if value == DRAW:
        return Result.DRAW
    if value == 0:
        return None
    return Result.WHITE_WIN if (value == WIN) == white else Result.BLACK_WIN


def resign_false_positive_rate(records: Sequence[GameRecord]) -> tuple[float, int]:
    """(rate, sample size): of the games with resignation disabled in which the rule fired, the
    share that the side it would have resigned for did not lose."""
    fired = [r for r in records if not r.resign_enabled and r.resign_trigger >= 0]
    if not fired:
        return float("nan"), 0
    wrong = 0
    for r in fired:
        white = bool(r.positions[r.resign_trigger, 3] & META_WHITE_TO_MOVE)
        lost = r.result == (Result.BLACK_WIN if white else Result.WHITE_WIN)
        wrong += not lost
    return wrong / len(fired), len(fired)
