"""The Elo ladder: candidates against fixed opponents, the rungs against each other, the fit.

- :func:`ladder_results` plays a candidate against fixed opponents (``random``,
  ``minimax:1``, ...) and returns the games as ``PairResult`` rows for the Elo fit.
- :func:`rung_results` plays adjacent rungs against each other: the one strength ladder that the
  evaluator (once per run), the benchmarks and the scripts share.
- :func:`fit_all` fits every rating so far (evaluation.elo.fit_ratings), ``random`` at 0.
- :func:`plot_ratings` draws the candidates' ratings by version with the rungs as lines;
  :func:`write_ratings_csv` lists them, the ladder first, then the candidates by version.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evaluation.arena import MatchResult, PairRecord, play_match
from evaluation.elo import PairResult, Ratings, fit_ratings
from evaluation.players import Player, make_player
from game.egdb import EndgameDatabase
from game.openings import Opening

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
        opponent = make_player(spec, **dict(player_options or {}))
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
        a, b = make_player(upper, **options), make_player(lower, **options)
        return play_match(
            a, b, openings, games=2 * pairs, seed=seed, max_plies=max_plies, size=size, egdb=egdb
        )

    return play


def fit_all(
    results: Sequence[PairResult],
    elo_cfg: Mapping[str, Any],
    fixed: Mapping[str, float] | None = None,
) -> Ratings:
    """fit_ratings over ``results`` with the anchor of ``elo_cfg`` (``random`` at 0 by default)
    plus the ``fixed`` ratings (the rungs, rated once per run)."""
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


def plot_ratings(ratings: Ratings, path: Path) -> None:
    """Each candidate's rating (``vN``) by version with its interval; ladder players as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw_ratings(ratings)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_ratings(ratings: Ratings) -> Any:
    """The matplotlib figure of :func:`plot_ratings`."""
    import matplotlib.pyplot as plt

    versions = sorted(
        (v, p) for p in ratings.players if (v := _candidate_version(p.name)) is not None
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if versions:
        xs = [v for v, _ in versions]
        ys = [p.elo for _, p in versions]
        err = [[p.elo - p.lower for _, p in versions], [p.upper - p.elo for _, p in versions]]
        ax.errorbar(xs, ys, yerr=err, fmt="o-", capsize=3, label="candidates")
    for p in ratings.players:
        if _candidate_version(p.name) is None:
            ax.axhline(p.elo, linestyle="--", linewidth=0.8, color="grey")
            # Inside the plot, clear of the y axis and just above its line.
            ax.annotate(
                p.name,
                (0.01, p.elo),
                xycoords=("axes fraction", "data"),
                xytext=(0, 2),
                textcoords="offset points",
                fontsize=7,
                color="dimgrey",
                va="bottom",
            )
    ax.set_xlabel("weights version")
    ax.set_ylabel("Elo (random = 0)")
    ax.set_title("checkerzero: candidate ratings against the ladder")
    fig.tight_layout()
    return fig
