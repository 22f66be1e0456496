"""How much of its time a managed alpha-beta player spends: games of a player against itself.

    python benchmarks/ab_clock.py [--spec ab+nn:t200,tm] [--games 2] [--nodes-per-ms 0]

Plays ``--games`` games of the spec against itself from ACF ballots (one game each, the ballots
spread over the deck) and prints, per game and in all, the share of the budget (the spec's
milliseconds times the moves) each side spent, the mean and largest milliseconds a move, how
the searches stopped (settled, target, extended, only-move, result ...), and the clock left at
the end. The load is printed first: on a busy machine a search gets fewer nodes, not less time,
so the share means something there too, but the depths do not. ``--nodes-per-ms N`` times the
searches on the node clock instead (deterministic).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from collections.abc import Sequence

from evaluation.players.alphabeta import MinimaxPlayer, alphabeta
from evaluation.players.make import make_player
from game import _core
from game.openings import acf_deck
from game.position import Position

MAX_PLIES = 300  # the match default's ply cap (game.max_plies)


def play(spec: str, opening: int, nodes_per_ms: int) -> tuple[list[MinimaxPlayer], list, list]:
    """One game of the spec against itself: the players, each search's (milliseconds, target,
    hard limit, stop) and the lowest each side's clock fell to (below 0: lost on time)."""
    log: list[tuple[float, int, int, str]] = []

    def search(position: Position, **options: object) -> _core.SearchResult:
        started = time.perf_counter()
        result = alphabeta(position, **options)
        spent = result.clock_ms if nodes_per_ms else 1000.0 * (time.perf_counter() - started)
        log.append((spent, int(options["time_ms"]), int(options["max_ms"]), result.stop))
        return result

    players = []
    for _ in range(2):
        player = make_player(spec)
        if not isinstance(player, MinimaxPlayer) or not player.manage_time:
            raise SystemExit(f"{spec}: not an alpha-beta spec with time management (',tm')")
        player._search = search  # the same search, logged
        player.nodes_per_ms = nodes_per_ms
        players.append(player)
    deck = acf_deck()
    pos = deck[opening % len(deck)].position(max_plies=MAX_PLIES)
    turn = 0
    lowest = [float(p.bank_ms) for p in players]  # the least each clock held after a move
    while not pos.is_over():
        player = players[turn % 2]
        pos.play(player.choose(pos))
        lowest[turn % 2] = min(lowest[turn % 2], player.bank_ms)
        turn += 1
    return players, log, lowest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="ab+nn:t200,tm")
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--nodes-per-ms", type=int, default=0)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print(f"load {load[0]:.2f} {load[1]:.2f}, {args.spec}, {args.games} games")
    spent = budget = 0.0
    stops: collections.Counter[str] = collections.Counter()
    for game in range(args.games):
        opening = game * 37  # ballots spread over the deck
        players, log, lowest = play(args.spec, opening, args.nodes_per_ms)
        stops.update(stop for *_, stop in log)
        shares = [p.ms_total / (p.moves * p.time_ms) for p in players]
        spent += sum(p.ms_total for p in players)
        budget += sum(p.moves * p.time_ms for p in players)
        ms = [s for s, *_ in log]
        over = [s - high for s, _, high, _ in log if s > high]
        print(
            f"game {game + 1} (ballot {opening + 1}): {len(log)} moves, share "
            f"{shares[0]:.1%} / {shares[1]:.1%}, {sum(ms) / len(ms):.0f} ms a move (largest "
            f"{max(ms):.0f}), over the hard limit {len(over)} times (by at most "
            f"{max(over, default=0):.1f} ms), clock left "
            f"{players[0].bank_ms:.0f} / {players[1].bank_ms:.0f} ms (lowest "
            f"{lowest[0]:.0f} / {lowest[1]:.0f})"
        )
    print(f"share of the budget spent: {spent / budget:.1%}; stops: {dict(stops)}")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
