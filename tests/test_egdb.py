"""The endgame database: index counts, file checks, resumable builds, and its values checked
against the rules by separate passes, an alpha-beta search and classic endings.

Default lane: the 6x6 database up to 4 pieces and the 8x8 one up to 4 pieces (built once per
session, a few seconds). Slow lane: 8x8 up to 5 pieces, and a build killed mid-way and resumed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from game import Position, _core
from game.egdb import (
    DRAW,
    LOSS,
    WIN,
    EgdbError,
    EndgameDatabase,
    available_pieces,
    check_file,
    describe,
    file_path,
    pair_complete,
    pairs,
    signatures,
)
from game.egdb.__main__ import main as egdb_main
from game.egdb.build import build, ensure_database
from game.egdb.manifest import manifest_path
from tests import reference_rules as ref

# OEIS A055213: positions with n pieces on the 8x8 board (men never on their crowning row).
A055213 = {1: 120, 2: 6_972, 3: 261_224, 4: 7_092_774, 5: 148_688_232}
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def egdb_dirs(tmp_path_factory) -> dict[int, Path]:
    out = {}
    for size, pieces in ((6, 4), (8, 4)):
        folder = tmp_path_factory.mktemp(f"egdb{size}")
        report = build(folder, size, pieces)
        assert report.pairs_built == len(pairs(size, pieces))
        out[size] = folder
    return out


@pytest.fixture(scope="session")
def db6(egdb_dirs) -> EndgameDatabase:
    return EndgameDatabase(egdb_dirs[6], 6, 4)


@pytest.fixture(scope="session")
def db8(egdb_dirs) -> EndgameDatabase:
    return EndgameDatabase(egdb_dirs[8], 8, 4)


def board_of(size: int, sig, index: int, white_to_move: bool = False) -> Position:
    black, white, kings = _core.egdb_board_at(size, sig, index)
    return Position.from_game(_core.Game.from_bitboards(size, black, white, kings, white_to_move))


def random_positions(size: int, max_pieces: int, n: int, seed: int) -> list[Position]:
    rng = random.Random(seed)
    sigs = signatures(size, max_pieces)
    out = []
    for _ in range(n):
        sig = rng.choice(sigs)
        index = rng.randrange(_core.egdb_index_size(size, sig))
        out.append(board_of(size, sig, index, white_to_move=rng.random() < 0.5))
    return out


# --- the index --------------------------------------------------------------------------------


def test_index_counts_equal_oeis_a055213():
    for n, expected in A055213.items():
        counted = sum(_core.egdb_index_size(8, s) for s in signatures(8, n) if sum(s) == n)
        assert counted == expected, n
    # 6x6: 15 squares for each side's men, 18 for kings; one piece anywhere it may stand.
    assert sum(_core.egdb_index_size(6, s) for s in signatures(6, 1)) == 2 * 15 + 2 * 18


def test_index_is_a_bijection_on_small_signatures():
    back, crown = 0b111, 0b111 << 15  # 6x6: Black's back row, Black's crowning row
    for sig in signatures(6, 3):
        seen = set()
        for i in range(_core.egdb_index_size(6, sig)):
            black, white, kings = _core.egdb_board_at(6, sig, i)
            assert black & white == 0 and kings & ~(black | white) == 0
            assert black & ~kings & crown == 0 and white & ~kings & back == 0  # men never crowned
            assert _core.egdb_index_of(6, black, white, kings) == (sig, i)
            seen.add((black, white, kings))
        assert len(seen) == _core.egdb_index_size(6, sig)


def test_index_round_trips_on_five_piece_signatures():
    rng = random.Random(5)
    for sig in signatures(8, 5):
        n = _core.egdb_index_size(8, sig)
        for i in [0, n - 1] + [rng.randrange(n) for _ in range(20)]:
            black, white, kings = _core.egdb_board_at(8, sig, i)
            assert _core.egdb_index_of(8, black, white, kings) == (sig, i)
    with pytest.raises(ValueError, match="legal placement"):
        _core.egdb_index_of(8, 1 << 31, 0, 0)  # a black man on its crowning row


# --- values against the rules -----------------------------------------------------------------


def test_every_position_is_the_best_over_its_moves(db6, db8):
    """The core's own verifier: a plain one-step minimax over every stored position."""
    for db in (db6, db8):
        for sig in signatures(db.size, db.max_pieces):
            assert db.verify(sig) == 0, sig


def _ref_value(db: EndgameDatabase, pos: ref.RefPosition) -> int:
    black = white = kings = 0
    for square, piece in pos.pieces:
        b = 1 << (square - 1)
        if piece in "bB":
            black |= b
        else:
            white |= b
        if piece.isupper():
            kings |= b
    return db.core.probe(black, white, kings, pos.turn == ref.WHITE)


def _ref_position(size: int, black: int, white: int, kings: int, turn: str) -> ref.RefPosition:
    pieces = []
    for square in range(1, size * size // 2 + 1):
        b = 1 << (square - 1)
        if black & b:
            pieces.append((square, "B" if kings & b else "b"))
        elif white & b:
            pieces.append((square, "W" if kings & b else "w"))
    return ref.RefPosition(size, tuple(pieces), turn)


def test_values_follow_an_independent_rules_implementation(db6, db8):
    """Every 6x6 placement of up to 3 pieces (and a sample of 8x8 ones of up to 4), with either
    side to move (alternately), checked against its successors under tests/reference_rules.py,
    which shares no code with the core: no moves is a loss, else a win iff some successor is
    lost for its mover, else a draw iff some successor is drawn."""
    rng = random.Random(3)
    checked = 0
    for db, max_pieces, sample in ((db6, 3, None), (db8, 4, 25)):
        for sig in signatures(db.size, max_pieces):
            n = _core.egdb_index_size(db.size, sig)
            indices = range(n) if sample is None else [rng.randrange(n) for _ in range(sample)]
            for i in indices:
                black, white, kings = _core.egdb_board_at(db.size, sig, i)
                pos = _ref_position(db.size, black, white, kings, (ref.BLACK, ref.WHITE)[i % 2])
                children = [_ref_value(db, ref.apply_move(pos, m)) for m in ref.legal_moves(pos)]
                expected = WIN if LOSS in children else DRAW if DRAW in children else LOSS
                assert _ref_value(db, pos) == expected, (ref.to_fen(pos), children)
                checked += 1
    assert checked > 40_000


@pytest.mark.parametrize("size", [6, 8])
def test_agrees_with_alpha_beta_on_random_positions(size, db6, db8):
    """A depth-limited alpha-beta proves wins and losses within its horizon: each proof must
    match the database, and no position the database calls a draw may be proven either way."""
    db = db6 if size == 6 else db8
    proven = 0
    positions = random_positions(size, 4, 1500, seed=size)
    for pos in positions:
        if pos.is_over():
            continue
        result = _core.alphabeta_search(pos.game, depth=12)
        value = db.value(pos)
        if abs(result.score) >= _core.MATE_THRESHOLD:
            proven += 1
            assert value == (WIN if result.score > 0 else LOSS), (pos.fen(), result)
    assert proven > len(positions) // 4  # the search proves many, so the check has teeth


# --- classic endings ---------------------------------------------------------------------------


def test_single_king_opposition(db8):
    """Lasker, Chess and Checkers, diagram 88 (square numbers as in every checkers book):

    White king on 32, Black king on 26:
       .  W  .  .  .  .  .  .     <- 32 31 30 29 (White's side, drawn at the top)
       .  .  .  .  B  .  .  .     <- 28 27 26 25
    White to move wins by 32-27 (taking the opposition); Black to move draws by 26-31,
    reaching the double corner. 1 king against 1 king is otherwise a draw.
    """
    assert db8.probe(Position.from_fen("W:WK32:BK26")) == "win"
    assert db8.probe(Position.from_fen("B:WK32:BK26")) == "draw"
    assert db8.probe(Position.from_fen("B:WK28:BK5")) == "draw"  # both in double corners
    assert db8.probe(Position.from_fen("W:WK28:BK5")) == "draw"


def test_two_kings_beat_one(db8):
    """Two kings win against one, whoever moves, unless the lone king wins one of them back:

        Black kings on 1 and 3, White king in the double corner on 32: Black wins either way.

    The exception, a fork: White kings on 7 and 14, Black king on 6, Black to move:
           .  .  .  .  .  .  .  .      <- 1 2 3 4 (Black's back row, drawn at the top)
           .  .  B  .  W  .  .  .      <- 5 6 7 8
           .  .  .  .  .  .  .  .      <- 9 10 11 12
           .  .  W  .  .  .  .  .      <- 13 14 15 16
    (B: Black king, W: White kings.) 6-10 attacks both kings (10x3 over 7, 10x17 over 14);
    neither can take the king on 10, since each blocks the other's landing square. One falls:
    a draw.
    """
    assert db8.probe(Position.from_fen("B:WK32:BK1,K3")) == "win"
    assert db8.probe(Position.from_fen("W:WK32:BK1,K3")) == "loss"
    assert db8.probe(Position.from_fen("B:WK7,K14:BK6")) == "draw"
    pos = Position.from_fen("B:WK7,K14:BK6")
    pos.play("6-10")
    assert db8.probe(pos) == "draw" and all(not m.is_capture for m in pos.legal_moves())
    # Over every such position with the lone king to move and no capture for it: nearly all lost.
    values = []
    for i in range(_core.egdb_index_size(8, (0, 1, 0, 2))):
        black, white, kings = _core.egdb_board_at(8, (0, 1, 0, 2), i)
        game = _core.Game.from_bitboards(8, black, white, kings, False)
        if not any(m.is_capture for m in game.legal_moves()):
            values.append(db8.core.probe_game(game))
    assert values.count(LOSS) == 12_790 and values.count(DRAW) == 66 and len(values) == 12_856


# The ACF's "Winning First Position" (acfcheckers.com, Standard Positions): White, a king on 15 and
# a man on 20, against Black's king in the double corner on 28 and a man on 12; White to move:
#
#      32  31  30  29            .  .  .  .
#    28  27  26  25            B  .  .  .        B: Black king on 28
#      24  23  22  21            .  .  .  .
#    20  19  18  17            w  .  .  .        w: White man on 20
#      16  15  14  13            .  W  .  .      W: White king on 15
#    12  11  10   9            b  .  .  .        b: Black man on 12
#
# The trunk line: every position on it stays a White win, whoever is to move.
FIRST_POSITION = "W:W20,K15:BK28,12"
FIRST_POSITION_TRUNK = (
    "15-19 28-32 20-16 32-28 16-11 28-32 11-7 32-28 7-3 28-32 3-7 32-28 7-10 28-32 10-15 32-28 "
    "15-18 28-32 18-23 32-28 23-27 28-32 19-23 32-28 27-32 28-24 23-18 24-28 18-15 28-24 32-28 "
    "24-27 15-18 12-16 28-32 27-24 18-15 24-28 15-11 16-19 32-27 28-32 27-31 32-28 11-15"
)


def test_first_position_is_won_along_the_acf_trunk(db8):
    pos = Position.from_fen(FIRST_POSITION)
    assert db8.probe(pos) == "win"
    for move in FIRST_POSITION_TRUNK.split():
        pos.play(move)
        expected = "win" if pos.turn == "W" else "loss"
        assert db8.probe(pos) == expected, (move, pos.fen())
    assert describe(db8.value(pos), pos.turn) == "database loss for Black"


def test_probe_edges(db8):
    assert db8.probe(Position()) is None  # 24 pieces: not in the database
    pos = Position.from_fen("W:WK32:BK26")
    flipped = Position.from_fen("B:W7:B1")  # not the same position: a sanity probe of men
    values = db8.probe_many([pos, flipped, Position()])
    assert values.tolist() == [db8.value(pos), db8.value(flipped), 0]
    with pytest.raises(ValueError, match="6x6 position"):
        db8.value(Position(size=6))
    states = np.array([[1, 1, 0, 0]], dtype=np.uint32)  # both sides on square 1: refused quietly
    assert db8.probe_states(states).tolist() == [0]


# --- files ------------------------------------------------------------------------------------


def _copy_db(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_damaged_files_are_refused_by_name(egdb_dirs, tmp_path):
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    sig = (1, 1, 0, 1)
    path = file_path(folder, 6, sig)
    good = path.read_bytes()
    assert check_file(path, 6, sig) == _core.egdb_index_size(6, sig)

    def refused(data: bytes, match: str) -> None:
        path.write_bytes(data)
        with pytest.raises(EgdbError, match=match) as err:
            EndgameDatabase(folder, 6, 3)
        assert str(path) in str(err.value)

    refused(good[:-3], "truncated")
    refused(good[:40], "truncated")
    damaged = bytearray(good)
    damaged[100] ^= 0x10
    refused(bytes(damaged), "damaged values")
    damaged = bytearray(good)
    damaged[8] = 9  # format version, header checksum now wrong
    refused(bytes(damaged), "damaged header")
    refused(b"PK\x03\x04" + good[4:], "bad magic")
    refused(file_path(folder, 6, (0, 1, 1, 1)).read_bytes(), "holds signature 0-1-1-1")
    refused(good + b"\0", "trailing bytes")
    path.unlink()
    with pytest.raises(EgdbError, match="missing") as err:
        EndgameDatabase(folder, 6, 3)
    assert str(path) in str(err.value)


def test_build_resumes_and_repairs(egdb_dirs, tmp_path):
    folder = tmp_path / "db"
    first = build(folder, 6, 3)
    originals = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert first.pairs_built == len(pairs(6, 3)) and first.pairs_skipped == 0
    file_path(folder, 6, (0, 2, 0, 1)).unlink()  # a missing file
    damaged = file_path(folder, 6, (1, 0, 1, 0))
    damaged.write_bytes(damaged.read_bytes()[:-1])  # a truncated one
    (folder / "6x6_2-0-1-0.egdb.tmp123").write_bytes(b"partial")  # what a killed build leaves
    again = build(folder, 6, 3)
    assert again.pairs_built == 2 and again.pairs_skipped == len(pairs(6, 3)) - 2
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == originals
    # The same files from the 6x6 database of the session (built up to 4 pieces).
    for name, data in originals.items():
        if name != manifest_path(folder, 6).name:
            assert (egdb_dirs[6] / name).read_bytes() == data


def test_process_pool_builds_the_same_files(egdb_dirs, tmp_path):
    lines: list[str] = []
    report = build(tmp_path, 6, 4, workers=2, progress=lines.append)
    assert report.pairs_built == len(pairs(6, 4))
    for p in egdb_dirs[6].glob("*.egdb"):
        assert (tmp_path / p.name).read_bytes() == p.read_bytes(), p.name
    assert any("positions/s" in line and "ETA" in line for line in lines)


def test_ensure_database_builds_what_is_missing(tmp_path):
    lines: list[str] = []
    db = ensure_database(tmp_path, 6, 2, progress=lines.append)
    assert "not found" in lines[0] and available_pieces(tmp_path, 6) == 2
    assert db.probe(Position.from_fen("W:WK1:BK18", size=6)) == "draw"
    lines.clear()
    ensure_database(tmp_path, 6, 2, progress=lines.append)
    assert lines == []  # present: opened, not rebuilt
    damaged = file_path(tmp_path, 6, (0, 1, 0, 1))
    good = damaged.read_bytes()
    damaged.write_bytes(good[:-1])
    db = ensure_database(tmp_path, 6, 2, progress=lines.append)
    assert "truncated" in lines[0] and damaged.read_bytes() == good


def test_cli_build_probe_verify(tmp_path, capsys):
    assert (
        egdb_main(
            ["build", "--pieces", "3", "--board", "6", "--out", str(tmp_path), "--workers", "1"]
        )
        == 0
    )
    assert "built" in capsys.readouterr().out
    assert egdb_main(["probe", "W:WK1,K3:BK10", "--board", "6", "--dir", str(tmp_path)]) == 0
    assert "database win for White" in capsys.readouterr().out
    assert egdb_main(["verify", "--board", "6", "--dir", str(tmp_path)]) == 0
    assert "every position consistent" in capsys.readouterr().out
    assert egdb_main(["probe", "W:WK1:BK10", "--board", "8", "--dir", str(tmp_path)]) == 2
    assert "no 8x8 endgame database" in capsys.readouterr().err


# --- the manifest: a missing, extra or non-regular file is refused by name ----------------------


def _egdb_cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """The command line in its own process: a FIFO that it opened would hang it, not the suite."""
    return subprocess.run(
        [sys.executable, "-m", "game.egdb", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _four_piece_file(folder: Path) -> Path:
    return file_path(folder, 6, next(s for s in reversed(signatures(6, 4)) if sum(s) == 4))


def _refused_everywhere(folder: Path, path: Path, match: str) -> None:
    """probe and verify exit 2 with one line naming ``path``; so does opening it (3 and 4
    pieces), and a run's ensure_database stops on it too."""
    for args in (("probe", "W:WK1:BK10"), ("verify",)):
        proc = _egdb_cli(*args, "--board", "6", "--dir", str(folder))
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert str(path) in proc.stderr and match in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for pieces in (3, 4):
        with pytest.raises(EgdbError, match=re.escape(match)) as err:
            EndgameDatabase(folder, 6, pieces)
        assert str(path) in str(err.value)
    with pytest.raises(EgdbError, match=re.escape(match)) as err:
        ensure_database(folder, 6, 4, progress=lambda line: None)
    assert str(path) in str(err.value)


def test_build_writes_a_manifest_of_its_files(egdb_dirs):
    folder = egdb_dirs[6]
    m = json.loads(manifest_path(folder, 6).read_text())
    assert (m["manifest_version"], m["board"], m["file_format"], m["pieces"]) == (1, 6, 1, 4)
    assert (m["distance_format"], m["distance_pieces"]) == (1, 4)
    names = sorted(p.name for p in [*folder.glob("*.egdb"), *folder.glob("*.dtc")])
    expected = [
        namer(6, s)
        for s in signatures(6, 4)
        for namer in (_core.egdb_file_name, _core.egdb_distance_file_name)
    ]
    assert sorted(m["files"]) == names == sorted(expected)
    for name in names:
        data = (folder / name).read_bytes()
        assert m["files"][name] == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_a_deleted_file_is_refused_by_name(egdb_dirs, tmp_path):
    """Deleting a 4-piece file once left a 3-piece database that verify called consistent."""
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    path = _four_piece_file(folder)
    good = path.read_bytes()
    path.unlink()
    for args in (("probe", "W:WK1:BK10"), ("verify",)):
        proc = _egdb_cli(*args, "--board", "6", "--dir", str(folder))
        assert proc.returncode == 2 and f"{path}: missing" in proc.stderr, proc.stderr
    for pieces in (3, 4):
        with pytest.raises(EgdbError, match="missing") as err:
            EndgameDatabase(folder, 6, pieces)
        assert str(path) in str(err.value)
    # A run's ensure_database says which file is missing and builds it again.
    lines: list[str] = []
    db = ensure_database(folder, 6, 4, progress=lines.append)
    assert f"{path}: missing" in lines[0] and path.read_bytes() == good
    assert db.probe(Position.from_fen("W:WK1,K3:BK10", size=6)) == "win"


def test_a_fifo_in_a_files_place_is_refused_never_waited_on(egdb_dirs, tmp_path):
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    path = _four_piece_file(folder)
    path.unlink()
    os.mkfifo(path)
    _refused_everywhere(folder, path, "not a regular file (a FIFO)")
    with pytest.raises(EgdbError, match=re.escape("(a FIFO)")) as err:
        build(folder, 6, 4)
    assert str(path) in str(err.value)


def test_a_directory_or_a_link_in_a_files_place_is_refused(egdb_dirs, tmp_path):
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    path = _four_piece_file(folder)
    elsewhere = tmp_path / "elsewhere.egdb"
    path.rename(elsewhere)
    path.mkdir()
    _refused_everywhere(folder, path, "not a regular file (a directory)")
    path.rmdir()
    path.symlink_to(elsewhere)  # the right bytes, but outside the folder
    _refused_everywhere(folder, path, "not a regular file (a symbolic link)")


def test_an_extra_file_is_refused_by_name(egdb_dirs, tmp_path):
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    for name in ("notes.txt", "6x6_2-1-1-1.egdb"):
        extra = folder / name
        extra.write_bytes(b"x")
        _refused_everywhere(folder, extra, "not in the manifest")
        extra.unlink()
    # What a killed build leaves: refused by name, and a run's build removes it.
    stale = folder / "6x6_1-0-0-0.egdb.tmp4242"
    stale.write_bytes(b"partial")
    proc = _egdb_cli("probe", "W:WK1:BK10", "--board", "6", "--dir", str(folder))
    assert proc.returncode == 2 and f"{stale}: not in the manifest" in proc.stderr
    assert "left by an unfinished build" in proc.stderr
    lines: list[str] = []
    ensure_database(folder, 6, 4, progress=lines.append)
    assert str(stale) in lines[0] and not stale.exists()
    sub = folder / "sub"
    sub.mkdir()
    _refused_everywhere(folder, sub, "not in the manifest")
    sub.rmdir()
    os.mkfifo(folder / "pipe")
    _refused_everywhere(folder, folder / "pipe", "not in the manifest")
    (folder / "pipe").unlink()
    # Another board's files and manifest may share the folder.
    for p in egdb_dirs[8].iterdir():
        if p.name.startswith("8x8_1-0-0-0") or p.name.startswith("8x8.manifest"):
            shutil.copy(p, folder / p.name)
    assert EndgameDatabase(folder, 6, 4).max_pieces == 4
    assert _egdb_cli("probe", "W:WK1,K3:BK10", "--board", "6", "--dir", str(folder)).returncode == 0


def test_a_database_without_a_manifest_is_refused_until_one_is_written(egdb_dirs, tmp_path):
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    manifest = manifest_path(folder, 6)
    original = manifest.read_text()
    manifest.unlink()
    for args in (("probe", "W:WK1:BK10"), ("verify",)):
        proc = _egdb_cli(*args, "--board", "6", "--dir", str(folder))
        assert proc.returncode == 2, proc.stderr
        assert f"python -m game.egdb manifest --board 6 --dir {folder}" in proc.stderr
    with pytest.raises(EgdbError, match="without a manifest"):
        EndgameDatabase(folder, 6, 4)
    (folder / "notes.txt").write_text("mine")  # the manifest command refuses what is not a file
    proc = _egdb_cli("manifest", "--board", "6", "--dir", str(folder))
    assert proc.returncode == 2 and str(folder / "notes.txt") in proc.stderr
    assert not manifest.exists()
    (folder / "notes.txt").unlink()
    proc = _egdb_cli("manifest", "--board", "6", "--dir", str(folder))
    assert proc.returncode == 0 and "every signature up to 4 pieces" in proc.stdout
    assert manifest.read_text() == original
    proc = _egdb_cli("verify", "--board", "6", "--dir", str(folder), "--pieces", "3")
    assert proc.returncode == 0 and "every position consistent" in proc.stdout
    # A run adopts a database without one: the build checks every file and writes it.
    manifest.unlink()
    lines: list[str] = []
    ensure_database(folder, 6, 4, progress=lines.append)
    assert "without a manifest" in lines[0] and manifest.read_text() == original
    help_text = _egdb_cli("--help").stdout
    assert "manifest" in help_text and "missing, extra or non-regular" in " ".join(
        help_text.split()
    )


def test_verify_compares_checksums_and_a_bad_manifest_is_named(egdb_dirs, tmp_path):
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    manifest = manifest_path(folder, 6)
    m = json.loads(manifest.read_text())
    path = _four_piece_file(folder)
    m["files"][path.name]["sha256"] = "0" * 64
    manifest.write_text(json.dumps(m))
    proc = _egdb_cli("verify", "--board", "6", "--dir", str(folder))
    assert proc.returncode == 2 and f"{path}: its SHA-256 differs" in proc.stderr
    assert EndgameDatabase(folder, 6, 4).max_pieces == 4  # opening checks sizes, not hashes
    for text, match in (
        ("{", "not valid JSON"),
        ("[" * 100_000, "not valid JSON"),
        (json.dumps({**m, "board": 8}), "for board 8"),
        (json.dumps({**m, "pieces": 5}), "says 5 pieces, its files cover 4"),
        (json.dumps({**m, "files": {"../6x6_1-0-0-0.egdb": {}}}), "not a 6x6 database file"),
    ):
        manifest.write_text(text)
        with pytest.raises(EgdbError, match=match) as err:
            EndgameDatabase(folder, 6, 4)
        assert str(manifest) in str(err.value)
    manifest.unlink()
    os.mkfifo(manifest)
    proc = _egdb_cli("probe", "W:WK1:BK10", "--board", "6", "--dir", str(folder))
    assert proc.returncode == 2 and f"{manifest}: not a regular file (a FIFO)" in proc.stderr


def test_verify_checks_every_size_before_hashing_a_sparse_file(egdb_dirs, tmp_path):
    """A 10^12-byte sparse file listed in the manifest at that size is refused from the sizes
    alone (a file of its signature has a known size), in seconds, not after hours of hashing."""
    folder = _copy_db(egdb_dirs[6], tmp_path / "db")
    manifest = manifest_path(folder, 6)
    m = json.loads(manifest.read_text())
    path = _four_piece_file(folder)
    os.truncate(path, 10**12)  # sparse: no disk used, hours to hash
    m["files"][path.name]["bytes"] = 10**12
    manifest.write_text(json.dumps(m))
    proc = _egdb_cli("verify", "--board", "6", "--dir", str(folder), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"lists {path.name} at 1,000,000,000,000 bytes, a file of it has" in proc.stderr


# --- uses: MCTS leaves, alpha-beta, self-play and match adjudication ---------------------------


def _root_after_search(config, db: EndgameDatabase | None, fen: str, simulations: int = 200):
    from game.mcts import UniformInference, new_search, search

    cfg = config(f"mcts.simulations={simulations}", "mcts.dirichlet_epsilon=0.0").mcts
    mcts = new_search(1, 8, cfg, seed=0)
    if db is not None:
        mcts.set_egdb(db.core)
    mcts.reset(0, Position.from_fen(fen).game)
    search(mcts, UniformInference())
    return mcts


def test_mcts_leaves_take_the_database_value(db8, config):
    """First Position, White to move: with the database every child is scored exactly, so the
    root's value is a win and the chosen move keeps it; with only the uniform evaluator the
    root looks even."""
    with_db = _root_after_search(config, db8, FIRST_POSITION)
    assert with_db.egdb_hits > 0
    assert with_db.root_wdl(0)[0] > 0.9
    game = with_db.game(0)
    game.step(with_db.choose(0, 0.0))
    assert db8.core.probe_game(game) == LOSS  # Black to move, lost
    without = _root_after_search(config, None, FIRST_POSITION)
    assert without.egdb_hits == 0 and without.root_wdl(0)[0] < 0.5


class _SureWinInference:
    """Every position a near-certain win for the side to move, with a hair of draw: the kind of
    value a trained network gives a won ending, never exact as the database's are."""

    version = 0

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        priors = (mask / mask.sum(axis=-1, keepdims=True)).astype(np.float32)
        wdl = np.tile(np.array([0.9999, 1e-4, 0.0], np.float32), (len(mask), 1))
        return priors, wdl


def test_root_wdl_stays_a_probability_vector_when_the_database_decides(db8, config):
    """A root evaluated by the network (W just under 1, D just over 0) whose every move is a
    capture into the database: its visits add exact wins to a near-exact one, and in float32
    their sum rounds to a whole win while the draw share stays. The WDL the game record takes
    must still be in [0, 1]: a loss share a hair below zero once failed the record's validation
    and restarted the self-play actor, losing its games in flight."""
    from game.mcts import new_search, search

    def five_pieces_all_captures(pos: Position) -> bool:
        moves = pos.legal_moves()
        setup = pos.setup()
        pieces = (setup.black | setup.white).bit_count()
        return pieces == 5 and len(moves) > 1 and all(m.is_capture for m in moves)

    five = [p for p in random_positions(8, 5, 4000, seed=7) if five_pieces_all_captures(p)][:64]
    assert len(five) >= 16
    cfg = config("mcts.simulations=200", "mcts.dirichlet_epsilon=0.0").mcts
    mcts = new_search(len(five), 8, cfg, seed=0)
    mcts.set_egdb(db8.core)
    for i, pos in enumerate(five):
        mcts.reset(i, pos.game)
    search(mcts, _SureWinInference())
    assert mcts.egdb_hits > 0
    wdl = np.array([mcts.root_wdl(i) for i in range(len(five))])
    assert (wdl >= 0).all() and (wdl <= 1).all(), wdl[((wdl < 0) | (wdl > 1)).any(axis=1)]
    np.testing.assert_allclose(wdl.sum(axis=1), 1.0, atol=1e-6)


def _after(pos: Position, move) -> Position:
    child = pos.copy()
    child.play(move)
    return child


def test_minimax_with_the_database(db8, egdb_dirs):
    from evaluation.players.alphabeta import alphabeta
    from evaluation.players.make import make_player

    with pytest.raises(ValueError, match="needs an endgame database"):
        make_player("minimax+db:4")
    player = make_player("minimax+db:4", egdb_dir=str(egdb_dirs[8]), egdb_pieces=4)
    assert player.name == "minimax+db:4"
    pos = Position.from_fen(FIRST_POSITION)
    pos.play(player.choose(pos))
    assert db8.probe(pos) == "loss"  # Black to move after White's choice: still lost
    assert player.stats()["egdb_moves"] == 1  # a root the database knows: its move
    # Below the root the search scores the database's positions exactly, a win that converts
    # sooner higher: DATABASE_WIN less the plies to the position and its distance to conversion.
    found = alphabeta(Position.from_fen(FIRST_POSITION), depth=4, egdb=db8)
    root = Position.from_fen(FIRST_POSITION)
    nearest = min(
        db8.distance(child)[1]
        for m in root.legal_moves()
        if db8.distance(child := _after(root, m))[0] == LOSS
    )
    assert found.score == _core.DATABASE_WIN - 1 - nearest
    plain = make_player("minimax:4")
    plain.choose(Position.from_fen(FIRST_POSITION))
    assert abs(plain.last.score) < 1000  # without the database the win is beyond its horizon


def test_match_adjudicates_database_positions(egdb_dirs):
    from evaluation.matches.games import play_game
    from evaluation.players.make import make_player
    from game.openings import Opening

    db = EndgameDatabase(egdb_dirs[6], 6, 4)
    black, white = make_player("minimax:2"), make_player("random:1")
    opening = Opening("start", (), size=6)
    adjudicated = 0
    for seed in range(6):
        white = make_player(f"random:{seed}")
        game = play_game(black, white, opening, size=6, egdb=db)
        pos = Position(size=6)
        for move in game.moves:
            pos.play(move)
        if game.end_reason.startswith("database"):
            adjudicated += 1
            value = db.value(pos)
            assert game.end_reason == describe(value, pos.turn)
            assert (
                game.result
                == {"win": {"B": "1-0", "W": "0-1"}, "loss": {"B": "0-1", "W": "1-0"}}.get(
                    db.probe(pos), {"B": "1/2-1/2", "W": "1/2-1/2"}
                )[pos.turn]
            )
        else:
            assert pos.is_over()
    assert adjudicated > 0


def test_self_play_adjudicates_and_scores_leaves(egdb_dirs, config):
    from actors.self_play import play_games
    from game.mcts import UniformInference
    from game.record_pdn import start_game
    from game.records import Termination

    cfg = config(
        "game=small",
        "mcts.simulations=16",
        "mcts.leaves_per_game=4",
        "selfplay.games_in_parallel=3",
        "selfplay.openings=start",
        "selfplay.resign=false",
        f"egdb.dir={egdb_dirs[6]}",
        "egdb.pieces=4",
        "egdb.adjudicate_selfplay=true",
        "egdb.mcts_leaves=true",
    )
    db = EndgameDatabase(egdb_dirs[6], 6, 4)
    records = play_games(UniformInference(), cfg, n_games=6, seed=2)
    ended = [r for r in records if r.termination == Termination.DATABASE]
    assert ended
    for record in ended:
        between_turns = record.positions[(record.positions[:, 3] >> 1) & 0x3F == 0]
        assert (db.probe_states(between_turns[:, :4]) == 0).all()  # never played on inside it
        game = start_game(record)
        for action in record.played:
            game.step(int(action))
        value = db.core.probe_game(game)
        white_to_move = game.white_to_move
        expected = {DRAW: 3, WIN: 2 if white_to_move else 1, LOSS: 1 if white_to_move else 2}
        assert int(record.result) == expected[value]


def test_evaluator_gate_adjudicates_and_settings_carry_the_database(db8, egdb_dirs, config):
    from evaluation.evaluator.settings import EvalSettings
    from evaluation.matches.gate import gate
    from evaluation.players.make import make_player
    from game.openings import load_openings

    sprt = {"elo0": 0, "elo1": 200, "alpha": 0.05, "beta": 0.05, "max_games": 4}
    options = {"egdb_dir": str(egdb_dirs[8]), "egdb_pieces": 4}
    decision = gate(
        make_player("minimax+db:3", **options),
        make_player("minimax:3"),
        load_openings()[:2],
        sprt,
        seed=0,
        max_plies=200,
        egdb=db8,
    )
    assert decision.games == 4
    settings = EvalSettings.from_config(
        config(
            "evaluation=default",  # minimax+db rungs are not in the rated table
            f"egdb.dir={egdb_dirs[8]}",
            "egdb.pieces=4",
            "evaluation.ladder=[random,minimax:1,minimax+db:2]",
        )
    )
    assert settings.player_options["egdb_dir"] == str(egdb_dirs[8])
    assert settings.player_options["egdb_pieces"] == 4
    assert not settings.egdb["adjudicate_matches"]  # off by default


# --- slow lane ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_killed_build_resumes_at_its_slice(tmp_path):
    """A build killed (SIGKILL) mid-way: the next one keeps every complete pair, builds the rest."""
    cmd = [sys.executable, "-m", "game.egdb", "build", "--pieces", "5", "--board", "6"]
    cmd += ["--out", str(tmp_path), "--workers", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert "65 slices" in proc.stdout.readline()  # the header: the build has started
    time.sleep(2.0)  # the whole build takes about 10 s
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = {p.name for p in tmp_path.glob("*.egdb")}
    complete = [s for s in pairs(6, 5) if pair_complete(tmp_path, 6, s)]
    assert 0 < len(complete) < len(pairs(6, 5))
    report = build(tmp_path, 6, 5)
    assert report.pairs_skipped == len(complete)
    assert kept <= {p.name for p in tmp_path.glob("*.egdb")}
    assert not list(tmp_path.glob("*.tmp*"))
    db = EndgameDatabase(tmp_path, 6, 5)
    assert all(db.verify(s) == 0 for s in signatures(6, 5))


@pytest.mark.slow
def test_five_pieces_on_8x8(tmp_path):
    report = build(tmp_path, 8, 5, workers=2)
    assert report.pairs_built == len(pairs(8, 5))
    db = EndgameDatabase(tmp_path, 8, 5)
    for sig in signatures(8, 5):
        assert db.verify(sig) == 0, sig
    proven = 0
    for pos in random_positions(8, 5, 1000, seed=55):
        if pos.is_over():
            continue
        result = _core.alphabeta_search(pos.game, depth=9)
        if abs(result.score) >= _core.MATE_THRESHOLD:
            proven += 1
            assert db.value(pos) == (WIN if result.score > 0 else LOSS), pos.fen()
    assert proven > 200


@pytest.mark.slow
def test_ray_build_on_a_cluster(egdb_dirs, tmp_path):
    """The slices as Ray tasks on a real two-node cluster (sharing this machine's folder)."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address)
    try:
        lines: list[str] = []
        report = build(tmp_path, 6, 4, use_ray=True, progress=lines.append)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert report.pairs_built == len(pairs(6, 4)) and report.positions == 592_084
    for p in egdb_dirs[6].glob("*.egdb"):
        assert (tmp_path / p.name).read_bytes() == p.read_bytes(), p.name
    assert "592,084/592,084 positions" in lines[-2]
