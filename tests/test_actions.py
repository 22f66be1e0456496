"""The learning interface: actions <-> moves, legal actions and masks, and the network's planes.

An action is ``square * 4 + direction`` in the mover's frame (White's board rotated 180 degrees,
square index ``i -> N-1-i``), directions 0 forward-left, 1 forward-right, 2 backward-left,
3 backward-right, forward being towards higher rows. The expected planes here are computed in
Python from the bitboards and the layout in the shared interface notes, not by the encoder.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from game import NUM_PLANES, Game, Position
from game.encoding import encode, encode_games, legal_masks, pack

NO_PROGRESS_SCALE = 80  # plane 12 is the no-progress count over the forty-move limit in plies
# (d_row, d_col) of each action direction in the mover's frame, row 0 at the mover's back rank.
FRAME_OFFSETS = {0: (1, -1), 1: (1, 1), 2: (-1, -1), 3: (-1, 1)}
PROPERTY_SETTINGS = settings(max_examples=40, deadline=None)


def _rc(index: int, size: int) -> tuple[int, int]:
    """Row and column of a 0-based square index (row 0 at the top, even rows start at col 1)."""
    per_row = size // 2
    row = index // per_row
    return row, 2 * (index % per_row) + (1 if row % 2 == 0 else 0)


def _random_games(size: int, seed: int, games: int, max_plies: int = 200) -> Iterator[Game]:
    """Every turn-boundary position of a few random games (the same Game object, mutated)."""
    rng = random.Random(seed)
    for _ in range(games):
        game = Game(size)
        for _ in range(max_plies):
            moves = game.legal_moves()
            if not moves:
                break
            yield game
            game.make(rng.choice(moves))


def _state(game: Game) -> tuple:
    return (
        game.hash,
        game.black,
        game.white,
        game.kings,
        game.white_to_move,
        game.ply,
        game.no_progress,
    )


# --- actions <-> moves ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [8, 6])
def test_action_sequences_and_moves_round_trip(size: int) -> None:
    positions = captures = multi = 0
    for game in _random_games(size, seed=size, games=40):
        positions += 1
        moves = game.legal_moves()
        sequences = [game.actions_of(m) for m in moves]
        # At a boundary the legal actions are exactly the first actions of the legal moves.
        assert sorted(game.legal_actions()) == sorted({seq[0] for seq in sequences})
        mask = game.legal_action_mask()
        assert mask.shape == (game.num_actions,)
        assert sorted(np.flatnonzero(mask).tolist()) == sorted(game.legal_actions())
        for move, seq in zip(moves, sequences, strict=True):
            assert len(seq) == len(move.squares) - 1
            assert game.move_of(seq) == move
            expected = game.copy()
            expected.make(move)
            stepped = game.copy()
            for i, action in enumerate(seq):
                # Mid-jump, the legal actions are the next actions of the moves sharing the prefix.
                following = {s[i] for s in sequences if s[:i] == seq[:i] and len(s) > i}
                assert sorted(stepped.legal_actions()) == sorted(following)
                stepped.step(action)
                if i < len(seq) - 1:
                    assert stepped.mid_jump
                    assert stepped.jumping == move.squares[i + 1]
                    assert stepped.white_to_move == game.white_to_move
                    assert stepped.result() == 0
            assert not stepped.mid_jump
            assert stepped.white_to_move != game.white_to_move
            assert _state(stepped) == _state(expected), (Position.from_game(game).fen(), move)
            captures += move.is_capture
            multi += len(seq) > 1
    assert positions > 1000
    assert captures > 300
    assert multi > 20


def test_a_move_that_returns_to_its_square_steps_and_makes_alike() -> None:
    # The black king on 6 circles the four white men on 9, 10, 17, 18 and lands back on 6.
    game = Position.from_fen("B:W9,10,17,18:BK6").game
    for move in game.legal_moves():
        stepped, made = game.copy(), game.copy()
        for action in game.actions_of(move):
            stepped.step(action)
        made.make(move)
        assert _state(made) == _state(stepped), str(move)
        assert (made.black, made.white, made.kings) == (1 << 5, 0, 1 << 5)


def test_step_rejects_an_illegal_action_and_move_of_rejects_bad_sequences() -> None:
    game = Position.from_fen("B:W15,23,24:B10").game  # 10x19x26 or 10x19x28
    jump = 9 * 4 + 1  # square 10, down-right over 15
    assert game.legal_actions() == [jump]
    for bad in (-1, game.num_actions, 0, 9 * 4 + 0):
        with pytest.raises(ValueError, match="illegal action"):
            game.step(bad)
    with pytest.raises(ValueError, match="stops in the middle of a multi-jump"):
        game.move_of([jump])
    with pytest.raises(ValueError, match="empty action sequence"):
        game.move_of([])
    with pytest.raises(ValueError, match="illegal action"):
        game.move_of([0])
    step = Position().game
    with pytest.raises(ValueError, match="follows a completed move"):
        step.move_of([step.legal_actions()[0], step.legal_actions()[0]])
    game.step(jump)
    assert game.mid_jump
    assert sorted(game.legal_actions()) == sorted([18 * 4 + 0, 18 * 4 + 1])
    game.undo()
    assert not game.mid_jump
    assert Position.from_game(game).fen() == "B:W15,23,24:B10"


def test_actions_are_the_same_pair_from_both_sides() -> None:
    # Black's 11-15 and White's 22-18 mirror each other: both are square index 10, forward-left.
    black = Position().game
    (b_move,) = [m for m in black.legal_moves() if str(m) == "11-15"]
    white = Position.from_fen("W:W21-32:B1-12").game
    (w_move,) = [m for m in white.legal_moves() if str(m) == "22-18"]
    assert black.actions_of(b_move) == white.actions_of(w_move) == [10 * 4 + 0]
    assert sorted(black.legal_actions()) == sorted(white.legal_actions())


# --- planes -------------------------------------------------------------------------------------


def _expected_piece_planes(black: int, white: int, kings: int, white_view: bool, size: int):
    """Own men, own kings, opponent men, opponent kings, in the mover's frame."""
    n = size * size // 2
    planes = np.zeros((4, size, size), np.float32)
    own, other = (white, black) if white_view else (black, white)
    for offset, pieces in ((0, own), (2, other)):
        for sq in range(n):
            if pieces >> sq & 1:
                r, c = _rc(n - 1 - sq if white_view else sq, size)
                planes[offset + (kings >> sq & 1), r, c] = 1.0
    return planes


def _check_planes(planes: np.ndarray, history: list[tuple[int, int, int]], game: Game) -> None:
    """``history``: (black, white, kings) of every earlier state, oldest first, then the current."""
    size, n = game.size, game.num_squares
    white_view = game.white_to_move
    assert planes.shape == (NUM_PLANES, size, size)
    for k in range(3):
        got = planes[4 * k : 4 * k + 4]
        if k < len(history):
            want = _expected_piece_planes(*history[-1 - k], white_view, size)
            np.testing.assert_array_equal(got, want, err_msg=f"history slot {k}")
        else:
            assert not got.any(), f"slot {k} is before the game's start and must be empty"
    np.testing.assert_allclose(planes[12], game.no_progress / NO_PROGRESS_SCALE)
    jump_plane = np.zeros((size, size), np.float32)
    if game.mid_jump:
        sq = game.jumping - 1
        jump_plane[_rc(n - 1 - sq if white_view else sq, size)] = 1.0
    np.testing.assert_array_equal(planes[13], jump_plane)
    np.testing.assert_array_equal(planes[14], np.ones((size, size), np.float32))


@pytest.mark.parametrize("size", [8, 6])
def test_planes_hold_the_position_and_its_history_action_by_action(size: int) -> None:
    rng = random.Random(10 + size)
    checked = mid_jumps = 0
    for _ in range(6):
        game = Game(size)
        history = [(game.black, game.white, game.kings)]
        while game.legal_actions() and len(history) < 150:
            packed = pack([game])
            planes = encode(packed, size)[0]
            _check_planes(planes, history, game)
            mask = legal_masks(packed, size)[0]
            np.testing.assert_array_equal(mask, game.legal_action_mask())
            checked += 1
            mid_jumps += game.mid_jump
            # Actions one at a time, so the history also holds mid-jump states.
            game.step(rng.choice(game.legal_actions()))
            history.append((game.black, game.white, game.kings))
    assert checked > 200
    assert mid_jumps > 0


def test_planes_after_whole_moves_hold_the_previous_turns() -> None:
    pos = Position()
    history = [(pos.game.black, pos.game.white, pos.game.kings)]
    for move in ("11-15", "23-19", "8-11", "22-17"):
        pos.play(move)
        history.append((pos.game.black, pos.game.white, pos.game.kings))
        planes, masks = encode_games([pos.game])
        _check_planes(planes[0], history, pos.game)
        np.testing.assert_array_equal(masks[0], pos.game.legal_action_mask())
    # Black to move after 4 plies: the man that went 11-15 is an own man on square index 14.
    assert planes[0, 0][_rc(14, 8)] == 1.0
    # One ply earlier White had just not yet played 22-17: its man on 22 (index 21) was there.
    assert planes[0, 4 + 2][_rc(21, 8)] == 1.0
    assert planes[0, 2][_rc(21, 8)] == 0.0


def test_action_geometry_matches_the_planes() -> None:
    """Each legal action's piece, and its target (and jumped piece), are where the planes say."""
    for size in (8, 6):
        for game in _random_games(size, seed=30 + size, games=4):
            planes = encode(pack([game]), size)[0]
            capture = any(m.is_capture for m in game.legal_moves())
            distance = 2 if capture else 1
            for action in game.legal_actions():
                r, c = _rc(action // 4, size)
                dr, dc = FRAME_OFFSETS[action % 4]
                assert planes[0, r, c] or planes[1, r, c], "no own piece on the action's square"
                if planes[0, r, c]:
                    assert dr == 1, "a man moves forward, towards higher rows of its frame"
                tr, tc = r + distance * dr, c + distance * dc
                assert 0 <= tr < size and 0 <= tc < size
                assert not planes[0:4, tr, tc].any(), "target square occupied"
                if capture:
                    assert planes[2, r + dr, c + dc] or planes[3, r + dr, c + dc]


def _mirror(fen: str, size: int) -> str:
    """Colours swapped and the board rotated 180 degrees (square s -> N+1-s), turn swapped."""
    n = size * size // 2
    turn, *fields = fen.split(":")
    swapped = []
    for field in fields:
        items = [s for s in field[1:].split(",") if s]
        moved = [
            ("K" if s.startswith("K") else "") + str(n + 1 - int(s.lstrip("K"))) for s in items
        ]
        swapped.append(("B" if field[0] == "W" else "W") + ",".join(moved))
    return ":".join(["W" if turn == "B" else "B", *swapped])


def _random_position(size: int, seed: int, plies: int) -> Position:
    rng = random.Random(seed)
    pos = Position(size)
    for _ in range(plies):
        moves = pos.legal_moves()
        if not moves:
            break
        pos.play(rng.choice(moves))
    return pos


@PROPERTY_SETTINGS
@given(size=st.sampled_from([8, 6]), seed=st.integers(0, 2**32 - 1), plies=st.integers(0, 120))
def test_planes_of_a_position_equal_those_of_its_colour_flipped_rotation(
    size: int, seed: int, plies: int
) -> None:
    pos = Position.from_fen(_random_position(size, seed, plies).fen(), size)  # no history
    mirror = Position.from_fen(_mirror(pos.fen(), size), size)
    assert mirror.turn != pos.turn
    planes = encode(pack([pos.game, mirror.game]), size)
    np.testing.assert_array_equal(planes[0], planes[1])
    masks = legal_masks(pack([pos.game, mirror.game]), size)
    np.testing.assert_array_equal(masks[0], masks[1])
    assert sorted(pos.game.legal_actions()) == sorted(mirror.game.legal_actions())


@PROPERTY_SETTINGS
@given(size=st.sampled_from([8, 6]), seed=st.integers(0, 2**32 - 1), plies=st.integers(0, 120))
def test_own_and_opponent_planes_swap_and_rotate_when_the_turn_changes(
    size: int, seed: int, plies: int
) -> None:
    fen = _random_position(size, seed, plies).fen()
    black = Position.from_fen("B" + fen[1:], size)
    white = Position.from_fen("W" + fen[1:], size)
    planes = encode(pack([black.game, white.game]), size)
    rotated = planes[1][:, ::-1, ::-1]
    np.testing.assert_array_equal(planes[0][0:2], rotated[2:4])
    np.testing.assert_array_equal(planes[0][2:4], rotated[0:2])
    assert planes[0][0:4].sum() == bin(black.game.black | black.game.white).count("1")


def test_encoding_an_empty_batch_and_one_of_several_games() -> None:
    assert encode(pack([]), 8).shape == (0, NUM_PLANES, 8, 8)
    games = [g.copy() for g, _ in zip(_random_games(8, seed=5, games=1), range(20), strict=False)]
    planes, masks = encode_games(games)
    assert planes.shape == (20, NUM_PLANES, 8, 8)
    for i, game in enumerate(games):
        np.testing.assert_array_equal(planes[i], encode(pack([game]), 8)[0])
        np.testing.assert_array_equal(masks[i], game.legal_action_mask())
