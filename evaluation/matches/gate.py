"""The gate: colour-reversed pairs of a candidate against the best until a sequential test
(evaluation.stats.sprt.SPRT) decides.

Determinism: the network players search without noise at temperature 0, so a pair of players
replays the same game from the same opening; a gate therefore plays each opening at most once
rather than counting replays as new evidence, from the deck plus a copy of it continued by
``evaluation.extend_openings`` random plies (``game.openings.extend_openings``): 624 games at
most on 8x8.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evaluation.matches.games import play_pair, schedule
from evaluation.matches.records import PairRecord
from evaluation.players.base import Player
from evaluation.stats.sprt import CONTINUE, SPRT, GateDecision
from game.egdb import EndgameDatabase
from game.openings import Opening

GATE_SPRT_KEYS = ("elo0", "elo1", "alpha", "beta", "model", "method", "max_games")


def sprt_from_config(sprt_cfg: Mapping[str, Any]) -> SPRT:
    """An SPRT from the ``evaluation.gate`` settings (elo0, elo1, alpha, beta, model, ...)."""
    unknown = sorted(set(sprt_cfg) - set(GATE_SPRT_KEYS) - {"enabled"})
    if unknown:
        raise ValueError(f"evaluation.gate: unknown key(s) {unknown}; known {list(GATE_SPRT_KEYS)}")
    return SPRT(**{k: sprt_cfg[k] for k in GATE_SPRT_KEYS if k in sprt_cfg})


def feed_pair(sprt: SPRT, pair: PairRecord) -> None:
    """A colour-reversed pair into the SPRT: as one pair (pentanomial) or as two games."""
    first, second = pair.a_game_points()
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
    egdb: EndgameDatabase | None = None,
) -> GateDecision:
    """Colour-reversed pairs of ``candidate`` (A) against ``best`` until the SPRT decides.

    Pairs come from ``openings`` in a seeded order, each opening at most once; when the deck or
    ``max_games`` runs out first, the candidate is rejected (``truncated`` in the decision).
    ``played``: pairs of an interrupted gate (same seed and openings), fed first, not replayed.
    ``on_pair(pair, sprt)`` sees each new pair; ``should_stop()`` True between pairs returns the
    undecided snapshot (decision ``continue``). With ``egdb`` a game ends as soon as it
    reaches the endgame database.
    """
    sprt = sprt_from_config(sprt_cfg)
    limit = gate_pair_limit(openings, sprt.max_games)
    plan = schedule(openings, limit, seed) if limit else []
    for pair in played:
        feed_pair(sprt, pair)
    index = len(played)
    while sprt.status == CONTINUE and index < len(plan):
        if should_stop is not None and should_stop():
            return sprt.decision()
        pair = play_pair(
            candidate, best, plan[index], index, max_plies=max_plies, size=size, egdb=egdb
        )
        feed_pair(sprt, pair)
        index += 1
        if on_pair is not None:
            on_pair(pair, sprt)
    return sprt.decision(truncate=sprt.status == CONTINUE)
