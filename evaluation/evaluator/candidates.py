"""The evaluator's networks as players: each candidate version, and the best, kept once built.

:class:`Candidates` decodes a version's weights into an MCTS player, remembers the training step
in its header (for the curve of weights published without one), keeps where the run stood when
the version was published (the records' version info), and holds the best's player so that the
gate and the ladder do not rebuild it.
"""

from __future__ import annotations

from typing import Any

from checkerzero.network.checkpoint import decode_checkpoint
from evaluation.evaluator.context import EvalContext
from evaluation.players.base import Player
from evaluation.players.network import network_player


class Candidates:
    def __init__(self, ctx: EvalContext) -> None:
        self.ctx = ctx
        self._best: tuple[int, Player] | None = None
        self._steps: dict[int, int] = {}  # version -> training step, from the weights' header

    def player(self, version: int, data: bytes) -> Player:
        """The MCTS player of ``version``'s weights ``data`` (the best's, when it is)."""
        if self._best is not None and self._best[0] == version:
            return self._best[1]
        s = self.ctx.settings
        model, meta = decode_checkpoint(data, source=f"weights v{version}")
        self._steps[version] = meta.step
        # Where the run stood at publication, read now: the channel drops a version's metadata
        # with its bytes, checkerzero.store.weights.KEEP_VERSIONS publications later, often before
        # the games end when the learner publishes fast (a small network), which left the curve
        # without positions and with the rating's time as its wall time.
        self.version_info(version)
        return network_player(
            model,
            s.mcts,
            name=f"v{version}",
            device=s.device,
            threads=s.torch_threads,
            seed=s.seed,
        )

    def best(self, version: int) -> Player | None:
        """The player of the best ``version``; None when its weights are no longer stored."""
        if self._best is not None and self._best[0] == version:
            return self._best[1]
        data = self.ctx.channel.get(version)
        if data is None:  # aged out of the newest versions: promote() kept a copy
            data = self.ctx.channel.best_data()
        if data is None:
            return None
        self._best = (version, self.player(version, data))
        return self._best[1]

    def promoted(self, version: int, player: Player) -> None:
        """``player`` of ``version`` is the best from now on."""
        self._best = (version, player)

    def version_info(self, version: int) -> dict[str, Any]:
        """Where ``version`` stood in the run (EvalState.version_info), kept once read."""
        return self.ctx.state.version_info(
            version, lambda: self.ctx.channel.meta(version), self._steps.get(version)
        )
