"""The network's search behind the ``Player`` protocol.

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

Time management (``:t200,tm=1``; ``manage_time``): the budget becomes the average a move may
take over a game. A move stops as soon as its most visited action can no longer be overtaken
before the budget ends (at the rate the search is going); at the budget it stops unless the
runner-up's value beats the leader's, and then it may run on by up to TIME_MAX_EXTENSION budgets
drawn from the time saved earlier in the game (the *bank*), so a game never spends more than the
budget times its moves. Under the Gumbel root only the budget applies (it plays the sequential
halving's choice, not the most visited action).

The specs that make one are `evaluation.players.network`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from typing import Any

import numpy as np

from evaluation.players.book import Book
from evaluation.players.defaults import play_settings
from evaluation.players.endgame import DEFAULT_PROGRESS_DEPTH, root_move
from game import _core
from game.egdb import EndgameDatabase
from game.mcts import SEARCH_PARAMETERS, Inference, new_search, search, search_until, settled
from game.position import Move, Position

# Time management (MCTSPlayer.manage_time, and the alpha-beta players' ``,tm``): a move may take
# at most TIME_MAX_EXTENSION budgets on top of its own (while the bank holds that much), and the
# bank keeps at most TIME_BANK_MOVES budgets.
TIME_MAX_EXTENSION = 2.0
TIME_BANK_MOVES = 20


def time_lent_ms(bank_ms: float, time_ms: int) -> float:
    """What the bank may add to one move's budget (time management)."""
    return min(max(bank_ms, 0.0), TIME_MAX_EXTENSION * time_ms)


def bank_after(bank_ms: float, time_ms: int, spent_ms: float) -> float:
    """The bank after a move of ``time_ms`` budget that took ``spent_ms``."""
    return min(bank_ms + time_ms - spent_ms, TIME_BANK_MOVES * time_ms)


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
    """A Player that searches with ``inference`` and plays the most visited action.

    ``mcts``: search settings (keys of conf/mcts; noise is turned off whatever they say).
    ``seed`` only seeds the search's generator: with temperature 0 and no noise it draws nothing,
    so the same inference and settings always give the same moves. ``reuse_tree=False`` starts
    every decision from an empty tree (for comparisons). ``time_ms`` > 0 searches each move for
    that many milliseconds instead of ``simulations`` per decision (module docstring); such a
    player is not reproducible (its visits depend on the machine's speed).
    """

    manage_time = False  # time management (module docstring); set after construction

    def __init__(
        self,
        inference: Inference,
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
        self.inference = inference
        self.settings = play_settings(mcts)
        self.name = name
        self.seed = seed
        self.size = size  # board side; None: taken from the first position
        self.reuse_tree = reuse_tree
        self.simulations = int(
            self.settings.get("simulations", SEARCH_PARAMETERS["simulations"].default)
        )
        self.time_ms = time_ms  # milliseconds per move; 0: `simulations` per decision
        self.clock = time.perf_counter  # what the time per move is read from (a test sets its own)
        self.egdb = egdb  # the endgame database at leaves and roots (None: off)
        self.egdb_depth = egdb_depth  # plies of the progress search at a database root (no time)
        self.book = book  # the opening book (None: off)
        # One batch of the timed search: the leaves one tree gathers per forward pass.
        self._chunk = int(
            self.settings.get("leaves_per_game", SEARCH_PARAMETERS["leaves_per_game"].default)
        )
        self._mcts: _core.BatchedMCTS | None = None
        self._synced = False  # the tree's root is a position of the current game
        # Counters since construction (reset() keeps them: a match reads them after its games).
        self.decisions = 0  # moves chosen
        self.reused = 0  # of those, the ones whose search started from a kept subtree
        self.evaluations = 0  # leaves sent to the inference
        self.forced = 0  # moves that were the only legal one
        self.searched = 0  # the other moves
        self.simulations_done = 0  # new visits below the root over the searched moves
        self.last_simulations = 0  # new visits of the latest move (0 for a forced one)
        self.last_visits = 0  # visits below the root when its first action was chosen
        self.book_moves = 0  # moves played from the book
        self.egdb_moves = 0  # moves chosen at a root the database knows
        self.bank_ms = 0.0  # time saved so far in this game (time management)
        self.ms_total = 0.0  # wall-clock milliseconds of the timed searched moves

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
                mcts = steps.send(search(mcts, self.inference, self.simulations).leaves)
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
        began = self.clock()
        deadline = began + self.time_ms / 1000.0  # the whole move's budget
        hard = deadline  # with time management, the budget plus what the bank lends
        if self.manage_time and self.time_ms:
            hard += time_lent_ms(self.bank_ms, self.time_ms) / 1000.0
        known = self._known_move(position)
        if known is not None:
            self._account(began, searched=False)
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
            self._account(began, searched=False)
            return start.move_of(start.actions_of(legal[0]))
        actions: list[int] = []
        simulations = 0
        while True:
            before = mcts.root_child_visits(0)
            if self.time_ms:
                leaves = search_until(
                    mcts,
                    self.inference,
                    hard,
                    chunk=self._chunk,
                    clock=self.clock,
                    stop_when=self._time_manager(mcts, began, deadline, hard),
                ).leaves
                if not actions and mcts.root_child_visits(0) == before and not mcts.done(0):
                    # the budget went before a visit (a stalled machine, a tiny budget): one
                    # batch all the same, so a searched move never rests on the priors alone
                    self.evaluations += leaves  # the root's, if it was evaluated
                    saved = mcts.simulations
                    leaves = search(mcts, self.inference, before + self._chunk).leaves
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
        self._account(began, searched=True)
        return start.move_of(actions)

    def _time_manager(
        self, mcts: _core.BatchedMCTS, began: float, target: float, hard: float
    ) -> Callable[[float], bool]:
        """search_until's ``stop_when`` for one decision (module docstring): without time
        management, the budget itself (``hard`` is then ``target``)."""
        first = int(mcts.root_visits(0).sum())
        gumbel = self.settings.get("root_policy") == "gumbel"

        def stop(now: float) -> bool:
            if not self.manage_time or gumbel:
                return now >= target
            visits = mcts.root_visits(0)
            elapsed = now - began
            rate = (int(visits.sum()) - first) / elapsed if elapsed > 0 else 0.0
            if now < target:
                return rate > 0 and settled(visits, rate * (target - now))
            leader, runner_up = np.argsort(visits, kind="stable")[::-1][:2]
            q = mcts.root_q(0)
            if visits[runner_up] == 0 or not q[runner_up] > q[leader]:
                return True  # the leader holds on value too: play it at the budget
            return rate > 0 and settled(visits, rate * (hard - now))

        return stop

    def _account(self, began: float, *, searched: bool) -> None:
        """A timed move's time: into the counters and, with time management, the bank."""
        if not self.time_ms:
            return
        spent_ms = 1000.0 * (self.clock() - began)
        if searched:
            self.ms_total += spent_ms
        if self.manage_time:
            self.bank_ms = bank_after(self.bank_ms, self.time_ms, spent_ms)

    def _known_move(self, position: Position) -> Move | None:
        """The book's move, or the database's at a root it knows; None: search. A move played
        so is counted, and the next search starts a fresh tree."""
        move = self.book.move(position) if self.book is not None else None
        if move is not None:
            self.book_moves += 1
        elif self.egdb is not None:
            move = root_move(position, self.egdb, time_ms=self.time_ms, depth=self.egdb_depth)
            self.egdb_moves += move is not None
        if move is not None:
            self.decisions += 1
            self.last_simulations = self.last_visits = 0
            self._synced = False
        return move

    def fork(self) -> MCTSPlayer:
        """A player with this one's inference (shared), settings, name and seed and a tree of
        its own: one per game when several games of one network are played side by side."""
        player = MCTSPlayer(
            self.inference,
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
        player.manage_time = self.manage_time
        return player

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
        } | ({"ms": round(self.ms_total)} if self.time_ms else {})

    def reset(self) -> None:
        self._synced = False  # the next choose() starts a fresh tree
        self.bank_ms = 0.0  # a new game: its clock starts empty

    def __repr__(self) -> str:
        budget = f"time_ms={self.time_ms}" if self.time_ms else f"simulations={self.simulations}"
        return f"MCTSPlayer({self.name!r}, {budget})"
