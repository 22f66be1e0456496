"""Alpha-beta self-play actors on a real multi-node Ray cluster (ray.cluster_utils.Cluster):
one per free core on every node, a node that joins later included, all writing to one store."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import ray
from ray.cluster_utils import Cluster
from waiting import wait_until

from actors.ab_pool import ABActorPool
from checkerzero.store.positions import PositionStream
from checkerzero.store.redis_server import EmbeddedRedis
from checkerzero.store.replay import connect
from game import nneval
from learner.nneval.model import NNEvalModel

TIMEOUT_S = 180.0  # actors importing the core on a busy 2-core machine


@pytest.fixture
def cluster_env(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="czray", dir="/tmp")  # short unix socket paths
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = ray_tmp
    cluster = server = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes(timeout=60)
        ray.init(address=cluster.address)
        server = EmbeddedRedis(tmp_path / "run").start()
        yield cluster, server
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if server is not None:
            server.stop()
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_actors_on_every_node_late_joiners_too_write_one_stream(cluster_env, config, tmp_path):
    cluster, server = cluster_env
    cfg = config(
        f"run_dir={tmp_path}/run",
        "preset=nneval",
        "game=small",
        "nneval.selfplay.depth=2",
        "nneval.selfplay.egdb=false",
        "nneval.dedup.bits_log2=20",
        "selfplay.node_poll_s=0.5",
    )
    client = connect(server.url, server.password, retries=3, backoff_s=0.1)
    stream = PositionStream(client, cfg.replay.namespace, bits_log2=20, probes=7)
    model = NNEvalModel(6, 16, 8, 8)
    net = nneval.quantise(model.float_weights(), size=6, output_scale=200)
    stream.publish_eval(0, nneval.save(net, tmp_path / "e.nn").read_bytes())
    stream.begin(0, 10**9, 0)
    pool = ABActorPool(cfg, server.url, server.password, client)
    try:
        pool.start()
        assert pool.size == 2 and pool.nodes == 2  # the head keeps a core for the learner
        late = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes(timeout=60)

        def three_nodes() -> bool:
            pool.check()
            return pool.nodes == 3

        wait_until(three_nodes, TIMEOUT_S, "an actor on the node that joined")
        where = {
            ray.get(m.actor.where.remote(), timeout=TIMEOUT_S)[0] for m in pool.members.values()
        }
        assert len(where) == 3
        before = stream.state().games
        wait_until(lambda: stream.state().games >= before + 6, TIMEOUT_S, "games from the actors")
        state = stream.state()
        # every actor writes to the one stream; the deduplication itself is pinned in
        # tests/test_nneval_loop.py (on a small board a busy cluster repeats many positions)
        assert state.positions > 0 and state.games >= before + 6
        cluster.remove_node(late)
    finally:
        pool.stop(30.0)
        client.close()
