"""The moves-left head's targets and loss (lc0's "MLH"): plies left in the game from a position.

Target: the game's length in plies minus the position's ply. A ply is one side's whole move,
so the decisions of one multi-jump (each jump is a decision of its own in a record) are one
ply: the target counts down by one per move, not per jump, and a position in the middle of a
capture still has the capture's move ahead of it. The last move of a game is 1 ply left.

Games that did not end by the rules are *censored*: a resignation, the ply cap and an
endgame-database adjudication stop a game that would have gone on, so the plies left in their
positions are only a lower bound on the true number. Dropping those games would drop most of
the decisive ones (resignation is on in most self-play games) and bias the head toward draws;
taking their length as exact would teach the head that decided games end early. So their
positions count as lower bounds (right-censored, as in survival analysis): the loss is zero
when the prediction is at or above the bound and the usual loss below it. The position at which
a player resigned has 0 plies left by this count: the game stopped there, and any prediction
is at or above that bound.

Loss: Huber on plies / ``MOVES_LEFT_SCALE`` with a threshold of ``HUBER_PLIES`` (lc0's: 20 and
10 plies), squared for errors under 10 plies and linear beyond, so the long games that the
ply cap and blunders make do not dominate the gradient. The mean absolute error is reported in
plies, over the positions whose target is exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from checkerzero.network.model import MOVES_LEFT_SCALE
from game.encoding import META_WHITE_TO_MOVE
from game.records import RESIGNED, GameRecord, Termination

# Terminations that cut a game short: its plies left are lower bounds (module docstring).
CENSORED = frozenset({Termination.PLY_CAP, Termination.RESIGNATION, Termination.DATABASE})
# Huber threshold in plies (lc0's 10): errors under it are squared, larger ones count linearly.
HUBER_PLIES = 10.0


def plies_left(record: GameRecord) -> tuple[np.ndarray, bool]:
    """(plies left at each decision, int32 (T,); whether they are exact, False when censored)."""
    exact = record.termination not in CENSORED
    if record.num_decisions == 0:
        return np.zeros(0, np.int32), exact
    mover = (record.positions[:, 3] & META_WHITE_TO_MOVE).astype(bool)
    ply = np.concatenate([[0], np.cumsum(mover[1:] != mover[:-1])])  # the side changed: a ply
    resigned = int(record.played[-1]) == RESIGNED  # the last "decision" made no move
    total = int(ply[-1]) + (0 if resigned else 1)
    return (total - ply).astype(np.int32), exact


def moves_left_targets(games: Sequence[GameRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The targets of every decision of ``games``, concatenated in order: plies left int32
    (sum T,) and whether each is exact bool (sum T,)."""
    parts = [plies_left(g) for g in games]
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, bool)
    left = np.concatenate([p for p, _ in parts])
    exact = np.concatenate([np.full(len(p), e) for p, e in parts])
    return left.astype(np.int32), exact.astype(bool)


def moves_left_loss(
    predicted: torch.Tensor, target: torch.Tensor, exact: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean Huber loss in units of MOVES_LEFT_SCALE plies, mean absolute error in plies over
    the exact targets, NaN when there are none); predictions and targets in plies, (N,)."""
    error = (predicted.float() - target.float()) / MOVES_LEFT_SCALE
    # A censored target is a lower bound: only a prediction below it is an error.
    error = torch.where(exact, error, error.clamp(max=0.0))
    loss = torch.nn.functional.huber_loss(
        error, torch.zeros_like(error), delta=HUBER_PLIES / MOVES_LEFT_SCALE
    )
    abs_plies = (predicted.float() - target.float()).abs()
    mae = (abs_plies * exact).sum() / exact.sum()  # 0 / 0 = NaN: no exact target in the batch
    return loss, mae
