"""The policy/value network: a residual tower with a convolutional policy head and a WDL value head.

Design choices:

- Input is the mover's view, ``(N, in_planes, S, S)`` float32 (see ``game`` for the planes).
  The tower is the AlphaZero one (conv3x3-BN-ReLU stem, ``blocks`` residual blocks of two
  conv3x3+BN with a skip), kept deliberately plain so it runs well on CPU (oneDNN), CUDA (cuDNN,
  channels_last, bf16) and MPS alike.
- The policy head is fully convolutional: a 1x1 conv gives 4 logits per board cell, one per diagonal
  direction, and the logits of the ``S*S/2`` playable cells are gathered in square-index order, so
  ``logits[:, sq * 4 + dir] == out[:, dir, row(sq), col(sq)]``. This matches the action space
  (square x direction) exactly, shares weights across the board (the same local pattern means the
  same move everywhere) and needs no large dense layer, unlike AlphaZero's flattened policy FC.
- The value head predicts win/draw/loss logits (3 outputs) from the mover's view, because draws are
  the common result between strong checkers players and a scalar tanh value cannot tell "certain
  draw" from "coin flip".
- The last BatchNorm of each residual block starts with a zero scale, so every block starts as the
  identity; this makes deeper towers train stably from the first step (Goyal et al., 2017).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from game.encoding import NUM_DIRECTIONS, NUM_PLANES, NUM_WDL, num_actions
from game.notation import num_squares, square_rc

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape of the network; the Hydra ``model`` group holds exactly these keys."""

    board_size: int = 8
    in_planes: int = NUM_PLANES
    blocks: int = 4
    channels: int = 32
    policy_channels: int = 32
    value_channels: int = 8
    value_hidden: int = 128

    def __post_init__(self) -> None:
        if self.board_size < 4 or self.board_size % 2:
            raise ValueError(f"ModelConfig.board_size must be even and >= 4, got {self.board_size}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"ModelConfig.{field.name} must be an int, got {value!r}")
            minimum = 0 if field.name == "blocks" else 1
            if value < minimum:
                raise ValueError(f"ModelConfig.{field.name} must be >= {minimum}, got {value}")

    @property
    def num_actions(self) -> int:
        return num_actions(self.board_size)

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelConfig:
        """Build from a mapping (a Hydra node or a checkpoint header); unknown keys are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown ModelConfig keys {unknown}; expected a subset of {sorted(known)}"
            )
        return cls(**{k: data[k] for k in data})


def policy_gather_index(board_size: int) -> torch.Tensor:
    """Flat indices into a ``(4, S, S)`` map, one per action: ``dir * S*S + row * S + col``."""
    cells = board_size * board_size
    index = []
    for sq in range(num_squares(board_size)):
        row, col = square_rc(sq + 1, board_size)  # the mover's frame: square sq + 1's cell
        for direction in range(NUM_DIRECTIONS):
            index.append(direction * cells + row * board_size + col)
    return torch.tensor(index, dtype=torch.long)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        nn.init.zeros_(self.bn2.weight)  # block starts as the identity (see module docstring)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(x + y)


class CheckersNet(nn.Module):
    """Residual policy/value net: ``forward(x) -> (policy_logits (N, A), wdl_logits (N, 3))``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        c, s = config.channels, config.board_size
        self.stem = nn.Sequential(
            nn.Conv2d(config.in_planes, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(inplace=True),
        )
        self.tower = nn.Sequential(*(ResidualBlock(c) for _ in range(config.blocks)))
        self.policy_head = nn.Sequential(
            nn.Conv2d(c, config.policy_channels, 1, bias=False),
            nn.BatchNorm2d(config.policy_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(config.policy_channels, NUM_DIRECTIONS, 1),
        )
        self.value_head = nn.Sequential(
            nn.Conv2d(c, config.value_channels, 1, bias=False),
            nn.BatchNorm2d(config.value_channels),
            nn.ReLU(inplace=True),
            nn.Flatten(),
            nn.Linear(config.value_channels * s * s, config.value_hidden),
            nn.ReLU(inplace=True),
            nn.Linear(config.value_hidden, NUM_WDL),
        )
        # Not persistent: derived from the config, so it stays out of checkpoints.
        self.register_buffer("policy_index", policy_gather_index(s), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.tower(self.stem(x))
        policy_map = self.policy_head(h)  # (N, 4, S, S)
        policy = torch.flatten(policy_map, 1).index_select(1, self.policy_index)
        return policy, self.value_head(h)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
