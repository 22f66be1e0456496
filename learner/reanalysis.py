"""Reanalysis (MuZero Reanalyze): positions of the replay window searched again with the newest
weights, so that training reads fresher policy targets and root values than the games' own.

The learner's prefetch thread does it (learner.reanalysis.enabled): for each batch it draws,
a share (learner.reanalysis.share) of the positions is searched again by the newest published
weights before the batch is queued, and the new targets stay in the mirror
(`ReplayMirror.set_targets`) for later draws, with the version they came from. That thread
otherwise waits on a full queue while the training step runs on the GPU or the learner waits
for self-play, so the searches use time that would idle; on a laptop they share the cores with
self-play. The age of the trained targets (newest version less the target's) is logged as
`replay/target_age` and the share of reanalysed positions as `replay/reanalysed`.

A position is rebuilt as a game from its packed history: the oldest position of the history
(in the middle of a multi-jump if it was one), then the actions that lead to each newer one. A
history that no legal action continues (a bad stored record) is skipped and counted in
`skipped`, and the prefetcher never trains on that position (`ReplayMirror.exclude`).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from checkerzero.network.inference import NetworkInference
from game import _core
from game.encoding import META_PRESENT, NUM_WDL, num_actions
from game.mcts import Inference, new_search, search

__all__ = ["Reanalysed", "Reanalyser", "game_from_history"]


def game_from_history(history: np.ndarray, size: int) -> _core.Game | None:
    """A game whose last HISTORY positions are `history` (HISTORY, 4), newest first, or None
    when no game can be set up at its oldest position or no legal action leads from one stored
    position to the next (a bad record).

    It starts at the oldest stored position, in the middle of a multi-jump if it was one, so
    the network sees the same history planes as in training."""
    slots = [k for k in range(len(history)) if int(history[k][3]) & META_PRESENT]
    if not slots:
        return None
    start = slots[-1]
    try:
        game = _core.Game.from_packed(size, history[start])
    except ValueError:
        return None
    for k in range(start - 1, -1, -1):
        want = history[k]
        for action in game.legal_actions():
            game.step(int(action))
            if np.array_equal(game.pack_history()[0], want):
                break
            game.undo()
        else:
            return None
    return game


@dataclass(frozen=True)
class Reanalysed:
    """What `Reanalyser.run` found for n positions."""

    pi: np.ndarray  # float32 (n, A): the search's policy target, where ok
    root_wdl: np.ndarray  # float32 (n, 3): the search's root value, where ok
    ok: np.ndarray  # bool (n,): searched (not: a single legal move, or bad)
    bad: np.ndarray  # bool (n,): no game could be rebuilt from the stored history
    version: int  # the weights version that searched


class Reanalyser:
    """Searches positions given as packed histories with the newest weights.

    ``mcts``: search settings (conf/mcts keys; root noise is turned off); ``simulations`` per
    position; ``games``: positions searched side by side (one BatchedMCTS). ``update`` takes
    the newest weights (the training thread calls it when it publishes), ``run`` searches (on
    the prefetch thread): a lock keeps the two apart.
    """

    def __init__(
        self,
        mcts: Mapping[str, Any],
        size: int,
        *,
        simulations: int,
        games: int,
        seed: int = 0,
    ) -> None:
        if simulations < 1:
            raise ValueError(f"learner.reanalysis.simulations must be >= 1, got {simulations}")
        if games < 1:
            raise ValueError(f"learner.reanalysis.games must be >= 1, got {games}")
        self.settings = {**dict(mcts), "simulations": simulations, "dirichlet_epsilon": 0.0}
        self.size = size
        self.games = games
        self.seed = seed
        self.skipped = 0  # positions no game could be rebuilt for (bad stored histories)
        self.searched = 0
        self._lock = threading.Lock()
        self._evaluator: Inference | None = None

    @property
    def version(self) -> int | None:
        """The weights version searches use now; None before the first `update`."""
        with self._lock:
            return None if self._evaluator is None else int(self._evaluator.version)

    def update(
        self, model: torch.nn.Module, version: int, device: str | torch.device = "cpu"
    ) -> None:
        """The weights to search with from now on: a copy of ``model`` on ``device`` (the
        learner's: on a GPU node the searches' forward passes run there), at ``version``."""
        clone = copy.deepcopy(model)
        inference = NetworkInference(clone, device=device, version=version)
        with self._lock:
            self._evaluator = inference

    def use(self, inference: Inference) -> None:
        """Search with ``inference`` (its ``version``) from now on."""
        with self._lock:
            self._evaluator = inference

    def run(self, histories: np.ndarray) -> Reanalysed:
        """Searches every position of ``histories`` (n, HISTORY, 4): the search's policy target
        (``BatchedMCTS.root_policy``: visit fractions, or the completed-Q policy under Gumbel)
        and root value where ``ok``; not ok where no game could be rebuilt (``bad``, counted in
        ``skipped``) or the position has a single legal move (nothing to learn)."""
        with self._lock:
            inference = self._evaluator
        if inference is None:
            raise RuntimeError("Reanalyser.run() before any weights (update or use)")
        n = len(histories)
        pi = np.zeros((n, num_actions(self.size)), np.float32)
        wdl = np.zeros((n, NUM_WDL), np.float32)
        ok = np.zeros(n, np.bool_)
        bad = np.zeros(n, np.bool_)
        games: list[tuple[int, _core.Game]] = []
        for i in range(n):
            game = game_from_history(histories[i], self.size)
            if game is None:
                bad[i] = True
                self.skipped += 1
            elif len(game.legal_actions()) > 1 and game.result() == 0:
                games.append((i, game))
        for lo in range(0, len(games), self.games):
            chunk = games[lo : lo + self.games]
            mcts = new_search(len(chunk), self.size, self.settings, seed=self.seed + lo)
            for slot, (_, game) in enumerate(chunk):
                mcts.reset(slot, game)
            search(mcts, inference)
            for slot, (i, _) in enumerate(chunk):
                pi[i] = mcts.root_policy(slot)
                wdl[i] = mcts.root_wdl(slot)
                ok[i] = pi[i].sum() > 0
        self.searched += int(ok.sum())
        return Reanalysed(pi, wdl, ok, bad, int(inference.version))
