"""Self-play as Ray actors: a thin shell over `actors.self_play.run_self_play`.

Each actor owns its lifecycle and I/O: it connects to the run's Redis, follows the weights
channel (the latest weights, or the gate's best), plays games many at a time, and writes every
finished game's record bytes straight into the replay store (no central buffer actor, so memory
stays bounded whatever the ratio of self-play to training). Ray restarts a dead actor
(`max_restarts=-1`) and retries its `run()` call; games it had finished are already in Redis.

`ActorPool` places the actors on every node with CPUs (node affinity, a fraction of a CPU each
when the count exceeds the cores) and reports their throughput from counters they keep in Redis.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import ray
import torch
from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.self_play import run_self_play
from learner.checkpoint import decode_checkpoint
from learner.inference import NetworkEvaluator
from learner.replay import ReplayStore, connect
from learner.weights import WeightsChannel

logger = logging.getLogger(__name__)

WEIGHTS_POLL_S = 1.0  # how often an actor checks for a new weights version (one small GET)
SEED_STRIDE = 1_000_003 * 1_000_003  # seed offset of each further run() call in one actor life:
# beyond every (run seed, start count) seed of __init__, so no two calls share a seed
STATS_FIELDS = ("games", "positions", "evaluations", "batches", "network_ms", "tree_ms")


def stats_key(namespace: str) -> str:
    return f"{namespace}:selfplay:stats"


class SelfPlayWorker:
    """The body of a self-play actor, usable without Ray (tests, `python -m actors`)."""

    def __init__(
        self, cfg: Mapping[str, Any], actor_id: int, url: str, password: str | None
    ) -> None:
        torch.set_num_threads(int(cfg["selfplay"]["torch_threads"]))
        self.cfg = cfg
        self.actor_id = actor_id
        replay = cfg["replay"]
        self.client = connect(
            url, password, retries=replay["connect_retries"], backoff_s=replay["connect_backoff_s"]
        )
        self.namespace = replay["namespace"]
        self.store = ReplayStore(
            self.client, namespace=self.namespace, window_positions=replay["window_positions"]
        )
        gating = bool(cfg.get("evaluation", {}).get("gating", False))
        self.channel = WeightsChannel(
            self.client, namespace=self.namespace, follow="best" if gating else "latest"
        )
        self.evaluator: Any = None
        self.version = 0
        self._stop = threading.Event()
        self._last_poll = 0.0
        self._seed_calls = 0
        # A fresh seed on every (re)start, so a restarted actor does not replay the same games.
        self.seed = int(cfg.get("seed", 0)) * 1_000_003 + int(
            self.client.incr(f"{self.namespace}:selfplay:starts")
        )

    def stop(self) -> None:
        self._stop.set()

    def _poll_weights(self, wait: bool) -> None:
        while True:
            published = self.channel.poll()
            if published is not None:
                model, _ = decode_checkpoint(published.data, source=f"weights v{published.version}")
                if self.evaluator is None:
                    self.evaluator = NetworkEvaluator(model, device="cpu")
                else:
                    self.evaluator.load_state(model.state_dict(), published.version)
                self.version = published.version
                logger.info("actor %d plays with weights version %d", self.actor_id, self.version)
            if self.evaluator is not None or not wait or self._stop.is_set():
                return
            time.sleep(0.2)

    def _keep_going(self) -> bool:
        now = time.monotonic()
        if now - self._last_poll >= WEIGHTS_POLL_S:
            self._last_poll = now
            self._poll_weights(wait=False)
        return not self._stop.is_set()

    def _store(self, record: Any) -> None:
        self.store.add_game(record.to_bytes(), record.num_decisions)
        pipe = self.client.pipeline(transaction=False)
        key = stats_key(self.namespace)
        pipe.hincrby(key, "games", 1)
        pipe.hincrby(key, "positions", record.num_decisions)
        pipe.execute()

    def _batch_stats(self, evaluations: int, network_s: float, tree_s: float) -> None:
        pipe = self.client.pipeline(transaction=False)
        key = stats_key(self.namespace)
        pipe.hincrby(key, "evaluations", evaluations)
        pipe.hincrby(key, "batches", 1)
        pipe.hincrby(key, "network_ms", int(network_s * 1000))
        pipe.hincrby(key, "tree_ms", int(tree_s * 1000))
        pipe.execute()

    def run(self, seconds: float | None = None) -> dict[str, float]:
        """Plays until stopped, or for `seconds` once it has weights (benchmarks); returns this
        call's `SelfPlayStats` as a dict (games, positions, evaluations, seconds, network_s,
        tree_s; positions count every decision, those of unfinished games too)."""
        self._poll_weights(wait=True)
        if self._stop.is_set():
            return {}
        deadline = math.inf if seconds is None else time.monotonic() + seconds
        self._seed_calls += 1  # a second call in one life must not replay the first one's games
        _, stats = run_self_play(
            self.evaluator,
            self.cfg,
            None,
            seed=self.seed + (self._seed_calls - 1) * SEED_STRIDE,
            actor_id=self.actor_id,
            version_fn=lambda: self.version,
            on_record=self._store,
            stop=lambda: not self._keep_going() or time.monotonic() >= deadline,
            on_batch=self._batch_stats,
            keep_records=False,
        )
        return dataclasses.asdict(stats)


@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=2)
class SelfPlayActor:
    """Ray shell: `run()` plays until `stop()` (a second call slot, hence max_concurrency=2)."""

    def __init__(self, cfg: dict, actor_id: int, url: str, password: str | None) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        self.worker = SelfPlayWorker(cfg, actor_id, url, password)

    def run(self, seconds: float | None = None) -> dict[str, float]:
        return self.worker.run(seconds)

    def stop(self) -> None:
        self.worker.stop()

    def where(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()


def plan_placement(nodes: list[dict], requested: int | None, head_node: str) -> dict[str, int]:
    """Actors per node id: `requested` spread in proportion to CPUs, or one per free core.

    The head node keeps one core for the learner when counting free cores.
    """
    cpus = {
        n["NodeID"]: int(n["Resources"].get("CPU", 0))
        for n in nodes
        if n.get("Alive") and n["Resources"].get("CPU", 0) > 0
    }
    if not cpus:
        raise RuntimeError("no Ray node with CPUs is alive")
    if requested is None:
        plan = {nid: max(0, c - (1 if nid == head_node else 0)) for nid, c in cpus.items()}
        if sum(plan.values()) == 0:
            plan[head_node if head_node in plan else next(iter(plan))] = 1
        return plan
    plan = dict.fromkeys(cpus, 0)
    total = sum(cpus.values())
    order = sorted(cpus, key=lambda nid: -cpus[nid])
    for i in range(requested):  # largest remainder, round-robin by free share
        nid = max(order, key=lambda n: cpus[n] / total * (i + 1) - plan[n])
        plan[nid] += 1
    return plan


class ActorPool:
    def __init__(self, cfg: DictConfig, url: str, password: str | None, client: Any) -> None:
        """``client``: the caller's Redis client, for the actors' counters (``metrics``)."""
        self.cfg = cfg
        self.url, self.password = url, password
        self._client = client
        self.actors: list[Any] = []
        self.refs: dict[Any, Any] = {}
        self.nodes = 0
        self.restarts = 0
        self._last: tuple[float, dict[str, int]] | None = None

    @property
    def size(self) -> int:
        return len(self.actors)

    def start(self) -> None:
        container = OmegaConf.to_container(self.cfg, resolve=True)
        head = ray.get_runtime_context().get_node_id()
        plan = plan_placement(ray.nodes(), self.cfg.selfplay.actors, head)
        node_cpus = {n["NodeID"]: n["Resources"].get("CPU", 1) for n in ray.nodes()}
        actor_id = 0
        for node_id, count in plan.items():
            if count == 0:
                continue
            share = min(1.0, node_cpus[node_id] / count)
            for _ in range(count):
                actor = SelfPlayActor.options(
                    num_cpus=share,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(container, actor_id, self.url, self.password)
                self.actors.append(actor)
                self.refs[actor.run.remote()] = actor
                actor_id += 1
        self.nodes = sum(1 for c in plan.values() if c)

    def check(self) -> None:
        """Notices run() calls that ended (an error Ray could not retry) and restarts them."""
        if not self.refs:
            return
        done, _ = ray.wait(list(self.refs), timeout=0)
        for ref in done:
            actor = self.refs.pop(ref)
            try:
                ray.get(ref)
                logger.warning("a self-play actor returned early; restarting its loop")
            except Exception as e:
                logger.warning("a self-play actor failed (%s); restarting its loop", e)
            self.restarts += 1
            self.refs[actor.run.remote()] = actor

    def stop(self, timeout_s: float) -> None:
        for actor in self.actors:
            with suppress(Exception):  # an actor that is already dead needs no stop
                actor.stop.remote()
        if self.refs:
            ray.wait(list(self.refs), num_returns=len(self.refs), timeout=timeout_s)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.refs.clear()

    def metrics(self) -> dict[str, float]:
        raw = self._client.hgetall(stats_key(self.cfg.replay.namespace))
        stats = {k.decode(): int(v) for k, v in raw.items()}
        now = time.monotonic()
        out: dict[str, float] = {
            "selfplay/actors": float(self.size),
            "selfplay/actor_restarts": float(self.restarts),
        }
        if self._last is not None:
            t0, before = self._last
            dt = max(now - t0, 1e-9)
            d = {k: stats.get(k, 0) - before.get(k, 0) for k in STATS_FIELDS}
            out["selfplay/evaluations_per_s"] = d["evaluations"] / dt
            busy = d["network_ms"] + d["tree_ms"]
            if busy > 0:
                out["selfplay/network_share"] = d["network_ms"] / busy
        self._last = (now, stats)
        return out
