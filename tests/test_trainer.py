"""The trainer resumes exactly: a kill between two checkpoints loses nothing but unsaved steps."""

from __future__ import annotations

import numpy as np
import torch
from omegaconf import OmegaConf

from learner.losses import TrainBatch
from learner.trainer import Trainer

LEARNER = OmegaConf.create(
    {
        "device": "cpu",
        "threads": 1,
        "value_weight": 1.0,
        "optimizer": {
            "_target_": "torch.optim.SGD",
            "_partial_": True,
            "lr": 0.05,
            "momentum": 0.9,
            "weight_decay": 1e-4,
            "nesterov": True,
        },
        "scheduler": {
            "_target_": "torch.optim.lr_scheduler.MultiStepLR",
            "_partial_": True,
            "milestones": [3],
            "gamma": 0.5,
        },
    }
)
MODEL = {
    "blocks": 1,
    "channels": 8,
    "policy_channels": 4,
    "value_channels": 2,
    "value_hidden": 8,
    "in_planes": 15,
}


def batches(n: int, seed: int = 0) -> list[TrainBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        mask = rng.random((16, 128)) < 0.1
        mask[:, 0] = True
        pi = rng.random((16, 128)).astype(np.float32) * mask
        pi /= pi.sum(1, keepdims=True)
        wdl = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
        planes = (rng.random((16, 15, 8, 8)) < 0.2).astype(np.float32)
        out.append(TrainBatch(planes, mask, pi, wdl))
    return out


def test_resume_continues_bit_exactly(tmp_path):
    data = batches(6)
    torch.manual_seed(0)
    a = Trainer(LEARNER, MODEL, 8)
    for b in data[:3]:
        a.step(b)
    a.counters.version = 7
    a.save(tmp_path, keep=2)
    rest_a = [a.step(b).total for b in data[3:]]

    torch.manual_seed(123)  # a different initialisation, overwritten by the restore
    b = Trainer(LEARNER, MODEL, 8)
    assert b.restore(tmp_path)
    assert (b.counters.step, b.counters.samples, b.counters.version) == (3, 48, 7)
    assert b.lr == a.optimizer.param_groups[0]["initial_lr"] * 0.5  # the schedule's drop at step 3
    rest_b = [b.step(x).total for x in data[3:]]
    assert rest_a == rest_b


def test_restore_without_checkpoint_and_pruning(tmp_path):
    t = Trainer(LEARNER, MODEL, 8)
    assert not t.restore(tmp_path / "none")
    for b in batches(4):
        t.step(b)
        t.save(tmp_path, keep=2)
    states = sorted(p.name for p in tmp_path.glob("state_*.safetensors"))
    assert states == ["state_00000003.safetensors", "state_00000004.safetensors"]
    assert (tmp_path / "latest.safetensors").exists()


class _Clock:
    """learner.trainer's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_run_clock_sums_resumes_and_skips_the_time_between(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr("learner.trainer.time.monotonic", clock)
    a = Trainer(LEARNER, MODEL, 8)
    clock.now += 600.0  # ten minutes of running
    assert a.run_seconds() == 600.0
    a.save(tmp_path, keep=2)
    clock.now += 3 * 3600.0  # stopped for three hours: not the run's time
    b = Trainer(LEARNER, MODEL, 8)
    assert b.restore(tmp_path)
    assert b.run_seconds() == 600.0
    clock.now += 90.5
    assert b.run_seconds() == 690.5


def test_a_state_saved_before_the_run_clock_leaves_it_unknown(tmp_path, monkeypatch):
    from learner import training_state

    a = Trainer(LEARNER, MODEL, 8)
    a.step(batches(1)[0])
    real = training_state.save_training_state

    def without_clock(*args, counters, **kwargs):  # what a learner before the counter wrote
        return real(*args, counters={k: v for k, v in counters.items() if k != "run_s"}, **kwargs)

    monkeypatch.setattr("learner.trainer.save_training_state", without_clock)
    a.save(tmp_path, keep=2)
    b = Trainer(LEARNER, MODEL, 8)
    assert b.restore(tmp_path) and b.counters.step == 1
    assert b.run_seconds() is None
    monkeypatch.undo()
    b.step(batches(1)[0])
    b.save(tmp_path, keep=2)  # still unknown after the next save, never a clock from zero
    c = Trainer(LEARNER, MODEL, 8)
    assert c.restore(tmp_path) and c.counters.step == 2
    assert c.run_seconds() is None
