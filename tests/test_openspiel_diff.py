"""Differential test against OpenSpiel's ``checkers`` on positions from random play.

OpenSpiel's conventions, read from its action strings (``a3b4``) and its board printout:

- It prints rank 8 at the top and files a-h left to right; its first player ``o`` (kings ``8``)
  starts on ranks 1-3 at the bottom and moves first, its second player ``+`` (kings ``*``) on
  ranks 6-8. Our board is drawn with the first mover (Black) at the top, so its board is ours
  rotated by 180 degrees: its (file f, rank k) is our (row k-1, column 7-f), and its ``o`` is our
  Black. So g1 is our square 1, b8 our 32, and its opening ``a3b4`` our ``12-16``.
- One action is one step or one single jump; a multi-jump is several actions by the same player,
  so its actions are expanded here into whole moves by applying them while that player is to move.
- It ends the game as a draw after 40 actions without a capture (man moves do not reset it) and
  has no repetition rule. Both engines are driven with the same random moves, and comparison stops
  once its game ends; where it ends because the side to move has no move, ours must agree.
"""

from __future__ import annotations

import random

import pytest

from game import Game

pyspiel = pytest.importorskip(
    "pyspiel", reason="OpenSpiel (pyspiel) is not installed: pip install open_spiel"
)

OPENSPIEL_QUIET_LIMIT = 40  # its kMaxMovesWithoutCapture, counted in actions
SIDE = 8
PIECES = {"o": ("black", False), "8": ("black", True), "+": ("white", False), "*": ("white", True)}


def _square(file_letter: str, rank: str) -> int:
    """Our 1-based square of an OpenSpiel square such as ``('a', '3')``."""
    row = int(rank) - 1
    col = SIDE - 1 - (ord(file_letter) - ord("a"))
    assert (row + col) % 2 == 1, "OpenSpiel used a light square"
    return row * (SIDE // 2) + col // 2 + 1


def _action_squares(state, action: int) -> tuple[int, int]:
    text = state.action_to_string(state.current_player(), action)  # e.g. 'a3b4'
    return _square(text[0], text[1]), _square(text[2], text[3])


def _board(state) -> tuple[int, int, int]:
    """Our (black, white, kings) bitboards of an OpenSpiel state, read from its printout."""
    black = white = kings = 0
    lines = str(state).splitlines()
    for line in lines[:SIDE]:
        rank, cells = line[0], line[1:]
        for f, ch in enumerate(cells[:SIDE]):
            if ch == ".":
                continue
            colour, king = PIECES[ch]
            bit = 1 << (_square(chr(ord("a") + f), rank) - 1)
            if colour == "black":
                black |= bit
            else:
                white |= bit
            if king:
                kings |= bit
    return black, white, kings


def _whole_moves(state) -> dict[tuple[int, ...], list[int]]:
    """OpenSpiel's turn expanded into whole moves: square path -> its action sequence."""
    player = state.current_player()
    out: dict[tuple[int, ...], list[int]] = {}
    for action in state.legal_actions():
        origin, landing = _action_squares(state, action)
        child = state.child(action)
        if not child.is_terminal() and child.current_player() == player:  # the jump goes on
            for path, rest in _whole_moves(child).items():
                assert path[0] == landing
                out[(origin, *path)] = [action, *rest]
        else:
            out[(origin, landing)] = [action]
    return out


def _compare_random_games(games: int, seed: int) -> tuple[int, int]:
    """Plays random games in both engines; returns (positions compared, games ended by no move)."""
    game_spec = pyspiel.load_game("checkers")
    rng = random.Random(seed)
    positions = decisive = 0
    for _ in range(games):
        ours = Game(SIDE)
        theirs = game_spec.new_initial_state()
        quiet = 0  # OpenSpiel's counter: actions since its last capture
        while True:
            assert (ours.black, ours.white, ours.kings) == _board(theirs)
            our_moves = {tuple(m.squares): m for m in ours.legal_moves()}
            if theirs.is_terminal():
                if quiet >= OPENSPIEL_QUIET_LIMIT:
                    assert theirs.returns() == [0.0, 0.0]
                    break  # its 40-action draw; our rules play on
                assert not our_moves, "OpenSpiel says the side to move has no move"
                winner = (
                    0 if ours.white_to_move else 1
                )  # the side not to move won; player 0 is Black
                assert theirs.returns()[winner] == 1.0
                decisive += 1
                break
            assert theirs.current_player() == (1 if ours.white_to_move else 0)
            their_moves = _whole_moves(theirs)
            assert sorted(our_moves) == sorted(their_moves), str(theirs)
            positions += 1
            path = rng.choice(sorted(our_moves))
            ours.make(our_moves[path])
            for action in their_moves[path]:
                theirs.apply_action(action)
            quiet = 0 if our_moves[path].is_capture else quiet + 1
    return positions, decisive


def test_same_legal_moves_as_openspiel_on_random_games() -> None:
    positions, decisive = _compare_random_games(games=800, seed=2024)
    assert positions >= 40000
    assert decisive >= 500  # most random games end with a side that has no move: results compared


@pytest.mark.slow
def test_same_legal_moves_as_openspiel_on_many_random_games() -> None:
    positions, _ = _compare_random_games(games=8000, seed=7)
    assert positions >= 400000


def test_the_coordinate_translation() -> None:
    state = pyspiel.load_game("checkers").new_initial_state()
    assert state.current_player() == 0
    assert _board(state) == (Game(SIDE).black, Game(SIDE).white, 0)
    opening = sorted(_action_squares(state, a) for a in state.legal_actions())
    assert opening == [(9, 13), (9, 14), (10, 14), (10, 15), (11, 15), (11, 16), (12, 16)]
    assert _square("a", "3") == 12
    assert _square("b", "4") == 16
    assert _square("g", "1") == 1
    assert _square("b", "8") == 32
