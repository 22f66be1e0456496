"""The CPU backends of NetworkInference (jit: a frozen TorchScript graph; cpp: the compiled core's
forward pass): the same priors, values and moves as the eager path."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from checkerzero.network.inference import (
    NetworkInference,
    auto_cpu_backend,
    compile_for_cpu,
    fold_batchnorm,
    folded_layers,
    load_for_play,
)
from checkerzero.network.model import CheckersNet, ModelConfig, policy_gather_index
from evaluation.players.make import make_player
from game import _core
from game.encoding import encode_games
from game.openings import acf_deck
from game.position import Position

SHIPPED = Path(__file__).resolve().parents[1] / "game" / "data" / "long-320min.safetensors"
# Largest difference allowed between the two paths' probabilities: folding BatchNorm into the
# convolutions changes float32 rounding only (about 1e-6 was seen).
TOLERANCE = 2e-5


def _positions(n: int, seed: int = 0) -> list[Position]:
    """``n`` positions a few random plies after ACF ballots, none finished."""
    rng = random.Random(seed)
    deck = acf_deck()
    positions: list[Position] = []
    while len(positions) < n:
        pos = deck[rng.randrange(len(deck))].position()
        for _ in range(rng.randrange(0, 30)):
            if pos.is_over():
                break
            pos.play(rng.choice(pos.legal_moves()))
        if not pos.is_over():
            positions.append(pos)
    return positions


@pytest.fixture(scope="module")
def inferences() -> dict[str, NetworkInference]:
    auto, _ = load_for_play(SHIPPED, 8, device="cpu", dtype="float32")
    assert auto.backend == auto_cpu_backend()  # the default on a CPU computing float32
    return {
        backend: load_for_play(SHIPPED, 8, device="cpu", dtype="float32", backend=backend)[0]
        for backend in ("eager", "jit", "cpp")
    }


@pytest.mark.parametrize("backend", ["jit", "cpp"])
def test_the_cpu_backends_give_the_eager_priors_values_and_argmax(inferences, backend) -> None:
    eager, fast = inferences["eager"], inferences[backend]
    assert fast.compute_dtype == torch.float32  # auto means float32 with the CPU backends
    planes, mask = encode_games([p.game for p in _positions(300)])
    want_priors, want_wdl = eager.evaluate(planes, mask)
    for batch in (1, 3, 8, 16, 300):  # any batch size
        got = [
            fast.evaluate(planes[i : i + batch], mask[i : i + batch]) for i in range(0, 300, batch)
        ]
        priors = np.concatenate([g[0] for g in got])
        wdl = np.concatenate([g[1] for g in got])
        assert priors.dtype == np.float32 and wdl.dtype == np.float32
        assert np.all(priors[~mask] == 0.0)
        np.testing.assert_allclose(priors, want_priors, atol=TOLERANCE)
        np.testing.assert_allclose(wdl, want_wdl, atol=TOLERANCE)
        assert np.array_equal(priors.argmax(axis=1), want_priors.argmax(axis=1))
    empty = fast.evaluate(planes[:0], mask[:0])
    assert empty[0].shape == (0, 128) and empty[1].shape == (0, 3)


@pytest.mark.parametrize("backend", ["jit", "cpp"])
def test_the_cpu_backends_hot_swap_weights_and_refuse_what_they_cannot_run(backend) -> None:
    torch.manual_seed(3)
    model = _randomised(_config())
    other = _randomised(_config())
    planes, mask = encode_games([p.game for p in _positions(40, seed=1)])
    fast = NetworkInference(_copy(model), device="cpu", backend=backend)
    eager = NetworkInference(_copy(model), device="cpu", dtype="float32", backend="eager")
    np.testing.assert_allclose(
        fast.evaluate(planes, mask)[0], eager.evaluate(planes, mask)[0], atol=TOLERANCE
    )
    fast.load_state(other.state_dict(), version=4)
    eager.load_state(other.state_dict(), version=4)
    assert fast.version == 4
    for got, want in zip(fast.evaluate(planes, mask), eager.evaluate(planes, mask), strict=True):
        np.testing.assert_allclose(got, want, atol=TOLERANCE)
    # the folded copy's function equals the module's
    with torch.no_grad():
        x = torch.from_numpy(planes)
        for got, want in zip(fold_batchnorm(other)(x), other.eval()(x), strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4)
    assert NetworkInference(_copy(model), device="cpu", dtype="bfloat16").backend == "eager"
    assert NetworkInference(_copy(model), device="cpu", backend="eager").backend == "eager"
    with pytest.raises(ValueError, match="unknown backend 'onnx'"):
        NetworkInference(_copy(model), device="cpu", backend="onnx")
    with pytest.raises(ValueError, match=f"backend {backend} runs float32"):
        NetworkInference(_copy(model), device="cpu", dtype="bfloat16", backend=backend)
    with pytest.raises(ValueError, match="backend must be auto, eager, jit, cpp"):
        make_player(f"{SHIPPED}:sims=8,backend=fast")


@pytest.mark.parametrize(
    "config",
    [
        ModelConfig(blocks=0, channels=8),
        ModelConfig(blocks=1, channels=12, policy_channels=5, value_channels=3, value_hidden=20),
        ModelConfig(board_size=6, blocks=2, channels=24, value_hidden=72),
        ModelConfig(blocks=1, channels=40, policy_channels=17, value_channels=9, value_hidden=130),
    ],
    ids=["no-blocks", "odd-widths", "6x6", "wide"],
)
@pytest.mark.parametrize("kernel", ["native", "portable"])
def test_cpp_runs_every_shape_on_either_kernel(config, kernel, monkeypatch) -> None:
    """Widths that are not multiples of the vector width, no residual block, the small board,
    and the portable copy of the code (what a CPU without AVX2 runs) all give eager's outputs."""
    if kernel == "portable":
        monkeypatch.setenv("CHECKERZERO_CPU_KERNEL", "portable")
    torch.manual_seed(5)
    model = _randomised(config)
    cpp = NetworkInference(_copy(model), device="cpu", backend="cpp")
    assert cpp._compiled is not None
    assert cpp._compiled.runs_avx2 == (kernel == "native" and _core.ConvNet.kernel() == "avx2+fma")
    eager = NetworkInference(_copy(model), device="cpu", dtype="float32", backend="eager")
    rng = np.random.default_rng(7)
    s = config.board_size
    planes = (rng.random((19, config.in_planes, s, s)) < 0.3).astype(np.float32)
    mask = rng.random((19, config.num_actions)) < 0.25
    mask[:, 5] = True
    for got, want in zip(cpp.evaluate(planes, mask), eager.evaluate(planes, mask), strict=True):
        np.testing.assert_allclose(got, want, atol=TOLERANCE)


def test_auto_is_cpp_only_where_the_core_runs_its_avx2_copy(monkeypatch) -> None:
    """The portable copy is correct but slower than torch: a CPU without AVX2+FMA gets jit."""
    native = "cpp" if _core.ConvNet.kernel() == "avx2+fma" else "jit"
    assert auto_cpu_backend() == native
    monkeypatch.setenv("CHECKERZERO_CPU_KERNEL", "portable")
    assert _core.ConvNet.kernel() == "portable"
    assert auto_cpu_backend() == "jit"
    model = _randomised(_config())
    assert NetworkInference(model, device="cpu", dtype="float32").backend == "jit"


def test_cpp_refuses_weights_that_do_not_fit_with_a_clear_error() -> None:
    torch.manual_seed(6)
    model = _randomised(_config())
    good = compile_for_cpu(model)
    cfg = model.config
    args = (cfg.board_size, cfg.in_planes, cfg.channels, cfg.blocks, cfg.policy_channels)
    heads = (cfg.value_channels, cfg.value_hidden)
    index = policy_gather_index(cfg.board_size).to(torch.int32).numpy()
    layers = folded_layers(model)
    assert good.evaluate(*encode_games([p.game for p in _positions(2, seed=4)]))[0].shape == (
        2,
        128,
    )
    with pytest.raises(ValueError, match="8 layers, expected 10"):
        _core.ConvNet(*args, *heads, layers[:-2], index)
    bad = [(w.copy(), b.copy()) for w, b in layers]
    bad[3][0].flat[7] = np.nan
    with pytest.raises(ValueError, match=r"tower conv \(layer 3\) has a non-finite weight"):
        _core.ConvNet(*args, *heads, bad, index)
    with pytest.raises(ValueError, match=r"stem \(layer 0\) has 1 biases, expected 16"):
        _core.ConvNet(*args, *heads, [(layers[0][0], layers[0][1][:1]), *layers[1:]], index)
    with pytest.raises(ValueError, match="policy index entry 9999 out of range"):
        _core.ConvNet(*args, *heads, layers, np.full_like(index, 9999))
    with pytest.raises(ValueError, match="board size 7"):
        _core.ConvNet(7, *args[1:], *heads, layers, index)
    with pytest.raises(ValueError, match="planes must be"):
        good.evaluate(np.zeros((1, cfg.in_planes, 6, 6), np.float32), np.ones((1, 128), bool))
    with pytest.raises(ValueError, match="mask must be"):
        good.evaluate(np.zeros((2, cfg.in_planes, 8, 8), np.float32), np.ones((1, 128), bool))


@pytest.mark.parametrize("backend", ["jit", "cpp"])
def test_a_cpu_backend_player_plays_the_eager_players_moves(backend) -> None:
    eager = make_player(f"{SHIPPED}:sims=64,backend=eager")
    fast = make_player(f"{SHIPPED}:sims=64,backend={backend}")
    assert fast.name.endswith(f",backend={backend}") and eager.name.endswith(",backend=eager")
    assert "backend" not in make_player(f"{SHIPPED}:sims=1").name  # auto is not named
    for pos in _positions(24, seed=2):
        eager.reset()
        fast.reset()
        assert str(fast.choose(pos.copy())) == str(eager.choose(pos.copy())), pos.fen()


def _randomised(config: ModelConfig) -> CheckersNet:
    """A network with nonzero BatchNorm statistics and scales, so folding has work to do."""
    net = CheckersNet(config)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
            m.running_mean.uniform_(-0.3, 0.3)
            m.running_var.uniform_(0.5, 2.0)
    return net.eval()


def _config() -> ModelConfig:
    return ModelConfig(blocks=2, channels=16)


def _copy(model: CheckersNet) -> CheckersNet:
    return copy.deepcopy(model)
