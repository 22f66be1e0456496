"""The evaluator as a Ray actor beside the learner: a thin shell over EvaluatorWorker."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from checkerzero.cluster.supervisor import RunLoop, stop_loops
from evaluation.evaluator.settings import EvalSettings
from evaluation.evaluator.worker import EvaluatorWorker

logger = logging.getLogger(__name__)

# Seconds between restarts of an evaluator loop that keeps failing (the first is immediate), so a
# persistent error (a bad checkpoint, Redis gone) logs a line per interval, not a busy loop.
RESTART_BACKOFF_S = 30.0


@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=2)
class EvaluatorActor:
    """Ray shell over EvaluatorWorker: ``run()`` evaluates until ``stop()`` (a second call slot,
    hence max_concurrency=2). Ray restarts a dead actor; the worker resumes from Redis."""

    def __init__(self, cfg: dict, url: str, password: str | None, run_dir: str) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        self.worker = EvaluatorWorker.connect(cfg, url, password, run_dir)

    def run(self) -> int:
        return self.worker.run()

    def stop(self) -> None:
        self.worker.stop()

    def where(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()


class EvaluatorHandle:
    """The learner's view of the evaluator actor: restart its loop, stop it. ``gpus``: the
    share of one GPU it holds on the learner's node (0 on CPU)."""

    def __init__(self, actor: Any, gpus: float = 0.0) -> None:
        self.actor = actor
        self.gpus = gpus
        self.loop = RunLoop(actor, "the evaluator", backoff_s=RESTART_BACKOFF_S)

    @property
    def restarts(self) -> int:
        return self.loop.restarts

    def check(self) -> None:
        """Restarts the loop if ``run()`` ended (an error Ray could not retry); a loop that
        keeps failing is restarted at most every RESTART_BACKOFF_S, its error logged each time."""
        self.loop.check()

    def stop(self, timeout_s: float) -> None:
        """Asks the loop to stop (between games; an unfinished unit resumes next run), waits up
        to ``timeout_s``, then kills the actor."""
        stop_loops([self.loop], timeout_s)


def evaluator_gpus(evaluation: Mapping[str, Any], node_gpus: float) -> float:
    """The share of one GPU the evaluator asks of Ray on a node with ``node_gpus`` GPUs:
    ``evaluation.gpus`` when ``evaluation.device`` is cuda (cuda:N), or auto on a node with a
    GPU; 0 on CPU. Ray hides the GPUs from an actor that asks for none, so a CUDA evaluator must
    ask. ValueError for cuda on a node without a GPU."""
    device = str(evaluation.get("device", "cpu"))
    share = float(evaluation.get("gpus", 0.2))  # absent in a config saved before the key
    if not 0 < share <= 1:
        raise ValueError(f"evaluation.gpus={share:g}: a share of one GPU, in (0, 1]")
    if device == "cpu" or (device == "auto" and node_gpus <= 0):
        return 0.0
    if device.startswith("cuda") and node_gpus <= 0:
        raise ValueError(
            f"evaluation.device={device} but the learner's node has no GPU for the evaluator: "
            "use evaluation.device=auto (a GPU share where the node has one) or cpu"
        )
    return share


def start_evaluator(
    cfg: Mapping[str, Any], url: str, password: str | None, run_dir: str | Path
) -> EvaluatorHandle | None:
    """Starts the evaluator actor on this node (it writes under ``run_dir``); None when
    ``evaluation.enabled`` is false. Ray must be initialised. The config is checked here, so a
    bad value fails in the learner before any game."""
    container = (
        OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    )
    if not container.get("evaluation", {}).get("enabled", False):
        return None
    settings = EvalSettings.from_config(container)
    node = ray.get_runtime_context().get_node_id()
    resources = next((n["Resources"] for n in ray.nodes() if n["NodeID"] == node), {})
    gpus = evaluator_gpus(container["evaluation"], float(resources.get("GPU", 0)))
    actor = EvaluatorActor.options(
        name=None,
        num_cpus=float(container["evaluation"].get("num_cpus", 0)),
        num_gpus=gpus,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
    ).remote(container, url, password, str(run_dir))
    logger.info(
        "evaluator started%s: the newest trained version every %g min (%g min, %d games each"
        " in the first %g min), %d simulations, ladder %s",
        f" on {gpus:g} of a GPU" if gpus else "",
        settings.every_min,
        settings.early_every_min,
        min(settings.early_games, settings.candidate_games),
        settings.early_min,
        settings.mcts["simulations"],
        list(settings.ladder),
    )
    return EvaluatorHandle(actor, gpus)
