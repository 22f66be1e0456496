"""The alpha-beta's search switches (``,qs``, ``,asp``, ``,margin``, ``,lmr``, ``,ttkeep``,
``,probcut``, ``,tt=MB``): each keeps the answers of positions with known values (the shots and
forced wins of test_alphabeta, and every win or loss a search proves agrees with the endgame
database), each changes the search it switches (fewer or more nodes at the same depth), and the
ones that promise it (aspiration windows, the table's size, a fresh kept table) give the same move
and score at the same depth as the search without them.
"""

from __future__ import annotations

import random

import pytest

from evaluation.players.alphabeta import MATE_SCORE, MATE_THRESHOLD, MinimaxPlayer, alphabeta
from evaluation.players.make import make_player
from game import Position, _core
from game.egdb import LOSS, WIN, EndgameDatabase, signatures
from game.egdb.build import build
from game.openings import acf_deck
from tests.test_alphabeta import BLUNDER_FEN, MATE_FEN, RACE_FEN, SHOT_FEN

SWITCHES = ["quiescence", "aspiration", "pruning", "lmr", "tt_keep", "probcut"]


def switched(name: str) -> _core.SearchSwitches:
    return _core.SearchSwitches(**{name: True})


def search(pos: Position, depth: int, name: str | None, **options: object) -> _core.SearchResult:
    switches = switched(name) if name else None
    # A kept table gets its own searcher: the shared one holds earlier tests' entries.
    if name == "tt_keep":
        options["searcher"] = _core.AlphaBetaSearcher(16)
    return alphabeta(pos, depth=depth, switches=switches, **options)


@pytest.mark.parametrize("name", SWITCHES)
def test_known_shots_and_forced_wins_keep_their_answers(name: str) -> None:
    for depth in (6, 9):
        shot = search(Position.from_fen(SHOT_FEN), depth, name)
        assert [str(m) for m in shot.pv[:3]] == ["14-17", "21x14", "10x17x26"]
        assert 100 <= shot.score < MATE_THRESHOLD
    blunder = search(Position.from_fen(BLUNDER_FEN), 8, name)
    assert str(blunder.move) not in {"12-16", "10-15"} and abs(blunder.score) < 50
    race = search(Position.from_fen(RACE_FEN), 8, name)
    assert str(race.move) in {"26-30", "26-31"} and race.score == MATE_SCORE - 5
    mate = search(Position.from_fen(MATE_FEN), 12, name)
    assert str(mate.move) == "26-30" and mate.score == MATE_SCORE - 9


@pytest.fixture(scope="module")
def db3(tmp_path_factory) -> EndgameDatabase:
    folder = tmp_path_factory.mktemp("egdb3")
    build(folder, 8, 3)
    return EndgameDatabase(folder, 8, 3)


def database_positions(n: int, seed: int) -> list[Position]:
    """Random positions of up to three pieces, either side to move, the game not over."""
    rng = random.Random(seed)
    sigs = signatures(8, 3)
    out: list[Position] = []
    while len(out) < n:
        sig = rng.choice(sigs)
        black, white, kings = _core.egdb_board_at(
            8, sig, rng.randrange(_core.egdb_index_size(8, sig))
        )
        game = _core.Game.from_bitboards(8, black, white, kings, rng.random() < 0.5)
        pos = Position.from_game(game)
        if not pos.is_over():
            out.append(pos)
    return out


@pytest.mark.parametrize("name", SWITCHES)
def test_proofs_agree_with_the_endgame_database(name: str, db3: EndgameDatabase) -> None:
    """Without the database in the search, every win or loss the search proves is the
    database's value, and it proves as many as the plain search does (less a few a pruning
    switch may miss at this depth); with it, the root's score has the database's sign."""
    plain_proofs = proofs = 0
    for pos in database_positions(200, seed=3):
        value = db3.value(pos)
        result = search(pos, 10, name)
        plain = alphabeta(pos, depth=10)
        if abs(result.score) >= MATE_THRESHOLD:
            proofs += 1
            assert value == (WIN if result.score > 0 else LOSS), (pos.fen(), name, result)
        plain_proofs += abs(plain.score) >= MATE_THRESHOLD
        with_db = search(pos, 4, name, egdb=db3)
        sign = (with_db.score > 0) - (with_db.score < 0)
        assert sign == {WIN: 1, LOSS: -1}.get(value, 0), (pos.fen(), name, with_db)
    assert plain_proofs > 50  # the check has teeth
    assert proofs >= plain_proofs * 0.9


def middle_positions() -> list[Position]:
    """Positions from ballots of the ACF deck continued by a few plies of minimax:4."""
    out = []
    for ballot in (0, 40, 80, 120):
        pos = acf_deck()[ballot].position()
        for _ in range(6 + ballot % 5):
            pos.play(alphabeta(pos, depth=4).move)
        out.append(pos)
    return [Position(), *out]


@pytest.mark.parametrize("depth", [7, 9])
def test_aspiration_and_the_table_keep_the_move_at_the_same_depth(depth: int) -> None:
    for pos in middle_positions():
        plain = alphabeta(pos, depth=depth)
        for result in (
            search(pos, depth, "aspiration"),
            alphabeta(pos, depth=depth, tt_mb=64),  # a larger table
            search(pos, depth, "tt_keep"),  # a fresh kept table
        ):
            assert (result.move, result.score) == (plain.move, plain.score), pos.fen()


@pytest.mark.parametrize("name", SWITCHES)
def test_each_switch_changes_the_search(name: str) -> None:
    """Nodes at the same depth from the same positions: the pruning switches search fewer, the
    quiescence more; a kept table searches fewer the second time it sees a position."""
    plain = switched_nodes = 0
    for pos in middle_positions():
        plain += alphabeta(pos, depth=9).nodes
        if name == "tt_keep":
            searcher = _core.AlphaBetaSearcher(16)
            first = alphabeta(pos, depth=9, switches=switched(name), searcher=searcher)
            again = alphabeta(pos, depth=9, switches=switched(name), searcher=searcher)
            assert again.nodes < first.nodes and first.nodes == alphabeta(pos, depth=9).nodes
            switched_nodes += again.nodes
        else:
            switched_nodes += search(pos, 9, name).nodes
    if name == "quiescence":
        assert switched_nodes > plain
    else:
        assert switched_nodes < plain


def test_specs_name_the_switches() -> None:
    player = make_player("ab+nn:t200,tm,qs,asp,margin,lmr,ttkeep,probcut,tt=64")
    assert isinstance(player, MinimaxPlayer)
    # lmr, margin and probcut are on by default in timed ab+nn players: the name says what
    # differs.
    assert player.name == "ab+nn:t200,tm,qs,asp,ttkeep,tt=64"
    sw = player.switches
    assert (sw.quiescence, sw.aspiration, sw.pruning, sw.lmr, sw.tt_keep, sw.probcut) == (True,) * 6
    assert player.tt_mb == 64 and player._searcher is not None
    assert player._searcher.tt_mb == 64
    other = make_player("minimax:6,ttkeep")
    assert other._searcher is not player._searcher  # never another player's entries
    assert make_player("minimax:6,asp").name == "minimax:6,asp"
    assert (
        make_player("minimax:6").name == "minimax:6" and make_player("minimax:6")._searcher is None
    )
    assert str(make_player("minimax:4,lmr").choose(Position())) in {
        str(m) for m in Position().legal_moves()
    }
    for bad, option in (
        ("minimax:6,fast", "'fast'"),
        ("minimax:6,tt=0", "'tt=0'"),
        ("minimax:6,tt=70000", "'tt=70000'"),
        ("minimax:6,asp=2", "'asp=2'"),
        ("minimax:6,tm", "'tm'"),
    ):
        with pytest.raises(ValueError, match=f"malformed player spec .*option {option}"):
            make_player(bad)


def test_probcut_keeps_to_positions_of_at_least_its_piece_floor() -> None:
    """``,pcpieces=N``: ProbCut only at nodes with N pieces or more. Above the root's piece
    count it never fires (the search is the one without ProbCut, node for node); at 2 (every
    position a search goes on from) it is ProbCut everywhere; at the root's count it fires near
    the root but not below the first captures, a search of its own."""
    pos = Position()
    for _ in range(10):
        pos.play(pos.legal_moves()[0])
    setup = pos.setup()
    pieces = (setup.black | setup.white).bit_count()
    plain = alphabeta(pos, depth=11, switches=_core.SearchSwitches())
    everywhere = alphabeta(pos, depth=11, switches=_core.SearchSwitches(probcut=True))
    floored = alphabeta(
        pos, depth=11, switches=_core.SearchSwitches(probcut=True, probcut_min_pieces=pieces + 1)
    )
    at_count, at_two = (
        alphabeta(pos, depth=11, switches=_core.SearchSwitches(probcut=True, probcut_min_pieces=n))
        for n in (pieces, 2)
    )
    assert everywhere.nodes != plain.nodes
    assert (floored.nodes, floored.score, str(floored.move)) == (
        plain.nodes,
        plain.score,
        str(plain.move),
    )
    assert at_two.nodes == everywhere.nodes
    assert at_count.nodes not in (plain.nodes, everywhere.nodes)
    player = make_player("ab+nn:t200,tm,pcpieces=12")
    assert player.switches.probcut_min_pieces == 12 and player.switches.probcut
    assert player.name == "ab+nn:t200,tm,pcpieces=12"
    assert make_player("ab+nn:t200,tm").switches.probcut_min_pieces == 0
    for bad in ("ab+nn:t200,tm,pcpieces=25", "ab+nn:t200,tm,pcpieces", "ab+nn:t200,pcpieces=-1"):
        with pytest.raises(ValueError, match="malformed player spec"):
            make_player(bad)
    with pytest.raises(ValueError, match="probcut_min_pieces must be >= 0, got -1"):
        _core.SearchSwitches(probcut=True, probcut_min_pieces=-1)
    switches = _core.SearchSwitches(probcut=True)
    with pytest.raises(ValueError, match="probcut_min_pieces must be >= 0, got -3"):
        switches.probcut_min_pieces = -3
    assert switches.probcut_min_pieces == 0


def test_the_winning_switches_are_on_by_default_in_timed_ab_nn_players_only() -> None:
    """Late-move reductions, margin pruning and ProbCut won their equal-time matches
    (docs/results.md); ,lmr=0, ,margin=0 and ,probcut=0 turn them off. A fixed-depth player (a
    ladder rung) searches its depth in full, and the hand-written baseline keeps every switch
    off."""
    default = make_player("ab+nn:t200,tm")
    on = default.switches
    assert on.lmr and on.pruning and on.probcut and default.name == "ab+nn:t200,tm"
    assert not (on.quiescence or on.aspiration or on.tt_keep or on.policy)
    off = make_player("ab+nn:t200,tm,lmr=0,margin=0,probcut=0")
    assert not off.switches.lmr and not off.switches.pruning and not off.switches.probcut
    assert off.name == "ab+nn:t200,tm,margin=0,lmr=0,probcut=0"
    assert make_player("ab+nn:t200,tm,probcut=0").switches.lmr
    rung = make_player("ab+nn:8")
    assert not rung.switches.lmr and not rung.switches.pruning and not rung.switches.probcut
    assert rung.name == "ab+nn:8"
    assert make_player("ab+nn:6,lmr=1").switches.lmr
    assert make_player("ab+nn:6,lmr").name == "ab+nn:6,lmr"
    assert not make_player("minimax:t200").switches.lmr
    assert make_player("minimax:6,lmr").name == "minimax:6,lmr"
    # A player built without a spec (the generation gate's) gets its kind's defaults too.
    assert MinimaxPlayer(time_ms=200, nneval="").switches.lmr
    assert not MinimaxPlayer(depth=4, nneval="").switches.lmr
    assert not MinimaxPlayer(time_ms=200).switches.lmr
    # The switch changes the search: fewer nodes to the same depth than without it.
    pos = Position()
    for _ in range(8):
        pos.play(pos.legal_moves()[0])
    with_lmr, without = make_player("ab+nn:9,lmr"), make_player("ab+nn:9")
    with_lmr.choose(pos)
    without.choose(pos)
    assert with_lmr.last is not None and without.last is not None
    assert with_lmr.last.nodes < without.last.nodes
