"""The learner's decoded mirror of the replay window, against a real redis-server (learner/mirror).

The reference for every batch is the one-record path: each drawn game's bytes read back from Redis,
decoded with `GameRecord.from_bytes`, its positions turned into targets by
`game.records.training_samples` and encoded by `game.encoding`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import queue
import shutil
import time

import numpy as np
import pytest

from actors.self_play import play_games
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import ReplayEmpty, ReplayStore, ReplayUnavailable, connect
from game import encoding
from game.mcts import UniformInference
from game.records import GameRecord, Result, training_samples
from learner.losses import TrainBatch
from learner.mirror import ReplayMirror
from learner.mirror_column import MIN_ROWS, Column
from learner.prefetcher import MirrorPrefetcher

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None and not os.environ.get("CHECKERZERO_REDIS_SERVER"),
    reason="redis-server not installed (apt-get install redis-server); these tests need a real one",
)

GAME_GROUP = {8: "english", 6: "small"}  # conf/game file of each board side
TINY_BACKOFF_S = 0.001  # keeps the dead-server test fast
WAIT_S = 30.0  # upper bound on waits for the prefetch thread; a healthy run takes milliseconds


def _play(config, size: int, n_games: int, seed: int) -> list[GameRecord]:
    overrides = ["mcts.simulations=8", "mcts.leaves_per_game=4", "selfplay.games_in_parallel=8"]
    overrides += ["selfplay.resign=false", f"game={GAME_GROUP[size]}"]
    if size != 8:
        overrides.append("selfplay.openings=start")
    return play_games(UniformInference(), config(*overrides), n_games=n_games, seed=seed)


def _with_forced_moves(record: GameRecord) -> GameRecord:
    """The record with every third decision unsearched (NaN root value), as forced moves are."""
    wdl = record.root_wdl.copy()
    wdl[::3] = np.nan
    return dataclasses.replace(record, root_wdl=wdl)


@pytest.fixture(scope="module")
def games(config):
    """``games(size)``: distinct self-play games, won by either side; half with unsearched
    decisions (played once per board size)."""

    @functools.cache
    def of_size(size: int) -> tuple[GameRecord, ...]:
        played = _play(config, size, 24, seed=size)
        out = tuple(_with_forced_moves(r) if k % 2 else r for k, r in enumerate(played))
        assert {r.result for r in out} >= {Result.BLACK_WIN, Result.WHITE_WIN}
        return out

    return of_size


def _add(store: ReplayStore, record: GameRecord, **changes) -> int:
    """Adds the record (with header `changes`, which keep equal games' bytes apart)."""
    if changes:
        record = dataclasses.replace(record, **changes)
    return store.add_game(record.to_bytes(), record.num_decisions)


def _encode(size: int, draws: list[tuple[GameRecord, int]], q_weight: float) -> TrainBatch:
    """The reference batch of (record, position index) draws, in their order, one at a time."""
    parts = [training_samples(record, [index], q_weight) for record, index in draws]
    packed = np.concatenate([p for p, _, _ in parts])
    return TrainBatch(
        planes=encoding.encode(packed, size),
        mask=encoding.legal_masks(packed, size),
        target_pi=np.concatenate([pi for _, pi, _ in parts]),
        target_wdl=np.concatenate([wdl for _, _, wdl in parts]),
    )


def _reference(
    store: ReplayStore, size: int, game_ids: np.ndarray, indices: np.ndarray, q_weight: float
) -> TrainBatch:
    """The reference batch of draws (game_ids[j], indices[j]), read back from Redis."""
    records = {g: GameRecord.from_bytes(store.get(g)) for g in set(game_ids.tolist())}
    draws = [(records[g], i) for g, i in zip(game_ids.tolist(), indices.tolist(), strict=True)]
    return _encode(size, draws, q_weight)


def _assert_same(mirror_batch: TrainBatch, reference: TrainBatch) -> None:
    """Bit for bit: the same float32 operations on the same values."""
    for field in ("planes", "mask", "target_pi", "target_wdl"):
        np.testing.assert_array_equal(
            getattr(mirror_batch, field), getattr(reference, field), err_msg=field
        )


@pytest.mark.parametrize("size", [6, 8])
@pytest.mark.parametrize("q_weight", [0.0, 0.25, 1.0])
def test_batches_equal_the_record_decoder_for_the_same_draws(client, size, q_weight, games):
    store = ReplayStore(client, window_positions=100_000)
    played = games(size)
    for record in played:
        _add(store, record)
    mirror = ReplayMirror(store, size)
    assert mirror.refresh() == len(played)
    assert mirror.num_positions == sum(r.num_decisions for r in played)
    rows = mirror.draw(600, np.random.default_rng(7))
    batch = mirror.sample(600, np.random.default_rng(7), q_weight)  # the same draws
    game_ids, indices = mirror.locate(rows)
    lengths = {g: played[g - 1].num_decisions for g in range(1, len(played) + 1)}
    assert all(
        0 <= i < lengths[g] for g, i in zip(game_ids.tolist(), indices.tolist(), strict=True)
    )
    assert len(set(game_ids.tolist())) == len(played)  # every game drawn, so all are compared
    _assert_same(batch, _reference(store, size, game_ids, indices, q_weight))
    # The values themselves, not just agreement: visit fractions sum to 1 on legal actions, and
    # the value target is one-hot except where the root value was mixed in.
    np.testing.assert_allclose(batch.target_pi.sum(axis=1), 1.0, rtol=1e-6)
    assert not (batch.target_pi > 0)[~batch.mask].any()
    one_hot = (batch.target_wdl == 1.0).sum(axis=1) == 1
    assert one_hot.all() if q_weight == 0.0 else (not one_hot.all() and one_hot.any())


def test_refresh_reads_only_new_games_and_decodes_each_once(client, monkeypatch, games):
    store = ReplayStore(client, window_positions=100_000)
    fetched: list[list[int]] = []
    fetch = store.fetch
    monkeypatch.setattr(store, "fetch", lambda ids: fetched.append(list(ids)) or fetch(ids))
    decoded = []
    from_bytes = GameRecord.from_bytes
    monkeypatch.setattr(
        "learner.mirror.GameRecord.from_bytes", lambda data: decoded.append(1) or from_bytes(data)
    )
    played = games(6)
    mirror = ReplayMirror(store, 6)
    for record in played[:5]:
        _add(store, record)
    assert mirror.refresh() == 5
    for record in played[5:8]:
        _add(store, record)
    assert mirror.refresh() == 3
    assert mirror.refresh() == 0
    assert fetched == [[1, 2, 3, 4, 5], [6, 7, 8]]  # no refetch, and no fetch with nothing new
    assert len(decoded) == 8
    assert mirror.num_games == 8
    assert mirror.num_positions == sum(r.num_decisions for r in played[:8])


def test_a_game_evicted_between_window_and_fetch_holds_no_positions(client, monkeypatch, games):
    store = ReplayStore(client, window_positions=100_000)
    played = games(6)[:3]
    for record in played:
        _add(store, record)
    fetch = store.fetch
    monkeypatch.setattr(store, "fetch", lambda ids: {g: v for g, v in fetch(ids).items() if g != 2})
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    assert (mirror.num_games, mirror.malformed) == (3, 0)  # not malformed: just gone
    assert mirror.num_positions == played[0].num_decisions + played[2].num_decisions
    game_ids, _ = mirror.locate(mirror.draw(200, np.random.default_rng(0)))
    assert set(game_ids.tolist()) == {1, 3}


def test_evicted_games_leave_and_the_arrays_stay_bounded(client, games):
    window = 300
    store = ReplayStore(client, window_positions=window)
    played = games(6)
    mirror = ReplayMirror(store, 6)
    appended = 0
    n = 0
    peak = {}  # per column: the most rows it had to hold at once (live before a refresh + added)
    for cycle in range(60):
        for _ in range(cycle % 7 + 1):  # 1..7 games between refreshes
            record = played[n % len(played)]
            _add(store, record, network_version=n)  # distinct bytes per game
            appended += record.num_decisions
            n += 1
        before = {name: (c.size, c.hi) for name, c in vars(mirror).items() if isinstance(c, Column)}
        mirror.refresh()
        stats = store.stats()
        assert mirror.num_games == stats.window_games
        assert mirror.num_positions == stats.window_positions
        assert mirror.first_id == n - stats.window_games + 1
        for name, (size, hi) in before.items():
            column = vars(mirror)[name]
            peak[name] = max(peak.get(name, 0), size + column.hi - hi)
            assert len(column.data) <= max(2 * MIN_ROWS, 4 * peak[name])
    assert appended > 20 * window  # many times the window went through the mirror
    positions = mirror._positions
    assert positions.origin > 0  # it was compacted: the oldest rows are gone from memory
    assert len(positions.data) < appended
    # Still exactly the store's window, position by position.
    rows = np.arange(positions.lo, positions.hi)
    game_ids, indices = mirror.locate(rows)
    assert game_ids.min() == mirror.first_id and game_ids.max() == n
    _assert_same(mirror.batch_at(rows, q_weight=0.5), _reference(store, 6, game_ids, indices, 0.5))
    # A mirror started late (a restarted learner) begins at the window's first game.
    late = ReplayMirror(store, 6)
    assert late.refresh() == mirror.num_games
    assert (late.first_id, late.num_positions) == (mirror.first_id, mirror.num_positions)


def test_column_keeps_values_and_bounded_memory_through_appends_and_drops():
    column = Column(np.int64)
    rng = np.random.default_rng(0)
    moves = 0
    for _ in range(3000):
        n = int(rng.integers(0, 40))
        column.append(np.arange(column.hi, column.hi + n))
        if column.size > 500:
            column.drop_below(column.hi - int(rng.integers(100, 500)))
        origin = column.origin
        np.testing.assert_array_equal(column.view(), np.arange(column.lo, column.hi))
        rows = rng.integers(column.lo, column.hi, size=10)
        np.testing.assert_array_equal(column.take(rows), rows)
        assert len(column.data) <= max(2 * MIN_ROWS, 4 * (column.size + 40))
        moves += origin != column.origin
    assert column.hi > 50_000 and moves < column.hi / 100  # copies are rare: amortised O(1)
    column.drop_below(column.hi)
    assert column.size == 0 and len(column.data) == MIN_ROWS
    with pytest.raises(ValueError, match="cannot drop"):
        column.drop_below(column.hi + 1)


def test_malformed_records_are_skipped_counted_and_logged_once(client, caplog, games):
    store = ReplayStore(client, window_positions=100_000)
    good = games(6)[:4]
    eight = games(8)[0]
    ids = {"good": []}
    ids["good"].append(_add(store, good[0]))
    store.add_game(b"BAD" + bytes(400), 10)  # not a record
    ids["good"].append(_add(store, good[1]))
    store.add_game(eight.to_bytes(), eight.num_decisions)  # another board size
    truncated = good[2].to_bytes()[:-9]
    store.add_game(truncated, good[2].num_decisions)  # CRC and length checks fail
    store.add_game(good[2].to_bytes(), good[2].num_decisions + 1)  # the store's length is off
    ids["good"].append(_add(store, good[3]))
    mirror = ReplayMirror(store, 6)
    with caplog.at_level(logging.WARNING, logger="learner.mirror"):
        mirror.refresh()
        mirror.refresh()
    assert mirror.malformed == 4  # counted once each, not once per refresh
    assert mirror.num_games == 7
    assert mirror.num_positions == sum(r.num_decisions for r in (good[0], good[1], good[3]))
    warnings = [r for r in caplog.records if "malformed" in r.getMessage()]
    assert len(warnings) == 1 and "game 2" in warnings[0].getMessage()
    rows = mirror.draw(500, np.random.default_rng(3))
    game_ids, indices = mirror.locate(rows)
    assert set(game_ids.tolist()) == set(ids["good"])
    _assert_same(mirror.batch_at(rows), _reference(store, 6, game_ids, indices, 0.0))


def test_empty_store_raises_and_the_prefetcher_waits_then_serves(client, games):
    store = ReplayStore(client, window_positions=100_000)
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    with pytest.raises(ReplayEmpty, match="holds no position"):
        mirror.sample(4, np.random.default_rng(0))
    store.add_game(b"BAD" + bytes(200), 3)  # only a malformed game: still nothing to draw
    record = games(6)[0]
    with MirrorPrefetcher(mirror, 4, depth=1, seed=0, refresh_s=10.0) as prefetcher:
        with pytest.raises(queue.Empty):
            prefetcher.get(timeout=0.6)  # no batch, no crash
        assert prefetcher.malformed == 1
        _add(store, record)
        batch = prefetcher.get(timeout=WAIT_S)  # empty: refreshed every turn despite refresh_s
    assert len(batch) == 4
    whole_game = _encode(6, [(record, i) for i in range(record.num_decisions)], 0.0)
    for row in range(4):  # each row is one of that game's positions, exactly
        same = (whole_game.planes == batch.planes[row]).all(axis=(1, 2, 3))
        assert same.any()
        k = int(np.flatnonzero(same)[0])
        np.testing.assert_array_equal(whole_game.target_pi[k], batch.target_pi[row])
        np.testing.assert_array_equal(whole_game.target_wdl[k], batch.target_wdl[row])


def test_prefetcher_picks_up_new_games(client, games):
    store = ReplayStore(client, window_positions=100_000)
    played = games(6)
    for record in played[:3]:
        _add(store, record)
    mirror = ReplayMirror(store, 6)
    with MirrorPrefetcher(mirror, 8, depth=2, seed=1, q_weight=0.5, refresh_s=0.05) as prefetcher:
        assert len(prefetcher.get(timeout=WAIT_S)) == 8
        for record in played[3:6]:
            _add(store, record)
        deadline = time.monotonic() + WAIT_S
        while mirror.num_games < 6 and time.monotonic() < deadline:
            prefetcher.get(timeout=WAIT_S)  # keeps the thread turning (and refreshing)
        assert mirror.num_games == 6
        assert prefetcher.malformed == 0


def test_store_rewritten_with_fewer_games_is_read_afresh(client, games):
    store = ReplayStore(client, window_positions=100_000)
    played = games(6)
    for record in played[:10]:
        _add(store, record)
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    client.flushdb()  # a new store in the same Redis: ids start at 1 again
    for record in played[10:14]:
        _add(store, record)
    mirror.refresh()
    assert mirror.rebuilds == 1
    assert (mirror.first_id, mirror.num_games) == (1, 4)
    assert mirror.num_positions == sum(r.num_decisions for r in played[10:14])
    rows = mirror.draw(300, np.random.default_rng(5))
    _assert_same(mirror.batch_at(rows), _reference(store, 6, *mirror.locate(rows), 0.0))


def test_prefetcher_raises_replay_unavailable_when_redis_is_gone(tmp_path, games):
    srv = EmbeddedRedis(tmp_path / "run").start()
    c = connect(srv.url, srv.password, retries=1, backoff_s=TINY_BACKOFF_S)
    store = ReplayStore(c, window_positions=100_000)
    _add(store, games(6)[0])
    url = srv.url
    try:
        with MirrorPrefetcher(ReplayMirror(store, 6), 4, depth=1, seed=0, refresh_s=0.0) as p:
            p.get(timeout=WAIT_S)
            srv.stop()
            deadline = time.monotonic() + WAIT_S
            with pytest.raises(ReplayUnavailable, match=url):
                while time.monotonic() < deadline:
                    p.get(timeout=WAIT_S)  # queued batches first, then the error
    finally:
        c.close()
        srv.stop()


def test_draws_are_uniform_over_positions_not_games(client, games):
    store = ReplayStore(client, window_positions=100_000)
    played = sorted(games(6), key=lambda r: r.num_decisions)
    chosen = [played[0], played[len(played) // 2], played[-1]]  # lengths differ ~3x
    for record in chosen:
        _add(store, record)
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    draws = 60_000
    game_ids, indices = mirror.locate(mirror.draw(draws, np.random.default_rng(1234)))
    lengths = np.array([r.num_decisions for r in chosen])
    per_game = np.bincount(game_ids, minlength=4)[1:]
    np.testing.assert_allclose(per_game / draws, lengths / lengths.sum(), atol=0.01)
    seen = set(zip(game_ids.tolist(), indices.tolist(), strict=True))
    assert len(seen) == lengths.sum()  # every position of every game comes up


def test_mirror_refuses_a_second_thread_and_bad_arguments(client, games):
    store = ReplayStore(client, window_positions=100)
    _add(store, games(6)[0])
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    with mirror._busy, pytest.raises(RuntimeError, match="two threads"):  # another thread inside
        mirror.sample(2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="q_weight"):
        mirror.sample(2, np.random.default_rng(0), q_weight=1.5)
    with pytest.raises(IndexError):
        mirror.batch_at([mirror.num_positions])
    with pytest.raises(ValueError, match="batch_size"):
        MirrorPrefetcher(mirror, 0, depth=1, seed=0)
    with pytest.raises(ValueError, match="depth"):
        MirrorPrefetcher(mirror, 4, depth=0, seed=0)
    with pytest.raises(ValueError, match="board_size"):
        ReplayMirror(store, 7)


# ------------------------------------------------------------------------------------------
# Fast searches (playout cap randomization) never train the policy
# ------------------------------------------------------------------------------------------


def _with_fast_searches(records: tuple[GameRecord, ...], seed: int) -> list[GameRecord]:
    """The records with about three decisions in four marked fast searches."""
    rng = np.random.default_rng(seed)
    return [dataclasses.replace(r, full_search=rng.random(r.num_decisions) < 0.25) for r in records]


def test_fast_positions_train_the_value_head_only(client, games):
    """fast_value (the default): fast positions are drawn, with policy weight exactly 0, and
    their targets are the record decoder's."""
    store = ReplayStore(client, window_positions=100_000)
    played = _with_fast_searches(games(6), seed=1)
    for record in played:
        _add(store, record)
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    assert mirror.num_drawable == mirror.num_positions
    rows = mirror.draw(800, np.random.default_rng(3))
    batch = mirror.sample(800, np.random.default_rng(3), 0.5)
    game_ids, indices = mirror.locate(rows)
    full = np.array([played[g - 1].full_search[i] for g, i in zip(game_ids, indices, strict=True)])
    assert 0.1 < full.mean() < 0.4 and not full.all()
    np.testing.assert_array_equal(batch.policy_weight, full.astype(np.float32))
    _assert_same(batch, _reference(store, 6, game_ids, indices, 0.5))


def test_without_fast_value_only_full_searches_are_drawn(client, games):
    store = ReplayStore(client, window_positions=100_000)
    played = _with_fast_searches(games(6), seed=2)
    for record in played:
        _add(store, record)
    mirror = ReplayMirror(store, 6, fast_value=False)
    mirror.refresh()
    n_full = sum(int(r.full_search.sum()) for r in played)
    assert mirror.num_drawable == n_full < mirror.num_positions
    rows = mirror.draw(20_000, np.random.default_rng(5))
    game_ids, indices = mirror.locate(rows)
    drawn = set(zip(game_ids.tolist(), indices.tolist(), strict=True))
    assert all(played[g - 1].full_search[i] for g, i in drawn)
    assert len(drawn) == n_full  # every full search comes up, uniformly
    batch = mirror.batch_at(rows[:500])
    assert batch.policy_weight is None  # every row a full search: plain mean
    # Eviction keeps the index of full searches aligned with the positions left.
    small = ReplayStore(client, namespace="small", window_positions=200)
    for record in played:
        _add(small, record)
    evicting = ReplayMirror(small, 6, fast_value=False)
    evicting.refresh()
    first, _ = small.window()
    kept = played[first - 1 :]
    assert evicting.num_drawable == sum(int(r.full_search.sum()) for r in kept)
    ids, idx = evicting.locate(evicting.draw(5_000, np.random.default_rng(6)))
    assert ids.min() >= first
    assert all(
        played[g - 1].full_search[i] for g, i in zip(ids.tolist(), idx.tolist(), strict=True)
    )


def test_a_window_of_fast_searches_only_has_nothing_to_draw_without_fast_value(client, games):
    store = ReplayStore(client, window_positions=100_000)
    record = games(6)[0]
    _add(store, dataclasses.replace(record, full_search=np.zeros(record.num_decisions, bool)))
    mirror = ReplayMirror(store, 6, fast_value=False)
    mirror.refresh()
    assert (mirror.num_positions, mirror.num_drawable) == (record.num_decisions, 0)
    with pytest.raises(ReplayEmpty, match="no fully searched position"):
        mirror.draw(4, np.random.default_rng(0))
    with_value = ReplayMirror(store, 6)
    with_value.refresh()
    assert with_value.draw(4, np.random.default_rng(0)).size == 4


def test_policy_loss_weights_rows_and_fast_rows_get_no_gradient():
    import torch

    from learner.losses import policy_loss

    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0], [1.0, 1.0, 1.0]], requires_grad=True)
    target = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, True], [True, True, False]])
    weight = torch.tensor([1.0, 0.0, 1.0])
    loss = policy_loss(logits, target, mask, weight)
    # Row 0: -log softmax(2, 0, -1)[0]; row 2: two legal actions, uniform: log 2.
    row0 = -torch.log_softmax(logits[0].detach(), dim=0)[0]
    assert loss.item() == pytest.approx((row0.item() + np.log(2)) / 2, rel=1e-6)
    loss.backward()
    assert logits.grad[1].abs().sum().item() == 0.0  # the fast row: no gradient at all
    assert logits.grad[0].abs().sum().item() > 0.0
    assert policy_loss(logits, target, mask, torch.zeros(3)).item() == 0.0
    unweighted = policy_loss(logits, target, mask).item()
    assert policy_loss(logits, target, mask, torch.ones(3)).item() == pytest.approx(unweighted)
    with pytest.raises(ValueError, match=r"policy_weight must be float32 \(2,\)"):
        TrainBatch(
            planes=np.zeros((2, 15, 6, 6), np.float32),
            mask=np.ones((2, 72), bool),
            target_pi=np.full((2, 72), 1 / 72, np.float32),
            target_wdl=np.eye(3, dtype=np.float32)[:2],
            policy_weight=np.ones(3, np.float32),
        )
