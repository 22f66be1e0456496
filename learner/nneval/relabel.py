"""`python -m learner.nneval.relabel`: stored positions labelled again by a stronger judge.

    python -m learner.nneval.relabel --data nneval-positions/gen-001 \\
        --out nneval-relabelled/gen-001 --teacher game/data/long-320min.safetensors --weight 0.7

A generation's positions carry the score of the depth-5 search that played them, and training
longer on those labels made the evaluation worse (docs/results.md, "Training choices"). This
writes a copy of a shard folder in which every position's score is blended with the MCTS
network's value of it, the teacher the first learned evaluation was fitted to:

    sigmoid(new / scale) = weight * teacher + (1 - weight) * sigmoid(score / scale)

with ``teacher`` the network's expected score for the side to move (win + draw / 2) and
``scale`` the evaluation's centi-men per logit (200). Positions the endgame database labelled
keep their exact value. The copy has the same shards, columns and row order, so
``python -m learner.nneval.refit --data`` reads it like any generation; its ``source.json`` is the
original's with the teacher, its sha256 and the weight added. Shards already written are kept,
so an interrupted run goes on where it stopped. The network sees each position without the
moves before it (its two history planes repeat the position, as for a position set up by hand).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import multiprocessing
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from checkerzero.network.inference import load_for_play
from checkerzero.store.positions import FLAG_EXACT, FLAG_WHITE_TO_MOVE, POSITION_DTYPE
from game import _core
from learner.nneval.shards import SOURCE_FILE, ShardError, iter_rows, shard_files, write_shard
from learner.nneval.train import teacher_values

logger = logging.getLogger(__name__)

BATCH = 512  # positions per forward pass
P_CLIP = 1e-4  # blended expected scores are kept in [P_CLIP, 1 - P_CLIP] before the logit
SCORE_MAX = 32_000  # int16 column


def blend_scores(
    score: np.ndarray, teacher: np.ndarray, exact: np.ndarray, weight: float, scale: int
) -> np.ndarray:
    """The new int16 scores: ``teacher`` (the mover's expected score, 0..1) blended with the
    search ``score`` (centi-men) in expected-score space; ``exact`` rows keep their score."""
    search = 1.0 / (1.0 + np.exp(-score.astype(np.float64) / scale))
    p = np.clip(weight * teacher.astype(np.float64) + (1.0 - weight) * search, P_CLIP, 1 - P_CLIP)
    new = np.clip(np.rint(scale * np.log(p / (1.0 - p))), -SCORE_MAX, SCORE_MAX)
    return np.where(exact, score, new).astype(np.int16)


def _packed(rows: np.ndarray, size: int) -> np.ndarray:
    out = []
    for b, w, k, f in zip(rows["black"], rows["white"], rows["kings"], rows["flags"], strict=True):
        game = _core.Game.from_bitboards(size, int(b), int(w), int(k), bool(f & FLAG_WHITE_TO_MOVE))
        out.append(game.pack_history())
    return np.stack(out).astype(np.uint32)


class Teacher:
    """The network's expected score (win + draw / 2, the mover's) of stored rows: the value
    ``learner.nneval.train.teacher_values`` gives, on a 0..1 scale."""

    def __init__(self, checkpoint: Path, size: int) -> None:
        load_for_play(checkpoint, size, device="cpu", threads=1)  # refused here, naming it
        self.checkpoint, self.size = checkpoint, size

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        values = teacher_values(
            self.checkpoint, _packed(rows, self.size), size=self.size, batch=BATCH
        )
        return (1.0 + values.astype(np.float64)) / 2.0


_TEACHER: Teacher | None = None


def _init(checkpoint: str, size: int) -> None:
    global _TEACHER
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)  # one core a worker
    _TEACHER = Teacher(Path(checkpoint), size)


def relabel_shard(src: Path, dest: Path, weight: float, scale: int) -> int:
    """Writes ``src``'s shard relabelled into folder ``dest``; returns its positions."""
    assert _TEACHER is not None
    parts = list(iter_rows([src]))
    rows = np.concatenate(parts) if parts else np.zeros(0, POSITION_DTYPE)
    out = rows.copy()
    if len(rows):
        exact = (rows["flags"] & FLAG_EXACT) != 0
        out["score"] = blend_scores(rows["score"], _TEACHER(rows), exact, weight, scale)
    first, end = (int(x) for x in src.stem.split("-")[1:3])
    store_id = (pq.read_schema(src).metadata or {}).get(b"store_id", b"").decode()
    write_shard(dest, out, first, end, store_id)
    return len(rows)


def _job(args: tuple[str, str, float, int]) -> tuple[str, int]:
    src, dest, weight, scale = args
    return src, relabel_shard(Path(src), Path(dest), weight, scale)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m learner.nneval.relabel", description=__doc__.split("\n")[0]
    )
    p.add_argument("--data", type=Path, required=True, help="a generation's shard folder")
    p.add_argument("--out", type=Path, required=True, help="folder for the relabelled copy")
    p.add_argument(
        "--teacher",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "game" / "data" / "long-320min.safetensors",
        help="MCTS network checkpoint that judges each position",
    )
    p.add_argument("--weight", type=float, default=0.7, help="the teacher's share (0..1]")
    p.add_argument("--scale", type=int, default=200, help="centi-men per logit of the scores")
    p.add_argument("--size", type=int, choices=(6, 8), default=8)
    p.add_argument("--workers", type=int, default=1, help="processes (one core each)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = _parser().parse_args(argv)
    if not 0.0 < args.weight <= 1.0:
        print(f"--weight must be in (0, 1], got {args.weight}", file=sys.stderr)
        return 2
    if args.workers < 1 or args.scale < 1:
        print("--workers and --scale must be >= 1", file=sys.stderr)
        return 2
    shards = shard_files(args.data)
    if not shards:
        print(f"{args.data}: no Parquet shards (part-*.parquet) there", file=sys.stderr)
        return 2
    if args.out.resolve() == args.data.resolve():
        print(f"--out must be another folder than --data ({args.data})", file=sys.stderr)
        return 2
    try:
        Teacher(args.teacher, args.size)  # a bad checkpoint is named before any work
    except (ValueError, OSError) as e:
        print(e if str(args.teacher) in str(e) else f"{args.teacher}: {e}", file=sys.stderr)
        return 2
    src_source = args.data / SOURCE_FILE
    source = json.loads(src_source.read_text()) if src_source.is_file() else {}
    relabel = {
        "teacher": args.teacher.name,
        "teacher_sha256": hashlib.sha256(args.teacher.read_bytes()).hexdigest(),
        "weight": args.weight,
        "scale": args.scale,
    }
    dest_source = args.out / SOURCE_FILE
    if dest_source.is_file():
        have = json.loads(dest_source.read_text()).get("relabel")
        if have != relabel:
            print(
                f"{dest_source}: relabelled with {have}, this run asks for {relabel}: "
                "give another --out",
                file=sys.stderr,
            )
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    dest_source.write_text(json.dumps(source | {"relabel": relabel}, indent=1, sort_keys=True))
    done = {p.name for p in shard_files(args.out)}
    jobs = [(str(s), str(args.out), args.weight, args.scale) for s in shards if s.name not in done]
    logger.info(
        "%d shards to relabel (%d already done) with %s, weight %.2f, %d workers",
        len(jobs),
        len(done),
        args.teacher.name,
        args.weight,
        args.workers,
    )
    start, total = time.perf_counter(), 0
    ctx = multiprocessing.get_context("spawn")
    try:
        with ctx.Pool(args.workers, _init, (str(args.teacher), args.size)) as pool:
            for i, (src, n) in enumerate(pool.imap_unordered(_job, jobs), 1):
                total += n
                rate = total / max(time.perf_counter() - start, 1e-9)
                left = (len(jobs) - i) * (time.perf_counter() - start) / i
                logger.info(
                    "[%d/%d] %s: %d positions (%.0f a second, about %.0f min left)",
                    i,
                    len(jobs),
                    Path(src).name,
                    n,
                    rate,
                    left / 60,
                )
    except ShardError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"relabelled {total} positions into {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
