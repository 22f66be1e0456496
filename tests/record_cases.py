"""Valid game records and byte-level tools for the tests that throw bad records at the decoders.

`random_game_record` plays a random game with the core (every position the rules can reach:
multi-jumps, crowning, forced moves with an unsearched root value) and records it; `frame`
encodes a record's fields as `GameRecord.to_bytes` would, CRC included, *without* validating them,
which is how a damaged actor or an attacker with Redis access would write one.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

import numpy as np

from game import _core
from game.records import GameRecord, Result, Termination, sparse_visits

PREFIX_BYTES = 6  # magic + schema_version
HEADER_BYTES = 36
CRC_BYTES = 4


def random_game_record(seed: int, size: int = 6, max_plies: int = 80) -> GameRecord:
    """A random game's record: visits on every legal action, Dirichlet root values, every third
    decision unsearched (NaN root value, one visit to the played action)."""
    rng = np.random.default_rng(seed)
    game = _core.Game(size, max_plies)
    positions, played, offsets, actions, counts, wdl = [], [], [0], [], [], []
    while game.result() == 0:
        legal = game.legal_actions()
        action = int(rng.choice(legal))
        if len(positions) % 3 == 2:
            a, c = np.array([action], np.uint8), np.array([1], np.uint16)
            wdl.append([np.nan] * 3)
        else:
            visits = np.zeros(size * size * 2, np.int64)
            visits[legal] = rng.integers(1, 50, len(legal))
            a, c = sparse_visits(visits)
            wdl.append(rng.dirichlet([1, 1, 1]))
        positions.append(game.pack_history()[0])
        actions.extend(a)
        counts.extend(c)
        offsets.append(len(actions))
        played.append(action)
        game.step(action)
    return GameRecord(
        board_size=size,
        positions=np.array(positions, np.uint32),
        played=np.array(played, np.uint8),
        visit_offsets=np.array(offsets, np.uint32),
        visit_actions=np.array(actions, np.uint8),
        visit_counts=np.array(counts, np.uint16),
        root_wdl=np.array(wdl, np.float16),
        result=Result(game.result()),
        termination=Termination(game.end_reason()),
        opening_id=-1,
        network_version=int(rng.integers(0, 1000)),
        actor_id=seed,
    )


def frame(record: GameRecord, **changes) -> bytes:
    """The bytes `to_bytes` would write for `record` with `changes`, CRC recomputed, unchecked."""
    unchecked = object.__new__(GameRecord)
    for f in dataclasses.fields(GameRecord):
        object.__setattr__(unchecked, f.name, changes.get(f.name, getattr(record, f.name)))
    return unchecked.to_bytes()


def with_crc(body: bytes) -> bytes:
    """`body` (a record without its CRC) with its CRC-32 appended."""
    return body + struct.pack("<I", zlib.crc32(body))
