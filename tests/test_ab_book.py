"""The fast player's opening book: built from its own alpha-beta searches along the ACF ballots'
lines, tied to the learned evaluation it was built with, played by ``ab+nn:...,book`` specs,
refused in one line when missing, damaged or built for another evaluation."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from evaluation.book.__main__ import main as book_main
from evaluation.book.build import alphabeta_entries, build_alphabeta_book
from evaluation.players.book import BookError, book_path, load_book
from evaluation.players.make import make_player
from evaluation.players.spec import parse_spec
from game import nneval
from game.openings import acf_deck

DEPTH = 4  # shallow: the tests are about the book, not its quality


@pytest.fixture
def evaluation(tmp_path: Path) -> Path:
    """A copy of the shipped evaluation, so that its book is written beside it in tmp."""
    return Path(shutil.copy(nneval.DEFAULT_PATH, tmp_path / "eval.safetensors"))


def test_entries_follow_each_ballots_line_with_the_searchs_move() -> None:
    openings = acf_deck()[:2]
    entries = alphabeta_entries(openings, nneval.DEFAULT_PATH, depth=DEPTH, plies=2)
    assert len(entries) == 4  # two book moves on each ballot's line
    for opening in openings:
        pos = opening.position()
        for _ in range(2):
            entry = entries[pos.fen()]
            assert entry["source"] == "alphabeta" and entry["depth"] == DEPTH
            found = make_player(f"ab+nn:{DEPTH}").choose(pos)
            assert entry["move"] == str(found)  # the player's own move at that depth
            pos.play(entry["move"])
    two = alphabeta_entries(openings, nneval.DEFAULT_PATH, depth=DEPTH, plies=2, workers=2)
    assert two == entries  # fixed depth: the same book from any number of workers


def test_a_book_player_plays_its_book_then_searches(evaluation: Path) -> None:
    ballot = acf_deck()[0]
    path = build_alphabeta_book(evaluation, depth=DEPTH, plies=1, openings=[ballot])
    assert path == book_path(evaluation) and path.name == "eval.book.json"
    book = load_book(path, evaluation)
    assert len(book) == 1 and json.loads(path.read_text())["settings"]["player"] == "ab+nn"
    spec = f"ab+nn:t50,tm,book:{evaluation}"
    assert parse_spec(spec).book
    player = make_player(spec)
    assert player.name == spec
    pos = ballot.position()
    move = player.choose(pos)
    assert str(move) == book.entries[pos.fen()]["move"]
    pos.play(move)
    player.choose(pos)  # out of the book: a search
    assert player.stats()["book_moves"] == 1 and player.stats()["moves"] == 2
    assert player.last is not None and player.last.depth > 0


def test_missing_damaged_or_foreign_books_are_refused_in_one_line(
    evaluation: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="not found") as missing:
        make_player(f"ab+nn:4,book:{evaluation}")
    assert str(book_path(evaluation)) in str(missing.value) and "\n" not in str(missing.value)
    path = build_alphabeta_book(evaluation, depth=2, plies=1, openings=acf_deck()[:1])
    other = tmp_path / "other.safetensors"
    net = nneval.load(evaluation)
    net.metadata["trained_on"] = "something else"
    nneval.save(net, other)
    shutil.copy(path, book_path(other))
    with pytest.raises(ValueError, match=re.escape("built for network 'eval.safetensors'")):
        make_player(f"ab+nn:4,book:{other}")
    data = json.loads(path.read_text())
    fen = next(iter(data["entries"]))
    data["entries"][fen]["move"] = "9-14" if data["entries"][fen]["move"] != "9-14" else "9-13"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="checksum does not match"):
        make_player(f"ab+nn:4,book:{evaluation}")
    with pytest.raises(BookError, match=re.escape(f"book {path}: checksum")):
        load_book(path, evaluation)
    for bad in ("minimax:4,book", "minimax:t200,tm,book"):
        with pytest.raises(ValueError, match="a book belongs to a learned evaluation"):
            parse_spec(bad)


def test_the_command_builds_and_shows_a_fast_players_book(evaluation: Path, capsys) -> None:
    book_main(["build", "--evaluation", str(evaluation), "--depth", "3", "--plies", "1",
               "--ballots", "2"])  # fmt: skip
    book_main(["show", str(book_path(evaluation)), "--network", str(evaluation)])
    out = capsys.readouterr().out
    assert "2 positions (2 from alphabeta)" in out
    with pytest.raises(SystemExit, match=re.escape("--depth must be 1..64")):
        book_main(["build", "--evaluation", str(evaluation), "--depth", "0"])
    with pytest.raises(SystemExit, match="not found"):
        book_main(["build", "--evaluation", str(evaluation) + ".missing"])
