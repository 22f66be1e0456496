"""The deep Q-learning baseline: targets, the replay buffer, training, checkpoints, the player."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from baseline_training import dqn
from baseline_training.config import load_config
from checkerzero.network.model import CheckersNet, ModelConfig
from evaluation.matches.games import play_match
from evaluation.players.make import make_player
from evaluation.players.policy import PolicyPlayer
from game import Position, encoding
from game.openings import load_openings

TINY = ModelConfig(blocks=1, channels=16, policy_channels=8, value_channels=2, value_hidden=16)
# Black to move: 14x23x30 and 14x23x32 share their first jump, 21x30 is a single one.
MULTI_JUMP_FEN = "B:W18,22,25,26,27,29:B4,5,6,8,9,11,13,14,21,28"
# Black's 14x23 takes White's last piece: the game ends, Black has won.
LAST_CAPTURE_FEN = "B:W18:B14"


def test_td_targets_of_terminal_continuation_and_opponent_moves():
    gamma = 0.9
    reward = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0])
    done = torch.tensor([True, True, True, False, False])
    same = torch.tensor([False, False, False, True, False])
    next_value = torch.tensor([0.7, 0.7, 0.7, 0.5, 0.5])
    got = dqn.td_targets(reward, done, same, next_value, gamma)
    # end of game: the reward alone; the multi-jump goes on: +gamma*v; the opponent moves: -gamma*v
    assert torch.allclose(got, torch.tensor([1.0, -1.0, 0.0, 0.45, -0.45]))


def test_transitions_of_a_multi_jump_and_a_winning_capture():
    table = dqn._Table(Position.from_fen(MULTI_JUMP_FEN).game, None, agent_white=False)
    table.step(53)  # 14x23, the jump goes on
    table.step(88)  # x30: White moves next
    (_, a1, r1, _, done1, same1), (_, a2, r2, _, done2, same2) = table.rows
    assert (a1, r1, done1, same1) == (53, 0.0, False, True)
    assert (a2, r2, done2, same2) == (88, 0.0, False, False)
    end = dqn._Table(Position.from_fen(LAST_CAPTURE_FEN).game, None, agent_white=False)
    [action] = end.game.legal_actions()
    end.step(action)
    [(_, _, reward, _, done, same)] = end.rows
    assert (reward, done, same) == (1.0, True, False) and end.agent_score() == 1.0
    assert dqn.mover_reward(2, mover_white=False) == -1.0 and dqn.mover_reward(3, True) == 0.0


def test_next_values_mask_illegal_actions_and_ended_games():
    torch.manual_seed(0)
    online, target = CheckersNet(TINY).eval(), CheckersNet(TINY).eval()
    after = Position.from_fen(LAST_CAPTURE_FEN).game
    after.step(after.legal_actions()[0])  # over: no legal action
    games = [Position.from_fen(MULTI_JUMP_FEN).game, after]
    planes, masks = encoding.encode_games(games)
    planes, masks = torch.from_numpy(planes), torch.from_numpy(masks)
    got = dqn.next_values(online, target, planes, masks, double_q=True)
    with torch.no_grad():
        q_online = dqn.q_values(online, planes[:1])[0]
        q_target = dqn.q_values(target, planes[:1])[0]
    legal = [53, 81]
    pick = legal[int(torch.argmax(q_online[legal]))]
    assert math.isclose(float(got[0]), float(q_target[pick]), rel_tol=1e-6)
    assert float(got[1]) == 0.0
    plain = dqn.next_values(online, target, planes, masks, double_q=False)
    assert math.isclose(float(plain[0]), float(q_target[legal].max()), rel_tol=1e-6)


def test_dqn_loss_falls_on_a_small_fixed_buffer():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    online = CheckersNet(TINY)
    target = CheckersNet(TINY).eval()  # never refreshed here: the targets stay fixed
    tables = [
        dqn._Table(o.position(300).game, None, agent_white=False) for o in load_openings("deck")[:4]
    ]
    data = dqn.play_games(online, tables, epsilon=1.0, rng=rng)
    buffer = dqn.ReplayBuffer(10_000)
    buffer.add(data)
    assert len(buffer) == len(data["action"]) > 100 and data["done"].sum() == 4
    batch = buffer.sample(128, rng)
    opt = torch.optim.Adam(online.parameters(), lr=3e-3)
    kw = {"gamma": 0.99, "double_q": True, "huber_beta": 0.5}
    losses = [dqn.train_step(online, target, opt, batch, **kw) for _ in range(60)]
    assert np.mean(losses[-5:]) < 0.3 * np.mean(losses[:5])


def test_dqn_run_checkpoints_resume_and_play_in_a_match(tmp_path):
    overrides = [
        "max_generations=1",
        "games_per_generation=4",
        "parallel_games=4",
        "min_buffer=50",
        "batch_size=32",
        "replay_ratio=0.5",
        "ladder=[random]",
        "model.blocks=1",
        "model.channels=16",
    ]
    cfg = load_config("dqn", overrides, tmp_path)
    first = dqn.DQNRun(cfg, tmp_path).run()
    assert (first.generations, first.games) == (1, 4) and first.steps > 0
    cfg = load_config("dqn", ["max_generations=2"], tmp_path)
    resumed = dqn.DQNRun(cfg, tmp_path)
    second = resumed.run()
    assert (second.generations, second.games) == (2, 8) and second.steps > first.steps
    ckpt = tmp_path / "checkpoints" / "latest.safetensors"
    player = make_player(str(ckpt))
    assert isinstance(player, PolicyPlayer) and player.mode == "greedy"
    result = play_match(player, make_player("random"), load_openings("deck")[:1], games=2)
    assert len(result.games()) == 2 and result.player_a == "latest.safetensors:greedy"
    with pytest.raises(ValueError, match="unknown config key"):
        load_config("dqn", ["gama=0.5"], None)
