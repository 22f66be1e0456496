"""Non-finite numbers never reach the weights, the actors or the checkpoints.

A batch with an infinite value target (or a 0/0 policy target) made every weight NaN in one step;
the NaN weights were then published to every actor and checkpointed until no good state was left,
and a NaN checkpoint loaded and played without a word. Now such a step is skipped and counted,
non-finite weights are refused by publish and save, and a non-finite checkpoint by load.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_save
from test_trainer import LEARNER, MODEL, batches

from checkerzero.network import checkpoint
from checkerzero.network.checkpoint import encode_checkpoint, load_checkpoint, save_checkpoint
from learner.losses import TrainBatch
from learner.trainer import NonFiniteWeightsError, Trainer


def _trainer() -> Trainer:
    torch.manual_seed(0)
    return Trainer(LEARNER, MODEL, 8, device=torch.device("cpu"))


def _state(trainer: Trainer) -> dict[str, torch.Tensor]:
    """Everything a step may change: weights, BatchNorm statistics, optimizer buffers."""
    out = {f"model/{k}": v.clone() for k, v in trainer.model.state_dict().items()}
    for i, s in enumerate(trainer.optimizer.state.values()):
        out |= {f"opt/{i}/{k}": v.clone() for k, v in s.items() if isinstance(v, torch.Tensor)}
    return out


def _poisoned(batch: TrainBatch, kind: str) -> TrainBatch:
    pi, wdl, planes = batch.target_pi.copy(), batch.target_wdl.copy(), batch.planes.copy()
    if kind == "inf_value_target":  # a record's root_wdl of inf, mixed into the target
        wdl[3] = [np.inf, 0, 0]
    elif kind == "nan_policy_target":  # a zero visit count: 0/0
        pi[5] = np.nan
    else:  # non-finite input planes: the forward pass itself goes non-finite
        planes[2, 0, 0, 0] = np.inf
    return TrainBatch(planes, batch.mask, pi, wdl)


@pytest.mark.parametrize("kind", ["inf_value_target", "nan_policy_target", "inf_planes"])
def test_a_poisoned_batch_is_skipped_and_counted_and_the_weights_stay_finite(kind):
    trainer = _trainer()
    good = batches(4, seed=1)
    trainer.step(good[0])
    trainer.step(good[1])
    before = _state(trainer)
    lr = trainer.lr
    losses = trainer.step(_poisoned(good[2], kind))
    assert losses.skipped
    assert trainer.counters.skipped_nonfinite == 1 and trainer.counters.step == 2
    after = _state(trainer)
    assert after.keys() == before.keys()
    for name, value in before.items():  # nothing moved: no NaN, no half-applied step
        assert torch.equal(after[name], value), name
    assert trainer.lr == lr and trainer.scheduler.last_epoch == 2
    assert all(p.grad is None for p in trainer.model.parameters())
    # Training goes on from the same place, and the step after is an ordinary one.
    losses = trainer.step(good[3])
    assert not losses.skipped and np.isfinite(losses.total) and trainer.counters.step == 3
    assert all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())


def test_the_skipped_step_equals_no_step():
    """A run that meets a poisoned batch ends where a run without it ends."""
    good = batches(3, seed=2)
    plain, poisoned = _trainer(), _trainer()
    for b in good:
        plain.step(b)
    poisoned.step(good[0])
    poisoned.step(_poisoned(good[1], "inf_value_target"))
    poisoned.step(good[1])
    poisoned.step(good[2])
    for (name, a), b in zip(
        plain.model.state_dict().items(), poisoned.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    drawn = plain.counters.samples + len(good[1])  # the skipped batch was drawn all the same
    assert vars(poisoned.counters) == {
        **vars(plain.counters),
        "skipped_nonfinite": 1,
        "samples": drawn,
    }


def _poison_weights(trainer: Trainer) -> str:
    name = "tower.0.conv1.weight"
    with torch.no_grad():
        trainer.model.state_dict()[name][0, 0, 0, 0] = float("nan")
    return name


def test_non_finite_weights_are_neither_published_nor_checkpointed(tmp_path):
    trainer = _trainer()
    trainer.step(batches(1)[0])
    trainer.save(tmp_path, keep=3)
    saved = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    name = _poison_weights(trainer)
    with pytest.raises(NonFiniteWeightsError, match=f"'{name}' holds NaN or infinite values"):
        trainer.weights_bytes(2)
    trainer.counters.step += 1
    with pytest.raises(NonFiniteWeightsError, match=name):
        trainer.save(tmp_path, keep=3)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == saved  # nothing new
    with pytest.raises(ValueError, match=name):  # the library functions refuse it as well
        encode_checkpoint(trainer.model, step=1, version=1)
    with pytest.raises(ValueError, match=name):
        save_checkpoint(tmp_path / "x.safetensors", trainer.model, step=1, version=1)
    assert not (tmp_path / "x.safetensors").exists()


def nan_checkpoint_bytes(tensor: str = "value_head.4.bias") -> bytes:
    """A model checkpoint, well formed and with a correct checksum, holding one NaN."""
    model = _trainer().model
    tensors = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    tensors[tensor][0] = float("nan")
    header = {
        "schema_version": checkpoint.SCHEMA_VERSION,
        "kind": checkpoint.KIND_MODEL,
        "model_config": model.config.to_dict(),
        "step": 1,
        "version": 1,
        "extra": {},
        "sha256": checkpoint._tensor_digest(tensors),
    }
    return safetensors_save(tensors, metadata={checkpoint.METADATA_KEY: json.dumps(header)})


def test_a_checkpoint_holding_nan_is_refused_naming_the_file_and_the_tensor(tmp_path):
    path = tmp_path / "poisoned.safetensors"
    path.write_bytes(nan_checkpoint_bytes("value_head.4.bias"))
    with pytest.raises(ValueError, match=f"{path}: tensor 'value_head.4.bias' holds NaN"):
        load_checkpoint(path)
