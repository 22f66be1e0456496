"""Self-play on a real multi-node Ray cluster on this machine, writing to a private Redis.

`ray.cluster_utils.Cluster` runs a head (two CPUs, one kept for the learner) and two worker
nodes (one CPU each); `ActorPool` places one self-play actor per free core, so one per node. The
tests check that the actors land on every node and that every finished game reaches the replay
store, that a self-play actor killed with SIGKILL is restarted by Ray, its `run()` call retried,
with no finished game lost, and that a node joining late gets an actor whose games reach the
store, and loses none of them when it leaves.

Only this module's own cluster is shut down (`cluster.shutdown()`, never `ray stop`, which would
kill every Ray on the machine). Ray's temporary directory is private to the module, so the
cluster's address file does not redirect another `ray.init()` on this machine to it. Every
`ray.get` has a timeout: a call on a resource no node has would wait forever.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster
from waiting import read_while_no_game_arrives, wait_until

from actors.pool import ActorPool
from checkerzero.network.checkpoint import encode_checkpoint
from checkerzero.network.model import CheckersNet, model_config
from checkerzero.store.keys import selfplay_games_by_node_key
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import ReplayStore, connect
from checkerzero.store.weights import WeightsChannel
from game.records import GameRecord

NODES = 3  # the head and two workers
CALL_TIMEOUT_S = 120.0  # one actor call; 3 actors importing torch at once on 2 cores take a while
GAMES_TIMEOUT_S = 180.0  # for games to arrive (tiny settings finish a game in a few seconds)
# Tiny self-play: the smoke network, 2 games per actor, 8 simulations, games capped at 60 plies;
# a window far above what the tests write, so nothing is evicted and every game stays countable.
OVERRIDES = (
    "preset=smoke",
    "selfplay.actors=null",  # one per free core: the head (2 CPUs) keeps one, each worker 1
    "selfplay.games_in_parallel=2",
    "mcts.simulations=8",
    "game.max_plies=60",
    "replay.window_positions=10000000",
    "replay.connect_retries=3",
    "replay.connect_backoff_s=0.1",
)


class Loop:
    """The running pieces: the cluster's node ids, the store, the pool and its config."""

    def __init__(
        self, cluster: Cluster, nodes: set[str], store: ReplayStore, client, pool: ActorPool, cfg
    ) -> None:
        self.cluster, self.nodes, self.store, self.client = cluster, nodes, store, client
        self.pool, self.cfg = pool, cfg

    def records(self) -> dict[int, bytes]:
        """Every game in the window by id."""
        stats = self.store.stats()
        first = stats.games_added - stats.window_games + 1
        found = {}
        for game_id in range(first, stats.games_added + 1):
            data = self.store.get(game_id)
            assert data is not None, f"game {game_id} of the window is missing"
            found[game_id] = data
        return found

    def games_by_actor(self) -> Counter[int]:
        return Counter(GameRecord.from_bytes(data).actor_id for data in self.records().values())

    def where(self, actor, timeout_s: float = CALL_TIMEOUT_S) -> tuple[str, int]:
        return ray.get(actor.where.remote(), timeout=timeout_s)


@pytest.fixture(scope="module")
def loop(tmp_path_factory, config) -> Iterator[Loop]:
    run_dir = tmp_path_factory.mktemp("cluster_run")
    # Short: Ray's unix socket paths under it must stay below 108 characters.
    ray_tmp = tempfile.mkdtemp(prefix="czray", dir="/tmp")
    saved_tmp = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = ray_tmp
    cluster = redis_server = pool = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
        for _ in range(NODES - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes(timeout=60)
        ray.init(address=cluster.address)
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(nodes) == NODES

        redis_server = EmbeddedRedis(run_dir).start()
        cfg = config(*OVERRIDES, f"run_dir={run_dir}")
        client = connect(redis_server.url, redis_server.password, retries=3, backoff_s=0.1)
        store = ReplayStore(
            client, namespace=cfg.replay.namespace, window_positions=cfg.replay.window_positions
        )
        # The actors wait for published weights: version 1 of a fresh smoke-sized network.
        model = CheckersNet(model_config(cfg.model, cfg.game.size))
        WeightsChannel(client, namespace=cfg.replay.namespace).publish(
            encode_checkpoint(model, step=0, version=1), 1
        )
        pool = ActorPool(cfg, redis_server.url, redis_server.password, client)
        pool.start()
        yield Loop(cluster, nodes, store, client, pool, cfg)
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


def test_actors_on_every_node_and_all_their_games_reach_the_store(loop):
    assert loop.pool.size == NODES and loop.pool.nodes == NODES
    placed = [loop.where(actor) for actor in loop.pool.actors]
    assert {node for node, _ in placed} == loop.nodes  # one actor on each of the three nodes
    assert len({pid for _, pid in placed}) == NODES

    # Every actor's games arrive: each has written records, and each record in the store is a
    # valid game whose length the store counted.
    by_actor = wait_until(
        lambda: (c := loop.games_by_actor()) and all(c[a] >= 2 for a in range(NODES)) and c,
        GAMES_TIMEOUT_S,
        "two finished games from every actor",
    )
    assert set(by_actor) == set(range(NODES))

    # The actors keep writing: compare the records with counters read around them while no game
    # arrived (else a new game would look lost or extra).
    records, stats, counted = read_while_no_game_arrives(
        loop.store, loop.client, loop.cfg.replay.namespace, loop.records, GAMES_TIMEOUT_S
    )
    positions = sum(GameRecord.from_bytes(r).num_decisions for r in records.values())
    assert stats.window_games == len(records) == stats.games_added  # nothing evicted or lost
    assert stats.window_positions == positions
    # The actors' own counters (written after each game is stored) never exceed the store's.
    assert 0 < counted <= stats.games_added


def test_killed_actor_is_restarted_and_no_finished_game_is_lost(loop):
    victim_id = NODES - 1  # on a worker node
    victim = loop.pool.actors[victim_id]
    node, pid = loop.where(victim)
    wait_until(
        lambda: loop.games_by_actor()[victim_id] >= 1, GAMES_TIMEOUT_S, "a game from the victim"
    )
    starts_key = f"{loop.cfg.replay.namespace}:selfplay:starts"
    starts_before = int(loop.client.get(starts_key))
    before = {gid: hashlib.sha256(data).digest() for gid, data in loop.records().items()}
    assert loop.pool.metrics()["selfplay/actor_restarts"] == 0.0

    os.kill(pid, signal.SIGKILL)

    def restarted() -> tuple[str, int] | None:
        try:
            where = loop.where(victim, timeout_s=5.0)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return None  # still restarting
        return where if where[1] != pid else None

    new_node, _ = wait_until(restarted, CALL_TIMEOUT_S, "Ray to restart the actor")
    assert new_node == node  # node affinity: it came back on the same node
    assert int(loop.client.get(starts_key)) == starts_before + 1  # its constructor ran again
    last_before = max(before)

    # Its run() call was retried by Ray (max_task_retries): new games from it arrive, and the
    # pool saw no failed call to restart by hand.
    def new_game_from_victim() -> bool:
        loop.pool.check()
        return any(
            GameRecord.from_bytes(data).actor_id == victim_id
            for gid, data in loop.records().items()
            if gid > last_before
        )

    wait_until(new_game_from_victim, GAMES_TIMEOUT_S, "a game from the restarted actor")
    assert loop.pool.restarts == 0
    # The restart by Ray is counted: the only one, of the one actor killed.
    assert loop.pool.process_restarts() == 1
    assert loop.pool.metrics()["selfplay/actor_restarts"] == 1.0

    # No finished game was lost: every record the store had before the kill is still there.
    after = {gid: hashlib.sha256(data).digest() for gid, data in loop.records().items()}
    assert {gid: after.get(gid) for gid in before} == before
    assert len(after) > len(before)


def test_a_node_that_joins_gets_actors_and_one_that_leaves_loses_no_finished_game(loop):
    """The pool follows the cluster: a late node gets its actor (on CPU: selfplay.device=auto
    and no GPU here) and its games reach the store; when it leaves, its actor is dropped and
    every game it had finished stays in the store."""
    late = loop.cluster.add_node(num_cpus=1)
    loop.cluster.wait_for_nodes(timeout=60)
    late_id = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] not in loop.nodes)

    def placed_on_late_node():
        loop.pool.check()  # looks at the nodes every selfplay.node_poll_s
        return [m for m in loop.pool.members.values() if m.node_id == late_id]

    (member,) = wait_until(placed_on_late_node, CALL_TIMEOUT_S, "an actor on the late node")
    assert loop.pool.size == NODES + 1 and loop.pool.nodes == NODES + 1
    assert ray.get(member.actor.device.remote(), timeout=CALL_TIMEOUT_S) == "cpu"
    games_key = selfplay_games_by_node_key(loop.cfg.replay.namespace)
    wait_until(
        lambda: int(loop.client.hget(games_key, late_id) or 0) >= 1,
        GAMES_TIMEOUT_S,
        "a game from the late node's actor",
    )
    late_games = {
        gid: hashlib.sha256(data).digest()
        for gid, data in loop.records().items()
        if GameRecord.from_bytes(data).actor_id == member.actor_id
    }
    assert late_games  # its games are in the store, under its actor id

    loop.cluster.remove_node(late)

    def dropped():
        loop.pool.check()
        return loop.pool.nodes == NODES and loop.pool.size == NODES

    wait_until(dropped, CALL_TIMEOUT_S, "the pool to drop the departed node's actor")
    assert member.actor_id not in loop.pool.members
    after = loop.records()
    assert {gid: hashlib.sha256(after[gid]).digest() for gid in late_games} == late_games


def test_a_machine_that_joins_gets_no_actors_while_the_store_is_on_loopback(loop, caplog):
    """The store here is the private Redis on 127.0.0.1: a node on another address (another
    machine, as far as the pool can tell) that joins after the start is refused actors, with
    one warning line naming it and why, however often the pool looks again."""
    other = loop.cluster.add_node(num_cpus=1, node_ip_address="127.0.0.2")
    try:
        loop.cluster.wait_for_nodes(timeout=60)
        (node,) = [n for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == "127.0.0.2"]
        before = set(loop.pool.members)
        with caplog.at_level(logging.WARNING, logger="actors.pool"):
            for _ in range(3):
                loop.pool.sync_nodes()
        assert set(loop.pool.members) == before  # no actor anywhere new, none on that node
        assert all(m.node_id != node["NodeID"] for m in loop.pool.members.values())
        head = ray.get_runtime_context().get_node_id()
        head_address = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == head)
        refused = [r.getMessage() for r in caplog.records if "gets no self-play actors" in r.msg]
        assert refused == [
            f"node {node['NodeID'][:8]} (127.0.0.2) gets no self-play actors: the replay store "
            f"{loop.pool.url} is on the loopback of the head ({head_address}), which that "
            "machine cannot reach; set CHECKERZERO_REDIS_URL (replay.url) to a Redis every "
            "node reaches"
        ]
    finally:
        loop.cluster.remove_node(other)
