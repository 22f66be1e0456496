"""The distributed loop behind `python -m learner`: wiring, not algorithms.

Order of events: run directory (config, git revision) -> Redis and Ray: a configured Redis URL
is connected first, then Ray (an existing cluster, else a local one) and the cluster's preflight
(a replay store every machine reaches, GPUs for CUDA self-play); without a URL, Ray and the
preflight come first and then a private `redis-server` under the run directory -> replay store
and weights channel -> the trainer, resumed from the run directory's newest checkpoint ->
weights published -> self-play actors spread over every node with CPUs -> the training loop
(paced by the sample-to-position ratio) until `learner.max_steps`, the time limit or Ctrl-C ->
a final checkpoint, actors stopped, Redis stopped if this process started it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf

from actors.pool import ActorPool
from actors.self_play import record_to_pdn
from evaluation.evaluator import read_eval_metrics, start_evaluator
from game.openings import load_openings
from game.pdn import write_pdn
from game.records import GameRecord
from learner.metrics import MetricsLogger
from learner.mirror import MirrorPrefetcher, ReplayMirror
from learner.preflight import PreflightError, check_cluster
from learner.redis_server import EmbeddedRedis, RedisServerError
from learner.replay import ReplayStore, ReplayUnavailable, SampleRatio, connect
from learner.trainer import Trainer
from learner.weights import WeightsChannel

logger = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoints"
SUMMARY_FILE = "summary.json"  # the run's end state, the same dict as "run finished" logs
ACTOR_STOP_TIMEOUT_S = 30.0  # grace for actors to finish their current move and flush games


def git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        rev = out.stdout.strip() or "unknown"
        return rev + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@contextmanager
def redis_for_run(cfg: DictConfig, run_dir: Path) -> Iterator[tuple[str, str | None]]:
    """(url, password) of the run's Redis; starts and stops a private server when none is set."""
    if cfg.replay.url:
        password = os.environ.get(cfg.replay.password_env) if cfg.replay.password_env else None
        yield str(cfg.replay.url), password
        return
    server = EmbeddedRedis(run_dir, binary=cfg.replay.redis_server)
    server.start()
    logger.info("started a private redis-server on %s (AOF in %s)", server.url, server.data_dir)
    try:
        yield server.url, server.password
    finally:
        server.stop()
        logger.info("stopped the private redis-server")


def start_ray(cluster_cfg: DictConfig) -> bool:
    """Joins a running cluster if one is reachable, else starts a local one; True if started."""
    if ray.is_initialized():
        return False
    env = {
        "env_vars": {
            "PYTHONPATH": os.pathsep.join(
                filter(
                    None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]
                )
            )
        }
    }
    if cluster_cfg.address and cluster_cfg.address != "local":
        try:
            ray.init(address=cluster_cfg.address, runtime_env=env, log_to_driver=True)
            logger.info("joined the Ray cluster at %s", cluster_cfg.address)
            return False
        except ConnectionError:
            if cluster_cfg.address != "auto":
                raise
    # address="local": a plain ray.init() would join whatever cluster the machine's
    # /tmp/ray/ray_current_cluster names (the last `ray start` or test cluster), and then fail
    # because num_cpus cannot be given to an existing cluster.
    ray.init(
        address="local",
        num_cpus=cluster_cfg.num_cpus,
        include_dashboard=cluster_cfg.include_dashboard,
        object_store_memory=int(cluster_cfg.object_store_memory_mb) * 1024 * 1024,
        runtime_env=env,
        log_to_driver=True,
    )
    logger.info("started a local Ray (%s CPUs)", ray.cluster_resources().get("CPU"))
    return True


class Run:
    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        self.ckpt_dir = self.run_dir / CHECKPOINT_DIR
        self._stop = threading.Event()
        # Openings named in the PDN samples of self-play games (_sample_games).
        self._deck = load_openings(cfg.selfplay.openings, int(cfg.game.size))

    def request_stop(self, *_: Any) -> None:
        if not self._stop.is_set():
            logger.info("stopping: finishing the current step, then saving a checkpoint")
        self._stop.set()

    def main(self) -> dict[str, Any]:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "git_revision.txt").write_text(git_revision() + "\n")
        # A configured Redis is reached first (nothing is started for it, and an unreachable one
        # fails before Ray prints anything); a private one starts only after Ray shows that the
        # cluster is one machine, since it listens on loopback. Either way the cluster check
        # (preflight) runs before any actor is spawned.
        started_ray = False
        try:
            if not cfg.replay.url:
                started_ray = self._join_cluster()
            with redis_for_run(cfg, self.run_dir) as (url, password):
                client = connect(
                    url,
                    password,
                    retries=cfg.replay.connect_retries,
                    backoff_s=cfg.replay.connect_backoff_s,
                )
                if cfg.replay.url:
                    started_ray = self._join_cluster()
                store = ReplayStore(
                    client,
                    namespace=cfg.replay.namespace,
                    window_positions=cfg.replay.window_positions,
                )
                channel = WeightsChannel(client, namespace=cfg.replay.namespace)
                return self._train(url, password, store, channel, client)
        finally:
            if started_ray:
                ray.shutdown()

    def _join_cluster(self) -> bool:
        """Ray (joined or started; True if started here), then the cluster's preflight."""
        started = start_ray(self.cfg.cluster)
        check_cluster(self.cfg, self.cfg.replay.url or None, ray.nodes())
        if threading.current_thread() is threading.main_thread():
            # After ray.init, which installs its own SIGTERM handler that exits at once:
            # ours lets the loop save a checkpoint and stop the actors and Redis first.
            signal.signal(signal.SIGTERM, self.request_stop)
        return started

    def _train(
        self,
        url: str,
        password: str | None,
        store: ReplayStore,
        channel: WeightsChannel,
        client: Any,
    ) -> dict[str, Any]:
        cfg = self.cfg
        size = int(cfg.game.size)
        trainer = Trainer(cfg.learner, cfg.model, size)
        resumed = trainer.restore(self.ckpt_dir)
        # Versions only ever grow, also across a resume that lost a few unsaved publications.
        trainer.counters.version = max(trainer.counters.version, channel.version("latest"))
        self._publish(trainer, channel)
        metrics = MetricsLogger(
            self.run_dir,
            wandb_cfg=cfg.logging.wandb,
            run_name=self.run_dir.name,
            config=OmegaConf.to_container(cfg, resolve=True),
        )
        pool = ActorPool(cfg, url, password, client)
        ratio = SampleRatio(cfg.replay.sample_ratio, min_positions=cfg.replay.min_positions)
        mirror = ReplayMirror(store, size)  # each game decoded once, on the prefetch thread
        prefetcher: MirrorPrefetcher | None = None
        t_start = time.monotonic()
        last_progress = last_csv = last_plot = last_ckpt = t_start
        last_ckpt_step = trainer.counters.step
        last_stats = store.stats()
        last_stats_t = t_start
        steps_at_last = trainer.counters.step
        summary: dict[str, Any] = {"resumed": resumed}
        losses = None
        evaluator = None
        try:
            # The evaluator first: under gating it promotes the first version, which the
            # actors wait for.
            evaluator = start_evaluator(cfg, url, password, self.run_dir)
            pool.start()  # logs how many actors run on how many nodes, and again on every change
            logger.info("training on %s", trainer.device)
            while not self._stop.is_set():
                if self._limits_reached(trainer, t_start):
                    break
                pool.check()
                if evaluator is not None:
                    evaluator.check()
                stats = store.stats()
                if ratio.should_wait(
                    stats.positions_added, trainer.counters.samples, cfg.learner.batch_size
                ):
                    self._stop.wait(cfg.learner.wait_poll_s)
                else:
                    if prefetcher is None:
                        prefetcher = MirrorPrefetcher(
                            mirror,
                            cfg.learner.batch_size,
                            depth=cfg.replay.prefetch_depth,
                            seed=cfg.seed + trainer.counters.step,
                            q_weight=cfg.learner.value_target_q_weight,
                        )
                    batch = prefetcher.get(timeout=60.0)
                    losses = trainer.step(batch)
                    if trainer.counters.step % cfg.learner.publish_every_steps == 0:
                        self._publish(trainer, channel)
                        if trainer.counters.version % cfg.logging.pdn_every_versions == 0:
                            self._sample_games(store, trainer.counters.version)
                now = time.monotonic()
                # Once per multiple of checkpoint_every_steps (the step stays on that multiple
                # while the learner waits for self-play), and at least every checkpoint_every_min.
                if (
                    trainer.counters.step % cfg.learner.checkpoint_every_steps == 0
                    and trainer.counters.step > last_ckpt_step
                ) or (now - last_ckpt > 60 * cfg.learner.checkpoint_every_min):
                    trainer.save(self.ckpt_dir, keep=cfg.learner.keep_checkpoints)
                    last_ckpt, last_ckpt_step = now, trainer.counters.step
                if (
                    now - last_csv >= cfg.logging.csv_every_s
                    or now - last_progress >= cfg.logging.progress_every_s
                ):
                    dt = max(now - last_stats_t, 1e-9)
                    row = {
                        "selfplay/positions_per_s": (
                            stats.positions_added - last_stats.positions_added
                        )
                        / dt,
                        "selfplay/games_per_s": (stats.games_added - last_stats.games_added) / dt,
                        "selfplay/games": stats.games_added,
                        "replay/window_positions": stats.window_positions,
                        "replay/positions_added": stats.positions_added,
                        "replay/malformed": prefetcher.malformed if prefetcher else 0,
                        "learner/steps_per_s": (trainer.counters.step - steps_at_last) / dt,
                        "learner/samples_per_s": (trainer.counters.step - steps_at_last)
                        * cfg.learner.batch_size
                        / dt,
                        "learner/lr": trainer.lr,
                        "learner/weights_version": trainer.counters.version,
                    }
                    if losses is not None:
                        row |= {
                            "learner/loss_policy": losses.policy,
                            "learner/loss_value": losses.value,
                            "learner/loss_total": losses.total,
                        }
                    row |= pool.metrics()
                    row |= read_eval_metrics(client, cfg.replay.namespace)
                    metrics.log(row, trainer.counters.step)
                    last_csv = now
                    if now - last_progress >= cfg.logging.progress_every_s:
                        self._progress(trainer, stats, row, now - t_start)
                        last_progress = now
                    last_stats, last_stats_t, steps_at_last = stats, now, trainer.counters.step
                if now - last_plot >= 60 * cfg.logging.plot_every_min:
                    metrics.plot()
                    last_plot = now
        except KeyboardInterrupt:
            logger.info("interrupted")
        finally:
            if prefetcher is not None:
                prefetcher.close()
            pool.stop(ACTOR_STOP_TIMEOUT_S)
            if evaluator is not None:
                evaluator.stop(ACTOR_STOP_TIMEOUT_S)
            path = trainer.save(self.ckpt_dir, keep=cfg.learner.keep_checkpoints)
            logger.info("saved %s", path)
            # The last state, so that a run shorter than logging.csv_every_s still has its
            # losses in metrics.csv and loss.png.
            final = {"learner/weights_version": trainer.counters.version}
            if losses is not None:
                final |= {
                    "learner/loss_policy": losses.policy,
                    "learner/loss_value": losses.value,
                    "learner/loss_total": losses.total,
                }
            metrics.log(final, trainer.counters.step)
            metrics.close()
        stats = store.stats()
        summary |= {
            "step": trainer.counters.step,
            "version": trainer.counters.version,
            "games": stats.games_added,
            "positions": stats.positions_added,
            "checkpoint": str(path),
        } | pool.summary()
        logger.info("run finished: %s", summary)
        tmp = self.run_dir / f"{SUMMARY_FILE}.tmp"  # for scripts (no log parsing), whole or absent
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        tmp.replace(self.run_dir / SUMMARY_FILE)
        return summary

    def _limits_reached(self, trainer: Trainer, t_start: float) -> bool:
        lc = self.cfg.learner
        if lc.max_steps and trainer.counters.step >= lc.max_steps:
            logger.info("reached learner.max_steps=%d", lc.max_steps)
            return True
        if lc.time_limit_min and time.monotonic() - t_start >= 60 * lc.time_limit_min:
            logger.info("reached learner.time_limit_min=%s", lc.time_limit_min)
            return True
        return False

    def _publish(self, trainer: Trainer, channel: WeightsChannel) -> None:
        trainer.counters.version += 1
        channel.publish(trainer.weights_bytes(trainer.counters.version), trainer.counters.version)

    def _sample_games(self, store: ReplayStore, version: int) -> None:
        """The newest self-play games as PDN under <run_dir>/games/, for a person to read."""
        count = int(self.cfg.logging.pdn_sample_games)
        newest = store.stats().games_added
        games = []
        for game_id in range(newest, max(0, newest - count), -1):
            data = store.get(game_id)
            if data is None:
                break
            try:
                record = GameRecord.from_bytes(data)
            except ValueError:
                continue  # counted by the prefetcher when sampled; a sample file just skips it
            games.append(record_to_pdn(record, len(games), self._deck))
        if games:
            out = self.run_dir / "games"
            out.mkdir(exist_ok=True)
            (out / f"selfplay_v{version:05d}.pdn").write_text(write_pdn(games))

    def _progress(
        self, trainer: Trainer, stats: Any, row: dict[str, float], elapsed: float
    ) -> None:
        loss = (
            (
                f"loss {row['learner/loss_total']:.3f} (policy {row['learner/loss_policy']:.3f}, "
                f"value {row['learner/loss_value']:.3f})"
            )
            if "learner/loss_total" in row
            else "waiting for data"
        )
        if "eval/elo" in row:  # the newest rated candidate, random = 0
            lower, upper = row.get("eval/elo_lower", math.nan), row.get("eval/elo_upper", math.nan)
            version = row.get("eval/version", 0)
            loss += f" | Elo {row['eval/elo']:+.0f} [{lower:+.0f}, {upper:+.0f}] (v{version:.0f})"
        logger.info(
            "[%5.0fs] games %d (%.2f/s) | positions %.0f/s | window %d | step %d (%.1f/s) | %s"
            " | weights v%d | %d actors on %d node(s)",
            elapsed,
            stats.games_added,
            row["selfplay/games_per_s"],
            row["selfplay/positions_per_s"],
            stats.window_positions,
            trainer.counters.step,
            row["learner/steps_per_s"],
            loss,
            trainer.counters.version,
            row["selfplay/actors"],
            row["selfplay/nodes"],
        )


def run(cfg: DictConfig) -> dict[str, Any]:
    """Runs the whole loop for a composed config; returns a summary dict.

    The body of `python -m learner`: a replay store that cannot be reached (after the bounded
    retries) or a private redis-server that cannot start ends the process with one line on
    stderr naming the URL or the cause and exit status 1, not a traceback (the errors say all
    there is to say; `Run(cfg).main()` raises them for callers that want the exception).
    """
    with suppress(AttributeError):
        OmegaConf.set_struct(cfg, True)
    try:
        return Run(cfg).main()
    except (ReplayUnavailable, RedisServerError, PreflightError) as e:
        raise SystemExit(f"error: {e}") from None
