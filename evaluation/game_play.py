"""Matches between two players, from an opening deck with colours reversed, in parallel.

Every opening is played twice, once with each player as Black, and the two games are kept
together as a *pair*: the pentanomial model of the gate (evaluation.gating) scores pairs, which
cancels most of the bias of an unbalanced opening. The default openings are the ACF 3-move
deck used in tournaments (156 ballots: crossboard and mail-play; the 18 barred ballots lose
by force and are skipped); ``start`` plays every game from the initial position.

``play_match`` runs in this process with Player objects. ``run_match`` (and the command line,
``python -m evaluation.match``) takes player *specs* instead, because workers build their own
players: one Ray task per game pair when Ray is available, else a local process pool, else a
plain loop. Where a network searches to a number of simulations, a task holds several pairs
(``side_by_side``) whose games are played side by side (``play_pairs``), their searches sharing
forward passes; the moves are those of one pair after another. Results cross process
boundaries as plain dicts of strings and numbers, never as pickled objects.

Each pair also carries what both players' searches did in it (``evaluation.players.player_stats``:
moves, simulations, depth, nodes), so a match reports e.g. the mean simulations per move of a
network that plays to a time budget beside the mean depth of the alpha-beta player it meets.
"""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from checkerzero.cluster.start import start_ray
from evaluation.elo import EloEstimate, match_elo
from evaluation.players import Player, make_player, player_stats
from game.egdb import EndgameDatabase, describe, result_of
from game.egdb.build import cached_database
from game.mcts import search_many
from game.openings import Opening
from game.pdn import PdnGame
from game.position import Position

logger = logging.getLogger(__name__)

# A game reaching this many plies is drawn by the ply cap. Expert games rarely pass 150 plies
# and the forty-move rule ends shuffling endings well before 300; the cap only stops pathologies.
DEFAULT_MAX_PLIES = 300
# Seconds to wait for any one game pair before giving up on a worker (Ray waits forever on a
# resource no node has): ample for depth 8 on a slow core, whose pairs take about a minute.
DEFAULT_PAIR_TIMEOUT_S = 1800.0
EVENT = "checkerzero match"
PAIR_POINTS = (0.0, 0.5, 1.0, 1.5, 2.0)  # the pentanomial categories: A's points over a pair
# Search counters that are totals over the moves; a match reports them per move (the others,
# such as "forced" and "reused", stay counts).
PER_MOVE_STATS = ("simulations", "evaluations", "depth", "nodes")


@dataclass(frozen=True)
class PlayedGame:
    """One finished game. ``moves`` include the opening's; ``result`` is PDN's ("1-0": Black)."""

    black: str
    white: str
    opening: str
    moves: tuple[str, ...]
    result: str
    end_reason: str
    size: int = 8

    def black_points(self) -> float:
        return {"1-0": 1.0, "0-1": 0.0}.get(self.result, 0.5)

    def pdn(self, round_label: str = "") -> PdnGame:
        tags = {"Event": EVENT, "Black": self.black, "White": self.white, "Opening": self.opening}
        if round_label:
            tags["Round"] = round_label
        tags["Termination"] = self.end_reason
        if self.size != 8:
            tags["GameType"] = f"21,{self.size},{self.size},1,N2,0"  # PDN: English rules, SxS
        return PdnGame(tags=tags, moves=list(self.moves), result=self.result, size=self.size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "black": self.black,
            "white": self.white,
            "opening": self.opening,
            "moves": list(self.moves),
            "result": self.result,
            "end_reason": self.end_reason,
            "size": self.size,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlayedGame:
        return cls(
            black=str(d["black"]),
            white=str(d["white"]),
            opening=str(d["opening"]),
            moves=tuple(str(m) for m in d["moves"]),
            result=str(d["result"]),
            end_reason=str(d["end_reason"]),
            size=int(d["size"]),
        )


@dataclass(frozen=True)
class PairRecord:
    """An opening played twice with colours reversed: A as Black, then A as White."""

    index: int  # position in the match schedule
    opening: str
    a_black: PlayedGame
    a_white: PlayedGame
    # What each player's search did over the pair's two games (player_stats: moves,
    # simulations, depth, nodes, ...); None for records without it. Not part of equality: a
    # player on a time budget searches a different amount on every run.
    a_stats: Mapping[str, int] | None = field(default=None, compare=False)
    b_stats: Mapping[str, int] | None = field(default=None, compare=False)

    @property
    def a_points(self) -> float:
        return sum(self.a_game_points())

    def a_game_points(self) -> tuple[float, float]:
        """A's points in the pair's two games: as Black, then as White."""
        return self.a_black.black_points(), 1.0 - self.a_white.black_points()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "opening": self.opening,
            "a_black": self.a_black.to_dict(),
            "a_white": self.a_white.to_dict(),
        } | {
            key: dict(stats)
            for key, stats in (("a_stats", self.a_stats), ("b_stats", self.b_stats))
            if stats is not None
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairRecord:
        """The pair of ``to_dict``; records written before the search counters existed (no
        ``a_stats`` / ``b_stats``) load with None there."""

        def stats(key: str) -> dict[str, int] | None:
            value = d.get(key)
            if value is None:
                return None
            if not isinstance(value, Mapping):
                raise ValueError(f"game pair {key} must be a mapping of counts, got {value!r}")
            return {str(k): int(v) for k, v in value.items()}

        return cls(
            index=int(d["index"]),
            opening=str(d["opening"]),
            a_black=PlayedGame.from_dict(d["a_black"]),
            a_white=PlayedGame.from_dict(d["a_white"]),
            a_stats=stats("a_stats"),
            b_stats=stats("b_stats"),
        )


@dataclass(frozen=True)
class MatchResult:
    player_a: str
    player_b: str
    pairs: tuple[PairRecord, ...]

    def games(self) -> list[tuple[PlayedGame, bool]]:
        """Every game with a flag telling whether A had Black, in schedule order."""
        return [
            (g, a_black)
            for p in self.pairs
            for g, a_black in ((p.a_black, True), (p.a_white, False))
        ]

    def a_points(self, game: PlayedGame, a_black: bool) -> float:
        return game.black_points() if a_black else 1.0 - game.black_points()

    @property
    def wins(self) -> int:
        return sum(self.a_points(g, b) == 1.0 for g, b in self.games())

    @property
    def draws(self) -> int:
        return sum(self.a_points(g, b) == 0.5 for g, b in self.games())

    @property
    def losses(self) -> int:
        return sum(self.a_points(g, b) == 0.0 for g, b in self.games())

    @property
    def num_games(self) -> int:
        return 2 * len(self.pairs)

    @property
    def score(self) -> float:
        """A's points per game."""
        return (self.wins + 0.5 * self.draws) / self.num_games

    def pentanomial(self) -> tuple[int, int, int, int, int]:
        """Pairs in which A scored 0, 1/2, 1, 3/2 and 2 points."""
        counts = [0] * len(PAIR_POINTS)
        for pair in self.pairs:
            counts[PAIR_POINTS.index(pair.a_points)] += 1
        return tuple(counts)  # type: ignore[return-value]

    def search(self, side: str) -> dict[str, float]:
        """What player ``side`` ("a" or "b") searched over the match: ``moves`` (searched),
        ``forced`` and ``reused`` counts, and the mean ``simulations``, ``evaluations``,
        ``depth`` and ``nodes`` per searched move, for the counters it has. Empty when no pair
        carries its counters (a random player, or records from before they existed)."""
        if side not in ("a", "b"):
            raise ValueError(f"side must be 'a' or 'b', got {side!r}")
        totals: dict[str, int] = {}
        for pair in self.pairs:
            for key, value in (getattr(pair, f"{side}_stats") or {}).items():
                totals[key] = totals.get(key, 0) + value
        moves = totals.get("moves", 0)
        return {
            key: (value / moves if moves else 0.0) if key in PER_MOVE_STATS else value
            for key, value in totals.items()
        }

    def elo(self) -> EloEstimate:
        """A's Elo over B with the trinomial 95% interval (evaluation.elo.match_elo)."""
        return match_elo(self.wins, self.draws, self.losses)

    def pdn_games(self) -> list[PdnGame]:
        return [
            game.pdn(f"{pair.index + 1}.{k + 1}")
            for pair in self.pairs
            for k, game in enumerate((pair.a_black, pair.a_white))
        ]

    def summary_dict(self) -> dict[str, Any]:
        """The figures of `summary()` as plain values (what `--json` writes); an Elo bound that
        is infinite (a 0% or 100% score) is None, so that the JSON stays strict."""
        elo = self.elo()

        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "player_a": self.player_a,
            "player_b": self.player_b,
            "games": self.num_games,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "score": self.score,
            "elo": finite(elo.elo),
            "elo_lower": finite(elo.elo_lower),
            "elo_upper": finite(elo.elo_upper),
            "confidence": elo.confidence,
            "pentanomial": list(self.pentanomial()),
        } | {f"{side}_search": s for side in ("a", "b") if (s := self.search(side))}

    def summary(self) -> str:
        elo = self.elo()
        return (
            f"{self.player_a} vs {self.player_b}: {self.num_games} games, "
            f"+{self.wins} ={self.draws} -{self.losses} (W/D/L for {self.player_a}), "
            f"score {100 * self.score:.1f}%, Elo {elo.elo:+.0f} "
            f"[{elo.elo_lower:+.0f}, {elo.elo_upper:+.0f}] ({100 * elo.confidence:.0f}%), "
            f"pairs 0/½/1/1½/2: {list(self.pentanomial())}"
        )

    def search_summary(self) -> list[str]:
        """One line per player whose search was counted: its name and ``describe_search``."""
        return [
            f"{name}: {text}"
            for name, side in ((self.player_a, "a"), (self.player_b, "b"))
            if (text := describe_search(self.search(side)))
        ]


def describe_search(search: Mapping[str, float]) -> str:
    """One line of a player's ``MatchResult.search`` figures, e.g. "1,234 simulations per move
    (810 moves searched, 12 forced)" or "depth 11.3, 812,000 nodes per move (795 moves)"."""
    moves = int(search.get("moves", 0))
    if "simulations" in search:
        forced = int(search.get("forced", 0))
        return (
            f"{search['simulations']:,.0f} simulations per move "
            f"({moves} moves searched, {forced} forced)"
        )
    if "depth" in search:
        nodes = search.get("nodes", 0)
        return f"depth {search['depth']:.1f}, {nodes:,.0f} nodes per move ({moves} moves)"
    return ""


class _GameInPlay:
    """One game under way (``play_game``'s steps): its position, moves and end. Resets both
    players when it starts."""

    def __init__(
        self,
        black: Player,
        white: Player,
        opening: Opening,
        *,
        max_plies: int,
        size: int,
        egdb: EndgameDatabase | None,
    ) -> None:
        self.black, self.white, self.opening = black, white, opening
        self.size, self.egdb = size, egdb
        self.pos = Position(size, max_plies=max_plies)
        self.moves: list[str] = []
        for text in opening.moves:
            try:
                self.moves.append(str(self.pos.play(text)))
            except ValueError as e:
                raise ValueError(f"opening {opening.name}: {e}") from None
        black.reset()
        white.reset()
        self.adjudicated: tuple[str, str] | None = None

    def over(self) -> bool:
        """True once the rules end the game, or it reaches the endgame database."""
        if self.adjudicated is not None or self.pos.result() is not None:
            return True
        if self.egdb is not None and (value := self.egdb.value(self.pos)):
            self.adjudicated = (result_of(value, self.pos.turn), describe(value, self.pos.turn))
            return True
        return False

    def to_move(self) -> Player:
        return self.black if self.pos.turn == "B" else self.white

    def play(self, move: Any) -> None:
        player = self.to_move()
        try:
            self.moves.append(str(self.pos.play(move)))
        except ValueError as e:
            raise ValueError(f"player {player.name} chose an illegal move: {e}") from None

    def record(self) -> PlayedGame:
        result, end_reason = self.adjudicated or (
            self.pos.result() or "*",
            self.pos.end_reason or "",
        )
        return PlayedGame(
            black=self.black.name,
            white=self.white.name,
            opening=self.opening.name,
            moves=tuple(self.moves),
            result=result,
            end_reason=end_reason,
            size=self.size,
        )


def play_game(
    black: Player,
    white: Player,
    opening: Opening,
    *,
    max_plies: int = DEFAULT_MAX_PLIES,
    size: int = 8,
    egdb: EndgameDatabase | None = None,
) -> PlayedGame:
    """One game from ``opening`` to its end (rules or ply cap). Resets both players first.

    With ``egdb`` the game ends the moment it reaches the endgame database, with the database's
    exact result; the termination then reads e.g. "database win for White".
    """
    game = _GameInPlay(black, white, opening, max_plies=max_plies, size=size, egdb=egdb)
    while not game.over():
        game.play(game.to_move().choose(game.pos))
    return game.record()


def _stats_change(players: Sequence[Player], before: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """What ``players``' searches did since ``before`` (their player_stats then), summed."""
    total: dict[str, int] = {}
    for p, old in zip(players, before, strict=True):
        for k, v in player_stats(p).items():
            total[k] = total.get(k, 0) + v - old.get(k, 0)
    return total


def play_pair(
    a: Player,
    b: Player,
    opening: Opening,
    index: int = 0,
    *,
    max_plies: int = DEFAULT_MAX_PLIES,
    size: int = 8,
    egdb: EndgameDatabase | None = None,
) -> PairRecord:
    """``opening`` played twice, A as Black first; the record carries what each player's search
    did over the two games (the change of its ``player_stats``)."""
    before = [player_stats(a)], [player_stats(b)]
    first = play_game(a, b, opening, max_plies=max_plies, size=size, egdb=egdb)
    second = play_game(b, a, opening, max_plies=max_plies, size=size, egdb=egdb)
    return PairRecord(
        index=index,
        opening=opening.name,
        a_black=first,
        a_white=second,
        a_stats=_stats_change([a], before[0]) or None,
        b_stats=_stats_change([b], before[1]) or None,
    )


@dataclass(frozen=True)
class PairPlan:
    """One pair for ``play_pairs``: A's and B's player objects in the first game (A Black)
    and in the second (A White), each object playing only that game."""

    a: tuple[Player, Player]
    b: tuple[Player, Player]
    opening: Opening
    index: int = 0


def play_pairs(
    plans: Sequence[PairPlan],
    *,
    max_plies: int = DEFAULT_MAX_PLIES,
    size: int = 8,
    egdb: EndgameDatabase | None = None,
) -> list[PairRecord]:
    """Several pairs' games side by side in this process, the same records as ``play_pair``
    one after another: at each round every game whose mover searches with a network
    (``MCTSPlayer.decide``) joins one batched search per network and budget
    (``game.mcts.search_many``), and the other movers (alpha-beta, random) play at once. A
    network's games then share its forward passes, which on a GPU costs little more than one
    game. Each player object must play a single game (``MCTSPlayer.fork``): a search tree or
    a random generator follows one game."""
    players = [p for plan in plans for p in (*plan.a, *plan.b)]
    if len({id(p) for p in players}) != len(players):
        raise ValueError("play_pairs: every game needs its own player objects (MCTSPlayer.fork)")
    before = [player_stats(p) for p in players]
    games = []
    for plan in plans:
        games.append(
            _GameInPlay(
                plan.a[0], plan.b[0], plan.opening, max_plies=max_plies, size=size, egdb=egdb
            )
        )
        games.append(
            _GameInPlay(
                plan.b[1], plan.a[1], plan.opening, max_plies=max_plies, size=size, egdb=egdb
            )
        )
    _play_side_by_side(games)
    records = []
    for k, plan in enumerate(plans):
        a_before, b_before = before[4 * k : 4 * k + 2], before[4 * k + 2 : 4 * k + 4]
        records.append(
            PairRecord(
                index=plan.index,
                opening=plan.opening.name,
                a_black=games[2 * k].record(),
                a_white=games[2 * k + 1].record(),
                a_stats=_stats_change(plan.a, a_before) or None,
                b_stats=_stats_change(plan.b, b_before) or None,
            )
        )
    return records


def _play_side_by_side(games: Sequence[_GameInPlay]) -> None:
    """Plays ``games`` to their ends, batching the network movers' searches (``play_pairs``)."""
    live = list(range(len(games)))
    pending: dict[int, tuple[Any, Any]] = {}  # game -> (its mover's decide(), the search it awaits)
    while live:
        for g in list(live):
            game = games[g]
            while g not in pending:  # on to this game's next network search, or its end
                if game.over():
                    live.remove(g)
                    break
                player = game.to_move()
                decide = getattr(player, "decide", None)
                if decide is None:
                    game.play(player.choose(game.pos))
                    continue
                steps = decide(game.pos)
                try:
                    pending[g] = (steps, next(steps))
                except StopIteration as done:  # searched inside (a time per move)
                    game.play(done.value)
        groups: dict[tuple[int, int], list[int]] = {}
        for g in pending:
            player = games[g].to_move()
            groups.setdefault((id(player.evaluator), player.simulations), []).append(g)
        for g_list in groups.values():
            player = games[g_list[0]].to_move()
            leaves = search_many(
                [pending[g][1] for g in g_list], player.evaluator, player.simulations
            )
            for g, n in zip(g_list, leaves, strict=True):
                steps = pending.pop(g)[0]
                try:
                    pending[g] = (steps, steps.send(n))
                except StopIteration as done:
                    games[g].play(done.value)


def schedule(openings: Sequence[Opening], pairs: int, seed: int) -> list[Opening]:
    """``pairs`` openings drawn without replacement in a seeded order (reshuffled per cycle)."""
    if not openings:
        raise ValueError("a match needs at least one opening")
    rng = random.Random(seed)
    order: list[Opening] = []
    while len(order) < pairs:
        deck = list(openings)
        rng.shuffle(deck)
        order.extend(deck)
    return order[:pairs]


def _check_games(games: int) -> int:
    if isinstance(games, bool) or not isinstance(games, int) or games <= 0 or games % 2:
        raise ValueError(
            f"games must be a positive even number (each opening is played twice), got {games!r}"
        )
    return games // 2


def play_match(
    player_a: Player,
    player_b: Player,
    openings: Sequence[Opening],
    *,
    games: int,
    seed: int = 0,
    max_plies: int = DEFAULT_MAX_PLIES,
    size: int = 8,
    progress: Callable[[PairRecord, int, int], None] | None = None,
    egdb: EndgameDatabase | None = None,
) -> MatchResult:
    """``games`` games (``games / 2`` openings, each with colours reversed) in this process;
    with ``egdb`` a game ends as soon as it reaches the endgame database."""
    plan = schedule(openings, _check_games(games), seed)
    pairs = []
    for i, opening in enumerate(plan):
        pair = play_pair(player_a, player_b, opening, i, max_plies=max_plies, size=size, egdb=egdb)
        pairs.append(pair)
        if progress is not None:
            progress(pair, len(pairs), len(plan))
    return MatchResult(player_a.name, player_b.name, tuple(pairs))


# ----------------------------------------------------------------------------- workers


# Game pairs a match worker plays side by side by default where a network searches to a number
# of simulations (``run_match``): 8 games share each forward pass (x ``leaves_per_game`` leaves).
SIDE_BY_SIDE = 4
PARENT_POLL_S = 0.5  # how often a worker process checks that the match that started it lives


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: a daemon thread ends this process once its parent is gone (killed,
    even with SIGKILL), instead of letting it play its current pair to the end unseen."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _pairs_task(
    spec_a: str,
    spec_b: str,
    pairs: list[tuple[int, str, list[str]]],
    max_plies: int,
    size: int,
    options: dict[str, Any],
    adjudicate: bool = False,
) -> list[dict[str, Any]]:
    """Game pairs in a worker: plain arguments in, plain dicts out, in order (nothing pickled).
    ``pairs`` holds ``(index, opening name, opening moves)``. One pair is played one game after
    the other; several side by side (``play_pairs``), each network loaded once and every game
    given its own player object (a ``fork`` of it; a fresh one of any other kind)."""
    protos = make_player(spec_a, **options), make_player(spec_b, **options)
    egdb = (
        cached_database(options["egdb_dir"], size, options["egdb_pieces"]) if adjudicate else None
    )
    openings = [(index, Opening(name, tuple(moves), size=size)) for index, name, moves in pairs]
    if len(openings) == 1:
        ((index, opening),) = openings
        record = play_pair(*protos, opening, index, max_plies=max_plies, size=size, egdb=egdb)
        return [record.to_dict()]

    def player(k: int) -> Player:
        fork = getattr(protos[k], "fork", None)
        return fork() if fork is not None else make_player((spec_a, spec_b)[k], **options)

    plans = [
        PairPlan(a=(player(0), player(0)), b=(player(1), player(1)), opening=o, index=i)
        for i, o in openings
    ]
    records = play_pairs(plans, max_plies=max_plies, size=size, egdb=egdb)
    return [record.to_dict() for record in records]


def batches_side_by_side(player: Player) -> bool:
    """Whether ``player``'s games gain from being played side by side: a network searching to a
    number of simulations (its games then share forward passes); a timed one searches alone."""
    return callable(getattr(player, "decide", None)) and not getattr(player, "time_ms", 0)


def _ray_module(mode: str) -> Any | None:
    if mode == "off":
        return None
    try:
        import ray
    except ImportError:
        if mode == "on":
            raise ValueError("--ray on, but Ray is not installed") from None
        return None
    return ray


def run_match(
    spec_a: str,
    spec_b: str,
    openings: Sequence[Opening],
    *,
    games: int,
    seed: int = 0,
    max_plies: int = DEFAULT_MAX_PLIES,
    size: int = 8,
    workers: int = 1,
    ray_mode: str = "auto",
    player_options: Mapping[str, Any] | None = None,
    pair_timeout_s: float = DEFAULT_PAIR_TIMEOUT_S,
    progress: Callable[[PairRecord, int, int], None] | None = None,
    adjudicate: bool = False,
    side_by_side: int = SIDE_BY_SIDE,
) -> MatchResult:
    """A match between two player specs, one task per game pair, or per ``side_by_side`` pairs
    played side by side (``play_pairs``) where a network searching to a number of simulations
    plays: its games then share forward passes (fewer, larger batches), and the moves are the
    same as one pair after another.

    ``adjudicate`` ends each game as soon as it reaches the endgame database named by the
    ``egdb_dir`` and ``egdb_pieces`` player options (built here first if missing).

    ``ray_mode``: ``auto`` uses Ray when it is installed (joining a running cluster, else
    starting a local one with ``workers`` CPUs), ``on`` requires it, ``off`` uses a local
    process pool of ``workers`` processes (a plain loop for ``workers == 1``). The result is the
    same whichever runs it: pairs are put back in schedule order.
    """
    if ray_mode not in ("auto", "on", "off"):
        raise ValueError(f"ray mode must be auto, on or off, got {ray_mode!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if isinstance(side_by_side, bool) or not isinstance(side_by_side, int) or side_by_side < 1:
        raise ValueError(f"side_by_side must be an integer >= 1, got {side_by_side!r}")
    options = dict(player_options or {})
    # Fail fast, here, on a bad spec rather than in every worker.
    first_a, first_b = make_player(spec_a, **options), make_player(spec_b, **options)
    name_a, name_b = first_a.name, first_b.name
    if not (batches_side_by_side(first_a) or batches_side_by_side(first_b)):
        side_by_side = 1
    del first_a, first_b
    uses_db = adjudicate or "+db:" in spec_a or "+db:" in spec_b
    if uses_db:  # build a missing database once here, not in every worker
        if not options.get("egdb_dir") or int(options.get("egdb_pieces", 0)) < 1:
            raise ValueError("the endgame database needs the egdb_dir and egdb_pieces options")
        cached_database(options["egdb_dir"], size, int(options["egdb_pieces"]))
    plan = schedule(openings, _check_games(games), seed)
    # Pairs per task: side_by_side, but never so many that a worker is left without a share.
    per_task = max(1, min(side_by_side, math.ceil(len(plan) / workers)))
    pairs = [(i, o.name, list(o.moves)) for i, o in enumerate(plan)]
    jobs = [
        (spec_a, spec_b, pairs[k : k + per_task], max_plies, size, options, adjudicate)
        for k in range(0, len(pairs), per_task)
    ]
    task_timeout_s = pair_timeout_s * per_task
    done: list[PairRecord] = []

    def finished(ds: Sequence[Mapping[str, Any]]) -> None:
        for d in ds:
            pair = PairRecord.from_dict(d)
            done.append(pair)
            if progress is not None:
                progress(pair, len(done), len(plan))

    ray = _ray_module(ray_mode)
    if ray is not None:
        _run_on_ray(ray, jobs, workers, task_timeout_s, finished)
    elif workers == 1 or len(jobs) == 1:
        for job in jobs:
            finished(_pairs_task(*job))
    else:
        ctx = get_context("spawn")  # no fork of a process that may hold threads
        with ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)),
            mp_context=ctx,
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        ) as pool:
            futures = [pool.submit(_pairs_task, *job) for job in jobs]
            for future in as_completed(futures, timeout=task_timeout_s * len(jobs)):
                finished(future.result())
    return MatchResult(name_a, name_b, tuple(sorted(done, key=lambda p: p.index)))


def _run_on_ray(
    ray: Any,
    jobs: list[tuple],
    workers: int,
    timeout_s: float,
    finished: Callable[[Sequence[Mapping[str, Any]]], None],
) -> None:
    owned = not ray.is_initialized()  # joined or started here: shut down here
    start_ray("auto", num_cpus=workers, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1)(_pairs_task)
        pending = [task.remote(*job) for job in jobs]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=timeout_s)
            if not ready:
                raise TimeoutError(f"no game pairs finished within {timeout_s:.0f} s on Ray")
            finished(ray.get(ready[0], timeout=timeout_s))
    finally:
        if owned:
            ray.shutdown()
