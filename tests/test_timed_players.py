"""Players with a time budget per move: the spec, the search driver that serves them and the play
server, the counters a match reports, and the time-equal strength table end to end.

No assertion here is about how long anything took, and none depends on the machine's speed: the
timed searches run on a simulated clock that only the inference moves (each batch takes a fixed
time of it), so they play the same batches on any machine, however busy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from checkerzero.config import compose
from checkerzero.network.checkpoint import save_checkpoint
from checkerzero.network.model import CheckersNet, ModelConfig
from evaluation.matches.games import play_match
from evaluation.matches.records import MatchResult, PairRecord, PlayedGame
from evaluation.players.alphabeta import MinimaxPlayer
from evaluation.players.base import player_stats
from evaluation.players.make import make_player
from evaluation.players.mcts import MCTSPlayer
from evaluation.players.policy import AGENT_KEY, Q_AGENT
from evaluation.players.spec import parse_spec
from game.mcts import UniformInference, new_search, search_until
from game.openings import load_openings
from game.position import Position
from play.analysis import Budget
from play.paths import Roots
from play.players import Players
from play.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
TINY = ModelConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)
# Black to move must jump 14x23x32 (capture is compulsory, and the jumping man continues):
#
#   . . . .      1-4
#  . . . .       5-8
#   . . . .      9-12
#  . b . .       13-16    b on 14
#   . w . .      17-20    w on 18
#  . . . .       21-24
#   . . w .      25-28    w on 27
#  . . . .       29-32
FORCED_JUMP = "B:W18,27:B14"
# A bound no search reaches in a fraction of a second (the uniform search runs ~1 M/s at most).
HUGE = 10_000_000


def mcts_parts(text: str) -> tuple[str | None, dict]:
    spec = parse_spec(text)
    return spec.source, dict(spec.options)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("net") / "tiny.safetensors"
    save_checkpoint(path, CheckersNet(TINY), step=0, version=1)
    return path


# ----------------------------------------------------------------------------- the spec


def test_time_specs_parse_and_old_forms_keep_working() -> None:
    assert mcts_parts("uniform-mcts:t200") == ("uniform-mcts", {"time_ms": 200})
    assert mcts_parts("a/b.safetensors:t200,threads=1") == (
        "a/b.safetensors",
        {"time_ms": 200, "threads": 1},
    )
    assert mcts_parts("a/b.safetensors:threads=1:t50:leaves=4") == (
        "a/b.safetensors",
        {"threads": 1, "time_ms": 50, "leaves_per_game": 4},
    )
    assert mcts_parts("a/b.safetensors:ms=300") == ("a/b.safetensors", {"time_ms": 300})
    # The forms from before the time budget parse as they did.
    assert mcts_parts("a/b.safetensors:sims=9:cpuct=1.5") == (
        "a/b.safetensors",
        {"simulations": 9, "c_puct": 1.5},
    )
    assert mcts_parts("a/b.safetensors") == ("a/b.safetensors", {})
    assert mcts_parts("a/b.safetensors:fpu=0.5") == ("a/b.safetensors", {"fpu_reduction": 0.5})
    assert mcts_parts("a/b.safetensors:pst=1.5") == ("a/b.safetensors", {"policy_temperature": 1.5})
    tuned = make_player("uniform-mcts:sims=30,fpu=0.5:pst=1.5:leaves=2")
    assert (tuned.settings["fpu_reduction"], tuned.settings["fpu_reduction_root"]) == (0.5, 0.5)
    assert tuned.settings["policy_temperature"] == 1.5
    assert tuned.name == "uniform-mcts:sims=30,leaves=2,fpu=0.5,pst=1.5"  # what played, in PDN
    player = make_player("uniform-mcts:t40")
    assert isinstance(player, MCTSPlayer)
    assert (player.name, player.time_ms) == ("uniform-mcts:t40", 40)
    fixed = make_player("uniform-mcts:sims=30")
    assert (fixed.name, fixed.time_ms, fixed.simulations) == ("uniform-mcts:sims=30", 0, 30)


def test_a_timed_player_batches_its_own_leaves_and_a_spec_wins_over_both() -> None:
    settings = {"simulations": 30, "leaves_per_game": 2, "timed_leaves_per_game": 6}
    fixed = make_player("uniform-mcts", mcts=settings)
    timed = make_player("uniform-mcts:t5", mcts=settings)
    assert fixed.settings["leaves_per_game"] == 2 and fixed._chunk == 2
    assert timed.settings["leaves_per_game"] == 6 and timed._chunk == 6
    assert make_player("uniform-mcts:t5:leaves=3", mcts=settings).settings["leaves_per_game"] == 3
    assert make_player("uniform-mcts:leaves=3", mcts=settings).settings["leaves_per_game"] == 3
    # the defaults: the evaluation group's keys (conf/evaluation)
    ev = compose().evaluation
    assert make_player("uniform-mcts").settings["leaves_per_game"] == ev.leaves_per_game
    assert make_player("uniform-mcts:t5").settings["leaves_per_game"] == ev.timed_leaves_per_game


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("uniform-mcts:t0", "at least 1 ms"),
        ("uniform-mcts:ms=0", "at least 1 ms"),
        ("uniform-mcts:tfast", "bad option 'tfast'; use tMS"),
        ("uniform-mcts:t-5", "bad option 't-5'"),
        ("uniform-mcts:t", "bad option 't'"),
        ("uniform-mcts:t1.5", "bad option 't1.5'"),
        ("uniform-mcts:ms=fast", "ms must be int"),
        ("uniform-mcts:t200,sims=10", "not both"),
        ("uniform-mcts:t100:t200", "given twice"),
        ("uniform-mcts:t100,ms=100", "given twice"),
    ],
)
def test_bad_time_specs_are_refused_naming_the_spec(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        make_player(spec)
    assert repr(spec) in str(err.value)


def test_a_q_network_refuses_a_time(tmp_path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "dqn.safetensors"
    save_checkpoint(path, CheckersNet(TINY), step=0, version=1, extra={AGENT_KEY: Q_AGENT})
    spec = f"{path}:t100"
    with pytest.raises(ValueError, match="a Q-network plays greedily, without a time") as err:
        make_player(spec)
    assert repr(spec) in str(err.value)


# ----------------------------------------------------------------------------- the driver


class SimulatedTime:
    """An inference on a simulated clock: each batch it passes on to ``inner`` (the uniform
    inference by default) takes ``batch_s`` seconds of the clock ``now``, and nothing else moves
    it, so a timed search plays the same batches on any machine."""

    def __init__(self, batch_s: float, inner=None) -> None:
        self.inner = inner if inner is not None else UniformInference()
        self.batch_s = batch_s
        self.t = 0.0
        self.starts: list[float] = []  # the clock when each batch began

    def now(self) -> float:
        return self.t

    def evaluate(self, planes, mask):
        self.starts.append(self.t)
        self.t += self.batch_s
        return self.inner.evaluate(planes, mask)


def test_search_until_stops_within_one_batch_of_the_deadline() -> None:
    settings = {"leaves_per_game": 8, "dirichlet_epsilon": 0.0}
    mcts = new_search(2, 8, settings)
    mcts.reset(1, Position.from_fen("W:W23:B18,19").game)
    inference = SimulatedTime(batch_s=0.25)
    stats = search_until(mcts, inference, 0.9, chunk=8, clock=inference.now)
    # The clock is read between batches: the batches that began before the deadline ran, the
    # last of them ending past it (at 1.0), and none began after it.
    assert inference.starts == [0.0, 0.25, 0.5, 0.75]
    assert stats.batches == 4 and inference.now() == 1.0
    # A round adds at most `chunk` visits past the most-searched root, so batches stay small.
    assert stats.leaves <= 2 * 8 * stats.batches
    visits = [mcts.root_child_visits(i) for i in range(2)]
    assert min(visits) > 0 and max(visits) < HUGE
    assert mcts.simulations == 100  # the object's own setting is back


def test_search_until_past_its_deadline_still_evaluates_a_new_root() -> None:
    mcts = new_search(1, 8, {"dirichlet_epsilon": 0.0})
    stats = search_until(mcts, UniformInference(), time.perf_counter() - 1.0, chunk=8)
    assert (stats.batches, stats.leaves) == (1, 1)  # the root alone: its priors, no visits
    assert mcts.root_child_visits(0) == 0 and mcts.tree_size(0) > 1
    mcts.choose(0, 0.0)  # a move can be chosen from the priors
    again = search_until(mcts, UniformInference(), time.perf_counter() - 1.0, chunk=8)
    assert (again.batches, again.leaves) == (0, 0)  # expanded: nothing after the deadline


def test_search_until_returns_at_once_on_a_forced_root() -> None:
    mcts = new_search(1, 8, {"dirichlet_epsilon": 0.0})
    mcts.reset(0, Position.from_fen("B:W18:B14").game)  # 14x23, the only move
    stats = search_until(mcts, UniformInference(), time.perf_counter() + 60.0, chunk=8)
    assert (stats.batches, stats.leaves) == (0, 0)


# ----------------------------------------------------------------------------- the player


def test_a_timed_move_searches_and_reports_its_simulations(tiny_checkpoint) -> None:
    for spec in ("uniform-mcts:t60", f"{tiny_checkpoint}:t60,threads=1"):
        player = make_player(spec)
        # 25 ms of the simulated clock a batch: batches begin at 0, 25 and 50 ms of the 60.
        player.inference = timed = SimulatedTime(batch_s=0.025, inner=player.inference)
        player.clock = timed.now
        position = Position()
        move = player.choose(position)
        assert timed.starts == [0.0, 0.025, 0.05]
        assert move in position.legal_moves()
        assert 0 < player.last_simulations < HUGE
        assert player.last_visits == player.last_simulations  # a fresh tree: all are new
        stats = player.stats()
        assert stats.pop("ms") > 0  # a timed player counts its milliseconds
        assert stats == {
            "moves": 1,
            "forced": 0,
            "simulations": player.last_simulations,
            "evaluations": player.evaluations,
            "reused": 0,
            "book_moves": 0,
            "egdb_moves": 0,
        }
        assert player.evaluations > 1  # the root and at least one batch below it


class CountingInference(UniformInference):
    """The uniform inference, counting the positions it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.rows = 0

    def evaluate(self, planes, mask):
        self.rows += len(planes)
        return super().evaluate(planes, mask)


@pytest.mark.parametrize("budget", [{"time_ms": 30}, {"time_ms": 0}])
def test_the_evaluation_count_is_what_the_network_was_sent(budget) -> None:
    inference = CountingInference()
    player = MCTSPlayer(inference, {"simulations": 40}, **budget)
    position = Position()
    for _ in range(4):
        position.play(player.choose(position))
    assert player.searched > 0
    assert player.evaluations == inference.rows > 0


def test_a_forced_move_is_played_without_search() -> None:
    player = make_player("uniform-mcts:t5000")
    position = Position.from_fen(FORCED_JUMP)
    move = player.choose(position)  # 5 s of budget: the test would hang if it searched
    assert str(move) == "14x23x32"
    assert player.evaluations == 0 and player.last_simulations == 0
    assert player.stats() == {
        "ms": 0,  # a forced move is not counted as searched
        "moves": 0,
        "forced": 1,
        "simulations": 0,
        "evaluations": 0,
        "reused": 0,
        "book_moves": 0,
        "egdb_moves": 0,
    }


def test_a_timed_player_reuses_its_tree_and_a_match_reports_its_search() -> None:
    deck = load_openings()
    player = make_player("uniform-mcts:t10")
    match = play_match(player, make_player("random"), deck, games=2, seed=3, max_plies=80)
    # Every decision but a game's first starts from the subtree kept from the previous one,
    # forced moves (played without search, the tree advanced along them) included.
    assert player.reused == player.decisions - match.num_games > 0
    assert player.searched + player.forced == player.decisions
    search = match.search("a")
    assert search["moves"] == player.searched and search["forced"] == player.forced
    assert search["reused"] == player.reused
    assert search["simulations"] == pytest.approx(player.simulations_done / player.searched)
    assert 0 < search["simulations"] < HUGE
    assert match.search("b") == {}  # random does not search
    assert match.summary_dict()["a_search"] == search
    assert "b_search" not in match.summary_dict()
    assert match.search_summary() == [
        f"uniform-mcts:t10: {search['simulations']:,.0f} simulations, "
        f"{search['ms']:,.0f} ms per move "
        f"({player.searched} moves searched, {player.forced} forced)"
    ]


def test_fixed_simulation_players_count_too_and_play_as_before() -> None:
    deck = load_openings()
    player = make_player("uniform-mcts:sims=24")
    match = play_match(player, make_player("minimax:2"), deck, games=2, seed=1, max_plies=60)
    a, b = match.search("a"), match.search("b")
    # A fresh root gets exactly 24 visits; a kept subtree may already hold more.
    assert a["simulations"] <= 24 and a["moves"] > 0
    minimax = MinimaxPlayer(depth=2)
    assert 1.0 <= b["depth"] <= 2.0  # depth 2, less where a move is forced or a win is found
    assert b["nodes"] > 0
    again = play_match(
        make_player("uniform-mcts:sims=24"), minimax, deck, games=2, seed=1, max_plies=60
    )
    assert again.pairs == match.pairs  # deterministic, counters aside
    assert again.search("a") == a


def test_pair_records_carry_the_counters_and_old_records_load() -> None:
    game = PlayedGame("A", "B", "start", ("11-15",), "1/2-1/2", "ply cap")
    pair = PairRecord(
        0, "start", game, game, a_stats={"moves": 4, "simulations": 400}, b_stats=None
    )
    d = json.loads(json.dumps(pair.to_dict()))
    assert d["a_stats"] == {"moves": 4, "simulations": 400} and "b_stats" not in d
    back = PairRecord.from_dict(d)
    assert back == pair and back.a_stats == {"moves": 4, "simulations": 400}
    assert back.b_stats is None
    old = {k: v for k, v in d.items() if k != "a_stats"}  # as written before the counters
    assert PairRecord.from_dict(old).a_stats is None
    result = MatchResult("A", "B", (back, PairRecord.from_dict(old)))
    assert result.search("a") == {"moves": 4, "simulations": 100.0}
    assert result.search("b") == {}
    with pytest.raises(ValueError, match="side must be"):
        result.search("c")
    with pytest.raises(ValueError, match="game pair a_stats must be a mapping"):
        PairRecord.from_dict(d | {"a_stats": [4, 400]})


def test_minimax_stats_sum_depth_and_nodes() -> None:
    player = MinimaxPlayer(depth=3)
    assert player_stats(player) == {"moves": 0, "depth": 0, "nodes": 0}
    position = Position()
    player.choose(position)
    first = player.last
    player.reset()  # a new game keeps the counters
    player.choose(position)
    assert player_stats(player) == {
        "moves": 2,
        "depth": 2 * first.depth,
        "nodes": 2 * first.nodes,
    }
    assert player_stats(make_player("random")) == {}


# ----------------------------------------------------------------------------- the benchmark


def test_time_equal_table_runs_end_to_end(tmp_path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "strength.py"),
            "--time-equal",
            "10",
            "--games",
            "2",
            "--workers",
            "1",
            "--max-plies",
            "40",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "ms/move" in line)
    assert "net sims/move" in lines[header] and "minimax depth" in lines[header]
    row = lines[header + 1].split()
    assert row[0] == "10" and row[1] == "2"
    wins, draws, losses = (int(x) for x in row[2].split("/"))
    assert wins + draws + losses == 2
    sims, depth, nodes = (float(x.replace(",", "")) for x in row[-3:])
    assert 0 < sims < HUGE and depth >= 1 and nodes > 0
    assert "2 games in" in out.stdout
    assert (tmp_path / "games.pdn").read_text().count("[Event ") == 2


def test_time_equal_refuses_bad_times() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "strength.py"), "--time-equal", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "positive milliseconds" in out.stderr


# ----------------------------------------------------------------------------- the play server


def test_play_server_takes_the_match_tools_time_form_and_searches_to_it() -> None:
    engines = Players(load_settings({"torch_threads": 1}), Roots("runs", "game/data"))
    for text in ("uniform-mcts:t80", "uniform-mcts:ms=80"):
        spec = engines.parse(text)
        assert spec.budget == Budget(ms=80, chunk=16)
    with pytest.raises(ValueError, match="bad option 'tfast'"):
        engines.parse("uniform-mcts:tfast")
    # The server's time budget runs the players' driver (game.mcts.search_until).
    answer = engines.move(Position(), engines.parse("uniform-mcts:t80"))
    assert answer["move"] in [str(m) for m in Position().legal_moves()]
    assert 0 < answer["visits"] < HUGE


class _StallingInference(UniformInference):
    """Uniform, but each forward pass takes longer than the whole move's budget."""

    def evaluate(self, planes, mask):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return super().evaluate(planes, mask)


def test_a_timed_move_gets_one_batch_even_when_the_budget_is_gone() -> None:
    # 5 ms per move, 50 ms per forward pass: the root's evaluation alone spends the budget, and
    # the move is still searched (one batch of leaves_per_game), not played from the priors.
    player = MCTSPlayer(_StallingInference(), {"leaves_per_game": 4}, name="stalled", time_ms=5)
    position = Position()
    move = player.choose(position)
    assert move in position.legal_moves()
    assert player.last_simulations == 4
