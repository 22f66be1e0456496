"""A deep Q-learning agent on the project's encoder, action space and network.

    python -m baseline_training.dqn --out runs/dqn-1                     # 30 minutes of training
    python -m baseline_training.dqn --out runs/dqn-1 time_limit_min=60   # resume, and train longer

The network is the project's ``CheckersNet``; its action head is read as Q(s, a) =
tanh(logit) in [-1, 1], the mover's expected result (+1 a win, 0 a draw, -1 a loss) after taking
action a and playing on greedily. Illegal actions are masked wherever a maximum is taken.

Transitions are one per action, so a multi-jump is several transitions of the same player. The
target of (s, a, r, s') is, with the Double DQN next value
v = Q_target(s', argmax_a' Q_online(s', a')) over the legal a' of s':

- s' is the end of the game: r, the result for the player who moved (no bootstrap);
- the same player moves again in s' (the multi-jump goes on): gamma * v;
- the opponent moves in s': -gamma * v (negamax: the opponent's best is the mover's worst).

Data comes in generations: ``games_per_generation`` games, a share of them against the current
rung of the minimax ladder (``evaluation.players.alphabeta.make_player``) and the rest self-play,
every
game started from an ACF ballot. Both sides' actions become transitions (Q-learning is
off-policy, so the minimax opponent's moves teach too). The agent explores epsilon-greedily.
When its wins and draws against the current rung reach ``promote_score`` over the last
``promote_window`` games there, it moves up a rung. After each generation it trains on the
experience replay; the target network is a copy refreshed every ``target_update_steps``.

The run directory holds ``config.yaml``, the resumable state (``checkpoints/state.safetensors``,
``target.safetensors``, ``buffer.npz``), ``checkpoints/latest.safetensors`` and a weights file
per checkpoint under ``checkpoints/weights/`` whose header says ``"agent": "dqn"`` with the
training seconds so far (so ``python -m evaluation.match <file>`` plays it greedily), and
``metrics.csv``.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import logging
import math
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from hydra.utils import instantiate

from baseline_training.config import load_config, save_config
from checkerzero.network.checkpoint import load_checkpoint, save_checkpoint
from checkerzero.network.model import CheckersNet, model_config
from evaluation.players.base import Player
from evaluation.players.make import make_player
from evaluation.players.policy import AGENT_KEY, Q_AGENT
from game import _core, encoding
from game.openings import load_openings
from game.position import Position
from learner.training_state import (
    capture_rng_state,
    load_training_state,
    restore_rng_state,
    save_training_state,
)

logger = logging.getLogger(__name__)

BOARD = 8
CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "state.safetensors"
TARGET_FILE = "target.safetensors"
BUFFER_FILE = "buffer.npz"
METRICS_FILE = "metrics.csv"
_BLACK_WIN, _WHITE_WIN, _DRAW = 1, 2, 3  # game._core.Game.result()


# ---------------------------------------------------------------------------------------------
# Experience replay


class ReplayBuffer:
    """A ring of transitions (s, a, r, s', done, same mover), states as packed histories."""

    FIELDS = ("state", "action", "reward", "next_state", "done", "same_mover")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"buffer capacity must be >= 1, got {capacity}")
        shape = (capacity, encoding.HISTORY, encoding.PACKED_WORDS)
        self.state = np.zeros(shape, np.uint32)
        self.next_state = np.zeros(shape, np.uint32)
        self.action = np.zeros(capacity, np.uint8)
        self.reward = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, bool)
        self.same_mover = np.zeros(capacity, bool)
        self.capacity = capacity
        self.size = 0
        self.cursor = 0  # the next slot written

    def __len__(self) -> int:
        return self.size

    def add(self, t: dict[str, np.ndarray]) -> None:
        n = len(t["action"])
        for start in range(0, n, self.capacity):
            chunk = {k: v[start : start + self.capacity] for k, v in t.items()}
            m = len(chunk["action"])
            idx = (self.cursor + np.arange(m)) % self.capacity
            for name in self.FIELDS:
                getattr(self, name)[idx] = chunk[name]
            self.cursor = int((self.cursor + m) % self.capacity)
            self.size = min(self.capacity, self.size + m)

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, n)
        return {name: getattr(self, name)[idx] for name in self.FIELDS}

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp.npz")
        live = {name: getattr(self, name)[: self.size] for name in self.FIELDS}
        np.savez(tmp, cursor=np.int64(self.cursor), **live)
        tmp.replace(path)

    def load(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as data:
            size = len(data["action"])
            if size > self.capacity:
                raise ValueError(f"{path}: {size} transitions exceed the capacity {self.capacity}")
            for name in self.FIELDS:
                getattr(self, name)[:size] = data[name]
            self.size = size
            self.cursor = int(data["cursor"]) % self.capacity


# ---------------------------------------------------------------------------------------------
# Targets and the training step


def q_values(model: torch.nn.Module, planes: torch.Tensor) -> torch.Tensor:
    """Q(s, .) in [-1, 1] for every action, the mover's view."""
    return torch.tanh(model(planes)[0])


def td_targets(
    reward: torch.Tensor,
    done: torch.Tensor,
    same_mover: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """The TD target per transition (module docstring): r at the end, else +-gamma * v."""
    bootstrap = torch.where(same_mover, next_value, -next_value)
    return torch.where(done, reward, gamma * bootstrap)


def next_values(
    online: torch.nn.Module,
    target: torch.nn.Module,
    planes: torch.Tensor,
    mask: torch.Tensor,
    double_q: bool,
) -> torch.Tensor:
    """max over legal a' of Q(s', a') (Double DQN: the online net's pick, the target's value);
    0 where s' has no legal action (the game is over there)."""
    with torch.no_grad():
        q_target = q_values(target, planes)
        choose_from = q_values(online, planes) if double_q else q_target
        best = choose_from.masked_fill(~mask, -math.inf).argmax(dim=1)
        value = q_target.gather(1, best[:, None]).squeeze(1)
        return torch.where(mask.any(dim=1), value, torch.zeros_like(value))


def dqn_loss(
    online: torch.nn.Module,
    target: torch.nn.Module,
    batch: dict[str, np.ndarray],
    *,
    gamma: float,
    double_q: bool,
    huber_beta: float,
) -> torch.Tensor:
    """Smooth-L1 loss of Q(s, a) against the TD targets of a batch of transitions."""
    state = torch.from_numpy(encoding.encode(batch["state"], BOARD))
    next_packed = batch["next_state"]
    next_planes = torch.from_numpy(encoding.encode(next_packed, BOARD))
    next_mask = torch.from_numpy(encoding.legal_masks(next_packed, BOARD))
    targets = td_targets(
        torch.from_numpy(batch["reward"]),
        torch.from_numpy(batch["done"]),
        torch.from_numpy(batch["same_mover"]),
        next_values(online, target, next_planes, next_mask, double_q),
        gamma,
    )
    action = torch.from_numpy(batch["action"].astype(np.int64))
    q = q_values(online, state).gather(1, action[:, None]).squeeze(1)
    return F.smooth_l1_loss(q, targets, beta=huber_beta)


def train_step(
    online: torch.nn.Module,
    target: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, np.ndarray],
    *,
    gamma: float,
    double_q: bool,
    huber_beta: float,
) -> float:
    online.train()
    optimizer.zero_grad(set_to_none=True)
    loss = dqn_loss(online, target, batch, gamma=gamma, double_q=double_q, huber_beta=huber_beta)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


# ---------------------------------------------------------------------------------------------
# Playing a generation


def mover_reward(result: int, mover_white: bool) -> float:
    """The finished game's result for the player who made the last action."""
    if result == _DRAW:
        return 0.0
    return 1.0 if (result == _WHITE_WIN) == mover_white else -1.0


@dataclass
class _Table:
    """A game in play: its state, the opponent (None: self-play) and the agent's colour."""

    game: _core.Game
    opponent: Player | None
    agent_white: bool
    rows: list[tuple[np.ndarray, int, float, np.ndarray, bool, bool]] = field(default_factory=list)

    def agent_to_move(self) -> bool:
        return self.opponent is None or self.game.white_to_move == self.agent_white

    def step(self, action: int) -> None:
        g = self.game
        before, mover = g.pack_history(), g.white_to_move
        g.step(action)
        result = g.result()
        done = result != 0
        reward = mover_reward(result, mover) if done else 0.0
        same = not done and g.white_to_move == mover
        self.rows.append((before, action, reward, g.pack_history(), done, same))

    def agent_score(self) -> float:
        result = self.game.result()
        return 0.5 if result == _DRAW else float((result == _WHITE_WIN) == self.agent_white)


def play_games(
    model: torch.nn.Module,
    tables: list[_Table],
    epsilon: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Plays ``tables`` to the end; the agent's decisions in all of them are one batch."""
    model.eval()
    while True:
        live = [t for t in tables if t.game.result() == 0]
        if not live:
            break
        agent = [t for t in live if t.agent_to_move()]
        if agent:
            planes, masks = encoding.encode_games([t.game for t in agent])
            with torch.no_grad():
                q = q_values(model, torch.from_numpy(planes)).numpy()
            for t, qs, mask in zip(agent, q, masks, strict=True):
                legal = np.flatnonzero(mask)
                if rng.random() < epsilon:
                    t.step(int(rng.choice(legal)))
                else:
                    t.step(int(legal[np.argmax(qs[legal])]))
        for t in live:
            if not t.agent_to_move() and t.game.result() == 0 and not t.game.mid_jump:
                assert t.opponent is not None
                move = t.opponent.choose(Position.from_game(t.game))
                for action in t.game.actions_of(move):
                    t.step(action)
    rows = [r for t in tables for r in t.rows]
    return {
        "state": np.stack([r[0] for r in rows]).astype(np.uint32),
        "action": np.array([r[1] for r in rows], np.uint8),
        "reward": np.array([r[2] for r in rows], np.float32),
        "next_state": np.stack([r[3] for r in rows]).astype(np.uint32),
        "done": np.array([r[4] for r in rows], bool),
        "same_mover": np.array([r[5] for r in rows], bool),
    }


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class Counters:
    generations: int = 0
    games: int = 0
    transitions: int = 0
    steps: int = 0
    train_seconds: float = 0.0  # wall time spent in this run, summed over resumes
    rung: int = 0  # index into cfg.ladder of the current training opponent
    window: list[float] = field(default_factory=list)  # agent scores at the current rung


class DQNRun:
    def __init__(self, cfg, run_dir: Path) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.ckpt_dir = run_dir / CHECKPOINT_DIR
        if cfg.device == "cpu" and cfg.threads:
            torch.set_num_threads(int(cfg.threads))
        self.model = CheckersNet(model_config(cfg.model, BOARD))
        self.target = copy.deepcopy(self.model).eval()
        self.optimizer = instantiate(cfg.optimizer)(self.model.parameters())
        self.buffer = ReplayBuffer(int(cfg.buffer_size))
        self.counters = Counters()
        self.rng = np.random.default_rng(int(cfg.seed))
        self.openings = load_openings(cfg.openings, size=BOARD, seed=int(cfg.seed))
        self.ladder = [str(s) for s in cfg.ladder]
        if not self.ladder:
            raise ValueError("dqn: the ladder needs at least one opponent spec")
        self.opponents = [make_player(spec) for spec in self.ladder]

    # --- state ---------------------------------------------------------------------------------
    def epsilon(self) -> float:
        c = self.cfg
        frac = min(1.0, self.counters.games / max(1, int(c.epsilon_decay_games)))
        return float(c.epsilon_start + frac * (c.epsilon_end - c.epsilon_start))

    def save(self) -> None:
        d = self.ckpt_dir
        counters = {k: v for k, v in vars(self.counters).items()}
        rng = {**capture_rng_state(), "generator": json.dumps(self.rng.bit_generator.state)}
        save_training_state(
            d / STATE_FILE,
            self.model,
            self.optimizer,
            None,
            step=self.counters.steps,
            counters=counters,
            rng=rng,
        )
        save_checkpoint(d / TARGET_FILE, self.target, step=self.counters.steps, version=0)
        self.buffer.save(d / BUFFER_FILE)
        extra = {
            AGENT_KEY: Q_AGENT,
            "train_seconds": round(self.counters.train_seconds, 1),
            "games": self.counters.games,
            "rung": self.ladder[self.counters.rung],
        }
        gen = self.counters.generations
        save_checkpoint(d / "latest.safetensors", self.model, step=gen, version=gen, extra=extra)
        save_checkpoint(
            d / "weights" / f"gen_{gen:06d}.safetensors",
            self.model,
            step=gen,
            version=gen,
            extra=extra,
        )

    def restore(self) -> bool:
        d = self.ckpt_dir
        if not (d / STATE_FILE).is_file():
            return False
        state = load_training_state(d / STATE_FILE, self.model, self.optimizer, None)
        rng = dict(state.rng)
        self.rng.bit_generator.state = json.loads(rng.pop("generator"))
        restore_rng_state(rng)
        for key, value in state.counters.items():
            if hasattr(self.counters, key):
                setattr(self.counters, key, type(getattr(self.counters, key))(value))
        target, _ = load_checkpoint(d / TARGET_FILE)
        self.target.load_state_dict(target.state_dict())
        self.buffer.load(d / BUFFER_FILE)
        logger.info(
            "resumed at generation %d (%d games, %.0f s of training)",
            self.counters.generations,
            self.counters.games,
            self.counters.train_seconds,
        )
        return True

    # --- one generation ------------------------------------------------------------------------
    def tables(self) -> list[_Table]:
        c = self.cfg
        n = int(c.games_per_generation)
        ladder_games = round(float(c.ladder_share) * n)
        opponent = self.opponents[self.counters.rung]
        out = []
        for i in range(n):
            opening = self.openings[int(self.rng.integers(len(self.openings)))]
            game = opening.position(int(c.max_plies)).game
            versus = opponent if i < ladder_games else None
            out.append(_Table(game, versus, agent_white=bool(i % 2)))
        return out

    def generation(self) -> dict[str, float]:
        c = self.cfg
        t0 = time.monotonic()
        epsilon = self.epsilon()
        tables = self.tables()
        transitions = 0
        for start in range(0, len(tables), int(c.parallel_games)):
            chunk = tables[start : start + int(c.parallel_games)]
            data = play_games(self.model, chunk, epsilon, self.rng)
            self.buffer.add(data)
            transitions += len(data["action"])
        play_s = time.monotonic() - t0
        scores = [t.agent_score() for t in tables if t.opponent is not None]
        rung_name = self.ladder[self.counters.rung]
        self._update_ladder(scores)
        losses = []
        if len(self.buffer) >= int(c.min_buffer):
            steps = math.ceil(float(c.replay_ratio) * transitions / int(c.batch_size))
            for _ in range(steps):
                batch = self.buffer.sample(int(c.batch_size), self.rng)
                losses.append(
                    train_step(
                        self.model,
                        self.target,
                        self.optimizer,
                        batch,
                        gamma=float(c.gamma),
                        double_q=bool(c.double_q),
                        huber_beta=float(c.huber_beta),
                    )
                )
                self.counters.steps += 1
                if self.counters.steps % int(c.target_update_steps) == 0:
                    self.target.load_state_dict(self.model.state_dict())
        self.counters.generations += 1
        self.counters.games += len(tables)
        self.counters.transitions += transitions
        return {
            "epsilon": epsilon,
            "transitions": transitions,
            "play_s": play_s,
            "train_s": time.monotonic() - t0 - play_s,
            "loss": float(np.mean(losses)) if losses else math.nan,
            "rung": rung_name,
            "ladder_score": float(np.mean(scores)) if scores else math.nan,
        }

    def _update_ladder(self, scores: list[float]) -> None:
        c = self.cfg
        window = deque(self.counters.window, maxlen=int(c.promote_window))
        window.extend(scores)
        self.counters.window = list(window)
        full = len(window) == int(c.promote_window)
        score = sum(1 for s in window if s >= 0.5) / max(1, len(window))  # wins or draws
        if full and score >= float(c.promote_score) and self.counters.rung + 1 < len(self.ladder):
            self.counters.rung += 1
            self.counters.window = []
            logger.info(
                "promoted: %.0f%% wins or draws, now training against %s",
                100 * score,
                self.ladder[self.counters.rung],
            )

    # --- the loop ------------------------------------------------------------------------------
    def run(self) -> Counters:
        c = self.cfg
        save_config(c, self.run_dir)
        self.restore()
        limit_s = float(c.time_limit_min) * 60.0
        metrics = self.run_dir / METRICS_FILE
        new_file = not metrics.is_file()
        with metrics.open("a", newline="") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(
                    ["generation", "games", "train_s", "steps", "epsilon", "loss", "rung",
                     "ladder_score", "buffer"]
                )  # fmt: skip
            while not (limit_s and self.counters.train_seconds >= limit_s) and not (
                c.max_generations and self.counters.generations >= int(c.max_generations)
            ):
                t0 = time.monotonic()
                g = self.generation()
                self.counters.train_seconds += time.monotonic() - t0
                n = self.counters
                logger.info(
                    "gen %d | %d games, %.1f games/s | %d transitions, buffer %d | eps %.2f"
                    " | %d steps, loss %.4f | vs %s %.2f",
                    n.generations,
                    n.games,
                    int(c.games_per_generation) / max(g["play_s"], 1e-9),
                    g["transitions"],
                    len(self.buffer),
                    g["epsilon"],
                    n.steps,
                    g["loss"],
                    g["rung"],
                    g["ladder_score"],
                )
                writer.writerow(
                    [n.generations, n.games, f"{n.train_seconds:.1f}", n.steps,
                     f"{g['epsilon']:.3f}", f"{g['loss']:.5f}", g["rung"],
                     f"{g['ladder_score']:.3f}", len(self.buffer)]
                )  # fmt: skip
                f.flush()
                if n.generations % int(c.checkpoint_every_generations) == 0:
                    self.save()
        self.save()
        return self.counters


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m baseline_training.dqn",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="run directory (resumed if it exists)"
    )
    parser.add_argument("overrides", nargs="*", help="key=value (conf/baselines/dqn.yaml)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    try:
        cfg = load_config("dqn", args.overrides, args.out)
        DQNRun(cfg, args.out).run()
    except ValueError as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
