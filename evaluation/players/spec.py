"""The player-spec grammar: one parser, one typed result, for every program that names a player.

A player is named by a *spec* string, so that matches, the gate, the ladder, the play server and
``play.engine`` can all be driven from the command line and from config. :func:`parse_spec` reads
one into a :class:`PlayerSpec` (or raises ValueError naming the spec and what is wrong);
:func:`evaluation.players.make.make_player` builds the player, and the play server
(``play.players``) adds only its limits and path checks. Digits are ASCII digits.

``minimax:D``
    the alpha-beta baseline (``game._core.alphabeta_search``) searching D plies (1..64).
``minimax:tMS``
    the same, with MS milliseconds per move instead of a depth (not reproducible: it depends
    on the machine's speed).
``minimax:tMS,tm``
    the same with time management (:mod:`evaluation.players.ab_clock`): MS milliseconds a move
    on average over a game, not a fixed share. What a move saves is spent on the next few; a move
    whose best reply has held for several iterations stops at half its target, one whose best
    move changed (or whose score fell) runs on towards its hard limit; it never spends more than
    its clock holds, so under a clock that adds MS a move it never loses on time. ``,game=MS``
    gives it that much more for the whole game (an increment clock). ``,tm`` goes with every
    timed alpha-beta form below (``ab+nn:t200,tm``).
``...,qs`` / ``,asp`` / ``,margin`` / ``,lmr`` / ``,ttkeep`` / ``,probcut`` / ``,tt=MB``
    search switches of any alpha-beta form (``game._core.SearchSwitches``):
    threat quiescence, aspiration windows, reverse-futility (evaluation-margin) pruning, cautious
    late-move reductions, a transposition table kept between moves, ProbCut, and the table's
    size in MB (``ab+nn:t200,tm,asp,tt=64``); ``,pcpieces=N`` keeps ProbCut to positions of at
    least N pieces (0: all, the default). ``,policy`` (``ab+nn`` only, with an evaluation
    file that has a move-ordering head) orders quiet moves by that head. A timed ``ab+nn``
    player has the switches of :data:`DEFAULT_SWITCHES` on (late-move reductions,
    evaluation-margin pruning and ProbCut: each won its equal-time match); ``,lmr=0`` /
    ``,margin=0`` / ``,probcut=0`` turns one off. A fixed-depth player and ``minimax`` have none on.
``ab+nn:...,book``
    the opening book of the learned evaluation, beside its file (``<stem>.book.json``, built by
    ``python -m evaluation.book build --evaluation FILE``): a position in it is played without
    search; a missing, damaged or foreign book is refused in one line.
``minimax+db:D`` / ``minimax+db:tMS``
    the same search with the endgame database (``game.egdb``): positions in it below the root
    score their exact value, and at a root it knows the move keeps the database's value and makes
    progress (:func:`evaluation.players.endgame.database_move`: a won ending is won, not shuffled
    into a draw). Needs the ``egdb_dir`` and ``egdb_pieces`` options (conf/egdb); the database is
    built there first if missing.
``ab+nn:D`` / ``ab+nn:tMS`` / ``ab+nn:D:PATH``
    the same search with the learned evaluation (:mod:`game.nneval`) scoring its leaves instead
    of the hand-written one: the shipped weights file, or the one at PATH. ``ab+nn+db:...`` adds
    the database.
``random`` / ``random:SEED``
    a uniformly random legal move (the anchor of the Elo ladder, rated 0).
``PATH.safetensors[:OPTIONS]`` / ``uniform-mcts[:OPTIONS]``
    the MCTS players of :mod:`evaluation.players.network`: a checkpoint's network, or equal
    priors and no network. OPTIONS, separated by ``,`` or ``:``, are listed in :data:`OPTIONS`
    (``sims=N``, ``tMS`` / ``ms=MS``, ``cpuct=X``, ``egdb=1``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from checkerzero.network.precision import BACKENDS, PRECISIONS
from game.search_parameters import SEARCH_PARAMETERS

CHECKPOINT_SUFFIX = ".safetensors"
UNIFORM_SPEC = "uniform-mcts"
MAX_DEPTH = 64  # the core's deepest iteration (kMaxSearchDepth)

# [0-9], not \d: \d also matches other scripts' digits ("minimax:٣"), which int() then reads.
_ALPHABETA = re.compile(
    r"(?P<kind>minimax|ab\+nn)(?P<db>\+db)?:(?:(?P<depth>[0-9]+)|t(?P<time_ms>[0-9]+))"
    r"(?P<opts>(?:,[a-z]+(?:=[0-9]+)?)*)(?::(?P<path>.+))?"
)
# Search switches of the alpha-beta specs: option -> the core's SearchSwitches field.
SWITCH_OPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "qs": "quiescence",
        "asp": "aspiration",
        "margin": "pruning",
        "lmr": "lmr",
        "ttkeep": "tt_keep",
        "probcut": "probcut",
        "policy": "policy",
    }
)
# The switches a timed alpha-beta player of each kind has on unless a spec turns them off
# (``,lmr=0``): those whose equal-time match against the same player without them won
# (docs/results.md, "The search switches at equal time"). They trade exactness for speed, which
# pays only where time is the budget: a fixed-depth player (a ladder rung, a depth screen)
# searches its depth in full unless its spec turns them on. minimax, the hand-written baseline
# and the ladder's anchor, has none.
DEFAULT_SWITCHES: Mapping[str, frozenset[str]] = MappingProxyType(
    {"ab+nn": frozenset({"lmr", "margin", "probcut"}), "minimax": frozenset()}
)
# Bounds (lowest, highest) of the numeric alpha-beta options: the table in MB (as conf's
# evaluation.baseline.search.tt_mb), the game's time in ms (a day), ProbCut's piece floor.
OPTION_RANGE: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"tt": (1, 65_536), "game": (1, 86_400_000), "pcpieces": (0, 24)}
)
_RANDOM = re.compile(r"random(?::(?P<seed>[0-9]+))?")
_NETWORK = re.compile(
    rf"(?P<source>{re.escape(UNIFORM_SPEC)}|.+?{re.escape(CHECKPOINT_SUFFIX)})(?::(?P<opts>.*))?"
)
# A time budget written as an option without a key: t200 is 200 milliseconds per move.
_TIME_OPTION = re.compile(r"t(?P<ms>[0-9]+)")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# sims=0 is no search: the network's policy alone (evaluation.players.network.searchless_player).
_POLICY_ONLY = ("simulations", 0)

FORMS = (
    "'minimax:D' (depth), 'minimax:tMS[,tm[,game=MS]]' (milliseconds per move, ',tm': managed "
    "over the game), 'minimax+db:D' (with the endgame database), 'ab+nn:D' / "
    "'ab+nn:tMS[,tm][,book][:PATH]' (learned evaluation), search switches "
    "',qs,asp,margin,lmr,ttkeep,probcut,policy,tt=MB,pcpieces=N' (',lmr=0': off) after the "
    "depth or time, "
    "'random[:SEED]', "
    "'uniform-mcts[:OPTIONS]' or a checkpoint 'PATH.safetensors[:OPTIONS]'"
)


def _switch(value: str) -> bool:
    """An on/off spec option: 1, on or true; 0, off or false."""
    word = value.lower()
    if word not in ("1", "on", "true", "0", "off", "false"):
        raise ValueError(value)
    return word in ("1", "on", "true")


def _integer(value: str) -> int:
    """An integer option in ASCII digits (int() would also take other scripts' digits)."""
    if not _INTEGER.fullmatch(value):
        raise ValueError(value)
    return int(value)


def _number(value: str) -> float:
    """A float option in ASCII (float() would also take other scripts' digits)."""
    if not value.isascii():
        raise ValueError(value)
    return float(value)


# An MCTS player's spec option -> (search-setting or player-argument name, type).
OPTIONS: Mapping[str, tuple[str, Any]] = MappingProxyType(
    {
        "sims": ("simulations", _integer),
        "simulations": ("simulations", _integer),
        "ms": ("time_ms", _integer),
        "leaves": ("leaves_per_game", _integer),
        "cpuct": ("c_puct", _number),
        "fpu": ("fpu_reduction", _number),
        "pst": ("policy_temperature", _number),
        "solver": ("solver", _switch),
        "root": ("root_policy", str),
        "device": ("device", str),
        "threads": ("threads", _integer),
        "precision": ("precision", str),
        "backend": ("backend", str),
        "egdb": ("egdb", _switch),
        "book": ("book", _switch),
        "tm": ("manage_time", _switch),
    }
)
_TYPE_NAMES = {_switch: "1 or 0", _integer: "int", _number: "float", str: "str"}

KINDS = ("minimax", "ab+nn", "random", "network", "uniform")


@dataclass(frozen=True)
class PlayerSpec:
    """A parsed player spec. ``kind`` is one of :data:`KINDS`; the fields of the other kinds
    keep their defaults."""

    text: str  # the spec as written (stripped)
    kind: str
    # minimax and ab+nn: exactly one of depth and time_ms is > 0
    depth: int = 0
    time_ms: int = 0
    manage_time: bool = False  # ",tm"
    game_ms: int = 0  # ",game=MS": time for the whole game on top of the moves' (with ,tm)
    switches: frozenset[str] = frozenset()  # SWITCH_OPTIONS keys on (",asp", ",lmr", ...)
    tt_mb: int | None = None  # ",tt=MB": the transposition table's size, None for the default
    # ",pcpieces=N": ProbCut only with at least N pieces on the board, None for the default
    probcut_min_pieces: int | None = None
    database: bool = False  # "+db": the endgame database below the root and at it
    nneval_path: str | None = None  # ab+nn: a weights file other than the shipped one
    book: bool = False  # ab+nn ",book": the evaluation's opening book (<stem>.book.json)
    seed: int | None = None  # random: its own seed, None for the caller's
    source: str | None = None  # network: the checkpoint path; uniform: "uniform-mcts"
    # network and uniform: the options by setting name (simulations, time_ms, c_puct, egdb, ...)
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def alphabeta(self) -> bool:
        return self.kind in ("minimax", "ab+nn")

    @property
    def mcts(self) -> bool:
        return self.kind in ("network", "uniform")


def parse_spec(spec: Any) -> PlayerSpec:
    """The :class:`PlayerSpec` that ``spec`` names; ValueError naming the spec and the fault."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"player spec must be a non-empty string, got {spec!r}; use {FORMS}")
    text = spec.strip()
    if m := _ALPHABETA.fullmatch(text):
        return _alphabeta(text, m)
    if m := _RANDOM.fullmatch(text):
        return PlayerSpec(text, "random", seed=None if m["seed"] is None else int(m["seed"]))
    if m := _NETWORK.fullmatch(text):
        return _network(text, m["source"], m["opts"] or "")
    if text.startswith(("minimax", "random", "ab+nn")):
        raise ValueError(f"malformed player spec {text!r}; use {FORMS}")
    raise ValueError(f"unknown player spec {text!r}; use {FORMS}")


def _alphabeta(text: str, m: re.Match[str]) -> PlayerSpec:
    depth, time_ms = int(m["depth"] or 0), int(m["time_ms"] or 0)
    if depth == 0 and time_ms == 0:
        raise ValueError(f"player spec {text!r}: depth and time must be positive")
    if depth > MAX_DEPTH:
        raise ValueError(f"player spec {text!r}: the depth must be at most {MAX_DEPTH}")
    if m["path"] is not None and m["kind"] != "ab+nn":
        raise ValueError(f"malformed player spec {text!r}; use {FORMS}")
    manage_time, book = False, False
    numbers: dict[str, int] = {}  # the numeric options given (OPTION_RANGE's keys)
    switches = set(DEFAULT_SWITCHES[m["kind"]] if time_ms else ())
    for option in filter(None, m["opts"].split(",")):
        key, _, value = option.partition("=")
        if key == "tm" and not value and time_ms:
            manage_time = True
        elif key == "book" and not value:
            if m["kind"] != "ab+nn":
                raise ValueError(
                    f"player spec {text!r}: a book belongs to a learned evaluation; use ab+nn"
                )
            book = True
        elif key in SWITCH_OPTIONS and value in ("", "1"):
            switches.add(key)
        elif key in SWITCH_OPTIONS and value == "0":
            switches.discard(key)
        elif (
            key in OPTION_RANGE
            and value
            and min(OPTION_RANGE[key]) <= int(value) <= max(OPTION_RANGE[key])
        ):
            numbers[key] = int(value)
        else:
            raise ValueError(f"malformed player spec {text!r}: option {option!r}; use {FORMS}")
    return PlayerSpec(
        text,
        m["kind"],
        depth=depth,
        time_ms=time_ms,
        manage_time=manage_time,
        game_ms=numbers.get("game", 0),
        switches=frozenset(switches),
        tt_mb=numbers.get("tt"),
        probcut_min_pieces=numbers.get("pcpieces"),
        database=bool(m["db"]),
        nneval_path=m["path"],
        book=book,
    )


def _network(text: str, source: str, opts: str) -> PlayerSpec:
    options: dict[str, Any] = {}
    for item in filter(None, re.split(r"[,:]", opts)):
        if t := _TIME_OPTION.fullmatch(item):
            item = f"ms={t['ms']}"
        key, sep, value = item.partition("=")
        if not sep or key not in OPTIONS:
            raise ValueError(
                f"player spec {text!r}: bad option {item!r}; use tMS (milliseconds per move) "
                f"or key=value with keys {sorted(OPTIONS)}"
            )
        target, kind = OPTIONS[key]
        if target == "time_ms" and "time_ms" in options:
            raise ValueError(f"player spec {text!r}: the time per move is given twice")
        try:
            options[target] = kind(value)
        except ValueError:
            raise ValueError(
                f"player spec {text!r}: option {key} must be {_TYPE_NAMES[kind]}, got {value!r}"
            ) from None
        parameter = SEARCH_PARAMETERS.get(target)  # a search key's range is the search's own
        if parameter is not None and (target, options[target]) != _POLICY_ONLY:
            why = parameter.problem(options[target])
            if why is not None:
                raise ValueError(f"player spec {text!r}: option {item}: {why}")
    if options.get("precision", "auto") not in PRECISIONS:
        raise ValueError(f"player spec {text!r}: precision must be one of {', '.join(PRECISIONS)}")
    if options.get("backend", "auto") not in BACKENDS:
        raise ValueError(f"player spec {text!r}: backend must be {', '.join(BACKENDS)}")
    if "time_ms" in options:
        if options["time_ms"] < 1:
            raise ValueError(f"player spec {text!r}: the time per move must be at least 1 ms")
        if "simulations" in options:
            raise ValueError(
                f"player spec {text!r}: give simulations (sims=N) or a time (tMS), not both"
            )
    if options.get("manage_time") and "time_ms" not in options:
        raise ValueError(f"player spec {text!r}: time management (tm=1) needs a time (tMS)")
    if source == UNIFORM_SPEC:
        if options.get("simulations") == 0:
            raise ValueError(f"player spec {text!r}: uniform-mcts needs sims of at least 1")
        if options.get("book"):
            raise ValueError(
                f"player spec {text!r}: a book belongs to a network; uniform-mcts has none"
            )
        return PlayerSpec(text, "uniform", source=source, options=MappingProxyType(options))
    return PlayerSpec(text, "network", source=source, options=MappingProxyType(options))


__all__ = [
    "CHECKPOINT_SUFFIX",
    "FORMS",
    "KINDS",
    "OPTIONS",
    "UNIFORM_SPEC",
    "PlayerSpec",
    "parse_spec",
]
