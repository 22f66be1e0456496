"""The inference server against the network in each process, measured in one run.

Two comparisons, each on the same network, device and precision in the same run:

1. Evaluations/s through the server: `--clients` processes (spawned, one torch thread each)
   send whole batches of `--leaves` synthetic leaves (a self-play actor's batch: 64 games x 8
   leaves) to one `InferenceServer` in this process, for `--seconds`; beside it the raw forward
   pass of the same network on an input already on the device, at the mean batch the server
   reached and at `--max-batch`. The share is server / raw at the server's batch.
2. Self-play positions/s (`run_self_play`, the run's config: 100 simulations, the default
   network, 64 games per process), server on: `--actors` processes searching with their leaves
   sent to the server; server off: `--off-actors` processes, each with its own network on
   `--device` (the way actors run without a server). Each process plays a warm-up of `--warmup`
   s first; then all play `--seconds` at once. Positions count every decision made.

With `--device cuda` and `nvidia-smi` on the PATH, the GPU's utilisation is sampled every 250 ms
during each measured phase and printed beside its figure (mean and median, %).

    python benchmarks/inference_server.py --device cpu --clients 2 --actors 2 --seconds 10
    python benchmarks/inference_server.py --device cuda --clients 15 --actors 15 --off-actors 4
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import shutil
import statistics
import subprocess
import time
import uuid
from collections.abc import Iterator

import numpy as np
import torch

from checkerzero.config import compose
from checkerzero.inference_server.client import RemoteInference
from checkerzero.inference_server.server import InferenceServer, ServerSettings
from checkerzero.network.inference import (
    NetworkInference,
    compute_dtype,
    preferred_memory_format,
    select_device,
)
from checkerzero.network.model import CheckersNet, model_config
from game.encoding import NUM_PLANES, num_actions

LEGAL_FRACTION = 0.08  # about 10 of 128 actions legal, typical of a checkers middlegame
OCCUPANCY = 0.25  # chance a piece plane is set at a cell in the synthetic planes
RAW_WARMUP_CALLS = 5  # first calls pay allocator growth and cuDNN algorithm selection
START_SLACK_S = 300.0  # what spawning and warming the processes may take beyond --warmup
SMI_PERIOD_MS = 250  # nvidia-smi's sampling period


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--clients", type=int, default=2, help="processes sending synthetic batches")
    p.add_argument("--leaves", type=int, default=512, help="leaves per client batch")
    p.add_argument("--actors", type=int, default=2, help="self-play processes, server on")
    p.add_argument("--off-actors", type=int, help="self-play processes, server off (--actors)")
    p.add_argument("--seconds", type=float, default=10.0, help="each measured phase")
    p.add_argument("--warmup", type=float, default=5.0, help="each process's warm-up")
    p.add_argument("--max-batch", type=int, help="selfplay.inference_server.max_batch")
    p.add_argument("--no-selfplay", action="store_true", help="only the evaluations/s")
    p.add_argument("--rounds", type=int, default=1, help="self-play on/off pairs, alternated")
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads of this process (server, raw pass)"
    )
    p.add_argument("--set", action="append", default=[], help="config override key=value")
    return p.parse_args(argv)


@contextlib.contextmanager
def gpu_utilisation(enabled: bool) -> Iterator[list[float]]:
    """Samples `nvidia-smi`'s GPU utilisation (%) while the block runs, into the list."""
    samples: list[float] = []
    smi = shutil.which("nvidia-smi") if enabled else None
    if smi is None:
        yield samples
        return
    proc = subprocess.Popen(
        [smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
         f"-lms={SMI_PERIOD_MS}"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        yield samples
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        samples.extend(float(x) for x in out.split() if x.strip().isdigit())


def utilisation_text(samples: list[float]) -> str:
    if not samples:
        return ""
    return f"  GPU {statistics.mean(samples):.0f}% mean, {statistics.median(samples):.0f}% median"


def synthetic(n: int, actions: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    planes = (rng.random((n, NUM_PLANES, size, size)) < OCCUPANCY).astype(np.float32)
    mask = rng.random((n, actions)) < LEGAL_FRACTION
    mask[:, 0] = True
    return planes, mask


# -- processes ------------------------------------------------------------------------------------


def _client(address: str, size: int, leaves: int, k: int, start, seconds: float, out) -> None:
    torch.set_num_threads(1)
    planes, mask = synthetic(leaves, num_actions(size), size, seed=k)
    client = RemoteInference(address, NUM_PLANES, size, num_actions(size), leaves)
    client.evaluate(planes, mask)  # connected and warm
    start.wait()
    rows, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        client.evaluate(planes, mask)
        rows += leaves
    out.put(rows / (time.perf_counter() - t0))
    client.close()


def _self_play(cfg_container: dict, address: str | None, device: str, k: int, start, args, out):
    from omegaconf import OmegaConf  # in the child: the config travels as a plain dict

    from actors.self_play import StopAt, run_self_play

    cfg = OmegaConf.create(cfg_container)
    torch.set_num_threads(1)
    size = int(cfg.game.size)
    if address is not None:
        capacity = int(cfg.selfplay.games_in_parallel) * int(cfg.mcts.leaves_per_game)
        ev = RemoteInference(address, NUM_PLANES, size, num_actions(size), capacity)
    else:
        torch.manual_seed(0)
        net = CheckersNet(model_config(cfg.model, size))
        ev = NetworkInference(net, device=device, dtype=str(cfg.selfplay.precision))
    t_end = time.monotonic() + args.warmup
    run_self_play(ev, cfg, None, seed=k, observer=StopAt(t_end))
    start.wait()
    t_end = time.monotonic() + args.seconds
    _, stats = run_self_play(ev, cfg, None, seed=1000 + k, observer=StopAt(t_end))
    out.put((stats.positions, stats.evaluations, stats.seconds, stats.network_s, stats.tree_s))


def run_all(target, jobs: list[tuple], timeout_s: float, util: bool) -> tuple[list, list[float]]:
    """Starts one process per job (args after `start, out`), releases them together once all
    are warm, and returns their results and the GPU utilisation samples meanwhile."""
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(len(jobs) + 1)
    out = ctx.Queue()
    procs = []
    for job in jobs:
        *head, tail = job
        procs.append(ctx.Process(target=target, args=(*head, start, tail, out)))
    for p in procs:
        p.start()
    start.wait(timeout=timeout_s)
    with gpu_utilisation(util) as samples:
        results = [out.get(timeout=timeout_s) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return results, samples


# -- the raw forward pass -----------------------------------------------------------------------


def raw_rate(net: CheckersNet, device: torch.device, dtype: torch.dtype, batch: int, s: float):
    """Evaluations/s of the forward pass alone, its input already on the device."""
    fmt = preferred_memory_format(device)
    model = CheckersNet(net.config)
    model.load_state_dict(net.state_dict())
    model = model.to(device, memory_format=fmt).eval()
    planes, _ = synthetic(batch, net.config.num_actions, net.config.board_size, seed=0)
    x = torch.from_numpy(planes).to(device).contiguous(memory_format=fmt)

    def call() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            model(x)

    with torch.inference_mode():
        for _ in range(RAW_WARMUP_CALLS):
            call()
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < s:
            call()
            n += 1
            if n % 10 == 0:
                sync()
        sync()
        return n * batch / (time.perf_counter() - t0)


# -- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    # Over 80 lines: setting up the measured runs and reporting them, no logic.
    args = parse_args(argv)
    torch.set_num_threads(args.threads)  # on CPU: 1, as an actor's; 2 collapse on a busy core
    device = select_device(args.device)
    cfg = compose(["run_dir=unused", *args.set])
    size = int(cfg.game.size)
    srv_cfg = cfg.selfplay.inference_server
    settings = ServerSettings(
        max_batch=args.max_batch or int(srv_cfg.max_batch),
        max_wait_ms=float(srv_cfg.max_wait_ms),
        pipeline=int(srv_cfg.pipeline),
        capture=bool(srv_cfg.capture),
    )
    precision = str(cfg.selfplay.precision)
    dtype = compute_dtype(precision, device)
    torch.manual_seed(0)
    net = CheckersNet(model_config(cfg.model, size)).eval()
    util = device.type == "cuda"
    name = f"{net.config.blocks}x{net.config.channels}"
    print(
        f"device {device} ({torch.cuda.get_device_name() if util else 'CPU'}), network {name}, "
        f"{str(dtype).removeprefix('torch.')}, server max_batch {settings.max_batch}, "
        f"pipeline {settings.pipeline}, capture {settings.capture and util}, "
        f"torch {torch.__version__}",
        flush=True,
    )
    timeout = args.warmup + args.seconds + START_SLACK_S

    def server() -> InferenceServer:
        s = InferenceServer(
            f"cz-bench-{uuid.uuid4().hex}",
            NUM_PLANES,
            size,
            num_actions(size),
            settings,
            device=device,
            precision=precision,
        )
        s.load_weights(net, 1)
        return s

    # 1. Evaluations/s through the server, and the raw forward pass.
    srv = server()
    jobs = [(srv.address, size, args.leaves, k, args.seconds) for k in range(args.clients)]
    rates, samples = run_all(_client, jobs, timeout, util)
    stats = srv.stats()
    srv.close()
    through = sum(rates)
    mean_batch = stats["rows"] / max(stats["batches"], 1)
    batch = max(1, round(mean_batch))
    raw_at_mean = raw_rate(net, device, dtype, batch, min(args.seconds, 5.0))
    raw_at_max = raw_rate(net, device, dtype, settings.max_batch, min(args.seconds, 5.0))
    print(
        f"evaluations/s through the server: {through:,.0f} ({args.clients} clients x "
        f"{args.leaves} leaves; mean batch {mean_batch:,.0f}, largest {stats['max_rows']:,})"
        f"{utilisation_text(samples)}"
    )
    print(
        f"raw forward pass: {raw_at_mean:,.0f}/s at batch {batch:,} "
        f"(server {through / raw_at_mean:.0%} of it), {raw_at_max:,.0f}/s at batch "
        f"{settings.max_batch:,}"
    )
    busy = stats["device_us"] + stats["host_in_us"] + stats["host_out_us"]
    if busy:
        print(
            f"server workers' time: device {stats['device_us'] / busy:.0%}, assembling "
            f"{stats['host_in_us'] / busy:.0%}, scattering {stats['host_out_us'] / busy:.0%}"
        )
    if args.no_selfplay:
        return

    # 2. Self-play positions/s, server on and off.
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=True)
    off_n = args.off_actors or args.actors
    for _ in range(args.rounds):
        srv = server()
        jobs = [(container, srv.address, "cpu", k, args, None) for k in range(args.actors)]
        on, samples_on = run_all(_self_play_job, jobs, timeout, util)
        stats = srv.stats()
        srv.close()
        jobs = [(container, None, str(device), k, args, None) for k in range(off_n)]
        off, samples_off = run_all(_self_play_job, jobs, timeout, util)
        for label, n, results, samples in (
            ("server on ", args.actors, on, samples_on),
            ("server off", off_n, off, samples_off),
        ):
            positions = sum(r[0] / r[2] for r in results)
            evaluations = sum(r[1] / r[2] for r in results)
            network = sum(r[3] for r in results) / max(sum(r[2] for r in results), 1e-9)
            print(
                f"self-play, {label}: {positions:,.0f} positions/s, {evaluations:,.0f} "
                f"evaluations/s, {n} processes, {network:.0%} of their time waiting on the "
                f"network{utilisation_text(samples)}"
            )
        mean = stats["rows"] / max(stats["batches"], 1)
        print(f"server batches in self-play: mean {mean:,.0f} leaves", flush=True)


def _self_play_job(cfg_container, address, device, k, args, start, _unused, out) -> None:
    _self_play(cfg_container, address, device, k, start, args, out)


if __name__ == "__main__":
    main()
