"""The evaluator: gate each candidate against the best, play it against the ladder, fit Elo.

:class:`EvaluatorWorker` owns the loop (:meth:`EvaluatorWorker.step`) and builds its parts, each
a small object that owns its state, all of it in the run's Redis (checkerzero.store.keys) so that
a restarted evaluator loses nothing and repeats nothing. evaluation.evaluator.actor is its Ray
shell. The parts, and where they live (imports run down this table, never back up):

=====================================  =======================================================
evaluation.evaluator.settings          :class:`EvalSettings`: what it reads of the config
evaluation.evaluator.records           :class:`EvalState`: done marks, results, decisions,
                                       versions, metrics in Redis (one transaction per unit);
                                       the learner's readers of them; :class:`Stopped`
evaluation.evaluator.context           :class:`EvalContext`: what the parts share (settings,
                                       records, weights channel, files, openings, database,
                                       stop flag)
evaluation.evaluator.candidates        :class:`Candidates`: the networks of versions as
                                       players, the best's kept
evaluation.evaluator.gate              :class:`Gate`: the gate against the best, resumed after
                                       a restart, the decision recorded, the candidate promoted
evaluation.evaluator.ladder            :class:`Ladder`: the rungs once per run, each candidate
                                       on every rung or (rated ladder) next to its estimate
evaluation.evaluator.ratings           :class:`RatingPublisher`: the fit of every result, the
                                       metrics, ``ratings.csv``/``.png``, the Elo curve
this module                            the loop: which version is due, the first best, stop
=====================================  =======================================================

The games themselves are played by plain functions that the tests call too: the gate's match
(evaluation.matches.gate), the ladder and its rungs (evaluation.ladder.rungs).
Weights come from the weights channel (checkerzero.store.weights): the newest published
version (a multiple of ``evaluation.every_versions``) is a candidate once ``evaluation.every_min``
minutes have passed since the previous rating began (``early_every_min`` in the run's first
``early_min`` minutes, when a candidate plays ``early_games`` instead of ``candidate_games``);
older ones not yet evaluated are skipped (the evaluator only ever falls behind, never catches up
on stale weights), and so is a network that was never trained. The first version the evaluator
sees becomes the best. Games are written as PDN under
``<run_dir>/eval/``, with ``decisions.jsonl``, ``ratings.csv`` and ``ratings.png`` (every
candidate's rating by version, the ladder's rungs as lines), ``curve.csv`` and ``elo_curve.png``
(every candidate's rating against training step, wall time and self-play positions, which the
weights channel publishes beside each version; weights published without them fall back on the
step in their header).

Two ways to rate: without a table (``evaluation.ladder_table: null``) the rungs play each other
once per run and every candidate plays ``ladder_pairs`` pairs against every rung; with a rated
ladder's table the rungs hold its ratings, no rung game is played, and each candidate's
``candidate_games`` go to the rungs next to its estimate (evaluation.evaluator.ladder.play_rated).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkerzero.store.keys import done_key
from checkerzero.store.replay import connect
from evaluation.evaluator.candidates import Candidates
from evaluation.evaluator.context import EvalContext
from evaluation.evaluator.gate import Gate
from evaluation.evaluator.ladder import Ladder
from evaluation.evaluator.ratings import RatingPublisher
from evaluation.evaluator.records import Stopped
from evaluation.evaluator.settings import EvalSettings
from evaluation.stats.elo import PairResult
from evaluation.stats.sprt import ACCEPT

logger = logging.getLogger(__name__)


class EvaluatorWorker:
    """The evaluator's loop and state; usable without Ray (tests call :meth:`step`)."""

    def __init__(self, settings: EvalSettings, client: Any, run_dir: str | Path) -> None:
        self.ctx = EvalContext.create(settings, client, run_dir)
        self.s = settings
        self.state = self.ctx.state
        self.channel = self.ctx.channel
        self.candidates = Candidates(self.ctx)
        self.gate = Gate(self.ctx, self.candidates)
        self.ladder = Ladder(self.ctx, self.candidate_games)
        self.ratings = RatingPublisher(self.ctx, self.candidates, self.ladder)

    @classmethod
    def connect(
        cls, cfg: Mapping[str, Any], url: str, password: str | None, run_dir: str | Path
    ) -> EvaluatorWorker:
        settings = EvalSettings.from_config(cfg)
        client = connect(
            url, password, retries=settings.connect_retries, backoff_s=settings.connect_backoff_s
        )
        return cls(settings, client, run_dir)

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        self.ctx.stop_flag.set()

    def stopping(self) -> bool:
        return self.ctx.stopping()

    def run(self) -> int:
        """Evaluates new versions until stopped; returns how many this call evaluated."""
        evaluated = 0
        while not self.stopping():
            if self.step():
                evaluated += 1
            else:
                self.ctx.stop_flag.wait(self.s.poll_s)
        return evaluated

    def step(self) -> bool:
        """One round: make sure a best exists (first, so that actors following the best can
        start), play the ladder's rungs (once), finish the best's ladder games (the first best was
        never a candidate), evaluate the newest due version. True if anything was played."""
        try:
            best = self.ensure_best()
            played = self.ladder.play_rungs()
            ladder_on = self.s.table is not None or self.s.ladder_pairs > 0
            if best >= 0 and ladder_on and not self.ladder.done(best) and self.trained(best):
                player = self.candidates.best(best)
                if player is not None and self.ladder.play(best, player):
                    self.ratings.publish(best)
                    played = True
            version = self.pending_version()
            if version is None:
                return played
            self.evaluate(version)
            return True
        except Stopped:
            logger.info("evaluator stopped mid-unit; it resumes from Redis on the next start")
            return False

    # -- units of work --------------------------------------------------------------------

    def ensure_best(self) -> int:
        """The best version; with none yet, the oldest stored published version becomes best."""
        best = self.channel.version("best")
        if best >= 0:
            return best
        first = self.channel.oldest_stored()
        if first is None:
            return -1
        if not self.state.done(f"gate:{first}"):  # recorded, then promoted: a crash between repeats
            decision = {"candidate": f"v{first}", "version": first, "best_version": None}
            decision |= {"decision": "initial", "promoted": True, "t": round(time.time(), 3)}
            self.state.record(
                f"gate:{first}", ACCEPT, [], kind="gate", version=first, decision=decision
            )
        self.channel.promote(first)
        # Kept now: the channel drops a version's metadata KEEP_VERSIONS publications later,
        # and without its step an untrained first best would pass trained() and be rated.
        self.candidates.version_info(first)
        logger.info("weights version %d is the first best", first)
        return first

    def pending_version(self) -> int | None:
        """The newest due version (a multiple of every_versions) above the last evaluated, once
        ``every_min`` minutes (``early_every_min`` for a version of the run's first
        ``early_min`` minutes) have passed since the previous rating began; never an untrained
        one (:meth:`trained`)."""
        latest = self.channel.version("latest")
        due = latest - latest % self.s.every_versions
        if due <= self.state.last_version() or due <= 0:
            return None
        gap = self.s.early_every_min if self.early(due) else self.s.every_min
        if time.time() - self.state.last_started() < 60 * gap:
            return None
        return due if self.trained(due) else None

    def early(self, version: int) -> bool:
        """Whether ``version`` was published in the run's first ``early_min`` minutes (the
        run's own seconds, resumes summed), when ratings come cheaper and more often."""
        run_s = self._published(version).get("run_s")
        return isinstance(run_s, int | float) and run_s < 60 * self.s.early_min

    def _published(self, version: int) -> dict[str, Any]:
        """Where ``version`` stood as far as known without decoding it: what the evaluator
        kept (version_info), else the channel's metadata; {} for weights without any (an older
        learner's). Unlike version_info this stores nothing, so the header's step can still
        fill in the curve once the candidate is decoded."""
        kept = self.state.versions().get(version)
        return kept if kept is not None else self.channel.meta(version)

    def trained(self, version: int) -> bool:
        """Whether ``version`` is worth rating: published after a training step, or a warm
        start's network (``learner.init_weights``). A random network's rating says nothing
        about the run and would cost the evaluator minutes at its start."""
        step = self._published(version).get("step")
        return self.s.warm_start or not isinstance(step, int) or step > 0

    def candidate_games(self, version: int) -> int:
        """Games of ``version`` against a rated ladder: ``early_games`` for a version published
        in the run's first ``early_min`` minutes (a first estimate soon, for a curve within
        minutes), ``candidate_games`` after."""
        if self.early(version):
            return min(self.s.early_games, self.s.candidate_games)
        return self.s.candidate_games

    def evaluate(self, version: int) -> None:
        """Gate ``version`` against the best (promoting it on accept), play it on the ladder,
        refit the ratings and publish the metrics."""
        self.state.mark_started()
        data = self.channel.get(version)
        if data is None:
            logger.warning("weights version %d is no longer stored; skipped", version)
            self.ctx.client.hset(done_key(self.ctx.ns), "last_version", version)
            return
        candidate = self.candidates.player(version, data)
        if self.s.gating:
            self.gate.run(version, candidate)
        self.ladder.play(version, candidate)
        self.ctx.client.hset(done_key(self.ctx.ns), "last_version", version)
        self.ratings.publish(version)

    def results(self) -> list[PairResult]:
        return self.state.results()

    def decisions(self) -> list[dict[str, Any]]:
        return self.state.decisions()
