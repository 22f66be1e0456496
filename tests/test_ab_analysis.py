"""The board's default analysis: the alpha-beta with the learned evaluation, multi-PV.

Known best moves found by the default analysis (``analysis.ab_ms`` per position):

- the 1841 Moorhead-Wyllie shot 21-17, read from the OCA archive by the players' names (the
  network at 200 visits called it a mistake and recommended 23-19);
- shots from 19th-century games of the archive where minimax:12 (the hand-written evaluation),
  ab+nn:12 and the game's winner all played the same move;
- database endings where exactly one move keeps the win (4-piece database built for the module).
"""

from __future__ import annotations

import pytest

from evaluation.players.alphabeta import MATE_SCORE, alphabeta
from game.archive import read_archive
from game.egdb import LOSS, WIN, EndgameDatabase
from game.egdb.build import build
from game.pdn import iter_pdn
from game.position import Position
from play.ab_analysis import (
    AbBudget,
    analyse_ab,
    expected_score,
    learned_evaluation,
    proven,
)
from play.settings import load_settings

DEFAULT_MS = int(load_settings()["analysis"]["ab_ms"])
# The shots are searched to a fixed depth, so that the test does not depend on the machine's
# speed: the depth the default 300 ms reached on a 2-core machine at a load average of 12 was 7
# to 10 for these positions. Each is found at every depth from 3 to 10.
SHOT_DEPTH = 7
# The endings get a generous time: their distances come from a search without the database,
# which a loaded machine would cut short at 300 ms (the longest, 29 plies, took 54 ms quietly).
ENDING_MS = 3000

# (FEN, the best move, where it is from): moves that minimax:12 (the hand-written evaluation),
# ab+nn:12 and the player in the game all chose.
# Found by scanning the archive's first games for a quiet move the opponent must answer with a
# capture, after which the mover takes two or more pieces (a shot), kept where all three agree,
# the analysis' second move is at least two men (200) behind at 300 ms, and the analysis finds
# it at every depth from 3 to 10 (Anderson-Wyllie 1844's 14-18 was dropped: not at depth 8).
SHOTS = [
    # Moorhead-Wyllie 1841, one move after 21-17 13x22: White breaks through with 30-26.
    ("W:W8,12,23,30,31,32:B3,6,9,14,18,20,22,28", "30-26", "Moorhead-Wyllie 1841"),
    ("B:WK4,13,19,21,24,27,28,30,31:B2,3,5,7,12,18,22", "3-8", "Hay-Wyllie 1842"),
    ("W:W18,19,20,23,27,28:B3,8,9,10,11,12", "18-15", "Wyllie-Anderson 1847"),
    ("B:W14,15,16,20,28,30,32:B1,2,3,7,13,19", "7-10", "Wyllie-Anderson 1847"),
    ("B:W10,14,17,20,23,25,27,29,31,32:B3,5,7,8,11,12,13,18,22", "5-9", "Anderson-Wyllie 1847"),
    ("W:W5,14,20,27,29,32:B3,8,12,13,15,K30,K31", "32-28", "Anderson-Wyllie 1847"),
    ("B:W5,10,17,19,23,25,27,29,31:B1,3,8,12,13,16,18,22", "8-11", "Anderson-Wyllie 1847"),
    ("W:W19,21,23,27,29,30,31:B1,8,10,11,12,13,14,18,22", "21-17", "Anderson-Wyllie 1847"),
    ("W:W17,18,21,26,31:B6,8,9,10,19,24", "17-14", "Wyllie-Anderson 1847"),
    ("B:W14,15,18,19,21,22,23,24,28,30:B1,3,5,6,7,8,12,13,16", "6-10", "Anderson-Wyllie 1847"),
]


def moorhead_wyllie() -> tuple[Position, str]:
    """The position before White's 21-17 in Moorhead-Wyllie, Manchester 1841 (OCA archive)."""
    for game in iter_pdn(read_archive()):
        tags = game.tags
        if (
            "Moorhead" in tags.get("Black", "")
            and "Wyllie" in tags.get("White", "")
            and tags.get("Date", "").startswith("1841")
        ):
            pos = game.start()
            for k, move in enumerate(game.moves):
                if move == "21-17" and pos.turn == "W":
                    return pos, game.moves[k - 1]
                pos.play(move)
    raise AssertionError("Moorhead-Wyllie 1841 with White's 21-17 is not in the archive")


def test_the_1841_shot_is_the_best_line_and_23_19_is_not():
    pos, before = moorhead_wyllie()
    assert before == "15-18" and pos.fen() == "W:W8,12,21,23,30,31,32:B3,6,9,13,14,18,20,28"
    a = analyse_ab(pos, AbBudget(ms=DEFAULT_MS), lines=8)
    assert a.move == "21-17" and a.lines[0].line[:2] == ["21-17", "13x22"]
    scores = {line.move: line.score_cp for line in a.lines}
    assert set(scores) == set(a.legal)  # every root move scored, best first
    assert [line.score_cp for line in a.lines] == sorted(scores.values(), reverse=True)
    assert scores["21-17"] - scores["23-19"] >= 100  # a man or more better than 23-19
    assert a.score is not None and a.score > 0.6
    assert all(line.depth == a.depth for line in a.lines)
    # Whatever depth the machine's speed allows in the default time: every one from 3 finds it.
    for depth in range(3, 11):
        assert analyse_ab(pos, AbBudget(depth=depth), lines=2).move == "21-17", depth


@pytest.mark.parametrize(("fen", "best", "where"), SHOTS)
def test_shots_from_real_games_are_found(fen, best, where):
    a = analyse_ab(Position.from_fen(fen), AbBudget(depth=SHOT_DEPTH), lines=2)
    assert a.move == best and a.depth == SHOT_DEPTH, (where, a.lines)
    assert a.lines[0].score_cp - a.lines[1].score_cp >= 100, (where, a.lines)


def test_lines_carry_proven_results_with_their_distance():
    pos = Position.from_fen("B:W6:B1")  # 1x10 takes White's last piece: a win in one ply
    a = analyse_ab(pos, AbBudget(depth=4))
    assert a.move == "1x10" and a.lines[0].result == "win" and a.lines[0].plies == 1
    assert a.score == 1.0
    assert proven(a.lines[0].score_cp) == ("win", 1)


def test_expected_score_uses_the_learned_evaluations_scale():
    _, scale = learned_evaluation()
    assert expected_score(0, scale) == 0.5
    assert expected_score(scale, scale) == pytest.approx(0.731, abs=1e-3)
    assert expected_score(-(10**5), scale) == 0.0


def test_a_stop_keeps_the_last_complete_iteration():
    pos, _ = moorhead_wyllie()
    seen = []
    stops = iter([False] * 40 + [True] * 1000)
    a = analyse_ab(
        pos,
        AbBudget(ms=60_000),
        stop=lambda: next(stops),
        on_iteration=lambda x: seen.append(x.depth),
    )
    assert a.depth == seen[-1] and seen == list(range(2, 2 + len(seen))) and len(seen) >= 3
    assert all(line.depth == a.depth for line in a.lines)


# --- database endings ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> EndgameDatabase:
    folder = tmp_path_factory.mktemp("egdb8")
    build(folder, 8, 4)
    return EndgameDatabase(folder, 8, 4)


# Won for the side to move with exactly one winning move among three or more (every other move
# draws or loses), drawn at random from the 3- and 4-piece database (seed 7); checked below.
ENDINGS = [
    "B:WK31:BK22,27",  # 27-32
    "B:W21,30:B18,24",  # 18-22
    "B:W7,23:BK20,K22",  # 20-16
    "B:WK3,15:BK1,K14",  # 14-10
    "B:W23,26:B7,15",  # 7-10
    "B:WK19:BK4,K12",  # 4-8
    "B:WK20:B12,19",  # 19-23
    "B:W28,29:BK3,15",  # 15-19
    "W:W7,K31:B2,13",  # 7-3
    "W:WK11,K13:B14,K21",  # 11-15
    "W:W6,19:B4,12",  # 6-2
    "W:W6,32:B1",  # 6-2
]


def unique_wins(db: EndgameDatabase, fens: list[str]) -> list[tuple[str, str]]:
    out = []
    for fen in fens:
        pos = Position.from_fen(fen)
        assert db.value(pos) == WIN, fen
        winning = []
        for move in pos.legal_moves():
            child = pos.copy()
            child.play(move)
            if child.is_over() or db.value(child) == LOSS:
                winning.append(str(move))
        assert len(winning) == 1 and len(pos.legal_moves()) >= 3, (fen, winning)
        out.append((fen, winning[0]))
    return out


def test_database_endings_get_the_exact_result_and_the_one_winning_move(db):
    distances = {}
    for fen, best in unique_wins(db, ENDINGS):
        a = analyse_ab(Position.from_fen(fen), AbBudget(ms=ENDING_MS), egdb=db, lines=3)
        assert a.database is not None and a.database["result"] == "win", fen
        assert a.known == "database win" and a.score == 1.0
        assert a.move == best, (fen, a.lines)
        assert a.lines[0].result == "win", (fen, a.lines)  # proven: the database's value
        assert all(line.result != "win" for line in a.lines[1:]), (fen, a.lines)
        # A distance only where a search proved the end of the game: checked by another one.
        if (plies := a.database["distance"]) is not None:
            distances[fen] = plies
            r = alphabeta(Position.from_fen(fen), depth=plies + 1)
            assert r.score == MATE_SCORE - plies, (fen, plies, r)
    # The short ones are known (the win of two kings against one in the corner is 29 plies).
    assert distances["B:WK31:BK22,27"] == 3 and distances["W:W6,32:B1"] == 5
    assert distances["B:WK19:BK4,K12"] == 29
