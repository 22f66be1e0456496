"""The Open Checkers Archive (22,621 expert games, latin-1 PDN) replays legally under our rules.

The archive is the one that ships with the package (``game/data/OCA_2.0.pdn.xz``, read and
checked against its SHA-256 by ``game.archive.read_archive``), so these tests run on a fresh clone
and in CI, never skipped. The default test parses the whole file and replays every 25th game; the
slow test replays every game as it is read.
"""

from __future__ import annotations

from collections import Counter

import pytest

from game.archive import read_archive
from game.pdn import PdnGame, iter_pdn

GAMES = 22621
# From the archive's README: "1-0" is a win for Black, the first mover.
RESULT_COUNTS = {"1/2-1/2": 14192, "0-1": 4803, "1-0": 3626}
SAMPLE_STRIDE = 25  # the fast test replays every 25th game (905 games)


@pytest.fixture(scope="module")
def archive_text() -> str:
    return read_archive()  # the shipped archive, its digest checked


@pytest.fixture(scope="module")
def unreplayed_games(archive_text: str) -> list[PdnGame]:
    return list(iter_pdn(archive_text, replay=False))


def test_the_archive_has_every_game_with_the_published_results(
    unreplayed_games: list[PdnGame],
) -> None:
    assert len(unreplayed_games) == GAMES
    assert Counter(g.result for g in unreplayed_games) == RESULT_COUNTS
    assert all(g.fen is None for g in unreplayed_games)  # all from the standard start


def test_every_twenty_fifth_game_replays_legally(unreplayed_games: list[PdnGame]) -> None:
    sample = unreplayed_games[::SAMPLE_STRIDE]
    plies = 0
    for game in sample:
        final = game.replay()  # raises ValueError naming the game and move if one is illegal
        assert final.ply == len(game.moves)
        plies += len(game.moves)
        _check_ending(game, final)
    assert len(sample) == (GAMES + SAMPLE_STRIDE - 1) // SAMPLE_STRIDE
    assert plies > 30 * len(sample)


def _check_ending(game: PdnGame, final) -> None:
    """A game that ends with the side to move stuck was won by the other side."""
    if not final.legal_moves():
        expected = "0-1" if final.turn == "B" else "1-0"
        assert game.result == expected, (game.describe(), final.fen())


@pytest.mark.slow
def test_every_game_replays_legally(archive_text: str) -> None:
    counts: Counter[str] = Counter()
    for game in iter_pdn(archive_text):  # replay=True: every move is checked as it is read
        counts[game.result] += 1
        _check_ending(game, game.replay())
    assert sum(counts.values()) == GAMES
    assert counts == RESULT_COUNTS
