"""The Python side of the batched search: build it from the config, and drive it.

The tree lives in C++ (`game._core.BatchedMCTS`). One round trip is: ``gather()`` the leaves of
every game that still needs simulations (planes + legal masks), one forward pass of the
evaluator over the whole batch, ``expand(priors, wdl)``. No Python runs per tree node.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from actors.inference import Evaluator, UniformEvaluator
from game import _core

__all__ = ["Evaluator", "UniformEvaluator", "make_config", "new_search", "search", "step"]

log = logging.getLogger(__name__)

# Keys of conf/mcts that the C++ search reads (the rest of the group is for Python callers).
SEARCH_KEYS = (
    "simulations",
    "leaves_per_game",
    "c_puct",
    "c_puct_base",
    "fpu_reduction",
    "fpu_reduction_root",
    "dirichlet_alpha",
    "dirichlet_epsilon",
    "virtual_loss",
    "collapse_forced",
    "skip_forced_root",
    "seed",
)


@dataclass(frozen=True)
class SearchStats:
    """What one drive of the search cost."""

    batches: int  # gather/expand round trips that had at least one leaf
    leaves: int  # network evaluations


def make_config(cfg: Mapping[str, Any], *, seed: int | None = None) -> _core.MctsConfig:
    """A C++ search config from the `mcts` config group; keys outside SEARCH_KEYS are ignored.

    Raises ValueError naming a key whose value has the wrong type or range.
    """
    out = _core.MctsConfig()
    for key in SEARCH_KEYS:
        if key not in cfg:
            continue
        value = cfg[key]
        try:
            setattr(out, key, value)
        except TypeError as err:
            raise ValueError(f"mcts.{key}: cannot use {value!r} ({err})") from err
    if seed is not None:
        out.seed = seed
    if out.simulations < 0 or out.leaves_per_game < 1:
        raise ValueError(
            f"mcts: simulations must be >= 0 and leaves_per_game >= 1, got "
            f"{out.simulations} and {out.leaves_per_game}"
        )
    return out


def new_search(
    num_games: int, size: int, cfg: Mapping[str, Any], *, seed: int | None = None
) -> _core.BatchedMCTS:
    """A BatchedMCTS over `num_games` games of side `size`, every game at the start position."""
    try:
        return _core.BatchedMCTS(num_games, size, make_config(cfg, seed=seed))
    except (TypeError, RuntimeError) as err:
        raise ValueError(f"mcts: {err}") from err


def step(mcts: _core.BatchedMCTS, evaluator: Evaluator) -> int:
    """One round trip: gather, evaluate, expand. Returns the number of leaves evaluated."""
    planes, masks = mcts.gather()
    n = len(masks)
    if n == 0:
        return 0
    priors, wdl = evaluator.evaluate(planes, masks)
    mcts.expand(
        np.ascontiguousarray(priors, dtype=np.float32), np.ascontiguousarray(wdl, dtype=np.float32)
    )
    return n


def search(
    mcts: _core.BatchedMCTS, evaluator: Evaluator, simulations: int | None = None
) -> SearchStats:
    """Runs the search of every unfinished game until each has `simulations` visits below its root.

    ``simulations`` None keeps the object's setting. Games whose decision is forced (one legal
    action, with skip_forced_root) need no search and cost nothing.
    """
    if simulations is not None:
        mcts.simulations = simulations
    batches = leaves = 0
    while True:
        n = step(mcts, evaluator)
        if n == 0:
            break
        batches += 1
        leaves += n
    return SearchStats(batches=batches, leaves=leaves)
