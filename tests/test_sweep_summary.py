"""scripts/sweep_summary.py reads an arm's figures from its JSON files, and from the logs of the
runs made before those existed (the arms recorded under docs/results/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import load_script


@pytest.fixture(scope="module")
def sweep_summary():
    return load_script("sweep_summary")


def _arm(path: Path, overrides: list[str]) -> Path:
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    return path


def test_an_arm_is_read_from_its_json_files(tmp_path, sweep_summary):
    run = _arm(tmp_path / "sweep-window160k", ["run_dir=x", "replay.window_positions=160000"])
    (run / "summary.json").write_text(
        json.dumps(
            {"resumed": False, "step": 15123, "version": 80, "games": 4567, "positions": 480000}
        )
    )
    figures = {"player_a": "a", "player_b": "minimax:4", "games": 312, "wins": 120, "draws": 150}
    figures |= {"losses": 42, "score": 0.625, "elo": 88.7, "elo_lower": 60.2, "elo_upper": 117.9}
    figures |= {"confidence": 0.95, "pentanomial": [1, 10, 80, 50, 15]}
    (run / "final_match.json").write_text(json.dumps(figures))
    row = sweep_summary.summarize(run)
    assert row["run"] == "window160k"
    assert row["overrides"] == "replay.window_positions=160000"  # run_dir is the sweep's own
    assert (row["games"], row["positions"], row["steps"]) == ("4,567", "480,000", "15,123")
    assert row["vs minimax:4"] == "62.5% (+120 =150 -42; Elo +89 [+60, +118]; 312 games)"

    figures |= {"wins": 0, "draws": 0, "losses": 312, "score": 0.0}  # a 0% score: no finite Elo
    figures |= {"elo": None, "elo_lower": None, "elo_upper": -250.0}
    (run / "final_match.json").write_text(json.dumps(figures))
    assert sweep_summary.summarize(run)["vs minimax:4"] == (
        "0.0% (+0 =0 -312; Elo -inf [-inf, -250]; 312 games)"
    )


def test_an_arm_matched_against_minimax_6_adds_those_columns(tmp_path, sweep_summary, capsys):
    def match(run: Path, name: str, wins: int, draws: int, losses: int) -> None:
        n = wins + draws + losses
        figures = {"games": n, "wins": wins, "draws": draws, "losses": losses}
        figures |= {"score": (wins + draws / 2) / n, "elo": 10.0, "elo_lower": -20.0}
        (run / name).write_text(json.dumps(figures | {"elo_upper": 40.0}))

    six = _arm(tmp_path / "sweep-gumbel16", ["mcts.root_policy=gumbel"])
    match(six, "final_match.json", 200, 80, 32)
    match(six, "final_match_minimax6.json", 100, 120, 92)
    four = _arm(tmp_path / "sweep-control", [])
    match(four, "final_match.json", 190, 89, 33)
    row = sweep_summary.summarize(six)
    assert row["vs minimax:6"] == "51.3% (+100 =120 -92; Elo +10 [-20, +40]; 312 games)"
    assert sweep_summary.summarize(four)["vs minimax:6"] == ""
    assert sweep_summary.main([str(six), str(four)]) == 0
    table = capsys.readouterr().out.splitlines()
    # neither run is rated on a table, so no crossing column: the minimax:6 match alone
    assert table[0].endswith("| vs minimax:4 | vs minimax:6 |")
    assert table[3].endswith("| 75.2% (+190 =89 -33; Elo +10 [-20, +40]; 312 games) |  |")


def test_an_older_arm_is_read_from_its_logs(tmp_path, sweep_summary, capsys):
    run = _arm(tmp_path / "sweep-control", ["run_dir=x", "learner.time_limit_min=20"])
    done = {"resumed": False, "step": 5067, "version": 30, "games": 1574, "positions": 162196}
    (run / "__main__.log").write_text(f"[...][learner.run][INFO] - run finished: {done}\n")
    (run / "final_match.log").write_text(
        "ckpt vs minimax:4: 312 games, +69 =143 -100 (W/D/L for ckpt), score 45.0%, "
        "Elo -35 [-63, -6] (95%), pairs 0/½/1/1½/2: [10, 30, 60, 40, 16]\n"
    )
    unfinished = _arm(tmp_path / "sweep-late", ["replay.window_positions=40000"])
    assert sweep_summary.main([str(run), str(unfinished)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2] == (
        "| control | (defaults) | 1,574 | 162,196 | 5,067 | "
        "45.0% (+69 =143 -100; Elo -35 [-63, -6]; 312 games) |"
    )
    assert table[3] == "| late | replay.window_positions=40000 |  |  |  | (no match yet) |"


def test_the_plot_tells_a_rated_run_from_an_unrated_one(tmp_path, sweep_summary):
    rated = _arm(tmp_path / "sweep-rated", ["evaluation=rated"])
    (rated / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump({"evaluation": {"ladder_table": "package"}})
    )
    unrated = _arm(tmp_path / "sweep-unrated", [])
    (unrated / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump({"evaluation": {"ladder_table": None}})
    )
    bare = tmp_path / "sweep-bare"  # an old copy under docs/results/ without its config
    bare.mkdir()
    assert sweep_summary.ladder_table(rated) is not None
    assert sweep_summary.ladder_table(unrated) is None
    assert sweep_summary.ladder_table(bare) is None


def _png_width(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")  # the IHDR chunk's width


def test_the_plot_draws_a_rated_curve_and_a_match_panel_only_when_an_arm_has_a_match(
    tmp_path, sweep_summary
):
    from evaluation.ladder.report import CurvePoint, write_curve_csv

    run = _arm(tmp_path / "sweep-rated", ["evaluation=rated"])
    (run / ".hydra" / "config.yaml").write_text(
        yaml.safe_dump({"evaluation": {"ladder_table": "package"}})
    )
    (run / "eval").mkdir()
    points = [
        CurvePoint(
            version=v,
            step=100 * v,
            wall_s=60.0 * v,
            positions=1000 * v,
            elo=e,
            lower=e - 100,
            upper=e + 100,
            games=32,
        )
        for v, e in [(1, 300.0), (20, 1600.0), (40, 1900.0)]
    ]
    write_curve_csv(points, run / "eval" / "curve.csv")
    rows = [sweep_summary.summarize(run)]
    assert rows[0]["reaches minimax:4"].endswith("]")  # crossed on the table's minimax:4
    sweep_summary.plot([run], rows, tmp_path / "curves.png")
    assert _png_width(tmp_path / "curves.png") == 1100  # Elo and loss: no empty match panel

    figures = {"player_a": "a", "player_b": "minimax:4", "games": 312, "wins": 120, "draws": 150}
    figures |= {"losses": 42, "score": 0.625, "elo": 88.7, "elo_lower": 60.2, "elo_upper": 117.9}
    (run / "final_match.json").write_text(json.dumps(figures))
    rows = [sweep_summary.summarize(run)]
    sweep_summary.plot([run], rows, tmp_path / "with-match.png")
    assert _png_width(tmp_path / "with-match.png") == 1600
