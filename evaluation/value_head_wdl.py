"""Does the value head tell won, drawn and lost positions apart? WDL on expert games.

Draws dominate checkers between good players, and a value head trained mostly on draws can
collapse to "always a draw". This measures it on positions the network never trained on: the
OCA archive of expert games (self-play never reads it). Positions are sampled from each game
(after the opening, before the last moves), encoded with their real history, evaluated by the
network without search, and grouped by how the game ended for the side to move. A healthy value
head predicts a higher win share in positions from won games than from drawn ones, and a higher
loss share in lost ones. The command line is ``python -m evaluation.calibration``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from game import encoding
from game.pdn import PdnGame
from game.position import Position

SKIP_OPENING_PLIES = 6  # the first plies are book moves: every result shares them
SKIP_FINAL_PLIES = 4  # the last plies often show the result outright (a resignation position)
OUTCOMES = ("won", "drawn", "lost")  # from the view of the side to move


@dataclass(frozen=True)
class Calibration:
    outcome: str
    positions: int
    mean_wdl: tuple[float, float, float]  # mean predicted (win, draw, loss), side to move's view


def sample_positions(
    games: Iterable[PdnGame], per_game: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Packed histories (n, HISTORY, 4) and outcome indices (0 won, 1 drawn, 2 lost)."""
    packed, outcome = [], []
    for game in games:
        if game.result not in ("1-0", "0-1", "1/2-1/2"):
            continue
        plies = len(game.moves)
        lo, hi = SKIP_OPENING_PLIES, plies - SKIP_FINAL_PLIES
        if hi <= lo:
            continue
        chosen = set(rng.choice(np.arange(lo, hi), size=min(per_game, hi - lo), replace=False))
        pos = Position()
        for ply, move in enumerate(game.moves):
            if ply in chosen:
                packed.append(pos.game.pack_history())
                if game.result == "1/2-1/2":
                    outcome.append(1)
                else:
                    black_won = game.result == "1-0"
                    outcome.append(0 if black_won == (pos.turn == "B") else 2)
            pos.play(move)
    return np.array(packed, np.uint32), np.array(outcome, np.int64)


def calibrate(
    inference, packed: np.ndarray, outcome: np.ndarray, size: int = 8, batch: int = 512
) -> list[Calibration]:
    wdl = []
    for start in range(0, len(packed), batch):
        chunk = packed[start : start + batch]
        planes = encoding.encode(chunk, size)
        masks = encoding.legal_masks(chunk, size)
        wdl.append(inference.evaluate(planes, masks)[1])
    values = np.concatenate(wdl) if wdl else np.zeros((0, 3), np.float32)
    out = []
    for k, name in enumerate(OUTCOMES):
        rows = values[outcome == k]
        mean = tuple(float(x) for x in rows.mean(0)) if len(rows) else (float("nan"),) * 3
        out.append(Calibration(name, len(rows), mean))
    return out


def format_table(rows: list[Calibration]) -> str:
    lines = [
        "| game result (side to move) | positions | predicted win | draw | loss |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        win, draw, loss = r.mean_wdl
        lines.append(f"| {r.outcome} | {r.positions} | {win:.3f} | {draw:.3f} | {loss:.3f} |")
    return "\n".join(lines)
