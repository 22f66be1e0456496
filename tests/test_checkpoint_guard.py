"""Checkpoint and weights headers are checked against their tensors before a network is built;
a run resumes from the newest training state that loads.

The reported case: the shipped 600 KB network with `blocks=20, channels=1024` written into its
header allocated a 1.7 GB network before the shape error; actors decoded the weights they pull
from Redis the same way. And a truncated newest training state ended a resume though the older
ones beside it were intact.
"""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path

import pytest
import torch
from test_nonfinite import nan_checkpoint_bytes
from test_trainer import LEARNER, MODEL, batches

from checkerzero.network.checkpoint import (
    SCHEMA_VERSION,
    decode_checkpoint,
    encode_tensors,
    load_checkpoint,
)
from checkerzero.network.model import ModelConfig
from checkerzero.store.weights import WeightsChannel
from learner.trainer import Trainer
from learner.training_state import capture_rng_state, save_training_state

SHIPPED = Path(__file__).resolve().parents[1] / "game" / "data" / "laptop-60min.safetensors"


def with_header(data: bytes, **model_config) -> bytes:
    """`data` (a checkpoint) with keys of the model config in its header replaced; the tensors
    and their checksum untouched (the checksum covers the tensors, not the header)."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    ours = json.loads(header["__metadata__"]["checkerzero"])
    ours["model_config"] |= model_config
    header["__metadata__"]["checkerzero"] = json.dumps(ours)
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data[8 + n :]


@pytest.mark.parametrize(
    ("config", "match"),
    [
        # the reported case: the tensor count the header's model needs, from the header alone
        ({"blocks": 20, "channels": 1024}, r"model \(20 residual blocks\) has 264 tensors, the "),
        ({"channels": 1024}, r"'stem.0.weight' is declared \[32, 15, 3, 3\], the header's model"),
        ({"blocks": 10**9}, "has 12000000024 tensors, the file holds 72"),
        ({"channels": 10**12}, "cannot be built"),
        ({"board_size": 10**6}, r"header's board_size 1000000 is not one of \(6, 8\)"),
        ({"board_size": 6}, "tensor 'value_head.4.weight'"),
    ],
)
def test_a_header_that_does_not_match_its_tensors_is_refused_before_building(
    tmp_path, config, match
):
    path = tmp_path / "lying.safetensors"
    path.write_bytes(with_header(SHIPPED.read_bytes(), **config))
    with pytest.raises(ValueError, match=f"{path}: .*{match}"):
        load_checkpoint(path)


def test_a_header_claiming_thousands_of_blocks_is_refused_before_any_tensor_is_read(tmp_path):
    """A small file of 5,000 one-number tensors whose header claims 5,000 blocks (it took 15 s
    to refuse, building the claimed network): refused from the safetensors header, before the
    tensors are read (the body is corrupt here, and that is not what the error says)."""
    tensors = {f"t{i}": torch.zeros(1) for i in range(5000)}
    header = {
        "schema_version": SCHEMA_VERSION,
        "kind": "model",
        "model_config": ModelConfig(blocks=5000).to_dict(),
        "step": 0,
        "version": 0,
        "extra": {},
    }
    data = bytearray(encode_tensors(tensors, header))
    data[-4:] = b"\xff\xff\xff\xff"  # the last tensor's bytes: a checksum error, if read
    path = tmp_path / "claims.safetensors"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="has 60024 tensors, the file holds 5000"):
        load_checkpoint(path)


def test_the_size_cap_refuses_a_file_or_blob_unread(tmp_path):
    data = SHIPPED.read_bytes()
    with pytest.raises(
        ValueError, match=f"checkpoint .*: {len(data)} bytes, over the 100000-byte cap"
    ):
        load_checkpoint(SHIPPED, max_bytes=100_000)
    with pytest.raises(ValueError, match=r"weights v3: .* over the 1000-byte checkpoint cap"):
        decode_checkpoint(data, source="weights v3", max_bytes=1000)
    model, meta = load_checkpoint(SHIPPED, max_bytes=len(data))
    assert meta.config.blocks == 4 and model.config.channels == 32


# ------------------------------------------------------------------------------------------
# Actors: weights pulled from Redis
# ------------------------------------------------------------------------------------------


def worker_config(size: int = 8) -> dict:
    return {
        "seed": 0,
        "game": {"size": size},
        "selfplay": {"torch_threads": 1},
        "replay": {
            "namespace": "cz",
            "window_positions": 10_000,
            "connect_retries": 2,
            "connect_backoff_s": 0.001,
        },
        "evaluation": {"gating": False},
        "learner": {"max_checkpoint_mb": 1},
    }


def test_an_actor_keeps_its_weights_when_the_published_ones_are_bad(server, client, caplog):
    from actors.actor import SelfPlayWorker

    good = SHIPPED.read_bytes()
    channel = WeightsChannel(client, namespace="cz")
    channel.publish(good, 1)
    worker = SelfPlayWorker(worker_config(), 0, server.url, server.password)
    worker._poll_weights(wait=False)
    assert worker.version == 1
    reference = {k: v.clone() for k, v in worker.inference._module.state_dict().items()}
    six = Trainer(LEARNER, MODEL, 6, device=torch.device("cpu")).weights_bytes(9)
    bad = {
        2: with_header(good, blocks=20, channels=1024),
        3: nan_checkpoint_bytes(),
        4: good[: len(good) // 2],
        5: six,  # a 6x6 network for this 8x8 game
        6: good + bytes(1024 * 1024),  # over learner.max_checkpoint_mb
    }
    with caplog.at_level(logging.WARNING, logger="actors.actor"):
        for version, data in bad.items():
            channel.publish(data, version)
            worker._poll_weights(wait=False)
            assert worker.version == 1, version
    skipped = [r.getMessage() for r in caplog.records if "skips weights" in r.getMessage()]
    assert len(skipped) == len(bad)
    for message, what in zip(
        skipped,
        ["has 264 tensors", "holds NaN", "truncated", "for a 6x6 board", "checkpoint cap"],
        strict=True,
    ):
        assert what in message
    for name, value in worker.inference._module.state_dict().items():
        assert torch.equal(value, reference[name]), name
    channel.publish(good, 7)  # good weights after the bad ones are taken
    worker._poll_weights(wait=False)
    assert worker.version == 7


def test_a_cpu_actor_runs_the_configured_cpu_backend(server, client):
    from actors.actor import SelfPlayWorker
    from checkerzero.network.inference import auto_cpu_backend

    WeightsChannel(client, namespace="cz").publish(SHIPPED.read_bytes(), 1)
    backends = {}
    for chosen in ("auto", "jit", "eager"):
        cfg = worker_config()
        cfg["selfplay"]["cpu_backend"] = chosen
        cfg["selfplay"]["precision"] = "float32"  # auto is bf16 (eager) on a CPU with bf16 units
        worker = SelfPlayWorker(cfg, 0, server.url, server.password)
        worker._poll_weights(wait=False)
        backends[chosen] = worker.inference.backend
    # auto is the compiled core's forward pass on a CPU computing float32 with AVX2
    assert backends == {"auto": auto_cpu_backend(), "jit": "jit", "eager": "eager"}


# ------------------------------------------------------------------------------------------
# Resume
# ------------------------------------------------------------------------------------------


def _trainer() -> Trainer:
    torch.manual_seed(0)
    return Trainer(LEARNER, MODEL, 8, device=torch.device("cpu"))


def _saved_run(ckpt: Path, steps: int) -> list[Path]:
    trainer = _trainer()
    for batch in batches(steps, seed=7):
        trainer.step(batch)
        trainer.save(ckpt, keep=steps)
    return sorted(ckpt.glob("state_*.safetensors"))


def test_resume_falls_back_to_the_newest_state_that_loads(tmp_path, caplog):
    states = _saved_run(tmp_path, 4)
    assert [p.name for p in states][-1] == "state_00000004.safetensors"
    data = states[-1].read_bytes()
    states[-1].write_bytes(data[: len(data) // 2])  # a kill mid-copy, a full disk
    states[-2].write_bytes(nan_checkpoint_bytes())  # not even a training state
    trainer = Trainer(LEARNER, MODEL, 8, device=torch.device("cpu"))
    with caplog.at_level(logging.WARNING, logger="learner.trainer"):
        assert trainer.restore(tmp_path)
    assert trainer.counters.step == 2
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert f"skips a training state that does not load: {states[-1]}: truncated" in messages
    assert f"{states[-2]}: tensor 'value_head.4.bias' holds NaN" in messages
    assert "resumed from an older training state, state_00000002.safetensors" in messages
    # It is the state of step 2 exactly: the same as a trainer that stopped there.
    reference = _trainer()
    for batch in batches(2, seed=7):
        reference.step(batch)
    for (name, a), b in zip(
        reference.model.state_dict().items(), trainer.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_resume_with_no_state_that_loads_says_why_for_each(tmp_path):
    for path in _saved_run(tmp_path, 2):
        path.write_bytes(path.read_bytes()[:100])
    trainer = Trainer(LEARNER, MODEL, 8, device=torch.device("cpu"))
    with pytest.raises(ValueError, match=r"no training state .* loads \(2 tried\)") as err:
        trainer.restore(tmp_path)
    assert "state_00000001.safetensors" in str(err.value)
    assert "state_00000002.safetensors" in str(err.value)


def test_a_state_with_a_damaged_rng_state_is_skipped(tmp_path):
    """Found by the fuzz suite: a negative word in the saved Python RNG state raised
    OverflowError out of resume instead of a ValueError naming the file."""
    older = _saved_run(tmp_path, 1)[0]
    trainer = _trainer()
    trainer.step(batches(1, seed=7)[0])
    trainer.counters.step = 2
    rng = capture_rng_state()
    version, internal, gauss = rng["python"]
    rng["python"] = (version, (-1, *internal[1:]), gauss)
    newer = tmp_path / "state_00000002.safetensors"
    save_training_state(
        newer,
        trainer.model,
        trainer.optimizer,
        trainer.scheduler,
        step=2,
        counters=vars(trainer.counters).copy(),
        rng=rng,
    )
    resumed = _trainer()
    assert resumed.restore(tmp_path) and resumed.counters.step == 1
    older.unlink()
    with pytest.raises(ValueError, match=f"{newer}: bad counters or RNG state"):
        _trainer().restore(tmp_path)
