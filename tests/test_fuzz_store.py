"""Fuzzing what crosses the store: replay records, checkpoints, training states, weight blobs.

Every case is a valid object damaged at random (seeded, so a failure replays): bytes flipped,
cut or added, fields of a record replaced with random values, checkpoint headers rewritten with
random model configs, dtypes, shapes and offsets. Records get their CRC recomputed and
checkpoints keep their tensor checksum where the damage is to the header, so the cases reach
the checks behind the frame. The only error that may come out is ValueError; whatever decodes is
safe to use (a record encodes and yields finite targets, a network holds finite weights), and the
learner's mirror counts and skips exactly the records that do not decode.

The default lane runs a few thousand cases in seconds; `-m slow` runs 10^5 of each kind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from record_cases import CRC_BYTES, frame, random_game_record, with_crc
from test_trainer import LEARNER, MODEL, batches

from checkerzero.network.checkpoint import decode_checkpoint, encode_checkpoint
from checkerzero.store.replay import ReplayStore
from game import encoding
from game.records import MIN_BYTES_PER_DECISION, MIN_RECORD_BYTES, GameRecord, training_samples
from learner.mirror import ReplayMirror
from learner.trainer import Trainer

RECORD_CASES = 3000  # default lane: about 2 s here
CHECKPOINT_CASES = 600
SLOW_CASES = 100_000
SLOW_CHECKPOINT_CASES = 20_000  # per test: about 5 minutes here (15 ms a case, most of it I/O)

RANDOM_WORDS = [0, 1, 0xFFFFFFFF, 1 << 18, 1 << 31, 0x10000, 0x1FFFF]
ODD_FLOATS = [np.inf, -np.inf, np.nan, 60000.0, -1.0, 0.0, 1.0, 2.0, 0.5]


@pytest.fixture(scope="module")
def seeds_records() -> list[GameRecord]:
    """Valid records of both board sizes, short and long, with unsearched decisions."""
    return [random_game_record(s, size, 200) for s in range(3) for size in (6, 8)]


# ------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------


def mutate_record(record: GameRecord, rng: np.random.Generator) -> bytes:
    """One damaged copy of `record`'s bytes, CRC recomputed so the frame check passes."""
    kind = int(rng.integers(0, 8))
    if kind == 0:  # random bytes flipped anywhere behind the prefix
        body = bytearray(record.to_bytes()[:-CRC_BYTES])
        for _ in range(int(rng.integers(1, 6))):
            body[int(rng.integers(6, len(body)))] ^= 1 << int(rng.integers(0, 8))
        return with_crc(bytes(body))
    if kind == 1:  # cut or grown, header unchanged
        body = record.to_bytes()[:-CRC_BYTES]
        cut = int(rng.integers(0, len(body)))
        if rng.random() < 0.5:
            return with_crc(body[:cut])
        return with_crc(body + rng.bytes(int(rng.integers(1, 64))))
    positions = record.positions.copy()
    played = record.played.copy()
    counts = record.visit_counts.copy()
    actions = record.visit_actions.copy()
    wdl = record.root_wdl.copy()
    t = int(rng.integers(0, record.num_decisions))
    if kind == 2:  # a word of a position: a random value or one with a single bit flipped
        k = int(rng.integers(0, 4))
        if rng.random() < 0.5:
            positions[t, k] = RANDOM_WORDS[int(rng.integers(0, len(RANDOM_WORDS)))]
        else:
            positions[t, k] ^= np.uint32(1 << int(rng.integers(0, 32)))
    elif kind == 3:  # a whole random position
        positions[t] = rng.integers(0, 1 << 32, 4, dtype=np.uint64).astype(np.uint32)
        positions[t, 3] = (positions[t, 3] & 0x1FF7F) | 0x10000
    elif kind == 4:
        played[t] = int(rng.integers(0, 256))
    elif kind == 5:
        counts[int(rng.integers(0, len(counts)))] = int(rng.integers(0, 3))
        actions[int(rng.integers(0, len(actions)))] = int(rng.integers(0, 256))
    elif kind == 6:
        wdl[t, int(rng.integers(0, 3))] = ODD_FLOATS[int(rng.integers(0, len(ODD_FLOATS)))]
    else:  # header fields
        return frame(
            record,
            board_size=int(rng.choice([4, 6, 8, 10, 255])),
            result=int(rng.integers(0, 5)),
            termination=int(rng.integers(0, 7)),
            resign_trigger=int(rng.integers(-3, record.num_decisions + 3)),
        )
    return frame(
        record,
        positions=positions,
        played=played,
        visit_counts=counts,
        visit_actions=actions,
        root_wdl=wdl,
    )


def decode_and_use(data: bytes) -> GameRecord | None:
    """The record, used as the learner would use it; None when it is refused (ValueError)."""
    try:
        record = GameRecord.from_bytes(data)
    except ValueError:
        return None
    if record.num_decisions:
        idx = np.arange(record.num_decisions)
        packed, pi, wdl = training_samples(record, idx, q_weight=0.5)
        planes = encoding.encode(packed, record.board_size)
        mask = encoding.legal_masks(packed, record.board_size)
        assert np.isfinite(planes).all() and np.isfinite(pi).all() and np.isfinite(wdl).all()
        np.testing.assert_allclose(pi.sum(axis=1), 1.0, rtol=1e-5)
        assert not (pi > 0)[~mask].any()
    return record


def fuzz_records(records: list[GameRecord], cases: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    accepted = 0
    for _ in range(cases):
        record = records[int(rng.integers(0, len(records)))]
        accepted += decode_and_use(mutate_record(record, rng)) is not None
    return accepted, cases - accepted


def test_mutated_records_raise_value_error_or_decode_to_safe_records(seeds_records):
    accepted, refused = fuzz_records(seeds_records, RECORD_CASES, seed=0)
    # Both outcomes occur: the damage is not all caught by one check, and not all harmful.
    assert refused > RECORD_CASES // 2 and accepted > 0


@pytest.mark.slow
def test_mutated_records_at_scale(seeds_records):
    accepted, refused = fuzz_records(seeds_records, SLOW_CASES, seed=1)
    assert refused > SLOW_CASES // 2 and accepted > 0


needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None and not os.environ.get("CHECKERZERO_REDIS_SERVER"),
    reason="redis-server not installed (apt-get install redis-server); these tests need a real one",
)


@needs_redis
def test_the_mirror_counts_and_skips_exactly_the_records_that_do_not_decode(client, seeds_records):
    rng = np.random.default_rng(2)
    six = [r for r in seeds_records if r.board_size == 6]
    store = ReplayStore(client, window_positions=10_000_000)
    expected_rejected = expected_positions = refused_by_store = 0
    for k in range(300):
        record = six[k % len(six)]
        data = mutate_record(record, rng) if k % 3 else record.to_bytes()
        try:
            store.add_game(data, record.num_decisions)
        except ValueError:  # cut too short to hold its positions: never reaches the window
            need = MIN_RECORD_BYTES + MIN_BYTES_PER_DECISION * record.num_decisions
            assert len(data) < need
            refused_by_store += 1
            continue
        decoded = decode_and_use(data)
        fits = decoded is not None and decoded.board_size == 6
        fits = fits and decoded.num_decisions == record.num_decisions
        expected_rejected += not fits
        expected_positions += record.num_decisions if fits else 0
    assert store.stats().games_refused == refused_by_store
    mirror = ReplayMirror(store, 6)
    mirror.refresh()
    assert mirror.malformed == expected_rejected and expected_rejected > 50
    assert mirror.num_positions == expected_positions
    batch = mirror.sample(1024, np.random.default_rng(0), q_weight=0.5)
    assert np.isfinite(batch.target_pi).all() and np.isfinite(batch.target_wdl).all()


# ------------------------------------------------------------------------------------------
# Checkpoints, training states and weight blobs
# ------------------------------------------------------------------------------------------


def _split(data: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _join(header: dict, body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def _random_json(rng: np.random.Generator):
    return [
        None,
        -1,
        0,
        1,
        3,
        10**12,
        -(10**12),
        1.5,
        "x",
        "F32",
        [],
        [1, 2],
        {},
        {"a": 1},
        True,
        int(rng.integers(-100, 100)),
    ][int(rng.integers(0, 16))]


def _mutate_tree(obj, rng: np.random.Generator, p: float):
    """A copy of a JSON tree with leaves (and some branches) replaced at random."""
    if rng.random() < p:
        return _random_json(rng)
    if isinstance(obj, dict):
        return {k: _mutate_tree(v, rng, p) for k, v in obj.items() if rng.random() > p / 4}
    if isinstance(obj, list):
        return [_mutate_tree(v, rng, p) for v in obj]
    return obj


def mutate_checkpoint(data: bytes, rng: np.random.Generator, kind: int | None = None) -> bytes:
    """One damaged copy of a checkpoint or training state (`kind` 0-4, random when None)."""
    kind = int(rng.integers(0, 5)) if kind is None else kind
    if kind == 0:  # bytes flipped anywhere
        out = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            out[int(rng.integers(0, len(out)))] ^= 1 << int(rng.integers(0, 8))
        return bytes(out)
    if kind == 1:  # cut or grown
        if rng.random() < 0.5:
            return data[: int(rng.integers(0, len(data)))]
        return data + rng.bytes(int(rng.integers(1, 256)))
    header, body = _split(data)
    ours = json.loads(header["__metadata__"]["checkerzero"])
    if kind == 2:  # our header's fields (the model config, the optimizer tree): tensors intact
        ours = {k: v if k == "sha256" else _mutate_tree(v, rng, p=0.05) for k, v in ours.items()}
    elif kind == 3:  # one model config value
        if isinstance(ours.get("model_config"), dict):
            key = sorted(ours["model_config"])[int(rng.integers(0, len(ours["model_config"])))]
            ours["model_config"][key] = _random_json(rng)
    else:  # safetensors' own entries: dtype, shape, data_offsets
        names = sorted(k for k in header if k != "__metadata__")
        entry = header[names[int(rng.integers(0, len(names)))]]
        field = ["dtype", "shape", "data_offsets"][int(rng.integers(0, 3))]
        entry[field] = (
            _random_json(rng) if rng.random() < 0.5 else _mutate_tree(entry[field], rng, 0.5)
        )
    header["__metadata__"]["checkerzero"] = json.dumps(ours)
    return _join(header, body)


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory) -> tuple[bytes, bytes]:
    """A small model checkpoint and a training state of the trainer tests' tiny network."""
    torch.manual_seed(0)
    trainer = Trainer(LEARNER, MODEL, 8, device=torch.device("cpu"))
    for batch in batches(2):
        trainer.step(batch)
    ckpt = tmp_path_factory.mktemp("fuzz_ckpt")
    trainer.save(ckpt, keep=1)
    state = next(ckpt.glob("state_*.safetensors")).read_bytes()
    return encode_checkpoint(trainer.model, step=2, version=1), state


def fuzz_checkpoints(tiny_files, tmp: Path, cases: int, seed: int) -> tuple[int, int]:
    model_bytes, state_bytes = tiny_files
    rng = np.random.default_rng(seed)
    torch.manual_seed(0)
    trainer = Trainer(LEARNER, MODEL, 8, device=torch.device("cpu"))
    state_path = tmp / "state_00000001.safetensors"
    batch = batches(1, seed=3)[0]
    accepted = 0
    for _ in range(cases):
        if rng.random() < 0.5:  # a weights blob as an actor pulls it, or a model file
            try:
                model, _ = decode_checkpoint(mutate_checkpoint(model_bytes, rng), source="fuzz")
            except ValueError:
                continue
            assert all(torch.isfinite(v).all() for v in model.state_dict().values())
        else:  # a training state as resume reads it
            state_path.write_bytes(mutate_checkpoint(state_bytes, rng))
            try:
                trainer.restore(tmp)
            except ValueError:
                continue
            trainer.step(batch)  # what loaded trains: no error, and no NaN published
            trainer.check_finite()
        accepted += 1
    return accepted, cases - accepted


def test_mutated_checkpoints_and_states_raise_value_error_or_load_finite(tiny_files, tmp_path):
    accepted, refused = fuzz_checkpoints(tiny_files, tmp_path, CHECKPOINT_CASES, seed=0)
    assert refused > CHECKPOINT_CASES // 2 and accepted > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 1 + SLOW_CASES // SLOW_CHECKPOINT_CASES))
def test_mutated_checkpoints_at_scale(tiny_files, tmp_path, seed):
    """10^5 cases in all, in parts that each stay within the per-test timeout."""
    accepted, refused = fuzz_checkpoints(tiny_files, tmp_path, SLOW_CHECKPOINT_CASES, seed=seed)
    assert refused > SLOW_CHECKPOINT_CASES // 2 and accepted > 0


def test_the_fuzzers_damage_what_they_claim():
    """The mutators are not no-ops: a record's CRC is recomputed (so the CRC check alone does
    not catch it) and a header-only change keeps the tensors' checksum."""
    record = random_game_record(0, 6)
    rng = np.random.default_rng(5)
    datas = [mutate_record(record, rng) for _ in range(200)]
    # A mutation can happen to write the value that was there (a played action drawn equal).
    assert sum(d != record.to_bytes() for d in datas) >= 190
    for d in datas:
        with contextlib.suppress(ValueError):
            GameRecord.from_bytes(d)
            continue
        with pytest.raises(ValueError) as err:
            GameRecord.from_bytes(d)
        assert "CRC" not in str(err.value)
    torch.manual_seed(0)
    model_bytes = Trainer(LEARNER, MODEL, 8, device=torch.device("cpu")).weights_bytes(1)
    header, body = _split(model_bytes)
    for kind in (2, 3, 4):  # header-only damage: tensors and their checksum untouched
        changed = 0
        for _ in range(20):
            damaged = mutate_checkpoint(model_bytes, rng, kind)
            new_header, new_body = _split(damaged)
            assert new_body == body
            ours = json.loads(new_header["__metadata__"]["checkerzero"])
            assert ours["sha256"] == json.loads(header["__metadata__"]["checkerzero"])["sha256"]
            changed += new_header != header
        assert changed >= 10  # a random leaf may be drawn equal to the one it replaced
