"""The evaluator's gate: a candidate against the best until the SPRT decides.

:meth:`Gate.run` plays the gate's pairs (evaluation.matches.gate), each pair kept in Redis as it
ends so that a restarted evaluator resumes the test where it stopped; :meth:`Gate.record` writes
the decision, the games and the done mark in one transaction and promotes the candidate on
accept. A part of the evaluator (evaluation.evaluator.worker).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict

from checkerzero.store.keys import gate_pairs_key
from evaluation.evaluator.candidates import Candidates
from evaluation.evaluator.context import EvalContext
from evaluation.evaluator.records import Stopped
from evaluation.ladder.rungs import pair_results
from evaluation.matches.gate import gate
from evaluation.matches.records import MatchResult, PairRecord
from evaluation.players.base import Player
from evaluation.stats.sprt import ACCEPT, CONTINUE, SPRT, GateDecision

logger = logging.getLogger(__name__)


class Gate:
    """The gate of each candidate against the best; promotes on accept."""

    def __init__(self, ctx: EvalContext, candidates: Candidates) -> None:
        self.ctx = ctx
        self.candidates = candidates

    def run(self, version: int, candidate: Player) -> str | None:
        """The gate of ``version`` against the best (resumed if it was interrupted); its
        decision, None when there is no best to play."""
        ev = self.ctx
        unit = f"gate:{version}"
        verdict = ev.state.done(unit)
        best_version = ev.channel.version("best")
        if verdict is not None:  # decided before a restart; re-apply a lost promotion
            if verdict == ACCEPT and best_version < version:
                ev.channel.promote(version)
            return verdict
        if best_version < 0 or best_version == version:
            return None
        best = self.candidates.best(best_version)
        if best is None:
            logger.warning(
                "best weights v%d are not stored; no gate for v%d", best_version, version
            )
            return None
        key = gate_pairs_key(ev.ns, version, best_version)
        played = [PairRecord.from_dict(json.loads(x)) for x in ev.client.lrange(key, 0, -1)]
        seed = ev.settings.seed + version
        if played:
            logger.info(
                "gate v%d vs v%d resumes after %d pairs", version, best_version, len(played)
            )

        def save_pair(pair: PairRecord, sprt: SPRT) -> None:
            ev.client.rpush(key, json.dumps(pair.to_dict()))
            logger.debug("gate v%d: %d games, LLR %.2f", version, sprt.games, sprt.llr)

        result = gate(
            candidate,
            best,
            ev.gate_openings,
            ev.settings.gate,
            seed=seed,
            max_plies=ev.settings.max_plies,
            size=ev.settings.size,
            played=played,
            on_pair=save_pair,
            should_stop=ev.stopping,
            egdb=ev.egdb,
        )
        if result.decision == CONTINUE:
            raise Stopped
        return self.record(unit, version, best_version, candidate, result, key)

    def record(
        self,
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
        ev = self.ctx
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
        ev.files.write_games(f"v{version:05d}_gate.pdn", match, mode="w")
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
            self.candidates.promoted(version, candidate)
        ev.files.append_decision(json.dumps(record, sort_keys=True))
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
