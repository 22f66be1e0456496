"""What the players know exactly: the endgame database at play (won endings converted, not
shuffled) and the opening book (built, checked, refused when damaged or foreign, never an illegal
move), through the match players' specs and the play server's engines.

The database is the 8x8 one up to 4 pieces, built once for the module (seconds to a minute).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from evaluation.book.__main__ import main as book_main
from evaluation.book.build import search_entries, selfplay_entries
from evaluation.players.alphabeta import (
    DATABASE_LOSS_BELOW,
    MATE_THRESHOLD,
    MinimaxPlayer,
    alphabeta,
)
from evaluation.players.book import (
    BOOK_FORMAT,
    Book,
    BookError,
    book_path,
    entries_checksum,
    load_book,
    write_book,
)
from evaluation.players.endgame import database_move
from evaluation.players.make import make_player
from evaluation.players.mcts import MCTSPlayer
from game import _core
from game.egdb import DRAW, LOSS, WIN, EndgameDatabase
from game.egdb.build import build
from game.mcts import UniformInference
from game.openings import acf_deck
from game.pdn import game_from_position, write_pdn
from game.position import Position

REPO = Path(__file__).resolve().parents[1]
NETWORK = REPO / "game" / "data" / "long-320min.safetensors"
# The First Position (White to move and win): White's king and man against Black's king and man
# in the double corner, the classic ending a player without technique draws.
#
#    .  .  .  .        Black: man 12, king 28
#   .  .  .  b         White: man 20, king 15
#    .  .  W  .
#   .  .  .  w
#    .  .  .  .
#   .  .  .  B
#    .  .  .  .
#   .  .  .  .
FIRST_POSITION = "W:W20,K15:BK28,12"
PLY_CAP = 300  # plies a converted ending may take (the 40-move rule ends it far sooner if stuck)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> EndgameDatabase:
    folder = tmp_path_factory.mktemp("egdb8")
    build(folder, 8, 4)
    return EndgameDatabase(folder, 8, 4)


def _won_positions(db: EndgameDatabase, sig, n: int, seed: int) -> list[str]:
    """FENs of ``n`` database wins for Black to move of signature ``sig`` with no capture on."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        index = rng.randrange(_core.egdb_index_size(8, sig))
        black, white, kings = _core.egdb_board_at(8, sig, index)
        pos = Position.from_game(_core.Game.from_bitboards(8, black, white, kings, False))
        if pos.is_over() or db.value(pos) != WIN:
            continue
        if any(m.is_capture for m in pos.legal_moves()):
            continue
        out.append(pos.fen())
    return out


def _play_out(fen: str, winner, defender) -> Position:
    pos = Position.from_fen(fen, max_plies=PLY_CAP)
    mover = pos.turn
    while not pos.is_over():
        player = winner if pos.turn == mover else defender
        pos.play(player.choose(pos))
    return pos


def _uniform(db: EndgameDatabase | None, **settings) -> MCTSPlayer:
    return MCTSPlayer(UniformInference(), {"simulations": 16, **settings}, egdb=db)


# --- the endgame database at play ---------------------------------------------------------------


def test_the_first_position_is_won_against_alpha_beta(db):
    """With the database at the root the ending is converted; with its values at the leaves
    alone (what self-play uses) the search keeps the win in name and draws by repetition."""
    assert db.probe(Position.from_fen(FIRST_POSITION)) == "win"
    player = _uniform(db)
    end = _play_out(FIRST_POSITION, player, MinimaxPlayer(8))
    assert (end.result(), end.end_reason) == ("0-1", "no legal move")  # White won
    assert player.stats()["egdb_moves"] == (end.ply + 1) // 2  # every White move was converted

    class LeavesOnly(MCTSPlayer):
        def _known_move(self, position):
            return None

    shuffler = LeavesOnly(UniformInference(), {"simulations": 64, "solver": True}, egdb=db)
    drawn = _play_out(FIRST_POSITION, shuffler, MinimaxPlayer(8))
    assert drawn.result() == "1/2-1/2"


@pytest.mark.parametrize(
    "sig",
    [(0, 2, 0, 1), (1, 1, 0, 1), (0, 2, 1, 0), (0, 3, 0, 1), (0, 2, 0, 2)],
    ids=["KK-K", "KM-K", "KK-M", "KKK-K", "KK-KK"],
)
def test_won_endings_are_won_against_alpha_beta(db, sig):
    player = make_player("uniform-mcts:sims=16:egdb=1", egdb_dir=str(db.folder), egdb_pieces=4)
    assert player.name == "uniform-mcts:sims=16,egdb=1"
    for fen in _won_positions(db, sig, 3, seed=sum(sig)):
        end = _play_out(fen, player, MinimaxPlayer(8))
        assert (end.result(), end.end_reason) == ("1-0", "no legal move"), fen


@pytest.mark.parametrize("spec", ["minimax+db:4", "ab+nn+db:4"])
def test_the_alpha_beta_with_the_database_converts_its_wins(db, spec):
    """Its leaves alone would score every move that keeps a win alike (the database has no
    distance) and shuffle a won ending into a draw; at a root the database knows it converts."""
    player = make_player(spec, egdb_dir=str(db.folder), egdb_pieces=4)
    end = _play_out(FIRST_POSITION, player, MinimaxPlayer(8))
    assert (end.result(), end.end_reason) == ("0-1", "no legal move")  # White won
    assert player.stats()["egdb_moves"] == (end.ply + 1) // 2 and player.last is None
    for fen in _won_positions(db, (0, 2, 0, 2), 2, seed=11):
        end = _play_out(fen, player, MinimaxPlayer(8))
        assert (end.result(), end.end_reason) == ("1-0", "no legal move"), fen
    leaves_only = make_player(spec.replace("+db", ""))
    leaves_only.choose(Position.from_fen(FIRST_POSITION))  # without it: a search, counted
    assert leaves_only.last is not None and "egdb_moves" not in leaves_only.stats()


def test_the_alpha_beta_resists_where_the_database_says_lost(db):
    """Beyond the database, where every move leads into a database loss, the move is the one
    the search without the database prefers (the most material, the best position) instead of
    the first lost line."""
    rng = random.Random(5)
    player = make_player("minimax+db:3", egdb_dir=str(db.folder), egdb_pieces=4)
    plain = make_player("minimax:3")
    found = 0
    while found < 3:  # five pieces, one more than the database holds: Black to move, lost
        sig = rng.choice([(1, 1, 0, 3), (0, 2, 1, 2), (1, 1, 1, 2)])
        index = rng.randrange(_core.egdb_index_size(8, sig))
        black, white, kings = _core.egdb_board_at(8, sig, index)
        pos = Position.from_game(_core.Game.from_bitboards(8, black, white, kings, False))
        if pos.is_over() or len(pos.legal_moves()) < 2:
            continue
        lost = alphabeta(pos, depth=3, egdb=db)
        if not -MATE_THRESHOLD < lost.score < DATABASE_LOSS_BELOW:
            continue
        found += 1
        move = player.choose(pos)
        assert (move, player.last.score) == (plain.choose(pos), plain.last.score), pos.fen()
        assert player.last.score > DATABASE_LOSS_BELOW


def test_a_timed_alpha_beta_with_the_database_keeps_a_win_within_its_time(db):
    player = make_player("ab+nn+db:t50,tm", egdb_dir=str(db.folder), egdb_pieces=4)
    pos = Position.from_fen(FIRST_POSITION)
    pos.play(player.choose(pos))
    assert db.probe(pos) == "loss"  # Black to move: still lost
    assert player.stats()["egdb_moves"] == 1 and player.bank_ms >= 0


class _ShallowConverter:
    """The database's move with a shallow progress search (``depth`` plies)."""

    def __init__(self, db, depth):
        self.db, self.depth = db, depth

    def choose(self, pos):
        return database_move(pos, self.db, depth=self.depth)[0]


def test_a_shallow_progress_search_converts_by_the_smaller_endings(db, monkeypatch):
    """Without distances (a database built before them), captures into smaller endings of the
    same value are the progress the database can see: with them a 4-ply progress search wins two
    kings against two; with the hand evaluation alone it shuffles some of the same wins into
    draws."""
    import evaluation.players.endgame as endgame_play

    db = EndgameDatabase(db.folder, 8, db.max_pieces, distances=False)
    fens = _won_positions(db, (0, 2, 0, 2), 6, seed=21)
    for fen in fens:
        end = _play_out(fen, _ShallowConverter(db, 4), MinimaxPlayer(6))
        assert (end.result(), end.end_reason) == ("1-0", "no legal move"), fen
    monkeypatch.setattr(endgame_play, "_smaller_database", lambda db, pieces: None)
    results = [_play_out(fen, _ShallowConverter(db, 4), MinimaxPlayer(6)).result() for fen in fens]
    assert "1/2-1/2" in results


def test_a_database_root_keeps_its_value(db):
    """At a won, drawn or lost root the move keeps the value (a win may end the game at once)."""
    rng = random.Random(3)
    seen = {WIN: 0, DRAW: 0, LOSS: 0}
    for _ in range(4000):
        sig = rng.choice([(0, 1, 0, 1), (1, 0, 1, 0), (0, 1, 1, 1), (1, 1, 0, 1), (0, 2, 0, 2)])
        index = rng.randrange(_core.egdb_index_size(8, sig))
        black, white, kings = _core.egdb_board_at(8, sig, index)
        pos = Position.from_game(
            _core.Game.from_bitboards(8, black, white, kings, rng.random() < 0.5)
        )
        if pos.is_over() or seen[db.value(pos)] >= 25:
            continue
        move, value = database_move(pos, db, depth=4)
        assert value == db.value(pos)
        after = pos.copy()
        after.play(move)
        if after.is_over():
            assert value == WIN and after.result() == ("1-0" if pos.turn == "B" else "0-1")
        else:  # the opponent's value after the move is the mirror of ours
            assert db.value(after) == {WIN: LOSS, DRAW: DRAW, LOSS: WIN}[value], pos.fen()
        seen[value] += 1
    assert min(seen.values()) == 25
    assert database_move(Position(), db, depth=4) is None  # 24 pieces: not in the database


def test_an_absent_database_is_said_in_one_line(tmp_path, caplog):
    empty = tmp_path / "no-database-here"
    with caplog.at_level(logging.WARNING):
        player = make_player("uniform-mcts:sims=8:egdb=1", egdb_dir=str(empty), egdb_pieces=4)
    assert player.egdb is None and player.name == "uniform-mcts:sims=8"
    lines = [r.getMessage() for r in caplog.records if "endgame database" in r.getMessage()]
    assert len(lines) == 1 and str(empty) in lines[0] and "\n" not in lines[0]
    pos = Position.from_fen(FIRST_POSITION)
    assert player.choose(pos) in pos.legal_moves()  # it plays, without the database
    with pytest.raises(ValueError, match="option egdb must be 1 or 0"):
        make_player("uniform-mcts:sims=8:egdb=2")


def test_the_config_switch_turns_it_on_and_a_spec_option_wins(db):
    """A match hands the players its config's switch (evaluation.match: egdb.play=true)."""
    where = {"egdb_dir": str(db.folder), "egdb_pieces": 4}
    on = make_player("uniform-mcts:sims=4", play_egdb=True, **where)
    assert on.egdb is not None and on.name == "uniform-mcts:sims=4,egdb=1"
    off = make_player("uniform-mcts:sims=4:egdb=0", play_egdb=True, **where)
    assert off.egdb is None and off.name == "uniform-mcts:sims=4"
    assert make_player("uniform-mcts:sims=4", **where).egdb is None  # the config's default: off


def test_a_timed_player_converts_within_its_time(db):
    player = make_player("uniform-mcts:t50:egdb=1", egdb_dir=str(db.folder), egdb_pieces=4)
    end = _play_out(FIRST_POSITION, player, MinimaxPlayer(6))
    assert (end.result(), end.end_reason) == ("0-1", "no legal move")


# --- the opening book ---------------------------------------------------------------------------


def _network_copy(tmp_path: Path) -> Path:
    path = tmp_path / "net.safetensors"
    shutil.copyfile(NETWORK, path)
    return path


def _two_ballots():
    return acf_deck()[:2]


def test_search_entries_follow_each_ballots_line():
    openings = _two_ballots()
    entries = search_entries(
        openings, UniformInference(), simulations=16, plies=2, mcts_settings={"seed": 0}
    )
    assert len(entries) == 4  # two book moves on each ballot's line
    for opening in openings:
        pos = opening.position()
        for _ in range(2):
            entry = entries[pos.fen()]
            assert entry["source"] == "search" and entry["visits"] == 16
            assert np.isclose(sum(entry["wdl"]), 1.0, atol=1e-3)
            pos.play(entry["move"])  # legal, or this raises
    again = search_entries(
        openings, UniformInference(), simulations=16, plies=2, mcts_settings={"seed": 0}
    )
    assert again == entries


def test_selfplay_entries_take_the_best_scoring_move_seen_often_enough():
    start = Position()
    games = (
        [game_from_position(start, ["11-15", "23-19"], "1-0")] * 6
        + [game_from_position(start, ["11-15", "22-18"], "1/2-1/2")] * 3
        + [game_from_position(start, ["9-13", "22-18"], "0-1")] * 4
        + [game_from_position(start, ["10-14"], "1-0")] * 2  # best score, too few games
    )
    entries = selfplay_entries([write_pdn(games)], plies=4, min_games=3)
    first = entries[start.fen()]
    assert first == {"move": "11-15", "source": "selfplay", "games": 9, "score": 0.8333}
    after = Position()
    after.play("11-15")
    # White's replies after 11-15: 23-19 lost 6 games, 22-18 drew 3: the draw scored better
    assert entries[after.fen()]["move"] == "22-18"
    after9 = Position()
    after9.play("9-13")
    assert entries[after9.fen()] == {
        "move": "22-18",
        "source": "selfplay",
        "games": 4,
        "score": 1.0,
    }


def _book_file(tmp_path: Path, network: Path) -> Path:
    pos = _two_ballots()[0].position()
    move = str(pos.legal_moves()[0])
    return write_book(book_path(network), {pos.fen(): {"move": move}}, network=network)


def test_a_book_round_trips_and_its_player_plays_it(tmp_path):
    network = _network_copy(tmp_path)
    path = _book_file(tmp_path, network)
    assert path == tmp_path / "net.book.json"
    book = load_book(path, network)
    ballot = _two_ballots()[0].position()
    ((fen, entry),) = book.entries.items()
    assert fen == ballot.fen() and book.move(ballot) == ballot.parse_move(entry["move"])
    player = make_player(f"{network}:sims=4:book=1")
    assert player.name == "net.safetensors:sims=4,book=1" and player.book is not None
    assert player.choose(ballot) == ballot.parse_move(entry["move"])
    assert player.stats()["book_moves"] == 1 and player.stats()["moves"] == 0
    off = make_player(f"{network}:sims=4:book=0")
    assert off.book is None and off.name == "net.safetensors:sims=4"


def _rewrite(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_damaged_or_foreign_books_are_refused_by_name(tmp_path):
    network = _network_copy(tmp_path)
    path = _book_file(tmp_path, network)
    good = path.read_bytes()
    pos = _two_ballots()[0].position()
    other = str(pos.legal_moves()[1])
    illegal = "1-5"  # a black piece's square, not White's move in a ballot position
    cases = {
        "truncated": (lambda: path.write_bytes(good[: len(good) // 2]), "not a readable JSON"),
        "not a book": (lambda: path.write_text('{"a": 1}'), f"not a {BOOK_FORMAT} file"),
        "not strict JSON": (
            lambda: path.write_text(good.decode().replace('"board": 8', '"board": NaN')),
            "NaN is not strict JSON",
        ),
        "version": (lambda: _rewrite(path, lambda d: d.update(version=2)), "format version 2"),
        "edited": (
            lambda: _rewrite(path, lambda d: d["entries"][pos.fen()].update(move=other)),
            "checksum does not match",
        ),
    }

    def illegal_with_checksum(d):
        d["entries"][pos.fen()]["move"] = illegal
        d["checksum"] = entries_checksum(d["entries"])

    cases["illegal move"] = (lambda: _rewrite(path, illegal_with_checksum), "is not legal there")
    for name, (spoil, why) in cases.items():
        path.write_bytes(good)
        spoil()
        with pytest.raises(BookError, match=why) as err:
            load_book(path, network)
        message = str(err.value)
        assert message.startswith(f"book {path}: ") and "\n" not in message, name
        with pytest.raises(ValueError, match=why):  # a player asked for it refuses it too
            make_player(f"{network}:sims=4:book=1")
    path.write_bytes(good)
    foreign = tmp_path / "other.safetensors"
    foreign.write_bytes(network.read_bytes()[:-1] + b" ")
    with pytest.raises(BookError, match=r"built for network 'net\.safetensors', not other"):
        load_book(path, foreign)
    with pytest.raises(BookError, match="not found"):
        load_book(tmp_path / "absent.book.json")


def test_the_book_never_plays_an_illegal_move():
    """A book object holding a wrong entry (however it came to be) plays nothing there."""
    pos = _two_ballots()[0].position()
    book = Book(Path("x.book.json"), 8, "n", "", {pos.fen(): {"move": "1-5"}})
    assert book.move(pos) is None
    player = MCTSPlayer(UniformInference(), {"simulations": 8})
    player.book = book
    assert player.choose(pos) in pos.legal_moves() and player.book_moves == 0


def test_an_absent_book_is_said_in_one_line(tmp_path, caplog):
    network = _network_copy(tmp_path)
    with caplog.at_level(logging.WARNING):
        player = make_player(f"{network}:sims=4:book=1")
    assert player.book is None and player.name == "net.safetensors:sims=4"
    lines = [r.getMessage() for r in caplog.records if "book" in r.getMessage()]
    assert len(lines) == 1 and "evaluation.book build" in lines[0]
    with pytest.raises(ValueError, match="uniform-mcts has none"):
        make_player("uniform-mcts:sims=4:book=1")


def test_the_build_command_writes_a_book_the_player_uses(tmp_path, capsys):
    network = _network_copy(tmp_path)
    book_main(["build", "--network", str(network), "--sims", "8", "--plies", "2", "--ballots", "2"])
    book = load_book(tmp_path / "net.book.json", network)
    assert len(book) == 4 and {e["source"] for e in book.entries.values()} == {"search"}
    book_main(["show", str(tmp_path / "net.book.json"), "--network", str(network)])
    assert "4 positions (4 from search)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"error: book .*absent\.book\.json: not found"):
        book_main(["show", str(tmp_path / "absent.book.json")])


# --- the play server's engines ------------------------------------------------------------------


def test_the_play_engines_use_the_book_and_the_database(tmp_path, db, monkeypatch):
    from play.paths import Roots
    from play.players import Players
    from play.settings import load_settings

    network = _network_copy(tmp_path)
    _book_file(tmp_path, network)
    monkeypatch.setattr(
        "play.players.default_knowledge",
        lambda: ({"on": False, "dir": str(db.folder), "pieces": 4, "depth": 16}, False),
    )
    engines = Players(load_settings({"torch_threads": 1}), Roots(tmp_path, tmp_path))
    ballot = _two_ballots()[0].position()
    plain = engines.parse("net.safetensors:sims=8")
    assert not plain.book and not plain.egdb
    booked = engines.parse("net.safetensors:sims=8:book=1")
    answer = engines.move(ballot, booked)
    assert answer["known"] == "book"
    assert (
        answer["move"]
        == json.loads(book_path(network).read_text())["entries"][ballot.fen()]["move"]
    )
    assert engines.move(ballot, plain)["known"] is None
    ending = Position.from_fen(FIRST_POSITION)
    with_db = engines.parse("net.safetensors:sims=8:egdb=1")
    answer = engines.move(ending, with_db)
    assert answer["known"] == "database win"
    after = ending.copy()
    after.play(answer["move"])
    assert db.value(after) == LOSS
    with pytest.raises(ValueError, match="egdb must be 1 or 0"):
        engines.parse("net.safetensors:sims=8:egdb=yes")


def test_a_match_line_counts_the_known_moves():
    from evaluation.matches.records import describe_search

    search = {"moves": 10, "forced": 2, "simulations": 100.0, "book_moves": 3, "egdb_moves": 0}
    assert describe_search(search) == (
        "100 simulations per move (10 moves searched, 2 forced, 3 from the book)"
    )
    search["egdb_moves"] = 5
    assert describe_search(search).endswith("2 forced, 3 from the book, 5 from the database)")


def test_replies_cover_every_move_off_the_line():
    ballot = _two_ballots()[0]
    entries = search_entries(
        [ballot], UniformInference(), simulations=8, plies=2, mcts_settings={}, replies=True
    )
    start = ballot.position()
    book_move = entries[start.fen()]["move"]
    expected = {start.fen()}
    for first in start.legal_moves():  # the ballot position, and every move from it (ply 1)
        child = start.copy()
        child.play(first)
        expected.add(child.fen())
    line = start.copy()
    line.play(book_move)
    for reply in line.legal_moves():  # after the book's move, every reply (ply 2)
        child = line.copy()
        child.play(reply)
        expected.add(child.fen())
    forced = {fen for fen in expected if len(Position.from_fen(fen).legal_moves()) == 1}
    assert expected - forced <= set(entries)
    for fen, entry in entries.items():
        Position.from_fen(fen).play(entry["move"])  # every move legal
