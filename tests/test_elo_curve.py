"""The rated ladder and the in-run Elo curve: the rating command (a table that matches a direct
fit of its games, resumed without replaying any), candidates fitted with the rungs fixed,
opponent selection, the planner's information, and the evaluator's curve from a real Redis."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from scipy.optimize import minimize_scalar

from checkerzero.network.checkpoint import encode_checkpoint
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.run_files import CURVE_CSV, CURVE_PNG, EVAL_DIR
from checkerzero.store.keys import done_key
from checkerzero.store.replay import connect
from checkerzero.store.weights import KEEP_VERSIONS, WeightsChannel
from evaluation import rate_ladder
from evaluation.evaluator.ratings import wall_seconds
from evaluation.evaluator.records import read_eval_metrics
from evaluation.evaluator.settings import EvalSettings
from evaluation.evaluator.worker import EvaluatorWorker
from evaluation.ladder.plan import (
    gallop_rung,
    nearest_rung,
    neighbour_rungs,
    plan_pairs,
    rating_matches,
)
from evaluation.ladder.rungs import fit_all, ladder_player, rating_openings
from evaluation.ladder.table import (
    EXTENDED_TABLE,
    PACKAGE_TABLE,
    LadderTable,
    TableRow,
    read_results,
    read_table,
    results_path,
    weights_text,
    write_results,
    write_table,
)
from evaluation.stats.elo import ELO_PER_NATURAL_UNIT, PairResult, logistic_score
from evaluation.stats.fit import game_information

TINY = ModelConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)
SMALL_RUNGS = "random,noisy:0.5:minimax:1,minimax:1,minimax:2"
ELO_CFG = {"anchor_player": "random", "prior_draws": 2.0, "first_move_advantage": True}


# ----------------------------------------------------------------------------- the command


def test_rate_ladder_table_matches_a_direct_fit_and_resumes_without_replaying(
    tmp_path, capsys
) -> None:
    out = tmp_path / "ladder.csv"
    games_file = tmp_path / "ladder.csv.games.jsonl"
    args = ["--rungs", SMALL_RUNGS, "--workers", "1", "--out", str(out)]
    assert rate_ladder.main([*args, "--pairs", "6"]) == 0
    first = games_file.read_text().splitlines()
    matches = rating_matches(SMALL_RUNGS.split(","), next_neighbours=True)
    assert len(matches) == 5 and len(first) == 5 * 6
    # One distinct opening per pair of a match.
    for a, b in matches:
        openings = [
            json.loads(x)["pair"]["opening"] for x in first if x.startswith(f'{{"a": "{a}"')
        ]
        openings = [
            json.loads(x)["pair"]["opening"]
            for x in first
            if json.loads(x)["a"] == a and json.loads(x)["b"] == b
        ]
        assert len(openings) == len(set(openings)) == 6

    table = read_table(out)
    direct = fit_all(rate_ladder.results_of(rate_ladder.read_games(games_file)), ELO_CFG)
    assert [r.player for r in table.rows] == SMALL_RUNGS.split(",")
    for row in table.rows:
        p = direct[row.player]
        assert row.elo == pytest.approx(p.elo, abs=0.006)
        assert row.lower == pytest.approx(p.lower, abs=0.006)
        assert row.upper == pytest.approx(p.upper, abs=0.006)
        assert row.games == p.games and row.points == p.points
    assert table.draw_elo == pytest.approx(direct.draw_elo, abs=0.006)
    assert table.first_move_elo == pytest.approx(direct.first_move_elo, abs=0.006)
    assert table.meta["status"].startswith("provisional")  # 6 pairs are far from +-15
    assert table.meta["weights"] == weights_text(None) and table.meta["git_revision"]
    assert table.ratings["random"] == 0.0
    # Beside the table, its game counts: the same fit again from them alone.
    counts = read_results(results_path(out))
    assert counts == rate_ladder.results_of(rate_ladder.read_games(games_file))
    assert fit_all(counts, ELO_CFG)["minimax:2"].elo == pytest.approx(direct["minimax:2"].elo)

    # A kill mid-write leaves half a line: that pair is played again, nothing else.
    games_file.write_text("\n".join(first) + "\n" + first[-1][:40])
    assert rate_ladder.main([*args, "--pairs", "8"]) == 0
    lines = games_file.read_text().splitlines()
    assert lines[: len(first)] == first
    kept = [x for x in lines if x.startswith("{") and x.endswith("}")]
    assert len(kept) == 5 * 8  # 6 kept + 2 new per match; the cut line replayed
    keys = [(json.loads(x)["a"], json.loads(x)["b"], json.loads(x)["index"]) for x in kept]
    assert len(set(keys)) == len(keys)
    # Deterministic players: the replayed pair is the same game as before.
    last = json.loads(first[-1])
    again = [json.loads(x) for x in kept if json.loads(x)["index"] == last["index"]]
    again = [d for d in again if (d["a"], d["b"]) == (last["a"], last["b"])]
    assert again[-1]["pair"] == last["pair"]
    assert rate_ladder.main([*args, "--dry-run", "--pairs", "8"]) == 0
    assert "0 still to play" in capsys.readouterr().out


def test_rate_ladder_extends_a_table_keeping_its_rungs_and_terms(tmp_path, capsys) -> None:
    out = tmp_path / "ladder.csv"
    base = ["--workers", "1", "--out", str(out), "--pairs", "4"]
    assert rate_ladder.main(["--rungs", "random,minimax:1,minimax:2", *base]) == 0
    before, counts = read_table(out), read_results(results_path(out))
    extend = [*base, "--extend", "--games-file", str(tmp_path / "top.jsonl")]
    assert rate_ladder.main([*extend, "--rungs", "minimax:3,minimax:4"]) == 0
    after = read_table(out)
    assert [r.player for r in after.rows] == ["random", *(f"minimax:{d}" for d in range(1, 5))]
    assert after.rows[:3] == before.rows  # every rating already quoted stands
    assert (after.draw_elo, after.first_move_elo) == (before.draw_elo, before.first_move_elo)
    assert "minimax:3 minimax:4 added" in after.meta["extended"]
    assert after.meta["rungs"] == "random minimax:1 minimax:2 minimax:3 minimax:4"
    # Only the new rungs played: each against the one and the one two below it.
    top = rate_ladder.results_of(rate_ladder.read_games(tmp_path / "top.jsonl"))
    assert {(r.a, r.b) for r in top} == {
        ("minimax:3", "minimax:2"),
        ("minimax:3", "minimax:1"),
        ("minimax:4", "minimax:3"),
        ("minimax:4", "minimax:2"),
    }
    assert read_results(results_path(out)) == counts + top
    # The new rows are the fit of their games with the old rungs fixed at the table's ratings.
    direct = fit_all(top, ELO_CFG, table=before)
    assert after.rows[4].elo == pytest.approx(direct["minimax:4"].elo, abs=0.006)
    # A rung already rated, or other minimax weights, is refused naming the table.
    assert rate_ladder.main([*extend, "--rungs", "minimax:2"]) == 2
    assert "already in" in capsys.readouterr().err
    weights = "evaluation.baseline.weights.king=150"
    assert rate_ladder.main([*extend, "--rungs", "minimax:5", weights]) == 2
    assert "rated with minimax weights" in capsys.readouterr().err
    assert read_table(out) == after


def test_rate_ladder_refuses_bad_rungs(tmp_path, capsys) -> None:
    out = ["--out", str(tmp_path / "t.csv"), "--pairs", "1"]
    assert rate_ladder.main(["--rungs", "random,minimax:x", *out]) == 2
    assert "minimax:x" in capsys.readouterr().err
    assert rate_ladder.main(["--rungs", "minimax:1,random", *out]) == 2
    assert "anchor" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"noisy:1\.5:minimax:1"):
        ladder_player("noisy:1.5:minimax:1")


def test_rating_openings_are_distinct_and_reproducible() -> None:
    openings = rating_openings(400, plies=4, seed=3)
    assert len(openings) == 400 and len({o.fen for o in openings}) == 400
    assert [o.moves for o in openings] == [o.moves for o in rating_openings(400, plies=4, seed=3)]
    assert all(len(o.moves) == 3 for o in openings[:156])  # the deck first
    assert all(len(o.moves) == 7 for o in openings[156:])


def test_noisy_rung_is_reproducible_and_between_its_parts() -> None:
    from evaluation.matches.games import play_match
    from game.openings import load_openings

    deck = load_openings()
    noisy = ladder_player("noisy:0.5:minimax:1")
    assert noisy.name == "noisy:0.5:minimax:1"
    a = play_match(noisy, ladder_player("random"), deck, games=20, seed=0)
    b = play_match(ladder_player("noisy:0.5:minimax:1"), ladder_player("random"), deck, games=20)
    assert a.pairs == b.pairs
    assert a.score > 0.6  # beats random ...
    c = play_match(ladder_player("minimax:1"), noisy, deck, games=20, seed=0)
    assert c.score > 0.6  # ... and loses to minimax:1


# ----------------------------------------------------------------------------- the fit


def table_of(ratings: dict[str, float], draw_elo: float, first: float | None = None):
    rows = tuple(TableRow(n, e, e, e, 0.0, 100, 50.0) for n, e in ratings.items())
    meta = {"status": "test", "weights": weights_text(None)}
    return LadderTable(rows, draw_elo=draw_elo, first_move_elo=first, confidence=0.95, meta=meta)


def test_candidate_fitted_with_the_rungs_fixed_has_the_known_rating() -> None:
    """Hand-built games against two fixed rungs: the rating maximises the draw model's
    likelihood written out here, and its interval is that likelihood's curvature."""
    rungs, theta = {"random": 0.0, "a": 400.0, "b": 800.0}, 100.0
    table = table_of(rungs, theta)
    games = {"a": (6, 2, 2), "b": (1, 3, 6)}  # the candidate's W/D/L
    rows = [PairResult("cand", n, w, d, l_) for n, (w, d, l_) in games.items()]

    def loglik(r: float) -> float:
        total = 0.0
        for name, (w, d, l_) in games.items():
            x = r - rungs[name]
            p_win, p_loss = logistic_score(x - theta), logistic_score(-x - theta)
            total += w * math.log(p_win) + l_ * math.log(p_loss) + d * math.log(1 - p_win - p_loss)
        return total

    best = minimize_scalar(
        lambda r: -loglik(r), bounds=(0, 1200), method="bounded", options={"xatol": 1e-9}
    )
    h = 1e-3
    curvature = -(loglik(best.x + h) - 2 * loglik(best.x) + loglik(best.x - h)) / h**2
    fit = fit_all(rows, {"prior_draws": 0.0, "first_move_advantage": True}, table=table)
    assert fit["cand"].elo == pytest.approx(best.x, abs=1e-3)
    assert fit["cand"].stderr == pytest.approx(1 / math.sqrt(curvature), rel=1e-4)
    assert fit["a"].elo == 400.0 and fit["b"].elo == 800.0 and fit["a"].anchored
    assert fit.draw_elo == theta and fit.first_move_elo is None  # the table's, not fitted
    # A table's first-move term shifts coloured games: the same score as the first mover
    # means a weaker player than as the second.
    coloured = [PairResult("cand", "a", 6, 2, 2, first_mover="cand")]
    plus = fit_all(coloured, {"prior_draws": 0.0}, table=table_of(rungs, theta, first=50.0))
    zero = fit_all(coloured, {"prior_draws": 0.0}, table=table_of(rungs, theta, first=0.0))
    assert plus["cand"].elo == pytest.approx(zero["cand"].elo - 50.0, abs=1e-6)


def test_all_draws_are_rated_when_draw_elo_is_held() -> None:
    table = table_of({"random": 0.0, "a": 400.0}, 120.0)
    fit = fit_all([PairResult("c", "a", 0, 8, 0)], {"prior_draws": 0.0}, table=table)
    assert fit["c"].elo == pytest.approx(400.0, abs=1e-6)


def test_game_information_matches_its_definition() -> None:
    """Fisher information = sum over outcomes of P * (d log P / dd)^2, by finite differences;
    with no draws it is the logistic's c^2 p (1 - p)."""
    c = 1 / ELO_PER_NATURAL_UNIT
    for d, theta in ((0.0, 100.0), (200.0, 100.0), (-350.0, 250.0), (150.0, 0.0)):

        def probs(x: float, theta: float = theta) -> tuple[float, float, float]:
            win, loss = logistic_score(x - theta), logistic_score(-x - theta)
            return win, 1 - win - loss, loss

        h = 1e-4
        expected = sum(
            p * ((math.log(q) - math.log(r)) / (2 * h)) ** 2
            for p, q, r in zip(probs(d), probs(d + h), probs(d - h), strict=True)
            if p > 0
        )
        assert game_information(d, theta) == pytest.approx(expected, rel=1e-5)
    p = logistic_score(150.0)
    assert game_information(150.0, 0.0) == pytest.approx(c**2 * p * (1 - p), rel=1e-9)


def test_plan_pairs_for_one_match_is_the_information_bound() -> None:
    """Two rungs: half-width = 1.96 / sqrt(2 n I) <= target, so n = ceil((1.96/target)^2 / 2I)."""
    elo, theta = {"random": 0.0, "x": 200.0}, 100.0
    n = plan_pairs(["random", "x"], elo, theta, [("x", "random")], target=15.0)
    info = game_information(200.0, theta)
    assert n == math.ceil((1.959964 / 15.0) ** 2 / (2 * info))
    assert 1.959964 / math.sqrt(2 * n * info) <= 15.0 < 1.959964 / math.sqrt(2 * (n - 1) * info)


def test_neighbour_rungs_of_an_estimate() -> None:
    rungs = {"random": 0.0, "a": 200.0, "b": 400.0, "c": 600.0}
    assert neighbour_rungs(300.0, rungs) == ["a", "b"]
    assert neighbour_rungs(400.0, rungs) == ["b", "c"]
    assert neighbour_rungs(-50.0, rungs) == ["random", "a"]  # below the ladder: the two lowest
    assert neighbour_rungs(900.0, rungs) == ["b", "c"]  # above it: the two highest
    assert neighbour_rungs(300.0, rungs, count=2) == ["random", "a", "b", "c"]
    assert nearest_rung(290.0, rungs) == "a" and nearest_rung(310.0, rungs) == "b"
    assert nearest_rung(300.0, rungs) == "a"  # a tie goes to the lower rung


def test_gallop_rung_jumps_while_every_game_went_one_way() -> None:
    rungs = {f"r{i}": 100.0 * i for i in range(8)}

    def won(*names: str, draws: int = 0, losses: int = 0) -> list[PairResult]:
        return [PairResult("cand", n, 2 - draws - losses, draws, losses) for n in names]

    assert gallop_rung([], rungs) is None  # no game yet: the probe's rung decides
    assert gallop_rung(won("r0"), rungs) == "r1"  # one rung met: one further
    assert gallop_rung(won("r0", "r1"), rungs) == "r3"  # two: two further
    assert gallop_rung(won("r0", "r1", "r3"), rungs) == "r7"  # three: four further
    assert gallop_rung(won("r0", "r1", "r3", "r5"), rungs) == "r7"  # capped at the top
    assert gallop_rung(won("r0", "r7"), rungs) is None  # nothing left above
    assert gallop_rung(won("r0") + won("r1", draws=1), rungs) is None  # a draw: neighbours
    assert gallop_rung(won("r3") + won("r1", losses=1), rungs) is None  # both ways
    assert gallop_rung(won("r6", losses=2), rungs) == "r5"  # lost all: downwards
    assert gallop_rung(won("r6", "r5", losses=2), rungs) == "r3"
    assert gallop_rung(won("r0", losses=2), rungs) is None  # nothing left below
    other = PairResult("x", "y", 0, 2, 0)  # not a rung's game
    assert gallop_rung([*won("r2"), other], rungs) == "r3"


def test_a_candidate_far_above_where_its_games_begin_reaches_its_rungs(
    server, tmp_path, config
) -> None:
    """The first candidate's games begin at the weakest rung. One that beats every rung
    gallops: the probe, then one rung on, two, then the top; there the neighbours take over."""
    noisy = [f"noisy:{p}:minimax:1" for p in ("0.9", "0.8", "0.7", "0.6", "0.5")]
    table_file = tmp_path / "ladder.csv"
    write_table(
        table_of({n: 100.0 * i for i, n in enumerate(["random", *noisy])}, 90.0), table_file
    )
    ladder = "[" + ",".join(["random", *noisy]) + "]"
    cfg = rated_config(config, table_file, ladder=ladder, candidate_games=10)
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    worker = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path)
    assert worker.ladder.play_rated(1, ladder_player("minimax:4")) == 5
    met = [r.b for r in worker.results() if r.a == "v1"][::2]  # two rows a pair: by colour
    assert met == ["random", noisy[0], noisy[2], noisy[4], noisy[3]], met  # then neighbours


def test_read_table_errors_name_the_file(tmp_path) -> None:
    path = tmp_path / "t.csv"
    write_table(table_of({"random": 0.0, "minimax:1": 800.0}, 90.0), path)
    assert read_table(path).ratings == {"random": 0.0, "minimax:1": 800.0}
    path.write_text(path.read_text().replace("minimax:1,800.00", "minimax:1,lots"))
    with pytest.raises(ValueError, match=r"t\.csv, line \d+"):
        read_table(path)
    path.write_text(path.read_text().replace("# schema_version: 1", "# schema_version: 9"))
    with pytest.raises(ValueError, match="newer"):
        read_table(path)


def test_pairs_grow_by_the_squared_ratio_of_the_fitted_interval_to_the_target() -> None:
    assert rate_ladder.pairs_for_target(4416, 14.9, 15.0) == 4416  # narrow enough: no more
    # +-16.3 after 4,416 pairs (the plan's expectation fell short): (16.3/15)^2 more, +2%.
    grown = rate_ladder.pairs_for_target(4416, 16.3, 15.0)
    assert grown == math.ceil(4416 * (16.3 / 15) ** 2 * 1.02) == 5319
    assert rate_ladder.pairs_for_target(100, 30.0, 15.0) == 408


def test_results_round_trip_and_errors_name_the_line(tmp_path) -> None:
    path = tmp_path / "t.results.csv"
    rows = [
        PairResult("minimax:1", "random", 40, 0, 0, first_mover="minimax:1"),
        PairResult("minimax:1", "random", 39, 1, 0, first_mover="random"),
        PairResult("minimax:2", "minimax:1", 3, 30, 7),
    ]
    write_results(rows, path)
    assert read_results(path) == rows
    assert results_path(tmp_path / "t.csv") == path
    path.write_text(path.read_text().replace("39,1,0", "39,-1,0"))
    with pytest.raises(ValueError, match=r"t\.results\.csv, line 3: needs two players"):
        read_results(path)
    path.write_text("a,b,wins\n")
    with pytest.raises(ValueError, match="line 1: expected the columns"):
        read_results(path)


def test_the_shipped_table_is_final_within_15_elo_and_refits_from_its_games(config) -> None:
    """The table `evaluation=rated` uses: every rung within +-15 Elo (95%), rungs in rising
    order, and exactly what its shipped game counts give when fitted again."""
    table = read_table(PACKAGE_TABLE)
    assert table.meta["status"] == "final"
    elos = [row.elo for row in table.rows]
    assert elos == sorted(elos) and table.rows[0].player == "random" and elos[0] == 0.0
    for row in table.rows[1:]:
        assert row.upper - row.elo <= 15.0 and row.elo - row.lower <= 15.0, row
    cfg = OmegaConf.to_container(config("evaluation=rated"), resolve=True)
    settings = EvalSettings.from_config(cfg)
    assert settings.table is not None
    assert [ladder_player(s).name for s in settings.ladder] == [r.player for r in table.rows]
    rows = read_results(results_path(PACKAGE_TABLE))
    assert sum(r.wins + r.draws + r.losses for r in rows) == sum(r.games for r in table.rows) // 2
    refit = fit_all(rows, cfg["evaluation"]["elo"])
    assert refit.draw_elo == pytest.approx(table.draw_elo, abs=0.01)
    for row in table.rows:
        assert refit[row.player].elo == pytest.approx(row.elo, abs=0.01)
        assert refit[row.player].upper == pytest.approx(row.upper, abs=0.01)


def test_the_extended_table_keeps_the_shipped_one_and_refits_its_top_rungs(config) -> None:
    """The table the fast player's generations are rated on: the shipped table's rows unchanged,
    then rungs above its top up to the learned evaluation's own first file at fixed depths,
    each exactly what its games give with the shipped rungs held (rate_ladder --extend)."""
    base, table = read_table(PACKAGE_TABLE), read_table(EXTENDED_TABLE)
    assert table.rows[: len(base.rows)] == base.rows
    assert (table.draw_elo, table.first_move_elo) == (base.draw_elo, base.first_move_elo)
    top = table.rows[len(base.rows) :]
    assert top and all(ladder_player(r.player).name == r.player for r in top)  # from any cwd
    elos = [row.elo for row in table.rows]
    assert elos == sorted(elos)
    rows = read_results(results_path(EXTENDED_TABLE))
    assert rows[: len(read_results(results_path(PACKAGE_TABLE)))] == read_results(
        results_path(PACKAGE_TABLE)
    )
    new = [r for r in rows if r.a in {t.player for t in top}]
    elo_cfg = OmegaConf.to_container(config(), resolve=True)["evaluation"]["elo"]
    refit = fit_all(new, elo_cfg, table=base)
    for row in top:
        assert refit[row.player].elo == pytest.approx(row.elo, abs=0.01)
        assert refit[row.player].upper == pytest.approx(row.upper, abs=0.01)


# ----------------------------------------------------------------------------- the evaluator


def rated_config(config, table: Path, **evaluation) -> dict:
    settings = {
        "every_versions": 1,
        "simulations": 8,
        "ladder": "[random,minimax:1,minimax:2]",
        "ladder_table": str(table),
        "candidate_games": 8,
        "probe_games": 2,
        "gating": "false",
        "every_min": 0,  # a rating whenever the worker steps
        "early_every_min": 0,
    } | evaluation
    overrides = ["replay.namespace=t", "game.max_plies=150"]
    overrides += [f"evaluation.{k}={v}" for k, v in settings.items()]
    return OmegaConf.to_container(config(*overrides), resolve=True)


def publish(channel: WeightsChannel, version: int, meta: dict | None) -> None:
    torch.manual_seed(version)
    data = encode_checkpoint(CheckersNet(TINY), step=10 * version, version=version)
    channel.publish(data, version, meta)


def test_evaluator_with_a_table_plays_no_rung_games_and_writes_the_curve(
    server, tmp_path, config
) -> None:
    table_file = tmp_path / "ladder.csv"
    write_table(
        table_of({"random": 0.0, "minimax:1": 800.0, "minimax:2": 1050.0}, 90.0), table_file
    )
    cfg = rated_config(config, table_file)
    settings = EvalSettings.from_config(cfg)
    assert settings.table is not None and settings.table.ratings["minimax:2"] == 1050.0
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    # v2 came after the run was stopped for two hours: the run's own clock skips that.
    publish(channel, 1, {"step": 10, "positions": 900, "t": 1000.0, "run_s": 5.0})
    publish(channel, 2, {"step": 50, "positions": 4321, "t": 8290.5, "run_s": 95.5})
    worker = EvaluatorWorker(settings, client, tmp_path)
    assert worker.step()  # v1 made best and rated, v2 rated
    rows = worker.results()
    rung_names = {"random", "minimax:1", "minimax:2"}
    assert not [r for r in rows if r.a in rung_names and r.b in rung_names]  # no rung games
    for v in (1, 2):
        games = sum(r.wins + r.draws + r.losses for r in rows if r.a == f"v{v}")
        assert games == 8
    # The first candidate's probe is against the weakest rung.
    first_rows = [r for r in rows if r.a == "v1"]
    assert first_rows[0].b == "random"

    ratings = worker.ratings.current()
    assert ratings["minimax:1"].elo == 800.0 and ratings.draw_elo == 90.0
    with (tmp_path / EVAL_DIR / CURVE_CSV).open() as f:
        curve = list(csv.DictReader(f))
    assert [row["version"] for row in curve] == ["1", "2"]
    assert [row["step"] for row in curve] == ["10", "50"]
    assert [row["positions"] for row in curve] == ["900", "4321"]
    assert [row["wall_s"] for row in curve] == ["5.0", "95.5"]
    for row in curve:
        p = ratings[f"v{row['version']}"]
        assert float(row["elo"]) == pytest.approx(p.elo, abs=0.051)
        assert float(row["lower"]) == pytest.approx(p.lower, abs=0.051)
        assert float(row["upper"]) == pytest.approx(p.upper, abs=0.051)
        assert int(row["games"]) == 8
    assert (tmp_path / EVAL_DIR / CURVE_PNG).stat().st_size > 10_000
    metrics = read_eval_metrics(client, "t")
    assert metrics["eval/step"] == 50.0 and metrics["eval/positions"] == 4321.0
    assert metrics["eval/games"] == 8.0

    # Weights published without metadata (an older learner): the step from their header.
    publish(channel, 3, None)
    assert worker.step()
    with (tmp_path / EVAL_DIR / CURVE_CSV).open() as f:
        last = list(csv.DictReader(f))[-1]
    assert last["version"] == "3" and last["step"] == "30" and last["positions"] == ""


def test_the_evaluator_skips_the_untrained_network_and_rates_by_the_clock_cheaper_early(
    server, tmp_path, config
) -> None:
    """The step-0 network is never rated; a version of the run's first early_min minutes plays
    early_games, a later one candidate_games; a rating waits every_min (early_every_min early)
    from the start of the previous one."""
    table_file = tmp_path / "ladder.csv"
    write_table(
        table_of({"random": 0.0, "minimax:1": 800.0, "minimax:2": 1050.0}, 90.0), table_file
    )
    cfg = rated_config(
        config, table_file, every_min=60, early_min=10, early_games=4, candidate_games=8
    )
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    worker = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path)

    def games(version: int) -> int:
        return sum(r.wins + r.draws + r.losses for r in worker.results() if r.a == f"v{version}")

    publish(channel, 1, {"step": 0, "positions": 0, "t": 1000.0, "run_s": 5.0})
    assert not worker.step()  # v1 is the first best, but untrained: nothing played
    assert channel.version("best") == 1 and worker.results() == []
    publish(channel, 2, {"step": 50, "positions": 1200, "t": 1060.0, "run_s": 65.0})
    assert worker.step() and games(2) == 4  # early: early_every_min 0, early_games 4
    publish(channel, 3, {"step": 900, "positions": 9000, "t": 1700.0, "run_s": 705.0})
    assert not worker.step() and games(3) == 0  # past early_min: every_min 60 from v2's start
    client.hset(done_key("t"), "last_started", "0")  # as if an hour went by
    assert worker.step() and games(3) == 8 and games(1) == 0
    # The untrained first best stays unrated after its metadata leaves the channel.
    for v in range(4, 5 + KEEP_VERSIONS):
        publish(
            channel, v, {"step": 100 * v, "positions": 900 * v, "t": 1700.0 + v, "run_s": 705.0 + v}
        )
    assert channel.meta(1) == {}
    client.hset(done_key("t"), "last_started", "0")
    assert worker.step() and games(1) == 0
    with (tmp_path / EVAL_DIR / CURVE_CSV).open() as f:
        assert "1" not in [row["version"] for row in csv.DictReader(f)]
    # A warm start's network is rated at step 0.
    warm = json.loads(json.dumps(cfg))
    warm["learner"]["init_weights"] = "some.safetensors"
    assert EvalSettings.from_config(warm).warm_start
    assert not EvalSettings.from_config(cfg).warm_start


def test_the_curve_keeps_where_the_run_stood_when_the_learner_publishes_during_the_games(
    server, tmp_path, config, monkeypatch
) -> None:
    """A fast learner publishes more than KEEP_VERSIONS versions while one candidate plays its
    games, so the channel has dropped the candidate's metadata by the time it is rated: the
    curve still carries its positions and its publication time on the run's clock."""
    table_file = tmp_path / "ladder.csv"
    write_table(
        table_of({"random": 0.0, "minimax:1": 800.0, "minimax:2": 1050.0}, 90.0), table_file
    )
    settings = EvalSettings.from_config(rated_config(config, table_file, every_versions=2))
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    publish(channel, 1, {"step": 0, "positions": 0, "t": 1000.0, "run_s": 5.0})
    publish(channel, 2, {"step": 20, "positions": 1234, "t": 1060.0, "run_s": 65.0})
    worker = EvaluatorWorker(settings, client, tmp_path)
    play_ladder = worker.ladder.play

    def publish_meanwhile(version, player):
        if version == 2:
            for v in range(3, 4 + KEEP_VERSIONS):
                publish(channel, v, {"step": 10 * v, "positions": 600 * v, "t": 1100.0 + v})
        return play_ladder(version, player)

    monkeypatch.setattr(worker.ladder, "play", publish_meanwhile)
    assert worker.step()
    assert channel.meta(2) == {}  # gone from the channel while v2 played
    with (tmp_path / EVAL_DIR / CURVE_CSV).open() as f:
        rows = {row["version"]: row for row in csv.DictReader(f)}
    assert rows["2"]["positions"] == "1234" and rows["2"]["wall_s"] == "65.0"


def test_table_settings_are_checked(tmp_path, config) -> None:
    table_file = tmp_path / "ladder.csv"
    write_table(table_of({"random": 0.0, "minimax:1": 800.0}, 90.0), table_file)
    with pytest.raises(
        ValueError, match=r"\['minimax:2'\] are not in the table.*evaluation=default"
    ):
        EvalSettings.from_config(rated_config(config, table_file))
    # A missing table is refused by the config's schema, naming the key and the file
    with pytest.raises(ValueError, match=r"evaluation\.ladder_table=.*no file .*missing\.csv"):
        EvalSettings.from_config(rated_config(config, tmp_path / "missing.csv"))
    with pytest.raises(ValueError, match="minimax weights"):
        EvalSettings.from_config(
            rated_config(
                config, table_file, ladder="[random,minimax:1]", **{"baseline.weights.king": 150}
            )
        )
    with pytest.raises(ValueError, match=r"evaluation\.candidate_games"):
        EvalSettings.from_config(
            rated_config(config, table_file, ladder="[random,minimax:1]", candidate_games=7)
        )


def test_rated_ladder_stopped_mid_candidate_resumes_to_the_same_games(
    server, tmp_path, config
) -> None:
    table_file = tmp_path / "ladder.csv"
    write_table(
        table_of({"random": 0.0, "minimax:1": 800.0, "minimax:2": 1050.0}, 90.0), table_file
    )
    cfg = rated_config(config, table_file, candidate_games=10)
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    publish(channel, 1, None)
    first = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path / "a")
    first.ensure_best()
    checks = iter(range(100))
    first.ctx.stopping = lambda: next(checks) >= 2  # type: ignore[method-assign]  # probe + 2 pairs
    assert not first.step()
    assert sum(r.wins + r.draws + r.losses for r in first.results()) == 6
    resumed = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path / "a")
    assert resumed.step()
    assert sum(r.wins + r.draws + r.losses for r in resumed.results()) == 10

    cfg["replay"]["namespace"] = "u"  # the same candidate uninterrupted
    channel_u = WeightsChannel(client, namespace="u")
    publish(channel_u, 1, None)
    whole = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path / "b")
    assert whole.step()
    assert whole.results() == resumed.results()


def test_the_wall_time_axis_is_the_runs_clock_else_the_publication_times() -> None:
    wall = wall_seconds
    assert wall({1: {"t": 1000.0, "run_s": 5.0}, 2: {"t": 9000.0, "run_s": 65.0}}) == {
        1: 5.0,
        2: 65.0,
    }
    # A run begun before the learner sent its clock, or one bad value: the publication times.
    for run_s in (None, "soon", -3.0, math.nan, True):
        info = {1: {"t": 1000.0}, 2: {"t": 1090.5, "run_s": 65.0}, 3: {"t": 1200.0}}
        info[1]["run_s"] = run_s
        assert wall(info) == {1: 0.0, 2: 90.5, 3: 200.0}
    assert wall({1: {"t": "x"}, 2: {"step": 3}}) == {1: None, 2: None}
    assert wall({}) == {}
