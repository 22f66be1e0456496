"""The Elo ladder: candidates against fixed opponents, the rungs against each other, the fit.

- :func:`ladder_results` plays a candidate against fixed opponents (``random``,
  ``minimax:1``, ...) and returns the games as ``PairResult`` rows for the Elo fit.
- :func:`rung_results` plays adjacent rungs against each other: the one strength ladder that the
  evaluator (once per run), the benchmarks and the scripts share.
- :func:`fit_all` fits every rating so far (evaluation.elo.fit_ratings), ``random`` at 0.
- :func:`plot_ratings` draws the candidates' ratings by version with the rungs as lines;
  :func:`write_ratings_csv` lists them, the ladder first, then the candidates by version.

The rated ladder (``python -m evaluation.rate_ladder`` makes it once; the evaluator reads it
with ``evaluation.ladder_table``):

- :class:`LadderTable` with :func:`write_table` / :func:`read_table`: every rung's rating with
  its interval, the draw and first-move terms of the fit, when, at which revision and with which
  minimax weights it was rated.
- :func:`ladder_player` adds ``noisy:P:SPEC`` rungs (SPEC's move, or a random one with
  probability P) to the player specs: the steps between ``random`` and ``minimax:1``, which
  otherwise wins every game and leaves that gap unmeasured.
- :func:`rating_openings`: the deck plus seeded random continuations, one distinct start per
  game pair (deterministic players replay the same game from the same opening).
- :func:`rating_matches` and :func:`plan_pairs`: which rungs play each other and how many pairs
  a target interval needs, from the draw model's Fisher information.
- :func:`neighbour_rungs` / :func:`nearest_rung`: where a candidate's next games inform most;
  :func:`gallop_rung`: where they go while it has won (or lost) every game, far from its start.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.arena import MatchResult, PairRecord, play_match, play_pair
from evaluation.elo import PairResult, Ratings, _z_value, fit_ratings, game_information
from evaluation.players import WEIGHT_NAMES, Player, eval_weights, make_player, weights_dict
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
            _rung_line(ax, p.name, p.elo)
    ax.set_xlabel("weights version")
    ax.set_ylabel("Elo (random = 0)")
    ax.set_title("checkerzero: candidate ratings against the ladder")
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- noisy rungs

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
    evaluation.players.make_player (ValueError naming a bad spec either way)."""
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
    return make_player(spec, **options)


# ----------------------------------------------------------------------------- openings


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


# ----------------------------------------------------------------------------- the table

TABLE_SCHEMA_VERSION = 1  # the CSV's layout; read_table refuses a newer one
PACKAGE_TABLE = Path(__file__).resolve().parent / "data" / "ladder_ratings.csv"
TABLE_COLUMNS = ("player", "elo", "lower", "upper", "stderr", "games", "points")


@dataclass(frozen=True)
class TableRow:
    player: str
    elo: float
    lower: float
    upper: float
    stderr: float
    games: int
    points: float


@dataclass(frozen=True)
class LadderTable:
    """A rated ladder: rungs (weakest first) and the fit's global terms and provenance."""

    rows: tuple[TableRow, ...]
    draw_elo: float
    first_move_elo: float | None
    confidence: float
    meta: dict[str, str] = field(default_factory=dict)  # status, date, git_revision, weights...

    @property
    def ratings(self) -> dict[str, float]:
        return {r.player: r.elo for r in self.rows}

    def __contains__(self, name: object) -> bool:
        return any(r.player == name for r in self.rows)


def weights_text(weights: Mapping[str, Any] | None) -> str:
    """The minimax evaluation weights as ``man=100;king=130;...`` (core defaults filled in)."""
    w = weights_dict(eval_weights(dict(weights) if weights is not None else None))
    return ";".join(f"{k}={w[k]}" for k in WEIGHT_NAMES)


def table_from_ratings(
    ratings: Ratings, rungs: Sequence[str], meta: Mapping[str, Any]
) -> LadderTable:
    """The rows of ``rungs`` (in that order) from a fit, with ``meta`` (str values)."""
    rows = tuple(
        TableRow(
            player=p.name,
            elo=p.elo,
            lower=p.lower,
            upper=p.upper,
            stderr=p.stderr,
            games=p.games,
            points=p.points,
        )
        for p in (ratings[name] for name in rungs)
    )
    return LadderTable(
        rows=rows,
        draw_elo=ratings.draw_elo,
        first_move_elo=ratings.first_move_elo,
        confidence=ratings.confidence,
        meta={k: str(v) for k, v in meta.items()},
    )


def write_table(table: LadderTable, path: str | Path) -> None:
    """The table as CSV: ``# key: value`` lines (schema, status, date, revision, fit terms),
    then one row per rung. Written to a temporary file and renamed: whole or absent."""
    head = {
        "schema_version": TABLE_SCHEMA_VERSION,
        **table.meta,
        "confidence": table.confidence,
        "draw_elo": f"{table.draw_elo:.2f}",
        "first_move_elo": "" if table.first_move_elo is None else f"{table.first_move_elo:.2f}",
    }
    lines = ["# checkerzero ladder ratings (python -m evaluation.rate_ladder); random = 0"]
    lines += [f"# {k}: {v}" for k, v in head.items()]
    lines.append(",".join(TABLE_COLUMNS))
    lines += [
        f"{r.player},{r.elo:.2f},{r.lower:.2f},{r.upper:.2f},{r.stderr:.2f},{r.games},{r.points:g}"
        for r in table.rows
    ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_table(path: str | Path) -> LadderTable:
    """A table written by :func:`write_table`; ValueError naming the file and line if not."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"cannot read the ladder table {path}: {e}") from None
    meta: dict[str, str] = {}
    for line in text.splitlines():  # the header lines first: a newer layout is not parsed
        key, sep, value = line[1:].partition(":") if line.startswith("#") else ("", "", "")
        if sep:
            meta[key.strip()] = value.strip()
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise ValueError(f"{path}: no '# schema_version: N' line; not a ladder table") from None
    if version > TABLE_SCHEMA_VERSION:
        raise ValueError(
            f"{path}: ladder table schema {version} is newer than this code reads "
            f"({TABLE_SCHEMA_VERSION})"
        )
    rows: list[TableRow] = []
    header_seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path}, line {number}"
        if not line.strip():
            continue
        if line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if not header_seen:
            if tuple(cells) != TABLE_COLUMNS:
                raise ValueError(f"{where}: expected the columns {','.join(TABLE_COLUMNS)}")
            header_seen = True
            continue
        try:
            name, elo, lower, upper, stderr, games, points = cells
            row = TableRow(
                name,
                float(elo),
                float(lower),
                float(upper),
                float(stderr),
                int(games),
                float(points),
            )
        except ValueError:
            raise ValueError(
                f"{where}: a row needs {len(TABLE_COLUMNS)} values: {line!r}"
            ) from None
        if not name or not all(map(math.isfinite, (row.elo, row.lower, row.upper))):
            raise ValueError(f"{where}: a rung needs a name and finite ratings: {line!r}")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: the ladder table has no rungs")
    try:
        draw_elo = float(meta.pop("draw_elo"))
        first = meta.pop("first_move_elo", "")
        confidence = float(meta.pop("confidence", "0.95"))
    except (KeyError, ValueError):
        raise ValueError(f"{path}: needs '# draw_elo: X' and a numeric confidence") from None
    meta.pop("schema_version")
    return LadderTable(
        rows=tuple(rows),
        draw_elo=draw_elo,
        first_move_elo=float(first) if first else None,
        confidence=confidence,
        meta=meta,
    )


RESULTS_COLUMNS = ("a", "b", "first_mover", "wins", "draws", "losses")


def results_path(table: str | Path) -> Path:
    """Where a table's game counts live: beside it, ``<name>.results.csv``."""
    table = Path(table)
    return table.with_name(table.stem + ".results.csv")


def write_results(rows: Iterable[PairResult], path: str | Path) -> None:
    """The games a table was fitted from, as counts: one row per match and first mover, from
    the match's ``a`` side (everything the fit reads; the games themselves stay in the games
    file). Written whole or not at all, as the table."""
    lines = [",".join(RESULTS_COLUMNS)]
    lines += [f"{r.a},{r.b},{r.first_mover or ''},{r.wins},{r.draws},{r.losses}" for r in rows]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_results(path: str | Path) -> list[PairResult]:
    """Rows written by :func:`write_results`; ValueError naming the file and line if not."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ValueError(f"cannot read the ladder results {path}: {e}") from None
    if not lines or tuple(c.strip() for c in lines[0].split(",")) != RESULTS_COLUMNS:
        raise ValueError(f"{path}, line 1: expected the columns {','.join(RESULTS_COLUMNS)}")
    rows: list[PairResult] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            a, b, mover, wins, draws, losses = (c.strip() for c in line.split(","))
            counts = int(wins), int(draws), int(losses)
        except ValueError:
            raise ValueError(f"{path}, line {number}: a row needs 6 values: {line!r}") from None
        if not a or not b or min(counts) < 0 or mover not in ("", a, b):
            raise ValueError(
                f"{path}, line {number}: needs two players, counts >= 0 and a first mover "
                f"that is one of them (or empty): {line!r}"
            )
        rows.append(PairResult(a, b, *counts, first_mover=mover or None))
    return rows


def table_path(setting: str | None) -> Path | None:
    """``evaluation.ladder_table``: null (None) = no table, ``package`` = the table shipped in
    evaluation/data/, anything else a path to one."""
    if setting is None or str(setting).strip().lower() in ("", "null", "none"):
        return None
    if str(setting).strip() == "package":
        return PACKAGE_TABLE
    return Path(str(setting)).expanduser()


# ----------------------------------------------------------------------------- planning


def rating_matches(rungs: Sequence[str], next_neighbours: bool = False) -> list[tuple[str, str]]:
    """(stronger, weaker) rung pairs that play each other: every rung against the one below it,
    and with ``next_neighbours`` the one below that too (a second path through the chain)."""
    out = [(upper, lower) for lower, upper in itertools.pairwise(rungs)]
    if next_neighbours:
        out += [(rungs[k + 2], rungs[k]) for k in range(len(rungs) - 2)]
    return out


def predicted_half_widths(
    rungs: Sequence[str],
    elo: Mapping[str, float],
    draw_elo: float,
    pairs: Mapping[tuple[str, str], int],
    confidence: float = 0.95,
) -> dict[str, float]:
    """Each rung's expected interval half-width (the first rung anchored) after ``pairs``
    colour-reversed pairs per match, from the draw model's Fisher information at the
    ratings ``elo``: z * sqrt of the diagonal of the inverse information matrix."""
    free = list(rungs[1:])
    col = {name: k for k, name in enumerate(free)}
    info = np.zeros((len(free), len(free)))
    for (a, b), n in pairs.items():
        weight = 2 * n * game_information(elo[a] - elo[b], draw_elo)
        v = np.zeros(len(free))
        if a in col:
            v[col[a]] += 1.0
        if b in col:
            v[col[b]] -= 1.0
        info += weight * np.outer(v, v)
    z = _z_value(confidence)
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return {rungs[0]: 0.0} | {name: math.inf for name in free}
    return {rungs[0]: 0.0} | {
        name: z * math.sqrt(max(cov[k, k], 0.0)) for k, name in enumerate(free)
    }


def plan_pairs(
    rungs: Sequence[str],
    elo: Mapping[str, float],
    draw_elo: float,
    matches: Sequence[tuple[str, str]],
    target: float,
    confidence: float = 0.95,
) -> int:
    """Colour-reversed pairs per match (the same for every match) for every rung's interval to
    be at most ``target`` Elo either side (the half-widths scale as 1/sqrt(pairs))."""
    if target <= 0:
        raise ValueError(f"the target half-width must be > 0 Elo, got {target}")
    widths = predicted_half_widths(rungs, elo, draw_elo, dict.fromkeys(matches, 1), confidence)
    worst = max(widths.values())
    return max(1, math.ceil((worst / target) ** 2))


# ----------------------------------------------------------------------------- candidates


def nearest_rung(estimate: float, ratings: Mapping[str, float]) -> str:
    """The rung whose rating is closest to ``estimate`` (the lower one on a tie)."""
    return min(ratings, key=lambda name: (abs(ratings[name] - estimate), ratings[name]))


def neighbour_rungs(estimate: float, ratings: Mapping[str, float], count: int = 1) -> list[str]:
    """The ``count`` rungs just below ``estimate`` and the ``count`` just above it, weakest
    first; at either end of the ladder the missing ones come from the other side."""
    order = sorted(ratings, key=lambda name: ratings[name])
    below = [n for n in order if ratings[n] <= estimate]
    above = [n for n in order if ratings[n] > estimate]
    low, high = below[-count:] if count else [], above[:count]
    if len(high) < count:
        low = below[-(2 * count - len(high)) :]
    if len(low) < count:
        high = above[: 2 * count - len(low)]
    return sorted(set(low) | set(high), key=lambda name: ratings[name])


def gallop_rung(results: Iterable[PairResult], ratings: Mapping[str, float]) -> str | None:
    """Where a candidate goes next while it has won every game so far (or lost every one):
    beyond the strongest (weakest) rung it met by 1, 2, 4... rungs, doubling with each rung it
    met (an exponential search), so one far from where its games began gets there in a few
    pairs. One rung a pair, as the neighbours of its estimate move, took a warm-started network
    all of its 32 games to climb from ``random`` to ``minimax:3``, rated +1507 where its
    matches put it near +2000. None once a game
    was drawn or went the other way (the neighbours of the estimate take over), before any
    game, or at the end of the ladder. ``results`` are the candidate's, as side ``a``."""
    order = sorted(ratings, key=lambda name: ratings[name])
    rows = [r for r in results if r.b in ratings]
    met = sorted({order.index(r.b) for r in rows})
    wins, draws, losses = (sum(getattr(r, k) for r in rows) for k in ("wins", "draws", "losses"))
    if not met or draws or (wins and losses):
        return None
    step = 2 ** (len(met) - 1)
    if losses == 0:  # above everything it met
        return order[min(met[-1] + step, len(order) - 1)] if met[-1] < len(order) - 1 else None
    return order[max(met[0] - step, 0)] if met[0] > 0 else None


# ----------------------------------------------------------------------------- workers


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


# ----------------------------------------------------------------------------- the curve

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


def read_curve_csv(path: Path) -> list[CurvePoint]:
    """The candidates :func:`write_curve_csv` wrote, in file order; a file of another layout or
    a cell that is not a number raises ValueError naming the file and line."""
    lines = Path(path).read_text().splitlines()
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
    intervals against training step, wall time (hours) and self-play positions, and the rungs
    near them as labelled lines. One figure, so the three clocks of a run line up at a glance
    (steps show learning per update, hours what a run costs, positions what self-play fed)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    axes_spec = (
        ("step", "training step", 1.0),
        ("wall_s", "wall time (hours)", 1 / 3600),
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
                fmt="o-",
                capsize=3,
                markersize=4,
            )
        for name, elo in shown.items():
            _rung_line(ax, name, elo)
        if attr != "wall_s":  # 200k, 1M: full numbers of positions run into each other
            ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Elo (random = 0), 95% intervals")
    fig.suptitle("checkerzero: candidate ratings against the ladder")
    fig.tight_layout()
    return fig
