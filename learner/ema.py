"""An exponential moving average (EMA) of a network's weights, the copy the run publishes.

Training moves the raw weights with every noisy batch; their running average over the last few
hundred steps is a better network to play with (KataGo publishes such an average, lc0 calls it
"SWA"). The learner keeps training the raw weights and, with ``learner.ema_decay`` > 0, gives
the actors and the evaluator this average instead.

After each optimizer step, every floating-point tensor of the network's state dict moves toward
the raw one::

    ema = d * ema + (1 - d) * raw,   d = min(decay, (1 + n) / (EMA_WARMUP + n))

where ``n`` counts the updates so far. The warm-up is TensorFlow's ``ExponentialMovingAverage``
with ``num_updates``: a fresh average starts from the random initial weights, and at a fixed
0.999 those would still be 95% of it after 50 steps, when the first trained version goes to the
actors. With the warm-up, ``1 - d = 9 / (10 + n)``: the average spans about the last ninth of
the updates so far, until that reaches the horizon of ``decay`` (``1 / (1 - decay)`` updates).

What is averaged: the parameters and the BatchNorm running statistics (mean and variance). The
running statistics are themselves an average over recent batches of the raw network at recent
weights; the average of those statistics over the same steps as the weights is the matching
estimate for the averaged network, where the raw network's latest statistics would be those of
one point in time. Recomputing the statistics of the averaged weights on fresh batches (SWA's
``update_bn``) would be exact but costs forward passes and data at every publication. Integer
buffers (``num_batches_tracked``) are copied, not averaged.
"""

from __future__ import annotations

import copy
import logging
import math

import torch
from torch import nn

logger = logging.getLogger(__name__)

# Warm-up denominator: the decay is min(decay, (1 + n) / (EMA_WARMUP + n)) after n updates
# (TensorFlow's ExponentialMovingAverage); 10 gives 0.1 at the first update, 0.9 after 80.
EMA_WARMUP = 10


def check_decay(decay: float, where: str = "learner.ema_decay") -> float:
    """``decay`` as a float in [0, 1); ValueError naming ``where`` otherwise."""
    try:
        value = float(decay)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} must be a number in [0, 1), got {decay!r}") from exc
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise ValueError(f"{where} must be in [0, 1) (0 turns the average off), got {decay!r}")
    return value


class WeightsEma:
    """The moving average of ``model``'s state dict, held as a second model (in eval mode, no
    gradients) on the same device and memory layout; starts equal to ``model``."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = check_decay(decay)
        if self.decay == 0.0:
            raise ValueError("an EMA with decay 0 is the raw weights: use none")
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self.updates = 0

    def decay_at(self, updates: int) -> float:
        """The decay the update after ``updates`` earlier ones uses (with the warm-up)."""
        return min(self.decay, (1.0 + updates) / (EMA_WARMUP + updates))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """One step of the average toward ``model``'s current weights."""
        weight = 1.0 - self.decay_at(self.updates)
        averaged, raw = [], []
        for mine, theirs in zip(
            self.model.state_dict().values(), model.state_dict().values(), strict=True
        ):
            if mine.is_floating_point():
                averaged.append(mine)
                raw.append(theirs.detach())
            else:
                mine.copy_(theirs)
        torch._foreach_lerp_(averaged, raw, weight)
        self.updates += 1

    @torch.no_grad()
    def reset(self, model: nn.Module) -> None:
        """Start the average afresh from ``model``'s weights."""
        for mine, theirs in zip(
            self.model.state_dict().values(), model.state_dict().values(), strict=True
        ):
            mine.copy_(theirs)
        self.updates = 0
