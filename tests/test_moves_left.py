"""The moves-left head: its target from hand-built records, its loss, training, checkpoints.

Targets count plies (a whole move; the jumps of one multi-jump are one ply) to the end of the
game; games cut short (resignation, ply cap, database) give lower bounds (learner/moves_left.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from record_cases import random_game_record
from safetensors.torch import load as safetensors_load

from checkerzero.network.checkpoint import (
    decode_checkpoint,
    encode_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from checkerzero.network.inference import NetworkInference
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.store.replay import ReplayStore
from game import Position, encoding
from game.records import RESIGNED, GameRecord, Result, Termination
from learner.losses import TrainBatch, train_step
from learner.mirror import ReplayMirror
from learner.moves_left import moves_left_loss, moves_left_targets, plies_left
from learner.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "game" / "data" / "laptop-60min.safetensors"
TINY = ModelConfig(
    blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16, moves_left_head=True
)

# White to move; after 18-14 Black must take both men with 9x18x27 (two decisions of one
# move) and White, with no piece left, has no move: a game of 2 plies in 3 decisions.
#   +-----------------+
#   |   b   .   .   . |   1-4
#   | .   .   .   .   |   5-8
#   |   b   .   .   . |   9-12
#   | .   .   .   .   |  13-16
#   |   .   w   .   . |  17-20
#   | .   .   w   .   |  21-24
#   |   .   .   .   . |  25-28
#   | .   .   .   .   |  29-32
#   +-----------------+
SHORT_GAME = ("W:W18,23:B9,1", ["18-14", "9x18x27"])
# The same with a third White man on 30, which lets White move on; White resigns instead.
RESIGNED_GAME = ("W:W18,23,30:B9,1", ["18-14", "9x18x27"])


def hand_record(
    fen: str, moves: list[str], *, resign: bool = False, termination: Termination | None = None
) -> GameRecord:
    """The record of `moves` played from `fen`, one decision per action (each jump), every
    decision unsearched (its played action, one visit); `resign`: the side to move at the end
    resigns (a last decision with no move)."""
    position = Position.from_fen(fen)
    game = position.game
    states, played = [], []
    for text in moves:
        for action in game.actions_of(position.parse_move(text)):
            states.append(game.pack_history()[0])
            played.append(action)
            game.step(action)
    if resign:
        states.append(game.pack_history()[0])
        played.append(RESIGNED)
        result = Result.BLACK_WIN if game.white_to_move else Result.WHITE_WIN
        termination = Termination.RESIGNATION
    else:
        result = Result(game.result())
        termination = termination or Termination(game.end_reason())
    t = len(states)
    visits = [a if a != RESIGNED else 0 for a in played]
    if resign:  # a resignation's decision still lists a legal action it searched
        visits[-1] = int(game.legal_actions()[0])
    return GameRecord(
        board_size=8,
        positions=np.array(states, np.uint32),
        played=np.array(played, np.uint8),
        visit_offsets=np.arange(t + 1, dtype=np.uint32),
        visit_actions=np.array(visits, np.uint8),
        visit_counts=np.ones(t, np.uint16),
        root_wdl=np.full((t, 3), np.nan, np.float16),
        result=result,
        termination=termination,
    )


def test_targets_of_a_game_that_ended_by_the_rules() -> None:
    record = hand_record(*SHORT_GAME)
    assert record.termination == Termination.NO_MOVES and record.result == Result.BLACK_WIN
    left, exact = plies_left(record)
    # decisions: White 18-14 | Black 9x18 | Black 18x27 (the same move): 2, then 1 and 1 ply left
    assert left.tolist() == [2, 1, 1] and exact


def test_targets_of_games_cut_short_are_lower_bounds() -> None:
    resigned = hand_record(*RESIGNED_GAME, resign=True)
    left, exact = plies_left(resigned)
    # ... then White resigns at its turn: the game stopped there, 0 plies left at that decision
    assert left.tolist() == [2, 1, 1, 0] and not exact
    capped = dataclasses.replace(hand_record(*SHORT_GAME), termination=Termination.PLY_CAP)
    assert plies_left(capped)[0].tolist() == [2, 1, 1] and not plies_left(capped)[1]
    database = dataclasses.replace(capped, termination=Termination.DATABASE)
    assert not plies_left(database)[1]
    for rules in (Termination.REPETITION, Termination.FORTY_MOVE, Termination.NO_MOVES):
        assert plies_left(dataclasses.replace(capped, termination=rules))[1]

    left, exact = moves_left_targets([hand_record(*SHORT_GAME), resigned])
    assert left.tolist() == [2, 1, 1, 2, 1, 1, 0]
    assert exact.tolist() == [True] * 3 + [False] * 4


def test_targets_count_moves_not_jumps_in_a_random_game() -> None:
    record = random_game_record(seed=3, size=8, max_plies=200)
    game = Position(8).game
    plies = []  # the core's ply counter before each decision (one per completed move)
    for action in record.played:
        plies.append(game.ply)
        game.step(int(action))
    left, _ = plies_left(record)
    assert left.tolist() == [game.ply - p for p in plies]
    assert len(record.played) > game.ply  # the game held a multi-jump: the counts differ


def test_loss_on_hand_values() -> None:
    predicted = torch.tensor([30.0, 10.0, 5.0, 40.0, 60.0])
    target = torch.tensor([20.0, 20.0, 20.0, 20.0, 20.0])
    exact = torch.tensor([True, True, False, False, True])
    loss, mae = moves_left_loss(predicted, target, exact)
    # In units of 20 plies, Huber threshold 0.5: errors +0.5, -0.5 (squared: 0.125 each),
    # censored -0.75 (linear: 0.5 * (0.75 - 0.25) = 0.25), censored +1.0 (above its bound: 0),
    # +2.0 (linear: 0.5 * (2.0 - 0.25) = 0.875).
    assert loss.item() == pytest.approx((0.125 + 0.125 + 0.25 + 0.0 + 0.875) / 5)
    assert mae.item() == pytest.approx((10 + 10 + 40) / 3)  # exact targets only
    _, none = moves_left_loss(predicted[2:4], target[2:4], exact[2:4])
    assert math.isnan(none.item())


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread while each test runs: two threads on two busy cores ran 10-60x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def fixed_batch(n: int = 64, seed: int = 0) -> TrainBatch:
    """Random positions whose plies left follow from the input (10 per piece on plane 0)."""
    rng = np.random.default_rng(seed)
    planes = (rng.random((n, 15, 8, 8)) < 0.15).astype(np.float32)
    mask = rng.random((n, 128)) < 0.1
    mask[:, 0] = True
    pi = rng.random((n, 128)).astype(np.float32) * mask
    pi /= pi.sum(1, keepdims=True)
    wdl = np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)]
    left = (10 * planes[:, 0].sum(axis=(1, 2))).astype(np.int32)
    exact = rng.random(n) < 0.75
    return TrainBatch(planes, mask, pi, wdl, moves_left=left, moves_left_exact=exact)


def test_head_loss_falls_on_a_fixed_dataset() -> None:
    torch.manual_seed(0)
    model = CheckersNet(TINY)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batch = fixed_batch(32)
    first = train_step(model, opt, batch, moves_left_weight=1.0, device="cpu")
    for _ in range(60):
        last = train_step(model, opt, batch, moves_left_weight=1.0, device="cpu")
    assert first.moves_left > 1.0 and first.moves_left_mae > 40  # targets ~96 plies, output ~0
    assert last.moves_left < 0.05 * first.moves_left
    assert last.moves_left_mae < 0.1 * first.moves_left_mae
    assert first.total == pytest.approx(first.policy + first.value + first.moves_left, rel=1e-5)


def test_without_the_head_nothing_changes() -> None:
    torch.manual_seed(0)
    plain = CheckersNet(dataclasses.replace(TINY, moves_left_head=False))
    torch.manual_seed(0)
    with_head = CheckersNet(TINY)
    batch = fixed_batch(8)
    a = train_step(plain, torch.optim.SGD(plain.parameters(), lr=0.1), batch, device="cpu")
    assert a.moves_left is None and a.moves_left_mae is None
    # The head leaves the policy and value outputs of the shared weights alone.
    x = torch.from_numpy(batch.planes)
    plain.load_state_dict(
        {k: v for k, v in with_head.state_dict().items() if not k.startswith("moves_left_head")}
    )
    plain.eval(), with_head.eval()
    for got, want in zip(with_head(x), plain(x), strict=True):
        assert torch.equal(got, want)
    with pytest.raises(ValueError, match="no moves-left head"):
        plain.forward_moves_left(x)
    # The inference wrapper (what the search calls) returns the same priors and WDL with it.
    got = NetworkInference(with_head, device="cpu").evaluate(batch.planes, batch.mask)
    want = NetworkInference(plain, device="cpu").evaluate(batch.planes, batch.mask)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_trainer_logs_the_head_loss_and_checks_its_weight() -> None:
    learner = OmegaConf.create(
        {
            "device": "cpu",
            "threads": 1,
            "value_weight": 1.0,
            "moves_left_weight": 0.5,
            "optimizer": {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.01},
        }
    )
    model = TINY.to_dict() | {"board_size": 8}
    losses = Trainer(learner, model, 8).step(fixed_batch(16))
    assert losses.total == pytest.approx(
        losses.policy + losses.value + 0.5 * losses.moves_left, rel=1e-5
    )
    for bad in (-1.0, float("nan"), "lots"):
        learner.moves_left_weight = bad
        with pytest.raises(ValueError, match=r"learner\.moves_left_weight"):
            Trainer(learner, model, 8)


def test_checkpoint_header_says_whether_the_head_is_there(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = CheckersNet(TINY).eval()
    save_checkpoint(tmp_path / "head.safetensors", model, step=3, version=2)
    loaded, meta = load_checkpoint(tmp_path / "head.safetensors")
    assert meta.config.moves_left_head and meta.schema_version == 2
    assert _header(tmp_path / "head.safetensors")["model_config"]["moves_left_head"] is True
    x = torch.from_numpy(fixed_batch(4).planes)
    for got, want in zip(loaded.forward_moves_left(x), model.forward_moves_left(x), strict=True):
        assert torch.equal(got, want)

    plain = CheckersNet(dataclasses.replace(TINY, moves_left_head=False))
    save_checkpoint(tmp_path / "plain.safetensors", plain, step=3, version=2)
    assert "moves_left_head" not in _header(tmp_path / "plain.safetensors")["model_config"]
    assert not load_checkpoint(tmp_path / "plain.safetensors")[0].config.moves_left_head

    # A header that denies the head its file holds (or claims one it lacks) is refused.
    forged = _with_header(
        encode_checkpoint(model, step=1, version=1),
        lambda h: h["model_config"].pop("moves_left_head"),
    )
    # Refused from the header alone, before a tensor is read: the model it claims has fewer
    # tensors than the file declares (the moves-left head's).
    with pytest.raises(ValueError, match=r"header's model .* has \d+ tensors, the file holds \d+"):
        decode_checkpoint(forged)


def test_todays_checkpoints_load_unchanged() -> None:
    model, meta = load_checkpoint(SHIPPED)
    assert meta.schema_version == 1 and not meta.config.moves_left_head
    assert model.moves_left_head is None
    stored = safetensors_load(SHIPPED.read_bytes())  # the file's own tensors, as written
    assert set(stored) == set(model.state_dict()) == set(CheckersNet(ModelConfig()).state_dict())
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, stored[name]), name
    packed = Position(8).game.pack_history()[None]
    logits, wdl = model(torch.from_numpy(encoding.encode(packed, 8)))
    assert torch.isfinite(logits).all() and torch.isfinite(wdl).all()


def test_warm_start_from_a_network_without_the_head() -> None:
    learner = OmegaConf.create(
        {
            "device": "cpu",
            "threads": 1,
            "value_weight": 1.0,
            "moves_left_weight": 0.5,
            "ema_decay": 0.9,
            "optimizer": {"_target_": "torch.optim.SGD", "_partial_": True, "lr": 0.01},
        }
    )
    model = ModelConfig(channels=32, moves_left_head=True).to_dict()  # the shipped tower
    trainer = Trainer(learner, model, 8)
    fresh_head = {k: v.clone() for k, v in trainer.model.state_dict().items() if "moves_left" in k}
    trainer.load_weights(SHIPPED)  # the shipped 4x32 network, which has no head
    stored = safetensors_load(SHIPPED.read_bytes())
    for name, tensor in trainer.model.state_dict().items():
        want = fresh_head[name] if name in fresh_head else stored[name]
        assert torch.equal(tensor, want), name
    assert fresh_head and trainer.ema.updates == 0  # the average starts from these weights
    with pytest.raises(ValueError, match="network, the run's model is"):
        Trainer(learner, ModelConfig(channels=16, moves_left_head=True).to_dict(), 8).load_weights(
            SHIPPED
        )


def test_schema_versions_are_checked(tmp_path: Path) -> None:
    model = CheckersNet(TINY)
    data = encode_checkpoint(model, step=1, version=1)
    with pytest.raises(ValueError, match="schema_version 3, this code reads 1 and 2"):
        decode_checkpoint(_with_header(data, lambda h: h.update(schema_version=3)))
    with pytest.raises(ValueError, match="a schema 1 file cannot hold a moves-left head"):
        decode_checkpoint(_with_header(data, lambda h: h.update(schema_version=1)))


@pytest.mark.skipif(
    shutil.which("redis-server") is None and not os.environ.get("CHECKERZERO_REDIS_SERVER"),
    reason="redis-server not installed (apt-get install redis-server)",
)
def test_mirror_batches_carry_the_targets(client) -> None:
    store = ReplayStore(client, namespace="ml", window_positions=10_000)
    records = [
        hand_record(*SHORT_GAME),
        random_game_record(seed=5, size=8, max_plies=120),
        hand_record(*RESIGNED_GAME, resign=True),
    ]
    for r in records:
        store.add_game(r.to_bytes(), r.num_decisions)
    mirror = ReplayMirror(store, 8)
    mirror.refresh()
    rows = np.arange(mirror.num_positions)
    batch = mirror.batch_at(rows[::-1])
    left, exact = moves_left_targets(records)
    assert batch.moves_left.tolist() == left[::-1].tolist()
    assert batch.moves_left_exact.tolist() == exact[::-1].tolist()
    assert batch.moves_left[-3:].tolist() == [1, 1, 2]  # the short game, reversed


# --- helpers -----------------------------------------------------------------------------------


def _header(path: Path) -> dict:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(json.loads(data[8 : 8 + n])["__metadata__"]["checkerzero"])


def _with_header(data: bytes, change) -> bytes:
    """`data` with its checkerzero header changed by `change` (the checksum stays valid)."""
    (n,) = struct.unpack("<Q", data[:8])
    raw = json.loads(data[8 : 8 + n])
    header = json.loads(raw["__metadata__"]["checkerzero"])
    change(header)
    raw["__metadata__"]["checkerzero"] = json.dumps(header, sort_keys=True)
    text = json.dumps(raw).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data[8 + n :]
