"""The batched C++ search: known answers, visit accounting, noise, seeds, batching and value signs.

Positions are drawn with Black at the top (b/w men, B/W kings); Black moves down the board.
The evaluators here are tiny hand-made ones, so every expectation follows from the rules alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from game import _core
from game.mcts import new_search, search
from game.position import Position

# Search settings for the tests: small, no noise unless a test turns it on.
BASE = {
    "simulations": 200,
    "leaves_per_game": 8,
    "dirichlet_epsilon": 0.0,
    "seed": 1,
}
# Material weights of the hand-made evaluator: a king is worth more than a man (it moves both
# ways), so a breakthrough that crowns shows in the value.
MAN, KING = 1.0, 1.5
# How sharply a material difference turns into a win probability (tanh scale).
MATERIAL_SCALE = 0.5


class UniformEvaluator:
    """Equal priors over the legal actions, a certain draw as the value."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = mask.astype(np.float32)
        priors = m / np.maximum(m.sum(axis=1, keepdims=True), 1.0)
        wdl = np.zeros((len(mask), 3), np.float32)
        wdl[:, 1] = 1.0
        return priors, wdl


class MaterialEvaluator(UniformEvaluator):
    """Uniform priors; the value is tanh of the material balance from the mover's view."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        priors, _ = super().evaluate(planes, mask)
        own = MAN * planes[:, 0].sum((1, 2)) + KING * planes[:, 1].sum((1, 2))
        opp = MAN * planes[:, 2].sum((1, 2)) + KING * planes[:, 3].sum((1, 2))
        v = np.tanh(MATERIAL_SCALE * (own - opp))
        wdl = np.stack([np.maximum(v, 0), 1 - np.abs(v), np.maximum(-v, 0)], axis=1)
        return priors, wdl.astype(np.float32)


def one_game(fen: str, **overrides) -> _core.BatchedMCTS:
    mcts = new_search(1, 8, {**BASE, **overrides})
    mcts.reset(0, Position.from_fen(fen).game)
    return mcts


def action_of(fen: str, move: str) -> int:
    """The first action (the search's decision) of a move given in notation."""
    pos = Position.from_fen(fen)
    return pos.game.actions_of(pos.parse_move(move))[0]


# ------------------------------------------------------------------------------------------
# Known answers
# ------------------------------------------------------------------------------------------

# Two for one: 15-19 gives a man; White must take 24x15, and 10x19x26 takes both white men,
# which ends the game (White has no piece left).
#   +-----------------+
#   |   .   .   .   . |   1-4
#   | .   b   .   .   |   5-8
#   |   .   b   .   . |   9-12
#   | .   .   b   b   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   w   w   |  21-24
#   |   .   .   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
SHOT = "B:W23,24:B6,10,15,16"

# Forced breakthrough: 18-22! forces 21x14 and 22x31 crowns (captures are compulsory); every
# other move lets White hold (checked by exhaustive search to 6 plies when the position was
# chosen: no other move forces a crowning with material level).
#   +-----------------+
#   |   .   .   .   . |   1-4
#   | .   .   .   .   |   5-8
#   |   .   .   .   . |   9-12
#   | .   .   .   .   |  13-16
#   |   b   b   .   . |  17-20
#   | w   .   .   .   |  21-24
#   |   .   w   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
BREAKTHROUGH = "B:W21,26:B17,18"

# King against man: 7-10 is the only move that wins within 5 plies (the king meets the man
# on its way up and takes it; exhaustive search finds no win in 7 plies after the others).
#   +-----------------+
#   |   .   .   .   . |   1-4
#   | .   .   B   .   |   5-8
#   |   .   .   .   . |   9-12
#   | .   .   .   .   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   .   .   |  21-24
#   |   .   w   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
KING_VS_MAN = "B:W26:BK7"

# A lone king: 18-22 and 18-23 step next to a white man that jumps it at once (Black then has
# no piece and loses); 18-14 and 18-15 are safe.
#   +-----------------+
#   |   .   .   .   . |   1-4
#   | .   .   .   .   |   5-8
#   |   .   .   .   . |   9-12
#   | .   .   .   .   |  13-16
#   |   .   B   .   . |  17-20
#   | .   .   .   .   |  21-24
#   |   w   .   w   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
HANGING = "B:W25,27:BK18"


def test_finds_two_for_one_shot():
    mcts = one_game(SHOT)
    search(mcts, UniformEvaluator())
    best = action_of(SHOT, "15-19")
    assert mcts.choose(0, 0.0) == best
    # The whole line is forced, so every visit of 15-19 ends in White's exact loss.
    assert mcts.root_q(0)[best] == 1.0


def test_finds_forced_breakthrough():
    mcts = one_game(BREAKTHROUGH)
    search(mcts, MaterialEvaluator())
    assert mcts.choose(0, 0.0) == action_of(BREAKTHROUGH, "18-22")


def test_wins_king_against_man():
    mcts = one_game(KING_VS_MAN, simulations=400)
    search(mcts, UniformEvaluator())
    best = action_of(KING_VS_MAN, "7-10")
    assert mcts.choose(0, 0.0) == best
    q = mcts.root_q(0)
    assert q[best] > 0.5
    assert q[best] == np.nanmax(q)


def test_avoids_a_move_that_loses_at_once():
    mcts = one_game(HANGING)
    search(mcts, UniformEvaluator())
    losing = {action_of(HANGING, "18-22"), action_of(HANGING, "18-23")}
    q = mcts.root_q(0)
    for a in losing:
        assert q[a] == -1.0  # scored by the rules: the side with no piece has lost
    assert mcts.choose(0, 0.0) not in losing
    assert mcts.root_visits(0)[list(losing)].sum() < 0.1 * BASE["simulations"]


# ------------------------------------------------------------------------------------------
# Visit accounting, noise, seeds, batching
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("simulations", "leaves"), [(1, 1), (37, 1), (100, 8), (250, 16)])
def test_root_visits_sum_to_simulations(simulations, leaves):
    mcts = new_search(3, 8, {**BASE, "simulations": simulations, "leaves_per_game": leaves})
    search(mcts, UniformEvaluator())
    for i in range(3):
        assert mcts.search_done(i)
        assert mcts.root_visits(i).sum() == simulations
        assert mcts.root_child_visits(i) == simulations


def test_reused_subtree_keeps_its_visits():
    mcts = new_search(1, 8, {**BASE, "simulations": 300})
    search(mcts, UniformEvaluator())
    best = mcts.choose(0, 0.0)
    _, below = mcts.node_stats(0, [best])
    mcts.advance(0, best)
    assert mcts.root_visits(0).sum() == below.sum() > 0
    search(mcts, UniformEvaluator())
    assert mcts.root_visits(0).sum() == 300


class SkewedEvaluator(UniformEvaluator):
    """Priors proportional to action index + 1 over the legal actions: easy to recompute."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, wdl = super().evaluate(planes, mask)
        return skewed(mask), wdl


def skewed(mask: np.ndarray) -> np.ndarray:
    w = mask * (np.arange(mask.shape[-1], dtype=np.float32) + 1)
    return (w / w.sum(axis=-1, keepdims=True)).astype(np.float32)


def test_noise_touches_only_the_root():
    mcts = new_search(1, 8, {**BASE, "dirichlet_epsilon": 0.25, "dirichlet_alpha": 0.3})
    search(mcts, SkewedEvaluator())
    game = mcts.game(0)
    network = skewed(game.legal_action_mask()[None])[0]
    root = mcts.root_priors(0)
    assert root.sum() == pytest.approx(1.0, abs=1e-5)
    assert np.abs(root - network).max() > 1e-3  # noise was mixed in
    assert np.all(root[~game.legal_action_mask()] == 0)
    for a in np.flatnonzero(mcts.root_visits(0) > 1):  # expanded children keep the network's
        child = game.copy()
        child.step(int(a))
        priors, _ = mcts.node_stats(0, [int(a)])
        np.testing.assert_allclose(priors, skewed(child.legal_action_mask()[None])[0], rtol=1e-6)
    # After a move the new root gets fresh noise; its own children stay clean.
    best = mcts.choose(0, 0.0)
    before, _ = mcts.node_stats(0, [best])
    mcts.advance(0, best)
    assert np.abs(mcts.root_priors(0) - before).max() > 1e-3


def play(seed: int, size: int = 6, max_plies: int = 40) -> list[int]:
    """A whole game with noise and temperature 1: every decision depends on the RNG."""
    mcts = new_search(
        1, size, {"simulations": 16, "dirichlet_epsilon": 0.25, "dirichlet_alpha": 1.0}, seed=seed
    )
    mcts.reset(0, _core.Game(size, max_plies))
    actions = []
    while not mcts.done(0):
        search(mcts, UniformEvaluator())
        a = mcts.choose(0, 1.0)
        actions.append(a)
        mcts.advance(0, a)
    return actions


def test_fixed_seed_gives_the_same_game():
    first = play(seed=7)
    assert len(first) > 10
    assert play(seed=7) == first
    assert play(seed=8) != first


@pytest.mark.parametrize(
    ("fen", "move", "evaluator"),
    [(SHOT, "15-19", UniformEvaluator()), (BREAKTHROUGH, "18-22", MaterialEvaluator())],
)
def test_many_leaves_and_one_leaf_agree(fen, move, evaluator):
    choices = []
    for leaves in (1, 16):
        mcts = one_game(fen, leaves_per_game=leaves)
        search(mcts, evaluator)
        choices.append(mcts.choose(0, 0.0))
    assert choices == [action_of(fen, move)] * 2


def test_many_games_in_one_batch_match_single_games():
    """Games in one object do not leak into each other: each tree matches a lone search."""
    fens = [SHOT, HANGING, BREAKTHROUGH]
    many = new_search(len(fens), 8, {**BASE, "leaves_per_game": 1})
    for i, fen in enumerate(fens):
        many.reset(i, Position.from_fen(fen).game)
    search(many, MaterialEvaluator())
    for i, fen in enumerate(fens):
        alone = one_game(fen, leaves_per_game=1)
        search(alone, MaterialEvaluator())
        np.testing.assert_array_equal(many.root_visits(i), alone.root_visits(0))


# ------------------------------------------------------------------------------------------
# Value signs
# ------------------------------------------------------------------------------------------

# Black must take 10x19 and may go on either 19x26 or 19x28: two decisions by the same side.
#   +-----------------+
#   |   b   b   b   b |   1-4
#   | b   b   b   b   |   5-8
#   |   .   b   .   . |   9-12
#   | .   .   w   .   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   w   w   |  21-24
#   |   .   .   w   . |  25-28
#   | w   w   w   w   |  29-32
#   +-----------------+
DOUBLE_JUMP = "B:W15,23,24,27,29,30,31,32:B1,2,3,4,5,6,7,8,10"


class BlackWinsOracle:
    """Says Black wins from every leaf, in the mover's view: a win when Black is to move
    (including Black in the middle of a multi-jump), a loss when White is."""

    def __init__(self, mcts: _core.BatchedMCTS) -> None:
        self.mcts = mcts

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        white = (self.mcts.gathered_packed()[:, 0, 3] & 1).astype(bool)
        wdl = np.zeros((len(mask), 3), np.float32)
        wdl[~white, 0] = 1.0
        wdl[white, 2] = 1.0
        return UniformEvaluator().evaluate(planes, mask)[0], wdl


@pytest.mark.parametrize("collapse", [False, True])
def test_value_sign_through_multi_jumps(collapse):
    mcts = one_game(DOUBLE_JUMP, collapse_forced=collapse, skip_forced_root=False)
    search(mcts, BlackWinsOracle(mcts))
    first = action_of(DOUBLE_JUMP, "10x19x26")
    assert first == action_of(DOUBLE_JUMP, "10x19x28")  # one decision, then a choice
    np.testing.assert_array_equal(mcts.root_wdl(0), [1.0, 0.0, 0.0])
    assert mcts.root_q(0)[first] == 1.0
    # The continuation is decided by Black too: both branches are Black wins from Black's view.
    game = mcts.game(0)
    game.step(first)
    assert game.mid_jump and not game.white_to_move
    _, visits = mcts.node_stats(0, [first])
    assert (visits > 0).sum() == 2


def test_terminal_positions_need_no_network():
    # White to move with no piece that can move: the game is over before any search.
    over = one_game("W:W29:B25,K22")
    assert over.done(0)
    assert over.result(0) == 1  # Black won
    _planes, masks = over.gather()
    assert len(masks) == 0
    # One move from the end: the winning capture is scored exactly, without evaluations.
    mcts = one_game("B:W18:B14,K1", simulations=50, skip_forced_root=False)
    stats = search(mcts, UniformEvaluator())
    best = action_of("B:W18:B14,K1", "14x23")
    assert mcts.root_q(0)[best] == 1.0
    assert stats.leaves == 0  # forced root collapsed, terminal child: no network call at all
    assert mcts.search_done(0)


def test_bad_calls_raise():
    mcts = one_game(SHOT)
    planes, masks = mcts.gather()
    n = len(masks)
    with pytest.raises(ValueError, match="priors must have shape"):
        mcts.expand(np.zeros((n + 1, 128), np.float32), np.zeros((n + 1, 3), np.float32))
    with pytest.raises(RuntimeError, match="before expand"):
        mcts.gather()
    mcts.expand(*UniformEvaluator().evaluate(planes, masks))
    with pytest.raises(ValueError, match="illegal action"):
        mcts.advance(0, 0)
    with pytest.raises(IndexError):
        mcts.root_visits(5)


# ------------------------------------------------------------------------------------------
# Config
# ------------------------------------------------------------------------------------------


def test_every_mcts_config_key_reaches_the_search(config):
    from game.mcts import SEARCH_KEYS, make_config

    cfg = config().mcts
    assert set(cfg) == set(SEARCH_KEYS)  # no knob in conf/mcts that nothing reads
    made = make_config(cfg)
    for key, value in cfg.items():
        assert getattr(made, key) == pytest.approx(value), key


def test_bad_mcts_config_raises_naming_the_key():
    from game.mcts import make_config

    with pytest.raises(ValueError, match=r"mcts\.c_puct"):
        make_config({"c_puct": "high"})
    with pytest.raises(ValueError, match="leaves_per_game"):
        make_config({"leaves_per_game": 0})
    with pytest.raises(ValueError, match="dirichlet_epsilon"):
        new_search(1, 8, {"dirichlet_epsilon": 1.5})
