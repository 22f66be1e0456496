"""Gumbel root search (mcts.root_policy=gumbel, game/cpp/mcts.h): sequential halving, the
completed-Q policy target, tiny budgets, and PUCT left exactly as it was."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from game import _core
from game.mcts import UniformInference, new_search, search

# The start position of 8x8 has 7 legal moves; the paper's budget for m actions gives every
# phase of sequential halving at least one visit per survivor: m * ceil(log2 m).
M = 7
BUDGET = M * math.ceil(math.log2(M))


class ActionValues:
    """A known value function: every position below root action a is worth values[a] to the
    root's mover (so a child's Q is exactly its value); the root itself is worth `root_value`.
    Priors are `root_priors` at the root, uniform elsewhere. Each leaf's root action is found
    from its packed history: its parent was a leaf before it (no forced-move collapsing)."""

    def __init__(self, game, values: dict[int, float], root_priors: dict[int, float], root_value=0):
        self.root = tuple(game.pack_history()[0])
        self.root_white = game.white_to_move
        self.values, self.root_priors, self.root_value = values, root_priors, root_value
        self.below: dict[tuple, int] = {}
        for a in game.legal_actions():
            child = game.copy()
            child.step(int(a))
            self.below[(tuple(child.pack_history()[0]), self.root)] = int(a)
        self.version = 0

    def drive(self, mcts) -> None:
        while True:
            _, masks = mcts.gather()
            if len(masks) == 0:
                return
            packed = mcts.gathered_packed()
            priors = (masks / masks.sum(axis=1, keepdims=True)).astype(np.float32)
            wdl = np.zeros((len(masks), 3), np.float32)
            for k, hist in enumerate(packed):
                h0, h1, h2 = (tuple(h) for h in hist)
                if h0 == self.root:
                    v = self.root_value
                    priors[k] = 0.0
                    for a, p in self.root_priors.items():
                        priors[k, a] = p
                else:
                    a = self.below[(h0, h1)] if (h0, h1) in self.below else self.below[(h1, h2)]
                    self.below[(h0, h1)] = a
                    v = self.values[a]
                    if bool(h0[3] & 1) != self.root_white:
                        v = -v  # the leaf's mover is the root mover's opponent
                wdl[k] = ((1 + v) / 2, 0.0, (1 - v) / 2)
            mcts.expand(priors, wdl)


def gumbel(**extra):
    return {
        "root_policy": "gumbel",
        "collapse_forced": False,
        "dirichlet_epsilon": 0.25,  # noise on: Gumbel draws at the root
        "leaves_per_game": 1,
        **extra,
    }


def start_values(game, best: int) -> tuple[dict[int, float], dict[int, float]]:
    """Values spread over [-0.6, 0.6] with `best` at 0.9, and priors that rank `best` last."""
    actions = [int(a) for a in game.legal_actions()]
    assert len(actions) == M
    values = {a: -0.6 + 1.2 * k / (M - 1) for k, a in enumerate(actions)}
    values[best] = 0.9
    priors = {a: 0.3 if a != best else 0.01 for a in actions}
    return values, priors


@pytest.mark.parametrize("seed", range(8))
def test_sequential_halving_finds_the_best_action_within_the_papers_budget(seed):
    game = _core.Game(8)
    best = int(game.legal_actions()[3])
    values, priors = start_values(game, best)
    mcts = new_search(1, 8, gumbel(simulations=BUDGET), seed=seed)
    ActionValues(game, values, priors).drive(mcts)
    visits = mcts.root_visits(0)
    assert visits.sum() == BUDGET
    assert mcts.choose(0, 1.0) == best  # the lowest prior, the highest value
    assert int(np.argmax(visits)) == best  # the last survivor searched most
    # Every action was tried once in the first phase, then the better half went on.
    assert (visits[[a for a in values]] >= 1).all()
    g, considered = mcts.root_gumbel(0)
    assert considered.sum() == M and np.isfinite(g[considered]).all()


def test_halving_keeps_the_better_half_and_splits_visits_equally():
    # 16 considered actions over 64 simulations (mctx's table: the visit count of the action the
    # next simulation goes to): 16 survivors get 1 visit each, 8 get 2 more, 4 get 4 more, and
    # the last 2 share the rest.
    table = [_core.considered_visit(16, 64, i) for i in range(64)]
    assert table == [0] * 16 + [1] * 8 + [2] * 8 + [v for v in range(3, 7) for _ in range(4)] + [
        v for v in range(7, 15) for _ in range(2)
    ]
    assert [_core.considered_visit(4, 8, i) for i in range(8)] == [0, 0, 0, 0, 1, 1, 2, 2]
    assert [_core.considered_visit(1, 5, i) for i in range(5)] == [0, 1, 2, 3, 4]
    # With noise off the ranking is the paper's: 7 actions in 12 simulations are one visit each,
    # then one more for the best 3 by logit + sigma(Q), then one more for the best 2.
    game = _core.Game(8)
    best = int(game.legal_actions()[5])
    values, priors = start_values(game, best)
    mcts = new_search(1, 8, gumbel(simulations=12, dirichlet_epsilon=0.0))
    ActionValues(game, values, priors).drive(mcts)
    visits = mcts.root_visits(0)
    ranked = sorted(values, key=lambda a: values[a], reverse=True)  # the values outweigh priors
    assert [int(visits[a]) for a in ranked] == [3, 3, 2, 1, 1, 1, 1]
    assert mcts.choose(0, 0.0) == best


def completed_q_policy(mcts, values, priors, root_value, c_visit=50.0, c_scale=1.0):
    """The paper's target computed in NumPy from the search's visits and the known values."""
    visits = mcts.root_visits(0)
    actions = sorted(values)
    p = np.array([priors[a] for a in actions], np.float64)
    p = p / p.sum()
    n = np.array([visits[a] for a in actions], np.float64)
    q = np.array([values[a] for a in actions], np.float64)
    seen = n > 0
    mixed = (root_value + n.sum() * (p[seen] * q[seen]).sum() / p[seen].sum()) / (n.sum() + 1)
    completed = np.where(seen, q, mixed)
    logits = np.log(p) + (c_visit + n.max()) * c_scale * (completed + 1) / 2
    e = np.exp(logits - logits.max())
    out = np.zeros(mcts.num_actions)
    out[actions] = e / e.sum()
    return out


@pytest.mark.parametrize("simulations", [2, 5, BUDGET])
def test_completed_q_target_is_the_papers_and_sums_to_one_on_legal_moves(simulations):
    game = _core.Game(8)
    best = int(game.legal_actions()[2])
    values, priors = start_values(game, best)
    mcts = new_search(1, 8, gumbel(simulations=simulations, gumbel_c_scale=0.1), seed=3)
    ActionValues(game, values, priors, root_value=0.2).drive(mcts)
    pi = mcts.root_policy(0)
    legal = game.legal_action_mask()
    assert pi.sum() == pytest.approx(1.0, abs=1e-6)
    assert (pi[~legal] == 0).all() and (pi[legal] > 0).all()
    expected = completed_q_policy(mcts, values, priors, 0.2, c_scale=0.1)
    np.testing.assert_allclose(pi, expected, atol=2e-5)
    target = mcts.root_target(0)  # the record's integer form: 65535 for the largest entry
    assert target.max() == 65535 and (target[~legal] == 0).all()
    np.testing.assert_allclose(target / target.sum(), pi, atol=1e-4)


def test_two_simulations_still_give_a_legal_move_and_a_valid_target():
    inference = UniformInference()
    for size in (6, 8):
        mcts = new_search(4, size, {"root_policy": "gumbel", "simulations": 2}, seed=11)
        for _ in range(30):
            search(mcts, inference)
            for i in range(4):
                if mcts.done(i):
                    continue
                game = mcts.game(i)
                legal = game.legal_action_mask()
                action = mcts.choose(i, 1.0)
                assert legal[action]
                if legal.sum() > 1:  # a forced move is played unsearched
                    assert mcts.root_child_visits(i) >= 2  # a kept subtree may bring more
                    pi = mcts.root_policy(i)
                    assert pi.sum() == pytest.approx(1.0, abs=1e-6)
                    assert (pi[~legal] == 0).all()
                    assert (mcts.root_target(i)[~legal] == 0).all()
                mcts.advance(i, action)


def test_gumbel_self_play_records_carry_the_completed_q_target(config):
    from actors.self_play import play_games

    cfg = config(
        "game=small",
        "mcts.simulations=8",
        "mcts.leaves_per_game=4",
        "mcts.root_policy=gumbel",
        "selfplay.games_in_parallel=2",
        "selfplay.openings=start",
        "selfplay.resign=false",
    )
    records = play_games(UniformInference(), cfg, n_games=2, seed=2)
    assert len(records) == 2
    for r in records:
        counts = [r.visits(t)[1] for t in range(len(r.played))]
        searched = [c for c in counts if len(c) > 1]
        assert searched and all(int(c.max()) == 65535 for c in searched)


def test_gumbel_player_plays_legal_moves():
    from evaluation.players.mcts import MCTSPlayer
    from game.position import Position

    player = MCTSPlayer(UniformInference(), mcts={"root_policy": "gumbel", "simulations": 8})
    pos = Position(8)
    for _ in range(6):
        move = player.choose(pos)
        assert move in pos.legal_moves()
        pos.play(move)


def test_bad_gumbel_settings_are_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"mcts\.root_policy='alphazero': one of puct, gumbel"):
        new_search(1, 8, {"root_policy": "alphazero"})
    with pytest.raises(ValueError, match=r"mcts\.gumbel_m=0"):
        new_search(1, 8, {"root_policy": "gumbel", "gumbel_m": 0})


PUCT_DIGEST = "93c024cc6c4f104bec8ddcbb79275729854d26bf31d2722210a6b071b141d9d1"


def puct_digest() -> str:
    """Visit counts and targets of a seeded PUCT run with a fixed pseudo-network, hashed."""
    size = 8
    cfg = _core.MctsConfig()
    cfg.simulations = 64
    cfg.seed = 7
    cfg.leaves_per_game = 4
    m = _core.BatchedMCTS(3, size, cfg)
    A = m.num_actions
    W = np.random.default_rng(0).standard_normal((15 * size * size, A)).astype(np.float32) * 0.05
    V = np.random.default_rng(1).standard_normal((15 * size * size,)).astype(np.float32) * 0.05
    h = hashlib.sha256()
    for _ in range(40):
        while True:
            planes, masks = m.gather()
            if len(masks) == 0:
                break
            x = planes.reshape(len(masks), -1)
            logits = np.where(masks, x @ W, -np.inf)
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p = (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
            v = np.tanh(x @ V)
            wdl = np.stack([(1 + v) / 2 * 0.9, np.full_like(v, 0.1), (1 - v) / 2 * 0.9], 1)
            m.expand(p, wdl.astype(np.float32))
        for i in range(3):
            if m.done(i):
                continue
            h.update(m.root_visits(i).tobytes())
            h.update(m.root_target(i).tobytes())
            m.advance(i, m.choose(i, 1.0))
    return h.hexdigest()


def test_puct_visit_counts_are_unchanged_byte_for_byte():
    # Computed with the search as it was before the Gumbel root search was added: with
    # root_policy puct (the default) nothing in the tree, its random draws or its targets moved.
    assert puct_digest() == PUCT_DIGEST


@pytest.mark.parametrize("seed", range(4))
def test_a_proven_win_at_the_root_is_played_and_is_the_target(seed):
    from test_solver import SHOT, UniformInference, action_of, solver_search

    mcts = solver_search(
        SHOT,
        simulations=64,
        inference=UniformInference(),
        root_policy="gumbel",
        dirichlet_epsilon=0.25,
        seed=seed,
    )
    win = action_of(SHOT, "15-19")
    assert mcts.root_proof(0) == 1  # a proven win for the mover
    assert mcts.choose(0, 1.0) == win
    pi = mcts.root_policy(0)
    assert pi[win] == pytest.approx(1.0) and pi.sum() == pytest.approx(1.0)
    assert int(np.flatnonzero(mcts.root_target(0)).item()) == win


def test_leaves_in_flight_go_to_different_considered_actions():
    # One gather of 8 leaves right after the root's evaluation: the first phase wants one visit
    # per considered action, and leaves in flight count, so the 7 moves each get one.
    mcts = new_search(1, 8, {"root_policy": "gumbel", "simulations": 32, "leaves_per_game": 8})
    inference = UniformInference()
    planes, masks = mcts.gather()
    assert len(masks) == 1  # the root alone
    mcts.expand(*inference.evaluate(planes, masks))
    planes, masks = mcts.gather()
    assert len(masks) >= M
    mcts.expand(*inference.evaluate(planes, masks))
    visits = mcts.root_visits(0)
    assert (visits[_core.Game(8).legal_action_mask()] >= 1).all()
    search(mcts, inference)
    assert mcts.root_visits(0).sum() == 32


def test_evaluation_players_search_with_their_own_root_policy(config):
    from evaluation.players.defaults import eval_mcts_settings
    from evaluation.players.network import mcts_player

    # Self-play's switch does not reach the judge: every run is rated by the same search.
    assert eval_mcts_settings(config("mcts.root_policy=gumbel"))["root_policy"] == "puct"
    judged = eval_mcts_settings(config("evaluation.root_policy=gumbel"))
    assert judged["root_policy"] == "gumbel"
    settings = eval_mcts_settings(config())
    assert mcts_player("uniform-mcts:sims=8", mcts=settings).settings["root_policy"] == "puct"
    player = mcts_player("uniform-mcts:sims=8,root=gumbel", mcts=settings)
    assert player.settings["root_policy"] == "gumbel"
    with pytest.raises(ValueError, match="root_policy"):
        config("evaluation.root_policy=alphazero")
