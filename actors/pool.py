"""The self-play actor pool: which node runs how many actors, on CPU or on a share of a GPU.

The pool follows the cluster while the run goes on. Every `selfplay.node_poll_s` it compares the
live nodes with its actors: a node that joined gets its actors at once, a node that left has its
actors forgotten (their finished games are already in Redis; only games in progress are lost),
and the terminal says how many actors now run on how many nodes.

Placement (`plan_placement`, a plain function): with `selfplay.actors=null` every node gets one
actor per free core (the head keeps one for the learner), so the pool grows with the cluster;
with a count the pool keeps that many, spread in proportion to CPUs, and places actors again when
a node leaves. With `selfplay.device` auto or cuda, a node's GPUs take `1 / gpus_per_actor`
actors each (each plays `games_in_parallel` games, so their batches fill the GPU together); the
node's remaining cores play on CPU under auto, and stay idle under cuda.

With `selfplay.inference_server.enabled` (`plan_servers`) a node's GPUs hold one inference server
each instead (`actors/inference_server.py`; on the head, the share the evaluator leaves), and
every actor of that node is a tree worker on a CPU core that sends its leaves to one of them;
nodes without a GPU keep in-actor inference unless `inference_server.cpu_nodes` is on.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import uuid
from collections.abc import Iterable, Mapping
from contextlib import suppress
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.actor import STATS_FIELDS, SelfPlayActor
from actors.inference_server import InferenceServerActor, server_address
from checkerzero.cluster.preflight import another_machine, is_loopback_url
from checkerzero.cluster.supervisor import RunLoop, stop_loops
from checkerzero.store.keys import (
    selfplay_actor_starts_key,
    selfplay_games_by_node_key,
    selfplay_stats_key,
)
from checkerzero.store.replay import redact_url

logger = logging.getLogger(__name__)

SLOT_EPSILON = 1e-9  # 1.0 / 0.25 GPUs must count as 4 actors despite float rounding
MIN_SERVER_GPU = (
    0.1  # a GPU share below this (what the evaluator leaves of the head's) gets no server
)


@dataclasses.dataclass(frozen=True)
class Slots:
    """Actors one node runs: on its CPU, and on a share of its GPUs."""

    cpu: int = 0
    gpu: int = 0

    @property
    def total(self) -> int:
        return self.cpu + self.gpu


def gpu_slots(
    resources: Mapping[str, float], device: str, gpus_per_actor: float, reserved: float = 0.0
) -> int:
    """How many actors the node's GPUs take (0 with selfplay.device=cpu), less ``reserved``
    (the share other work holds there: the evaluator)."""
    gpus = float(resources.get("GPU", 0)) - reserved
    if device == "cpu" or gpus <= 0:
        return 0
    return int(gpus / gpus_per_actor + SLOT_EPSILON)


def plan_placement(
    nodes: Iterable[Mapping[str, Any]],
    requested: int | None,
    head_node: str,
    *,
    device: str = "cpu",
    gpus_per_actor: float = 1.0,
    head_reserved_gpus: float = 0.0,
) -> dict[str, Slots]:
    """Actors per alive node id: as many as the node holds (``requested`` None) or
    ``requested`` in all, spread in proportion to what each node holds.

    A node holds one actor per free core (the head keeps one for the learner); under
    ``device=cuda`` it holds its GPU slots instead. Its GPU slots are filled first (auto, cuda).
    ``head_reserved_gpus``: the share of the head's GPU held by other work (a GPU evaluator).
    """
    capacity: dict[str, int] = {}
    gpu: dict[str, int] = {}
    for n in nodes:
        resources = n["Resources"]
        cpus = int(resources.get("CPU", 0))
        if not n.get("Alive") or cpus <= 0:
            continue
        nid = n["NodeID"]
        reserved = head_reserved_gpus if nid == head_node else 0.0
        gpu[nid] = gpu_slots(resources, device, gpus_per_actor, reserved)
        free = max(0, cpus - (1 if nid == head_node else 0))
        capacity[nid] = gpu[nid] if device == "cuda" else free
    if device == "cuda" and not any(capacity.values()):
        raise RuntimeError("selfplay.device=cuda but no alive Ray node has a GPU")
    if not capacity:
        raise RuntimeError("no Ray node with CPUs is alive")
    if requested is None:
        counts = dict(capacity)
        if sum(counts.values()) == 0:  # a one-core machine: its core plays anyway
            counts[head_node if head_node in counts else next(iter(counts))] = 1
    else:
        held = {nid: c for nid, c in capacity.items() if c > 0} or dict.fromkeys(capacity, 1)
        total = sum(held.values())
        counts = dict.fromkeys(capacity, 0)
        order = sorted(held, key=lambda nid: -held[nid])
        for i in range(requested):  # largest remainder, round-robin by share of capacity
            nid = max(order, key=lambda n: held[n] / total * (i + 1) - counts[n])
            counts[nid] += 1
    plan = {}
    for nid, count in counts.items():
        on_gpu = min(count, gpu[nid])
        plan[nid] = Slots(cpu=count - on_gpu, gpu=on_gpu)
    return plan


def plan_servers(
    nodes: Iterable[Mapping[str, Any]],
    head_node: str,
    *,
    cpu_nodes: bool = False,
    head_reserved_gpus: float = 0.0,
) -> dict[str, list[float]]:
    """Inference servers per alive node id, as the GPU share each takes: one whole GPU each,
    the head's last one less ``head_reserved_gpus`` (the evaluator's share); ``[0.0]`` (one
    server on CPU) for a node without a GPU when ``cpu_nodes``, else none there."""
    plan: dict[str, list[float]] = {}
    for n in nodes:
        resources = n["Resources"]
        if not n.get("Alive") or int(resources.get("CPU", 0)) <= 0:
            continue
        nid = n["NodeID"]
        gpus = float(resources.get("GPU", 0))
        if gpus > 0:
            free = gpus - (head_reserved_gpus if nid == head_node else 0.0)
            whole = int(free + SLOT_EPSILON)
            shares = [1.0] * whole
            if free - whole > MIN_SERVER_GPU:  # the rest of the GPU the evaluator shares
                shares.append(round(free - whole, 6))
            if shares:
                plan[nid] = shares
        elif cpu_nodes:
            plan[nid] = [0.0]
    return plan


def _less_cpus(node: Mapping[str, Any], cpus: float) -> Mapping[str, Any]:
    """The node as `plan_placement` sees it once servers hold `cpus` of its cores: CPUs only
    (its GPUs are the servers'), so its actors are tree workers on CPU."""
    left = math.floor(float(node["Resources"].get("CPU", 0)) - cpus + SLOT_EPSILON)
    return {**node, "Resources": {"CPU": max(0, left)}}


@dataclasses.dataclass
class Member:
    loop: RunLoop  # the actor and its run() call, restarted when it ends
    actor_id: int
    node_id: str
    device: str
    server: str | None = None  # the address of the inference server it uses

    @property
    def actor(self) -> Any:
        return self.loop.actor


@dataclasses.dataclass
class Server:
    """An inference server: its Ray actor (restarted by Ray), node, address and GPU share."""

    actor: Any
    node_id: str
    address: str
    gpus: float


class ActorPool:
    def __init__(self, cfg: DictConfig, url: str, password: str | None, client: Any) -> None:
        """``client``: the caller's Redis client, for the actors' counters (``metrics``)."""
        self.cfg = cfg
        self.url, self.password = url, password
        self._client = client
        self._container: dict | None = None
        self.members: dict[int, Member] = {}
        self.servers: dict[tuple[str, int], Server] = {}  # (node id, index) -> inference server
        self._run_token = uuid.uuid4().hex[:8]  # makes server addresses unique to this run
        self._restarts_of_gone = 0  # run() restarts of actors whose node left
        self._next_id = 0
        self._head = ""
        self._last_sync = 0.0
        self._last: tuple[float, dict[str, int]] | None = None
        self._last_servers: tuple[float, dict[str, int]] | None = None
        # A store on loopback: only the head's machine reaches it (preflight checks the nodes at
        # start; a machine that joins later gets no actors, said once per node).
        self._store_on_loopback = is_loopback_url(url)
        self._refused: set[str] = set()
        # The share of the head's GPU held by other work (the evaluator on a GPU share): set
        # before start(); the head's GPU takes that many fewer actors.
        self.head_reserved_gpus = 0.0

    @property
    def actors(self) -> list[Any]:
        """The live actors' handles in order of their ids."""
        return [self.members[i].actor for i in sorted(self.members)]

    @property
    def restarts(self) -> int:
        """run() calls restarted so far, over all actors."""
        return self._restarts_of_gone + sum(m.loop.restarts for m in self.members.values())

    def process_restarts(self) -> int:
        """Times Ray restarted the process of one of this pool's actors (each start of an
        actor's process counts in Redis; all but its first are restarts)."""
        starts = self._client.hgetall(selfplay_actor_starts_key(self.cfg.replay.namespace))
        ours = f"{self._run_token}:".encode()
        return sum(max(0, int(n) - 1) for field, n in starts.items() if field.startswith(ours))

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def nodes(self) -> int:
        """Nodes that run at least one actor."""
        return len({m.node_id for m in self.members.values()})

    def start(self) -> None:
        self._container = OmegaConf.to_container(self.cfg, resolve=True)
        self._head = ray.get_runtime_context().get_node_id()
        self.sync_nodes()

    def sync_nodes(self) -> bool:
        """Actors for nodes that joined, none for nodes that left; True if anything changed."""
        self._last_sync = time.monotonic()
        nodes = self._reaching_the_store(ray.nodes())
        alive = {n["NodeID"] for n in nodes if n.get("Alive")}
        changed = False
        for member in [m for m in self.members.values() if m.node_id not in alive]:
            self._forget(member)
            changed = True
        for key in [k for k in self.servers if k[0] not in alive]:
            with suppress(Exception):
                ray.kill(self.servers.pop(key).actor, no_restart=True)
        if changed:
            logger.warning(
                "a node left: its actors are gone (their finished games are in the store)"
            )
        nodes, started = self._sync_servers(nodes)
        changed = changed or started
        sp = self.cfg.selfplay
        plan = plan_placement(
            nodes,
            sp.actors,
            self._head,
            device=str(sp.device),
            gpus_per_actor=float(sp.gpus_per_actor),
            head_reserved_gpus=self.head_reserved_gpus,
        )
        on_node: dict[str, list[Member]] = {}
        for m in self.members.values():
            on_node.setdefault(m.node_id, []).append(m)
        cpus = {n["NodeID"]: float(n["Resources"].get("CPU", 1)) for n in nodes}
        budget = None if sp.actors is None else int(sp.actors) - self.size
        for node_id, slots in plan.items():
            have = on_node.get(node_id, [])
            for device, wanted in (("cuda", slots.gpu), ("cpu", slots.cpu)):
                missing = wanted - sum(1 for m in have if m.device == device)
                for _ in range(max(0, missing)):
                    if budget is not None and budget <= 0:
                        break
                    self._spawn(
                        node_id,
                        device,
                        cpu_share=min(1.0, cpus[node_id] / slots.total),
                        server=self._server_for(node_id),
                    )
                    changed = True
                    if budget is not None:
                        budget -= 1
        if changed:
            gpu_actors = sum(1 for m in self.members.values() if m.device == "cuda")
            served = sum(1 for m in self.members.values() if m.server is not None)
            logger.info(
                "%d self-play actors on %d node(s) (%d on a GPU share, %d fed by %d "
                "inference server(s))",
                self.size,
                self.nodes,
                gpu_actors,
                served,
                len(self.servers),
            )
        return changed

    def _sync_servers(self, nodes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """Inference servers (selfplay.inference_server) started where the plan wants one and
        none runs; (`nodes` less the cores their servers take, True if a server was started)."""
        srv = self.cfg.selfplay.get("inference_server") or {}
        changed = False
        server_plan: dict[str, list[float]] = {}
        if srv.get("enabled", False):
            server_plan = plan_servers(
                nodes,
                self._head,
                cpu_nodes=bool(srv.get("cpu_nodes", False)),
                head_reserved_gpus=self.head_reserved_gpus,
            )
            for node_id, shares in server_plan.items():
                for index, gpus in enumerate(shares):
                    if (node_id, index) not in self.servers:
                        self._spawn_server(node_id, index, gpus, float(srv.get("cpus", 1.0)))
                        changed = True
            # A node with servers: its actors are tree workers on the cores the servers leave.
            server_cpus = float(srv.get("cpus", 1.0))
            nodes = [
                _less_cpus(n, server_cpus * len(server_plan[n["NodeID"]]))
                if n["NodeID"] in server_plan
                else n
                for n in nodes
            ]
        return nodes, changed

    def _reaching_the_store(self, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`nodes` less the machines that cannot reach a store on the head's loopback (one
        warning per such node)."""
        head = next((n for n in nodes if n["NodeID"] == self._head), None)
        if head is None or not self._store_on_loopback:
            return nodes
        kept = []
        for node in nodes:
            if not (node.get("Alive") and another_machine(head, node)):
                kept.append(node)
                continue
            if node["NodeID"] not in self._refused:
                self._refused.add(node["NodeID"])
                logger.warning(
                    "node %s (%s) gets no self-play actors: the replay store %s is on the "
                    "loopback of the head (%s), which that machine cannot reach; set "
                    "CHECKERZERO_REDIS_URL (replay.url) to a Redis every node reaches",
                    node["NodeID"][:8],
                    node.get("NodeManagerAddress"),
                    redact_url(self.url),
                    head.get("NodeManagerAddress"),
                )
        return kept

    def _spawn_server(self, node_id: str, index: int, gpus: float, cpus: float) -> None:
        address = server_address(self.cfg.replay.namespace, self._run_token, node_id, index)
        device = "cuda" if gpus > 0 else "cpu"
        actor = InferenceServerActor.options(
            num_cpus=cpus,
            num_gpus=gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self._container, address, self.url, self.password, device)
        self.servers[(node_id, index)] = Server(actor, node_id, address, gpus)
        logger.info(
            "inference server %s on node %s (%s)",
            address,
            node_id[:8],
            f"{gpus:g} GPU" if gpus else "CPU",
        )

    def _server_for(self, node_id: str) -> str | None:
        """The node's server with the fewest actors (None: the node has no server)."""
        on_node = [s for (nid, _), s in sorted(self.servers.items()) if nid == node_id]
        if not on_node:
            return None
        load = {s.address: 0 for s in on_node}
        for m in self.members.values():
            if m.server in load:
                load[m.server] += 1
        return min(load, key=lambda a: load[a])

    def _spawn(
        self, node_id: str, device: str, cpu_share: float, server: str | None = None
    ) -> None:
        if server is not None:
            device = "cpu"  # a tree worker: the server holds the network (and the GPU)
        gpus = float(self.cfg.selfplay.gpus_per_actor) if device == "cuda" else 0.0
        actor = SelfPlayActor.options(
            num_cpus=cpu_share,
            num_gpus=gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(
            self._container,
            self._next_id,
            self.url,
            self.password,
            device,
            server,
            starts_field=f"{self._run_token}:{self._next_id}",
        )
        loop = RunLoop(actor, f"self-play actor {self._next_id}")
        self.members[self._next_id] = Member(loop, self._next_id, node_id, device, server)
        self._next_id += 1

    def _forget(self, member: Member) -> None:
        self.members.pop(member.actor_id, None)
        self._restarts_of_gone += member.loop.restarts
        with suppress(Exception):  # its node is gone; make sure Ray does not bring it back
            ray.kill(member.actor, no_restart=True)

    def check(self) -> None:
        """Follows the cluster (every selfplay.node_poll_s) and restarts run() calls that
        ended (an error Ray could not retry)."""
        if time.monotonic() - self._last_sync >= float(self.cfg.selfplay.node_poll_s):
            self.sync_nodes()
        for member in self.members.values():
            member.loop.check()

    def stop(self, timeout_s: float) -> None:
        stop_loops([m.loop for m in self.members.values()], timeout_s)
        for server in self.servers.values():  # after the actors, which wait for their server
            with suppress(Exception):
                ray.kill(server.actor, no_restart=True)
        self.servers.clear()

    def forget_starts(self) -> None:
        """Removes this pool's fields from the ``actor_starts`` hash, once its actors are
        stopped (each learner start has its own run token, so a store kept across runs would
        gather one field per actor per run). Reads Redis: the caller handles its errors."""
        key = selfplay_actor_starts_key(self.cfg.replay.namespace)
        ours = f"{self._run_token}:".encode()
        fields = [f for f in self._client.hkeys(key) if f.startswith(ours)]
        if fields:
            self._client.hdel(key, *fields)

    def server_stats(self) -> dict[str, dict[str, int]]:
        """Each inference server's counters (`InferenceServer.stats`) by address; a server
        that does not answer within a second is left out."""
        refs = {s.address: s.actor.stats.remote() for s in self.servers.values()}
        out = {}
        for address, ref in refs.items():
            with suppress(Exception):
                out[address] = ray.get(ref, timeout=1.0)
        return out

    def games_by_node(self) -> dict[str, int]:
        """Games stored by the actors of each node (nodes that left included)."""
        raw = self._client.hgetall(selfplay_games_by_node_key(self.cfg.replay.namespace))
        return {k.decode(): int(v) for k, v in raw.items()}

    def summary(self) -> dict[str, int]:
        return {
            "actors": self.size,
            "nodes": self.nodes,
            "nodes_with_games": sum(1 for v in self.games_by_node().values() if v > 0),
        }

    def metrics(self) -> dict[str, float]:
        raw = self._client.hgetall(selfplay_stats_key(self.cfg.replay.namespace))
        stats = {k.decode(): int(v) for k, v in raw.items()}
        now = time.monotonic()
        out: dict[str, float] = {
            "selfplay/actors": float(self.size),
            "selfplay/nodes": float(self.nodes),
            # Ray's restarts of a dead actor process, and the pool's of an ended run() call
            "selfplay/actor_restarts": float(self.process_restarts() + self.restarts),
            "selfplay/games_dropped": float(stats.get("dropped", 0)),
        }
        if self._last is not None:
            t0, before = self._last
            dt = max(now - t0, 1e-9)
            d = {k: stats.get(k, 0) - before.get(k, 0) for k in STATS_FIELDS}
            out["selfplay/evaluations_per_s"] = d["evaluations"] / dt
            if d["positions"] > 0:  # playout cap randomization: the share of full searches
                out["selfplay/full_search_share"] = d["full_positions"] / d["positions"]
            busy = d["network_ms"] + d["tree_ms"]
            if busy > 0:
                out["selfplay/network_share"] = d["network_ms"] / busy
        self._last = (now, stats)
        if self.servers:
            out |= self._server_metrics(now)
        return out

    def _server_metrics(self, now: float) -> dict[str, float]:
        """The inference servers' batches since the last call, summed over servers."""
        totals: dict[str, int] = {}
        for stats in self.server_stats().values():
            for key in ("batches", "rows", "device_us"):
                totals[key] = totals.get(key, 0) + int(stats.get(key, 0))
        out = {"selfplay/servers": float(len(self.servers))}
        if self._last_servers is not None:
            t0, before = self._last_servers
            d = {k: totals.get(k, 0) - before.get(k, 0) for k in totals}
            if d.get("batches", 0) > 0:  # a restarted server counts from 0: skip that interval
                out["selfplay/server_batch_mean"] = d["rows"] / d["batches"]
                out["selfplay/server_rows_per_s"] = d["rows"] / max(now - t0, 1e-9)
        self._last_servers = (now, totals)
        return out
