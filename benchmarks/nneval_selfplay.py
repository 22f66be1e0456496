"""Labelled positions per second per core for the fast player's evaluation, beside MCTS self-play.

One process, one core, the run's config (`conf/` with `preset=nneval`, overrides with `--set`):

- alpha-beta: `actors.ab_selfplay.play_ab_game` at the generation settings (`nneval.selfplay`:
  depth, random plies, the endgame database when `egdb.dir` holds it) with the shipped
  evaluation, each game pushed through a private `redis-server` with the run-wide
  deduplication (`PositionStream.push`), as an actor does: labelled positions kept per second;
- MCTS: `actors.self_play.run_self_play` at the run's MCTS settings with a fresh network of the
  configured shape on the CPU: positions (decisions) per second;

and the ratio of the two: how many labelled positions the fast player's loop makes in the time
MCTS self-play makes one. The goal for the first is >= 1,000 a second a core.

    python benchmarks/nneval_selfplay.py                       # 30 s each
    python benchmarks/nneval_selfplay.py --seconds 60 --set nneval.selfplay.depth=5
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

import torch
from omegaconf import OmegaConf

from actors.ab_selfplay import ABSettings, play_ab_game
from actors.self_play import StopAt, run_self_play
from checkerzero.config import compose
from checkerzero.network.inference import NetworkInference
from checkerzero.network.model import CheckersNet, model_config
from checkerzero.store.positions import PositionStream
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import connect
from game import nneval
from game.egdb import available_pieces, open_database
from game.openings import load_openings


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=30.0, help="length of each measurement")
    p.add_argument("--set", action="append", default=[], help="a config override (key=value)")
    return p.parse_args(argv)


def alphabeta_rate(cfg, seconds: float) -> dict[str, float]:
    size = int(cfg.game.size)
    settings = ABSettings.from_config(cfg.nneval.selfplay, size)
    deck = load_openings(str(cfg.nneval.selfplay.openings), size)
    egdb = None
    pieces = min(int(cfg.egdb.pieces), available_pieces(cfg.egdb.dir, size))
    if cfg.nneval.selfplay.egdb and pieces > 0:
        egdb = open_database(cfg.egdb.dir, size, pieces)
    weights = nneval.load_core()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp) as server:
        client = connect(server.url, server.password, retries=2, backoff_s=0.01)
        stream = PositionStream(client, "bench", bits_log2=int(cfg.nneval.dedup.bits_log2))
        stream.begin(0, 0, 0)
        games = labelled = kept = moves = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            rows = play_ab_game(
                weights, deck, settings, seed=1, generation=0, game_id=games, egdb=egdb
            )
            kept += stream.push(0, rows)
            labelled += len(rows)
            moves += int(rows["ply"].max()) + 1 if len(rows) else 0
            games += 1
        elapsed = time.perf_counter() - start
        client.close()
    return {
        "games": games,
        "labelled_per_s": labelled / elapsed,
        "kept_per_s": kept / elapsed,
        "ms_per_move": 1000 * elapsed / max(moves, 1),
        "egdb_pieces": pieces if egdb else 0,
    }


def mcts_rate(cfg, seconds: float) -> float:
    container = OmegaConf.to_container(cfg, resolve=True)
    model = CheckersNet(model_config(container["model"], container["game"]["size"]))
    evaluator = NetworkInference(
        model,
        device="cpu",
        dtype=container["selfplay"]["precision"],
        backend=container["selfplay"]["cpu_backend"],
    )
    run_self_play(evaluator, container, None, seed=0, observer=StopAt(time.monotonic() + 3))
    _, st = run_self_play(
        evaluator,
        container,
        None,
        seed=1,
        observer=StopAt(time.monotonic() + seconds),
        keep_records=False,
    )
    s = dataclasses.asdict(st)
    return s["positions"] / s["seconds"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    cfg = compose(["run_dir=/tmp/checkerzero-bench-unused", "preset=nneval", *args.set])
    sp = cfg.nneval.selfplay
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; one process, one core")
    ab = alphabeta_rate(cfg, args.seconds)
    print(
        f"alpha-beta self-play (depth {sp.depth}, {sp.random_plies} random plies, "
        f"{sp.random_moves} random moves before ply {sp.random_until}, database "
        f"{ab['egdb_pieces'] or 'off'} pieces): {ab['games']} games, "
        f"{ab['labelled_per_s']:,.0f} labelled positions/s, {ab['kept_per_s']:,.0f} kept after "
        f"deduplication, {ab['ms_per_move']:.2f} ms a move"
    )
    mcts = mcts_rate(cfg, args.seconds)
    print(
        f"MCTS self-play ({cfg.mcts.simulations} simulations, {cfg.selfplay.games_in_parallel} "
        f"games at once): {mcts:,.1f} positions/s"
    )
    print(
        f"ratio: {ab['kept_per_s'] / mcts:,.0f} labelled positions in the time of one MCTS "
        f"self-play position (goal for the first: >= 1,000 labelled positions/s/core: "
        f"{'met' if ab['kept_per_s'] >= 1000 else 'not met'})"
    )


if __name__ == "__main__":
    main()
