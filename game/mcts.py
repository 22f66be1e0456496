"""The Python side of the batched MCTS: build it from the config, and drive it.

The tree lives in C++ (`game._core.BatchedMCTS`). One round trip is: ``gather()`` the leaves of
every game that still needs simulations (planes + legal masks), one forward pass of the
inference over the whole batch, ``expand(priors, wdl)``. No Python runs per tree node.

Playout cap randomization (KataGo, "Accelerating Self-Play Learning in Go", Wu 2019): with a
`PlayoutCap`, `draw_search` gives one game its next decision's search, a full one (the config's
simulations, root noise, forced playouts) with probability ``full_share``, else a fast one
(``fast_simulations``, neither). Each game of one BatchedMCTS keeps its own budget in the C++
tree (``set_search``), so full and fast searches share the same batched forward passes.

Everything that asks about positions goes through an ``Inference``: NumPy in (planes
``(N, C, S, S)`` float32, legal mask ``(N, A)`` bool), NumPy out (priors ``(N, A)`` float32 that
are a softmax over the legal actions only, exactly 0 on illegal ones; WDL probabilities
``(N, 3)`` float32 from the mover's view). The search stays free of torch and of devices: the
network's inference is ``checkerzero.network.inference.NetworkInference``.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from game import _core
from game.search_parameters import SEARCH_KEYS, SEARCH_PARAMETERS

__all__ = [
    "SEARCH_KEYS",
    "SEARCH_PARAMETERS",
    "Inference",
    "PlayoutCap",
    "StepTimes",
    "UniformInference",
    "check_mask",
    "draw_search",
    "make_config",
    "new_search",
    "search",
    "search_many",
    "search_until",
    "step",
]

log = logging.getLogger(__name__)

UNIFORM_WDL = (0.0, 1.0, 0.0)  # "no idea": call every position a draw


@runtime_checkable
class Inference(Protocol):
    """Maps a batch of positions to (priors (N, A) float32, wdl (N, 3) float32)."""

    version: int  # weights version the answers come from (0 for fixed inferences)

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


def check_mask(mask: np.ndarray, num_actions: int) -> None:
    """ValueError unless ``mask`` is a 2-d bool array of ``num_actions`` columns, none all False."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.ndim != 2:
        got = f"{mask.dtype} {mask.shape}" if isinstance(mask, np.ndarray) else type(mask).__name__
        raise ValueError(f"mask must be a 2-d bool array, got {got}")
    if mask.shape[1] != num_actions:
        raise ValueError(f"mask has {mask.shape[1]} actions per row, expected {num_actions}")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"rows {empty[:10].tolist()} of the mask have no legal action")


class UniformInference:
    """Equal priors over the legal actions and a draw for every position (no network)."""

    def __init__(self, num_actions: int | None = None) -> None:
        """``num_actions`` None accepts any board (the action count is read off the mask)."""
        if num_actions is not None and num_actions <= 0:
            raise ValueError(f"num_actions must be positive, got {num_actions}")
        self.num_actions = num_actions
        self.version = 0

    def evaluate(self, planes: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        check_mask(mask, self.num_actions if self.num_actions is not None else mask.shape[-1])
        if len(planes) != len(mask):
            raise ValueError(f"planes has {len(planes)} rows but mask has {len(mask)}")
        legal = mask.astype(np.float32)
        priors = legal / legal.sum(axis=1, keepdims=True)
        wdl = np.tile(np.asarray(UNIFORM_WDL, dtype=np.float32), (len(mask), 1))
        return priors, wdl


@dataclass(frozen=True)
class SearchStats:
    """What one drive of the search cost."""

    batches: int  # gather/expand round trips that had at least one leaf
    leaves: int  # network evaluations


def make_config(cfg: Mapping[str, Any], *, seed: int | None = None) -> _core.MctsConfig:
    """A C++ search config from the `mcts` config group; keys outside SEARCH_KEYS are ignored,
    a key it lacks takes its declared default (game.search_parameters).

    Raises ValueError naming a key whose value has the wrong type or range.
    """
    out = _core.MctsConfig()
    for key, parameter in SEARCH_PARAMETERS.items():
        value = cfg.get(key, parameter.default)
        why = parameter.problem(value)
        if why is not None:
            raise ValueError(f"mcts.{key}={value!r}: {why}")
        setattr(out, key, value)
    if seed is not None:
        out.seed = seed
    return out


def new_search(
    num_games: int, size: int, cfg: Mapping[str, Any], *, seed: int | None = None
) -> _core.BatchedMCTS:
    """A BatchedMCTS over `num_games` games of side `size`, every game at the start position."""
    try:
        return _core.BatchedMCTS(num_games, size, make_config(cfg, seed=seed))
    except (TypeError, RuntimeError) as err:
        raise ValueError(f"mcts: {err}") from err


@dataclass(frozen=True)
class PlayoutCap:
    """Playout cap randomization: a decision is searched fully with probability `full_share`
    (`full_simulations`), else fast (`fast_simulations`, no root noise, no forced playouts)."""

    full_share: float
    full_simulations: int
    fast_simulations: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.full_share <= 1.0:
            raise ValueError(f"full_share must be in [0, 1], got {self.full_share}")
        if not 0 <= self.fast_simulations <= self.full_simulations:
            raise ValueError(
                f"fast_simulations must be in [0, full simulations = {self.full_simulations}], "
                f"got {self.fast_simulations}"
            )

    @classmethod
    def from_config(cls, selfplay: Mapping[str, Any], mcts: Mapping[str, Any]) -> PlayoutCap | None:
        """The cap of `selfplay.playout_cap` (simulations from `mcts`); None when it is off.

        Raises ValueError naming the key whose value is missing or out of range.
        """
        cap = selfplay.get("playout_cap") or {}
        if not cap.get("enabled", False):
            return None
        for key in ("full_share", "fast_simulations"):
            if key not in cap:
                raise ValueError(f"config key selfplay.playout_cap.{key} is missing")
        if "simulations" not in mcts:
            raise ValueError("config key mcts.simulations is missing (the full searches' budget)")
        try:
            return cls(
                full_share=float(cap["full_share"]),
                full_simulations=int(mcts["simulations"]),
                fast_simulations=int(cap["fast_simulations"]),
            )
        except (TypeError, ValueError) as err:
            raise ValueError(f"selfplay.playout_cap: {err}") from err


def draw_search(
    mcts: _core.BatchedMCTS, game: int, cap: PlayoutCap, rng: np.random.Generator
) -> bool:
    """Sets game `game`'s next search to a full or a fast one as `cap` draws it; True: full.

    Call it when the game's root is new (after ``reset`` or ``advance``), before searching.
    """
    full = bool(rng.random() < cap.full_share)
    mcts.set_search(game, cap.full_simulations if full else cap.fast_simulations, full)
    return full


@dataclass
class StepTimes:
    """Seconds that `step` calls spent, added up: in the tree (gather, expand), in the network."""

    tree_s: float = 0.0
    network_s: float = 0.0


def step(mcts: _core.BatchedMCTS, inference: Inference, times: StepTimes | None = None) -> int:
    """One round trip: gather, evaluate, expand. Returns the number of leaves evaluated.

    With `times`, the seconds of this round trip are added to it.
    """
    t0 = time.perf_counter()
    planes, masks = mcts.gather()
    t1 = time.perf_counter()
    n = len(masks)
    if n == 0:
        if times is not None:
            times.tree_s += t1 - t0
        return 0
    priors, wdl = inference.evaluate(planes, masks)
    t2 = time.perf_counter()
    mcts.expand(
        np.ascontiguousarray(priors, dtype=np.float32), np.ascontiguousarray(wdl, dtype=np.float32)
    )
    if times is not None:
        times.tree_s += (t1 - t0) + (time.perf_counter() - t2)
        times.network_s += t2 - t1
    return n


def search(
    mcts: _core.BatchedMCTS, inference: Inference, simulations: int | None = None
) -> SearchStats:
    """Runs the search of every unfinished game until each has `simulations` visits below its root.

    ``simulations`` None keeps the object's setting. Games whose decision is forced (one legal
    action, with skip_forced_root) need no search and cost nothing.
    """
    if simulations is not None:
        mcts.simulations = simulations
    batches = leaves = 0
    while True:
        n = step(mcts, inference)
        if n == 0:
            break
        batches += 1
        leaves += n
    return SearchStats(batches=batches, leaves=leaves)


def search_many(
    searches: Sequence[_core.BatchedMCTS], inference: Inference, simulations: int | None = None
) -> list[int]:
    """`search` over several search objects at once, sharing the forward passes: each round
    gathers every object's leaves into one batch for ``inference`` and hands each its share.

    Each object's tree grows exactly as under `search` with the same inference outputs (a
    gather reads only its own tree), so players that search one at a time can be stepped
    side by side, e.g. several games of one network, without changing a move: only the
    batches are bigger. Returns the leaves each object sent to the inference, in order.
    """
    if simulations is not None:
        for mcts in searches:
            mcts.simulations = simulations
    leaves = [0] * len(searches)
    while True:
        parts = []
        for i, mcts in enumerate(searches):
            planes, masks = mcts.gather()
            if len(masks):
                parts.append((i, planes, masks))
        if not parts:
            return leaves
        priors, wdl = inference.evaluate(
            np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
        )
        bounds = np.cumsum([0] + [len(p[2]) for p in parts])
        for (i, _, masks), (a, b) in zip(parts, itertools.pairwise(bounds), strict=True):
            searches[i].expand(
                np.ascontiguousarray(priors[a:b], dtype=np.float32),
                np.ascontiguousarray(wdl[a:b], dtype=np.float32),
            )
            leaves[i] += len(masks)


def settled(visits: Sequence[int] | np.ndarray, more: float) -> bool:
    """Whether ``more`` further visits could no longer change the most visited action (the
    move a temperature-0 search plays): its lead over the runner-up is larger than ``more``.
    Time management stops a timed search there instead of spending the rest of its budget."""
    counts = sorted((int(v) for v in visits), reverse=True)
    if not counts or counts[0] == 0:
        return False
    runner_up = counts[1] if len(counts) > 1 else 0
    return counts[0] - runner_up > more


def search_until(
    mcts: _core.BatchedMCTS,
    inference: Inference,
    deadline: float,
    *,
    chunk: int,
    clock: Callable[[], float] = time.perf_counter,
    stop_when: Callable[[float], bool] | None = None,
) -> SearchStats:
    """Searches every unfinished game until ``deadline`` (a reading of ``clock``, by default
    ``time.perf_counter()``; a test passes a clock of its own), or until ``stop_when(now)``,
    asked between round trips once every root is expanded, says the search is settled.

    One round trip (``step``) at a time, the clock read between them, so the search ends at most
    one batch after the deadline. Each round raises the target to ``chunk`` visits past the
    most-searched root, so a batch holds at most ``chunk`` new visits per game (and never loops on
    terminal positions without bound). A root that was never evaluated is evaluated even after
    the deadline (a move needs its priors). Stops early when a round adds no visit (every root
    forced, finished or saturated); the object's ``simulations`` setting is restored on return.
    """
    if chunk < 1:
        raise ValueError(f"search_until: chunk must be >= 1, got {chunk}")
    games = range(mcts.num_games)
    saved = mcts.simulations
    batches = leaves = 0
    try:
        while True:
            live = [i for i in games if not mcts.done(i)]
            unexpanded = any(mcts.tree_size(i) == 1 for i in live)
            now = clock()
            if not live or (now >= deadline and not unexpanded):
                break
            if stop_when is not None and not unexpanded and stop_when(now):
                break
            visits = [mcts.root_child_visits(i) for i in live]
            mcts.simulations = max(visits) + chunk
            n = step(mcts, inference)
            if n:
                batches += 1
                leaves += n
            elif [mcts.root_child_visits(i) for i in live] == visits:
                break
    finally:
        mcts.simulations = saved
    return SearchStats(batches=batches, leaves=leaves)
