"""Self-play as Ray actors: a thin shell over `actors.self_play.run_self_play`.

Each actor owns its lifecycle and I/O: it connects to the run's Redis, follows the weights
channel (the latest weights, or the gate's best), plays games many at a time, and writes every
finished game's record bytes straight into the replay store (no central buffer actor, so memory
stays bounded whatever the ratio of self-play to training). Ray restarts a dead actor
(`max_restarts=-1`) and retries its `run()` call; games it had finished are already in Redis.

`actors.pool.ActorPool` places them on the cluster's nodes and reports their throughput from
the counters they keep in Redis.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import ray
import torch

from actors.self_play import SelfPlayObserver, run_self_play
from checkerzero.inference_server.client import RemoteInference, ServerStopped
from checkerzero.network.checkpoint import MAX_CHECKPOINT_BYTES, decode_checkpoint
from checkerzero.network.inference import NetworkInference
from checkerzero.store.keys import (
    selfplay_actor_starts_key,
    selfplay_games_by_node_key,
    selfplay_starts_key,
    selfplay_stats_key,
)
from checkerzero.store.live import publish as publish_live
from checkerzero.store.replay import ReplayStore, connect
from checkerzero.store.weights import WeightsChannel
from game.encoding import NUM_PLANES, num_actions
from game.records import GameRecord

logger = logging.getLogger(__name__)

WEIGHTS_POLL_S = 1.0  # how often an actor checks for a new weights version (one small GET)
SEED_STRIDE = 1_000_003 * 1_000_003  # seed offset of each further run() call in one actor life:
# beyond every (run seed, start count) seed of __init__, so no two calls share a seed
STATS_FIELDS = (
    "games",
    "positions",
    "full_positions",  # positions searched fully (all of them without playout cap randomization)
    "evaluations",
    "batches",
    "network_ms",
    "tree_ms",
    "dropped",  # finished games whose record failed validation (logged by the actor, not stored)
)


class SelfPlayWorker:
    """The body of a self-play actor, usable without Ray (tests, `python -m actors`)."""

    def __init__(
        self,
        cfg: Mapping[str, Any],
        actor_id: int,
        url: str,
        password: str | None,
        *,
        device: str = "cpu",
        node_id: str | None = None,
        server: str | None = None,
    ) -> None:
        """``device``: where the network runs (``cpu``, or ``cuda`` for the GPU Ray assigned);
        ``node_id``: the node's name in the per-node game counts (None: not counted);
        ``server``: the address of the node's inference server
        (`actors.inference_server`), which then runs the network for this actor and follows
        the weights (None: the actor holds the network itself)."""
        torch.set_num_threads(int(cfg["selfplay"]["torch_threads"]))
        self.cfg = cfg
        self.actor_id = actor_id
        self.device = device
        self.node_id = node_id
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
        self.inference: Any = None
        self.version = 0
        self.server = server
        if server is not None:
            size = int(cfg["game"]["size"])
            self.inference = RemoteInference(
                server,
                NUM_PLANES,
                size,
                num_actions(size),
                capacity=int(cfg["selfplay"]["games_in_parallel"])
                * int(cfg["mcts"]["leaves_per_game"]),
                stop=lambda: self._stop.is_set(),
                name=f"self-play actor {actor_id}",
            )
        mb = cfg.get("learner", {}).get("max_checkpoint_mb")
        self._max_weights_bytes = MAX_CHECKPOINT_BYTES if mb is None else int(mb * 1024 * 1024)
        self._stop = threading.Event()
        self._last_poll = 0.0
        self._seed_calls = 0
        # logging.live_game_ttl_s: slot 0's game in progress goes to Redis after each move
        # (absent, as in a run saved before it existed, or 0: not published).
        self._live_ttl_s = float((cfg.get("logging") or {}).get("live_game_ttl_s", 0) or 0)
        # A fresh seed on every (re)start, so a restarted actor does not replay the same games.
        self.seed = int(cfg.get("seed", 0)) * 1_000_003 + int(
            self.client.incr(selfplay_starts_key(self.namespace))
        )

    def stop(self) -> None:
        self._stop.set()

    def _poll_weights(self, wait: bool) -> None:
        while True:
            published = self.channel.poll()
            try:  # damaged, foreign or non-finite weights: keep playing with the ones held
                if published is not None:
                    model, _ = decode_checkpoint(
                        published.data,
                        source=f"weights v{published.version}",
                        max_bytes=self._max_weights_bytes,
                    )
                    size = int(self.cfg["game"]["size"])
                    if model.config.board_size != size:
                        raise ValueError(
                            f"weights v{published.version} are for a {model.config.board_size}"
                            f"x{model.config.board_size} board, this game is {size}x{size}"
                        )
                    if self.inference is None:
                        self.inference = NetworkInference(
                            model,
                            device=self.device,
                            dtype=self.cfg["selfplay"].get("precision", "auto"),
                            backend=self._backend(),
                        )
                    else:
                        self.inference.load_state(model.state_dict(), published.version)
                    self.version = published.version
                    logger.debug(
                        "actor %d plays with weights version %d", self.actor_id, self.version
                    )
            except ValueError as e:
                logger.warning("actor %d skips weights: %s", self.actor_id, e)
            if self.inference is not None or not wait or self._stop.is_set():
                return
            time.sleep(0.2)

    def _backend(self) -> str:
        """The network's backend: ``selfplay.cpu_backend`` where it runs on the CPU, the GPU's
        own (auto: eager) elsewhere."""
        if not str(self.device).startswith("cpu"):
            return "auto"
        return str(self.cfg["selfplay"].get("cpu_backend", "auto"))

    def _keep_going(self) -> bool:
        now = time.monotonic()
        if self.server is not None:  # the server follows the weights; each answer says which
            self.version = max(self.inference.version, 0)
        elif now - self._last_poll >= WEIGHTS_POLL_S:
            self._last_poll = now
            self._poll_weights(wait=False)
        return not self._stop.is_set()

    def _store(self, record: Any) -> None:
        self.store.add_game(record.to_bytes(), record.num_decisions)
        pipe = self.client.pipeline(transaction=False)
        key = selfplay_stats_key(self.namespace)
        pipe.hincrby(key, "games", 1)
        pipe.hincrby(key, "positions", record.num_decisions)
        pipe.hincrby(key, "full_positions", int(record.full_search.sum()))
        if self.node_id is not None:
            pipe.hincrby(selfplay_games_by_node_key(self.namespace), self.node_id, 1)
        pipe.execute()

    def _dropped(self) -> None:
        self.client.hincrby(selfplay_stats_key(self.namespace), "dropped", 1)

    def _publish_live(self, live: dict[str, Any]) -> None:
        publish_live(self.client, self.namespace, live, self._live_ttl_s)

    def _batch_stats(self, evaluations: int, network_s: float, tree_s: float) -> None:
        pipe = self.client.pipeline(transaction=False)
        key = selfplay_stats_key(self.namespace)
        pipe.hincrby(key, "evaluations", evaluations)
        pipe.hincrby(key, "batches", 1)
        pipe.hincrby(key, "network_ms", int(network_s * 1000))
        pipe.hincrby(key, "tree_ms", int(tree_s * 1000))
        pipe.execute()

    def run(self, seconds: float | None = None) -> dict[str, float]:
        """Plays until stopped, or for `seconds` once it has weights (benchmarks); returns this
        call's `SelfPlayStats` as a dict (games, positions, evaluations, seconds, network_s,
        tree_s; positions count every decision, those of unfinished games too). With a
        server, the call waits for it (and for its weights) inside the first batch, and a
        `stop()` while it waits returns {}."""
        if self.server is None:
            self._poll_weights(wait=True)
        if self._stop.is_set():
            return {}
        deadline = math.inf if seconds is None else time.monotonic() + seconds
        self._seed_calls += 1  # a second call in one life must not replay the first one's games
        try:
            _, stats = run_self_play(
                self.inference,
                self.cfg,
                None,
                seed=self.seed + (self._seed_calls - 1) * SEED_STRIDE,
                actor_id=self.actor_id,
                observer=_WorkerObserver(self, deadline),
                keep_records=False,
            )
        except ServerStopped:  # stopped while waiting for the server: games in progress end
            return {}
        return dataclasses.asdict(stats)

    def _record_version(self) -> int:
        """The weights version a finished game is recorded with: the one of the last answer."""
        if self.server is not None:
            self.version = max(self.inference.version, 0)
        return self.version


class _WorkerObserver(SelfPlayObserver):
    """What self-play reports to a worker: games to store, counters, the live game, drops;
    it stops when the worker is stopped (or has no weights to follow) or at ``deadline``."""

    def __init__(self, worker: SelfPlayWorker, deadline: float) -> None:
        self.worker, self.deadline = worker, deadline
        self.live = worker._live_ttl_s > 0

    def should_stop(self) -> bool:
        return not self.worker._keep_going() or time.monotonic() >= self.deadline

    def record_version(self, default: int) -> int:
        return self.worker._record_version()

    def on_record(self, record: GameRecord) -> None:
        self.worker._store(record)

    def on_batch(self, evaluations: int, network_s: float, tree_s: float) -> None:
        self.worker._batch_stats(evaluations, network_s, tree_s)

    def on_live(self, live: dict[str, Any]) -> None:
        self.worker._publish_live(live)

    def on_drop(self) -> None:
        self.worker._dropped()


@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=2)
class SelfPlayActor:
    """Ray shell: `run()` plays until `stop()` (a second call slot, hence max_concurrency=2)."""

    def __init__(
        self,
        cfg: dict,
        actor_id: int,
        url: str,
        password: str | None,
        device: str = "cpu",
        server: str | None = None,
        starts_field: str | None = None,
    ) -> None:
        """``device``: ``cpu``, or ``cuda`` for an actor created with a share of a GPU (Ray
        makes its GPU the only visible one); ``server``: its node's inference server's address
        (None: the actor runs the network itself); ``starts_field``: its field in the
        ``actor_starts`` hash, counted up on every start of its process (the first, and each
        restart by Ray), so the pool can count Ray's restarts (None: not counted)."""
        level = (cfg.get("logging") or {}).get("level", "INFO")  # the run's logging.level
        logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s")
        if device == "cuda" and not ray.get_gpu_ids():
            raise RuntimeError("a CUDA self-play actor was given no GPU by Ray")
        node_id = ray.get_runtime_context().get_node_id()
        self.worker = SelfPlayWorker(
            cfg, actor_id, url, password, device=device, node_id=node_id, server=server
        )
        if starts_field is not None:
            key = selfplay_actor_starts_key(self.worker.namespace)
            self.worker.client.hincrby(key, starts_field, 1)

    def run(self, seconds: float | None = None) -> dict[str, float]:
        return self.worker.run(seconds)

    def stop(self) -> None:
        self.worker.stop()

    def where(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()

    def server_reconnects(self) -> int:
        """Times this actor lost its inference server and found it again (0 without one)."""
        return int(getattr(self.worker.inference, "reconnects", 0))

    def device(self) -> str:
        """Where this actor's network runs (``cpu`` or ``cuda``; ``server`` with a server)."""
        return "server" if self.worker.server is not None else self.worker.device
