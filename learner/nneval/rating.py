"""Each generation on the rated ladder: its candidate against the fixed rungs, on the table's scale.

The candidate plays at the gate's settings (``gate.time_ms`` a move with time management, or a
fixed ``gate.depth``), ``ladder.pairs`` colour-reversed pairs against each of the two rungs of
the rated table (evaluation.ladder.table) nearest its estimate: the best so far's rating, else the
table's top rung. Openings are the deck and its seeded continuations
(evaluation.ladder.rungs.rating_openings), one per pair. The rating is fitted with every rung
fixed at the table's rating and the table's draw and first-move terms
(evaluation.ladder.rungs.fit_all), so generations are on the scale of every other rating in the
docs. Pairs run as Ray tasks, one core each, ``gate.parallel`` at a time.

A timed candidate's rating depends on the machine's speed (the rungs search fixed depths): the
records say which settings rated it.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from typing import Any

import ray

from evaluation.ladder.plan import neighbour_rungs
from evaluation.ladder.rungs import fit_all, ladder_player, pair_results, rating_openings
from evaluation.ladder.table import LadderTable
from evaluation.matches.games import play_pair
from evaluation.matches.records import PairRecord
from learner.nneval.gating import gate_player, parallel_pairs

logger = logging.getLogger(__name__)

CANDIDATE = "candidate"  # the rated player's name in the fit


@ray.remote(num_cpus=1)
def _rung_pair_task(
    candidate: bytes, rung: str, opening: Any, index: int, g: dict[str, Any], size: int
) -> PairRecord:
    with tempfile.TemporaryDirectory() as folder:
        a = gate_player(candidate, folder, CANDIDATE, g)
        b = ladder_player(rung)
        return play_pair(a, b, opening, index, max_plies=int(g["max_plies"]), size=size)


def settings_text(gate: Mapping[str, Any]) -> str:
    """How the candidate played: ``depth 3`` or ``200 ms a move with time management``."""
    if int(gate["depth"]):
        return f"depth {int(gate['depth'])}"
    managed = " with time management" if gate["time_management"] else ""
    return f"{int(gate['time_ms'])} ms a move{managed}"


def ladder_estimate(records: list[dict[str, Any]], table: LadderTable) -> float:
    """Where a candidate's games start: the newest rated best's rating, else the top rung's."""
    for rec in reversed(records):
        if rec.get("promoted") and rec.get("ladder"):
            return float(rec["ladder"]["elo"])
    return max(table.ratings.values())


def rate_on_ladder(
    candidate: bytes,
    gate: Mapping[str, Any],
    pairs: int,
    table: LadderTable,
    elo_cfg: Mapping[str, Any],
    estimate: float,
    size: int,
) -> dict[str, Any]:
    """The candidate's rating on ``table``'s scale from ``pairs`` pairs against each of the two
    rungs nearest ``estimate``: elo, lower, upper, games and W/D/L per rung."""
    rungs = neighbour_rungs(estimate, table.ratings, count=1)
    openings = rating_openings(pairs, size=size)
    g = dict(gate)
    cand_ref = ray.put(candidate)
    jobs = [(rung, i) for i in range(len(openings)) for rung in rungs]
    width = parallel_pairs(g)
    running: dict[Any, tuple[str, int]] = {}
    played: dict[str, list[PairRecord]] = {rung: [] for rung in rungs}
    queue = iter(jobs)
    while True:
        while len(running) < width and (job := next(queue, None)) is not None:
            rung, i = job
            running[_rung_pair_task.remote(cand_ref, rung, openings[i], i, g, size)] = job
        if not running:
            break
        ready, _ = ray.wait(list(running), num_returns=1)
        for ref in ready:
            rung, _i = running.pop(ref)
            played[rung].append(ray.get(ref))
    rows = [row for rung in rungs for row in pair_results(played[rung], CANDIDATE, rung)]
    rating = fit_all(rows, elo_cfg, table=table)[CANDIDATE]
    per_rung = {}
    for rung in rungs:
        w = sum(r.wins for r in rows if r.b == rung)
        d = sum(r.draws for r in rows if r.b == rung)
        losses = sum(r.losses for r in rows if r.b == rung)
        per_rung[rung] = {"rating": table.ratings[rung], "wins": w, "draws": d, "losses": losses}
    out = {
        "elo": rating.elo,
        "lower": rating.lower,
        "upper": rating.upper,
        "games": rating.games,
        "rungs": per_rung,
        "settings": settings_text(g),
    }
    logger.info(
        "ladder: %s; rated %+.0f [%+.0f, %+.0f] on the table's scale",
        ", ".join(
            f"+{v['wins']} ={v['draws']} -{v['losses']} against {k} ({v['rating']:+.0f})"
            for k, v in per_rung.items()
        ),
        rating.elo,
        rating.lower,
        rating.upper,
    )
    return out
