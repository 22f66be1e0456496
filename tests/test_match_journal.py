"""A match's journal: an interrupted match goes on where it stopped, and ends with the games and
figures of a match played in one go; a journal of another match, or a damaged one, is refused
with the file and line named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluation.match import main
from evaluation.matches.records import PairRecord
from evaluation.matches.workers import run_match
from game.openings import load_openings

MATCH = ["minimax:2", "minimax:1", "--games", "8", "--ray", "off", "--workers", "1", "--seed", "3"]


def run(tmp_path: Path, name: str, *extra: str) -> int:
    return main([*MATCH, "--out", str(tmp_path / f"{name}.pdn"), *extra])


def pairs_played(printed: str) -> int:
    return len(re.findall(r"^\[\d+/\d+\] ", printed, re.M))


def figures(path: Path) -> dict:
    d = json.loads(path.read_text())
    # what each side's search did per move includes milliseconds, which differ run to run
    return {k: v for k, v in d.items() if k not in ("a_search", "b_search")}


def test_an_interrupted_match_goes_on_and_ends_as_one_played_in_one_go(tmp_path, capsys) -> None:
    assert run(tmp_path, "whole", "--json", str(tmp_path / "whole.json")) == 0
    journal = tmp_path / "match.journal"
    assert run(tmp_path, "first", "--journal", str(journal)) == 0
    lines = journal.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + 4 and json.loads(lines[0])["a"] == "minimax:2"
    # Killed after two pairs, in the middle of writing the third.
    journal.write_text("".join(lines[:3]) + lines[3][:40])
    capsys.readouterr()
    assert (
        run(tmp_path, "resumed", "--journal", str(journal), "--json", str(tmp_path / "r.json")) == 0
    )
    printed = capsys.readouterr().out
    assert "2 game pairs already played" in printed
    assert pairs_played(printed) == 2  # only the two missing ones: [3/4] and [4/4]
    assert (tmp_path / "resumed.pdn").read_text() == (tmp_path / "whole.pdn").read_text()
    assert figures(tmp_path / "r.json") == figures(tmp_path / "whole.json")
    assert len(journal.read_text().splitlines()) == 1 + 4
    # Started again with a whole journal, nothing is played.
    assert run(tmp_path, "again", "--journal", str(journal)) == 0
    printed = capsys.readouterr().out
    assert "4 game pairs already played" in printed and pairs_played(printed) == 0
    assert (tmp_path / "again.pdn").read_text() == (tmp_path / "whole.pdn").read_text()


def test_a_journal_of_another_match_or_a_damaged_one_is_refused(tmp_path, capsys) -> None:
    journal = tmp_path / "match.journal"
    assert run(tmp_path, "first", "--journal", str(journal)) == 0
    kept = journal.read_text()
    capsys.readouterr()
    other = ["minimax:3", *MATCH[1:], "--journal", str(journal)]
    assert main(other) == 2
    err = capsys.readouterr().err
    assert "is the journal of another match (a: 'minimax:2' there, 'minimax:3' here)" in err
    assert main([*MATCH[:-1], "4", "--journal", str(journal)]) == 2
    assert "seed: 3 there, 4 here" in capsys.readouterr().err
    lines = kept.splitlines(keepends=True)
    damaged = lines[0] + lines[1] + '{"index": 1, "opening"\n' + "".join(lines[3:])
    journal.write_text(damaged)
    assert main([*MATCH, "--journal", str(journal)]) == 2
    assert f"match journal {journal}, line 3: not a game pair" in capsys.readouterr().err
    pdn = tmp_path / "first.pdn"
    assert main([*MATCH, "--journal", str(pdn)]) == 2
    assert f"match journal {pdn}, line 1: not a journal header" in capsys.readouterr().err
    assert journal.read_text() == damaged and pdn.read_text().startswith("[")  # left as they were


def test_played_pairs_must_be_this_matchs_own(tmp_path) -> None:
    deck = load_openings("deck")
    whole = run_match("minimax:2", "minimax:1", deck, games=4, seed=3, ray_mode="off")
    pair = whole.pairs[1]
    again = run_match(
        "minimax:2", "minimax:1", deck, games=4, seed=3, ray_mode="off", played=[pair]
    )
    assert again.pairs == whole.pairs
    moved = PairRecord.from_dict(pair.to_dict() | {"index": 0})
    with pytest.raises(ValueError, match=r"game pair 0 was played from .*, but this match's"):
        run_match("minimax:2", "minimax:1", deck, games=4, seed=3, ray_mode="off", played=[moved])
    with pytest.raises(ValueError, match="outside this match's schedule of 2 pairs"):
        run_match(
            "minimax:2",
            "minimax:1",
            deck,
            games=4,
            seed=3,
            ray_mode="off",
            played=[PairRecord.from_dict(pair.to_dict() | {"index": 2})],
        )
    with pytest.raises(ValueError, match=r"game pair 1 \(.*\) is given twice"):
        run_match(
            "minimax:2", "minimax:1", deck, games=4, seed=3, ray_mode="off", played=[pair, pair]
        )
    with pytest.raises(ValueError, match="was played by minimax:2 and minimax:1, not minimax:3"):
        run_match("minimax:3", "minimax:1", deck, games=4, seed=3, ray_mode="off", played=[pair])
