"""`python -m learner.nneval.relabel`: stored positions labelled again by a stronger judge.

    python -m learner.nneval.relabel --data nneval-positions/gen-001 \\
        --out nneval-relabelled/gen-001-d7 --search-depth 7 --weight 1
    python -m learner.nneval.relabel --data nneval-positions/gen-001 \\
        --out nneval-relabelled/gen-001 --teacher game/data/long-320min.safetensors --weight 0.7

A generation's positions carry the score of the depth-5 search that played them, and training
longer on those labels made the evaluation worse (docs/results.md, "Training choices"). This
writes a copy of a shard folder in which every position's score is blended with a judge's:

    sigmoid(new / scale) = weight * judge + (1 - weight) * sigmoid(score / scale)

with ``judge`` the mover's expected score and ``scale`` the evaluation's centi-men per logit
(200). The judge is either a deeper alpha-beta search with a learned evaluation
(``--search-depth D``, ``--evaluation FILE``, the shipped file by default; its score in
centi-men, as sigmoid(score / scale)), or the MCTS network (``--teacher``, the teacher the first
learned evaluation was fitted to; its win + draw / 2). Positions the endgame database labelled
keep their exact value. The copy has the same shards, columns and row order, so
``python -m learner.nneval.refit --data`` reads it like any generation; its ``source.json`` is the
original's with the judge (its kind, file, sha256 and depth), the weight and the scale added.
Shards already written are kept, so an interrupted run goes on where it stopped. The network
sees each position without the moves before it (its two history planes repeat the position, as
for a position set up by hand).
The search keeps its transposition table from one position of a shard to the next (the rows of a
game follow each other), so a shard's labels depend on its rows alone, not on the workers.
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
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch

from checkerzero.network.inference import load_for_play
from checkerzero.store.positions import FLAG_EXACT, FLAG_WHITE_TO_MOVE, POSITION_DTYPE
from game import _core, nneval
from learner.nneval.shards import SOURCE_FILE, ShardError, iter_rows, shard_files, write_shard
from learner.nneval.train import teacher_values

logger = logging.getLogger(__name__)

BATCH = 512  # positions per forward pass
P_CLIP = 1e-4  # blended expected scores are kept in [P_CLIP, 1 - P_CLIP] before the logit
SCORE_MAX = 32_000  # int16 column
JUDGE_TT_MB = 16  # the search judge's transposition table


def expected_score(score: np.ndarray, scale: int) -> np.ndarray:
    """The mover's expected score (0..1) of scores in centi-men: sigmoid(score / scale)."""
    return 1.0 / (1.0 + np.exp(-score.astype(np.float64) / scale))


def blend_scores(
    score: np.ndarray, teacher: np.ndarray, exact: np.ndarray, weight: float, scale: int
) -> np.ndarray:
    """The new int16 scores: ``teacher`` (the mover's expected score, 0..1) blended with the
    search ``score`` (centi-men) in expected-score space; ``exact`` rows keep their score."""
    search = expected_score(score, scale)
    p = np.clip(weight * teacher.astype(np.float64) + (1.0 - weight) * search, P_CLIP, 1 - P_CLIP)
    new = np.clip(np.rint(scale * np.log(p / (1.0 - p))), -SCORE_MAX, SCORE_MAX)
    return np.where(exact, score, new).astype(np.int16)


def _games(rows: np.ndarray, size: int) -> list[_core.Game]:
    return [
        _core.Game.from_bitboards(size, int(b), int(w), int(k), bool(f & FLAG_WHITE_TO_MOVE))
        for b, w, k, f in zip(
            rows["black"], rows["white"], rows["kings"], rows["flags"], strict=True
        )
    ]


def _packed(rows: np.ndarray, size: int) -> np.ndarray:
    return np.stack([game.pack_history() for game in _games(rows, size)]).astype(np.uint32)


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


class SearchJudge:
    """The mover's expected score of stored rows by an alpha-beta search of ``depth`` plies with
    the learned evaluation ``evaluation``: sigmoid(score / scale), the score (centi-men) capped
    as self-play caps it. One table serves the rows in order."""

    def __init__(self, evaluation: Path, depth: int, size: int, scale: int) -> None:
        self.weights = nneval.load(evaluation).core()  # refused here, naming it
        if self.weights.size != size:
            raise ValueError(
                f"{evaluation}: an evaluation of the {self.weights.size}x board, not {size}x"
            )
        self.depth, self.size, self.scale = depth, size, scale
        self.searcher = _core.AlphaBetaSearcher(JUDGE_TT_MB)
        self.switches = _core.SearchSwitches(tt_keep=True)

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """The searches' scores (centi-men, the mover's), capped at the evaluation's limit."""
        out = np.zeros(len(rows), np.int64)
        for i, game in enumerate(_games(rows, self.size)):
            found = _core.alphabeta_search(
                game, self.depth, 0, None, JUDGE_TT_MB, None, self.weights, 0, 0,
                self.switches, self.searcher,
            )  # fmt: skip
            out[i] = max(-nneval.SCORE_LIMIT, min(nneval.SCORE_LIMIT, int(found.score)))
        return out

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        return expected_score(self.scores(rows), self.scale)


Judge = Teacher | SearchJudge


def make_judge(spec: dict[str, Any], size: int, scale: int) -> Judge:
    """The judge ``spec`` names (``_judge_record``'s first half: kind, path, depth)."""
    if spec["judge"] == "search":
        return SearchJudge(Path(spec["path"]), int(spec["depth"]), size, scale)
    return Teacher(Path(spec["path"]), size)


_JUDGE: Judge | None = None


def _init(spec: dict[str, Any], size: int, scale: int) -> None:
    global _JUDGE
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)  # one core a worker
    _JUDGE = make_judge(spec, size, scale)


def relabel_shard(src: Path, dest: Path, weight: float, scale: int) -> int:
    """Writes ``src``'s shard relabelled into folder ``dest``; returns its positions."""
    assert _JUDGE is not None
    parts = list(iter_rows([src]))
    rows = np.concatenate(parts) if parts else np.zeros(0, POSITION_DTYPE)
    out = rows.copy()
    if len(rows):
        exact = (rows["flags"] & FLAG_EXACT) != 0
        out["score"] = blend_scores(rows["score"], _JUDGE(rows), exact, weight, scale)
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
    judge = p.add_mutually_exclusive_group()
    judge.add_argument(
        "--teacher",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "game" / "data" / "long-320min.safetensors",
        help="MCTS network checkpoint that judges each position (the default judge)",
    )
    judge.add_argument(
        "--search-depth",
        type=int,
        help="judge by an alpha-beta search of this many plies with --evaluation instead",
    )
    p.add_argument(
        "--evaluation",
        type=Path,
        default=nneval.DEFAULT_PATH,
        help="the learned evaluation of the search judge (the shipped file)",
    )
    p.add_argument("--weight", type=float, default=0.7, help="the judge's share (0..1]")
    p.add_argument("--scale", type=int, default=200, help="centi-men per logit of the scores")
    p.add_argument("--size", type=int, choices=(6, 8), default=8)
    p.add_argument("--workers", type=int, default=1, help="processes (one core each)")
    return p


def _judge_record(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """What judges (for the workers) and how it is recorded in the copy's ``source.json``."""
    search = args.search_depth is not None
    path, key = (args.evaluation, "evaluation") if search else (args.teacher, "teacher")
    spec: dict[str, Any] = {"judge": "search" if search else "network", "path": str(path)}
    record = {"judge": spec["judge"], key: path.name}
    record[f"{key}_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    if search:
        spec["depth"] = record["depth"] = args.search_depth
    return spec, record | {"weight": args.weight, "scale": args.scale}


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = _parser().parse_args(argv)
    if not 0.0 < args.weight <= 1.0:
        print(f"--weight must be in (0, 1], got {args.weight}", file=sys.stderr)
        return 2
    if args.workers < 1 or args.scale < 1:
        print("--workers and --scale must be >= 1", file=sys.stderr)
        return 2
    if args.search_depth is not None and not 1 <= args.search_depth <= 32:
        print(f"--search-depth must be in 1..32, got {args.search_depth}", file=sys.stderr)
        return 2
    shards = shard_files(args.data)
    if not shards:
        print(f"{args.data}: no Parquet shards (part-*.parquet) there", file=sys.stderr)
        return 2
    if args.out.resolve() == args.data.resolve():
        print(f"--out must be another folder than --data ({args.data})", file=sys.stderr)
        return 2
    judge_path = args.teacher if args.search_depth is None else args.evaluation
    try:
        spec, relabel = _judge_record(args)
        make_judge(spec, args.size, args.scale)  # a bad file is named before any work
    except (ValueError, OSError) as e:
        print(e if str(judge_path) in str(e) else f"{judge_path}: {e}", file=sys.stderr)
        return 2
    src_source = args.data / SOURCE_FILE
    source = json.loads(src_source.read_text()) if src_source.is_file() else {}
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
        f"a depth-{args.search_depth} search of {judge_path.name}"
        if args.search_depth is not None
        else judge_path.name,
        args.weight,
        args.workers,
    )
    start, total = time.perf_counter(), 0
    ctx = multiprocessing.get_context("spawn")
    try:
        with ctx.Pool(args.workers, _init, (spec, args.size, args.scale)) as pool:
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
