"""The learned evaluation's float model, trained quantisation-aware.

The forward pass computes what the core's integer network (game/cpp/nneval.h, mirrored step by
step in game/nneval.py's ``reference_evaluate``) computes, in float units:

- every weight and bias is rounded to its integer step and clipped to its integer range
  (first layer: 1/127, the accumulator bounds ``quantise`` uses; dense and output weights: 1/64,
  int8 for the dense ones; biases: 1/(127*64));
- the accumulators are sums of those steps, so clipping them to [0, 1] gives the core's
  activation exactly;
- each dense layer's sum is floored to 1/127 before its clip, as the core's ``>> 6`` is;
- the logit is the output unit's sum; the core scores ``trunc(logit * output_scale)``.

Rounding and flooring pass gradients straight through (the straight-through estimator), so the
trained model *is* the integer one: after ``game.nneval.quantise`` the core's score equals
``logit * output_scale`` up to the truncation, within ``QUANTISED_TOLERANCE_CM`` (tested).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from game import nneval

ONE = nneval.ACTIVATION_ONE  # 127
W_ONE = 1 << nneval.WEIGHT_SHIFT  # 64
BIAS_ONE = ONE * W_ONE
BIAS_LIMIT = 1 << 24  # quantise()'s int32 bias clip
# The core's score against the float logit * output_scale: the truncation towards zero (< 1)
# plus float32 rounding of sums of a few hundred terms.
QUANTISED_TOLERANCE_CM = 1.0


def _fake(w: torch.Tensor, scale: float, lo: float, hi: float) -> torch.Tensor:
    q = torch.clamp(torch.round(w * scale), lo, hi) / scale
    return w + (q - w).detach()


def _floor_act(x: torch.Tensor) -> torch.Tensor:
    q = torch.floor(x * ONE + 1e-4) / ONE  # + 1e-4: float error must not floor an exact step
    return x + (q - x).detach()


def ft_limit(size: int) -> int:
    """quantise()'s bound on a first-layer weight (integer units): a full board at the bias's
    worst still fits the int16 accumulator."""
    pieces = 2 * (size // 2) * (size // 2 - 1)
    return (32767 - 4 * ONE) // pieces


class NNEvalModel(nn.Module):
    """The float twin of the core's learned evaluation (same layers, same clips), fake-quantised
    when ``quantised`` (the default)."""

    def __init__(
        self,
        size: int = 8,
        hidden: int = 64,
        dense1: int = 16,
        dense2: int = 16,
        quantised: bool = True,
    ) -> None:
        super().__init__()
        self.size = size
        self.quantised = quantised
        inputs = nneval.FEATURE_KINDS * size * size // 2
        self.ft = nn.Linear(inputs, hidden)
        self.l1 = nn.Linear(2 * hidden, dense1)
        self.l2 = nn.Linear(dense1, dense2)
        self.out = nn.Linear(dense2, 1)
        self._ft_lim = ft_limit(size)

    def forward(self, us: torch.Tensor, them: torch.Tensor) -> torch.Tensor:
        """Logit of the mover's expected score from both views' features (n, inputs) each."""
        if not self.quantised:
            x = torch.cat([self.ft(us), self.ft(them)], dim=1).clamp(0.0, 1.0)
            x = self.l1(x).clamp(0.0, 1.0)
            x = self.l2(x).clamp(0.0, 1.0)
            return self.out(x).squeeze(1)
        lim = self._ft_lim
        ft_w = _fake(self.ft.weight, ONE, -lim, lim)
        ft_b = _fake(self.ft.bias, ONE, -4 * ONE, 4 * ONE)
        acc_us = torch.nn.functional.linear(us, ft_w, ft_b)
        acc_them = torch.nn.functional.linear(them, ft_w, ft_b)
        x = torch.cat([acc_us, acc_them], dim=1).clamp(0.0, 1.0)
        for layer in (self.l1, self.l2):
            w = _fake(layer.weight, W_ONE, -128, 127)
            b = _fake(layer.bias, BIAS_ONE, -BIAS_LIMIT, BIAS_LIMIT)
            x = _floor_act(torch.nn.functional.linear(x, w, b)).clamp(0.0, 1.0)
        w = _fake(self.out.weight, W_ONE, -32768, 32767)
        b = _fake(self.out.bias, BIAS_ONE, -BIAS_LIMIT, BIAS_LIMIT)
        return torch.nn.functional.linear(x, w, b).squeeze(1)

    @torch.no_grad()
    def clip_to_format(self) -> None:
        """Keep every weight inside what its integer type holds after scaling (game/nneval.py)."""
        dense = 127 / W_ONE
        for layer in (self.l1, self.l2):
            layer.weight.clamp_(-dense, dense)
        self.ft.weight.clamp_(-self._ft_lim / ONE, self._ft_lim / ONE)
        self.ft.bias.clamp_(-4.0, 4.0)

    def float_weights(self) -> dict[str, np.ndarray]:
        """The weights in the file's layout (game/nneval.py quantise())."""

        def get(t: torch.Tensor) -> np.ndarray:
            return t.detach().cpu().double().numpy()

        return {
            "ft_w": get(self.ft.weight).T,
            "ft_b": get(self.ft.bias),
            "l1_w": get(self.l1.weight),
            "l1_b": get(self.l1.bias),
            "l2_w": get(self.l2.weight),
            "l2_b": get(self.l2.bias),
            "out_w": get(self.out.weight)[0],
            "out_b": get(self.out.bias),
        }

    @torch.no_grad()
    def load_file(self, net: nneval.NNEvalNet) -> None:
        """Start from a file's integer weights (a generation warm-starts from its parent)."""
        t = {k: torch.from_numpy(v.astype(np.float64)).float() for k, v in net.tensors.items()}
        self.ft.weight.copy_(t["ft_w"].T / ONE)
        self.ft.bias.copy_(t["ft_b"] / ONE)
        self.l1.weight.copy_(t["l1_w"] / W_ONE)
        self.l1.bias.copy_(t["l1_b"] / BIAS_ONE)
        self.l2.weight.copy_(t["l2_w"] / W_ONE)
        self.l2.bias.copy_(t["l2_b"] / BIAS_ONE)
        self.out.weight.copy_(t["out_w"][None, :] / W_ONE)
        self.out.bias.copy_(t["out_b"] / BIAS_ONE)


def model_for(net: nneval.NNEvalNet) -> NNEvalModel:
    """A model of the file's shapes holding its weights."""
    t = net.tensors
    model = NNEvalModel(net.size, net.hidden, int(t["l1_b"].shape[0]), int(t["l2_b"].shape[0]))
    model.load_file(net)
    return model
