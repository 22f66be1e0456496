"""The draw model's log-likelihood and its maximisation, for
:func:`evaluation.stats.fit.fit_ratings`.

:func:`_terms` is the log-likelihood of aggregated games (one row per pair of players and
first mover) with its first and second derivatives in the rating difference and draw_elo,
:func:`_prior_terms` those of the virtual games of the prior; :class:`DrawModel` maps the
parameters (free ratings, draw_elo, the first-move term) to the rows; :func:`newton` maximises
the concave log-posterior by a damped Newton method with a bounded step. The model itself is
described in evaluation.stats.fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from evaluation.stats.elo import ELO_PER_NATURAL_UNIT

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


@dataclass
class Groups:
    """Aggregated counts: one row per (player i, player j, first-move sign), i < j."""

    i: np.ndarray  # int64 (G,)
    j: np.ndarray  # int64 (G,)
    sign: np.ndarray  # float64 (G,): +1 i moved first, -1 j moved first, 0 mixed/unknown
    wins: np.ndarray  # float64 (G,) from i's side
    draws: np.ndarray
    losses: np.ndarray


def _logsig(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def _terms(
    d: np.ndarray, theta: float, groups: Groups
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


class DrawModel:
    """Parameters x = [free ratings..., draw_elo (if fitted), first-move eta (if fitted)]."""

    def __init__(
        self,
        names: list[str],
        anchors: Mapping[str, float],
        groups: Groups,
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


def newton(
    model: DrawModel, x: np.ndarray, fixed_theta: float
) -> tuple[np.ndarray, np.ndarray, int]:
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
