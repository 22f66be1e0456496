"""MCTS players from specs: the network's search (or a network-free one) as a ``Player``.

The player itself is :class:`evaluation.mcts_player.MCTSPlayer` (its tree reuse, time budgets and
counters are described there); its default search settings come from
:mod:`evaluation.player_defaults`.

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
(auto, eager, jit or cpp: how the network runs; cpp, float32 in the compiled core on a CPU, is
the fastest, and auto picks it wherever it runs, checkerzero.network.inference.NetworkEvaluator).
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

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from checkerzero.network.precision import BACKENDS, PRECISIONS
from evaluation.book import book_path, load_book
from evaluation.endgame_play import open_for_play
from evaluation.mcts_player import MCTSPlayer
from evaluation.player_defaults import default_knowledge, play_settings
from evaluation.policy_player import PolicyPlayer, is_q_network
from game.mcts import SEARCH_KEYS, Evaluator, UniformEvaluator

logger = logging.getLogger(__name__)

CHECKPOINT_SUFFIX = ".safetensors"
UNIFORM_SPEC = "uniform-mcts"
# Torch threads of a checkpoint player unless its spec says otherwise: match workers run one
# per core, and torch's default (every core in each process) would oversubscribe the machine.
DEFAULT_TORCH_THREADS = 1
_SPEC = re.compile(
    rf"(?P<source>{re.escape(UNIFORM_SPEC)}|.+?{re.escape(CHECKPOINT_SUFFIX)})(?::(?P<opts>.*))?"
)
# A time budget written as an option without a key: t200 is 200 milliseconds per move.
_TIME_OPTION = re.compile(r"t(?P<ms>\d+)", re.ASCII)


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
    "tm": ("manage_time", _switch),
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
            if not value.isascii():  # int() and float() would read other scripts' digits
                raise ValueError(value)
            options[target] = kind(value)
        except ValueError:
            kind_name = "1 or 0" if kind is _switch else kind.__name__
            raise ValueError(
                f"player spec {spec!r}: option {key} must be {kind_name}, got {value!r}"
            ) from None
    if options.get("precision", "auto") not in PRECISIONS:
        raise ValueError(f"player spec {spec!r}: precision must be one of {', '.join(PRECISIONS)}")
    if options.get("backend", "auto") not in BACKENDS:
        raise ValueError(f"player spec {spec!r}: backend must be {', '.join(BACKENDS)}")
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
    manage_time = options.pop("manage_time", False)
    if manage_time and not time_ms:
        raise ValueError(f"player spec {spec!r}: time management (tm=1) needs a time (tMS)")
    knowledge = {"egdb": options.pop("egdb", play_egdb), "book": options.pop("book", play_book)}
    knowledge.update(egdb_dir=egdb_dir, egdb_pieces=egdb_pieces)
    settings = play_settings(mcts, **options)
    if time_ms and "leaves_per_game" not in options and "timed_leaves_per_game" in settings:
        # a timed search batches more leaves a pass: more simulations in its milliseconds
        settings["leaves_per_game"] = int(settings["timed_leaves_per_game"])
    budget = f"t{time_ms}" if time_ms else f"sims={settings.get('simulations')}"
    budget += ",tm=1" if manage_time else ""
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
        player.manage_time = manage_time
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
    player.manage_time = manage_time
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
    "checkpoint_player",
    "mcts_player",
    "network_player",
    "parse_spec",
    "searchless_player",
    "with_knowledge",
]
