"""The rules of English checkers on hand-drawn positions, and golden files of what a person reads.

Each position is given as a FEN with its diagram beside it (Black at the top, ``b``/``w`` men,
``B``/``W`` kings, ``.`` empty dark squares, square numbers of each row on the right). The diagram
is not decoration: ``_position`` checks that the engine draws the FEN exactly as written here.

Golden files live in ``tests/golden/``; after a deliberate change of output, regenerate them with
``UPDATE_GOLDEN=1 pytest tests/test_rules.py`` and review the diff.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from game import Game, Position
from game.pdn import PdnGame, read_pdn, write_pdn

GOLDEN = Path(__file__).parent / "golden"
NO_PROGRESS_PLIES = 80  # 40 moves by each side without a capture or a man move (ACF rule)


def _position(fen: str, drawing: str, *, max_plies: int = 0) -> Position:
    """The position of ``fen``, after checking that the engine draws it as ``drawing``."""
    pos = Position.from_fen(fen, max_plies=max_plies)
    drawn = [line.strip() for line in str(pos).splitlines()]
    expected = [line.strip() for line in drawing.strip().splitlines()]
    assert drawn == expected, f"the diagram beside {fen} is not the position:\n{pos}"
    return pos


def _moves(pos: Position) -> list[str]:
    return sorted(str(m) for m in pos.legal_moves())


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path} (create it with UPDATE_GOLDEN=1)"
    assert text == path.read_text(encoding="utf-8"), f"output differs from {path}"


# --- compulsory capture ----------------------------------------------------------------------


def test_a_step_is_illegal_while_a_capture_exists() -> None:
    pos = _position(
        "B:W18:B1,14",
        """
        +-----------------+
        |   b   .   .   . |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   b   .   .   |  13-16
        |   .   w   .   . |  17-20
        | .   .   .   .   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    assert _moves(pos) == ["14x23"]
    for step in ("1-5", "1-6", "14-17"):
        with pytest.raises(ValueError, match="illegal move"):
            pos.play(step)
    # The learning interface agrees: only the jump 14 -> 23 (square index 13, down-right) is legal.
    assert pos.game.legal_actions() == [13 * 4 + 1]
    with pytest.raises(ValueError, match="illegal action"):
        pos.game.step(0 * 4 + 0)  # 1-5
    assert pos.fen() == "B:W18:B1,14"


def test_any_capture_may_be_chosen_not_only_the_longest() -> None:
    pos = _position(
        "B:W6,15,24:B2,10",
        """
        +-----------------+
        |   .   b   .   . |   1-4
        | .   w   .   .   |   5-8
        |   .   b   .   . |   9-12
        | .   .   w   .   |  13-16
        |   .   .   .   . |  17-20
        | .   .   .   w   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    assert _moves(pos) == ["10x19x28", "2x9"]


# --- multi-jumps -------------------------------------------------------------------------------


def test_a_multi_jump_is_one_move_with_every_landing_square() -> None:
    pos = _position(
        "B:W15,23,24:B10",
        """
        +-----------------+
        |   .   .   .   . |   1-4
        | .   .   .   .   |   5-8
        |   .   b   .   . |   9-12
        | .   .   w   .   |  13-16
        |   .   .   .   . |  17-20
        | .   .   w   w   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    assert _moves(pos) == ["10x19x26", "10x19x28"]  # never the partial 10x19
    move = pos.parse_move("10x19x26")
    assert move.squares == [10, 19, 26]
    assert move.captures == [15, 23]
    pos.play(move)
    assert pos.fen() == "W:W24:B26"


def test_a_man_crowned_by_a_jump_stops_even_where_a_king_could_go_on() -> None:
    man = _position(
        "B:W26,27:B22",
        """
        +-----------------+
        |   .   .   .   . |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   .   .   .   |  13-16
        |   .   .   .   . |  17-20
        | .   b   .   .   |  21-24
        |   .   w   w   . |  25-28
        | .   .   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    assert _moves(man) == ["22x31"]
    man.play("22x31")
    assert man.fen() == "W:W27:BK31"  # crowned, and White (not the new king) moves next
    # The same piece already a king takes the second man too: only crowning stopped the man.
    king = Position.from_fen("B:W26,27:BK22")
    assert _moves(king) == ["22x31x24"]


def test_a_king_captures_backwards_and_a_man_does_not() -> None:
    king = _position(
        "B:W15:BK19",
        """
        +-----------------+
        |   .   .   .   . |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   .   w   .   |  13-16
        |   .   .   B   . |  17-20
        | .   .   .   .   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    assert _moves(king) == ["19x10"]
    man = Position.from_fen("B:W15:B19")
    assert _moves(man) == ["19-23", "19-24"]
    # A white king captures backwards too (down the board), a white man would not.
    assert _moves(Position.from_fen("W:WK15:B19")) == ["15x24"]
    assert _moves(Position.from_fen("W:W15:B19")) == ["15-10", "15-11"]


def test_two_capture_paths_over_the_same_pieces_are_two_moves() -> None:
    # The black king on 6 can circle the four white men either way round and land back on 6.
    pos = _position(
        "B:W9,10,17,18:BK6",
        """
        +-----------------+
        |   .   .   .   . |   1-4
        | .   B   .   .   |   5-8
        |   w   w   .   . |   9-12
        | .   .   .   .   |  13-16
        |   w   w   .   . |  17-20
        | .   .   .   .   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    moves = pos.legal_moves()
    assert sorted(str(m) for m in moves) == ["6x13x22x15x6", "6x15x22x13x6"]
    assert all(m.captures == [9, 10, 17, 18] and m.destination == 6 for m in moves)
    assert moves[0] != moves[1]
    assert pos.perft(1) == 2
    assert pos.divide(1) == {"6x13x22x15x6": 1, "6x15x22x13x6": 1}
    pos.play(moves[0])
    assert pos.fen() == "W:W:BK6"
    assert pos.result() == "1-0"


# --- the end of the game -----------------------------------------------------------------------


def test_the_side_with_no_legal_move_loses() -> None:
    blocked = _position(
        "B:W25,30:B21",
        """
        +-----------------+
        |   .   .   .   . |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   .   .   .   |  13-16
        |   .   .   .   . |  17-20
        | b   .   .   .   |  21-24
        |   w   .   .   . |  25-28
        | .   w   .   .   |  29-32
        +-----------------+
        Black to move
        """,
    )
    assert blocked.legal_moves() == []
    assert blocked.result() == "0-1"  # White won
    assert blocked.end_reason == "no legal move"
    assert blocked.game.result() == 2
    no_pieces = Position.from_fen("W:W:B1")
    assert no_pieces.result() == "1-0"  # Black won
    assert no_pieces.end_reason == "no legal move"
    # The same men with White to move: White has moves, the game goes on.
    assert Position.from_fen("W:W25,30:B21").result() is None


def test_threefold_repetition_draws() -> None:
    pos = _position(
        "B:WK32:BK1",
        """
        +-----------------+
        |   B   .   .   . |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   .   .   .   |  13-16
        |   .   .   .   . |  17-20
        | .   .   .   .   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   W   |  29-32
        +-----------------+
        Black to move
        """,
    )
    shuffle = ["1-5", "32-28", "5-1", "28-32"]
    assert pos.game.repetitions() == 1
    for move in shuffle:
        assert pos.result() is None
        pos.play(move)
    assert pos.game.repetitions() == 2  # the start position, a second time
    for move in shuffle[:-1]:
        pos.play(move)
        assert pos.result() is None
    pos.play(shuffle[-1])
    assert pos.game.repetitions() == 3
    assert pos.result() == "1/2-1/2"
    assert pos.end_reason == "threefold repetition"
    pos.undo()
    assert pos.result() is None


def _wander(pos: Position, plies: int, rng: random.Random, seen: dict[str, int]) -> None:
    """Plays ``plies`` king moves that capture nothing, allow no capture and repeat no position.

    Repetitions are counted here from the FENs, independently of the engine.
    """
    for _ in range(plies):
        candidates = []
        kings = [m for m in pos.legal_moves() if pos.game.kings >> (m.origin - 1) & 1]
        for move in kings:
            assert not move.is_capture
            pos.play(move)
            fen = pos.fen()
            if seen.get(fen, 0) == 0 and not any(m.is_capture for m in pos.legal_moves()):
                candidates.append(move)
            pos.undo()
        assert candidates, f"no quiet, new king move in {pos.fen()}"
        pos.play(rng.choice(candidates))
        seen[pos.fen()] = seen.get(pos.fen(), 0) + 1


def test_forty_moves_each_without_capture_or_man_move_draw() -> None:
    fen = "B:WK29,K32:BK1,K4"
    pos = _position(
        fen,
        """
        +-----------------+
        |   B   .   .   B |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   .   .   .   |  13-16
        |   .   .   .   . |  17-20
        | .   .   .   .   |  21-24
        |   .   .   .   . |  25-28
        | W   .   .   W   |  29-32
        +-----------------+
        Black to move
        """,
    )
    rng = random.Random(40)
    seen = {fen: 1}
    _wander(pos, NO_PROGRESS_PLIES - 1, rng, seen)
    assert pos.game.no_progress == NO_PROGRESS_PLIES - 1
    assert pos.result() is None
    _wander(pos, 1, rng, seen)
    assert pos.game.no_progress == NO_PROGRESS_PLIES
    assert pos.result() == "1/2-1/2"
    assert pos.end_reason == "forty-move rule"


def test_a_man_move_resets_the_forty_move_count() -> None:
    # Black kings on 1 and 4, a black man on 12; White kings on 29 and 32.
    pos = Position.from_fen("B:WK29,K32:BK1,K4,12")
    _wander(pos, 60, random.Random(1), {pos.fen(): 1})
    assert pos.game.no_progress == 60
    assert pos.turn == "B"
    man_moves = [m for m in pos.legal_moves() if m.origin == 12]
    assert man_moves, pos.fen()
    pos.play(man_moves[0])
    assert pos.game.no_progress == 0


def test_a_capture_resets_the_forty_move_count_and_undo_restores_it() -> None:
    pos = _position(
        "B:WK4,22:BK32",
        """
        +-----------------+
        |   .   .   .   W |   1-4
        | .   .   .   .   |   5-8
        |   .   .   .   . |   9-12
        | .   .   .   .   |  13-16
        |   .   .   .   . |  17-20
        | .   w   .   .   |  21-24
        |   .   .   .   . |  25-28
        | .   .   .   B   |  29-32
        +-----------------+
        Black to move
        """,
    )
    # The black king walks round behind the white man while White's king shuffles.
    for count, move in enumerate(["32-27", "4-8", "27-23", "8-4", "23-26", "4-8"], start=1):
        pos.play(move)
        assert pos.game.no_progress == count, move
    assert _moves(pos) == ["26x17"]
    pos.play("26x17")
    assert pos.game.no_progress == 0
    pos.undo()
    assert pos.game.no_progress == 6
    pos.undo()
    pos.play("22-18")  # a man move resets it too
    assert pos.game.no_progress == 0


def test_the_ply_cap_ends_the_game_as_a_flagged_draw() -> None:
    pos = Position(max_plies=10)
    for _ in range(10):
        assert pos.result() is None
        pos.play(pos.legal_moves()[0])
    assert pos.ply == 10
    assert pos.result() == "1/2-1/2"
    assert pos.end_reason == "ply cap"
    assert pos.game.end_reason() == 4
    uncapped = Position()
    for _ in range(10):
        uncapped.play(uncapped.legal_moves()[0])
    assert uncapped.result() is None


# --- boards, undo, golden files ----------------------------------------------------------------


def test_the_six_by_six_start_position() -> None:
    pos = Position(size=6)
    assert pos.fen() == "B:W13,14,15,16,17,18:B1,2,3,4,5,6"
    assert _moves(pos) == ["4-7", "5-7", "5-8", "6-8", "6-9"]
    assert pos.game.num_actions == 72
    _check_golden("start_6x6.txt", str(pos) + "\n")


def test_the_eight_by_eight_start_position() -> None:
    pos = Position()
    assert pos.fen() == ("B:W21,22,23,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,11,12")
    assert pos.game.num_actions == 128
    _check_golden("start_8x8.txt", str(pos) + "\n")


@pytest.mark.parametrize("size", [8, 6])
def test_undo_restores_the_hash_and_the_fen(size: int) -> None:
    rng = random.Random(size)
    for _ in range(10):
        game = Game(size)
        pos = Position.from_game(game)
        trail = []
        while pos.legal_moves() and len(trail) < 120:
            trail.append((game.hash, pos.fen(), game.no_progress, game.ply))
            for move in pos.legal_moves():  # every move undoes exactly
                game.make(move)
                game.undo()
                assert (game.hash, pos.fen()) == trail[-1][:2]
            game.make(rng.choice(pos.legal_moves()))
        # Unwind the whole game: every earlier state comes back, in order.
        while trail:
            game.undo()
            assert (game.hash, pos.fen(), game.no_progress, game.ply) == trail.pop()
        assert pos.fen() == Position(size).fen()


def test_equal_positions_hash_equal_whatever_the_route() -> None:
    a, b = Position(), Position()
    for move in ("11-15", "24-20", "9-13"):
        a.play(move)
    for move in ("9-13", "24-20", "11-15"):
        b.play(move)
    assert a.fen() == b.fen()
    assert a.game.hash == b.game.hash
    assert a.game.hash == Position.from_fen(a.fen()).game.hash
    c = Position.from_fen(a.fen().replace("W:", "B:", 1))  # same pieces, other side to move
    assert c.game.hash != a.game.hash


FIXED_GAME = """
[Event "Manchester 1841"]
[Date "1841-??-??"]
[Black "Moorhead, W."]
[White "Wyllie, J."]
[Site "Manchester"]
[Result "0-1"]
1. 11-15 24-20 2. 8-11 28-24 3. 9-13 22-18 4. 15x22 25x18 5. 4-8 26-22 6. 10-14
18x9 7. 5x14 22-18 8. 1-5 18x9 9. 5x14 29-25 10. 11-15 24-19 11. 15x24 25-22 12.
24-28 22-18 13. 6-9 27-24 14. 8-11 24-19 15. 7-10 20-16 16. 11x20 18-15 17. 2-6
15-11 18. 12-16 19x12 19. 10-15 11-8 20. 15-18 21-17 21. 13x22 30-26 22. 18x27
26x17x10x1 0-1
"""


def test_a_fixed_game_written_as_pdn_matches_the_golden_file() -> None:
    (game,) = read_pdn(FIXED_GAME)
    set_up = PdnGame(
        tags={"Event": "Set-up", "SetUp": "1", "FEN": "W:WK14,K23:B6,10,19"},
        moves=["23x16", "10x17", "16-11"],
        result="*",
    )
    assert set_up.replay().fen() == "B:WK11:B6,17"
    text = write_pdn([game, set_up])
    _check_golden("game.pdn", text)
    again = read_pdn(text)
    assert [g.moves for g in again] == [game.moves, set_up.moves]
    assert game.replay().fen() == "B:WK1,8,12,31,32:B3,9,20,27,28"
