"""When a run's Elo curve reaches a rung: the curve file read back, the monotone fit's crossing
and its interval (evaluation.ladder.report.reach_time), and the sweep table's column built on
it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from conftest import load_script

from evaluation.ladder.report import CurvePoint, reach_time, read_curve_csv, write_curve_csv
from evaluation.ladder.table import PACKAGE_TABLE, read_table

HALF_WIDTH = 100.0  # a candidate's 95% interval from its 32 games, about


def _curve(minutes, elos, half_width=HALF_WIDTH):
    return [
        CurvePoint(
            version=1 + 20 * i,
            step=1000 * i,
            wall_s=60.0 * m,
            positions=30_000 * i,
            elo=e,
            lower=e - half_width,
            upper=e + half_width,
            games=32,
        )
        for i, (m, e) in enumerate(zip(minutes, elos, strict=True))
    ]


def test_a_rising_curve_reaches_the_level_between_the_candidates_around_it() -> None:
    minutes = [0, 4, 8, 12, 16, 20, 24, 28]
    points = _curve(minutes, [500, 900, 1200, 1400, 1550, 1650, 1800, 1900])
    reach = reach_time(points, 1700.0)
    assert reach is not None
    assert reach.at / 60 == pytest.approx(20 + 4 * 50 / 150)  # 1650 at 20 min, 1800 at 24
    assert reach.lower < reach.at < reach.upper
    assert reach.lower > 16 * 60 and reach.upper < 28 * 60  # ±100 Elo a point: a few minutes
    # the other clocks, the same crossing in their own units
    assert reach_time(points, 1700.0, clock="step").at == pytest.approx(5000 + 1000 * 50 / 150)
    assert reach_time(points, 1700.0, seed=3).at == reach.at  # the fit has no randomness


def test_a_candidate_rated_high_by_chance_does_not_move_the_crossing_to_it() -> None:
    # one lucky candidate at 8 minutes, then the curve back where it was going
    elos = [500, 900, 1750, 1300, 1450, 1600, 1700, 1800, 1900]
    points = _curve([0, 4, 8, 12, 16, 20, 24, 28, 32], elos)
    reach = reach_time(points, 1700.0)
    # the first candidate at the level is the lucky one (8 min); pooled with its neighbours
    # it weighs as one of four, and the fit reaches 1700 at 24 minutes
    assert reach.at / 60 == pytest.approx(24.0)
    assert reach.lower <= reach.at <= reach.upper


def test_a_curve_that_stays_below_never_reaches() -> None:
    points = _curve([0, 10, 20, 30], [500, 900, 1100, 1200])
    reach = reach_time(points, 2000.0)
    assert reach.at == math.inf and reach.lower == math.inf and reach.upper == math.inf
    # just below the level at the end: the estimate is "not in the run", some draws get there
    near = reach_time(_curve([0, 10, 20, 30], [500, 900, 1100, 1690]), 1700.0)
    assert near.at == math.inf and near.lower < math.inf and near.upper == math.inf


def test_a_curve_already_above_reaches_at_its_first_candidate() -> None:
    reach = reach_time(_curve([2, 6, 10], [1900, 2000, 2100]), 1000.0)
    assert (reach.at, reach.lower, reach.upper) == (120.0, 120.0, 120.0)


def test_candidates_without_a_finite_interval_or_clock_are_left_out() -> None:
    points = _curve([0, 4, 8], [500, 1000, 1500])
    unbounded = CurvePoint(9, 9000, 60.0 * 12, None, math.inf, 2000.0, math.inf, 32)
    no_clock = CurvePoint(10, None, None, None, 1600.0, 1500.0, 1700.0, 32)
    reach = reach_time([*points, unbounded, no_clock], 1250.0)
    assert reach.at / 60 == pytest.approx(6.0)
    assert reach_time(points[:1], 1250.0) is None  # one candidate is no curve
    assert reach_time([*points[:1], no_clock], 1250.0) is None


def test_the_interval_covers_the_true_crossing_about_as_often_as_it_says() -> None:
    """Curves drawn around a known straight line: the 95% interval should hold the line's
    crossing in most of them (a loose bound: the monotone fit is not exactly unbiased)."""
    rng = np.random.default_rng(7)
    minutes = np.arange(0, 60, 4.0)
    truth = 600 + 40 * minutes  # reaches 1700 at 27.5 min
    stderr = HALF_WIDTH / 1.96
    covered = 0
    trials = 40
    for trial in range(trials):
        elos = truth + rng.normal(0, stderr, len(minutes))
        reach = reach_time(_curve(minutes, elos), 1700.0, draws=400, seed=trial)
        covered += reach.lower <= 27.5 * 60 <= reach.upper
    assert covered >= 0.8 * trials


def test_the_curve_file_reads_back_as_written(tmp_path) -> None:
    points = _curve([0, 4.5], [461.7, 1054.0])
    points.append(CurvePoint(41, None, None, None, 1348.2, 1243.1, 1453.2, 32))  # old runs
    path = tmp_path / "curve.csv"
    write_curve_csv(points, path)
    again = read_curve_csv(path)
    assert [p.version for p in again] == [1, 21, 41]
    assert again[2].step is None and again[2].wall_s is None and again[2].positions is None
    assert again[1].wall_s == pytest.approx(270.0) and again[1].elo == pytest.approx(1054.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("player,elo\nv1,3\n", "not a curve file"),
        (
            "version,step,wall_s,positions,elo,lower,upper,games\n1,0,0.0,0,12.5,1,2\n",
            ":2: 7 cells",
        ),
        (
            "version,step,wall_s,positions,elo,lower,upper,games\n1,0,0.0,0,1e3,9,9,32\n"
            "2,50,1.0,10,high,1,2,32\n",
            ":3: could not convert",
        ),
    ],
)
def test_a_malformed_curve_file_is_refused_with_its_line(tmp_path, text, message) -> None:
    path = tmp_path / "curve.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        read_curve_csv(path)
    assert str(path) in str(err.value)


def test_the_sweep_table_says_when_a_rated_run_reached_minimax4(tmp_path) -> None:
    sweep_summary = load_script("sweep_summary")
    rung = read_table(PACKAGE_TABLE).ratings["minimax:4"]
    rated = tmp_path / "sweep-rated"
    (rated / "eval").mkdir(parents=True)
    (rated / "config.yaml").write_text(yaml.safe_dump({"evaluation": {"ladder_table": "package"}}))
    write_curve_csv(
        _curve([0, 10, 20, 30], [rung - 600, rung - 200, rung + 200, rung + 300]),
        rated / "eval" / "curve.csv",
    )
    (rated / "summary.json").write_text(json.dumps({"step": 1, "games": 1, "positions": 1}))
    assert sweep_summary.summarize(rated)["reaches minimax:4"].startswith("15.0 min [")

    unrated = tmp_path / "sweep-unrated"
    unrated.mkdir()
    (unrated / "config.yaml").write_text(yaml.safe_dump({"evaluation": {"ladder_table": None}}))
    assert sweep_summary.summarize(unrated)["reaches minimax:4"] == "(own rungs)"


def test_retime_curve_puts_candidates_that_lost_their_metadata_at_their_publication(
    tmp_path,
) -> None:
    """scripts/retime_curve.py: a candidate without positions (its metadata was gone when it
    was rated) takes wall time and positions from metrics.csv at its step, interpolated and
    the first row of a repeated step counting; candidates with metadata stay as they are."""
    retime_curve = load_script("retime_curve")
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    rows = ["time_s,step,key,value"]
    # (time, step, run seconds, positions); step 0 repeats while the learner waits for data
    for t, step, wall, positions in [
        (100, 0, 0.0, 0),
        (110, 0, 10.0, 2000),
        (120, 100, 20.0, 5000),
        (130, 300, 30.0, 9000),
    ]:
        rows.append(f"{t},{step},learner/wall_s,{wall}")
        rows.append(f"{t},{step},replay/positions_added,{positions}")
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    points = [
        CurvePoint(1, 0, None, None, 400.0, 300.0, 500.0, 32),
        CurvePoint(2, 50, 40.0, 4000, 500.0, 400.0, 600.0, 32),  # read in time: kept
        CurvePoint(3, 200, 95.0, None, 600.0, 500.0, 700.0, 32),  # rated 70 s late
        CurvePoint(4, 900, 99.0, None, 700.0, 600.0, 800.0, 32),  # past the metrics: kept
    ]
    write_curve_csv(points, run / "eval" / "curve.csv")
    assert retime_curve.main([str(run)]) == 0
    fixed = read_curve_csv(run / "eval" / "curve.csv")
    assert [(p.wall_s, p.positions) for p in fixed] == [
        (0.0, 0),
        (40.0, 4000),
        (25.0, 7000),
        (99.0, None),
    ]
    assert [p.elo for p in fixed] == [p.elo for p in points]
    (run / "eval" / "ratings.csv").write_text(
        "player,elo,lower,upper,games,points,anchored\n"
        "random,0.0,0.0,0.0,8,1,True\nminimax:1,800.0,800.0,800.0,8,4,True\n"
        "v4,700.0,600.0,800.0,32,16,False\n"
    )
    assert retime_curve.main([str(run), "--plot", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").stat().st_size > 10_000
    (run / "metrics.csv").write_text("time_s,step,key,value\n")
    assert retime_curve.main([str(run)]) == 2  # says what is missing, writes nothing
