"""The rule of every key of the composed config: its type, its range, finite, a path that exists.

`SCHEMA` maps each key (dotted, as on the command line) to one rule; `checkerzero.config.validate`
checks a composed config against it before anything starts, and refuses a key the table does not
know (a ``+key`` added on the command line would otherwise be silently ignored). A rule's bound
says why it is there in a comment: the upper bounds are not tuning advice but the edge of what
the program can do in a day on the largest machine it was built for, so a typo such as
``model.blocks=100000`` is refused in the first second instead of taking the run down an hour in.

Rules that need two keys at once (the board and the model, a network file and the model keys)
are `checkerzero.config`'s; this module is torch-free, so the check costs a few milliseconds.
It stays one file past 600 lines on purpose: it is one table, a line per key, read (and searched
for a key) as a whole; its few helpers exist only for its rules.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkerzero.network.precision import BACKENDS, PRECISIONS
from game.encoding import NUM_PLANES
from game.openings import KINDS as OPENING_KINDS
from game.search_parameters import SEARCH_PARAMETERS, SearchParameter


class Rule:
    """One key's rule: ``problem(value)`` is None for a value it allows, else what it allows."""

    allowed: str = ""

    def ok(self, value: Any) -> bool:
        raise NotImplementedError

    def problem(self, value: Any) -> str | None:
        return None if self.ok(value) else self.allowed


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Int(Rule):
    lo: int
    hi: int

    def ok(self, v: Any) -> bool:
        return _is_int(v) and self.lo <= v <= self.hi

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return f"an integer from {self.lo:,} to {self.hi:,}"


@dataclass(frozen=True)
class Num(Rule):
    """A finite number (an integer too) in [lo, hi]; ``open_lo``/``open_hi`` leave an end out."""

    lo: float
    hi: float
    open_lo: bool = False
    open_hi: bool = False

    def ok(self, v: Any) -> bool:
        if not _is_real(v):
            return False
        above = v > self.lo if self.open_lo else v >= self.lo
        below = v < self.hi if self.open_hi else v <= self.hi
        return above and below

    @property
    def allowed(self) -> str:  # type: ignore[override]
        left, right = "(" if self.open_lo else "[", ")" if self.open_hi else "]"
        return f"a finite number in {left}{self.lo:g}, {self.hi:g}{right}"


@dataclass(frozen=True)
class Flag(Rule):
    allowed: str = "true or false"

    def ok(self, v: Any) -> bool:
        return isinstance(v, bool)


@dataclass(frozen=True)
class OneOf(Rule):
    values: tuple[Any, ...]

    def ok(self, v: Any) -> bool:  # 8.0 is no board size, True no 1: types must match too
        return any(type(v) is type(x) and v == x for x in self.values)

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return "one of " + ", ".join(str(x) for x in self.values)


@dataclass(frozen=True)
class Text(Rule):
    pattern: str  # the whole string must match
    allowed: str = ""

    def ok(self, v: Any) -> bool:
        return isinstance(v, str) and re.fullmatch(self.pattern, v) is not None


@dataclass(frozen=True)
class Items(Rule):
    """A list of ``item`` values, ``lo`` to ``hi`` of them; ``ascending``: strictly."""

    item: Rule
    lo: int
    hi: int
    ascending: bool = False

    def ok(self, v: Any) -> bool:
        if not isinstance(v, list) or not self.lo <= len(v) <= self.hi:
            return False
        if not all(self.item.ok(x) for x in v):
            return False
        return not self.ascending or all(a < b for a, b in itertools.pairwise(v))

    @property
    def allowed(self) -> str:  # type: ignore[override]
        order = "ascending " if self.ascending else ""
        return f"a list of {self.lo} to {self.hi} {order}items, each {self.item.allowed}"


@dataclass(frozen=True)
class Maybe(Rule):
    rule: Rule

    def ok(self, v: Any) -> bool:
        return v is None or self.rule.ok(v)

    def problem(self, v: Any) -> str | None:
        if v is None:
            return None
        why = self.rule.problem(v)
        return None if why is None else f"null or {why}"

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return f"null or {self.rule.allowed}"


@dataclass(frozen=True)
class Check(Rule):
    """A rule in code: ``why(value)`` is None for an allowed value, else the reason."""

    why: Callable[[Any], str | None]
    allowed: str = ""

    def ok(self, v: Any) -> bool:
        return self.why(v) is None

    def problem(self, v: Any) -> str | None:
        reason = self.why(v)
        return None if reason is None else f"{self.allowed} ({reason})" if self.allowed else reason


@dataclass(frozen=True)
class Search(Rule):
    """A search parameter's own rule (game.search_parameters declares its type and range)."""

    parameter: SearchParameter

    def ok(self, v: Any) -> bool:
        return self.parameter.ok(v)

    @property
    def allowed(self) -> str:  # type: ignore[override]
        return self.parameter.allowed


# ---- paths, addresses, names ----------------------------------------------------------------
def _folder_problem(v: Any) -> str | None:
    """A folder, or a path where one can be made: not a file, nor below one. Whether this user
    may write there is the command's to find out (a play server reads a read-only egdb.dir;
    python -m learner refuses a run folder it cannot make in one line)."""
    if not isinstance(v, str) or not v.strip() or "\0" in v:
        return "not a path"
    path = Path(v)
    try:
        if path.exists() and not path.is_dir():
            return f"{v!r} is a file"
        here = path if path.exists() else next((p for p in path.parents if p.exists()), Path("."))
        if not here.is_dir():
            return f"{str(here)!r} is a file"
    except OSError as e:  # a name too long, a loop of links
        return e.strerror or str(e)
    return None


def _file_problem(v: Any) -> str | None:
    if not isinstance(v, str) or not v.strip() or "\0" in v:
        return "not a path"
    try:
        return None if Path(v).is_file() else f"no file {v!r}"
    except OSError as e:
        return e.strerror or str(e)


def _executable_problem(v: Any) -> str | None:
    why = _file_problem(v)
    if why is None and not os.access(v, os.X_OK):
        return f"{v!r} is not executable"
    return why


def _redis_url_problem(v: Any) -> str | None:
    if not isinstance(v, str):
        return "not a string"
    try:
        parts = urllib.parse.urlsplit(v)
        port = parts.port  # ValueError for a port that is no number or out of range
    except ValueError as e:
        return str(e)
    if parts.scheme == "unix":
        return None if parts.path else "a unix URL names its socket's path"
    if parts.scheme not in ("redis", "rediss"):
        return f"scheme {parts.scheme or 'none'}"
    if not parts.hostname:
        return "no host"
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        return f"database {db!r} is no number"
    return None if port is None or port > 0 else "port 0"


LADDER_TABLE_FIRST_LINE = b"# checkerzero ladder ratings"  # evaluation.ladder.table writes it


def _ladder_table_problem(v: Any) -> str | None:
    """The first line of a rated table (evaluation.evaluator.settings reads the rest before the
    run)."""
    if v in ("package", "extended"):  # evaluation.ladder.table.NAMED_TABLES
        return None
    path = str(Path(v).expanduser()) if isinstance(v, str) and v.strip() else v
    why = _file_problem(path)
    if why is not None:
        return why
    try:
        with open(path, "rb") as f:
            first = f.read(len(LADDER_TABLE_FIRST_LINE))
    except OSError as e:
        return e.strerror or str(e)
    return None if first == LADDER_TABLE_FIRST_LINE else f"{v!r} is not a rated ladder table"


LADDER_TABLE = Maybe(Check(_ladder_table_problem, "package, extended or a ladder table file"))
HOST_PORT = r"[A-Za-z0-9.\-]+:\d{1,5}"  # a Ray GCS address; Ray checks the port's range itself

# ---- the table -------------------------------------------------------------------------------
# Counts of processes and threads: one machine's cores; 256 is past any single node this runs
# on (the GPU node has 16), so a larger value is a typo, and 0 threads would stop torch.
THREADS = Int(1, 256)
# Every RNG the run seeds (numpy, torch, the C++ search) takes a 31-bit seed; actors add their id.
SEED = Int(0, 2**31 - 1)
# Training steps: 10^12 steps at the GPU learner's ~100 steps/s is 300 years; 0 only where a key
# says so.
STEPS = Int(1, 10**12)
# MCTS visits per decision and leaves one tree gathers per forward pass: the search's own ranges.
SIMULATIONS = Search(SEARCH_PARAMETERS["simulations"])
LEAVES = Search(SEARCH_PARAMETERS["leaves_per_game"])
# A poll or report interval in seconds: faster than 20 times a second spins a process for nothing;
# an hour is longer than any of them was meant to wait.
POLL_S = Num(0.05, 3600)
# A GPU share asked of Ray: above 0 (0 would hide the GPU from the actor), at most one GPU.
GPU_SHARE = Num(0, 1, open_lo=True)
# A loss weight: >= 0; a thousand times another term's weight drowns that term entirely.
LOSS_WEIGHT = Num(0, 1000)
# A share or a probability.
SHARE = Num(0, 1)
# A model dimension (filters, units): AlphaGo Zero's tower was 256 wide, lc0's largest residual
# nets 512; 1,024 is past any network a run here trains.
WIDTH = Int(1, 1024)
# Weights of the alpha-beta evaluation, centi-men: 12 pieces at 1,000 each plus features stay far
# below the search's mate scores (kMateThreshold = 29,000 in alphabeta.h).
EVAL_WEIGHT = Int(-1000, 1000)
PIECE_WEIGHT = Int(1, 1000)
DEVICE = Text(r"auto|cpu|mps|cuda(:\d+)?", "auto, cpu, cuda[:N] or mps")
DOTTED = Text(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", "a dotted Python name (module.Class)")

SCHEMA: dict[str, Rule] = {
    "run_dir": Check(_folder_problem, "a folder"),
    "seed": SEED,
    # ---- game
    "game.size": OneOf((6, 8)),  # the boards the encoder and the C++ core know
    "game.max_plies": Int(0, 65_535),  # 0: no cap; the core counts plies in 16 bits (game.h)
    # ---- model (checkerzero/network/model.py)
    "model.board_size": OneOf((6, 8)),  # and equal to game.size (checkerzero.config)
    "model.in_planes": OneOf((NUM_PLANES,)),  # the encoder's planes, not a choice
    "model.blocks": Int(0, 64),  # AlphaGo Zero's deepest tower had 40 blocks
    "model.channels": WIDTH,
    "model.policy_channels": WIDTH,
    "model.value_channels": WIDTH,
    "model.value_hidden": Int(1, 8192),  # a hidden layer of 8,192 units is 4 M weights on 8x8
    "model.moves_left_head": Flag(),
    # ---- mcts (game/cpp/mcts.h): each key's range is declared in game.search_parameters
    **{f"mcts.{name}": Search(p) for name, p in SEARCH_PARAMETERS.items()},
    # ---- self-play (actors/)
    # Self-play processes, ~0.4-0.7 GB each: 4,096 is 64 nodes of 64 cores, beyond any cluster
    # this was run on; null: one per free core.
    "selfplay.actors": Maybe(Int(0, 4096)),
    "selfplay.device": OneOf(("auto", "cpu", "cuda")),
    "selfplay.gpus_per_actor": GPU_SHARE,
    "selfplay.node_poll_s": POLL_S,
    # Games searched together by one actor: 4,096 games x 8 leaves is a 32 k batch, past what one
    # GPU evaluates at once.
    "selfplay.games_in_parallel": Int(1, 4096),
    "selfplay.openings": OneOf(OPENING_KINDS),
    "selfplay.temperature": Num(0, 100),  # 0: the most visited move; at 100 visits barely matter
    "selfplay.temperature_plies": Int(0, 65_535),  # plies; the core's ply counter is 16 bits
    "selfplay.final_temperature": Num(0, 100),
    "selfplay.playout_cap.enabled": Flag(),
    "selfplay.playout_cap.full_share": SHARE,
    "selfplay.playout_cap.fast_simulations": Int(0, 100_000),  # <= mcts.simulations (config.py)
    "selfplay.resign": Flag(),
    # A loss probability above which a side resigns: below one half a side would resign positions
    # it more likely holds than loses.
    "selfplay.resign_threshold": Num(0.5, 1),
    "selfplay.resign_consecutive": Int(1, 1000),  # decisions in a row; a game is < 1,000 of them
    "selfplay.resign_disabled_share": SHARE,
    "selfplay.torch_threads": THREADS,
    "selfplay.precision": OneOf(PRECISIONS),
    "selfplay.cpu_backend": OneOf(BACKENDS),
    "selfplay.inference_server.enabled": Flag(),
    "selfplay.inference_server.cpu_nodes": Flag(),
    "selfplay.inference_server.cpus": Num(0, 256),  # Ray CPUs; a node has fewer than 256
    # Leaves in one forward pass: 65,536 positions of 15x8x8 float32 are 250 MB of input, and a
    # CUDA graph is captured for every power of two up to it.
    "selfplay.inference_server.max_batch": Int(1, 65_536),
    # Milliseconds a batch waits for more clients: every actor of the node waits as long.
    "selfplay.inference_server.max_wait_ms": Num(0, 10_000),
    "selfplay.inference_server.pipeline": Int(1, 16),  # each a copy of the network and buffers
    "selfplay.inference_server.capture": Flag(),
    # ---- replay (checkerzero/store/replay.py)
    "replay.url": Maybe(
        Check(_redis_url_problem, "a redis://host[:port][/db], rediss:// or unix:// URL")
    ),
    "replay.password_env": Maybe(Text(r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable's name")),
    "replay.redis_server": Maybe(Check(_executable_problem, "an executable file")),
    "replay.namespace": Text(r"[A-Za-z0-9_.:\-]{1,64}", "1 to 64 letters, digits or _.:-"),
    # Positions: a stored position is ~0.5 KB in Redis, so 10^8 is ~50 GB, what one Redis holds.
    "replay.window_positions": Int(1, 10**8),
    "replay.min_positions": Int(0, 10**8),
    "replay.sample_ratio": Num(0, 10_000, open_lo=True),  # 0 never trains; 10^4 per position
    "replay.fast_positions_train_value": Flag(),
    "replay.prefetch_depth": Int(1, 64),  # decoded batches held in memory at once
    # Retries double their wait each time: 30 retries at 0.5 s already wait 17 years.
    "replay.connect_retries": Int(0, 30),
    "replay.connect_backoff_s": Num(0, 60),
    # ---- learner (learner/)
    # A network file; its shape is compared with the model keys (checkerzero.config).
    "learner.init_weights": Maybe(Check(_file_problem, "a network file")),
    "learner.reanalysis.enabled": Flag(),
    "learner.reanalysis.share": SHARE,
    "learner.reanalysis.simulations": SIMULATIONS,
    "learner.reanalysis.games": Int(1, 4096),  # as selfplay.games_in_parallel
    "learner.batch_size": Int(1, 65_536),  # a GPU wants 1-4 k; 65,536 is 250 MB of input a step
    "learner.max_steps": Int(0, 10**12),  # 0: no limit
    "learner.time_limit_min": Num(0, 10**7),  # 0: no limit; 10^7 minutes is 19 years
    "learner.device": DEVICE,  # and present on this machine (checkerzero.config)
    "learner.threads": THREADS,
    "learner.precision": OneOf(PRECISIONS),
    "learner.value_weight": LOSS_WEIGHT,
    "learner.value_target_q_weight": SHARE,
    "learner.moves_left_weight": LOSS_WEIGHT,
    "learner.ema_decay": Num(0, 1, open_hi=True),  # 0: off; 1 would never move
    "learner.optimizer._target_": DOTTED,
    "learner.optimizer._partial_": OneOf((True,)),  # the learner hands it the parameters
    "learner.optimizer.lr": Num(0, 10, open_lo=True),  # <= 0 learns nothing or ascends; 10 diverges
    "learner.optimizer.momentum": Num(0, 1, open_hi=True),  # 1 never forgets a gradient
    "learner.optimizer.weight_decay": Num(0, 1),  # L2 per step; 1 zeroes the weights
    "learner.optimizer.nesterov": Flag(),
    "learner.scheduler._target_": DOTTED,
    "learner.scheduler._partial_": OneOf((True,)),
    "learner.scheduler.milestones": Items(STEPS, 0, 1000, ascending=True),
    "learner.scheduler.gamma": Num(0, 1, open_lo=True),  # a factor at each drop: 0 stops learning
    "learner.publish_every_steps": STEPS,
    "learner.publish_every_min": Num(0, 10_000),  # minutes; 10,000 is a week
    "learner.checkpoint_every_steps": STEPS,
    "learner.checkpoint_every_min": Num(0.01, 10**6),  # 0 would checkpoint every step
    "learner.keep_checkpoints": Int(1, 10_000),
    "learner.keep_weights": Int(0, 10**6),  # 0: all
    "learner.wait_poll_s": POLL_S,
    "learner.max_checkpoint_mb": Int(1, 65_536),  # read into memory whole: 64 GB is past any host
    # ---- endgame database (game/egdb)
    "egdb.dir": Check(_folder_problem, "a folder"),
    # Pieces: 6 is 2.5 G positions on 8x8 (OEIS A055213), hours of building; 7 is 40 G.
    "egdb.pieces": Int(1, 6),
    "egdb.build_workers": THREADS,
    "egdb.adjudicate_selfplay": Flag(),
    "egdb.mcts_leaves": Flag(),
    "egdb.adjudicate_matches": Flag(),
    "egdb.play": Flag(),
    "egdb.play_depth": Int(1, 64),  # the alpha-beta's deepest iteration (kMaxSearchDepth)
    # ---- logging
    "logging.wandb.mode": OneOf(("online", "offline", "disabled")),
    # W&B's own rule for project and entity names: up to 128 characters, none of / \ # ? % :
    "logging.wandb.project": Text(r"[^/\\#?%:\s]{1,128}", "a W&B project name"),
    "logging.wandb.entity": Maybe(Text(r"[^/\\#?%:\s]{1,128}", "a W&B entity name")),
    "logging.wandb.log_models": Flag(),
    "logging.actors_to_terminal": Flag(),
    "logging.progress_every_s": POLL_S,
    "logging.csv_every_s": POLL_S,
    "logging.plot_every_min": Num(0.1, 10**4),  # a plot takes ~1 s to draw: not more often
    "logging.pdn_sample_games": Int(0, 10_000),  # games written each time; 0: none
    "logging.pdn_every_versions": Int(1, 10**6),
    "logging.live_game_every_s": Num(0, 3600),  # 0: none
    "logging.live_game_ttl_s": Num(0, 86_400),  # 0: actors publish none; a day is past any game
    "logging.level": OneOf(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    # ---- cluster (checkerzero/cluster/start.py)
    "cluster.address": Maybe(
        Text(rf"auto|local|(ray://)?{HOST_PORT}", "auto, local, host:port or ray://host:port")
    ),
    "cluster.num_cpus": Maybe(Int(1, 4096)),  # a machine's CPUs; null: all of them
    # Ray refuses an object store under 75 MB; 1 TB is past any host's memory.
    "cluster.object_store_memory_mb": Maybe(Int(75, 1 << 20)),
    "cluster.include_dashboard": Flag(),
    # a GCS answers in milliseconds; past 10 minutes a lost cluster is a hang, not a blip
    "cluster.lost_after_s": Num(1, 600),
    # ---- evaluation (evaluation/; EvalSettings checks the ladder's player specs and the table)
    "evaluation.baseline.weights.man": PIECE_WEIGHT,
    "evaluation.baseline.weights.king": PIECE_WEIGHT,
    "evaluation.baseline.weights.advancement": EVAL_WEIGHT,
    "evaluation.baseline.weights.back_rank": EVAL_WEIGHT,
    "evaluation.baseline.weights.centre": EVAL_WEIGHT,
    "evaluation.baseline.weights.mobility": EVAL_WEIGHT,
    "evaluation.baseline.weights.runaway": EVAL_WEIGHT,
    "evaluation.baseline.weights.king_centre": EVAL_WEIGHT,
    "evaluation.baseline.search.tt_mb": Int(1, 65_536),  # MB per searching thread
    "evaluation.gating": Flag(),
    "evaluation.gate.elo0": Num(-1000, 1000),  # Elo differences; < elo1 (checkerzero.config)
    "evaluation.gate.elo1": Num(-1000, 1000),  # past 1,000 Elo one side wins 99.7%
    "evaluation.gate.alpha": Num(0, 0.5, open_lo=True, open_hi=True),  # error rates of a test
    "evaluation.gate.beta": Num(0, 0.5, open_lo=True, open_hi=True),
    "evaluation.gate.model": OneOf(("pentanomial", "trinomial")),
    "evaluation.gate.method": OneOf(("exact", "approx")),
    "evaluation.gate.max_games": Int(2, 100_000),  # a game is ~7 s on two cores: 100 k is a week
    "evaluation.elo.anchor_player": Text(r"\S+", "a player spec"),
    "evaluation.elo.anchor_rating": Num(-10_000, 10_000),
    "evaluation.elo.prior_draws": Num(0, 1000),  # virtual games; 1,000 outweighs any real count
    "evaluation.elo.first_move_advantage": Flag(),
    "evaluation.elo.confidence": Num(0, 1, open_lo=True, open_hi=True),
    "evaluation.enabled": Flag(),
    "evaluation.every_versions": Int(1, 10**6),
    "evaluation.every_min": Num(0, 10_000),  # minutes; 10,000 is a week
    "evaluation.early_min": Num(0, 10_000),
    "evaluation.early_every_min": Num(0, 10_000),
    "evaluation.early_games": Int(2, 10_000),  # even (EvalSettings)
    "evaluation.simulations": SIMULATIONS,
    "evaluation.leaves_per_game": LEAVES,
    "evaluation.root_policy": Search(SEARCH_PARAMETERS["root_policy"]),
    "evaluation.book": Flag(),
    "evaluation.timed_leaves_per_game": LEAVES,
    "evaluation.ladder": Items(Text(r"\S+", "a player spec"), 0, 64),
    "evaluation.ladder_pairs": Int(0, 1000),  # game pairs per rung per candidate
    "evaluation.rung_pairs": Int(0, 1000),
    "evaluation.fix_ladder": Flag(),
    "evaluation.ladder_table": LADDER_TABLE,
    "evaluation.candidate_games": Int(2, 10_000),  # even (EvalSettings)
    "evaluation.probe_games": Int(0, 10_000),
    "evaluation.neighbour_rungs": Int(1, 64),  # a ladder has at most 64 rungs
    "evaluation.openings": OneOf(OPENING_KINDS),
    "evaluation.extend_openings": Int(0, 64),  # random plies; past 64 most games are over
    "evaluation.seed": SEED,
    "evaluation.poll_s": POLL_S,
    "evaluation.device": DEVICE,  # and present on this machine (checkerzero.config)
    "evaluation.gpus": GPU_SHARE,
    "evaluation.torch_threads": THREADS,
    "evaluation.num_cpus": Num(0, 256),  # Ray CPUs reserved; 0 shares self-play's
    "evaluation.write_pdn": Flag(),
    # ---- the fast player's evaluation in generations (learner/nneval, conf/nneval)
    "nneval.enabled": Flag(),
    "nneval.generations": Int(1, 1000),  # a generation is hours: 1,000 is past any campaign
    "nneval.positions": Int(1, 10**9),  # 10^9 positions is ~7 GB of shards, a week of a cluster
    "nneval.initial": OneOf(("shipped", "random")),
    "nneval.lineage_dir": Check(_folder_problem, "a folder"),
    "nneval.data_dir": Check(_folder_problem, "a folder"),
    "nneval.shard_games": Int(1, 10**6),  # items per shard; 10^6 games is ~2.4 GB in Redis
    "nneval.selfplay.actors": Maybe(Int(1, 100_000)),
    "nneval.selfplay.depth": Int(1, 64),  # the alpha-beta's deepest iteration (kMaxSearchDepth)
    "nneval.selfplay.random_plies": Int(0, 64),  # past 64 most games are over
    "nneval.selfplay.random_moves": Int(0, 64),
    "nneval.selfplay.random_until": Int(0, 10_000),
    "nneval.selfplay.max_plies": Int(10, 10_000),
    "nneval.selfplay.tt_mb": Int(1, 65_536),
    "nneval.selfplay.openings": OneOf(OPENING_KINDS),
    "nneval.selfplay.egdb": Flag(),
    "nneval.check.pairs": Int(0, 100_000),
    "nneval.check.plies": Int(1, 64),
    "nneval.check.depth": Int(1, 64),
    "nneval.check.max_plies": Int(10, 10_000),
    "nneval.ladder.pairs": Int(0, 10_000),
    "nneval.ladder.table": LADDER_TABLE,
    "nneval.dedup.bits_log2": Int(8, 32),  # a Redis bitmap holds at most 2^32 bits
    "nneval.dedup.probes": Int(1, 32),
    "nneval.train.window": Int(1, 1000),
    "nneval.train.hidden": Int(1, 256),  # the core's kMaxHidden
    "nneval.train.dense1": Int(1, 64),  # the core's kMaxDense
    "nneval.train.dense2": Int(1, 64),
    "nneval.train.epochs": Int(1, 1000),
    "nneval.train.steps": Int(0, 10_000_000),
    "nneval.train.batch": Int(1, 1 << 20),
    "nneval.train.lr": Num(0, 10, open_lo=True),
    "nneval.train.lambda_start": Num(0, 1),
    "nneval.train.lambda_end": Num(0, 1),
    "nneval.train.validation": Num(0, 0.5, open_lo=True),
    "nneval.train.output_scale": Int(1, 2000),  # the core's kMaxOutputScale
    "nneval.train.shuffle_rows": Int(1, 10**9),
    "nneval.train.max_val_rows": Int(1, 10**8),
    "nneval.train.warm_start": Flag(),
    "nneval.train.flip_labels": Flag(),
    "nneval.train.result_from_ply": Int(0, 10_000),
    "nneval.train.threads": THREADS,
    "nneval.gate.time_ms": Int(1, 600_000),  # ten minutes a move is past any match
    "nneval.gate.time_management": Flag(),
    "nneval.gate.depth": Int(0, 64),  # 0: by time
    "nneval.gate.max_plies": Int(10, 10_000),
    "nneval.gate.openings": OneOf(OPENING_KINDS),
    "nneval.gate.parallel": Maybe(Int(1, 100_000)),
    "nneval.gate.sprt.elo0": Num(-1000, 1000),
    "nneval.gate.sprt.elo1": Num(-1000, 1000),
    "nneval.gate.sprt.alpha": Num(0, 0.5, open_lo=True, open_hi=True),
    "nneval.gate.sprt.beta": Num(0, 0.5, open_lo=True, open_hi=True),
    "nneval.gate.sprt.model": OneOf(("pentanomial", "trinomial")),
    "nneval.gate.sprt.max_games": Int(2, 100_000),
}

# Sections passed whole to a constructor, which checks the keys a user adds (an Adam's betas).
OPEN_SECTIONS = ("learner.optimizer", "learner.scheduler")


def rule_for(key: str) -> Rule | None:
    """The rule of ``key``, None for a key the schema does not know."""
    if key in SCHEMA:
        return SCHEMA[key]
    if any(key.startswith(s + ".") for s in OPEN_SECTIONS):
        return ANY
    return None


@dataclass(frozen=True)
class _Any(Rule):
    allowed: str = "anything its constructor takes"

    def ok(self, v: Any) -> bool:
        return True


ANY = _Any()


def problems(values: Mapping[str, Any], *, unknown: bool = True) -> list[tuple[str, Any, str]]:
    """``(key, value, what is allowed)`` for each value of a resolved config (plain dicts and
    lists) that breaks its rule, in the config's order; with ``unknown``, also each key the
    schema does not know (``"not a config key"``)."""
    out: list[tuple[str, Any, str]] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for name, value in node.items():
            key = f"{prefix}{name}"
            rule = rule_for(key)
            if rule is None and isinstance(value, Mapping):
                walk(value, key + ".")
            elif rule is None:
                if unknown:
                    out.append((key, value, "not a config key"))
            else:
                why = rule.problem(value)
                if why is not None:
                    out.append((key, value, why))

    walk(values, "")
    return out


def leaf_keys(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted key of every value (not a mapping) in a resolved config."""
    out: list[str] = []
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and key not in SCHEMA:
            out += leaf_keys(value, key + ".")
        else:
            out.append(key)
    return out


def group_names(conf: Path) -> Sequence[str]:
    """The config groups (folders of ``conf/``), for suggestions."""
    return sorted(p.name for p in conf.iterdir() if p.is_dir()) if conf.is_dir() else ()
