"""The evaluator's ratings: the fit of every result so far, its metrics and files, the curve.

:meth:`RatingPublisher.publish` refits every rating (:meth:`RatingPublisher.current`), writes
the newest metrics (the records' hash, which the learner logs), ``ratings.csv``/``ratings.png``
and the Elo curve (:meth:`RatingPublisher.curve`: ``curve.csv``/``elo_curve.png``, every
candidate against training step, wall time and self-play positions, from the candidates' version
info). A part of the evaluator (evaluation.evaluator.worker).
"""

from __future__ import annotations

import logging
from typing import Any

from checkerzero import metric_names as M
from checkerzero.run_files import CURVE_CSV, CURVE_PNG, RATINGS_CSV, RATINGS_PNG
from evaluation.evaluator.candidates import Candidates
from evaluation.evaluator.context import EvalContext
from evaluation.evaluator.ladder import Ladder
from evaluation.evaluator.records import seconds
from evaluation.ladder.report import (
    CurvePoint,
    plot_curve,
    plot_ratings,
    write_curve_csv,
    write_ratings_csv,
)
from evaluation.ladder.rungs import fit_all
from evaluation.stats.elo import Ratings
from evaluation.stats.sprt import ACCEPT, REJECT

logger = logging.getLogger(__name__)


class RatingPublisher:
    """Fits every result and publishes the metrics, the ratings' files and the curve."""

    def __init__(self, ctx: EvalContext, candidates: Candidates, ladder: Ladder) -> None:
        self.ctx = ctx
        self.candidates = candidates
        self.ladder = ladder

    def current(self) -> Ratings | None:
        """All results so far, fitted; None (logged) when they do not identify the ratings yet."""
        ev = self.ctx
        rows = ev.state.results()
        if not rows:
            return None
        try:
            if ev.settings.table is not None:
                return fit_all(rows, ev.settings.elo, table=ev.settings.table)
            fixed = ev.state.fixed_ratings() if ev.settings.fix_ladder else {}
            return fit_all(rows, ev.settings.elo, fixed)
        except ValueError as e:
            logger.warning("no rating fit yet: %s", e)
            return None

    def publish(self, version: int) -> dict[str, float]:
        """Refits, writes ratings.csv/png, the curve and the newest metrics (names of
        checkerzero.metric_names); returns the metrics."""
        ev = self.ctx
        ratings = self.current()
        if ratings is None:
            return {}
        metrics: dict[str, float] = {M.EVAL_VERSION: float(version)}
        names = set(ratings.names)
        if f"v{version}" in names:
            p = ratings[f"v{version}"]
            metrics |= {M.EVAL_ELO: p.elo, M.EVAL_ELO_LOWER: p.lower, M.EVAL_ELO_UPPER: p.upper}
            metrics[M.EVAL_GAMES] = float(p.games)
        info = self.candidates.version_info(version)
        for key, name in (("step", M.EVAL_STEP), ("positions", M.EVAL_POSITIONS)):
            if info.get(key) is not None:
                metrics[name] = float(info[key])
        wall = wall_seconds(ev.state.versions())
        if wall.get(version) is not None:
            metrics[M.EVAL_WALL_S] = wall[version]
        best = ev.channel.version("best")
        if best >= 0:
            metrics[M.EVAL_BEST_VERSION] = float(best)
            if f"v{best}" in names:
                p = ratings[f"v{best}"]
                metrics |= {
                    M.EVAL_BEST_ELO: p.elo,
                    M.EVAL_BEST_ELO_LOWER: p.lower,
                    M.EVAL_BEST_ELO_UPPER: p.upper,
                }
        decisions = ev.state.decisions()
        gates = [d for d in decisions if d.get("decision") in (ACCEPT, REJECT)]
        metrics[M.EVAL_PROMOTIONS] = float(sum(bool(d.get("promoted")) for d in gates))
        metrics[M.EVAL_GATES] = float(len(gates))
        if gates and gates[-1].get("version") == version:
            last = gates[-1]
            metrics |= {
                M.EVAL_GATE_LLR: float(last["llr"]),
                M.EVAL_GATE_GAMES: float(last["games"]),
                M.EVAL_GATE_ACCEPT: float(last["decision"] == ACCEPT),
            }
        for spec in ev.settings.ladder:
            if spec in names:
                metrics[M.eval_ladder(spec)] = ratings[spec].elo
        metrics[M.EVAL_DRAW_ELO] = ratings.draw_elo
        ev.state.write_metrics(metrics)
        self.write_ratings(ratings)
        self.write_curve(ratings)
        if M.EVAL_ELO in metrics:
            # a best exists without gating too (the first version), but only the gate uses it
            gated = f" (best v{best})" if ev.settings.gating else ""
            logger.info(
                "eval v%d: Elo %.0f [%.0f, %.0f]%s",
                version,
                metrics[M.EVAL_ELO],
                metrics[M.EVAL_ELO_LOWER],
                metrics[M.EVAL_ELO_UPPER],
                gated,
            )
        return metrics

    def write_ratings(self, ratings: Ratings) -> None:
        files = self.ctx.files
        if not files.ready():
            return
        write_ratings_csv(ratings, files.folder / RATINGS_CSV)
        try:
            plot_ratings(ratings, files.folder / RATINGS_PNG)
        except Exception as e:  # a plot must never stop the evaluation
            logger.warning("could not draw ratings.png: %s", e)

    def curve(self, ratings: Ratings) -> list[CurvePoint]:
        """Every rated candidate with its step, wall seconds since the first one, positions."""
        infos = self.ctx.state.versions()
        if not infos:
            return []
        wall = wall_seconds(infos)
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

    def write_curve(self, ratings: Ratings) -> None:
        files = self.ctx.files
        if not files.enabled:
            return
        points = self.curve(ratings)
        if not points or not files.ready():
            return
        write_curve_csv(points, files.folder / CURVE_CSV)
        rungs = {p.name: p.elo for p in ratings.players if p.name in self.ladder.names()}
        try:
            plot_curve(points, rungs, files.folder / CURVE_PNG)
        except Exception as e:  # a plot must never stop the evaluation
            logger.warning("could not draw %s: %s", CURVE_PNG, e)


def wall_seconds(infos: dict[int, dict[str, Any]]) -> dict[int, float | None]:
    """Each version's place on the wall-time axis: the run's own seconds when it was
    published (``run_s``: resumes summed, the time between them not counted) when every
    version carries them; else, for a run begun before the learner sent them, the clock
    since the first version's publication (downtime between resumes included)."""
    run = {v: seconds(i.get("run_s")) for v, i in infos.items()}
    if infos and all(s is not None for s in run.values()):
        return run
    times = {v: seconds(i.get("t")) for v, i in infos.items()}
    t0 = min((t for t in times.values() if t is not None), default=None)
    return {v: None if t0 is None or t is None else t - t0 for v, t in times.items()}
