"""MCTS players: the network's search (or a network-free one) behind the ``Player`` protocol.

An :class:`MCTSPlayer` plays the way the network would in a match: the batched C++ search of
``game.mcts`` over one game, no Dirichlet noise, temperature 0 (the most visited action),
so it is deterministic for given weights and settings. Its tree is kept between its own moves:
when the position it is asked about is the one its last move led to, or that position plus one
opponent move, the search continues from the matching subtree instead of starting over.

A multi-jump is one move made of several actions; the player searches each decision of it (the
single-continuation ones cost nothing with ``collapse_forced`` / ``skip_forced_root``) and
returns the whole move.

Specs (``evaluation.players.make_player`` hands every spec that is not minimax or random to
:func:`mcts_player`)::

    path/to/ckpt.safetensors                 the checkpoint's network, default settings
    path/to/ckpt.safetensors:sims=256        ... with 256 simulations per decision
    uniform-mcts:sims=64                     equal priors, every leaf a draw (no network)

Options after the colon, separated by ``,`` or ``:``: ``sims`` (simulations per decision),
``leaves`` (leaves per forward pass), ``cpuct``, ``device`` (auto, cpu, cuda, ...),
``threads`` (torch intra-op threads; 1 by default so parallel workers do not oversubscribe).
Defaults come from the composed config: the ``mcts`` group with ``simulations`` and
``leaves_per_game`` from the ``evaluation`` group.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from game import _core
from game.mcts import Evaluator, UniformEvaluator, new_search, search
from game.position import Move, Position
from learner.config import compose

logger = logging.getLogger(__name__)

CHECKPOINT_SUFFIX = ".safetensors"
UNIFORM_SPEC = "uniform-mcts"
# Torch threads of a checkpoint player unless its spec says otherwise: match workers run one
# per core, and torch's default (every core in each process) would oversubscribe the machine.
DEFAULT_TORCH_THREADS = 1
# Keys of the `evaluation` group that override the `mcts` group for evaluation players.
EVAL_MCTS_KEYS = ("simulations", "leaves_per_game")
_SPEC = re.compile(
    rf"(?P<source>{re.escape(UNIFORM_SPEC)}|.+?{re.escape(CHECKPOINT_SUFFIX)})(?::(?P<opts>.*))?"
)
# Spec option -> (mcts key or player argument, type).
_OPTIONS: dict[str, tuple[str, type]] = {
    "sims": ("simulations", int),
    "simulations": ("simulations", int),
    "leaves": ("leaves_per_game", int),
    "cpuct": ("c_puct", float),
    "device": ("device", str),
    "threads": ("threads", int),
}


def eval_mcts_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The search settings of evaluation players in a composed config: the mcts group with the
    evaluation group's simulations and leaves per game (plain values)."""
    settings = {k: cfg["mcts"][k] for k in cfg["mcts"]}
    settings.update({k: cfg["evaluation"][k] for k in EVAL_MCTS_KEYS})
    return settings


@functools.cache
def _composed_mcts_settings() -> tuple[tuple[str, Any], ...]:
    return tuple(eval_mcts_settings(compose()).items())


def default_mcts_settings() -> dict[str, Any]:
    """The search settings of evaluation players: the composed config's (learner.config.compose)
    mcts group with the evaluation group's simulations and leaves per game. Noise is always off
    here (see :func:`play_settings`)."""
    return dict(_composed_mcts_settings())


def play_settings(mcts: Mapping[str, Any] | None, **overrides: Any) -> dict[str, Any]:
    """Search settings for playing to win: no Dirichlet noise, and the in-tree first-play
    urgency at the root too (the config's root value assumes noise spreads the visits there)."""
    settings = dict(default_mcts_settings() if mcts is None else mcts)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    settings["dirichlet_epsilon"] = 0.0
    if "fpu_reduction" in settings:
        settings["fpu_reduction_root"] = settings["fpu_reduction"]
    return settings


def _same_state(a: _core.Game, b: _core.Game) -> bool:
    """Same position, side, clocks and ply: a tree built on ``a`` serves ``b``.

    Histories are not compared: a Position advanced by whole moves (``make``) keeps one history
    entry per move, the tree's game (``step``) one per action, as in self-play, so they differ
    after a multi-jump. The tree's own history is the one the network was trained on.
    """
    return (
        a.hash == b.hash
        and a.ply == b.ply
        and a.no_progress == b.no_progress
        and a.max_plies == b.max_plies
        and not a.mid_jump
        and not b.mid_jump
        and (a.pack_history()[0] == b.pack_history()[0]).all()
    )


class MCTSPlayer:
    """A Player that searches with ``evaluator`` and plays the most visited action.

    ``mcts``: search settings (keys of conf/mcts; noise is turned off whatever they say).
    ``seed`` only seeds the search's generator: with temperature 0 and no noise it draws nothing,
    so the same evaluator and settings always give the same moves. ``reuse_tree=False`` starts
    every decision from an empty tree (for comparisons).
    """

    def __init__(
        self,
        evaluator: Evaluator,
        mcts: Mapping[str, Any] | None = None,
        *,
        name: str = "mcts",
        seed: int = 0,
        size: int | None = None,
        reuse_tree: bool = True,
    ) -> None:
        self.evaluator = evaluator
        self.settings = play_settings(mcts)
        self.name = name
        self.seed = seed
        self.size = size  # board side; None: taken from the first position
        self.reuse_tree = reuse_tree
        self.simulations = int(self.settings.get("simulations", _core.MctsConfig().simulations))
        self._mcts: _core.BatchedMCTS | None = None
        self._synced = False  # the tree's root is a position of the current game
        self.decisions = 0  # moves chosen since construction
        self.reused = 0  # of those, the ones whose search started from a kept subtree
        self.evaluations = 0  # leaves sent to the evaluator since construction

    def _search_object(self, size: int) -> _core.BatchedMCTS:
        if self.size is not None and size != self.size:
            raise ValueError(f"{self.name} plays {self.size}x{self.size}, got a {size}x{size} game")
        if self._mcts is None or self._mcts.size != size:
            self._mcts = new_search(1, size, self.settings, seed=self.seed)
            self._synced = False
        return self._mcts

    def _sync(self, game: _core.Game) -> None:
        """Points the tree's root at ``game``, keeping the matching subtree when there is one."""
        mcts = self._search_object(game.size)
        if self._synced and self.reuse_tree and not mcts.done(0):
            root = mcts.game(0)
            if _same_state(root, game):
                self.reused += 1
                return
            for move in root.legal_moves():  # the opponent's reply to our last move
                after = root.copy()
                after.make(move)
                if _same_state(after, game):
                    for action in root.actions_of(move):
                        mcts.advance(0, action)
                    self.reused += 1
                    return
        mcts.reset(0, game)
        self._synced = True

    def choose(self, position: Position) -> Move:
        game = position.game
        if position.is_over():
            raise ValueError(f"{self.name}: the game is over in {position.fen()}")
        if game.mid_jump:
            raise ValueError(f"{self.name}: asked for a move in the middle of a multi-jump")
        self._sync(game)
        self.decisions += 1
        mcts = self._mcts
        assert mcts is not None
        start = mcts.game(0)
        actions: list[int] = []
        while True:
            self.evaluations += search(mcts, self.evaluator, self.simulations).leaves
            action = mcts.choose(0, 0.0)
            mcts.advance(0, action)
            actions.append(action)
            if mcts.done(0) or not mcts.game(0).mid_jump:
                break
        return start.move_of(actions)

    def reset(self) -> None:
        self._synced = False  # the next choose() starts a fresh tree

    def __repr__(self) -> str:
        return f"MCTSPlayer({self.name!r}, simulations={self.simulations})"


def _learner_side() -> tuple[Any, Any]:
    """``(load_checkpoint, NetworkEvaluator)``, imported on first use.

    The one deferred project import: they bring torch, whose import costs 1.0-1.4 s per process
    here (measured), and every match worker (a Ray task or a pool process) that plays only
    minimax or random players would pay it for nothing.
    """
    from learner.checkpoint import load_checkpoint
    from learner.inference import NetworkEvaluator

    return load_checkpoint, NetworkEvaluator


def network_evaluator(model: Any, *, device: str = "cpu", threads: int | None = None) -> Evaluator:
    """A NetworkEvaluator over an in-memory CheckersNet."""
    _, network_evaluator_class = _learner_side()
    return network_evaluator_class(model, device=device, num_threads=threads)


def network_player(
    model: Any,
    mcts: Mapping[str, Any] | None = None,
    *,
    name: str,
    device: str = "cpu",
    threads: int | None = None,
    seed: int = 0,
) -> MCTSPlayer:
    """An MCTSPlayer over an in-memory network (the evaluator's candidates and best)."""
    return MCTSPlayer(
        network_evaluator(model, device=device, threads=threads),
        mcts,
        name=name,
        seed=seed,
        size=model.config.board_size,
    )


def checkpoint_player(
    path: str | Path,
    mcts: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    device: str = "cpu",
    threads: int | None = DEFAULT_TORCH_THREADS,
    seed: int = 0,
) -> MCTSPlayer:
    """An MCTSPlayer over a model checkpoint file (learner.checkpoint.save_checkpoint)."""
    load_checkpoint, _ = _learner_side()
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} not found")
    model, meta = load_checkpoint(path)
    settings = play_settings(mcts)
    label = name or f"{path.name}:sims={settings.get('simulations')}"
    logger.info("checkpoint player %s (step %d, version %d)", label, meta.step, meta.version)
    return network_player(model, settings, name=label, device=device, threads=threads, seed=seed)


def parse_spec(spec: str) -> tuple[str, dict[str, Any]] | None:
    """``(source, options)`` of an MCTS player spec, None if ``spec`` is not one.

    ``source`` is ``uniform-mcts`` or a checkpoint path; ValueError on a bad option.
    """
    m = _SPEC.fullmatch(spec.strip())
    if m is None:
        return None
    options: dict[str, Any] = {}
    for item in filter(None, re.split(r"[,:]", m["opts"] or "")):
        key, sep, value = item.partition("=")
        if not sep or key not in _OPTIONS:
            raise ValueError(
                f"player spec {spec!r}: bad option {item!r}; use key=value with keys "
                f"{sorted(_OPTIONS)}"
            )
        target, kind = _OPTIONS[key]
        try:
            options[target] = kind(value)
        except ValueError:
            raise ValueError(
                f"player spec {spec!r}: option {key} must be {kind.__name__}, got {value!r}"
            ) from None
    if options.get("simulations", 1) < 1 or options.get("leaves_per_game", 1) < 1:
        raise ValueError(f"player spec {spec!r}: sims and leaves must be at least 1")
    return m["source"], options


def mcts_player(
    spec: str,
    *,
    seed: int = 0,
    mcts: Mapping[str, Any] | None = None,
    **_other: Any,
) -> MCTSPlayer | None:
    """The player of a ``uniform-mcts[:...]`` or ``*.safetensors[:...]`` spec, None for others.

    ``mcts`` (a make_player option) replaces the default search settings; the spec's own
    options win over both.
    """
    parsed = parse_spec(spec)
    if parsed is None:
        return None
    source, options = parsed
    device = options.pop("device", "cpu")
    threads = options.pop("threads", DEFAULT_TORCH_THREADS)
    settings = play_settings(mcts, **options)
    sims = settings.get("simulations")
    if source == UNIFORM_SPEC:
        return MCTSPlayer(
            UniformEvaluator(), settings, name=f"{UNIFORM_SPEC}:sims={sims}", seed=seed
        )
    if not Path(source).is_file():
        raise ValueError(f"unknown player spec {spec!r}: no checkpoint file at {source}")
    return checkpoint_player(source, settings, device=device, threads=threads, seed=seed)


__all__ = [
    "MCTSPlayer",
    "checkpoint_player",
    "default_mcts_settings",
    "eval_mcts_settings",
    "mcts_player",
    "network_player",
    "parse_spec",
    "play_settings",
]
