"""The evaluator's ladder games: a candidate's pairs one after another, and side by side.

    python benchmarks/evaluator.py [--checkpoint CKPT] [--rungs minimax:4,minimax:5] \
        [--pairs 4] [--side-by-side 2,4] [--leaves N] [--device cpu] [--threads 1]

The in-run evaluator plays a candidate's 32 ladder games in pairs against the rungs next to
its estimate. One pair after another (``evaluation.matches.games.play_pair``), each network
move is a search of its own, ``leaves_per_game`` positions a forward pass; side by side
(``evaluation.matches.games.play_pairs``, what the evaluator does with its neighbour rungs) the
games of K pairs share their forward passes. The script plays the same openings both ways with
the same network, in this process, and prints games/s for each, the ratio, the mean
forward-pass batch and how many games came out move for move the same (all, in exact
arithmetic; a network whose outputs vary with the batch, bf16 on a GPU, may differ by a
move now and then).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from evaluation.ladder.rungs import ladder_player
from evaluation.matches.games import PairPlan, play_pair, play_pairs
from evaluation.players.defaults import default_mcts_settings
from evaluation.players.mcts import MCTSPlayer
from evaluation.players.network import checkpoint_player
from game.openings import acf_deck
from game.position import Position
from play.settings import shipped_network


class CountingInference:
    """Passes every batch to ``inner`` and counts the batches and positions."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.batches = 0
        self.positions = 0

    def evaluate(self, planes, mask):
        self.batches += 1
        self.positions += len(mask)
        return self.inner.evaluate(planes, mask)


def main() -> None:
    # Over 80 lines: argument parsing and reporting, no logic.
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="default: shipped network")
    parser.add_argument("--rungs", default="minimax:4,minimax:5", help="comma-separated rungs")
    parser.add_argument("--pairs", type=int, default=4, help="pairs per rung")
    parser.add_argument("--side-by-side", default="2,4", help="pairs played at once (list)")
    parser.add_argument("--simulations", type=int, default=100)
    parser.add_argument(
        "--leaves",
        type=int,
        default=None,
        help="leaves per forward pass of one game's search (default: evaluation.leaves_per_game)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    checkpoint = args.checkpoint or shipped_network()
    leaves = args.leaves or default_mcts_settings()["leaves_per_game"]
    base = checkpoint_player(
        checkpoint,
        {"simulations": args.simulations, "leaves_per_game": leaves},
        device=args.device,
        threads=args.threads,
        name="net",
    )
    counter = CountingInference(base.inference)

    def player() -> MCTSPlayer:
        return MCTSPlayer(counter, base.settings, name="net", size=base.size)

    rungs = [r.strip() for r in args.rungs.split(",") if r.strip()]
    deck = acf_deck()
    jobs = [(rung, deck[i], i) for i in range(args.pairs) for rung in rungs]
    print(
        f"{checkpoint.name}, {args.simulations} simulations, {leaves} leaves a search's pass, "
        f"{args.device}, "
        f"{len(jobs)} pairs ({len(jobs) * 2} games) against {', '.join(rungs)}"
    )
    player().choose(Position(8))  # load and warm the network

    def timed(label: str, play) -> tuple[float, list]:
        counter.batches = counter.positions = 0
        t0 = time.perf_counter()
        records = play()
        seconds = time.perf_counter() - t0
        games = 2 * len(records)
        print(
            f"  {label:<28} {games / seconds:6.2f} games/s  ({seconds:6.1f} s, "
            f"{counter.positions / max(counter.batches, 1):5.1f} positions a forward pass)"
        )
        return games / seconds, records

    one = player()
    base_rate, reference = timed(
        "one pair after another",
        lambda: [
            play_pair(one, ladder_player(rung), opening, index) for rung, opening, index in jobs
        ],
    )
    for k in [int(x) for x in args.side_by_side.split(",") if x.strip()]:

        def side_by_side(k: int = k) -> list:
            records = []
            for start in range(0, len(jobs), k):
                plans = [
                    PairPlan(
                        a=(player(), player()),
                        b=(ladder_player(rung), ladder_player(rung)),
                        opening=opening,
                        index=index,
                    )
                    for rung, opening, index in jobs[start : start + k]
                ]
                records += play_pairs(plans)
            return records

        rate, records = timed(f"{k} pairs side by side", side_by_side)
        same = sum(
            (r.a_black == s.a_black) + (r.a_white == s.a_white)
            for r, s in zip(records, reference, strict=True)
        )
        print(
            f"  {'':<28} {rate / base_rate:5.2f}x one after another; "
            f"{same}/{2 * len(records)} games move for move the same"
        )


if __name__ == "__main__":
    main()
