"""The analysis routes against the real server (python -m play): the alpha-beta by default,
the network on request, and deepening by time with poll and stop, bounded per client."""

from __future__ import annotations

import time

import pytest
from play_helpers import Server, make_folders

MOORHEAD_WYLLIE = "W:W8,12,21,23,30,31,32:B3,6,9,13,14,18,20,28"  # White to play 21-17
MAX_SIMS = 200  # the server's limits.max_simulations: a network deepening passes it
WAIT_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("play")
    runs, models, _ = make_folders(root)
    srv = Server(
        runs,
        models,
        root / "server.log",
        f"limits.max_simulations={MAX_SIMS}",
        "limits.max_ms=3000",
        "limits.max_batch_positions=8",
        "analysis.ab_ms=300",
        "analysis.ab_slice_ms=1000",
        "analysis.deepen_idle_s=3",
        "analysis.deepen_max_s=30",
        "analysis.ab_egdb=false",
    )
    yield srv
    srv.stop()


def poll_until(server: Server, ident: str, done, what: str) -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        view = server.get(f"/api/deepen/{ident}")
        if done(view):
            return view
        assert time.monotonic() < deadline, (what, view)
        time.sleep(0.2)


def test_analysis_is_the_alpha_beta_by_default_with_lines(server):
    answer = server.post(
        "/api/analyse", {"positions": [{"id": "shot", "fen": MOORHEAD_WYLLIE}, {"id": "start"}]}
    )
    assert answer["engine"] == "ab"
    shot, start = answer["results"]
    assert shot["id"] == "shot" and shot["engine"] == "ab"
    assert shot["move"] == "21-17" and shot["database"] is None
    lines = shot["lines"]
    assert len(lines) == 5 and lines[0]["move"] == "21-17"
    assert lines[0]["line"][:2] == ["21-17", "13x22"]
    assert [x["score_cp"] for x in lines] == sorted((x["score_cp"] for x in lines), reverse=True)
    assert {x["depth"] for x in lines} == {shot["depth"]} and shot["depth"] >= 4
    assert 0.5 < shot["score"] < 1 and shot["pv"] == lines[0]["line"]
    assert start["move"] in {x["move"] for x in start["lines"]} and len(start["legal"]) == 7
    three = server.post(
        "/api/analyse", {"engine": "ab", "lines": 3, "depth": 4, "positions": [{}]}
    )["results"][0]
    assert len(three["lines"]) == 3 and three["depth"] == 4


def test_the_network_is_the_second_engine(server):
    answer = server.post(
        "/api/analyse",
        {"engine": "network", "network": "net.safetensors", "sims": 16, "positions": [{}]},
    )
    r = answer["results"][0]
    assert answer["engine"] == "network" and r["visits"] == 16 and len(r["wdl"]) == 3
    assert "lines" not in r
    # Without an engine, a request that names a network is the network's (as it was).
    old = server.post("/api/analyse", {"network": "net.safetensors:sims=8", "positions": [{}]})
    assert old["engine"] == "network" and old["results"][0]["visits"] == 8


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"engine": "ab", "sims": 10, "positions": [{}]}, 400, "sims"),
        ({"engine": "ab", "ms": 3001, "positions": [{}]}, 422, "ms must be"),
        ({"engine": "ab", "lines": 0, "positions": [{}]}, 422, "lines"),
        ({"engine": "network", "depth": 4, "positions": [{}]}, 400, "depth"),
        ({"engine": "alphago", "positions": [{}]}, 422, "engine"),
    ],
)
def test_bad_analysis_requests_are_named(server, body, status, words):
    got, answer = server.request("POST", "/api/analyse", body)
    assert got == status and words in str(answer["detail"]), answer


def test_ab_deepening_goes_deeper_until_stopped(server):
    started = server.post("/api/deepen", {"fen": MOORHEAD_WYLLIE})
    assert started["running"] and started["engine"] == "ab"
    ident = started["id"]
    first = poll_until(server, ident, lambda v: v["analysis"] is not None, "a first iteration")
    depth = first["analysis"]["depth"]
    later = poll_until(
        server, ident, lambda v: v["analysis"]["depth"] >= depth + 2, "two iterations more"
    )
    assert later["analysis"]["move"] == "21-17" and later["running"]
    stopped = server.request("DELETE", f"/api/deepen/{ident}")[1]
    assert stopped["stopped"] == "stopped" and stopped["analysis"]["lines"]
    poll_until(server, ident, lambda v: not v["running"], "the thread to end")


def test_network_deepening_is_bounded_by_time_not_visits(server):
    started = server.post("/api/deepen", {"engine": "network", "network": "net.safetensors"})
    ident = started["id"]
    deep = poll_until(
        server,
        ident,
        lambda v: v["analysis"] is not None and v["analysis"]["visits"] > MAX_SIMS,
        f"more than limits.max_simulations={MAX_SIMS} visits",
    )
    assert deep["analysis"]["engine"] == "network" and len(deep["analysis"]["wdl"]) == 3
    server.request("DELETE", f"/api/deepen/{ident}")
    poll_until(server, ident, lambda v: not v["running"], "the thread to end")


def test_one_deepening_per_client_and_an_unpolled_one_stops(server):
    first = server.post("/api/deepen", {})["id"]
    second = server.post("/api/deepen", {"moves": ["11-15"]})["id"]
    assert poll_until(server, first, lambda v: not v["running"], "replaced")["stopped"] == (
        "replaced"
    )
    time.sleep(4)  # analysis.deepen_idle_s=3 without a poll: its page has gone
    view = server.get(f"/api/deepen/{second}")
    assert view["stopped"] == "idle" and not view["running"]
    got, answer = server.request("GET", "/api/deepen/0123456789abcdef")
    assert got == 404 and "no deepening" in answer["detail"]
