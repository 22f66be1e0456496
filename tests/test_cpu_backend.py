"""The jit CPU backend of NetworkEvaluator: the same priors, values and moves as the eager path."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from checkerzero.network.inference import NetworkEvaluator, fold_batchnorm, load_for_play
from checkerzero.network.model import CheckersNet, ModelConfig
from evaluation.players import make_player
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
def evaluators() -> tuple[NetworkEvaluator, NetworkEvaluator]:
    jit, _ = load_for_play(SHIPPED, 8, device="cpu", dtype="float32")
    assert jit.backend == "jit"  # the default, auto, is jit on a CPU computing float32
    eager, _ = load_for_play(SHIPPED, 8, device="cpu", dtype="float32", backend="eager")
    return eager, jit


def test_jit_gives_the_eager_priors_values_and_argmax(evaluators) -> None:
    eager, jit = evaluators
    assert jit.compute_dtype == torch.float32  # auto means float32 with the jit backend
    planes, mask = encode_games([p.game for p in _positions(300)])
    want_priors, want_wdl = eager.evaluate(planes, mask)
    for batch in (1, 3, 8, 16, 300):  # any batch size runs through the one traced graph
        got = [
            jit.evaluate(planes[i : i + batch], mask[i : i + batch]) for i in range(0, 300, batch)
        ]
        priors = np.concatenate([g[0] for g in got])
        wdl = np.concatenate([g[1] for g in got])
        assert priors.dtype == np.float32 and wdl.dtype == np.float32
        assert np.all(priors[~mask] == 0.0)
        np.testing.assert_allclose(priors, want_priors, atol=TOLERANCE)
        np.testing.assert_allclose(wdl, want_wdl, atol=TOLERANCE)
        assert np.array_equal(priors.argmax(axis=1), want_priors.argmax(axis=1))
    empty = jit.evaluate(planes[:0], mask[:0])
    assert empty[0].shape == (0, 128) and empty[1].shape == (0, 3)


def test_jit_hot_swaps_weights_and_refuses_what_it_cannot_run() -> None:
    torch.manual_seed(3)
    model = CheckersNet(_config())
    other = CheckersNet(_config())
    for net in (model, other):  # nonzero BatchNorm statistics, so folding has work to do
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
    planes, mask = encode_games([p.game for p in _positions(40, seed=1)])
    jit = NetworkEvaluator(_copy(model), device="cpu", backend="jit")
    eager = NetworkEvaluator(_copy(model), device="cpu", dtype="float32", backend="eager")
    np.testing.assert_allclose(
        jit.evaluate(planes, mask)[0], eager.evaluate(planes, mask)[0], atol=TOLERANCE
    )
    jit.load_state(other.state_dict(), version=4)
    eager.load_state(other.state_dict(), version=4)
    assert jit.version == 4
    for got, want in zip(jit.evaluate(planes, mask), eager.evaluate(planes, mask), strict=True):
        np.testing.assert_allclose(got, want, atol=TOLERANCE)
    # the folded copy's function equals the module's
    with torch.no_grad():
        x = torch.from_numpy(planes)
        for got, want in zip(fold_batchnorm(other)(x), other.eval()(x), strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4)
    assert NetworkEvaluator(_copy(model), device="cpu", dtype="bfloat16").backend == "eager"
    assert NetworkEvaluator(_copy(model), device="cpu", backend="eager").backend == "eager"
    with pytest.raises(ValueError, match="unknown backend 'onnx'"):
        NetworkEvaluator(_copy(model), device="cpu", backend="onnx")
    with pytest.raises(ValueError, match="backend jit runs float32"):
        NetworkEvaluator(_copy(model), device="cpu", dtype="bfloat16", backend="jit")
    with pytest.raises(ValueError, match="backend must be auto, eager or jit"):
        make_player(f"{SHIPPED}:sims=8,backend=fast")


def test_a_jit_player_plays_the_eager_players_moves() -> None:
    eager = make_player(f"{SHIPPED}:sims=64,backend=eager")
    jit = make_player(f"{SHIPPED}:sims=64,backend=jit")
    assert jit.name.endswith(",backend=jit") and eager.name.endswith(",backend=eager")
    assert "backend" not in make_player(f"{SHIPPED}:sims=1").name  # auto is not named
    for pos in _positions(24, seed=2):
        eager.reset()
        jit.reset()
        assert str(jit.choose(pos.copy())) == str(eager.choose(pos.copy())), pos.fen()


def _config() -> ModelConfig:
    return ModelConfig(blocks=2, channels=16)


def _copy(model: CheckersNet) -> CheckersNet:
    return copy.deepcopy(model)
