"""The learner's training state and its steps: model, optimizer, schedule, counters, resume.

`Trainer` owns what a checkpoint must hold to resume exactly (model, optimizer, scheduler, step,
samples drawn, weights version, RNG states). It is plain Python over `learner.losses.train_step`,
so tests drive it without Ray or Redis; `learner.run` wires it to the replay store.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate

from game import encoding
from learner.checkpoint import (
    capture_rng_state,
    encode_checkpoint,
    load_checkpoint,
    load_training_state,
    restore_rng_state,
    save_checkpoint,
    save_training_state,
)
from learner.losses import Losses, TrainBatch, train_step
from learner.network import CheckersNet, ModelConfig

logger = logging.getLogger(__name__)

STATE_PATTERN = re.compile(r"^state_(\d{8})\.safetensors$")


def pick_device(spec: str) -> torch.device:
    if spec != "auto":
        return torch.device(spec)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_config(model_cfg: Mapping[str, Any], board_size: int) -> ModelConfig:
    values = dict(model_cfg)
    if values.get("board_size", board_size) != board_size:
        raise ValueError(
            f"model.board_size={values['board_size']} does not match game.size={board_size}"
        )
    values["board_size"] = board_size
    if values.get("in_planes", encoding.NUM_PLANES) != encoding.NUM_PLANES:
        raise ValueError(f"model.in_planes must equal the encoder's {encoding.NUM_PLANES} planes")
    return ModelConfig(**values)


@dataclass
class Counters:
    step: int = 0  # optimizer steps taken
    samples: int = 0  # training samples drawn (for the sample-to-position ratio)
    version: int = 0  # newest weights version published


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
        self.device = device or pick_device(cfg.device)
        if self.device.type == "cpu" and cfg.threads:
            torch.set_num_threads(int(cfg.threads))
        self.model = CheckersNet(model_config(model_cfg, board_size)).to(self.device)
        if self.device.type == "cuda":
            self.model = self.model.to(memory_format=torch.channels_last)
        self.optimizer = instantiate(cfg.optimizer)(self.model.parameters())
        self.scheduler = (
            instantiate(cfg.scheduler)(self.optimizer) if cfg.get("scheduler") else None
        )
        self.counters = Counters()

    # --- steps ---------------------------------------------------------------------------------
    def step(self, batch: TrainBatch) -> Losses:
        losses = train_step(
            self.model,
            self.optimizer,
            batch,
            value_weight=self.cfg.value_weight,
            scheduler=self.scheduler,
            device=self.device,
        )
        self.counters.step += 1
        self.counters.samples += len(batch)
        return losses

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def weights_bytes(self, version: int) -> bytes:
        return encode_checkpoint(self.model, step=self.counters.step, version=version)

    # --- checkpoints ---------------------------------------------------------------------------
    def save(self, ckpt_dir: Path, *, keep: int) -> Path:
        """Writes a resumable training state (and a plain weights checkpoint beside it)."""
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        path = ckpt_dir / f"state_{self.counters.step:08d}.safetensors"
        save_training_state(
            path,
            self.model,
            self.optimizer,
            self.scheduler,
            step=self.counters.step,
            counters=vars(self.counters).copy(),
            rng=capture_rng_state(),
        )
        save_checkpoint(
            ckpt_dir / "latest.safetensors",
            self.model,
            step=self.counters.step,
            version=self.counters.version,
        )
        # Every checkpoint's weights are kept (about 1 MB each for the default network), so the
        # run's strength can be charted afterwards against fixed opponents.
        weights_dir = ckpt_dir / "weights"
        weights_dir.mkdir(exist_ok=True)
        save_checkpoint(
            weights_dir / f"step_{self.counters.step:08d}.safetensors",
            self.model,
            step=self.counters.step,
            version=self.counters.version,
        )
        for old in sorted(self._states(ckpt_dir))[:-keep]:
            old.unlink(missing_ok=True)
        return path

    def load_weights(self, path: str | Path) -> None:
        """Starts from a model checkpoint's weights (a warm start, e.g. a supervised network);
        the optimizer and counters stay new. ValueError if the file's network has another shape."""
        model, meta = load_checkpoint(path)
        if meta.config != self.model.config:
            raise ValueError(
                f"{path}: holds a {meta.config} network, the run's model is {self.model.config}"
            )
        self.model.load_state_dict(model.state_dict())
        logger.info("starting from the weights of %s (its step %d)", path, meta.step)

    def restore(self, ckpt_dir: Path) -> bool:
        """Resumes from the newest training state in ``ckpt_dir``; False if there is none."""
        states = sorted(self._states(ckpt_dir))
        if not states:
            return False
        state = load_training_state(states[-1], self.model, self.optimizer, self.scheduler)
        restore_rng_state(state.rng)
        for key, value in state.counters.items():
            if hasattr(self.counters, key):
                setattr(self.counters, key, int(value))
        logger.info(
            "resumed from %s (step %d, weights version %d)",
            states[-1],
            self.counters.step,
            self.counters.version,
        )
        return True

    @staticmethod
    def _states(ckpt_dir: Path) -> list[Path]:
        if not ckpt_dir.is_dir():
            return []
        return [p for p in ckpt_dir.iterdir() if STATE_PATTERN.match(p.name)]
