"""The gate's statistics: promote a candidate only when a sequential test says it is stronger.

The gate's games are played by evaluation.matches.gate; this module only scores them.

The test is the generalized sequential probability ratio test (GSPRT) of fishtest, the
Stockfish testing framework, as worked out by Michel Van den Bergh (fishtest
``server/fishtest/stats/LLRcalc.py`` and ``sprt.py``; notes at https://www.cantate.be/Fishtest/:
"support_MLE_multinomial.pdf" and "GSPRT_approximation.pdf").

Elo: *logistic* Elo throughout (an Elo difference x means an expected score
F(x) = 1 / (1 + 10^(-x/400))), not fishtest's "normalized" Elo. H0: the candidate is elo0
stronger than the best (default 0: no better); H1: it is elo1 stronger. With s0 = F(elo0),
s1 = F(elo1) the hypotheses are about the candidate's expected score, whatever the draw rate:
the test needs no model of draws, which enter only through the spread of the outcomes.

Two models of an outcome:

* ``trinomial``: one game, N games, outcomes L/D/W scored 0, 1/2, 1.
* ``pentanomial`` (default): one *pair* of games from the same opening with colours reversed,
  N pairs, the candidate's points per pair 0, 1/2, 1, 3/2, 2 (counts ordered from worst to best),
  scaled to 0, 1/4, 1/2, 3/4, 1. Pairing removes the variance that comes from openings and
  colours (a lopsided opening gives 1 point per pair whoever is stronger), so it needs fewer
  games than the trinomial model; a pair only counts once both games are in.

The log-likelihood ratio, two ways (``method``):

* ``"exact"`` (default; fishtest's ``LLR_logistic``): the generalized LLR. With p the empirical
  distribution of the N outcomes, P0 and P1 the maximum-likelihood distributions on the same
  outcomes whose means are s0 and s1 (P_i = p_i / (1 + x (a_i - s)), x from a one-dimensional
  root), ``LLR = N * sum_i p_i log(P1_i / P0_i)``.
* ``"approx"``: Van den Bergh's GSPRT approximation (fishtest's ``LLR_alt2``, used by its
  ``sprt`` class for reports): ``LLR ~= N (s1 - s0)(2 mu - s0 - s1) / (2 var)`` with mu, var
  the empirical mean and variance. It treats the LLR as a Brownian motion, which is right for
  large N, and fishtest only evaluates it on large batches. Updated game by game it is not safe:
  with 65% draws the first pair is often two draws, var is then ~0 and the LLR jumps past a
  bound (in simulation about a third of equal candidates were accepted). Hence "exact" here.
  Both agree once there are a few hundred games (tested).

As in fishtest, empty cells are replaced by 1e-3 games before either computation, so the
variance is never zero. With no games at all the LLR is 0.

Decisions (Wald's bounds): ``llr >= log((1 - beta) / alpha)`` -> "accept" (H1: promote);
``llr <= log(beta / (1 - alpha))`` -> "reject"; otherwise "continue". The status is a pure
function of the counts so far: the caller stops feeding games at the first decision.

Truncation (a cap on games, ``max_games``): the candidate is *rejected* unless the LLR has already
reached the upper bound. Rule: reject on truncation. A candidate equal to the best drifts towards
the lower bound only slowly when draws are common, and a rule such as "accept if LLR > 0 at the
cap" would promote such a candidate up to half the time; rejecting keeps the probability of
promoting a candidate no better than elo0 at most alpha. The price is power for candidates near
elo1, so set the cap to a few times the expected length of the test.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.stats.elo import logistic_score

logger = logging.getLogger(__name__)

MODELS = ("pentanomial", "trinomial")
PENTANOMIAL_CELLS = 5  # candidate's points per pair: 0, 1/2, 1, 3/2, 2
TRINOMIAL_CELLS = 3  # loss, draw, win
EMPTY_CELL_COUNT = 1e-3  # fishtest's regularize(): stands in for an empty cell so var > 0
LLR_METHODS = ("exact", "approx")
MLE_TOLERANCE = 1e-13  # relative step at which the multiplier (order 1) counts as solved
MLE_MAX_ITERATIONS = 200  # bisection alone would need ~50 steps to reach MLE_TOLERANCE
ACCEPT, REJECT, CONTINUE = "accept", "reject", "continue"
VALID_SCORES = (0.0, 0.5, 1.0)  # a game's points for the candidate


def _regularized(counts: Sequence[float] | np.ndarray) -> np.ndarray:
    """Counts as floats with empty cells replaced by EMPTY_CELL_COUNT (batched, NumPy)."""
    c = np.asarray(counts, dtype=np.float64)
    cells = c.shape[-1] if c.ndim else 0
    if cells not in (TRINOMIAL_CELLS, PENTANOMIAL_CELLS):
        raise ValueError(f"counts must have a last axis of 3 or 5, got shape {c.shape}")
    if np.any(c < 0) or not np.all(np.isfinite(c)):
        raise ValueError(f"counts must be finite and non-negative, got {c.tolist()}")
    return np.where(c == 0.0, EMPTY_CELL_COUNT, c)


def llr_approx(counts: Sequence[float] | np.ndarray, elo0: float, elo1: float) -> np.ndarray:
    """Van den Bergh's approximate GSPRT LLR, ``N (s1 - s0)(2 mu - s0 - s1) / (2 var)``.

    ``counts``: last axis 3 (losses, draws, wins) or 5 (pairs scoring 0, 1/2, 1, 3/2, 2
    points), worst to best for the candidate; leading axes are batched. Good for large
    samples only (see the module docstring); 0 where there is no game.
    """
    observed = np.asarray(counts, dtype=np.float64).sum(axis=-1)
    c = _regularized(counts)
    n = c.sum(axis=-1)
    values = np.linspace(0.0, 1.0, c.shape[-1])  # outcome scaled to the per-game score
    p = c / n[..., None]
    mu = (p * values).sum(axis=-1)
    var = (p * (values - mu[..., None]) ** 2).sum(axis=-1)
    s0, s1 = logistic_score(elo0), logistic_score(elo1)
    return np.where(observed == 0.0, 0.0, n * (s1 - s0) * (2.0 * mu - s0 - s1) / (2.0 * var))


def _mle_multiplier(values: list[float], probs: list[float], s: float) -> float:
    """Lagrange multiplier x of the MLE with mean s: sum p_i (a_i - s) / (1 + x (a_i - s)) = 0.

    The MLE itself is p_i / (1 + x (a_i - s)) (Van den Bergh, "support_MLE_multinomial",
    Proposition 1.1). The left side decreases in x on the interval where every 1 + x (a_i - s)
    is positive, from +inf to -inf because every p_i > 0 after regularization, so a Newton
    iteration kept inside a shrinking bracket finds the single root. Pure Python: at most five
    cells, and the SPRT evaluates it after every pair.
    """
    shifted = [a - s for a in values]
    lo, hi = -1.0 / max(shifted), -1.0 / min(shifted)  # the poles; the root lies between
    x = 0.0
    for _ in range(MLE_MAX_ITERATIONS):
        f = df = 0.0
        for p, d in zip(probs, shifted, strict=True):
            t = d / (1.0 + x * d)
            f += p * t
            df -= p * t * t
        if f == 0.0:
            return x
        if f > 0.0:
            lo = x
        else:
            hi = x
        step = x - f / df
        if not lo < step < hi:
            step = 0.5 * (lo + hi)
        if abs(step - x) <= MLE_TOLERANCE * (1.0 + abs(x)):
            return step
        x = step
    raise ArithmeticError(f"MLE multiplier did not converge for probs={probs}, s={s}")


def llr_exact(counts: Sequence[float], elo0: float, elo1: float) -> float:
    """Generalized LLR for the expected score, as fishtest's ``LLR_logistic`` computes it.

    ``N * sum_i p_i log(P1_i / P0_i)``, where p is the (regularized) empirical distribution
    of the outcomes and P0, P1 its maximum-likelihood neighbours with mean s0 = F(elo0) and
    s1 = F(elo1). ``counts`` as for :func:`llr_approx`, one count vector.
    """
    raw = [float(v) for v in counts]
    if len(raw) not in (TRINOMIAL_CELLS, PENTANOMIAL_CELLS):
        raise ValueError(f"counts must have 3 or 5 cells, got {len(raw)}")
    if not all(math.isfinite(v) and v >= 0.0 for v in raw):
        raise ValueError(f"counts must be finite and non-negative, got {raw}")
    if sum(raw) == 0.0:
        return 0.0
    c = [v if v > 0.0 else EMPTY_CELL_COUNT for v in raw]
    n = sum(c)
    probs = [v / n for v in c]
    values = [k / (len(c) - 1) for k in range(len(c))]
    s0, s1 = logistic_score(elo0), logistic_score(elo1)
    x0 = _mle_multiplier(values, probs, s0)
    x1 = _mle_multiplier(values, probs, s1)
    return n * sum(
        p * (math.log1p(x0 * (a - s0)) - math.log1p(x1 * (a - s1)))
        for p, a in zip(probs, values, strict=True)
    )


def sprt_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's bounds (lower, upper) = (log(beta / (1 - alpha)), log((1 - beta) / alpha))."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


@dataclass(frozen=True)
class GateDecision:
    """A snapshot of the test for logging; counts are from the candidate's side."""

    games: int
    wins: int
    draws: int
    losses: int
    pentanomial: tuple[int, int, int, int, int]  # pairs scoring 0, 1/2, 1, 3/2, 2 points
    llr: float
    lower_bound: float
    upper_bound: float
    elo0: float
    elo1: float
    alpha: float
    beta: float
    model: str
    method: str  # how the LLR was computed: "exact" or "approx"
    decision: str  # "accept" (promote), "reject" or "continue"
    truncated: bool  # True when the decision came from the game cap, not from a bound


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _score(name: str, value: float) -> float:
    if value not in VALID_SCORES:
        raise ValueError(f"{name} must be 0, 0.5 or 1 (candidate's points), got {value!r}")
    return float(value)


class SPRT:
    """Sequential test that a candidate is ``elo1`` (not ``elo0``) logistic Elo stronger.

    Feed it with :meth:`add_pair` (a colour-reversed pair), :meth:`add_game` (trinomial model
    only) or :meth:`update` (counts in bulk), then read :attr:`status`.
    """

    def __init__(
        self,
        elo0: float = 0.0,
        elo1: float = 30.0,
        alpha: float = 0.05,
        beta: float = 0.05,
        model: str = "pentanomial",
        max_games: int | None = None,
        method: str = "exact",
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")
        if method not in LLR_METHODS:
            raise ValueError(f"method must be one of {LLR_METHODS}, got {method!r}")
        if not (math.isfinite(elo0) and math.isfinite(elo1)) or elo1 <= elo0:
            raise ValueError(f"need finite elo0 < elo1, got elo0={elo0!r}, elo1={elo1!r}")
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not 0.0 < value < 0.5:
                raise ValueError(f"{name} must lie in (0, 0.5), got {value!r}")
        if max_games is not None and (isinstance(max_games, bool) or int(max_games) < 1):
            raise ValueError(f"max_games must be a positive integer or None, got {max_games!r}")
        self.elo0, self.elo1 = float(elo0), float(elo1)
        self.alpha, self.beta = float(alpha), float(beta)
        self.model = model
        self.method = method
        self.max_games = None if max_games is None else int(max_games)
        self._wdl = [0, 0, 0]  # wins, draws, losses (every game)
        self._pairs = [0] * PENTANOMIAL_CELLS  # complete pairs by candidate's points
        self._llr: float | None = None  # cached LLR of the current counts

    # -- feeding ---------------------------------------------------------------------------

    def add_game(self, score: float) -> None:
        """One game with the candidate scoring ``score`` (trinomial model only)."""
        score = _score("score", score)
        if self.model == "pentanomial":
            raise ValueError(
                "the pentanomial model counts complete colour-reversed pairs: use add_pair"
            )
        self._wdl[{1.0: 0, 0.5: 1, 0.0: 2}[score]] += 1
        self._llr = None

    def add_pair(self, first: float, second: float) -> None:
        """A pair of games from one opening with colours reversed: the candidate's points."""
        first, second = _score("first", first), _score("second", second)
        for score in (first, second):
            self._wdl[{1.0: 0, 0.5: 1, 0.0: 2}[score]] += 1
        self._pairs[round(2.0 * (first + second))] += 1
        self._llr = None

    def update(
        self,
        wins: int = 0,
        draws: int = 0,
        losses: int = 0,
        pairs: Sequence[int] | None = None,
    ) -> None:
        """Add counts in bulk: the candidate's W/D/L and, if paired, the pentanomial counts.

        ``pairs`` (pairs scoring 0, 1/2, 1, 3/2, 2 points) must describe exactly the games in
        wins/draws/losses: 2 * sum(pairs) games and sum(k * pairs[k]) half-points. The
        pentanomial model requires it; the trinomial model records it for the log.
        """
        wdl = [_count("wins", wins), _count("draws", draws), _count("losses", losses)]
        games = sum(wdl)
        if pairs is None:
            if self.model == "pentanomial" and games:
                raise ValueError("the pentanomial model needs `pairs` with the W/D/L counts")
            new_pairs = [0] * PENTANOMIAL_CELLS
        else:
            if len(pairs) != PENTANOMIAL_CELLS:
                raise ValueError(f"pairs must have 5 counts (0..2 points), got {len(pairs)}")
            new_pairs = [_count(f"pairs[{k}]", v) for k, v in enumerate(pairs)]
            half_points = sum(k * v for k, v in enumerate(new_pairs))
            if 2 * sum(new_pairs) != games or half_points != 2 * wdl[0] + wdl[1]:
                raise ValueError(
                    f"pairs {new_pairs} do not match wins={wdl[0]}, draws={wdl[1]}, "
                    f"losses={wdl[2]}: need 2*sum(pairs) games and sum(k*pairs[k]) == 2W + D"
                )
        self._wdl = [a + b for a, b in zip(self._wdl, wdl, strict=True)]
        self._pairs = [a + b for a, b in zip(self._pairs, new_pairs, strict=True)]
        self._llr = None

    # -- reading ---------------------------------------------------------------------------

    @property
    def games(self) -> int:
        return sum(self._wdl)

    @property
    def wdl(self) -> tuple[int, int, int]:
        return tuple(self._wdl)  # type: ignore[return-value]

    @property
    def pentanomial(self) -> tuple[int, int, int, int, int]:
        return tuple(self._pairs)  # type: ignore[return-value]

    @property
    def bounds(self) -> tuple[float, float]:
        return sprt_bounds(self.alpha, self.beta)

    @property
    def llr(self) -> float:
        if self._llr is None:
            self._llr = self._compute_llr()
        return self._llr

    def _compute_llr(self) -> float:
        if self.model == "pentanomial":
            counts = self._pairs
        else:
            wins, draws, losses = self._wdl
            counts = [losses, draws, wins]
        if self.method == "approx":
            return float(llr_approx(counts, self.elo0, self.elo1))
        return llr_exact(counts, self.elo0, self.elo1)

    def _bound_status(self) -> str:
        value = self.llr
        lower, upper = self.bounds
        if value >= upper:
            return ACCEPT
        if value <= lower:
            return REJECT
        return CONTINUE

    @property
    def truncated(self) -> bool:
        """True when the game cap is reached before either bound."""
        at_cap = self.max_games is not None and self.games >= self.max_games
        return at_cap and self._bound_status() == CONTINUE

    @property
    def status(self) -> str:
        """ "accept" (promote), "reject", or "continue"; at the game cap, see decide_truncated."""
        status = self._bound_status()
        if status == CONTINUE and self.truncated:
            return self.decide_truncated()
        return status

    def decide_truncated(self) -> str:
        """The decision when the test is stopped early: reject unless H1 was already accepted."""
        return ACCEPT if self._bound_status() == ACCEPT else REJECT

    def decision(self, truncate: bool = False) -> GateDecision:
        """Snapshot for the log; ``truncate=True`` forces a decision now (decide_truncated)."""
        bound_status = self._bound_status()
        truncated = self.truncated or (truncate and bound_status == CONTINUE)
        verdict = self.decide_truncated() if truncated else bound_status
        lower, upper = self.bounds
        wins, draws, losses = self._wdl
        result = GateDecision(
            games=self.games,
            wins=wins,
            draws=draws,
            losses=losses,
            pentanomial=self.pentanomial,
            llr=self.llr,
            lower_bound=lower,
            upper_bound=upper,
            elo0=self.elo0,
            elo1=self.elo1,
            alpha=self.alpha,
            beta=self.beta,
            model=self.model,
            method=self.method,
            decision=verdict,
            truncated=truncated,
        )
        if verdict != CONTINUE:
            logger.info(
                "gate %s after %d games (W/D/L %d/%d/%d, LLR %.2f in [%.2f, %.2f]%s)",
                verdict,
                result.games,
                wins,
                draws,
                losses,
                result.llr,
                lower,
                upper,
                ", truncated" if truncated else "",
            )
        return result
