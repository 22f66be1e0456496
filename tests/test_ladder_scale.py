"""scripts/ladder_scale.py puts a match on a rated ladder's scale with the evaluator's own fit,
whichever side the rung played, and says when neither (or both) of the players is a rung."""

from __future__ import annotations

import json

import pytest
from conftest import load_script

from checkerzero.config import compose
from evaluation.ladder.rungs import fit_all
from evaluation.ladder.table import LadderTable, TableRow, read_table, write_table
from evaluation.stats.elo import PairResult


@pytest.fixture(scope="module")
def ladder_scale():
    return load_script("ladder_scale")


def test_a_match_is_rated_on_the_table_from_either_side(tmp_path, ladder_scale, capsys) -> None:
    rows = tuple(
        TableRow(name, elo, elo - 10, elo + 10, 5.0, 1000, 500.0)
        for name, elo in (("random", 0.0), ("minimax:1", 900.0), ("minimax:4", 1700.0))
    )
    table = tmp_path / "t.csv"
    write_table(LadderTable(rows, draw_elo=110.0, first_move_elo=None, confidence=0.95), table)
    match = {"player_a": "net", "player_b": "minimax:4", "wins": 116, "draws": 154, "losses": 42}
    rated, rung, elo, lower, upper = ladder_scale.ladder_rating(match, str(table))
    assert (rated, rung) == ("net", "minimax:4")
    assert 1700.0 < lower < elo < upper < 1900.0
    # The evaluator's fit: the rung held at the table's rating, the table's draw term.
    cfg = dict(compose([]).evaluation.elo)
    fit = fit_all([PairResult("net", "minimax:4", 116, 154, 42)], cfg, table=read_table(table))
    assert (fit["net"].elo, fit.draw_elo, fit["minimax:4"].elo) == (elo, 110.0, 1700.0)
    flipped = {"player_a": "minimax:4", "player_b": "net", "wins": 42, "draws": 154, "losses": 116}
    assert ladder_scale.ladder_rating(flipped, str(table))[2] == pytest.approx(elo)

    path = tmp_path / "m.json"
    path.write_text(json.dumps(match))
    assert ladder_scale.main([str(path), "--table", str(table)]) == 0
    assert f"net {elo:+.0f} [{lower:+.0f}, {upper:+.0f}]" in capsys.readouterr().out
    path.write_text(json.dumps(match | {"player_b": "minimax:9"}))
    assert ladder_scale.main([str(path), "--table", str(table)]) == 2
    assert "exactly one of them must be a rung" in capsys.readouterr().err
