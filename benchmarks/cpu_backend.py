"""The CPU backends of ``NetworkInference`` side by side, on one core: eager (torch as written),
jit (a frozen TorchScript graph) and cpp (the compiled core's forward pass, the default).

Two measurements, each interleaving the backends so both see the same load on a shared machine:

- evaluations per CPU-second of ``NetworkInference.evaluate`` (the whole call: checks, forward,
  masked softmaxes, NumPy out) at each batch size, on positions a few plies after ACF ballots;
  the median over ``--rounds`` rounds, each timing every backend for ``--seconds``;
- timed moves: ``<checkpoint>:t<ms>,backend=B`` players search the same positions (a fresh tree
  each), and the network evaluations one move made are printed with the CPU seconds it used
  (evaluations per CPU-second of search, which load changes less than the per-move count).

    python benchmarks/cpu_backend.py
    python benchmarks/cpu_backend.py --batches 1,8 --moves 4 --time-ms 1000
    python benchmarks/cpu_backend.py --batches 8 --rounds 1 --moves 12 --leaves 2
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

import torch

from checkerzero.network.inference import load_for_play
from evaluation.players.make import make_player
from game.encoding import encode_games
from game.openings import acf_deck
from game.position import Position

COMPARED = ("eager", "jit", "cpp")  # the reference path, torch's fast one, ours (auto on a CPU)
SHIPPED = Path(__file__).resolve().parents[1] / "game" / "data" / "long-320min.safetensors"


def positions(n: int, seed: int) -> list[Position]:
    """``n`` unfinished positions 4-20 random plies after ACF ballots (fixed by ``seed``)."""
    rng = random.Random(seed)
    deck = acf_deck()
    out: list[Position] = []
    while len(out) < n:
        pos = deck[rng.randrange(len(deck))].position()
        for _ in range(rng.randrange(4, 21)):
            if pos.is_over():
                break
            pos.play(rng.choice(pos.legal_moves()))
        if not pos.is_over():
            out.append(pos)
    return out


def per_cpu_second(fn, seconds: float) -> float:
    """Calls of ``fn`` per CPU-second of this process, over about ``seconds`` of CPU time."""
    for _ in range(3):
        fn()
    calls, start = 0, time.process_time()
    while (spent := time.process_time() - start) < seconds:
        fn()
        calls += 1
    return calls / spent


def bench_batches(args: argparse.Namespace) -> None:
    inferences = {
        b: load_for_play(args.checkpoint, 8, device="cpu", dtype="float32", backend=b)[0]
        for b in COMPARED
    }
    planes, mask = encode_games([p.game for p in positions(max(args.batches), seed=0)])
    print(
        f"{'batch':>5} "
        + " ".join(f"{b + ' evals/cpu-s':>18}" for b in COMPARED)
        + "  cpp/jit cpp/eager"
    )
    for batch in args.batches:
        rates: dict[str, list[float]] = {b: [] for b in COMPARED}
        x, m = planes[:batch], mask[:batch]
        for _ in range(args.rounds):
            for name, ev in inferences.items():
                call = lambda ev=ev: ev.evaluate(x, m)  # noqa: E731, B023
                rates[name].append(batch * per_cpu_second(call, args.seconds))
        med = {b: statistics.median(r) for b, r in rates.items()}
        cells = " ".join(f"{med[b]:>18,.0f}" for b in COMPARED)
        ratios = f"{med['cpp'] / med['jit']:>8.2f} {med['cpp'] / med['eager']:>9.2f}"
        print(f"{batch:>5} {cells} {ratios}", flush=True)


def bench_moves(args: argparse.Namespace) -> None:
    leaves = f",leaves={args.leaves}" if args.leaves else ""
    players = {
        b: make_player(f"{args.checkpoint}:t{args.time_ms},backend={b}{leaves}", seed=0)
        for b in COMPARED
    }
    rows: dict[str, list[tuple[int, float, float]]] = {b: [] for b in COMPARED}
    for pos in positions(args.moves, seed=1):
        for name, player in players.items():
            player.reset()
            before = player.stats()["evaluations"]
            cpu, wall = time.process_time(), time.perf_counter()
            player.choose(pos.copy())
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            rows[name].append((player.stats()["evaluations"] - before, cpu, wall))
    chunk = next(iter(players.values()))._chunk
    what = f"{args.moves} positions, a fresh tree each, {chunk} leaves a pass"
    print(f"{args.time_ms} ms moves on {what}:")
    for name, r in rows.items():
        evals = [e for e, _, _ in r]
        cpu = sum(c for _, c, _ in r)
        print(
            f"  {name:<6} evaluations a move: median {statistics.median(evals):>6,.0f} "
            f"(min {min(evals):,}, max {max(evals):,}); {sum(evals) / cpu:,.0f} per CPU-second "
            f"of search; CPU {cpu / sum(w for _, _, w in r):.0%} of wall time"
        )


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(SHIPPED))
    parser.add_argument("--batches", type=_ints, default=[1, 2, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=0.5, help="CPU seconds per cell a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--moves", type=int, default=8, help="positions searched per backend")
    parser.add_argument("--time-ms", type=int, default=200)
    parser.add_argument(
        "--leaves",
        type=int,
        default=0,
        help="leaves a forward pass in the timed moves (0: default)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"torch {torch.__version__}, 1 thread, {os.cpu_count()} CPUs, load avg {load}")
    bench_batches(args)
    if args.moves:
        bench_moves(args)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"load avg at the end {load}")


if __name__ == "__main__":
    main()
