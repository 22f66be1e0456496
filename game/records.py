"""A finished self-play game as the replay store keeps it, and the training samples it yields.

A `GameRecord` holds one entry per search decision. A decision is one action: a whole move, or
one jump of a multi-jump (each is a separate choice of the same player), and forced ones are
included, so ``positions`` is every state the game passed through. Positions are packed states
(four uint32 words: black, white, kings, meta; see game/cpp/game.h), never float planes.

Byte layout of `GameRecord.to_bytes()` (schema version 2, every number little-endian)::

    offset  size      field
    0       4         magic b"CZGR"
    4       2         schema_version (uint16)
    6       36        header, struct "<BBBBiqiIIi4x":
                        board_size u8, result u8, termination u8, flags u8 (bit 0 resign_enabled),
                        opening_id i32, network_version i64, actor_id i32,
                        T = decisions u32, E = visit entries u32, resign_trigger i32, 4 pad bytes
    42      16*T      positions       uint32 (T, 4)
            T         played          uint8 (T,): action played at each decision, 255: resigned
            4*(T+1)   visit_offsets   uint32 (T+1,): decision t owns entries [off[t], off[t+1])
            E         visit_actions   uint8 (E,): mover-relative action of each entry
            2*E       visit_counts    uint16 (E,): root visits of that action
            6*T       root_wdl        float16 (T, 3): search's root value, mover's view
            T         full_search     uint8 (T,): 1 a full search, 0 a fast one (playout cap
                                      randomization: its visits do not train the policy)
    end-4   4         CRC-32 (zlib) of every byte before it

Schema version 1 is the same without `full_search`; it still decodes, every decision full (there
were no fast searches before version 2).

Visit counts above 65535 (not reached with the configured simulations) are scaled down together,
which keeps the distribution. A byte string that is truncated, corrupted, or not a record raises
ValueError saying which check failed. So does a well-framed record (its CRC correct) that self-play
could not have written: every record is checked in full on construction and decoding, since the
C++ encoder and move generator trust what they are given (`_validate`): positions the rules can
reach (pieces on the board's squares, no square held twice, kings on pieces, no man on its
crowning row, at most the starting number of pieces a side, a well-formed meta word), a played
action and visited actions legal at each position (one batched call of the core's legal-mask
generator per record), no action listed twice, visit counts >= 1, and root values that are
probability vectors or all NaN (a forced move played unsearched), and full_search flags that are
0 or 1. Whether each position follows from the one before is not checked (that needs a replay of
the game, a Python loop per action): a record that breaks there still trains on legal positions,
and `record_moves` refuses it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from game import _core
from game.encoding import HISTORY, META_WHITE_TO_MOVE, NUM_WDL, PACKED_WORDS, num_actions

MAGIC = b"CZGR"
SCHEMA_VERSION = 2
# Versions from_bytes reads: 1 has no full_search field (every decision was a full search).
READABLE_VERSIONS = (1, 2)
_PREFIX = struct.Struct("<4sH")
_HEADER = struct.Struct("<BBBBiqiIIi4x")
_CRC = struct.Struct("<I")
# The fewest bytes a record of T decisions takes: MIN_RECORD_BYTES + MIN_BYTES_PER_DECISION * T
# (its position, played action, visit offset and root value; no visit entries). The replay
# store bounds a record's claimed length by it.
MIN_RECORD_BYTES = _PREFIX.size + _HEADER.size + _CRC.size + 4  # and the closing visit offset
MIN_BYTES_PER_DECISION = 16 + 1 + 4 + 6
_FLAG_RESIGN_ENABLED = 1
# uint16 visit counts: the largest count stored as is.
MAX_STORED_VISITS = np.iinfo(np.uint16).max
# `played` value of a decision at which the side to move resigned (always the last one).
RESIGNED = 255
# A searched root value is a float16 probability vector: three roundings of at most 2^-12 each
# (values in [0.5, 1]) move its sum by under 1e-3; more than this is not a distribution.
WDL_SUM_TOLERANCE = 1e-2


class Result(IntEnum):
    """Game result; the values match game._core.Game.result()."""

    BLACK_WIN = 1
    WHITE_WIN = 2
    DRAW = 3


class Termination(IntEnum):
    """How the game ended; 1-4 match game._core.Game.end_reason()."""

    NO_MOVES = 1
    REPETITION = 2
    FORTY_MOVE = 3
    PLY_CAP = 4
    RESIGNATION = 5
    DATABASE = 6  # reached the endgame database: the result is its exact value


@dataclass(frozen=True)
class GameRecord:
    board_size: int
    positions: np.ndarray  # uint32 (T, 4): the state before each decision
    played: np.ndarray  # uint8 (T,): the action played there (RESIGNED: the mover resigned)
    visit_offsets: np.ndarray  # uint32 (T+1,)
    visit_actions: np.ndarray  # uint8 (E,)
    visit_counts: np.ndarray  # uint16 (E,)
    root_wdl: np.ndarray  # float16 (T, 3)
    result: Result
    termination: Termination
    opening_id: int = -1  # row of the opening deck, -1 for the start position
    network_version: int = 0
    actor_id: int = 0
    resign_enabled: bool = False
    resign_trigger: int = -1  # decision at which the resignation rule fired (-1: never)
    # bool (T,): decision t was a full search (False: a fast one, playout cap randomization,
    # whose visits are no policy target). None: every decision was full.
    full_search: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.full_search is None:
            t = len(self.positions) if isinstance(self.positions, np.ndarray) else 0
            object.__setattr__(self, "full_search", np.ones(t, np.bool_))
        _validate(self)

    @property
    def size(self) -> int:
        """Board side (alias of board_size)."""
        return self.board_size

    @property
    def num_decisions(self) -> int:
        return len(self.positions)

    def visits(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(actions, counts) of decision t."""
        lo, hi = int(self.visit_offsets[t]), int(self.visit_offsets[t + 1])
        return self.visit_actions[lo:hi], self.visit_counts[lo:hi]

    def to_bytes(self) -> bytes:
        flags = _FLAG_RESIGN_ENABLED if self.resign_enabled else 0
        parts = [
            _PREFIX.pack(MAGIC, SCHEMA_VERSION),
            _HEADER.pack(
                self.board_size,
                int(self.result),
                int(self.termination),
                flags,
                self.opening_id,
                self.network_version,
                self.actor_id,
                self.num_decisions,
                len(self.visit_actions),
                self.resign_trigger,
            ),
            self.positions.astype("<u4", copy=False).tobytes(),
            self.played.astype("u1", copy=False).tobytes(),
            self.visit_offsets.astype("<u4", copy=False).tobytes(),
            self.visit_actions.astype("u1", copy=False).tobytes(),
            self.visit_counts.astype("<u2", copy=False).tobytes(),
            self.root_wdl.astype("<f2", copy=False).tobytes(),
            self.full_search.astype("u1").tobytes(),
        ]
        body = b"".join(parts)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes) -> GameRecord:
        """Decodes `to_bytes()` output; raises ValueError on anything else."""
        data = bytes(data)
        fixed = _PREFIX.size + _HEADER.size + _CRC.size
        if len(data) < fixed:
            raise ValueError(f"game record truncated: {len(data)} bytes, a record has >= {fixed}")
        magic, version = _PREFIX.unpack_from(data, 0)
        if magic != MAGIC:
            raise ValueError(f"not a game record: magic {magic!r}, expected {MAGIC!r}")
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"game record schema_version {version} is not supported (this code reads "
                f"{', '.join(map(str, READABLE_VERSIONS))})"
            )
        (size, result, termination, flags, opening, version_net, actor, t, e, trigger) = (
            _HEADER.unpack_from(data, _PREFIX.size)
        )
        flag_bytes = t if version >= 2 else 0
        expected = fixed + 16 * t + t + 4 * (t + 1) + e + 2 * e + 6 * t + flag_bytes
        if len(data) != expected:
            raise ValueError(
                f"game record length {len(data)} bytes does not match its header "
                f"({t} decisions, {e} visit entries: {expected} bytes); truncated or corrupted"
            )
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if zlib.crc32(data[: -_CRC.size]) != crc:
            raise ValueError("game record CRC-32 mismatch: the bytes are corrupted")
        at = _PREFIX.size + _HEADER.size

        def take(dtype: str, count: int, native: type) -> np.ndarray:
            nonlocal at
            arr = np.frombuffer(data, dtype=dtype, count=count, offset=at)
            at += arr.nbytes
            return arr.astype(native)  # a writeable copy in native byte order

        positions = take("<u4", 4 * t, np.uint32).reshape(t, 4)
        played = take("u1", t, np.uint8)
        offsets = take("<u4", t + 1, np.uint32)
        actions = take("u1", e, np.uint8)
        counts = take("<u2", e, np.uint16)
        wdl = take("<f2", 3 * t, np.float16).reshape(t, 3)
        full = None
        if version >= 2:
            full_bytes = take("u1", t, np.uint8)
            if np.any(full_bytes > 1):
                k = int(np.argmax(full_bytes > 1))
                raise ValueError(
                    f"game record is inconsistent: full_search of decision {k} is "
                    f"{full_bytes[k]}, not 0 or 1"
                )
            full = full_bytes.astype(np.bool_)
        try:
            return cls(
                board_size=size,
                positions=positions,
                played=played,
                visit_offsets=offsets,
                visit_actions=actions,
                visit_counts=counts,
                root_wdl=wdl,
                result=Result(result),
                termination=Termination(termination),
                opening_id=opening,
                network_version=version_net,
                actor_id=actor,
                resign_enabled=bool(flags & _FLAG_RESIGN_ENABLED),
                resign_trigger=trigger,
                full_search=full,
            )
        except ValueError as err:
            raise ValueError(f"game record is inconsistent: {err}") from err


def _validate(r: GameRecord) -> None:
    if r.board_size not in (6, 8):
        raise ValueError(f"board_size must be 6 or 8, got {r.board_size}")
    checks = [
        ("positions", r.positions, np.uint32, 2),
        ("played", r.played, np.uint8, 1),
        ("visit_offsets", r.visit_offsets, np.uint32, 1),
        ("visit_actions", r.visit_actions, np.uint8, 1),
        ("visit_counts", r.visit_counts, np.uint16, 1),
        ("root_wdl", r.root_wdl, np.float16, 2),
        ("full_search", r.full_search, np.bool_, 1),
    ]
    for name, arr, dtype, ndim in checks:
        if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != ndim:
            raise ValueError(f"{name} must be a {ndim}-d {np.dtype(dtype).name} array")
    t = len(r.positions)
    if r.positions.shape != (t, PACKED_WORDS) or r.root_wdl.shape != (t, NUM_WDL):
        raise ValueError(
            f"positions must be (T, 4) and root_wdl (T, 3), got "
            f"{r.positions.shape} and {r.root_wdl.shape}"
        )
    if len(r.played) != t:
        raise ValueError(f"played must have one action per decision ({t}), got {len(r.played)}")
    if len(r.full_search) != t:
        raise ValueError(
            f"full_search must have one flag per decision ({t}), got {len(r.full_search)}"
        )
    if t > 1 and np.any(r.played[:-1] == RESIGNED):
        raise ValueError("only the last decision can be a resignation")
    if len(r.visit_offsets) != t + 1 or r.visit_offsets[0] != 0:
        raise ValueError("visit_offsets must have T+1 entries starting at 0")
    if np.any(np.diff(r.visit_offsets.astype(np.int64)) < 1):
        raise ValueError("every decision needs at least one visited action (offsets must rise)")
    e = len(r.visit_actions)
    if r.visit_offsets[-1] != e or len(r.visit_counts) != e:
        raise ValueError(
            f"visit_offsets end at {r.visit_offsets[-1]}, but there are {e} actions "
            f"and {len(r.visit_counts)} counts"
        )
    if e and int(r.visit_actions.max()) >= num_actions(r.board_size):
        raise ValueError(f"visit action {int(r.visit_actions.max())} out of range")
    Result(r.result)
    Termination(r.termination)
    if r.resign_trigger != -1 and not 0 <= r.resign_trigger < t:
        raise ValueError(f"resign_trigger {r.resign_trigger} outside the game's {t} decisions")
    if e and int(r.visit_counts.min()) < 1:
        t_bad = int(np.searchsorted(r.visit_offsets, np.argmin(r.visit_counts), side="right")) - 1
        raise ValueError(f"decision {t_bad} has a visit count of 0 (every listed action has >= 1)")
    _check_root_wdl(r.root_wdl)
    if t:  # the core checks every packed state (bits, pieces, kings, meta word) and raises
        _check_actions(r)


def _check_root_wdl(wdl: np.ndarray) -> None:
    """Each row is a probability vector (finite, in [0, 1], summing to 1 within float16 rounding)
    or all NaN (a forced move played without a search)."""
    w = wdl.astype(np.float32)
    unsearched = np.isnan(w).all(axis=1)
    # Comparisons with NaN are False, so a row with any NaN or infinity fails `probability`.
    probability = ((w >= 0) & (w <= 1)).all(axis=1) & (
        np.abs(w.sum(axis=1) - 1) <= WDL_SUM_TOLERANCE
    )
    bad = ~(unsearched | probability)
    if bad.any():
        t = int(np.argmax(bad))
        raise ValueError(
            f"root_wdl of decision {t} is {w[t].tolist()}: not a probability vector "
            f"(values in [0, 1] summing to 1) nor all NaN (unsearched)"
        )


def _check_actions(r: GameRecord) -> None:
    """The played action and every visited action of each decision are legal in its position
    (one batched call of the core's legal-mask generator), and no action is listed twice."""
    t = r.num_decisions
    a = num_actions(r.board_size)
    legal = _core.legal_mask_packed(r.board_size, r.positions.reshape(t, 1, PACKED_WORDS))
    played = r.played.astype(np.int64)
    moved = played != RESIGNED
    if np.any(played[moved] >= a):
        k = int(np.flatnonzero(moved & (played >= a))[0])
        raise ValueError(f"decision {k} played action {played[k]}, out of range for {a} actions")
    illegal = moved.copy()
    illegal[moved] = ~legal[np.flatnonzero(moved), played[moved]]
    if illegal.any():
        k = int(np.argmax(illegal))
        raise ValueError(f"decision {k} played action {played[k]}, which is illegal there")
    owner = np.repeat(np.arange(t), np.diff(r.visit_offsets.astype(np.int64)))
    actions = r.visit_actions.astype(np.int64)
    unvisitable = ~legal[owner, actions]
    if unvisitable.any():
        k = int(np.argmax(unvisitable))
        raise ValueError(
            f"decision {owner[k]} lists visits to action {actions[k]}, which is illegal there"
        )
    keys = owner * a + actions
    if len(np.unique(keys)) != len(keys):
        raise ValueError("a decision lists the same visited action twice")


def sparse_visits(visits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(actions uint8, counts uint16) of the visited actions of one (A,) count vector."""
    actions = np.flatnonzero(visits > 0)
    counts = visits[actions].astype(np.int64)
    top = counts.max(initial=0)
    if top > MAX_STORED_VISITS:
        counts = np.maximum(counts * MAX_STORED_VISITS // top, 1)
    return actions.astype(np.uint8), counts.astype(np.uint16)


def histories(positions: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Packed network histories (n, HISTORY, 4): decision t's state and the HISTORY-1 before it.

    Slots before the first recorded position stay zero (meta bit 16 clear: "no position"), as
    game._core.Game.pack_history() does for a game started without history.
    """
    idx = np.asarray(indices, dtype=np.int64)
    out = np.zeros((len(idx), HISTORY, PACKED_WORDS), np.uint32)
    for k in range(HISTORY):
        src = idx - k
        ok = src >= 0
        out[ok, k] = positions[src[ok]]
    return out


# Outcome codes of `mover_outcome`: indices into (win, draw, loss).
WIN, DRAW, LOSS = 0, 1, 2


def mover_outcome(result: np.ndarray, meta: np.ndarray) -> np.ndarray:
    """Each position's game result (`Result` values) from its mover's view, as WIN/DRAW/LOSS
    (uint8); `meta` is the packed position's meta word (the side to move)."""
    result = np.asarray(result)
    white = (np.asarray(meta) & META_WHITE_TO_MOVE).astype(bool)
    mover_won = white == (result == Result.WHITE_WIN)
    return np.where(result == Result.DRAW, DRAW, np.where(mover_won, WIN, LOSS)).astype(np.uint8)


def value_targets(outcome: np.ndarray, root_wdl: np.ndarray, q_weight: float) -> np.ndarray:
    """The value head's targets (n, 3) float32: the one-hot outcome (WIN/DRAW/LOSS codes), mixed
    with the search's root value where there was a search (root_wdl not NaN)::

        target_wdl = (1 - q_weight) * result + q_weight * root_wdl
    """
    if not 0.0 <= q_weight <= 1.0:
        raise ValueError(f"q_weight must be in [0, 1], got {q_weight}")
    wdl = np.eye(NUM_WDL, dtype=np.float32)[np.asarray(outcome, dtype=np.intp)]
    if q_weight > 0.0:
        root = np.asarray(root_wdl).astype(np.float32)
        searched = ~np.isnan(root).any(axis=1)
        wdl[searched] = (1.0 - q_weight) * wdl[searched] + q_weight * root[searched]
    return wdl


def training_samples(
    record: GameRecord, indices: np.ndarray | list[int], q_weight: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Learner inputs and targets for decisions `indices` of a record.

    Returns packed histories uint32 (n, HISTORY, 4) (encode with game._core.encode_packed),
    target_pi float32 (n, A) (root visit fractions; a fast search's, `record.full_search` False,
    is no policy target: the learner gives it no weight) and target_wdl float32 (n, 3): the game's
    result from the view of the side to move at each position (win, draw, loss), mixed with the
    search's root value at that position when `q_weight` > 0::

        target_wdl = (1 - q_weight) * result + q_weight * root_wdl

    The root value is a less noisy target than one game's result early in training, when most
    results are decided by blunders long after the position (Oracle's "Lessons from AlphaZero"
    found the average of the two best for Connect Four). Decisions played without a search
    (forced moves, NaN root value) keep the result alone.
    """
    if not 0.0 <= q_weight <= 1.0:
        raise ValueError(f"q_weight must be in [0, 1], got {q_weight}")
    idx = np.asarray(indices, dtype=np.int64)
    t = record.num_decisions
    if idx.size and (idx.min() < 0 or idx.max() >= t):
        raise ValueError(f"decision indices must be in [0, {t}), got {idx.min()}..{idx.max()}")
    a = num_actions(record.board_size)
    pi = np.zeros((len(idx), a), np.float32)
    for row, i in enumerate(idx):
        actions, counts = record.visits(int(i))
        c = counts.astype(np.float32)
        pi[row, actions] = c / c.sum()
    outcome = mover_outcome(np.full(len(idx), int(record.result)), record.positions[idx, 3])
    wdl = value_targets(outcome, record.root_wdl[idx], q_weight)
    return histories(record.positions, idx), pi, wdl
