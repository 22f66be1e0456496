"""Elo statistics (evaluation/stats/elo.py): one match's estimate and the BayesElo-style rating
fit."""

from __future__ import annotations

import csv
import dataclasses
import math
import random
from pathlib import Path

import numpy as np
import pytest

from evaluation.stats.elo import GameResult, PairResult, logistic_score, match_elo, score_to_elo
from evaluation.stats.fit import fit_ratings

GOLDEN = Path(__file__).parent / "golden"

# ----------------------------------------------------------------------------- match_elo


def test_match_elo_matches_hand_computation() -> None:
    # W/D/L 60/20/20: s = (60 + 10) / 100 = 0.7, Elo = 400 log10(0.7 / 0.3) = 147.1907.
    # var = (60 * 0.3^2 + 20 * 0.2^2 + 20 * 0.7^2) / 100 = (5.4 + 0.8 + 9.8) / 100 = 0.16,
    # stderr = sqrt(0.16 / 100) = 0.04, score interval 0.7 -+ 1.959964 * 0.04 = [0.62160, 0.77840],
    # Elo interval 400 log10(0.6216 / 0.3784) = 86.2250, 400 log10(0.7784 / 0.2216) = 218.2518.
    est = match_elo(60, 20, 20)
    assert est.games == 100
    assert est.score == pytest.approx(0.7, abs=1e-12)
    assert est.score_stderr == pytest.approx(0.04, abs=1e-12)
    assert est.elo == pytest.approx(147.190714, abs=1e-5)
    assert est.elo_lower == pytest.approx(86.225015, abs=1e-5)
    assert est.elo_upper == pytest.approx(218.251778, abs=1e-5)
    assert est.draw_ratio == pytest.approx(0.2)
    # LOS = Phi((60 - 20) / sqrt(80)) = Phi(4.4721) = 0.9999961
    assert est.los == pytest.approx(0.9999961279, abs=1e-9)


def test_match_elo_draws_narrow_the_interval() -> None:
    # 45/40/15: s = 0.65, var = (45 * 0.35^2 + 40 * 0.15^2 + 15 * 0.65^2) / 100 = 0.1275,
    # stderr = 0.0357071; Elo 107.5381 in [56.0824, 164.0566].
    est = match_elo(45, 40, 15)
    assert est.score_stderr == pytest.approx(math.sqrt(0.1275 / 100), abs=1e-12)
    assert (est.elo, est.elo_lower, est.elo_upper) == pytest.approx(
        (107.538125, 56.082383, 164.056613), abs=1e-5
    )
    # Same score without draws (65/0/35) has the binomial variance 0.2275: a wider interval.
    no_draws = match_elo(65, 0, 35)
    assert no_draws.elo == pytest.approx(est.elo, abs=1e-9)
    assert no_draws.elo_upper - no_draws.elo_lower > est.elo_upper - est.elo_lower + 20.0


def test_match_elo_is_antisymmetric() -> None:
    a, b = match_elo(60, 20, 20), match_elo(20, 20, 60)
    assert b.elo == pytest.approx(-a.elo, abs=1e-9)
    assert (b.elo_lower, b.elo_upper) == pytest.approx((-a.elo_upper, -a.elo_lower), abs=1e-9)
    assert b.los == pytest.approx(1.0 - a.los, abs=1e-12)


def test_match_elo_at_100_and_0_percent() -> None:
    # 10 wins out of 10: the exact one-sided bound s >= 0.025^(1/10) = 0.691503, i.e.
    # 400 log10(0.691503 / 0.308497) = 140.2172 Elo.
    won = match_elo(10, 0, 0)
    assert won.elo == math.inf and won.elo_upper == math.inf
    assert won.elo_lower == pytest.approx(140.217162, abs=1e-5)
    lost = match_elo(0, 0, 10)
    assert lost.elo == -math.inf and lost.elo_lower == -math.inf
    assert lost.elo_upper == pytest.approx(-140.217162, abs=1e-5)


def test_match_elo_edge_cases_and_bad_input() -> None:
    drawn = match_elo(0, 12, 0)
    assert (drawn.elo, drawn.elo_lower, drawn.elo_upper) == (0.0, 0.0, 0.0)
    assert drawn.los == 0.5
    # 99/0/1: the normal interval reaches past 100%, so the upper bound is +inf.
    assert match_elo(99, 0, 1).elo_upper == math.inf
    with pytest.raises(ValueError, match="at least one game"):
        match_elo(0, 0, 0)
    with pytest.raises(ValueError, match="losses"):
        match_elo(1, 1, -1)
    with pytest.raises(ValueError, match="wins"):
        match_elo(1.5, 0, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        match_elo(5, 5, 5, confidence=1.0)


def test_score_elo_round_trip() -> None:
    for elo in (-500.0, -35.0, 0.0, 12.5, 800.0):
        assert score_to_elo(logistic_score(elo)) == pytest.approx(elo, abs=1e-9)
    assert logistic_score(400.0) == pytest.approx(10.0 / 11.0, abs=1e-15)


# ----------------------------------------------------------------------------- fit_ratings

TRUE_RATINGS = {"random": 0.0, "a": 150.0, "b": 300.0, "c": 450.0, "d": 700.0}
TRUE_DRAW_ELO = 180.0  # equals draw 2 F(180) - 1 = 49% of their games
TRUE_FIRST_MOVE = 30.0


def simulate(
    ratings: dict[str, float],
    draw_elo: float,
    first_move: float,
    games_per_side: int,
    seed: int,
) -> list[PairResult]:
    """Round robin under the draw model: every ordered pair, the first-named player moving first."""
    rng = np.random.default_rng(seed)
    results = []
    for x in sorted(ratings):
        for y in sorted(ratings):
            if x == y:
                continue
            d = ratings[x] - ratings[y] + first_move
            p_win, p_loss = logistic_score(d - draw_elo), logistic_score(-d - draw_elo)
            w, dr, lo = rng.multinomial(games_per_side, [p_win, 1.0 - p_win - p_loss, p_loss])
            results.append(PairResult(x, y, int(w), int(dr), int(lo), first_mover=x))
    return results


def as_games(pairs: list[PairResult]) -> list[GameResult]:
    """Expand PairResults into single games; the first mover is Black in English checkers."""
    games = []
    for p in pairs:
        for score, count in ((1.0, p.wins), (0.5, p.draws), (0.0, p.losses)):
            for _ in range(count):  # p.a moves first, so p.a is Black; score is White's
                games.append(GameResult(white=p.b, black=p.a, score=1.0 - score))
    return games


@pytest.fixture(scope="module")
def round_robin() -> list[PairResult]:
    return simulate(TRUE_RATINGS, TRUE_DRAW_ELO, TRUE_FIRST_MOVE, games_per_side=300, seed=0)


def test_fit_recovers_known_ratings_within_intervals(round_robin: list[PairResult]) -> None:
    fit = fit_ratings(round_robin, {"random": 0.0}, prior_draws=0.0, first_move_advantage=True)
    assert fit.names == ("a", "b", "c", "d", "random")
    for name, true in TRUE_RATINGS.items():
        player = fit[name]
        assert player.games == 2400
        assert player.lower <= true <= player.upper, (name, player)
        if name != "random":
            assert 5.0 < player.stderr < 25.0  # ~10-15 Elo from 2400 games; not degenerate
    half = 1.959964 * fit.draw_elo_stderr
    assert fit.draw_elo - half <= TRUE_DRAW_ELO <= fit.draw_elo + half
    assert fit.first_move_elo is not None and fit.first_move_stderr is not None
    half = 1.959964 * fit.first_move_stderr
    assert fit.first_move_elo - half <= TRUE_FIRST_MOVE <= fit.first_move_elo + half
    # The model's expected score reproduces the observed one (4 x 300 games per pair).
    points = games = 0.0
    for p in round_robin:
        if {p.a, p.b} == {"d", "b"}:
            wins = p.wins if p.a == "d" else p.losses
            points += wins + 0.5 * p.draws
            games += p.wins + p.draws + p.losses
    assert games == 600
    assert fit.expected_score("d", "b") == pytest.approx(points / games, abs=0.03)


def test_single_games_and_aggregates_give_the_same_fit(round_robin: list[PairResult]) -> None:
    pairs_fit = fit_ratings(round_robin, {"random": 0.0}, first_move_advantage=True)
    games = as_games(round_robin)
    random.Random(7).shuffle(games)
    games_fit = fit_ratings(games, {"random": 0.0}, first_move_advantage=True)
    for a, b in zip(pairs_fit.players, games_fit.players, strict=True):
        assert a.name == b.name and a.games == b.games and a.points == b.points
        assert a.elo == pytest.approx(b.elo, abs=1e-8)
        assert a.stderr == pytest.approx(b.stderr, abs=1e-8)
    assert games_fit.first_move_elo == pytest.approx(pairs_fit.first_move_elo, abs=1e-8)
    # Black moved first in every expanded game, and the fit credits Black with the advantage.
    assert games_fit.first_move_elo > 0.0


def test_fit_is_deterministic_and_order_free(round_robin: list[PairResult]) -> None:
    first = fit_ratings(round_robin, {"random": 0.0})
    again = fit_ratings(list(reversed(round_robin)), {"random": 0.0})
    assert first == again  # every field but the covariance (compared next) is equal exactly
    assert np.array_equal(first.covariance, again.covariance)


def test_interval_coverage_over_seeds() -> None:
    """Over 40 seeds, the 95% intervals cover the truth ~95% of the time, z-scores have sd ~1."""
    truth = {"random": 0.0, "a": 100.0, "b": 250.0, "c": 400.0}
    z_scores = []
    for seed in range(40):
        results = simulate(truth, 150.0, 20.0, games_per_side=150, seed=100 + seed)
        fit = fit_ratings(results, {"random": 0.0}, prior_draws=0.0, first_move_advantage=True)
        for name in ("a", "b", "c"):
            z_scores.append((fit[name].elo - truth[name]) / fit[name].stderr)
        z_scores.append((fit.draw_elo - 150.0) / fit.draw_elo_stderr)
        z_scores.append((fit.first_move_elo - 20.0) / fit.first_move_stderr)
    z = np.array(z_scores)
    coverage = float(np.mean(np.abs(z) <= 1.959964))
    assert 0.90 <= coverage <= 0.99, coverage
    assert 0.8 <= float(np.sqrt(np.mean(z**2))) <= 1.2
    assert abs(float(np.mean(z))) < 0.25  # no visible bias


def test_anchors_are_respected_exactly(round_robin: list[PairResult]) -> None:
    fit = fit_ratings(round_robin, {"random": 0.0, "d": 700.0}, prior_draws=0.0)
    assert fit["random"].elo == 0.0 and fit["d"].elo == 700.0
    assert fit["d"].anchored and fit["d"].stderr == 0.0
    assert (fit["d"].lower, fit["d"].upper) == (700.0, 700.0)
    assert not fit["b"].anchored
    assert fit["b"].lower <= 300.0 <= fit["b"].upper
    # Shifting the only anchor shifts every rating by the same amount.
    base = fit_ratings(round_robin, {"random": 0.0})
    shifted = fit_ratings(round_robin, {"random": 1000.0})
    for name in TRUE_RATINGS:
        assert shifted[name].elo - base[name].elo == pytest.approx(1000.0, abs=1e-6)
    # The difference of an anchored and a free player has the free player's interval.
    diff, lo, hi = base.difference("c", "random")
    assert (diff, lo, hi) == pytest.approx((base["c"].elo, base["c"].lower, base["c"].upper))


def test_disconnected_players_raise_naming_them(round_robin: list[PairResult]) -> None:
    island = [PairResult("e", "f", 3, 4, 2), PairResult("f", "g", 1, 1, 1)]
    with pytest.raises(ValueError, match="not connected") as info:
        fit_ratings(round_robin + island, {"random": 0.0})
    assert "e, f, g" in str(info.value) and "random" not in str(info.value)
    with pytest.raises(ValueError, match="a, b, c, d, random"):
        fit_ratings(round_robin, {"nobody": 0.0})


def test_bad_arguments_raise(round_robin: list[PairResult]) -> None:
    with pytest.raises(ValueError, match="at least one anchor"):
        fit_ratings(round_robin, {})
    with pytest.raises(ValueError, match="finite"):
        fit_ratings(round_robin, {"random": math.nan})
    with pytest.raises(ValueError, match="prior_draws"):
        fit_ratings(round_robin, {"random": 0.0}, prior_draws=-1.0)
    with pytest.raises(ValueError, match=r"results\[1\].*score"):
        fit_ratings([GameResult("x", "y", 1.0), GameResult("x", "y", 0.7)], {"x": 0.0})
    with pytest.raises(ValueError, match="play itself"):
        fit_ratings([PairResult("x", "x", 1, 0, 0)], {"x": 0.0})
    with pytest.raises(ValueError, match="first_mover"):
        fit_ratings([PairResult("x", "y", 1, 0, 1, first_mover="z")], {"x": 0.0})
    with pytest.raises(ValueError, match="wins"):
        fit_ratings([PairResult("x", "y", -1, 0, 1)], {"x": 0.0})
    with pytest.raises(ValueError, match="no games"):
        fit_ratings([], {"x": 0.0})
    with pytest.raises(ValueError, match="every game is a draw"):
        fit_ratings([PairResult("x", "y", 0, 9, 0)], {"x": 0.0})
    with pytest.raises(ValueError, match="known colours"):
        fit_ratings([PairResult("x", "y", 3, 2, 4)], {"x": 0.0}, first_move_advantage=True)


def test_undefeated_player_needs_the_prior(round_robin: list[PairResult]) -> None:
    crushing = [PairResult("z", "random", 10, 0, 0)]
    hopeless = [PairResult("y", "random", 0, 0, 10)]
    with pytest.raises(ValueError, match="never lost or drew against the rest: z"):
        fit_ratings(round_robin + crushing, {"random": 0.0}, prior_draws=0.0)
    with pytest.raises(ValueError, match="never won or drew against the rest: y"):
        fit_ratings(round_robin + hopeless, {"random": 0.0}, prior_draws=0.0)
    fit = fit_ratings(round_robin + crushing + hopeless, {"random": 0.0}, prior_draws=2.0)
    z, y = fit["z"], fit["y"]
    assert math.isfinite(z.elo) and math.isfinite(y.elo)
    assert 150.0 < z.elo < 1500.0 and z.lower > 0.0  # clearly above random, yet finite
    assert -1500.0 < y.elo < -150.0 and y.upper < 0.0
    # The prior barely moves players with thousands of games.
    plain = fit_ratings(round_robin, {"random": 0.0}, prior_draws=0.0)
    assert abs(fit["b"].elo - plain["b"].elo) < 0.5 * plain["b"].stderr


def test_no_draws_fits_draw_elo_zero() -> None:
    rng = np.random.default_rng(3)
    results = []
    for x, y, d in (("p", "q", 100.0), ("q", "r", 50.0), ("p", "r", 150.0)):
        w = int(rng.binomial(400, logistic_score(d)))
        results.append(PairResult(x, y, w, 0, 400 - w))
    fit = fit_ratings(results, {"r": 0.0}, prior_draws=0.0)
    assert fit.draw_elo == 0.0 and fit.draw_elo_stderr == 0.0
    assert fit["q"].lower <= 50.0 <= fit["q"].upper
    assert fit["p"].lower <= 150.0 <= fit["p"].upper


def test_ratings_are_frozen(round_robin: list[PairResult]) -> None:
    fit = fit_ratings(round_robin, {"random": 0.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.draw_elo = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        fit.covariance[0, 0] = 1.0
    with pytest.raises(KeyError, match="nobody"):
        fit["nobody"]


def test_a_long_runs_candidates_fit_jointly_as_each_alone() -> None:
    """The rated ladder's games of a 4-hour run's 64 candidates (tests/golden), rungs fixed at
    the shipped table, candidates that never meet: each one's joint rating must be its own
    games' rating. A full Newton step from the rungs' mean once sent the joint fit to a false
    optimum: v1240 (18 of 32 points against minimax:6-8) at Elo 8161 with an interval of
    +-1.5e9, and v1220 and v1180 some 450 Elo above their own games' ratings."""
    from evaluation.ladder.rungs import fit_all
    from evaluation.ladder.table import read_table, table_path

    table = read_table(table_path("package"))
    rows = []
    with (GOLDEN / "ladder_games_long_run.csv").open() as f:
        for r in csv.DictReader(f):
            first = r["candidate"] if r["candidate_first"] == "1" else r["rung"]
            counts = (int(r["wins"]), int(r["draws"]), int(r["losses"]))
            rows.append(PairResult(r["candidate"], r["rung"], *counts, first_mover=first))
    elo_cfg = {"anchor_player": "random", "anchor_rating": 0.0, "prior_draws": 2.0}
    joint = fit_all(rows, elo_cfg, table=table)
    candidates = sorted({r.a for r in rows}, key=lambda n: int(n[1:]))
    assert len(candidates) == 64
    for name in candidates:
        alone = fit_all([r for r in rows if r.a == name], elo_cfg, table=table)[name]
        assert joint[name].elo == pytest.approx(alone.elo, abs=0.01), name
        assert joint[name].stderr == pytest.approx(alone.stderr, rel=1e-4), name
    top = joint["v1240"]
    assert 2100.0 < top.elo < 2200.0 and top.upper - top.lower < 250.0
