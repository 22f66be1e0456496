"""The game clock of the timed alpha-beta players with time management (``,tm``).

The clock is an increment clock: the player starts a game with ``game_ms`` (0 by default) and
gains ``time_ms`` before each of its moves; what a move spends is taken off. What the clock holds
beyond the move's own increment is the player's *bank*. A move gets

* a target, what the search aims to spend: the increment plus a share of the bank (what earlier
  moves saved is spent over the next SPREAD_MOVES moves, so little of it is left unspent when the
  game ends), and
* a hard limit: the target plus at most TIME_MAX_EXTENSION increments (for a root whose best move
  keeps changing), never more than the clock holds less a reserve for the search's overshoot and
  the player's own work, so the player never loses on time.

The search (game/cpp/search_clock.h) stops a settled root at half the target, an ordinary one
at the target, and lets an unsettled one run on to the hard limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.players.mcts import TIME_MAX_EXTENSION

# What a move saves is spread over about this many later moves: few, so that little is left when
# a game ends (measured on the node clock over four games: 2 spent 92.9% of the budget, 4 90.6%,
# 6 88.5%; the rest is mostly saved in won or lost endings, where the search proves the result
# at once, and on moves that are the only legal one).
SPREAD_MOVES = 2
# With time for the whole game (game_ms > 0) the bank is spread over this many moves instead:
# about a game's length for one side at this level, so the opening does not eat the clock.
GAME_MOVES = 30
# Kept back from the clock on every move: a stopped search overshoots by up to a clock check
# (well under a millisecond) and the player's own work around it costs a little more.
RESERVE_SHARE = 0.05
MIN_RESERVE_MS = 2.0
# The reserve grows to this many times the worst overshoot of a hard limit seen in the game: a
# machine busy with other work deschedules the search for whole time slices.
OVERSHOOT_MARGIN = 1.5
MIN_MOVE_MS = 1  # the search needs a positive time; a clock this low loses whatever it does


@dataclass(frozen=True)
class MoveTime:
    """One move's time: the search's target and its hard limit, in milliseconds."""

    target_ms: int
    max_ms: int


def reserve_ms(time_ms: int, overshoot_ms: float = 0.0) -> float:
    """What a move keeps back from the clock: a share of the increment, and at least the worst
    overshoot of a hard limit seen so far in the game (a loaded machine overshoots more)."""
    return max(MIN_RESERVE_MS, RESERVE_SHARE * time_ms, OVERSHOOT_MARGIN * overshoot_ms)


def move_time(
    bank_ms: float, time_ms: int, spread_moves: int = SPREAD_MOVES, overshoot_ms: float = 0.0
) -> MoveTime:
    """The target and hard limit of a move with ``bank_ms`` on the clock before its increment
    of ``time_ms`` (the bank may be negative after an overshoot: the move then aims lower);
    ``overshoot_ms``: the most a move of this game has spent beyond its hard limit."""
    available = bank_ms + time_ms
    target = time_ms + bank_ms / spread_moves
    hard = min(target + TIME_MAX_EXTENSION * time_ms, available - reserve_ms(time_ms, overshoot_ms))
    hard_ms = max(MIN_MOVE_MS, int(hard))
    target_ms = max(MIN_MOVE_MS, min(int(target), hard_ms))
    return MoveTime(target_ms, hard_ms)


def bank_after(bank_ms: float, time_ms: int, spent_ms: float) -> float:
    """The bank after a move that gained ``time_ms`` and spent ``spent_ms`` (negative: the
    player lost on time)."""
    return bank_ms + time_ms - spent_ms


__all__ = [
    "GAME_MOVES",
    "SPREAD_MOVES",
    "MoveTime",
    "bank_after",
    "move_time",
    "reserve_ms",
]
