"""Supervised learning from expert games: the data, the training, the policy player, warm starts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from baseline_training.expert_games import (
    DRAWN,
    LOST,
    WON,
    Decisions,
    dedupe,
    game_key,
    replay_decisions,
    split_games,
)
from baseline_training.supervised import Agreement, agreement, batch_of, snapshot_inference
from checkerzero.config import SOURCE_CONF, ConfigError, validate
from checkerzero.network.checkpoint import save_checkpoint
from checkerzero.network.model import CheckersNet, ModelConfig
from evaluation.players.make import make_player
from evaluation.players.mcts import MCTSPlayer
from evaluation.players.policy import PolicyPlayer, move_log_probs
from game import Position, encoding
from game.archive import read_archive
from game.pdn import PdnGame, iter_pdn
from learner.trainer import Trainer

TINY = ModelConfig(blocks=1, channels=16, policy_channels=8, value_channels=2, value_hidden=16)
# Black to move: 14x23x30 and 14x23x32 share their first jump, 21x30 is a single one.
MULTI_JUMP_FEN = "B:W18,22,25,26,27,29:B4,5,6,8,9,11,13,14,21,28"


@pytest.fixture(scope="module")
def oca_games() -> list[PdnGame]:
    return list(itertools.islice(iter_pdn(read_archive()), 40))


def tiny_trainer(lr: float = 0.02):
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {
            "device": "cpu",
            "threads": 1,
            "value_weight": 1.0,
            "optimizer": {"_target_": "torch.optim.Adam", "_partial_": True, "lr": lr},
            "scheduler": None,
        }
    )
    return Trainer(cfg, TINY.to_dict(), 8)


# --- the data ----------------------------------------------------------------------------------


def test_split_drops_duplicates_and_keeps_every_game_in_one_split(oca_games):
    games = [*oca_games, oca_games[3], oca_games[7], oca_games[7]]
    games.append(PdnGame(moves=["11-15"], result="*"))
    split = split_games(games, val_fraction=0.2, test_fraction=0.2, seed=5)
    assert split.duplicates == 3 and split.unfinished == 1
    keys = {name: [game_key(g) for g in getattr(split, name)] for name in ("train", "val", "test")}
    assert sum(len(k) for k in keys.values()) == len(oca_games)
    assert len(set(itertools.chain(*keys.values()))) == len(oca_games)  # no game twice anywhere
    assert (len(keys["val"]), len(keys["test"])) == (8, 8)
    again = split_games(games, val_fraction=0.2, test_fraction=0.2, seed=5)
    assert [game_key(g) for g in again.test] == keys["test"]  # the seed fixes the split
    other = split_games(games, val_fraction=0.2, test_fraction=0.2, seed=6)
    assert [game_key(g) for g in other.test] != keys["test"]
    assert dedupe(games)[1:] == (3, 1)


def test_decisions_follow_the_moves_action_by_action(tmp_path):
    # Four opening moves, scored as a White win: enough for the result codes.
    game = next(iter_pdn('[Result "0-1"]\n1. 11-15 23-19 2. 8-11 22-17 0-1'))
    d = replay_decisions([game])
    assert len(d) == 4 and d.move_start.all()
    assert list(d.result) == [LOST, WON, LOST, WON]  # White won; Black moves first
    pos = Position()
    for row, text in enumerate(game.moves):
        move = pos.parse_move(text)
        assert [int(d.action[row])] == pos.game.actions_of(move)
        pos.play(move)
    draw = replay_decisions([next(iter_pdn(f'[FEN "{MULTI_JUMP_FEN}"]\n1. 14x23x30 1/2-1/2'))])
    assert list(draw.move_start) == [True, False] and list(draw.result) == [DRAWN, DRAWN]
    assert list(draw.action) == [53, 88]
    d.save(tmp_path / "d.npz")
    back = Decisions.load(tmp_path / "d.npz")
    assert np.array_equal(back.packed, d.packed) and np.array_equal(back.action, d.action)
    (tmp_path / "bad.npz").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match=r"bad\.npz"):
        Decisions.load(tmp_path / "bad.npz")


# --- supervised learning -----------------------------------------------------------------------


def test_tiny_supervised_run_learns_its_games(oca_games):
    torch.manual_seed(0)
    games = oca_games[:4]
    data = replay_decisions(games)
    trainer = tiny_trainer()
    before = agreement(snapshot_inference(trainer.model), games)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(120):
        losses.append(trainer.step(batch_of(data, rng.integers(0, len(data), 64))).policy)
    after = agreement(snapshot_inference(trainer.model), games)
    chance = np.mean(
        [1.0 / len(Position.from_fen(f).legal_moves()) for f in _move_start_fens(games)]
    )
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert after.positions == before.positions == len(_move_start_fens(games))
    assert after.top1 > max(2 * chance, before.top1 + 0.2)
    assert after.choice_top1 > 0.5 and after.top5 >= after.top1


def _move_start_fens(games: list[PdnGame]) -> list[str]:
    fens = []
    for g in games:
        pos = g.start()
        for text in g.moves:
            fens.append(pos.fen())
            pos.play(text)
    return fens


def test_agreement_counts_whole_moves():
    class Prefers:  # an inference that likes some actions everywhere and is flat otherwise
        version = 0

        def __init__(self, *actions: int) -> None:
            self.actions = list(actions)

        def evaluate(self, planes, mask):
            logits = np.where(mask, 0.0, -np.inf)
            logits[:, self.actions] += 3.0
            p = np.exp(logits - logits.max(1, keepdims=True))
            return (p / p.sum(1, keepdims=True)).astype(np.float32), np.zeros((len(mask), 3))

    game = next(iter_pdn(f'[FEN "{MULTI_JUMP_FEN}"]\n1. 14x23x32 1/2-1/2'))
    # 53 then 89 is 14x23x32: p(53) * p(89 | 53) = 0.95 * 0.95 beats 21x30's 0.05.
    assert agreement(Prefers(53, 89), [game]) == Agreement(1, 1.0, 1.0, 1, 1.0, 1.0)
    # 53 then 88 makes 14x23x30 the favourite: the expert's move is second, in the top 5 only.
    assert agreement(Prefers(53, 88), [game]) == Agreement(1, 0.0, 1.0, 1, 0.0, 1.0)
    # The first jump alone is not the move: flat after it, 21x30 (0.5) beats 0.475 for each.
    assert agreement(Prefers(81), [game]).top1 == 0.0


# --- the policy player -------------------------------------------------------------------------


def test_move_probabilities_multiply_along_a_multi_jump_and_sum_to_one():
    net = CheckersNet(TINY)
    inference = snapshot_inference(net)
    pos = Position.from_fen(MULTI_JUMP_FEN)
    [(moves, scores)] = move_log_probs(inference, [pos.game])
    assert sorted(map(str, moves)) == ["14x23x30", "14x23x32", "21x30"]
    assert math.isclose(float(np.exp(scores).sum()), 1.0, rel_tol=1e-5)
    root = inference.evaluate(*encoding.encode_games([pos.game]))[0][0]
    after = pos.game.copy()
    after.step(53)
    mid = inference.evaluate(*encoding.encode_games([after]))[0][0]
    by_name = dict(zip(map(str, moves), scores, strict=True))
    assert math.isclose(by_name["14x23x32"], math.log(root[53] * mid[89]), rel_tol=1e-5)
    assert math.isclose(by_name["21x30"], math.log(root[81]), rel_tol=1e-5)
    player = PolicyPlayer(inference)
    assert str(player.choose(pos)) == max(by_name, key=by_name.get)


def test_checkpoint_specs_pick_the_player(tmp_path):
    net = CheckersNet(TINY)
    path = tmp_path / "sl.safetensors"
    save_checkpoint(path, net, step=3, version=1)
    policy = make_player(f"{path}:sims=0")
    assert isinstance(policy, PolicyPlayer) and policy.mode == "policy"
    assert isinstance(make_player(f"{path}:sims=8"), MCTSPlayer)
    q_path = tmp_path / "dqn.safetensors"
    save_checkpoint(q_path, net, step=3, version=1, extra={"agent": "dqn"})
    greedy = make_player(str(q_path))
    assert isinstance(greedy, PolicyPlayer) and greedy.mode == "greedy"
    with pytest.raises(ValueError, match="Q-network"):
        make_player(f"{q_path}:sims=8")
    with pytest.raises(ValueError, match="uniform-mcts"):
        make_player("uniform-mcts:sims=0")


def test_warm_start_loads_the_weights_and_refuses_another_shape(tmp_path):
    source = CheckersNet(TINY)
    path = tmp_path / "sl.safetensors"
    save_checkpoint(path, source, step=7, version=1)
    trainer = tiny_trainer()
    trainer.load_weights(path)
    for name, value in source.state_dict().items():
        assert torch.equal(trainer.model.state_dict()[name], value), name
    wider = tmp_path / "wide.safetensors"
    save_checkpoint(wider, CheckersNet(ModelConfig(blocks=1, channels=8)), step=1, version=1)
    with pytest.raises(ValueError, match=r"wide\.safetensors"):
        trainer.load_weights(wider)
    shape = [f"model.{k}={v}" for k, v in TINY.to_dict().items() if k != "board_size"]
    with initialize_config_dir(config_dir=str(SOURCE_CONF), version_base="1.3"):
        cfg = compose("config", ["run_dir=/tmp/x", *shape, f"learner.init_weights={path}"])
        validate(cfg)
        missing = compose("config", ["run_dir=/tmp/x", f"learner.init_weights={tmp_path}/no"])
        default_shape = compose("config", ["run_dir=/tmp/x", f"learner.init_weights={path}"])
    with pytest.raises(ConfigError, match=r"learner\.init_weights"):
        validate(missing)
    # The network file's shape must be the model keys' (read from its header before the run).
    with pytest.raises(ConfigError, match=r"learner\.init_weights=.*holds a 1x16 .* a 4x16 "):
        validate(default_shape)


def test_agreement_stops_where_the_rules_end_the_game():
    # The third occurrence of the start ends the game after 8 moves; the players went on.
    text = '[FEN "B:WK32:BK1"]\n1. 1-6 32-27 2. 6-1 27-32 3. 1-6 32-27 4. 6-1 27-32 5. 1-6 32-27'
    game = next(iter_pdn(text + " 1/2-1/2"))
    assert len(game.moves) == 10
    got = agreement(snapshot_inference(CheckersNet(TINY)), [game])
    assert got.positions == 8
    assert len(replay_decisions([game])) == 8  # the training decisions stop there too


def test_decisions_stop_at_the_no_progress_draw_and_all_encode():
    # US National 1939, Hellman - Ryan: the players went on past the 80-ply no-progress draw, and
    # a state beyond it (a count of 81) is one the encoder refuses as corrupt.
    game = next(itertools.islice(iter_pdn(read_archive()), 9445, None))
    assert "Hellman" in game.describe()
    pos, played = game.start(), 0
    while not pos.is_over():
        pos.play(pos.parse_move(game.moves[played]))
        played += 1
    assert played < len(game.moves)
    d = replay_decisions([game])
    assert d.move_start.sum() == played
    assert encoding.encode(d.packed, 8).shape[0] == len(d)
