"""Labelled positions of the fast player's evaluation, on their way from self-play to disk.

Alpha-beta self-play actors (``actors.ab_selfplay``) push each finished game's positions here in
one Lua call that also deduplicates them run-wide; the learner (``learner.nneval.shards``) drains
them into Parquet shards. Keys are ``checkerzero.store.keys``' ``nneval_*``.

Row layout (``POSITION_DTYPE``, 24 bytes, little-endian; one list item is one game's accepted rows
back to back): the board as three 32-bit masks (Black's pieces, White's, kings), the root search
score in centi-men from the mover's side (an exact database value is +-``SCORE_LIMIT`` or 0), the
ply, the game's number within its generation, the generation, the game's result from the mover's
side (+1, 0, -1) and flags (bit 0: White to move, bit 1: the value is the database's).

Deduplication: a Bloom filter in one Redis bitmap of ``2**bits_log2`` bits (``2**bits_log2 / 8``
bytes: 64 MiB at the default 29), ``hashes`` probes per position from a 64-bit hash of the board
and side to move. A position is kept the first time it is seen in the run; a false positive drops
a new position (about 0.04% of them at 30 M positions with 2**29 bits and 7 probes, 0.6% at
50 M: ``false_positive_rate``). The script checks and sets the bits and appends the rows in one
atomic step, so a position is never stored twice and a game is stored whole or not at all.

The filter is derived state: when its key is missing (a fresh Redis over shards kept on disk),
``PositionStream.remember`` sets the bits of the positions already on disk.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np
import redis

from checkerzero.store.keys import (
    nneval_eval_key,
    nneval_meta_key,
    nneval_positions_key,
    nneval_seen_key,
)

POSITION_DTYPE = np.dtype(
    [
        ("black", "<u4"),
        ("white", "<u4"),
        ("kings", "<u4"),
        ("score", "<i2"),  # centi-men, mover's view
        ("ply", "<u2"),
        ("game", "<u4"),  # the game's number within its generation
        ("generation", "<u2"),
        ("result", "i1"),  # +1 the mover won, 0 draw, -1 lost
        ("flags", "u1"),  # FLAG_WHITE_TO_MOVE | FLAG_EXACT
    ]
)
FLAG_WHITE_TO_MOVE = 1
FLAG_EXACT = 2  # score and result are the endgame database's exact value
MAX_BITS_LOG2 = 32  # a Redis bitmap holds at most 2**32 bits (512 MiB)
EVAL_KEEP = 4  # evaluation files kept in Redis (the best and the few before it)

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)

# KEYS: seen, positions, meta. ARGV: generation, probes, row bytes, rows, then the probes'
# bit offsets (probes per row, row by row). Returns the rows kept, -1 for a game of another
# generation, -2 once the generation's target is reached (the game is not stored).
_PUSH = """
local meta = KEYS[3]
if redis.call('HGET', meta, 'generation') ~= ARGV[1] then
  redis.call('HINCRBY', meta, 'stale', 1)
  return -1
end
local target = tonumber(redis.call('HGET', meta, 'target') or '0')
local have = tonumber(redis.call('HGET', meta, 'positions') or '0')
if target > 0 and have >= target then
  redis.call('HINCRBY', meta, 'stale', 1)
  return -2
end
local k = tonumber(ARGV[2])
local rb = tonumber(ARGV[3])
local blob = ARGV[4]
local n = #blob / rb
local parts = {}
for i = 0, n - 1 do
  local seen = true
  for j = 1, k do
    if redis.call('GETBIT', KEYS[1], ARGV[4 + i * k + j]) == 0 then
      seen = false
      break
    end
  end
  if not seen then
    for j = 1, k do redis.call('SETBIT', KEYS[1], ARGV[4 + i * k + j], 1) end
    parts[#parts + 1] = string.sub(blob, i * rb + 1, (i + 1) * rb)
  end
end
redis.call('HINCRBY', meta, 'games', 1)
redis.call('HINCRBY', meta, 'duplicates', n - #parts)
if #parts > 0 then
  redis.call('RPUSH', KEYS[2], table.concat(parts))
  redis.call('HINCRBY', meta, 'pushed', 1)
  redis.call('HINCRBY', meta, 'positions', #parts)
end
return #parts
"""

# KEYS: meta. Returns {generation, game number, best version} in one step.
_CLAIM = """
local g = redis.call('HGET', KEYS[1], 'generation')
if not g then return {-1, -1, -1} end
local target = tonumber(redis.call('HGET', KEYS[1], 'target') or '0')
local have = tonumber(redis.call('HGET', KEYS[1], 'positions') or '0')
if target > 0 and have >= target then return {tonumber(g), -1, -1} end
local id = redis.call('HINCRBY', KEYS[1], 'next_game', 1) - 1
return {tonumber(g), id, tonumber(redis.call('HGET', KEYS[1], 'best') or '-1')}
"""


def position_hashes(rows: np.ndarray) -> np.ndarray:
    """64-bit hashes (uint64) of the rows' boards and sides to move (splitmix64 finalisers)."""

    def mix(x: np.ndarray) -> np.ndarray:
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))

    side = (rows["flags"] & FLAG_WHITE_TO_MOVE).astype(np.uint64)
    with np.errstate(over="ignore"):
        a = mix(
            rows["black"].astype(np.uint64) | (rows["white"].astype(np.uint64) << np.uint64(32))
        )
        b = mix((rows["kings"].astype(np.uint64) | (side << np.uint64(32))) ^ a)
    return (a * np.uint64(31) + b) & _MASK64


def bloom_offsets(hashes: np.ndarray, bits_log2: int, probes: int) -> np.ndarray:
    """(n, probes) bit offsets of each hash (double hashing: h1 + i * h2 modulo 2**bits_log2)."""
    h = np.asarray(hashes, np.uint64)
    h1 = h & np.uint64(0xFFFFFFFF)
    h2 = (h >> np.uint64(32)) | np.uint64(1)
    i = np.arange(probes, dtype=np.uint64)
    with np.errstate(over="ignore"):
        off = h1[:, None] + i[None, :] * h2[:, None]
    return off & np.uint64((1 << bits_log2) - 1)


def false_positive_rate(positions: int, bits_log2: int, probes: int) -> float:
    """Share of new positions the filter would take for seen ones after ``positions``."""
    return (1.0 - math.exp(-probes * positions / float(1 << bits_log2))) ** probes


@dataclass(frozen=True)
class StreamState:
    generation: int
    target: int
    positions: int  # kept this generation
    games: int
    duplicates: int
    stale: int
    pushed: int  # list items ever pushed (the run's item sequence)
    drained: int  # list items moved to disk
    best: int  # the evaluation version actors play with
    store_id: str


class PositionStream:
    """The positions list, its deduplication filter and its counters in one Redis."""

    def __init__(
        self, client: redis.Redis, namespace: str, *, bits_log2: int = 29, probes: int = 7
    ) -> None:
        if not 8 <= bits_log2 <= MAX_BITS_LOG2:
            raise ValueError(f"nneval dedup bits_log2 {bits_log2}: expected 8..{MAX_BITS_LOG2}")
        self.r = client
        self.ns = namespace
        self.bits_log2, self.probes = bits_log2, probes
        self.meta = nneval_meta_key(namespace)
        self.list = nneval_positions_key(namespace)
        self.seen = nneval_seen_key(namespace)
        self._push = client.register_script(_PUSH)
        self._claim = client.register_script(_CLAIM)

    @property
    def filter_bytes(self) -> int:
        return (1 << self.bits_log2) // 8

    # ---- the learner's side ----

    def begin(
        self, generation: int, target: int, best: int, *, on_disk: int = 0, next_game: int = 0
    ) -> StreamState:
        """Opens ``generation`` for self-play with ``target`` positions, actors playing
        evaluation ``best``. Counters are kept when it is already the open one (a resume);
        otherwise they start from ``on_disk`` positions and game number ``next_game`` (what a
        fresh store finds already stored for it)."""
        self.r.hsetnx(self.meta, "store_id", secrets.token_hex(8))
        current = self.r.hget(self.meta, "generation")
        if current is None or int(current) != generation:
            pipe = self.r.pipeline()
            pipe.hset(
                self.meta,
                mapping={
                    "generation": generation,
                    "positions": on_disk,
                    "games": 0,
                    "duplicates": 0,
                    "stale": 0,
                    "next_game": next_game,
                },
            )
            pipe.execute()
        self.r.hset(self.meta, mapping={"target": target, "best": best})
        return self.state()

    def close(self) -> None:
        """No generation open: actors wait."""
        self.r.hset(self.meta, mapping={"generation": -1, "target": 0})

    def state(self) -> StreamState:
        m = {k.decode(): v.decode() for k, v in self.r.hgetall(self.meta).items()}

        def n(key: str, default: int = 0) -> int:
            return int(m.get(key, default))

        return StreamState(
            n("generation", -1),
            n("target"),
            n("positions"),
            n("games"),
            n("duplicates"),
            n("stale"),
            n("pushed"),
            n("drained"),
            n("best", -1),
            m.get("store_id", ""),
        )

    def backlog(self) -> int:
        """Items waiting in Redis."""
        return int(self.r.llen(self.list))

    def pending(self, most: int) -> list[bytes]:
        """Up to ``most`` items from the head of the list (not removed: see ``trim``)."""
        return list(self.r.lrange(self.list, 0, most - 1))

    def trim(self, items: int) -> None:
        """The first ``items`` items are on disk: drop them and count them drained, at once."""
        pipe = self.r.pipeline(transaction=True)
        pipe.ltrim(self.list, items, -1)
        pipe.hincrby(self.meta, "drained", items)
        pipe.execute()

    def has_filter(self) -> bool:
        return bool(self.r.exists(self.seen))

    def remember(self, rows: np.ndarray) -> None:
        """Sets the filter's bits of positions already stored (a filter rebuilt from disk)."""
        offsets = bloom_offsets(position_hashes(rows), self.bits_log2, self.probes).ravel()
        for lo in range(0, len(offsets), 50_000):
            pipe = self.r.pipeline(transaction=False)
            for off in offsets[lo : lo + 50_000].tolist():
                pipe.setbit(self.seen, off, 1)
            pipe.execute()

    def stored(self, rows: np.ndarray) -> np.ndarray:
        """Whether each row's position is in the run's filter (stored by some generation, or a
        false positive at the filter's stated rate): a bool per row."""
        offsets = bloom_offsets(position_hashes(rows), self.bits_log2, self.probes)
        pipe = self.r.pipeline(transaction=False)
        for off in offsets.ravel().tolist():
            pipe.getbit(self.seen, off)
        bits = np.array(pipe.execute(), dtype=bool).reshape(offsets.shape)
        return bits.all(axis=1)

    def publish_eval(self, version: int, data: bytes) -> None:
        self.r.set(nneval_eval_key(self.ns, version), data)
        if version - EVAL_KEEP >= 0:
            self.r.delete(nneval_eval_key(self.ns, version - EVAL_KEEP))

    # ---- the actors' side ----

    def claim(self) -> tuple[int, int, int]:
        """(generation, game number, evaluation version) of a game to play; the number is -1
        when no generation is open or its target is reached."""
        g, game, best = self._claim(keys=[self.meta])
        return int(g), int(game), int(best)

    def eval_bytes(self, version: int) -> bytes | None:
        return self.r.get(nneval_eval_key(self.ns, version))

    def push(self, generation: int, rows: np.ndarray) -> int:
        """One finished game's rows: the count kept (new to the run), -1 for a stale
        generation, -2 when the generation's target was reached before it."""
        rows = np.ascontiguousarray(rows, POSITION_DTYPE)
        offsets = bloom_offsets(position_hashes(rows), self.bits_log2, self.probes)
        args = [generation, self.probes, POSITION_DTYPE.itemsize, rows.tobytes()]
        args += offsets.ravel().tolist()
        return int(self._push(keys=[self.seen, self.list, self.meta], args=args))


def decode_item(item: bytes, where: str) -> np.ndarray:
    """The rows of one list item; ValueError naming ``where`` for a length that is no rows."""
    if len(item) % POSITION_DTYPE.itemsize:
        raise ValueError(
            f"{where}: {len(item)} bytes is not a whole number of "
            f"{POSITION_DTYPE.itemsize}-byte position rows"
        )
    return np.frombuffer(item, POSITION_DTYPE)
