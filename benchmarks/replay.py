"""Replay-store throughput: ReplayStore writes and samples against raw Redis SET/GET, one run.

Starts its own EmbeddedRedis (append-only file on, fsync every second, as in a real run) in a
temporary directory, then for each record size:

- raw: `redis-benchmark -t set,get -d <size>` on that same server with 1 client, as many
  clients as each writer count below (like for like), and 50 clients (the server's ceiling);
- writers: N processes, each calling `ReplayStore.add_game` in a loop (one MULTI per game: SET
  the record, then a Lua script that names it, appends its length, updates the counters and
  evicts whole old games) for `--seconds`; records/s and MB/s over all of them, and the ratios
  to plain redis-py SETs of the same bytes from the same processes (the Python client's own
  ceiling) and to redis-benchmark's SET/s;
- reader: one thread drawing batches the way the learner's mirror reads the store
  (`ReplayStore.window`: one round trip, then `ReplayStore.fetch`: one pipelined MGET of the
  distinct games drawn) for `--seconds`; samples/s, records fetched/s, MB/s,
  and the ratios to redis-benchmark's GET/s and SET/s with one client.

Figures from a machine shared with other work swing by 2x between runs: compare the ratios of
one run, not figures across runs.

The window is kept full (writers evict as they go), so the figures are steady-state ones.

    python benchmarks/replay.py
    python benchmarks/replay.py --sizes 4096,65536 --writers 1,2,4 --seconds 2
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import multiprocessing as mp
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from checkerzero.store.redis_server import EmbeddedRedis, find_redis_server
from checkerzero.store.replay import ReplayStore, connect

NAMESPACE = "bench"
CEILING_CLIENTS = 50  # redis-benchmark's default client count: what the server can take
CONNECT_RETRIES = 3  # local server: only a slow start can make the first connection fail
CONNECT_BACKOFF_S = 0.1
START_TIMEOUT_S = 60.0  # spawned writers import numpy and redis first; 2 cores may be busy
MIN_BENCH_REQUESTS = 1_000  # redis-benchmark figures from fewer requests are mostly noise
RAW_KEYS = (
    1_000  # keys per writer for the redis-py SET figure: bounded memory, no key reuse hot spot
)
START_DELAY_S = 0.1  # writers of one figure start together this long after the tasks are sent


@dataclasses.dataclass(frozen=True)
class Raw:
    clients: int
    set_per_s: float
    get_per_s: float


@dataclasses.dataclass(frozen=True)
class WriteRow:
    size: int
    writers: int
    records_per_s: float
    py_set_per_s: float  # plain redis-py SETs of the same bytes from the same processes
    raw_same_clients: Raw
    raw_ceiling: Raw

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.size / 1e6


@dataclasses.dataclass(frozen=True)
class ReadRow:
    size: int
    batch: int
    samples_per_s: float
    records_per_s: float  # distinct records fetched per second (one per game per batch)
    raw_one_client: Raw

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.size / 1e6


def redis_benchmark(server: EmbeddedRedis, size: int, clients: int, requests: int) -> Raw:
    """SET/s and GET/s from redis-benchmark against `server` with values of `size` bytes."""
    binary = Path(find_redis_server()).with_name("redis-benchmark")
    if not binary.exists():
        found = shutil.which("redis-benchmark")
        if found is None:
            raise RuntimeError("redis-benchmark not found (it comes with the redis-server package)")
        binary = Path(found)
    command = [
        str(binary),
        "-h", "127.0.0.1",
        "-p", str(server.port),
        "-a", server.password,  # a throw-away server in a temporary directory
        "-t", "set,get",
        "-d", str(size),
        "-c", str(clients),
        "-n", str(max(requests, MIN_BENCH_REQUESTS)),
        "--csv",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed ({done.returncode}): {done.stderr.strip()}")
    rates = {row["test"]: float(row["rps"]) for row in csv.DictReader(io.StringIO(done.stdout))}
    return Raw(clients=clients, set_per_s=rates["SET"], get_per_s=rates["GET"])


@dataclasses.dataclass(frozen=True)
class WriteTask:
    size: int  # record bytes
    positions: int  # positions per record
    window: int  # window_positions of the store
    seconds: float
    start_at: float  # time.time() at which every writer of one figure starts
    raw_set: bool  # True: plain redis-py SETs of the same bytes instead of add_game


def _writer(url: str, password: str, seed: int, tasks: mp.Queue, results: mp.Queue) -> None:
    """A writer process: runs WriteTasks from `tasks` until it gets None."""
    client = connect(url, password, retries=CONNECT_RETRIES, backoff_s=CONNECT_BACKOFF_S)
    results.put(("ready", seed))
    rng = np.random.default_rng(seed)
    while (task := tasks.get()) is not None:
        # random bytes stand in for records: no bound of their claimed length by their size
        store = ReplayStore(
            client, namespace=NAMESPACE, window_positions=task.window, record_bytes=(0, 0)
        )
        payload = rng.integers(0, 256, task.size, dtype=np.uint8).tobytes()
        time.sleep(max(0.0, task.start_at - time.time()))
        count, start = 0, time.perf_counter()
        deadline = start + task.seconds
        if task.raw_set:
            while time.perf_counter() < deadline:
                client.set(f"raw:{seed}:{count % RAW_KEYS}", payload)
                count += 1
        else:
            while time.perf_counter() < deadline:
                store.add_game(payload, task.positions)
                count += 1
        results.put((count, time.perf_counter() - start))
    client.close()


class WriterPool:
    """Writer processes started once (spawn: no forked sockets, same on macOS) and reused."""

    def __init__(self, server: EmbeddedRedis, processes: int):
        ctx = mp.get_context("spawn")
        self._results: mp.Queue = ctx.Queue()
        self._tasks: list[mp.Queue] = [ctx.Queue() for _ in range(processes)]
        self._procs = [
            ctx.Process(target=_writer, args=(server.url, server.password, seed, q, self._results))
            for seed, q in enumerate(self._tasks)
        ]
        for proc in self._procs:
            proc.start()
        for _ in self._procs:
            self._results.get(timeout=START_TIMEOUT_S)

    def records_per_s(self, writers: int, task: WriteTask) -> float:
        """Records per second added by the first `writers` processes together."""
        for q in self._tasks[:writers]:
            q.put(task)
        outcomes = [
            self._results.get(timeout=START_TIMEOUT_S + task.seconds) for _ in range(writers)
        ]
        return sum(count for count, _ in outcomes) / max(elapsed for _, elapsed in outcomes)

    def close(self) -> None:
        for q in self._tasks:
            q.put(None)
        for proc in self._procs:
            proc.join(timeout=START_TIMEOUT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()


def read_batch(store: ReplayStore, batch: int, rng: np.random.Generator) -> tuple[int, int]:
    """Draws `batch` positions uniformly from the window and fetches their distinct games:
    (positions whose game was still there, records fetched)."""
    first_id, cumulative = store.window()
    draws = rng.integers(0, int(cumulative[-1]), size=batch)
    game_ids = first_id + np.searchsorted(cumulative, draws, side="right")
    counts = Counter(game_ids.tolist())
    records = store.fetch(sorted(counts))
    return sum(counts[g] for g in records), len(records)


def measure_reader(server: EmbeddedRedis, args: argparse.Namespace) -> tuple[float, float]:
    """(samples/s, distinct records fetched/s) for one reader on the full window."""
    client = connect(server.url, server.password, retries=CONNECT_RETRIES, backoff_s=0.1)
    store = ReplayStore(client, namespace=NAMESPACE, window_positions=args.window_positions)
    rng = np.random.default_rng(0)
    read_batch(store, args.batch, rng)  # loads the window's lengths once
    samples = records = 0
    start = time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        drawn, fetched = read_batch(store, args.batch, rng)
        samples += drawn
        records += fetched
    elapsed = time.perf_counter() - start
    client.close()
    return samples / elapsed, records / elapsed


def run(args: argparse.Namespace) -> tuple[list[WriteRow], list[ReadRow], str]:
    write_rows, read_rows = [], []
    with tempfile.TemporaryDirectory(prefix="cz-replay-bench-") as tmp, EmbeddedRedis(tmp) as srv:
        client = connect(srv.url, srv.password, retries=CONNECT_RETRIES, backoff_s=0.1)
        version = client.info("server")["redis_version"]
        pool = WriterPool(srv, max(args.writers))
        try:
            for size in args.sizes:
                client.flushdb()
                requests = max(MIN_BENCH_REQUESTS, int(args.bench_mb * 1e6 / size))
                raw = {
                    c: redis_benchmark(srv, size, c, requests)
                    for c in sorted({1, CEILING_CLIENTS, *args.writers})
                }
                for writers in args.writers:
                    py_set, rate = (
                        pool.records_per_s(
                            writers,
                            WriteTask(
                                size=size,
                                positions=args.positions_per_game,
                                window=args.window_positions,
                                seconds=args.seconds,
                                start_at=time.time() + START_DELAY_S,
                                raw_set=raw_set,
                            ),
                        )
                        for raw_set in (True, False)
                    )
                    write_rows.append(
                        WriteRow(size, writers, rate, py_set, raw[writers], raw[CEILING_CLIENTS])
                    )
                samples_per_s, records_per_s = measure_reader(srv, args)
                read_rows.append(ReadRow(size, args.batch, samples_per_s, records_per_s, raw[1]))
        finally:
            pool.close()
        client.close()
    return write_rows, read_rows, version


def report(args: argparse.Namespace, writes: list[WriteRow], reads: list[ReadRow], ver: str) -> str:
    lines = [
        f"replay store vs raw Redis: redis-server {ver} on 127.0.0.1, append-only file, fsync "
        f"every second; window {args.window_positions} positions, "
        f"{args.positions_per_game} positions/game, {args.seconds:g} s per figure",
        "",
        "writers (ReplayStore.add_game: MULTI of SET + Lua script) vs redis-py and redis-benchmark "
        "SET:",
        f"{'record':>8} {'writers':>7} {'records/s':>10} {'MB/s':>8} {'py SET/s':>9} {'ratio':>6} "
        f"{'SET/s -cN':>10} {'ratio':>6} {'SET/s -c50':>11} {'ratio':>6}",
    ]
    for r in writes:
        lines.append(
            f"{r.size:>8} {r.writers:>7} {r.records_per_s:>10.0f} {r.mb_per_s:>8.1f} "
            f"{r.py_set_per_s:>9.0f} {r.records_per_s / r.py_set_per_s:>6.2f} "
            f"{r.raw_same_clients.set_per_s:>10.0f} "
            f"{r.records_per_s / r.raw_same_clients.set_per_s:>6.2f} "
            f"{r.raw_ceiling.set_per_s:>11.0f} {r.records_per_s / r.raw_ceiling.set_per_s:>6.2f}"
        )
    lines += [
        "",
        "one reader (window round trip + pipelined MGET, as the mirror reads) vs redis-benchmark "
        "GET/SET, 1 client:",
        f"{'record':>8} {'batch':>6} {'samples/s':>10} {'records/s':>10} {'MB/s':>8} "
        f"{'GET/s -c1':>10} {'ratio':>6} {'SET/s -c1':>10} {'ratio':>6}",
    ]
    for r in reads:
        lines.append(
            f"{r.size:>8} {r.batch:>6} {r.samples_per_s:>10.0f} {r.records_per_s:>10.0f} "
            f"{r.mb_per_s:>8.1f} {r.raw_one_client.get_per_s:>10.0f} "
            f"{r.records_per_s / r.raw_one_client.get_per_s:>6.2f} "
            f"{r.raw_one_client.set_per_s:>10.0f} "
            f"{r.samples_per_s / r.raw_one_client.set_per_s:>6.2f}"
        )
    lines += [
        "",
        "py SET/s: plain redis-py SETs of the same bytes from the same writer processes (the "
        "Python client's own ceiling); SET/s -cN, -c50: redis-benchmark (C) with N and 50 clients.",
        "records/s (reader): distinct games fetched per second; ratios compare it with GET/s, "
        "and samples/s with SET/s.",
    ]
    return "\n".join(lines)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}") from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    # fmt: off
    add("--sizes", type=_int_list, default=[4096, 65536],
        help="record sizes in bytes (4 KB ~ a compact 70-ply game record, 64 KB ~ one with "
        "dense float visit distributions)")
    add("--writers", type=_int_list, default=[1, 2, 4], help="concurrent writer processes")
    add("--seconds", type=float, default=1.5, help="duration of each figure")
    add("--positions-per-game", type=int, default=70,
        help="positions per record (a typical checkers game length in plies)")
    add("--window-positions", type=int, default=50_000,
        help="replay window; small enough that the writers evict all along")
    add("--batch", type=int, default=256, help="reader batch size")
    add("--bench-mb", type=float, default=64.0,
        help="MB of values per redis-benchmark test (at least 1000 requests)")
    # fmt: on
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    writes, reads, version = run(args)
    print(report(args, writes, reads, version))


if __name__ == "__main__":
    main()
