"""Rules-engine speed: our compiled core against OpenSpiel's checkers and py-draughts, one core.

Two figures for each engine, measured in the same run with the process pinned to one CPU:

- perft nodes per second from the standard start (whole moves; a multi-jump is one node), each
  engine driven the fastest way its API allows and checked against the published count;
- the cost, from Python, of one legal-moves call plus applying one of the moves, averaged over
  the plies of random games.

How each peer is driven (see ../shared/FACTS.md for where their rules differ):

- OpenSpiel (``pyspiel``, game ``checkers``): one action is one step or one single jump, so perft
  expands multi-jumps by applying actions while the same player is to move. States are copied with
  ``child()``: its ``undo_action`` does not restore the no-capture counter, which would end the
  game early deep in the tree. Leaves without a capture are bulk-counted (``len(legal_actions)``).
  Its legal-moves + apply is per action, the unit its API offers.
- py-draughts (``draughts`` 1.10.1, ``AmericanBoard``): its public ``legal_moves`` makes captures
  optional (perft wrong from depth 3), so both figures use its forced-capture path,
  ``_legal_moves_from_core(CORE_AMERICAN, max_capture=False, captures_optional=False)``, with
  ``push``/``pop``; perft leaves are bulk-counted from the core generator without building moves.

Peers that are not installed are skipped with a message. Run:

    python benchmarks/engine.py                 # perft(10) ours, perft(8) peers
    python benchmarks/engine.py --peer-depth 7 --plies 50000
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from game import Game, Position

# OEIS A133046: perft from the start, depths 1..12; every engine's count is checked against it.
PUBLISHED_PERFT = (1, 7, 49, 302, 1469, 7361, 36768, 179740, 845931, 3963680, 18391564,
                   85242128, 388623673)  # fmt: skip
TARGET_PERFT_NPS = 100e6  # issue 3: >= 100 M nodes/s on one core
TARGET_RATIO_PY_DRAUGHTS = 3.0  # issue 3: legal-moves + apply at least 3x cheaper than py-draughts
RANDOM_GAME_PLY_CAP = 200  # random games are cut here (kings can wander for ever)
# Uniform numbers drawn before the clock starts, so the RNG stays out of the timing; a power of
# two so that the index wraps with a mask.
RANDOM_POOL = 4096


@dataclass(frozen=True)
class PerftResult:
    engine: str
    depth: int
    nodes: int
    seconds: float  # best of the repetitions

    @property
    def nodes_per_s(self) -> float:
        return self.nodes / self.seconds


@dataclass(frozen=True)
class StepResult:
    engine: str
    plies: int
    seconds: float

    @property
    def us_per_ply(self) -> float:
        return 1e6 * self.seconds / self.plies


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def pin_to_one_core() -> str:
    """Pins this process to one CPU (Linux); returns a description for the report."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity on this platform)"
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def best_time(run: Callable[[], int], repeats: int, depth: int, engine: str) -> PerftResult:
    best = float("inf")
    nodes = 0
    for _ in range(repeats):
        start = time.perf_counter()
        nodes = run()
        best = min(best, time.perf_counter() - start)
        if nodes != PUBLISHED_PERFT[depth]:
            raise RuntimeError(
                f"{engine}: perft({depth}) = {nodes}, published {PUBLISHED_PERFT[depth]}"
            )
    return PerftResult(engine, depth, nodes, best)


# --- our core ------------------------------------------------------------------------------------


def ours_perft(depth: int, repeats: int) -> PerftResult:
    game = Game(8)
    game.perft(min(depth, 6))  # warm caches and page in the code
    return best_time(lambda: game.perft(depth), repeats, depth, "checkerzero (C++ core)")


def ours_steps(plies: int, seed: int, *, wrapper: bool) -> StepResult:
    """Random games through ``Position.legal_moves()`` (wrapper) or ``Game.legal_moves()`` (raw)."""
    rng = random.Random(seed)
    choices = [rng.random() for _ in range(RANDOM_POOL)]
    done = 0
    start = time.perf_counter()
    while done < plies:
        game = Game(8)
        legal = Position.from_game(game).legal_moves if wrapper else game.legal_moves
        make = game.make
        for i in range(RANDOM_GAME_PLY_CAP):
            moves = legal()
            if not moves:
                played = i
                break
            make(moves[int(choices[(done + i) & (RANDOM_POOL - 1)] * len(moves))])
        else:
            played = RANDOM_GAME_PLY_CAP
        done += played
    seconds = time.perf_counter() - start
    name = (
        "checkerzero Position.legal_moves + make"
        if wrapper
        else "checkerzero Game.legal_moves + make"
    )
    return StepResult(name, done, seconds)


# --- OpenSpiel -----------------------------------------------------------------------------------


def openspiel_perft(depth: int, repeats: int) -> PerftResult | None:
    try:
        import pyspiel
    except ImportError:
        print("  OpenSpiel: peer not installed (pip install 'checkerzero[peers]'): skipped")
        return None
    root = pyspiel.load_game("checkers").new_initial_state()

    def perft(state, d: int) -> int:
        actions = state.legal_actions()
        # Action = (row, column, direction, move type) in mixed radix; move type 1 is a capture.
        if d == 1 and not any(a & 1 for a in actions):
            return len(actions)
        player = state.current_player()
        n = 0
        for a in actions:
            child = state.child(a)
            if a & 1 and child.current_player() == player:
                n += perft(child, d)  # the multi-jump goes on: still the same move
            elif d == 1:
                n += 1
            else:
                n += perft(child, d - 1)
        return n

    return best_time(lambda: perft(root, depth), repeats, depth, "OpenSpiel checkers")


def openspiel_steps(plies: int, seed: int) -> StepResult | None:
    try:
        import pyspiel
    except ImportError:
        return None
    spec = pyspiel.load_game("checkers")
    rng = random.Random(seed)
    choices = [rng.random() for _ in range(RANDOM_POOL)]
    done = 0
    start = time.perf_counter()
    while done < plies:
        state = spec.new_initial_state()
        legal, apply = state.legal_actions, state.apply_action
        for i in range(RANDOM_GAME_PLY_CAP):
            actions = legal()
            if not actions:
                played = i
                break
            apply(actions[int(choices[(done + i) & (RANDOM_POOL - 1)] * len(actions))])
        else:
            played = RANDOM_GAME_PLY_CAP
        done += played
    return StepResult("OpenSpiel legal_actions + apply_action", done, time.perf_counter() - start)


# --- py-draughts ---------------------------------------------------------------------------------


def _py_draughts():
    try:
        from draughts.boards._core import CORE_AMERICAN
        from draughts.boards.american import Board
        from draughts.models import Color
    except ImportError:
        print("  py-draughts: peer not installed (pip install 'checkerzero[peers]'): skipped")
        return None
    return Board, CORE_AMERICAN, Color


def py_draughts_perft(depth: int, repeats: int) -> PerftResult | None:
    found = _py_draughts()
    if found is None:
        return None
    board_class, core, color = found
    board = board_class()
    to_ghost, gen_moves, white = core.to_ghost, core.gen_moves, color.WHITE

    def perft(d: int) -> int:
        if d == 1:  # bulk count from the core generator, captures forced
            caps, quiets = gen_moves(
                to_ghost(board.white_men),
                to_ghost(board.white_kings),
                to_ghost(board.black_men),
                to_ghost(board.black_kings),
                board.turn == white,
                False,
            )
            return len(caps) if caps else len(quiets)
        n = 0
        for move in board._legal_moves_from_core(core, max_capture=False, captures_optional=False):
            board.push(move)
            n += perft(d - 1)
            board.pop()
        return n

    return best_time(lambda: perft(depth), repeats, depth, "py-draughts AmericanBoard (forced)")


def py_draughts_steps(plies: int, seed: int) -> StepResult | None:
    found = _py_draughts()
    if found is None:
        return None
    board_class, core, _ = found
    rng = random.Random(seed)
    choices = [rng.random() for _ in range(RANDOM_POOL)]
    done = 0
    start = time.perf_counter()
    while done < plies:
        board = board_class()
        legal, push = board._legal_moves_from_core, board.push
        for i in range(RANDOM_GAME_PLY_CAP):
            moves = legal(core, max_capture=False, captures_optional=False)
            if not moves:
                played = i
                break
            push(moves[int(choices[(done + i) & (RANDOM_POOL - 1)] * len(moves))])
        else:
            played = RANDOM_GAME_PLY_CAP
        done += played
    return StepResult("py-draughts forced legal moves + push", done, time.perf_counter() - start)


# --- report --------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depth", type=int, default=10, help="perft depth for our core")
    parser.add_argument("--peer-depth", type=int, default=8, help="perft depth for the peers")
    parser.add_argument("--repeats", type=int, default=3, help="perft repetitions (best is kept)")
    parser.add_argument("--peer-repeats", type=int, default=2, help="perft repetitions, peers")
    parser.add_argument("--plies", type=int, default=100_000, help="random plies per engine")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not 1 <= args.depth < len(PUBLISHED_PERFT) or not 1 <= args.peer_depth < len(
        PUBLISHED_PERFT
    ):
        parser.error(f"perft depths must be 1-{len(PUBLISHED_PERFT) - 1}")

    print(
        f"engine benchmark on {cpu_model()}: {pin_to_one_core()}; python {sys.version.split()[0]}"
    )
    print(
        f"\nperft from the start (best of {args.repeats} for ours, {args.peer_repeats} for peers)"
    )
    ours = ours_perft(args.depth, args.repeats)
    peers = [
        openspiel_perft(args.peer_depth, args.peer_repeats),
        py_draughts_perft(args.peer_depth, args.peer_repeats),
    ]
    for r in [ours, *[p for p in peers if p]]:
        ratio = ours.nodes_per_s / r.nodes_per_s
        print(
            f"  {r.engine:<38} perft({r.depth:>2}) = {r.nodes:>11,}  {r.seconds:8.3f} s  "
            f"{r.nodes_per_s / 1e6:9.3f} M nodes/s  ours/this = {ratio:8.1f}x"
        )

    print(f"\nlegal moves + apply one, from Python, random games ({args.plies:,} plies each)")
    steps_wrapper = ours_steps(args.plies, args.seed, wrapper=True)
    steps_raw = ours_steps(args.plies, args.seed, wrapper=False)
    step_os = openspiel_steps(max(args.plies // 2, 1), args.seed)
    step_pd = py_draughts_steps(max(args.plies // 4, 1), args.seed)
    for r in [steps_wrapper, steps_raw, step_os, step_pd]:
        if r:
            print(f"  {r.engine:<42} {r.us_per_ply:8.2f} us per ply  ({r.plies:,} plies)")

    print("\ntargets")
    print(
        f"  perft({ours.depth}) >= {TARGET_PERFT_NPS / 1e6:.0f} M nodes/s: "
        f"{ours.nodes_per_s / 1e6:.1f} M nodes/s  {verdict(ours.nodes_per_s >= TARGET_PERFT_NPS)}"
    )
    for mine in (steps_wrapper, steps_raw):
        if step_os:
            print(
                f"  {mine.engine} <= OpenSpiel's: {mine.us_per_ply:.2f} us vs "
                f"{step_os.us_per_ply:.2f} us  {verdict(mine.us_per_ply <= step_os.us_per_ply)}"
            )
        else:
            print("  legal moves + apply <= OpenSpiel's: skipped (OpenSpiel not installed)")
        if step_pd:
            ratio = step_pd.us_per_ply / mine.us_per_ply
            print(
                f"  {mine.engine} >= {TARGET_RATIO_PY_DRAUGHTS:.0f}x below py-draughts': "
                f"{ratio:.1f}x  {verdict(ratio >= TARGET_RATIO_PY_DRAUGHTS)}"
            )
        else:
            print(
                "  legal moves + apply 3x below py-draughts': skipped (py-draughts not installed)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
