"""The evaluator's gate: a candidate against the best until the SPRT decides.

:func:`run_gate` plays the gate's pairs (evaluation.gate), each pair kept in Redis as it ends
so that a restarted evaluator resumes the test where it stopped; :func:`record_gate` writes the
decision, the games and the done mark in one transaction and promotes the candidate on accept.
Part of the evaluator's loop (evaluation.evaluator).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from checkerzero.run_files import DECISIONS_FILE
from checkerzero.store.keys import gate_pairs_key
from evaluation.evaluator_state import Stopped
from evaluation.game_records import MatchResult, PairRecord
from evaluation.gate import gate
from evaluation.ladder_play import pair_results
from evaluation.players import Player
from evaluation.sprt import ACCEPT, CONTINUE, SPRT, GateDecision

if TYPE_CHECKING:
    from evaluation.evaluator import EvaluatorWorker

logger = logging.getLogger(__name__)


def run_gate(ev: EvaluatorWorker, version: int, candidate: Player) -> str | None:
    """The gate of ``version`` against the best (resumed if it was interrupted)."""
    unit = f"gate:{version}"
    verdict = ev.state.done(unit)
    best_version = ev.channel.version("best")
    if verdict is not None:  # decided before a restart; re-apply a lost promotion
        if verdict == ACCEPT and best_version < version:
            ev.channel.promote(version)
        return verdict
    if best_version < 0 or best_version == version:
        return None
    best = ev.best_player(best_version)
    if best is None:
        logger.warning("best weights v%d are not stored; no gate for v%d", best_version, version)
        return None
    key = gate_pairs_key(ev.ns, version, best_version)
    played = [PairRecord.from_dict(json.loads(x)) for x in ev.client.lrange(key, 0, -1)]
    seed = ev.s.seed + version
    if played:
        logger.info("gate v%d vs v%d resumes after %d pairs", version, best_version, len(played))

    def save_pair(pair: PairRecord, sprt: SPRT) -> None:
        ev.client.rpush(key, json.dumps(pair.to_dict()))
        logger.debug("gate v%d: %d games, LLR %.2f", version, sprt.games, sprt.llr)

    result = gate(
        candidate,
        best,
        ev.gate_openings,
        ev.s.gate,
        seed=seed,
        max_plies=ev.s.max_plies,
        size=ev.s.size,
        played=played,
        on_pair=save_pair,
        should_stop=ev.stopping,
        egdb=ev.egdb,
    )
    if result.decision == CONTINUE:
        raise Stopped
    return record_gate(ev, unit, version, best_version, candidate, result, key)


def record_gate(
    ev: EvaluatorWorker,
    unit: str,
    version: int,
    best_version: int,
    candidate: Player,
    result: GateDecision,
    key: str,
) -> str:
    """The decided gate of ``version`` against ``best_version`` recorded (its pairs from ``key``
    as results, the decision, the done mark, in one transaction), the candidate promoted on
    accept; returns the decision."""
    pairs = [PairRecord.from_dict(json.loads(x)) for x in ev.client.lrange(key, 0, -1)]
    promoted = result.decision == ACCEPT
    record = {
        **asdict(result),
        "candidate": f"v{version}",
        "best": f"v{best_version}",
        "version": version,
        "best_version": best_version,
        "promoted": promoted,
        "t": round(time.time(), 3),
    }
    match = MatchResult(f"v{version}", f"v{best_version}", tuple(pairs))
    ev._write_pdn(f"v{version:05d}_gate.pdn", match, mode="w")
    ev.state.record(
        unit,
        result.decision,
        pair_results(pairs, f"v{version}", f"v{best_version}"),
        kind="gate",
        version=version,
        decision=record,
        extra=lambda pipe: pipe.delete(key),
    )
    if promoted:
        ev.channel.promote(version)
        ev._best = (version, candidate)
    if ev.s.write_pdn:
        with (ev.eval_dir / DECISIONS_FILE).open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    logger.info(
        "gate v%d vs v%d: %s after %d games (+%d =%d -%d, LLR %.2f)%s",
        version,
        best_version,
        result.decision,
        result.games,
        result.wins,
        result.draws,
        result.losses,
        result.llr,
        " -> promoted" if promoted else "",
    )
    return result.decision
