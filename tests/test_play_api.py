"""The play server's API, against the real server process (python -m play) over HTTP."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest
from play_helpers import Server, make_folders, snapshot

from game import Position
from game.pdn import game_from_position, write_pdn

SIMS = 16  # few simulations: the answers' shape and bounds, not their strength, are tested
START_LEGAL = {"9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("play")
    runs, models, secret = make_folders(root)
    return root, runs, models, secret


@pytest.fixture(scope="module")
def server(folders):
    root, runs, models, _ = folders
    before = snapshot(runs)
    srv = Server(
        runs,
        models,
        root / "server.log",
        "limits.max_simulations=400",
        "limits.max_ms=3000",
        "limits.max_minimax_depth=6",
        "limits.max_batch_positions=8",
        "limits.max_moves=50",
        "limits.max_request_bytes=20000",
        "limits.max_concurrent_searches=1",
        "limits.queue_wait_s=0",
        "limits.max_pdn_games=3",
        "limits.max_pdn_chars=15000",
        "limits.max_pdn_moves=30",
        "runs.live_within_s=86400",
    )
    yield srv
    srv.stop()
    assert snapshot(runs) == before, "the server changed the runs folder"


def test_network_move_reports_its_search(server):
    answer = server.post(
        "/api/move", {"moves": ["11-15"], "player": f"net.safetensors:sims={SIMS}"}
    )
    white = {"21-17", "22-17", "22-18", "23-18", "23-19", "24-19", "24-20"}
    assert set(answer["legal"]) == white
    assert answer["move"] in white
    assert answer["turn"] == "W"
    # Every legal move is listed (7 <= top_moves) and the visits below the root are the budget.
    assert {m["move"] for m in answer["top"]} == white
    assert sum(m["visits"] for m in answer["top"]) == SIMS == answer["visits"]
    assert answer["top"][0]["move"] == answer["move"]
    assert sum(m["prior"] for m in answer["top"]) == pytest.approx(1.0, abs=0.01)
    assert sum(answer["wdl"]) == pytest.approx(1.0, abs=0.01)
    assert answer["score"] == pytest.approx(answer["wdl"][0] + answer["wdl"][1] / 2, abs=1e-3)
    assert answer["pv"][0] == answer["move"] and len(answer["pv"]) >= 2
    # The position after the move, for the board.
    after = answer["position"]
    assert after["turn"] == "B" and after["ply"] == 2
    replay = Position()
    replay.play("11-15")
    replay.play(answer["move"])
    assert after["fen"] == replay.fen()


def test_a_multi_jump_is_one_move_with_every_landing_square(server):
    fen = "B:W14,22:B10,9"  # two double jumps: 9x18x25 and 10x17x26
    pos = server.post("/api/position", {"fen": fen})
    assert pos["must_capture"] is True
    legal = {m["move"]: m for m in pos["legal"]}
    assert set(legal) == {"9x18x25", "10x17x26"}
    assert legal["9x18x25"]["squares"] == [9, 18, 25]
    assert sorted(legal["9x18x25"]["captures"]) == [14, 22]
    answer = server.post("/api/move", {"fen": fen, "player": f"net.safetensors:sims={SIMS}"})
    assert answer["move"] in legal
    assert answer["position"]["white"] == []
    assert answer["position"]["result"] == "1-0"  # White has no piece left: Black won


def test_baseline_players_answer_legal_moves(server):
    first = server.post("/api/move", {"player": "minimax:4"})
    again = server.post("/api/move", {"player": "minimax:4"})
    assert first["move"] in START_LEGAL
    assert first["move"] == again["move"]  # a fixed depth is deterministic
    assert first["pv"][0] == first["move"] and first["minimax"]["depth"] == 4
    timed = server.post("/api/move", {"player": "minimax:t50"})
    assert timed["move"] in START_LEGAL
    rnd = server.post("/api/move", {"player": "random:3"})
    assert rnd["move"] in START_LEGAL
    uniform = server.post("/api/move", {"player": f"uniform-mcts:sims={SIMS}"})
    assert uniform["move"] in START_LEGAL and uniform["visits"] == SIMS
    timed_net = server.post("/api/move", {"player": "net.safetensors:ms=100"})
    assert timed_net["move"] in START_LEGAL and timed_net["visits"] > 0


def test_batched_analysis_answers_each_query_by_id(server):
    queries = [
        {"id": "start"},
        {"id": 7, "moves": ["11-15", "23-19"]},
        {"id": "white", "fen": "W:W21:B1"},  # White to move, one man, one move
        {"id": "won", "fen": "W:B1:W"},  # White has no piece: Black has won
    ]
    answer = server.post(
        "/api/analyse", {"network": "net.safetensors", "sims": SIMS, "positions": queries}
    )
    results = answer["results"]
    assert [r["id"] for r in results] == ["start", 7, "white", "won"]
    assert results[0]["move"] in START_LEGAL and results[0]["visits"] == SIMS
    assert results[1]["fen"] == "B:W19,21,22,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,12,15"
    assert results[2]["move"] == "21-17" and results[2]["result"] is None
    assert (
        results[3]["result"] == "1-0" and results[3]["move"] is None and results[3]["wdl"] is None
    )


def test_bad_input_is_named(server):
    status, body = server.request("POST", "/api/move", {"moves": ["11-15", "11-15"]})
    assert status == 400 and "move 2" in body["detail"] and "'11-15'" in body["detail"]
    status, body = server.request("POST", "/api/position", {"fen": "B:W99:B1"})
    assert status == 400 and "99" in body["detail"]
    status, body = server.request("POST", "/api/move", {"player": "alphago"})
    assert status == 400 and "alphago" in body["detail"]
    status, body = server.request("POST", "/api/move", {"player": "net.safetensors:device=cuda"})
    assert status == 400 and "device" in body["detail"]
    status, body = server.request("POST", "/api/move", {"fen": "W:B1:W", "player": "random"})
    assert status == 400 and "over" in body["detail"]
    status, body = server.request("POST", "/api/pdn/parse", {"pdn": "1. 11-15 11-15 *"})
    assert status == 400 and "11-15" in body["detail"]


@pytest.mark.parametrize(
    ("player", "status"),
    [
        ("/etc/passwd.safetensors", 403),  # absolute
        ("../secret.safetensors", 403),  # climbs out
        ("sub/../../secret.safetensors", 403),
        ("escape.safetensors", 403),  # a symbolic link out of the models folder
        ("net.pt", 400),  # not a safetensors file: no player loads it
        ("missing.safetensors", 404),
        ("2026-01-01_00-00-00/checkpoints/latest.safetensors:sims=8", 200),  # a run's network
    ],
)
def test_networks_only_from_inside_the_roots(server, player, status):
    got, body = server.request("POST", "/api/move", {"player": player})
    assert got == status, body
    if status == 200:
        assert body["move"] in START_LEGAL


def test_a_pickle_is_refused_by_the_checkpoint_loader(server):
    status, body = server.request("POST", "/api/move", {"player": "pickled.safetensors"})
    assert status == 400 and "pickled.safetensors" in body["detail"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"player": "net.safetensors:sims=401"}, 422),
        ({"player": "net.safetensors:sims=0"}, 422),
        ({"player": "net.safetensors:ms=3001"}, 422),
        ({"player": "minimax:7"}, 422),
        ({"player": "minimax:t3001"}, 422),
        ({"moves": ["11-15", "23-19"] * 26}, 400),  # 52 moves, over the 50 allowed
        ({"fen": "B:" + "W1," * 100}, 422),  # a FEN longer than any board's
    ],
)
def test_budgets_and_sizes_are_bounded(server, body, status):
    got, answer = server.request("POST", "/api/move", body)
    assert got == status, answer


def test_batch_and_body_sizes_are_bounded(server):
    status, body = server.request("POST", "/api/analyse", {"positions": [{}] * 9})
    assert status == 422 and "at most 8" in body["detail"]
    status, body = server.request("POST", "/api/pdn/parse", {"pdn": "x" * 30000})
    assert status == 413


def test_searches_beyond_the_bound_get_503_and_players_that_do_not_search_never_wait(server):
    answers = {}

    def long_search():
        answers["first"] = server.request(
            "POST", "/api/move", {"player": "net.safetensors:ms=3000"}
        )

    thread = threading.Thread(target=long_search)
    thread.start()
    try:
        while server.get("/api/status")["searches"] == 0:  # wait until it holds the one slot
            assert thread.is_alive(), answers
            time.sleep(0.01)
        status, body = server.request("POST", "/api/move", {"player": "minimax:2"})
        assert status == 503 and "busy" in body["detail"]
        # The slot is still held: a random move and a network's policy (one visit) are served.
        assert server.get("/api/status")["searches"] == 1
        status, body = server.request("POST", "/api/move", {"player": "random:3"})
        assert status == 200 and body["move"] in START_LEGAL, body
        status, body = server.request("POST", "/api/move", {"player": "net.safetensors:sims=1"})
        assert status == 200 and body["visits"] == 1, body
        assert server.get("/api/status")["searches"] == 1
    finally:
        thread.join()
    assert answers["first"][0] == 200
    assert server.get("/api/status")["searches"] == 0


def test_the_host_header_must_name_this_server(server):
    def get(host: str) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.request("GET", "/api/status", headers={"Host": host})
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()

    for host in (f"127.0.0.1:{server.port}", "localhost", f"LOCALHOST:{server.port}", "[::1]:1"):
        status, body = get(host)
        assert status == 200 and body["slots"] == 1, (host, body)
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1.evil.example", "::1"):
        status, body = get(host)
        assert status == 400, (host, body)
        assert body["detail"].startswith(f"Host {host!r} is not a name of this server")


def test_errors_name_paths_relative_to_their_folder(server, folders):
    root = str(folders[0])
    for player, status in (("pickled.safetensors", 400), ("sub/missing.safetensors", 404)):
        got, body = server.request("POST", "/api/move", {"player": player})
        assert got == status and player in body["detail"], body
        assert root not in body["detail"], body
    got, body = server.request("GET", "/api/runs/nope")
    assert got == 404 and root not in body["detail"], body


def test_runs_metrics_and_games(server):
    runs = server.get("/api/runs")
    assert [(r["name"], r["status"]) for r in runs] == [
        ("2026-01-02_00-00-00", "running"),  # metrics.csv written moments ago
        ("2026-01-01_00-00-00", "stopped"),  # no summary.json, metrics.csv an hour old
        ("2025-12-31_00-00-00", "finished"),  # summary.json is there
    ]
    assert runs[2]["summary"] == {"steps": 9, "weights_version": 1}
    line = runs[1]
    assert line["step"] == 100 and line["weights_version"] == 5 and line["games"] == 40
    assert line["network"] == "2026-01-01_00-00-00/checkpoints/latest.safetensors"
    run = server.get("/api/runs/2026-01-01_00-00-00")
    assert run["elo"] == [{"version": 5, "step": 100, "elo": 700.5, "lower": 640.0, "upper": 760.0}]
    assert [r["player"] for r in run["ratings"]] == ["random", "minimax:2", "v5"]
    assert {"file": "games/selfplay.pdn"}.items() <= run["games"][0].items()
    series = server.get("/api/runs/2026-01-01_00-00-00/metrics?keys=selfplay/games")
    assert [row[0] for row in series["selfplay/games"]] == [0, 100]
    assert [row[2] for row in series["selfplay/games"]] == [10.0, 40.0]
    games = server.get("/api/runs/2026-01-01_00-00-00/games/games/selfplay.pdn?format=json")
    # Newest (last in the file) first, each with its number in the file.
    assert [(g["number"], g["moves"]) for g in games] == [
        (2, ["11-15", "23-19"]),
        (1, ["11-15", "23-19", "8-11", "22-17"]),
    ]
    text = server.get("/api/runs/2026-01-01_00-00-00/games/games/selfplay.pdn")
    assert "11-15 23-19" in text


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/runs/..", 403),
        ("/api/runs/%2E%2E", 403),
        ("/api/runs/nope", 404),
        ("/api/runs/2026-01-01_00-00-00/games/games/escape.pdn", 403),  # link out of the run
        ("/api/runs/2026-01-01_00-00-00/games/games/%2E%2E/%2E%2E/%2E%2E/secret.pdn", 403),
        ("/api/runs/2026-01-01_00-00-00/games/checkpoints/latest.safetensors", 403),
        ("/api/runs/2026-01-01_00-00-00/games/eval/ratings.csv", 403),
    ],
)
def test_run_files_only_from_inside_the_run(server, path, status):
    got, body = server.request("GET", path)
    assert got == status, body


def test_live_self_play_game_from_the_run_folder(server):
    got = server.get("/api/runs/2026-01-01_00-00-00/live")
    assert got["moves"] == ["11-15", "23-19", "8-11", "22-17"] and got["opening_plies"] == 3
    assert (got["actor"], got["version"], got["opening"]) == (3, 5, "ACF 1")
    assert got["fen"] == Position().fen() and 0 <= got["age_s"] < 86400
    status, body = server.request("GET", "/api/runs/2026-01-02_00-00-00/live")
    assert status == 404 and "no game in progress" in body["detail"], body  # two days old
    status, body = server.request("GET", "/api/runs/2025-12-31_00-00-00/live")
    assert status == 403, body  # games/live.json links out of the run
    assert server.request("GET", "/api/runs/%2E%2E/live")[0] == 403
    assert server.request("GET", "/api/runs/nope/live")[0] == 404
    config = server.get("/api/config")
    assert config["live_poll_s"] > 0
    # --player names the opponent a new game offers, --network the network that analyses.
    assert config["default_opponent"] == config["default_player"] == "net.safetensors:sims=16"
    assert "ab+nn:t200,tm" in config["players"]


def test_openings_pdn_and_page(server):
    openings = server.get("/api/openings")
    assert len(openings) == 156 and all(len(o["moves"]) == 3 for o in openings)
    pdn = server.post("/api/pdn/write", {"moves": ["11-15", "23-19"], "tags": {"Event": "t"}})
    assert "11-15 23-19" in pdn and '[Event "t"]' in pdn
    games = server.post("/api/pdn/parse", {"pdn": pdn})
    assert games[0]["moves"] == ["11-15", "23-19"]
    page = server.get("/")
    assert "<svg" in page or 'id="board"' in page
    assert "/api/move" in server.get("/openapi.json")["paths"]
    docs = server.get("/docs")
    assert "/static/swagger/swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()
    assert "SwaggerUIBundle" in server.get("/static/swagger/swagger-ui-bundle.js")


# A step written "10x14" (move 4) as some collections write it; the next move is a capture.
TOLERATED = '[Event "Classic"]\n1. 9-13 22-17 2. 13x22 26x17 3. 11-15 23-19 4. 10x14 19x10 *\n'


def test_pdn_parse_tolerates_a_wrong_separator_and_reports_it(server):
    (game,) = server.post("/api/pdn/parse", {"pdn": TOLERATED})
    assert game["moves"][6:] == ["10-14", "19x10"]
    assert game["warnings"] == [
        "game 1, game 'Classic' (? - ?), move 4: '10x14' read as 10-14 "
        "(a step, written with the wrong separator)"
    ]
    pdn = server.post("/api/pdn/write", {"moves": game["moves"], "tags": game["tags"]})
    assert "4. 10-14 19x10" in pdn


def test_pdn_parse_is_bounded_in_text_games_and_moves(server):
    one = '[Event "e"]\n1. 11-15 24-20 *\n'
    games = server.post("/api/pdn/parse", {"pdn": one * 10})  # reading stops at the third
    assert [g["moves"] for g in games] == [["11-15", "24-20"]] * 3
    status, body = server.request("POST", "/api/pdn/parse", {"pdn": " " * 15001 + one})
    assert status == 422, body
    assert body["detail"] == "PDN text of 15030 characters; at most 15000 (limits.max_pdn_chars)"
    pos, moves = Position(), []
    for _ in range(16):
        moves.append(str(pos.play(pos.legal_moves()[0])))
    game = write_pdn([game_from_position(Position(), moves, "*")])
    status, body = server.request("POST", "/api/pdn/parse", {"pdn": game * 2})  # 32 moves
    assert status == 422, body
    assert "more than 30 moves in this PDN text (limits.max_pdn_moves)" in body["detail"]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"result": '1-0"]\n1. 22-18 *'}, "result '1-0\"]\\n1. 22-18 *': write one of"),
        ({"result": "1-0 1. 22-18"}, "write one of 1-0, 0-1, 1/2-1/2, *"),
        ({"tags": {'Event "x"]\n1. 22-18 [Site': "y"}}, 'tag name \'Event "x"]\\n1. 22-18'),
        ({"tags": {"Event": "x\n1. 22-18 *"}}, "tag Event: the value 'x\\n1. 22-18 *'"),
        ({"tags": {"Event": "x\r1. 22-18 *"}}, "must be text on one line"),
    ],
)
def test_pdn_write_refuses_fields_that_would_inject_movetext(server, body, problem):
    status, answer = server.request("POST", "/api/pdn/write", {"moves": ["11-15"], **body})
    assert status == 400, answer
    assert problem in answer["detail"]


def test_pdn_write_escapes_quotes_in_tag_values(server):
    tags = {"Event": 'a "quoted" name', "Black": 'x"] 1. 22-18 [Site "y'}
    pdn = server.post("/api/pdn/write", {"moves": ["11-15"], "result": "1-0", "tags": tags})
    (game,) = server.post("/api/pdn/parse", {"pdn": pdn})
    assert game["moves"] == ["11-15"] and game["result"] == "1-0"
    assert game["tags"]["Black"] == tags["Black"] and game["tags"]["Event"] == tags["Event"]
