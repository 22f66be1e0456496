"""ProbCut's depth by the number of pieces: the depth a 200 ms search reaches on the node clock
(5,000 nodes a ms: the same million nodes for each search, so load-independent), lmr and margin
on, the shipped evaluation, ProbCut off, everywhere, and from each floor given (``,pcpieces=N``).

    python benchmarks/probcut_pieces.py [FLOOR ...]     # e.g. 8 9 10 14

Positions: every eighth game of the ProbCut match (docs/results/equal-time-200/probcut.pdn),
every seventh ply, no capture pending, more than one move. The figures are in docs/results.md
("ProbCut by the number of pieces").
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

from evaluation.players.alphabeta import MinimaxPlayer
from game import _core
from game.pdn import iter_pdn

GAMES = Path(__file__).resolve().parents[1] / "docs/results/equal-time-200/probcut.pdn"
BANDS = ((2, 8), (9, 12), (13, 16), (17, 24))


def main(floors: list[int]) -> None:
    positions = []
    for i, game in enumerate(iter_pdn(GAMES.read_text())):
        pos = game.start()
        for ply, move in enumerate(game.moves):
            pos.play(move)
            moves = [] if pos.is_over() else pos.legal_moves()
            if i % 8 == 0 and ply % 7 == 3 and len(moves) > 1 and "x" not in str(moves[0]):
                positions.append(pos.copy())
    variants = {"off": {}, "everywhere": {"probcut": True}}
    variants |= {f"from {n}": {"probcut": True, "probcut_min_pieces": n} for n in floors}
    print(f"{len(positions)} positions, load average {os.getloadavg()[0]:.2f}")
    depths: dict[tuple[str, tuple[int, int]], list[int]] = collections.defaultdict(list)
    for name, options in variants.items():
        switches = _core.SearchSwitches(lmr=True, pruning=True, **options)
        player = MinimaxPlayer(0, 200, nneval="", nodes_per_ms=5000, switches=switches)
        for pos in positions:
            player.choose(pos.copy())
            setup = pos.setup()
            pieces = (setup.black | setup.white).bit_count()
            band = next(b for b in BANDS if b[0] <= pieces <= b[1])
            depths[name, band].append(player.last.depth)
    for band in BANDS:
        row = [f"{band[0]}-{band[1]} pieces ({len(depths['off', band])})"]
        row += [f"{name} {sum(d) / len(d):.2f}" for name in variants if (d := depths[name, band])]
        print("  ".join(row))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]])
