"""The shipped OCA archive: complete, verified, and refused when damaged."""

import lzma

import pytest

from game.archive import ARCHIVE_PATH, ArchiveError, read_archive
from game.pdn import iter_pdn

OCA_GAMES = 22_621  # games in the Open Checkers Archive 2.0


def test_shipped_archive_holds_every_game():
    text = read_archive()
    assert text.count("[Event ") == OCA_GAMES
    first = next(iter_pdn(text))
    assert first.moves[:3] == ["11-15", "24-20", "8-11"]
    assert first.result == "0-1"


def test_a_given_plain_or_compressed_file_is_read(tmp_path):
    pdn = '[Event "t"]\n[Result "1/2-1/2"]\n1. 11-15 23-19 1/2-1/2\n'
    plain = tmp_path / "g.pdn"
    plain.write_text(pdn, encoding="latin-1")
    packed = tmp_path / "g.pdn.xz"
    packed.write_bytes(lzma.compress(pdn.encode("latin-1")))
    assert read_archive(plain) == read_archive(packed) == pdn


def test_missing_or_corrupt_archives_are_named(tmp_path):
    with pytest.raises(ArchiveError, match=r"not found at .*nothing\.pdn"):
        read_archive(tmp_path / "nothing.pdn")
    broken = tmp_path / "broken.pdn.xz"
    broken.write_bytes(ARCHIVE_PATH.read_bytes()[:1000])
    with pytest.raises(ArchiveError, match=r"cannot read game archive .*broken\.pdn\.xz"):
        read_archive(broken)


def test_a_damaged_shipped_archive_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "OCA_2.0.pdn.xz"
    fake.write_bytes(lzma.compress(b'[Event "not the archive"]\n'))
    monkeypatch.setattr("game.archive.ARCHIVE_PATH", fake)
    with pytest.raises(ArchiveError, match="damaged: SHA-256"):
        read_archive()
