"""The evaluator: gate each candidate against the best, play it against the ladder, fit Elo.

:class:`EvaluatorWorker` owns the loop and its state, all of it in the run's Redis
(checkerzero.store.keys) so that a restarted evaluator loses nothing and repeats nothing; the work
is done by plain functions that the tests call too: the gate (evaluation.gate), the ladder and its
rungs (evaluation.ladder). evaluation.evaluator_actor is its Ray shell.

Weights come from the weights channel (checkerzero.store.weights): every
``evaluation.every_versions``-th published version is a candidate, the newest first (older ones not
yet evaluated are skipped: the evaluator only ever falls behind, never catches up on stale weights);
the first version the evaluator sees becomes the best. Games are written as PDN under
``<run_dir>/eval/``, with ``decisions.jsonl``, ``ratings.csv`` and ``ratings.png`` (every
candidate's rating by version, the ladder's rungs as lines), ``curve.csv`` and ``elo.png`` (every
candidate's rating against training step, wall time and self-play positions, which the weights
channel publishes beside each version; weights published without them fall back on the step in their
header).

Two ways to rate: without a table (``evaluation.ladder_table: null``) the rungs play each other
once per run and every candidate plays ``ladder_pairs`` pairs against every rung; with a rated
ladder's table the rungs hold its ratings, no rung game is played, and each candidate's
``candidate_games`` go to the rungs next to its estimate (:meth:`EvaluatorWorker.play_rated`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from checkerzero.network.checkpoint import decode_checkpoint
from checkerzero.store.keys import (
    decisions_key,
    done_key,
    gate_pairs_key,
    ladder_key,
    latest_key,
    results_key,
    versions_key,
)
from checkerzero.store.replay import connect
from checkerzero.store.weights import WeightsChannel
from evaluation.arena import MatchResult, PairPlan, PairRecord, play_pair, play_pairs, schedule
from evaluation.elo import PairResult, Ratings
from evaluation.gate import gate
from evaluation.gating import ACCEPT, CONTINUE, REJECT, SPRT
from evaluation.ladder import (
    CurvePoint,
    fit_all,
    gallop_rung,
    in_process,
    ladder_player,
    ladder_results,
    nearest_rung,
    neighbour_rungs,
    pair_results,
    plot_curve,
    plot_ratings,
    result_from_json,
    result_to_json,
    rung_results,
    write_curve_csv,
    write_ratings_csv,
)
from evaluation.network_player import network_player
from evaluation.players import Player
from evaluation.settings import EvalSettings
from game.egdb.build import database_from_config
from game.openings import Opening, extend_openings, load_openings
from game.pdn import write_pdn

logger = logging.getLogger(__name__)

EVAL_DIR = "eval"  # under the run directory: PDN games, decisions.jsonl, ratings.csv/png
CURVE_CSV = "curve.csv"  # under EVAL_DIR: each candidate's rating by step, wall time, positions
CURVE_PNG = "elo.png"  # ... and its plot


class _Stopped(Exception):
    """Raised inside a unit of work when stop() was requested; nothing of the unit is kept."""


class EvaluatorWorker:
    """The evaluator's loop and state; usable without Ray (tests call :meth:`step`)."""

    def __init__(self, settings: EvalSettings, client: Any, run_dir: str | Path) -> None:
        self.s = settings
        self.client = client
        self.ns = settings.namespace
        self.channel = WeightsChannel(client, namespace=self.ns)
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
        self.units_played = 0  # units of work finished by this object (gates, ladder matches)

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
            if best >= 0 and ladder_on and not self._ladder_done(best):
                player = self.best_player(best)
                if player is not None and self.play_ladder(best, player):
                    self.publish_metrics(best)
                    played = True
            version = self.pending_version()
            if version is None:
                return played
            self.evaluate(version)
            return True
        except _Stopped:
            logger.info("evaluator stopped mid-unit; it resumes from Redis on the next start")
            return False

    # -- state ----------------------------------------------------------------------------

    def _done(self, unit: str) -> str | None:
        value = self.client.hget(done_key(self.ns), unit)
        return value.decode() if isinstance(value, bytes) else value

    def last_version(self) -> int:
        return int(self._done("last_version") or 0)

    def results(self) -> list[PairResult]:
        return [result_from_json(x) for x in self.client.lrange(results_key(self.ns), 0, -1)]

    def decisions(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.client.lrange(decisions_key(self.ns), 0, -1)]

    def fixed_ratings(self) -> dict[str, float]:
        if not self.s.fix_ladder:
            return {}
        raw = self.client.hgetall(ladder_key(self.ns))
        return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}

    def _record(
        self,
        unit: str,
        value: str,
        rows: Sequence[PairResult],
        *,
        kind: str,
        version: int | None,
        decision: Mapping[str, Any] | None = None,
        extra: Callable[[Any], None] | None = None,
    ) -> None:
        """Results, decision and the unit's done mark in one transaction."""
        pipe = self.client.pipeline(transaction=True)
        stamp = round(time.time(), 3)
        for row in rows:
            pipe.rpush(
                results_key(self.ns), result_to_json(row, kind=kind, version=version, t=stamp)
            )
        if decision is not None:
            pipe.rpush(decisions_key(self.ns), json.dumps(dict(decision), sort_keys=True))
        pipe.hset(done_key(self.ns), unit, value)
        if extra is not None:
            extra(pipe)
        pipe.execute()
        self.units_played += 1

    def _write_pdn(self, name: str, games: MatchResult, mode: str = "a") -> None:
        if not self.s.write_pdn:
            return
        self.eval_dir.mkdir(parents=True, exist_ok=True)
        with (self.eval_dir / name).open(mode) as f:
            f.write(write_pdn(games.pdn_games()))

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

    def play_rungs(self) -> bool:
        """Adjacent ladder rungs against each other, once per run (and the fixed ratings).
        True if it played now."""
        # "calibration": the unit's name in runs started before it was called "rungs".
        done = self._done("rungs") or self._done("calibration")
        if self.s.table is not None:  # rated once and for all: the table's ratings hold
            return False
        if self.s.rung_pairs == 0 or len(self.s.ladder) < 2 or done:
            return False
        games: list[MatchResult] = []
        play = in_process(
            self.openings,
            self.s.rung_pairs,
            seed=self.s.seed,
            max_plies=self.s.max_plies,
            size=self.s.size,
            player_options=self.s.player_options,
            egdb=self.egdb,
        )
        rows = rung_results(
            self.s.ladder, play, on_match=lambda _label, match, _rows: games.append(match)
        )
        fixed: dict[str, float] = {}
        if self.s.fix_ladder:
            try:
                ratings = fit_all(rows, self.s.elo)
                fixed = {p.name: p.elo for p in ratings.players if not p.anchored}
            except ValueError as e:
                logger.warning("the rungs' fit failed (%s); rungs stay free", e)

        def store_fixed(pipe: Any) -> None:
            if fixed:
                pipe.hset(ladder_key(self.ns), mapping={k: repr(v) for k, v in fixed.items()})

        for match in games:
            self._write_pdn("rungs.pdn", match)
        self._record("rungs", "1", rows, kind="rungs", version=None, extra=store_fixed)
        logger.info("ladder rungs rated: %s", {k: round(v) for k, v in fixed.items()} or "free")
        return True

    def ensure_best(self) -> int:
        """The best version; with none yet, the oldest stored published version becomes best."""
        best = self.channel.version("best")
        if best >= 0:
            return best
        first = self.channel.oldest_stored()
        if first is None:
            return -1
        if not self._done(f"gate:{first}"):  # recorded, then promoted: a crash between repeats
            decision = {"candidate": f"v{first}", "version": first, "best_version": None}
            decision |= {"decision": "initial", "promoted": True, "t": round(time.time(), 3)}
            self._record(f"gate:{first}", ACCEPT, [], kind="gate", version=first, decision=decision)
        self.channel.promote(first)
        logger.info("weights version %d is the first best", first)
        return first

    def pending_version(self) -> int | None:
        """The newest due version (a multiple of every_versions) above the last evaluated."""
        latest = self.channel.version("latest")
        due = latest - latest % self.s.every_versions
        return due if due > self.last_version() and due > 0 else None

    def evaluate(self, version: int) -> None:
        """Gate ``version`` against the best (promoting it on accept), play it on the ladder,
        refit the ratings and publish the metrics."""
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
        """The gate of ``version`` against the best (resumed if it was interrupted)."""
        unit = f"gate:{version}"
        verdict = self._done(unit)
        best_version = self.channel.version("best")
        if verdict is not None:  # decided before a restart; re-apply a lost promotion
            if verdict == ACCEPT and best_version < version:
                self.channel.promote(version)
            return verdict
        if best_version < 0 or best_version == version:
            return None
        best = self.best_player(best_version)
        if best is None:
            logger.warning(
                "best weights v%d are not stored; no gate for v%d", best_version, version
            )
            return None
        key = gate_pairs_key(self.ns, version, best_version)
        played = [PairRecord.from_dict(json.loads(x)) for x in self.client.lrange(key, 0, -1)]
        seed = self.s.seed + version
        if played:
            logger.info(
                "gate v%d vs v%d resumes after %d pairs", version, best_version, len(played)
            )

        def save_pair(pair: PairRecord, sprt: SPRT) -> None:
            self.client.rpush(key, json.dumps(pair.to_dict()))
            logger.debug("gate v%d: %d games, LLR %.2f", version, sprt.games, sprt.llr)

        result = gate(
            candidate,
            best,
            self.gate_openings,
            self.s.gate,
            seed=seed,
            max_plies=self.s.max_plies,
            size=self.s.size,
            played=played,
            on_pair=save_pair,
            should_stop=self.stopping,
            egdb=self.egdb,
        )
        if result.decision == CONTINUE:
            raise _Stopped
        pairs = [PairRecord.from_dict(json.loads(x)) for x in self.client.lrange(key, 0, -1)]
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
        self._write_pdn(f"v{version:05d}_gate.pdn", match, mode="w")
        self._record(
            unit,
            result.decision,
            pair_results(pairs, f"v{version}", f"v{best_version}"),
            kind="gate",
            version=version,
            decision=record,
            extra=lambda pipe: pipe.delete(key),
        )
        if promoted:
            self.channel.promote(version)
            self._best = (version, candidate)
        if self.s.write_pdn:
            with (self.eval_dir / "decisions.jsonl").open("a") as f:
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

    def _ladder_done(self, version: int) -> bool:
        if self.s.table is not None:
            return bool(self._done(f"ladder:{version}"))
        units = [f"ladder:{version}:{spec}" for spec in self.s.ladder]
        return all(self.client.hmget(done_key(self.ns), units)) if units else True

    def play_ladder(self, version: int, candidate: Player) -> int:
        """``version`` against every ladder rung not yet played (each recorded on its own);
        returns the number of opponents played now. With a rated ladder: :meth:`play_rated`."""
        if self.s.table is not None:
            return self.play_rated(version, candidate)
        if self.s.ladder_pairs == 0:
            return 0
        name = f"v{version}"
        skip = [spec for spec in self.s.ladder if self._done(f"ladder:{version}:{spec}")]

        def record(spec: str, match: MatchResult, rows: list[PairResult]) -> None:
            self._write_pdn(f"v{version:05d}_ladder.pdn", match)
            self._record(f"ladder:{version}:{spec}", "1", rows, kind="ladder", version=version)

        rows = ladder_results(
            name,
            candidate,
            self.s.ladder,
            2 * self.s.ladder_pairs,
            self.openings,
            seed=self.s.seed + version,
            max_plies=self.s.max_plies,
            size=self.s.size,
            player_options=self.s.player_options,
            on_match=record,
            skip=skip,
            should_stop=self.stopping,
            egdb=self.egdb,
        )
        if self.stopping():
            raise _Stopped
        return len({r.b for r in rows})

    def _candidate_rows(self, version: int) -> list[PairResult]:
        """The ladder games of ``version`` recorded so far (a restart goes on from them)."""
        rows = []
        for raw in self.client.lrange(results_key(self.ns), 0, -1):
            d = json.loads(raw)
            if d.get("kind") == "ladder" and d.get("version") == version:
                rows.append(result_from_json(raw))
        return rows

    def _rung_player(self, spec: str) -> Player:
        if spec not in self._rungs:
            self._rungs[spec] = self._new_rung_player(spec)
        return self._rungs[spec]

    def _new_rung_player(self, spec: str) -> Player:
        return ladder_player(spec, **self.s.player_options)

    def _previous_estimate(self) -> float | None:
        """The newest rated candidate's Elo (where a new candidate probably is), if any."""
        raw = self.client.hget(latest_key(self.ns), "elo")
        try:
            value = float(raw) if raw is not None else None
        except ValueError:
            return None
        return value if value is not None and math.isfinite(value) else None

    def play_rated(self, version: int, candidate: Player) -> int:
        """``version`` against the rated rungs, ``candidate_games`` games in colour-reversed
        pairs, each pair recorded on its own: first ``probe_games`` against the rung nearest
        the previous candidate's rating (the weakest rung for the first), then, pair by pair,
        against the ``neighbour_rungs`` rungs below and above its estimate so far (the fit of
        its own games with the rungs fixed), where a game says most about it; while it has won
        or lost every game, a rung further on each pair (``gallop_rung``). Returns the pairs
        played now."""
        assert self.s.table is not None
        unit = f"ladder:{version}"
        if self._done(unit):
            return 0
        name = f"v{version}"
        specs = {self._rung_player(spec).name: spec for spec in self.s.ladder}
        rungs = {n: e for n, e in self.s.table.ratings.items() if n in specs}
        rows = self._candidate_rows(version)
        pairs = {n: sum(r.wins + r.draws + r.losses for r in rows if r.b == n) // 2 for n in rungs}
        order = schedule(self.gate_openings, len(self.gate_openings), self.s.seed + version)
        prior = self._previous_estimate()
        played_now = 0
        while (games := 2 * sum(pairs.values())) < self.s.candidate_games:
            if self.stopping():
                raise _Stopped
            estimate = None
            if games >= self.s.probe_games and rows:
                try:
                    estimate = fit_all(rows, self.s.elo, table=self.s.table)[name].elo
                except ValueError as e:  # not identified yet: one more pair at the probe's rung
                    logger.warning("v%d: no estimate yet (%s)", version, e)
            if estimate is None:
                start = prior if prior is not None else min(rungs.values())
                opponents = [nearest_rung(start, rungs)]
            else:
                jump = gallop_rung(rows, rungs)
                if jump is not None:
                    opponents = [jump]
                else:
                    opponents = neighbour_rungs(estimate, rungs, self.s.neighbour_rungs)
            opponents = opponents[: self.s.candidate_games // 2 - sum(pairs.values())]
            for rung, pair in zip(
                opponents,
                self._play_rated_pairs(candidate, opponents, specs, pairs, order),
                strict=True,
            ):
                new = pair_results([pair], name, rung)
                self._write_pdn(f"v{version:05d}_ladder.pdn", MatchResult(name, rung, (pair,)))
                self._record(
                    f"ladder:{version}:{rung}:{pair.index}",
                    "1",
                    new,
                    kind="ladder",
                    version=version,
                )
                rows += new
                pairs[rung] += 1
                played_now += 1
        self.client.hset(done_key(self.ns), unit, "1")
        logger.info(
            "ladder v%d: %d games against %s",
            version,
            2 * sum(pairs.values()),
            {n: 2 * k for n, k in pairs.items() if k},
        )
        return played_now

    def _play_rated_pairs(
        self,
        candidate: Player,
        rungs: Sequence[str],
        specs: Mapping[str, str],
        pairs: Mapping[str, int],
        order: Sequence[Opening],
    ) -> list[PairRecord]:
        """One pair against each of ``rungs``, each at that rung's next opening, all their
        games side by side in one batched search (arena.play_pairs) when the candidate can fork
        (a network's search), else one pair after another."""
        next_index = dict(pairs)
        openings = []
        for r in rungs:
            openings.append((order[next_index[r] % len(order)], next_index[r]))
            next_index[r] += 1
        fork = getattr(candidate, "fork", None)
        if fork is None:
            return [
                play_pair(
                    candidate,
                    self._rung_player(specs[rung]),
                    opening,
                    index,
                    max_plies=self.s.max_plies,
                    size=self.s.size,
                    egdb=self.egdb,
                )
                for rung, (opening, index) in zip(rungs, openings, strict=True)
            ]
        plans = [
            PairPlan(
                a=(fork(), fork()),
                b=(self._new_rung_player(specs[rung]), self._new_rung_player(specs[rung])),
                opening=opening,
                index=index,
            )
            for rung, (opening, index) in zip(rungs, openings, strict=True)
        ]
        return play_pairs(plans, max_plies=self.s.max_plies, size=self.s.size, egdb=self.egdb)

    # -- ratings --------------------------------------------------------------------------

    def ratings(self) -> Ratings | None:
        """All results so far, fitted; None (logged) when they do not identify the ratings yet."""
        rows = self.results()
        if not rows:
            return None
        try:
            if self.s.table is not None:
                return fit_all(rows, self.s.elo, table=self.s.table)
            return fit_all(rows, self.s.elo, self.fixed_ratings())
        except ValueError as e:
            logger.warning("no rating fit yet: %s", e)
            return None

    def publish_metrics(self, version: int) -> dict[str, float]:
        """Refits, writes ratings.csv/png and the ``<ns>:eval:latest`` hash; returns the hash."""
        ratings = self.ratings()
        if ratings is None:
            return {}
        metrics: dict[str, float] = {"version": float(version)}
        names = set(ratings.names)
        if f"v{version}" in names:
            p = ratings[f"v{version}"]
            metrics |= {"elo": p.elo, "elo_lower": p.lower, "elo_upper": p.upper}
            metrics["games"] = float(p.games)
        info = self.version_info(version)
        for key in ("step", "positions"):
            if info.get(key) is not None:
                metrics[key] = float(info[key])
        wall = self._wall_seconds(self._versions())
        if wall.get(version) is not None:
            metrics["wall_s"] = wall[version]
        best = self.channel.version("best")
        if best >= 0:
            metrics["best_version"] = float(best)
            if f"v{best}" in names:
                p = ratings[f"v{best}"]
                metrics |= {"best_elo": p.elo, "best_elo_lower": p.lower, "best_elo_upper": p.upper}
        decisions = self.decisions()
        gates = [d for d in decisions if d.get("decision") in (ACCEPT, REJECT)]
        metrics["promotions"] = float(sum(bool(d.get("promoted")) for d in gates))
        metrics["gates"] = float(len(gates))
        if gates and gates[-1].get("version") == version:
            last = gates[-1]
            metrics |= {
                "gate_llr": float(last["llr"]),
                "gate_games": float(last["games"]),
                "gate_accept": float(last["decision"] == ACCEPT),
            }
        for spec in self.s.ladder:
            if spec in names:
                metrics[f"ladder/{spec}"] = ratings[spec].elo
        metrics["draw_elo"] = ratings.draw_elo
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(latest_key(self.ns))
        pipe.hset(latest_key(self.ns), mapping={k: repr(float(v)) for k, v in metrics.items()})
        pipe.execute()
        self._write_ratings(ratings)
        self._write_curve(ratings)
        if "elo" in metrics:
            logger.info(
                "eval v%d: Elo %.0f [%.0f, %.0f] (best v%d)",
                version,
                metrics["elo"],
                metrics["elo_lower"],
                metrics["elo_upper"],
                best,
            )
        return metrics

    def _write_ratings(self, ratings: Ratings) -> None:
        if not self.s.write_pdn:
            return
        self.eval_dir.mkdir(parents=True, exist_ok=True)
        write_ratings_csv(ratings, self.eval_dir / "ratings.csv")
        try:
            plot_ratings(ratings, self.eval_dir / "ratings.png")
        except Exception as e:  # a plot must never stop the evaluation
            logger.warning("could not draw ratings.png: %s", e)

    # -- the curve ------------------------------------------------------------------------

    def version_info(self, version: int) -> dict[str, Any]:
        """``version``'s training step, self-play positions and publication time (unix s),
        kept in Redis once read: from the weights channel's metadata, else (weights published
        by an older learner) the step in the weights' header and the time of evaluation."""
        raw = self.client.hget(versions_key(self.ns), str(version))
        if raw is not None:
            with contextlib.suppress(ValueError, TypeError):
                return dict(json.loads(raw))
        meta = self.channel.meta(version)
        info = {
            "step": meta.get("step", self._steps.get(version)),
            "positions": meta.get("positions"),
            "t": meta.get("t", round(time.time(), 3)),
        }
        if (run_s := _seconds(meta.get("run_s"))) is not None:  # the run's own clock
            info["run_s"] = run_s
        self.client.hset(versions_key(self.ns), str(version), json.dumps(info))
        return info

    def _versions(self) -> dict[int, dict[str, Any]]:
        infos: dict[int, dict[str, Any]] = {}
        for k, v in self.client.hgetall(versions_key(self.ns)).items():
            with contextlib.suppress(ValueError, TypeError):
                infos[int(k)] = dict(json.loads(v))
        return infos

    @staticmethod
    def _wall_seconds(infos: dict[int, dict[str, Any]]) -> dict[int, float | None]:
        """Each version's place on the wall-time axis: the run's own seconds when it was
        published (``run_s``: resumes summed, the time between them not counted) when every
        version carries them; else, for a run begun before the learner sent them, the clock
        since the first version's publication (downtime between resumes included)."""
        run = {v: _seconds(i.get("run_s")) for v, i in infos.items()}
        if infos and all(s is not None for s in run.values()):
            return run
        times = {v: _seconds(i.get("t")) for v, i in infos.items()}
        t0 = min((t for t in times.values() if t is not None), default=None)
        return {v: None if t0 is None or t is None else t - t0 for v, t in times.items()}

    def curve(self, ratings: Ratings) -> list[CurvePoint]:
        """Every rated candidate with its step, wall seconds since the first one, positions."""
        infos = self._versions()
        if not infos:
            return []
        wall = self._wall_seconds(infos)
        names = set(ratings.names)
        points = []
        for version in sorted(infos):
            if f"v{version}" not in names:
                continue
            info, p = infos[version], ratings[f"v{version}"]
            points.append(
                CurvePoint(
                    version=version,
                    step=None if info.get("step") is None else int(info["step"]),
                    wall_s=wall[version],
                    positions=None if info.get("positions") is None else int(info["positions"]),
                    elo=p.elo,
                    lower=p.lower,
                    upper=p.upper,
                    games=p.games,
                )
            )
        return points

    def _write_curve(self, ratings: Ratings) -> None:
        if not self.s.write_pdn:
            return
        points = self.curve(ratings)
        if not points:
            return
        self.eval_dir.mkdir(parents=True, exist_ok=True)
        write_curve_csv(points, self.eval_dir / CURVE_CSV)
        rungs = {p.name: p.elo for p in ratings.players if p.name in self._ladder_names()}
        try:
            plot_curve(points, rungs, self.eval_dir / CURVE_PNG)
        except Exception as e:  # a plot must never stop the evaluation
            logger.warning("could not draw %s: %s", CURVE_PNG, e)

    def _ladder_names(self) -> set[str]:
        return {self._rung_player(spec).name for spec in self.s.ladder}


def _seconds(value: Any) -> float | None:
    """A time in seconds from the weights' metadata, or None where it is absent or no finite
    number >= 0 (a malformed record must not break the curve)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
