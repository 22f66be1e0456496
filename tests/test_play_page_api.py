"""The page's routes beside the core API, on a real server: opponents by name with the ladder
table's ratings (and every suggested opponent plays), annotated PDN read and saved whole, a
collection with bad games, the favicon."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from play_helpers import REPO, Server, make_folders

from game.pdn import read_pdn, write_pdn
from game.pdn_lines import line_to_json

DATA = Path(__file__).resolve().parent / "data"
TABLE = REPO / "evaluation" / "ladder" / "data" / "ladder_ratings.csv"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("page-api")
    runs, models, _ = make_folders(root)
    # The learned evaluation of ab+nn beside the networks: a safetensors file, not a network.
    shutil.copy(REPO / "game" / "data" / "nneval-v1.safetensors", models / "nneval-v1.safetensors")
    srv = Server(
        runs, models, root / "server.log", "default_simulations=8", "runs.live_within_s=86400"
    )
    srv.runs_dir = runs
    yield srv
    srv.stop()


def table_rating(player: str) -> int:
    lines = [line for line in TABLE.read_text().splitlines() if not line.startswith("#")]
    for row in csv.DictReader(lines):
        if row["player"] == player:
            return round(float(row["elo"]))
    raise KeyError(player)


def test_opponents_have_names_and_the_ladder_tables_ratings(server):
    answer = server.get("/api/opponents")
    by_spec = {o["spec"]: o for o in answer["opponents"]}
    assert answer["default"] == "net.safetensors:sims=16"  # the server's --player
    assert by_spec["minimax:4"]["rating"]["elo"] == table_rating("minimax:4")
    assert by_spec["minimax:6"]["strength"].startswith(f"about +{table_rating('minimax:6')} on")
    assert by_spec["random"]["rating"]["elo"] == 0
    abnn = by_spec["ab+nn:t200,tm"]
    assert abnn["name"] == "alpha-beta + learned evaluation, 200 ms a move"
    assert abnn["rating"] is None and "81.6% against minimax:t200" in abnn["strength"]
    assert answer["draw_offer"]["accept_below_cp"] == 30
    # Only networks are offered: not the learned evaluation, not a pickle with the suffix.
    files = {spec.split(":")[0] for spec in by_spec if ".safetensors" in spec}
    assert "nneval-v1.safetensors" not in files and "pickled.safetensors" not in files
    assert "net.safetensors" in files
    assert by_spec["net.safetensors:sims=8"]["name"] == "network net (MCTS), 8 visits a move"
    config = server.get("/api/config")
    assert not any("nneval" in n for n in config["networks"])


def test_every_suggested_opponent_plays(server):
    for o in server.get("/api/opponents")["opponents"]:
        status, answer = server.request(
            "POST", "/api/move", {"moves": ["11-15", "23-19"], "player": o["spec"]}
        )
        assert status == 200, (o["spec"], answer)
        assert answer["move"], o["spec"]


def test_an_annotated_file_saved_through_the_server_is_the_same_file(server):
    text = (DATA / "annotated_checkerboard.pdn").read_text()
    read = server.post("/api/pdn/read", {"pdn": text})
    assert read["errors"] == [] and len(read["games"]) == 2
    first = read["games"][0]
    assert first["line"][4]["comment"] == "The Old Fourteenth proper."
    assert first["line"][4]["variations"][0][0] == {
        "move": "9-13",
        "nags": [2],
        "comment": "loses time",
    }
    games = [
        {"fen": None, "result": g["result"], "tags": g["tags"], "line": g["line"]}
        for g in read["games"]
    ]
    status, saved = server.request("POST", "/api/pdn/save", {"games": games})
    assert status == 200, saved
    expected = read_pdn(text)
    assert saved == write_pdn(expected)
    assert [line_to_json(g.line) for g in read_pdn(saved)] == [g["line"] for g in read["games"]]


def test_a_bad_move_in_a_saved_variation_is_refused_by_name(server):
    line = [{"move": "11-15", "variations": [[{"move": "9-14"}, {"move": "22-19"}]]}]
    status, answer = server.request("POST", "/api/pdn/save", {"games": [{"line": line}]})
    assert status == 400
    assert "game 1: variation 1 of move 1 11-15, move 1... ('22-19')" in answer["detail"]
    bad_mark = [{"move": "11-15", "mark": "!!!"}]
    status, answer = server.request("POST", "/api/pdn/save", {"games": [{"line": bad_mark}]})
    assert status == 400 and "mark '!!!'" in answer["detail"]


def test_a_collection_with_bad_games_is_read_whole(server):
    good = '[Event "g{}"][Black "B{}"][White "W{}"]\n1. 11-15 23-19 *\n'
    bad = '[Event "b{}"][Black "B{}"][White "W{}"]\n1. 11-15 22-18 2. 15-19 *\n'
    text = "".join((bad if k in (3, 40) else good).format(k, k, k) for k in range(60))
    read = server.post("/api/pdn/read", {"pdn": text})
    assert len(read["games"]) == 58
    assert [(e["number"], e["names"], e["move"]) for e in read["errors"]] == [
        (4, "game 'b3' (B3 - W3)", "move 2 ('15-19')"),
        (41, "game 'b40' (B40 - W40)", "move 2 ('15-19')"),
    ]


def test_the_favicon_is_served(server):
    status, body = server.request("GET", "/favicon.ico")
    assert status == 200 and body.startswith("<svg")


def test_a_finished_run_has_no_live_game(server):
    runs = server.runs_dir
    finished = runs / "2025-11-11_00-00-00"
    (finished / "games").mkdir(parents=True)
    shutil.copy(runs / "2026-01-01_00-00-00" / "games" / "live.json", finished / "games")
    status, _ = server.request("GET", "/api/runs/2026-01-01_00-00-00/live")
    assert status == 200  # the stopped run's game of moments ago is live
    (finished / "summary.json").write_text('{"steps": 9}\n')  # its last game, written as it ended
    status, answer = server.request("GET", "/api/runs/2025-11-11_00-00-00/live")
    assert status == 404 and "has finished" in answer["detail"]
