"""Games side by side: several search trees sharing forward passes (game.mcts.search_many,
evaluation.matches.games.play_pairs) give exactly the moves of one game at a time, in bigger
batches."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.ladder.rungs import ladder_player
from evaluation.matches.games import PairPlan, play_pair, play_pairs
from evaluation.matches.records import PairRecord
from evaluation.matches.workers import batches_side_by_side, run_match
from evaluation.players.defaults import play_settings
from evaluation.players.make import make_player
from evaluation.players.mcts import MCTSPlayer
from game import Position
from game.mcts import new_search, search, search_many
from game.openings import Opening, load_openings


class ProjectionInference:
    """A deterministic stand-in for a network whose answer for a position depends on that
    position alone (a fixed random projection of its planes), so a misrouted row shows; it
    records the batch sizes it was asked for."""

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed
        self.batches: list[int] = []
        self._w: tuple[np.ndarray, np.ndarray] | None = None

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.batches.append(len(mask))
        flat = planes.reshape(len(planes), -1).astype(np.float64)
        if self._w is None:
            rng = np.random.default_rng(self.seed)
            self._w = (
                rng.normal(size=(flat.shape[1], mask.shape[1])),
                rng.normal(size=(flat.shape[1], 3)),
            )
        logits = np.where(mask, flat @ self._w[0] * 0.3, -np.inf)
        priors = np.exp(logits - logits.max(axis=1, keepdims=True))
        priors /= priors.sum(axis=1, keepdims=True)
        v = np.exp(flat @ self._w[1] * 0.05)
        return priors.astype(np.float32), (v / v.sum(axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def deck() -> list[Opening]:
    return load_openings("deck")


def _position(moves: list[str]) -> Position:
    pos = Position(8)
    for m in moves:
        pos.play(m)
    return pos


def test_search_many_grows_each_tree_as_search_alone() -> None:
    settings = play_settings(None, simulations=48)
    starts = [[], ["11-15"], ["9-13", "22-18"]]
    alone, together = [], []
    for moves in starts:
        for trees in (alone, together):
            mcts = new_search(1, 8, settings, seed=0)
            mcts.reset(0, _position(moves).game)
            trees.append(mcts)
    one_by_one = ProjectionInference()
    leaves_alone = [search(m, one_by_one, 48).leaves for m in alone]
    batched = ProjectionInference()
    leaves_together = search_many(together, batched, 48)
    assert leaves_together == leaves_alone
    for a, b in zip(alone, together, strict=True):
        assert np.array_equal(a.root_visits(0), b.root_visits(0))
        assert np.allclose(a.root_q(0), b.root_q(0), equal_nan=True)
    # the same leaves in fewer, bigger forward passes
    assert sum(batched.batches) == sum(one_by_one.batches)
    assert len(batched.batches) < len(one_by_one.batches)
    assert max(batched.batches) > max(one_by_one.batches)


def test_search_many_of_nothing_to_search_evaluates_nothing() -> None:
    inference = ProjectionInference()
    assert search_many([], inference, 16) == []
    assert inference.batches == []


@pytest.mark.parametrize("rung", ["minimax:2", "noisy:0.3:minimax:1"])
def test_play_pairs_plays_the_games_of_play_pair(deck: list[Opening], rung: str) -> None:
    settings = play_settings(None, simulations=24)
    openings = deck[:3]
    sequential_eval = ProjectionInference()
    sequential = [
        play_pair(
            MCTSPlayer(sequential_eval, settings, name="net"),
            ladder_player(rung),
            opening,
            index,
            max_plies=120,
        )
        for index, opening in enumerate(openings)
    ]
    batched_eval = ProjectionInference()
    net = MCTSPlayer(batched_eval, settings, name="net")
    plans = [
        PairPlan(
            a=(net.fork(), net.fork()),
            b=(ladder_player(rung), ladder_player(rung)),
            opening=opening,
            index=index,
        )
        for index, opening in enumerate(openings)
    ]
    side_by_side = play_pairs(plans, max_plies=120)
    assert side_by_side == sequential  # the same moves and results, pair by pair
    for s, t in zip(sequential, side_by_side, strict=True):
        assert t.a_stats == s.a_stats and t.b_stats == s.b_stats
    assert sum(batched_eval.batches) == sum(sequential_eval.batches)
    assert len(batched_eval.batches) < len(sequential_eval.batches)


def test_play_pairs_needs_a_player_object_per_game(deck: list[Opening]) -> None:
    net = MCTSPlayer(ProjectionInference(), play_settings(None, simulations=8), name="net")
    rung = ladder_player("minimax:1")
    with pytest.raises(ValueError, match="its own player objects"):
        play_pairs([PairPlan(a=(net, net), b=(rung, ladder_player("minimax:1")), opening=deck[0])])
    with pytest.raises(ValueError, match="its own player objects"):
        play_pairs([PairPlan(a=(net, net.fork()), b=(rung, rung), opening=deck[0])])


def test_a_forked_player_shares_the_evaluator_not_the_tree() -> None:
    net = MCTSPlayer(ProjectionInference(), play_settings(None, simulations=16), name="net", seed=3)
    other = net.fork()
    assert other.inference is net.inference
    assert (other.name, other.seed, other.simulations) == (net.name, net.seed, net.simulations)
    net.choose(Position(8))
    assert net.stats()["moves"] == 1 and other.stats()["moves"] == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_a_match_side_by_side_plays_the_pairs_of_one_pair_at_a_time(
    deck: list[Opening], workers: int
) -> None:
    def match(side_by_side: int) -> tuple[PairRecord, ...]:
        return run_match(
            "uniform-mcts:sims=24",
            "random:3",
            deck,
            games=10,
            seed=1,
            max_plies=80,
            workers=workers,
            ray_mode="off",
            side_by_side=side_by_side,
        ).pairs

    one_at_a_time = match(1)
    together = match(4)
    assert [p.index for p in together] == list(range(5))
    assert together == one_at_a_time  # the same moves, results and search counts, pair by pair
    for s, t in zip(one_at_a_time, together, strict=True):
        assert t.a_stats == s.a_stats and t.b_stats == s.b_stats


def test_a_match_side_by_side_only_batches_a_network_at_a_number_of_simulations(
    deck: list[Opening],
) -> None:
    assert batches_side_by_side(make_player("uniform-mcts:sims=8"))
    assert not batches_side_by_side(make_player("uniform-mcts:t5"))  # searches on its own clock
    assert not batches_side_by_side(make_player("minimax:2"))
    # two alpha-beta players: nothing to batch, played one pair at a time all the same
    result = run_match("minimax:2", "random:1", deck, games=4, ray_mode="off", side_by_side=3)
    assert [p.index for p in result.pairs] == [0, 1]
    with pytest.raises(ValueError, match="side_by_side must be an integer >= 1"):
        run_match("minimax:1", "random", deck, games=2, ray_mode="off", side_by_side=0)
