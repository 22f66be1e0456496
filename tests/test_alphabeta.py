"""The alpha-beta baseline: known shots, a known blunder, forced wins with exact distances,
rules-draws inside the search, determinism, and the Python players over it.

Every position is given as a FEN and drawn as a diagram; each test first checks that the diagram
is what the FEN says, so the picture in the test cannot drift from the position searched.
"""

from __future__ import annotations

import random
import textwrap

import pytest

from evaluation.players.alphabeta import (
    MATE_SCORE,
    MATE_THRESHOLD,
    EvalWeights,
    MinimaxPlayer,
    alphabeta,
    eval_weights,
    weights_dict,
)
from evaluation.players.base import RandomPlayer
from evaluation.players.make import make_player
from game import Position, _core


def position(fen: str, picture: str, size: int = 8) -> Position:
    """The position of ``fen``, after checking that its diagram is ``picture``."""
    pos = Position.from_fen(fen, size)
    assert textwrap.dedent(str(pos)).startswith(textwrap.dedent(picture).strip("\n")), str(pos)
    return pos


def mover_wins_within(game: _core.Game, plies: int) -> bool:
    """Plain minimax (no pruning, no evaluation): can the mover leave the opponent without a
    move within ``plies`` plies? An independent check of the search's mate distances."""
    if plies <= 0:
        return False
    for move in game.legal_moves():
        game.make(move)
        won = mover_loses_within(game, plies - 1)
        game.undo()
        if won:
            return True
    return False


def mover_loses_within(game: _core.Game, plies: int) -> bool:
    moves = game.legal_moves()
    if not moves:
        return True
    if game.result() != 0 or plies <= 0:
        return False
    for move in moves:
        game.make(move)
        escaped = not mover_wins_within(game, plies - 1)
        game.undo()
        if escaped:
            return False
    return True


def static_choice(pos: Position) -> str:
    """The move a one-ply look with the evaluation alone (no search, no quiescence) prefers."""
    best, best_score = None, None
    for move in pos.legal_moves():
        pos.game.make(move)
        score = -_core.evaluate(pos.game)
        pos.game.undo()
        if best_score is None or score > best_score:
            best, best_score = str(move), score
    return best


# Black to move: 14-17 gives a man, 21x14 is forced (22x13 is blocked, 7 stops a double jump)
# and 10x17x26 takes two back; the man on 26 then crowns.
SHOT_FEN = "B:W21,22,24,28,32:B1,7,10,13,14"
SHOT = """
  +-----------------+
  |   b   .   .   . |   1-4
  | .   .   b   .   |   5-8
  |   .   b   .   . |   9-12
  | b   b   .   .   |  13-16
  |   .   .   .   . |  17-20
  | w   w   .   w   |  21-24
  |   .   .   .   w |  25-28
  | .   .   .   w   |  29-32
  +-----------------+
"""


@pytest.mark.parametrize("depth", [1, 3, 6, 9])
def test_finds_the_two_for_one_shot(depth: int) -> None:
    pos = position(SHOT_FEN, SHOT)
    assert static_choice(pos) != "14-17"  # the evaluation alone does not see it
    result = alphabeta(pos, depth=depth)
    assert str(result.move) == "14-17"
    assert [str(m) for m in result.pv[:3]] == ["14-17", "21x14", "10x17x26"]
    assert 100 <= result.score < MATE_THRESHOLD  # a man up, and no forced win yet


# Black to move, men even. 12-16 (what the evaluation alone prefers: a man to the centre) loses
# to 19x12x3, a double jump that crowns; 10-15 loses a man to 19x10. 2-6 holds.
BLUNDER_FEN = "B:W18,19,28,29,30,31,32:B1,2,4,8,10,11,12"
BLUNDER = """
  +-----------------+
  |   b   b   .   b |   1-4
  | .   .   .   b   |   5-8
  |   .   b   b   b |   9-12
  | .   .   .   .   |  13-16
  |   .   w   w   . |  17-20
  | .   .   .   .   |  21-24
  |   .   .   .   w |  25-28
  | w   w   w   w   |  29-32
  +-----------------+
"""


@pytest.mark.parametrize("depth", [1, 4, 8])
def test_avoids_the_blunder(depth: int) -> None:
    pos = position(BLUNDER_FEN, BLUNDER)
    assert static_choice(pos) == "12-16"
    chosen = alphabeta(pos, depth=depth)
    assert str(chosen.move) not in {"12-16", "10-15"}
    assert abs(chosen.score) < 50  # even
    for blunder, reply in (("12-16", "19x12x3"), ("10-15", "19x10")):
        after = pos.copy()
        after.play(blunder)
        punished = alphabeta(after, depth=8)
        assert str(punished.move) == reply and punished.score >= 100  # White is a man up


# Black to move wins by crowning first: 26-30 or 26-31, then the king and the man on 22 trap and
# take White's last man in 5 plies. 22-25 (the man race a shallow search likes) does not win.
RACE_FEN = "B:W32:B22,26"
RACE = """
  +-----------------+
  |   .   .   .   . |   1-4
  | .   .   .   .   |   5-8
  |   .   .   .   . |   9-12
  | .   .   .   .   |  13-16
  |   .   .   .   . |  17-20
  | .   b   .   .   |  21-24
  |   .   b   .   . |  25-28
  | .   .   .   w   |  29-32
  +-----------------+
"""


def test_forced_win_to_the_king_row() -> None:
    pos = position(RACE_FEN, RACE)
    assert not mover_wins_within(pos.game, 4)
    assert mover_wins_within(pos.game, 5)
    assert str(alphabeta(pos, depth=2).move) == "22-25"  # too shallow to see the win
    result = alphabeta(pos, depth=8)
    assert str(result.move) in {"26-30", "26-31"}
    assert result.score == MATE_SCORE - 5
    assert len(result.pv) == 5 and result.pv[-1].is_capture


# Black to move mates in 9 plies: 26-30 crowns, and the new king hunts White's man on 31 while
# the man on 12 waits (with only one White piece, taking it ends the game).
MATE_FEN = "B:W31:B12,26"
MATE = """
  +-----------------+
  |   .   .   .   . |   1-4
  | .   .   .   .   |   5-8
  |   .   .   .   b |   9-12
  | .   .   .   .   |  13-16
  |   .   .   .   . |  17-20
  | .   .   .   .   |  21-24
  |   .   b   .   . |  25-28
  | .   .   w   .   |  29-32
  +-----------------+
"""


def test_mate_in_n_has_the_exact_distance_and_sign() -> None:
    pos = position(MATE_FEN, MATE)
    distance = next(n for n in range(1, 12) if mover_wins_within(pos.game, n))
    assert distance == 9
    winner = alphabeta(pos, depth=12)
    assert winner.score == MATE_SCORE - distance  # positive: the mover wins
    assert str(winner.move) == "26-30"
    pos.play(winner.move)
    loser = alphabeta(pos, depth=12)
    assert loser.score == -(MATE_SCORE - (distance - 1))  # negative: the mover loses


def test_lost_and_finished_positions() -> None:
    pos = Position.from_fen("W:W29:B25,22")  # White's only man is blocked: no legal move
    assert pos.result() == "1-0"
    result = alphabeta(pos, depth=3)
    assert result.move is None and result.depth == 0
    with pytest.raises(ValueError, match="game is over"):
        MinimaxPlayer(depth=2).choose(pos)


def test_king_capture_loop_keeps_the_king() -> None:
    # White's king on 10 takes four men in a loop and lands back on 10 (10x17x26x19x10); the
    # search must not lose the king on the way (a lone Black man on 1 remains).
    pos = Position.from_fen("W:WK10:B1,14,15,22,23")
    result = alphabeta(pos, depth=3)
    assert str(result.move) in {"10x17x26x19x10", "10x19x26x17x10"}
    assert 0 < result.score < MATE_THRESHOLD


def test_repetition_is_a_draw_inside_the_search() -> None:
    # Black's lone king against two: lost, unless the game's history offers a threefold
    # repetition. After the moves below, 1-5 recreates a position seen twice already.
    fen = "B:WK25,K32:BK1"
    assert alphabeta(Position.from_fen(fen), depth=6).score < -100
    pos = Position.from_fen(fen)
    for move in ("1-5", "32-28", "5-9", "28-32", "9-5", "32-28", "5-1", "28-32"):
        pos.play(move)
    assert pos.fen() == fen and pos.game.repetitions() == 2 and pos.result() is None
    result = alphabeta(pos, depth=6)
    assert (str(result.move), result.score) == ("1-5", 0)
    pos.play("1-5")
    assert (pos.result(), pos.end_reason) == ("1/2-1/2", "threefold repetition")


def test_forty_move_rule_draws_inside_the_search() -> None:
    # A king up, but the no-progress counter is one ply from the limit: any king move draws.
    limit = _core.MAX_PLIES_WITHOUT_PROGRESS
    up = _core.Game.from_bitboards(8, 1 << 0 | 1 << 3, 1 << 31, 1 << 0 | 1 << 3 | 1 << 31, False)
    assert alphabeta(up, depth=4).score > 100
    near = _core.Game.from_bitboards(
        8, 1 << 0 | 1 << 3, 1 << 31, 1 << 0 | 1 << 3 | 1 << 31, False, no_progress=limit - 1
    )
    assert alphabeta(near, depth=4).score == 0


def test_ply_cap_draws_inside_the_search() -> None:
    up = Position.from_fen("B:WK32:BK1,K4", max_plies=1)
    assert alphabeta(up, depth=4).score == 0
    assert alphabeta(Position.from_fen("B:WK32:BK1,K4"), depth=4).score > 100


def test_fixed_depth_is_deterministic() -> None:
    pos = Position()
    for move in ("11-15", "23-19", "8-11", "22-17"):
        pos.play(move)

    def signature(result: _core.SearchResult) -> tuple:
        return result.nodes, result.score, result.depth, [str(m) for m in result.pv]

    first = signature(alphabeta(pos, depth=7))
    alphabeta(Position.from_fen(SHOT_FEN), depth=9)  # fills the table and the history tables
    assert signature(alphabeta(pos, depth=7)) == first
    assert first[2] == 7 and first[0] > 1000


def test_time_limit_returns_a_legal_move() -> None:
    pos = Position()
    result = alphabeta(pos, time_ms=30)
    assert result.move in pos.legal_moves() and result.depth >= 1


def test_six_by_six_board() -> None:
    pos = Position(size=6)
    result = alphabeta(pos, depth=6)
    assert result.move in pos.legal_moves()
    assert result.depth == 6 and abs(result.score) < MATE_THRESHOLD
    # Three kings against a man on 6x6: the man is hunted down in exactly 5 plies.
    ending = Position.from_fen("B:W18:BK1,K2,K3", size=6)
    assert not mover_wins_within(ending.game, 4) and mover_wins_within(ending.game, 5)
    assert alphabeta(ending, depth=10).score == MATE_SCORE - 5


def test_weights_change_the_evaluation() -> None:
    pos = Position.from_fen("B:WK29:B1")  # a man against a king
    base = _core.evaluate(pos.game)
    assert base == _core.evaluate(pos.game, EvalWeights())
    heavier = _core.evaluate(pos.game, eval_weights({"king": 200}))
    assert heavier == base - 70  # the opponent's king is worth 70 more
    with pytest.raises(ValueError, match="unknown evaluation weight"):
        eval_weights({"queen": 900})
    with pytest.raises(ValueError, match="must be an integer"):
        eval_weights({"king": 1.5})


def test_bad_limits_raise() -> None:
    with pytest.raises(ValueError, match="depth or a time limit"):
        _core.alphabeta_search(Position().game)
    with pytest.raises(ValueError, match="exactly one of depth or time_ms"):
        MinimaxPlayer()
    mid = Position.from_fen("B:W14,22:B9")  # 9x18 continues over 22: a multi-jump
    mid.game.step(mid.game.legal_actions()[0])
    assert mid.game.mid_jump
    with pytest.raises(ValueError, match="multi-jump"):
        alphabeta(mid.game, depth=2)


def test_players_from_specs() -> None:
    assert make_player("minimax:6").name == "minimax:6"
    assert make_player("minimax:t250").time_ms == 250
    random_player = make_player("random:5")
    assert isinstance(random_player, RandomPlayer) and random_player.seed == 5
    pos = Position()
    first = [str(random_player.choose(pos)) for _ in range(5)]
    random_player.reset()
    assert [str(random_player.choose(pos)) for _ in range(5)] == first
    minimax = make_player("minimax:4", weights={"king": 150})
    assert minimax.weights.king == 150
    assert minimax.choose(pos) in pos.legal_moves() and minimax.last.depth == 4


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("alphazero", "unknown player spec 'alphazero'"),
        ("runs/x/ckpt.safetensors", "unknown player spec 'runs/x/ckpt.safetensors'"),
        ("minimax:", "malformed player spec 'minimax:'"),
        ("minimax:0", "player spec 'minimax:0'"),
        ("minimax:99", "player spec 'minimax:99'"),
        ("random:x", "malformed player spec 'random:x'"),
        ("", "non-empty"),
    ],
)
def test_unknown_player_spec_raises(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        make_player(spec)


def reference_evaluation(pos: Position, weights: dict[str, int]) -> int:
    """The evaluation recomputed square by square from its definition (alphabeta.h)."""
    g, size = pos.game, pos.size
    half = size // 2

    def where(square: int) -> tuple[int, int]:
        row, k = divmod(square - 1, half)
        return row, 2 * k + (1 if row % 2 == 0 else 0)

    pieces = {}  # (row, col) -> (colour 0 Black / 1 White, king)
    for square in range(1, size * size // 2 + 1):
        bit = 1 << (square - 1)
        if (g.black | g.white) & bit:
            pieces[where(square)] = (0 if g.black & bit else 1, bool(g.kings & bit))
    totals = [0, 0]
    for (row, col), (colour, king) in pieces.items():
        ahead = 1 if colour == 0 else -1  # Black's men move down the board (higher rows)
        s = weights["king"] if king else weights["man"]
        if 2 <= row <= size - 3 and 2 <= col <= size - 3:
            s += weights["centre"] + (weights["king_centre"] if king else 0)
        for dr in (ahead, -ahead) if king else (ahead,):
            for dc in (-1, 1):
                r, c = row + dr, col + dc
                if 0 <= r < size and 0 <= c < size and (r, c) not in pieces:
                    s += weights["mobility"]
        if not king:
            s += weights["advancement"] * (row if colour == 0 else size - 1 - row)
            if row == (0 if colour == 0 else size - 1):
                s += weights["back_rank"]
            blocked = any(
                other == 1 - colour and (r - row) * ahead > 0 and abs(c - col) <= abs(r - row)
                for (r, c), (other, _) in pieces.items()
            )
            if not blocked:
                s += weights["runaway"]
        totals[colour] += s
    mover = 1 if g.white_to_move else 0
    return totals[mover] - totals[1 - mover]


@pytest.mark.parametrize("size", [8, 6])
def test_evaluation_matches_its_definition(size: int) -> None:
    # Distinct weights, so that a feature counted under the wrong weight shows up.
    weights = {
        "man": 1000,
        "king": 1700,
        "advancement": 3,
        "back_rank": 11,
        "centre": 29,
        "mobility": 5,
        "runaway": 97,
        "king_centre": 41,
    }
    rng = random.Random(size)
    checked = 0
    for _ in range(20):
        pos = Position(size)
        while pos.result() is None and pos.ply < 120:
            for w in (weights, weights_dict(EvalWeights())):
                assert _core.evaluate(pos.game, eval_weights(w)) == reference_evaluation(pos, w)
            checked += 1
            pos.play(rng.choice(pos.legal_moves()))
    assert checked > 500
