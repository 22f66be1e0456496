"""Network, losses, checkpoints and the inference wrapper (CPU, tiny models, a few seconds)."""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn

from checkerzero.network.checkpoint import load_checkpoint, save_checkpoint
from checkerzero.network.inference import NetworkInference, compute_dtype
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.network.precision import cpu_has_native_bf16
from game.encoding import num_actions
from game.mcts import Inference, UniformInference
from learner.losses import TrainBatch, policy_loss, train_step, value_loss
from learner.training_state import (
    capture_rng_state,
    load_training_state,
    restore_rng_state,
    save_training_state,
)

TINY = ModelConfig(
    board_size=8, blocks=2, channels=16, policy_channels=8, value_channels=2, value_hidden=32
)


class CodedMap(nn.Module):
    """Stands in for the policy head: out[:, d, r, c] = 1000 d + 10 r + c."""

    def __init__(self, size: int) -> None:
        super().__init__()
        d = torch.arange(4).view(4, 1, 1) * 1000
        r = torch.arange(size).view(1, size, 1) * 10
        c = torch.arange(size).view(1, 1, size)
        self.register_buffer("code", (d + r + c).float())

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.code.expand(h.shape[0], -1, -1, -1)


# (square number 1-based, row, col) worked out by hand from the diagram of each board.
HAND_SQUARES = {
    8: [(1, 0, 1), (4, 0, 7), (5, 1, 0), (14, 3, 2), (32, 7, 6)],
    6: [(1, 0, 1), (4, 1, 0), (8, 2, 3), (18, 5, 4)],
}


@pytest.mark.parametrize("size", [8, 6])
def test_policy_gather_matches_hand_computed_squares(size: int) -> None:
    model = CheckersNet(ModelConfig(board_size=size, blocks=1, channels=8)).eval()
    model.policy_head = CodedMap(size)
    logits, _ = model(torch.zeros(2, 15, size, size))
    assert logits.shape[1] == num_actions(size) == 2 * size * size
    for square, row, col in HAND_SQUARES[size]:
        for direction in range(4):
            action = (square - 1) * 4 + direction
            assert logits[1, action].item() == 1000 * direction + 10 * row + col


def test_policy_and_value_loss_on_hand_values() -> None:
    logits = torch.tensor([[0.0, 0.0, 50.0, 0.0]])  # the large logit is illegal: must not matter
    mask = torch.tensor([[True, True, False, False]])
    target = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    assert policy_loss(logits, target, mask).item() == pytest.approx(math.log(2))
    wdl = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    assert value_loss(wdl, torch.tensor([[0.0, 1.0, 0.0]])).item() == pytest.approx(math.log(4))
    soft = torch.tensor([[0.5, 0.5, 0.0]])
    assert value_loss(wdl, soft).item() == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(4))


def synthetic_batch(n: int = 64, seed: int = 0) -> TrainBatch:
    """Positions whose mask and targets are a deterministic function of the planes.

    Own men on random squares may step forward (directions 0, 1); the target move is the most
    advanced man stepping forward-left; the side with more men wins, equal counts draw.
    """
    rng = np.random.default_rng(seed)
    size, squares = 8, 32
    planes = np.zeros((n, 15, size, size), np.float32)
    planes[:, 14] = 1.0
    mask = np.zeros((n, 4 * squares), bool)
    target_pi = np.zeros((n, 4 * squares), np.float32)
    target_wdl = np.zeros((n, 3), np.float32)
    for i in range(n):
        own_count, opp_count = rng.integers(3, 9, size=2)
        occupied = rng.permutation(squares)[: own_count + opp_count]
        own, opp = occupied[:own_count], occupied[own_count:]
        for plane, sqs in ((0, own), (2, opp)):
            for sq in sqs:
                row, k = divmod(int(sq), size // 2)
                planes[i, plane, row, 2 * k + 1 if row % 2 == 0 else 2 * k] = 1.0
        mask[i, own * 4] = mask[i, own * 4 + 1] = True
        target_pi[i, own.max() * 4] = 1.0
        target_wdl[i, 0 if own_count > opp_count else 1 if own_count == opp_count else 2] = 1.0
    return TrainBatch(planes=planes, mask=mask, target_pi=target_pi, target_wdl=target_wdl)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_losses_fall_on_fixed_dataset(dtype: torch.dtype) -> None:
    """In float32, and under bf16 autocast (``learner.precision``'s choice on a CPU with native
    bf16): the weights and the optimizer's state stay float32 either way."""
    torch.manual_seed(0)
    model = CheckersNet(TINY)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    batch = synthetic_batch()
    history = [train_step(model, optimizer, batch, device="cpu", dtype=dtype) for _ in range(100)]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    first, last = history[0], history[-1]
    assert first.policy > 1.5  # about log(12 legal moves) at the start
    assert first.value > 0.9  # about log(3)
    assert last.policy < 0.1 * first.policy
    assert last.value < 0.1 * first.value
    assert last.total == pytest.approx(last.policy + last.value, rel=1e-5)


def test_precision_setting_picks_bf16_where_it_is_fast(tmp_path: Path) -> None:
    assert compute_dtype("float32", "cpu") == torch.float32
    assert compute_dtype("bfloat16", "cpu") == torch.bfloat16
    native = cpu_has_native_bf16()
    assert compute_dtype("auto", "cpu") == (torch.bfloat16 if native else torch.float32)
    with pytest.raises(ValueError, match="unknown precision 'half'"):
        compute_dtype("half", "cpu")

    def cpuinfo(flags: str) -> Path:
        path = tmp_path / f"cpuinfo-{len(flags)}"
        path.write_text(f"processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: {flags}\n")
        return path

    assert cpu_has_native_bf16(cpuinfo("fpu avx2 avx512f avx512_bf16 avx512_vnni"))
    assert cpu_has_native_bf16(cpuinfo("fpu avx2 amx_bf16 amx_tile"))
    assert not cpu_has_native_bf16(cpuinfo("fpu avx2 avx512f avx512bw"))  # emulated: slower
    assert not cpu_has_native_bf16(tmp_path / "absent")  # not Linux: float32


def test_train_batch_rejects_bad_dtype() -> None:
    batch = synthetic_batch(n=4)
    with pytest.raises(ValueError, match="target_pi"):
        TrainBatch(batch.planes, batch.mask, batch.target_pi.astype(np.float64), batch.target_wdl)
    with pytest.raises(ValueError, match="target_wdl"):
        TrainBatch(batch.planes, batch.mask, batch.target_pi, batch.target_wdl[:, :2].copy())


def _randomised_model(seed: int) -> CheckersNet:
    torch.manual_seed(seed)
    model = CheckersNet(TINY)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):  # non-default stats and scales must survive too
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
    return model.eval()


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path: Path) -> None:
    model = _randomised_model(1)
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, model, step=123, version=7, extra={"note": "x", "games": 5})
    loaded, meta = load_checkpoint(path)
    assert (meta.config, meta.step, meta.version, dict(meta.extra)) == (
        TINY,
        123,
        7,
        {"note": "x", "games": 5},
    )
    x = torch.from_numpy(synthetic_batch(n=8).planes)
    with torch.no_grad():
        for a, b in zip(model(x), loaded(x), strict=True):
            assert torch.equal(a, b)
    assert not loaded.training


def _corrupt(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "tiny":
        return data[:5]
    if how == "flipped":
        return data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    if how == "foreign":
        return safetensors.torch.save({"w": torch.ones(3)})
    return b"\x07" * 64  # garbage


@pytest.mark.parametrize("how", ["truncated", "tiny", "flipped", "foreign", "garbage"])
def test_bad_checkpoint_raises_value_error(tmp_path: Path, how: str) -> None:
    good = tmp_path / "good.safetensors"
    save_checkpoint(good, _randomised_model(2), step=1, version=1)
    bad = tmp_path / f"{how}.safetensors"
    bad.write_bytes(_corrupt(good.read_bytes(), how))
    with pytest.raises(ValueError, match=str(bad)):
        load_checkpoint(bad)


def _make_optimizer(
    kind: str, model: nn.Module
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    if kind == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(
            model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4
        )
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20)


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_training_state_resumes_bit_exactly(tmp_path: Path, kind: str) -> None:
    batch = synthetic_batch(n=16)
    torch.manual_seed(3)
    model = CheckersNet(TINY)
    optimizer, scheduler = _make_optimizer(kind, model)
    for _ in range(3):
        train_step(model, optimizer, batch, scheduler=scheduler, device="cpu")
    path = tmp_path / "state.safetensors"
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    save_training_state(
        path, model, optimizer, scheduler, step=3, counters={"games": 42}, rng=capture_rng_state()
    )
    draws = (random.random(), np.random.rand(), torch.rand(3))
    straight = [
        train_step(model, optimizer, batch, scheduler=scheduler, device="cpu") for _ in range(2)
    ]

    torch.manual_seed(99)  # a different initialisation that the load must overwrite
    resumed = CheckersNet(TINY)
    opt2, sched2 = _make_optimizer(kind, resumed)
    state = load_training_state(path, resumed, opt2, sched2)
    assert (state.step, dict(state.counters)) == (3, {"games": 42})
    restore_rng_state(state.rng)
    assert random.random() == draws[0] and np.random.rand() == draws[1]
    assert torch.equal(torch.rand(3), draws[2])
    again = [train_step(resumed, opt2, batch, scheduler=sched2, device="cpu") for _ in range(2)]

    assert again == straight
    for (name, a), (_, b) in zip(
        model.state_dict().items(), resumed.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert sched2.get_last_lr() == scheduler.get_last_lr()


def test_training_state_rejects_other_model(tmp_path: Path) -> None:
    model = CheckersNet(TINY)
    optimizer, scheduler = _make_optimizer("sgd", model)
    path = tmp_path / "state.safetensors"
    save_training_state(path, model, optimizer, scheduler, step=0, counters={}, rng={})
    other = CheckersNet(ModelConfig(blocks=1, channels=8))
    with pytest.raises(ValueError, match="saved for"):
        load_training_state(path, other, *_make_optimizer("sgd", other))
    with pytest.raises(ValueError, match="expected a 'model'"):
        load_checkpoint(path)


def _legal_mask(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mask = rng.random((n, 128)) < 0.1
    mask[np.arange(n), rng.integers(0, 128, n)] = True  # at least one legal move per row
    return mask


def test_uniform_evaluator_priors() -> None:
    inference = UniformInference(128)
    assert isinstance(inference, Inference)
    mask = np.zeros((2, 128), bool)
    mask[0, [4, 9, 100]] = True
    mask[1, 7] = True
    priors, wdl = inference.evaluate(np.zeros((2, 15, 8, 8), np.float32), mask)
    expected = np.zeros((2, 128), np.float32)
    expected[0, [4, 9, 100]] = 1 / 3
    expected[1, 7] = 1.0
    np.testing.assert_allclose(priors, expected, rtol=1e-6)
    np.testing.assert_array_equal(wdl, np.array([[0, 1, 0], [0, 1, 0]], np.float32))


def test_network_inference_masks_and_normalises() -> None:
    model = _randomised_model(4)
    planes = synthetic_batch(n=32).planes
    mask = _legal_mask(32, seed=5)
    with torch.no_grad():
        logits, wdl_logits = (t.numpy().astype(np.float64) for t in model(torch.from_numpy(planes)))
    inference = NetworkInference(model, device="cpu", dtype="float32")
    assert isinstance(inference, Inference)
    priors, wdl = inference.evaluate(planes, mask)
    assert priors.dtype == np.float32 and wdl.dtype == np.float32
    assert np.all(priors[~mask] == 0.0)
    np.testing.assert_allclose(priors.sum(axis=1), 1.0, atol=1e-6)
    shifted = np.where(mask, np.exp(logits - logits.max(axis=1, keepdims=True)), 0.0)
    np.testing.assert_allclose(priors, shifted / shifted.sum(axis=1, keepdims=True), atol=1e-6)
    exp_wdl = np.exp(wdl_logits - wdl_logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(wdl, exp_wdl / exp_wdl.sum(axis=1, keepdims=True), atol=1e-6)

    # bf16 arithmetic (the default on a CPU with native bf16): the same distributions to
    # bf16's 8 bits of mantissa, still exactly masked and normalised in float32
    half = NetworkInference(copy.deepcopy(model), device="cpu", dtype="bfloat16")
    half_priors, half_wdl = half.evaluate(planes, mask)
    assert np.all(half_priors[~mask] == 0.0)
    np.testing.assert_allclose(half_priors.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(half_priors, priors, atol=0.02)
    np.testing.assert_allclose(half_wdl, wdl, atol=0.02)

    other = _randomised_model(5)
    inference.load_state(other.state_dict(), version=9)
    swapped, _ = inference.evaluate(planes, mask)
    assert inference.version == 9
    assert not np.allclose(swapped, priors)

    mask[3] = False
    with pytest.raises(ValueError, match=r"rows \[3\]"):
        inference.evaluate(planes, mask)
