"""Move ordering by the learned evaluation's head: nodes and time to a fixed depth, with and
without.

    python benchmarks/ab_ordering.py --weights FILE [--depth 10] [--lmr] [--games 2000] [--step 50]

Positions from real games (benchmarks/nneval.py's: the OCA archive's games, every ``--step``-th
of the first ``--games``, at moves 8, 15 and 22 where the mover has a choice and no capture). Each
is searched to ``--depth`` plies by ``ab+nn`` with the file's evaluation, history ordering (the
default) and the ``policy`` switch, one after the other in a rotating order; ``--lmr`` turns on
late-move reductions in both (they reduce the moves ordered late, so ordering matters more). A
fixed depth makes the node counts exact and load-independent; the thread's CPU time gives the
cost. Printed per position and in total: nodes, CPU seconds, and the policy search's ratios
(nodes, time, time per node: what the head costs a node). Fewer nodes to the same depth at no
more time per node is a deeper search at equal time; the equal-time match
(``scripts/equal_time.sh 312 policy``) says what that is worth.
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

KINDS = ("history", "policy")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights", type=Path, required=True, help="an evaluation with a head")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--lmr", action="store_true", help="late-move reductions in both")
    parser.add_argument("--games", type=int, default=2000, help="archive games to sample from")
    parser.add_argument("--step", type=int, default=50, help="take every step-th game")
    args = parser.parse_args(argv)
    try:
        core = nneval.load_core(args.weights)
    except nneval.NNEvalFileError as e:
        print(f"ab_ordering: {e}", file=sys.stderr)
        return 2
    if not core.has_policy:
        print(f"ab_ordering: {args.weights} has no move-ordering head", file=sys.stderr)
        return 2
    switches = {
        "history": _core.SearchSwitches(lmr=args.lmr),
        "policy": _core.SearchSwitches(lmr=args.lmr, policy=True),
    }
    positions = archive_positions(args.games, args.step)
    load = os.getloadavg()
    print(
        f"{args.weights.name}: {len(positions)} archive positions to depth {args.depth}"
        f"{' with late-move reductions' if args.lmr else ''}, "
        f"load average {load[0]:.1f} on {os.cpu_count()} CPUs"
    )
    header = f"{'position':<9} {'history nodes':>14} {'policy nodes':>13} {'ratio':>6} {'same':>5}"
    print(header)
    print("-" * len(header))
    nodes = dict.fromkeys(KINDS, 0)
    seconds = dict.fromkeys(KINDS, 0.0)
    same = 0
    for index, (name, pos) in enumerate(positions):
        found = {}
        for kind in KINDS[index % 2 :] + KINDS[: index % 2]:
            start = time.thread_time()
            found[kind] = _core.alphabeta_search(
                pos.game, args.depth, 0, None, 16, None, core, 0, 0, switches[kind]
            )
            seconds[kind] += time.thread_time() - start
            nodes[kind] += found[kind].nodes
        h, p = found["history"], found["policy"]
        agree = h.score == p.score
        same += agree
        print(f"{name:<9} {h.nodes:>14,} {p.nodes:>13,} {p.nodes / h.nodes:>6.2f} {agree!s:>5}")
    h_rate = nodes["history"] / seconds["history"]
    p_rate = nodes["policy"] / seconds["policy"]
    print(
        f"total: {nodes['history']:,} nodes in {seconds['history']:.1f} s with history, "
        f"{nodes['policy']:,} in {seconds['policy']:.1f} s with the policy head; ratios "
        f"(policy / history): nodes {nodes['policy'] / nodes['history']:.3f}, time "
        f"{seconds['policy'] / seconds['history']:.3f}, time per node {h_rate / p_rate:.3f}; "
        f"same score in {same} of {len(positions)}; load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
