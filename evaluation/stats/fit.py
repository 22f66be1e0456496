"""Maximum-likelihood Elo ratings of many players: :func:`fit_ratings`.

All Elo numbers are *logistic* Elo (evaluation.stats.elo). The model is the draw model of BayesElo
(Rémi Coulom, "Bayesian Elo Rating", https://www.remi-coulom.fr/Bayesian-Elo/, after Rao and
Kupper 1967). For a game in which player ``a`` faces ``b`` with
``d = r_a - r_b (+ eta when a moves first, - eta when b does)``::

    P(a wins)  = F(d - draw_elo)
    P(a loses) = F(-d - draw_elo)
    P(draw)    = 1 - P(a wins) - P(a loses)

``draw_elo >= 0`` is fitted with the ratings (it sets the draw rate between equals:
``P(draw | d = 0) = 2 F(draw_elo) - 1``). The optional first-move term ``eta`` is the Elo
worth of moving first, which in English checkers is Black's. As in Ordo (Miguel Ballicora,
https://github.com/michiguel/Ordo) the scale is pinned by *anchors*, players with fixed
ratings (e.g. ``{"random": 0.0}``); every other player must be joined to an anchor by a chain
of games, or its rating would be arbitrary, and that is an error naming the players.

Because the draw model separates "who is stronger" from "how drawish", its rating
differences are larger than score-based Elo when draws are common: two players ``d`` apart
expect to score ``F(d - draw_elo) + P(draw) / 2``, see :meth:`Ratings.expected_score`.

The log-likelihood is concave in (ratings, draw_elo, eta) (log F is concave, and the draw
probability is the mass of a logistic density on an interval), so a damped Newton method
finds the unique optimum from any start; it uses aggregated counts per (pair, colour), so
the cost does not grow with the number of games. 95% intervals come from the inverse of the
observed Fisher information (the negative Hessian of the log-likelihood at the optimum),
jointly over the free ratings, draw_elo and eta; anchors have zero width.

Prior: with pure maximum likelihood, a player who won (or lost) every game has an infinite
rating. ``prior_draws`` adds that many virtual games between every pair of players who met,
scored half a win and half a loss under the plain logistic model (no draw parameter), in the
spirit of BayesElo's prior of virtual draws. It pulls rating differences towards zero
without biasing draw_elo and keeps undefeated players finite; a player with thousands of
games moves by well under one standard error (tested). With ``prior_draws = 0`` the fit is
the exact maximum-likelihood estimate, and data that make it infinite raise ValueError
naming the players. With a prior, the result is the posterior mode and the intervals are
Laplace (posterior) intervals.

The log-likelihood and its Newton maximisation are evaluation.stats.likelihood. The fit is
deterministic: players are indexed in sorted order and nothing is random.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping

import numpy as np

from evaluation.stats.elo import (
    DEFAULT_CONFIDENCE,
    ELO_PER_NATURAL_UNIT,
    GameResult,
    PairResult,
    PlayerRating,
    Ratings,
    _check_count,
    _z_value,
    logistic_score,
    score_to_elo,
)
from evaluation.stats.likelihood import DrawModel, Groups, newton

logger = logging.getLogger(__name__)


DEFAULT_PRIOR_DRAWS = 2.0  # virtual games per pair; BayesElo's default prior is 2 virtual draws


VALID_SCORES = (0.0, 0.5, 1.0)  # points for a loss, a draw, a win


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: player names must be non-empty strings, got {name!r}")
    return name


def _aggregate(
    results: Iterable[GameResult | PairResult],
) -> dict[tuple[str, str, int], list[int]]:
    """Counts keyed by (a, b, sign) with a < b; sign +1 when a moved first, -1 when b did."""
    table: dict[tuple[str, str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for k, item in enumerate(results):
        where = f"results[{k}]"
        if isinstance(item, GameResult):
            white = _check_name(item.white, where)
            black = _check_name(item.black, where)
            if item.score not in VALID_SCORES:
                raise ValueError(f"{where}: score must be 0, 0.5 or 1, got {item.score!r}")
            a, b, sign = white, black, -1  # Black moves first in English checkers
            w, d, l_ = int(item.score == 1.0), int(item.score == 0.5), int(item.score == 0.0)
        elif isinstance(item, PairResult):
            a = _check_name(item.a, where)
            b = _check_name(item.b, where)
            w = _check_count(f"{where}.wins", item.wins)
            d = _check_count(f"{where}.draws", item.draws)
            l_ = _check_count(f"{where}.losses", item.losses)
            if item.first_mover is None:
                sign = 0
            elif item.first_mover == a:
                sign = 1
            elif item.first_mover == b:
                sign = -1
            else:
                raise ValueError(
                    f"{where}: first_mover must be {a!r}, {b!r} or None, got {item.first_mover!r}"
                )
        else:
            raise ValueError(f"{where}: expected GameResult or PairResult, got {type(item)!r}")
        if a == b:
            raise ValueError(f"{where}: {a!r} cannot play itself")
        if w + d + l_ == 0:
            continue
        if b < a:
            a, b, sign, w, l_ = b, a, -sign, l_, w
        row = table[(a, b, sign)]
        row[0] += w
        row[1] += d
        row[2] += l_
    return table


def _components_unreached(names: list[str], edges: dict[str, set[str]], start: set[str]) -> set:
    seen = set(start)
    queue = deque(sorted(start))
    while queue:
        node = queue.popleft()
        for other in sorted(edges[node]):
            if other not in seen:
                seen.add(other)
                queue.append(other)
    return {n for n in names if n not in seen}


def _check_connected(names: list[str], table: Mapping, anchors: set[str]) -> None:
    undirected: dict[str, set[str]] = defaultdict(set)
    for a, b, _ in table:
        undirected[a].add(b)
        undirected[b].add(a)
    lost = _components_unreached(names, undirected, anchors & set(names))
    if lost:
        raise ValueError(
            "players not connected to any anchor by games (their ratings would be arbitrary): "
            + ", ".join(sorted(lost))
        )


def _check_bounded(names: list[str], table: Mapping, anchors: set[str]) -> None:
    """Exact maximum likelihood is finite iff the 'scored against' graph is strongly connected.

    Edge u -> v when u won or drew a game against v (anchors act as one node). A player not
    reachable from the anchors along such edges belongs to a group that was never scored against:
    its rating goes to +inf; one that cannot reach them never scored: -inf.
    """
    forward: dict[str, set[str]] = defaultdict(set)
    backward: dict[str, set[str]] = defaultdict(set)
    for (a, b, _), (w, d, l_) in table.items():
        if w + d > 0:
            forward[a].add(b)
            backward[b].add(a)
        if l_ + d > 0:
            forward[b].add(a)
            backward[a].add(b)
    start = anchors & set(names)
    too_high = _components_unreached(names, forward, start)
    too_low = _components_unreached(names, backward, start)
    problems = []
    if too_high:
        problems.append("never lost or drew against the rest: " + ", ".join(sorted(too_high)))
    if too_low:
        problems.append("never won or drew against the rest: " + ", ".join(sorted(too_low)))
    if problems:
        raise ValueError(
            "maximum-likelihood ratings are infinite ("
            + "; ".join(problems)
            + "); pass prior_draws > 0 or play more games"
        )


def _grouped(
    table: Mapping[tuple[str, str, int], list[int]],
    keys: list[tuple[str, str, int]],
    index: Mapping[str, int],
) -> tuple[np.ndarray, Groups]:
    """The counts of ``table`` in the order of ``keys`` (G, 3) and as :class:`Groups`."""
    counts = np.array([table[k] for k in keys], dtype=np.float64)
    groups = Groups(
        i=np.array([index[a] for a, _, _ in keys], dtype=np.int64),
        j=np.array([index[b] for _, b, _ in keys], dtype=np.int64),
        sign=np.array([s for _, _, s in keys], dtype=np.float64),
        wins=counts[:, 0],
        draws=counts[:, 1],
        losses=counts[:, 2],
    )
    return counts, groups


def _check_arguments(
    anchors: Mapping[str, float],
    prior_draws: float,
    confidence: float,
    draw_elo: float | None,
    first_move_elo: float | None,
) -> None:
    """ValueError for a :func:`fit_ratings` argument outside its range."""
    if not anchors:
        raise ValueError("fit_ratings needs at least one anchor, e.g. {'random': 0.0}")
    for name, value in anchors.items():
        _check_name(name, "anchors")
        if not math.isfinite(float(value)):
            raise ValueError(f"anchor {name!r} must have a finite rating, got {value!r}")
    if not math.isfinite(prior_draws) or prior_draws < 0.0:
        raise ValueError(f"prior_draws must be a finite number >= 0, got {prior_draws!r}")
    if draw_elo is not None and not (math.isfinite(draw_elo) and draw_elo >= 0.0):
        raise ValueError(f"a fixed draw_elo must be a finite number >= 0, got {draw_elo!r}")
    if first_move_elo is not None and not math.isfinite(first_move_elo):
        raise ValueError(f"a fixed first_move_elo must be finite, got {first_move_elo!r}")
    _z_value(confidence)


def _player_ratings(
    names: list[str],
    elo: np.ndarray,
    covariance: np.ndarray,
    z: float,
    anchor_set: set[str],
    groups: Groups,
    counts: np.ndarray,
) -> list[PlayerRating]:
    """Each player's rating, interval, games and points, in the order of ``names``."""
    n_players = len(names)
    games = np.zeros(n_players)
    points = np.zeros(n_players)
    np.add.at(games, groups.i, counts.sum(axis=1))
    np.add.at(games, groups.j, counts.sum(axis=1))
    np.add.at(points, groups.i, groups.wins + 0.5 * groups.draws)
    np.add.at(points, groups.j, groups.losses + 0.5 * groups.draws)
    players = []
    for k, name in enumerate(names):
        stderr = math.sqrt(max(covariance[k, k], 0.0))
        players.append(
            PlayerRating(
                name=name,
                elo=float(elo[k]),
                stderr=stderr,
                lower=float(elo[k] - z * stderr),
                upper=float(elo[k] + z * stderr),
                games=int(games[k]),
                points=float(points[k]),
                anchored=name in anchor_set,
            )
        )
    return players


def _check_identified(
    counts: np.ndarray, groups: Groups, draw_elo: float | None, first_move_advantage: bool
) -> None:
    """ValueError when the games cannot identify what is to be fitted."""
    total_w, total_d, total_l = counts.sum(axis=0)
    if total_w + total_l == 0 and draw_elo is None:
        raise ValueError("every game is a draw: draw_elo and the ratings are not identified")
    if draw_elo == 0.0 and total_d > 0:
        raise ValueError("a fixed draw_elo of 0 gives drawn games zero probability")
    if first_move_advantage and not np.any(groups.sign != 0):
        raise ValueError("first_move_advantage needs games with known colours")


def _start_point(
    model: DrawModel, anchor_elos: list[float], fit_theta: bool, counts: np.ndarray
) -> np.ndarray:
    """Newton's start: every free rating at the anchors' mean, and a fitted draw_elo where
    equal players would draw at the observed rate."""
    total_d = counts.sum(axis=0)[1]
    x0 = np.zeros(model.size, dtype=np.float64)
    x0[: len(model.free)] = float(np.mean(anchor_elos))
    if fit_theta:
        # Start draw_elo where equal players would draw at the observed rate: 2F(t) - 1 = rate.
        rate = min(total_d / counts.sum(), 0.99)
        x0[model.theta_col] = score_to_elo((1.0 + rate) / 2.0)
    return x0


def _ratings_at(
    model: DrawModel,
    x: np.ndarray,
    information: np.ndarray,
    iterations: int,
    *,
    names: list[str],
    anchor_set: set[str],
    groups: Groups,
    counts: np.ndarray,
    confidence: float,
    prior_draws: float,
    fixed_theta: float,
    first_move_elo: float | None,
) -> Ratings:
    """The :class:`Ratings` at the optimum ``x`` of :func:`fit_ratings`: each player's rating,
    games and points, the intervals from the inverse of the ``information`` matrix."""
    try:
        covariance_x = np.linalg.inv(information) if information.size else information
    except np.linalg.LinAlgError as exc:
        raise ValueError("rating fit: the information matrix is singular") from exc
    z = _z_value(confidence)
    n_players = len(names)
    covariance = np.zeros((n_players, n_players), dtype=np.float64)
    free = np.array(model.free, dtype=np.int64)
    n_free = len(free)
    covariance[np.ix_(free, free)] = covariance_x[:n_free, :n_free]
    covariance.setflags(write=False)

    elo = model.fixed.copy()
    elo[free] = x[:n_free]
    players = _player_ratings(names, elo, covariance, z, anchor_set, groups, counts)

    def param_stderr(col: int | None) -> float:
        return math.sqrt(max(covariance_x[col, col], 0.0)) if col is not None else 0.0

    ratings = Ratings(
        players=tuple(players),
        draw_elo=model.theta(x, fixed_theta),
        draw_elo_stderr=param_stderr(model.theta_col),
        first_move_elo=float(x[model.eta_col])
        if model.eta_col is not None
        else (float(first_move_elo) if first_move_elo is not None else None),
        first_move_stderr=param_stderr(model.eta_col)
        if model.eta_col is not None
        else (0.0 if first_move_elo is not None else None),
        confidence=confidence,
        prior_draws=float(prior_draws),
        log_likelihood=model.data_loglik(x, fixed_theta),
        iterations=iterations,
        covariance=covariance,
    )
    logger.info(
        "fitted %d ratings (%d anchored) from %d games in %d Newton steps; draw_elo %.1f",
        n_players,
        n_players - n_free,
        int(counts.sum()),
        iterations,
        ratings.draw_elo,
    )
    return ratings


def fit_ratings(
    results: Iterable[GameResult | PairResult],
    anchors: Mapping[str, float],
    *,
    prior_draws: float = DEFAULT_PRIOR_DRAWS,
    first_move_advantage: bool = False,
    confidence: float = DEFAULT_CONFIDENCE,
    draw_elo: float | None = None,
    first_move_elo: float | None = None,
) -> Ratings:
    """Ratings of every player in ``results`` under the BayesElo draw model (module docstring).

    ``anchors`` maps player names to fixed ratings (at least one; anchors that played no game
    are ignored). ``prior_draws`` virtual games per pair that met (0 = exact maximum
    likelihood). ``first_move_advantage`` also fits the Elo worth of moving first, from
    GameResults and from PairResults with a ``first_mover``.

    ``draw_elo`` and ``first_move_elo``, when given, are held at those values instead of fitted
    (a rated ladder's: candidates are then rated on the scale the ladder was rated on, and a
    handful of games need not identify the draw rate); ``first_move_elo`` overrides
    ``first_move_advantage``.
    """
    _check_arguments(anchors, prior_draws, confidence, draw_elo, first_move_elo)

    table = _aggregate(results)
    if not table:
        raise ValueError("fit_ratings got no games")
    names = sorted({a for a, _, _ in table} | {b for _, b, _ in table})
    anchor_set = set(anchors)
    _check_connected(names, table, anchor_set)
    if prior_draws == 0.0:
        _check_bounded(names, table, anchor_set)

    index = {n: k for k, n in enumerate(names)}
    keys = sorted(table)
    counts, groups = _grouped(table, keys, index)
    if first_move_elo is not None:
        first_move_advantage = False
    _check_identified(counts, groups, draw_elo, first_move_advantage)
    total_d = counts.sum(axis=0)[1]
    # No draws at all: the optimum is draw_elo = 0 (P(draw) = 0). A given draw_elo is held.
    fit_theta = total_d > 0 and draw_elo is None
    fixed_theta = float(draw_elo) if draw_elo is not None else 0.0

    pairs = sorted({(index[a], index[b]) for a, b, _ in keys})
    prior_pairs = (
        np.array([p[0] for p in pairs], dtype=np.int64),
        np.array([p[1] for p in pairs], dtype=np.int64),
    )
    model = DrawModel(
        names,
        anchors,
        groups,
        prior_pairs,
        prior_draws,
        fit_theta,
        first_move_advantage,
        fixed_eta=float(first_move_elo or 0.0),
    )

    present_anchors = [float(anchors[n]) for n in names if n in anchor_set]
    x0 = _start_point(model, present_anchors, fit_theta, counts)
    x, information, iterations = newton(model, x0, fixed_theta=fixed_theta)

    return _ratings_at(
        model,
        x,
        information,
        iterations,
        names=names,
        anchor_set=anchor_set,
        groups=groups,
        counts=counts,
        confidence=confidence,
        prior_draws=prior_draws,
        fixed_theta=fixed_theta,
        first_move_elo=first_move_elo,
    )


def game_information(difference: float, draw_elo: float) -> float:
    """Expected Fisher information about a rating difference from one game (Elo^-2) under the
    draw model, two players ``difference`` apart: ``1 / sqrt(n * information)`` is the standard
    error of that difference after ``n`` games. Draws carry information (a drawish pairing is
    pinned down by fewer games than a decisive one at the same score)."""
    c = 1.0 / ELO_PER_NATURAL_UNIT
    d, theta = float(difference), float(draw_elo)
    p_win, p_loss = logistic_score(d - theta), logistic_score(-d - theta)
    p_draw = 1.0 - p_win - p_loss
    k_win, k_loss = p_win * (1.0 - p_win), p_loss * (1.0 - p_loss)  # c * dP/dd of each
    # Sum over outcomes of (dP/dd)^2 / P; dP(draw)/dd = c (k_loss - k_win).
    info = k_win**2 / p_win + k_loss**2 / p_loss
    if p_draw > 0.0:
        info += (k_loss - k_win) ** 2 / p_draw
    return float(c**2 * info)
