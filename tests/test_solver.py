"""The MCTS-solver (mcts.solver): proven wins, losses and draws carried up the tree, the moves it
plays and its policy target, checked against the endgame database; with the switch off the search
is exactly the one before the solver existed.

Positions are drawn with Black at the top (b/w men, B/W kings); Black moves down the board.
Proofs are numbered as the database's values, for the side to move: 1 win, 2 loss, 3 draw, 0 none.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from game import _core
from game.egdb import EndgameDatabase, signatures
from game.egdb.build import build
from game.mcts import make_config, new_search, search
from game.position import Position

UNPROVEN, WIN, LOSS, DRAW = 0, 1, 2, 3
# A proof seen from the other side (a win for one is a loss for the other).
OTHER_SIDE = {UNPROVEN: UNPROVEN, WIN: LOSS, LOSS: WIN, DRAW: DRAW}


class UniformInference:
    """Equal priors over the legal actions, a certain draw as the value: it knows nothing, so
    every proof comes from the rules and the database alone."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = mask.astype(np.float32)
        priors = m / m.sum(axis=1, keepdims=True)
        wdl = np.zeros((len(mask), 3), np.float32)
        wdl[:, 1] = 1.0
        return priors, wdl


class FavouringInference(UniformInference):
    """Priors that put the given actions first (in order), at a draw's value everywhere."""

    def __init__(self, favoured: list[int]) -> None:
        self.favoured = favoured

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, wdl = super().evaluate(planes, mask)
        w = mask.astype(np.float32)
        for rank, action in enumerate(self.favoured):
            w[:, action] *= 100.0 / (rank + 1)
        return w / w.sum(axis=1, keepdims=True), wdl


def solver_search(
    fen: str, simulations: int, db: EndgameDatabase | None = None, inference=None, **overrides
) -> _core.BatchedMCTS:
    cfg = {"simulations": simulations, "dirichlet_epsilon": 0.0, "seed": 0, "solver": True}
    mcts = new_search(1, 8, {**cfg, **overrides})
    if db is not None:
        mcts.set_egdb(db.core)
    mcts.reset(0, Position.from_fen(fen).game)
    search(mcts, inference or UniformInference())
    return mcts


def action_of(fen: str, move: str) -> int:
    """The first action (the search's decision) of a move given in notation."""
    pos = Position.from_fen(fen)
    return pos.game.actions_of(pos.parse_move(move))[0]


def proofs(mcts: _core.BatchedMCTS) -> dict[int, int]:
    p = mcts.root_child_proofs(0)
    return {int(a): int(p[a]) for a in np.flatnonzero(p)}


def nonzero(v: np.ndarray) -> dict[int, int]:
    return {int(a): int(v[a]) for a in np.flatnonzero(v)}


@pytest.fixture(scope="session")
def db8(tmp_path_factory) -> EndgameDatabase:
    """The 8x8 database up to 3 pieces (under a second to build)."""
    folder = tmp_path_factory.mktemp("solver_egdb8")
    build(folder, 8, 3)
    return EndgameDatabase(folder, 8, 3)


# ------------------------------------------------------------------------------------------
# Wins at once
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


def test_a_forced_win_is_proven_played_and_ends_the_search():
    mcts = solver_search(SHOT, simulations=200)
    win = action_of(SHOT, "15-19")
    assert mcts.root_proof(0) == WIN
    assert proofs(mcts) == {win: WIN}
    assert mcts.search_done(0) and mcts.root_child_visits(0) < 200  # stopped once proven
    assert mcts.choose(0, 0.0) == win
    assert mcts.choose(0, 1.0) == win  # whatever the temperature
    target = mcts.root_target(0)
    assert nonzero(target) == {win: int(mcts.root_visits(0)[win])}  # only the winning move
    # Without the solver the same search spends its whole budget.
    plain = solver_search(SHOT, simulations=200, solver=False)
    assert plain.root_child_visits(0) == 200 and plain.root_proof(0) == UNPROVEN
    assert proofs(plain) == {}


# A multi-jump keeps the side to move: 8x15x6 takes both white kings and wins, and its first
# jump (8x15) leads to a node where Black moves again. A proof read with the wrong sign there
# would call the win a loss.
#   +-----------------+
#   |   .   .   .   . |   1-4
#   | .   .   b   B   |   5-8
#   |   .   W   w   . |   9-12
#   | .   .   .   .   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   .   .   |  21-24
#   |   .   .   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
DOUBLE_JUMP_WIN = "B:WK10,11:B7,K8"


@pytest.mark.parametrize("collapse", [False, True])
def test_a_win_through_a_multi_jump_keeps_its_sign(collapse):
    mcts = solver_search(DOUBLE_JUMP_WIN, simulations=100, collapse_forced=collapse)
    win = action_of(DOUBLE_JUMP_WIN, "8x15x6")
    assert mcts.root_proof(0) == WIN
    assert proofs(mcts)[win] == WIN
    assert mcts.choose(0, 0.0) == win
    # The continuation, Black to move again, is itself a proven win for Black.
    mcts.advance(0, win)
    game = mcts.game(0)
    assert game.mid_jump and not game.white_to_move
    assert mcts.root_proof(0) == WIN and mcts.search_done(0)
    second = mcts.choose(0, 0.0)
    game.step(second)
    assert game.result() == 1  # Black won


# ------------------------------------------------------------------------------------------
# Losses: skipped by selection, never played while another move is not lost
# ------------------------------------------------------------------------------------------

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


def test_a_proven_loss_gets_no_more_visits_and_leaves_the_target():
    lost = {action_of(HANGING, "18-22"), action_of(HANGING, "18-23")}
    mcts = solver_search(HANGING, simulations=200)
    assert proofs(mcts) == dict.fromkeys(lost, LOSS)
    visits = mcts.root_visits(0)
    assert [int(visits[a]) for a in sorted(lost)] == [1, 1]  # the visit that proved it, no more
    assert mcts.root_child_visits(0) == 200  # the root itself is open: the budget is spent
    target = mcts.root_target(0)
    assert all(target[a] == 0 for a in lost)
    assert nonzero(target) == {a: int(visits[a]) for a in np.flatnonzero(visits) if a not in lost}
    plain = solver_search(HANGING, simulations=200, solver=False)
    assert all(plain.root_visits(0)[a] > 1 for a in lost)  # without it they keep drawing visits


def test_never_chooses_a_proven_loss_while_another_move_is_open():
    """Priors that favour the two losing moves, and two simulations: each losing move gets one
    visit (that proves it lost) and the safe moves none. The plain search then plays the most
    visited move, a loss; the solver plays a safe one, at any temperature."""
    losing = [action_of(HANGING, "18-22"), action_of(HANGING, "18-23")]
    safe = {action_of(HANGING, "18-14"), action_of(HANGING, "18-15")}
    favouring = FavouringInference(losing)
    plain = solver_search(HANGING, simulations=2, inference=favouring, solver=False)
    assert nonzero(plain.root_visits(0)) == dict.fromkeys(losing, 1)
    assert plain.choose(0, 0.0) == losing[0]
    mcts = solver_search(HANGING, simulations=2, inference=favouring)
    assert nonzero(mcts.root_visits(0)) == dict.fromkeys(losing, 1)
    assert proofs(mcts) == dict.fromkeys(losing, LOSS)
    assert mcts.choose(0, 0.0) in safe
    # No visit on a safe move yet: the target shares the search between the moves left.
    assert nonzero(mcts.root_target(0)) == dict.fromkeys(safe, 1)
    more = solver_search(HANGING, simulations=30, inference=favouring)
    assert {more.choose(0, 1.0) for _ in range(200)} <= safe  # sampling never takes a loss


# Three kings against a lone king, which has four moves and loses after each.
#   +-----------------+
#   |   W   .   .   . |   1-4
#   | .   .   .   .   |   5-8
#   |   .   .   .   . |   9-12
#   | .   B   .   .   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   W   .   |  21-24
#   |   W   .   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
LONE_KING = "B:WK1,K23,K25:BK14"


def test_a_lost_root_is_proven_with_the_database(db8):
    mcts = solver_search(LONE_KING, simulations=200, db=db8)
    assert mcts.root_proof(0) == LOSS
    moves = ["14-17", "14-18", "14-9", "14-10"]
    assert proofs(mcts) == {action_of(LONE_KING, m): LOSS for m in moves}
    assert mcts.search_done(0) and mcts.root_child_visits(0) < 200
    # Every move loses: the move and the target come from the visits as without the solver.
    assert mcts.choose(0, 0.0) == int(np.argmax(mcts.root_visits(0)))
    np.testing.assert_array_equal(mcts.root_target(0), mcts.root_visits(0))


# ------------------------------------------------------------------------------------------
# Endgames the database decides: the solver finds the one winning (or drawing) move
# ------------------------------------------------------------------------------------------

# Two kings against two men; of six moves only 24-19 wins (the 4-piece database's verdict when
# the position was chosen; the 3-piece database used here only knows the positions after a
# capture, and alpha-beta with it confirms the win below).
#   +-----------------+
#   |   .   .   B   . |   1-4
#   | .   .   .   .   |   5-8
#   |   .   .   w   . |   9-12
#   | .   .   w   .   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   .   B   |  21-24
#   |   .   .   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
TWO_KINGS = "B:W11,15:BK3,K24"


def test_the_only_winning_move_of_an_ending_is_proven_and_played(db8):
    win = action_of(TWO_KINGS, "24-19")
    ab = _core.alphabeta_search(Position.from_fen(TWO_KINGS).game, depth=8, egdb=db8.core)
    assert str(ab.move) == "24-19" and ab.score > _core.MATE_THRESHOLD - 1000  # a database win
    mcts = solver_search(TWO_KINGS, simulations=200, db=db8)
    assert mcts.root_proof(0) == WIN
    assert proofs(mcts)[win] == WIN
    assert [a for a, p in proofs(mcts).items() if p == WIN] == [win]
    assert mcts.search_done(0) and mcts.root_child_visits(0) < 200
    assert mcts.choose(0, 0.0) == win and mcts.choose(0, 1.0) == win
    assert nonzero(mcts.root_target(0)) == {win: int(mcts.root_visits(0)[win])}


# The fork (Lasker): Black's king on 6 against White's kings on 7 and 14. 6-10 attacks both
# kings and draws; the three other moves lose. Every move ends in the 3-piece database, so the
# root is proven a draw once each move has been tried.
#   +-----------------+
#   |   .   .   .   . |   1-4
#   | .   B   W   .   |   5-8
#   |   .   .   .   . |   9-12
#   | .   W   .   .   |  13-16
#   |   .   .   .   . |  17-20
#   | .   .   .   .   |  21-24
#   |   .   .   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
FORK = "B:WK7,K14:BK6"


def test_a_drawn_root_plays_its_draw_and_not_a_loss(db8):
    mcts = solver_search(FORK, simulations=200, db=db8)
    draw = action_of(FORK, "6-10")
    lost = [action_of(FORK, m) for m in ("6-9", "6-1", "6-2")]
    assert mcts.root_proof(0) == DRAW
    assert proofs(mcts) == {draw: DRAW, **dict.fromkeys(lost, LOSS)}
    assert mcts.search_done(0) and mcts.root_child_visits(0) < 200
    visits = mcts.root_visits(0)
    assert all(visits[a] == 1 for a in lost)  # the visit that proved it, no more
    assert mcts.choose(0, 0.0) == draw and mcts.choose(0, 1.0) == draw
    assert nonzero(mcts.root_target(0)) == {draw: int(visits[draw])}


def test_proofs_agree_with_the_database_on_random_endings(tmp_path: Path):
    """6x6 endings of four pieces searched with the 3-piece database at the leaves: every root and
    root move the solver proves has the 4-piece database's value (root mover's view)."""
    build(tmp_path / "db3", 6, 3)
    build(tmp_path / "db4", 6, 4)
    leaves, truth = EndgameDatabase(tmp_path / "db3", 6, 3), EndgameDatabase(tmp_path / "db4", 6, 4)
    rng = random.Random(2)
    sigs = [s for s in signatures(6, 4) if sum(s) == 4 and s[0] + s[1] and s[2] + s[3]]
    games = []
    while len(games) < 96:
        sig = rng.choice(sigs)
        black, white, kings = _core.egdb_board_at(
            6, sig, rng.randrange(_core.egdb_index_size(6, sig))
        )
        game = _core.Game.from_bitboards(6, black, white, kings, rng.random() < 0.5)
        if game.result() == 0 and len(game.legal_actions()) > 1:
            games.append(game)
    mcts = new_search(len(games), 6, {"simulations": 300, "dirichlet_epsilon": 0.0, "solver": True})
    mcts.set_egdb(leaves.core)
    for i, game in enumerate(games):
        mcts.reset(i, game)
    search(mcts, UniformInference())
    roots = moves = 0
    for i, game in enumerate(games):
        if mcts.root_proof(i):
            roots += 1
            assert mcts.root_proof(i) == truth.core.probe_game(game), game
            assert mcts.search_done(i) and mcts.root_child_visits(i) < 300
        child_proofs = mcts.root_child_proofs(i)
        for action in np.flatnonzero(child_proofs):
            child = game.copy()
            child.step(int(action))
            if child.mid_jump:  # not a database position
                continue
            value = truth.core.probe_game(child)
            if child.white_to_move != game.white_to_move:
                value = OTHER_SIDE[value]
            assert child_proofs[action] == value
            moves += 1
    assert roots >= 50 and moves >= 120  # most of them decided: the check is not vacuous


# ------------------------------------------------------------------------------------------
# Off: the search of before, visit for visit
# ------------------------------------------------------------------------------------------


class SkewedMaterial:
    """Priors weighted by the action number (1..7), the value tanh of the material balance."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = mask * (1.0 + (np.arange(mask.shape[1]) % 7))[None, :]
        priors = w / w.sum(axis=1, keepdims=True)
        own = planes[:, 0].sum((1, 2)) + 1.5 * planes[:, 1].sum((1, 2))
        opp = planes[:, 2].sum((1, 2)) + 1.5 * planes[:, 3].sum((1, 2))
        v = np.tanh(0.5 * (own - opp))
        wdl = np.stack([np.maximum(v, 0), 1 - np.abs(v), np.maximum(-v, 0)], axis=1)
        return priors.astype(np.float32), wdl.astype(np.float32)


# Recorded with the build before the solver existed (same inference, seeds and settings).
OFF_FENS = [
    "B:W18,21,22,23,24,25,26,27,28,29,31,32:B1,2,3,4,5,6,7,8,9,10,12,14",
    SHOT,
    "B:W21,26:B17,18",
    "B:W26:BK7",
    HANGING,
]
OFF_VISITS = [
    {25: 94, 28: 31, 32: 138, 37: 98, 44: 25, 52: 14},
    {20: 11, 36: 5, 56: 1, 57: 352, 60: 8, 61: 23},
    {65: 7, 68: 361, 69: 32},
    {24: 18, 25: 350, 26: 15, 27: 17},
    {68: 13, 69: 16, 70: 275, 71: 96},
]
OFF_CHOICES = [25, 57, 68, 25, 70]
OFF_GAMES = {  # 6x6 games at temperature 1 with root noise: every draw of the RNG shows
    1: "16 21 25 17 13 32 21 13 32 4 5 25 0 41 41 1 20 28 13 52 8 67 40 8 28",
    2: "13 17 25 4 16 25 20 20 5 13 20 25 1 41 24 71 41 1 37 58 8 47 20 34 28 5",
    3: "17 20 28 5 13 32 4 8 21 20 24 29 32 16 37 45 8 37 1 67 48 46 63 31",
}
OFF_EGDB_FENS = ["W:W20,K15:BK28,12", "B:W26:BK7", FORK, SHOT]
OFF_EGDB_VISITS = [
    {49: 1, 68: 38, 69: 77, 70: 160, 71: 24},
    {24: 54, 25: 68, 26: 82, 27: 96},
    {20: 11, 21: 281, 22: 3, 23: 5},
    {20: 11, 36: 5, 56: 1, 57: 268, 60: 6, 61: 9},
]


@pytest.mark.parametrize("solver", [None, False])  # the default, and the switch set off
def test_off_searches_exactly_as_before(solver, db8):
    extra = {} if solver is None else {"solver": solver}
    cfg = {"simulations": 400, "leaves_per_game": 8, "dirichlet_epsilon": 0.25, "seed": 3, **extra}
    mcts = new_search(len(OFF_FENS), 8, cfg)
    for i, fen in enumerate(OFF_FENS):
        mcts.reset(i, Position.from_fen(fen).game)
    search(mcts, SkewedMaterial())
    assert [nonzero(mcts.root_visits(i)) for i in range(len(OFF_FENS))] == OFF_VISITS
    assert [mcts.choose(i, 1.0) for i in range(len(OFF_FENS))] == OFF_CHOICES
    assert all(mcts.root_proof(i) == UNPROVEN for i in range(len(OFF_FENS)))

    for seed, expected in OFF_GAMES.items():
        game_cfg = {"simulations": 24, "dirichlet_epsilon": 0.25, "dirichlet_alpha": 1.0, **extra}
        one = new_search(1, 6, game_cfg, seed=seed)
        one.reset(0, _core.Game(6, 60))
        actions = []
        while not one.done(0):
            search(one, SkewedMaterial())
            actions.append(one.choose(0, 1.0))
            one.advance(0, actions[-1])
        assert actions == [int(a) for a in expected.split()], seed

    eg = new_search(len(OFF_EGDB_FENS), 8, {"simulations": 300, "dirichlet_epsilon": 0.0, **extra})
    eg.set_egdb(db8.core)
    for i, fen in enumerate(OFF_EGDB_FENS):
        eg.reset(i, Position.from_fen(fen).game)
    search(eg, SkewedMaterial())
    assert [nonzero(eg.root_visits(i)) for i in range(len(OFF_EGDB_FENS))] == OFF_EGDB_VISITS
    assert eg.egdb_hits == 59


def test_the_switch_is_off_by_default_and_reaches_the_search(config):
    assert _core.MctsConfig().solver is False
    assert config().mcts.solver is False
    assert make_config(config("mcts.solver=true").mcts).solver is True
    with pytest.raises(ValueError, match=r"mcts\.solver"):
        make_config({"solver": "sometimes"})


def test_players_take_the_switch_from_the_config_and_from_their_spec(config):
    """A match's players read mcts.solver from the composed config (as evaluation.match passes
    it) or from the spec's own ``solver`` option; the winning shot ends their search early."""
    from evaluation.players.defaults import eval_mcts_settings
    from evaluation.players.network import mcts_player
    from evaluation.players.spec import parse_spec

    spec = "uniform-mcts:sims=200"
    on = mcts_player(spec, mcts=eval_mcts_settings(config("mcts.solver=true")))
    by_spec = mcts_player(f"{spec},solver=1")
    off = mcts_player(spec, mcts=eval_mcts_settings(config()))
    spec_off = mcts_player(
        f"{spec},solver=off", mcts=eval_mcts_settings(config("mcts.solver=true"))
    )
    assert by_spec.name == f"{spec},solver=1" and spec_off.name == f"{spec},solver=0"
    for player in (on, by_spec):
        assert str(player.choose(Position.from_fen(SHOT))) == "15-19"
        assert 0 < player.last_visits < 200
    for player in (off, spec_off):
        assert str(player.choose(Position.from_fen(SHOT))) == "15-19"
        assert player.last_visits == 200
    with pytest.raises(ValueError, match="option solver must be 1 or 0, got 'maybe'"):
        parse_spec(f"{spec},solver=maybe")


@pytest.mark.parametrize("leaves_in_database", [False, True])
def test_self_play_with_the_solver_finishes_valid_games(config, tmp_path, leaves_in_database):
    """Self-play with the solver on (and the database at the leaves, where proofs come from
    positions deep inside a game): every game ends and every record passes validation."""
    from actors.self_play import run_self_play
    from game.mcts import UniformInference as Uniform

    egdb = ["egdb.mcts_leaves=true", f"egdb.dir={tmp_path}", "egdb.pieces=3"]
    cfg = config(
        "game=small",
        "mcts.simulations=64",
        "mcts.leaves_per_game=4",
        "mcts.solver=true",
        "selfplay.games_in_parallel=4",
        "selfplay.openings=start",
        "selfplay.resign=false",
        *(egdb if leaves_in_database else []),
    )
    records, stats = run_self_play(Uniform(), cfg, 12, seed=5)
    assert stats.games == 12 and len(records) == 12 and stats.dropped == 0
    assert all(r.result in (1, 2, 3) for r in records)
