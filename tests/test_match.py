"""Matches: the opening deck, colour-reversed pairs, PDN output that replays in the engine,
parallel runs that agree with the plain loop, the command line, and a deeper search beating a
shallower one over a seeded match (a statistical test with a fixed seed, not a timing)."""

from __future__ import annotations

import contextlib
import json
import math
import time

import pytest

from evaluation.match import main
from evaluation.matches.games import play_game, play_match, schedule
from evaluation.matches.records import MatchResult, PairRecord, PlayedGame
from evaluation.matches.workers import run_match
from evaluation.players.alphabeta import MinimaxPlayer
from evaluation.players.base import RandomPlayer
from game import Position
from game.openings import Opening, load_openings
from game.pdn import read_pdn, write_pdn


@pytest.fixture(scope="module")
def deck() -> list[Opening]:
    return load_openings("deck")


def test_deck_is_the_156_ballot_tournament_deck(deck: list[Opening]) -> None:
    assert len(deck) == 156
    names = {o.name for o in deck}
    assert "ACF 1" in names and "ACF 3" not in names  # ballot 3 (9-13 21-17 10-14) is barred
    for opening in deck:
        pos = Position()
        for move in opening.moves:
            pos.play(move)
        assert len(opening.moves) == 3 and pos.turn == "W" and pos.result() is None


def test_schedule_is_seeded_and_uses_each_opening_once_per_cycle(deck: list[Opening]) -> None:
    first = schedule(deck, 200, seed=3)
    assert first == schedule(deck, 200, seed=3) and first != schedule(deck, 200, seed=4)
    assert len({o.name for o in first[:156]}) == 156


def test_deeper_search_beats_shallower(deck: list[Opening]) -> None:
    result = play_match(MinimaxPlayer(depth=5), MinimaxPlayer(depth=1), deck, games=20, seed=11)
    assert result.num_games == 20
    assert result.wins + result.draws + result.losses == 20
    assert result.score > 0.6, result.summary()
    assert sum(result.pentanomial()) == 10
    elo = result.elo()
    assert elo.elo_lower > 0  # significantly stronger, not just on average


def test_pairs_reverse_colours_and_pdn_replays(deck: list[Opening]) -> None:
    a, b = MinimaxPlayer(depth=2), RandomPlayer(seed=4)
    result = play_match(a, b, deck, games=6, seed=2, max_plies=120)
    for pair in result.pairs:
        assert (pair.a_black.black, pair.a_black.white) == ("minimax:2", "random")
        assert (pair.a_white.black, pair.a_white.white) == ("random", "minimax:2")
        opening = next(o for o in deck if o.name == pair.opening)
        for game in (pair.a_black, pair.a_white):
            assert game.moves[:3] == opening.moves
    text = write_pdn(result.pdn_games())
    games = read_pdn(text)  # replays and checks every move
    assert len(games) == 6
    for parsed, (record, _) in zip(games, result.games(), strict=True):
        assert parsed.moves == list(record.moves)
        assert parsed.result == record.result
        assert parsed.tags["Opening"] == record.opening
        assert (parsed.tags["Black"], parsed.tags["White"]) == (record.black, record.white)
        final = parsed.replay()
        if record.end_reason == "ply cap":  # the replayed position has no cap of its own
            assert final.ply == 120 and record.result == "1/2-1/2"
        else:
            assert (final.result(), final.end_reason) == (record.result, record.end_reason)


def test_points_and_pentanomial_from_a_view() -> None:
    def game(black: str, white: str, result: str) -> PlayedGame:
        return PlayedGame(black, white, "start", (), result, "no legal move")

    pairs = (
        PairRecord(0, "start", game("A", "B", "1-0"), game("B", "A", "0-1")),  # A wins both
        PairRecord(1, "start", game("A", "B", "1/2-1/2"), game("B", "A", "1-0")),  # 1/2
        PairRecord(2, "start", game("A", "B", "0-1"), game("B", "A", "1/2-1/2")),  # 1/2
    )
    result = MatchResult("A", "B", pairs)
    assert (result.wins, result.draws, result.losses) == (2, 2, 2)
    assert result.score == 0.5
    assert result.pentanomial() == (0, 2, 0, 0, 1)
    assert PairRecord.from_dict(pairs[1].to_dict()) == pairs[1]


def test_run_match_agrees_with_the_plain_loop(deck: list[Opening]) -> None:
    plain = play_match(MinimaxPlayer(depth=3), MinimaxPlayer(depth=2), deck, games=4, seed=5)
    pooled = run_match("minimax:3", "minimax:2", deck, games=4, seed=5, workers=2, ray_mode="off")
    assert pooled == plain


def test_play_game_ends_by_the_rules() -> None:
    record = play_game(RandomPlayer(1), RandomPlayer(2), Opening("start", ()), max_plies=40)
    assert record.result in {"1-0", "0-1", "1/2-1/2"}
    assert len(record.moves) <= 40
    six = play_game(MinimaxPlayer(depth=3), RandomPlayer(0), Opening("start", ()), size=6)
    assert six.size == 6 and six.result == "1-0"  # depth 3 beats a random mover on 6x6


def test_bad_match_arguments_raise(deck: list[Opening]) -> None:
    with pytest.raises(ValueError, match="positive even number"):
        play_match(RandomPlayer(), RandomPlayer(), deck, games=3)
    with pytest.raises(ValueError, match="unknown player spec 'nonsense'"):
        run_match("nonsense", "random", deck, games=2, ray_mode="off")
    with pytest.raises(ValueError, match="unknown openings"):
        load_openings("book")


def test_command_line(tmp_path, capsys) -> None:
    out = tmp_path / "games.pdn"
    code = main(
        [
            "minimax:2",
            "random",
            "--games",
            "2",
            "--ray",
            "off",
            "--workers",
            "1",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "match.json"),
            "--seed",
            "1",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "minimax:2 vs random: 2 games" in printed and "Elo" in printed
    games = read_pdn(out.read_text())
    assert len(games) == 2
    figures = json.loads((tmp_path / "match.json").read_text())
    assert [figures[k] for k in ("player_a", "player_b", "games")] == ["minimax:2", "random", 2]
    assert figures["wins"] + figures["draws"] + figures["losses"] == 2
    assert figures["score"] == (figures["wins"] + figures["draws"] / 2) / 2
    assert sum(figures["pentanomial"]) == 1
    assert f"score {100 * figures['score']:.1f}%" in printed  # the same figures as printed
    assert main(["minimax:2", "alphabeta:9", "--games", "2", "--ray", "off"]) == 2
    assert "unknown player spec 'alphabeta:9'" in capsys.readouterr().err
    # Trailing key=value arguments override the composed config; a wrong key is named.
    quick = ["minimax:1", "random", "--games", "2", "--ray", "off"]
    assert main([*quick, "evaluation.baseline.weights.king=150"]) == 0
    assert main([*quick, "evaluation.baseline.weights.queen=150"]) == 2
    assert "evaluation.baseline.weights.queen" in capsys.readouterr().err
    assert (
        main(["uniform-mcts", "random", "--games", "2", "--ray", "off", "evaluation.simulations=7"])
        == 0
    )
    assert "uniform-mcts:sims=7 vs random" in capsys.readouterr().out  # reaches MCTS players too


def test_match_elo_comes_from_the_games() -> None:
    def game(black: str, white: str, result: str) -> PlayedGame:
        return PlayedGame(black, white, "start", (), result, "no legal move")

    wins = PairRecord(0, "start", game("A", "B", "1-0"), game("B", "A", "0-1"))
    even = PairRecord(1, "start", game("A", "B", "1-0"), game("B", "A", "1-0"))
    result = MatchResult("A", "B", (wins, wins, wins, even))
    assert (result.wins, result.draws, result.losses) == (7, 0, 1)
    elo = result.elo()
    assert elo.elo == pytest.approx(400 * math.log10(7))  # score 7/8: odds 7 to 1
    assert elo.elo_lower < elo.elo < elo.elo_upper


def test_worker_processes_end_with_a_killed_match(tmp_path) -> None:
    """A match killed outright (SIGKILL: no cleanup runs) takes its worker processes with it;
    they used to play their current pair to the end, many minutes at 5 s a move.

    Nothing here depends on the machine's speed: the match is killed once both workers have
    loaded the core (their imports done, they start a pair next), not after a guessed sleep, and
    the waits are only guards against a hang, far shorter than one pair (about 40 moves of 5 s
    at the least) and far longer than a worker needs to notice (it looks twice a second)."""
    import os
    import signal
    import subprocess
    import sys

    psutil = pytest.importorskip("psutil")

    def loaded_core(proc) -> bool:
        with contextlib.suppress(psutil.Error):
            return any("_core" in os.path.basename(m.path) for m in proc.memory_maps())
        return False

    cmd = [sys.executable, "-m", "evaluation.match", "minimax:t5000", "minimax:t5000"]
    cmd += ["--games", "4", "--workers", "2", "--ray", "off", "--out", str(tmp_path / "m.pdn")]
    parent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        guard = time.monotonic() + 180
        while (
            len(workers := [w for w in psutil.Process(parent.pid).children() if loaded_core(w)]) < 2
        ):
            assert time.monotonic() < guard, "the match's workers never started"
            assert parent.poll() is None, "the match ended before it could be killed"
            time.sleep(0.2)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        _, alive = psutil.wait_procs(workers, timeout=120)
        assert not alive, f"{len(alive)} worker process(es) outlived the killed match"
    finally:
        for p in workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        parent.kill()
