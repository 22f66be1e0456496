"""The distributed loop behind `python -m learner`: wiring, not algorithms.

Order of events: run directory (config, git revision) -> Redis and Ray: a configured Redis URL
is connected first, then Ray (an existing cluster, else a local one) and the cluster's preflight
(a replay store every machine reaches, GPUs for CUDA self-play); without a URL, Ray and the
preflight come first and then a private `redis-server` under the run directory -> replay store
and weights channel -> the trainer, resumed from the run directory's newest checkpoint ->
weights published -> self-play actors spread over every node with CPUs -> the training loop
(paced by the sample-to-position ratio) until `learner.max_steps`, the time limit or Ctrl-C ->
a final checkpoint, actors stopped, Redis stopped if this process started it.

Where the parts live: the run's Redis and endgame database (`learner.run_services`), the loop's
periodic chores (`learner.chores`: checkpoint, metrics row and progress line, live game, plots),
the self-play PDN file (`learner.selfplay_pdn`), the metrics rows, progress line, W&B artifacts
and summary (`learner.run_reports`, their text `learner.summary`); the
training itself is `learner.trainer` over `learner.mirror`, the processes beside it
`actors.pool` and `evaluation.evaluator.actor`. Every file this writes is named in
`checkerzero.run_files`, every Redis key in `checkerzero.store.keys`.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ray
import redis
from omegaconf import DictConfig, OmegaConf

from actors.pool import ActorPool
from checkerzero.cluster.preflight import check_cluster
from checkerzero.cluster.start import start_ray, stop_ray
from checkerzero.metrics import MetricsLogger
from checkerzero.revision import git_revision
from checkerzero.run_files import (
    CHECKPOINT_DIR,
    REVISION_FILE,
    WEIGHTS_DIR,
)
from checkerzero.store.live import copy_live
from checkerzero.store.redis_server import RedisServerError
from checkerzero.store.replay import (
    ReplayStats,
    ReplayStore,
    SampleRatio,
    connect,
    stop_retrying,
)
from checkerzero.store.weights import WeightsChannel
from evaluation.evaluator.actor import EvaluatorHandle, start_evaluator
from evaluation.evaluator.records import promoted_versions, read_eval_metrics
from game.openings import load_openings
from learner.chores import Chore, run_due
from learner.mirror import ReplayMirror
from learner.prefetcher import MirrorPrefetcher
from learner.reanalysis import Reanalyser
from learner.retention import prune_weights, save_promoted
from learner.run_reports import RunReports, TrainLoop
from learner.run_services import ensure_egdb, redis_for_run
from learner.selfplay_pdn import SelfPlayPdn
from learner.terminal import quiet_ray_loggers, route_actor_logs
from learner.trainer import Trainer

logger = logging.getLogger(__name__)

ACTOR_STOP_TIMEOUT_S = 30.0  # grace for actors to finish their current move and flush games
PREFETCH_TIMEOUT_S = 60.0  # longest wait for a batch once training started: a stuck thread errors


class Run(RunReports):
    """The run: its services, actors, evaluator and training loop; its metrics rows, progress
    line, W&B artifacts and summary are `RunReports`' (learner/run_reports.py)."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        self.ckpt_dir = self.run_dir / CHECKPOINT_DIR
        self._stop = threading.Event()
        # Set (from the private Redis's watching thread) when that server died and could not
        # be restarted: the run stops at once and ends with this error.
        self._redis_lost: RedisServerError | None = None
        self._client: redis.Redis | None = None
        # Self-play games written as PDN, their openings' moves first (_write_games).
        deck = load_openings(cfg.selfplay.openings, int(cfg.game.size))
        self._pdn = SelfPlayPdn(self.run_dir, deck, int(cfg.logging.pdn_sample_games))

    def request_stop(self, *_: Any) -> None:
        if not self._stop.is_set():
            logger.info("stopping: finishing the current step, then saving a checkpoint")
        self._stop.set()

    def _on_redis_lost(self, error: RedisServerError) -> None:
        """The private Redis is gone for good: every Redis call fails from now on instead of
        retrying, and the loop stops; `main` raises `error`."""
        self._redis_lost = error
        if self._client is not None:
            stop_retrying(self._client)
        self._stop.set()

    def main(self) -> dict[str, Any]:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / REVISION_FILE).write_text(git_revision() + "\n")
        # A configured Redis is reached first (nothing is started for it, and an unreachable one
        # fails before Ray prints anything); a private one starts only after Ray shows that the
        # cluster is one machine, since it listens on loopback. Either way the cluster check
        # (preflight) runs before any actor is spawned.
        started_ray = False
        try:
            if not cfg.replay.url:
                started_ray = self._join_cluster()
            with redis_for_run(cfg, self.run_dir, self._on_redis_lost) as (url, password):
                client = connect(
                    url,
                    password,
                    retries=cfg.replay.connect_retries,
                    backoff_s=cfg.replay.connect_backoff_s,
                )
                self._client = client
                if self._redis_lost is not None:
                    stop_retrying(client)
                if cfg.replay.url:
                    started_ray = self._join_cluster()
                store = ReplayStore(
                    client,
                    namespace=cfg.replay.namespace,
                    window_positions=cfg.replay.window_positions,
                )
                channel = WeightsChannel(client, namespace=cfg.replay.namespace)
                try:
                    return self._train(url, password, store, channel, client)
                except Exception:
                    if self._redis_lost is not None:  # the cause of whatever failed after it
                        raise self._redis_lost from None
                    raise
        finally:
            if started_ray:
                stop_ray()

    def _join_cluster(self) -> bool:
        """Ray (joined or started; True if started here), then the cluster's preflight."""
        cluster = self.cfg.cluster
        quiet_ray_loggers()  # Ray's own lines to learner.log (learner.terminal)
        started = start_ray(
            cluster.address,
            num_cpus=cluster.num_cpus,
            include_dashboard=cluster.include_dashboard,
            object_store_memory_mb=cluster.object_store_memory_mb,
            # absent from a run saved before the key existed: the default
            lost_after_s=float(OmegaConf.select(cluster, "lost_after_s", default=5.0)),
        )
        route_actor_logs()  # the actors' lines become log records (learner.terminal)
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
        if not resumed and cfg.learner.init_weights:
            trainer.load_weights(cfg.learner.init_weights)  # a warm start, new runs only
        # Versions only ever grow, also across a resume that lost a few unsaved publications.
        trainer.counters.version = max(trainer.counters.version, channel.version("latest"))
        self._publish(trainer, channel, store.stats().positions_added)
        metrics = MetricsLogger(
            self.run_dir,
            wandb_cfg=cfg.logging.wandb,
            run_name=self.run_dir.name,
            config=OmegaConf.to_container(cfg, resolve=True),
        )
        ensure_egdb(cfg)  # before the actors: they open it, and should not all build it
        pool = ActorPool(cfg, url, password, client)
        ratio = SampleRatio(cfg.replay.sample_ratio, min_positions=cfg.replay.min_positions)
        # Each game decoded once, on the prefetch thread; absent key (an older config): true.
        fast_value = OmegaConf.select(cfg, "replay.fast_positions_train_value", default=True)
        mirror = ReplayMirror(store, size, fast_value=bool(fast_value))
        loop = TrainLoop(t_start=time.monotonic(), store=store, trainer=trainer)
        evaluator = None
        # absent (a run saved before the key existed) or 0: no live game copied
        live_every = float(OmegaConf.select(cfg, "logging.live_game_every_s", default=0) or 0)
        try:
            # The evaluator first: under gating it promotes the first version, which the
            # actors wait for.
            evaluator = start_evaluator(cfg, url, password, self.run_dir)
            pool.head_reserved_gpus = evaluator.gpus if evaluator else 0.0
            pool.start()  # logs how many actors run on how many nodes, and again on every change
            logger.info(
                "training on %s in %s",
                trainer.device,
                str(trainer.compute_dtype).removeprefix("torch."),
            )
            lc = cfg.learner
            saving, chores = self._chores(loop, client, channel, pool, metrics, ratio, live_every)
            while not self._stop.is_set() and not self._limits_reached(trainer, loop.t_start):
                pool.check()
                if evaluator is not None:
                    evaluator.check()
                loop.stats = store.stats()
                if ratio.should_wait(
                    loop.stats.positions_added, trainer.counters.samples, lc.batch_size
                ):
                    self._stop.wait(lc.wait_poll_s)
                else:
                    self._train_step(loop, mirror, store, channel, client)
                now = time.monotonic()
                # Besides its period, a checkpoint once per multiple of checkpoint_every_steps
                # (the step stays on that multiple while the learner waits for self-play).
                step = trainer.counters.step
                if step % lc.checkpoint_every_steps == 0 and step > loop.last_ckpt_step:
                    saving.run(now)
                run_due(chores, now)
        except KeyboardInterrupt:
            logger.info("interrupted")
        finally:
            path, stats = self._wind_down(
                loop, pool, evaluator, store, channel, client, metrics, live_every
            )
        if self._redis_lost is not None:  # no summary of counters that cannot be read
            raise self._redis_lost
        return self._summary(resumed, loop, stats, path, client, pool)

    def _wind_down(
        self,
        loop: TrainLoop,
        pool: ActorPool,
        evaluator: EvaluatorHandle | None,
        store: ReplayStore,
        channel: WeightsChannel,
        client: Any,
        metrics: MetricsLogger,
        live_every: float,
    ) -> tuple[Path, ReplayStats]:
        """The end of the loop, however it ended: the prefetcher, actors and evaluator stopped, a
        last checkpoint, the last games and metrics row written; (checkpoint, last counters)."""
        trainer = loop.trainer
        if loop.prefetcher is not None:
            loop.prefetcher.close()
        # With Redis lost there is nothing to flush games to: stop the actors at once.
        grace = 0.0 if self._redis_lost is not None else ACTOR_STOP_TIMEOUT_S
        pool.stop(grace)
        if evaluator is not None:
            evaluator.stop(grace)
        path = self._save(trainer, client, channel)
        stats = loop.last_stats
        with self._redis_trouble_logged("the last self-play games and counters"):
            if live_every > 0:
                self._copy_live(client)  # the game slot 0 was playing when the run ended
            self._write_games(store)
            stats = store.stats()
            pool.forget_starts()  # the actors' process starts, counted for this run only
        # The last state, rates since the last row included, so that a run shorter than
        # logging.csv_every_s still has its losses and throughput in metrics.csv and plots.
        metrics.log(self._metrics_row(loop, stats, time.monotonic()), trainer.counters.step)
        with self._redis_trouble_logged("the networks and tables for W&B"):
            self._log_artifacts(metrics, channel)
        metrics.close()
        return path, stats

    def _chores(
        self,
        loop: TrainLoop,
        client: Any,
        channel: WeightsChannel,
        pool: ActorPool,
        metrics: MetricsLogger,
        ratio: SampleRatio,
        live_every: float,
    ) -> tuple[Chore, list[Chore]]:
        """The loop's periodic chores, in the order they run when due together, and the
        checkpoint among them (a step count can also call for it). A metrics row is written
        whenever the csv or the progress period is due (the progress line needs a fresh row);
        the progress line keeps its own period inside `_report`."""
        cfg, trainer, log = self.cfg, loop.trainer, self.cfg.logging

        def checkpoint(now: float) -> None:
            self._save(trainer, client, channel)
            loop.last_ckpt_step = trainer.counters.step

        def report(now: float) -> None:
            extra = pool.metrics() | read_eval_metrics(client, cfg.replay.namespace)
            self._report(loop, loop.stats, now, metrics, extra, ratio)

        def plots(now: float) -> None:
            metrics.plot()
            self._log_artifacts(metrics, channel)

        t0 = loop.t_start
        saving = Chore("checkpoint", 60 * cfg.learner.checkpoint_every_min, checkpoint, t0)
        return saving, [
            saving,
            Chore("report", min(log.csv_every_s, log.progress_every_s), report, t0),
            Chore("live game", live_every or None, lambda _: self._copy_live(client), t0),
            Chore("plots", 60 * log.plot_every_min, plots, t0),
        ]

    def _train_step(
        self,
        loop: TrainLoop,
        mirror: ReplayMirror,
        store: ReplayStore,
        channel: WeightsChannel,
        client: Any,
    ) -> None:
        """One optimizer step on the next prefetched batch; publishes (keeping any newly
        promoted version on disk, and writing new self-play games as PDN) on the multiples of
        learner.publish_every_steps, and after a step once learner.publish_every_min passed. The
        prefetcher starts with the first step, once the window has positions."""
        cfg, trainer = self.cfg, loop.trainer
        if loop.prefetcher is None:
            # absent (a run saved before the key existed): off
            re_cfg = OmegaConf.select(cfg, "learner.reanalysis", default=None)
            if re_cfg is not None and re_cfg.enabled:
                loop.reanalyser = Reanalyser(
                    cfg.mcts,
                    mirror.board_size,
                    simulations=int(re_cfg.simulations),
                    games=int(re_cfg.games),
                    seed=cfg.seed,
                )
                loop.reanalyser.update(
                    trainer.published_model, trainer.counters.version, trainer.device
                )
            loop.prefetcher = MirrorPrefetcher(
                mirror,
                cfg.learner.batch_size,
                depth=cfg.replay.prefetch_depth,
                seed=cfg.seed + trainer.counters.step,
                q_weight=cfg.learner.value_target_q_weight,
                reanalyser=loop.reanalyser,
                reanalyse_share=float(re_cfg.share) if loop.reanalyser else 0.0,
            )
            loop.last_publish = time.monotonic()  # publish_every_min counts from training's start
        batch = loop.prefetcher.get(timeout=PREFETCH_TIMEOUT_S)
        losses = trainer.step(batch)
        if losses.skipped:  # a non-finite loss: the step count stays, so nothing is published
            return
        loop.losses = losses
        # absent (a run saved before the key existed) or 0: by steps alone
        every_min = float(OmegaConf.select(cfg, "learner.publish_every_min", default=0) or 0)
        now = time.monotonic()
        due_by_time = every_min > 0 and now - loop.last_publish >= 60 * every_min
        if trainer.counters.step % cfg.learner.publish_every_steps == 0 or due_by_time:
            loop.last_publish = now
            self._publish(trainer, channel, store.stats().positions_added)
            if loop.reanalyser is not None:  # reanalysis searches with the newest weights
                loop.reanalyser.update(
                    trainer.published_model, trainer.counters.version, trainer.device
                )
            self._keep_promoted(client, channel)
            if trainer.counters.version % cfg.logging.pdn_every_versions == 0:
                self._write_games(store)

    def _save(self, trainer: Trainer, client: Any, channel: WeightsChannel) -> Path:
        """A checkpoint, then the weights files pruned to learner.keep_weights (promoted
        versions saved first, so none is lost)."""
        path = trainer.save(self.ckpt_dir, keep=self.cfg.learner.keep_checkpoints)
        logger.debug("saved %s", path)
        with self._redis_trouble_logged("the promoted weights"):
            self._keep_promoted(client, channel)
        prune_weights(self.ckpt_dir / WEIGHTS_DIR, int(self.cfg.learner.keep_weights))
        return path

    def _keep_promoted(self, client: Any, channel: WeightsChannel) -> None:
        """Every version the gate promoted, on disk as weights/best_v<version>.safetensors."""
        versions = promoted_versions(client, self.cfg.replay.namespace)
        best = channel.version("best")
        if best >= 0:
            versions.append(best)

        def fetch(version: int) -> bytes | None:
            data = channel.get(version)
            if data is None and version == channel.version("best"):
                data = channel.best_data()
            return data

        save_promoted(self.ckpt_dir / WEIGHTS_DIR, versions, fetch)

    @contextmanager
    def _redis_trouble_logged(self, what: str) -> Iterator[None]:
        """Runs a step that reads Redis on the way out of a run: a lost connection is logged
        (naming ``what`` was skipped) instead of hiding the error that ended the run; silently
        once the private Redis is known lost (that error says it all)."""
        try:
            yield
        except (redis.RedisError, ConnectionError) as e:
            log = logger.debug if self._redis_lost is not None else logger.warning
            log("skipped %s: Redis failed (%s)", what, e)

    def _limits_reached(self, trainer: Trainer, t_start: float) -> bool:
        lc = self.cfg.learner
        if lc.max_steps and trainer.counters.step >= lc.max_steps:
            logger.info("reached learner.max_steps=%d", lc.max_steps)
            return True
        if lc.time_limit_min and time.monotonic() - t_start >= 60 * lc.time_limit_min:
            logger.info("reached learner.time_limit_min=%s", lc.time_limit_min)
            return True
        return False

    def _publish(
        self, trainer: Trainer, channel: WeightsChannel, positions: int | None = None
    ) -> None:
        trainer.counters.version += 1
        # Where the run stands, for the evaluator's Elo curve (step, positions, wall time):
        # "run_s" counts the run's own seconds, resumes summed; "t" is the clock.
        meta = {"step": trainer.counters.step, "positions": positions, "t": round(time.time(), 3)}
        if (run_s := trainer.run_seconds()) is not None:
            meta["run_s"] = round(run_s, 1)
        channel.publish(
            trainer.weights_bytes(trainer.counters.version), trainer.counters.version, meta
        )

    def _copy_live(self, client: Any) -> None:
        """The game an actor is playing now, to games/live.json for the play server; a failure
        to write it is logged, never fatal (a malformed value in Redis is skipped)."""
        try:
            copy_live(client, self.cfg.replay.namespace, self.run_dir)
        except OSError as e:
            logger.warning("could not write the live game: %s", e)

    def _write_games(self, store: ReplayStore) -> int:
        """Appends the newest self-play games not written yet to the run's PDN file
        (`learner.selfplay_pdn`); returns how many."""
        return self._pdn.append_new(store)
