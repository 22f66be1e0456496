"""`python -m learner.nneval.refit`: train the evaluation again on stored generations' positions.

    python -m learner.nneval.refit --data nneval-positions/gen-001 \\
        --data nneval-positions/gen-002 --epochs 4 --out longer.nn \\
        --parent docs/results/nneval-generations/gen-000.safetensors

The generations loop trains each candidate once, with the settings of its run. This trains
another from the same Parquet shards with other settings (more epochs, another lambda, a wider
network) without playing a game, so that training choices can be measured against each other
in a match before a generation's self-play is spent on them. Held out by game as in the loop;
the file records the folders, the parent and every setting.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from game import nneval
from learner.nneval.fit import FitSettings, fit
from learner.nneval.lineage import weights_digest
from learner.nneval.shards import ShardError, count_rows, shard_files

HELP = {
    "hidden": "accumulator width per side (the core allows up to 256)",
    "dense1": "first dense layer's width (up to 64)",
    "dense2": "second dense layer's width (up to 64)",
    "epochs": "passes over the positions",
    "steps": "> 0: this many optimiser steps instead of epochs",
    "batch": "positions per optimiser step",
    "lr": "Adam learning rate, decayed to a tenth over the training",
    "lambda_start": "share of the search score in the target at the first step",
    "lambda_end": "... and at the last (the rest is the game's result)",
    "validation": "share of games held out (all their positions)",
    "output_scale": "centi-men per unit of logit in the file",
    "shuffle_rows": "shuffle buffer (positions in memory)",
    "max_val_rows": "held-out positions kept for the held-out loss",
    "warm_start": "start from the parent's weights when the shapes match (1/0)",
    "result_from_ply": "> 0: positions before this ply take the search score alone (self-play's "
    "random moves come before selfplay.random_until)",
    "seed": "seed of the held-out split, the shuffles and fresh weights",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m learner.nneval.refit", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--data",
        type=Path,
        action="append",
        required=True,
        help="a generation's shard folder (nneval.data_dir/gen-<g>); repeat for more",
    )
    p.add_argument("--parent", type=Path, help="evaluation file to warm-start from")
    p.add_argument("--out", type=Path, required=True, help="evaluation file to write")
    p.add_argument("--size", type=int, choices=(6, 8), default=8)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    for f in dataclasses.fields(FitSettings):
        if f.name == "flip_labels":
            continue
        kind = (lambda v: bool(int(v))) if f.type in (bool, "bool") else type(f.default)
        p.add_argument(
            f"--{f.name.replace('_', '-')}", type=kind, default=f.default, help=HELP[f.name]
        )
    return p


def _check(args: argparse.Namespace) -> str | None:
    for name in ("lambda_start", "lambda_end", "validation"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    if args.steps < 0:
        return f"--steps must be >= 0 (0: --epochs passes), got {args.steps}"
    if args.result_from_ply < 0:
        return f"--result-from-ply must be >= 0 (0: every position), got {args.result_from_ply}"
    for name in ("epochs", "batch", "hidden", "dense1", "dense2", "output_scale"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}"
    if args.hidden > 256 or args.hidden % 32:
        return (
            f"--hidden must be a multiple of 32 up to 256 (the core's kernels), got {args.hidden}"
        )
    for name in ("dense1", "dense2"):
        if getattr(args, name) > 64:
            return (
                f"--{name} must be at most 64 (the core's widest layer), got {getattr(args, name)}"
            )
    for folder in args.data:
        if not shard_files(folder):
            return f"{folder}: no Parquet shards (part-*.parquet) there"
    if args.parent is not None and not args.parent.is_file():
        return f"{args.parent}: no such evaluation file"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = _parser().parse_args(argv)
    error = _check(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    try:
        parent = nneval.load(args.parent) if args.parent else None
    except nneval.NNEvalFileError as e:
        print(e, file=sys.stderr)
        return 2
    settings = FitSettings(
        **{
            f.name: getattr(args, f.name)
            for f in dataclasses.fields(FitSettings)
            if f.name != "flip_labels"
        }
    )
    torch.set_num_threads(args.threads)
    paths = [p for folder in args.data for p in shard_files(folder)]
    start = time.perf_counter()
    try:
        model, history = fit(paths, settings, args.size, parent)
    except ShardError as e:
        print(e, file=sys.stderr)
        return 2
    meta = {
        "trained_on": ", ".join(str(f) for f in args.data) + f": {count_rows(paths)} positions",
        "parent_sha256": weights_digest(args.parent) if args.parent else "none",
        "held_out_loss": f"{history[-1]['val_loss']:.4f}",
        "settings": json.dumps(dataclasses.asdict(settings), sort_keys=True),
    }
    net = nneval.quantise(
        model.float_weights(), size=args.size, output_scale=settings.output_scale, metadata=meta
    )
    nneval.save(net, args.out)
    nneval.load(args.out)  # the checked artefact, as players read it
    print(
        f"wrote {args.out}: {count_rows(paths)} positions, held-out loss "
        f"{history[-1]['val_loss']:.4f} (constant {history[-1]['val_loss_constant']:.4f}) at "
        f"lambda {history[-1]['lambda']:.2f}, {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
