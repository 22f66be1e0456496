"""``make_player``: the player a spec names (:mod:`evaluation.players.spec`), built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluation.players.alphabeta import DEFAULT_TT_MB, EvalWeights, MinimaxPlayer
from evaluation.players.base import Player, RandomPlayer
from evaluation.players.network import mcts_player
from evaluation.players.spec import SWITCH_OPTIONS, PlayerSpec, parse_spec
from game import _core


def make_player(
    spec: str | PlayerSpec,
    *,
    weights: Mapping[str, Any] | EvalWeights | None = None,
    seed: int = 0,
    tt_mb: int = DEFAULT_TT_MB,
    egdb_dir: str | None = None,
    egdb_pieces: int = 0,
    **options: Any,
) -> Player:
    """The player a spec names (module docstring); ValueError naming the spec if unknown.

    ``weights`` and ``tt_mb`` configure minimax players, ``seed`` a random player without its own
    seed; ``egdb_dir`` and ``egdb_pieces`` name the endgame database of ``minimax+db`` players;
    any other ``options`` (``mcts``: search settings) go to the MCTS players.
    """
    parsed = spec if isinstance(spec, PlayerSpec) else parse_spec(spec)
    if parsed.alphabeta:
        if parsed.database and (not egdb_dir or egdb_pieces < 1):
            raise ValueError(
                f"player spec {parsed.text!r} needs an endgame database: give egdb_dir and "
                "egdb_pieces (conf/egdb; python -m evaluation.match --egdb-dir DIR --egdb-pieces N)"
            )
        switches = _core.SearchSwitches()
        for option in parsed.switches:
            setattr(switches, SWITCH_OPTIONS[option], True)
        if parsed.probcut_min_pieces is not None:
            switches.probcut_min_pieces = parsed.probcut_min_pieces
        try:
            return MinimaxPlayer(
                parsed.depth,
                parsed.time_ms,
                weights,
                tt_mb=tt_mb if parsed.tt_mb is None else parsed.tt_mb,
                egdb_dir=egdb_dir if parsed.database else None,
                egdb_pieces=egdb_pieces if parsed.database else 0,
                nneval=(parsed.nneval_path or "") if parsed.kind == "ab+nn" else None,
                manage_time=parsed.manage_time,
                game_ms=parsed.game_ms,
                switches=switches,
                name_table=parsed.tt_mb is not None,
                book=parsed.book,
            )
        except ValueError as e:
            raise ValueError(f"player spec {parsed.text!r}: {e}") from None
    if parsed.kind == "random":
        return RandomPlayer(seed if parsed.seed is None else parsed.seed)
    return mcts_player(parsed, seed=seed, egdb_dir=egdb_dir, egdb_pieces=egdb_pieces, **options)


__all__ = ["make_player"]
