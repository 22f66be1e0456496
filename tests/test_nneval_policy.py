"""The learned evaluation's move-ordering head: its exact arithmetic in both kernels, the file's
checks, the `policy` search switch, and its distillation from the MCTS network's policy."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from checkerzero.network.checkpoint import save_checkpoint
from checkerzero.network.model import CheckersNet, ModelConfig
from evaluation.players.make import make_player
from game import _core, nneval
from game.position import Position
from learner.nneval import shards
from learner.nneval.policy import clipped_inputs, integer_logits
from learner.nneval.policy import main as distil
from learner.nneval.relabel import _games
from tests.test_nneval import random_net, random_positions, with_kernels
from tests.test_nneval_refit import generation_shards

SHOT_FEN = "B:W21,22,24,28,32:B1,7,10,13,14"  # tests/test_alphabeta.py: 14-17 wins a man


def middle_games(count: int, seed: int) -> list[_core.Game]:
    """Positions 16 to 30 random plies into a game, not over."""
    rng, out = random.Random(seed), []
    while len(out) < count:
        game = _core.Game(8)
        for _ in range(rng.randrange(16, 31)):
            moves = game.legal_moves()
            if not moves or game.result() != 0:
                break
            game.make(rng.choice(moves))
        if game.result() == 0 and len(game.legal_moves()) >= 2:
            out.append(game)
    return out


def with_random_head(net: nneval.NNEvalNet, seed: int, sign: float = 1.0) -> nneval.NNEvalNet:
    rng = np.random.default_rng(seed)
    actions = 4 * net.size * net.size // 2
    weight = sign * rng.normal(0, 1.0, (actions, 2 * net.hidden))
    return nneval.with_policy(net, weight, sign * rng.normal(0, 0.5, actions))


def _kernels() -> list[bool]:
    probe = random_net(0, hidden=64).core()
    return [False, True] if probe.simd_unusable == "" else [False]


@pytest.mark.parametrize("size", [8, 6])
def test_the_heads_logits_equal_the_reference_in_both_kernels(size: int) -> None:
    net = with_random_head(random_net(3, size=size, hidden=64), seed=4)
    cores = [with_kernels(net, simd) for simd in _kernels()]
    rng = random.Random(size)
    spread = set()
    for game in random_positions(rng, 80, size):
        want = nneval.reference_policy(net, game.black, game.white, game.kings, game.white_to_move)
        for core in cores:
            assert np.array_equal(_core.nneval_policy(core, game), want)
        spread.add(int(want.argmax()))
    assert len(spread) > 5  # the logits depend on the position
    # The head leaves the evaluation and its fingerprint alone.
    plain = random_net(3, size=size, hidden=64)
    game = random_positions(rng, 1, size)[0]
    assert _core.nneval_evaluate(net.core(), game) == _core.nneval_evaluate(plain.core(), game)


def test_the_file_keeps_the_head_and_refuses_half_of_one(tmp_path: Path) -> None:
    net = with_random_head(random_net(5, hidden=64), seed=6)
    path = nneval.save(net, tmp_path / "head.nn")
    back = nneval.load(path)
    assert back.has_policy and back.core().has_policy
    for name in ("pol_w", "pol_b"):
        assert np.array_equal(back.tensors[name], net.tensors[name])
    assert not nneval.load(nneval.save(random_net(5), tmp_path / "plain.nn")).has_policy
    tensors = st_load(path.read_bytes())
    meta = {"format": nneval.FORMAT, "version": "1", "board_size": "8", "output_scale": "300"}

    def refused(tensors: dict[str, np.ndarray], says: str) -> None:
        bad = tmp_path / "bad.nn"
        bad.write_bytes(st_save(tensors, metadata=meta))
        with pytest.raises(nneval.NNEvalFileError, match=says) as err:
            nneval.load(bad)
        assert str(bad) in str(err.value) and "\n" not in str(err.value)

    refused({k: v for k, v in tensors.items() if k != "pol_b"}, "needs both pol_w and pol_b")
    refused({**tensors, "pol_w": tensors["pol_w"][:-1]}, r"pol_w has shape \(127, 128\)")
    refused({**tensors, "pol_w": tensors["pol_w"].astype(np.int16)}, "pol_w is int16")
    refused({**tensors, "pol_b": np.full(128, 1 << 26, np.int32)}, "pol_b bias")


def test_policy_ordering_keeps_the_scores_and_changes_the_tree() -> None:
    base = random_net(7, hidden=64)
    good, reverse = with_random_head(base, seed=8), with_random_head(base, seed=8, sign=-1.0)
    policy = _core.SearchSwitches(policy=True)
    changed = 0
    games = [Position.from_fen(SHOT_FEN).game, *middle_games(7, seed=11)]
    for game in games:
        plain = _core.alphabeta_search(game, 6, 0, None, 16, None, base.core())
        for net in (good, reverse):
            found = _core.alphabeta_search(game, 6, 0, None, 16, None, net.core(), 0, 0, policy)
            assert found.score == plain.score
            changed += found.nodes != plain.nodes
    assert changed >= len(games)  # the switch reorders: the trees differ


def test_the_switch_needs_a_head(tmp_path: Path) -> None:
    game = Position.from_fen(SHOT_FEN).game
    policy = _core.SearchSwitches(policy=True)
    with pytest.raises(ValueError, match=r"move-ordering head.*this one has none"):
        _core.alphabeta_search(game, 4, 0, None, 16, None, random_net(1).core(), 0, 0, policy)
    with pytest.raises(ValueError, match="no learned evaluation"):
        _core.alphabeta_search(game, 4, 0, None, 16, None, None, 0, 0, policy)
    with pytest.raises(ValueError, match=r"'ab\+nn:4,policy'.*has none"):
        make_player("ab+nn:4,policy")
    with pytest.raises(ValueError, match=r"ab\+nn player"):
        make_player("minimax:4,policy")
    path = nneval.save(with_random_head(random_net(2, hidden=64), seed=3), tmp_path / "h.nn")
    player = make_player(f"ab+nn:4,policy:{path}")
    assert ",policy" in player.name
    pos = Position.from_fen(SHOT_FEN)
    assert player.choose(pos) in pos.legal_moves()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A 6x6 generation's shards (60 games at depth 3), its evaluation and a tiny network."""
    folder = tmp_path_factory.mktemp("policy")
    torch.manual_seed(5)
    net = random_net(9, size=6, hidden=32)
    parent = nneval.save(net, folder / "parent.nn")
    shard_folder = generation_shards(folder, net, 60)
    network = folder / "tiny6.safetensors"
    config = ModelConfig(board_size=6, blocks=1, channels=8, policy_channels=4, value_channels=2)
    save_checkpoint(network, CheckersNet(config), step=0, version=1)
    return shard_folder, parent, network


def test_distillation_writes_a_head_the_core_computes_alike(data, tmp_path, capsys) -> None:
    folder, parent, network = data
    out = tmp_path / "with-head.nn"
    argv = ["--evaluation", str(parent), "--network", str(network), "--data", str(folder)]
    assert distil([*argv, "--positions", "600", "--epochs", "20", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "held out, by game" in said and "cross-entropy" in said
    net = nneval.load(out)
    assert net.has_policy and net.metadata["policy_network_sha256"]
    # The evaluation's own tensors are the parent's.
    parent_net = nneval.load(parent)
    for name in nneval.TENSORS:
        assert np.array_equal(net.tensors[name], parent_net.tensors[name])
    # The inputs the head was fitted on are the core's, the mover's first (White's too).
    rows = next(shards.iter_rows(shards.shard_files(folder)))[:200]
    assert (rows["flags"] & 1).any() and not (rows["flags"] & 1).all()
    want = integer_logits(net, clipped_inputs(net, rows))
    core = net.core()
    for game, logits in zip(_games(rows, 6), want, strict=True):
        assert np.array_equal(_core.nneval_policy(core, game), logits)


def test_distillation_refuses_bad_input_in_one_line(data, tmp_path, capsys) -> None:
    folder, parent, network = data
    base = ["--evaluation", str(parent), "--network", str(network), "--out", str(tmp_path / "o")]
    assert distil([*base, "--data", str(tmp_path)]) == 2
    assert "no shards" in capsys.readouterr().err
    assert distil([*base, "--data", str(folder), "--positions", "5"]) == 2
    assert "--positions" in capsys.readouterr().err
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a checkpoint")
    argv = ["--evaluation", str(parent), "--network", str(junk), "--data", str(folder)]
    assert distil([*argv, "--out", str(tmp_path / "o")]) == 2
    assert str(junk) in capsys.readouterr().err
