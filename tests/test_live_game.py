"""The live game: self-play's slot 0 reports its moves, the actor's Redis value with its expiry,
the learner's copy into the run folder. Redis is real (tests/conftest.py)."""

from __future__ import annotations

import itertools
import json
import time

import pytest

from actors.self_play import play_games
from checkerzero.config import compose
from checkerzero.run_files import LIVE_FILE
from checkerzero.store.keys import live_key
from checkerzero.store.live import (
    MAX_LIVE_BYTES,
    copy_live,
    decode,
    make_live,
    publish,
    read_live,
    read_live_file,
)
from game import Position
from game.mcts import UniformInference
from game.openings import load_openings
from game.record_pdn import record_moves
from learner.run import Run


def small_cfg(games: int):
    return compose(
        [
            "game.max_plies=30",
            "mcts.simulations=2",
            "mcts.leaves_per_game=1",
            f"selfplay.games_in_parallel={games}",
            "selfplay.openings=deck",
            "selfplay.resign=false",
        ]
    )


def a_live(actor: int, moves=("11-15", "23-19", "8-11", "22-17")) -> dict:
    return make_live(
        actor=actor,
        version=7,
        opening="ACF 2",
        fen=Position().fen(),
        moves=list(moves),
        opening_plies=3,
        updated=time.time(),
    )


def test_slot_zero_reports_each_move_of_its_game():
    reports = []
    cfg = small_cfg(1)
    (record,) = play_games(
        UniformInference(), cfg, 1, seed=4, network_version=9, actor_id=2, on_live=reports.append
    )
    ballot = next(o for o in load_openings("deck", 8) if o.id == record.opening_id)
    assert reports[0]["moves"] == list(ballot.moves)  # at the start: the opening only
    full = [*ballot.moves, *record_moves(record)]
    assert reports[-1]["moves"] == full  # after the last move: the whole game
    assert [r["moves"] for r in reports] == [full[:n] for n in range(3, len(full) + 1)]
    assert all(r["opening"] == ballot.name and r["opening_plies"] == 3 for r in reports)
    assert all((r["actor"], r["version"]) == (2, 9) for r in reports)
    assert all(r["fen"] == Position().fen() for r in reports)
    # The hook changes nothing: the same seed without it plays the same game.
    (again,) = play_games(UniformInference(), cfg, 1, seed=4, network_version=9, actor_id=2)
    assert again.to_bytes() == record.to_bytes()


def test_only_slot_zero_reports():
    reports = []
    records = play_games(UniformInference(), small_cfg(3), 3, seed=5, on_live=reports.append)
    assert len(records) == 3
    starts = [r for r in reports if len(r["moves"]) == 3]
    assert len(starts) == 1  # one game started in slot 0 (the others ran in slots 1 and 2)
    for before, after in itertools.pairwise(reports):
        assert after["moves"][:-1] == before["moves"]  # one game, one move at a time


def test_redis_round_trip_with_expiry_lowest_actor_and_bad_values_skipped(client):
    assert read_live(client, "ns") is None
    publish(client, "ns", a_live(4), ttl_s=60.0)
    publish(client, "ns", a_live(2, moves=("9-13", "22-18", "10-15")), ttl_s=60.0)
    client.set(live_key("ns", 1), b"\x80\x04not json")  # a malformed value: skipped
    client.set(live_key("other", 0), json.dumps(a_live(0)))  # another run's namespace
    assert 0 < client.pttl(live_key("ns", 4)) <= 60_000
    got = read_live(client, "ns")
    assert got is not None and got["actor"] == 2 and got["moves"] == ["9-13", "22-18", "10-15"]
    publish(client, "ns", a_live(5), ttl_s=0.05)
    time.sleep(0.2)  # let the short expiry pass (a value check, not a timing one)
    assert client.get(live_key("ns", 5)) is None


@pytest.mark.parametrize(
    "bad",
    [
        b"[]",
        b'{"actor": 1}',
        json.dumps(a_live(1) | {"moves": [1, 2]}).encode(),
        json.dumps(a_live(1) | {"opening_plies": 9}).encode(),
        json.dumps(a_live(1) | {"version": "7"}).encode(),
        b'{"x": "' + b"a" * MAX_LIVE_BYTES + b'"}',
    ],
)
def test_malformed_live_games_are_named(bad):
    with pytest.raises(ValueError, match="somewhere"):
        decode(bad, "somewhere")


def test_the_learner_copies_the_live_game_and_ignores_a_malformed_one(client, tmp_path):
    run = Run(compose(["preset=smoke", f"run_dir={tmp_path}"]))
    ns = run.cfg.replay.namespace
    client.set(live_key(ns, 0), b"{not json")
    run._copy_live(client)  # only a malformed value: nothing written, no error
    assert not (tmp_path / LIVE_FILE).exists()
    live = a_live(3)
    publish(client, ns, live, ttl_s=60.0)
    run._copy_live(client)
    assert read_live_file(tmp_path / LIVE_FILE) == live
    assert [p.name for p in (tmp_path / "games").iterdir()] == ["live.json"]  # no temp left
    client.delete(live_key(ns, 3))
    assert copy_live(client, ns, tmp_path) is None  # none now: the file stays as it was
    assert read_live_file(tmp_path / LIVE_FILE) == live
