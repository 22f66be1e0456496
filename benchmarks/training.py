"""Learner throughput (named training.py: a benchmarks/learner.py run as a script would shadow the
`learner` package): training samples/s end to end against the raw train-step rate, one run.

Both figures use the same `Trainer` (the run's network from `conf/model/`, optimizer, schedule,
device and thread count), measured in alternating rounds so the machine's load is shared fairly:

- raw: `Trainer.step` on one synthetic batch made in advance (the step alone: host->device copy,
  forward, loss, backward, optimizer; the ceiling);
- end to end: what `python -m learner` does, with a `MirrorPrefetcher` sampling batches uniformly
  from a private `EmbeddedRedis` (append-only file on) filled with real self-play records, kept
  decoded in a `ReplayMirror` and encoded on its thread while the training thread steps.

The ratio end to end / raw is the share of the step rate the data path keeps (target: >= 70%).
Also printed: the prefetcher alone (sampling + decoding, nothing training), the feeder's ceiling.
Self-play for the store uses a uniform evaluator (the tree only, so filling takes seconds); the
records have the same layout and cost to decode as those of a trained network.

Each phase runs `--warmup` steps (more than the prefetch queue holds, so a queue filled before
the clock starts does not count), then steps until `--seconds` have passed.

    python benchmarks/training.py                      # CPU, the default network, batch 256
    python benchmarks/training.py --device cuda --batch 4096 --seconds 10
    python benchmarks/training.py --set model=large --set learner.threads=2
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from actors.self_play import SelfPlayObserver, run_self_play
from checkerzero.config import ConfigError, compose
from checkerzero.network.model import count_parameters
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import ReplayStore, connect
from game import encoding, records
from game.mcts import UniformInference
from learner.losses import TrainBatch
from learner.mirror import ReplayMirror
from learner.prefetcher import MirrorPrefetcher
from learner.trainer import Trainer

NAMESPACE = "bench"
LEGAL_FRACTION = 0.08  # about 10 of 128 actions legal, typical of a checkers middlegame
OCCUPANCY = 0.25  # chance a piece plane is set at a cell in the synthetic planes
FILL_SIMULATIONS = 32  # search per decision of the games that fill the store (uniform evaluator)
FILL_PARALLEL = 64  # games played at once while filling


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto")
    p.add_argument("--batch", type=int, help="batch size (default: learner.batch_size)")
    p.add_argument("--games", type=int, default=1000, help="self-play games put in the store")
    p.add_argument("--seconds", type=float, default=15.0, help="measured time of each phase")
    p.add_argument("--warmup", type=int, help="steps before the clock (default: prefetch+3)")
    p.add_argument("--rounds", type=int, default=2, help="raw / end-to-end rounds, alternating")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Hydra override of conf/ (repeatable), e.g. model=large or learner.threads=2",
    )
    return p.parse_args(argv)


def load_config(args: argparse.Namespace):
    overrides = [f"learner.device={args.device}", "run_dir=unused", *args.set]
    if args.batch is not None:
        overrides.append(f"learner.batch_size={args.batch}")
    try:
        return compose(overrides)
    except ConfigError as e:  # one line naming the key, as every command line
        raise SystemExit(f"error: {e}") from None


def fill_store(store: ReplayStore, cfg, games: int) -> tuple[int, int, float]:
    """Plays `games` self-play games into the store; (games, positions, mean record bytes)."""
    play_cfg = {
        "game": dict(cfg.game),
        "mcts": {**cfg.mcts, "simulations": FILL_SIMULATIONS},
        "selfplay": {**cfg.selfplay, "games_in_parallel": FILL_PARALLEL},
    }
    if cfg.game.size != 8:
        play_cfg["selfplay"]["openings"] = "start"  # the ballot deck is for 8x8 only
    sizes: list[int] = []

    def put(record: records.GameRecord) -> None:
        data = record.to_bytes()
        sizes.append(len(data))
        store.add_game(data, record.num_decisions)

    class Store(SelfPlayObserver):
        def on_record(self, record: records.GameRecord) -> None:
            put(record)

    run_self_play(UniformInference(), play_cfg, games, seed=1, observer=Store(), keep_records=False)
    stats = store.stats()
    return stats.window_games, stats.window_positions, float(np.mean(sizes))


def synthetic_batch(batch: int, size: int, planes: int, seed: int = 0) -> TrainBatch:
    rng = np.random.default_rng(seed)
    actions = encoding.num_actions(size)
    x = (rng.random((batch, planes, size, size)) < OCCUPANCY).astype(np.float32)
    x[:, -1] = 1.0
    mask = rng.random((batch, actions)) < LEGAL_FRACTION
    mask[np.arange(batch), rng.integers(0, actions, batch)] = True
    pi = rng.random((batch, actions)).astype(np.float32) * mask
    pi /= pi.sum(axis=1, keepdims=True)
    wdl = np.eye(3, dtype=np.float32)[rng.integers(0, 3, batch)]
    return TrainBatch(planes=x, mask=mask, target_pi=pi, target_wdl=wdl)


def timed_steps(
    next_batch: Callable[[], TrainBatch], trainer: Trainer, warmup: int, seconds: float
):
    """(samples/s, share of the time spent waiting for batches) after `warmup` steps."""
    for _ in range(warmup):
        trainer.step(next_batch())
    samples = steps = 0
    waited = 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        batch = next_batch()
        waited += time.perf_counter() - t0
        trainer.step(batch)
        samples += len(batch)
        steps += 1
    elapsed = time.perf_counter() - start
    return samples / elapsed, waited / elapsed


def prefetch_only(prefetcher: MirrorPrefetcher, batch: int, warmup: int, seconds: float) -> float:
    """Samples/s the prefetcher delivers with nothing training (its queue drained first)."""
    for _ in range(warmup):
        prefetcher.get(timeout=120.0)
    samples = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        samples += len(prefetcher.get(timeout=120.0))
    return samples / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cfg = load_config(args)
    size = int(cfg.game.size)
    batch = int(cfg.learner.batch_size)
    depth = int(cfg.replay.prefetch_depth)
    warmup = args.warmup if args.warmup is not None else depth + 3
    trainer = Trainer(cfg.learner, cfg.model, size)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(
        f"device {trainer.device} in {str(trainer.compute_dtype).removeprefix('torch.')} "
        f"(learner.precision={cfg.learner.precision}), torch {torch.__version__}, torch threads "
        f"{torch.get_num_threads()}, load avg {load}"
    )
    m = cfg.model
    print(
        f"network {m.blocks}x{m.channels} ({count_parameters(trainer.model):,} parameters), "
        f"{size}x{size} board, batch {batch}, optimizer {cfg.learner.optimizer._target_}"
    )
    with tempfile.TemporaryDirectory(prefix="czbench") as tmp, EmbeddedRedis(Path(tmp)) as server:
        client = connect(server.url, server.password, retries=3, backoff_s=0.1)
        store = ReplayStore(client, namespace=NAMESPACE, window_positions=10**9)
        t0 = time.perf_counter()
        games, positions, record_bytes = fill_store(store, cfg, args.games)
        print(
            f"store: {games} self-play games, {positions} positions, {record_bytes / 1024:.1f} KB "
            f"per record (filled in {time.perf_counter() - t0:.1f} s; redis {server.url})"
        )
        mirror = ReplayMirror(store, size)  # one owner at a time: each prefetcher below in turn
        fixed = synthetic_batch(batch, size, int(m.in_planes))
        print(
            f"{'round':>5} {'raw samples/s':>14} {'end-to-end samples/s':>21} {'ratio':>6}  waiting"
        )
        raw_total = e2e_total = 0.0
        for r in range(1, args.rounds + 1):
            raw, _ = timed_steps(lambda: fixed, trainer, warmup, args.seconds)
            with MirrorPrefetcher(mirror, batch, depth=depth, seed=r) as prefetcher:
                e2e, waiting = timed_steps(
                    lambda p=prefetcher: p.get(timeout=120.0), trainer, warmup, args.seconds
                )
                assert prefetcher.malformed == 0
            raw_total += raw
            e2e_total += e2e
            print(f"{r:>5} {raw:>14.0f} {e2e:>21.0f} {e2e / raw:>6.0%}  {waiting:.0%} of the time")
        with MirrorPrefetcher(mirror, batch, depth=depth, seed=0) as prefetcher:
            feeder = prefetch_only(prefetcher, batch, depth + 1, args.seconds)
        print(
            f"end to end / raw over {args.rounds} rounds: {e2e_total / raw_total:.0%} "
            f"(target >= 70%); the prefetcher alone delivers {feeder:.0f} samples/s "
            f"({feeder / (raw_total / args.rounds):.1f}x the raw step rate)"
        )
        client.close()


if __name__ == "__main__":
    main()
