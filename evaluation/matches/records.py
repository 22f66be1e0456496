"""What a match leaves: its games, its colour-reversed pairs and its result, as plain values.

:class:`PlayedGame` is one finished game (PDN's result and termination), :class:`PairRecord` an
opening played twice with colours reversed (what the gate's pentanomial model scores, and what
crosses process boundaries as a plain dict), :class:`MatchResult` a match's pairs with its
W/D/L, Elo, pentanomial counts and what each player's search did per move. Games are played by
evaluation.matches.games (in this process) and evaluation.matches.workers (in workers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evaluation.stats.elo import EloEstimate, match_elo
from game.pdn import PdnGame

EVENT = "checkerzero match"


PAIR_POINTS = (0.0, 0.5, 1.0, 1.5, 2.0)
GAME_RESULTS = ("1-0", "0-1", "1/2-1/2")  # a finished game's (PDN's; "1-0": Black won)
# A search counter summed over a pair's two games: 10^15 is past a week of a million nodes a
# second; a count beyond it (or below 0) is a damaged record, not a search.
MAX_STAT = 10**15  # the pentanomial categories: A's points over a pair


# Search counters that are totals over the moves; a match reports them per move (the others,
# such as "forced" and "reused", stay counts).
PER_MOVE_STATS = ("simulations", "evaluations", "depth", "nodes", "ms")


def pairs_pdn_games(pairs: Iterable[PairRecord]) -> list[PdnGame]:
    """The pairs' games as PDN, in order, each with its round: pair number, then 1 (A as Black)
    or 2."""
    return [
        game.pdn(f"{pair.index + 1}.{k + 1}")
        for pair in pairs
        for k, game in enumerate((pair.a_black, pair.a_white))
    ]


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
        """The game of ``to_dict``; ValueError for a result that is not a finished game's or
        a field of the wrong type (a journal or a Redis list may hold anything)."""
        if d["result"] not in GAME_RESULTS:
            raise ValueError(f"game result {str(d['result'])[:40]!r} is not one of {GAME_RESULTS}")
        if d["size"] not in (6, 8) or type(d["size"]) is not int:
            raise ValueError(f"game board size {str(d['size'])[:40]!r} is not 6 or 8")
        text = {k: d[k] for k in ("black", "white", "opening", "end_reason")}
        if not isinstance(d["moves"], list) or not all(
            isinstance(v, str) for v in (*text.values(), *d["moves"])
        ):
            raise ValueError("game names, opening, moves and end must be strings")
        return cls(**text, moves=tuple(d["moves"]), result=d["result"], size=d["size"])


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
            for k, v in value.items():
                if type(v) is not int or not 0 <= v <= MAX_STAT:
                    raise ValueError(f"game pair {key}[{k!r}] is {str(v)[:40]}, not a count")
            return {str(k): v for k, v in value.items()}

        if type(d["index"]) is not int or d["index"] < 0:
            raise ValueError(f"game pair index {str(d['index'])[:40]} is not a pair number")
        return cls(
            index=d["index"],
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
        """A's Elo over B with the trinomial 95% interval (evaluation.stats.elo.match_elo)."""
        return match_elo(self.wins, self.draws, self.losses)

    def pdn_games(self) -> list[PdnGame]:
        return pairs_pdn_games(self.pairs)

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
    (810 moves searched, 12 forced, 4 from the book)" or "depth 11.3, 812,000 nodes per move
    (795 moves)"."""
    moves = int(search.get("moves", 0))
    if "simulations" in search:
        forced = int(search.get("forced", 0))
        known = "".join(
            f", {int(search[key])} {what}"
            for key, what in (("book_moves", "from the book"), ("egdb_moves", "from the database"))
            if search.get(key)
        )
        spent = f", {search['ms']:,.0f} ms" if "ms" in search else ""
        return (
            f"{search['simulations']:,.0f} simulations{spent} per move "
            f"({moves} moves searched, {forced} forced{known})"
        )
    if "depth" in search:
        nodes = search.get("nodes", 0)
        spent = f", {search['ms']:,.0f} ms" if "ms" in search else ""
        return f"depth {search['depth']:.1f}, {nodes:,.0f} nodes{spent} per move ({moves} moves)"
    return ""
