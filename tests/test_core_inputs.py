"""The compiled core refuses what the rules forbid: every entry point checks its input and raises
ValueError naming what is wrong, instead of reading or writing outside its buffers.

Each test is one input that the core once accepted (some of them corrupted memory); see also
tests/test_fuzz_core.py, which throws random and mutated inputs at the same entry points.
"""

from __future__ import annotations

import numpy as np
import pytest

from game import _core
from game.position import Position

PRESENT = 1 << 16  # meta word: the slot holds a position
WHITE = 1  # meta word: White to move


def packed(*states: tuple[int, int, int, int]) -> np.ndarray:
    """One sample (1, HISTORY, 4) from up to HISTORY (black, white, kings, meta) states."""
    out = np.zeros((1, _core.HISTORY, _core.PACKED_WORDS), np.uint32)
    for k, state in enumerate(states):
        out[0, k] = state
    return out


# ------------------------------------------------------------------------------------------
# encode_packed / legal_mask_packed
# ------------------------------------------------------------------------------------------


def test_encode_packed_refuses_a_piece_off_the_6x6_board():
    # A white man on bit 18 (there are 18 squares) was written before the output buffer.
    a = packed((0, 1 << 18, 0, WHITE | PRESENT))
    message = r"packed state 0, slot 0: pieces off the 6x6 board \(bit 18\)"
    with pytest.raises(ValueError, match=message):
        _core.encode_packed(6, a)
    with pytest.raises(ValueError, match=r"pieces off the 6x6 board"):
        _core.legal_mask_packed(6, a)


@pytest.mark.parametrize(
    ("state", "slot", "message"),
    [
        ((1, 1, 0, PRESENT), 0, r"square 1: both a black and a white piece"),
        ((1, 0, 2, PRESENT), 0, r"kings on empty squares \(square 2\)"),
        ((1 << 30, 0, 0, PRESENT), 0, r"black men on White's back rank \(square 31\)"),
        ((0, 1 << 2, 0, PRESENT), 0, r"white men on Black's back rank \(square 3\)"),
        ((0x1FFF, 0, 0, PRESENT), 0, r"13 black pieces: at most 12 a side"),
        ((1, 0, 0, PRESENT | (40 << 1)), 0, r"mid-jump square 40 is off the board"),
        ((1, 0, 0, PRESENT | (5 << 1)), 0, r"mid-jump square 5 holds no piece of the side to move"),
        ((1, 0, 0, PRESENT | (1 << 20)), 0, r"unknown bits set in the meta word"),
        ((0, 0, 0, 0), 0, r"the newest slot holds no position"),
    ],
)
def test_encode_packed_refuses_impossible_states(state, slot, message):
    a = packed(state)
    with pytest.raises(ValueError, match=rf"packed state 0, slot {slot}: {message}"):
        _core.encode_packed(8, a)
    with pytest.raises(ValueError, match=message):
        _core.legal_mask_packed(8, a)


def test_encode_packed_checks_older_slots_too():
    start = Position().game.pack_history()
    a = start[None].copy()
    a[0, 2] = (0, 0, 0, 7)  # an absent slot with stray bits
    with pytest.raises(ValueError, match=r"packed state 0, slot 2: .*must be all zeros"):
        _core.encode_packed(8, a)
    a[0, 2] = (1 << 31, 1 << 31, 0, PRESENT)
    with pytest.raises(ValueError, match=r"packed state 0, slot 2: square 32: both"):
        _core.encode_packed(8, a)
    a[0, 2] = 0
    assert _core.encode_packed(8, a).shape == (1, _core.NUM_PLANES, 8, 8)


def test_packed_calls_refuse_bad_sizes_and_shapes():
    good = Position().game.pack_history()[None]
    for size in (0, -8, 7, 1 << 20):
        with pytest.raises(ValueError, match=f"board size must be 6 or 8, got {size}"):
            _core.encode_packed(size, good)
        with pytest.raises(ValueError, match=f"board size must be 6 or 8, got {size}"):
            _core.legal_mask_packed(size, good)
    message = r"shape \(n, HISTORY=3, PACKED_WORDS=4\), got \(1, 2, 4\)"
    with pytest.raises(ValueError, match=message):
        _core.encode_packed(8, np.ascontiguousarray(good[:, :2]))
    # A short last axis was read past its end (the stride was taken from the shape).
    for shape in [(2, 1, 3), (2, 1, 1), (1, 0, 4)]:
        with pytest.raises(ValueError, match=r"PACKED_WORDS=4\), got"):
            _core.legal_mask_packed(8, np.zeros(shape, np.uint32))
    # Any number of history slots is fine for masks: only the newest is read.
    masks = _core.legal_mask_packed(8, np.ascontiguousarray(good[:, :1]))
    assert masks[0].nonzero()[0].tolist() == Position().game.legal_actions()
    assert _core.legal_mask_packed(8, np.zeros((0, 3, 4), np.uint32)).shape == (0, 128)


def test_a_packed_8x8_state_is_refused_as_a_6x6_one():
    six = Position(size=6).game.pack_history()[None]
    assert _core.encode_packed(6, six).shape == (1, _core.NUM_PLANES, 6, 6)
    eight = Position().game.pack_history()[None]
    with pytest.raises(ValueError, match=r"slot 0: pieces off the 6x6 board \(bits 20, 21, "):
        _core.encode_packed(6, eight)


# ------------------------------------------------------------------------------------------
# Game
# ------------------------------------------------------------------------------------------


def test_make_plays_only_legal_moves():
    game = _core.Game()
    other = _core.Game()
    other.make(other.legal_moves()[0])
    white_move = other.legal_moves()[0]  # 22-17: White's man, in a position where Black moves
    black_before = game.black
    with pytest.raises(ValueError, match=r"make\(\): 22-17 is not a legal move here"):
        game.make(white_move)
    assert (game.black, game.white, game.ply, game.depth) == (black_before, 0xFFF00000, 0, 0)
    with pytest.raises(ValueError, match="actions_of"):
        game.actions_of(white_move)
    # A move of the other board size
    six = _core.Game(6)
    with pytest.raises(ValueError, match="not a legal move"):
        six.make(game.legal_moves()[-1])


def test_make_in_the_middle_of_a_multi_jump_raises():
    pos = Position.from_fen("B:W6,14:B1")  # 1x10x19: a double jump
    game = pos.game
    (move,) = game.legal_moves()
    game.step(game.actions_of(move)[0])
    assert game.mid_jump
    with pytest.raises(ValueError, match="middle of a multi-jump"):
        game.make(move)
    with pytest.raises(ValueError, match="middle of a multi-jump"):
        game.perft(2)
    with pytest.raises(ValueError, match="middle of a multi-jump"):
        game.divide(2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((8, 1 << 28, 0, 0), r"black men on White's back rank \(square 29\)"),
        ((8, 0, 1, 0), r"white men on Black's back rank \(square 1\)"),
        ((6, 1 << 15, 0, 0), r"black men on White's back rank \(square 16\)"),
        ((8, 0xFFFF, 0xFFFF0000, 0xFFFFFFFF), r"16 black pieces: at most 12 a side on the 8x8"),
        ((6, 0x7F, 0, 0x7F), r"7 black pieces: at most 6 a side on the 6x6"),
        ((8, 1 << 5, 1 << 5, 0), r"square 6: both a black and a white piece"),
        ((8, 1 << 5, 0, 1 << 9), r"kings on empty squares \(square 10\)"),
        ((6, 1 << 20, 0, 1 << 20), r"pieces off the 6x6 board \(bit 20\)"),
        ((6, 1, 0, 1 << 31), r"pieces off the 6x6 board \(bit 31\)"),
    ],
)
def test_from_bitboards_refuses_impossible_boards(args, message):
    with pytest.raises(ValueError, match="not a position: " + message):
        _core.Game.from_bitboards(*args, False)


def test_from_bitboards_counters_do_not_wrap():
    with pytest.raises(ValueError, match=r"ply must be in \[0, 65535\], got 65536"):
        _core.Game.from_bitboards(8, 1 << 4, 1 << 20, 0, False, ply=65536)
    with pytest.raises(ValueError, match=r"ply must be in \[0, 65535\], got -1"):
        _core.Game.from_bitboards(8, 1 << 4, 1 << 20, 0, False, ply=-1)
    with pytest.raises(ValueError, match=r"no_progress must be in \[0, 80\] \(plies\), got 65536"):
        _core.Game.from_bitboards(8, 1 << 4, 1 << 20, 0, False, no_progress=65536)
    with pytest.raises(ValueError, match=r"no_progress must be in \[0, 80\] \(plies\), got -5"):
        _core.Game.from_bitboards(8, 1 << 4, 1 << 20, 0, False, no_progress=-5)
    with pytest.raises(ValueError, match=r"max_plies must be in \[0, 65535\], got 70000"):
        _core.Game(8, 70000)
    # At the top of the range the counters stop instead of wrapping to zero.
    kings = (1 << 0) | (1 << 31)
    game = _core.Game.from_bitboards(8, 1 << 0, 1 << 31, kings, False, 0, 79, 65535)
    game.make(game.legal_moves()[0])
    assert (game.ply, game.no_progress, game.result()) == (65535, 80, 3)  # drawn, not restarted
    game.step(game.legal_actions()[0])
    assert (game.ply, game.no_progress) == (65535, 81)


def test_perft_and_divide_refuse_bad_depths():
    game = _core.Game()
    for depth in (-1, -(2**31), 65, 10_000):
        with pytest.raises(ValueError, match=rf"perft depth must be in \[0, 64\], got {depth}"):
            game.perft(depth)
    for depth in (0, -1, 65):
        with pytest.raises(ValueError, match=rf"divide depth must be in \[1, 64\], got {depth}"):
            game.divide(depth)
    assert game.perft(0) == 1
    assert sum(n for _, n in game.divide(3)) == game.perft(3) == 302


def test_evaluation_weights_that_could_reach_mate_scores_are_refused():
    game = _core.Game()
    huge = _core.EvalWeights(man=2**31 - 1)
    for call in (
        lambda: _core.evaluate(game, huge),
        lambda: _core.alphabeta_search(game, depth=2, weights=huge),
        lambda: _core.evaluate(game, _core.EvalWeights(mobility=-(2**31))),
    ):
        with pytest.raises(ValueError, match="evaluation weights too large"):
            call()
    # Large but safe weights still work, and the ladder's defaults are far inside the bound.
    assert _core.evaluate(game, _core.EvalWeights(man=1000, king=1700)) == 0


# ------------------------------------------------------------------------------------------
# BatchedMCTS
# ------------------------------------------------------------------------------------------


def gathered() -> tuple[_core.BatchedMCTS, np.ndarray, np.ndarray]:
    """A search of the start position with its root gathered (one leaf, seven legal actions)."""
    config = _core.MctsConfig()
    config.dirichlet_epsilon = 0.0
    config.simulations = 16
    mcts = _core.BatchedMCTS(1, 8, config)
    mcts.reset(0, Position().game)
    planes, masks = mcts.gather()
    return mcts, planes, masks.copy()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -0.5])
def test_expand_refuses_non_finite_or_negative_priors(bad):
    mcts, _, masks = gathered()
    n, legal = len(masks), int(masks[0].nonzero()[0][0])
    priors = masks.astype(np.float32)
    priors[0, legal] = bad
    wdl = np.tile(np.float32([0.2, 0.5, 0.3]), (n, 1))
    with pytest.raises(ValueError, match=rf"priors\[0, {legal}\] is .*finite and >= 0"):
        mcts.expand(priors, wdl)
    assert mcts.tree_size(0) == 1  # nothing changed: the same batch can be evaluated again
    priors[0, legal] = 1.0
    priors[~masks] = np.nan  # entries of illegal actions are never read
    mcts.expand(priors, wdl)
    assert mcts.tree_size(0) == 1 + int(masks[0].sum())
    visits = mcts.root_visits(0)
    assert np.isfinite(mcts.root_wdl(0)).all() and visits.sum() == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_expand_refuses_non_finite_or_negative_values(bad):
    mcts, _, masks = gathered()
    priors = masks.astype(np.float32)
    wdl = np.tile(np.float32([0.2, 0.5, 0.3]), (len(masks), 1))
    wdl[0, 2] = bad
    with pytest.raises(ValueError, match=r"wdl\[0, 2\] is .*finite and >= 0"):
        mcts.expand(priors, wdl)
    wdl[0, 2] = 0.3
    mcts.expand(priors, wdl)
    assert mcts.root_wdl(0) == pytest.approx([0.2, 0.5, 0.3])


def test_search_config_and_temperature_must_be_finite():
    for field, value, message in [
        ("c_puct", float("nan"), "c_puct must be finite, got nan"),
        ("virtual_loss", float("nan"), "virtual_loss must be finite"),
        ("fpu_reduction", float("inf"), "fpu_reduction must be finite, got inf"),
        ("dirichlet_alpha", float("nan"), "dirichlet_alpha must be finite"),
        ("c_puct", -1.0, "c_puct must be >= 0"),
        ("c_puct_base", -1.0, "c_puct_base must be >= 0"),
    ]:
        config = _core.MctsConfig()
        setattr(config, field, value)
        with pytest.raises(ValueError, match=message):
            _core.BatchedMCTS(1, 8, config)
    config = _core.MctsConfig()
    config.leaves_per_game = 65535
    with pytest.raises(ValueError, match=r"num_games \* leaves_per_game must be at most 1048576"):
        _core.BatchedMCTS(65535, 8, config)  # the product overflowed int
    mcts, _planes, masks = gathered()
    mcts.expand(masks.astype(np.float32), np.tile(np.float32([0, 1, 0]), (len(masks), 1)))
    with pytest.raises(ValueError, match="temperature is nan"):
        mcts.choose(0, float("nan"))


def test_from_packed_rebuilds_every_position_of_a_random_game_mid_jump_included():
    rng = np.random.default_rng(7)
    mid_jumps = 0
    for size in (6, 8):
        for _ in range(20):
            game = _core.Game(size)
            while game.result() == 0 and game.depth < 300:
                row = game.pack_history()[0]
                rebuilt = _core.Game.from_packed(size, row)
                np.testing.assert_array_equal(rebuilt.pack_history()[0], row)
                assert sorted(rebuilt.legal_actions()) == sorted(game.legal_actions())
                assert (rebuilt.jumping, rebuilt.no_progress) == (game.jumping, game.no_progress)
                mid_jumps += game.mid_jump
                actions = game.legal_actions()
                game.step(int(actions[rng.integers(len(actions))]))
    assert mid_jumps > 0


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ((1 << 4, 1 << 20, 0, 0), r"holds no position \(meta bit 16 clear\)"),
        ((1 << 4, 1 << 20, 0, PRESENT | 1 << 7), r"unknown bits set in the meta word \(128\)"),
        ((1 << 4, 1 << 4, 0, PRESENT), r"not a position: square 5: both a black and a white piece"),
        ((1 << 4, 1 << 20, 0, PRESENT | 81 << 8), r"a no-progress count of 81 plies, above 80"),
        ((1 << 4, 1 << 20, 0, PRESENT | 33 << 1), r"mid-jump square 33 is off the board"),
        ((1 << 4, 1 << 20, 0, PRESENT | 21 << 1), r"mid-jump square 21 holds no piece of the side"),
        ((1 << 4, 1 << 20, 0, PRESENT | 5 << 1), r"jumping square 5: its piece has no capture"),
        ((1 << 4, 1 << 20, 0), r"a packed state is 4 words, got 3"),
    ],
)
def test_from_packed_refuses_what_is_not_a_position(words, message):
    with pytest.raises(ValueError, match=message):
        _core.Game.from_packed(8, np.array(words, np.uint32))
