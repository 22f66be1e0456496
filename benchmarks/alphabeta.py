"""Alpha-beta baseline: speed against OpenSpiel's alpha-beta, and strength of the depth ladder.

Speed (default)::

    python benchmarks/alphabeta.py [--seconds 1]

From the start and from a few middle-game positions, our search (C++, iterative deepening) and
OpenSpiel's ``minimax.alpha_beta_search`` (Python over its C++ checkers, iterated over depths
1, 2, ... until the budget is spent) each get ``--seconds``; printed: nodes/s, the deepest
iteration completed within the budget, and our/OpenSpiel ratios, measured in the same run.
Both sides use a material-only evaluation (man 1, king 1.3) so the searches are comparable;
ours is also timed with its full evaluation. Differences to keep in mind (/work/shared/FACTS.md):
OpenSpiel's checkers lets White move first (positions are mirrored onto it), counts each single
jump as a ply (its depths and nodes are per jump, ours per move), and has no repetition rule.

Strength::

    python benchmarks/alphabeta.py --strength [--max-depth 6] [--games 20] [--workers 2]

Each depth d against d+1 (and random against depth 1, which ties random into the ladder) from
the ACF 3-move deck, colours reversed, then every player's rating fitted by maximum likelihood
with draws (evaluation.stats.fit.fit_ratings), random anchored at 0.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from evaluation.ladder.rungs import rung_results
from evaluation.matches.records import MatchResult
from evaluation.matches.workers import run_match
from evaluation.players.alphabeta import EvalWeights, alphabeta
from evaluation.stats.elo import match_elo
from evaluation.stats.fit import fit_ratings
from game import Position
from game.openings import load_openings

MATERIAL_ONLY = {
    "man": 100,
    "king": 130,
    "advancement": 0,
    "back_rank": 0,
    "centre": 0,
    "mobility": 0,
    "runaway": 0,
    "king_centre": 0,
}
KING_VALUE = 1.3  # OpenSpiel's material evaluation: the same man/king ratio as ours
MIDDLE_GAMES = {  # three-move openings continued by minimax:4 self-play for this many plies
    "mid 1": ("9-13 21-17 5-9", 20),
    "mid 2": ("10-15 21-17 9-13", 24),
    "mid 3": ("11-16 24-19 8-11", 30),
}
MIN_CHOICES = 4  # a benchmark position where the search has something to choose
MAX_OPENSPIEL_DEPTH = 40  # its search never gets near this in a second


@dataclass(frozen=True)
class Measure:
    depth: int
    nodes: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.nodes / self.seconds if self.seconds > 0 else 0.0


def middle_game(opening: str, plies: int) -> tuple[Position, list]:
    """The position after ``opening`` and at least ``plies`` moves of minimax:4 self-play (more
    until the mover has a real choice: no capture pending, several moves), with its moves."""
    pos = Position()
    moves = [pos.play(move) for move in opening.split()]
    while len(moves) < len(opening.split()) + plies or not _quiet_choice(pos):
        moves.append(pos.play(alphabeta(pos, depth=4).move))
    return pos, moves


def _quiet_choice(pos: Position) -> bool:
    legal = pos.legal_moves()
    return len(legal) >= MIN_CHOICES and not legal[0].is_capture


def ours(pos: Position, seconds: float, weights: dict | None) -> Measure:
    result = alphabeta(
        pos, time_ms=int(seconds * 1000), weights=EvalWeights(**weights) if weights else None
    )
    return Measure(result.depth, result.nodes, result.seconds)


# ----------------------------------------------------------------------------- OpenSpiel


def square_name(square: int) -> str:
    """Our square (1-32) as OpenSpiel's coordinate: its first mover sits on ranks 1-3, so our
    board (Black, the first mover, on rows 0-2 at the top) maps onto it rotated by 180 degrees."""
    i = square - 1
    row, k = divmod(i, 4)
    col = 2 * k + (1 if row % 2 == 0 else 0)
    return f"{'abcdefgh'[7 - col]}{row + 1}"


def openspiel_state(moves: list):  # -> pyspiel.State
    """Our moves replayed in OpenSpiel's checkers, one action per single jump."""
    import pyspiel

    state = pyspiel.load_game("checkers").new_initial_state()
    for move in moves:
        squares = move.squares
        for a, b in itertools.pairwise(squares):
            text = square_name(a) + square_name(b)
            actions = {state.action_to_string(x): x for x in state.legal_actions()}
            if text not in actions:
                raise ValueError(f"OpenSpiel has no action {text} for {move}: {sorted(actions)}")
            state.apply_action(actions[text])
    return state


def openspiel(state, seconds: float) -> Measure:
    import numpy as np
    from open_spiel.python.algorithms import minimax

    me = state.current_player()

    def material(s) -> float:
        planes = np.asarray(s.observation_tensor(0)).reshape(5, 8, 8).sum(axis=(1, 2))
        value = planes[0] + KING_VALUE * planes[1] - planes[2] - KING_VALUE * planes[3]
        return value if me == 0 else -value

    nodes = 0
    original = minimax._alpha_beta

    def counting(*args, **kwargs):  # the recursion calls the module global: every node counts
        nonlocal nodes
        nodes += 1
        return original(*args, **kwargs)

    minimax._alpha_beta = counting
    try:
        start = time.perf_counter()
        best = Measure(0, 0, 0.0)
        for depth in range(1, MAX_OPENSPIEL_DEPTH + 1):
            minimax.alpha_beta_search(state.get_game(), state.clone(), material, depth, me)
            elapsed = time.perf_counter() - start
            if elapsed > seconds:
                # Deepest completed within the budget; the rate counts every node searched.
                return Measure(best.depth, nodes, elapsed)
            best = Measure(depth, nodes, elapsed)
        return best
    finally:
        minimax._alpha_beta = original


def speed(seconds: float) -> None:
    positions = {"start": (Position(), [])}
    positions.update({name: middle_game(m, n) for name, (m, n) in MIDDLE_GAMES.items()})
    print(f"Alpha-beta, {seconds:g} s per position (depth = deepest iteration completed)")
    header = (
        f"{'position':<13} {'ours full':>16} {'ours material':>16} {'OpenSpiel material':>19}"
        f" {'speed ratio':>11} {'depth +':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, (pos, moves) in positions.items():
        full = ours(pos, seconds, None)
        mat = ours(pos, seconds, MATERIAL_ONLY)
        try:
            spiel = openspiel(openspiel_state(moves), seconds)
        except ImportError:
            print("OpenSpiel: peer not installed (pip install 'checkerzero[peers]'): skipped")
            return
        cell = lambda m: f"{m.rate / 1e3:7.0f}k/s d{m.depth:<2}"  # noqa: E731
        print(
            f"{name:<13} {cell(full):>16} {cell(mat):>16} {cell(spiel):>19} "
            f"{mat.rate / max(spiel.rate, 1):>10.0f}x {mat.depth - spiel.depth:>+7d}"
        )
        print(f"{'':<13} FEN {pos.fen()}")


# ----------------------------------------------------------------------------- strength


def strength(max_depth: int, games: int, workers: int, seed: int, ray: str) -> None:
    deck = load_openings("deck")
    ladder = ["random"] + [f"minimax:{d}" for d in range(1, max_depth + 1)]
    print(f"Ladder: each rung {games} games from the ACF deck (colours reversed), seed {seed}")
    print(
        f"{'stronger':<10} {'weaker':<10} {'W':>4} {'D':>4} {'L':>4} {'score':>7} "
        f"{'Elo (95%)':>22} {'seconds':>8}"
    )

    def play(a: str, b: str) -> MatchResult:
        start = time.perf_counter()
        result = run_match(a, b, deck, games=games, seed=seed, workers=workers, ray_mode=ray)
        elo = match_elo(result.wins, result.draws, result.losses)
        print(
            f"{a:<10} {b:<10} {result.wins:>4} {result.draws:>4} {result.losses:>4} "
            f"{100 * result.score:>6.1f}% {elo.elo:>+6.0f} [{elo.elo_lower:+.0f}, "
            f"{elo.elo_upper:+.0f}] {time.perf_counter() - start:>8.1f}",
            flush=True,
        )
        return result

    ratings = fit_ratings(rung_results(ladder, play), {"random": 0.0})
    print(f"\nFitted ratings (BayesElo draw model, random = 0, draw_elo {ratings.draw_elo:.0f})")
    for player in sorted(ratings.players, key=lambda p: p.elo):
        print(f"{player.name:<10} {player.elo:>7.0f}  [{player.lower:.0f}, {player.upper:.0f}]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="budget per position")
    parser.add_argument("--strength", action="store_true", help="play the depth ladder instead")
    parser.add_argument("--max-depth", type=int, default=6, choices=range(2, 9), metavar="2..8")
    parser.add_argument("--games", type=int, default=20, help="games per ladder rung (even)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", choices=("auto", "on", "off"), default="off")
    args = parser.parse_args(argv)
    if args.strength:
        strength(args.max_depth, args.games, args.workers, args.seed, args.ray)
    else:
        speed(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
