"""Reanalysis (learner.reanalysis, learner/reanalysis.py): stored positions searched again with
newer weights; their targets come from those weights (version recorded), bad ones are skipped
and counted. The mirror runs against a real redis-server, as in tests/test_mirror.py."""

from __future__ import annotations

import dataclasses
import os
import shutil

import numpy as np
import pytest

from actors.self_play import play_games
from checkerzero.store.replay import ReplayStore
from game import _core
from game.records import histories
from learner.mirror import ReplayMirror
from learner.prefetcher import MirrorPrefetcher
from learner.reanalysis import Reanalyser, game_from_history

needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None and not os.environ.get("CHECKERZERO_REDIS_SERVER"),
    reason="redis-server not installed (apt-get install redis-server); these tests need a real one",
)
MID_JUMP = 0x7E


class Favouring:
    """Weights of a given version whose policy puts almost everything on the legal action of
    lowest (``first``) or highest index, and calls every position a draw."""

    def __init__(self, version: int, first: bool) -> None:
        self.version, self.first = version, first

    def evaluate(self, planes, mask):
        idx = np.arange(mask.shape[1])
        pick = (
            np.where(mask, idx, 10**6).argmin(1)
            if self.first
            else np.where(mask, idx, -1).argmax(1)
        )
        priors = mask * np.float32(1e-3)
        priors[np.arange(len(mask)), pick] = 1.0
        priors = (priors / priors.sum(1, keepdims=True)).astype(np.float32)
        wdl = np.tile(np.array([0, 1, 0], np.float32), (len(mask), 1))
        return priors, wdl


@pytest.fixture(scope="module")
def records(config):
    cfg = config(
        "mcts.simulations=8",
        "mcts.leaves_per_game=4",
        "selfplay.games_in_parallel=6",
        "selfplay.resign=false",
    )
    from game.mcts import UniformInference

    played = play_games(UniformInference(), cfg, n_games=6, seed=4)
    return [dataclasses.replace(r, network_version=3) for r in played]


def test_every_recorded_position_is_rebuilt_from_its_history(records):
    rebuilt = jumps = 0
    for record in records:
        hist = histories(record.positions, np.arange(record.num_decisions))
        for h in hist:
            game = game_from_history(h, 8)
            assert game is not None
            packed = game.pack_history()
            np.testing.assert_array_equal(packed, h)  # the whole history, mid-jump or not
            rebuilt += 1
            jumps += bool((h[:, 3] & MID_JUMP).any())
    assert rebuilt == sum(r.num_decisions for r in records) and jumps > 0


def test_a_history_inside_a_long_multi_jump_is_rebuilt_in_the_middle_of_it():
    # A black king on 32 takes the white men on 27, 26, 17 and 16 (or 25) in four hops: after
    # the third, every slot of the history is in the middle of the jump.
    whites = sum(1 << (s - 1) for s in (16, 17, 25, 26, 27))
    game = _core.Game.from_bitboards(8, 1 << 31, whites, 1 << 31, False)
    for _ in range(3):
        game.step(int(game.legal_actions()[0]))
    assert game.jumping
    h = np.asarray(game.pack_history())
    assert (h[:, 3] & MID_JUMP).all()
    rebuilt = game_from_history(h, 8)
    assert rebuilt is not None and rebuilt.jumping == game.jumping
    np.testing.assert_array_equal(rebuilt.pack_history(), h)
    assert sorted(rebuilt.legal_actions()) == sorted(game.legal_actions())


def test_a_game_is_set_up_mid_jump_only_where_the_piece_can_jump_on():
    whites = sum(1 << (s - 1) for s in (16, 17, 25, 26, 27))
    game = _core.Game.from_bitboards(8, 1 << 31, whites, 1 << 31, False, jumping=32)
    assert game.jumping == 32 and game.mid_jump
    with pytest.raises(ValueError, match="jumping square 5 holds no piece of the side to move"):
        _core.Game.from_bitboards(8, 1 << 31, whites, 1 << 31, False, jumping=5)
    with pytest.raises(ValueError, match="jumping square 33 is off the board"):
        _core.Game.from_bitboards(8, 1 << 31, whites, 1 << 31, False, jumping=33)
    with pytest.raises(ValueError, match="jumping square 32: its piece has no capture"):
        _core.Game.from_bitboards(8, 1 << 31, 1 << 4, 1 << 31, False, jumping=32)


def test_a_history_no_move_continues_is_skipped_and_counted(records):
    record = records[0]
    hist = histories(record.positions, np.arange(4, 8))
    bad = hist.copy()
    bad[1, :, [0, 1]] = bad[1, :, [1, 0]]  # its positions' colours swapped: no move leads on
    assert game_from_history(bad[1], 8) is None
    reanalyser = Reanalyser({"leaves_per_game": 4}, 8, simulations=8, games=4)
    reanalyser.use(Favouring(5, first=True))
    got = reanalyser.run(bad)
    assert got.version == 5 and reanalyser.skipped == 1
    assert got.bad.tolist() == [False, True, False, False]
    assert not got.ok[1] and not got.pi[1].any()
    for i in np.flatnonzero(got.ok):  # the others: searched (or forced moves, not ok)
        assert got.pi[i].sum() == pytest.approx(1.0) and i != 1


@needs_redis
def test_reanalysed_targets_come_from_the_newest_weights_with_their_version(client, records):
    store = ReplayStore(client, window_positions=100_000)
    for k, r in enumerate(records):
        store.add_game(dataclasses.replace(r, opening_id=k).to_bytes(), r.num_decisions)
    mirror = ReplayMirror(store, 8)
    mirror.refresh()
    rows = mirror.draw(40, np.random.default_rng(0))
    rows = np.unique(rows)
    stored = mirror.batch_at(rows)
    assert (mirror.target_versions(rows) == 3).all() and not mirror.reanalysed(rows).any()

    reanalyser = Reanalyser({"leaves_per_game": 4}, 8, simulations=16, games=8)
    for version, first in ((7, True), (9, False)):
        reanalyser.use(Favouring(version, first))
        got = reanalyser.run(mirror.histories(rows))
        ok = got.ok
        assert got.version == version and ok.sum() > len(rows) // 2 and not got.bad.any()
        assert mirror.set_targets(rows[ok], got.pi[ok], got.root_wdl[ok], version) == ok.sum()
        batch = mirror.batch_at(rows)
        mask = batch.mask[ok]
        idx = np.arange(mask.shape[1])
        favoured = (
            np.where(mask, idx, 10**6).argmin(1) if first else np.where(mask, idx, -1).argmax(1)
        )
        # These weights' search: nearly every visit on the action its policy favours.
        assert (batch.target_pi[ok].argmax(1) == favoured).all()
        np.testing.assert_allclose(batch.target_pi[ok].sum(1), 1.0, rtol=1e-5)
        assert (mirror.target_versions(rows)[ok] == version).all()
        assert (mirror.target_versions(rows)[~ok] == 3).all()  # forced moves keep theirs
        np.testing.assert_array_equal(batch.target_pi[~ok], stored.target_pi[~ok])
    assert mirror.reanalysed(rows).sum() == ok.sum()


@needs_redis
def test_bad_new_targets_are_refused_counted_and_never_trained_on(client, records):
    store = ReplayStore(client, window_positions=100_000)
    for k, r in enumerate(records):
        store.add_game(dataclasses.replace(r, opening_id=k).to_bytes(), r.num_decisions)
    mirror = ReplayMirror(store, 8)
    mirror.refresh()
    rows = np.arange(3)  # the first game's first positions (rows count from 0)
    before = mirror.batch_at(rows)
    pi = before.target_pi.copy()
    pi[0] = np.nan  # not finite
    pi[1] = 0.0
    pi[1, np.flatnonzero(~before.mask[1])[0]] = 1.0  # all on an illegal action
    wdl = np.tile(np.array([0.2, 0.5, 0.3], np.float32), (3, 1))
    assert mirror.set_targets(rows, pi, wdl, 11) == 1
    assert mirror.reanalysis_rejected == 2
    after = mirror.batch_at(rows)
    np.testing.assert_array_equal(after.target_pi[:2], before.target_pi[:2])
    assert mirror.target_versions(rows).tolist() == [3, 3, 11]


@needs_redis
def test_the_prefetcher_reanalyses_its_share_and_reports_the_targets_age(client, records):
    store = ReplayStore(client, window_positions=100_000)
    for k, r in enumerate(records):
        store.add_game(dataclasses.replace(r, opening_id=k).to_bytes(), r.num_decisions)
    reanalyser = Reanalyser({"leaves_per_game": 4}, 8, simulations=8, games=16)
    reanalyser.use(Favouring(8, first=True))
    with MirrorPrefetcher(
        ReplayMirror(store, 8),
        32,
        depth=1,
        seed=0,
        reanalyser=reanalyser,
        reanalyse_share=0.5,
    ) as prefetcher:
        batch = prefetcher.get(timeout=60)
        assert len(batch) == 32
        mean_version, share = prefetcher.take_target_stats()
    # Half the first batch's draws were searched again (all but forced moves), by version 8.
    assert reanalyser.searched > 0 and 0.2 < share <= 0.5 + 1e-9
    assert 3 < mean_version < 8


@needs_redis
def test_excluded_positions_never_reach_a_batch(client, records):
    store = ReplayStore(client, window_positions=100_000)
    for k, r in enumerate(records):
        store.add_game(dataclasses.replace(r, opening_id=k).to_bytes(), r.num_decisions)
    mirror = ReplayMirror(store, 8)
    mirror.refresh()
    rows = np.arange(mirror.num_positions)
    kept = rows[: records[0].num_decisions]  # the first game's; the rest as if their histories
    mirror.exclude(rows[len(kept) :])  # were bad
    assert mirror.excluded(rows).tolist() == [False] * len(kept) + [True] * (len(rows) - len(kept))
    allowed = {p.tobytes() for p in mirror.batch_at(kept).planes}
    reanalyser = Reanalyser({"leaves_per_game": 4}, 8, simulations=4, games=16)
    reanalyser.use(Favouring(4, first=True))
    with MirrorPrefetcher(
        mirror, 64, depth=1, seed=0, reanalyser=reanalyser, reanalyse_share=0.25
    ) as prefetcher:
        for _ in range(3):
            batch = prefetcher.get(timeout=60)
            assert len(batch) >= 1
            assert all(p.tobytes() in allowed for p in batch.planes)
