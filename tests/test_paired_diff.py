"""scripts/paired_diff.py: two matches over the same deck compared opening by opening."""

from __future__ import annotations

import pytest
from conftest import load_script

from game.pdn import PdnGame, write_pdn

paired_diff = load_script("paired_diff")


def match_pdn(tmp_path, name: str, net: str, results: dict[str, tuple[str, str]]):
    """A match's PDN: per opening, the result with the network as Black, then as White."""
    games = []
    for opening, (as_black, as_white) in results.items():
        for black, white, result in ((net, "minimax:6", as_black), ("minimax:6", net, as_white)):
            tags = {"Black": black, "White": white, "Opening": opening}
            games.append(PdnGame(tags=tags, moves=[], result=result))
    path = tmp_path / name
    path.write_text(write_pdn(games))
    return path


def test_differences_are_taken_per_opening_and_averaged(tmp_path, capsys):
    base = match_pdn(
        tmp_path,
        "base.pdn",
        "net:sims=100",
        {"A": ("1-0", "0-1"), "B": ("1/2-1/2", "1-0"), "C": ("0-1", "1/2-1/2")},
    )
    other = match_pdn(
        tmp_path,
        "other.pdn",
        "net:sims=100,cpuct=2.0",
        {"A": ("1/2-1/2", "0-1"), "B": ("1/2-1/2", "1/2-1/2"), "C": ("0-1", "1-0")},
    )
    b = paired_diff.points_by_game(base, "net:sims=100")
    o = paired_diff.points_by_game(other, "net:sims=100")
    assert b[("A", True)] == 1.0 and b[("B", False)] == 0.0 and o[("C", False)] == 0.0
    mean, se, n = paired_diff.paired_difference(b, o)
    # per opening, (other - base) / 2 over both colours: A -0.25, B +0.25, C -0.25
    assert n == 3
    assert mean == pytest.approx(-0.25 / 3)
    assert se == pytest.approx(1 / 6)  # sd of (-0.25, +0.25, -0.25) over sqrt(3)
    assert paired_diff.main([str(base), str(other)]) == 0
    out = capsys.readouterr().out
    assert "base.pdn: net:sims=100, 50.0%" in out
    assert "other.pdn: 41.7%, -8.3 points in 100 against the base (SE 16.7, 3 openings" in out


def test_a_game_without_the_player_is_refused_naming_the_file(tmp_path, capsys):
    base = match_pdn(tmp_path, "base.pdn", "net", {"A": ("1-0", "0-1"), "B": ("1-0", "0-1")})
    stranger = match_pdn(tmp_path, "x.pdn", "other", {"A": ("1-0", "0-1")})
    assert paired_diff.main([str(base), str(stranger), "--player", "net"]) == 2
    assert "x.pdn: a game (other - minimax:6, 1-0) without 'net'" in capsys.readouterr().err
