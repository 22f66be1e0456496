"""The learned alpha-beta evaluation beside the hand-written one: nodes/s and depth per move.

    python benchmarks/nneval.py [--ms 200] [--weights game/data/nneval-v2.safetensors]

Positions from real games: the OCA archive's games, every ``--step``-th of the first
``--games``, at moves 8, 15 and 22 of each (where the side to move has a choice and no capture
pending). Each position is searched ``--ms`` milliseconds by the hand-written evaluation, the
learned one with its fastest kernels (AVX2 where the CPU has it) and the learned one with its
plain kernels, one after the other in a rotating order, ``--repeats`` times. Printed are nodes
per second and the deepest iteration completed per position, the totals, and the learned
evaluation's node rate as a ratio of the hand-written one's: over wall-clock time (what a timed
search sees) and over the thread's CPU time (steadier on a shared machine). The load average is
printed before and after: run it on a quiet machine for figures to quote.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.players.alphabeta import alphabeta
from game import _core, nneval
from game.archive import read_archive
from game.pdn import iter_pdn
from game.position import Position

SAMPLE_PLIES = (16, 30, 44)  # moves 8, 15 and 22 of each game
MIN_CHOICES = 3  # a benchmark position where the search has something to choose
KINDS = ("hand", "learned", "plain")


@dataclass
class Tally:
    nodes: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    depths: list[int] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.nodes += other.nodes
        self.wall += other.wall
        self.cpu += other.cpu
        self.depths += other.depths

    @property
    def rate(self) -> float:
        return self.nodes / self.wall

    @property
    def cpu_rate(self) -> float:
        return self.nodes / self.cpu

    @property
    def depth(self) -> float:
        return sum(self.depths) / len(self.depths)


def archive_positions(games: int, step: int) -> list[tuple[str, Position]]:
    """Positions of real games (see the module docstring), named game:ply."""
    found = []
    for index, game in enumerate(itertools.islice(iter_pdn(read_archive(None)), 0, games, step)):
        pos = game.start()
        for ply, move in enumerate(game.moves, start=1):
            if pos.is_over():
                break
            pos.play(move)
            if ply in SAMPLE_PLIES:
                legal = pos.legal_moves()
                if len(legal) >= MIN_CHOICES and not legal[0].is_capture:
                    found.append((f"{index * step}:{ply}", pos.copy()))
    return found


def search(pos: Position, ms: int, core: _core.NNEvalWeights | None) -> Tally:
    start = time.thread_time()
    r = alphabeta(pos, time_ms=ms, nneval=core)
    return Tally(r.nodes, r.seconds, time.thread_time() - start, [r.depth])


def static_cost(
    core: _core.NNEvalWeights, pos: Position, repeats: int = 20000
) -> tuple[float, float]:
    """Microseconds per static evaluation call: hand-written, learned (full recompute)."""
    game = pos.game
    start = time.perf_counter()
    for _ in range(repeats):
        _core.evaluate(game)
    hand = (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(repeats):
        _core.nneval_evaluate(core, game)
    learned = (time.perf_counter() - start) / repeats
    return hand * 1e6, learned * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ms", type=int, default=200, help="milliseconds per search")
    parser.add_argument("--weights", type=Path, default=nneval.DEFAULT_PATH)
    parser.add_argument("--repeats", type=int, default=2, help="searches per position and kind")
    parser.add_argument("--games", type=int, default=2000, help="archive games to sample from")
    parser.add_argument("--step", type=int, default=250, help="take every step-th game")
    args = parser.parse_args(argv)
    cores = {"hand": None, "learned": nneval.load_core(args.weights)}
    cores["plain"] = nneval.load_core(args.weights)
    cores["plain"].simd = False
    fast = "AVX2" if cores["learned"].simd else f"plain ({cores['learned'].simd_unusable})"
    load = os.getloadavg()
    print(
        f"learned evaluation {args.weights.name} ({cores['learned']}), fastest kernels: {fast}; "
        f"{args.ms} ms a search, load average {load[0]:.1f} on {os.cpu_count()} CPUs"
    )
    positions = archive_positions(args.games, args.step)
    header = (
        f"{'position':<9} {'hand nodes/s':>13} {'depth':>6} {'learned nodes/s':>16} "
        f"{'depth':>6} {'plain nodes/s':>14}"
    )
    print(header)
    print("-" * len(header))
    totals = {kind: Tally() for kind in KINDS}
    for index, (name, pos) in enumerate(positions):
        row = {kind: Tally() for kind in KINDS}
        for repeat in range(args.repeats):
            shift = (index + repeat) % len(KINDS)  # rotate who searches first
            for kind in KINDS[shift:] + KINDS[:shift]:
                row[kind].add(search(pos, args.ms, cores[kind]))
        for kind in KINDS:
            totals[kind].add(row[kind])
        h, n, p = row["hand"], row["learned"], row["plain"]
        print(
            f"{name:<9} {h.rate / 1e3:>11.0f} k {h.depth:>6.1f} {n.rate / 1e3:>14.0f} k "
            f"{n.depth:>6.1f} {p.rate / 1e3:>12.0f} k"
        )
    h, n, p = totals["hand"], totals["learned"], totals["plain"]
    print(
        f"{'all':<9} {h.rate / 1e3:>11.0f} k {h.depth:>6.1f} {n.rate / 1e3:>14.0f} k "
        f"{n.depth:>6.1f} {p.rate / 1e3:>12.0f} k"
    )
    print(
        f"node rate, learned / hand-written: {n.rate / h.rate:.2f} over wall-clock time, "
        f"{n.cpu_rate / h.cpu_rate:.2f} over CPU time (plain kernels: {p.rate / h.rate:.2f}, "
        f"{p.cpu_rate / h.cpu_rate:.2f}); {len(positions)} positions x {args.repeats}"
    )
    hand_us, learned_us = static_cost(cores["learned"], positions[0][1])
    print(
        f"one static evaluation through Python (includes the call): hand {hand_us:.2f} us, "
        f"learned from scratch {learned_us:.2f} us"
    )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
