"""The endgame database's distances to conversion: equal to a level-by-level search's, refused
by name when corrupt or foreign, and what makes a database player win a won ending within the
40-move rule where the win/draw/loss values alone let it shuffle.

Default lane: 6x6 and 8x8 databases up to 3 pieces, built here in about a second each.
"""

from __future__ import annotations

import random
import shutil
import zlib
from pathlib import Path

import pytest

from evaluation.players.endgame import database_move
from game import Position, _core
from game.egdb import DRAW, LOSS, WIN, EgdbError, EndgameDatabase, pairs, signatures
from game.egdb.build import build
from game.egdb.manifest import check_any_file, manifest_from_files


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> dict[int, EndgameDatabase]:
    out = {}
    for size in (6, 8):
        folder = tmp_path_factory.mktemp(f"dtc{size}")
        build(folder, size, 3)
        out[size] = EndgameDatabase(folder, size, 3)
        assert out[size].distances
    return out


def _node(game: _core.Game) -> tuple[int, int, int, bool]:
    return (game.black, game.white, game.kings, game.white_to_move)


def _brute_force(db: EndgameDatabase, size: int, sig) -> dict:
    """(value, distance) of every position of a signature pair, both sides to move, by levels:
    level n holds the positions won or lost in exactly n plies to a capture, crowning or end,
    found from levels below n alone (not the solver's queue). Captures and crownings leave the
    pair: their positions' values come from the database."""
    swapped = (sig[2], sig[3], sig[0], sig[1])
    moves: dict = {}
    for s in {sig, swapped}:
        for i in range(_core.egdb_index_size(size, s)):
            black, white, kings = _core.egdb_board_at(size, s, i)
            for white_to_move in (False, True):
                game = _core.Game.from_bitboards(size, black, white, kings, white_to_move)
                pieces, men = (black | white).bit_count(), ((black | white) & ~kings).bit_count()
                out = []
                for m in game.legal_moves():
                    game.make(m)
                    b, w, k = game.black, game.white, game.kings
                    if (b | w).bit_count() < pieces or ((b | w) & ~k).bit_count() < men:
                        ended = game.result() != 0
                        out.append(("exit", LOSS if ended else db.core.probe_game(game)))
                    else:
                        out.append(("in", _node(game)))
                    game.undo()
                moves[_node(game)] = out
    known: dict = {key: (LOSS, 0) for key, out in moves.items() if not out}
    level = 0
    while True:
        level += 1
        found = {}
        for key, out in moves.items():
            if key in known:
                continue
            wins = [
                (c == LOSS) if kind == "exit" else known.get(c, (None,))[0] == LOSS
                for kind, c in out
            ]
            if any(wins):
                found[key] = (WIN, level)
            elif all(
                (c == WIN) if kind == "exit" else known.get(c, (None,))[0] == WIN for kind, c in out
            ):
                found[key] = (LOSS, level)
        if not found:
            break
        known.update(found)
    return {key: known.get(key, (DRAW, 0)) for key in moves}


@pytest.mark.parametrize(
    ("size", "sig"), [(6, (0, 2, 0, 1)), (6, (1, 1, 0, 1)), (8, (0, 1, 0, 1)), (8, (1, 0, 0, 1))]
)
def test_distances_equal_a_level_by_level_search(dbs, size, sig):
    db = dbs[size]
    expected = _brute_force(db, size, sig)
    got = {}
    for key in expected:
        game = _core.Game.from_bitboards(size, *key)
        got[key] = tuple(db.core.probe_distance_game(game))
    assert got == expected
    assert max(d for v, d in expected.values() if v == WIN) >= 5  # not a trivial slice


def test_two_kings_against_one_known_distances(dbs):
    """Black kings on 1 and 3 against the White king in the double corner on 32: a win whose
    distance is the solver's, and White to move there loses one ply further away."""
    db = dbs[8]
    value, plies = db.distance(Position.from_fen("B:WK32:BK1,K3"))
    assert value == WIN and plies > 1
    assert db.distance(Position.from_fen("B:WK7,K14:BK6")) == (DRAW, 0)
    # the first move of the shortest line leads to a loss one ply nearer
    pos = Position.from_fen("B:WK32:BK1,K3")
    move, _ = database_move(pos, db, depth=1)
    pos.play(move)
    assert db.distance(pos) == (LOSS, plies - 1)


def _play_out(pos: Position, winner_db, loser_db, depth: int) -> str:
    """Plays until the game ends under the rules (40-move rule included); the side to move at
    the start uses winner_db, the other loser_db."""
    winner = pos.turn
    while not pos.is_over():
        db = winner_db if pos.turn == winner else loser_db
        move, _ = database_move(pos, db, depth=depth)
        pos.play(move)
    result = pos.game.result()
    if result == 3:
        return "draw"
    return "win" if (result == 1) == (winner == "B") else "loss"


def _values_only(db: EndgameDatabase, folder: Path) -> EndgameDatabase:
    """The same database without its distance files (as a folder built before them)."""
    folder.mkdir()
    for path in db.folder.glob("*.egdb"):
        shutil.copy(path, folder / path.name)
    manifest_from_files(folder, db.size)
    out = EndgameDatabase(folder, db.size, db.max_pieces)
    assert not out.distances
    return out


def _won_positions(db: EndgameDatabase, sig, count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    size = db.size
    out = []
    while len(out) < count:
        i = rng.randrange(_core.egdb_index_size(size, sig))
        game = _core.Game.from_bitboards(size, *_core.egdb_board_at(size, sig, i), False)
        pos = Position.from_game(game)
        if not pos.is_over() and db.distance(pos)[0] == WIN and db.distance(pos)[1] > 3:
            out.append(pos.fen())
    return out


def test_distances_convert_where_values_alone_shuffle(dbs, tmp_path):
    """Two kings against one, from random won positions: with distances every game is won
    within the 40-move rule; with the values alone and a one-ply progress search, some are not
    (the winner keeps the win and never closes in)."""
    db = dbs[8]
    plain = _values_only(db, tmp_path / "values")
    fens = _won_positions(db, (0, 2, 0, 1), 12, seed=5)
    with_distances = [_play_out(Position.from_fen(f), db, db, depth=1) for f in fens]
    values_only = [_play_out(Position.from_fen(f), plain, db, depth=1) for f in fens]
    assert with_distances == ["win"] * len(fens)
    assert values_only.count("win") < len(fens)
    assert "loss" not in values_only  # the value is kept all along: a draw, never a loss


def _copy(db: EndgameDatabase, folder: Path) -> Path:
    shutil.copytree(db.folder, folder)
    return folder


def test_corrupt_or_foreign_distance_files_are_refused_by_name(dbs, tmp_path):
    db = dbs[6]
    sig = (0, 2, 0, 1)
    name = _core.egdb_distance_file_name(6, sig)
    # damaged payload, same size: the manifest's size check passes, the file's CRC does not
    folder = _copy(db, tmp_path / "flip")
    data = bytearray((folder / name).read_bytes())
    data[-1] ^= 0x5A
    (folder / name).write_bytes(bytes(data))
    with pytest.raises(EgdbError) as err:
        EndgameDatabase(folder, 6, 3)
    message = str(err.value)
    assert "\n" not in message and str(folder / name) in message and "checksum" in message
    # truncated: refused by its size (the manifest's), before anything is hashed or mapped
    folder = _copy(db, tmp_path / "cut")
    (folder / name).write_bytes((folder / name).read_bytes()[:-3])
    with pytest.raises(EgdbError, match="truncated") as err:
        EndgameDatabase(folder, 6, 3)
    assert str(folder / name) in str(err.value) and "\n" not in str(err.value)
    # foreign: a value file, or another signature's distances, under the distance file's name
    for foreign, what in (
        (_core.egdb_file_name(6, sig), "bytes, expected"),
        (_core.egdb_distance_file_name(6, (0, 1, 0, 2)), "holds signature 0-1-0-2"),
    ):
        folder = _copy(db, tmp_path / f"foreign{len(what)}")
        (folder / name).unlink()
        shutil.copy(folder / foreign, folder / name)
        manifest_from_files_error = None
        try:
            manifest_from_files(folder, 6)  # the manifest itself refuses to list it
        except EgdbError as e:
            manifest_from_files_error = str(e)
        assert manifest_from_files_error is not None and what in manifest_from_files_error
        assert str(folder / name) in manifest_from_files_error
        assert "\n" not in manifest_from_files_error
    # a wrong format version in an otherwise sound file
    folder = _copy(db, tmp_path / "version")
    path = folder / name
    data = bytearray(path.read_bytes())
    data[8] = 9
    path.write_bytes(bytes(data))
    with pytest.raises(EgdbError, match=r"damaged header|format version") as err:
        check_any_file(path, 6, sig)
    assert str(path) in str(err.value)


def test_every_signature_has_its_distance_file(dbs):
    for size, db in dbs.items():
        for sig in signatures(size, 3):
            path = db.folder / _core.egdb_distance_file_name(size, sig)
            assert _core.egdb_check_distance_file(str(path), size, sig) == _core.egdb_index_size(
                size, sig
            )


def test_verify_checks_the_distances_against_the_moves(dbs, tmp_path):
    """Every 3-piece position's distance agrees with its moves'; a distance changed in a file
    whose checksums were written again (so every file check passes) is found by verify."""
    db = dbs[8]
    for sig in signatures(8, 3):
        assert db.verify(sig) == 0, sig
    folder = _copy(db, tmp_path / "edited")
    sig = (0, 2, 0, 1)
    path = folder / _core.egdb_distance_file_name(8, sig)
    data = bytearray(path.read_bytes())
    assert int.from_bytes(data[40:44], "little") == 1  # one byte a position
    won = next(
        i
        for i in range(_core.egdb_index_size(8, sig))
        if db.core.probe_distance_game(
            _core.Game.from_bitboards(8, *_core.egdb_board_at(8, sig, i), False)
        )[0]
        == WIN
    )
    data[64 + won] += 2
    data[20:24] = zlib.crc32(bytes(data[64:])).to_bytes(4, "little")
    data[44:48] = zlib.crc32(bytes(data[:44])).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    manifest_from_files(folder, 8)
    edited = EndgameDatabase(folder, 8, 3)
    assert edited.verify(sig) >= 1


def test_a_folder_built_before_distances_plays_on_values_until_built_again(dbs, tmp_path):
    db = dbs[8]
    plain = _values_only(db, tmp_path / "old")
    pos = Position.from_fen("B:WK32:BK1,K3")
    assert plain.distance(pos) == (WIN, -1)
    with pytest.raises(EgdbError, match="no distance files") as err:
        EndgameDatabase(plain.folder, 8, 3, distances=True)
    assert str(plain.folder) in str(err.value) and "\n" not in str(err.value)
    report = build(plain.folder, 8, 3)
    assert report.pairs_built == len(pairs(8, 3))  # each pair solved again, distances beside
    again = EndgameDatabase(plain.folder, 8, 3)
    assert again.distances and again.distance(pos) == db.distance(pos)
