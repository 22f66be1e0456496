"""The alpha-beta's time management on the core's node clock (deterministic: N nodes make a
millisecond, so every "time" below is a node count and no assertion depends on the machine).

A settled root stops at half its target, an unsettled one runs on towards its hard limit, no
move passes its hard limit, and a game spends at least 90% of its budget and never more than its
clock holds, on an increment clock with or without time for the whole game.
"""

from __future__ import annotations

import random

import pytest

from evaluation.players.ab_clock import bank_after, move_time, reserve_ms
from evaluation.players.alphabeta import MinimaxPlayer, alphabeta
from evaluation.players.make import make_player
from game import Position, _core
from game.openings import acf_deck

NODES_PER_MS = 200
BUDGET = 50  # ms a move: 10,000 nodes on the node clock, depth 5-8 with the hand-written evaluation

# Black to move; the best move (6-10) holds from depth 1 with a steady score: settled.
SETTLED_FEN = "B:W17,18,20,21,22,24,29,31,32:B1,2,3,4,6,9,11,13,15"
# Black to move; the best move changes between iterations (10-15 at depth 6, 16-19 at depth 7).
UNSETTLED_FEN = "B:W17,20,21,22,23,26,27,28,29,30,31,32:B1,2,3,4,6,7,8,9,10,12,13,16"


def timed(fen: str, max_ms: int) -> _core.SearchResult:
    return alphabeta(
        Position.from_fen(fen), time_ms=BUDGET, max_ms=max_ms, nodes_per_ms=NODES_PER_MS
    )


def test_the_node_clock_is_deterministic_and_exact() -> None:
    pos = Position()
    first = alphabeta(pos, time_ms=BUDGET, nodes_per_ms=NODES_PER_MS)
    again = alphabeta(pos, time_ms=BUDGET, nodes_per_ms=NODES_PER_MS)
    assert (first.move, first.score, first.depth, first.nodes) == (
        again.move,
        again.score,
        again.depth,
        again.nodes,
    )
    assert first.clock_ms == first.nodes / NODES_PER_MS <= BUDGET
    with pytest.raises(ValueError, match="nodes_per_ms"):
        _core.alphabeta_search(pos.game, time_ms=10, nodes_per_ms=-1)


def test_a_settled_root_stops_at_half_its_target() -> None:
    managed = timed(SETTLED_FEN, 3 * BUDGET)
    assert managed.stop == "settled" and str(managed.move) == "6-10"
    assert managed.nodes == BUDGET * NODES_PER_MS // 2  # stopped inside an iteration, at half
    plain = timed(SETTLED_FEN, 0)  # unmanaged: the target is the limit, and it is reached
    assert plain.stop == "limit" and plain.nodes == BUDGET * NODES_PER_MS


def test_an_unsettled_root_runs_on_to_its_hard_limit() -> None:
    managed = timed(UNSETTLED_FEN, 3 * BUDGET)
    assert managed.stop == "extended" and managed.depth == 7 and str(managed.move) == "16-19"
    assert managed.nodes == 3 * BUDGET * NODES_PER_MS  # never past the hard limit
    plain = timed(UNSETTLED_FEN, 0)
    assert plain.depth == 6 and plain.nodes <= BUDGET * NODES_PER_MS
    assert str(plain.move) != "16-19"  # what the extra time found


def test_the_move_time_follows_the_clock() -> None:
    assert move_time(0.0, 200) == (first := move_time(0.0, 200))
    assert first.target_ms == first.max_ms == 200 - reserve_ms(200)  # an empty bank: no extension
    rich = move_time(400.0, 200)
    assert rich.target_ms == 400  # the budget and half the bank
    assert rich.max_ms == 600 - reserve_ms(200)  # up to two budgets more, within the clock
    poor = move_time(-100.0, 200)
    assert poor.target_ms == poor.max_ms == 100 - reserve_ms(200)  # an overdraft: aims lower
    assert bank_after(400.0, 200, 150.0) == 450.0


@pytest.mark.parametrize("game_ms", [0, 2000])
@pytest.mark.parametrize("seed", [0, 1])
def test_never_lost_on_an_increment_clock(game_ms: int, seed: int) -> None:
    """Searches that take anything up to their hard limit plus an overshoot (what a stopped
    search and the player's own work cost beyond it, under the reserve): the clock never runs
    out, and a new game starts with the game's time again."""
    rng = random.Random(seed)
    now = [0.0]
    limits: list[tuple[int, int]] = []

    def search(position: Position, *, time_ms: int, max_ms: int, **_: object):
        limits.append((time_ms, max_ms))
        share = rng.choice([0.02, 0.5, time_ms / max_ms, 1.0])
        now[0] += (share * max_ms + rng.uniform(0, 0.9) * reserve_ms(budget)) / 1000.0
        return alphabeta(position, depth=1)

    budget = 100
    player = MinimaxPlayer(
        time_ms=budget, manage_time=True, game_ms=game_ms, search=search, clock=lambda: now[0]
    )
    pos = Position()
    for move in range(1, 81):
        if pos.is_over():
            break
        pos.play(player.choose(pos))
        assert player.bank_ms >= 0.0  # the clock: game_ms + move * budget - spent
        assert abs(player.bank_ms - (game_ms + move * budget - 1000.0 * now[0])) < 1e-6
    assert all(target <= high for target, high in limits)
    assert any(high > budget for _, high in limits), "saved time was never spent"
    player.reset()
    assert player.bank_ms == game_ms


def play_game(opening: int) -> tuple[list[MinimaxPlayer], list[tuple[int, int, float, str]]]:
    """One game between two managed players on the node clock; every search's
    (target, hard limit, time spent, why it stopped)."""
    log: list[tuple[int, int, float, str]] = []

    def search(position: Position, **options: object) -> _core.SearchResult:
        result = alphabeta(position, **options)
        log.append((options["time_ms"], options["max_ms"], result.clock_ms, result.stop))
        return result

    players = [
        MinimaxPlayer(time_ms=BUDGET, manage_time=True, nodes_per_ms=NODES_PER_MS, search=search)
        for _ in range(2)
    ]
    pos = acf_deck()[opening].position(max_plies=300)
    while not pos.is_over():
        pos.play(players[len(log) % 2].choose(pos))
    return players, log


def test_a_game_spends_its_budget_and_never_more() -> None:
    players, log = play_game(0)
    assert all(spent <= high for _, high, spent, _ in log), "a move passed its hard limit"
    assert all(player.bank_ms >= 0 for player in players)  # never over budget times moves
    spent = sum(player.ms_total for player in players)
    assert spent / sum(player.moves * BUDGET for player in players) >= 0.9  # a real average
    stops = [stop for *_, stop in log]
    settled = [spent for target, _, spent, stop in log if stop == "settled"]
    extended = [spent for target, _, spent, stop in log if stop == "extended"]
    assert settled and all(s <= t for (t, _, s, stop) in log if stop == "settled")
    assert extended and all(s > t for (t, _, s, stop) in log if stop == "extended")
    assert "limit" not in stops


def test_specs_name_the_clock() -> None:
    player = make_player("ab+nn:t100,tm,game=60000")
    assert player.manage_time and player.game_ms == 60000 and player.bank_ms == 60000
    assert player.name == "ab+nn:t100,tm,game=60000"
    with pytest.raises(ValueError, match="game_ms needs time management"):
        make_player("minimax:t100,game=5")  # the game's time goes with time management


def test_the_reserve_grows_to_cover_a_loaded_machine() -> None:
    """Searches that overrun every hard limit by 20 ms (a machine busy with other work, far past
    the 5% reserve): the first move overdraws the clock, and the reserve then grows to the
    overshoot, so the clock is back above zero from the next move on and stays there."""
    now = [0.0]

    def search(position: Position, *, max_ms: int, **_: object):
        now[0] += (max_ms + 20.0) / 1000.0
        return alphabeta(position, depth=1)

    player = MinimaxPlayer(time_ms=100, manage_time=True, search=search, clock=lambda: now[0])
    pos = Position()
    banks = []
    for _ in range(30):
        pos.play(player.choose(pos))
        banks.append(player.bank_ms)
    assert banks[0] < 0 and min(banks[1:]) >= 0
    assert player.overshoot_ms == pytest.approx(20.0)
    player.reset()
    assert player.overshoot_ms == 0.0
