"""Endgame database: build time and size, and probes per second from C++ and from Python.

    python benchmarks/egdb.py [--pieces 4 5] [--board 8] [--workers 2] [--probes 1000000]

Each piece count is built from nothing into a temporary folder (or ``--out``, emptied first)
with ``--workers`` processes; printed: wall time, positions, positions/s, bytes on disk. Then
probes of random positions of the largest database, with either side to move: one batched call
over a (n, 4) array (the loop in C++), and one Python call per ``Position``. The machine's load
average is printed beside the figures, since this machine is shared.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from game import Position, _core
from game.egdb import EndgameDatabase, signatures
from game.egdb.build import build


def random_states(size: int, max_pieces: int, n: int, seed: int = 0) -> np.ndarray:
    rng = random.Random(seed)
    sigs = signatures(size, max_pieces)
    weights = [_core.egdb_index_size(size, s) for s in sigs]  # uniform over positions
    out = np.empty((n, 4), dtype=np.uint32)
    for row, sig in enumerate(rng.choices(sigs, weights=weights, k=n)):
        black, white, kings = _core.egdb_board_at(
            size, sig, rng.randrange(_core.egdb_index_size(size, sig))
        )
        out[row] = (black, white, kings, rng.getrandbits(1))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pieces", type=int, nargs="+", default=[4, 5])
    parser.add_argument("--board", type=int, default=8, choices=(6, 8))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--probes", type=int, default=1_000_000, help="positions probed in the batched call"
    )
    parser.add_argument(
        "--python-probes", type=int, default=100_000, help="positions probed one call each"
    )
    parser.add_argument(
        "--out", default=None, help="build here (emptied first) instead of a temporary folder"
    )
    args = parser.parse_args(argv)

    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="egdb-bench-"))
    print(f"cores {os.cpu_count()}, load average before {os.getloadavg()[0]:.2f}")
    print(
        f"{'pieces':>6} {'seconds':>8} {'positions':>13} {'M pos/s':>8} {'bytes':>13} {'load':>5}"
    )
    for pieces in args.pieces:
        folder = root / f"{args.board}x{args.board}-{pieces}"
        shutil.rmtree(folder, ignore_errors=True)
        start = time.monotonic()
        report = build(
            folder, args.board, pieces, workers=args.workers, progress=lambda _line: None
        )
        seconds = time.monotonic() - start
        print(
            f"{pieces:>6} {seconds:>8.1f} {report.positions:>13,} "
            f"{report.positions / seconds / 1e6:>8.2f} "
            f"{report.bytes:>13,} {os.getloadavg()[0]:>5.2f}"
        )
    pieces = max(args.pieces)
    db = EndgameDatabase(root / f"{args.board}x{args.board}-{pieces}", args.board, pieces)

    states = random_states(args.board, pieces, args.probes)
    db.probe_states(states[:1000])  # fault the pages in once
    start = time.monotonic()
    values = db.probe_states(states)
    cpp_rate = len(states) / (time.monotonic() - start)
    assert (values > 0).all(), "every random position of the database must have a value"

    games = [
        _core.Game.from_bitboards(args.board, int(b), int(w), int(k), bool(m))
        for b, w, k, m in states[: args.python_probes]
    ]
    positions = [Position.from_game(g) for g in games]
    start = time.monotonic()
    for pos in positions:
        db.value(pos)
    py_rate = len(positions) / (time.monotonic() - start)
    start = time.monotonic()
    for g in games:
        db.core.probe_game(g)
    core_rate = len(games) / (time.monotonic() - start)
    print(f"probes of the {pieces}-piece database (random positions, either side to move):")
    print(f"  batched (C++ loop, {len(states):,} positions): {cpp_rate / 1e6:.2f} M probes/s")
    print(
        f"  Python, one EndgameDatabase.value(Position) call each: {py_rate / 1e6:.3f} M probes/s"
    )
    print(f"  Python, one core probe_game(Game) call each: {core_rate / 1e6:.3f} M probes/s")
    print(f"load average after {os.getloadavg()[0]:.2f}")
    if not args.out:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
