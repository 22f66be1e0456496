"""The evaluator: gate each candidate against the best, play it against the ladder, fit Elo.

:class:`EvaluatorWorker` owns the loop (:meth:`EvaluatorWorker.step`) and its state, all of it
in the run's Redis (checkerzero.store.keys) so that a restarted evaluator loses nothing and
repeats nothing. evaluation.evaluator_actor is its Ray shell. The loop is here; its parts are
plain functions of the worker, each in a module named by its role:

==============================  ============================================================
this module                     the loop: :meth:`~EvaluatorWorker.step`,
                                :meth:`~EvaluatorWorker.run`, stop; the players of the
                                candidates and of the best; the first best; which version is
                                due; :meth:`~EvaluatorWorker.evaluate` (gate, ladder, metrics)
evaluation.evaluator_state      :class:`EvalState`: done marks, results, decisions, versions
                                in Redis (one transaction per unit); the run directory's
                                ``eval/`` file names; :class:`Stopped`
evaluation.evaluator_gate       :func:`run_gate`: the gate against the best, resumed after a
                                restart, the decision recorded, the candidate promoted
evaluation.evaluator_ladder     :func:`play_rungs` (once per run), :func:`play_ladder` (every
                                rung) and :func:`play_rated` (a rated ladder's rungs next to
                                the candidate's estimate)
evaluation.evaluator_ratings    :func:`publish_metrics`: the fit of every result, the metrics
                                hash, ``ratings.csv``/``.png``, the Elo curve
==============================  ============================================================

The games themselves are played by plain functions that the tests call too: the gate
(evaluation.gate), the ladder and its rungs (evaluation.ladder_play).

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
``candidate_games`` go to the rungs next to its estimate (evaluation.evaluator_ladder.play_rated).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkerzero.network.checkpoint import decode_checkpoint
from checkerzero.run_files import EVAL_DIR
from checkerzero.store.keys import done_key
from checkerzero.store.replay import connect
from checkerzero.store.weights import WeightsChannel
from evaluation.elo import PairResult, Ratings
from evaluation.evaluator_gate import run_gate
from evaluation.evaluator_ladder import ladder_done, play_ladder, play_rated, play_rungs
from evaluation.evaluator_ratings import current_ratings, curve, publish_metrics, version_info
from evaluation.evaluator_state import EvalState, Stopped
from evaluation.game_records import MatchResult
from evaluation.network_player import network_player
from evaluation.players import Player
from evaluation.ratings_report import CurvePoint
from evaluation.settings import EvalSettings
from evaluation.sprt import ACCEPT
from game.egdb.build import database_from_config
from game.openings import extend_openings, load_openings
from game.pdn import write_pdn

logger = logging.getLogger(__name__)


class EvaluatorWorker:
    """The evaluator's loop and state; usable without Ray (tests call :meth:`step`)."""

    def __init__(self, settings: EvalSettings, client: Any, run_dir: str | Path) -> None:
        self.s = settings
        self.client = client
        self.ns = settings.namespace
        self.channel = WeightsChannel(client, namespace=self.ns)
        self.state = EvalState(client, self.ns)  # evaluation.evaluator_state
        self.eval_dir = Path(run_dir) / EVAL_DIR
        self.openings = load_openings(settings.openings, settings.size, seed=settings.seed)
        # The gate may need more distinct openings than the deck has (see the module docstring).
        self.gate_openings = self.openings + (
            extend_openings(self.openings, settings.extend_openings, seed=settings.seed)
            if settings.extend_openings
            else []
        )
        self._best: tuple[int, Player] | None = None
        # Matches end as soon as a game reaches the endgame database (built first if missing).
        self.egdb = (
            database_from_config(settings.egdb, settings.size)
            if settings.egdb.get("adjudicate_matches", False)
            else None
        )
        self._stop = threading.Event()
        self._steps: dict[int, int] = {}  # version -> training step, from the weights' header
        self._rungs: dict[str, Player] = {}  # rated rungs' players, built once

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
        self._stop.set()

    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> int:
        """Evaluates new versions until stopped; returns how many this call evaluated."""
        evaluated = 0
        while not self._stop.is_set():
            if self.step():
                evaluated += 1
            else:
                self._stop.wait(self.s.poll_s)
        return evaluated

    def step(self) -> bool:
        """One round: make sure a best exists (first, so that actors following the best can
        start), play the ladder's rungs (once), finish the best's ladder games (the first best was
        never a candidate), evaluate the newest due version. True if anything was played."""
        try:
            best = self.ensure_best()
            played = self.play_rungs()
            ladder_on = self.s.table is not None or self.s.ladder_pairs > 0
            if best >= 0 and ladder_on and not ladder_done(self, best) and self.trained(best):
                player = self.best_player(best)
                if player is not None and self.play_ladder(best, player):
                    self.publish_metrics(best)
                    played = True
            version = self.pending_version()
            if version is None:
                return played
            self.evaluate(version)
            return True
        except Stopped:
            logger.info("evaluator stopped mid-unit; it resumes from Redis on the next start")
            return False

    # -- players --------------------------------------------------------------------------

    def network_player(self, version: int, data: bytes) -> Player:
        model, meta = decode_checkpoint(data, source=f"weights v{version}")
        self._steps[version] = meta.step
        # Where the run stood at publication, read now: the channel drops a version's metadata
        # with its bytes, checkerzero.store.weights.KEEP_VERSIONS publications later, often before
        # the games end when the learner publishes fast (a small network), which left the curve
        # without positions and with the rating's time as its wall time.
        self.version_info(version)
        return network_player(
            model,
            self.s.mcts,
            name=f"v{version}",
            device=self.s.device,
            threads=self.s.torch_threads,
            seed=self.s.seed,
        )

    def best_player(self, version: int) -> Player | None:
        if self._best is not None and self._best[0] == version:
            return self._best[1]
        data = self.channel.get(version)
        if data is None:  # aged out of the newest versions: promote() kept a copy
            data = self.channel.best_data()
        if data is None:
            return None
        self._best = (version, self.network_player(version, data))
        return self._best[1]

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
        self.version_info(first)
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
            self.client.hset(done_key(self.ns), "last_version", version)
            return
        if self._best is not None and self._best[0] == version:
            candidate = self._best[1]
        else:
            candidate = self.network_player(version, data)
        if self.s.gating:
            self.run_gate(version, candidate)
        self.play_ladder(version, candidate)
        self.client.hset(done_key(self.ns), "last_version", version)
        self.publish_metrics(version)

    def run_gate(self, version: int, candidate: Player) -> str | None:
        """The gate of ``version`` against the best (evaluation.evaluator_gate)."""
        return run_gate(self, version, candidate)

    def play_rungs(self) -> bool:
        """The rungs against each other, once per run (evaluation.evaluator_ladder)."""
        return play_rungs(self)

    def play_ladder(self, version: int, candidate: Player) -> int:
        """``version`` on the ladder (evaluation.evaluator_ladder)."""
        return play_ladder(self, version, candidate)

    def play_rated(self, version: int, candidate: Player) -> int:
        """``version`` against a rated ladder's rungs (evaluation.evaluator_ladder)."""
        return play_rated(self, version, candidate)

    # -- ratings and state ----------------------------------------------------------------

    def ratings(self) -> Ratings | None:
        """Every result so far, fitted (evaluation.evaluator_ratings)."""
        return current_ratings(self)

    def publish_metrics(self, version: int) -> dict[str, float]:
        """Refits, writes the metrics and the files (evaluation.evaluator_ratings)."""
        return publish_metrics(self, version)

    def version_info(self, version: int) -> dict[str, Any]:
        """Where ``version`` stood in the run (evaluation.evaluator_ratings)."""
        return version_info(self, version)

    def curve(self, ratings: Ratings) -> list[CurvePoint]:
        """Every rated candidate on the run's clocks (evaluation.evaluator_ratings)."""
        return curve(self, ratings)

    def results(self) -> list[PairResult]:
        return self.state.results()

    def decisions(self) -> list[dict[str, Any]]:
        return self.state.decisions()

    def _write_pdn(self, name: str, games: MatchResult, mode: str = "a") -> None:
        if not self.s.write_pdn:
            return
        self.eval_dir.mkdir(parents=True, exist_ok=True)
        with (self.eval_dir / name).open(mode) as f:
            f.write(write_pdn(games.pdn_games()))
