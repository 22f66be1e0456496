"""Inference throughput: the full ``NetworkInference`` path against the raw forward-pass ceiling.

For each model (a ``conf/model/<name>.yaml``), thread count and batch size, two numbers measured
in the same run:

- wrapper: ``NetworkInference.evaluate`` on NumPy planes and masks, i.e. what self-play pays:
  validation, host->device copy (pinned on CUDA), forward, masked softmax, copy back;
- raw: the same model (same device, layout, dtype and compile setting) on a synthetic input that
  already lives on the device, forward only, run eagerly; the eager wrapper's ceiling. The
  wrapper runs the ``--backend`` it is given (``auto``, the default: the compiled core's forward
  pass on a CPU computing float32, which can beat this ceiling; ``jit`` for the frozen TorchScript
  graph; ``eager`` for the module as written).

``--precisions float32,bfloat16`` measures each precision setting in turn (``auto``, the default,
is what self-play uses: bf16 on CUDA and on a CPU with native bf16, float32 elsewhere).

Each cell runs warm-up calls first (more with ``--compile``, which compiles per new shape), then
times calls until ``--seconds`` have passed; CUDA work is synchronised before the clock is read.

    python benchmarks/inference.py --device cpu --batches 64,256 --seconds 2 --threads 1,2
    python benchmarks/inference.py --device cpu --models default --batches 512 --threads 1 \
        --precisions float32,bfloat16
    python benchmarks/inference.py --device cuda --batches 64,256,1024,4096 --models default,large
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import time
from collections.abc import Callable

import numpy as np
import torch

from checkerzero.config import ConfigError, compose
from checkerzero.network.inference import (
    BACKENDS,
    NetworkInference,
    compute_dtype,
    preferred_memory_format,
    select_device,
)
from checkerzero.network.model import CheckersNet, ModelConfig, count_parameters, model_config
from checkerzero.network.precision import PRECISIONS

WARMUP_CALLS = 3  # first calls pay allocator growth and oneDNN/cuDNN algorithm selection
WARMUP_CALLS_COMPILED = 6  # torch.compile recompiles once for dynamic shapes, then settles
CHUNK_SECONDS = 0.1  # calls are timed in chunks of about this long, one device sync per chunk
MIN_CHUNKS = 3  # a cell with very slow calls still gets a median of a few chunks
LEGAL_FRACTION = 0.08  # about 10 of 128 actions legal, typical of a checkers middlegame
OCCUPANCY = 0.25  # chance a piece plane is set at a cell in the synthetic planes


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


@dataclasses.dataclass(frozen=True)
class Row:
    model: str
    params: int
    precision: str  # the autocast dtype's name: float32, bfloat16
    threads: int
    batch: int
    wrapper: float  # evaluations per second through NetworkInference
    raw: float  # evaluations per second, forward pass only


def load_model_config(name: str) -> ModelConfig:
    """The ``model`` group ``name`` (conf/model/), or ``<blocks>x<channels>`` (e.g. ``6x64``) on
    top of the default one, as the composed config gives it."""
    blocks, sep, channels = name.partition("x")
    if sep and blocks.isdigit() and channels.isdigit():
        overrides = [f"model.blocks={blocks}", f"model.channels={channels}"]
    else:
        overrides = [f"model={name}"]
    try:
        cfg = compose(["run_dir=unused", *overrides])
    except ConfigError as e:
        raise SystemExit(
            f"{name!r} is neither a conf/model group nor <blocks>x<channels>: {e}"
        ) from e
    return model_config(cfg.model, cfg.game.size)


def synthetic_inputs(cfg: ModelConfig, batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = cfg.board_size
    planes = (rng.random((batch, cfg.in_planes, s, s)) < OCCUPANCY).astype(np.float32)
    planes[:, -1] = 1.0
    mask = rng.random((batch, cfg.num_actions)) < LEGAL_FRACTION
    mask[np.arange(batch), rng.integers(0, cfg.num_actions, batch)] = True
    return planes, mask


def time_calls(
    fn: Callable[[], object],
    seconds: float,
    warmup: int,
    sync: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Calls per second of ``fn``: the median over chunks of calls, timed for about ``seconds``.

    The median of short chunks, rather than one long average, keeps a burst of load from other
    processes on a shared machine from dragging the figure down. ``clock=time.process_time``
    measures this process's CPU time instead (all its threads): calls per CPU-second, a cost that
    contention for the cores barely changes (CPU only: GPU time is not CPU time).
    """
    for _ in range(warmup):
        fn()
    sync()
    start = clock()
    fn()
    sync()
    per_chunk = max(1, int(CHUNK_SECONDS / max(clock() - start, 1e-6)))
    rates: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(rates) < MIN_CHUNKS or time.perf_counter() < deadline:
        start = clock()
        for _ in range(per_chunk):
            fn()
        sync()
        rates.append(per_chunk / max(clock() - start, 1e-6))
    return float(np.median(rates))


def bench_model(
    name: str, args: argparse.Namespace, device: torch.device, threads: int, precision: str
) -> list[Row]:
    cfg = load_model_config(name)
    torch.manual_seed(0)
    model = CheckersNet(cfg).eval()
    params = count_parameters(model)
    dtype = compute_dtype(precision, device)
    inference = NetworkInference(
        copy.deepcopy(model), device=device, compile=args.compile, dtype=dtype, backend=args.backend
    )
    memory_format = preferred_memory_format(device)
    raw_model = model.to(device, memory_format=memory_format)
    raw_forward = torch.compile(raw_model) if args.compile else raw_model
    warmup = WARMUP_CALLS_COMPILED if args.compile else WARMUP_CALLS
    rows = []
    for batch in args.batches:
        planes, mask = synthetic_inputs(cfg, batch, seed=batch)
        x = torch.from_numpy(planes).to(device).contiguous(memory_format=memory_format)
        wrapper, raw = bench_cell(
            inference, raw_forward, planes, mask, x, args.seconds, warmup, CLOCKS[args.clock], dtype
        )
        precision_name = str(dtype).removeprefix("torch.")
        rows.append(Row(name, params, precision_name, threads, batch, wrapper * batch, raw * batch))
        print(_format_row(rows[-1]), flush=True)
    return rows


def bench_cell(
    inference: NetworkInference,
    raw_forward: Callable[[torch.Tensor], object],
    planes: np.ndarray,
    mask: np.ndarray,
    x: torch.Tensor,
    seconds: float,
    warmup: int,
    clock: Callable[[], float],
    dtype: torch.dtype = torch.float32,
) -> tuple[float, float]:
    """Calls per second through the wrapper and through the raw forward pass, in that order;
    the raw pass under autocast to ``dtype``, as the wrapper's."""
    cuda = x.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def raw_call() -> object:
        with (
            torch.inference_mode(),
            torch.autocast(device_type=x.device.type, dtype=dtype, enabled=dtype != torch.float32),
        ):
            return raw_forward(x)

    wrapper = time_calls(lambda: inference.evaluate(planes, mask), seconds, warmup, sync, clock)
    return wrapper, time_calls(raw_call, seconds, warmup, sync, clock)


HEADER = (
    f"{'model':<10} {'params':>9} {'precision':>9} {'threads':>7} {'batch':>6} "
    f"{'wrapper evals/s':>16} {'raw evals/s':>12} {'ratio':>6}"
)


def _format_row(r: Row) -> str:
    return (
        f"{r.model:<10} {r.params:>9,} {r.precision:>9} {r.threads:>7} {r.batch:>6} "
        f"{r.wrapper:>16,.0f} {r.raw:>12,.0f} {r.wrapper / r.raw:>6.2f}"
    )


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        message = f"expected comma-separated integers, got {text!r}"
        raise argparse.ArgumentTypeError(message) from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--batches", type=_int_list, default=[64, 256, 1024, 4096])
    parser.add_argument(
        "--models", default="default,large", help="names under conf/model/, or BxC such as 6x64"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell")
    parser.add_argument(
        "--threads",
        type=_int_list,
        default=None,
        help="torch intra-op thread counts to try (default: torch's own choice)",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: evaluations/s; cpu: evaluations per CPU-second (for busy machines, CPU only)",
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile both paths")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="the wrapper's backend (auto: cpp on a CPU computing float32, else eager)",
    )
    parser.add_argument(
        "--precisions",
        default="auto",
        help=f"comma-separated precision settings to measure ({', '.join(PRECISIONS)})",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = select_device(args.device)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(
        f"device {device}, torch {torch.__version__}, compile={args.compile}, "
        f"backend {args.backend}, "
        f"clock {args.clock}, load avg {load}"
    )
    if args.clock == "cpu" and device.type != "cpu":
        raise SystemExit("--clock cpu measures CPU time and only makes sense with --device cpu")
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if unknown := [p for p in precisions if p not in PRECISIONS]:
        raise SystemExit(f"unknown precision {', '.join(unknown)} (use {', '.join(PRECISIONS)})")
    print(HEADER)
    for threads in args.threads or [torch.get_num_threads()]:
        torch.set_num_threads(threads)
        for name in args.models.split(","):
            for precision in precisions:
                bench_model(name.strip(), args, device, threads, precision)


if __name__ == "__main__":
    main()
