"""The fast player's evaluation in generations (learner/nneval): storage, labels, resume, the loop.

Real parts throughout: a private redis-server per test, Ray for the whole loop, the compiled
core's alpha-beta and endgame database (6x6 up to 3 pieces: built in under a second).
"""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from actors.ab_selfplay import ABSelfPlayWorker, ABSettings, play_ab_game
from checkerzero.store.positions import (
    FLAG_EXACT,
    FLAG_WHITE_TO_MOVE,
    POSITION_DTYPE,
    PositionStream,
    false_positive_rate,
    position_hashes,
)
from evaluation.ladder.table import LadderTable, TableRow, write_table
from game import _core, nneval
from game.egdb.build import cached_database
from game.openings import load_openings
from game.pdn import iter_pdn
from game.position import Position
from learner.nneval import shards
from learner.nneval.fit import features
from learner.nneval.lineage import Lineage
from learner.nneval.loop import open_generation, selfplay_phase
from learner.nneval.model import QUANTISED_TOLERANCE_CM, NNEvalModel

RUNGS6 = {"random": 0.0, "minimax:1": 300.0, "minimax:2": 600.0}  # a test table's rungs (6x6)
TINY_BITS = 16  # an 8 KiB filter: plenty for a few thousand positions


@pytest.fixture(scope="module")
def egdb6(tmp_path_factory):
    folder = tmp_path_factory.mktemp("egdb")
    return cached_database(str(folder), 6, 3, 1)


def random_net(size: int, seed: int, spread: float = 3.0) -> nneval.NNEvalNet:
    torch.manual_seed(seed)
    model = NNEvalModel(size, 16, 8, 8)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(spread)
    model.clip_to_format()
    return nneval.quantise(model.float_weights(), size=size, output_scale=200), model


def test_quantised_equals_float_within_the_tolerance() -> None:
    net, model = random_net(8, seed=1)
    core = net.core()
    deck = load_openings("deck", 8)
    rows = np.concatenate(
        [
            play_ab_game(core, deck, ABSettings(depth=2), seed=5, generation=0, game_id=i)
            for i in range(4)
        ]
    )
    us, them = features(rows, 8)
    with torch.no_grad():
        floats = model(us, them).numpy() * net.output_scale
    cores = []
    for r in rows:
        white = bool(r["flags"] & FLAG_WHITE_TO_MOVE)
        g = _core.Game.from_bitboards(8, int(r["black"]), int(r["white"]), int(r["kings"]), white)
        cores.append(_core.nneval_evaluate(core, g))
    diff = np.abs(np.array(cores) - floats)
    assert len(rows) > 100 and np.abs(floats).mean() > 20  # scores that are not all ~0
    assert diff.max() <= QUANTISED_TOLERANCE_CM
    # Without the fake quantisation the same weights score differently: the test can fail.
    model.quantised = False
    with torch.no_grad():
        plain = model(us, them).numpy() * net.output_scale
    assert np.abs(np.array(cores) - plain).max() > QUANTISED_TOLERANCE_CM


def test_a_corrupt_foreign_or_oversized_evaluation_is_refused_naming_it(tmp_path: Path) -> None:
    good = nneval.DEFAULT_PATH.read_bytes()
    cases = {
        "corrupt": good[: len(good) // 2],
        "foreign": good.replace(b"checkerzero-nneval", b"checkerzero-other!"),
        "oversized": good + b"\0" * nneval.MAX_FILE_BYTES,
    }
    for name, data in cases.items():
        lineage = Lineage(tmp_path / name)
        lineage.folder.mkdir()
        lineage.initial_path.write_bytes(data)
        with pytest.raises(nneval.NNEvalFileError) as err:
            lineage.ensure_initial(lambda p: None)
        message = str(err.value)
        assert str(lineage.initial_path) in message and "\n" not in message, (name, message)
        with pytest.raises(nneval.NNEvalFileError, match="evaluation version 3 from the store"):
            nneval.loads(data, "evaluation version 3 from the store")


def test_dedup_keeps_each_position_once(client) -> None:
    stream = PositionStream(client, "t", bits_log2=TINY_BITS, probes=5)
    stream.begin(0, 0, 0)
    core = nneval.load_core()
    rows = play_ab_game(core, load_openings("deck", 8), ABSettings(depth=2), seed=0,
                        generation=0, game_id=0)  # fmt: skip
    _, first = np.unique(position_hashes(rows), return_index=True)
    rows = rows[np.sort(first)]  # each position once (a game may repeat one: kings shuffling)
    twice = np.concatenate([rows, rows[:3]])  # three positions repeated inside one game
    assert stream.push(0, twice) == len(rows)
    assert stream.push(0, rows) == 0  # the same game again: nothing new
    state = stream.state()
    assert (state.positions, state.duplicates, state.games) == (len(rows), len(rows) + 3, 2)
    assert stream.push(1, rows) == -1  # a game of a generation that is not open
    stored = np.frombuffer(b"".join(stream.pending(10)), POSITION_DTYPE)
    assert np.array_equal(stored, rows)
    assert len(np.unique(position_hashes(stored))) == len(stored)
    # The stated memory and error rate of the default filter.
    assert PositionStream(client, "u").filter_bytes == 64 << 20
    assert false_positive_rate(30_000_000, 29, 7) < 0.001


def test_database_positions_take_the_exact_value_and_end_the_game(egdb6) -> None:
    # Two black kings against one white king, Black to move: a database win for Black.
    #   . . . . . .
    #   K . K . . .    (6x6, squares 1..18)
    #   . . . . . .
    #   . . . . . .
    #   . . . . . W
    #   . . . . . .
    pos = Position.from_fen("B:WK16:BK4,K5", 6)
    assert egdb6.probe(pos) == "win"
    net, _ = random_net(6, seed=2)
    start = pos.game
    rows = play_ab_game(net.core(), [], ABSettings(depth=2, size=6), seed=0, generation=0,
                        game_id=7, egdb=egdb6, start=start)  # fmt: skip
    assert len(rows) == 1  # adjudicated at once
    r = rows[0]
    assert r["flags"] == FLAG_EXACT and r["score"] == nneval.SCORE_LIMIT and r["result"] == 1
    # White to move in a lost position: the mover's loss, from White's side.
    lost = Position.from_fen("W:WK16:BK4,K5", 6)
    assert egdb6.probe(lost) in ("loss", "draw")
    rows = play_ab_game(net.core(), [], ABSettings(depth=2, size=6), seed=0, generation=0,
                        game_id=8, egdb=egdb6, start=lost.game)  # fmt: skip
    want = {"loss": (-nneval.SCORE_LIMIT, -1), "draw": (0, 0)}[egdb6.probe(lost)]
    assert (int(rows[0]["score"]), int(rows[0]["result"])) == want
    assert rows[0]["flags"] == FLAG_EXACT | FLAG_WHITE_TO_MOVE


def _worker_cfg(server, tmp_path: Path) -> dict:
    return {
        "replay": {"namespace": "t", "connect_retries": 2, "connect_backoff_s": 0.001},
        "nneval": {
            "dedup": {"bits_log2": TINY_BITS, "probes": 5},
            "selfplay": {
                "depth": 2,
                "random_plies": 4,
                "random_moves": 2,
                "random_until": 20,
                "max_plies": 100,
                "tt_mb": 1,
                "openings": "deck",
                "egdb": False,
            },
        },
        "game": {"size": 6},
        "seed": 0,
    }


def test_a_killed_loop_resumes_its_generation_with_no_position_lost_or_twice(
    server, client, tmp_path: Path
) -> None:
    stream = PositionStream(client, "t", bits_log2=TINY_BITS, probes=5)
    net, _ = random_net(6, seed=3)
    stream.publish_eval(0, nneval.save(net, tmp_path / "e.nn").read_bytes())
    worker = ABSelfPlayWorker(_worker_cfg(server, tmp_path), 0, server.url, server.password)
    folder = tmp_path / "gen-000"
    stop = threading.Event()
    played = []

    def tick() -> None:  # the actor's work, in this process: one game per poll
        played.append(worker.play_one())
        if len(played) == 12:
            stop.set()  # killed mid-generation

    stream_target = 1500
    selfplay_phase(stream, folder, 0, stream_target, 0, shard_items=4, tick=tick, stop=stop)
    assert 0 < shards.count_rows(shards.shard_files(folder)) < stream_target
    # Killed again between writing a shard and trimming its items from Redis.
    open_generation(stream, folder, 0, stream_target, 0)
    for _ in range(3):
        worker.play_one()
    items = stream.pending(100)
    state = stream.state()
    rows = np.concatenate([np.frombuffer(i, POSITION_DTYPE) for i in items])
    shards.write_shard(folder, rows, state.drained, state.drained + len(items), state.store_id)

    def resume_tick() -> None:
        worker.play_one()

    total = selfplay_phase(stream, folder, 0, stream_target, 0, shard_items=4, tick=resume_tick)
    paths = shards.shard_files(folder)
    spans = [tuple(int(x) for x in p.stem.split("-")[1:]) for p in paths]
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    everything = np.concatenate(list(shards.iter_rows(paths, batch_rows=100)))
    assert len(everything) == total == stream.state().positions >= stream_target
    assert len(np.unique(position_hashes(everything))) == total  # none twice


def _loop_cfg(config, tmp: Path, lineage: str, flip: bool, *extra: str):
    return config(
        *extra,
        f"run_dir={tmp}/run-{lineage}",
        "preset=nneval",
        "game=small",
        "cluster.address=local",
        "cluster.num_cpus=2",
        "nneval.initial=random",
        "nneval.generations=1",
        "nneval.positions=3000",
        f"nneval.lineage_dir={tmp}/{lineage}",
        f"nneval.data_dir={tmp}/data",
        "nneval.shard_games=20",
        "nneval.selfplay.actors=2",
        "nneval.selfplay.depth=3",
        "nneval.selfplay.max_plies=120",
        "egdb.pieces=3",
        "egdb.build_workers=1",
        f"egdb.dir={tmp}/egdb",
        f"nneval.dedup.bits_log2={TINY_BITS + 4}",
        "nneval.train.hidden=16",
        "nneval.train.dense1=8",
        "nneval.train.dense2=8",
        "nneval.train.epochs=4",
        "nneval.train.batch=128",
        "nneval.train.lr=0.01",
        "nneval.train.lambda_start=0",  # the random parent's search scores are noise
        "nneval.train.lambda_end=0",
        "nneval.train.validation=0.1",
        "nneval.train.shuffle_rows=5000",
        f"nneval.train.flip_labels={str(flip).lower()}",
        "nneval.gate.depth=2",
        "nneval.gate.parallel=2",
        "nneval.gate.max_plies=120",
        "nneval.gate.sprt.elo1=100",
        "nneval.gate.sprt.max_games=100",
        "nneval.check.pairs=6",
        "nneval.check.plies=4",
        "nneval.check.depth=2",
        "nneval.check.max_plies=120",
        "logging.wandb.mode=disabled",
    )


def test_the_loop_stores_trains_gates_and_promotes_a_generation(config, tmp_path: Path) -> None:
    from learner.start import run

    table = tmp_path / "table.csv"  # a small board's ladder: these rungs, these ratings
    rows = [TableRow(p, elo, elo - 20, elo + 20, 10, 100, 50) for p, elo in RUNGS6.items()]
    write_table(LadderTable(tuple(rows), 100.0, None, 0.95, {"status": "test"}), table)
    rated = (f"nneval.ladder.table={table}", "nneval.ladder.pairs=2")
    cfg = _loop_cfg(config, tmp_path, "lineage", False, *rated)
    summary = run(cfg)
    (rec,) = summary["generations"]
    assert rec["positions"] >= 3000 and rec["promoted"] and rec["gate"]["decision"] == "accept"
    assert 0 < rec["selfplay_s"] < rec["wall_s"]  # self-play, then training, gate and rating
    # checked from openings outside the training data too: a pair from each, and it wins there
    assert rec["check"]["games"] == 12 and rec["check"]["elo"] > 0
    # the gate's games, for reading: as many as the SPRT read, the players by their roles
    gate_games = list(iter_pdn(Lineage(tmp_path / "lineage").gate_pdn_path(0).read_text(), size=6))
    assert len(gate_games) == rec["gate"]["games"]
    assert {gate_games[0].tags["Black"], gate_games[0].tags["White"]} == {
        "ab+nn:2:candidate",
        "ab+nn:2:best",
    }
    lineage = Lineage(tmp_path / "lineage")
    assert lineage.records()[0]["candidate_sha256"] == rec["candidate_sha256"]
    cand = nneval.load(lineage.candidate_path(0))
    assert cand.metadata["generation"] == "0" and cand.metadata["run"] == "run-lineage"
    assert lineage.best_before(1) == lineage.candidate_path(0)
    run_dir = tmp_path / "run-lineage"
    names = ("nneval_loss.csv", "nneval_loss.png", "nneval_elo.csv", "nneval_elo.png")
    for name in (*names, "nneval_elo_positions.png"):
        assert (run_dir / name).is_file(), name
    # rated on the ladder: two pairs against each of the two rungs nearest its estimate (the
    # top rung's), fitted with the rungs fixed; the curve beside the others
    ladder = rec["ladder"]
    assert set(ladder["rungs"]) == {"minimax:1", "minimax:2"} and ladder["games"] == 8
    assert ladder["lower"] < ladder["elo"] < ladder["upper"] and ladder["settings"] == "depth 2"
    assert (
        sum(sum(v[k] for k in ("wins", "draws", "losses")) for v in ladder["rungs"].values()) == 8
    )
    for folder in (run_dir, lineage.folder):
        csv = (folder / "nneval_ladder.csv").read_text().splitlines()
        assert (
            len(csv) == 2 and csv[1].startswith("0,") and (folder / "nneval_ladder.png").is_file()
        )
    # A generation recorded without a rating is rated when the loop resumes, and nothing else.
    path = lineage.record_path(0)
    path.write_text(json.dumps(json.loads(path.read_text()) | {"ladder": None}))
    assert run(cfg)["generations"] == []
    again = lineage.records()[0]
    assert again["ladder"]["games"] == 8 and again["candidate_sha256"] == rec["candidate_sha256"]
    # The same data with its labels' signs flipped trains an evaluation that loses the gate.
    summary = run(_loop_cfg(config, tmp_path, "flipped", flip=True))
    (flipped,) = summary["generations"]
    assert flipped["positions"] == rec["positions"]  # the stored shards, reused
    assert flipped["selfplay_s"] == rec["selfplay_s"]  # with the time they took to play
    assert not flipped["promoted"] and flipped["gate"]["elo"] < 0
    assert json.loads((tmp_path / "flipped" / "gen-000.json").read_text())["promoted"] is False


def test_a_lost_generation_is_played_again_identically_and_lineages_do_not_mix(
    tmp_path: Path,
) -> None:
    net, _ = random_net(6, seed=4)
    deck = load_openings("deck", 6)
    settings = ABSettings(depth=3, size=6, max_plies=100)

    def game(i: int, seed: int = 9) -> np.ndarray:
        return play_ab_game(net.core(), deck, settings, seed=seed, generation=2, game_id=i)

    first = [game(i) for i in range(6)]
    assert all(np.array_equal(a, game(i)) for i, a in enumerate(first))  # same seed: same games
    assert not all(np.array_equal(a, game(i, seed=10)) for i, a in enumerate(first))
    assert len({position_hashes(a)[:8].tobytes() for a in first}) == 6  # the games differ
    source = {"generation": 2, "seed": 9, "parent_sha256": "a" * 64}
    shards.claim_folder(tmp_path / "gen-002", source)
    shards.claim_folder(tmp_path / "gen-002", source)  # the same lineage: accepted
    with pytest.raises(shards.ShardError, match=r"gen-002/source.json: positions of another"):
        shards.claim_folder(tmp_path / "gen-002", source | {"parent_sha256": "b" * 64})
    # A generation played over two sittings reports the self-play of both.
    assert shards.selfplay_seconds(tmp_path / "gen-002") == 0.0
    assert shards.add_selfplay_seconds(tmp_path / "gen-002", 1800.0) == 1800.0
    assert shards.add_selfplay_seconds(tmp_path / "gen-002", 2160.0) == 3960.0
    assert shards.selfplay_seconds(tmp_path / "gen-002") == 3960.0
    (tmp_path / "gen-002" / shards.SELFPLAY_FILE).write_text("{")
    with pytest.raises(shards.ShardError, match=r"gen-002/selfplay.json: unreadable"):
        shards.selfplay_seconds(tmp_path / "gen-002")


def test_selfplay_progress_line_names_positions_rate_duplicates_and_eta(caplog, monkeypatch):
    from checkerzero.store.positions import StreamState
    from learner.nneval import loop

    def state(positions: int, games: int, duplicates: int) -> StreamState:
        return StreamState(0, 1000, positions, games, duplicates, 0, 0, 0, 0, "id")

    clock = iter([100.0, 110.0, 110.5])
    monkeypatch.setattr(loop.time, "monotonic", lambda: next(clock))
    progress = loop.SelfPlayProgress(3, 1000, state(100, 2, 0), every_s=5.0)
    with caplog.at_level("INFO", logger=loop.__name__):
        progress.report(state(600, 12, 500))  # 10 s later: 50 positions/s, 500 of 1,000 dropped
        progress.report(state(700, 13, 500))  # 0.5 s later: too soon for another line
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "generation 3 self-play: 600/1,000 positions (60.0%), 50 positions/s, 1.0 games/s, "
        "50.0% duplicates dropped, ETA 00:00:08"
    ]


def test_scattered_random_moves_make_games_differ_and_stay_seeded() -> None:
    """Games from the same ballot and exits that differ only in their scattered random moves part
    before random_until; the same seed gives the same game, and the positions a random move was
    played from are not stored."""
    net, _ = random_net(8, seed=1)
    core = net.core()
    deck = load_openings("deck", 8)[:1]  # one ballot: the openings alone cannot tell games apart
    plain = ABSettings(depth=2, random_plies=0)
    scattered = ABSettings(depth=2, random_plies=0, random_moves=4, random_until=30)

    def positions(settings: ABSettings, game_id: int) -> list[tuple[int, int, int]]:
        rows = play_ab_game(core, deck, settings, seed=3, generation=0, game_id=game_id)
        return [(int(r["black"]), int(r["white"]), int(r["ply"])) for r in rows]

    same = {tuple(positions(plain, i)) for i in range(4)}
    assert len(same) == 1  # a fixed-depth search from one start replays one game
    games = [positions(scattered, i) for i in range(4)]
    assert len({tuple(g) for g in games}) == 4
    assert games[0] == positions(scattered, 0)
    stored_plies = {p for _, _, p in games[0] if p < 30}
    assert len(stored_plies) <= 30 - 4  # four plies of the first thirty were random moves


def test_the_check_openings_are_positions_no_generation_stored(client) -> None:
    from game.openings import random_openings
    from learner.nneval.gating import unseen_openings

    stream = PositionStream(client, "chk", bits_log2=TINY_BITS + 4, probes=5)
    stream.begin(0, 0, 0)
    every = random_openings(8, plies=4, count=64, seed=9)

    def rows_of(openings) -> np.ndarray:
        rows = np.zeros(len(openings), POSITION_DTYPE)
        for i, o in enumerate(openings):
            g = o.start_game()
            rows[i]["black"], rows[i]["white"], rows[i]["kings"] = g.black, g.white, g.kings
            rows[i]["flags"] = FLAG_WHITE_TO_MOVE if g.white_to_move else 0
        return rows

    fresh = unseen_openings(stream.stored, 8, count=64, plies=4, seed=9)
    assert len(fresh) == 64 and [o.moves for o in fresh] == [o.moves for o in every]
    stream.remember(rows_of(every[:40]))  # a generation stored these
    assert stream.stored(rows_of(every[:40])).all()
    left = unseen_openings(stream.stored, 8, count=64, plies=4, seed=9)
    assert not {o.moves for o in left} & {o.moves for o in every[:40]}
    assert not stream.stored(rows_of(left)).any() and len(left) > 24
