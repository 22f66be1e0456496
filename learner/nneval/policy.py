"""`python -m learner.nneval.policy`: a move-ordering head for a learned evaluation, distilled
from the MCTS network's policy.

    python -m learner.nneval.policy --evaluation game/data/nneval-v2.safetensors \\
        --network game/data/long-320min.safetensors --data nneval-positions/gen-001 \\
        --threads 2 --out game/data/nneval-v2-policy.safetensors

The alpha-beta search orders quiet moves by history scores. With the ``policy`` switch
(``ab+nn:t200,tm,policy:FILE``) it orders them, at nodes three or more plies from the horizon,
by a head the evaluation file carries: one int8 row per action (square and direction in the
mover's frame) over the same clipped first-layer accumulators the evaluation reads, so a node
pays one small matrix product and no new features.

This fits that head. Positions: the first ``--positions`` rows of a generation's shards whose
mover has two moves or more (stored positions have no capture pending, so every move is quiet).
Targets: the network's priors over the mover's legal actions. Inputs: the evaluation's clipped
accumulators, the mover's first, as the core computes them. The head is a softmax over the legal
actions fitted by Adam; every ``HOLDOUT_EVERY``-th game is held out (split by game, not by
position). The weights are then scaled so the largest is 127 and rounded (only the order of the
logits counts) and written with the evaluation's own tensors into ``--out``; the file records the
network, the data and the agreement in its metadata. Printed: the held-out cross-entropy and
how often the head's first move is the network's, float and as the core computes it, beside a
uniform guess.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from checkerzero.network.inference import load_for_play
from checkerzero.store.positions import FLAG_WHITE_TO_MOVE
from game import encoding, nneval
from learner.nneval.relabel import _games
from learner.nneval.shards import iter_rows, shard_files

logger = logging.getLogger(__name__)

HOLDOUT_EVERY = 10  # every 10th game (by its number) is held out
BATCH = 512  # positions per forward pass of the network
FIT_BATCH = 4096  # positions per Adam step
MIN_MOVES = 2  # a position where ordering has something to order


@dataclass
class Distillation:
    """Inputs, legal masks and the network's priors of the positions, and which are held out."""

    x: np.ndarray  # (n, 2 * hidden) uint8: clipped accumulators, the mover's first
    legal: np.ndarray  # (n, actions) bool
    priors: np.ndarray  # (n, actions) float32, zero off the legal actions
    held_out: np.ndarray  # (n,) bool


def clipped_inputs(net: nneval.NNEvalNet, rows: np.ndarray) -> np.ndarray:
    """(n, 2 * hidden) uint8: each row's clipped accumulators, the mover's first (the core's)."""
    planes = nneval.feature_planes(rows["black"], rows["white"], rows["kings"], net.size)
    acc = planes.astype(np.int32) @ net.tensors["ft_w"].astype(np.int32)  # (n, 2, hidden)
    acc += net.tensors["ft_b"].astype(np.int32)
    white = (rows["flags"] & FLAG_WHITE_TO_MOVE).astype(bool)
    mover = np.where(white[:, None], acc[:, 1], acc[:, 0])
    other = np.where(white[:, None], acc[:, 0], acc[:, 1])
    return np.clip(np.concatenate([mover, other], axis=1), 0, nneval.ACTIVATION_ONE).astype(
        np.uint8
    )


def gather(
    net: nneval.NNEvalNet, network: Path, data: Path, most: int, *, threads: int = 1
) -> Distillation:
    """The first ``most`` usable rows of ``data``'s shards with the network's priors."""
    paths = shard_files(data)
    if not paths:
        raise ValueError(f"{data}: no shards (part-*.parquet)")
    inference, _ = load_for_play(network, net.size, device="cpu", threads=threads)
    xs, masks, priors, held = [], [], [], []
    n, start = 0, time.perf_counter()
    for rows in iter_rows(paths, batch_rows=BATCH):
        packed = np.stack([g.pack_history() for g in _games(rows, net.size)]).astype(np.uint32)
        legal = encoding.legal_masks(packed, net.size)
        keep = legal.sum(axis=1) >= MIN_MOVES
        if not keep.any():
            continue
        rows, packed, legal = (
            rows[keep][: most - n],
            packed[keep][: most - n],
            legal[keep][: most - n],
        )
        p, _ = inference.evaluate(encoding.encode(packed, net.size), legal)
        xs.append(clipped_inputs(net, rows))
        masks.append(legal)
        priors.append(np.where(legal, p, 0.0).astype(np.float32))
        held.append(rows["game"] % HOLDOUT_EVERY == 0)
        n += len(rows)
        if n >= most:
            break
    if n == 0:
        raise ValueError(f"{data}: no position with {MIN_MOVES} moves or more")
    logger.info("%d positions with the network's priors in %.0f s", n, time.perf_counter() - start)
    return Distillation(
        np.concatenate(xs), np.concatenate(masks), np.concatenate(priors), np.concatenate(held)
    )


def masked_log_softmax(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.masked_fill(~legal, float("-inf")), dim=1)


def cross_entropy(logits: np.ndarray, legal: np.ndarray, priors: np.ndarray) -> float:
    """Mean of -sum(prior * log softmax over the legal actions)."""
    logp = masked_log_softmax(torch.as_tensor(logits, dtype=torch.float64), torch.as_tensor(legal))
    terms = torch.where(
        torch.as_tensor(legal), torch.as_tensor(priors, dtype=torch.float64) * logp, 0
    )
    return float(-terms.sum(dim=1).mean())


def agreement(logits: np.ndarray, legal: np.ndarray, priors: np.ndarray) -> float:
    """How often the head's best legal action is the network's most likely one."""
    best = np.where(legal, logits, -np.inf).argmax(axis=1)
    return float((best == priors.argmax(axis=1)).mean())


def fit(d: Distillation, *, epochs: int, lr: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Float weights (actions, 2 * hidden) and bias (actions,) over inputs in [0, 1]."""
    torch.manual_seed(seed)
    train = ~d.held_out
    x = torch.as_tensor(d.x[train], dtype=torch.float32) / nneval.ACTIVATION_ONE
    legal, target = torch.as_tensor(d.legal[train]), torch.as_tensor(d.priors[train])
    head = torch.nn.Linear(x.shape[1], legal.shape[1])
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        total = 0.0
        for lo in range(0, len(x), FIT_BATCH):
            idx = order[lo : lo + FIT_BATCH]
            logp = masked_log_softmax(head(x[idx]), legal[idx])
            loss = -torch.where(legal[idx], target[idx] * logp, 0).sum(dim=1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        logger.info("epoch %d: train cross-entropy %.4f", epoch + 1, total / len(x))
    return head.weight.detach().numpy().copy(), head.bias.detach().numpy().copy()


def integer_logits(net: nneval.NNEvalNet, x: np.ndarray) -> np.ndarray:
    """The core's logits (game.nneval.reference_policy's arithmetic) of clipped inputs ``x``."""
    w, b = net.tensors["pol_w"].astype(np.int64), net.tensors["pol_b"].astype(np.int64)
    return x.astype(np.int64) @ w.T + b


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m learner.nneval.policy",
        description="A move-ordering head for a learned evaluation, distilled from the MCTS "
        "network's policy.",
    )
    p.add_argument("--evaluation", type=Path, default=nneval.DEFAULT_PATH)
    p.add_argument("--network", type=Path, required=True, help="the MCTS network's checkpoint")
    p.add_argument("--data", type=Path, required=True, help="a generation's shard folder")
    p.add_argument("--positions", type=int, default=1_000_000)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="the network's CPU threads")
    p.add_argument("--out", type=Path, required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.positions < 100 or args.epochs < 1 or not args.lr > 0:
        print("policy: --positions must be >= 100, --epochs >= 1 and --lr > 0", file=sys.stderr)
        return 2
    try:
        net = nneval.load(args.evaluation)
        d = gather(net, args.network, args.data, args.positions, threads=args.threads)
    except (ValueError, OSError) as e:
        print(f"policy: {e}", file=sys.stderr)
        return 2
    if not d.held_out.any() or d.held_out.all():
        print("policy: too few games to hold one in ten out", file=sys.stderr)
        return 2
    weight, bias = fit(d, epochs=args.epochs, lr=args.lr, seed=args.seed)
    h = d.held_out
    x_float = d.x[h].astype(np.float32) / nneval.ACTIVATION_ONE
    float_logits = x_float @ weight.T + bias
    uniform = np.zeros_like(float_logits)
    figures = {
        "positions": len(d.x),
        "held_out": int(h.sum()),
        "cross_entropy": cross_entropy(float_logits, d.legal[h], d.priors[h]),
        "uniform_cross_entropy": cross_entropy(uniform, d.legal[h], d.priors[h]),
        "agreement": agreement(float_logits, d.legal[h], d.priors[h]),
        "uniform_agreement": float((1.0 / d.legal[h].sum(axis=1)).mean()),
    }
    out = nneval.with_policy(
        net,
        weight,
        bias,
        {
            "policy_network": str(args.network),
            "policy_network_sha256": _sha256(args.network),
            "policy_data": str(args.data),
            "policy_positions": str(figures["positions"]),
            "policy_evaluation_sha256": _sha256(args.evaluation),
        },
    )
    figures["quantised_agreement"] = agreement(
        integer_logits(out, d.x[h]).astype(np.float64), d.legal[h], d.priors[h]
    )
    out.metadata["policy_agreement"] = f"{figures['quantised_agreement']:.4f}"
    nneval.save(out, args.out)
    print(
        f"{figures['positions']:,} positions ({figures['held_out']:,} held out, by game): "
        f"held-out cross-entropy {figures['cross_entropy']:.3f} "
        f"(uniform {figures['uniform_cross_entropy']:.3f}); the head's first move is the "
        f"network's in {figures['agreement']:.1%} (quantised {figures['quantised_agreement']:.1%},"
        f" a uniform guess {figures['uniform_agreement']:.1%}); wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
