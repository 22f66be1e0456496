"""The evaluator's ladder: the rungs against each other once per run, each candidate on the ladder.

Without a rated table, :meth:`Ladder.play_rungs` plays adjacent rungs against each other once
per run and :meth:`Ladder.play` plays a candidate against every rung, one match per rung recorded
on its own. With a rated ladder's table (``evaluation.ladder_table``), :meth:`Ladder.play_rated`
spends a candidate's games on the rungs next to its estimate, pair by pair
(evaluation.ladder.plan). A part of the evaluator (evaluation.evaluator.worker), which owns the
rungs' players.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from checkerzero.store.keys import done_key
from evaluation.evaluator.context import EvalContext
from evaluation.evaluator.records import Stopped
from evaluation.ladder.plan import gallop_rung, nearest_rung, neighbour_rungs
from evaluation.ladder.rungs import (
    fit_all,
    in_process,
    ladder_player,
    ladder_results,
    pair_results,
    rung_results,
)
from evaluation.matches.games import PairPlan, play_pair, play_pairs, schedule
from evaluation.matches.records import MatchResult, PairRecord
from evaluation.players.base import Player
from evaluation.stats.elo import PairResult
from game.openings import Opening

logger = logging.getLogger(__name__)


class Ladder:
    """The ladder's games for the evaluator: the rungs' own, each candidate's."""

    def __init__(self, ctx: EvalContext, candidate_games: Callable[[int], int]) -> None:
        self.ctx = ctx
        self.candidate_games = candidate_games  # games of a version against a rated ladder
        self._rungs: dict[str, Player] = {}  # rated rungs' players, built once

    def play_rungs(self) -> bool:
        """Adjacent ladder rungs against each other, once per run (and the fixed ratings).
        True if it played now."""
        ev = self.ctx
        # "calibration": the unit's name in runs started before it was called "rungs".
        done = ev.state.done("rungs") or ev.state.done("calibration")
        if ev.settings.table is not None:  # rated once and for all: the table's ratings hold
            return False
        if ev.settings.rung_pairs == 0 or len(ev.settings.ladder) < 2 or done:
            return False
        games: list[MatchResult] = []
        play = in_process(
            ev.openings,
            ev.settings.rung_pairs,
            seed=ev.settings.seed,
            max_plies=ev.settings.max_plies,
            size=ev.settings.size,
            player_options=ev.settings.player_options,
            egdb=ev.egdb,
        )
        rows = rung_results(
            ev.settings.ladder, play, on_match=lambda _label, match, _rows: games.append(match)
        )
        fixed: dict[str, float] = {}
        if ev.settings.fix_ladder:
            try:
                ratings = fit_all(rows, ev.settings.elo)
                fixed = {p.name: p.elo for p in ratings.players if not p.anchored}
            except ValueError as e:
                logger.warning("the rungs' fit failed (%s); rungs stay free", e)

        for match in games:
            ev.files.write_games("rungs.pdn", match)
        ev.state.record(
            "rungs",
            "1",
            rows,
            kind="rungs",
            version=None,
            extra=lambda pipe: ev.state.store_fixed(pipe, fixed),
        )
        logger.info("ladder rungs rated: %s", {k: round(v) for k, v in fixed.items()} or "free")
        return True

    def done(self, version: int) -> bool:
        ev = self.ctx
        if ev.settings.table is not None:
            return bool(ev.state.done(f"ladder:{version}"))
        units = [f"ladder:{version}:{spec}" for spec in ev.settings.ladder]
        return all(ev.client.hmget(done_key(ev.ns), units)) if units else True

    def play(self, version: int, candidate: Player) -> int:
        """``version`` against every ladder rung not yet played (each recorded on its own);
        returns the number of opponents played now. With a rated ladder: :meth:`play_rated`."""
        ev = self.ctx
        if ev.settings.table is not None:
            return self.play_rated(version, candidate)
        if ev.settings.ladder_pairs == 0:
            return 0
        name = f"v{version}"
        skip = [spec for spec in ev.settings.ladder if ev.state.done(f"ladder:{version}:{spec}")]

        def record(spec: str, match: MatchResult, rows: list[PairResult]) -> None:
            ev.files.write_games(f"v{version:05d}_ladder.pdn", match)
            ev.state.record(f"ladder:{version}:{spec}", "1", rows, kind="ladder", version=version)

        rows = ladder_results(
            name,
            candidate,
            ev.settings.ladder,
            2 * ev.settings.ladder_pairs,
            ev.openings,
            seed=ev.settings.seed + version,
            max_plies=ev.settings.max_plies,
            size=ev.settings.size,
            player_options=ev.settings.player_options,
            on_match=record,
            skip=skip,
            should_stop=ev.stopping,
            egdb=ev.egdb,
        )
        if ev.stopping():
            raise Stopped
        return len({r.b for r in rows})

    def rung_player(self, spec: str) -> Player:
        """The rung's player, built once."""
        if spec not in self._rungs:
            self._rungs[spec] = self.new_rung_player(spec)
        return self._rungs[spec]

    def new_rung_player(self, spec: str) -> Player:
        return ladder_player(spec, **self.ctx.settings.player_options)

    def names(self) -> set[str]:
        """The rungs' player names (as the ratings call them)."""
        return {self.rung_player(spec).name for spec in self.ctx.settings.ladder}

    def play_rated(self, version: int, candidate: Player) -> int:
        """``version`` against the rated rungs, ``candidate_games`` games (``early_games`` early
        in the run: EvaluatorWorker.candidate_games) in colour-reversed pairs, each pair
        recorded on its own: first ``probe_games`` against the rung nearest the previous
        candidate's rating (the weakest rung for the first), side by side; then, pair by pair,
        against the ``neighbour_rungs`` rungs below and above its estimate so far (the fit of
        its own games with the rungs fixed), where a game says most about it; while it has won
        or lost every game, a rung further on each round of as many pairs as the probe's
        (``gallop_rung``). Returns the pairs played now."""
        ev = self.ctx
        assert ev.settings.table is not None
        unit = f"ladder:{version}"
        if ev.state.done(unit):
            return 0
        name = f"v{version}"
        specs = {self.rung_player(spec).name: spec for spec in ev.settings.ladder}
        rungs = {n: e for n, e in ev.settings.table.ratings.items() if n in specs}
        rows = ev.state.candidate_rows(version)
        pairs = {n: sum(r.wins + r.draws + r.losses for r in rows if r.b == n) // 2 for n in rungs}
        order = schedule(ev.gate_openings, len(ev.gate_openings), ev.settings.seed + version)
        prior = ev.state.previous_estimate()
        played_now = 0
        target = self.candidate_games(version)
        while (games := 2 * sum(pairs.values())) < target:
            if ev.stopping():
                raise Stopped
            estimate = None
            if games >= ev.settings.probe_games and rows:
                try:
                    estimate = fit_all(rows, ev.settings.elo, table=ev.settings.table)[name].elo
                except ValueError as e:  # not identified yet: one more pair at the probe's rung
                    logger.warning("v%d: no estimate yet (%s)", version, e)
            if estimate is None:  # the probe's pairs side by side, in one batched search
                start = prior if prior is not None else min(rungs.values())
                opponents = [nearest_rung(start, rungs)] * max(
                    1, (ev.settings.probe_games - games) // 2
                )
            else:
                jump = gallop_rung(rows, rungs)
                if jump is not None:  # as many pairs side by side as the probe's
                    opponents = [jump] * max(1, ev.settings.probe_games // 2)
                else:
                    opponents = neighbour_rungs(estimate, rungs, ev.settings.neighbour_rungs)
            opponents = opponents[: target // 2 - sum(pairs.values())]
            for rung, pair in zip(
                opponents,
                self._play_rated_pairs(candidate, opponents, specs, pairs, order),
                strict=True,
            ):
                new = pair_results([pair], name, rung)
                ev.files.write_games(f"v{version:05d}_ladder.pdn", MatchResult(name, rung, (pair,)))
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
        self,
        candidate: Player,
        rungs: Sequence[str],
        specs: Mapping[str, str],
        pairs: Mapping[str, int],
        order: Sequence[Opening],
    ) -> list[PairRecord]:
        """One pair against each of ``rungs``, each at that rung's next opening, all their
        games side by side in one batched search (evaluation.matches.games.play_pairs) when the
        candidate can fork
        (a network's search), else one pair after another."""
        ev = self.ctx
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
                    self.rung_player(specs[rung]),
                    opening,
                    index,
                    max_plies=ev.settings.max_plies,
                    size=ev.settings.size,
                    egdb=ev.egdb,
                )
                for rung, (opening, index) in zip(rungs, openings, strict=True)
            ]
        plans = [
            PairPlan(
                a=(fork(), fork()),
                b=(self.new_rung_player(specs[rung]), self.new_rung_player(specs[rung])),
                opening=opening,
                index=index,
            )
            for rung, (opening, index) in zip(rungs, openings, strict=True)
        ]
        return play_pairs(
            plans, max_plies=ev.settings.max_plies, size=ev.settings.size, egdb=ev.egdb
        )
