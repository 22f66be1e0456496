"""Where the ladder's games go: which rungs play and how much, which rung a candidate meets next.

- :func:`rating_matches` and :func:`plan_pairs`: which rungs play each other and how many pairs
  a target interval needs, from the draw model's Fisher information
  (``python -m evaluation.rate_ladder``).
- :func:`neighbour_rungs` / :func:`nearest_rung`: where a candidate's next games inform most;
  :func:`gallop_rung`: where they go while it has won (or lost) every game, far from its start
  (the evaluator's rated ladder).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from evaluation.stats.elo import PairResult, _z_value
from evaluation.stats.fit import game_information


def rating_matches(rungs: Sequence[str], next_neighbours: bool = False) -> list[tuple[str, str]]:
    """(stronger, weaker) rung pairs that play each other: every rung against the one below it,
    and with ``next_neighbours`` the one below that too (a second path through the chain)."""
    out = [(upper, lower) for lower, upper in itertools.pairwise(rungs)]
    if next_neighbours:
        out += [(rungs[k + 2], rungs[k]) for k in range(len(rungs) - 2)]
    return out


def predicted_half_widths(
    rungs: Sequence[str],
    elo: Mapping[str, float],
    draw_elo: float,
    pairs: Mapping[tuple[str, str], int],
    confidence: float = 0.95,
) -> dict[str, float]:
    """Each rung's expected interval half-width (the first rung anchored) after ``pairs``
    colour-reversed pairs per match, from the draw model's Fisher information at the
    ratings ``elo``: z * sqrt of the diagonal of the inverse information matrix."""
    free = list(rungs[1:])
    col = {name: k for k, name in enumerate(free)}
    info = np.zeros((len(free), len(free)))
    for (a, b), n in pairs.items():
        weight = 2 * n * game_information(elo[a] - elo[b], draw_elo)
        v = np.zeros(len(free))
        if a in col:
            v[col[a]] += 1.0
        if b in col:
            v[col[b]] -= 1.0
        info += weight * np.outer(v, v)
    z = _z_value(confidence)
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return {rungs[0]: 0.0} | {name: math.inf for name in free}
    return {rungs[0]: 0.0} | {
        name: z * math.sqrt(max(cov[k, k], 0.0)) for k, name in enumerate(free)
    }


def plan_pairs(
    rungs: Sequence[str],
    elo: Mapping[str, float],
    draw_elo: float,
    matches: Sequence[tuple[str, str]],
    target: float,
    confidence: float = 0.95,
) -> int:
    """Colour-reversed pairs per match (the same for every match) for every rung's interval to
    be at most ``target`` Elo either side (the half-widths scale as 1/sqrt(pairs))."""
    if target <= 0:
        raise ValueError(f"the target half-width must be > 0 Elo, got {target}")
    widths = predicted_half_widths(rungs, elo, draw_elo, dict.fromkeys(matches, 1), confidence)
    worst = max(widths.values())
    return max(1, math.ceil((worst / target) ** 2))


def nearest_rung(estimate: float, ratings: Mapping[str, float]) -> str:
    """The rung whose rating is closest to ``estimate`` (the lower one on a tie)."""
    return min(ratings, key=lambda name: (abs(ratings[name] - estimate), ratings[name]))


def neighbour_rungs(estimate: float, ratings: Mapping[str, float], count: int = 1) -> list[str]:
    """The ``count`` rungs just below ``estimate`` and the ``count`` just above it, weakest
    first; at either end of the ladder the missing ones come from the other side."""
    order = sorted(ratings, key=lambda name: ratings[name])
    below = [n for n in order if ratings[n] <= estimate]
    above = [n for n in order if ratings[n] > estimate]
    low, high = below[-count:] if count else [], above[:count]
    if len(high) < count:
        low = below[-(2 * count - len(high)) :]
    if len(low) < count:
        high = above[: 2 * count - len(low)]
    return sorted(set(low) | set(high), key=lambda name: ratings[name])


def gallop_rung(results: Iterable[PairResult], ratings: Mapping[str, float]) -> str | None:
    """Where a candidate goes next while it has won every game so far (or lost every one):
    beyond the strongest (weakest) rung it met by 1, 2, 4... rungs, doubling with each rung it
    met (an exponential search), so one far from where its games began gets there in a few
    pairs. One rung a pair, as the neighbours of its estimate move, took a warm-started network
    all of its 32 games to climb from ``random`` to ``minimax:3``, rated +1507 where its
    matches put it near +2000. None once a game
    was drawn or went the other way (the neighbours of the estimate take over), before any
    game, or at the end of the ladder. ``results`` are the candidate's, as side ``a``."""
    order = sorted(ratings, key=lambda name: ratings[name])
    rows = [r for r in results if r.b in ratings]
    met = sorted({order.index(r.b) for r in rows})
    wins, draws, losses = (sum(getattr(r, k) for r in rows) for k in ("wins", "draws", "losses"))
    if not met or draws or (wins and losses):
        return None
    step = 2 ** (len(met) - 1)
    if losses == 0:  # above everything it met
        return order[min(met[-1] + step, len(order) - 1)] if met[-1] < len(order) - 1 else None
    return order[max(met[0] - step, 0)] if met[0] > 0 else None
