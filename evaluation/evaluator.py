"""The evaluator: gate each candidate against the best, play it against the ladder, fit Elo.

Plain functions do the work and are what the tests call:

- :func:`gate` plays colour-reversed pairs of a candidate against the best from the opening
  deck, feeding a sequential test (evaluation.gating.SPRT), until it decides.
- :func:`ladder_results` plays a candidate against fixed opponents (``random``,
  ``minimax:1``, ...) and returns the games as ``PairResult`` rows for the Elo fit;
  :func:`calibration_results` plays adjacent rungs against each other once per run.
- :func:`fit_all` fits every rating so far (evaluation.elo.fit_ratings), ``random`` at 0.

:class:`EvaluatorWorker` owns the loop and its state, all of it in the run's Redis so that a
restarted evaluator loses nothing and repeats nothing; :class:`EvaluatorActor` is its Ray shell
(``max_restarts=-1``) and :func:`start_evaluator` starts it beside the learner. Keys, with
``<ns>`` the run's namespace (``replay.namespace``):

==============================  ===========================================================
``<ns>:eval:results``           list, one JSON ``PairResult`` row per (match, first mover):
                                every gate, ladder and calibration game ever finished
``<ns>:eval:decisions``         list, one JSON gate decision per candidate (GateDecision
                                fields + candidate, best, promoted)
``<ns>:eval:latest``            hash, the newest metrics for the learner to log
                                (:func:`read_eval_metrics`)
``<ns>:eval:done``              hash, finished units of work (``gate:V`` -> accept/reject,
                                ``ladder:V:SPEC``, ``calibration``) and ``last_version``
``<ns>:eval:gate:V:B``          list, the pairs of the unfinished gate of V against best B
                                (a restart resumes the test where it stopped)
``<ns>:eval:ladder``            hash, the rungs' ratings fixed after calibration
==============================  ===========================================================

A unit's results and its ``done`` mark are written in one transaction, so a unit is either
recorded once or replayed whole. Weights come from the weights channel (learner.weights): every
``evaluation.every_versions``-th published version is a candidate, the newest first (older ones
not yet evaluated are skipped: the evaluator only ever falls behind, never catches up on stale
weights); the first version the evaluator sees becomes the best. Games are written as PDN under
``<run_dir>/eval/``, with ``decisions.jsonl``, ``ratings.csv`` and ``ratings.png`` (every
candidate's rating by version, the ladder's rungs as lines).

Determinism: the network players search without noise at temperature 0, so a pair of players
replays the same game from the same opening; a gate therefore plays each opening at most once
rather than counting replays as new evidence, from the deck plus a copy of it continued by
``evaluation.extend_openings`` random plies (:func:`extend_openings`): 624 games at most on 8x8.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ray

from evaluation.elo import PairResult, Ratings, fit_ratings
from evaluation.gating import ACCEPT, CONTINUE, REJECT, SPRT, GateDecision
from evaluation.match import MatchResult, PairRecord, play_match, play_pair, schedule
from evaluation.network_player import network_player, play_settings
from evaluation.players import Player, make_player
from game.openings import KINDS as OPENING_KINDS
from game.openings import Opening, extend_openings, load_openings
from game.pdn import write_pdn
from learner.checkpoint import decode_checkpoint
from learner.replay import connect
from learner.weights import WeightsChannel

logger = logging.getLogger(__name__)

EVAL_DIR = "eval"  # under the run directory: PDN games, decisions.jsonl, ratings.csv/png
# Plies of uniformly random moves that make a "random" opening, and how many distinct ones to
# draw: enough variety for deterministic players on the 6x6 board, where there is no deck.
GATE_SPRT_KEYS = ("elo0", "elo1", "alpha", "beta", "model", "method", "max_games")
METRIC_PREFIX = "eval/"
# Seconds between restarts of an evaluator loop that keeps failing (the first is immediate), so a
# persistent error (a bad checkpoint, Redis gone) logs a line per interval, not a busy loop.
RESTART_BACKOFF_S = 30.0


# ----------------------------------------------------------------------------- Redis keys


def results_key(namespace: str) -> str:
    return f"{namespace}:eval:results"


def decisions_key(namespace: str) -> str:
    return f"{namespace}:eval:decisions"


def latest_key(namespace: str) -> str:
    return f"{namespace}:eval:latest"


def done_key(namespace: str) -> str:
    return f"{namespace}:eval:done"


def gate_pairs_key(namespace: str, version: int, best: int) -> str:
    return f"{namespace}:eval:gate:{version}:{best}"


def ladder_key(namespace: str) -> str:
    return f"{namespace}:eval:ladder"


# ----------------------------------------------------------------------------- openings


# ----------------------------------------------------------------------------- gate


def sprt_from_config(sprt_cfg: Mapping[str, Any]) -> SPRT:
    """An SPRT from the ``evaluation.gate`` settings (elo0, elo1, alpha, beta, model, ...)."""
    unknown = sorted(set(sprt_cfg) - set(GATE_SPRT_KEYS) - {"enabled"})
    if unknown:
        raise ValueError(f"evaluation.gate: unknown key(s) {unknown}; known {list(GATE_SPRT_KEYS)}")
    return SPRT(**{k: sprt_cfg[k] for k in GATE_SPRT_KEYS if k in sprt_cfg})


def _pair_points(pair: PairRecord) -> tuple[float, float]:
    """The candidate's (A's) points in the two games of a pair."""
    return pair.a_black.black_points(), 1.0 - pair.a_white.black_points()


def _feed(sprt: SPRT, pair: PairRecord) -> None:
    first, second = _pair_points(pair)
    if sprt.model == "pentanomial":
        sprt.add_pair(first, second)
    else:
        sprt.add_game(first)
        sprt.add_game(second)


def gate_pair_limit(openings: Sequence[Opening], max_games: int | None) -> int:
    """Most pairs a gate plays: each opening once (see the module docstring), within the cap."""
    limit = len(openings)
    if max_games is not None:
        limit = min(limit, math.ceil(max_games / 2))
    return limit


def gate(
    candidate: Player,
    best: Player,
    openings: Sequence[Opening],
    sprt_cfg: Mapping[str, Any],
    *,
    seed: int,
    max_plies: int,
    size: int = 8,
    played: Sequence[PairRecord] = (),
    on_pair: Callable[[PairRecord, SPRT], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> GateDecision:
    """Colour-reversed pairs of ``candidate`` (A) against ``best`` until the SPRT decides.

    Pairs come from ``openings`` in a seeded order, each opening at most once; when the deck or
    ``max_games`` runs out first, the candidate is rejected (``truncated`` in the decision).
    ``played``: pairs of an interrupted gate (same seed and openings), fed first, not replayed.
    ``on_pair(pair, sprt)`` sees each new pair; ``should_stop()`` True between pairs returns the
    undecided snapshot (decision ``continue``).
    """
    sprt = sprt_from_config(sprt_cfg)
    limit = gate_pair_limit(openings, sprt.max_games)
    plan = schedule(openings, limit, seed) if limit else []
    for pair in played:
        _feed(sprt, pair)
    index = len(played)
    while sprt.status == CONTINUE and index < len(plan):
        if should_stop is not None and should_stop():
            return sprt.decision()
        pair = play_pair(candidate, best, plan[index], index, max_plies=max_plies, size=size)
        _feed(sprt, pair)
        index += 1
        if on_pair is not None:
            on_pair(pair, sprt)
    return sprt.decision(truncate=sprt.status == CONTINUE)


# ----------------------------------------------------------------------------- results


def pair_results(pairs: Iterable[PairRecord], a: str, b: str) -> list[PairResult]:
    """Games of ``a`` (the pairs' A) against ``b`` as PairResults: one row with ``a`` moving
    first (Black) and one with ``b`` moving first, counts from ``a``'s side; empty rows left out."""
    counts = {a: [0, 0, 0], b: [0, 0, 0]}  # first mover -> a's wins, draws, losses
    for pair in pairs:
        first, second = _pair_points(pair)
        for mover, points in ((a, first), (b, second)):
            counts[mover][{1.0: 0, 0.5: 1, 0.0: 2}[points]] += 1
    return [
        PairResult(a, b, wins, draws, losses, first_mover=mover)
        for mover, (wins, draws, losses) in counts.items()
        if wins + draws + losses
    ]


def result_to_json(result: PairResult, **meta: Any) -> str:
    return json.dumps({**asdict(result), **meta}, sort_keys=True)


def result_from_json(text: str | bytes) -> PairResult:
    d = json.loads(text)
    return PairResult(
        a=str(d["a"]),
        b=str(d["b"]),
        wins=int(d["wins"]),
        draws=int(d["draws"]),
        losses=int(d["losses"]),
        first_mover=d.get("first_mover"),
    )


def ladder_results(
    candidate_name: str,
    candidate: Player,
    ladder_specs: Sequence[str],
    games_per_opponent: int,
    openings: Sequence[Opening],
    *,
    seed: int,
    max_plies: int,
    size: int = 8,
    player_options: Mapping[str, Any] | None = None,
    on_match: Callable[[str, MatchResult, list[PairResult]], None] | None = None,
    skip: Iterable[str] = (),
    should_stop: Callable[[], bool] | None = None,
) -> list[PairResult]:
    """``candidate`` against each ladder player (specs), ``games_per_opponent`` games each
    (an even number: colour-reversed pairs), as PairResults named ``candidate_name`` vs the
    opponent's name. ``on_match(spec, match, results)`` after each opponent; specs in ``skip``
    are not played; ``should_stop()`` True between opponents ends early."""
    out: list[PairResult] = []
    skipped = set(skip)
    for spec in ladder_specs:
        if spec in skipped:
            continue
        if should_stop is not None and should_stop():
            break
        opponent = make_player(spec, **dict(player_options or {}))
        match = play_match(
            candidate,
            opponent,
            openings,
            games=games_per_opponent,
            seed=seed,
            max_plies=max_plies,
            size=size,
        )
        rows = pair_results(match.pairs, candidate_name, opponent.name)
        logger.info("ladder: %s", match.summary().replace(candidate.name, candidate_name, 1))
        if on_match is not None:
            on_match(spec, match, rows)
        out.extend(rows)
    return out


def calibration_results(
    ladder_specs: Sequence[str],
    pairs: int,
    openings: Sequence[Opening],
    *,
    seed: int,
    max_plies: int,
    size: int = 8,
    player_options: Mapping[str, Any] | None = None,
    on_match: Callable[[str, MatchResult, list[PairResult]], None] | None = None,
) -> list[PairResult]:
    """Each ladder rung against the next one (``pairs`` colour-reversed pairs each), so the
    rungs are rated against each other and the anchor even before any candidate plays."""
    options = dict(player_options or {})
    out: list[PairResult] = []
    for lower, upper in itertools.pairwise(ladder_specs):
        a, b = make_player(upper, **options), make_player(lower, **options)
        match = play_match(
            a, b, openings, games=2 * pairs, seed=seed, max_plies=max_plies, size=size
        )
        rows = pair_results(match.pairs, a.name, b.name)
        logger.info("calibration: %s", match.summary())
        if on_match is not None:
            on_match(f"{upper} vs {lower}", match, rows)
        out.extend(rows)
    return out


def fit_all(
    results: Sequence[PairResult],
    elo_cfg: Mapping[str, Any],
    fixed: Mapping[str, float] | None = None,
) -> Ratings:
    """fit_ratings over ``results`` with the anchor of ``elo_cfg`` (``random`` at 0 by default)
    plus the ``fixed`` ratings (the calibrated rungs)."""
    anchors = {
        str(elo_cfg.get("anchor_player", "random")): float(elo_cfg.get("anchor_rating", 0.0))
    }
    anchors.update({k: float(v) for k, v in (fixed or {}).items() if k not in anchors})
    return fit_ratings(
        results,
        anchors,
        prior_draws=float(elo_cfg.get("prior_draws", 2.0)),
        first_move_advantage=bool(elo_cfg.get("first_move_advantage", False)),
        confidence=float(elo_cfg.get("confidence", 0.95)),
    )


# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class EvalSettings:
    """What the evaluator reads from the composed config (groups evaluation, game, mcts, replay)."""

    namespace: str
    size: int
    max_plies: int
    every_versions: int
    ladder: tuple[str, ...]
    ladder_pairs: int
    calibration_pairs: int
    fix_ladder: bool
    openings: str
    extend_openings: int
    seed: int
    poll_s: float
    device: str
    torch_threads: int
    write_pdn: bool
    # Gate candidates against the best (actors play the promoted weights). Off: AlphaZero's
    # scheme, actors play the newest weights and the evaluator only rates candidates.
    gating: bool = True
    mcts: dict[str, Any] = field(default_factory=dict)  # network players' search settings
    gate: dict[str, Any] = field(default_factory=dict)  # the SPRT's settings
    elo: dict[str, Any] = field(default_factory=dict)  # fit_ratings' settings
    player_options: dict[str, Any] = field(default_factory=dict)  # minimax weights, tt_mb
    connect_retries: int = 6
    connect_backoff_s: float = 0.5

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> EvalSettings:
        """From a composed config (DictConfig or plain dicts); ValueError naming a bad key."""

        def group(name: str) -> Mapping[str, Any]:
            node = cfg.get(name) if hasattr(cfg, "get") else None
            if node is None:
                raise ValueError(f"config group {name!r} is missing")
            return node

        ev, game, replay = group("evaluation"), group("game"), group("replay")

        def get(key: str) -> Any:
            if key not in ev:
                raise ValueError(f"config key evaluation.{key} is missing")
            return ev[key]

        mcts = dict(group("mcts"))
        mcts.update(
            simulations=int(get("simulations")), leaves_per_game=int(get("leaves_per_game"))
        )
        baseline = ev.get("baseline") or {}
        options: dict[str, Any] = {}
        if baseline.get("weights") is not None:
            options["weights"] = dict(baseline["weights"])
        if (baseline.get("search") or {}).get("tt_mb") is not None:
            options["tt_mb"] = int(baseline["search"]["tt_mb"])
        s = cls(
            namespace=str(replay["namespace"]),
            size=int(game["size"]),
            max_plies=int(game["max_plies"]),
            every_versions=int(get("every_versions")),
            ladder=tuple(str(x) for x in get("ladder")),
            ladder_pairs=int(get("ladder_pairs")),
            calibration_pairs=int(get("calibration_pairs")),
            fix_ladder=bool(get("fix_ladder")),
            openings=str(get("openings")),
            extend_openings=int(get("extend_openings")),
            seed=int(get("seed")),
            poll_s=float(get("poll_s")),
            device=str(get("device")),
            torch_threads=int(get("torch_threads")),
            write_pdn=bool(get("write_pdn")),
            gating=bool(ev.get("gating", True)),
            mcts=play_settings(mcts),
            gate={k: v for k, v in dict(get("gate")).items() if k in GATE_SPRT_KEYS},
            elo=dict(get("elo")),
            player_options=options,
            connect_retries=int(replay.get("connect_retries", 6)),
            connect_backoff_s=float(replay.get("connect_backoff_s", 0.5)),
        )
        checks = (
            ("every_versions", s.every_versions >= 1, "must be >= 1"),
            ("simulations", s.mcts["simulations"] >= 1, "must be >= 1"),
            ("ladder_pairs", s.ladder_pairs >= 0, "must be >= 0"),
            ("calibration_pairs", s.calibration_pairs >= 0, "must be >= 0"),
            ("poll_s", s.poll_s > 0, "must be > 0"),
            ("extend_openings", s.extend_openings >= 0, "must be >= 0"),
            ("torch_threads", s.torch_threads >= 1, "must be >= 1"),
            ("openings", s.openings in OPENING_KINDS, f"must be one of {OPENING_KINDS}"),
        )
        for key, ok, why in checks:
            if not ok:
                raise ValueError(f"bad config value evaluation.{key}={get(key)!r}: {why}")
        sprt_from_config(s.gate)  # validates the gate's settings now
        anchor = str(s.elo.get("anchor_player", "random"))
        if s.ladder and anchor not in {make_player(x, **s.player_options).name for x in s.ladder}:
            raise ValueError(
                f"evaluation.ladder {list(s.ladder)} must include the Elo anchor "
                f"evaluation.elo.anchor_player={anchor!r}, or no rating is tied to it"
            )
        return s


# ----------------------------------------------------------------------------- the worker


class _Stopped(Exception):
    """Raised inside a unit of work when stop() was requested; nothing of the unit is kept."""


def read_eval_metrics(client: Any, namespace: str) -> dict[str, float]:
    """The newest evaluator metrics, keys ``eval/...`` (``eval/elo``, ``eval/elo_lower``,
    ``eval/elo_upper``, ``eval/version``, ``eval/best_version``, ``eval/best_elo``, ...);
    empty before the first evaluation. For the learner to log."""
    raw = client.hgetall(latest_key(namespace))
    out: dict[str, float] = {}
    for k, v in raw.items():
        key = k.decode() if isinstance(k, bytes) else str(k)
        with contextlib.suppress(ValueError):
            out[METRIC_PREFIX + key] = float(v)
    return out


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
        self._stop = threading.Event()
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
        start), calibrate the ladder (once), finish the best's ladder games (the first best was
        never a candidate), evaluate the newest due version. True if anything was played."""
        try:
            best = self.ensure_best()
            played = self.calibrate()
            if best >= 0 and self.s.ladder_pairs and not self._ladder_done(best):
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
        model, _ = decode_checkpoint(data, source=f"weights v{version}")
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

    def calibrate(self) -> bool:
        """Adjacent ladder rungs against each other, once per run (and the fixed ratings).
        True if it played now."""
        if self.s.calibration_pairs == 0 or len(self.s.ladder) < 2 or self._done("calibration"):
            return False
        games: list[MatchResult] = []
        rows = calibration_results(
            self.s.ladder,
            self.s.calibration_pairs,
            self.openings,
            seed=self.s.seed,
            max_plies=self.s.max_plies,
            size=self.s.size,
            player_options=self.s.player_options,
            on_match=lambda _spec, match, _rows: games.append(match),
        )
        fixed: dict[str, float] = {}
        if self.s.fix_ladder:
            try:
                ratings = fit_all(rows, self.s.elo)
                fixed = {p.name: p.elo for p in ratings.players if not p.anchored}
            except ValueError as e:
                logger.warning("ladder calibration fit failed (%s); rungs stay free", e)

        def store_fixed(pipe: Any) -> None:
            if fixed:
                pipe.hset(ladder_key(self.ns), mapping={k: repr(v) for k, v in fixed.items()})

        for match in games:
            self._write_pdn("calibration.pdn", match)
        self._record("calibration", "1", rows, kind="calibration", version=None, extra=store_fixed)
        logger.info("ladder calibrated: %s", {k: round(v) for k, v in fixed.items()} or "free")
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
        units = [f"ladder:{version}:{spec}" for spec in self.s.ladder]
        return all(self.client.hmget(done_key(self.ns), units)) if units else True

    def play_ladder(self, version: int, candidate: Player) -> int:
        """``version`` against every ladder rung not yet played (each recorded on its own);
        returns the number of opponents played now."""
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
        )
        if self.stopping():
            raise _Stopped
        return len({r.b for r in rows})

    # -- ratings --------------------------------------------------------------------------

    def ratings(self) -> Ratings | None:
        """All results so far, fitted; None (logged) when they do not identify the ratings yet."""
        rows = self.results()
        if not rows:
            return None
        try:
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
        lines = ["player,elo,lower,upper,games,points,anchored"]
        lines += [
            f"{p.name},{p.elo:.1f},{p.lower:.1f},{p.upper:.1f},{p.games},{p.points:g},{p.anchored}"
            for p in ratings.players
        ]
        (self.eval_dir / "ratings.csv").write_text("\n".join(lines) + "\n")
        try:
            plot_ratings(ratings, self.eval_dir / "ratings.png")
        except Exception as e:  # a plot must never stop the evaluation
            logger.warning("could not draw ratings.png: %s", e)


def plot_ratings(ratings: Ratings, path: Path) -> None:
    """Each candidate's rating (``vN``) by version with its interval; ladder players as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    versions = sorted(
        (int(p.name[1:]), p) for p in ratings.players if p.name[1:].isdigit() and p.name[0] == "v"
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if versions:
        xs = [v for v, _ in versions]
        ys = [p.elo for _, p in versions]
        err = [[p.elo - p.lower for _, p in versions], [p.upper - p.elo for _, p in versions]]
        ax.errorbar(xs, ys, yerr=err, fmt="o-", capsize=3, label="candidates")
    for p in ratings.players:
        if not (p.name[0] == "v" and p.name[1:].isdigit()):
            ax.axhline(p.elo, linestyle="--", linewidth=0.8, color="grey")
            ax.annotate(p.name, (0, p.elo), xycoords=("axes fraction", "data"), fontsize=7)
    ax.set_xlabel("weights version")
    ax.set_ylabel("Elo (random = 0)")
    ax.set_title("checkerzero: candidate ratings against the ladder")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------- Ray shell


@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=2)
class EvaluatorActor:
    """Ray shell over EvaluatorWorker: ``run()`` evaluates until ``stop()`` (a second call slot,
    hence max_concurrency=2). Ray restarts a dead actor; the worker resumes from Redis."""

    def __init__(self, cfg: dict, url: str, password: str | None, run_dir: str) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        self.worker = EvaluatorWorker.connect(cfg, url, password, run_dir)

    def run(self) -> int:
        return self.worker.run()

    def stop(self) -> None:
        self.worker.stop()

    def where(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()


class EvaluatorHandle:
    """The learner's view of the evaluator actor: restart its loop, stop it."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.restarts = 0
        self._ref = actor.run.remote()
        self._failed_at: float | None = None

    def check(self) -> None:
        """Restarts the loop if ``run()`` ended (an error Ray could not retry); a loop that
        keeps failing is restarted at most every RESTART_BACKOFF_S, its error logged each time."""
        if self._failed_at is None:
            done, _ = ray.wait([self._ref], timeout=0)
            if not done:
                return
            try:
                ray.get(self._ref)
                logger.warning("the evaluator returned early; restarting its loop")
            except Exception as e:
                logger.warning("the evaluator failed (%s); restarting its loop", e)
            self._failed_at = time.monotonic()
        if time.monotonic() - self._failed_at < RESTART_BACKOFF_S * min(self.restarts, 1):
            return
        self.restarts += 1
        self._failed_at = None
        self._ref = self.actor.run.remote()

    def stop(self, timeout_s: float) -> None:
        """Asks the loop to stop (between games; an unfinished unit resumes next run), waits up
        to ``timeout_s``, then kills the actor."""
        with contextlib.suppress(Exception):  # an actor that is already dead needs no stop
            self.actor.stop.remote()
        ray.wait([self._ref], timeout=timeout_s)
        ray.kill(self.actor, no_restart=True)


def start_evaluator(
    cfg: Mapping[str, Any], url: str, password: str | None, run_dir: str | Path
) -> EvaluatorHandle | None:
    """Starts the evaluator actor on this node (it writes under ``run_dir``); None when
    ``evaluation.enabled`` is false. Ray must be initialised. The config is checked here, so a
    bad value fails in the learner before any game."""
    from omegaconf import DictConfig, OmegaConf
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    container = (
        OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    )
    if not container.get("evaluation", {}).get("enabled", False):
        return None
    settings = EvalSettings.from_config(container)
    node = ray.get_runtime_context().get_node_id()
    actor = EvaluatorActor.options(
        name=None,
        num_cpus=float(container["evaluation"].get("num_cpus", 0)),
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
    ).remote(container, url, password, str(run_dir))
    logger.info(
        "evaluator started: every %d versions, %d simulations, ladder %s",
        settings.every_versions,
        settings.mcts["simulations"],
        list(settings.ladder),
    )
    return EvaluatorHandle(actor)


__all__ = [
    "EvalSettings",
    "EvaluatorActor",
    "EvaluatorHandle",
    "EvaluatorWorker",
    "calibration_results",
    "fit_all",
    "gate",
    "ladder_results",
    "pair_results",
    "read_eval_metrics",
    "start_evaluator",
]
