"""MCTS players: the network's search (or a network-free one) behind the ``Player`` protocol.

An :class:`MCTSPlayer` plays the way the network would in a match: the batched C++ search of
``game.mcts`` over one game, no Dirichlet noise, temperature 0 (the most visited action),
so it is deterministic for given weights and settings. Its tree is kept between its own moves:
when the position it is asked about is the one its last move led to, or that position plus one
opponent move, the search continues from the matching subtree instead of starting over.

A multi-jump is one move made of several actions; the player searches each decision of it (the
single-continuation ones cost nothing with ``collapse_forced`` / ``skip_forced_root``) and
returns the whole move.

With a time budget (``:t200``, 200 ms per move) the player searches until the budget is spent
instead of to a number of simulations (``game.mcts.search_until``): batches of
``leaves_per_game`` leaves, the clock read between batches, so a move overshoots its budget by
at most one batch. The budget covers the whole move, a multi-jump's later decisions included
(they mostly read the visits the first one already spread below them), the kept subtree's
visits add to the new ones, a searched move gets at least one batch of visits even when the
budget ran out first (a stalled machine), and a move that is the only legal one is played at
once, without search. The player counts what it did (``stats()``: moves searched, simulations,
forced moves, reused trees), which a match reports as the mean simulations per move.

Specs (``evaluation.players.make_player`` hands every spec that is not minimax or random to
:func:`mcts_player`)::

    path/to/ckpt.safetensors                 the checkpoint's network, default settings
    path/to/ckpt.safetensors:sims=256        ... with 256 simulations per decision
    path/to/ckpt.safetensors:t200            ... with 200 milliseconds per move (also ms=200)
    path/to/ckpt.safetensors:sims=0          no search: the policy's most probable move
                                             (evaluation.policy_player; a Q-network's
                                             checkpoint always plays its greedy move)
    uniform-mcts:sims=64                     equal priors, every leaf a draw (no network)
    uniform-mcts:t200                        ... searching 200 ms per move

Options after the colon, separated by ``,`` or ``:``: ``sims`` (simulations per decision) or
``tMS`` / ``ms=MS`` (milliseconds per move; not both), ``leaves`` (leaves per forward pass),
``cpuct``, ``fpu`` (first-play urgency reduction, root included), ``pst`` (policy softmax
temperature), ``solver`` (1 or 0: the MCTS-solver on or off, as ``mcts.solver``), ``root``
(puct or gumbel: the search at the root and its choice of move, as ``mcts.root_policy``), ``device``
(auto, cpu, cuda, ...), ``threads`` (torch intra-op threads; 1 by default so parallel workers do
not oversubscribe), ``precision`` (auto, float32, bfloat16: the network's arithmetic; auto is bf16
on CUDA and on a CPU with native bf16, checkerzero.network.inference.compute_dtype), ``backend``
(auto, eager or jit: how the network runs; jit, float32 on a CPU, is the faster one, and auto
picks it wherever it runs, checkerzero.network.inference.NetworkEvaluator).
Defaults come from the composed config: the ``mcts`` group with ``simulations`` and
``leaves_per_game`` from the ``evaluation`` group, and for a player with a time per move that
group's ``timed_leaves_per_game`` (a ``leaves`` option wins over both); the root search is the
``evaluation`` group's ``root_policy`` (puct unless set; a ``root`` option wins), not self-play's.

Two switches bring in what the system knows exactly (both off unless the spec or the config turns
them on; ``egdb=1`` / ``book=1`` on, ``=0`` off):

``egdb``
    the endgame database (the ``egdb`` config group's ``dir`` and ``pieces``; default
    ``egdb.play``): its values at the search's leaves, and at a root it knows the move is chosen
    among those that keep its value by a progress search (:mod:`evaluation.endgame_play`), so a
    won ending is won, not shuffled. An absent database is said in one warning line and the
    player plays without it.
``book``
    the opening book beside the checkpoint (``<stem>.book.json``, :mod:`evaluation.book`;
    default ``evaluation.book``): a position in it is played from the book without search. An
    absent book is said in one warning line; a damaged or foreign one is refused (ValueError
    naming the file).
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

from checkerzero.config import compose
from checkerzero.network.precision import PRECISIONS
from evaluation.book import Book, book_path, load_book
from evaluation.endgame_play import (
    DEFAULT_PROGRESS_DEPTH,
    database_move,
    open_for_play,
    play_database_settings,
)
from evaluation.policy_player import PolicyPlayer, is_q_network
from game import _core
from game.egdb import EndgameDatabase
from game.mcts import (
    SEARCH_KEYS,
    Evaluator,
    UniformEvaluator,
    new_search,
    search,
    search_until,
)
from game.position import Move, Position

logger = logging.getLogger(__name__)

CHECKPOINT_SUFFIX = ".safetensors"
UNIFORM_SPEC = "uniform-mcts"
# Torch threads of a checkpoint player unless its spec says otherwise: match workers run one
# per core, and torch's default (every core in each process) would oversubscribe the machine.
DEFAULT_TORCH_THREADS = 1
# Keys of the `evaluation` group that override the `mcts` group for evaluation players
# (timed_leaves_per_game is read by players with a time per move only: their leaves per forward
# pass; root_policy judges every run by the same search, whatever its self-play used).
EVAL_MCTS_KEYS = ("simulations", "leaves_per_game", "timed_leaves_per_game", "root_policy")
_SPEC = re.compile(
    rf"(?P<source>{re.escape(UNIFORM_SPEC)}|.+?{re.escape(CHECKPOINT_SUFFIX)})(?::(?P<opts>.*))?"
)
# A time budget written as an option without a key: t200 is 200 milliseconds per move.
_TIME_OPTION = re.compile(r"t(?P<ms>\d+)")


def _switch(value: str) -> bool:
    """An on/off spec option: 1, on or true; 0, off or false."""
    word = value.lower()
    if word not in ("1", "on", "true", "0", "off", "false"):
        raise ValueError(value)
    return word in ("1", "on", "true")


def _shown(value: Any) -> Any:
    """A spec option's value as a player's name writes it (a switch as 1 or 0)."""
    return int(value) if isinstance(value, bool) else value


# Spec option -> (mcts key or player argument, type).
_OPTIONS: dict[str, tuple[str, Any]] = {
    "sims": ("simulations", int),
    "simulations": ("simulations", int),
    "ms": ("time_ms", int),
    "leaves": ("leaves_per_game", int),
    "cpuct": ("c_puct", float),
    "fpu": ("fpu_reduction", float),
    "pst": ("policy_temperature", float),
    "solver": ("solver", _switch),
    "root": ("root_policy", str),
    "device": ("device", str),
    "threads": ("threads", int),
    "precision": ("precision", str),
    "backend": ("backend", str),
    "egdb": ("egdb", _switch),
    "book": ("book", _switch),
}
# Spec options that change the search (besides the budget), named in the player's name when given.
_SEARCH_OPTIONS_SHOWN = tuple(
    key
    for key, (target, _) in _OPTIONS.items()
    if target in SEARCH_KEYS and target != "simulations"
)


def _label(source: str, budget: str, precision: str) -> str:
    """A checkpoint player's name: file name, budget and search options, a precision it forces."""
    return f"{Path(source).name}:{budget}" + ("" if precision == "auto" else f",{precision}")


def eval_mcts_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The search settings of evaluation players in a composed config: the mcts group with the
    evaluation group's simulations, leaves per game and root policy (plain values)."""
    settings = {k: cfg["mcts"][k] for k in cfg["mcts"]}
    settings.update({k: cfg["evaluation"][k] for k in EVAL_MCTS_KEYS})
    return settings


@functools.cache
def _composed_mcts_settings() -> tuple[tuple[str, Any], ...]:
    return tuple(eval_mcts_settings(compose()).items())


@functools.cache
def _composed_knowledge() -> tuple[tuple[tuple[str, Any], ...], bool]:
    cfg = compose()
    return tuple(play_database_settings(cfg["egdb"]).items()), bool(cfg["evaluation"]["book"])


def default_knowledge() -> tuple[dict[str, Any], bool]:
    """``(egdb, book)`` defaults of the players from the composed config: the database's
    ``{"on", "dir", "pieces", "depth"}`` (``egdb.play``, ``egdb.dir``, ``egdb.pieces``,
    ``egdb.play_depth``) and whether the book is on (``evaluation.book``)."""
    egdb, book = _composed_knowledge()
    return dict(egdb), book


def default_mcts_settings() -> dict[str, Any]:
    """The search settings of evaluation players: the composed config's (checkerzero.config.compose)
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
    every decision from an empty tree (for comparisons). ``time_ms`` > 0 searches each move for
    that many milliseconds instead of ``simulations`` per decision (module docstring); such a
    player is not reproducible (its visits depend on the machine's speed).
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
        time_ms: int = 0,
        egdb: EndgameDatabase | None = None,
        egdb_depth: int = DEFAULT_PROGRESS_DEPTH,
        book: Book | None = None,
    ) -> None:
        if isinstance(time_ms, bool) or not isinstance(time_ms, int) or time_ms < 0:
            raise ValueError(f"{name}: time_ms must be an integer >= 0, got {time_ms!r}")
        self.evaluator = evaluator
        self.settings = play_settings(mcts)
        self.name = name
        self.seed = seed
        self.size = size  # board side; None: taken from the first position
        self.reuse_tree = reuse_tree
        self.simulations = int(self.settings.get("simulations", _core.MctsConfig().simulations))
        self.time_ms = time_ms  # milliseconds per move; 0: `simulations` per decision
        self.clock = time.perf_counter  # what the time per move is read from (a test sets its own)
        self.egdb = egdb  # the endgame database at leaves and roots (None: off)
        self.egdb_depth = egdb_depth  # plies of the progress search at a database root (no time)
        self.book = book  # the opening book (None: off)
        # One batch of the timed search: the leaves one tree gathers per forward pass.
        self._chunk = int(self.settings.get("leaves_per_game", _core.MctsConfig().leaves_per_game))
        self._mcts: _core.BatchedMCTS | None = None
        self._synced = False  # the tree's root is a position of the current game
        # Counters since construction (reset() keeps them: a match reads them after its games).
        self.decisions = 0  # moves chosen
        self.reused = 0  # of those, the ones whose search started from a kept subtree
        self.evaluations = 0  # leaves sent to the evaluator
        self.forced = 0  # moves that were the only legal one
        self.searched = 0  # the other moves
        self.simulations_done = 0  # new visits below the root over the searched moves
        self.last_simulations = 0  # new visits of the latest move (0 for a forced one)
        self.last_visits = 0  # visits below the root when its first action was chosen
        self.book_moves = 0  # moves played from the book
        self.egdb_moves = 0  # moves chosen at a root the database knows

    def _search_object(self, size: int) -> _core.BatchedMCTS:
        if self.size is not None and size != self.size:
            raise ValueError(f"{self.name} plays {self.size}x{self.size}, got a {size}x{size} game")
        if self._mcts is None or self._mcts.size != size:
            self._mcts = new_search(1, size, self.settings, seed=self.seed)
            if self.egdb is not None and self.egdb.size == size:
                self._mcts.set_egdb(self.egdb.core)
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
        steps = self.decide(position)
        try:
            mcts = next(steps)
            while True:
                mcts = steps.send(search(mcts, self.evaluator, self.simulations).leaves)
        except StopIteration as done:
            return done.value

    def decide(self, position: Position) -> Generator[_core.BatchedMCTS, int, Move]:
        """``choose`` in steps, for a caller that searches several players' trees at once
        (``game.mcts.search_many``, e.g. a match's games side by side): yields this player's
        search object whenever it needs ``simulations`` visits below its root, is sent the
        leaves that search evaluated, and returns the move. A player with a time per move
        searches inside, without yielding (its clock is its own)."""
        game = position.game
        if position.is_over():
            raise ValueError(f"{self.name}: the game is over in {position.fen()}")
        if game.mid_jump:
            raise ValueError(f"{self.name}: asked for a move in the middle of a multi-jump")
        deadline = self.clock() + self.time_ms / 1000.0  # the whole move's budget
        known = self._known_move(position)
        if known is not None:
            return known
        self._sync(game)
        self.decisions += 1
        mcts = self._mcts
        assert mcts is not None
        start = mcts.game(0)
        legal = start.legal_moves()
        forced = len(legal) == 1
        self.forced += forced
        self.searched += not forced
        if forced and self.time_ms:  # nothing to weigh: play it now, keep the tree in step
            for action in start.actions_of(legal[0]):
                mcts.advance(0, action)
            self.last_simulations = self.last_visits = 0
            return start.move_of(start.actions_of(legal[0]))
        actions: list[int] = []
        simulations = 0
        while True:
            before = mcts.root_child_visits(0)
            if self.time_ms:
                leaves = search_until(
                    mcts, self.evaluator, deadline, chunk=self._chunk, clock=self.clock
                ).leaves
                if not actions and mcts.root_child_visits(0) == before and not mcts.done(0):
                    # the budget went before a visit (a stalled machine, a tiny budget): one
                    # batch all the same, so a searched move never rests on the priors alone
                    self.evaluations += leaves  # the root's, if it was evaluated
                    saved = mcts.simulations
                    leaves = search(mcts, self.evaluator, before + self._chunk).leaves
                    mcts.simulations = saved
            else:
                leaves = yield mcts  # the caller searched it, to ``simulations``
            self.evaluations += leaves
            visits = mcts.root_child_visits(0)
            simulations += visits - before
            if not actions:
                self.last_visits = visits
            action = mcts.choose(0, 0.0)
            mcts.advance(0, action)
            actions.append(action)
            if mcts.done(0) or not mcts.game(0).mid_jump:
                break
        self.last_simulations = simulations
        if not forced:
            self.simulations_done += simulations
        return start.move_of(actions)

    def _known_move(self, position: Position) -> Move | None:
        """The book's move, or the database's at a root it knows; None: search. A move played
        so is counted, and the next search starts a fresh tree."""
        move = self.book.move(position) if self.book is not None else None
        if move is not None:
            self.book_moves += 1
        elif self.egdb is not None and self.egdb.size == position.size:
            # a timed player keeps a fifth of its time for the alpha-beta's overshoot
            found = database_move(
                position,
                self.egdb,
                depth=0 if self.time_ms else self.egdb_depth,
                time_ms=max(1, self.time_ms * 4 // 5) if self.time_ms else 0,
            )
            if found is not None:
                move = found[0]
                self.egdb_moves += 1
        if move is not None:
            self.decisions += 1
            self.last_simulations = self.last_visits = 0
            self._synced = False
        return move

    def fork(self) -> MCTSPlayer:
        """A player with this one's evaluator (shared), settings, name and seed and a tree of
        its own: one per game when several games of one network are played side by side."""
        return MCTSPlayer(
            self.evaluator,
            self.settings,
            name=self.name,
            seed=self.seed,
            size=self.size,
            reuse_tree=self.reuse_tree,
            time_ms=self.time_ms,
            egdb=self.egdb,
            egdb_depth=self.egdb_depth,
            book=self.book,
        )

    def stats(self) -> dict[str, int]:
        """What the player did since construction, as plain counts (a match sums them per pair):
        moves searched and forced, new simulations over the searched moves, network
        evaluations, decisions that reused a kept subtree."""
        return {
            "moves": self.searched,
            "forced": self.forced,
            "simulations": self.simulations_done,
            "evaluations": self.evaluations,
            "reused": self.reused,
            "book_moves": self.book_moves,
            "egdb_moves": self.egdb_moves,
        }

    def reset(self) -> None:
        self._synced = False  # the next choose() starts a fresh tree

    def __repr__(self) -> str:
        budget = f"time_ms={self.time_ms}" if self.time_ms else f"simulations={self.simulations}"
        return f"MCTSPlayer({self.name!r}, {budget})"


def _learner_side() -> tuple[Any, Any]:
    """``(load_for_play, NetworkEvaluator)``, imported on first use.

    The one deferred project import: they bring torch, whose import costs 1.0-1.4 s per process
    here (measured), and every match worker (a Ray task or a pool process) that plays only
    minimax or random players would pay it for nothing.
    """
    from checkerzero.network.inference import NetworkEvaluator, load_for_play

    return load_for_play, NetworkEvaluator


def load_network(
    path: str | Path, device: str, threads: int | None, precision: str, backend: str = "auto"
) -> tuple[Any, Any]:
    """``(evaluator, header)`` of a checkpoint file for a player (`load_for_play`, any board:
    the player plays the board its network plays)."""
    load_for_play, _ = _learner_side()
    return load_for_play(
        path, None, device=device, dtype=precision, threads=threads, backend=backend
    )


def network_evaluator(
    model: Any, *, device: str = "cpu", threads: int | None = None, precision: str = "auto"
) -> Evaluator:
    """A NetworkEvaluator over an in-memory CheckersNet."""
    _, network_evaluator_class = _learner_side()
    return network_evaluator_class(model, device=device, num_threads=threads, dtype=precision)


def network_player(
    model: Any,
    mcts: Mapping[str, Any] | None = None,
    *,
    name: str,
    device: str = "cpu",
    threads: int | None = None,
    seed: int = 0,
    time_ms: int = 0,
    precision: str = "auto",
) -> MCTSPlayer:
    """An MCTSPlayer over an in-memory network (the evaluator's candidates and best);
    ``time_ms`` > 0: milliseconds per move instead of simulations."""
    return MCTSPlayer(
        network_evaluator(model, device=device, threads=threads, precision=precision),
        mcts,
        name=name,
        seed=seed,
        size=model.config.board_size,
        time_ms=time_ms,
    )


def checkpoint_player(
    path: str | Path,
    mcts: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    device: str = "cpu",
    threads: int | None = DEFAULT_TORCH_THREADS,
    seed: int = 0,
    time_ms: int = 0,
    precision: str = "auto",
    loaded: tuple[Any, Any] | None = None,
) -> MCTSPlayer:
    """An MCTSPlayer over a model checkpoint file (checkerzero.network.checkpoint.save_checkpoint);
    ``time_ms`` > 0: milliseconds per move instead of simulations. ``loaded``: the file's
    ``(evaluator, header)`` when the caller has loaded it already (`load_network`)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} not found")
    evaluator, meta = loaded or load_network(path, device, threads, precision)
    settings = play_settings(mcts)
    budget = f"t{time_ms}" if time_ms else f"sims={settings.get('simulations')}"
    label = name or _label(str(path), budget, precision)
    logger.info("checkpoint player %s (step %d, version %d)", label, meta.step, meta.version)
    return MCTSPlayer(
        evaluator,
        settings,
        name=label,
        seed=seed,
        size=evaluator.config.board_size,
        time_ms=time_ms,
    )


def parse_spec(spec: str) -> tuple[str, dict[str, Any]] | None:
    """``(source, options)`` of an MCTS player spec, None if ``spec`` is not one.

    ``source`` is ``uniform-mcts`` or a checkpoint path; a time budget (``t200`` or ``ms=200``)
    is the option ``time_ms``. ValueError naming the spec on a bad option.
    """
    m = _SPEC.fullmatch(spec.strip())
    if m is None:
        return None
    options: dict[str, Any] = {}
    for item in filter(None, re.split(r"[,:]", m["opts"] or "")):
        if t := _TIME_OPTION.fullmatch(item):
            item = f"ms={t['ms']}"
        key, sep, value = item.partition("=")
        if not sep or key not in _OPTIONS:
            raise ValueError(
                f"player spec {spec!r}: bad option {item!r}; use tMS (milliseconds per move) "
                f"or key=value with keys {sorted(_OPTIONS)}"
            )
        if _OPTIONS[key][0] == "time_ms" and "time_ms" in options:
            raise ValueError(f"player spec {spec!r}: the time per move is given twice")
        target, kind = _OPTIONS[key]
        try:
            options[target] = kind(value)
        except ValueError:
            kind_name = "1 or 0" if kind is _switch else kind.__name__
            raise ValueError(
                f"player spec {spec!r}: option {key} must be {kind_name}, got {value!r}"
            ) from None
    if options.get("precision", "auto") not in PRECISIONS:
        raise ValueError(f"player spec {spec!r}: precision must be one of {', '.join(PRECISIONS)}")
    if options.get("backend", "auto") not in ("auto", "eager", "jit"):
        raise ValueError(f"player spec {spec!r}: backend must be auto, eager or jit")
    if options.get("simulations", 1) < 0 or options.get("leaves_per_game", 1) < 1:
        raise ValueError(f"player spec {spec!r}: sims must be at least 0 and leaves at least 1")
    if "time_ms" in options:
        if options["time_ms"] < 1:
            raise ValueError(f"player spec {spec!r}: the time per move must be at least 1 ms")
        if "simulations" in options:
            raise ValueError(
                f"player spec {spec!r}: give simulations (sims=N) or a time (tMS), not both"
            )
    if m["source"] == UNIFORM_SPEC and options.get("simulations") == 0:
        raise ValueError(f"player spec {spec!r}: uniform-mcts needs sims of at least 1")
    return m["source"], options


def searchless_player(
    path: str | Path,
    simulations: int | None,
    device: str,
    threads: int | None,
    precision: str = "auto",
    loaded: tuple[Any, Any] | None = None,
) -> PolicyPlayer | None:
    """The no-search player of a checkpoint: its most probable move when ``sims=0`` is asked
    for, its greedy move when the header marks a Q-network; None for an MCTS player.
    ``loaded`` as for `checkpoint_player`."""
    evaluator, meta = loaded or load_network(path, device, threads, precision)
    name = Path(path).name
    if is_q_network(dict(meta.extra)):
        if simulations:
            raise ValueError(f"{path} is a Q-network: it plays greedily, without sims")
        return PolicyPlayer(evaluator, mode="greedy", name=f"{name}:greedy")
    if simulations == 0:
        return PolicyPlayer(evaluator, mode="policy", name=f"{name}:sims=0")
    return None


def mcts_player(
    spec: str,
    *,
    seed: int = 0,
    mcts: Mapping[str, Any] | None = None,
    egdb_dir: str | None = None,
    egdb_pieces: int = 0,
    play_egdb: bool | None = None,
    play_book: bool | None = None,
    **_other: Any,
) -> MCTSPlayer | None:
    """The player of a ``uniform-mcts[:...]`` or ``*.safetensors[:...]`` spec, None for others.

    ``mcts`` (a make_player option) replaces the default search settings; the spec's own
    options win over both. ``egdb_dir`` / ``egdb_pieces``: the database an ``egdb`` switch
    opens, instead of the config's; ``play_egdb`` / ``play_book``: the switches' values when the
    spec does not set them (None: the composed config's ``egdb.play`` / ``evaluation.book``).
    """
    parsed = parse_spec(spec)
    if parsed is None:
        return None
    source, options = parsed
    device = options.pop("device", "cpu")
    threads = options.pop("threads", DEFAULT_TORCH_THREADS)
    precision = options.pop("precision", "auto")
    backend = options.pop("backend", "auto")
    time_ms = options.pop("time_ms", 0)
    knowledge = {"egdb": options.pop("egdb", play_egdb), "book": options.pop("book", play_book)}
    knowledge.update(egdb_dir=egdb_dir, egdb_pieces=egdb_pieces)
    settings = play_settings(mcts, **options)
    if time_ms and "leaves_per_game" not in options and "timed_leaves_per_game" in settings:
        # a timed search batches more leaves a pass: more simulations in its milliseconds
        settings["leaves_per_game"] = int(settings["timed_leaves_per_game"])
    budget = f"t{time_ms}" if time_ms else f"sims={settings.get('simulations')}"
    # The spec's search options go into the name, so a match's PDN and figures say what played.
    budget += "".join(
        f",{key}={_shown(options[_OPTIONS[key][0]])}"
        for key in _SEARCH_OPTIONS_SHOWN
        if _OPTIONS[key][0] in options
    )
    if backend != "auto":
        budget += f",backend={backend}"
    if source == UNIFORM_SPEC:
        player = MCTSPlayer(
            UniformEvaluator(),
            settings,
            name=f"{UNIFORM_SPEC}:{budget}",
            seed=seed,
            time_ms=time_ms,
        )
        return with_knowledge(player, None, **knowledge)
    if not Path(source).is_file():
        raise ValueError(f"unknown player spec {spec!r}: no checkpoint file at {source}")
    loaded = load_network(source, device, threads, precision, backend)  # once, for either kind
    searchless = searchless_player(
        source, options.get("simulations"), device, threads, precision, loaded=loaded
    )
    if searchless is not None:
        if time_ms:
            raise ValueError(f"player spec {spec!r}: a Q-network plays greedily, without a time")
        return searchless
    player = checkpoint_player(
        source,
        settings,
        name=_label(source, budget, precision),
        device=device,
        threads=threads,
        seed=seed,
        time_ms=time_ms,
        precision=precision,
        loaded=loaded,
    )
    return with_knowledge(player, source, **knowledge)


def with_knowledge(
    player: MCTSPlayer,
    network: str | Path | None,
    *,
    egdb: bool | None = None,
    book: bool | None = None,
    egdb_dir: str | None = None,
    egdb_pieces: int = 0,
) -> MCTSPlayer:
    """``player`` with the endgame database and the opening book of ``network`` (None: no
    network, so no book) turned on as asked; None: as the config says (`default_knowledge`).
    What is on is named in the player's name (``,egdb=1``, ``,book=1``). An absent database or
    book is said in one warning line and left off; a damaged or foreign book raises BookError
    (a ValueError naming the file)."""
    defaults, book_default = default_knowledge()
    if defaults["on"] if egdb is None else egdb:
        size = player.size or 8
        folder, pieces = egdb_dir or defaults["dir"], egdb_pieces or defaults["pieces"]
        player.egdb = open_for_play(folder, size, pieces)
        player.egdb_depth = defaults["depth"]
        if player.egdb is not None:
            player.name += ",egdb=1"
    if book_default if book is None else book:
        if network is None:
            raise ValueError(f"{player.name}: a book belongs to a network; uniform-mcts has none")
        path = book_path(network)
        if not path.is_file():
            logger.warning(
                "book %s not found; %s plays without it (build it with: python -m evaluation.book "
                "build --network %s)",
                path,
                player.name,
                network,
            )
        else:
            player.book = load_book(path, network)
            player.name += ",book=1"
    return player


__all__ = [
    "MCTSPlayer",
    "checkpoint_player",
    "default_knowledge",
    "default_mcts_settings",
    "eval_mcts_settings",
    "mcts_player",
    "network_player",
    "parse_spec",
    "play_settings",
    "searchless_player",
    "with_knowledge",
]
