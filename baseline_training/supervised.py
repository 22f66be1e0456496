"""Supervised learning from expert games: the project's network learns the OCA archive's moves.

    python -m baseline_training.supervised --out runs/sl-1           # 2 epochs, default 4x32 net
    python -m baseline_training.supervised --out runs/sl-1 --time-limit-min 60
    python -m baseline_training.supervised --out runs/sl-1 epochs=3  # resume, and train longer

Targets: the policy target is the expert's action at each decision (a multi-jump is several
decisions of the same player, as in self-play), the value target the game's result from the
mover's view. The archive is deduplicated and split by game (``baseline_training.expert_games``).

Agreement is counted by whole move, what a player sees: at each position where a move starts
(until the rules end the game: players sometimes play on past a repetition), the network's move
is the legal move with the highest probability (the product of its actions' probabilities,
``evaluation.players.policy.move_log_probs``), and it agrees when that is the expert's move;
top-5 when the expert's move is among the five most probable. Both are also given for the
positions with a choice (two or more legal moves), since a forced move always agrees.

The run directory holds ``config.yaml``, ``split.json``, the replayed decisions of each split
(``data/*.npz``), resumable checkpoints in the learner's format (``checkpoints/``, so
``python -m evaluation.match <run>/checkpoints/latest.safetensors:sims=0`` plays the policy and
``python -m learner learner.init_weights=...`` starts self-play from it), ``metrics.csv`` and,
at the end, ``results.json`` with the test figures and the value head's calibration.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from baseline_training.config import load_config, save_config
from baseline_training.expert_games import (
    SPLITS,
    Decisions,
    load_games,
    replay_decisions,
    split_games,
    write_split_summary,
)
from checkerzero.network.inference import NetworkInference
from checkerzero.network.model import num_actions
from evaluation.players.policy import move_log_probs
from evaluation.value_head_wdl import calibrate, format_table, sample_positions
from game import encoding
from game.pdn import PdnGame
from learner.losses import NUM_WDL, TrainBatch
from learner.trainer import Trainer

logger = logging.getLogger(__name__)

TOP_K = 5  # the published figure's wider agreement (top-5)
EVAL_BATCH_GAMES = 64  # games scored per inference batch (a few thousand decisions)
CHECKPOINT_DIR = "checkpoints"
METRICS_FILE = "metrics.csv"
RESULTS_FILE = "results.json"
_WDL_OF_CODE = np.eye(NUM_WDL, dtype=np.float32)


@dataclass(frozen=True)
class Agreement:
    """Whole-move agreement with the expert over some positions."""

    positions: int  # positions where a move starts
    top1: float
    top5: float
    choice_positions: int  # of those, the ones with two or more legal moves
    choice_top1: float
    choice_top5: float


def batch_of(data: Decisions, rows: np.ndarray, size: int = 8) -> TrainBatch:
    """Training batch of decisions ``rows``: one-hot expert action, one-hot game result."""
    packed = data.packed[rows]
    target = np.zeros((len(rows), num_actions(size)), np.float32)
    target[np.arange(len(rows)), data.action[rows]] = 1.0
    return TrainBatch(
        planes=encoding.encode(packed, size),
        mask=encoding.legal_masks(packed, size),
        target_pi=target,
        target_wdl=_WDL_OF_CODE[data.result[rows]],
    )


def agreement(inference, games: Sequence[PdnGame], max_positions: int = 0) -> Agreement:
    """Whole-move top-1/top-5 agreement of the network's policy with the games' moves."""
    ranks: list[int] = []
    choices: list[bool] = []
    pending: list[tuple[object, str]] = []  # (core game at a move start, expert move text)

    def flush() -> None:
        scored = move_log_probs(inference, [g for g, _ in pending])
        for (_, expert), (moves, scores) in zip(pending, scored, strict=True):
            texts = [str(m) for m in moves]
            mine = scores[texts.index(expert)]
            ranks.append(int((scores > mine).sum()))  # ties count in the expert's favour
            choices.append(len(moves) > 1)
        pending.clear()

    for game in games:
        pos = game.start()
        for text in game.moves:
            if pos.is_over():  # experts play on past a draw the rules would declare
                break
            move = pos.parse_move(text)
            pending.append((pos.game.copy(), str(move)))
            pos.play(move)
            if max_positions and len(ranks) + len(pending) >= max_positions:
                break
        if len(pending) >= EVAL_BATCH_GAMES * 40:
            flush()
        if max_positions and len(ranks) + len(pending) >= max_positions:
            break
    if pending:
        flush()
    r = np.array(ranks)
    c = np.array(choices, bool)

    def share(mask: np.ndarray, k: int) -> float:
        return float((r[mask] < k).mean()) if mask.any() else math.nan

    everything = np.ones(len(r), bool)
    return Agreement(
        positions=len(r),
        top1=share(everything, 1),
        top5=share(everything, TOP_K),
        choice_positions=int(c.sum()),
        choice_top1=share(c, 1),
        choice_top5=share(c, TOP_K),
    )


def snapshot_inference(model: torch.nn.Module) -> NetworkInference:
    """An inference over a copy of ``model`` (the inference changes its layout and mode)."""
    return NetworkInference(copy.deepcopy(model).cpu(), device="cpu", num_threads=None)


def prepare(cfg, run_dir: Path) -> tuple[dict[str, Decisions], dict[str, list[PdnGame]]]:
    """The split's games and their decisions; decisions are cached under ``run_dir/data``."""
    t0 = time.monotonic()
    games = load_games(cfg.archive)
    split = split_games(
        games,
        val_fraction=float(cfg.val_fraction),
        test_fraction=float(cfg.test_fraction),
        seed=int(cfg.split_seed),
    )
    by_split = {"train": split.train, "val": split.val, "test": split.test}
    write_split_summary(run_dir / "split.json", split, int(cfg.split_seed))
    data = {}
    for name in SPLITS:
        path = run_dir / "data" / f"{name}.npz"
        if path.is_file():
            data[name] = Decisions.load(path)
        else:
            data[name] = replay_decisions(by_split[name])
            data[name].save(path)
    logger.info(
        "games: %s; decisions: %s (%.0f s)",
        split.sizes(),
        {k: len(v) for k, v in data.items()},
        time.monotonic() - t0,
    )
    return data, by_split


def _resumed_trainer(cfg, ckpt_dir: Path, steps_per_epoch: int) -> tuple[Trainer, int]:
    """The trainer, resumed from ``ckpt_dir`` when it holds a checkpoint, and the steps planned
    (``cfg.epochs`` of ``steps_per_epoch``), its learning-rate drops placed on that plan."""
    planned = int(float(cfg.epochs) * steps_per_epoch)
    milestones = [int(f * planned) for f in cfg.lr_drops]
    cfg.trainer.scheduler.milestones = milestones
    trainer = Trainer(cfg.trainer, cfg.model, 8)
    if trainer.restore(ckpt_dir):
        # The plan may have changed (more or fewer epochs): the drops follow the new one.
        trainer.scheduler.milestones = Counter(milestones)
        logger.info("resumed at step %d of %d", trainer.counters.step, planned)
    return trainer, planned


def train(cfg, run_dir: Path) -> dict:
    """Trains (or resumes) the run in ``run_dir``; returns the test figures when it finishes."""
    save_config(cfg, run_dir)
    data, games = prepare(cfg, run_dir)
    train_data = data["train"]
    batch_size = int(cfg.batch_size)
    steps_per_epoch = len(train_data) // batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"{len(train_data)} training decisions are fewer than one batch")
    ckpt_dir = run_dir / CHECKPOINT_DIR
    trainer, planned = _resumed_trainer(cfg, ckpt_dir, steps_per_epoch)
    metrics_path = run_dir / METRICS_FILE
    new_file = not metrics_path.is_file()
    t_start = time.monotonic()
    limit_s = float(cfg.time_limit_min) * 60.0
    last_t, last_step = t_start, trainer.counters.step
    with metrics_path.open("a", newline="") as f:
        writer = csv.writer(f)
        if new_file:
            writer.writerow(
                ["step", "epoch", "wall_s", "loss_policy", "loss_value", "val_top1", "val_top5"]
            )
        losses = None
        while trainer.counters.step < planned:
            step = trainer.counters.step
            epoch, i = divmod(step, steps_per_epoch)
            order = np.random.default_rng(int(cfg.seed) + epoch).permutation(len(train_data))
            rows = order[i * batch_size : (i + 1) * batch_size]
            losses = trainer.step(batch_of(train_data, rows))
            step += 1
            if step % int(cfg.log_every_steps) == 0:
                now = time.monotonic()
                rate = (step - last_step) * batch_size / max(now - last_t, 1e-9)
                last_t, last_step = now, step
                logger.info(
                    "step %d/%d epoch %.2f | %.0f positions/s | loss policy %.3f value %.3f"
                    " | lr %.4f",
                    step,
                    planned,
                    step / steps_per_epoch,
                    rate,
                    losses.policy,
                    losses.value,
                    trainer.lr,
                )
            out_of_time = limit_s > 0 and time.monotonic() - t_start >= limit_s
            if step % int(cfg.eval_every_steps) == 0 or step == planned or out_of_time:
                val = agreement(
                    snapshot_inference(trainer.model), games["val"], int(cfg.val_positions)
                )
                logger.info(
                    "step %d | val top-1 %.3f top-5 %.3f (%d positions)",
                    step,
                    val.top1,
                    val.top5,
                    val.positions,
                )
                writer.writerow(
                    [
                        step,
                        f"{step / steps_per_epoch:.3f}",
                        f"{time.monotonic() - t_start:.1f}",
                        f"{losses.policy:.4f}",
                        f"{losses.value:.4f}",
                        f"{val.top1:.4f}",
                        f"{val.top5:.4f}",
                    ]
                )
                f.flush()
                trainer.save(ckpt_dir, keep=int(cfg.keep_checkpoints))
            if out_of_time:
                logger.info("time limit reached at step %d; run again to resume", step)
                break
    return finish(cfg, run_dir, trainer.model, games["test"], trainer.counters.step)


def finish(cfg, run_dir: Path, model: torch.nn.Module, test: Sequence[PdnGame], step: int) -> dict:
    """Test agreement and the value head's calibration; written to ``results.json``."""
    inference = snapshot_inference(model)
    test_agreement = agreement(inference, test)
    rng = np.random.default_rng(int(cfg.split_seed))
    packed, outcome = sample_positions(test, int(cfg.calibration_per_game), rng)
    rows = calibrate(inference, packed, outcome)
    results = {
        "step": step,
        "test_games": len(test),
        "agreement": asdict(test_agreement),
        "calibration": [asdict(r) for r in rows],
    }
    (run_dir / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n")
    a = test_agreement
    logger.info(
        "test (%d games, %d positions): top-1 %.3f, top-5 %.3f; with a choice (%d): "
        "top-1 %.3f, top-5 %.3f",
        len(test),
        a.positions,
        a.top1,
        a.top5,
        a.choice_positions,
        a.choice_top1,
        a.choice_top5,
    )
    logger.info("value head on test positions:\n%s", format_table(rows))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m baseline_training.supervised",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="run directory (resumed if it exists)"
    )
    parser.add_argument(
        "--epochs", type=float, help="passes over the training decisions (fractions too)"
    )
    parser.add_argument("--time-limit-min", type=float, help="stop after this many minutes")
    parser.add_argument("overrides", nargs="*", help="key=value (conf/baselines/supervised.yaml)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    overrides = list(args.overrides)
    if args.epochs is not None:
        overrides.append(f"epochs={args.epochs}")
    if args.time_limit_min is not None:
        overrides.append(f"time_limit_min={args.time_limit_min}")
    try:
        cfg = load_config("supervised", overrides, args.out)
        train(cfg, args.out)
    except ValueError as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
