"""The OCA game archive (Open Checkers Archive 2.0, Martin Fierz): 22,621 expert games.

The archive ships with the package, compressed with xz (1.2 MB instead of 11.5 MB), so that the
value-head check on expert positions and anything else that needs real games work on a fresh
install. Its text is verified against the SHA-256 published with it before anyone reads it.

    from game.archive import read_archive
    games = list(iter_pdn(read_archive()))

A different collection can be given by path, plain (`.pdn`) or xz-compressed (`.pdn.xz`); only
the shipped archive is checked against the known digest.
"""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

ARCHIVE_PATH = Path(__file__).resolve().parent / "data" / "OCA_2.0.pdn.xz"
ARCHIVE_SHA256 = "77d9ad9d2aa5bdcee790fe1679cffb41267202e0286cda9aa0e00b3c7eeb9474"
ARCHIVE_ENCODING = "latin-1"  # the archive's player names use Latin-1 accents, not UTF-8


class ArchiveError(ValueError):
    """The archive is missing, unreadable or not the one it claims to be."""


def read_archive(path: Path | str | None = None) -> str:
    """The text of a PDN collection: the shipped OCA archive by default, else the given file."""
    shipped = path is None
    source = ARCHIVE_PATH if shipped else Path(path)
    if not source.is_file():
        raise ArchiveError(f"game archive not found at {source}")
    try:
        raw = source.read_bytes()
        if source.suffix == ".xz":
            raw = lzma.decompress(raw)
    except (OSError, lzma.LZMAError) as err:
        raise ArchiveError(f"cannot read game archive {source}: {err}") from err
    if shipped:
        digest = hashlib.sha256(raw).hexdigest()
        if digest != ARCHIVE_SHA256:
            raise ArchiveError(
                f"game archive {source} is damaged: SHA-256 {digest}, expected {ARCHIVE_SHA256}"
            )
    return raw.decode(ARCHIVE_ENCODING)
