"""The search's parameters, each declared once: its type, default, range and one line of meaning.

The C++ search (``MctsConfig`` in game/cpp/mcts.h) reads them; every other place derives from
the table below, and tests/test_search_parameters.py holds each place to it:

- conf/mcts/default.yaml is this table written out (`yaml_text`; ``python -m
  game.search_parameters`` prints it): each key with its default, the doc line as its comment;
- ``checkerzero.config_schema`` checks ``mcts.*`` (and the evaluation group's search keys) with
  these ranges, and `game.mcts.make_config` with the same ones;
- the players' spec options that set a search key (``cpuct``, ``leaves``, ...) check their
  values here;
- ``MctsConfig``'s C++ defaults are these, and its own check (``check_config``) accepts every
  value these ranges allow: it is the core's floor, these are what a user may ask for.

A range's upper bound is the edge of what the program can do, not tuning advice, so that a typo
such as ``mcts.simulations=1000000`` is refused in the first second.
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["SEARCH_KEYS", "SEARCH_PARAMETERS", "SearchParameter", "yaml_text"]


@dataclass(frozen=True)
class SearchParameter:
    """One search parameter. ``kind`` is its type (int, float, bool or str); a number lies in
    [lo, hi] (``open_lo``: lo itself excluded), a string is one of ``choices``."""

    name: str
    kind: type
    default: Any
    doc: str  # one line: what it does, its unit, why this default (conf/mcts/default.yaml)
    lo: float = -math.inf
    hi: float = math.inf
    open_lo: bool = False
    choices: tuple[str, ...] = ()

    def ok(self, value: Any) -> bool:
        """Whether ``value`` is of this parameter's type and in its range."""
        if self.kind is bool:
            return isinstance(value, bool)
        if self.kind is str:
            return isinstance(value, str) and value in self.choices
        if isinstance(value, bool) or not isinstance(
            value, numbers.Integral if self.kind is int else numbers.Real
        ):
            return False
        if not math.isfinite(value):
            return False
        return (value > self.lo if self.open_lo else value >= self.lo) and value <= self.hi

    @property
    def allowed(self) -> str:
        """What ``ok`` allows, as an error message says it."""
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return "one of " + ", ".join(self.choices)
        if self.kind is int:
            return f"an integer from {self.lo:,.0f} to {self.hi:,.0f}"
        return f"a finite number in {'(' if self.open_lo else '['}{self.lo:g}, {self.hi:g}]"

    def problem(self, value: Any) -> str | None:
        """None for an allowed value, else what is allowed."""
        return None if self.ok(value) else self.allowed


_P = SearchParameter
# The order is conf/mcts/default.yaml's. A bound's reason is the comment beside it.
_TABLE = (
    # The C++ search visits ~20-40 k nodes/s on a core without a network: 100,000 a move is
    # minutes of a game already (the play server caps a position at 20,000). 0 would not search.
    _P(
        "simulations",
        int,
        100,
        "visits below the root per decision (the root's own evaluation is extra); enough for "
        "a small net on CPU, raise to 400-800 on a GPU",
        lo=1,
        hi=100_000,
    ),
    # Node::pending is 16 bits (kMaxLeavesPerGame in mcts.cpp).
    _P(
        "leaves_per_game",
        int,
        8,
        "most leaves gathered from one tree per forward pass (virtual loss keeps them apart);"
        " batch = games_in_parallel x this",
        lo=1,
        hi=65_535,
    ),
    # Q is in [-1, 1]: at 100 the prior alone picks every visit.
    _P(
        "c_puct",
        float,
        1.25,
        "exploration constant, AlphaZero's c_init for values in [-1, 1]",
        lo=0,
        hi=100,
    ),
    # 0: constant c_puct; a base past every visit count acts so.
    _P(
        "c_puct_base",
        float,
        19652,
        "AlphaZero's c_base: exploration grows as log((1+N+base)/base), felt only past ~10k "
        "visits; 0 keeps c_puct constant",
        lo=0,
        hi=1e9,
    ),
    # Q is in [-1, 1]: past 2 every unvisited child ranks alike.
    _P(
        "fpu_reduction",
        float,
        0.25,
        "first-play urgency inside the tree: an unvisited child is valued at its parent's Q "
        "minus this (Leela Chess Zero's default range)",
        lo=-2,
        hi=2,
    ),
    _P(
        "fpu_reduction_root",
        float,
        0.0,
        "the same at the root, where Dirichlet noise already spreads the visits",
        lo=-2,
        hi=2,
    ),
    # A gamma of shape 0 has no draws; at 100 the noise is flat.
    _P(
        "dirichlet_alpha",
        float,
        0.3,
        "root noise concentration, AlphaZero's chess value; 1.0 (the 10 / legal-moves rule, "
        "~8 here) played ~90 Elo worse, and 0.15 for an hour no better (docs/tuning.md)",
        lo=0,
        hi=100,
        open_lo=True,
    ),
    # A share.
    _P(
        "dirichlet_epsilon",
        float,
        0.25,
        "share of noise mixed into the root priors in self-play (AlphaZero); 0 turns noise "
        "off (evaluation, play)",
        lo=0,
        hi=1,
    ),
    # Losses per leaf in flight; past 1,000 any path is shut.
    _P(
        "virtual_loss",
        float,
        1.0,
        "visits, each counted a loss, that a leaf waiting for the network adds to its path; 1"
        " spreads 8 leaves/tree without distorting Q much",
        lo=0,
        hi=1000,
    ),
    _P(
        "collapse_forced",
        bool,
        True,
        "a position with one legal action (forced capture, jump continuation) is expanded "
        "without a network call: its value is its child's",
    ),
    _P(
        "skip_forced_root",
        bool,
        True,
        "a decision with one legal action is played without search (recorded with one visit)",
    ),
    # KataGo's 2; at 100 forced visits are most of a search.
    _P(
        "forced_playouts_k",
        float,
        0.0,
        "forced playouts + policy target pruning (KataGo's k=2): at noised roots (full self-"
        "play searches only; evaluation and play have no noise) a child gets >= sqrt(k * "
        "prior * visits) visits, and the recorded policy target drops the forced ones PUCT "
        "would not have spent; 0 = off (today's search)",
        lo=0,
        hi=100,
    ),
    # Priors are raised to 1/T: 0 divides by 0; at 100 they are flat.
    _P(
        "policy_temperature",
        float,
        1.0,
        "priors raised to 1/T and renormalised when a node is expanded (lc0's policy softmax "
        "temperature); > 1 flattens them, 1 = the network's priors",
        lo=0,
        hi=100,
        open_lo=True,
    ),
    # Every RNG the run seeds takes a 31-bit seed; actors add their id.
    _P(
        "seed",
        int,
        0,
        "RNG seed of the search (noise, move sampling); self-play actors derive theirs from "
        "the run seed and their id",
        lo=0,
        hi=2**31 - 1,
    ),
    _P(
        "root_policy",
        str,
        "puct",
        "puct (AlphaZero: PUCT everywhere, visit counts as the policy target) or gumbel "
        "(Gumbel AlphaZero: Gumbel-top-k actions at the root searched by sequential halving, "
        "the completed-Q policy as the target, a deterministic selection below the root; "
        "game/cpp/mcts.h); puct until measured (docs/tuning.md)",
        choices=("puct", "gumbel"),
    ),
    # More than any position's legal moves considers them all.
    _P(
        "gumbel_m",
        int,
        16,
        "gumbel only: root actions sampled and searched by sequential halving (the paper's "
        "16); more than the legal moves considers them all",
        lo=1,
        hi=1000,
    ),
    _P(
        "gumbel_c_visit",
        float,
        50.0,
        "gumbel only: c_visit of sigma(q) = (c_visit + max visits) * c_scale * q, the paper's 50",
        lo=0,
        hi=1e6,
    ),
    _P(
        "gumbel_c_scale",
        float,
        1.0,
        "gumbel only: c_scale of sigma(q), values read in [0, 1]; the paper's 1.0 (mctx's "
        "default is 0.1: a softer target)",
        lo=0,
        hi=1000,
    ),
    _P(
        "solver",
        bool,
        False,
        "MCTS-solver: terminal positions and endgame-database hits are proven "
        "wins/losses/draws and carried up the tree; decided subtrees get no more visits, a "
        "proven win is always played and a proven loss never while another move is not lost "
        "(game/cpp/mcts.h); off until measured",
    ),
)

SEARCH_PARAMETERS: dict[str, SearchParameter] = {p.name: p for p in _TABLE}
SEARCH_KEYS = tuple(SEARCH_PARAMETERS)

YAML_HEADER = (
    "# Batched PUCT search (game/cpp/mcts.h). Read by game.mcts.make_config.\n"
    "# Each key is declared in game/search_parameters.py (its default, range and comment);\n"
    "# this file is written from there: python -m game.search_parameters > conf/mcts/default.yaml\n"
)


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def yaml_text() -> str:
    """conf/mcts/default.yaml as the table declares it."""
    lines = [f"{p.name}: {_yaml_value(p.default)}  # {p.doc}" for p in _TABLE]
    return YAML_HEADER + "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(yaml_text())
