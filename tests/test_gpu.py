"""The CUDA paths, opt-in: `pytest -m gpu` (skipped without CUDA; the GPU figures script runs
it first, so the figures rest on tests that can be rerun).

- The inference server on CUDA (CUDA graphs of fixed batch sizes, bf16, two batches in flight)
  gives every leaf what the network inference gives it on the same GPU, at batch sizes on, between
  and above the captured ones, from several clients at once, and new weights apply from the next
  batch with the captured graphs kept.
- The learner's training step on CUDA (bf16 autocast) lowers the loss on a fixed batch.
- Self-play on CUDA, through the server and with the network in the process, finishes games
  whose records are valid.
"""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from actors.self_play import run_self_play
from checkerzero.inference_server.client import RemoteInference
from checkerzero.inference_server.server import InferenceServer, ServerSettings
from checkerzero.network.inference import NetworkInference
from checkerzero.network.model import CheckersNet, ModelConfig
from game.encoding import NUM_PLANES, num_actions
from game.mcts import new_search
from game.records import GameRecord
from learner.losses import TrainBatch
from learner.trainer import Trainer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

A8 = num_actions(8)
BF16_ATOL = 0.03  # bf16 keeps ~3 significant digits: probabilities agree to a few hundredths


def model(seed: int, blocks: int = 4, channels: int = 16) -> CheckersNet:
    torch.manual_seed(seed)
    return CheckersNet(ModelConfig(blocks=blocks, channels=channels)).eval()


def inference(net: CheckersNet) -> NetworkInference:
    copy = CheckersNet(net.config)
    copy.load_state_dict(net.state_dict())
    return NetworkInference(copy, device="cuda")


def leaves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` real leaves from searches over many games (uniform answers)."""
    mcts = new_search(64, 8, {"simulations": 64, "leaves_per_game": 8}, seed=seed)
    planes, masks = [], []
    while sum(len(m) for m in masks) < n:
        p, m = mcts.gather()
        planes.append(p.copy())
        masks.append(m.copy())
        legal = m.astype(np.float32)
        wdl = np.tile(np.array([0.3, 0.4, 0.3], np.float32), (len(m), 1))
        mcts.expand(legal / legal.sum(1, keepdims=True), wdl)
    return np.concatenate(planes)[:n], np.concatenate(masks)[:n]


def test_the_server_on_cuda_answers_as_the_evaluator_does():
    a, b = model(0), model(1)
    server = InferenceServer(
        f"cz-gpu-{uuid.uuid4().hex}",
        NUM_PLANES,
        8,
        A8,
        ServerSettings(max_batch=512, capture=True),
        device="cuda",
    )
    server.load_weights(a, 1)
    ref_a, ref_b = inference(a), inference(b)
    results: dict[int, list] = {}
    sizes = [1, 63, 64, 65, 300, 512, 700]  # 700: above max_batch, sent in two parts

    def client_run(k: int) -> None:
        client = RemoteInference(server.address, NUM_PLANES, 8, A8, 1024)
        out = []
        for n in sizes:
            planes, mask = leaves(n, seed=100 * k + n)
            out.append((planes, mask, *client.evaluate(planes, mask), client.version))
        results[k] = out
        client.close()

    threads = [threading.Thread(target=client_run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    try:
        for out in results.values():
            for planes, mask, priors, wdl, version in out:
                want_p, want_w = ref_a.evaluate(planes, mask)
                assert version == 1
                np.testing.assert_allclose(priors, want_p, atol=BF16_ATOL)
                np.testing.assert_allclose(wdl, want_w, atol=BF16_ATOL)
                assert np.all(priors[~mask] == 0) and np.all(np.isfinite(priors))
        assert len(results) == 3
        stats = server.stats()
        assert stats["max_rows"] <= 512
        assert stats["rows"] == 3 * sum(sizes)
        # New weights: the next batch computes with them, through the same graphs.
        server.load_weights(b, 2)
        client = RemoteInference(server.address, NUM_PLANES, 8, A8, 512)
        planes, mask = leaves(200, seed=7)
        priors, _ = client.evaluate(planes, mask)
        assert client.version == 2
        # Every client's buffer is page-locked: batches go to the device and back by DMA alone.
        stats = server.stats()
        assert stats["page_locked"] == stats["clients"] >= 1
        np.testing.assert_allclose(priors, ref_b.evaluate(planes, mask)[0], atol=BF16_ATOL)
        client.close()
    finally:
        server.close()


def test_the_learner_step_on_cuda_lowers_the_loss():
    cfg = OmegaConf.create(
        {
            "device": "cuda",
            "threads": 1,
            "value_weight": 1.0,
            "precision": "auto",
            "optimizer": {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.1,
                          "momentum": 0.9},
        }
    )  # fmt: skip
    torch.manual_seed(0)
    trainer = Trainer(cfg, {"blocks": 2, "channels": 32}, 8)
    assert trainer.device.type == "cuda" and trainer.compute_dtype == torch.bfloat16
    rng = np.random.default_rng(0)
    planes = (rng.random((256, NUM_PLANES, 8, 8)) < 0.2).astype(np.float32)  # all distinct
    mask = rng.random((256, A8)) < 0.1
    mask[:, 0] = True
    choice = (rng.random(mask.shape) * mask).argmax(1)  # one legal action each: learnable to 0
    pi = np.eye(mask.shape[1], dtype=np.float32)[choice]
    wdl = np.eye(3, dtype=np.float32)[rng.integers(0, 3, len(mask))]
    batch = TrainBatch(planes, mask, pi, wdl)
    losses = [trainer.step(batch).total for _ in range(40)]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0]
    assert trainer.counters.step == 40


@pytest.mark.parametrize("through_server", [True, False])
def test_self_play_on_cuda_finishes_valid_games(config, through_server):
    cfg = config("mcts.simulations=32", "selfplay.games_in_parallel=32", "game.max_plies=80")
    net = model(2)
    server = None
    if through_server:
        server = InferenceServer(
            f"cz-gpu-{uuid.uuid4().hex}", NUM_PLANES, 8, A8, ServerSettings(), device="cuda"
        )
        server.load_weights(net, 3)
        ev = RemoteInference(server.address, NUM_PLANES, 8, A8, 32 * int(cfg.mcts.leaves_per_game))
    else:
        ev = inference(net)
    try:
        records, stats = run_self_play(ev, cfg, 8, seed=1)
    finally:
        if server is not None:
            ev.close()
            server.close()
    assert stats.games == len(records) == 8
    assert stats.evaluations > 0 and stats.positions == sum(r.num_decisions for r in records)
    assert stats.dropped == 0  # every finished record passed validation
    for r in records:  # and reads back as written
        assert GameRecord.from_bytes(r.to_bytes()).to_bytes() == r.to_bytes()
        assert r.network_version == 0
