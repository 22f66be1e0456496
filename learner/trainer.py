"""The learner's training state and its steps: model, optimizer, schedule, counters, resume.

`Trainer` owns what a checkpoint must hold to resume exactly (model, optimizer, scheduler, step,
samples drawn, weights version, RNG states, the moving average of the weights). It is plain
Python over `learner.losses.train_step`, so tests drive it without Ray or Redis; `learner.run`
wires it to the replay store.

With ``learner.ema_decay`` > 0 the trainer keeps an exponential moving average of the weights
(`learner.ema`), updated after every optimizer step, and everything it hands out as "the
network" is that average: the published weights (`weights_bytes`), ``latest.safetensors`` and
the per-checkpoint weights files. Training goes on with the raw weights; the training state
holds both.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate

from checkerzero.network.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    encode_checkpoint,
    load_checkpoint,
    non_finite_tensors,
    save_checkpoint,
)
from checkerzero.network.inference import compute_dtype, preferred_memory_format, select_device
from checkerzero.network.model import CheckersNet, model_config
from checkerzero.run_files import MODEL_FILE, STATE_PATTERN, WEIGHTS_DIR, state_name, step_name
from learner.ema import WeightsEma, check_decay
from learner.losses import Losses, TrainBatch, train_step
from learner.training_state import (
    capture_rng_state,
    load_training_state,
    restore_rng_state,
    save_training_state,
)

logger = logging.getLogger(__name__)

_HEAD = "moves_left_head."  # state-dict prefix of the moves-left head's tensors
SKIPPED_LOG_EVERY = 100  # log the first step skipped for a non-finite loss, then one in this many


class NonFiniteWeightsError(ValueError):
    """The model holds NaN or infinite values: it is neither published nor checkpointed."""


def _nonnegative(value: Any, key: str = "learner.moves_left_weight") -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{key} must be a finite number >= 0, got {value!r}")
    return number


@dataclass
class Counters:
    step: int = 0  # optimizer steps taken
    samples: int = 0  # training samples drawn (for the sample-to-position ratio)
    version: int = 0  # newest weights version published
    skipped_nonfinite: int = 0  # batches whose loss or gradients were not finite (no step taken)
    # Whole seconds the run has run, summed over its resumes (the time between them not
    # counted); -1: resumed from a training state saved before this counter existed.
    run_s: int = 0


class Trainer:
    def __init__(
        self,
        cfg: Any,
        model_cfg: Mapping[str, Any],
        board_size: int,
        *,
        device: torch.device | None = None,
    ) -> None:
        self.cfg = cfg
        self.device = device or select_device(cfg.device)
        if self.device.type == "cpu" and cfg.threads:
            torch.set_num_threads(int(cfg.threads))
        self.model = CheckersNet(model_config(model_cfg, board_size)).to(
            self.device, memory_format=preferred_memory_format(self.device)
        )
        self.compute_dtype = compute_dtype(cfg.get("precision", "auto"), self.device)
        decay = check_decay(cfg.get("ema_decay", 0.0) or 0.0)
        self.ema = WeightsEma(self.model, decay) if decay > 0 else None
        self.moves_left_weight = _nonnegative(cfg.get("moves_left_weight", 0.0) or 0.0)
        self.optimizer = instantiate(cfg.optimizer)(self.model.parameters())
        self.scheduler = (
            instantiate(cfg.scheduler)(self.optimizer) if cfg.get("scheduler") else None
        )
        self.counters = Counters()
        self._clock = time.monotonic()  # when counters.run_s was last set (start or resume)
        mb = cfg.get("max_checkpoint_mb")
        self.max_checkpoint_bytes = MAX_CHECKPOINT_BYTES if mb is None else int(mb * 1024 * 1024)

    # --- steps ---------------------------------------------------------------------------------
    def step(self, batch: TrainBatch) -> Losses:
        """One training step; a batch with a non-finite loss or gradients takes none (it is
        counted in ``counters.skipped_nonfinite``, and ``counters.step`` stays)."""
        losses = train_step(
            self.model,
            self.optimizer,
            batch,
            value_weight=self.cfg.value_weight,
            moves_left_weight=self.moves_left_weight,
            scheduler=self.scheduler,
            device=self.device,
            dtype=self.compute_dtype,
        )
        self.counters.samples += len(batch)
        if losses.skipped:
            self.counters.skipped_nonfinite += 1
            n = self.counters.skipped_nonfinite
            if n == 1 or n % SKIPPED_LOG_EVERY == 0:
                logger.warning(
                    "skipped a training step at step %d: non-finite loss or gradients "
                    "(policy %s, value %s) [%d skipped so far]",
                    self.counters.step,
                    losses.policy,
                    losses.value,
                    n,
                )
            return losses
        self.counters.step += 1
        if self.ema is not None:
            self.ema.update(self.model)
        return losses

    @property
    def published_model(self) -> CheckersNet:
        """The network the run hands out: the weights average when on, else the raw model."""
        return self.model if self.ema is None else self.ema.model

    def check_finite(self) -> None:
        """Raises NonFiniteWeightsError naming the first tensor of the model (or of its
        weights average) that is not finite."""
        models = [("model", self.model)]
        if self.ema is not None:
            models.append(("weights average", self.ema.model))
        for what, model in models:
            bad = non_finite_tensors(model.state_dict())
            if bad:
                raise NonFiniteWeightsError(
                    f"the {what}'s tensor {bad[0]!r} holds NaN or infinite values at step "
                    f"{self.counters.step} ({len(bad)} tensors in all); these weights are neither "
                    "published nor checkpointed"
                )

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def weights_bytes(self, version: int) -> bytes:
        """The weights to publish (the average when on); NonFiniteWeightsError if they, or the
        raw weights, hold NaN or infinity."""
        self.check_finite()
        return encode_checkpoint(self.published_model, step=self.counters.step, version=version)

    def run_seconds(self) -> float | None:
        """Seconds the run has run, summed over its resumes: the restored ``counters.run_s``
        plus the time since this trainer started or resumed. None when unknown (resumed from a
        training state older than the counter)."""
        if self.counters.run_s < 0:
            return None
        return self.counters.run_s + time.monotonic() - self._clock

    # --- checkpoints ---------------------------------------------------------------------------
    def save(self, ckpt_dir: Path, *, keep: int) -> Path:
        """Writes a resumable training state (and a plain weights checkpoint beside it);
        NonFiniteWeightsError, writing nothing, if the weights hold NaN or infinity."""
        self.check_finite()
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        path = ckpt_dir / state_name(self.counters.step)
        save_training_state(
            path,
            self.model,
            self.optimizer,
            self.scheduler,
            step=self.counters.step,
            counters=self._counters_now(),
            rng=capture_rng_state(),
            ema=self.ema,
        )
        save_checkpoint(
            ckpt_dir / MODEL_FILE,
            self.published_model,
            step=self.counters.step,
            version=self.counters.version,
        )
        # Every checkpoint's weights are kept (about 1 MB each for the default network), so the
        # run's strength can be charted afterwards against fixed opponents.
        weights_dir = ckpt_dir / WEIGHTS_DIR
        weights_dir.mkdir(exist_ok=True)
        save_checkpoint(
            weights_dir / step_name(self.counters.step),
            self.published_model,
            step=self.counters.step,
            version=self.counters.version,
        )
        for old in sorted(self._states(ckpt_dir))[:-keep]:
            old.unlink(missing_ok=True)
        return path

    def _counters_now(self) -> dict[str, int]:
        counters = vars(self.counters).copy()
        run_s = self.run_seconds()
        counters["run_s"] = -1 if run_s is None else int(run_s)
        return counters

    def load_weights(self, path: str | Path) -> None:
        """Starts from a model checkpoint's weights (a warm start, e.g. a supervised network);
        the optimizer and counters stay new. ValueError if the file's network has another shape.
        The moves-left head may differ: a run with the head keeps its fresh head over a file
        without one, and a run without it ignores the file's."""
        model, meta = load_checkpoint(path)
        ours = dataclasses.replace(self.model.config, moves_left_head=False)
        if dataclasses.replace(meta.config, moves_left_head=False) != ours:
            raise ValueError(
                f"{path}: holds a {meta.config} network, the run's model is {self.model.config}"
            )
        weights = model.state_dict()
        own_head = {k: v for k, v in self.model.state_dict().items() if k.startswith(_HEAD)}
        weights = {k: v for k, v in weights.items() if not k.startswith(_HEAD)} | (
            {k: weights[k] for k in own_head} if meta.config.moves_left_head else own_head
        )
        self.model.load_state_dict(weights)
        if self.ema is not None:
            self.ema.reset(self.model)
        logger.info("starting from the weights of %s (its step %d)", path, meta.step)

    def restore(self, ckpt_dir: Path) -> bool:
        """Resumes from the newest training state in ``ckpt_dir`` that loads; False if there is
        none. A state that does not load (truncated, corrupt, non-finite, another model) is
        skipped with a warning saying why, and the next older one is tried; ValueError listing
        every reason when states exist but none loads."""
        states = sorted(self._states(ckpt_dir))
        if not states:
            return False
        failures: list[str] = []
        for path in reversed(states):
            try:
                self._restore_from(path)
            except (ValueError, OSError) as e:  # the errors name the file
                logger.warning("resume skips a training state that does not load: %s", e)
                failures.append(str(e))
                continue
            if failures:
                logger.warning(
                    "resumed from an older training state, %s, after skipping %d newer (above)",
                    path.name,
                    len(failures),
                )
            logger.info(
                "resumed from %s (step %d, weights version %d)",
                path,
                self.counters.step,
                self.counters.version,
            )
            return True
        raise ValueError(
            f"no training state in {ckpt_dir} loads ({len(states)} tried): " + "; ".join(failures)
        )

    def _restore_from(self, path: Path) -> None:
        """Loads one training state into the model, optimizer, scheduler, RNGs and counters;
        ValueError naming the file when any part of it does not fit."""
        state = load_training_state(
            path,
            self.model,
            self.optimizer,
            self.scheduler,
            max_bytes=self.max_checkpoint_bytes,
            ema=self.ema,
        )
        counters = Counters()
        try:
            for key, value in state.counters.items():
                if hasattr(counters, key):
                    setattr(counters, key, int(value))
            restore_rng_state(state.rng)
        except (TypeError, ValueError, KeyError, RuntimeError, IndexError, OverflowError) as e:
            raise ValueError(f"{path}: bad counters or RNG state ({e})") from e
        if "run_s" not in state.counters:  # saved before the run clock existed: unknown
            counters.run_s = -1
        self.counters = counters
        self._clock = time.monotonic()
        if self.ema is not None and state.ema_updates is None:
            self.ema.reset(self.model)
            logger.info("%s holds no weights average: it starts from the raw weights", path.name)

    @staticmethod
    def _states(ckpt_dir: Path) -> list[Path]:
        if not ckpt_dir.is_dir():
            return []
        return [p for p in ckpt_dir.iterdir() if STATE_PATTERN.match(p.name)]
