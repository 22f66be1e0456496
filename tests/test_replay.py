"""The replay store against a real redis-server (checkerzero/store/redis_server.py and
replay.py)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import psutil
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from scipy import stats as scipy_stats

from checkerzero.store.redis_server import (
    EmbeddedRedis,
    RedisServerError,
    find_redis_server,
    free_port,
)
from checkerzero.store.replay import (
    ReplayEmpty,
    ReplayStats,
    ReplayStore,
    ReplayUnavailable,
    SampleRatio,
    connect,
    redact_url,
)
from game.records import MIN_BYTES_PER_DECISION, MIN_RECORD_BYTES

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None and not os.environ.get("CHECKERZERO_REDIS_SERVER"),
    reason="redis-server not installed (apt-get install redis-server); these tests need a real one",
)

TINY_BACKOFF_S = 0.001  # keeps the retry tests fast; the schedule is what is tested, not the pace


# The store's own behaviour, with records of any bytes: no bound of a record's length by its
# bytes (the codec's bound, the default, has its own test below).
ANY_BYTES = (0, 0)


def _record(game: int, size: int, seed: int = 0) -> bytes:
    """Distinct bytes per game: an 8-byte game tag then random bytes."""
    rng = np.random.default_rng([seed, game])
    return game.to_bytes(8, "little") + rng.integers(0, 256, size, dtype=np.uint8).tobytes()


def sample(store: ReplayStore, n: int, rng: np.random.Generator) -> list[tuple[int, bytes, int]]:
    """The test's oracle of a reader: ``n`` positions drawn uniformly from the window, through
    the store's public reads (``window``, ``fetch``) as the learner's mirror makes them; a draw
    whose game was evicted between the two is drawn again. ``(game id, record, index)`` each."""
    out: list[tuple[int, bytes, int]] = []
    while len(out) < n:
        first_id, cumulative = store.window()
        if len(cumulative) == 0:
            raise ReplayEmpty(f"replay store {store.namespace!r} holds no game yet")
        draws = rng.integers(0, int(cumulative[-1]), size=n - len(out))
        slots = np.searchsorted(cumulative, draws, side="right")
        indices = draws - np.concatenate(([0], cumulative))[slots]
        game_ids = (first_id + slots).tolist()
        records = store.fetch(sorted(set(game_ids)))
        out += [
            (g, records[g], i)
            for g, i in zip(game_ids, indices.tolist(), strict=True)
            if g in records
        ]
    return out


def test_add_then_sample_returns_the_stored_bytes_and_valid_indices(client):
    store = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=10_000)
    lengths = [1, 7, 30, 64, 5]
    stored = {}
    for g, n in enumerate(lengths):
        record = _record(g, 100 + 997 * g)
        game_id = store.add_game(record, n)
        stored[game_id] = (record, n)
    assert sorted(stored) == [1, 2, 3, 4, 5]  # ids are consecutive from 1
    samples = sample(store, 2_000, np.random.default_rng(0))
    assert len(samples) == 2_000
    seen = set()
    for game_id, record, index in samples:
        assert record == stored[game_id][0]
        assert 0 <= index < stored[game_id][1]
        seen.add((game_id, index))
    assert len(seen) == sum(lengths)  # 107 positions, 2000 draws: every one comes up
    assert store.get(3) == stored[3][0]
    assert store.get(99) is None


def _chi_square_p(counts: Counter, positions: list[tuple[int, int]], draws: int) -> float:
    observed = np.array([counts[p] for p in positions])
    assert observed.sum() == draws  # nothing outside the window's positions
    expected = draws / len(positions)
    chi2 = ((observed - expected) ** 2 / expected).sum()
    return float(scipy_stats.chi2.sf(chi2, df=len(positions) - 1))


def test_sampling_is_uniform_over_positions_not_games(client):
    store = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=1_000)
    lengths = [2, 10, 40, 100, 3]  # 155 positions; uniform over games would favour game 1 ~15x
    ids = [store.add_game(_record(g, 64), n) for g, n in enumerate(lengths)]
    positions = [(gid, i) for gid, n in zip(ids, lengths, strict=True) for i in range(n)]
    draws = 31_000  # 200 expected per position
    samples = sample(store, draws, np.random.default_rng(1234))
    counts = Counter((gid, index) for gid, _, index in samples)
    assert _chi_square_p(counts, positions, draws) > 0.001
    per_game = np.array(
        [sum(counts[(gid, i)] for i in range(n)) for gid, n in zip(ids, lengths, strict=True)]
    )
    np.testing.assert_allclose(per_game / draws, np.array(lengths) / sum(lengths), atol=0.01)


def test_window_is_bounded_and_evicts_whole_oldest_games(client):
    store = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=100)
    lengths = [30, 30, 30, 30, 15, 50, 60, 120, 10]
    # Worked by hand: drop the oldest game while the total exceeds 100, never the newest.
    expected_windows = [
        [1],
        [1, 2],
        [1, 2, 3],  # 90
        [2, 3, 4],  # 120 > 100: game 1 goes
        [3, 4, 5],  # 105: game 2 goes, 75 left
        [4, 5, 6],  # 125: game 3 goes, 95 left
        [7],  # 155: games 4, 5, 6 go (110 > 100 after two), 60 left
        [8],  # 180: game 7 goes; 120 > 100 but the newest game stays
        [9],  # 130: game 8 goes
    ]
    for g, (n, window) in enumerate(zip(lengths, expected_windows, strict=True)):
        assert store.add_game(_record(g, 32), n) == g + 1
        kept = [gid for gid in range(1, g + 2) if store.get(gid) is not None]
        assert kept == window
        s = store.stats()
        assert (s.window_games, s.window_positions) == (
            len(window),
            sum(lengths[i - 1] for i in window),
        )
        for gid in range(1, window[0]):
            assert client.exists(store.game_key(gid)) == 0  # evicted games' bytes are gone
    s = store.stats()
    assert (s.games_added, s.positions_added) == (len(lengths), sum(lengths))
    samples = sample(store, 50, np.random.default_rng(0))
    assert {gid for gid, _, _ in samples} == {9}
    assert {index for _, _, index in samples} == set(range(10))
    assert client.ttl(store.game_key(9)) == -1  # kept games never expire
    assert client.keys("{cz}:staging:*") == []  # every staged record was renamed into place


def test_counters_survive_a_new_store_object_on_the_same_server(client):
    first = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=50)
    for g in range(6):
        first.add_game(_record(g, 16), 20)
    again = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=50)
    assert again.stats() == first.stats()
    assert (again.stats().games_added, again.stats().positions_added) == (6, 120)
    assert again.add_game(b"next", 5) == 7
    s = first.stats()
    assert (s.games_added, s.positions_added, s.window_positions, s.window_games) == (7, 125, 45, 3)
    other = ReplayStore(client, namespace="other", record_bytes=ANY_BYTES, window_positions=50)
    assert other.stats().games_added == 0  # namespaces do not mix
    with pytest.raises(ReplayEmpty):
        sample(other, 1, np.random.default_rng(0))


def test_restarting_redis_on_the_same_dir_keeps_every_record(tmp_path):
    run_dir = tmp_path / "run"
    written = {}
    with EmbeddedRedis(run_dir) as srv:
        password = srv.password
        c = connect(srv.url, srv.password, retries=0, backoff_s=0)
        store = ReplayStore(c, record_bytes=ANY_BYTES, window_positions=1_000_000)
        for g in range(200):
            record = _record(g, 4096 if g % 2 else 300)
            written[store.add_game(record, 1 + g % 70)] = record
        before = store.stats()
        c.close()
    assert not srv.running
    pw_file = run_dir / "redis" / "password"
    assert stat.S_IMODE(pw_file.stat().st_mode) == 0o600
    with EmbeddedRedis(run_dir) as srv:
        assert srv.password == password  # reused, so clients configured before still connect
        c = connect(srv.url, srv.password, retries=0, backoff_s=0)
        store = ReplayStore(c, record_bytes=ANY_BYTES, window_positions=1_000_000)
        assert store.stats() == before
        for game_id, record in written.items():
            assert store.get(game_id) == record
        assert store.add_game(b"after restart", 3) == 201
        c.close()


def test_a_killed_redis_server_keeps_every_acknowledged_record(tmp_path):
    """SIGKILL, no SHUTDOWN: Redis wrote each command to the append-only file before replying."""
    run_dir = tmp_path / "run"
    srv = EmbeddedRedis(run_dir).start()
    c = connect(srv.url, srv.password, retries=0, backoff_s=0)
    store = ReplayStore(c, record_bytes=ANY_BYTES, window_positions=1_000)
    written = {store.add_game(_record(g, 2048), 7): _record(g, 2048) for g in range(300)}
    before = store.stats()
    c.close()
    os.kill(srv.pid, signal.SIGKILL)
    srv.stop()  # reaps the dead process, releases the directory
    with EmbeddedRedis(run_dir) as srv:
        c = connect(srv.url, srv.password, retries=0, backoff_s=0)
        store = ReplayStore(c, record_bytes=ANY_BYTES, window_positions=1_000)
        assert store.stats() == before
        window = range(301 - before.window_games, 301)
        assert all(store.get(gid) == written[gid] for gid in window)
        c.close()


def test_a_server_orphaned_by_a_killed_run_is_shut_down_before_restart(tmp_path):
    """Where a server does not die with its parent (no PR_SET_PDEATHSIG: macOS; a server from
    an older version), SIGKILL of the owning process leaves it running; the next start must
    stop it."""
    run_dir = tmp_path / "run"
    script = (
        "import sys, time\n"
        "from checkerzero.store import redis_server\n"
        "from checkerzero.store.redis_server import EmbeddedRedis\n"
        "redis_server._dies_with_parent = lambda: None  # as where Linux's prctl is missing\n"
        "from checkerzero.store.replay import ReplayStore, connect\n"
        "srv = EmbeddedRedis(sys.argv[1]).start()\n"
        "store = ReplayStore(connect(srv.url, srv.password, retries=0, backoff_s=0),"
        " record_bytes=(0, 0), window_positions=100)\n"
        "store.add_game(b'from the killed run', 5)\n"
        "print(srv.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(run_dir)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        orphan = psutil.Process(int(owner.stdout.readline()))
    finally:
        owner.kill()
        owner.wait()
    try:
        assert orphan.is_running()
        with EmbeddedRedis(run_dir) as srv:
            orphan.wait(timeout=30)  # shut down, not left writing the same append-only file
            c = connect(srv.url, srv.password, retries=0, backoff_s=0)
            assert ReplayStore(c, window_positions=100).get(1) == b"from the killed run"
            c.close()
    finally:
        if orphan.is_running():  # the test failed: do not leave a server behind
            orphan.kill()


def test_two_servers_cannot_share_one_dir(server, tmp_path):
    with pytest.raises(RedisServerError, match="another embedded redis-server"):
        EmbeddedRedis(tmp_path / "run").start()
    assert server.running


def test_connect_to_an_unreachable_url_raises_naming_the_url(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with pytest.raises(ReplayUnavailable) as info:
        connect(url, "secret-password-xyz", retries=3, backoff_s=TINY_BACKOFF_S)
    message = str(info.value)
    assert url in message
    assert "after 4 attempts" in message
    assert "secret-password-xyz" not in message
    assert isinstance(info.value, ConnectionError)
    # a password inside the URL is not shown either
    with pytest.raises(ReplayUnavailable) as info:
        connect(url.replace("127.0.0.1", ":hunter2@127.0.0.1"), retries=0, backoff_s=TINY_BACKOFF_S)
    assert "hunter2" not in str(info.value)
    assert ":***@127.0.0.1" in str(info.value)


def test_wrong_password_fails_at_once_without_leaking_it(server):
    with pytest.raises(ReplayUnavailable, match="refused the password") as info:
        connect(server.url, "wrong-password-abc", retries=1_000, backoff_s=10.0)
    assert server.url in str(info.value)
    assert "wrong-password-abc" not in str(info.value)


def test_store_operations_on_a_dead_server_raise_replay_unavailable(tmp_path):
    srv = EmbeddedRedis(tmp_path / "run").start()
    c = connect(srv.url, srv.password, retries=1, backoff_s=TINY_BACKOFF_S)
    store = ReplayStore(c, record_bytes=ANY_BYTES, window_positions=100)
    store.add_game(b"x", 1)
    url = srv.url
    srv.stop()
    with pytest.raises(ReplayUnavailable, match=url):
        store.add_game(b"y", 1)
    c.close()


def test_sampling_while_a_writer_evicts_returns_only_consistent_records(client):
    """A tiny window and a busy writer make games vanish between choosing and fetching."""
    writer_store = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=4)
    reader_store = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=4)
    writer_store.add_game(_record(0, 64), 2)
    stop = threading.Event()

    def write():
        g = 1
        while not stop.is_set():
            writer_store.add_game(_record(g, 64), 2)
            g += 1

    thread = threading.Thread(target=write)
    thread.start()
    try:
        rng = np.random.default_rng(3)
        for _ in range(300):
            for game_id, record, index in sample(reader_store, 8, rng):
                # ids start at 1 for game tag 0
                assert record == _record(game_id - 1, 64)
                assert index in (0, 1)
    finally:
        stop.set()
        thread.join()
    assert writer_store.stats().window_games == 2


def test_server_listens_on_loopback_only_and_requires_the_password(server):
    listening = [
        conn.laddr
        for conn in psutil.Process(server.pid).net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
    ]
    assert listening == [("127.0.0.1", server.port)]
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"PING\r\nSET k v\r\n")
        reply = b""
        while reply.count(b"\r\n") < 2:
            reply += sock.recv(1024)
    assert reply.startswith(b"-NOAUTH") and reply.count(b"-NOAUTH") == 2
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=server.port, retry=Retry(NoBackoff(), 0)).ping()
    conf = server.data_dir / "redis.conf"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600  # it holds the password
    assert server.password not in " ".join(psutil.Process(server.pid).cmdline())


def test_find_redis_server_order_and_install_hint(monkeypatch, tmp_path):
    real = shutil.which("redis-server") or os.environ["CHECKERZERO_REDIS_SERVER"]
    monkeypatch.setenv("CHECKERZERO_REDIS_SERVER", real)
    assert find_redis_server() == real
    with pytest.raises(RedisServerError, match="not an executable"):
        find_redis_server(tmp_path / "missing")
    monkeypatch.delenv("CHECKERZERO_REDIS_SERVER")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisServerError, match="apt-get install redis-server"):
        find_redis_server()


def test_redact_url_hides_only_the_password():
    assert redact_url("redis://:pw@host:6380/1") == "redis://:***@host:6380/1"
    assert redact_url("redis://user:pw@host/0") == "redis://user:***@host/0"
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"
    assert redact_url("redis://host/0?password=pw") == "redis://host/0?password=***"
    assert redact_url("rediss://h/0?db=1&Password=pw&x=2") == "rediss://h/0?db=1&Password=***&x=2"
    assert redact_url("redis://u:pw@h/0?password=pw2") == "redis://u:***@h/0?password=***"
    assert redact_url("redis://host/0?db=1") == "redis://host/0?db=1"


def test_sample_ratio_paces_training_against_new_positions():
    ratio = SampleRatio(4.0, min_positions=100)
    assert ratio.allowed(positions_added=99, samples_drawn=0) == 0  # warm-up
    assert ratio.allowed(positions_added=100, samples_drawn=0) == 400
    assert ratio.allowed(positions_added=100, samples_drawn=390) == 10
    assert ratio.allowed(positions_added=100, samples_drawn=1_000) == 0
    assert ratio.should_wait(100, 390, batch_size=16)
    assert not ratio.should_wait(100, 384, batch_size=16)
    assert SampleRatio(0.5).allowed(positions_added=3, samples_drawn=0) == 1
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="sample ratio"):
            SampleRatio(bad)


def test_bad_arguments_are_rejected(client):
    with pytest.raises(ValueError, match="window_positions"):
        ReplayStore(client, record_bytes=ANY_BYTES, window_positions=0)
    store = ReplayStore(client, record_bytes=ANY_BYTES, window_positions=10)
    with pytest.raises(ValueError, match="n_positions"):
        store.add_game(b"x", 0)
    with pytest.raises(ValueError, match="empty"):
        store.add_game(b"", 3)
    with pytest.raises(TypeError, match="bytes"):
        store.add_game("text", 3)  # type: ignore[arg-type]
    assert store.stats().games_added == 0  # nothing was written by the bad calls


def test_server_starts_from_a_relative_run_dir(tmp_path, monkeypatch):
    """The default run_dir (runs/<time>) is relative; redis-server must still find its files."""
    monkeypatch.chdir(tmp_path)
    with EmbeddedRedis("runs/relative") as server:
        client = connect(server.url, server.password, retries=1, backoff_s=0.05)
        assert client.ping()
    assert (tmp_path / "runs" / "relative" / "redis" / "redis.log").is_file()


def test_a_record_claiming_more_positions_than_its_bytes_hold_is_refused(client):
    """With the codec's bound (the default), a record that claims 10^9 positions is refused and
    counted: the window keeps its games and `positions_added` (the learner's pace) is
    untouched. A real record's length fits."""
    store = ReplayStore(client, window_positions=1_000)
    real = [_record(g, MIN_RECORD_BYTES + MIN_BYTES_PER_DECISION * 40) for g in range(5)]
    for record in real:
        store.add_game(record, 40)
    before = store.stats()
    assert (before.window_games, before.positions_added, before.games_refused) == (5, 200, 0)
    liar = _record(99, 4096)
    with pytest.raises(ValueError, match="claims 1,000,000,000 positions, more than it can hold"):
        store.add_game(liar, 10**9)
    with pytest.raises(ValueError, match="refused"):  # one position past what 4 KB can hold
        store.add_game(liar, (len(liar) - MIN_RECORD_BYTES) // MIN_BYTES_PER_DECISION + 1)
    after = store.stats()
    assert after == ReplayStats(
        window_positions=200, window_games=5, games_added=5, positions_added=200, games_refused=2
    )
    assert [store.get(g) for g in range(1, 6)] == real
    assert client.keys("{cz}:staging:*") == []  # the refused records are not left behind
    fits = (len(liar) - MIN_RECORD_BYTES) // MIN_BYTES_PER_DECISION
    assert store.add_game(liar, fits) == 6
