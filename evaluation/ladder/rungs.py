"""Playing the ladder: candidates against fixed opponents, the rungs against each other, the fit.

- :func:`ladder_results` plays a candidate against fixed opponents (``random``,
  ``minimax:1``, ...) and returns the games as ``PairResult`` rows for the Elo fit.
- :func:`rung_results` plays adjacent rungs against each other: the one strength ladder that the
  evaluator (once per run), the benchmarks and the scripts share.
- :func:`fit_all` fits every rating so far (evaluation.stats.fit.fit_ratings), ``random`` at 0.
- :func:`ladder_player` adds ``noisy:P:SPEC`` rungs (SPEC's move, or a random one with
  probability P) to the player specs: the steps between ``random`` and ``minimax:1``, which
  otherwise wins every game and leaves that gap unmeasured.
- :func:`rating_openings`: the deck plus seeded random continuations, one distinct start per
  game pair (deterministic players replay the same game from the same opening);
  :func:`play_rating_pair` plays one such pair in a worker of ``python -m evaluation.rate_ladder``.

The rest of the ladder: its rated table (evaluation.ladder.table), where games go
(evaluation.ladder.plan), and the ratings' files and plots (evaluation.ladder.report).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evaluation.ladder.table import LadderTable
from evaluation.matches.games import play_match, play_pair
from evaluation.matches.records import MatchResult, PairRecord
from evaluation.players.base import Player
from evaluation.players.make import make_player
from evaluation.players.spec import parse_spec
from evaluation.stats.elo import PairResult, Ratings
from evaluation.stats.fit import fit_ratings
from game.egdb import EndgameDatabase
from game.openings import Opening, extend_openings, load_openings
from game.position import Move, Position

logger = logging.getLogger(__name__)


def pair_results(pairs: Iterable[PairRecord], a: str, b: str) -> list[PairResult]:
    """Games of ``a`` (the pairs' A) against ``b`` as PairResults: one row with ``a`` moving
    first (Black) and one with ``b`` moving first, counts from ``a``'s side; empty rows left out."""
    counts = {a: [0, 0, 0], b: [0, 0, 0]}  # first mover -> a's wins, draws, losses
    for pair in pairs:
        first, second = pair.a_game_points()
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
    egdb: EndgameDatabase | None = None,
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
        opponent = ladder_player(spec, **dict(player_options or {}))
        match = play_match(
            candidate,
            opponent,
            openings,
            games=games_per_opponent,
            seed=seed,
            max_plies=max_plies,
            size=size,
            egdb=egdb,
        )
        rows = pair_results(match.pairs, candidate_name, opponent.name)
        logger.info("ladder: %s", match.summary().replace(candidate.name, candidate_name, 1))
        if on_match is not None:
            on_match(spec, match, rows)
        out.extend(rows)
    return out


# (stronger spec, weaker spec) -> their match, A the stronger; how a caller plays one rung.
PlayRung = Callable[[str, str], MatchResult]


def rung_results(
    ladder_specs: Sequence[str],
    play: PlayRung,
    *,
    on_match: Callable[[str, MatchResult, list[PairResult]], None] | None = None,
) -> list[PairResult]:
    """Each ladder rung (specs, weakest first) against the one below it, so the rungs are rated
    against each other and the anchor even before any candidate plays: the one strength ladder
    of the evaluator, the benchmarks and the scripts. ``play(upper, lower)`` plays a rung's
    match (in this process: :func:`in_process`; or in parallel workers: ``run_match``);
    ``on_match(label, match, results)`` sees each."""
    out: list[PairResult] = []
    for lower, upper in itertools.pairwise(ladder_specs):
        match = play(upper, lower)
        rows = pair_results(match.pairs, match.player_a, match.player_b)
        logger.info("rungs: %s", match.summary())
        if on_match is not None:
            on_match(f"{upper} vs {lower}", match, rows)
        out.extend(rows)
    return out


def in_process(
    openings: Sequence[Opening],
    pairs: int,
    *,
    seed: int,
    max_plies: int,
    size: int = 8,
    player_options: Mapping[str, Any] | None = None,
    egdb: EndgameDatabase | None = None,
) -> PlayRung:
    """Rung matches of ``pairs`` colour-reversed pairs played here with Player objects."""
    options = dict(player_options or {})

    def play(upper: str, lower: str) -> MatchResult:
        a, b = ladder_player(upper, **options), ladder_player(lower, **options)
        return play_match(
            a, b, openings, games=2 * pairs, seed=seed, max_plies=max_plies, size=size, egdb=egdb
        )

    return play


def fit_all(
    results: Sequence[PairResult],
    elo_cfg: Mapping[str, Any],
    fixed: Mapping[str, float] | None = None,
    table: LadderTable | None = None,
) -> Ratings:
    """fit_ratings over ``results`` with the anchor of ``elo_cfg`` (``random`` at 0 by default)
    plus the ``fixed`` ratings (the rungs, rated once per run). With a rated ladder ``table``
    its rungs are fixed at the table's ratings and draw_elo and the first-move term are the
    table's (candidates rated on the scale the ladder was rated on)."""
    anchors = {
        str(elo_cfg.get("anchor_player", "random")): float(elo_cfg.get("anchor_rating", 0.0))
    }
    anchors.update({k: float(v) for k, v in (fixed or {}).items() if k not in anchors})
    if table is not None:
        anchors.update({k: v for k, v in table.ratings.items() if k not in anchors})
    return fit_ratings(
        results,
        anchors,
        prior_draws=float(elo_cfg.get("prior_draws", 2.0)),
        # With a table its first-move term (or none) holds; nothing of it is fitted.
        first_move_advantage=table is None and bool(elo_cfg.get("first_move_advantage", False)),
        confidence=float(elo_cfg.get("confidence", 0.95)),
        draw_elo=table.draw_elo if table is not None else None,
        first_move_elo=table.first_move_elo if table is not None else None,
    )


_NOISY_SPEC = re.compile(r"noisy:(?P<p>[0-9.]+):(?P<inner>.+)")


class NoisyPlayer:
    """``inner``'s move, except a uniformly random legal move with probability ``p``. Seeded:
    ``reset`` restarts its generator, so a game from a given opening is reproducible."""

    def __init__(self, p: float, inner: Player, seed: int = 0) -> None:
        self.p = p
        self.inner = inner
        self.seed = seed
        self.name = f"noisy:{p:g}:{inner.name}"
        self._rng = random.Random(seed)

    def choose(self, position: Position) -> Move:
        if self._rng.random() < self.p:
            moves = position.legal_moves()
            if not moves or position.is_over():
                raise ValueError(f"{self.name}: the game is over in {position.fen()}")
            return self._rng.choice(moves)
        return self.inner.choose(position)

    def reset(self) -> None:
        self._rng = random.Random(self.seed)
        self.inner.reset()


def ladder_player(spec: str, **options: Any) -> Player:
    """A rung's player: ``noisy:P:SPEC`` (0 < P < 1) here, any other spec by
    evaluation.players.alphabeta.make_player (ValueError naming a bad spec either way)."""
    text = spec.strip() if isinstance(spec, str) else spec
    if isinstance(text, str) and (m := _NOISY_SPEC.fullmatch(text)):
        try:
            p = float(m["p"])
        except ValueError:
            p = math.nan
        if not 0.0 < p < 1.0:
            raise ValueError(
                f"player spec {spec!r}: the random-move probability must lie in (0, 1)"
            )
        return NoisyPlayer(p, make_player(m["inner"], **options), seed=int(options.get("seed", 0)))
    return _named(make_player(_project_path(text), **options), text)


# The project's root: a rung's evaluation file (``ab+nn:8:game/data/nneval-v1.safetensors``) is
# named relative to it, so a table's rung is the same player from any working directory.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _project_path(spec: Any) -> Any:
    """``spec`` with a relative ab+nn file that is not found from here read from the project."""
    if not isinstance(spec, str) or not spec.startswith("ab+nn"):
        return spec
    path = parse_spec(spec).nneval_path
    if not path or Path(path).is_absolute() or Path(path).exists():
        return spec
    return spec.replace(path, str(PROJECT_ROOT / path), 1)


def _named(player: Player, name: Any) -> Player:
    if isinstance(name, str) and player.name != name and str(PROJECT_ROOT) in player.name:
        player.name = name
    return player


def rating_openings(count: int, *, plies: int = 4, seed: int = 0, size: int = 8) -> list[Opening]:
    """At least ``count`` distinct openings when the board allows: the deck, then copies of it
    continued by ``plies`` seeded random moves (game.openings.extend_openings, one seed after
    another) with every starting position distinct. The same arguments give the same list, so
    opening ``i`` names the same start in every run (what a resumed rating relies on)."""
    deck = load_openings("deck", size)
    out = list(deck)
    seen = {o.fen for o in deck}
    tries = 0
    while len(out) < count and tries < count:  # each round adds up to len(deck) openings
        added = 0
        for o in extend_openings(deck, plies, seed=seed + tries):
            if o.fen in seen:
                continue
            seen.add(o.fen)
            out.append(Opening(f"{o.name}#{seed + tries}", o.moves, o.id, o.size))
            added += 1
        tries += 1
        if added == 0 and tries > 8:  # the board has no more starts this deep
            break
    return out[:count]


def play_rating_pair(
    spec_a: str,
    spec_b: str,
    index: int,
    opening_name: str,
    opening_moves: list[str],
    max_plies: int,
    size: int,
    options: dict[str, Any],
) -> dict[str, Any]:
    """One colour-reversed pair between two rungs, in a worker: plain values in and out (the
    pair as PairRecord.to_dict, plus the names, the index and the seconds it took)."""
    t = time.perf_counter()
    a, b = ladder_player(spec_a, **options), ladder_player(spec_b, **options)
    opening = Opening(opening_name, tuple(opening_moves), size=size)
    pair = play_pair(a, b, opening, index, max_plies=max_plies, size=size)
    return {
        "a": spec_a,
        "b": spec_b,
        "index": index,
        "seconds": round(time.perf_counter() - t, 3),
        "pair": pair.to_dict(),
    }
