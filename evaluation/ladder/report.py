"""What the ratings look like on disk: by version, and as the run's Elo curve.

- :func:`write_ratings_csv` lists every rating, the ladder first, then the candidates by
  version; :func:`plot_ratings` draws the candidates' ratings by version with the rungs as lines
  (the evaluator's ``ratings.csv`` and ``ratings.png``).
- :class:`CurvePoint` with :func:`write_curve_csv` / :func:`read_curve_csv` and
  :func:`plot_curve`: each candidate's rating against training step, wall time and self-play
  positions (the evaluator's ``curve.csv`` and ``elo_curve.png``).
- :func:`reach_time`: when a run's curve reaches an Elo level, with an interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.stats.elo import Ratings


def _candidate_version(name: str) -> int | None:
    """N for a candidate's name ``vN``; None for a ladder player."""
    return int(name[1:]) if name[:1] == "v" and name[1:].isdigit() else None


def _player_order(player: Any) -> tuple[int, float]:
    """ratings.csv's order: the ladder players by rating, then the candidates by version."""
    version = _candidate_version(player.name)
    return (0, player.elo) if version is None else (1, version)


def write_ratings_csv(ratings: Ratings, path: Path) -> None:
    """One row per player: the ladder by rating, then the candidates by version number."""
    lines = ["player,elo,lower,upper,games,points,anchored"]
    lines += [
        f"{p.name},{p.elo:.1f},{p.lower:.1f},{p.upper:.1f},{p.games},{p.points:g},{p.anchored}"
        for p in sorted(ratings.players, key=_player_order)
    ]
    path.write_text("\n".join(lines) + "\n")


def _rung_line(ax: Any, name: str, elo: float) -> None:
    """A rung as a dashed line, labelled inside the plot, clear of the y axis, just above it."""
    ax.axhline(elo, linestyle="--", linewidth=0.8, color="grey")
    ax.annotate(
        name,
        (0.01, elo),
        xycoords=("axes fraction", "data"),
        xytext=(0, 2),
        textcoords="offset points",
        fontsize=7,
        color="dimgrey",
        va="bottom",
    )


def plot_ratings(ratings: Ratings, path: Path) -> None:
    """Each candidate's rating (``vN``) by version with its interval; ladder players as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw_ratings(ratings)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_ratings(ratings: Ratings) -> Any:
    """The matplotlib figure of :func:`plot_ratings`: rated candidates as markers only."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    versions = sorted(
        (v, p) for p in ratings.players if (v := _candidate_version(p.name)) is not None
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if versions:
        xs = [v for v, _ in versions]
        ys = [p.elo for _, p in versions]
        err = [[p.elo - p.lower for _, p in versions], [p.upper - p.elo for _, p in versions]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=3, label="rated candidates")
        ax.set_xlim(0, max(xs) * 1.08 + 1)  # whole versions from 0, a single one included
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for p in ratings.players:
        if _candidate_version(p.name) is None:
            _rung_line(ax, p.name, p.elo)
    ax.set_xlabel("weights version")
    ax.set_ylabel("Elo (random = 0)")
    ax.set_title("checkerzero: candidate ratings against the ladder")
    fig.tight_layout()
    return fig


CURVE_COLUMNS = ("version", "step", "wall_s", "positions", "elo", "lower", "upper", "games")


CURVE_MARGIN_ELO = 150.0  # rungs drawn this far beyond the candidates' intervals, no further


@dataclass(frozen=True)
class CurvePoint:
    """One rated candidate on the run's Elo curve (None where the run did not record it)."""

    version: int
    step: int | None  # the training step its weights were published at
    wall_s: float | None  # the run's seconds at its publication (resumes summed; see evaluator)
    positions: int | None  # self-play positions in the store when it was published
    elo: float
    lower: float
    upper: float
    games: int  # its games in the fit (ladder and gate)


def write_curve_csv(points: Sequence[CurvePoint], path: Path) -> None:
    """One row per candidate by version; empty cells where a value is unknown."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    lines = [",".join(CURVE_COLUMNS)]
    lines += [",".join(cell(getattr(p, c)) for c in CURVE_COLUMNS) for p in points]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_curve_csv(path: Path, text: str | None = None) -> list[CurvePoint]:
    """The candidates :func:`write_curve_csv` wrote, in file order; a file of another layout or
    a cell that is not a number raises ValueError naming the file and line. ``text``: the
    file's contents when the caller has read them already (a bounded, regular-file read)."""
    lines = (Path(path).read_text() if text is None else text).splitlines()
    if not lines or tuple(lines[0].split(",")) != CURVE_COLUMNS:
        raise ValueError(f"{path}: not a curve file (its header is not {','.join(CURVE_COLUMNS)})")
    optional = {"step": int, "wall_s": float, "positions": int}
    points = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        if len(cells) != len(CURVE_COLUMNS):
            raise ValueError(f"{path}:{number}: {len(cells)} cells, {len(CURVE_COLUMNS)} expected")
        row = dict(zip(CURVE_COLUMNS, cells, strict=True))
        try:
            values = {c: (kind(row[c]) if row[c] else None) for c, kind in optional.items()}
            points.append(
                CurvePoint(
                    version=int(row["version"]),
                    **values,
                    elo=float(row["elo"]),
                    lower=float(row["lower"]),
                    upper=float(row["upper"]),
                    games=int(row["games"]),
                )
            )
        except ValueError as e:
            raise ValueError(f"{path}:{number}: {e}") from None
    return points


@dataclass(frozen=True)
class Reach:
    """When a run's curve reaches an Elo level, on one of its clocks (:func:`reach_time`):
    ``at`` where its monotone fit first gets there, ``lower`` and ``upper`` a 95% interval.
    ``math.inf`` stands for "not within the run"."""

    at: float
    lower: float
    upper: float


REACH_DRAWS = 2000  # curves drawn for the interval of reach_time


def _monotone_fit(y: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to ``y`` in weighted least squares (pool adjacent
    violators)."""
    means: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for value, w in zip(y.tolist(), weight.tolist(), strict=True):
        means.append(value)
        weights.append(w)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w_sum = weights[-2] + weights[-1]
            means[-2:] = [(means[-2] * weights[-2] + means[-1] * weights[-1]) / w_sum]
            weights[-2:] = [w_sum]
            sizes[-2:] = [sizes[-2] + sizes[-1]]
    return np.repeat(means, sizes)


def _first_crossing(x: np.ndarray, fit: np.ndarray, level: float) -> float:
    """Where the non-decreasing ``fit`` over ``x`` first reaches ``level``, interpolated
    linearly between the two candidates around it; ``x[0]`` when the first is already there."""
    reached = np.flatnonzero(fit >= level)
    if len(reached) == 0:
        return math.inf
    i = int(reached[0])
    if i == 0:
        return float(x[0])
    x0, x1, f0, f1 = x[i - 1], x[i], fit[i - 1], fit[i]
    return float(x0 + (level - f0) / (f1 - f0) * (x1 - x0))


def reach_time(
    points: Sequence[CurvePoint],
    level: float,
    *,
    clock: str = "wall_s",
    draws: int = REACH_DRAWS,
    seed: int = 0,
) -> Reach | None:
    """When the curve of ``points`` reaches the Elo ``level`` (a rung's table rating, say), on
    ``clock`` (a CurvePoint field: wall_s, step or positions); None without two candidates
    with finite intervals on that clock.

    One candidate's 32 games rate it within about ±100 Elo, so "the first candidate above the
    rung" moves by several candidates between identical runs. The curve is fitted instead as a
    non-decreasing function of the clock (isotonic least squares, each candidate weighted by
    its interval: learning is taken not to go backwards, nothing more), and the time is where
    that fit first reaches ``level``. The interval redraws every candidate's rating around the
    fit from its own standard error ``draws`` times, refits and takes the middle 95% of the
    crossing times (a parametric bootstrap); an ``upper`` of inf says that more than 2.5% of
    the draws never got there within the run."""
    usable = sorted(
        (
            (float(getattr(p, clock)), p)
            for p in points
            if getattr(p, clock) is not None
            and all(math.isfinite(v) for v in (p.elo, p.lower, p.upper))
            and p.upper > p.lower
        ),
        key=lambda xp: xp[0],
    )
    if len(usable) < 2:
        return None
    x = np.array([t for t, _ in usable])
    elo = np.array([p.elo for _, p in usable])
    stderr = np.array([(p.upper - p.lower) / (2 * 1.96) for _, p in usable])
    weight = 1 / stderr**2
    fit = _monotone_fit(elo, weight)
    rng = np.random.default_rng(seed)
    crossings = np.array(
        [
            _first_crossing(x, _monotone_fit(fit + rng.normal(0.0, stderr), weight), level)
            for _ in range(draws)
        ]
    )
    # the draws' own values (no interpolation between a finite time and inf)
    lower, upper = np.quantile(crossings, [0.025, 0.975], method="inverted_cdf")
    return Reach(_first_crossing(x, fit, level), float(lower), float(upper))


def plot_curve(points: Sequence[CurvePoint], rungs: Mapping[str, float], path: Path) -> None:
    """:func:`draw_curve` saved as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw_curve(points, rungs)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_curve(points: Sequence[CurvePoint], rungs: Mapping[str, float]) -> Any:
    """Three panels side by side sharing the Elo axis: the candidates' ratings with their
    intervals against training step, the run's minutes and self-play positions, and the rungs
    near them as labelled lines. One figure, so the three clocks of a run line up at a glance
    (steps show learning per update, minutes what a run costs, positions what self-play fed).
    Only rated candidates are drawn, as markers (no line through versions never rated), and
    every axis starts at 0 (a run's clocks are never negative)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    axes_spec = (
        ("step", "training step", 1.0),
        ("wall_s", "minutes since the run started", 1 / 60),
        ("positions", "self-play positions", 1.0),
    )
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.5), sharey=True)
    lows = [p.lower for p in points if math.isfinite(p.lower)]
    highs = [p.upper for p in points if math.isfinite(p.upper)]
    span = (min(lows, default=0.0) - CURVE_MARGIN_ELO, max(highs, default=0.0) + CURVE_MARGIN_ELO)
    shown = {n: e for n, e in rungs.items() if span[0] <= e <= span[1]}
    # and the nearest rung beyond each end, so the next step up is always in view
    above = [n for n in rungs if rungs[n] > span[1]]
    below = [n for n in rungs if rungs[n] < span[0]]
    shown |= {
        n: rungs[n]
        for n in (min(above, key=rungs.get, default=None), max(below, key=rungs.get, default=None))
        if n is not None
    }
    for ax, (attr, label, scale) in zip(axes, axes_spec, strict=True):
        xs = sorted(
            ((getattr(p, attr), p) for p in points if getattr(p, attr) is not None),
            key=lambda xp: xp[0],
        )
        if xs:
            ax.errorbar(
                [x * scale for x, _ in xs],
                [p.elo for _, p in xs],
                yerr=[[p.elo - p.lower for _, p in xs], [p.upper - p.elo for _, p in xs]],
                fmt="o",
                capsize=3,
                markersize=4,
            )
        for name, elo in shown.items():
            _rung_line(ax, name, elo)
        right = max((x * scale for x, _ in xs), default=0.0)
        ax.set_xlim(0, max(right * 1.08, 1.0))  # from 0; a single point at 0 still has room
        if attr != "wall_s":  # whole steps and positions; 200k, 1M: full numbers run together
            ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
            ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Elo (random = 0), 95% intervals")
    fig.suptitle("checkerzero: candidate ratings against the ladder")
    fig.tight_layout()
    return fig
