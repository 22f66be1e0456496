"""Players without search: the network's most probable move, or a Q-network's greedy move.

``PolicyPlayer`` has two modes:

- ``policy``: the legal move the policy head finds most probable. A move's probability is the
  product of its actions' probabilities, each a softmax over the legal actions of its own
  decision: a multi-jump's later jumps are evaluated in the position after the earlier ones.
  This is what a supervised policy player does (the spec ``<checkpoint>:sims=0``).
- ``greedy``: at each decision the legal action with the highest output, then the next decision
  of a multi-jump the same way. For a Q-network (the action head gives Q(s, a), and a checkpoint
  whose header says ``"agent": "dqn"``) this is the greedy policy, which already accounts for
  the best continuation of a multi-jump.

Both are deterministic (ties go to the lower action index). The history the network sees is
the match position's history, as for the MCTS players.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from game import _core, encoding
from game.mcts import Inference
from game.position import Move, Position

MODES = ("policy", "greedy")
# Smallest probability taken into a log: the inference's softmax can underflow to exactly 0.
MIN_PROB = 1e-30
# Header key and value that mark a Q-network checkpoint (written by baseline_training.dqn).
AGENT_KEY = "agent"
Q_AGENT = "dqn"


def move_log_probs(
    inference: Inference, games: Sequence[_core.Game]
) -> list[tuple[list[Move], np.ndarray]]:
    """For each game (not over, not mid-jump): its legal moves and their log-probabilities.

    All decisions of all games (roots and the positions inside multi-jumps) go to the inference
    in one batch.
    """
    states: list[_core.Game] = []
    index: dict[tuple[int, tuple[int, ...]], int] = {}
    plans: list[tuple[list[Move], list[list[int]]]] = []
    for gi, game in enumerate(games):
        if game.mid_jump or game.result() != 0:
            raise ValueError("move_log_probs needs positions at the start of a move, game not over")
        moves = game.legal_moves()
        sequences = [list(game.actions_of(m)) for m in moves]
        index[gi, ()] = len(states)
        states.append(game)
        for seq in sequences:
            for k in range(1, len(seq)):
                key = (gi, tuple(seq[:k]))
                if key not in index:
                    child = states[index[gi, tuple(seq[: k - 1])]].copy()
                    child.step(seq[k - 1])
                    index[key] = len(states)
                    states.append(child)
        plans.append((moves, sequences))
    if not states:
        return []
    packed = encoding.pack(states)
    size = states[0].size
    planes, masks = encoding.encode(packed, size), encoding.legal_masks(packed, size)
    priors, _ = inference.evaluate(planes, masks)
    log_p = np.log(np.maximum(priors, MIN_PROB))
    out = []
    for gi, (moves, sequences) in enumerate(plans):
        scores = np.array(
            [
                sum(float(log_p[index[gi, tuple(seq[:k])], a]) for k, a in enumerate(seq))
                for seq in sequences
            ]
        )
        out.append((moves, scores))
    return out


class PolicyPlayer:
    """A Player that asks the network once per decision and never searches (module docstring)."""

    def __init__(self, inference: Inference, *, mode: str = "policy", name: str = "policy") -> None:
        if mode not in MODES:
            raise ValueError(f"PolicyPlayer mode must be one of {MODES}, got {mode!r}")
        self.inference = inference
        self.mode = mode
        self.name = name

    def choose(self, position: Position) -> Move:
        game = position.game
        if position.is_over():
            raise ValueError(f"{self.name}: the game is over in {position.fen()}")
        if game.mid_jump:
            raise ValueError(f"{self.name}: asked for a move in the middle of a multi-jump")
        if self.mode == "policy":
            moves, scores = move_log_probs(self.inference, [game])[0]
            return moves[int(np.argmax(scores))]
        child = game.copy()
        actions: list[int] = []
        while True:
            planes, masks = encoding.encode_games([child])
            priors, _ = self.inference.evaluate(planes, masks)
            action = int(np.argmax(np.where(masks[0], priors[0], -1.0)))
            child.step(action)
            actions.append(action)
            if child.result() != 0 or not child.mid_jump:
                break
        return game.move_of(actions)

    def reset(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"PolicyPlayer({self.name!r}, mode={self.mode!r})"


def is_q_network(extra: dict[str, Any]) -> bool:
    """Whether a checkpoint header's ``extra`` marks a Q-network (its action head is Q)."""
    return extra.get(AGENT_KEY) == Q_AGENT


__all__ = ["AGENT_KEY", "MODES", "Q_AGENT", "PolicyPlayer", "is_q_network", "move_log_probs"]
