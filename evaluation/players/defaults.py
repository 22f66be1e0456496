"""The search settings and knowledge switches of evaluation players, from the composed config.

`default_mcts_settings` is the ``mcts`` group with the ``evaluation`` group's simulations, leaves
per game and root policy (`eval_mcts_settings` of a given config); `play_settings` turns any
settings into settings for playing to win (no noise); `default_knowledge` says whether the
endgame database and the opening book are on. The players are `evaluation.players.mcts` and the
specs `evaluation.players.network`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from checkerzero.config import default_config
from evaluation.players.endgame import play_database_settings

# Keys of the `evaluation` group that override the `mcts` group for evaluation players
# (timed_leaves_per_game is read by players with a time per move only: their leaves per forward
# pass; root_policy judges every run by the same search, whatever its self-play used).
EVAL_MCTS_KEYS = ("simulations", "leaves_per_game", "timed_leaves_per_game", "root_policy")


def eval_mcts_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The search settings of evaluation players in a composed config: the mcts group with the
    evaluation group's simulations, leaves per game and root policy (plain values)."""
    settings = {k: cfg["mcts"][k] for k in cfg["mcts"]}
    settings.update({k: cfg["evaluation"][k] for k in EVAL_MCTS_KEYS})
    return settings


@functools.cache
def _composed_mcts_settings() -> tuple[tuple[str, Any], ...]:
    return tuple(eval_mcts_settings(default_config()).items())


@functools.cache
def _composed_knowledge() -> tuple[tuple[tuple[str, Any], ...], bool]:
    cfg = default_config()
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
