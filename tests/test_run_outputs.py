"""What a run leaves for a person: weights kept, the self-play PDN file, the terminal's lines,
the summary, ratings.csv and the plots. Redis is real (tests/conftest.py); no Ray is needed.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from actors.self_play import play_games
from checkerzero.config import compose
from checkerzero.metrics import draw_plot, elo_points
from checkerzero.network.checkpoint import encode_checkpoint, load_checkpoint, save_checkpoint
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.run_files import (
    ELO_BY_STEP_PNG,
    SELFPLAY_PDN,
    THROUGHPUT_PNG,
    best_name,
    step_name,
)
from checkerzero.store.keys import decisions_key
from checkerzero.store.replay import ReplayStats, ReplayStore, SampleRatio
from checkerzero.store.weights import WeightsChannel
from evaluation.evaluator.records import promoted_versions
from evaluation.ladder.report import CurvePoint, draw_curve, draw_ratings, write_ratings_csv
from evaluation.stats.elo import PairResult
from evaluation.stats.fit import fit_ratings
from game.mcts import UniformInference
from game.openings import load_openings
from game.pdn import read_pdn, write_pdn
from game.record_pdn import record_moves, record_to_pdn
from learner.retention import prune_weights, save_promoted, step_files
from learner.run import Run
from learner.summary import (
    PROGRESS_WIDTH,
    count_text,
    describe_summary,
    progress_text,
    waiting_for_data,
)
from learner.terminal import TerminalFormatter
from learner.trainer import Counters

TINY = ModelConfig(board_size=8, blocks=0, channels=4, policy_channels=2, value_channels=1)


def composed(*overrides: str):
    return compose(list(overrides))


def tiny_net(seed: int) -> CheckersNet:
    torch.manual_seed(seed)
    return CheckersNet(TINY)


# --------------------------------------------------------------------------- weights retention


def test_weights_keep_the_newest_and_every_promoted_version(client, tmp_path):
    weights = tmp_path / "weights"
    channel = WeightsChannel(client, namespace="t")
    for version in range(1, 11):  # published every 10 steps; a checkpoint every 20
        net = tiny_net(version)
        channel.publish(encode_checkpoint(net, step=10 * version, version=version), version)
        if version % 2 == 0:
            save_checkpoint(
                weights / step_name(10 * version), net, step=10 * version, version=version
            )
    # The gate's records: v1 the first best, v3 promoted, v5 rejected, v7 promoted.
    for version, promoted in ((1, True), (3, True), (5, False), (7, True)):
        client.rpush(decisions_key("t"), json.dumps({"version": version, "promoted": promoted}))
    client.rpush(decisions_key("t"), b"not json")  # skipped, not fatal
    assert promoted_versions(client, "t") == [1, 3, 7]

    # v1 and v2 aged out of the channel (it keeps the newest 8): v1 is reported, not invented.
    written = save_promoted(weights, promoted_versions(client, "t"), channel.get)
    assert [p.name for p in written] == [best_name(3), best_name(7)]
    assert (weights / best_name(7)).read_bytes() == channel.get(7)  # the exact published bytes
    model, meta = load_checkpoint(weights / best_name(3))  # a model file the match accepts
    assert (meta.version, meta.step) == (3, 30)
    assert torch.equal(
        model.state_dict()["stem.0.weight"], tiny_net(3).state_dict()["stem.0.weight"]
    )
    assert save_promoted(weights, [3, 7], channel.get) == []  # once

    removed = prune_weights(weights, keep=2)
    assert [p.name for p in removed] == [step_name(s) for s in (20, 40, 60)]
    assert [p.name for p in step_files(weights)] == [step_name(80), step_name(100)]
    assert sorted(p.name for p in weights.iterdir()) == sorted(
        [best_name(3), best_name(7), step_name(80), step_name(100)]
    )
    assert prune_weights(weights, keep=0) == []  # 0 keeps everything


# --------------------------------------------------------------------------- self-play PDN


def deck_games(n: int, seed: int):
    """Quick 8x8 games from random ballots of the ACF deck (uniform search, a 40-ply cap)."""
    cfg = composed(
        "game.max_plies=40",
        "mcts.simulations=2",
        "mcts.leaves_per_game=1",
        f"selfplay.games_in_parallel={n}",
        "selfplay.openings=deck",
        "selfplay.resign=false",
    )
    return play_games(UniformInference(), cfg, n_games=n, seed=seed)


def test_a_game_from_a_ballot_is_written_from_the_initial_position():
    deck = load_openings("deck", 8)
    record = deck_games(1, seed=1)[0]
    ballot = next(o for o in deck if o.id == record.opening_id)
    game = record_to_pdn(record, openings=deck, tags={"Date": "2026.11.23"})
    assert "FEN" not in game.tags and "SetUp" not in game.tags
    assert game.moves == [*ballot.moves, *record_moves(record)]
    assert game.tags["GameType"] == "21" and game.tags["Date"] == "2026.11.23"
    assert game.tags["Opening"].startswith(ballot.name)
    (back,) = read_pdn(write_pdn([game]))  # replays every move from the initial position
    assert back.moves == game.moves and back.tags["GameType"] == "21"
    # Without the deck the same record is a set-up position after the ballot.
    plain = record_to_pdn(record)
    assert plain.tags["FEN"] and plain.moves == record_moves(record)


def test_self_play_games_go_to_one_file_each_game_once(client, tmp_path):
    store = ReplayStore(client, namespace="g", window_positions=10**6)
    records = deck_games(7, seed=2)
    cfg = composed("preset=smoke", f"run_dir={tmp_path}", "logging.pdn_sample_games=3")
    run = Run(cfg)
    for r in records[:4]:
        store.add_game(r.to_bytes(), r.num_decisions)
    assert run._write_games(store) == 3  # the newest three: 2, 3, 4
    assert run._write_games(store) == 0  # nothing new
    for r in records[4:6]:
        store.add_game(r.to_bytes(), r.num_decisions)
    assert run._write_games(store) == 2  # 5 and 6
    # A resumed run (a new Run on the same directory) goes on after what the file holds.
    store.add_game(records[6].to_bytes(), records[6].num_decisions)
    again = Run(cfg)
    assert again._write_games(store) == 1 and again._write_games(store) == 0

    assert [p.name for p in (tmp_path / "games").iterdir()] == [Path(SELFPLAY_PDN).name]
    games = read_pdn((tmp_path / SELFPLAY_PDN).read_text())  # replays every move
    assert [g.tags["Round"] for g in games] == ["2", "3", "4", "5", "6", "7"]
    deck = load_openings("deck", 8)
    for game, record in zip(games, records[1:], strict=True):
        ballot = next(o for o in deck if o.id == record.opening_id)
        assert game.moves == [*ballot.moves, *record_moves(record)] and not game.fen
        for tag in ("Event", "Site", "Date", "Black", "White", "Result", "GameType"):
            assert game.tags[tag], tag
        assert re.fullmatch(r"\d{4}\.\d\d\.\d\d", game.tags["Date"])


# --------------------------------------------------------------------------- terminal, summary


def progress_lines(caplog, positions: int, samples: int, run: Run | None = None) -> list[str]:
    run = run or Run(composed("preset=smoke", "run_dir=/tmp/unused", "learner.time_limit_min=1"))
    trainer = SimpleNamespace(counters=Counters(step=3, samples=samples, version=2))
    stats = ReplayStats(
        window_positions=positions, window_games=2, games_added=2, positions_added=positions
    )
    row = {"selfplay/games_per_s": 0.5, "selfplay/positions_per_s": 20.0}
    row |= {"learner/steps_per_s": 0.0}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="learner.run"):
        run._progress(trainer, stats, row, 12.0, SampleRatio(50.0, min_positions=64))
    return [r.getMessage() for r in caplog.records]


def test_progress_says_what_the_learner_waits_for_and_why_in_words(caplog):
    run = Run(composed("preset=smoke", "run_dir=/tmp/unused", "learner.time_limit_min=1"))
    why, line = progress_lines(caplog, positions=40, samples=0, run=run)
    assert why == (
        "waiting for self-play: the first training step needs 64 positions in the replay "
        "(replay.min_positions), it has 40; the actors are playing"
    )
    # The time left of learner.time_limit_min=1 after 12 s.
    assert line == "0m12s  pos 20.0/s  step 3 (0.00/s)  ETA 0m48s  waiting for data 40/64"
    assert progress_lines(caplog, positions=50, samples=0, run=run) == [
        "0m12s  pos 20.0/s  step 3 (0.00/s)  ETA 0m48s  waiting for data 50/64"
    ]  # said once
    # Past min_positions but trained on all the ratio allows: 100 positions x 50 = 5,000 samples.
    why, line = progress_lines(caplog, positions=100, samples=4990, run=run)
    assert why.startswith("waiting for self-play: each position has been trained on 50 times")
    assert line.endswith("step 3 (0.00/s)  ETA 0m48s  waiting for self-play")
    (line,) = progress_lines(caplog, positions=100, samples=0, run=run)
    assert "waiting" not in line
    # Without a time limit there is no ETA.
    (_, line) = progress_lines(caplog, 40, 0, Run(composed("preset=smoke", "run_dir=/tmp/unused")))
    assert "ETA" not in line


def test_the_progress_line_fits_120_characters_with_every_field_at_its_widest():
    """Every field present and at the widest a run reaches (a cluster's rates, a week's run,
    an early rating's wide interval), with the terminal's time stamp (learner.terminal)."""
    row = {
        "selfplay/games_per_s": 99.9,
        "selfplay/positions_per_s": 9999.4,
        "learner/steps_per_s": 99.94,
        "learner/loss_total": 9.9994,
        "eval/elo": -2345.2,
        "eval/elo_lower": -3344.0,
        "eval/elo_upper": -1346.0,
        "eval/version": 9999.0,
    }
    week = 99 * 3600 + 59 * 60 + 59
    line = progress_text(week, 999_999, row, "waiting for self-play", week)
    assert line == (
        "99h59m  pos 9,999/s  step 999,999 (99.9/s)  loss 9.999"
        "  Elo -2345±999 v9999  ETA 99h59m  waiting for self-play"
    )
    data = progress_text(week, 0, row, waiting_for_data(99_949_999, 10**8), week)
    assert data.endswith("waiting for data 99.9M/100M")
    assert [count_text(n) for n in (9_999, 12_345, 456_000, 1_234_567, 10**8)] == [
        "9,999",
        "12.3k",
        "456k",
        "1.23M",
        "100M",
    ]
    for text in (line, data):
        record = logging.LogRecord("learner.run", logging.INFO, __file__, 1, text, None, None)
        record.created = 2e9
        shown = TerminalFormatter().format(record)
        assert shown.endswith(text) and len(shown) <= 120 and len(text) <= PROGRESS_WIDTH
    # A whole hour's line on a laptop, for the record of what the terminal shows.
    laptop = progress_text(3725, 12_345, row | {"selfplay/games_per_s": 0.0713}, None)
    assert laptop.startswith("1h02m  pos 9,999/s  step 12,345 (99.9/s)")


def test_the_end_of_a_run_reads_as_text(tmp_path):
    summary = {
        "resumed": True,
        "step": 1200,
        "version": 25,
        "games": 310,
        "positions": 21000,
        "elapsed_s": 125.4,
        "run_s": 2520.0,  # with the time before the resume
        "model": "runs/x/checkpoints/latest.safetensors",
        "training_state": "runs/x/checkpoints/state_00001200.safetensors",
        "losses": {"policy": 2.5, "value": 0.75, "total": 3.25},
        "elo": {"version": 20, "elo": 412.0, "lower": 350.0, "upper": None},
    }
    text = describe_summary(summary, tmp_path / "summary.json")
    assert text.startswith(
        "run finished after 2 min 05 s (resumed, 42 min in all): 1,200 training steps,"
        " weights version 25, 310 self-play games, 21,000 positions"
    )
    assert "last losses: total 3.250 (policy 2.500, value 0.750)" in text
    # A run resumed from a state older than the run's clock: no total to give.
    older = describe_summary(summary | {"run_s": None}, tmp_path / "summary.json")
    assert older.startswith("run finished after 2 min 05 s (resumed): 1,200 training steps,")
    assert "newest Elo: +412 [+350, ?] (weights v20, random = 0)" in text
    assert "python -m evaluation.match runs/x/checkpoints/latest.safetensors minimax:4" in text
    # How to play it on the page: the server reads it from the run's runs folder.
    in_runs = describe_summary(summary, Path("runs/x/summary.json"))
    spec = "x/checkpoints/latest.safetensors:sims=200"
    command = f"python -m play --runs runs --player {spec} --network {spec}"
    assert f"play it on the page: {command}" in in_runs
    assert "W&B" not in text  # no W&B mode recorded (a summary of an older run)
    offline = describe_summary(
        summary | {"wandb": {"mode": "offline"}}, Path("runs/x/summary.json")
    )
    assert "W&B (offline): its files are in runs/x/wandb; upload them with" in offline
    assert "wandb sync runs/x/wandb/offline-run-*" in offline
    # A run that never trained says so, and suggests no match with its random network ...
    fresh = summary | {"resumed": False, "step": 0, "version": 1, "losses": None, "elo": None}
    text = describe_summary(fresh, tmp_path / "summary.json")
    assert "0 training steps: this network is untrained" in text
    assert "evaluation.match" not in text
    # ... unless it is a warm start's network.
    text = describe_summary(fresh | {"init_weights": "w.safetensors"}, tmp_path / "summary.json")
    assert "the network is the warm start's" in text and "evaluation.match" in text
    assert "{" not in text


# --------------------------------------------------------------------------- ratings and plots


def ladder_ratings():
    rows = [PairResult("minimax:1", "random", 9, 0, 1)]
    for v, wins in ((9, 3), (10, 5), (100, 8), (20, 6)):
        rows += [PairResult(f"v{v}", "random", wins, 1, 9 - wins)]
        rows += [PairResult(f"v{v}", "minimax:1", wins - 2, 2, 10 - wins)]
    return fit_ratings(rows, {"random": 0.0}, prior_draws=2.0)


def test_ratings_csv_lists_the_ladder_then_versions_in_number_order(tmp_path):
    write_ratings_csv(ladder_ratings(), tmp_path / "ratings.csv")
    names = [line.split(",")[0] for line in (tmp_path / "ratings.csv").read_text().splitlines()]
    assert names == ["player", "random", "minimax:1", "v9", "v10", "v20", "v100"]


def test_rung_labels_sit_inside_the_plot_clear_of_the_axis():
    fig = draw_ratings(ladder_ratings())
    fig.canvas.draw()
    (ax,) = fig.axes
    axes_box = ax.get_window_extent()
    labels = [t for t in ax.texts if t.get_text() in ("random", "minimax:1")]
    assert len(labels) == 2
    for label in labels:
        box = label.get_window_extent()
        assert box.x0 > axes_box.x0 + 2 and box.x1 < axes_box.x1, label.get_text()


def test_a_plot_of_one_point_marks_it():
    one = {"learner/loss_total": [(20, 0.0, 3.2)]}
    fig = draw_plot("loss.png", ("learner/loss_total",), one)
    assert fig.axes[0].lines[0].get_marker() == "o"
    many = {"learner/loss_total": [(10, 0.0, 3.4), (20, 1.0, 3.2)]}
    fig = draw_plot("loss.png", ("learner/loss_total",), many)
    assert fig.axes[0].lines[0].get_marker() in (None, "None", "")


def test_elo_by_step_marks_each_rated_version_once_at_its_step():
    """metrics.csv repeats the newest rating on every row until the next one: the plot shows
    each rated version once, at its weights' step, as a marker with its interval, and draws
    no line through the steps between ratings."""
    series: dict = {}
    rows = [  # (row step, row time, version, weights' step, Elo): v2 repeated over three rows
        (60, 100.0, 2, 50, 300.0),
        (120, 110.0, 2, 50, 300.0),
        (180, 120.0, 2, 50, 300.0),
        (240, 130.0, 5, 200, 650.0),
    ]
    for step, t, version, at, elo in rows:
        for key, value in (
            ("eval/version", version),
            ("eval/step", at),
            ("eval/elo", elo),
            ("eval/elo_lower", elo - 100),
            ("eval/elo_upper", elo + 120),
        ):
            series.setdefault(key, []).append((step, t, float(value)))
    assert elo_points(series) == [(2, 50, 300.0, 200.0, 420.0), (5, 200, 650.0, 550.0, 770.0)]
    fig = draw_plot(ELO_BY_STEP_PNG, ("eval/elo",), series)
    (ax,) = fig.axes
    (marks,) = [line for line in ax.lines if line.get_marker() == "o"]
    assert list(marks.get_xdata()) == [50, 200] and list(marks.get_ydata()) == [300.0, 650.0]
    assert marks.get_linestyle() == "None"
    assert ax.get_xlabel() == "training step" and "Elo" in ax.get_ylabel()
    assert ax.get_xlim()[0] == 0


def test_plots_by_time_count_the_runs_minutes_from_zero():
    """The run's own minutes (learner/wall_s of the same row), never negative, with units."""
    series = {
        "learner/wall_s": [(0, 1000.0, 30.0), (5, 1060.0, 90.0), (9, 1120.0, 150.0)],
        "selfplay/positions_per_s": [(0, 1000.0, 8.0), (5, 1060.0, 11.0), (9, 1120.0, 10.0)],
    }
    fig = draw_plot(THROUGHPUT_PNG, ("selfplay/positions_per_s",), series)
    (ax,) = fig.axes
    assert list(ax.lines[0].get_xdata()) == [0.5, 1.5, 2.5]
    assert ax.get_xlabel() == "minutes since the run started" and ax.get_ylabel() == "per second"
    assert ax.get_xlim()[0] == 0
    # Rows without the run's clock: minutes since the first row.
    del series["learner/wall_s"]
    fig = draw_plot(THROUGHPUT_PNG, ("selfplay/positions_per_s",), series)
    assert list(fig.axes[0].lines[0].get_xdata()) == [0.0, 1.0, 2.0]


def test_the_elo_curve_of_one_point_has_plain_axes_from_zero():
    """One candidate at step 0 once gave a step axis from -0.04 to 0.04 labelled "-40m"."""
    point = CurvePoint(
        version=2, step=0, wall_s=0.0, positions=0, elo=5.0, lower=-200.0, upper=210.0, games=8
    )
    fig = draw_curve([point], {"random": 0.0, "minimax:1": 800.0})
    fig.canvas.draw()
    for ax in fig.axes:
        assert ax.get_xlim()[0] == 0
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels and not [x for x in labels if x.startswith(("-", "\u2212")) or "m" in x]
        assert ax.lines[0].get_linestyle() == "None"  # markers only
    assert [ax.get_xlabel() for ax in fig.axes] == [
        "training step",
        "minutes since the run started",
        "self-play positions",
    ]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
