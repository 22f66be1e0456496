"""Training the evaluation on stored positions: streamed shards, blended targets, held-out games.

Each position's target is the mover's expected score,

    target = lambda * sigmoid(score / output_scale) + (1 - lambda) * (result + 1) / 2

with ``score`` the root search's score in centi-men (the evaluation's own scale: a logit times
``output_scale``) and ``result`` the game's; a position the endgame database labelled takes its
exact value whatever lambda is. Lambda moves linearly from ``lambda_start`` to ``lambda_end``
over a generation's training (the NNUE trainers' "WDL lambda": search scores first, then more
of the results, which the search cannot see past its horizon). With ``result_from_ply`` > 0, a
position played before that ply takes its search score alone (lambda 1): self-play makes its
random moves before ``selfplay.random_until``, so an earlier position's result is partly that of
a random move made after it.

Held out by game: a game's positions are all held out or none (a seeded hash of generation and
game number), so the held-out loss measures positions of games the model never saw. The model
trains quantisation-aware (``learner.nneval.model``), warm-started from the parent file when its
shapes match. It trains ``epochs`` passes over the positions, or ``steps`` optimiser steps
whatever their number (the lr and lambda schedules run over either). Memory: a shuffle buffer
of ``shuffle_rows`` positions and up to ``max_val_rows`` held-out ones, whatever the data's
size.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from checkerzero.store.positions import FLAG_EXACT, FLAG_WHITE_TO_MOVE
from game import nneval
from learner.nneval.model import NNEvalModel, model_for
from learner.nneval.shards import count_rows, iter_rows

logger = logging.getLogger(__name__)

HOLD_OUT_BUCKETS = 10_000  # resolution of the held-out share


@dataclass(frozen=True)
class FitSettings:
    """conf/nneval: train."""

    hidden: int = 64
    dense1: int = 16
    dense2: int = 16
    epochs: int = 2
    steps: int = 0  # > 0: this many optimiser steps whatever the data's size (epochs ignored)
    batch: int = 4096
    lr: float = 2e-3
    lambda_start: float = 1.0
    lambda_end: float = 0.7
    validation: float = 0.02
    output_scale: int = 200
    shuffle_rows: int = 1_000_000
    max_val_rows: int = 200_000
    warm_start: bool = True
    flip_labels: bool = False  # tests only: mover's results and scores negated
    result_from_ply: int = 0  # > 0: positions before this ply take the search score alone
    seed: int = 0

    @classmethod
    def from_config(cls, c: Any, seed: int) -> FitSettings:
        names = [f for f in cls.__dataclass_fields__ if f != "seed"]
        return cls(**{n: c[n] for n in names if n in c}, seed=seed)


def held_out(rows: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """True for the rows of the held-out games (a seeded hash of generation and game)."""
    key = rows["generation"].astype(np.uint64) << np.uint64(32) | rows["game"].astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (key + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(29)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(32)
    return (x % np.uint64(HOLD_OUT_BUCKETS)) < np.uint64(round(fraction * HOLD_OUT_BUCKETS))


def features(rows: np.ndarray, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mover's view, other view) float features of the rows."""
    planes = nneval.feature_planes(rows["black"], rows["white"], rows["kings"], size)
    us = ((rows["flags"] & FLAG_WHITE_TO_MOVE) != 0).astype(np.intp)
    idx = np.arange(len(rows))
    mine = torch.from_numpy(planes[idx, us].astype(np.float32))
    theirs = torch.from_numpy(planes[idx, 1 - us].astype(np.float32))
    return mine, theirs


def targets(
    rows: np.ndarray, lam: float, output_scale: int, flip: bool = False, result_from_ply: int = 0
) -> torch.Tensor:
    """The blended expected-score targets of the rows (module docstring)."""
    sign = -1.0 if flip else 1.0
    result = (sign * rows["result"].astype(np.float64) + 1.0) / 2.0
    search = 1.0 / (1.0 + np.exp(-sign * rows["score"].astype(np.float64) / output_scale))
    exact = (rows["flags"] & FLAG_EXACT) != 0
    lam_rows = np.where(rows["ply"] < result_from_ply, 1.0, lam)
    blend = np.where(exact, result, lam_rows * search + (1.0 - lam_rows) * result)
    return torch.from_numpy(blend.astype(np.float32))


def _shuffled(
    paths: Sequence[Path], s: FitSettings, rng: np.random.Generator, train: bool
) -> Iterator[np.ndarray]:
    """Batches of training (or held-out) rows, shards in a seeded order, shuffled in a buffer."""
    order = [paths[i] for i in rng.permutation(len(paths))] if train else list(paths)
    buf: list[np.ndarray] = []
    have = 0

    def flush(final: bool) -> Iterator[np.ndarray]:
        nonlocal buf, have
        if not buf:
            return
        rows = np.concatenate(buf)
        rows = rows[rng.permutation(len(rows))] if train else rows
        cut = len(rows) if final else len(rows) - len(rows) % s.batch
        for lo in range(0, cut, s.batch):
            yield rows[lo : lo + s.batch]
        buf, have = ([rows[cut:]], len(rows) - cut) if cut < len(rows) else ([], 0)

    for rows in iter_rows(order):
        keep = held_out(rows, s.validation, s.seed) != train
        buf.append(rows[keep])
        have += int(keep.sum())
        if have >= s.shuffle_rows:
            yield from flush(False)
    yield from flush(True)


def fit(
    paths: Sequence[Path],
    s: FitSettings,
    size: int,
    parent: nneval.NNEvalNet | None = None,
) -> tuple[NNEvalModel, list[dict[str, float]]]:
    """Trains on the shards; returns the model and one history row per epoch (step, lambda,
    train_loss, val_loss, val_loss_constant: what a constant prediction scores)."""
    torch.manual_seed(s.seed)
    rng = np.random.default_rng(s.seed)
    same = parent is not None and (
        parent.size == size
        and parent.hidden == s.hidden
        and parent.tensors["l1_b"].shape[0] == s.dense1
        and parent.tensors["l2_b"].shape[0] == s.dense2
    )
    if s.warm_start and same:
        model = model_for(parent)
    else:
        model = NNEvalModel(size, s.hidden, s.dense1, s.dense2)
    total = count_rows(paths)
    per_epoch = max(1, math.ceil(total * (1 - s.validation) / s.batch))
    steps_total = s.steps if s.steps > 0 else s.epochs * per_epoch  # the schedules' length
    opt = torch.optim.Adam(model.parameters(), lr=s.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.1 ** min(1.0, t / steps_total))
    loss_fn = nn.BCEWithLogitsLoss()
    val_rows = _validation_rows(paths, s, rng)
    step, history = 0, []
    for epoch in itertools.count():
        if epoch >= s.epochs if s.steps <= 0 else step >= steps_total:
            break
        model.train()
        total_loss, count = 0.0, 0
        for rows in _shuffled(paths, s, rng, train=True):
            if s.steps > 0 and step >= steps_total:
                break
            lam = s.lambda_start + (s.lambda_end - s.lambda_start) * min(1.0, step / steps_total)
            us, them = features(rows, size)
            loss = loss_fn(
                model(us, them),
                targets(rows, lam, s.output_scale, s.flip_labels, s.result_from_ply),
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            model.clip_to_format()
            total_loss += float(loss.detach()) * len(rows)
            count += len(rows)
            step += 1
        row = {"epoch": float(epoch), "step": float(step), "lambda": lam if count else s.lambda_end}
        row["train_loss"] = total_loss / max(count, 1)
        row |= validation_loss(model, val_rows, row["lambda"], s, size)
        history.append(row)
        logger.info(
            "epoch %d: train loss %.4f, held-out loss %.4f (constant %.4f), lambda %.2f",
            epoch,
            row["train_loss"],
            row["val_loss"],
            row["val_loss_constant"],
            row["lambda"],
        )
        if s.steps > 0 and not count:
            break  # no training rows at all: steps would never be reached
    return model, history


def _validation_rows(paths: Sequence[Path], s: FitSettings, rng: np.random.Generator) -> Any:
    parts, have = [], 0
    for rows in _shuffled(paths, s, rng, train=False):
        parts.append(rows[: s.max_val_rows - have])
        have += len(parts[-1])
        if have >= s.max_val_rows:
            break
    return np.concatenate(parts) if parts else None


@torch.no_grad()
def validation_loss(
    model: NNEvalModel, rows: Any, lam: float, s: FitSettings, size: int
) -> dict[str, float]:
    if rows is None or not len(rows):
        return {"val_loss": float("nan"), "val_loss_constant": float("nan")}
    model.eval()
    q = targets(rows, lam, s.output_scale, s.flip_labels, s.result_from_ply).double()
    us, them = features(rows, size)
    loss = float(nn.functional.binary_cross_entropy_with_logits(model(us, them).double(), q))
    p = float(q.mean().clamp(1e-6, 1 - 1e-6))
    const = float(-(q * math.log(p) + (1 - q) * math.log(1 - p)).mean())
    return {"val_loss": loss, "val_loss_constant": const}
