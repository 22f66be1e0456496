"""A generation's gate: its candidate evaluation against the best, in the alpha-beta, on Ray.

Both play ``ab+nn`` at equal settings (``gate.time_ms`` a move with time management in real
runs, or a fixed ``gate.depth``), colour-reversed pairs from the configured deck, each opening at
most once in a seeded order (``evaluation.matches.games.schedule``), fed in that order to the
draw-aware SPRT of ``evaluation.stats.sprt`` (pentanomial by default). Pairs run as Ray tasks, one
core
each, ``gate.parallel`` at a time (null: every CPU of the cluster but one); the evaluation files
travel to the tasks as bytes, so any node plays them. The candidate is promoted only on
``accept``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import ray

from checkerzero.store.positions import FLAG_WHITE_TO_MOVE, POSITION_DTYPE
from evaluation.ladder.rungs import pair_results
from evaluation.matches.games import play_pair, schedule
from evaluation.matches.gate import feed_pair, gate_pair_limit, sprt_from_config
from evaluation.matches.records import PairRecord, pairs_pdn_games
from evaluation.players.alphabeta import MinimaxPlayer
from evaluation.stats.elo import match_elo
from evaluation.stats.sprt import CONTINUE, GateDecision
from game.openings import Opening, load_openings, random_openings
from game.pdn import write_pdn

logger = logging.getLogger(__name__)

PROGRESS_S = 60.0  # seconds between the gate's progress lines


def gate_player(data: bytes, folder: str, name: str, g: Mapping[str, Any]) -> MinimaxPlayer:
    """An ab+nn player of the evaluation in `data` at the gate settings `g`, named `name`."""
    path = Path(folder) / f"{name}.safetensors"
    path.write_bytes(data)
    depth, time_ms = int(g["depth"]), int(g["time_ms"])
    player = MinimaxPlayer(
        depth=depth,
        time_ms=0 if depth else time_ms,
        nneval=str(path),
        manage_time=bool(g["time_management"]) and not depth,
    )
    player.name = player.name.replace(str(path), name)  # the games name it, not a temp file
    return player


@ray.remote(num_cpus=1)
def _pair_task(
    candidate: bytes,
    best: bytes,
    opening: Any,
    index: int,
    g: dict[str, Any],
    size: int,
) -> PairRecord:
    with tempfile.TemporaryDirectory() as folder:
        a = gate_player(candidate, folder, "candidate", g)
        b = gate_player(best, folder, "best", g)
        return play_pair(a, b, opening, index, max_plies=int(g["max_plies"]), size=size)


class GateProgress:
    """A line every ``every_s`` while the gate plays: games of the most, W/D/L, the score,
    the Elo with its interval, the SPRT's log-likelihood ratio between its bounds and the
    machine's load (a timed match needs a quiet machine: the load stands beside its figure)."""

    def __init__(self, most: int, every_s: float = PROGRESS_S) -> None:
        self.most, self.every_s = most, every_s
        self.t = time.monotonic()

    def report(self, sprt: Any) -> None:
        now = time.monotonic()
        if now - self.t < self.every_s or not sprt.games:
            return
        self.t = now
        w, d, losses = sprt.wdl
        elo = match_elo(w, d, losses)
        lower, upper = sprt.bounds
        logger.info(
            "gate: %d/%d games, +%d =%d -%d (%.1f%%), Elo %+.0f [%+.0f, %+.0f], "
            "LLR %.2f in [%.2f, %.2f], load %.1f",
            sprt.games,
            self.most,
            w,
            d,
            losses,
            100.0 * (w + d / 2) / sprt.games,
            elo.elo,
            elo.elo_lower,
            elo.elo_upper,
            sprt.llr,
            lower,
            upper,
            os.getloadavg()[0],
        )


def parallel_pairs(g: Mapping[str, Any]) -> int:
    if g.get("parallel"):
        return int(g["parallel"])
    return max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)


def gate_generation(
    candidate: bytes,
    best: bytes,
    g: Mapping[str, Any],
    size: int,
    seed: int,
    pdn: Path | None = None,
) -> tuple[GateDecision, dict[str, float]]:
    """The SPRT's decision and the match's Elo of the candidate over the best; ``pdn``: where
    the games the SPRT read are written (the candidate named ``candidate``, its parent
    ``best``), for reading the lost ones."""
    sprt = sprt_from_config(dict(g["sprt"]))
    openings = load_openings(str(g["openings"]), size)
    limit = gate_pair_limit(openings, sprt.max_games)
    plan = schedule(openings, limit, seed) if limit else []
    cand_ref, best_ref = ray.put(candidate), ray.put(best)
    width = parallel_pairs(g)
    gd = dict(g)
    running: dict[int, Any] = {}
    done: dict[int, PairRecord] = {}
    fed = 0
    nxt = 0
    played: list[PairRecord] = []
    progress = GateProgress(len(plan) * 2)
    while sprt.status == CONTINUE and fed < len(plan):
        while nxt < len(plan) and len(running) < width:
            running[nxt] = _pair_task.remote(cand_ref, best_ref, plan[nxt], nxt, gd, size)
            nxt += 1
        ready, _ = ray.wait(list(running.values()), num_returns=1)
        for i, ref in list(running.items()):
            if ref in ready:
                done[i] = ray.get(ref)
                del running[i]
        while fed in done and sprt.status == CONTINUE:  # in plan order, as one process would
            pair = done.pop(fed)
            played.append(pair)
            feed_pair(sprt, pair)
            fed += 1
            progress.report(sprt)
    for ref in running.values():
        ray.cancel(ref, force=True)
    if pdn is not None:
        pdn.parent.mkdir(parents=True, exist_ok=True)
        pdn.write_text(write_pdn(pairs_pdn_games(played)), encoding="utf-8")
    decision = sprt.decision(truncate=sprt.status == CONTINUE)
    w, d, losses = decision.wins, decision.draws, decision.losses
    elo = match_elo(w, d, losses) if decision.games else None
    stats = {
        "games": float(decision.games),
        "elo": elo.elo if elo else 0.0,
        "elo_lower": elo.elo_lower if elo else 0.0,
        "elo_upper": elo.elo_upper if elo else 0.0,
    }
    logger.info(
        "gate: %s after %d games (+%d =%d -%d), Elo %+.0f [%+.0f, %+.0f]",
        decision.decision,
        decision.games,
        w,
        d,
        losses,
        stats["elo"],
        stats["elo_lower"],
        stats["elo_upper"],
    )
    return decision, stats


def unseen_openings(stored: Any, size: int, *, count: int, plies: int, seed: int) -> list[Opening]:
    """Up to ``count`` distinct openings of ``plies`` seeded random moves from the initial
    position whose position no generation stored (``stored``: rows -> bool per row, the run's
    deduplication filter), so the check plays from positions the evaluation never trained on."""
    candidates = random_openings(size, plies=plies, count=count * 8, seed=seed)
    rows = np.zeros(len(candidates), POSITION_DTYPE)
    for i, opening in enumerate(candidates):
        g = opening.start_game()
        rows[i]["black"], rows[i]["white"], rows[i]["kings"] = g.black, g.white, g.kings
        rows[i]["flags"] = FLAG_WHITE_TO_MOVE if g.white_to_move else 0
    fresh = ~stored(rows) if len(rows) else np.zeros(0, bool)
    return [o for o, new in zip(candidates, fresh, strict=True) if new][:count]


def check_generation(
    candidate: bytes, best: bytes, openings: list[Opening], check: Mapping[str, Any], size: int
) -> dict[str, float]:
    """Every pair of ``openings`` played by the candidate against the best at a fixed depth
    (``check``: the config's ``nneval.check``), on Ray, both colours: its W/D/L and Elo."""
    g = {"depth": int(check["depth"]), "time_ms": 0, "time_management": False}
    g["max_plies"] = int(check["max_plies"])
    cand_ref, best_ref = ray.put(candidate), ray.put(best)
    refs = [_pair_task.remote(cand_ref, best_ref, o, i, g, size) for i, o in enumerate(openings)]
    rows = pair_results(ray.get(refs), "candidate", "best")  # one row per first mover
    w, d, losses = (sum(getattr(r, k) for r in rows) for k in ("wins", "draws", "losses"))
    elo = match_elo(w, d, losses) if w + d + losses else None
    out = {
        "games": float(w + d + losses),
        "wins": float(w),
        "draws": float(d),
        "losses": float(losses),
        "elo": elo.elo if elo else 0.0,
        "elo_lower": elo.elo_lower if elo else 0.0,
        "elo_upper": elo.elo_upper if elo else 0.0,
    }
    logger.info(
        "check from %d openings no generation trained on, depth %d: +%d =%d -%d, Elo %+.0f "
        "[%+.0f, %+.0f]",
        len(openings),
        g["depth"],
        w,
        d,
        losses,
        out["elo"],
        out["elo_lower"],
        out["elo_upper"],
    )
    return out
