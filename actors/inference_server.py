"""The inference server of a GPU as a Ray actor: placed with its GPU, fed by the weights channel.

`checkerzero.inference_server.server.InferenceServer` batches the leaves of every self-play actor
on its
node; this shell gives it a place and weights. `ServerBody` (usable without Ray: tests, the
benchmark) follows the run's weights channel as the actors do (the gate's best or the latest, one
small GET a second, the bytes only when the version changes) and hands every new version to the
server, which swaps it in between batches. `InferenceServerActor` is the Ray actor that
`actors.pool.ActorPool` starts, one per GPU (a share of the head's GPU where the evaluator holds
the rest), pinned to its node; Ray restarts it when its process dies, and its clients, which
wait for it meanwhile, go on with their games.

The server's address is an abstract Unix socket name (`server_address`): unique to the run,
the node and the GPU, so a restarted server comes back at the same address.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import ray

from checkerzero.inference_server.server import InferenceServer, ServerSettings
from checkerzero.network.checkpoint import MAX_CHECKPOINT_BYTES, decode_checkpoint
from checkerzero.store.replay import connect
from checkerzero.store.weights import WeightsChannel
from game.encoding import NUM_PLANES, num_actions

logger = logging.getLogger(__name__)

WEIGHTS_POLL_S = 1.0  # how often the server checks for a new weights version (as actors do)


def server_address(namespace: str, run_token: str, node_id: str, index: int) -> str:
    """The abstract socket name of a run's `index`-th server on a node (107 bytes at most)."""
    return f"checkerzero-{namespace[:40]}-{run_token}-{node_id[:16]}-{index}"


def settings_of(cfg: Mapping[str, Any]) -> ServerSettings:
    return ServerSettings.from_config(cfg["selfplay"]["inference_server"])


class ServerBody:
    """A server at `address` that computes with the run's published weights."""

    def __init__(
        self,
        cfg: Mapping[str, Any],
        address: str,
        url: str,
        password: str | None,
        *,
        device: str = "cuda",
    ) -> None:
        self.cfg = cfg
        size = int(cfg["game"]["size"])
        self.size = size
        replay = cfg["replay"]
        self.client = connect(
            url, password, retries=replay["connect_retries"], backoff_s=replay["connect_backoff_s"]
        )
        gating = bool(cfg.get("evaluation", {}).get("gating", False))
        self.channel = WeightsChannel(
            self.client, namespace=replay["namespace"], follow="best" if gating else "latest"
        )
        mb = cfg.get("learner", {}).get("max_checkpoint_mb")
        self._max_bytes = MAX_CHECKPOINT_BYTES if mb is None else int(mb * 1024 * 1024)
        self.server = InferenceServer(
            address,
            NUM_PLANES,
            size,
            num_actions(size),
            settings_of(cfg),
            device=device,
            precision=str(cfg["selfplay"].get("precision", "auto")),
        )
        self._stop = threading.Event()
        self.poll_weights()
        self._thread = threading.Thread(target=self._follow, name="weights", daemon=True)
        self._thread.start()

    def poll_weights(self) -> None:
        """Hands the followed weights to the server when their version changed; damaged,
        foreign or non-finite weights are skipped with a warning (the server keeps its own)."""
        published = self.channel.poll()
        if published is None:
            return
        try:
            model, _ = decode_checkpoint(
                published.data, source=f"weights v{published.version}", max_bytes=self._max_bytes
            )
            self.server.load_weights(model, published.version)
        except ValueError as e:
            logger.warning("inference server skips weights: %s", e)

    def _follow(self) -> None:
        while not self._stop.wait(WEIGHTS_POLL_S):
            try:
                self.poll_weights()
            except Exception as e:  # Redis away for a moment: keep serving the weights held
                logger.warning("inference server could not poll weights: %s", e)

    def stats(self) -> dict[str, int]:
        return self.server.stats()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.server.close()


@ray.remote(max_restarts=-1, max_task_retries=-1)
class InferenceServerActor:
    """Ray shell of `ServerBody`; created with a GPU (or a share of one) on its node."""

    def __init__(
        self, cfg: dict, address: str, url: str, password: str | None, device: str = "cuda"
    ) -> None:
        level = (cfg.get("logging") or {}).get("level", "INFO")  # the run's logging.level
        logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s")
        if device == "cuda" and not ray.get_gpu_ids():
            raise RuntimeError("an inference server on CUDA was given no GPU by Ray")
        self.body = ServerBody(cfg, address, url, password, device=device)

    def stats(self) -> dict[str, int]:
        return self.body.stats()

    def where(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()

    def stop(self) -> None:
        self.body.close()
