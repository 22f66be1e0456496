"""Notation: FEN and PDN round-trips, and clear errors on bad input.

Property tests draw positions from random play on both boards (a seed and a length), so every
position is reachable; the error tests check that each message names what was wrong and where.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from game import Position, parse_fen
from game.pdn import PdnGame, game_from_position, iter_pdn, read_pdn, write_game, write_pdn

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None)
MAX_RANDOM_PLIES = 150
RESULTS = ("1-0", "0-1", "1/2-1/2", "*")


def _random_play(size: int, seed: int, plies: int, start: Position | None = None) -> Position:
    """The position after up to ``plies`` uniformly random moves (fewer if the game ends)."""
    rng = random.Random(seed)
    pos = start.copy() if start is not None else Position(size)
    for _ in range(plies):
        moves = pos.legal_moves()
        if not moves:
            break
        pos.play(rng.choice(moves))
    return pos


# --- FEN -----------------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(
    size=st.sampled_from([8, 6]),
    seed=st.integers(0, 2**32 - 1),
    plies=st.integers(0, MAX_RANDOM_PLIES),
)
def test_fen_round_trips_on_random_play_positions(size: int, seed: int, plies: int) -> None:
    pos = _random_play(size, seed, plies)
    fen = pos.fen()
    again = Position.from_fen(fen, size)
    assert again.fen() == fen
    g, h = pos.game, again.game
    assert (h.black, h.white, h.kings, h.white_to_move) == (
        g.black,
        g.white,
        g.kings,
        g.white_to_move,
    )
    assert h.hash == g.hash
    assert sorted(str(m) for m in again.legal_moves()) == sorted(str(m) for m in pos.legal_moves())


def test_fen_accepts_ranges_spaces_and_any_field_order() -> None:
    start = Position().fen()
    assert Position.from_fen("B:W21-32:B1-12").fen() == start
    assert Position.from_fen(" b : b1-12 : w21-32 . ").fen() == start
    setup = parse_fen("W:WK5,30:B1,K29")
    assert setup.white_to_move
    assert setup.white == (1 << 4) | (1 << 29)
    assert setup.black == (1 << 0) | (1 << 28)
    assert setup.kings == (1 << 4) | (1 << 28)


@pytest.mark.parametrize(
    ("fen", "size", "problem"),
    [
        ("X:W21:B1", 8, "turn must be 'B' or 'W'"),
        ("B:W21", 8, "expected three ':'-separated fields"),
        ("B:W21:B1:B2", 8, "expected three ':'-separated fields"),
        ("", 8, "expected three ':'-separated fields"),
        ("B:W21:W22", 8, "colour 'W' appears twice"),
        ("B:Q21:B1", 8, "must start with 'W' or 'B'"),
        ("B:W33:B1", 8, "square 33 out of range 1-32"),
        ("B:W21:B0", 8, "square 0 out of range 1-32"),
        ("B:W19:B1", 6, "square 19 out of range 1-18"),
        ("B:W1:B1", 8, "square 1 is given twice"),
        ("B:Wfoo:B1", 8, "bad square 'foo'"),
        ("B:W5-3:B1", 8, "bad range '5-3'"),
        ("B:W21:B29", 8, "black man on White's back rank"),
        ("B:W2:B9", 8, "white man on Black's back rank"),
        ("B:W13:B16", 6, "black man on White's back rank"),
    ],
)
def test_malformed_fen_raises_a_value_error_naming_the_problem(
    fen: str, size: int, problem: str
) -> None:
    with pytest.raises(ValueError) as info:
        Position.from_fen(fen, size)
    message = str(info.value)
    assert problem in message
    assert repr(fen) in message  # the whole FEN is quoted, so the user sees where


def test_kings_may_stand_on_any_back_rank() -> None:
    assert Position.from_fen("B:WK2:BK29").fen() == "B:WK2:BK29"


def test_an_unsupported_board_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="board size"):
        Position(size=10)
    with pytest.raises(ValueError, match="board size"):
        Position.from_fen("B:W21:B1", size=7)


# --- moves -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "text", "problem"),
    [
        (8, "11-40", "squares must be 1-32"),
        (8, "0-4", "squares must be 1-32"),
        (6, "4-19", "squares must be 1-18"),
        (8, "ab-cd", "malformed move 'ab-cd'"),
        (8, "11-14", "illegal move '11-14'"),  # not a diagonal neighbour
        (8, "11x18", "illegal move '11x18'"),  # nothing to capture
        (8, "22-18", "illegal move '22-18'"),  # White's man, Black to move
    ],
)
def test_a_bad_move_raises_a_value_error_naming_it(size: int, text: str, problem: str) -> None:
    pos = Position(size)
    with pytest.raises(ValueError) as info:
        pos.play(text)
    assert problem in str(info.value)
    assert repr(text) in str(info.value)
    assert pos.fen() == Position(size).fen()  # nothing was played


def test_a_capture_may_be_written_without_its_intermediate_squares() -> None:
    pos = Position.from_fen("B:W15,23,24:B10")
    assert str(pos.parse_move("10x26")) == "10x19x26"
    assert str(pos.parse_move("10:19:28".replace(":", "x"))) == "10x19x28"
    assert str(pos.parse_move("10x19x28!")) == "10x19x28"


def test_an_ambiguous_short_capture_is_rejected() -> None:
    # 10x26 could jump 14 then 22, or 15 then 23: different pieces taken.
    pos = Position.from_fen("B:W14,15,22,23:B10")
    with pytest.raises(ValueError, match="ambiguous move '10x26'"):
        pos.parse_move("10x26")
    assert str(pos.parse_move("10x17x26")) == "10x17x26"


def test_a_capture_written_in_full_is_not_read_as_a_longer_one_through_its_squares() -> None:
    # The king on 30 can take 26 and 27 (30x23x32), or four pieces on a ring that passes
    # through 23 to end on 32 (30x21x14x23x32): the full path of the short one names it alone.
    pos = Position.from_fen("B:W17,18,25,26,27,28:B1,2,7,9,10,11,12,K30")
    legal = {str(m) for m in pos.legal_moves()}
    assert {"30x23x32", "30x21x14x23x32"} <= legal
    assert str(pos.parse_move("30x23x32")) == "30x23x32"
    assert str(pos.parse_move("30x21x14x23x32")) == "30x21x14x23x32"
    with pytest.raises(ValueError, match="ambiguous move '30x32'"):
        pos.parse_move("30x32")
    # What the game writer emits reads back as the same move.
    for move in pos.legal_moves():
        assert pos.parse_move(str(move)) == move


# --- PDN -------------------------------------------------------------------------------------


def _illegal_pdn(second_move: str) -> str:
    return f"""[Event "First"]
1. 11-15 24-20 1-0

[Event "Club final"]
[Black "Ann"]
[White "Bob"]
1. 11-15 24-20 2. 8-11 {second_move} 3. 15-19 *
"""


def test_an_illegal_move_in_a_pdn_names_the_game_the_move_number_and_the_text() -> None:
    with pytest.raises(ValueError) as info:
        read_pdn(_illegal_pdn("27-22"))
    message = str(info.value)
    for part in ("game 2", "Club final", "Ann", "Bob", "move 2...", "'27-22'", "illegal move"):
        assert part in message, (part, message)


def test_an_unknown_square_in_a_pdn_names_the_game_the_move_number_and_the_text() -> None:
    with pytest.raises(ValueError) as info:
        read_pdn(_illegal_pdn("22-40"))
    message = str(info.value)
    for part in ("game 2", "Club final", "move 2...", "'22-40'", "squares must be 1-32"):
        assert part in message, (part, message)


def test_garbage_in_movetext_is_reported_with_its_game() -> None:
    with pytest.raises(ValueError, match=r"game 2, .*unexpected text 'hello'"):
        read_pdn(_illegal_pdn("hello"))


def test_a_bad_fen_tag_is_reported_with_its_game() -> None:
    with pytest.raises(ValueError, match=r"game 1, .*bad \[FEN\] tag.*bad square 'x'"):
        read_pdn('[SetUp "1"]\n[FEN "W:W21:Bx"]\n1... 21-17 *\n')


def test_an_illegal_move_from_a_set_up_position_names_the_move_number() -> None:
    text = '[Event "Study"]\n[SetUp "1"]\n[FEN "W:W21:B1"]\n1... 21-17 2. 1-15 *\n'
    with pytest.raises(ValueError) as info:
        read_pdn(text)
    message = str(info.value)
    for part in ("game 1", "Study", "move 2 ", "'1-15'"):
        assert part in message, (part, message)


def test_replaying_an_unvalidated_game_reports_the_move() -> None:
    game = PdnGame(tags={"Event": "Typed in"}, moves=["11-15", "11-16"])
    with pytest.raises(ValueError, match=r"Typed in.*move 1\.\.\..*illegal move '11-16'"):
        game.replay()


def _random_game(
    size: int, seed: int, plies: int, start: Position | None = None
) -> tuple[Position, list[str]]:
    rng = random.Random(seed)
    first = start.copy() if start is not None else Position(size)
    pos = first.copy()
    moves = []
    for _ in range(plies):
        legal = pos.legal_moves()
        if not legal or pos.is_over():
            break
        moves.append(str(pos.play(rng.choice(legal))))
    return first, moves


@PROPERTY_SETTINGS
@given(
    size=st.sampled_from([8, 6]),
    seed=st.integers(0, 2**32 - 1),
    plies=st.integers(0, MAX_RANDOM_PLIES),
    set_up_plies=st.integers(0, 40),
    result=st.sampled_from(RESULTS),
    event=st.text(
        alphabet=st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="\\"),
        max_size=30,
    ),
)
def test_pdn_round_trips_random_games(
    size: int, seed: int, plies: int, set_up_plies: int, result: str, event: str
) -> None:
    # From the start, or from a random set-up position (either side to move).
    start = _random_play(size, seed + 1, set_up_plies) if set_up_plies else None
    first, moves = _random_game(size, seed, plies, start)
    game = game_from_position(first, moves, result, {"Event": event, "Black": "B. Lack"})
    text = write_pdn([game])
    (again,) = read_pdn(text, size=size)
    assert again.moves == moves
    assert again.result == result
    assert again.tags == {**game.tags, "Result": result}
    assert again.replay().fen() == game.replay().fen()
    assert (again.fen is None) == (set_up_plies == 0)


def test_a_set_up_game_with_white_to_move_round_trips() -> None:
    start = Position.from_fen("W:WK14,K23:B6,10,19")
    first, moves = _random_game(8, 5, 12, start)
    assert moves[:2] == ["23x16", "10x17"]
    game = game_from_position(first, moves, "*", {"Event": "Set-up"})
    assert game.tags["SetUp"] == "1"
    assert game.tags["FEN"] == "W:WK14,K23:B6,10,19"
    text = write_game(game)
    assert "1... 23x16 2. 10x17" in text
    (again,) = read_pdn(text)
    assert again.moves == moves
    assert again.fen == "W:WK14,K23:B6,10,19"
    assert again.start_white()


def test_tag_values_with_quotes_and_backslashes_round_trip() -> None:
    tags = {"Event": 'The "Open"', "Site": "C:\\games\\club", "Annotator": 'a\\"b'}
    game = PdnGame(tags=dict(tags), moves=["11-15"], result="1-0")
    (again,) = read_pdn(write_pdn([game]))
    assert again.tags == {**tags, "Result": "1-0"}


def test_comments_variations_and_nags_leave_the_main_line_alone() -> None:
    text = """
[Event "Annotated"]
[Black "Ann"]
[White "Bob"]
{A comment before the first move.}
1. 11-15 {the Old Fourteenth? (not quite)} 23-19 $1
2. 8-11! (2. 9-14 {a side line} 22-17 (2... 22-18 ({nested} 26-23)) 5-9) 22-17?!
; a line comment with 1. 9-13 in it
3. 4-8 $14 17-13 3... 15-18 (3... 9-14) 1/2-1/2
"""
    (game,) = read_pdn(text)
    assert game.moves == ["11-15", "23-19", "8-11", "22-17", "4-8", "17-13", "15-18"]
    assert game.result == "1/2-1/2"
    assert game.tags == {"Event": "Annotated", "Black": "Ann", "White": "Bob", "Result": "1/2-1/2"}


def test_a_collection_of_several_games_is_read_in_order() -> None:
    games = []
    for i, (seed, result) in enumerate(zip((1, 2, 3, 4), RESULTS, strict=True)):
        start = Position.from_fen("W:W21-32:B1-12") if i == 2 else None
        first, moves = _random_game(8, seed, 30 + 10 * i, start)
        games.append(game_from_position(first, moves, result, {"Event": f"Game {i + 1}"}))
    text = write_pdn(games)
    read = read_pdn(text)
    assert [g.tags["Event"] for g in read] == ["Game 1", "Game 2", "Game 3", "Game 4"]
    assert [g.moves for g in read] == [g.moves for g in games]
    assert [g.result for g in read] == list(RESULTS)
    white_first = Position.from_fen("W:W21-32:B1-12").fen()
    assert [g.fen for g in read] == [None, None, white_first, None]
    assert [g.tags["Event"] for g in iter_pdn(text, replay=False)] == [
        g.tags["Event"] for g in read
    ]


def test_results_in_the_two_point_style_and_a_missing_result() -> None:
    text = '[Event "A"]\n1. 11-15 2-0\n[Event "B"]\n1. 11-15 24-20 0-2\n[Event "C"]\n1. 9-13 1-1\n'
    read = read_pdn(text)
    assert [g.result for g in read] == ["1-0", "0-1", "1/2-1/2"]
    no_result = read_pdn('[Event "A"]\n1. 11-15 24-20\n[Event "B"]\n1. 9-13 *\n')
    assert [g.moves for g in no_result] == [["11-15", "24-20"], ["9-13"]]
    assert [g.result for g in no_result] == ["*", "*"]


def test_games_on_the_six_by_six_board_round_trip() -> None:
    first, moves = _random_game(6, 9, 60)
    assert len(moves) > 5
    game = game_from_position(first, moves, "*", {"Event": "Small"})
    (again,) = read_pdn(write_pdn([game]), size=6)
    assert again.moves == moves
    assert again.replay().fen() == game.replay().fen()
