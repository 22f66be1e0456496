"""The JSON-lines analysis engine and the terminal player, run as their commands."""

from __future__ import annotations

import json
import subprocess
import sys

from play_helpers import REPO, SHIPPED

from game import Position
from play.cli import play_game
from play.engines import Engines
from play.paths import Roots
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
    ]
    lines = "\n".join(q if isinstance(q, str) else json.dumps(q) for q in queries) + "\nnot json\n"
    done = run("play.engine", lines)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["a", 2, "m", "bad", "big", "out", None]
    a = answers[0]
    assert a["turn"] == "W" and a["visits"] == 16 and a["pv"][0] == a["move"]
    assert sum(m["visits"] for m in a["top"]) == 16
    assert answers[1]["move"] in ("9x18x25", "10x17x26") and answers[1]["visits"] > 0
    assert answers[2]["move"] in START_LEGAL and answers[2]["minimax"]["depth"] == 4
    assert "move 2" in answers[3]["error"]
    assert "sims must be" in answers[4]["error"]
    assert "'..'" in answers[5]["error"]
    assert "not JSON" in answers[6]["error"]


def test_terminal_game_loop_plays_undoes_and_writes_pdn():
    engines = Engines(load_settings({"torch_threads": 1}), Roots("runs", SHIPPED.parent))
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


def test_the_shipped_network_is_the_default_opponent_and_is_installed():
    network = shipped_network()
    assert network.is_file(), f"{network} is named by conf/play/default.yaml but missing"
    assert load_settings()["default_player"].startswith(network.name + ":")
    engines = Engines(load_settings({"torch_threads": 1}), Roots("runs", network.parent))
    spec = engines.parse(load_settings()["default_player"])
    assert spec.kind == "network" and spec.path.resolve() == network.resolve()
