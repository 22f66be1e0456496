"""What a run reports: its metrics rows, progress line, W&B artifacts and end-of-run summary.

`RunReports` is the half of `learner.run.Run` that turns the training loop's counters into the
metrics logger's rows (`_metrics_row`, `_report`), the terminal's progress line (`_progress`,
text by `learner.summary`), the networks and tables logged to W&B (`_log_artifacts`) and
summary.json (`_summary`). `TrainLoop` holds the clocks and handles the loop and these share.
It reads the run's `cfg`, `run_dir` and `ckpt_dir` and uses `_redis_trouble_logged`, all set by
`Run`.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import suppress
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

from actors.pool import ActorPool
from checkerzero import metric_names as M
from checkerzero.metrics import WALL_METRIC, MetricsLogger
from checkerzero.network.checkpoint import read_checkpoint_meta
from checkerzero.run_files import (
    BEST_GLOB,
    CURVE_CSV,
    EVAL_DIR,
    MODEL_FILE,
    RATINGS_CSV,
    SUMMARY_FILE,
    WEIGHTS_DIR,
    best_version,
)
from checkerzero.store.replay import ReplayStats, ReplayStore, SampleRatio
from checkerzero.store.weights import WeightsChannel
from evaluation.evaluator.records import read_eval_metrics
from learner.losses import Losses
from learner.prefetcher import MirrorPrefetcher
from learner.reanalysis import Reanalyser
from learner.summary import (
    describe_summary,
    finite,
    loss_metrics,
    progress_text,
    wait_explained,
    waiting_for_data,
)
from learner.trainer import Trainer

# The run's log lines keep one logger name whichever half writes them: logs are read by it.
logger = logging.getLogger("learner.run")


@dataclass
class TrainLoop:
    """The training loop's clocks and handles, shared by the steps of `Run._train`."""

    t_start: float
    store: InitVar[ReplayStore]
    trainer: Trainer
    prefetcher: MirrorPrefetcher | None = None  # started with the first training step
    reanalyser: Reanalyser | None = None  # learner.reanalysis.enabled: made with the prefetcher
    losses: Losses | None = None  # of the newest step
    stats: ReplayStats = field(init=False)  # the store's counters read by this pass of the loop
    last_progress: float = field(init=False)  # monotonic time of the last progress line
    last_ckpt_step: int = field(init=False)
    last_stats: ReplayStats = field(init=False)  # the store's counters at the last metrics row
    last_stats_t: float = field(init=False)
    steps_at_last: int = field(init=False)  # the step at the last metrics row
    last_publish: float = field(init=False)  # monotonic time of the last published version

    def __post_init__(self, store: ReplayStore) -> None:
        self.last_progress = self.last_publish = self.t_start
        self.last_ckpt_step = self.steps_at_last = self.trainer.counters.step
        self.last_stats, self.last_stats_t = store.stats(), self.t_start
        self.stats = self.last_stats


class RunReports:
    """The reporting half of `learner.run.Run` (see the module's docstring)."""

    def _report(
        self,
        loop: TrainLoop,
        stats: ReplayStats,
        now: float,
        metrics: MetricsLogger,
        extra: dict[str, float],
        ratio: SampleRatio,
    ) -> None:
        """A metrics row (with the actors' and the evaluator's `extra`), and the progress line
        when it is due."""
        trainer = loop.trainer
        row = self._metrics_row(loop, stats, now) | extra
        metrics.log(row, trainer.counters.step)
        if now - loop.last_progress >= self.cfg.logging.progress_every_s:
            self._progress(trainer, stats, row, now - loop.t_start, ratio)
            loop.last_progress = now
        loop.last_stats, loop.last_stats_t = stats, now
        loop.steps_at_last = trainer.counters.step

    def _metrics_row(self, loop: TrainLoop, stats: ReplayStats, now: float) -> dict[str, float]:
        """Self-play, replay and learner rates since the last row, and the newest losses."""
        trainer, last = loop.trainer, loop.last_stats
        dt = max(now - loop.last_stats_t, 1e-9)
        steps = trainer.counters.step - loop.steps_at_last
        row = {
            M.SELFPLAY_POSITIONS_PER_S: (stats.positions_added - last.positions_added) / dt,
            M.SELFPLAY_GAMES_PER_S: (stats.games_added - last.games_added) / dt,
            "selfplay/games": stats.games_added,
            M.REPLAY_WINDOW_POSITIONS: stats.window_positions,
            M.REPLAY_POSITIONS_ADDED: stats.positions_added,
            "replay/records_rejected": loop.prefetcher.malformed if loop.prefetcher else 0,
            "learner/steps_per_s": steps / dt,
            M.SAMPLES_PER_S: steps * self.cfg.learner.batch_size / dt,
            "learner/lr": trainer.lr,
            "learner/steps_skipped_nonfinite": trainer.counters.skipped_nonfinite,
            M.WEIGHTS_VERSION: trainer.counters.version,
        }
        if loop.prefetcher is not None:
            # The targets' age: versions between the newest weights and those whose search made
            # the targets trained on since the last row (reanalysis makes them younger).
            mean_version, reanalysed = loop.prefetcher.take_target_stats()
            if mean_version is not None:
                row["replay/target_age"] = trainer.counters.version - mean_version
                row["replay/reanalysed"] = reanalysed
        if loop.reanalyser is not None:
            row["replay/reanalysis_skipped"] = loop.reanalyser.skipped
        if (run_s := trainer.run_seconds()) is not None:
            row[WALL_METRIC] = run_s
        return row | loss_metrics(loop.losses)

    def _progress(
        self,
        trainer: Trainer,
        stats: ReplayStats,
        row: dict[str, float],
        elapsed: float,
        ratio: SampleRatio,
    ) -> None:
        """The progress line (learner.summary.progress_text), with the time left under
        learner.time_limit_min and what the learner waits for: the first replay.min_positions
        (counted), or new positions once it trained on all that replay.sample_ratio allows.
        The first time each wait begins, a line says why in words
        (learner.summary.wait_explained)."""
        batch = int(self.cfg.learner.batch_size)
        waiting, kind = None, None
        if stats.positions_added < ratio.min_positions:
            kind = "data"
            waiting = waiting_for_data(stats.positions_added, ratio.min_positions)
        elif ratio.should_wait(stats.positions_added, trainer.counters.samples, batch):
            kind = "self-play"
            waiting = "waiting for self-play"
        told: set[str] = self.__dict__.setdefault("_waits_told", set())
        if kind is not None and kind not in told:  # once a run for each kind of wait
            told.add(kind)
            logger.info(
                "%s",
                wait_explained(
                    kind,
                    stats.positions_added,
                    ratio.min_positions,
                    float(self.cfg.replay.sample_ratio),
                ),
            )
        limit_min = float(self.cfg.learner.time_limit_min or 0)
        eta = max(0.0, 60 * limit_min - elapsed) if limit_min > 0 else None
        logger.info("%s", progress_text(elapsed, trainer.counters.step, row, waiting, eta))

    def _summary(
        self,
        resumed: bool,
        loop: TrainLoop,
        stats: ReplayStats,
        state: Path,
        client: Any,
        pool: ActorPool,
    ) -> dict[str, Any]:
        """The run's end state: written to summary.json, logged as text."""
        trainer, losses = loop.trainer, loop.losses
        elo: dict[str, float] = {}
        with self._redis_trouble_logged("the newest Elo"):
            elo = read_eval_metrics(client, self.cfg.replay.namespace)
        selfplay: dict[str, int] = {"actors": pool.size, "nodes": pool.nodes}
        with self._redis_trouble_logged("the games per node"):
            selfplay = pool.summary()
        summary = {
            "resumed": resumed,
            "step": trainer.counters.step,
            "version": trainer.counters.version,
            "games": stats.games_added,
            "positions": stats.positions_added,
            "elapsed_s": round(time.monotonic() - loop.t_start, 1),  # this start or resume
            "run_s": None if (run_s := trainer.run_seconds()) is None else round(run_s, 1),
            # What `python -m evaluation.match` and `evaluation.calibration` take as a player.
            "model": str(self.ckpt_dir / MODEL_FILE),
            "training_state": str(state),  # what a resume loads
            "init_weights": self.cfg.learner.init_weights or None,  # a warm start's network
            "losses": None
            if losses is None
            else {"policy": losses.policy, "value": losses.value, "total": losses.total},
            "elo": None
            if M.EVAL_ELO not in elo
            else {
                "version": int(elo.get(M.EVAL_VERSION, 0)),
                "elo": finite(elo[M.EVAL_ELO]),
                "lower": finite(elo.get(M.EVAL_ELO_LOWER)),
                "upper": finite(elo.get(M.EVAL_ELO_UPPER)),
            },
            # Actors at the end and the nodes whose actors stored games (nodes that left too).
            "selfplay": selfplay,
            # W&B's mode; offline, its files are under <run_dir>/wandb until `wandb sync`.
            "wandb": {"mode": str(self.cfg.logging.wandb.mode)},
        }
        logger.info("%s", describe_summary(summary, self.run_dir / SUMMARY_FILE))
        tmp = self.run_dir / f"{SUMMARY_FILE}.tmp"  # for scripts (no log parsing), whole or absent
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        tmp.replace(self.run_dir / SUMMARY_FILE)
        return summary

    def _log_artifacts(self, metrics: MetricsLogger, channel: WeightsChannel) -> None:
        """To W&B (when on; each file once per change): the newest network (alias ``latest``),
        every promoted one kept on disk (the gate's best: ``best``), the evaluator's curve and
        ratings as tables."""
        latest = self.ckpt_dir / MODEL_FILE
        if latest.is_file():
            with suppress(ValueError, OSError):
                meta = read_checkpoint_meta(latest)
                metrics.log_model(
                    latest, version=meta.version, aliases=["latest"], metadata={"step": meta.step}
                )
        best = channel.version("best")
        for path in sorted((self.ckpt_dir / WEIGHTS_DIR).glob(BEST_GLOB)):
            if (version := best_version(path.name)) is not None:
                metrics.log_model(
                    path, version=version, aliases=["best"] if version == best else []
                )
        eval_dir = self.run_dir / EVAL_DIR
        metrics.log_table("eval/curve", eval_dir / CURVE_CSV)
        metrics.log_table("eval/ratings", eval_dir / RATINGS_CSV)
