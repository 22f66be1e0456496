"""The batched C++ search: known answers, visit accounting, noise, seeds, batching and value signs.

Positions are drawn with Black at the top (b/w men, B/W kings); Black moves down the board.
The inferences here are tiny hand-made ones, so every expectation follows from the rules alone.
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
# Material weights of the hand-made inference: a king is worth more than a man (it moves both
# ways), so a breakthrough that crowns shows in the value.
MAN, KING = 1.0, 1.5
# How sharply a material difference turns into a win probability (tanh scale).
MATERIAL_SCALE = 0.5


class UniformInference:
    """Equal priors over the legal actions, a certain draw as the value."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = mask.astype(np.float32)
        priors = m / np.maximum(m.sum(axis=1, keepdims=True), 1.0)
        wdl = np.zeros((len(mask), 3), np.float32)
        wdl[:, 1] = 1.0
        return priors, wdl


class MaterialInference(UniformInference):
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
    search(mcts, UniformInference())
    best = action_of(SHOT, "15-19")
    assert mcts.choose(0, 0.0) == best
    # The whole line is forced, so every visit of 15-19 ends in White's exact loss.
    assert mcts.root_q(0)[best] == 1.0


def test_finds_forced_breakthrough():
    mcts = one_game(BREAKTHROUGH)
    search(mcts, MaterialInference())
    assert mcts.choose(0, 0.0) == action_of(BREAKTHROUGH, "18-22")


def test_wins_king_against_man():
    mcts = one_game(KING_VS_MAN, simulations=400)
    search(mcts, UniformInference())
    best = action_of(KING_VS_MAN, "7-10")
    assert mcts.choose(0, 0.0) == best
    q = mcts.root_q(0)
    assert q[best] > 0.5
    assert q[best] == np.nanmax(q)


def test_avoids_a_move_that_loses_at_once():
    mcts = one_game(HANGING)
    search(mcts, UniformInference())
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
    search(mcts, UniformInference())
    for i in range(3):
        assert mcts.search_done(i)
        assert mcts.root_visits(i).sum() == simulations
        assert mcts.root_child_visits(i) == simulations


def test_reused_subtree_keeps_its_visits():
    mcts = new_search(1, 8, {**BASE, "simulations": 300})
    search(mcts, UniformInference())
    best = mcts.choose(0, 0.0)
    _, below = mcts.node_stats(0, [best])
    mcts.advance(0, best)
    assert mcts.root_visits(0).sum() == below.sum() > 0
    search(mcts, UniformInference())
    assert mcts.root_visits(0).sum() == 300


class SkewedInference(UniformInference):
    """Priors proportional to action index + 1 over the legal actions: easy to recompute."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, wdl = super().evaluate(planes, mask)
        return skewed(mask), wdl


def skewed(mask: np.ndarray) -> np.ndarray:
    w = mask * (np.arange(mask.shape[-1], dtype=np.float32) + 1)
    return (w / w.sum(axis=-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_policy_temperature_reshapes_every_nodes_priors(temperature: float):
    mcts = new_search(1, 8, {**BASE, "policy_temperature": temperature})
    search(mcts, SkewedInference())
    game = mcts.game(0)

    def tempered(g) -> np.ndarray:
        p = skewed(g.legal_action_mask()[None])[0] ** (1.0 / temperature)
        return p / p.sum()

    np.testing.assert_allclose(mcts.root_priors(0), tempered(game), rtol=1e-5)
    assert np.abs(mcts.root_priors(0) - skewed(game.legal_action_mask()[None])[0]).max() > 1e-3
    best = mcts.choose(0, 0.0)
    child = game.copy()
    child.step(int(best))
    priors, _ = mcts.node_stats(0, [best])
    np.testing.assert_allclose(priors, tempered(child), rtol=1e-5)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_policy_temperature_must_be_positive(bad: float):
    with pytest.raises(
        ValueError, match=r"mcts\.policy_temperature=.*: a finite number in \(0, 100\]"
    ):
        new_search(1, 8, {**BASE, "policy_temperature": bad})


def test_noise_touches_only_the_root():
    mcts = new_search(1, 8, {**BASE, "dirichlet_epsilon": 0.25, "dirichlet_alpha": 0.3})
    search(mcts, SkewedInference())
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
        search(mcts, UniformInference())
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
    ("fen", "move", "inference"),
    [(SHOT, "15-19", UniformInference()), (BREAKTHROUGH, "18-22", MaterialInference())],
)
def test_many_leaves_and_one_leaf_agree(fen, move, inference):
    choices = []
    for leaves in (1, 16):
        mcts = one_game(fen, leaves_per_game=leaves)
        search(mcts, inference)
        choices.append(mcts.choose(0, 0.0))
    assert choices == [action_of(fen, move)] * 2


def test_many_games_in_one_batch_match_single_games():
    """Games in one object do not leak into each other: each tree matches a lone search."""
    fens = [SHOT, HANGING, BREAKTHROUGH]
    many = new_search(len(fens), 8, {**BASE, "leaves_per_game": 1})
    for i, fen in enumerate(fens):
        many.reset(i, Position.from_fen(fen).game)
    search(many, MaterialInference())
    for i, fen in enumerate(fens):
        alone = one_game(fen, leaves_per_game=1)
        search(alone, MaterialInference())
        np.testing.assert_array_equal(many.root_visits(i), alone.root_visits(0))


# ------------------------------------------------------------------------------------------
# Playout cap randomization: per-game budgets, full and fast searches
# ------------------------------------------------------------------------------------------


def test_each_game_searches_its_own_budget_and_fast_ones_have_no_noise():
    fens = [SHOT, HANGING, BREAKTHROUGH, KING_VS_MAN]
    budgets, full = [200, 25, 120, 7], [True, False, True, False]
    mcts = new_search(4, 8, {**BASE, "dirichlet_epsilon": 0.25, "dirichlet_alpha": 0.3})
    for i, fen in enumerate(fens):
        mcts.reset(i, Position.from_fen(fen).game)
        mcts.set_search(i, budgets[i], full[i])
    search(mcts, SkewedInference())
    for i in range(4):
        assert (mcts.search_budget(i), mcts.full_search(i)) == (budgets[i], full[i])
        assert mcts.search_done(i)
        assert mcts.root_child_visits(i) == mcts.root_visits(i).sum() == budgets[i]
        network = skewed(mcts.game(i).legal_action_mask()[None])[0]
        if full[i]:
            assert np.abs(mcts.root_priors(i) - network).max() > 1e-3  # noise mixed in
        else:
            np.testing.assert_allclose(mcts.root_priors(i), network, rtol=1e-6)
    # Turning a searched full root into a fast one puts the network's priors back, and back
    # to full mixes fresh noise in; the budget holds through resets until changed.
    mcts.set_search(0, 30, False)
    network = skewed(mcts.game(0).legal_action_mask()[None])[0]
    np.testing.assert_allclose(mcts.root_priors(0), network, rtol=1e-6)
    mcts.set_search(0, 30, True)
    assert np.abs(mcts.root_priors(0) - network).max() > 1e-3
    mcts.reset(1, Position.from_fen(SHOT).game)
    assert (mcts.search_budget(1), mcts.full_search(1)) == (25, False)
    fresh = new_search(1, 8, {**BASE, "simulations": 64})
    assert (fresh.search_budget(0), fresh.full_search(0)) == (64, True)  # the config's


def test_set_search_refuses_bad_calls():
    mcts = one_game(SHOT)
    with pytest.raises(ValueError, match="simulations of game 0 must be >= 0"):
        mcts.set_search(0, -1, True)
    with pytest.raises(IndexError):
        mcts.set_search(3, 10, True)
    mcts.gather()
    with pytest.raises(RuntimeError, match="in flight"):
        mcts.set_search(0, 10, False)


def test_playout_cap_draws_full_searches_with_its_share():
    from game.mcts import PlayoutCap, draw_search

    cap = PlayoutCap(full_share=0.25, full_simulations=100, fast_simulations=25)
    mcts = new_search(1, 8, BASE)
    rng = np.random.default_rng(3)
    drawn = [draw_search(mcts, 0, cap, rng) for _ in range(400)]
    expected = np.random.default_rng(3).random(400) < 0.25  # one uniform draw per decision
    assert drawn == expected.tolist()
    assert sum(drawn) == 96  # this seed's count, near 0.25 x 400
    assert (mcts.search_budget(0), mcts.full_search(0)) == (
        (100, True) if drawn[-1] else (25, False)
    )


def test_playout_cap_config_is_off_by_default_and_checked(config):
    from game.mcts import PlayoutCap

    cfg = config()
    assert PlayoutCap.from_config(cfg.selfplay, cfg.mcts) is None
    on = config("selfplay.playout_cap.enabled=true")
    assert PlayoutCap.from_config(on.selfplay, on.mcts) == PlayoutCap(0.25, 100, 25)
    with pytest.raises(ValueError, match=r"selfplay\.playout_cap: full_share must be in \[0, 1\]"):
        PlayoutCap.from_config(
            {"playout_cap": {**on.selfplay.playout_cap, "full_share": 2}}, on.mcts
        )
    with pytest.raises(ValueError, match=r"selfplay\.playout_cap\.fast_simulations is missing"):
        PlayoutCap.from_config({"playout_cap": {"enabled": True, "full_share": 0.5}}, on.mcts)
    from checkerzero.config import ConfigError

    with pytest.raises(ConfigError, match=r"selfplay\.playout_cap\.fast_simulations=500"):
        config("selfplay.playout_cap.enabled=true", "selfplay.playout_cap.fast_simulations=500")
    with pytest.raises(ConfigError, match=r"mcts\.forced_playouts_k"):
        config("mcts.forced_playouts_k=-1")


# ------------------------------------------------------------------------------------------
# Forced playouts and policy target pruning
# ------------------------------------------------------------------------------------------

NOISE = {"dirichlet_epsilon": 0.25, "dirichlet_alpha": 0.3}


@pytest.mark.parametrize("leaves", [1, 8])
@pytest.mark.parametrize("fen", [SHOT, HANGING, KING_VS_MAN])
def test_forced_playouts_give_every_root_child_its_forced_count(fen, leaves):
    """Each child c ends with at least floor(sqrt(k * P(c) * N)) visits, P the root's (noised)
    prior; without forcing the same search leaves some child below that."""
    counts = {}
    for k in (0.0, 2.0):
        mcts = one_game(fen, simulations=400, leaves_per_game=leaves, forced_playouts_k=k, **NOISE)
        search(mcts, UniformInference())
        assert mcts.forcing(0) == (k > 0)
        prior, visits = mcts.root_priors(0), mcts.root_visits(0)
        assert visits.sum() == 400
        forced = np.floor(np.sqrt(2.0 * prior * 400))
        counts[k] = (visits - forced)[prior > 0]
    assert counts[2.0].min() >= 0
    assert counts[0.0].min() < 0


def test_pruning_takes_back_exactly_the_forced_visits_of_losing_moves():
    """HANGING: 18-22 and 18-23 lose at once (Q = -1). Forced playouts give them more visits;
    the policy target gives them back exactly what the same search without forcing spent."""
    losing = [action_of(HANGING, "18-22"), action_of(HANGING, "18-23")]
    plain = one_game(HANGING, simulations=400, leaves_per_game=1, **NOISE)
    search(plain, UniformInference())
    forced = one_game(HANGING, simulations=400, leaves_per_game=1, forced_playouts_k=2.0, **NOISE)
    search(forced, UniformInference())
    visits, target = forced.root_visits(0), forced.root_target(0)
    assert visits[losing].tolist() == [16, 13]  # >= sqrt(2 P N) = 15.3 and 12.2
    assert target[losing].tolist() == plain.root_visits(0)[losing].tolist() == [8, 5]
    best = int(np.argmax(visits))
    assert forced.choose(0, 0.0) == best and target[best] == visits[best]
    assert np.all(target <= visits)
    # The target is prune_forced_visits over the root's own numbers.
    legal = np.flatnonzero(forced.root_priors(0) > 0)
    q = np.nan_to_num(forced.root_q(0)[legal]).astype(np.float32)
    pruned = _core.prune_forced_visits(
        forced.root_priors(0)[legal],
        q,
        visits[legal],
        int(np.flatnonzero(legal == best)[0]),
        2.0,
        1.25,
        19652.0,
        float(visits.sum() + 1),
    )
    np.testing.assert_array_equal(pruned, target[legal])
    # Without forcing the target is the visit counts themselves.
    np.testing.assert_array_equal(plain.root_target(0), plain.root_visits(0))


def test_pruning_by_hand():
    """Four children at a root of 58 child visits and 59 in all (c_puct 1.25 constant, so the
    exploration scale is 1.25 * sqrt(59) = 9.60; PUCT = Q + 9.60 * P / (1 + visits)):

        child  prior  Q      visits  ceil(sqrt(2 P 58))  PUCT
        best   0.45   0.5    40      -                   0.605
        bad    0.2   -0.9    5       5                   -0.58; 0.07 with 1 visit, 1.02 with 0
        fair   0.3    0.3    12      6                   0.52; 0.59 with 9 visits, 0.62 with 8
        one    0.05   0.3    1       3                   0.54; 0.78 with 0

    The bad child gives back 4 visits, then, left with one, is dropped: all 5 forced visits go.
    The fair one gives back 3 (with 8 its PUCT would pass the best child's). The one-visit
    child is dropped. The best child is kept as it is."""
    prior = np.array([0.45, 0.2, 0.3, 0.05], np.float32)
    q = np.array([0.5, -0.9, 0.3, 0.3], np.float32)
    visits = np.array([40, 5, 12, 1], np.int32)
    pruned = _core.prune_forced_visits(prior, q, visits, 0, 2.0, 1.25, 0.0, 59.0)
    assert pruned.tolist() == [40, 0, 9, 0]
    assert visits.tolist() == [40, 5, 12, 1]  # a copy: the input is left alone
    # At most the forced share is taken: a bad child with 12 visits keeps 12 - ceil(sqrt(2 x
    # 0.2 x 66)) = 12 - 6.
    more = np.array([40, 12, 12, 2], np.int32)
    assert _core.prune_forced_visits(prior, q, more, 0, 2.0, 1.25, 0.0, 67.0).tolist()[1] == 6
    # The best child is never touched, even when it is not the first.
    order = [2, 0, 3, 1]
    shuffled = _core.prune_forced_visits(
        prior[order], q[order], visits[order], 1, 2.0, 1.25, 0.0, 59.0
    )
    assert shuffled.tolist() == [9, 40, 0, 0]


def test_pruning_refuses_bad_input_naming_it():
    prior = np.array([0.5, 0.5], np.float32)
    q = np.array([0.1, 0.2], np.float32)
    visits = np.array([10, 4], np.int32)
    prune = _core.prune_forced_visits
    with pytest.raises(ValueError, match="best child 2 out of range for 2 children"):
        prune(prior, q, visits, 2, 2.0, 1.25, 0.0, 15.0)
    with pytest.raises(ValueError, match=r"prior\[1\] is nan"):
        prune(np.array([0.5, np.nan], np.float32), q, visits, 0, 2.0, 1.25, 0.0, 15.0)
    with pytest.raises(ValueError, match=r"q\[1\] is inf"):
        prune(prior, np.array([0.1, np.inf], np.float32), visits, 0, 2.0, 1.25, 0.0, 15.0)
    with pytest.raises(ValueError, match=r"visits\[1\] is -4"):
        prune(prior, q, np.array([10, -4], np.int32), 0, 2.0, 1.25, 0.0, 15.0)
    with pytest.raises(ValueError, match="k must be finite"):
        prune(prior, q, visits, 0, float("inf"), 1.25, 0.0, 15.0)
    with pytest.raises(ValueError, match="same length"):
        prune(prior[:1], q, visits, 0, 2.0, 1.25, 0.0, 15.0)
    # A huge k takes at most every visit, never more.
    assert prune(
        prior, np.array([0.9, -1.0], np.float32), visits, 0, 1e30, 1.25, 0.0, 15.0
    ).tolist() == [10, 0]


def test_forced_playouts_only_at_full_searches_with_noise():
    """Evaluation and play turn noise off, fast searches have none: both search as with k = 0."""

    def visits(**overrides):
        mcts = one_game(KING_VS_MAN, simulations=300, **overrides)
        search(mcts, UniformInference())
        return mcts.root_visits(0), mcts.root_target(0), mcts.forcing(0)

    off, off_target, forcing = visits(forced_playouts_k=2.0, dirichlet_epsilon=0.0)
    np.testing.assert_array_equal(off, visits(dirichlet_epsilon=0.0)[0])
    np.testing.assert_array_equal(off_target, off)
    assert not forcing
    fast = one_game(KING_VS_MAN, simulations=300, forced_playouts_k=2.0, **NOISE)
    fast.set_search(0, 300, False)
    search(fast, UniformInference())
    assert not fast.forcing(0)
    np.testing.assert_array_equal(fast.root_visits(0), off)
    np.testing.assert_array_equal(fast.root_target(0), off)


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
        return UniformInference().evaluate(planes, mask)[0], wdl


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
    stats = search(mcts, UniformInference())
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
    mcts.expand(*UniformInference().evaluate(planes, masks))
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


# The declaration of each parameter against the yaml, the C++ struct, the schema and the player
# options: tests/test_search_parameters.py.


def test_bad_mcts_config_raises_naming_the_key():
    from game.mcts import make_config

    with pytest.raises(ValueError, match=r"mcts\.c_puct"):
        make_config({"c_puct": "high"})
    with pytest.raises(ValueError, match="leaves_per_game"):
        make_config({"leaves_per_game": 0})
    with pytest.raises(ValueError, match="dirichlet_epsilon"):
        new_search(1, 8, {"dirichlet_epsilon": 1.5})
    with pytest.raises(
        ValueError, match=r"mcts\.forced_playouts_k=-2\.0: a finite number in \[0, 100\]"
    ):
        new_search(1, 8, {"forced_playouts_k": -2.0})
