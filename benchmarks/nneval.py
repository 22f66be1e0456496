"""The learned alpha-beta evaluation beside the hand-written one: nodes/s and depth per move.

    python benchmarks/nneval.py [--ms 200] [--weights game/data/nneval-v1.safetensors]

From the start and from middle-game positions (three-move openings continued by minimax:4
self-play), each evaluation searches ``--ms`` milliseconds a position, alternating, in the same
run: printed are nodes per second and the deepest iteration completed, per position and summed,
and the raw cost of one static evaluation of each kind (a full recompute for the learned one;
the search itself updates it incrementally). Run it on a quiet machine for figures to quote and
say the load (printed first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from evaluation.players.alphabeta import alphabeta
from game import _core, nneval
from game.position import Position

MIDDLE_GAMES = {  # three-move openings continued by minimax:4 self-play for this many plies
    "mid 1": ("9-13 21-17 5-9", 20),
    "mid 2": ("10-15 21-17 9-13", 24),
    "mid 3": ("11-16 24-19 8-11", 30),
    "mid 4": ("11-15 23-19 8-11", 16),
    "late": ("12-16 24-20 8-12", 50),
}
MIN_CHOICES = 3  # a benchmark position where the search has something to choose


def middle_game(opening: str, plies: int) -> Position:
    pos = Position()
    for move in opening.split():
        pos.play(move)
    played = 0
    while played < plies or len(pos.legal_moves()) < MIN_CHOICES or pos.legal_moves()[0].is_capture:
        if pos.is_over():
            break
        pos.play(alphabeta(pos, depth=4).move)
        played += 1
    return pos


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
    parser.add_argument("--repeats", type=int, default=3, help="searches per position and kind")
    args = parser.parse_args(argv)
    core = nneval.load_core(args.weights)
    load = os.getloadavg()
    print(
        f"learned evaluation {args.weights.name} ({core}), {args.ms} ms a search, "
        f"load average {load[0]:.1f} on {os.cpu_count()} CPUs"
    )
    positions = {"start": Position()}
    positions.update({name: middle_game(o, n) for name, (o, n) in MIDDLE_GAMES.items()})
    header = (
        f"{'position':<8} {'hand nodes/s':>13} {'depth':>6} {'learned nodes/s':>16} {'depth':>6}"
    )
    print(header)
    print("-" * len(header))
    totals = {"hand": [0, 0.0, 0], "learned": [0, 0.0, 0]}
    for name, pos in positions.items():
        row = {}
        for kind, weights in (("hand", None), ("learned", core)):
            nodes, seconds, depth = 0, 0.0, 0
            for _ in range(args.repeats):  # alternating kinds would be fairer still; kept simple
                r = alphabeta(pos, time_ms=args.ms, nneval=weights)
                nodes, seconds, depth = nodes + r.nodes, seconds + r.seconds, depth + r.depth
            row[kind] = (nodes / seconds, depth / args.repeats)
            t = totals[kind]
            t[0], t[1], t[2] = t[0] + nodes, t[1] + seconds, t[2] + depth
        (hn, hd), (ln, ld) = row["hand"], row["learned"]
        print(f"{name:<8} {hn / 1e3:>11.0f} k {hd:>6.1f} {ln / 1e3:>14.0f} k {ld:>6.1f}")
    searches = args.repeats * len(positions)
    (hn, hs, hd), (ln, ls, ld) = totals["hand"], totals["learned"]
    print(
        f"{'all':<8} {hn / hs / 1e3:>11.0f} k {hd / searches:>6.1f} "
        f"{ln / ls / 1e3:>14.0f} k {ld / searches:>6.1f}"
    )
    hand_us, learned_us = static_cost(core, positions["mid 1"])
    print(
        f"one static evaluation through Python (includes the call): hand {hand_us:.2f} us, "
        f"learned from scratch {learned_us:.2f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
