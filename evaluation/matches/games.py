"""Games, colour-reversed pairs and matches played in this process, with Player objects.

Every opening is played twice, once with each player as Black, and the two games are kept
together as a *pair*: the pentanomial model of the gate (evaluation.stats.sprt) scores pairs, which
cancels most of the bias of an unbalanced opening. The default openings are the ACF 3-move
deck used in tournaments (156 ballots: crossboard and mail-play; the 18 barred ballots lose
by force and are skipped); ``start`` plays every game from the initial position.

:func:`play_game`, :func:`play_pair` and :func:`play_match` play one game after another;
:func:`play_pairs` plays several pairs' games side by side, their network searches sharing
forward passes (the moves are those of one pair after another). Each pair also carries what
both players' searches did in it (``evaluation.players.alphabeta.player_stats``: moves, simulations,
depth, nodes). The records are evaluation.matches.records; a match of player *specs* spread over
worker processes or Ray tasks is evaluation.matches.workers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.matches.records import MatchResult, PairRecord, PlayedGame
from evaluation.players.base import Player, player_stats
from game.egdb import EndgameDatabase, describe, result_of
from game.mcts import search_many
from game.openings import Opening
from game.position import Position

# A game reaching this many plies is drawn by the ply cap. Expert games rarely pass 150 plies
# and the forty-move rule ends shuffling endings well before 300; the cap only stops pathologies.
DEFAULT_MAX_PLIES = 300


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
            groups.setdefault((id(player.inference), player.simulations), []).append(g)
        for g_list in groups.values():
            player = games[g_list[0]].to_move()
            leaves = search_many(
                [pending[g][1] for g in g_list], player.inference, player.simulations
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
