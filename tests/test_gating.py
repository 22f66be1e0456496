"""The gating SPRT (evaluation/stats/sprt.py): LLR values, bounds, error rates in simulation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from evaluation.stats.elo import logistic_score
from evaluation.stats.sprt import SPRT, GateDecision, llr_approx, llr_exact, sprt_bounds

SCORES = np.array([1.0, 0.5, 0.0])  # index 0 win, 1 draw, 2 loss (candidate's points)


def test_bounds_follow_wald() -> None:
    # log(0.05 / 0.95) = -2.944439, log(0.95 / 0.05) = 2.944439
    assert SPRT(alpha=0.05, beta=0.05).bounds == pytest.approx((-2.944439, 2.944439), abs=1e-6)
    # log(0.1 / 0.95) = -2.251292, log(0.9 / 0.05) = 2.890372
    assert sprt_bounds(0.05, 0.1) == pytest.approx((-2.251292, 2.890372), abs=1e-6)
    lower, upper = SPRT(alpha=0.02, beta=0.2).bounds
    assert lower == pytest.approx(math.log(0.2 / 0.98)) and upper == pytest.approx(math.log(40))


def test_approximate_llr_matches_hand_computation() -> None:
    # s0 = F(0) = 0.5, s1 = F(20) = 1 / (1 + 10^-0.05) = 0.5287506.
    # Trinomial W/D/L 30/60/10: mu = 0.6, var = 0.3*0.4^2 + 0.6*0.1^2 + 0.1*0.6^2 = 0.09,
    # LLR = 100 * 0.0287506 * (1.2 - 1.0287506) / (2 * 0.09) = 2.735288.
    assert float(llr_approx([10, 60, 30], 0.0, 20.0)) == pytest.approx(2.735288, abs=1e-6)
    # Pentanomial pairs 5/10/50/25/10 on 0, 1/4, 1/2, 3/4, 1: mu = 0.5625, var = 0.0554688,
    # LLR = 100 * 0.0287506 * (1.125 - 1.0287506) / (2 * 0.0554688) = 2.494401.
    assert float(llr_approx([5, 10, 50, 25, 10], 0.0, 20.0)) == pytest.approx(2.494401, abs=1e-6)
    # Batched: one row per count vector.
    batch = llr_approx([[10, 60, 30], [30, 60, 10], [0, 0, 0]], 0.0, 20.0)
    assert batch[0] == pytest.approx(2.735288, abs=1e-6) and batch[1] < 0.0 and batch[2] == 0.0


def _profile_loglik(counts: list[float], s: float) -> float:
    """max sum c_i log q_i over distributions q on 0..1 with mean s, by a generic optimizer."""
    c = np.array(counts, dtype=np.float64)
    values = np.linspace(0.0, 1.0, len(c))
    constraints = (
        {"type": "eq", "fun": lambda q: q.sum() - 1.0},
        {"type": "eq", "fun": lambda q: q @ values - s},
    )
    start = np.full(len(c), 1.0 / len(c))
    res = minimize(
        lambda q: -float(c @ np.log(q)),
        start,
        method="SLSQP",
        bounds=[(1e-9, 1.0)] * len(c),
        constraints=constraints,
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert res.success
    return -float(res.fun)


@pytest.mark.parametrize(
    ("counts", "elo1"), [([3, 10, 30, 12, 5], 30.0), ([12, 50, 18], 20.0), ([1, 4, 9, 5, 2], 60.0)]
)
def test_exact_llr_is_the_generalized_likelihood_ratio(counts: list[int], elo1: float) -> None:
    expected = _profile_loglik(counts, logistic_score(elo1)) - _profile_loglik(counts, 0.5)
    assert llr_exact(counts, 0.0, elo1) == pytest.approx(expected, abs=1e-5)


def test_exact_and_approximate_agree_on_large_samples_only() -> None:
    large = [20, 90, 300, 110, 25]
    exact, approx = llr_exact(large, 0.0, 30.0), float(llr_approx(large, 0.0, 30.0))
    assert exact == pytest.approx(approx, rel=0.02)
    # Two pairs of draws: the approximation sees a variance of ~0 and crosses a bound at once
    # (LLR -5.96); the generalized LLR barely moves (-0.17). This is why the SPRT uses the
    # exact form by default.
    assert float(llr_approx([0, 0, 2, 0, 0], 0.0, 30.0)) < sprt_bounds(0.05, 0.05)[0]
    assert abs(llr_exact([0, 0, 2, 0, 0], 0.0, 30.0)) < 0.2
    approx_test, exact_test = SPRT(0.0, 30.0, method="approx"), SPRT(0.0, 30.0)
    for test in (approx_test, exact_test):
        test.add_pair(0.5, 0.5)
        test.add_pair(0.5, 0.5)
    assert approx_test.status == "reject"
    assert exact_test.status == "continue"


def test_no_games_means_no_evidence() -> None:
    test = SPRT()
    assert test.llr == 0.0 and test.status == "continue" and test.games == 0
    assert llr_exact([0, 0, 0], 0.0, 30.0) == 0.0


def _wdl_probabilities(elo: float, draw_rate: float) -> np.ndarray:
    """Win/draw/loss probabilities with the given draw rate and expected score F(elo)."""
    win = logistic_score(elo) - draw_rate / 2.0
    return np.array([win, draw_rate, 1.0 - draw_rate - win])


def _acceptance_rate(true_elo: float, model: str, runs: int, seed: int) -> float:
    """Fraction of simulated gates that promote a candidate `true_elo` stronger (elo1 = 50)."""
    rng = np.random.default_rng(seed)
    probabilities = _wdl_probabilities(true_elo, draw_rate=0.65)
    max_pairs = 2000
    accepted = 0
    for _ in range(runs):
        outcomes = SCORES[rng.choice(3, size=(max_pairs, 2), p=probabilities)]
        test = SPRT(0.0, 50.0, alpha=0.05, beta=0.05, model=model, max_games=2 * max_pairs)
        for first, second in outcomes:
            if model == "pentanomial":
                test.add_pair(first, second)
            else:
                test.add_game(first)
                test.add_game(second)
            if test.status != "continue":
                break
        accepted += test.status == "accept"
    return accepted / runs


RUNS = 300  # binomial sd of a rate near 0.05 over 300 runs: 0.013
SLACK = 0.04  # three of those sd: the test fails only on a real error-rate problem


@pytest.mark.parametrize("model", ["pentanomial", "trinomial"])
def test_equal_candidate_is_rarely_promoted(model: str) -> None:
    assert _acceptance_rate(0.0, model, RUNS, seed=11) <= 0.05 + SLACK


@pytest.mark.parametrize("model", ["pentanomial", "trinomial"])
def test_clearly_stronger_candidate_is_promoted(model: str) -> None:
    assert _acceptance_rate(75.0, model, RUNS, seed=12) >= 0.95 - SLACK


def test_weaker_candidate_is_rejected_quickly() -> None:
    rng = np.random.default_rng(5)
    outcomes = SCORES[rng.choice(3, size=(500, 2), p=_wdl_probabilities(-100.0, 0.5))]
    test = SPRT(0.0, 30.0)
    for first, second in outcomes:
        test.add_pair(first, second)
        if test.status != "continue":
            break
    assert test.status == "reject" and test.games < 200


def _feed_truncation_example(test: SPRT) -> None:
    # Pentanomial 0/2/10/6/2 (20 pairs, 40 games): mean 0.575, LLR ~ +1.59, below the bound.
    for first, second, times in ((0.0, 0.5, 2), (0.5, 0.5, 10), (1.0, 0.5, 6), (1.0, 1.0, 2)):
        for _ in range(times):
            test.add_pair(first, second)


def test_truncation_rejects_a_not_yet_accepted_candidate() -> None:
    capped = SPRT(0.0, 30.0, max_games=40)
    _feed_truncation_example(capped)
    assert capped.pentanomial == (0, 2, 10, 6, 2) and capped.wdl == (10, 28, 2)
    assert 0.0 < capped.llr < capped.bounds[1]
    assert capped.truncated and capped.status == "reject"
    uncapped = SPRT(0.0, 30.0)
    _feed_truncation_example(uncapped)
    assert uncapped.status == "continue" and not uncapped.truncated
    assert uncapped.decide_truncated() == "reject"
    forced = uncapped.decision(truncate=True)
    assert forced.decision == "reject" and forced.truncated
    # A candidate that already reached the upper bound stays accepted at the cap.
    # (20 such pairs would not do: with no pair lost, the generalized LLR grows only ~0.08 a
    # pair, because H0 can explain many 2-point pairs by rare 0-point ones.)
    strong = SPRT(0.0, 30.0, max_games=80)
    for k in range(40):
        strong.add_pair(1.0, 1.0 if k % 2 else 0.5)
    assert strong.llr >= strong.bounds[1]
    assert strong.status == "accept" and strong.decide_truncated() == "accept"
    assert not strong.truncated


def test_decision_snapshot_for_logging() -> None:
    test = SPRT(0.0, 30.0, alpha=0.05, beta=0.1, model="pentanomial")
    _feed_truncation_example(test)
    snap = test.decision()
    assert isinstance(snap, GateDecision)
    assert (snap.games, snap.wins, snap.draws, snap.losses) == (40, 10, 28, 2)
    assert snap.pentanomial == (0, 2, 10, 6, 2)
    assert snap.llr == pytest.approx(llr_exact([0, 2, 10, 6, 2], 0.0, 30.0))
    assert (snap.lower_bound, snap.upper_bound) == pytest.approx(sprt_bounds(0.05, 0.1))
    assert (snap.decision, snap.truncated, snap.model, snap.method) == (
        "continue",
        False,
        "pentanomial",
        "exact",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.decision = "accept"  # type: ignore[misc]


def test_bulk_update_equals_pair_by_pair() -> None:
    one_by_one = SPRT(0.0, 30.0)
    _feed_truncation_example(one_by_one)
    bulk = SPRT(0.0, 30.0)
    bulk.update(wins=10, draws=28, losses=2, pairs=(0, 2, 10, 6, 2))
    assert bulk.llr == one_by_one.llr
    assert (bulk.wdl, bulk.pentanomial) == (one_by_one.wdl, one_by_one.pentanomial)
    # Trinomial: W/D/L counts from every game; pairs are only recorded.
    tri = SPRT(0.0, 30.0, model="trinomial")
    tri.update(wins=10, draws=28, losses=2)
    assert tri.llr == pytest.approx(llr_exact([2, 28, 10], 0.0, 30.0))


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="model"):
        SPRT(model="binomial")
    with pytest.raises(ValueError, match="elo0 < elo1"):
        SPRT(elo0=10.0, elo1=5.0)
    with pytest.raises(ValueError, match="alpha"):
        SPRT(alpha=0.0)
    with pytest.raises(ValueError, match="method"):
        SPRT(method="fast")
    with pytest.raises(ValueError, match="max_games"):
        SPRT(max_games=0)
    test = SPRT()
    with pytest.raises(ValueError, match="add_pair"):
        test.add_game(1.0)
    with pytest.raises(ValueError, match="pairs"):
        test.update(wins=1, draws=1)
    with pytest.raises(ValueError, match="do not match"):
        test.update(wins=2, draws=0, losses=0, pairs=(0, 0, 1, 0, 0))
    with pytest.raises(ValueError, match="second"):
        test.add_pair(1.0, 0.25)
    with pytest.raises(ValueError, match="3 or 5"):
        llr_exact([1, 2, 3, 4], 0.0, 30.0)
    with pytest.raises(ValueError, match="non-negative"):
        llr_approx([1, -2, 3], 0.0, 30.0)
    assert test.games == 0  # nothing was counted by the rejected calls
