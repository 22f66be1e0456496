"""The inference server: several search processes share one network, batch by batch.

In one process (threads as clients, a CPU model): self-play through the server plays exactly the
games in-actor inference plays; the leaves of several clients share batches and each gets the
values its own network would give; new weights apply from the next batch; a client that dies or
hangs does not hold the others' batches; a server that goes away and comes back at the same
address is found again with the batch re-sent; a client of another game is refused in one line.

On a real Ray cluster with a private Redis (module fixture, `ActorPool` with the server on for
CPU nodes): two self-play actor processes share one server and their games reach the store;
weights published mid-run reach both without a restart or a lost game; a server killed with
SIGKILL is restarted by Ray and its actors, not restarted, go on with their games; an actor
killed with SIGKILL does not stop the server's batches for the other, and comes back.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
import ray
import torch
from ray.cluster_utils import Cluster
from waiting import read_while_no_game_arrives, wait_until

from actors.pool import ActorPool, plan_servers
from actors.self_play import play_games
from checkerzero.inference_server.client import RemoteInference
from checkerzero.inference_server.protocol import HELLO, PROTOCOL, REQUEST, Layout
from checkerzero.inference_server.server import InferenceServer, ServerSettings
from checkerzero.network.checkpoint import encode_checkpoint
from checkerzero.network.inference import NetworkInference
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import ReplayStore, connect
from checkerzero.store.weights import WeightsChannel
from game.encoding import NUM_PLANES, num_actions
from game.mcts import new_search
from game.records import GameRecord

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the inference server needs Linux (memfd, abstract sockets)"
)

A8 = num_actions(8)
TINY = ModelConfig(blocks=1, channels=16, policy_channels=8, value_channels=4, value_hidden=16)
SELF_PLAY = ("game.max_plies=40", "mcts.simulations=8", "selfplay.games_in_parallel=4")


def tiny_model(seed: int) -> CheckersNet:
    torch.manual_seed(seed)
    return CheckersNet(TINY).eval()


def reference(model: CheckersNet) -> NetworkInference:
    """In-actor inference of `model`, as a CPU self-play actor runs it (float32)."""
    copy = CheckersNet(model.config)
    copy.load_state_dict(model.state_dict())
    return NetworkInference(copy, device="cpu", dtype="float32")


def new_server(model: CheckersNet | None = None, version: int = 1, **settings) -> InferenceServer:
    server = InferenceServer(
        f"cz-test-{uuid.uuid4().hex}",
        NUM_PLANES,
        8,
        A8,
        ServerSettings(**settings),
        device="cpu",
        precision="float32",
    )
    if model is not None:
        server.load_weights(model, version)
    return server


def client_of(server: InferenceServer, capacity: int = 64, **kwargs) -> RemoteInference:
    return RemoteInference(server.address, NUM_PLANES, 8, A8, capacity, **kwargs)


def leaves(seed: int, games: int = 4) -> list[tuple[np.ndarray, np.ndarray]]:
    """Real leaves: the first few gathers of a search over `games` games (uniform answers)."""
    mcts = new_search(games, 8, {"simulations": 16, "leaves_per_game": 4}, seed=seed)
    out = []
    for _ in range(4):
        planes, mask = mcts.gather()
        if len(mask) == 0:
            break
        out.append((planes.copy(), mask.copy()))
        legal = mask.astype(np.float32)
        wdl = np.tile(np.array([0.3, 0.4, 0.3], np.float32), (len(mask), 1))
        mcts.expand(legal / legal.sum(1, keepdims=True), wdl)
    return out


# ------------------------------------------------------------------------------------------------
# One process
# ------------------------------------------------------------------------------------------------


def test_self_play_through_the_server_plays_the_games_of_in_actor_inference(config):
    cfg = config(*SELF_PLAY)
    model = tiny_model(0)
    server = new_server(model, version=5)
    client = client_of(server, capacity=4 * int(cfg.mcts.leaves_per_game))
    try:
        served = play_games(client, cfg, 6, seed=11)
        local = play_games(reference(model), cfg, 6, seed=11)
    finally:
        client.close()
        server.close()
    assert len(served) == len(local) == 6
    assert [r.to_bytes() for r in served] == [r.to_bytes() for r in local]
    assert client.version == 5 and client.reconnects == 0


def test_several_clients_share_batches_and_each_leaf_gets_its_own_value():
    model = tiny_model(1)
    ref = reference(model)
    # One batch in flight and a long wait: the three clients' requests are batched together.
    server = new_server(model, pipeline=1, max_wait_ms=200.0)
    results: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    work = {k: leaves(seed=k) for k in range(3)}

    def run(k: int) -> None:
        client = client_of(server)
        results[k] = [client.evaluate(p, m) for p, m in work[k]]
        client.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in work]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        stats = server.stats()
    finally:
        server.close()
    for k, batches in work.items():
        assert len(results[k]) == len(batches) == 4
        for (planes, mask), (priors, wdl) in zip(batches, results[k], strict=True):
            want_p, want_w = ref.evaluate(planes, mask)
            np.testing.assert_allclose(priors, want_p, atol=1e-5)
            np.testing.assert_allclose(wdl, want_w, atol=1e-5)
            assert np.all(priors[~mask] == 0)  # illegal actions get exactly nothing
    rows = sum(len(m) for batches in work.values() for _, m in batches)
    assert stats["rows"] == rows and stats["requests"] == 12
    assert stats["batches"] < stats["requests"]  # some batches held leaves of several clients


def test_new_weights_apply_from_the_next_batch():
    a, b = tiny_model(2), tiny_model(3)
    planes, mask = leaves(seed=4)[0]
    server = new_server(a, version=1)
    client = client_of(server)
    try:
        first = client.evaluate(planes, mask)
        assert client.version == 1
        server.load_weights(b, 2)
        second = client.evaluate(planes, mask)
        assert client.version == 2 and client.reconnects == 0
    finally:
        client.close()
        server.close()
    np.testing.assert_allclose(first[0], reference(a).evaluate(planes, mask)[0], atol=1e-5)
    np.testing.assert_allclose(second[0], reference(b).evaluate(planes, mask)[0], atol=1e-5)
    assert not np.allclose(first[0], second[0], atol=1e-3)


def raw_client(server: InferenceServer, capacity: int = 8) -> tuple[socket.socket, int]:
    """A client speaking the protocol by hand: connected, its buffer handed over."""
    layout = Layout(capacity, NUM_PLANES, 8, A8)
    fd = os.memfd_create("test-leaves")
    os.ftruncate(fd, layout.nbytes)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect("\0" + server.address)
    socket.send_fds(sock, [HELLO.pack(b"CZIS", PROTOCOL, NUM_PLANES, 8, A8, capacity)], [fd])
    os.close(fd)
    assert sock.recv(16)[:4] == b"CZOK"
    return sock, capacity


def test_a_client_that_dies_or_hangs_does_not_stall_the_others():
    model = tiny_model(5)
    server = new_server(model, max_wait_ms=20.0)
    hung, _ = raw_client(server)
    hung.sendall(REQUEST.pack(1, 4))  # asks, then never reads its answer nor asks again
    dying, _ = raw_client(server)
    dying.sendall(REQUEST.pack(1, 4))
    dying.close()  # dies with its request in the queue
    planes, mask = leaves(seed=6)[0]
    client = client_of(server)
    try:
        for _ in range(20):  # every batch still answered, with the hung client connected
            priors, _ = client.evaluate(planes, mask)
        np.testing.assert_allclose(priors, reference(model).evaluate(planes, mask)[0], atol=1e-5)
        stats = server.stats()
        assert stats["clients"] == 2  # the live client and the hung one; the dead one is gone
    finally:
        client.close()
        hung.close()
        server.close()


def test_a_server_that_goes_away_is_found_again_and_the_batch_sent_again(caplog):
    model = tiny_model(7)
    first = new_server(model)
    client = client_of(first)
    planes, mask = leaves(seed=8)[0]
    want = reference(model).evaluate(planes, mask)[0]
    np.testing.assert_allclose(client.evaluate(planes, mask)[0], want, atol=1e-5)
    first.close()  # the server is gone; a new one comes up at the same address a bit later
    servers = []

    def come_back() -> None:
        time.sleep(0.5)
        servers.append(
            InferenceServer(first.address, NUM_PLANES, 8, A8, device="cpu", precision="float32")
        )
        servers[0].load_weights(model, 2)

    thread = threading.Thread(target=come_back)
    thread.start()
    try:
        with caplog.at_level("WARNING", logger="checkerzero.inference_server.client"):
            priors, _ = client.evaluate(planes, mask)
    finally:
        thread.join()
        client.close()
        for s in servers:
            s.close()
    np.testing.assert_allclose(priors, want, atol=1e-5)
    assert client.reconnects == 1 and client.version == 2
    assert any("lost inference server" in r.message for r in caplog.records)
    assert any("is back after" in r.message for r in caplog.records)


def test_a_client_of_another_game_is_refused_in_one_line():
    server = new_server(tiny_model(9))
    client = RemoteInference(server.address, NUM_PLANES, 6, num_actions(6), 8)
    try:
        planes = np.zeros((1, NUM_PLANES, 6, 6), np.float32)
        mask = np.ones((1, num_actions(6)), bool)
        with pytest.raises(ValueError, match="refused us: client sends 15 planes of 6x6"):
            client.evaluate(planes, mask)
    finally:
        client.close()
        server.close()


def test_one_server_per_gpu_and_cpu_nodes_keep_in_actor_inference_by_default():
    def node(nid: str, cpus: float, gpus: float = 0) -> dict:
        resources = {"CPU": cpus} | ({"GPU": gpus} if gpus else {})
        return {"NodeID": nid, "Alive": True, "Resources": resources}

    nodes = [node("head", 16, gpus=1), node("multi", 32, gpus=4), node("cpu", 8)]
    # The head's GPU less the evaluator's 0.2; four servers on the 4-GPU node; none on CPU.
    assert plan_servers(nodes, "head", head_reserved_gpus=0.2) == {
        "head": [0.8],
        "multi": [1.0, 1.0, 1.0, 1.0],
    }
    assert plan_servers(nodes, "head", cpu_nodes=True)["cpu"] == [0.0]
    # An inference on a whole GPU of a one-GPU head leaves it no server.
    assert "head" not in plan_servers(nodes, "head", head_reserved_gpus=1.0)


# ------------------------------------------------------------------------------------------------
# Real Ray and Redis: actor processes and a server process
# ------------------------------------------------------------------------------------------------

CALL_TIMEOUT_S = 120.0
GAMES_TIMEOUT_S = 180.0
RAY_OVERRIDES = (
    "preset=smoke",
    "selfplay.actors=2",
    "selfplay.games_in_parallel=2",
    "mcts.simulations=8",
    "game.max_plies=60",
    "replay.window_positions=10000000",
    "replay.connect_retries=3",
    "replay.connect_backoff_s=0.1",
    "selfplay.inference_server.enabled=true",
    "selfplay.inference_server.cpu_nodes=true",  # this machine has no GPU: a server on CPU
    "selfplay.inference_server.cpus=0",
    "selfplay.inference_server.pipeline=1",  # both actors' leaves in one batch where they can be
    "selfplay.inference_server.max_wait_ms=50",
)


class Run:
    def __init__(self, store: ReplayStore, client, pool: ActorPool, cfg) -> None:
        self.store, self.client, self.pool, self.cfg = store, client, pool, cfg
        self.channel = WeightsChannel(client, namespace=cfg.replay.namespace)

    def records(self) -> dict[int, GameRecord]:
        stats = self.store.stats()
        first = stats.games_added - stats.window_games + 1
        return {
            gid: GameRecord.from_bytes(self.store.get(gid))
            for gid in range(first, stats.games_added + 1)
        }

    def quiet_read(self) -> tuple[dict[int, GameRecord], object, int]:
        return read_while_no_game_arrives(
            self.store, self.client, self.cfg.replay.namespace, self.records, GAMES_TIMEOUT_S
        )

    def digests(self) -> dict[int, bytes]:
        return {gid: hashlib.sha256(r.to_bytes()).digest() for gid, r in self.records().items()}

    def by_actor(self) -> Counter[int]:
        return Counter(r.actor_id for r in self.records().values())

    @property
    def server(self):
        (server,) = self.pool.servers.values()
        return server.actor

    def get(self, ref, timeout_s: float = CALL_TIMEOUT_S):
        return ray.get(ref, timeout=timeout_s)

    def publish(self, version: int, seed: int) -> None:
        model = CheckersNet(ModelConfig(**{**dict(self.cfg.model), "board_size": 8}))
        torch.manual_seed(seed)
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.05)
        self.channel.publish(encode_checkpoint(model, step=version, version=version), version)


@pytest.fixture(scope="module")
def run(tmp_path_factory, config) -> Iterator[Run]:
    run_dir = tmp_path_factory.mktemp("server_run")
    ray_tmp = tempfile.mkdtemp(prefix="czray", dir="/tmp")  # short: Ray's socket paths
    saved_tmp = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = ray_tmp
    cluster = redis_server = pool = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 3})
        ray.init(address=cluster.address)
        redis_server = EmbeddedRedis(run_dir).start()
        cfg = config(*RAY_OVERRIDES, f"run_dir={run_dir}")
        client = connect(redis_server.url, redis_server.password, retries=3, backoff_s=0.1)
        store = ReplayStore(
            client, namespace=cfg.replay.namespace, window_positions=cfg.replay.window_positions
        )
        pool = ActorPool(cfg, redis_server.url, redis_server.password, client)
        r = Run(store, client, pool, cfg)
        r.publish(1, seed=1)
        pool.start()
        yield r
    finally:
        if pool is not None and ray.is_initialized():
            pool.stop(timeout_s=30.0)
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if redis_server is not None:
            redis_server.stop()
        if saved_tmp is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved_tmp
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_actor_processes_share_one_server_and_their_games_reach_the_store(run):
    assert run.pool.size == 2 and len(run.pool.servers) == 1
    devices = [run.get(a.device.remote()) for a in run.pool.actors]
    assert devices == ["server", "server"]
    pids = {run.get(a.where.remote())[1] for a in run.pool.actors}
    server_pid = run.get(run.server.where.remote())[1]
    assert len(pids | {server_pid}) == 3  # three processes
    wait_until(
        lambda: all(run.by_actor()[a] >= 2 for a in (0, 1)),
        GAMES_TIMEOUT_S,
        "two games from each actor",
    )
    stats = run.get(run.server.stats.remote())
    assert stats["clients"] == 2 and stats["version"] == 1
    assert stats["requests"] > stats["batches"]  # batches held leaves of both actors
    assert stats["max_rows"] > 2 * 8  # more than one actor's most (2 games x 8 leaves)
    # The run's metrics carry the server's batches (the first call only starts the count).
    assert run.pool.metrics()["selfplay/servers"] == 1.0
    mean = wait_until(
        lambda: run.pool.metrics().get("selfplay/server_batch_mean"), CALL_TIMEOUT_S, "batches"
    )
    assert 1 <= mean <= 2 * 2 * 8  # at most both actors' 16 leaves in one batch

    records, stats, counted = run.quiet_read()
    assert stats.window_games == len(records) == stats.games_added
    assert 0 < counted <= stats.games_added
    assert {r.network_version for r in records.values()} <= {1, 2}


def both_playing(run):
    wait_until(
        lambda: all(run.by_actor()[a] >= 1 for a in (0, 1)),
        GAMES_TIMEOUT_S,
        "a game from each actor",
    )


def test_weights_published_mid_run_reach_every_actor_without_a_restart(run):
    pids = [run.get(a.where.remote())[1] for a in run.pool.actors]
    last = max(run.records(), default=0)
    run.publish(2, seed=2)
    wait_until(
        lambda: (
            {
                r.actor_id
                for gid, r in run.records().items()
                if gid > last and r.network_version >= 2
            }
            == {0, 1}
        ),
        GAMES_TIMEOUT_S,
        "a game played with weights v2 from each actor",
    )
    assert [run.get(a.where.remote())[1] for a in run.pool.actors] == pids
    assert run.pool.restarts == 0
    assert run.get(run.server.stats.remote())["version"] == 2
    records, stats, _ = run.quiet_read()
    assert len(records) == stats.games_added  # every game stored is there


def test_a_killed_server_comes_back_and_its_actors_go_on_with_their_games(run):
    both_playing(run)  # each actor is the server's client (so when run alone too)
    node, pid = run.get(run.server.where.remote())
    actor_pids = [run.get(a.where.remote())[1] for a in run.pool.actors]
    before = run.digests()
    last = max(before)
    os.kill(pid, signal.SIGKILL)

    def restarted():
        try:
            where = run.get(run.server.where.remote(), timeout_s=5.0)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return None
        return where if where[1] != pid else None

    assert wait_until(restarted, CALL_TIMEOUT_S, "Ray to restart the server")[0] == node
    wait_until(
        lambda: {r.actor_id for gid, r in run.records().items() if gid > last} == {0, 1},
        GAMES_TIMEOUT_S,
        "new games from both actors",
    )
    # The actors were not restarted: they waited, found the server again and played on.
    assert [run.get(a.where.remote())[1] for a in run.pool.actors] == actor_pids
    assert all(run.get(a.server_reconnects.remote()) >= 1 for a in run.pool.actors)
    after = run.digests()
    assert {gid: after.get(gid) for gid in before} == before  # no finished game lost
    assert run.pool.restarts == 0


def test_a_killed_actor_does_not_stall_the_servers_batches_and_comes_back(run):
    both_playing(run)
    victim = run.pool.actors[0]
    _, pid = run.get(victim.where.remote())
    before = run.digests()
    last = max(before)
    os.kill(pid, signal.SIGKILL)
    batches = run.get(run.server.stats.remote())["batches"]
    # The other actor's games keep coming through the server meanwhile. A game of actor 1 that
    # reaches the store now may have been played before the kill, so the server's own count of
    # batches is what shows it was not stalled by the dead client.
    wait_until(
        lambda: run.get(run.server.stats.remote())["batches"] > batches,
        CALL_TIMEOUT_S,
        "the server to batch the living actor's leaves",
    )
    wait_until(
        lambda: any(r.actor_id == 1 for gid, r in run.records().items() if gid > last),
        GAMES_TIMEOUT_S,
        "a new game from the actor that lives",
    )
    wait_until(
        lambda: any(r.actor_id == 0 for gid, r in run.records().items() if gid > last),
        GAMES_TIMEOUT_S,
        "a game from the restarted actor",
    )
    assert run.get(victim.where.remote())[1] != pid
    after = run.digests()
    assert {gid: after.get(gid) for gid in before} == before
