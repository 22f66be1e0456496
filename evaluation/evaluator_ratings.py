"""The evaluator's ratings: the fit of every result so far, its metrics and files, the curve.

:func:`publish_metrics` refits every rating (:func:`ratings`), writes the ``<ns>:eval:latest``
hash the learner logs, ``ratings.csv``/``ratings.png`` and the Elo curve (:func:`curve`:
``curve.csv``/``elo_curve.png``, every candidate against training step, wall time and self-play
positions, from :func:`version_info`). Part of the evaluator's loop (evaluation.evaluator).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any

from checkerzero.run_files import CURVE_CSV, CURVE_PNG, RATINGS_CSV, RATINGS_PNG
from checkerzero.store.keys import ladder_key, latest_key, versions_key
from evaluation.elo import Ratings
from evaluation.evaluator_ladder import rung_player
from evaluation.ladder_play import fit_all
from evaluation.ratings_report import (
    CurvePoint,
    plot_curve,
    plot_ratings,
    write_curve_csv,
    write_ratings_csv,
)
from evaluation.sprt import ACCEPT, REJECT

if TYPE_CHECKING:
    from evaluation.evaluator import EvaluatorWorker

logger = logging.getLogger(__name__)


def fixed_ratings(ev: EvaluatorWorker) -> dict[str, float]:
    if not ev.s.fix_ladder:
        return {}
    raw = ev.client.hgetall(ladder_key(ev.ns))
    return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}


def current_ratings(ev: EvaluatorWorker) -> Ratings | None:
    """All results so far, fitted; None (logged) when they do not identify the ratings yet."""
    rows = ev.state.results()
    if not rows:
        return None
    try:
        if ev.s.table is not None:
            return fit_all(rows, ev.s.elo, table=ev.s.table)
        return fit_all(rows, ev.s.elo, fixed_ratings(ev))
    except ValueError as e:
        logger.warning("no rating fit yet: %s", e)
        return None


def publish_metrics(ev: EvaluatorWorker, version: int) -> dict[str, float]:
    """Refits, writes ratings.csv/png and the ``<ns>:eval:latest`` hash; returns the hash."""
    ratings = current_ratings(ev)
    if ratings is None:
        return {}
    metrics: dict[str, float] = {"version": float(version)}
    names = set(ratings.names)
    if f"v{version}" in names:
        p = ratings[f"v{version}"]
        metrics |= {"elo": p.elo, "elo_lower": p.lower, "elo_upper": p.upper}
        metrics["games"] = float(p.games)
    info = version_info(ev, version)
    for key in ("step", "positions"):
        if info.get(key) is not None:
            metrics[key] = float(info[key])
    wall = wall_seconds(ev.state.versions())
    if wall.get(version) is not None:
        metrics["wall_s"] = wall[version]
    best = ev.channel.version("best")
    if best >= 0:
        metrics["best_version"] = float(best)
        if f"v{best}" in names:
            p = ratings[f"v{best}"]
            metrics |= {"best_elo": p.elo, "best_elo_lower": p.lower, "best_elo_upper": p.upper}
    decisions = ev.state.decisions()
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
    for spec in ev.s.ladder:
        if spec in names:
            metrics[f"ladder/{spec}"] = ratings[spec].elo
    metrics["draw_elo"] = ratings.draw_elo
    pipe = ev.client.pipeline(transaction=True)
    pipe.delete(latest_key(ev.ns))
    pipe.hset(latest_key(ev.ns), mapping={k: repr(float(v)) for k, v in metrics.items()})
    pipe.execute()
    write_ratings(ev, ratings)
    write_curve(ev, ratings)
    if "elo" in metrics:
        # a best exists without gating too (the first version), but only the gate uses it
        gated = f" (best v{best})" if ev.s.gating else ""
        logger.info(
            "eval v%d: Elo %.0f [%.0f, %.0f]%s",
            version,
            metrics["elo"],
            metrics["elo_lower"],
            metrics["elo_upper"],
            gated,
        )
    return metrics


def write_ratings(ev: EvaluatorWorker, ratings: Ratings) -> None:
    if not ev.s.write_pdn:
        return
    ev.eval_dir.mkdir(parents=True, exist_ok=True)
    write_ratings_csv(ratings, ev.eval_dir / RATINGS_CSV)
    try:
        plot_ratings(ratings, ev.eval_dir / RATINGS_PNG)
    except Exception as e:  # a plot must never stop the evaluation
        logger.warning("could not draw ratings.png: %s", e)


def version_info(ev: EvaluatorWorker, version: int) -> dict[str, Any]:
    """``version``'s training step, self-play positions and publication time (unix s),
    kept in Redis once read: from the weights channel's metadata, else (weights published
    by an older learner) the step in the weights' header and the time of evaluation."""
    raw = ev.client.hget(versions_key(ev.ns), str(version))
    if raw is not None:
        with contextlib.suppress(ValueError, TypeError):
            return dict(json.loads(raw))
    meta = ev.channel.meta(version)
    info = {
        "step": meta.get("step", ev._steps.get(version)),
        "positions": meta.get("positions"),
        "t": meta.get("t", round(time.time(), 3)),
    }
    if (run_s := _seconds(meta.get("run_s"))) is not None:  # the run's own clock
        info["run_s"] = run_s
    ev.client.hset(versions_key(ev.ns), str(version), json.dumps(info))
    return info


def wall_seconds(infos: dict[int, dict[str, Any]]) -> dict[int, float | None]:
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


def curve(ev: EvaluatorWorker, ratings: Ratings) -> list[CurvePoint]:
    """Every rated candidate with its step, wall seconds since the first one, positions."""
    infos = ev.state.versions()
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


def write_curve(ev: EvaluatorWorker, ratings: Ratings) -> None:
    if not ev.s.write_pdn:
        return
    points = curve(ev, ratings)
    if not points:
        return
    ev.eval_dir.mkdir(parents=True, exist_ok=True)
    write_curve_csv(points, ev.eval_dir / CURVE_CSV)
    rungs = {p.name: p.elo for p in ratings.players if p.name in ladder_names(ev)}
    try:
        plot_curve(points, rungs, ev.eval_dir / CURVE_PNG)
    except Exception as e:  # a plot must never stop the evaluation
        logger.warning("could not draw %s: %s", CURVE_PNG, e)


def ladder_names(ev: EvaluatorWorker) -> set[str]:
    return {rung_player(ev, spec).name for spec in ev.s.ladder}


def _seconds(value: Any) -> float | None:
    """A time in seconds from the weights' metadata, or None where it is absent or no finite
    number >= 0 (a malformed record must not break the curve)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
