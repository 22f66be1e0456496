"""What every player is: the :class:`Player` protocol, its counters, the random player."""

from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

from game.position import Move, Position


@runtime_checkable
class Player(Protocol):
    """What a match needs from a player. ``choose`` must not change ``position``."""

    name: str

    def choose(self, position: Position) -> Move:
        """A legal move for the side to move (ValueError when the game is over)."""
        ...

    def reset(self) -> None:
        """Forget per-game state (called before every game)."""
        ...


def player_stats(player: Player) -> dict[str, int]:
    """A player's search counters since construction (``stats()``, plain counts such as moves,
    simulations, depth and nodes summed over its moves); empty for players that do not search."""
    stats = getattr(player, "stats", None)
    return {str(k): int(v) for k, v in stats().items()} if callable(stats) else {}


class RandomPlayer:
    """A uniformly random legal move; ``reset`` restarts its generator from ``seed``."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.name = "random"
        self._rng = random.Random(seed)

    def choose(self, position: Position) -> Move:
        moves = position.legal_moves()
        if not moves or position.is_over():
            raise ValueError(f"random: the game is over in {position.fen()}")
        return self._rng.choice(moves)

    def reset(self) -> None:
        self._rng = random.Random(self.seed)

    def __repr__(self) -> str:
        return f"RandomPlayer(seed={self.seed})"


__all__ = ["Player", "RandomPlayer", "player_stats"]
