"""Players and analysis behind bounds: what the server, the engine and the terminal share.

A request names a player by the match tool's specs (``evaluation.players``) plus a time budget
for networks:

``path.safetensors[:sims=N|:ms=N|:tN][:cpuct=X][:egdb=0|1][:book=0|1]``
    a network checkpoint, by a path relative to the models or runs folder, searched with the
    batched MCTS for N simulations or N milliseconds per move (``tN`` as in the match tool's
    specs; the time-budget search is ``game.mcts.search_until``, the match players' too);
    ``egdb=1``: with the endgame database (the ``egdb`` config group's folder) at the search's
    leaves and roots, ``book=1``: with the network's opening book (``<stem>.book.json`` beside
    it); by default as ``egdb.play`` and ``evaluation.book`` say;
``uniform-mcts[:sims=N|:ms=N|:tN][:egdb=0|1]``
    the same search with equal priors and no network (and so no book);
``minimax:D`` / ``minimax:tMS``
    the alpha-beta baseline at depth D or MS milliseconds;
``ab+nn:D`` / ``ab+nn:tMS``
    the same search with the shipped learned evaluation (no other weights file: a request names
    no file to read);
``random`` / ``random:SEED``
    a random legal move.

Every budget is checked against the ``limits`` of the play settings before anything runs, and
networks are read only through ``checkerzero.network.inference.load_for_play`` (safetensors,
never unpickled; the board checked), a few kept loaded (least recently used dropped first).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from checkerzero.network.inference import load_for_play
from evaluation.book import Book, book_path, load_book
from evaluation.endgame_play import open_for_play
from evaluation.player_defaults import default_knowledge, default_mcts_settings, play_settings
from evaluation.players import MATE_THRESHOLD, make_player
from game.egdb import EndgameDatabase
from game.mcts import Evaluator, UniformEvaluator
from game.position import Position
from play.analysis import Analysis, Budget, Stop, analyse
from play.paths import NotFound, Roots

logger = logging.getLogger(__name__)

UNIFORM = "uniform-mcts"
_NETWORK_SPEC = re.compile(rf"(?P<source>{UNIFORM}|.+?\.safetensors)(?::(?P<opts>.*))?")
_MINIMAX_SPEC = re.compile(r"(?:minimax|ab\+nn):(?:(?P<depth>\d+)|t(?P<ms>\d+)(?:,tm)?)", re.ASCII)
_RANDOM_SPEC = re.compile(r"random(?::(?P<seed>\d+))?", re.ASCII)
_TIME_OPTION = re.compile(
    r"t(?P<ms>\d+)", re.ASCII
)  # t200: 200 ms, the match tool's form of ms=200
MAX_SPEC_CHARS = 500  # a longer player spec is not one
MAX_REMEMBERED_REFUSALS = 256  # refused network files remembered (oldest forgotten first)


class LimitError(ValueError):
    """A request beyond the configured bounds (simulations, time, depth, batch size)."""


@dataclass(frozen=True)
class PlayerSpec:
    kind: str  # "network", "uniform", "minimax" or "random"
    text: str  # the spec as the answer reports it
    path: Path | None = None  # the checkpoint (network)
    budget: Budget | None = None  # network and uniform
    c_puct: float | None = None
    depth: int = 0  # minimax
    time_ms: int = 0  # minimax
    seed: int = 0  # random
    egdb: bool = False  # network and uniform: the endgame database at leaves and roots
    book: bool = False  # network: its opening book

    @property
    def searches(self) -> bool:
        return self.kind in ("network", "uniform")

    @property
    def cheap(self) -> bool:
        """A player whose move costs next to nothing: random, or a search of one visit (the
        network's policy alone). The server runs these without waiting for a search slot."""
        return self.kind == "random" or (
            self.searches and self.budget is not None and self.budget.simulations == 1
        )


class Engines:
    """Turns specs into players and runs them within the limits of ``settings`` (conf/play)."""

    def __init__(self, settings: Mapping[str, Any], roots: Roots) -> None:
        self.settings = settings
        self.limits = settings["limits"]
        self.roots = roots
        self._networks: OrderedDict[tuple[str, int, int], Any] = OrderedDict()
        # Files refused, by (path, mtime, size): the same file is not read again to refuse it.
        self._refused: OrderedDict[tuple[str, int, int], str] = OrderedDict()
        self._books: OrderedDict[tuple[str, int, int], Book] = OrderedDict()  # as _networks
        self._lock = threading.Lock()  # guards the caches; never held while a file is read
        self._torch_ready = False

    # --- specs ---------------------------------------------------------------------------------
    def budget(self, sims: int | None = None, ms: int | None = None) -> Budget:
        """A search budget within the limits; the default simulations when neither is given."""
        if sims is not None and ms is not None:
            raise LimitError("give sims or ms, not both")
        for name, value in (("sims", sims), ("ms", ms)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                shown = repr(value)
                shown = shown if len(shown) <= 40 else shown[:40] + "..."
                raise ValueError(f"{name} must be a whole number, got {shown}")
        if ms is not None:
            if not 1 <= ms <= self.limits["max_ms"]:
                raise LimitError(f"ms must be 1..{self.limits['max_ms']}, got {ms}")
            return Budget(ms=ms, chunk=self.settings["time_chunk_simulations"])
        sims = self.settings["default_simulations"] if sims is None else sims
        if not 1 <= sims <= self.limits["max_simulations"]:
            raise LimitError(f"sims must be 1..{self.limits['max_simulations']}, got {sims}")
        return Budget(simulations=sims)

    def with_budget(self, spec: PlayerSpec, budget: Budget) -> PlayerSpec:
        """``spec`` searching with ``budget`` instead, its text naming the budget it searches
        with (``net.safetensors:sims=10``; a ``cpuct`` option is kept)."""
        if not spec.searches:
            raise ValueError(f"player {spec.text!r} does not search; name a network")
        m = _NETWORK_SPEC.fullmatch(spec.text)
        assert m is not None  # a searching spec was parsed from this form
        parts = [
            m["source"],
            f"sims={budget.simulations}" if budget.simulations else f"ms={budget.ms}",
        ]
        if spec.c_puct is not None:
            parts.append(f"cpuct={spec.c_puct:g}")
        parts += [f"{key}=1" for key in ("egdb", "book") if getattr(spec, key)]
        return replace(spec, text=":".join(parts), budget=budget)

    def parse(self, spec: str) -> PlayerSpec:
        """The player ``spec`` names, checked against the roots and the limits (ValueError)."""
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError("player: empty spec")
        text = spec.strip()
        if len(text) > MAX_SPEC_CHARS:
            raise LimitError(f"player spec longer than {MAX_SPEC_CHARS} characters")
        if m := _RANDOM_SPEC.fullmatch(text):
            return PlayerSpec("random", text, seed=int(m["seed"] or 0))
        if m := _MINIMAX_SPEC.fullmatch(text):
            depth, ms = int(m["depth"] or 0), int(m["ms"] or 0)
            if m["depth"] is not None and not 1 <= depth <= self.limits["max_minimax_depth"]:
                raise LimitError(
                    f"player {text!r}: depth must be 1..{self.limits['max_minimax_depth']}"
                )
            if m["ms"] is not None and not 1 <= ms <= self.limits["max_ms"]:
                raise LimitError(f"player {text!r}: time must be 1..{self.limits['max_ms']} ms")
            return PlayerSpec("minimax", text, depth=depth, time_ms=ms)
        m = _NETWORK_SPEC.fullmatch(text)
        if m is None:
            raise ValueError(
                f"unknown player {text!r}: use a checkpoint path (relative to the models or "
                "runs folder) with :sims=N or :ms=N, uniform-mcts, minimax:D, minimax:tMS, "
                "ab+nn:D, ab+nn:tMS or random[:SEED]"
            )
        options: dict[str, str] = {}
        for item in filter(None, re.split(r"[,:]", m["opts"] or "")):
            if t := _TIME_OPTION.fullmatch(item):
                item = f"ms={t['ms']}"
            key, sep, value = item.partition("=")
            if not sep or key not in ("sims", "ms", "cpuct", "egdb", "book"):
                raise ValueError(
                    f"player {text!r}: bad option {item!r}; use sims=N, ms=N (or tN), cpuct=X, "
                    "egdb=0|1 or book=0|1"
                )
            if not value.isascii():  # int() and float() would read other scripts' digits
                raise ValueError(f"player {text!r}: option {key} must be written in ASCII")
            if key in ("egdb", "book") and value not in ("0", "1"):
                raise ValueError(f"player {text!r}: {key} must be 0 or 1, got {value!r}")
            options[key] = value
        try:
            sims = int(options["sims"]) if "sims" in options else None
            ms = int(options["ms"]) if "ms" in options else None
            c_puct = float(options["cpuct"]) if "cpuct" in options else None
        except ValueError:
            raise ValueError(f"player {text!r}: sims and ms must be integers") from None
        if c_puct is not None and not 0 < c_puct <= 100:
            raise LimitError(f"player {text!r}: cpuct must be in (0, 100]")
        budget = self.budget(sims, ms)
        egdb_default, book_default = default_knowledge()
        egdb = options["egdb"] == "1" if "egdb" in options else egdb_default["on"]
        book = options["book"] == "1" if "book" in options else book_default
        if m["source"] == UNIFORM:
            if "book" in options and book:
                raise ValueError(f"player {text!r}: a book belongs to a network; name one")
            return PlayerSpec("uniform", text, budget=budget, c_puct=c_puct, egdb=egdb)
        path = self.roots.checkpoint(m["source"])
        return PlayerSpec(
            "network", text, path=path, budget=budget, c_puct=c_puct, egdb=egdb, book=book
        )

    # --- networks ------------------------------------------------------------------------------
    def evaluator(self, spec: PlayerSpec) -> Evaluator:
        """The network of ``spec``, loaded once per (path, mtime, size). A file that is refused
        is remembered as refused and answered from memory until it changes; the lock guards
        only the caches, so a slow file never holds up requests for other networks."""
        if spec.kind == "uniform":
            return UniformEvaluator()
        assert spec.path is not None
        name = self.roots.relative(spec.path)
        try:
            stat = spec.path.stat()
        except OSError:
            raise NotFound(f"network {name}: the file has gone") from None
        key = (str(spec.path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key in self._networks:
                self._networks.move_to_end(key)
                return self._networks[key]
            if key in self._refused:
                raise ValueError(self._refused[key])
            if not self._torch_ready:
                torch.set_num_threads(int(self.settings["torch_threads"]))
                self._torch_ready = True
        try:
            evaluator, meta = load_for_play(spec.path, 8, device="cpu")
        except ValueError as e:
            # The loader names the file by its absolute path: the answer names it as asked.
            why = f"network {name}: {str(e).replace(str(spec.path), name)}"
            with self._lock:
                self._refused[key] = why
                while len(self._refused) > MAX_REMEMBERED_REFUSALS:
                    self._refused.popitem(last=False)
            raise ValueError(why) from None
        with self._lock:
            self._networks[key] = evaluator
            while len(self._networks) > int(self.limits["max_cached_networks"]):
                self._networks.popitem(last=False)
        logger.info("loaded %s (step %d, version %d)", name, meta.step, meta.version)
        return evaluator

    def knowledge(self, spec: PlayerSpec) -> tuple[EndgameDatabase | None, Book | None]:
        """The endgame database and the opening book ``spec`` asks for, each None when it is
        off or absent (absent: one warning line). A damaged or foreign book is a ValueError
        naming the file as asked; a good one is read once per (path, mtime, size)."""
        egdb = None
        if spec.egdb:
            defaults, _ = default_knowledge()
            egdb = open_for_play(defaults["dir"], 8, defaults["pieces"])
        if not spec.book or spec.path is None:
            return egdb, None
        path = book_path(spec.path)
        try:
            stat = path.stat()
        except OSError:
            logger.warning("book %s not found; %s plays without it", path, spec.text)
            return egdb, None
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key in self._books:
                return egdb, self._books[key]
        try:
            book = load_book(path, spec.path)
        except ValueError as e:
            shown = self.roots.relative(spec.path)
            raise ValueError(str(e).replace(str(spec.path), shown)) from None
        with self._lock:
            self._books[key] = book
            while len(self._books) > int(self.limits["max_cached_networks"]):
                self._books.popitem(last=False)
        return egdb, book

    def mcts_settings(self, spec: PlayerSpec) -> dict[str, Any]:
        overrides: dict[str, Any] = {"leaves_per_game": self.settings["leaves_per_game"]}
        if spec.c_puct is not None:
            overrides["c_puct"] = spec.c_puct
        return play_settings(default_mcts_settings(), **overrides)

    # --- work ----------------------------------------------------------------------------------
    def analyse(
        self,
        positions: Sequence[Position],
        spec: PlayerSpec,
        budget: Budget | None = None,
        stop: Stop | None = None,
    ) -> list[Analysis]:
        """The search's view of every position (one batched search), for network players;
        ``stop`` ends it early (``play.analysis.analyse``)."""
        if not spec.searches:
            raise ValueError(f"player {spec.text!r} does not analyse; name a network")
        if len(positions) > self.limits["max_batch_positions"]:
            raise LimitError(
                f"{len(positions)} positions; at most {self.limits['max_batch_positions']}"
            )
        budget = budget or spec.budget
        assert budget is not None
        total = len(positions) * budget.simulations
        if total > self.limits["max_request_simulations"]:
            raise LimitError(
                f"{len(positions)} positions x {budget.simulations} simulations = {total}; at "
                f"most {self.limits['max_request_simulations']} in one request "
                "(limits.max_request_simulations)"
            )
        egdb, book = self.knowledge(spec)
        return analyse(
            positions,
            self.evaluator(spec),
            budget,
            self.mcts_settings(spec),
            top_moves=int(self.settings["top_moves"]),
            pv_max_plies=int(self.settings["pv_max_plies"]),
            stop=stop,
            egdb=egdb,
            book=book,
            egdb_depth=int(default_knowledge()[0]["depth"]),
        )

    def move(
        self, position: Position, spec: PlayerSpec, stop: Stop | None = None
    ) -> dict[str, Any]:
        """The player's move in ``position`` with what it saw (W/D/L, PV, top moves); ``stop``
        ends a network's search early (the alpha-beta player is bounded by its depth or time)."""
        if position.is_over():
            raise ValueError(f"the game is over ({position.result()}, {position.end_reason})")
        start = time.perf_counter()
        answer: dict[str, Any] = {"player": spec.text}
        if spec.searches:
            answer |= self.analyse([position], spec, stop=stop)[0].to_dict()
        elif spec.kind == "minimax":
            player = make_player(spec.text)  # minimax:D, minimax:tMS, ab+nn:D or ab+nn:tMS
            move = player.choose(position)
            last = player.last
            answer |= {"move": str(move), "pv": [str(m) for m in last.pv] if last else []}
            if last is not None:
                answer["minimax"] = {
                    "score": last.score,
                    "depth": last.depth,
                    "nodes": last.nodes,
                    "forced": abs(last.score) >= MATE_THRESHOLD,
                }
        else:
            # The random player is seeded per request; the ply keeps its moves varied in a game.
            player = make_player(f"random:{spec.seed + position.ply}")
            answer |= {"move": str(player.choose(position))}
        answer["ms"] = round((time.perf_counter() - start) * 1000, 1)
        return answer


__all__ = ["Engines", "LimitError", "PlayerSpec"]
