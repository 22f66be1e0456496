"""Elo estimates: the result of one match, and maximum-likelihood ratings of many players.

All Elo numbers here are *logistic* Elo: a rating difference ``x`` means an expected score of
``F(x) = 1 / (1 + 10 ** (-x / 400))``.

One match: :func:`match_elo`
    The score ``s = (W + D/2) / N`` becomes the Elo difference ``400 * log10(s / (1 - s))``. The
    interval is the normal interval on ``s`` with the *trinomial* variance of one game's score,
    ``var = (W (1-s)^2 + D (1/2-s)^2 + L s^2) / N`` and standard error ``sqrt(var / N)``, mapped
    through the Elo curve (as cutechess-cli reports a match). Draws lower the variance, so a
    drawish match gives a narrower interval than the same score from wins and losses alone.
    Edge cases, all deliberate:

    * 100% (every game won): ``elo = +inf`` and ``elo_upper = +inf``; the normal interval is
      empty there, so ``elo_lower`` comes from the exact one-sided Clopper-Pearson bound for N
      wins out of N, ``s >= ((1 - confidence) / 2) ** (1 / N)``. 0% mirrors it.
    * A normal interval that reaches past 0% or 100% gives ``-inf`` / ``+inf`` for that bound.
    * Every game drawn: ``elo = 0`` and the interval collapses to ``[0, 0]`` (the trinomial
      variance is zero); the estimate is honest, the interval is not, so read ``games``.

Many players: :func:`fit_ratings`
    The draw model of BayesElo (Rémi Coulom, "Bayesian Elo Rating",
    https://www.remi-coulom.fr/Bayesian-Elo/, after Rao and Kupper 1967). For a game in which
    player ``a`` faces ``b`` with ``d = r_a - r_b (+ eta when a moves first, - eta when b does)``::

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

The fit is deterministic: players are indexed in sorted order and nothing is random.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit
from scipy.stats import norm

logger = logging.getLogger(__name__)

ELO_PER_NATURAL_UNIT = 400.0 / math.log(10.0)  # F(x) = expit(x / this): 173.7 Elo per logit
DEFAULT_CONFIDENCE = 0.95  # two-sided level of every interval unless the caller asks otherwise
DEFAULT_PRIOR_DRAWS = 2.0  # virtual games per pair; BayesElo's default prior is 2 virtual draws
MAX_NEWTON_ITERATIONS = 100  # Newton converges in ~5-15 steps here; 100 means something is wrong
NEWTON_TOLERANCE_ELO = 1e-7  # stop when no parameter moves more than this (Elo); far below noise
ARMIJO_FRACTION = 1e-4  # sufficient-increase constant of the backtracking line search
MIN_STEP_FRACTION = 2.0**-40  # a line search shrinking the step below this has converged
# The most one Newton step moves any parameter (Elo). Far from its games' ratings a player's
# win probabilities saturate, the curvature vanishes and a full Newton step would fly off by
# thousands of Elo to where its gradient is too flat to come back; a bounded step cannot.
MAX_STEP_ELO = 400.0
# The line search failing with an ascent direction this steep left is a stall, not the optimum.
STALL_SLOPE = 1e-6
DIVERGENCE_ELO = 1e5  # a fitted value this large means the optimum is at infinity
VALID_SCORES = (0.0, 0.5, 1.0)  # points for a loss, a draw, a win


def logistic_score(elo: float) -> float:
    """Expected score of a player ``elo`` logistic Elo above its opponent."""
    return float(expit(elo / ELO_PER_NATURAL_UNIT))


def score_to_elo(score: float) -> float:
    """Logistic Elo difference that gives ``score`` (``+-inf`` at 1 and 0)."""
    if not 0.0 <= score <= 1.0 or math.isnan(score):
        raise ValueError(f"score must lie in [0, 1], got {score}")
    if score == 1.0:
        return math.inf
    if score == 0.0:
        return -math.inf
    return 400.0 * math.log10(score / (1.0 - score))


def _z_value(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return float(norm.ppf(0.5 + confidence / 2.0))


# ----------------------------------------------------------------------------- one match


@dataclass(frozen=True)
class EloEstimate:
    """Strength of A relative to B from one match; every count is from A's side."""

    wins: int
    draws: int
    losses: int
    games: int
    score: float  # (W + D/2) / N
    score_stderr: float  # sqrt(trinomial variance / N)
    elo: float  # logistic Elo difference A - B; +-inf at 100% / 0%
    elo_lower: float  # lower end of the two-sided interval at `confidence`
    elo_upper: float  # upper end
    confidence: float  # e.g. 0.95
    draw_ratio: float  # D / N
    los: float  # likelihood of superiority, Phi((W - L) / sqrt(W + L)); 0.5 with no decisive game


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def match_elo(
    wins: int, draws: int, losses: int, confidence: float = DEFAULT_CONFIDENCE
) -> EloEstimate:
    """Elo difference of A over B, with an interval, from A's wins, draws and losses.

    See the module docstring for the trinomial interval and the 0% / 100% / all-draw cases.
    """
    wins = _check_count("wins", wins)
    draws = _check_count("draws", draws)
    losses = _check_count("losses", losses)
    games = wins + draws + losses
    if games == 0:
        raise ValueError("match_elo needs at least one game, got 0 wins, draws and losses")
    z = _z_value(confidence)
    score = (wins + 0.5 * draws) / games
    variance = (wins * (1.0 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
    stderr = math.sqrt(variance / games)
    tail = (1.0 - confidence) / 2.0
    if score == 1.0:  # every game won: exact one-sided bound, N wins out of N
        lower, upper = score_to_elo(tail ** (1.0 / games)), math.inf
    elif score == 0.0:
        lower, upper = -math.inf, score_to_elo(1.0 - tail ** (1.0 / games))
    else:
        lower = score_to_elo(max(score - z * stderr, 0.0))
        upper = score_to_elo(min(score + z * stderr, 1.0))
    decisive = wins + losses
    los = 0.5 if decisive == 0 else float(norm.cdf((wins - losses) / math.sqrt(decisive)))
    return EloEstimate(
        wins=wins,
        draws=draws,
        losses=losses,
        games=games,
        score=score,
        score_stderr=stderr,
        elo=score_to_elo(score),
        elo_lower=lower,
        elo_upper=upper,
        confidence=confidence,
        draw_ratio=draws / games,
        los=los,
    )


# ----------------------------------------------------------------------------- many players


@dataclass(frozen=True)
class GameResult:
    """One game. ``score`` is White's points: 1 White won, 0.5 draw, 0 Black won.

    In English checkers Black moves first, so a fitted first-move advantage favours ``black``.
    """

    white: str
    black: str
    score: float


@dataclass(frozen=True)
class PairResult:
    """Aggregated games of ``a`` against ``b``; wins, draws and losses are from ``a``'s side.

    ``first_mover`` names which of ``a`` / ``b`` moved first in *all* these games, or is None
    when colours were mixed or unknown (then the first-move term does not apply to them).
    """

    a: str
    b: str
    wins: int
    draws: int
    losses: int
    first_mover: str | None = None


@dataclass(frozen=True)
class PlayerRating:
    name: str
    elo: float  # fitted (or anchored) logistic Elo on the draw-model scale
    stderr: float  # standard error from the inverse observed information; 0 for anchors
    lower: float  # lower end of the interval at Ratings.confidence
    upper: float
    games: int  # real games played (virtual prior games not counted)
    points: float  # wins + draws / 2 over those games
    anchored: bool  # True when the rating was fixed by `anchors`


@dataclass(frozen=True)
class Ratings:
    """Result of :func:`fit_ratings`. Index it by name: ``ratings["minimax:1"].elo``."""

    players: tuple[PlayerRating, ...]  # sorted by name
    draw_elo: float  # fitted draw_elo (0 when no game was drawn)
    draw_elo_stderr: float  # 0 when draw_elo was not fitted
    first_move_elo: float | None  # Elo worth of moving first; None when not fitted
    first_move_stderr: float | None
    confidence: float
    prior_draws: float
    log_likelihood: float  # of the real games at the optimum (prior excluded)
    iterations: int  # Newton steps taken
    covariance: np.ndarray = field(compare=False, repr=False)  # (P, P) Elo^2, player order

    def __getitem__(self, name: str) -> PlayerRating:
        for player in self.players:
            if player.name == name:
                return player
        raise KeyError(f"no player named {name!r} in these ratings")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.players)

    def elo(self, name: str) -> float:
        return self[name].elo

    def difference(self, a: str, b: str) -> tuple[float, float, float]:
        """``r_a - r_b`` and its interval, using the covariance of the two ratings."""
        ia, ib = self.names.index(self[a].name), self.names.index(self[b].name)
        diff = self.players[ia].elo - self.players[ib].elo
        cov = self.covariance
        variance = max(cov[ia, ia] + cov[ib, ib] - 2.0 * cov[ia, ib], 0.0)
        half = _z_value(self.confidence) * math.sqrt(variance)
        return diff, diff - half, diff + half

    def expected_score(self, a: str, b: str) -> float:
        """Expected points per game of ``a`` against ``b`` with colours balanced."""
        d = self[a].elo - self[b].elo
        theta = self.draw_elo
        eta = self.first_move_elo or 0.0
        total = 0.0
        for sign in (1.0, -1.0):  # a moves first, then b moves first
            dd = d + sign * eta
            win, loss = logistic_score(dd - theta), logistic_score(-dd - theta)
            total += win + 0.5 * (1.0 - win - loss)
        return total / 2.0


@dataclass
class _Groups:
    """Aggregated counts: one row per (player i, player j, first-move sign), i < j."""

    i: np.ndarray  # int64 (G,)
    j: np.ndarray  # int64 (G,)
    sign: np.ndarray  # float64 (G,): +1 i moved first, -1 j moved first, 0 mixed/unknown
    wins: np.ndarray  # float64 (G,) from i's side
    draws: np.ndarray
    losses: np.ndarray


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


def _logsig(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def _terms(
    d: np.ndarray, theta: float, groups: _Groups
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Log-likelihood and its derivatives with respect to d (per group) and theta.

    Returns (loglik, g_d, g_theta, h_dd, h_dtheta, h_thetatheta); all but loglik are per group.
    Natural-log units: x/ELO_PER_NATURAL_UNIT is the logit, c its derivative.
    """
    c = 1.0 / ELO_PER_NATURAL_UNIT
    w, dr, lo = groups.wins, groups.draws, groups.losses
    z_win = c * (d - theta)  # P(win) = sigmoid(z_win)
    z_loss = c * (-d - theta)  # P(loss) = sigmoid(z_loss)
    k_win = expit(z_win) * expit(-z_win)
    k_loss = expit(z_loss) * expit(-z_loss)
    loglik = float(np.sum(w * _logsig(z_win)) + np.sum(lo * _logsig(z_loss)))
    g_d = c * (w * expit(-z_win) - lo * expit(-z_loss))
    g_t = -c * (w * expit(-z_win) + lo * expit(-z_loss))
    h_dd = -(c**2) * (w * k_win + lo * k_loss)
    h_dt = c**2 * (w * k_win - lo * k_loss)
    h_tt = -(c**2) * (w * k_win + lo * k_loss)
    if theta > 0.0:
        # log P(draw) = logsig(c(theta - d)) + logsig(c(theta + d)) + log(1 - exp(-2 c theta)),
        # a numerically stable form of log(F(theta - d) - F(-theta - d)).
        a, b = c * (theta - d), c * (theta + d)
        k_a, k_b = expit(a) * expit(-a), expit(b) * expit(-b)
        two_ct = 2.0 * c * theta
        loglik += float(
            np.sum(dr * (_logsig(a) + _logsig(b))) + dr.sum() * math.log(-math.expm1(-two_ct))
        )
        g_d += c * dr * (-expit(-a) + expit(-b))
        g_t += c * dr * (expit(-a) + expit(-b)) + dr * (2.0 * c / math.expm1(two_ct))
        h_dd -= c**2 * dr * (k_a + k_b)
        h_dt += c**2 * dr * (k_a - k_b)
        h_tt -= c**2 * dr * (k_a + k_b)
        h_tt -= dr * (4.0 * c**2 * math.exp(two_ct) / math.expm1(two_ct) ** 2)
    elif np.any(dr > 0):
        loglik = -math.inf
    return loglik, g_d, g_t, h_dd, h_dt, h_tt


def _prior_terms(d: np.ndarray, weight: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """weight/2 virtual wins and weight/2 virtual losses per pair under F(d) (no draw term)."""
    c = 1.0 / ELO_PER_NATURAL_UNIT
    z = c * d
    loglik = float(np.sum(0.5 * weight * (_logsig(z) + _logsig(-z))))
    g_d = 0.5 * weight * c * (expit(-z) - expit(z))
    h_dd = -weight * c**2 * expit(z) * expit(-z)
    return loglik, g_d, h_dd


class _Model:
    """Parameters x = [free ratings..., draw_elo (if fitted), first-move eta (if fitted)]."""

    def __init__(
        self,
        names: list[str],
        anchors: Mapping[str, float],
        groups: _Groups,
        prior_pairs: tuple[np.ndarray, np.ndarray],
        prior_draws: float,
        fit_theta: bool,
        fit_eta: bool,
        fixed_eta: float = 0.0,
    ) -> None:
        self.names = names
        self.groups = groups
        self.fixed = np.array([anchors.get(n, 0.0) for n in names], dtype=np.float64)
        self.free = [k for k, n in enumerate(names) if n not in anchors]
        self.free_col = {p: col for col, p in enumerate(self.free)}
        n_free = len(self.free)
        self.theta_col = n_free if fit_theta else None
        self.eta_col = n_free + int(fit_theta) if fit_eta else None
        self.size = n_free + int(fit_theta) + int(fit_eta)
        self.design = self._design(groups.i, groups.j, groups.sign)
        # A first-move term held fixed (a rated ladder's) shifts every coloured game.
        self.offset = self.fixed[groups.i] - self.fixed[groups.j] + fixed_eta * groups.sign
        pi, pj = prior_pairs
        self.prior_design = self._design(pi, pj, np.zeros(len(pi)))[:, : max(n_free, 0)]
        self.prior_offset = self.fixed[pi] - self.fixed[pj]
        self.prior_weight = np.full(len(pi), float(prior_draws))
        self.use_prior = prior_draws > 0.0 and n_free > 0 and len(pi) > 0

    def _design(self, i: np.ndarray, j: np.ndarray, sign: np.ndarray) -> np.ndarray:
        design = np.zeros((len(i), self.size), dtype=np.float64)
        for row, (a, b) in enumerate(zip(i.tolist(), j.tolist(), strict=True)):
            if a in self.free_col:
                design[row, self.free_col[a]] += 1.0
            if b in self.free_col:
                design[row, self.free_col[b]] -= 1.0
        if self.eta_col is not None:
            design[:, self.eta_col] = sign
        return design

    def theta(self, x: np.ndarray, fixed_theta: float) -> float:
        return float(x[self.theta_col]) if self.theta_col is not None else fixed_theta

    def evaluate(
        self, x: np.ndarray, fixed_theta: float, want_derivatives: bool
    ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        theta = self.theta(x, fixed_theta)
        if theta < 0.0 or (self.theta_col is not None and theta == 0.0):
            return -math.inf, None, None
        d = self.design @ x + self.offset
        loglik, g_d, g_t, h_dd, h_dt, h_tt = _terms(d, theta, self.groups)
        n_free = len(self.free)
        prior_loglik = 0.0
        if self.use_prior:
            dp = self.prior_design @ x[:n_free] + self.prior_offset
            prior_loglik, pg_d, ph_dd = _prior_terms(dp, self.prior_weight)
        total = loglik + prior_loglik
        if not want_derivatives or not math.isfinite(total):
            return total, None, None
        grad = self.design.T @ g_d
        hess = self.design.T @ (h_dd[:, None] * self.design)
        if self.theta_col is not None:
            t = self.theta_col
            cross = self.design.T @ h_dt
            grad[t] += g_t.sum()
            hess[:, t] += cross
            hess[t, :] += cross
            hess[t, t] += h_tt.sum()
        if self.use_prior:
            grad[:n_free] += self.prior_design.T @ pg_d
            hess[:n_free, :n_free] += self.prior_design.T @ (ph_dd[:, None] * self.prior_design)
        return total, grad, hess

    def data_loglik(self, x: np.ndarray, fixed_theta: float) -> float:
        theta = self.theta(x, fixed_theta)
        return _terms(self.design @ x + self.offset, theta, self.groups)[0]


def _newton(model: _Model, x: np.ndarray, fixed_theta: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Maximise the concave log-posterior; returns (x, negative Hessian, iterations)."""
    if x.size == 0:  # every player anchored and nothing else to fit
        return x, np.zeros((0, 0)), 0
    value, grad, hess = model.evaluate(x, fixed_theta, want_derivatives=True)
    if not math.isfinite(value):
        raise ValueError("rating fit: the starting point has zero likelihood (internal error)")
    for iteration in range(1, MAX_NEWTON_ITERATIONS + 1):
        try:
            step = np.linalg.solve(-hess, grad)
        except np.linalg.LinAlgError as exc:
            raise ValueError(
                "rating fit: the information matrix is singular (a parameter is not "
                "identified by these games, e.g. a first-move term without coloured games)"
            ) from exc
        longest = float(np.max(np.abs(step)))
        if longest > MAX_STEP_ELO:  # a trust region: the direction kept, its length bounded
            step *= MAX_STEP_ELO / longest
        fraction = 1.0
        slope = float(grad @ step)
        while True:
            candidate = x + fraction * step
            new_value, _, _ = model.evaluate(candidate, fixed_theta, want_derivatives=False)
            if math.isfinite(new_value) and new_value >= value + ARMIJO_FRACTION * fraction * slope:
                break
            fraction /= 2.0
            if fraction < MIN_STEP_FRACTION:
                if slope > STALL_SLOPE:
                    raise ValueError(
                        f"rating fit stalled after {iteration} Newton steps with the "
                        f"log-likelihood still rising along the step (slope {slope:.3g})"
                    )
                candidate = x  # no ascent left in floating point: at the optimum
                break
        moved = float(np.max(np.abs(candidate - x))) if x.size else 0.0
        x = candidate
        value, grad, hess = model.evaluate(x, fixed_theta, want_derivatives=True)
        if x.size and float(np.max(np.abs(x))) > DIVERGENCE_ELO:
            raise ValueError(
                "rating fit diverged: some rating or the first-move term is unbounded "
                "(a player or a colour that always wins); pass prior_draws > 0"
            )
        if moved < NEWTON_TOLERANCE_ELO:
            return x, -hess, iteration
    raise ValueError(f"rating fit did not converge in {MAX_NEWTON_ITERATIONS} Newton steps")


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
    counts = np.array([table[k] for k in keys], dtype=np.float64)
    groups = _Groups(
        i=np.array([index[a] for a, _, _ in keys], dtype=np.int64),
        j=np.array([index[b] for _, b, _ in keys], dtype=np.int64),
        sign=np.array([s for _, _, s in keys], dtype=np.float64),
        wins=counts[:, 0],
        draws=counts[:, 1],
        losses=counts[:, 2],
    )
    total_w, total_d, total_l = counts.sum(axis=0)
    if total_w + total_l == 0 and draw_elo is None:
        raise ValueError("every game is a draw: draw_elo and the ratings are not identified")
    if draw_elo == 0.0 and total_d > 0:
        raise ValueError("a fixed draw_elo of 0 gives drawn games zero probability")
    if first_move_elo is not None:
        first_move_advantage = False
    if first_move_advantage and not np.any(groups.sign != 0):
        raise ValueError("first_move_advantage needs games with known colours")
    # No draws at all: the optimum is draw_elo = 0 (P(draw) = 0). A given draw_elo is held.
    fit_theta = total_d > 0 and draw_elo is None
    fixed_theta = float(draw_elo) if draw_elo is not None else 0.0

    pairs = sorted({(index[a], index[b]) for a, b, _ in keys})
    prior_pairs = (
        np.array([p[0] for p in pairs], dtype=np.int64),
        np.array([p[1] for p in pairs], dtype=np.int64),
    )
    model = _Model(
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
    x0 = np.zeros(model.size, dtype=np.float64)
    x0[: len(model.free)] = float(np.mean(present_anchors))
    if fit_theta:
        # Start draw_elo where equal players would draw at the observed rate: 2F(t) - 1 = rate.
        rate = min(total_d / counts.sum(), 0.99)
        x0[model.theta_col] = score_to_elo((1.0 + rate) / 2.0)
    x, information, iterations = _newton(model, x0, fixed_theta=fixed_theta)

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
