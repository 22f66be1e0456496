"""The evaluator's ladder: the rungs against each other once per run, each candidate on the ladder.

Without a rated table, :func:`play_rungs` plays adjacent rungs against each other once per run
and :func:`play_ladder` plays a candidate against every rung, one match per rung recorded on its
own. With a rated ladder's table (``evaluation.ladder_table``), :func:`play_rated` spends a
candidate's games on the rungs next to its estimate, pair by pair (evaluation.ladder_plan).
Part of the evaluator's loop (evaluation.evaluator).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from checkerzero.store.keys import done_key, ladder_key
from evaluation.elo import PairResult
from evaluation.evaluator_state import Stopped
from evaluation.game_play import PairPlan, play_pair, play_pairs, schedule
from evaluation.game_records import MatchResult, PairRecord
from evaluation.ladder_plan import gallop_rung, nearest_rung, neighbour_rungs
from evaluation.ladder_play import (
    fit_all,
    in_process,
    ladder_player,
    ladder_results,
    pair_results,
    rung_results,
)
from evaluation.players import Player
from game.openings import Opening

if TYPE_CHECKING:
    from evaluation.evaluator import EvaluatorWorker

logger = logging.getLogger(__name__)


def play_rungs(ev: EvaluatorWorker) -> bool:
    """Adjacent ladder rungs against each other, once per run (and the fixed ratings).
    True if it played now."""
    # "calibration": the unit's name in runs started before it was called "rungs".
    done = ev.state.done("rungs") or ev.state.done("calibration")
    if ev.s.table is not None:  # rated once and for all: the table's ratings hold
        return False
    if ev.s.rung_pairs == 0 or len(ev.s.ladder) < 2 or done:
        return False
    games: list[MatchResult] = []
    play = in_process(
        ev.openings,
        ev.s.rung_pairs,
        seed=ev.s.seed,
        max_plies=ev.s.max_plies,
        size=ev.s.size,
        player_options=ev.s.player_options,
        egdb=ev.egdb,
    )
    rows = rung_results(
        ev.s.ladder, play, on_match=lambda _label, match, _rows: games.append(match)
    )
    fixed: dict[str, float] = {}
    if ev.s.fix_ladder:
        try:
            ratings = fit_all(rows, ev.s.elo)
            fixed = {p.name: p.elo for p in ratings.players if not p.anchored}
        except ValueError as e:
            logger.warning("the rungs' fit failed (%s); rungs stay free", e)

    def store_fixed(pipe: Any) -> None:
        if fixed:
            pipe.hset(ladder_key(ev.ns), mapping={k: repr(v) for k, v in fixed.items()})

    for match in games:
        ev._write_pdn("rungs.pdn", match)
    ev.state.record("rungs", "1", rows, kind="rungs", version=None, extra=store_fixed)
    logger.info("ladder rungs rated: %s", {k: round(v) for k, v in fixed.items()} or "free")
    return True


def ladder_done(ev: EvaluatorWorker, version: int) -> bool:
    if ev.s.table is not None:
        return bool(ev.state.done(f"ladder:{version}"))
    units = [f"ladder:{version}:{spec}" for spec in ev.s.ladder]
    return all(ev.client.hmget(done_key(ev.ns), units)) if units else True


def play_ladder(ev: EvaluatorWorker, version: int, candidate: Player) -> int:
    """``version`` against every ladder rung not yet played (each recorded on its own);
    returns the number of opponents played now. With a rated ladder: :meth:`play_rated`."""
    if ev.s.table is not None:
        return play_rated(ev, version, candidate)
    if ev.s.ladder_pairs == 0:
        return 0
    name = f"v{version}"
    skip = [spec for spec in ev.s.ladder if ev.state.done(f"ladder:{version}:{spec}")]

    def record(spec: str, match: MatchResult, rows: list[PairResult]) -> None:
        ev._write_pdn(f"v{version:05d}_ladder.pdn", match)
        ev.state.record(f"ladder:{version}:{spec}", "1", rows, kind="ladder", version=version)

    rows = ladder_results(
        name,
        candidate,
        ev.s.ladder,
        2 * ev.s.ladder_pairs,
        ev.openings,
        seed=ev.s.seed + version,
        max_plies=ev.s.max_plies,
        size=ev.s.size,
        player_options=ev.s.player_options,
        on_match=record,
        skip=skip,
        should_stop=ev.stopping,
        egdb=ev.egdb,
    )
    if ev.stopping():
        raise Stopped
    return len({r.b for r in rows})


def rung_player(ev: EvaluatorWorker, spec: str) -> Player:
    if spec not in ev._rungs:
        ev._rungs[spec] = new_rung_player(ev, spec)
    return ev._rungs[spec]


def new_rung_player(ev: EvaluatorWorker, spec: str) -> Player:
    return ladder_player(spec, **ev.s.player_options)


def play_rated(ev: EvaluatorWorker, version: int, candidate: Player) -> int:
    """``version`` against the rated rungs, ``candidate_games`` games (``early_games`` early
    in the run: EvaluatorWorker.candidate_games) in colour-reversed pairs, each pair
    recorded on its own: first ``probe_games`` against the rung nearest the previous
    candidate's rating (the weakest rung for the first), side by side; then, pair by pair,
    against the ``neighbour_rungs`` rungs below and above its estimate so far (the fit of
    its own games with the rungs fixed), where a game says most about it; while it has won
    or lost every game, a rung further on each round of as many pairs as the probe's
    (``gallop_rung``). Returns the pairs played now."""
    assert ev.s.table is not None
    unit = f"ladder:{version}"
    if ev.state.done(unit):
        return 0
    name = f"v{version}"
    specs = {rung_player(ev, spec).name: spec for spec in ev.s.ladder}
    rungs = {n: e for n, e in ev.s.table.ratings.items() if n in specs}
    rows = ev.state.candidate_rows(version)
    pairs = {n: sum(r.wins + r.draws + r.losses for r in rows if r.b == n) // 2 for n in rungs}
    order = schedule(ev.gate_openings, len(ev.gate_openings), ev.s.seed + version)
    prior = ev.state.previous_estimate()
    played_now = 0
    target = ev.candidate_games(version)
    while (games := 2 * sum(pairs.values())) < target:
        if ev.stopping():
            raise Stopped
        estimate = None
        if games >= ev.s.probe_games and rows:
            try:
                estimate = fit_all(rows, ev.s.elo, table=ev.s.table)[name].elo
            except ValueError as e:  # not identified yet: one more pair at the probe's rung
                logger.warning("v%d: no estimate yet (%s)", version, e)
        if estimate is None:  # the probe's pairs side by side, in one batched search
            start = prior if prior is not None else min(rungs.values())
            opponents = [nearest_rung(start, rungs)] * max(1, (ev.s.probe_games - games) // 2)
        else:
            jump = gallop_rung(rows, rungs)
            if jump is not None:  # as many pairs side by side as the probe's
                opponents = [jump] * max(1, ev.s.probe_games // 2)
            else:
                opponents = neighbour_rungs(estimate, rungs, ev.s.neighbour_rungs)
        opponents = opponents[: target // 2 - sum(pairs.values())]
        for rung, pair in zip(
            opponents,
            _play_rated_pairs(ev, candidate, opponents, specs, pairs, order),
            strict=True,
        ):
            new = pair_results([pair], name, rung)
            ev._write_pdn(f"v{version:05d}_ladder.pdn", MatchResult(name, rung, (pair,)))
            ev.state.record(
                f"ladder:{version}:{rung}:{pair.index}",
                "1",
                new,
                kind="ladder",
                version=version,
            )
            rows += new
            pairs[rung] += 1
            played_now += 1
    ev.client.hset(done_key(ev.ns), unit, "1")
    logger.info(
        "ladder v%d: %d games against %s",
        version,
        2 * sum(pairs.values()),
        {n: 2 * k for n, k in pairs.items() if k},
    )
    return played_now


def _play_rated_pairs(
    ev: EvaluatorWorker,
    candidate: Player,
    rungs: Sequence[str],
    specs: Mapping[str, str],
    pairs: Mapping[str, int],
    order: Sequence[Opening],
) -> list[PairRecord]:
    """One pair against each of ``rungs``, each at that rung's next opening, all their
    games side by side in one batched search (game_play.play_pairs) when the candidate can fork
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
                rung_player(ev, specs[rung]),
                opening,
                index,
                max_plies=ev.s.max_plies,
                size=ev.s.size,
                egdb=ev.egdb,
            )
            for rung, (opening, index) in zip(rungs, openings, strict=True)
        ]
    plans = [
        PairPlan(
            a=(fork(), fork()),
            b=(new_rung_player(ev, specs[rung]), new_rung_player(ev, specs[rung])),
            opening=opening,
            index=index,
        )
        for rung, (opening, index) in zip(rungs, openings, strict=True)
    ]
    return play_pairs(plans, max_plies=ev.s.max_plies, size=ev.s.size, egdb=ev.egdb)
