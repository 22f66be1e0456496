"""Perft: the compiled move generator against published counts and an independent reference.

Published counts from the 8x8 start (OEIS A133046): a multi-jump is one move and two capture
paths over the same pieces are two moves (which first matters at depth 12). The 6x6 board has no
published counts, so it is cross-checked against ``reference_rules``, a slow pure-Python generator
written from the rules text on (row, column) coordinates; the same reference also checks every
legal move (and the position it leads to) of random-play positions on both boards.
"""

from __future__ import annotations

import random

import pytest
import reference_rules as ref

from game import Game, Position

# OEIS A133046, depths 1..12.
PUBLISHED_PERFT = {
    1: 7,
    2: 49,
    3: 302,
    4: 1469,
    5: 7361,
    6: 36768,
    7: 179740,
    8: 845931,
    9: 3963680,
    10: 18391564,
    11: 85242128,
    12: 388623673,
}
SLOW_DEPTHS = (11, 12)  # about 2 s and 8 s here; the rest of the suite runs in well under 1 s
RANDOM_PLY_LIMIT = 160  # long enough for random games to reach king endings


def _perft_params() -> list:
    return [
        pytest.param(d, n, marks=pytest.mark.slow) if d in SLOW_DEPTHS else pytest.param(d, n)
        for d, n in PUBLISHED_PERFT.items()
    ]


@pytest.mark.parametrize(("depth", "expected"), _perft_params())
def test_start_perft_matches_published_counts(depth: int, expected: int) -> None:
    assert Position().perft(depth) == expected


def test_perft_of_depth_zero_is_one_and_the_start_has_seven_moves() -> None:
    pos = Position()
    assert pos.perft(0) == 1
    assert sorted(str(m) for m in pos.legal_moves()) == sorted(
        ["9-13", "9-14", "10-14", "10-15", "11-15", "11-16", "12-16"]
    )


@pytest.mark.parametrize("depth", [1, 3, 6])
def test_divide_sums_to_perft_and_each_entry_is_the_child_perft(depth: int) -> None:
    pos = Position()
    divided = pos.divide(depth)
    assert sum(divided.values()) == PUBLISHED_PERFT[depth]
    assert sorted(divided) == sorted(str(m) for m in pos.legal_moves())
    for move in pos.legal_moves():
        pos.play(move)
        assert pos.perft(depth - 1) == divided[str(move)], str(move)
        pos.undo()


def test_divide_of_a_midgame_position_sums_to_perft() -> None:
    # Black king on 18 among white men, White king on 3: kings and captures in the tree.
    pos = Position.from_fen("B:W14,15,22,23,K3:B9,10,K18,5")
    divided = pos.divide(5)
    assert sum(divided.values()) == pos.perft(5)
    assert len(divided) == len(pos.legal_moves())


def test_six_by_six_start_perft_matches_the_reference() -> None:
    ours = Position(size=6)
    start = ref.start_position(6)
    assert ours.fen() == ref.to_fen(start)
    for depth in range(1, 7):
        assert ours.perft(depth) == ref.perft(start, depth), f"6x6 perft({depth})"


@pytest.mark.slow
def test_eight_by_eight_start_perft_matches_the_reference_to_depth_6() -> None:
    start = ref.start_position(8)
    for depth in range(1, 7):
        assert ref.perft(start, depth) == PUBLISHED_PERFT[depth]


def _random_fens(size: int, seed: int, games: int) -> list[str]:
    """FENs of every position of a few random games (moves drawn uniformly, draw rules ignored)."""
    rng = random.Random(seed)
    fens = []
    for _ in range(games):
        game = Game(size)
        pos = Position.from_game(game)
        for _ in range(RANDOM_PLY_LIMIT):
            fens.append(pos.fen())
            moves = game.legal_moves()
            if not moves:
                break
            game.make(rng.choice(moves))
    return fens


def _check_against_reference(fen: str, size: int) -> int:
    """Asserts that both generators give the same moves and successors; returns the move count."""
    ours = Position.from_fen(fen, size)
    theirs = ref.from_fen(fen, size)
    our_moves = sorted(tuple(m.squares) for m in ours.legal_moves())
    assert our_moves == ref.legal_moves(theirs), fen
    for move in ours.legal_moves():
        ours.play(move)
        assert ours.fen() == ref.to_fen(ref.apply_move(theirs, tuple(move.squares))), (fen, move)
        ours.undo()
    return len(our_moves)


TRICKY_FENS = [
    ("B:W9,10,17,18:BK6", 8),  # a king circles four men back to its own square, two ways round
    ("W:WK3:B7,8,15,16", 8),  # a White king circling back to 3
    ("B:W26,27:B22", 8),  # a man crowned by a jump stops although a king would go on
    ("B:W26,27:BK22", 8),
    ("B:W14,15,22,23:B10", 8),  # two double jumps to the same square over different men
    ("B:W6,15,24:B2,10", 8),  # a single and a double capture: both legal
    ("W:WK14,K23:B6,10,19", 8),
    ("B:W7,8,13,14:BK5", 6),  # the same circle on the 6x6 board
    ("B:W7,8,13,14:BK4", 6),
    ("W:W10,11:B4,5,7,8", 6),
]


@pytest.mark.parametrize(("fen", "size"), TRICKY_FENS)
def test_hand_picked_positions_match_the_reference(fen: str, size: int) -> None:
    _check_against_reference(fen, size)
    ours, theirs = Position.from_fen(fen, size), ref.from_fen(fen, size)
    assert ours.perft(4) == ref.perft(theirs, 4), fen


@pytest.mark.parametrize("size", [8, 6])
def test_random_positions_match_the_reference(size: int) -> None:
    fens = _random_fens(size, seed=size, games=20)
    assert len(fens) >= 500
    moves = sum(_check_against_reference(fen, size) for fen in fens)
    kinged = sum("K" in fen for fen in fens)
    assert moves > len(fens)  # not all forced
    assert kinged > 20, "random play should reach positions with kings"


@pytest.mark.slow
@pytest.mark.parametrize("size", [8, 6])
def test_many_random_positions_match_the_reference(size: int) -> None:
    for fen in _random_fens(size, seed=1000 + size, games=80):
        _check_against_reference(fen, size)


def test_perft_of_random_positions_matches_the_reference() -> None:
    rng = random.Random(7)
    fens = [f for f in _random_fens(8, seed=3, games=4) if "K" in f]
    assert len(fens) >= 10
    for fen in rng.sample(fens, 10):
        assert Position.from_fen(fen).perft(3) == ref.perft(ref.from_fen(fen), 3), fen
