"""Elo: the scale, the estimate from one match, and the types of the many-player fit.

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

Many players' ratings, fitted by maximum likelihood under BayesElo's draw model, are
:func:`evaluation.stats.fit.fit_ratings`; its input and output types live here
(:class:`PairResult`, :class:`GameResult`, :class:`Ratings`): the ladder, the evaluator and
the scripts share them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit
from scipy.stats import norm

ELO_PER_NATURAL_UNIT = 400.0 / math.log(10.0)  # F(x) = expit(x / this): 173.7 Elo per logit


DEFAULT_CONFIDENCE = 0.95  # two-sided level of every interval unless the caller asks otherwise


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
