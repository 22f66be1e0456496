"""Time management of the timed alpha-beta players (``minimax:tMS,tm``, ``ab+nn:tMS,tm``).

The bank's bookkeeping is checked on an injected clock (never a timing assertion): whatever the
searches take within the limits they are given, a game never spends more than the budget times
its moves.
"""

from __future__ import annotations

import random
from dataclasses import astuple

import numpy as np
import pytest

from evaluation.matches.records import describe_search
from evaluation.players.ab_clock import move_time
from evaluation.players.alphabeta import MinimaxPlayer, alphabeta
from evaluation.players.make import make_player
from evaluation.players.mcts import TIME_MAX_EXTENSION as MAX_EXTENSION
from evaluation.players.mcts import MCTSPlayer
from game import Position, _core
from game.mcts import UniformInference, settled


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_specs_with_time_management() -> None:
    player = make_player("minimax:t200,tm")
    assert player.manage_time and player.time_ms == 200 and player.name == "minimax:t200,tm"
    assert not make_player("minimax:t200").manage_time
    learned = make_player("ab+nn:t100,tm")
    assert learned.manage_time and learned.name == "ab+nn:t100,tm" and learned.nneval
    with pytest.raises(ValueError, match="malformed player spec 'minimax:6,tm'"):
        make_player("minimax:6,tm")
    with pytest.raises(ValueError, match="needs a time, not a depth"):
        MinimaxPlayer(depth=4, manage_time=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bank_never_overdraws(seed: int) -> None:
    """Searches that take anything from a few milliseconds to their whole hard limit: the time
    spent after every move stays within the budget times the moves, moves after cheap ones may
    run past the budget (never past MAX_EXTENSION budgets more than their target), and a new
    game starts with an empty bank."""
    rng = random.Random(seed)
    clock = FakeClock()
    limits: list[tuple[int, int]] = []

    def search(position: Position, *, time_ms: int, max_ms: int, **_: object) -> _core.SearchResult:
        limits.append((time_ms, max_ms))
        clock.now += rng.choice([0.05, 0.3, time_ms / max_ms, 1.0]) * max_ms / 1000.0
        return alphabeta(position, depth=1)

    budget = 100
    player = MinimaxPlayer(time_ms=budget, manage_time=True, search=search, clock=clock)
    pos = Position()
    spent_before = 0.0
    for move in range(1, 61):
        if pos.is_over():
            break
        pos.play(player.choose(pos))
        assert clock.now * 1000.0 <= move * budget + 1e-6
        spent_before = clock.now
    assert spent_before > 0
    assert all(target <= high for target, high in limits)
    assert all(high - target <= budget * MAX_EXTENSION for target, high in limits)
    assert any(high > budget for _, high in limits), "saved time was never spent"
    assert abs(player.stats()["ms"] - clock.now * 1000.0) <= 1
    player.reset()
    assert player.bank_ms == 0.0
    player.choose(Position())
    assert limits[-1] == astuple(move_time(0.0, budget))  # an empty clock again


def test_a_player_without_management_gives_no_hard_limit() -> None:
    seen: list[int] = []

    def search(position: Position, *, max_ms: int, **_: object) -> _core.SearchResult:
        seen.append(max_ms)
        return alphabeta(position, depth=1)

    player = MinimaxPlayer(time_ms=50, search=search, clock=FakeClock())
    player.choose(Position())
    assert seen == [0]


def test_the_core_checks_its_limits_and_searches_managed() -> None:
    game = Position().game
    with pytest.raises(ValueError, match="max_ms"):
        _core.alphabeta_search(game, time_ms=50, max_ms=20)
    with pytest.raises(ValueError, match="max_ms"):
        _core.alphabeta_search(game, depth=4, max_ms=20)
    with pytest.raises(ValueError, match="max_ms"):
        _core.alphabeta_search(game, time_ms=50, max_ms=-1)
    pos = Position()
    result = alphabeta(pos, time_ms=20, max_ms=60)
    assert result.move in pos.legal_moves() and result.depth >= 1
    # A forced move is played after one iteration, managed or not.
    forced = Position.from_fen("B:W18:B14")  # 14x23 is Black's only move
    assert len(forced.legal_moves()) == 1
    assert alphabeta(forced, time_ms=20, max_ms=60).depth == 1


def test_a_match_line_gives_the_time_per_move() -> None:
    line = describe_search({"moves": 10, "depth": 9.5, "nodes": 120000.0, "ms": 187.0})
    assert line == "depth 9.5, 120,000 nodes, 187 ms per move (10 moves)"


def test_settled_means_the_leader_cannot_be_overtaken() -> None:
    assert settled([10, 3, 0], 6.5)
    assert not settled([10, 3, 0], 7)
    assert settled([5], 4)  # one action: a lead over nothing
    assert not settled([0, 0], 0)  # nothing searched yet
    assert not settled([], 0)


class TickingClock:
    """A clock that moves one millisecond each time it is read: deterministic, never idle."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


class PeakedInference(UniformInference):
    """Most of the prior on the first legal action: one move stands out, as in a position where
    the network is sure."""

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        priors, wdl = super().evaluate(planes, mask)
        first = mask.argmax(axis=1)
        priors = priors * 0.05
        priors[np.arange(len(mask)), first] += 0.95
        return priors, wdl


def play_timed(evaluator: UniformInference, budget: int, manage: bool, plies: int):
    player = MCTSPlayer(evaluator, {}, name="peaked", time_ms=budget)
    player.manage_time = manage
    clock = TickingClock()
    player.clock = clock
    pos, spent = Position(), []
    for _ in range(plies):
        if pos.is_over():
            break
        before = clock.now
        pos.play(player.choose(pos))
        spent.append(1000.0 * (clock.now - before))
    return player, spent


def test_a_managed_mcts_move_stops_when_settled_and_the_game_keeps_to_its_budget() -> None:
    """A search whose leader could no longer be caught, on a clock that ticks a millisecond a
    reading: managed, its moves end early; unmanaged, each spends its budget; either way the
    game's total stays within the budget times its moves (plus the clock readings of each
    move's last round)."""
    budget = 60
    _, plain_spent = play_timed(PeakedInference(), budget, False, 12)
    managed, spent = play_timed(PeakedInference(), budget, True, 12)
    assert min(s for s in plain_spent if s > 5) >= budget  # searched moves spend it all
    assert max(spent) < budget and sum(spent) < len(spent) * budget / 2  # settled: early
    assert sum(spent) <= len(spent) * (budget + 5)
    assert sum(plain_spent) <= len(plain_spent) * (budget + 5)
    assert managed.stats()["ms"] > 0
    managed.reset()
    assert managed.bank_ms == 0.0


def test_uniform_search_never_settles_early_and_specs_name_the_switch() -> None:
    """Equal priors and equal values: no leader, so the managed search spends its budget (and
    no more than the bank lends)."""
    budget = 40
    _, spent = play_timed(UniformInference(), budget, True, 6)
    assert all(budget <= s <= 3 * budget + 5 for s in spent if s > 5)
    player = make_player("uniform-mcts:t50,tm=1")
    assert player.manage_time and player.name == "uniform-mcts:t50,tm=1"
    assert not make_player("uniform-mcts:t50").manage_time
    assert "ms" not in make_player("uniform-mcts:sims=8").stats()
    with pytest.raises(ValueError, match="needs a time"):
        make_player("uniform-mcts:sims=8,tm=1")
