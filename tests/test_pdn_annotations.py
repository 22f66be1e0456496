"""Annotated PDN: comments, nested variations, NAGs and move marks are read, kept and written
back (open-then-save gives the same games, a file in another program's style included), and a
collection with bad games reads every good one and names each bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from game.pdn import PdnError, read_pdn, write_pdn
from game.pdn_lines import PdnMove, check_line, line_from_json, line_to_json
from game.position import Position

DATA = Path(__file__).resolve().parent / "data"


def test_an_annotated_file_of_another_program_reads_into_a_tree() -> None:
    first, second = read_pdn((DATA / "annotated_checkerboard.pdn").read_text())
    assert first.moves[:6] == ["11-15", "23-19", "8-11", "22-17", "4-8", "17-13"]
    line = first.line
    assert line[0].before == "Notes by the club. The Old Fourteenth."
    assert line[4].comment == "The Old Fourteenth proper."
    (side,) = line[4].variations  # 3. 9-13 instead of 3. 4-8, from the same position
    assert [m.move for m in side] == ["9-13", "17-14", "10x17", "21x14"]
    assert side[0].nags == [2] and side[0].comment == "loses time"
    assert [[m.move for m in v] for v in side[1].variations] == [["25-22"]]  # nested
    assert side[1].variations[0][0].comment == "a quieter line"
    assert line[6].mark == "!" and line[7].nags == [1] and line[8].mark == "?!"
    assert line[12].mark == "!?"
    assert second.moves[3] == "24-19"
    assert second.line[2].comment == "a line comment from another program"  # ";" comment
    assert second.line[4].mark == "??" and second.line[4].nags == [4]
    assert [m.move for m in second.line[3].variations[0]] == ["24-20", "11-16", "20x11", "8x15x22"]
    assert first.warnings == [] and second.warnings == []


def test_open_then_save_gives_the_same_games() -> None:
    text = (DATA / "annotated_checkerboard.pdn").read_text()
    games = read_pdn(text)
    written = write_pdn(games)
    again = read_pdn(written)
    assert again == games  # tags, moves, result and the whole annotated tree
    assert [line_to_json(g.line) for g in again] == [line_to_json(g.line) for g in games]
    assert write_pdn(again) == written  # and saving it again changes nothing
    assert "(3. 9-13 $2 {loses time} 3... 17-14 (3... 25-22" in written.replace("\n", " ")
    assert "4. 15-18! 24-20 $1 5. 11-15?!" in written.replace("\n", " ")


def test_a_game_of_plain_moves_has_no_tree_and_writes_as_before() -> None:
    (game,) = read_pdn("1. 11-15 23-19 2. 8-11 *")
    assert game.line == []
    assert write_pdn([game]) == '[Result "*"]\n1. 11-15 23-19 2. 8-11 *\n'


def test_an_illegal_side_line_costs_the_side_line_and_says_so() -> None:
    (game,) = read_pdn("1. 11-15 (1. 22-18 9-13) 23-19 (1... 24-20 {ok}) *")
    assert game.moves == ["11-15", "23-19"]
    assert game.line[0].variations == [[]]
    assert [m.move for m in game.line[1].variations[0]] == ["24-20"]
    (warning,) = game.warnings
    assert "variation, move 1 ('22-18'): illegal move" in warning


def test_the_tree_travels_as_json_and_every_move_is_checked() -> None:
    (game,) = read_pdn((DATA / "annotated_checkerboard.pdn").read_text().split("\n\n")[0])
    tree = line_from_json(line_to_json(game.line))
    assert tree == game.line
    assert check_line(Position(), tree) == game.moves
    tree[4].variations[0][1].move = "17-15"
    with pytest.raises(ValueError, match=r"variation 1 of move 3 4-8, move 3\.\.\. \('17-15'\)"):
        check_line(Position(), tree)
    with pytest.raises(ValueError, match=r"mark '\?\?\?' is not one of"):
        check_line(Position(), [PdnMove("11-15", mark="???")])
    with pytest.raises(ValueError, match="cannot hold '}'"):
        check_line(Position(), [PdnMove("11-15", comment="a } b")])
    with pytest.raises(ValueError, match=r"line\[0\]: unknown field 'x'"):
        line_from_json([{"move": "11-15", "x": 1}])


BAD_COLLECTION = """
[Event "one"][Black "A"][White "B"]
1. 11-15 23-19 2. 8-11 22-17 *

[Event "two"][Black "C"][White "D"]
1. 11-15 23-19 2. 8-11 22-18 3. 15x22 25x18 4. 11-16 30-25 5. 16-19 *

[Event "three"][Black "E"][White "F"]
1. 10x14 22x18 *

[Event "four"][Black "G"][White "H"]
[FEN "B:W99:B1"]
1. 1-6 *

[Event "five"][Black "I"][White "J"]
1. 9-13 (1. 9-14) 22-18 1/2-1/2

[Event "six"][Black "K"][White "L"]
1. 11-15 24-20 2. 15-19 22-18 0-1
"""


def test_a_collection_with_bad_games_reads_every_good_one_and_names_the_bad() -> None:
    errors: list[PdnError] = []
    games = read_pdn(BAD_COLLECTION, errors=errors)
    assert [g.tags["Event"] for g in games] == ["one", "three", "five"]
    assert games[1].moves == ["10-14", "22-18"]  # "x" for plain moves: read, with a warning
    assert len(games[1].warnings) == 2
    assert [(e.number, e.names) for e in errors] == [
        (2, "game 'two' (C - D)"),
        (4, "game 'four' (G - H)"),
        (6, "game 'six' (K - L)"),
    ]
    assert errors[0].move == "move 5 ('16-19')"
    assert "bad [FEN] tag" in errors[1].message and errors[1].move is None
    assert errors[2].move == "move 2... ('22-18')"
    with pytest.raises(ValueError, match="game 2, game 'two'"):  # without a list: the old way
        read_pdn(BAD_COLLECTION)


def test_a_long_collection_does_not_stop_at_its_first_bad_game() -> None:
    good = '[Event "g{}"]\n1. 11-15 23-19 *\n'
    bad = '[Event "b{}"]\n1. 11-15 22-18 2. 15-19 *\n'
    text = "".join((bad if k % 100 == 7 else good).format(k) for k in range(724))
    errors: list[PdnError] = []
    games = read_pdn(text, errors=errors)
    assert len(games) == 724 - 8 and len(errors) == 8
    assert [e.number for e in errors] == [k + 1 for k in range(724) if k % 100 == 7]
