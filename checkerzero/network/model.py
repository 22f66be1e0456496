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
- Optional moves-left head (``ModelConfig.moves_left_head``, lc0's "MLH"): the value head's
  shape (1x1 conv, hidden layer) ending in one output, the plies left in the game from this
  position. It is an auxiliary target that only training reads (``forward_moves_left``);
  ``forward`` returns policy and WDL whether or not the head is there, so inference and the
  search are unchanged. The output is a linear unit scaled by ``MOVES_LEFT_SCALE`` plies, so
  an output of order one already covers typical game lengths and SGD reaches them in a few
  hundred steps (lc0 scales its target the same way).
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

# Plies per unit of the moves-left head's last layer, and the unit of its loss: lc0's scale
# (20 plies), about a tenth of a checkers game, so the head's output and loss are of order one.
MOVES_LEFT_SCALE = 20.0


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape of the network; the Hydra ``model`` group holds exactly these keys."""

    board_size: int = 8
    in_planes: int = NUM_PLANES
    blocks: int = 4
    channels: int = 16  # as conf/model/default.yaml (docs/tuning.md: 4x16 against 4x32)
    policy_channels: int = 32
    value_channels: int = 8
    value_hidden: int = 128
    moves_left_head: bool = False  # an auxiliary head predicting the plies left (training only)

    def __post_init__(self) -> None:
        if self.board_size < 4 or self.board_size % 2:
            raise ValueError(f"ModelConfig.board_size must be even and >= 4, got {self.board_size}")
        if not isinstance(self.moves_left_head, bool):
            raise ValueError(
                f"ModelConfig.moves_left_head must be true or false, got {self.moves_left_head!r}"
            )
        for field in dataclasses.fields(self):
            if field.name == "moves_left_head":
                continue
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"ModelConfig.{field.name} must be an int, got {value!r}")
            minimum = 0 if field.name == "blocks" else 1
            if value < minimum:
                raise ValueError(f"ModelConfig.{field.name} must be >= {minimum}, got {value}")

    @property
    def num_actions(self) -> int:
        return num_actions(self.board_size)

    def to_dict(self) -> dict[str, int | bool]:
        """The fields as a checkpoint header stores them. ``moves_left_head`` is written only
        when it is on, so a network without the head has the same header as before the head
        existed (and files written by older code, which lack the key, read as no head)."""
        values = dataclasses.asdict(self)
        if not self.moves_left_head:
            del values["moves_left_head"]
        return values

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


def model_config(model_cfg: Mapping[str, Any], board_size: int) -> ModelConfig:
    """The ``ModelConfig`` of the config's ``model`` group for a ``board_size`` board: the
    group may not name another board or another input plane count than the encoder's."""
    values = dict(model_cfg)
    if values.get("board_size", board_size) != board_size:
        raise ValueError(
            f"model.board_size={values['board_size']} does not match game.size={board_size}"
        )
    values["board_size"] = board_size
    if values.get("in_planes", NUM_PLANES) != NUM_PLANES:
        raise ValueError(f"model.in_planes must equal the encoder's {NUM_PLANES} planes")
    return ModelConfig(**values)


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


def _scalar_head(config: ModelConfig, outputs: int) -> nn.Sequential:
    """The value head's shape (1x1 conv, BatchNorm, a hidden layer) with ``outputs`` outputs:
    the WDL head (3) and the moves-left head (1). The layer order fixes the state-dict keys."""
    s = config.board_size
    return nn.Sequential(
        nn.Conv2d(config.channels, config.value_channels, 1, bias=False),
        nn.BatchNorm2d(config.value_channels),
        nn.ReLU(inplace=True),
        nn.Flatten(),
        nn.Linear(config.value_channels * s * s, config.value_hidden),
        nn.ReLU(inplace=True),
        nn.Linear(config.value_hidden, outputs),
    )


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
        self.value_head = _scalar_head(config, NUM_WDL)
        # Only when switched on, so a network without it has exactly the old state dict.
        self.moves_left_head = _scalar_head(config, 1) if config.moves_left_head else None
        # Not persistent: derived from the config, so it stays out of checkpoints.
        self.register_buffer("policy_index", policy_gather_index(s), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(policy_logits (N, A), wdl_logits (N, 3))``, with or without a moves-left head."""
        policy, wdl, _ = self._heads(x, moves_left=False)
        return policy, wdl

    def forward_moves_left(
        self, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(policy_logits, wdl_logits, moves_left (N,))``, the last in plies; ValueError
        when the network has no moves-left head (``ModelConfig.moves_left_head``)."""
        if self.moves_left_head is None:
            raise ValueError("this network has no moves-left head (model.moves_left_head=false)")
        policy, wdl, moves_left = self._heads(x, moves_left=True)
        assert moves_left is not None
        return policy, wdl, moves_left

    def _heads(
        self, x: torch.Tensor, *, moves_left: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        h = self.tower(self.stem(x))
        policy_map = self.policy_head(h)  # (N, 4, S, S)
        policy = torch.flatten(policy_map, 1).index_select(1, self.policy_index)
        plies = None
        if moves_left and self.moves_left_head is not None:
            # float32 before scaling: bf16 (autocast on CUDA) would round 100 plies to +-0.5
            plies = self.moves_left_head(h).squeeze(1).float() * MOVES_LEFT_SCALE
        return policy, self.value_head(h), plies


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
