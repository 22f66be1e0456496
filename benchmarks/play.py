"""The play server's speed as a user meets it: move latency and batched analysis throughput.

    python benchmarks/play.py [--moves 40] [--batch 64] [--threads 2]

Starts ``python -m play`` on a free loopback port (the shipped network, CPU) and talks HTTP:

- move latency, p50 and p95, of ``POST /api/move`` for the shipped network at 200 simulations
  and at 200 ms, over positions of the ACF 3-move deck (the network is loaded before timing),
  with the p50 of the time the server spent in the search alone (the answer's ``ms``);
- analysis throughput in positions per second: ``--batch`` positions in one ``POST /api/analyse``
  (one batched search) against the same positions asked one request at a time, both at 200
  simulations, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from game.openings import acf_deck
from play.settings import shipped_network

REPO = Path(__file__).resolve().parents[1]
NETWORK = shipped_network().name  # the server's default opponent (conf/play/default.yaml)
SIMS = 200
MS = 200


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--moves", type=int, default=40, help="timed moves per budget")
    parser.add_argument("--batch", type=int, default=64, help="positions in the analysis batch")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the server")
    args = parser.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "play", "--port", str(port), "--log-level", "warning"]
    cmd += ["--set", f"torch_threads={args.threads}", "--set", "limits.max_batch_positions=1024"]
    server = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/api/status", timeout=5).read()
                break
            except OSError:
                time.sleep(0.2)
        deck = acf_deck()
        positions = [list(o.moves) for o in deck]
        post(base + "/api/move", {"moves": positions[0], "player": f"{NETWORK}:sims=8"})  # load

        print(f"move latency over {args.moves} ACF positions (HTTP round trip, {NETWORK}, CPU)")
        for label, player in (
            (f"{SIMS} simulations", f"{NETWORK}:sims={SIMS}"),
            (f"{MS} ms", f"{NETWORK}:ms={MS}"),
        ):
            times, inside, visits = [], [], []
            for moves in positions[: args.moves]:
                t = time.perf_counter()
                answer = post(base + "/api/move", {"moves": moves, "player": player})
                times.append((time.perf_counter() - t) * 1000)
                visits.append(answer["visits"])
                inside.append(answer["ms"])
            print(
                f"  {label:>16}: p50 {percentile(times, 0.5):6.1f} ms, "
                f"p95 {percentile(times, 0.95):6.1f} ms (search p50 {percentile(inside, 0.5):6.1f} "
                f"ms), mean visits {statistics.mean(visits):.0f}"
            )

        batch = [{"id": i, "moves": positions[i % len(positions)]} for i in range(args.batch)]
        network = f"{NETWORK}:sims={SIMS}"
        t = time.perf_counter()
        answer = post(base + "/api/analyse", {"network": network, "positions": batch})
        batched = time.perf_counter() - t
        assert len(answer["results"]) == args.batch
        t = time.perf_counter()
        for query in batch:
            post(base + "/api/analyse", {"network": network, "positions": [query]})
        single = time.perf_counter() - t
        print(f"analysis throughput at {SIMS} simulations, {args.batch} positions")
        print(f"  one batched request : {args.batch / batched:6.1f} positions/s ({batched:.1f} s)")
        print(f"  one request each    : {args.batch / single:6.1f} positions/s ({single:.1f} s)")
        print(f"  batched / single    : {single / batched:6.2f}x")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
