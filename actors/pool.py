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
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from contextlib import suppress
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.actor import STATS_FIELDS, SelfPlayActor, games_by_node_key, stats_key
from checkerzero.cluster.supervisor import RunLoop, stop_loops

logger = logging.getLogger(__name__)

SLOT_EPSILON = 1e-9  # 1.0 / 0.25 GPUs must count as 4 actors despite float rounding


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


@dataclasses.dataclass
class Member:
    loop: RunLoop  # the actor and its run() call, restarted when it ends
    actor_id: int
    node_id: str
    device: str

    @property
    def actor(self) -> Any:
        return self.loop.actor


class ActorPool:
    def __init__(self, cfg: DictConfig, url: str, password: str | None, client: Any) -> None:
        """``client``: the caller's Redis client, for the actors' counters (``metrics``)."""
        self.cfg = cfg
        self.url, self.password = url, password
        self._client = client
        self._container: dict | None = None
        self.members: dict[int, Member] = {}
        self._restarts_of_gone = 0  # run() restarts of actors whose node left
        self._next_id = 0
        self._head = ""
        self._last_sync = 0.0
        self._last: tuple[float, dict[str, int]] | None = None
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
        nodes = ray.nodes()
        alive = {n["NodeID"] for n in nodes if n.get("Alive")}
        changed = False
        for member in [m for m in self.members.values() if m.node_id not in alive]:
            self._forget(member)
            changed = True
        if changed:
            logger.warning(
                "a node left: its actors are gone (their finished games are in the store)"
            )
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
                    self._spawn(node_id, device, cpu_share=min(1.0, cpus[node_id] / slots.total))
                    changed = True
                    if budget is not None:
                        budget -= 1
        if changed:
            gpu_actors = sum(1 for m in self.members.values() if m.device == "cuda")
            logger.info(
                "%d self-play actors on %d node(s) (%d on a GPU share)",
                self.size,
                self.nodes,
                gpu_actors,
            )
        return changed

    def _spawn(self, node_id: str, device: str, cpu_share: float) -> None:
        gpus = float(self.cfg.selfplay.gpus_per_actor) if device == "cuda" else 0.0
        actor = SelfPlayActor.options(
            num_cpus=cpu_share,
            num_gpus=gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self._container, self._next_id, self.url, self.password, device)
        loop = RunLoop(actor, f"self-play actor {self._next_id}")
        self.members[self._next_id] = Member(loop, self._next_id, node_id, device)
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

    def games_by_node(self) -> dict[str, int]:
        """Games stored by the actors of each node (nodes that left included)."""
        raw = self._client.hgetall(games_by_node_key(self.cfg.replay.namespace))
        return {k.decode(): int(v) for k, v in raw.items()}

    def summary(self) -> dict[str, int]:
        return {
            "actors": self.size,
            "nodes": self.nodes,
            "nodes_with_games": sum(1 for v in self.games_by_node().values() if v > 0),
        }

    def metrics(self) -> dict[str, float]:
        raw = self._client.hgetall(stats_key(self.cfg.replay.namespace))
        stats = {k.decode(): int(v) for k, v in raw.items()}
        now = time.monotonic()
        out: dict[str, float] = {
            "selfplay/actors": float(self.size),
            "selfplay/nodes": float(self.nodes),
            "selfplay/actor_restarts": float(self.restarts),
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
        return out
