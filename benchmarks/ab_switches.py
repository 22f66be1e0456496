"""The alpha-beta's search switches at a fixed depth: nodes, CPU time and scores of each on top of
a base set.

    python benchmarks/ab_switches.py [--depth 13] [--base lmr] [--weights FILE]

Positions from real games (benchmarks/nneval.py's: the OCA archive's games, every ``--step``-th
of the first ``--games``, at moves 8, 15 and 22 where the mover has a choice and no capture). Each
is searched to ``--depth`` plies by ``ab+nn`` with the file's evaluation and the ``--base``
switches (SearchSwitches field names, comma-separated; none by default), then with each other
switch added, each search with a fresh table. Printed per switch: the total nodes and the
thread's CPU time as ratios of the base search's, and in how many positions the score is the
base search's. A fixed depth makes the node
counts exact and load-independent; fewer nodes to the same depth is more depth at equal time,
but a pruning switch also cuts lines that mattered, and only the equal-time match
(``scripts/equal_time.sh``) tells which wins.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from nneval import archive_positions  # benchmarks/nneval.py (this folder is on the path)

from game import _core, nneval

# tt_keep is left out: it keeps the table between searches, which a single search never sees.
SWITCHES = ("aspiration", "pruning", "probcut", "quiescence", "lmr")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights", type=Path, default=nneval.DEFAULT_PATH)
    parser.add_argument("--depth", type=int, default=13)
    parser.add_argument("--base", default="", help="switches on in every search, e.g. lmr")
    parser.add_argument("--games", type=int, default=2000, help="archive games to sample from")
    parser.add_argument("--step", type=int, default=50, help="take every step-th game")
    args = parser.parse_args(argv)
    base = [name for name in args.base.split(",") if name]
    unknown = sorted(set(base) - set(SWITCHES))
    if unknown:
        print(
            f"ab_switches: unknown switches {unknown}; use {', '.join(SWITCHES)}", file=sys.stderr
        )
        return 2
    try:
        core = nneval.load_core(args.weights)
    except nneval.NNEvalFileError as e:
        print(f"ab_switches: {e}", file=sys.stderr)
        return 2
    positions = archive_positions(args.games, args.step)
    print(
        f"{args.weights.name}: {len(positions)} archive positions to depth {args.depth}, base "
        f"switches {base or 'none'}, load average {os.getloadavg()[0]:.1f}"
    )
    rows: dict[str, tuple[int, float, list[int]]] = {}
    for added in ["base", *[s for s in SWITCHES if s not in base]]:
        switches = _core.SearchSwitches(
            **{name: True for name in base}, **({added: True} if added != "base" else {})
        )
        nodes, scores, start = 0, [], time.thread_time()
        for _, pos in positions:
            found = _core.alphabeta_search(  # a fresh table for each search
                pos.game, args.depth, 0, None, 16, None, core, 0, 0, switches,
                _core.AlphaBetaSearcher(16),
            )  # fmt: skip
            nodes += found.nodes
            scores.append(found.score)
        rows[added] = (nodes, time.thread_time() - start, scores)
    b_nodes, b_time, b_scores = rows["base"]
    print(f"{'switch':<11} {'nodes':>13} {'ratio':>6} {'CPU s':>7} {'ratio':>6} {'same score':>11}")
    for name, (nodes, seconds, scores) in rows.items():
        same = sum(a == b for a, b in zip(scores, b_scores, strict=True))
        print(
            f"{name:<11} {nodes:>13,} {nodes / b_nodes:>6.3f} {seconds:>7.1f} "
            f"{seconds / b_time:>6.3f} {same:>5} of {len(scores)}"
        )
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
