"""Losses and the single training step.

- Policy loss: cross-entropy between the MCTS visit distribution and the network's softmax taken
  over the *legal* actions only. Illegal logits are replaced by a very negative finite number (not
  ``-inf``, so a malformed all-illegal row gives a uniform softmax instead of NaNs) and their terms
  are dropped, so the network never spends capacity pushing down moves that cannot be played.
  A batch may weight its rows (``TrainBatch.policy_weight``): positions of fast searches (playout
  cap randomization) have weight 0, since their few visits are a poor target, and the loss is the
  weighted mean over the rest.
- Value loss: cross-entropy of the win/draw/loss logits against a (N, 3) probability target, which
  covers both one-hot game results and soft targets (e.g. a mix of result and search value).
- Moves-left loss (only for a network with the moves-left head and a batch with its targets):
  see ``learner.moves_left``; it adds ``moves_left_weight`` times its value to the total.
- Losses are computed in float32 even under bf16 autocast: log-softmax over 128 actions in bf16
  loses the small probabilities that the policy target cares about.
- ``train_step`` is a plain function (the learner actor owns the loop, logging and checkpoints).
  Its ``dtype`` is the forward pass's autocast dtype (``learner.precision``, resolved by
  ``checkerzero.network.inference.compute_dtype``: bf16 on CUDA and on CPUs with native bf16,
  where it is faster; float32 elsewhere, where CPU autocast is slower). bf16 needs no loss
  scaling (unlike fp16); weights, gradients and optimizer state stay float32. Weight decay lives
  in the optimizer (SGD with momentum or AdamW), not as an L2 term in the loss, so the reported
  losses are pure prediction losses that can be compared across weight-decay settings.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import torch
from torch import nn

from game.encoding import NUM_WDL
from learner.moves_left import moves_left_loss

logger = logging.getLogger(__name__)

# Fill value for illegal logits: finite so that an all-illegal row cannot produce NaN.
MASKED_LOGIT = torch.finfo(torch.float32).min


@dataclasses.dataclass(frozen=True)
class Losses:
    """Mean losses of one batch, as Python floats (``total = policy + value_weight * value``,
    ``+ moves_left_weight * moves_left`` with a moves-left head).

    ``skipped``: the loss or the gradients were not finite, so no step was taken.
    ``moves_left``, ``moves_left_mae``: the moves-left loss and its mean absolute error in plies
    (over exact targets; NaN with none), None without a moves-left head.
    """

    policy: float
    value: float
    total: float
    skipped: bool = False
    moves_left: float | None = None
    moves_left_mae: float | None = None


@dataclasses.dataclass(frozen=True)
class TrainBatch:
    """One training batch of decoded positions.

    planes: float32 (N, C, S, S) network input (mover's view); mask: bool (N, A) legal actions;
    target_pi: float32 (N, A) visit distribution, zero on illegal actions, rows sum to 1;
    target_wdl: float32 (N, 3) result probabilities (win, draw, loss) from the mover's view;
    policy_weight: float32 (N,) weight of each row in the policy loss (0: a fast search's
    position, which trains the value head only), or None: every row weighs 1.
    moves_left: int32 (N,) plies left in the game, moves_left_exact: bool (N,) False where that
    is a lower bound (a game cut short); both or neither (learner.moves_left).
    """

    planes: np.ndarray
    mask: np.ndarray
    target_pi: np.ndarray
    target_wdl: np.ndarray
    policy_weight: np.ndarray | None = None
    moves_left: np.ndarray | None = None
    moves_left_exact: np.ndarray | None = None

    def __post_init__(self) -> None:
        expected = {
            "planes": (np.float32, 4),
            "mask": (np.bool_, 2),
            "target_pi": (np.float32, 2),
            "target_wdl": (np.float32, 2),
        }
        for name, (dtype, ndim) in expected.items():
            value = getattr(self, name)
            if not isinstance(value, np.ndarray) or value.dtype != dtype or value.ndim != ndim:
                got = (
                    f"{value.dtype} {value.shape}" if isinstance(value, np.ndarray) else type(value)
                )
                raise ValueError(
                    f"TrainBatch.{name} must be a {ndim}-d {np.dtype(dtype)} array, got {got}"
                )
        n = self.planes.shape[0]
        if self.mask.shape != self.target_pi.shape or self.mask.shape[0] != n:
            raise ValueError(
                f"TrainBatch: mask {self.mask.shape} and target_pi {self.target_pi.shape} "
                f"must both be (N={n}, A)"
            )
        if self.target_wdl.shape != (n, NUM_WDL):
            raise ValueError(f"TrainBatch.target_wdl must be ({n}, 3), got {self.target_wdl.shape}")
        w = self.policy_weight
        if w is not None and (
            not isinstance(w, np.ndarray) or w.dtype != np.float32 or w.shape != (n,)
        ):
            got = f"{w.dtype} {w.shape}" if isinstance(w, np.ndarray) else type(w)
            raise ValueError(f"TrainBatch.policy_weight must be float32 ({n},) or None, got {got}")
        if (self.moves_left is None) != (self.moves_left_exact is None):
            raise ValueError("TrainBatch: moves_left and moves_left_exact come together")
        for name, dtype in (("moves_left", np.int32), ("moves_left_exact", np.bool_)):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, np.ndarray) or value.dtype != dtype or value.shape != (n,)
            ):
                raise ValueError(f"TrainBatch.{name} must be a ({n},) {np.dtype(dtype)} array")

    def __len__(self) -> int:
        return int(self.planes.shape[0])


def policy_loss(
    logits: torch.Tensor,
    target_pi: torch.Tensor,
    mask: torch.Tensor,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean cross-entropy of ``target_pi`` against softmax(logits) restricted to legal actions;
    with ``weight`` (N,), the weighted mean (0 when every weight is 0)."""
    masked = logits.float().masked_fill(~mask, MASKED_LOGIT)
    log_p = torch.log_softmax(masked, dim=-1)
    per_action = torch.where(mask, target_pi.float() * log_p, torch.zeros_like(log_p))
    per_row = -per_action.sum(dim=-1)
    if weight is None:
        return per_row.mean()
    weight = weight.float()
    # Clamped so that a batch of fast positions only gives 0, not 0 / 0.
    return (weight * per_row).sum() / weight.sum().clamp_min(torch.finfo(torch.float32).tiny)


def value_loss(wdl_logits: torch.Tensor, target_wdl: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the (N, 3) WDL target against softmax(wdl_logits)."""
    log_p = torch.log_softmax(wdl_logits.float(), dim=-1)
    return -(target_wdl.float() * log_p).sum(dim=-1).mean()


def batch_to_device(
    batch: TrainBatch, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tensors of ``batch`` on ``device`` (planes channels_last on CUDA and CPU, matching the
    trainer's model: ``checkerzero.network.inference.preferred_memory_format``)."""
    cuda = device.type == "cuda"
    planes = torch.from_numpy(batch.planes)
    planes = planes.pin_memory().to(device, non_blocking=True) if cuda else planes.to(device)
    if device.type in ("cuda", "cpu"):
        planes = planes.contiguous(memory_format=torch.channels_last)
    rest = (
        torch.from_numpy(a).to(device, non_blocking=cuda)
        for a in (batch.mask, batch.target_pi, batch.target_wdl)
    )
    return (planes, *rest)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: TrainBatch,
    *,
    value_weight: float = 1.0,
    moves_left_weight: float = 0.0,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    device: str | torch.device,
    dtype: torch.dtype | None = None,
) -> Losses:
    """One optimizer step on ``batch``; returns the batch's losses before the step.

    When the loss or the gradient norm is not finite (a poisoned batch, an overflow) the step is
    skipped: the gradients are dropped, the optimizer and scheduler do not move, the BatchNorm
    running statistics the forward pass updated are put back, and the result says ``skipped``.
    One device sync either way (the finiteness test needs the values before the step).
    ``dtype``: the forward pass's autocast dtype; None is bf16 on CUDA and float32 elsewhere.
    """
    device = torch.device(device)
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    planes, mask, target_pi, target_wdl = batch_to_device(batch, device)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    buffers = list(model.buffers())  # BatchNorm statistics: the forward pass updates them
    saved = [b.detach().clone() for b in buffers]
    with_ml = getattr(model, "moves_left_head", None) is not None and batch.moves_left is not None
    with torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype != torch.float32):
        if with_ml:
            policy_logits, wdl_logits, ml_plies = model.forward_moves_left(planes)
        else:
            policy_logits, wdl_logits = model(planes)
    weight = None
    if batch.policy_weight is not None:
        cuda = device.type == "cuda"
        weight = torch.from_numpy(batch.policy_weight).to(device, non_blocking=cuda)
    p_loss = policy_loss(policy_logits, target_pi, mask, weight)
    v_loss = value_loss(wdl_logits, target_wdl)
    total = p_loss + value_weight * v_loss
    extra = []
    if with_ml:
        ml_target = torch.from_numpy(batch.moves_left).to(device)
        ml_exact = torch.from_numpy(batch.moves_left_exact).to(device)
        ml_loss, ml_mae = moves_left_loss(ml_plies, ml_target, ml_exact)
        total = total + moves_left_weight * ml_loss
        extra = [ml_loss, ml_mae]
    total.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=device)
    values = torch.stack([p_loss, v_loss, total, grad_norm.float(), *extra]).detach().cpu().tolist()
    ml = {"moves_left": values[4], "moves_left_mae": values[5]} if with_ml else {}
    if not all(math.isfinite(v) for v in values[:5]):  # the MAE is NaN without exact targets
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for buffer, before in zip(buffers, saved, strict=True):
                buffer.copy_(before)
        return Losses(policy=values[0], value=values[1], total=values[2], skipped=True, **ml)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return Losses(policy=values[0], value=values[1], total=values[2], **ml)
