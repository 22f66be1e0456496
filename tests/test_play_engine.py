"""The JSON-lines analysis engine and the terminal player, run as their commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from play_helpers import REPO, SHIPPED

from evaluation.players.make import make_player
from game import Position
from game.pdn import iter_pdn
from play.__main__ import parse_overrides
from play.cli import pdn_tags, play_game
from play.engine import answer
from play.paths import Roots
from play.players import LimitError, Players
from play.settings import load_settings, shipped_network

START_LEGAL = {"9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"}


def run(module: str, stdin: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, "--models", str(SHIPPED.parent), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )


def test_engine_answers_each_query_in_order_by_id():
    queries = [
        {"id": "a", "moves": ["11-15"], "sims": 16},
        {"id": 2, "fen": "B:W14,22:B10,9", "network": "laptop-60min.safetensors", "ms": 50},
        "",
        {"id": "m", "action": "move", "player": "minimax:4"},
        {"id": "bad", "moves": ["11-15", "11-15"]},
        {"id": "big", "sims": 10**9},
        {"id": "out", "network": "../../etc/x.safetensors"},
        {"id": "d", "action": "move", "moves": ["11-15"]},
    ]
    lines = "\n".join(q if isinstance(q, str) else json.dumps(q) for q in queries) + "\nnot json\n"
    done = run("play.engine", lines)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["a", 2, "m", "bad", "big", "out", "d", None]
    a = answers[0]
    assert a["turn"] == "W" and a["visits"] == 16 and a["pv"][0] == a["move"]
    # The answer names the budget searched with, not the default network's (sims=200).
    assert a["network"] == "long-320min.safetensors:sims=16" and a["budget"] == {"sims": 16}
    assert answers[1]["network"] == "laptop-60min.safetensors:ms=50"
    assert answers[1]["budget"] == {"ms": 50}
    assert sum(m["visits"] for m in a["top"]) == 16
    assert answers[1]["move"] in ("9x18x25", "10x17x26") and answers[1]["visits"] > 0
    assert answers[2]["move"] in START_LEGAL and answers[2]["minimax"]["depth"] == 4
    assert "move 2" in answers[3]["error"]
    assert "sims must be" in answers[4]["error"]
    assert "'..'" in answers[5]["error"]
    # A move query without a player: the default opponent, alpha-beta with the learned evaluation.
    assert answers[6]["player"] == "ab+nn:t200,tm" and answers[6]["minimax"]["depth"] >= 1
    assert answers[6]["move"] in {"22-18", "22-17", "23-19", "23-18", "24-20", "24-19", "21-17"}
    assert "not JSON" in answers[7]["error"]


def test_engine_answers_lines_python_will_not_read_and_carries_on():
    lines = [
        '{"id": "digits", "sims": ' + "1" * 5000 + "}",  # beyond int()'s 4,300 digits
        "[" * 200_000 + "]" * 200_000,  # deeper than the JSON reader's recursion
        '{"id": "huge", "moves": ["' + "1" * 20_000_000 + '"]}',  # a 20 MB line
        '{"id": "long", "moves": ["' + "1" * 500_000 + '"]}',  # under the line cap
        json.dumps({"id": "x" * 1000, "action": "move", "player": "random"}),
        "\udcff\udcfe not text",  # bytes that are not UTF-8 (surrogateescape below)
        json.dumps({"id": "after", "action": "move", "player": "random:1"}),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "play.engine", "--models", str(SHIPPED.parent)],
        input="\n".join(lines).encode("utf-8", "surrogateescape") + b"\n",
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stdout) < 5000  # no echo of the 20 MB line nor of the 500 KB move
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [None, None, None, "long", None, None, "after"]
    errors = [a.get("error", "") for a in answers]
    assert "Exceeds the limit (4300 digits)" in errors[0]
    assert errors[1] == "not a query: JSON nested too deep"
    assert errors[2] == "line longer than 1000000 bytes; a query is a short JSON object"
    assert errors[3].startswith("move 1: 500000 characters, not a move (at most 64; it begins")
    assert len(errors[3]) < 600  # the message quoted the move twice, a megabyte
    assert errors[4] == "id must be a number or a string of at most 100 characters"
    assert errors[5].startswith("not UTF-8")
    assert answers[6]["move"] in START_LEGAL and answers[6]["player"] == "random:1"


def test_engine_stops_quietly_when_its_reader_goes():
    engine = subprocess.Popen(
        [sys.executable, "-m", "play.engine", "--models", str(SHIPPED.parent)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    engine.stdout.close()  # the reader goes before the first answer
    query = json.dumps({"id": 1, "action": "move", "player": "random"}) + "\n"
    _, err = engine.communicate((query * 3).encode(), timeout=300)
    assert engine.returncode == 0, err.decode()
    assert err == b"", err.decode()


def test_a_query_beyond_the_total_simulations_is_refused_with_an_error_object():
    settings = load_settings({"torch_threads": 1, "limits": {"max_request_simulations": 50}})
    engines = Players(settings, Roots("runs", SHIPPED.parent))
    refused = answer(engines, {"id": "q", "network": "uniform-mcts", "sims": 60}, "random")
    assert refused == {
        "id": "q",
        "error": "1 positions x 60 simulations = 60; at most 50 in one request "
        "(limits.max_request_simulations)",
    }
    done = answer(engines, {"id": "r", "network": "uniform-mcts", "sims": 50}, "random")
    assert done["visits"] == 50 and done["network"] == "uniform-mcts:sims=50"
    for sims in (10.5, "10", True):
        refused = answer(engines, {"id": 1, "network": "uniform-mcts", "sims": sims}, "random")
        assert refused["error"] == f"sims must be a whole number, got {sims!r}"
    with pytest.raises(LimitError, match=r"2 positions x 30 simulations = 60; at most 50"):
        engines.analyse([Position(), Position()], engines.parse("uniform-mcts:sims=30"))


def test_terminal_game_loop_plays_undoes_and_writes_pdn():
    engines = Players(load_settings({"torch_threads": 1}), Roots("runs", SHIPPED.parent))
    opponent = engines.parse("minimax:2")
    hint = engines.parse("uniform-mcts:sims=8")
    typed = iter(["11-15", "9-14x", "moves", "hint", "undo", "12-16", "pdn", "quit"])
    out: list[str] = []
    final = play_game(
        engines, opponent, hint, "B", Position(), [], lambda _: next(typed), out.append
    )
    text = "\n".join(out)
    assert "minimax:2 plays" in text
    assert "malformed move '9-14x'" in text or "illegal move '9-14x'" in text
    assert "legal: " in text and "hint: " in text
    # After the undo, 12-16 replaced 11-15; the opponent answered each time.
    assert final.ply == 2
    pdn = next(line for line in out if "1. 12-16" in line)
    assert "*" in pdn


def test_terminal_player_command():
    done = run("play.cli", "11-15\nquit\n", "--player", "random:1")
    assert done.returncode == 0, done.stderr
    assert "random:1 plays" in done.stdout and "Black to move" in done.stdout
    bad = run("play.cli", "", "--player", "../x.safetensors")
    assert bad.returncode == 2 and "'..'" in bad.stderr


CLI_START = (REPO / "tests" / "golden" / "cli_start_8x8.txt").read_text()


def test_terminal_player_numbers_the_squares_and_redraws_only_a_changed_board():
    done = run("play.cli", "help\nmoves\n9-14x\n11-15\nundo\nquit\n", "--player", "random:1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # The board and its numbered twin, as the golden file shows them.
    assert out.count(CLI_START) == 2  # at the start, and again after the undo
    assert "|     9    10    11    12 |" in out
    # Three boards: the start, after 11-15 and the reply, after the undo. Help, the move list
    # and the bad move print their answers alone.
    footer = CLI_START.splitlines()[-1]
    assert out.count(footer) == 3
    _, first, second, third = out.split(footer)  # what follows each board
    for said in ("moves like 11-15", "legal: 9-13 10-14", "malformed move '9-14x'"):
        assert said in first and said not in second + third
    assert "random:1 plays" in first and "b     .     b |" in first  # the second board: 11-15
    assert CLI_START.removesuffix(footer + "\n") in second  # after the undo, the start again
    assert "random:1 plays" not in second + third


def test_the_shipped_network_analyses_and_the_learned_alpha_beta_is_the_default_opponent():
    opponent = load_settings()["default_opponent"]
    assert opponent.startswith("ab+nn:t")
    player = make_player(opponent)
    assert player.nneval is not None and player.manage_time  # the shipped learned evaluation
    network = shipped_network()
    assert network.is_file(), f"{network} is named by conf/play/default.yaml but missing"
    assert load_settings()["default_player"].startswith(network.name + ":")
    engines = Players(load_settings({"torch_threads": 1}), Roots("runs", network.parent))
    spec = engines.parse(load_settings()["default_player"])
    assert spec.kind == "network" and spec.path.resolve() == network.resolve()


def test_a_refused_network_is_remembered_until_its_file_changes(tmp_path):
    """A refusal is kept per (path, mtime, size): the same file is not read again to refuse it
    (its bytes are replaced below, keeping size and time, and the first answer stands), and the
    error names the file as the request did, never by its absolute path."""
    models = tmp_path / "models"
    models.mkdir()
    bad = models / "bad.safetensors"
    bad.write_bytes(SHIPPED.read_bytes()[:-100])  # truncated
    engines = Players(load_settings({"torch_threads": 1}), Roots(tmp_path / "runs", models))
    spec = engines.parse("bad.safetensors:sims=1")
    with pytest.raises(ValueError, match=r"^network bad\.safetensors: bad\.safetensors: truncated"):
        engines.inference(spec)
    stat = bad.stat()
    bad.write_bytes(b"\0" * stat.st_size)  # read again, this would be another error
    os.utime(bad, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ValueError, match="truncated") as refused:
        engines.inference(spec)
    assert str(tmp_path) not in str(refused.value)
    os.utime(bad, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file changed
    with pytest.raises(ValueError, match=r"safetensors header|too short|not a checkerzero"):
        engines.inference(spec)


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"limits": {"max_simulations": "abc"}}, "play.limits.max_simulations must be a whole"),
        ({"limits": {"max_request_s": float("nan")}}, "play.limits.max_request_s must be in"),
        ({"limits": {"max_concurrent_searches": 0}}, "must be in [1, 1024], got 0"),
        ({"limits": {"queue_wait_s": True}}, "play.limits.queue_wait_s must be a number"),
        ({"allowed_hosts": "evil.example"}, "play.allowed_hosts must be a list of host names"),
        ({"allowed_hosts": ["a\nb"]}, "play.allowed_hosts must be on one line"),
        ({"default_simulations": 30000}, "default_simulations=30000 is over"),
        ({"analysis": {"mistake": 0.5}}, "need inaccuracy <= mistake <= blunder"),
        ({"limits": 3}, "setting play.limits must be a mapping"),
    ],
)
def test_play_settings_of_the_wrong_kind_or_range_are_refused_by_name(overrides, problem):
    with pytest.raises(ValueError) as refused:
        load_settings(overrides)
    assert problem in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        (["limits.max_ms=\x0b"], "--set limits.max_ms: the value is not a YAML scalar"),
        (["limits.max_ms=[1"], "--set limits.max_ms: the value is not a YAML scalar"),
        (["limits=3", "limits.max_ms=5"], "--set limits.max_ms: limits was set to a value"),
        (["max_ms"], "--set 'max_ms': use KEY=VALUE"),
    ],
)
def test_set_flags_that_do_not_read_are_refused_in_one_line(items, problem):
    with pytest.raises(ValueError) as refused:
        parse_overrides(items)
    assert str(refused.value).startswith(problem) and "\n" not in str(refused.value)


def test_terminal_pdn_has_the_seven_tag_roster_and_the_fen_away_from_the_start():
    engines = Players(load_settings({"torch_threads": 1}), Roots("runs", SHIPPED.parent))
    opponent = engines.parse("minimax:2")
    typed = iter(["pdn", "quit"])
    out: list[str] = []
    start = Position.from_fen("W:W21,22:B1,2")
    play_game(engines, opponent, opponent, "W", start, [], lambda _: next(typed), out.append)
    pdn = next(text for text in out if text.startswith("[Event"))
    games = list(iter_pdn(pdn))
    tags = games[0].tags
    assert tags["Event"] == "checkerzero play.cli" and re.fullmatch(
        r"\d{4}\.\d\d\.\d\d", tags["Date"]
    )
    assert tags["Black"] == "minimax:2" and tags["White"] == "You"  # the user plays White
    assert tags["Result"] == "*" and tags["FEN"] == "W:W21,22:B1,2"
    assert pdn_tags("B", "ab+nn:t200,tm", "2026.11.29") == {
        "Event": "checkerzero play.cli",
        "Date": "2026.11.29",
        "Black": "You",
        "White": "ab+nn:t200,tm",
    }


def test_play_help_describes_the_server_and_its_defaults():
    done = run("play", "", "--help")
    text = " ".join(done.stdout.split())  # argparse wraps at the terminal's width
    assert done.returncode == 0 and "serve the board" in text
    assert "(default: 8000)" in text and "(default: ab+nn:t200,tm)" in text


def test_engine_analyses_with_the_alpha_beta_on_request():
    engines = Players(load_settings({"torch_threads": 1}), Roots("runs", SHIPPED.parent))
    fen = "W:W8,12,21,23,30,31,32:B3,6,9,13,14,18,20,28"  # Moorhead-Wyllie 1841: 21-17 wins
    got = answer(engines, {"id": 4, "engine": "ab", "fen": fen, "ms": 300, "lines": 2}, "x")
    assert got["id"] == 4 and got["engine"] == "ab" and got["move"] == "21-17"
    assert [line["move"] for line in got["lines"]][:1] == ["21-17"] and len(got["lines"]) == 2
    bad = answer(engines, {"id": 5, "engine": "ab", "sims": 3}, "x")
    assert "sims is the network's" in bad["error"]
    assert "unknown engine" in answer(engines, {"id": 6, "engine": "mcts"}, "x")["error"]
