"""Self-play throughput against the number of actors: real Ray actors writing to a private Redis.

For each actor count N (`--actors 1,2`; up to 16 on a 16-core GPU node), N `SelfPlayActor`s are
started on a local Ray with the run's config (`conf/`, overrides with `--set`), follow the
weights published in a private `EmbeddedRedis` (a fresh network of the configured shape) and
write every finished game into its replay store, exactly as in `python -m learner`. Each actor
plays a warm-up call (`--warmup` s: process start, imports, first weights, allocator growth),
then a measured call of `--seconds` s, all N at once. Figures per N:

- positions/s: decisions made in the measured call (unfinished games' included), summed over the
  actors, from each call's `SelfPlayStats` (exact, unlike counting finished games);
- games/s: games finished during the measured call. The call starts new games, so with many games
  in parallel and a short call few finish: a lower bound unless `--seconds` spans several games;
- evaluations/s: leaves sent to the network;
- efficiency: positions/s per actor against the one-actor figure (1.0 = linear scaling);
- time: the share of the actors' time in the network (forward passes), the tree (C++ gather and
  expand) and the glue (Python decisions, records, Redis writes, weight polls);
- bare: the same self-play (same network shape and config, `run_self_play` with a
  `NetworkInference`) in N plain processes, no Ray, no Redis, timed the same way: what the
  machine itself gives N processes. Actors/bare is the loop's own overhead; bare scaling below
  linear is the machine's (cores shared with other work, memory bandwidth, turbo). `--no-bare`
  skips it.

With `--device cuda` each actor runs its network on a share of the GPU
(`selfplay.gpus_per_actor`, 0.25: four actors per GPU, as the run places them) and the bare
processes stay on CPU, so actors/bare compares a GPU actor with a CPU process.

    python benchmarks/selfplay.py                                  # 1 and 2 actors, run defaults
    python benchmarks/selfplay.py --actors 1,2,4,8,16 --seconds 60  # a 16-core node
    python benchmarks/selfplay.py --device cuda --actors 1,2,4 --no-bare  # GPU actors
    python benchmarks/selfplay.py --set mcts.simulations=32 --set selfplay.games_in_parallel=16
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import ray
from omegaconf import OmegaConf

from actors.actor import SelfPlayActor
from checkerzero.cluster.start import start_ray
from checkerzero.config import ConfigError, compose
from checkerzero.network.checkpoint import encode_checkpoint
from checkerzero.network.inference import compute_dtype
from checkerzero.network.model import CheckersNet, model_config
from checkerzero.store.keys import selfplay_stats_key
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import connect
from checkerzero.store.weights import WeightsChannel

CALL_SLACK_S = 600.0  # beyond its own length, what a call may take (actor start on a busy host)
OBJECT_STORE_MB = 256  # nothing big travels through Ray here; weights and games go via Redis


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--actors", default="1,2", help="comma-separated actor counts")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds of warm-up per count")
    p.add_argument("--seconds", type=float, default=40.0, help="measured seconds per count")
    p.add_argument("--num-cpus", type=int, default=os.cpu_count(), help="CPUs of the local Ray")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the actors run the network: cpu, or cuda (a share of the GPU each)",
    )
    p.add_argument(
        "--no-bare", action="store_true", help="skip the plain-process figure for comparison"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Hydra override of conf/ (repeatable), e.g. mcts.simulations=200",
    )
    return p.parse_args(argv)


def measure(n: int, cfg, url: str, password: str, args: argparse.Namespace, client) -> dict:
    container = OmegaConf.to_container(cfg, resolve=True)
    share = min(1.0, args.num_cpus / n)  # as ActorPool does when actors outnumber cores
    gpus = float(cfg.selfplay.gpus_per_actor) if args.device == "cuda" else 0.0
    actors = [
        SelfPlayActor.options(num_cpus=share, num_gpus=gpus).remote(
            container, i, url, password, args.device
        )
        for i in range(n)
    ]
    key = selfplay_stats_key(cfg.replay.namespace)
    try:
        ray.get([a.run.remote(args.warmup) for a in actors], timeout=args.warmup + CALL_SLACK_S)
        games_before = int(client.hget(key, "games") or 0)
        stats = ray.get(
            [a.run.remote(args.seconds) for a in actors], timeout=args.seconds + CALL_SLACK_S
        )
        games_after = int(client.hget(key, "games") or 0)
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)
    busy = sum(s["seconds"] for s in stats)
    network = sum(s["network_s"] for s in stats)
    tree = sum(s["tree_s"] for s in stats)
    return {
        "actors": n,
        "positions_per_s": sum(s["positions"] / s["seconds"] for s in stats),
        "games_per_s": (games_after - games_before) / args.seconds,
        "evaluations_per_s": sum(s["evaluations"] / s["seconds"] for s in stats),
        "leaves_per_batch": sum(s["evaluations"] for s in stats)
        / max(1, sum(s["batches"] for s in stats)),
        "network": network / busy,
        "tree": tree / busy,
        "glue": (busy - network - tree) / busy,
    }


def _bare_worker(job: tuple[dict, int, float, float]) -> dict:
    """One plain process: warm-up call, then a measured call of run_self_play (no Ray/Redis)."""
    import torch

    from actors.self_play import StopAt, run_self_play
    from checkerzero.network.inference import NetworkInference

    cfg, seed, warmup, seconds = job
    torch.set_num_threads(int(cfg["selfplay"].get("torch_threads", 1)))
    model = CheckersNet(model_config(cfg["model"], cfg["game"]["size"]))
    evaluator = NetworkInference(
        model,
        device="cpu",
        dtype=cfg["selfplay"]["precision"],
        backend=cfg["selfplay"]["cpu_backend"],
    )
    stats = {}
    for k, length in enumerate((warmup, seconds)):
        deadline = time.monotonic() + length
        _, st = run_self_play(
            evaluator,
            cfg,
            None,
            seed=seed * 2 + k,
            observer=StopAt(deadline),
            keep_records=False,
        )
        stats = dataclasses.asdict(st)
    return stats


def measure_bare(n: int, cfg, args: argparse.Namespace) -> float:
    """Positions/s of n plain processes playing at once."""
    container = OmegaConf.to_container(cfg, resolve=True)
    jobs = [(container, i, args.warmup, args.seconds) for i in range(n)]
    with mp.get_context("spawn").Pool(n) as pool:
        stats = pool.map(_bare_worker, jobs)
    return sum(s["positions"] / s["seconds"] for s in stats)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    counts = [int(x) for x in args.actors.split(",")]
    try:
        cfg = compose(["run_dir=unused", *args.set])
    except ConfigError as e:  # one line naming the key, as every command line
        raise SystemExit(f"error: {e}") from None
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    m, mc, sp = cfg.model, cfg.mcts, cfg.selfplay
    print(
        f"network {m.blocks}x{m.channels} on {args.device.upper()} in "
        f"{str(compute_dtype(sp.precision, args.device)).removeprefix('torch.')} "
        f"(selfplay.precision={sp.precision}, cpu_backend={sp.cpu_backend}), "
        f"{cfg.game.size}x{cfg.game.size} board, "
        f"{mc.simulations} simulations, {sp.games_in_parallel} games in parallel per actor, "
        f"warm-up {args.warmup:.0f} s, measured {args.seconds:.0f} s; Ray CPUs {args.num_cpus}, "
        f"load avg {load}"
    )
    with tempfile.TemporaryDirectory(prefix="czbench") as tmp, EmbeddedRedis(Path(tmp)) as server:
        client = connect(server.url, server.password, retries=3, backoff_s=0.1)
        model = CheckersNet(model_config(cfg.model, cfg.game.size))
        WeightsChannel(client, namespace=cfg.replay.namespace).publish(
            encode_checkpoint(model, step=0, version=1), 1
        )
        start_ray(
            "local",
            num_cpus=args.num_cpus,
            object_store_memory_mb=OBJECT_STORE_MB,
            log_to_driver=False,
        )
        try:
            print(
                f"{'actors':>6} {'positions/s':>12} {'games/s':>8} {'evals/s':>9} "
                f"{'leaves/batch':>12} {'efficiency':>10}  {'network/tree/glue':>17}"
                f"  {'bare pos/s':>10} {'bare eff.':>9} {'actors/bare':>11}"
            )
            base = bare_base = None
            for n in counts:
                t0 = time.perf_counter()
                row = measure(n, cfg, server.url, server.password, args, client)
                per_actor = row["positions_per_s"] / n
                base = per_actor if base is None else base
                bare_cols = ""
                if not args.no_bare:
                    bare = measure_bare(n, cfg, args)
                    bare_base = bare / n if bare_base is None else bare_base
                    bare_cols = (
                        f"  {bare:>10.1f} {bare / n / bare_base:>9.0%} "
                        f"{row['positions_per_s'] / bare:>11.0%}"
                    )
                shares = f"{row['network']:.0%} / {row['tree']:.0%} / {row['glue']:.0%}"
                print(
                    f"{n:>6} {row['positions_per_s']:>12.1f} {row['games_per_s']:>8.2f} "
                    f"{row['evaluations_per_s']:>9.0f} {row['leaves_per_batch']:>12.1f} "
                    f"{per_actor / base:>10.0%}  {shares:>17}{bare_cols}"
                    f"   ({time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
        finally:
            ray.shutdown()
            client.close()


if __name__ == "__main__":
    main()
