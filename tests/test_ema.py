"""The moving average of the weights (learner.ema_decay): its arithmetic, what the run publishes
with it on, and that it survives a resume, also from a training state written before it existed."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from safetensors.torch import load as safetensors_load
from test_trainer import LEARNER, MODEL, batches

from checkerzero.network.checkpoint import decode_checkpoint, load_checkpoint
from checkerzero.store.weights import WeightsChannel
from learner.ema import WeightsEma
from learner.trainer import NonFiniteWeightsError, Trainer

GOLDEN_V1 = Path(__file__).resolve().parent / "golden" / "training_state_v1"
# The network of the schema-1 training state in GOLDEN_V1, written by the code before the
# average existed: Trainer(LEARNER, V1_MODEL, 8) after torch.manual_seed(0) and two steps on
# test_trainer.batches(2), weights version 2, saved with Trainer.save.
V1_MODEL = {
    "blocks": 1,
    "channels": 4,
    "policy_channels": 2,
    "value_channels": 1,
    "value_hidden": 4,
    "in_planes": 15,
}


def learner_cfg(**changes):
    cfg = OmegaConf.merge(LEARNER, changes)
    return cfg


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict, floating-point tensors in float64 for the hand computation."""
    return {
        k: v.detach().clone().double() if v.is_floating_point() else v.detach().clone()
        for k, v in model.state_dict().items()
    }


def test_average_matches_a_hand_computation(tmp_path: Path) -> None:
    torch.manual_seed(0)
    trainer = Trainer(learner_cfg(ema_decay=0.5), MODEL, 8)
    raw = [snapshot(trainer.model)]  # w0, then the raw weights after each step
    for batch in batches(3):
        trainer.step(batch)
        raw.append(snapshot(trainer.model))
    # The decay of update n is min(0.5, (1 + n) / (10 + n)): 1/10, 2/11, 3/12 here.
    expected = {}
    for name, w0 in raw[0].items():
        if not w0.is_floating_point():
            continue
        e = w0
        for n, decay in enumerate([1 / 10, 2 / 11, 3 / 12]):
            e = decay * e + (1 - decay) * raw[n + 1][name]
        expected[name] = e
    got = snapshot(trainer.ema.model)
    assert trainer.ema.updates == 3
    for name, want in expected.items():
        torch.testing.assert_close(got[name], want, rtol=0, atol=1e-6, msg=name)
    # BatchNorm statistics are averaged too, the step counter of BatchNorm copied.
    assert "tower.0.bn1.running_var" in expected
    assert not torch.equal(got["tower.0.bn1.running_var"], raw[-1]["tower.0.bn1.running_var"])
    assert torch.equal(
        got["tower.0.bn1.num_batches_tracked"], raw[-1]["tower.0.bn1.num_batches_tracked"]
    )
    # ... and a parameter by hand, one element: w0, w1, w2, w3 -> e3.
    w = [float(r["value_head.6.bias"][0]) for r in raw]
    e = w[0]
    e = 0.1 * e + 0.9 * w[1]
    e = (2 / 11) * e + (9 / 11) * w[2]
    e = 0.25 * e + 0.75 * w[3]
    assert float(got["value_head.6.bias"][0]) == pytest.approx(e, abs=1e-7)


def test_decay_warms_up_to_the_configured_one() -> None:
    ema = WeightsEma(torch.nn.Linear(2, 2), 0.999)
    assert ema.decay_at(0) == pytest.approx(0.1)
    assert ema.decay_at(80) == pytest.approx(0.9)
    assert ema.decay_at(8_990) == pytest.approx(0.999)
    assert ema.decay_at(100_000) == 0.999


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan"), "high"])
def test_bad_decay_is_refused(bad) -> None:
    with pytest.raises(ValueError, match=r"learner\.ema_decay must be"):
        Trainer(learner_cfg(ema_decay=bad), MODEL, 8)


def test_skipped_steps_leave_the_average(tmp_path: Path) -> None:
    trainer = Trainer(learner_cfg(ema_decay=0.9), MODEL, 8)
    good, poisoned = batches(2)
    trainer.step(good)
    before = snapshot(trainer.ema.model)
    poisoned.planes[0, 0, 0, 0] = np.nan
    assert trainer.step(poisoned).skipped
    assert trainer.ema.updates == 1
    for name, value in snapshot(trainer.ema.model).items():
        assert torch.equal(value, before[name])


def test_published_weights_and_checkpoints_are_the_average(client, tmp_path: Path) -> None:
    trainer = Trainer(learner_cfg(ema_decay=0.9), MODEL, 8)
    for batch in batches(4):
        trainer.step(batch)
    learner, actor = WeightsChannel(client), WeightsChannel(client)
    learner.publish(trainer.weights_bytes(1), 1)
    model, meta = decode_checkpoint(actor.poll().data)
    published = model.state_dict()
    assert meta.step == 4
    average, raw = trainer.ema.model.state_dict(), trainer.model.state_dict()
    assert all(torch.equal(published[k], average[k]) for k in average)
    assert not all(torch.equal(published[k], raw[k]) for k in raw)
    # The files a match or the strength chart reads are the average too; the training state
    # keeps both.
    state_path = trainer.save(tmp_path, keep=1)
    for path in (
        tmp_path / "latest.safetensors",
        tmp_path / "weights" / "step_00000004.safetensors",
    ):
        on_disk = load_checkpoint(path)[0].state_dict()
        assert all(torch.equal(on_disk[k], average[k]) for k in average), path
    stored = safetensors_load(state_path.read_bytes())
    assert all(torch.equal(stored[f"model/{k}"], raw[k]) for k in raw)
    assert all(torch.equal(stored[f"ema/{k}"], average[k]) for k in average)


def test_without_the_average_the_raw_weights_are_published(client) -> None:
    trainer = Trainer(LEARNER, MODEL, 8)
    assert trainer.ema is None
    trainer.step(batches(1)[0])
    WeightsChannel(client).publish(trainer.weights_bytes(1), 1)
    published = decode_checkpoint(WeightsChannel(client).poll().data)[0].state_dict()
    raw = trainer.model.state_dict()
    assert all(torch.equal(published[k], raw[k]) for k in raw)


def test_non_finite_average_is_never_published(tmp_path: Path) -> None:
    trainer = Trainer(learner_cfg(ema_decay=0.9), MODEL, 8)
    trainer.step(batches(1)[0])
    with torch.no_grad():
        trainer.ema.model.stem[0].weight[0, 0, 0, 0] = float("inf")
    with pytest.raises(NonFiniteWeightsError, match=r"weights average's tensor 'stem\.0\.weight'"):
        trainer.weights_bytes(1)
    with pytest.raises(NonFiniteWeightsError):
        trainer.save(tmp_path, keep=1)
    assert not any(tmp_path.iterdir())


def test_resume_continues_the_same_average(tmp_path: Path) -> None:
    data = batches(6)
    torch.manual_seed(0)
    a = Trainer(learner_cfg(ema_decay=0.95), MODEL, 8)
    for batch in data[:3]:
        a.step(batch)
    a.save(tmp_path, keep=1)
    for batch in data[3:]:
        a.step(batch)

    torch.manual_seed(7)  # another initialisation: everything comes from the training state
    b = Trainer(learner_cfg(ema_decay=0.95), MODEL, 8)
    assert b.restore(tmp_path)
    assert b.ema.updates == 3
    for batch in data[3:]:
        b.step(batch)
    assert b.ema.updates == 6
    mine, theirs = a.ema.model.state_dict(), b.ema.model.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)  # bit for bit

    # A run that turned the average off resumes from the same state with the raw weights.
    c = Trainer(LEARNER, MODEL, 8)
    assert c.restore(tmp_path) and c.ema is None and c.counters.step == 3


def test_training_state_from_before_the_average_resumes(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints"
    shutil.copytree(GOLDEN_V1, ckpt)
    stored = safetensors_load((ckpt / "state_00000002.safetensors").read_bytes())
    # Written by the code before the average: schema 1, model weights and no average.
    assert not any(k.startswith("ema/") for k in stored)

    trainer = Trainer(learner_cfg(ema_decay=0.999), V1_MODEL, 8)
    assert trainer.restore(ckpt)
    assert (trainer.counters.step, trainer.counters.version) == (2, 2)
    raw, average = trainer.model.state_dict(), trainer.ema.model.state_dict()
    for name, tensor in raw.items():
        assert torch.equal(tensor, stored[f"model/{name}"]), name
        assert torch.equal(average[name], tensor), name  # the average starts from them
    assert trainer.ema.updates == 0
    assert raw["stem.0.weight"].flatten()[:4].tolist() == pytest.approx(
        [-0.0008, 0.0467, -0.0701, -0.0642], abs=1e-4
    )
    # It trains on, and what it writes now resumes with the average.
    trainer.step(batches(3)[2])
    trainer.save(ckpt, keep=1)
    again = Trainer(learner_cfg(ema_decay=0.999), V1_MODEL, 8)
    assert again.restore(ckpt) and again.ema.updates == 1 and again.counters.step == 3
