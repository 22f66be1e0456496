"""`python -m learner.nneval.train`: train the learned alpha-beta evaluation from PDN games.

    python -m learner.nneval.train --out nneval-human.safetensors   # how nneval-v1 was made
    python -m learner.nneval.train --run runs/2026-11-20_10-00-00 --no-archive --out my.nn

Positions come from PDN games: a run's self-play games (``games/selfplay.pdn`` under each
``--run`` folder) and the OCA expert archive that ships in game/data (``--no-archive`` leaves it
out). Only quiet positions are kept (the side to move has no capture), since the search scores
only those: quiescence resolves captures first. Each position's target, from the side to move's
view in [-1, 1], is the game's result blended with a network's value where a teacher checkpoint
is given::

    target = (1 - teacher_weight) * result + teacher_weight * (p_win - p_loss)

The float model (game/nneval.py's architecture: a piece-square layer shared by both sides' views,
two clipped-ReLU layers, one output) predicts the expected score as sigmoid(logit) and learns
with a binary cross-entropy against (target + 1) / 2; its weights are kept inside the ranges the
integer format can hold, then quantised and written. The defaults take a few minutes on two
cores.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from checkerzero.network.inference import load_for_play
from checkerzero.run_files import SELFPLAY_PDN
from game import _core, encoding, nneval
from game.archive import read_archive
from game.pdn import iter_pdn
from game.position import Position
from learner.nneval.model import NNEvalModel

logger = logging.getLogger(__name__)

RUN_GAMES = SELFPLAY_PDN  # a run's self-play games, under its folder (learner.run)
DEFAULT_TEACHER = Path(__file__).resolve().parents[2] / "game" / "data" / "long-320min.safetensors"
RESULT_FOR_BLACK = {"1-0": 1.0, "0-1": -1.0, "1/2-1/2": 0.0}  # decided games only


@dataclass(frozen=True)
class Positions:
    """Quiet positions with their game's result from the mover's view."""

    black: np.ndarray  # uint32 (n,)
    white: np.ndarray  # uint32 (n,)
    kings: np.ndarray  # uint32 (n,)
    white_to_move: np.ndarray  # bool (n,)
    packed: np.ndarray  # uint32 (n, HISTORY, 4): the network's input
    result: np.ndarray  # float32 (n,): +1 the mover won, 0 draw, -1 lost
    game: np.ndarray  # int64 (n,): which game each position comes from (held out by game)

    def __len__(self) -> int:
        return len(self.black)


def collect_positions(
    texts: Iterable[str], *, size: int = 8, max_games: int = 0, skip_plies: int = 0
) -> Positions:
    """The quiet positions of every finished game in the PDN texts (at most ``max_games`` games
    in all when > 0), after the first ``skip_plies`` plies of each, up to where the rules end the
    game (a game played on past a repetition or the 40-move rule ends there); a game with an
    illegal move is skipped with a warning."""
    rows: list[tuple[int, int, int, bool, float, int]] = []
    packed: list[np.ndarray] = []
    games = 0
    for text in texts:
        for game in iter_pdn(text, size=size, replay=False):
            if max_games and games >= max_games:
                break
            if game.result not in RESULT_FOR_BLACK:
                continue
            black_result = RESULT_FOR_BLACK[game.result]
            try:
                pos = game.start()
                for plies, move in enumerate(game.moves):
                    if pos.is_over():  # played on past a draw by our rules (repetition, 40 moves)
                        break
                    _keep(pos, plies, skip_plies, black_result, games, rows, packed)
                    pos.play(move)
            except ValueError as err:
                logger.warning("skipping %s: %s", game.describe(), err)
                continue
            games += 1
    if not rows:
        raise ValueError("no finished game with a quiet position in the given PDN")
    logger.info("%d quiet positions from %d games", len(rows), games)
    b, w, k, side, result, game = (np.array(col) for col in zip(*rows, strict=True))
    return Positions(
        b.astype(np.uint32),
        w.astype(np.uint32),
        k.astype(np.uint32),
        side.astype(bool),
        np.stack(packed).astype(np.uint32),
        result.astype(np.float32),
        game.astype(np.int64),
    )


def _keep(
    pos: Position,
    plies: int,
    skip_plies: int,
    black_result: float,
    game_index: int,
    rows: list[tuple[int, int, int, bool, float, int]],
    packed: list[np.ndarray],
) -> None:
    g = pos.game
    if plies < skip_plies:
        return
    moves = g.legal_moves()
    if not moves or moves[0].is_capture:
        return
    mover_result = -black_result if g.white_to_move else black_result
    rows.append((g.black, g.white, g.kings, g.white_to_move, mover_result, game_index))
    packed.append(g.pack_history())


def teacher_values(
    checkpoint: Path | str, packed: np.ndarray, *, size: int = 8, batch: int = 256
) -> np.ndarray:
    """The network's value (p_win - p_loss, mover's view) of packed positions, float32 (n,)."""
    inference, _ = load_for_play(checkpoint, size, device="cpu", dtype=torch.float32)
    out = np.empty(len(packed), np.float32)
    start = time.perf_counter()
    for lo in range(0, len(packed), batch):
        chunk = packed[lo : lo + batch]
        planes = encoding.encode(chunk, size)
        masks = encoding.legal_masks(chunk, size)
        _, wdl = inference.evaluate(planes, masks)
        out[lo : lo + batch] = wdl[:, 0] - wdl[:, 2]
    elapsed = time.perf_counter() - start
    logger.info("teacher %s: %d positions in %.1f s", checkpoint, len(packed), elapsed)
    return out


def blended_targets(
    positions: Positions,
    teacher: Path | str | None,
    weight: float,
    *,
    most: int = 0,
    size: int = 8,
    seed: int = 0,
) -> tuple[np.ndarray, int]:
    """Each position's target and how many got the teacher's value: the result, blended with the
    network's value for ``most`` positions drawn at random (every one when 0)."""
    target = positions.result.astype(np.float32).copy()
    if not teacher or weight <= 0:
        return target, 0
    n = len(positions)
    if most and most < n:
        idx = np.sort(np.random.default_rng(seed).choice(n, most, replace=False))
    else:
        idx = np.arange(n)
    values = teacher_values(teacher, positions.packed[idx], size=size)
    target[idx] = (1 - weight) * target[idx] + weight * values
    return target, len(idx)


def views(positions: Positions, idx: np.ndarray, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mover's view, other view) float features of the positions ``idx``."""
    planes = nneval.feature_planes(
        positions.black[idx], positions.white[idx], positions.kings[idx], size
    )
    us = positions.white_to_move[idx].astype(np.intp)
    rows = np.arange(len(idx))
    mine = torch.from_numpy(planes[rows, us].astype(np.float32))
    theirs = torch.from_numpy(planes[rows, 1 - us].astype(np.float32))
    return mine, theirs


@dataclass(frozen=True)
class TrainSettings:
    hidden: int = 64  # accumulator width per side
    dense1: int = 16  # first dense layer
    dense2: int = 16  # second dense layer
    epochs: int = 6  # passes over the training positions
    batch: int = 1024  # positions per step
    lr: float = 2e-3  # Adam learning rate (decayed to a tenth over the run)
    validation: float = 0.05  # fraction of games held out, with all their positions
    seed: int = 0
    output_scale: int = 200  # centi-men per unit of logit: +200 predicts a 73% expected score


SETTING_HELP = {
    "hidden": "accumulator width per side (the core allows up to 256)",
    "dense1": "first dense layer's width (up to 64)",
    "dense2": "second dense layer's width (up to 64)",
    "epochs": "passes over the training positions",
    "batch": "positions per optimiser step",
    "lr": "Adam learning rate, decayed to a tenth over the run",
    "validation": "fraction of the games held out (all their positions) to measure the loss",
    "seed": "seed of the split, the shuffles and the initial weights",
    "output_scale": "centi-men per unit of logit in the file (+200: a 73%% expected score)",
}


def held_out_games(game: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of the positions held out: those of a seeded ``fraction`` of the games (at
    least one game, and at least one kept when there are two). Positions of one game are close
    to each other, so a split by position would measure the loss on near-copies of training
    positions and overstate how well the evaluation generalises."""
    ids = np.unique(game)
    n = max(1, round(len(ids) * fraction))
    if len(ids) > 1:
        n = min(n, len(ids) - 1)
    chosen = np.random.default_rng(seed).choice(ids, n, replace=False)
    return np.isin(game, chosen)


def train(
    positions: Positions, target: np.ndarray, settings: TrainSettings, size: int = 8
) -> tuple[NNEvalModel, dict[str, float]]:
    """Fits the float model; returns it with the held-out losses (float and per-epoch)."""
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    held = held_out_games(positions.game, settings.validation, settings.seed)
    val, tr = np.flatnonzero(held), np.flatnonzero(~held)
    n_val = len(val)
    prob = torch.from_numpy(((target + 1.0) / 2.0).astype(np.float32))
    model = NNEvalModel(size, settings.hidden, settings.dense1, settings.dense2)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    steps = settings.epochs * max(1, len(tr) // settings.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.1 ** min(1.0, s / max(1, steps)))
    loss_fn = nn.BCEWithLogitsLoss()
    val_us, val_them = views(positions, val, size)
    report: dict[str, float] = {}
    for epoch in range(settings.epochs):
        model.train()
        rng.shuffle(tr)
        total, count = 0.0, 0
        for lo in range(0, len(tr) - settings.batch + 1, settings.batch):
            idx = tr[lo : lo + settings.batch]
            us, them = views(positions, idx, size)
            loss = loss_fn(model(us, them), prob[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            model.clip_to_format()
            total += float(loss.detach()) * len(idx)
            count += len(idx)
        model.eval()
        with torch.no_grad():
            val_loss = float(loss_fn(model(val_us, val_them), prob[val]))
        report[f"epoch{epoch}/train_loss"] = total / max(count, 1)
        report[f"epoch{epoch}/val_loss"] = val_loss
        logger.info(
            "epoch %d: train loss %.4f, held-out loss %.4f", epoch, total / max(count, 1), val_loss
        )
    report["val_loss"] = report[f"epoch{settings.epochs - 1}/val_loss"]
    # The held-out loss a constant prediction would get: what the model is measured against.
    p = float(prob[val].mean())
    q = prob[val].double()
    report["val_loss_constant"] = float(-(q * np.log(p) + (1 - q) * np.log(1 - p)).mean())
    report["validation_indices"] = float(n_val)
    return model, report


def quantised_agreement(
    net: nneval.NNEvalNet, model: NNEvalModel, positions: Positions, n: int = 2000
) -> float:
    """Mean |core score - float score| in centi-men over up to n positions."""
    core = net.core()
    idx = np.arange(min(n, len(positions)))
    us, them = views(positions, idx, net.size)
    with torch.no_grad():
        floats = model(us, them).numpy() * net.output_scale
    diffs = []
    for i in idx:
        game = _core.Game.from_bitboards(
            net.size,
            int(positions.black[i]),
            int(positions.white[i]),
            int(positions.kings[i]),
            bool(positions.white_to_move[i]),
        )
        want = float(np.clip(floats[i], -nneval.SCORE_LIMIT, nneval.SCORE_LIMIT))
        diffs.append(abs(_core.nneval_evaluate(core, game) - want))
    return float(np.mean(diffs))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m learner.nneval.train", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("nneval-trained.safetensors"),
        help="weights file to write (the shipped ones in game/data are left alone)",
    )
    p.add_argument(
        "--run", type=Path, action="append", default=[], help=f"run folder ({RUN_GAMES} is read)"
    )
    p.add_argument("--pdn", type=Path, action="append", default=[], help="another PDN file to read")
    p.add_argument("--no-archive", action="store_true", help="leave out the shipped OCA archive")
    p.add_argument("--max-games", type=int, default=4000, help="games read in all (0: every one)")
    p.add_argument(
        "--skip-plies", type=int, default=6, help="plies of each game skipped (the ballot)"
    )
    p.add_argument(
        "--teacher",
        default=str(DEFAULT_TEACHER),
        help="checkpoint labelling positions ('' for none)",
    )
    p.add_argument(
        "--teacher-weight",
        type=float,
        default=0.7,
        help="share of the teacher's value in the target (docs/results.md compares choices)",
    )
    p.add_argument("--size", type=int, choices=(6, 8), default=8)
    p.add_argument(
        "--teacher-positions",
        type=int,
        default=0,
        help="positions the teacher labels, drawn at random (0: all; about 1,000/s on one core)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    for name, default in vars(TrainSettings()).items():
        flag = f"--{name.replace('_', '-')}"
        p.add_argument(flag, type=type(default), default=default, help=SETTING_HELP[name])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = _parser().parse_args(argv)
    if not 0.0 <= args.teacher_weight <= 1.0:
        print(f"--teacher-weight must be in [0, 1], got {args.teacher_weight}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    texts: list[str] = []
    for run in args.run:
        path = run / RUN_GAMES
        if not path.is_file():
            print(f"no self-play games at {path}", file=sys.stderr)
            return 2
        texts.append(path.read_text())
    texts += [p.read_text() for p in args.pdn]
    if not args.no_archive:
        texts.append(read_archive())
    if not texts:
        print("nothing to train on: give --run or --pdn, or keep the archive", file=sys.stderr)
        return 2
    start = time.perf_counter()
    positions = collect_positions(
        texts, size=args.size, max_games=args.max_games, skip_plies=args.skip_plies
    )
    target, labelled = blended_targets(
        positions,
        args.teacher,
        args.teacher_weight,
        most=args.teacher_positions,
        size=args.size,
        seed=args.seed,
    )
    settings = TrainSettings(**{k: getattr(args, k) for k in vars(TrainSettings())})
    model, report = train(positions, target, settings, args.size)
    meta = {
        "trained_on": ", ".join(
            [str(r) for r in args.run]
            + [str(p) for p in args.pdn]
            + ([] if args.no_archive else ["OCA archive"])
        ),
        "positions": str(len(positions)),
        "teacher": f"{Path(args.teacher).name} x {args.teacher_weight} on {labelled} positions"
        if labelled
        else "none",
        "held_out_loss": f"{report['val_loss']:.4f}",
    }
    net = nneval.quantise(
        model.float_weights(), size=args.size, output_scale=settings.output_scale, metadata=meta
    )
    error = quantised_agreement(net, model, positions)
    nneval.save(net, args.out)
    print(
        f"wrote {args.out}: {len(positions)} positions, held-out loss {report['val_loss']:.4f} "
        f"(constant {report['val_loss_constant']:.4f}), quantised vs float {error:.1f} centi-men "
        f"on average, {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
