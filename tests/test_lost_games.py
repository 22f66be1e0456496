"""scripts/lost_games.py: where a player's lost games were lost, read by a fixed-depth judge and
the endgame database."""

from __future__ import annotations

import pytest
from conftest import load_script

from game import _core
from game.egdb.build import build
from game.pdn import PdnGame, write_pdn
from game.position import Position

lost_games = load_script("lost_games")


def played(fen: str | None, black_depth: int, white_depth: int) -> PdnGame:
    """A game from ``fen`` (or the start) between two fixed-depth hand-written searches."""
    pos = Position.from_fen(fen) if fen else Position()
    moves = []
    while not pos.is_over() and len(moves) < 200:
        depth = white_depth if pos.game.white_to_move else black_depth
        found = _core.alphabeta_search(pos.game, depth, 0, None, 16, None, None)
        moves.append(str(pos.play(found.move)))
    return PdnGame(
        tags={} if fen is None else {"FEN": fen}, moves=moves, result=pos.result() or "*"
    )


@pytest.fixture(scope="module")
def match(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lost")
    build(folder / "egdb", 8, 3)
    games = []
    # Black's two men against two kings: lost from the first move on.
    hopeless = played("B:WK18,K27:B3,4", 8, 8)
    assert hopeless.result == "0-1"
    # A game from the start that the weak side (depth 1) loses to depth 6: level at first.
    start = played(None, 1, 6)
    assert start.result == "0-1"
    for game, round_, black, white in (
        (hopeless, "1.1", "weak", "strong"),
        (start, "2.1", "weak", "strong"),
    ):
        game.tags |= {"Round": round_, "Black": black, "White": white, "Opening": f"test {round_}"}
        games.append(game)
    # The same hopeless game with the names swapped (strong loses) and a draw: not weak's losses.
    games.append(
        PdnGame(
            tags=hopeless.tags | {"Round": "3.1", "Black": "strong", "White": "weak"},
            moves=hopeless.moves,
            result="0-1",
        )
    )
    games.append(
        PdnGame(
            tags={"Round": "4.1", "Black": "weak", "White": "strong"}, moves=[], result="1/2-1/2"
        )
    )
    path = folder / "match.pdn"
    path.write_text(write_pdn(games))
    return path, folder / "egdb"


def test_each_loss_is_read_from_the_losers_side(match, capsys):
    path, egdb = match
    argv = [str(path), "--player", "weak", "--depth", "4", "--egdb-dir", str(egdb)]
    assert lost_games.main(argv) == 0
    out = capsys.readouterr().out
    assert "weak: 2 lost of 4 games" in out and "database: 3 pieces" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line[:3] in ("1.1", "2.1", "3.1")}
    assert set(rows) == {"1.1", "2.1"}  # the draw and the game weak won are not its losses
    # Two men against two kings: never level; the database is reached lost.
    assert "never" in rows["1.1"] and rows["1.1"].rstrip().endswith("no legal move")
    assert ", 3, loss" in rows["1.1"]
    # From the start the judge calls the game level at first: the last level ply has pieces.
    assert "never" not in rows["2.1"]
    assert "lost before the ending (a loss when the database was reached): " in out
    # The other side's losses: the swapped game only.
    assert (
        lost_games.main([str(path), "--player", "strong", "--depth", "4", "--egdb-dir", str(egdb)])
        == 0
    )
    assert "strong: 1 lost of 4 games" in capsys.readouterr().out


def test_bad_input_is_named_in_one_line(match, tmp_path, capsys):
    path, _ = match
    assert lost_games.main([str(path), "--player", "nobody"]) == 2
    assert "no game of 'nobody'" in capsys.readouterr().err
    assert lost_games.main([str(tmp_path / "missing.pdn")]) == 2
    assert "missing.pdn" in capsys.readouterr().err
    assert lost_games.main([str(path), "--depth", "0"]) == 2
    assert "--depth must be in 1..30" in capsys.readouterr().err
    junk = tmp_path / "junk.nn"
    junk.write_bytes(b"junk")
    assert lost_games.main([str(path), "--evaluation", str(junk)]) == 2
    assert "junk.nn" in capsys.readouterr().err
