"""Self-play of the fast player (the alpha-beta with its learned evaluation) for its training data.

`play_ab_game` (a plain function) plays one game of ``ab+nn`` against itself at a fixed depth
from an ACF ballot continued by a few seeded random plies, so that games differ, and returns its
labelled positions (``checkerzero.store.positions.POSITION_DTYPE``):

- each quiet position (no capture pending: the search's quiescence resolves captures, so the
  evaluation only ever scores quiet ones, and strong trainers drop the others) keeps the root
  search's score and, once the game ends, its result from the mover's side;
- a position within the endgame database (``game.egdb``, up to its piece count) takes the
  database's exact value and ends the game there (adjudication): its result is the database's.

The game's randomness comes from (run seed, generation, game number) alone and the search is
depth-limited, so a game is the same on any machine: a generation lost with its disk is played
again identically from its seed and its parent evaluation file.

`ABSelfPlayActor` is the Ray shell (`actors.ab_pool` places one per core on every node): it
claims game numbers from the position stream, follows the evaluation version the learner names,
and pushes each finished game in one deduplicating call.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from checkerzero.store.positions import (
    FLAG_EXACT,
    FLAG_WHITE_TO_MOVE,
    POSITION_DTYPE,
    PositionStream,
)
from checkerzero.store.replay import connect
from game import _core, nneval
from game.egdb import DRAW, LOSS, WIN, EndgameDatabase
from game.egdb.build import database_from_config
from game.openings import Opening, load_openings

logger = logging.getLogger(__name__)

SCORE_LIMIT = nneval.SCORE_LIMIT  # an exact or forced result is stored as +-this
IDLE_POLL_S = 0.2  # how often an actor with no generation open asks again
DB_SCORE = {WIN: (SCORE_LIMIT, 1), DRAW: (0, 0), LOSS: (-SCORE_LIMIT, -1)}  # score, result


@dataclass(frozen=True)
class ABSettings:
    """How the alpha-beta plays its training games (conf/nneval: selfplay)."""

    depth: int = 6  # plies of the fixed-depth search per move
    random_plies: int = 4  # seeded random plies after the ballot
    # Seeded random moves scattered over the plies before random_until (the positions they are
    # played from are not stored): without them, games from the same few thousand openings
    # soon meet the same positions and the fixed-depth search replays them.
    random_moves: int = 0
    random_until: int = 40
    max_plies: int = 300  # a game still going here is a draw
    tt_mb: int = 1  # transposition table per search (MB)
    size: int = 8

    @classmethod
    def from_config(cls, sp: Mapping[str, Any], size: int) -> ABSettings:
        return cls(
            depth=int(sp["depth"]),
            random_plies=int(sp["random_plies"]),
            random_moves=int(sp["random_moves"]),
            random_until=int(sp["random_until"]),
            max_plies=int(sp["max_plies"]),
            tt_mb=int(sp["tt_mb"]),
            size=size,
        )


def _pieces(game: _core.Game) -> int:
    return (game.black | game.white).bit_count()


def play_ab_game(
    weights: _core.NNEvalWeights,
    deck: Sequence[Opening],
    settings: ABSettings,
    *,
    seed: int,
    generation: int,
    game_id: int,
    egdb: EndgameDatabase | None = None,
    start: _core.Game | None = None,
) -> np.ndarray:
    """The labelled quiet positions of one self-play game (rows of ``POSITION_DTYPE``), from a
    seeded ballot and random plies, or from ``start`` as it is (tests); with ``random_moves``,
    that many seeded random moves at seeded plies before ``random_until`` (none from ``start``)."""
    rng = np.random.default_rng([seed, generation, game_id])
    if start is not None:
        game = start.copy()
    else:
        game = deck[int(rng.integers(len(deck)))].start_game(settings.max_plies)
    for _ in range(0 if start is not None else settings.random_plies):
        moves = game.legal_moves()
        if not moves or game.result() != 0:
            break
        game.make(moves[int(rng.integers(len(moves)))])
    scattered: set[int] = set()
    if start is None and settings.random_until > game.ply and settings.random_moves > 0:
        plies = np.arange(game.ply, settings.random_until)
        picked = rng.choice(plies, size=min(settings.random_moves, len(plies)), replace=False)
        scattered = {int(p) for p in picked}
    rows: list[tuple[int, int, int, int, int, int]] = []  # black, white, kings, score, ply, flags
    result_for_black: int | None = None
    while game.result() == 0:
        moves = game.legal_moves()
        quiet = not moves[0].is_capture
        side = FLAG_WHITE_TO_MOVE if game.white_to_move else 0
        if egdb is not None and _pieces(game) <= egdb.max_pieces:
            value = egdb.value(game)
            if value in DB_SCORE:  # adjudicated: the exact value ends the game here
                score, mover_result = DB_SCORE[value]
                if quiet:
                    rows.append(
                        (game.black, game.white, game.kings, score, game.ply, side | FLAG_EXACT)
                    )
                result_for_black = -mover_result if game.white_to_move else mover_result
                break
        if game.ply in scattered:
            game.make(moves[int(rng.integers(len(moves)))])
            continue
        found = _core.alphabeta_search(game, settings.depth, 0, None, settings.tt_mb, None, weights)
        if quiet:
            score = max(-SCORE_LIMIT, min(SCORE_LIMIT, int(found.score)))
            rows.append((game.black, game.white, game.kings, score, game.ply, side))
        game.make(found.move)
    if result_for_black is None:
        outcome = game.result()  # 1 Black won, 2 White won, 3 draw (the ply cap included)
        result_for_black = {1: 1, 2: -1}.get(outcome, 0)
    out = np.zeros(len(rows), POSITION_DTYPE)
    if rows:
        cols = np.array(rows, np.int64)
        out["black"], out["white"], out["kings"] = cols[:, 0], cols[:, 1], cols[:, 2]
        out["score"], out["ply"] = cols[:, 3], cols[:, 4]
        out["flags"] = cols[:, 5]
        white = (cols[:, 5] & FLAG_WHITE_TO_MOVE) != 0
        out["result"] = np.where(white, -result_for_black, result_for_black)
    out["game"] = game_id
    out["generation"] = generation
    return out


class ABSelfPlayWorker:
    """The body of an alpha-beta self-play actor, usable without Ray (tests, benchmarks)."""

    def __init__(self, cfg: Mapping[str, Any], actor_id: int, url: str, password: str | None):
        replay, nn_cfg = cfg["replay"], cfg["nneval"]
        self.actor_id = actor_id
        self.client = connect(
            url, password, retries=replay["connect_retries"], backoff_s=replay["connect_backoff_s"]
        )
        dedup = nn_cfg["dedup"]
        self.stream = PositionStream(
            self.client,
            replay["namespace"],
            bits_log2=int(dedup["bits_log2"]),
            probes=int(dedup["probes"]),
        )
        size = int(cfg["game"]["size"])
        self.settings = ABSettings.from_config(nn_cfg["selfplay"], size)
        self.deck = load_openings(str(nn_cfg["selfplay"]["openings"]), size)
        self.seed = int(cfg["seed"])
        self.egdb = None
        if nn_cfg["selfplay"]["egdb"]:
            self.egdb = database_from_config(cfg["egdb"], size)
        self._weights: _core.NNEvalWeights | None = None
        self._version = -2
        self._stop = threading.Event()
        self.stats = {"games": 0, "positions": 0, "kept": 0, "search_s": 0.0}

    def stop(self) -> None:
        self._stop.set()

    def _follow(self, version: int) -> _core.NNEvalWeights:
        if version != self._version or self._weights is None:
            data = self.stream.eval_bytes(version)
            if data is None:
                raise RuntimeError(f"evaluation version {version} is not in the store")
            where = f"evaluation version {version} from the store"
            self._weights = nneval.loads(data, where).core()
            self._version = version
        return self._weights

    def play_one(self) -> int | None:
        """Claims, plays and pushes one game: the positions kept, or None with nothing to do."""
        generation, game_id, version = self.stream.claim()
        if game_id < 0:
            return None
        weights = self._follow(version)
        start = time.perf_counter()
        rows = play_ab_game(
            weights,
            self.deck,
            self.settings,
            seed=self.seed,
            generation=generation,
            game_id=game_id,
            egdb=self.egdb,
        )
        self.stats["search_s"] += time.perf_counter() - start
        kept = self.stream.push(generation, rows)
        self.stats["games"] += 1
        self.stats["positions"] += len(rows)
        self.stats["kept"] += max(kept, 0)
        return max(kept, 0)

    def run(self, seconds: float | None = None) -> dict[str, float]:
        """Plays until ``stop()`` (or ``seconds``), idling while no generation is open."""
        self._stop.clear()
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
            if self.play_one() is None:
                self._stop.wait(IDLE_POLL_S)
        return dict(self.stats)


@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=2)
class ABSelfPlayActor:
    """Ray shell: `run()` plays until `stop()` (a second call slot, hence max_concurrency=2)."""

    def __init__(self, cfg: dict, actor_id: int, url: str, password: str | None) -> None:
        level = (cfg.get("logging") or {}).get("level", "INFO")
        logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s")
        self.worker = ABSelfPlayWorker(cfg, actor_id, url, password)

    def run(self, seconds: float | None = None) -> dict[str, float]:
        return self.worker.run(seconds)

    def stop(self) -> None:
        self.worker.stop()

    def where(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()
