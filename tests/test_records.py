"""Game records: byte round trip, rejection of damaged bytes, and the training samples."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig
from record_cases import with_crc

from game import _core
from game.records import (
    GameRecord,
    Result,
    Termination,
    histories,
    sparse_visits,
    training_samples,
)


def random_record(seed: int = 0, size: int = 6, max_plies: int = 60) -> tuple[GameRecord, list]:
    """A record of a random game (one decision per action) and the core states seen on the way."""
    rng = np.random.default_rng(seed)
    game = _core.Game(size, max_plies)
    positions, played, offsets, actions, counts, wdl, packed = [], [], [0], [], [], [], []
    while game.result() == 0:
        legal = game.legal_actions()
        visits = np.zeros(size * size * 2, np.int64)
        visits[legal] = rng.integers(1, 50, len(legal))
        a, c = sparse_visits(visits)
        positions.append(game.pack_history()[0])
        packed.append(game.pack_history())
        actions.extend(a)
        counts.extend(c)
        offsets.append(len(actions))
        wdl.append(rng.dirichlet([1, 1, 1]))
        played.append(int(rng.choice(legal)))
        game.step(played[-1])
    record = GameRecord(
        board_size=size,
        positions=np.array(positions, np.uint32),
        played=np.array(played, np.uint8),
        visit_offsets=np.array(offsets, np.uint32),
        visit_actions=np.array(actions, np.uint8),
        visit_counts=np.array(counts, np.uint16),
        root_wdl=np.array(wdl, np.float16),
        result=Result(game.result()),
        termination=Termination(game.end_reason()),
        opening_id=17,
        network_version=123456789012,
        actor_id=3,
        resign_enabled=False,
        resign_trigger=min(5, len(positions) - 1),
    )
    return record, packed


def assert_same(a: GameRecord, b: GameRecord) -> None:
    for name in (
        "positions",
        "played",
        "visit_offsets",
        "visit_actions",
        "visit_counts",
        "root_wdl",
        "full_search",
    ):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    for name in (
        "board_size",
        "result",
        "termination",
        "opening_id",
        "network_version",
        "actor_id",
        "resign_enabled",
        "resign_trigger",
    ):
        assert getattr(a, name) == getattr(b, name), name


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_round_trip(seed):
    record, _ = random_record(seed)
    data = record.to_bytes()
    back = GameRecord.from_bytes(data)
    assert_same(record, back)
    assert back.to_bytes() == data


def test_empty_record_round_trips():
    empty = GameRecord(
        board_size=8,
        positions=np.zeros((0, 4), np.uint32),
        played=np.zeros(0, np.uint8),
        visit_offsets=np.zeros(1, np.uint32),
        visit_actions=np.zeros(0, np.uint8),
        visit_counts=np.zeros(0, np.uint16),
        root_wdl=np.zeros((0, 3), np.float16),
        result=Result.DRAW,
        termination=Termination.PLY_CAP,
        resign_enabled=True,
    )
    assert_same(empty, GameRecord.from_bytes(empty.to_bytes()))


def test_truncated_bytes_raise():
    data = random_record(0)[0].to_bytes()
    for n in [0, 3, 10, 45, len(data) // 2, len(data) - 5, len(data) - 1]:
        with pytest.raises(ValueError, match="truncated"):
            GameRecord.from_bytes(data[:n])
    with pytest.raises(ValueError, match="truncated"):
        GameRecord.from_bytes(data + b"\0")


def test_corrupted_bytes_raise():
    data = bytearray(random_record(0)[0].to_bytes())
    for where in [50, len(data) // 2, len(data) - 6]:
        bad = bytearray(data)
        bad[where] ^= 0x10
        with pytest.raises(ValueError, match="CRC"):
            GameRecord.from_bytes(bytes(bad))
    with pytest.raises(ValueError, match="not a game record"):
        GameRecord.from_bytes(b"PK\x03\x04" + bytes(data[4:]))
    newer = bytearray(data)
    newer[4] = 99
    with pytest.raises(ValueError, match="schema_version 99"):
        GameRecord.from_bytes(bytes(newer))


def test_inconsistent_fields_raise():
    record, _ = random_record(0)
    with pytest.raises(ValueError, match="positions must be"):
        GameRecord(**{**record.__dict__, "positions": record.positions.astype(np.int64)})
    bad_offsets = record.visit_offsets.copy()
    bad_offsets[-1] += 1
    with pytest.raises(ValueError, match="visit_offsets end"):
        GameRecord(**{**record.__dict__, "visit_offsets": bad_offsets})
    resigned_early = record.played.copy()
    resigned_early[0] = 255
    with pytest.raises(ValueError, match="only the last decision"):
        GameRecord(**{**record.__dict__, "played": resigned_early})
    with pytest.raises(ValueError, match="resign_trigger"):
        GameRecord(**{**record.__dict__, "resign_trigger": record.num_decisions})


# ------------------------------------------------------------------------------------------
# Schema version 2: full or fast search per decision (playout cap randomization)
# ------------------------------------------------------------------------------------------

# A record written by the schema version 1 code (a 6x6 game of 26 decisions, opening 12,
# resignation enabled, the rule fired at decision 3), as hex.
RECORD_V1 = Path(__file__).parent / "golden" / "record_v1_6x6.hex"


def test_full_search_flags_round_trip_in_schema_version_2():
    record, _ = random_record(1)
    t = record.num_decisions
    full = np.arange(t) % 4 == 0  # every fourth decision a full search
    flagged = GameRecord(**{**record.__dict__, "full_search": full})
    data = flagged.to_bytes()
    assert data[4:6] == (2).to_bytes(2, "little")
    assert len(data) == len(record.to_bytes())  # the same size: the flags were there, all 1
    back = GameRecord.from_bytes(data)
    assert_same(flagged, back)
    np.testing.assert_array_equal(back.full_search, full)
    assert back.full_search.sum() == (t + 3) // 4
    # Left out, every decision is a full search.
    assert record.full_search.dtype == np.bool_ and record.full_search.all()
    assert len(record.full_search) == t


def test_schema_version_1_records_still_decode():
    data = bytes.fromhex(RECORD_V1.read_text().replace("\n", ""))
    assert data[4:6] == (1).to_bytes(2, "little")
    old = GameRecord.from_bytes(data)
    assert (old.board_size, old.num_decisions, old.opening_id) == (6, 26, 12)
    assert (old.resign_enabled, old.resign_trigger) == (True, 3)
    assert old.full_search.tolist() == [True] * 26  # version 1 had full searches only
    # Written again it is version 2: the same bytes, the version, and one flag byte a decision.
    again = old.to_bytes()
    assert again[4:6] == (2).to_bytes(2, "little")
    assert again[6:-30] == data[6:-4] and again[-30:-4] == b"\x01" * 26
    assert_same(old, GameRecord.from_bytes(again))
    # A version 1 header with version 2's length (or the reverse) does not decode.
    with pytest.raises(ValueError, match="does not match its header"):
        GameRecord.from_bytes(with_crc(again[:4] + data[4:6] + again[6:-4]))
    with pytest.raises(ValueError, match="does not match its header"):
        GameRecord.from_bytes(with_crc(data[:4] + again[4:6] + data[6:-4]))


def test_full_search_flags_are_checked_strictly():
    record, _ = random_record(2)
    t = record.num_decisions
    data = bytearray(record.to_bytes())
    bad = bytearray(data)
    bad[-4 - t + 5] = 2  # decision 5's flag
    with pytest.raises(ValueError, match="full_search of decision 5 is 2, not 0 or 1"):
        GameRecord.from_bytes(with_crc(bytes(bad[:-4])))
    with pytest.raises(ValueError, match="full_search must be a 1-d bool array"):
        GameRecord(**{**record.__dict__, "full_search": np.ones(t, np.uint8)})
    with pytest.raises(ValueError, match=f"full_search must have one flag per decision \\({t}\\)"):
        GameRecord(**{**record.__dict__, "full_search": np.ones(t + 1, np.bool_)})


def test_histories_match_the_core():
    record, packed = random_record(1)
    got = histories(record.positions, np.arange(record.num_decisions))
    np.testing.assert_array_equal(got, np.array(packed, np.uint32))


def test_training_targets():
    record, packed = random_record(2)
    idx = np.arange(record.num_decisions)
    hist, pi, wdl = training_samples(record, idx)
    np.testing.assert_array_equal(hist, np.array(packed, np.uint32))
    np.testing.assert_allclose(pi.sum(axis=1), 1.0, rtol=1e-6)
    for t in (0, record.num_decisions // 2):
        actions, counts = record.visits(t)
        np.testing.assert_allclose(pi[t, actions], counts / counts.sum(), rtol=1e-6)
        assert np.count_nonzero(pi[t]) == len(actions)
    white = (record.positions[:, 3] & 1).astype(bool)
    decisive = GameRecord(**{**record.__dict__, "result": Result.WHITE_WIN})
    _, _, wdl = training_samples(decisive, idx)
    np.testing.assert_array_equal(wdl[white], np.tile([1, 0, 0], (white.sum(), 1)))
    np.testing.assert_array_equal(wdl[~white], np.tile([0, 0, 1], ((~white).sum(), 1)))
    drawn = GameRecord(**{**record.__dict__, "result": Result.DRAW})
    _, _, wdl = training_samples(drawn, idx[:3])
    np.testing.assert_array_equal(wdl, np.tile([0, 1, 0], (3, 1)))
    with pytest.raises(ValueError, match="decision indices"):
        training_samples(record, [record.num_decisions])


def test_value_target_mixes_the_result_with_the_searched_root_value():
    record, _ = random_record(3)
    root = np.tile(np.array([0.25, 0.5, 0.25], np.float16), (record.num_decisions, 1))
    root[1] = np.nan  # a forced move, played without a search
    drawn = GameRecord(**{**record.__dict__, "result": Result.DRAW, "root_wdl": root})
    idx = np.arange(record.num_decisions)
    _, _, wdl = training_samples(drawn, idx, q_weight=0.5)
    np.testing.assert_allclose(wdl[0], [0.125, 0.75, 0.125])
    np.testing.assert_array_equal(wdl[1], [0, 1, 0])  # the result alone
    np.testing.assert_allclose(wdl.sum(axis=1), 1.0, rtol=1e-6)
    _, _, pure = training_samples(drawn, idx, q_weight=0.0)
    np.testing.assert_array_equal(pure, np.tile([0, 1, 0], (len(idx), 1)))
    with pytest.raises(ValueError, match="q_weight"):
        training_samples(drawn, idx, q_weight=1.5)


def test_sparse_visits_scale_large_counts():
    visits = np.zeros(128, np.int64)
    visits[[3, 7, 100]] = [200_000, 100_000, 1]
    actions, counts = sparse_visits(visits)
    np.testing.assert_array_equal(actions, [3, 7, 100])
    assert counts.dtype == np.uint16
    np.testing.assert_array_equal(counts, [65535, 32767, 1])


# ------------------------------------------------------------------------------------------
# Records produced by self-play
# ------------------------------------------------------------------------------------------


@pytest.fixture()
def small_config(config):
    """``small_config(**selfplay)``: the 6x6 game, a small search, two games at a time."""

    def make(**selfplay) -> DictConfig:
        settings = {"games_in_parallel": 2, "openings": "start", "resign": False, **selfplay}
        overrides = ["game=small", "mcts.simulations=16", "mcts.leaves_per_game=4"]
        values = {k: str(v).lower() if isinstance(v, bool) else v for k, v in settings.items()}
        return config(*overrides, *(f"selfplay.{k}={v}" for k, v in values.items()))

    return make


class LosingInference:
    """Uniform priors; the side to move always loses."""

    def evaluate(self, planes, mask):
        m = mask.astype(np.float32)
        wdl = np.tile(np.array([0, 0, 1], np.float32), (len(mask), 1))
        return m / m.sum(axis=1, keepdims=True), wdl


def test_self_play_records_replay_exactly(small_config):
    from actors.self_play import play_games
    from game.mcts import UniformInference
    from game.pdn import read_pdn, write_pdn
    from game.record_pdn import record_moves, record_to_pdn

    records = play_games(UniformInference(), small_config(), n_games=5, seed=3)
    assert len(records) == 5  # two slots, refilled
    for r in records:
        game = _core.Game(6, 120)
        for t, action in enumerate(r.played):
            np.testing.assert_array_equal(r.positions[t], game.pack_history()[0])
            np.testing.assert_array_equal(histories(r.positions, [t])[0], game.pack_history())
            actions, _ = r.visits(t)
            assert int(action) in actions.tolist()
            game.step(int(action))
        assert r.result == Result(game.result())
        assert r.termination == Termination(game.end_reason())
        assert_same(r, GameRecord.from_bytes(r.to_bytes()))
    pdn = write_pdn(record_to_pdn(r, k) for k, r in enumerate(records))
    back = read_pdn(pdn, size=6)  # replays and checks every move
    assert [g.moves for g in back] == [record_moves(r) for r in records]
    assert [g.result for g in back] == [
        {1: "1-0", 2: "0-1", 3: "1/2-1/2"}[r.result] for r in records
    ]


def test_self_play_is_reproducible(small_config):
    from actors.self_play import play_games
    from game.mcts import UniformInference

    cfg = small_config(temperature_plies=100)
    cfg["mcts"]["dirichlet_epsilon"] = 0.25
    first = [r.to_bytes() for r in play_games(UniformInference(), cfg, 3, seed=11)]
    assert [r.to_bytes() for r in play_games(UniformInference(), cfg, 3, seed=11)] == first
    assert [r.to_bytes() for r in play_games(UniformInference(), cfg, 3, seed=12)] != first


def test_resignation_and_its_false_positive_measure(small_config):
    from actors.self_play import play_games, resign_false_positive_rate
    from game.records import RESIGNED

    # Searches of 0 simulations (fast ones of a playout cap that never searches fully): the root
    # value is the inference's own, a certain loss for the mover.
    cfg = small_config(resign=True, resign_disabled_share=0.0, resign_consecutive=3)
    cfg["selfplay"]["playout_cap"] = {"enabled": True, "full_share": 0.0, "fast_simulations": 0}
    for r in play_games(LosingInference(), cfg, n_games=2, seed=0):
        assert r.termination == Termination.RESIGNATION and r.resign_enabled
        assert r.played[-1] == RESIGNED and r.resign_trigger == r.num_decisions - 1
        white = bool(r.positions[-1, 3] & 1)
        assert r.result == (Result.BLACK_WIN if white else Result.WHITE_WIN)
        assert GameRecord.from_bytes(r.to_bytes()).played[-1] == RESIGNED
    cfg["selfplay"]["resign_disabled_share"] = 1.0
    played_on = play_games(LosingInference(), cfg, n_games=3, seed=0)
    assert all(r.termination != Termination.RESIGNATION and not r.resign_enabled for r in played_on)
    assert all(r.resign_trigger >= 0 for r in played_on)
    rate, n = resign_false_positive_rate(played_on)
    assert n == 3
    expected = 0
    for r in played_on:
        white = bool(r.positions[r.resign_trigger, 3] & 1)
        expected += r.result != (Result.BLACK_WIN if white else Result.WHITE_WIN)
    assert rate == expected / 3


GOLDEN = Path(__file__).parent / "golden" / "selfplay_6x6_seed5.pdn"


def test_fixed_seed_self_play_matches_golden_file(small_config):
    """A change in search or self-play behaviour shows as a diff of this PDN.

    Regenerate deliberately with CZ_UPDATE_GOLDEN=1 after checking the change is intended.
    (The RNG streams come from the C++ standard library: another library may differ.)
    """
    from actors.self_play import play_games
    from game.mcts import UniformInference
    from game.pdn import write_pdn
    from game.record_pdn import record_to_pdn

    cfg = small_config(temperature_plies=8)
    cfg["mcts"]["dirichlet_epsilon"] = 0.25
    records = play_games(UniformInference(), cfg, n_games=2, seed=5)
    text = write_pdn(record_to_pdn(r, k) for k, r in enumerate(records))
    if os.environ.get("CZ_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_command_line_plays_and_writes_pdn(tmp_path):
    import subprocess
    import sys

    from game.pdn import read_pdn

    out = tmp_path / "games.pdn"
    args = ["--games", "3", "--parallel", "2", "--simulations", "8", "--size", "6", "--uniform"]
    proc = subprocess.run(
        [sys.executable, "-m", "actors", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    assert "games/s" in proc.stdout and "network evaluations/s" in proc.stdout
    assert len(read_pdn(out.read_text(), size=6)) == 3


def test_opening_deck_positions_follow_from_their_moves():
    from game.openings import acf_deck, load_openings
    from game.position import Position

    deck = acf_deck(tournament_only=False)
    assert len(deck) == 174 and sorted(o.id for o in deck) == list(range(1, 175))
    assert len(load_openings("deck")) == 156  # the tournament ballots, barred ones left out
    for opening in deck:
        pos = Position()
        for move in opening.moves:
            pos.play(move)
        game = opening.start_game(max_plies=300)
        assert (game.black, game.white, game.kings, game.white_to_move) == (
            pos.game.black,
            pos.game.white,
            pos.game.kings,
            pos.game.white_to_move,
        ), opening
        assert game.max_plies == 300 and game.depth == 0  # no history before the opening


def legal_counts(record: GameRecord) -> np.ndarray:
    """Legal actions at each decision of a record."""
    packed = record.positions.reshape(record.num_decisions, 1, 4)
    return _core.legal_mask_packed(record.board_size, packed).sum(axis=1)


def test_self_play_with_playout_cap_records_full_and_fast_searches(small_config):
    """Each searched decision is a full search of mcts.simulations (16) or a fast one of
    fast_simulations (4; more only when the subtree kept from the move before had more), and
    the record says which."""
    from actors.self_play import run_self_play
    from game.mcts import UniformInference

    cap = {"playout_cap.enabled": True, "playout_cap.full_share": 0.25}
    cfg = small_config(**cap, **{"playout_cap.fast_simulations": 4})
    records, stats = run_self_play(UniformInference(), cfg, n_games=6, seed=2)
    full = np.concatenate([r.full_search for r in records])
    assert (stats.positions, stats.full_positions) == (len(full), full.sum())
    assert 0.15 < full.mean() < 0.35  # drawn per decision with chance 0.25
    fast_sums = []
    for r in records:
        back = GameRecord.from_bytes(r.to_bytes())
        np.testing.assert_array_equal(back.full_search, r.full_search)
        for t in np.flatnonzero(legal_counts(r) > 1):  # one legal action: played unsearched
            total = int(r.visits(t)[1].sum())
            if r.full_search[t]:
                assert total == 16
            else:
                assert 4 <= total <= 16
                fast_sums.append(total)
    assert fast_sums.count(4) > len(fast_sums) / 2
    # Off (the default), every decision is a full search, as before.
    plain, stats = run_self_play(UniformInference(), small_config(), n_games=2, seed=2)
    assert all(r.full_search.all() for r in plain)
    assert stats.full_positions == stats.positions == sum(r.num_decisions for r in plain)


def test_self_play_records_the_pruned_target_and_plays_the_most_visited(small_config):
    """With forced playouts the record holds the pruned policy target: never more than the
    simulations, less than them where forced visits were taken back; the move played past the
    temperature plies is still the most visited one, which pruning never touches."""
    from actors.self_play import play_games
    from game.mcts import UniformInference

    cfg = small_config(temperature_plies=4)
    cfg["mcts"]["simulations"] = 64
    cfg["mcts"]["dirichlet_epsilon"] = 0.25
    cfg["mcts"]["forced_playouts_k"] = 2.0
    records = play_games(UniformInference(), cfg, n_games=2, seed=4)
    pruned = 0
    for r in records:
        for t in np.flatnonzero(legal_counts(r) > 1):
            if t < 4:
                continue  # played with temperature
            actions, counts = r.visits(t)
            assert counts.sum() <= 64
            pruned += counts.sum() < 64
            assert counts[actions.tolist().index(int(r.played[t]))] == counts.max()
    assert pruned > 0


def test_a_game_whose_record_fails_validation_is_dropped_and_the_others_play_on(
    small_config, monkeypatch, caplog
):
    """One finished game's record refuses its data (as a search defect once made it): that
    game is logged and counted, the run's other games are recorded as usual."""
    from actors import self_play
    from game.mcts import UniformInference

    real = self_play._Slot.record
    calls = []

    def first_refused(slot, *args, **kwargs):
        calls.append(slot.opening.name)
        if len(calls) == 1:
            raise ValueError("root_wdl row 3 is not a distribution (sums to 1.0000001)")
        return real(slot, *args, **kwargs)

    monkeypatch.setattr(self_play._Slot, "record", first_refused)
    drops = []

    class Drops(self_play.SelfPlayObserver):
        def on_drop(self) -> None:
            drops.append(1)

    with caplog.at_level("ERROR", logger="actors.self_play"):
        records, stats = self_play.run_self_play(
            UniformInference(), small_config(), n_games=4, seed=3, observer=Drops()
        )
    assert (len(calls), len(records), stats.games, stats.dropped, len(drops)) == (4, 3, 3, 1, 1)
    for r in records:
        assert GameRecord.from_bytes(r.to_bytes()).num_decisions == r.num_decisions
    assert f"dropped a finished game (opening {calls[0]}" in caplog.text
    assert "not a distribution" in caplog.text


def test_an_actor_counts_a_dropped_game_where_the_run_reads_it(
    small_config, server, client, monkeypatch
):
    """The actor plays on past a refused record and adds it to the self-play counters in Redis
    (`dropped`, read by the pool as selfplay/games_dropped)."""
    from omegaconf import OmegaConf

    from actors import self_play
    from actors.actor import SelfPlayWorker
    from checkerzero.network.checkpoint import encode_checkpoint
    from checkerzero.network.model import CheckersNet, model_config
    from checkerzero.store.keys import selfplay_stats_key
    from checkerzero.store.weights import WeightsChannel

    cfg = small_config()
    namespace = cfg.replay.namespace
    model = CheckersNet(model_config(cfg.model, cfg.game.size))
    WeightsChannel(client, namespace=namespace).publish(
        encode_checkpoint(model, step=0, version=1), 1
    )
    real = self_play._Slot.record
    calls = []

    def first_refused(slot, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("visit action 999 out of range")
        return real(slot, *args, **kwargs)

    monkeypatch.setattr(self_play._Slot, "record", first_refused)
    container = OmegaConf.to_container(cfg, resolve=True)
    worker = SelfPlayWorker(container, 0, server.url, server.password)
    stats = worker.run(seconds=6.0)
    counters = {
        k.decode(): int(v) for k, v in client.hgetall(selfplay_stats_key(namespace)).items()
    }
    assert stats["dropped"] == counters["dropped"] == 1
    assert counters["games"] == stats["games"] >= 1  # the games after it were stored
