"""Network input: positions as stacked planes, from the mover's point of view.

The encoder itself is C++ (`game._core.encode_packed`), batched over N positions. A position is
packed as four uint32 words (black, white, kings bitboards, and a meta word: bit 0 White to move,
bits 1-6 the mid-jump square + 1, bits 8-15 the no-progress ply count, bit 16 "slot present"),
and each sample carries HISTORY = 3 of them, newest first. Planes, each S x S (S = 8 or 6), with
White's view rotated by 180 degrees so that the mover always advances towards higher rows:

====  ==========================================================
0-3   the current position: own men, own kings, opponent men, opponent kings
4-7   the same for the position one action earlier (zeros before the game's first position)
8-11  the same for two actions earlier
12    no-progress count / 80 (the forty-move rule's clock), constant over the plane
13    the piece in the middle of a multi-jump (one-hot), else zeros
14    ones (lets convolutions tell the board's edge from empty squares under zero padding)
====  ==========================================================

Actions are ``square * 4 + direction`` in the same rotated frame (directions 0 forward-left,
1 forward-right, 2 backward-left, 3 backward-right).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from game import _core
from game.notation import num_squares

NUM_PLANES = _core.NUM_PLANES
HISTORY = _core.HISTORY
PACKED_WORDS = _core.PACKED_WORDS
NUM_DIRECTIONS = 4  # diagonal directions per square: forward-left/right, backward-left/right
NUM_WDL = 3  # value outputs: win, draw, loss (mover's view)
META_WHITE_TO_MOVE = 1  # meta word of a packed state (index 3): bit 0 set when White is to move
META_PRESENT = 1 << 16  # meta bit 16: the slot holds a position (not before a game starts)


def num_actions(size: int) -> int:
    """Actions per position: playable squares x 4 directions (128 on 8x8, 72 on 6x6)."""
    return num_squares(size) * NUM_DIRECTIONS


def pack(games: Sequence[_core.Game]) -> np.ndarray:
    """Packed histories of several games, shape (n, HISTORY, PACKED_WORDS), uint32."""
    if not games:
        return np.zeros((0, HISTORY, PACKED_WORDS), np.uint32)
    return np.stack([g.pack_history() for g in games])


def encode(packed: np.ndarray, size: int) -> np.ndarray:
    """Planes (n, NUM_PLANES, size, size) float32 from packed histories."""
    return _core.encode_packed(size, np.ascontiguousarray(packed, dtype=np.uint32))


def legal_masks(packed: np.ndarray, size: int) -> np.ndarray:
    """Legal-action masks (n, 2*size*size) bool of each sample's newest position."""
    return _core.legal_mask_packed(size, np.ascontiguousarray(packed, dtype=np.uint32))


def encode_games(games: Sequence[_core.Game]) -> tuple[np.ndarray, np.ndarray]:
    """Planes and legal masks for the current positions of several games of one board size."""
    packed = pack(games)
    size = games[0].size if games else 8
    return encode(packed, size), legal_masks(packed, size)
