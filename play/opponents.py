"""The opponents the play page suggests: each by a name a player reads and its measured strength.

A suggested opponent is a player spec from ``play.opponents`` (conf/play/default.yaml) with a
name, or a network file found in the models or runs folder. Its strength is its rating on the
ladder's scale when a ladder table rates that very spec (``play.ratings_tables``: the shipped
table, evaluation/ladder/data/ladder_ratings.csv, by default, random = 0); otherwise the figure the
configuration says was measured for it, or nothing. No number is made up here: every one
comes from a table or from the configuration.

Only files that are MCTS networks are offered as networks: a safetensors file whose header
does not say it is a checkerzero model (the learned evaluations ``nneval-v*.safetensors`` beside
the networks in game/data, say) is not a player, and offering it made a game fail after the
user's first move, when the opponent was first asked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evaluation.ladder.table import read_table, table_path

logger = logging.getLogger(__name__)

MAX_HEADER_BYTES = 1 << 20  # a checkpoint's safetensors header is a few KB; more is no network
MODEL_KEY = "checkerzero"  # the header metadata key a checkerzero checkpoint carries


def ladder_ratings(settings: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every player rated by the configured tables: spec -> {elo, lower, upper, games, table}
    (a later table wins). A table that cannot be read is logged and skipped."""
    rated: dict[str, dict[str, Any]] = {}
    for setting in settings.get("ratings_tables") or []:
        path = table_path(str(setting))
        if path is None:
            continue
        try:
            table = read_table(path)
        except ValueError as e:
            logger.warning("play.ratings_tables: %s", e)
            continue
        for row in table.rows:
            rated[row.player] = {
                "elo": round(row.elo),
                "lower": round(row.lower),
                "upper": round(row.upper),
                "games": row.games,
                "table": path.name,
            }
    return rated


def strength_text(rating: Mapping[str, Any] | None, measured: str | None) -> str:
    """What the page shows beside an opponent's name."""
    if rating is not None:
        return (
            f"about {rating['elo']:+d} on the ladder "
            f"([{rating['lower']:+d}, {rating['upper']:+d}], random = 0)"
        )
    if measured:
        return f"not on the ladder yet; measured: {measured}"
    return "not on the ladder yet"


def suggested(
    settings: Mapping[str, Any], networks: Iterable[str], rated: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The opponents the page offers: the configured players, then each network at the default
    visits and at 200 ms a move, each with {spec, name, strength, rating}."""
    out = []
    for entry in settings.get("opponents") or []:
        spec = str(entry["spec"])
        rating = rated.get(spec)
        out.append(
            {
                "spec": spec,
                "name": str(entry.get("name") or spec),
                "strength": strength_text(rating, entry.get("measured")),
                "rating": rating,
            }
        )
    sims = int(settings["default_simulations"])
    for net in networks:
        stem = Path(net).name.removesuffix(".safetensors")
        for spec, budget in ((f"{net}:sims={sims}", f"{sims} visits"), (f"{net}:t200", "200 ms")):
            rating = rated.get(spec)
            out.append(
                {
                    "spec": spec,
                    "name": f"network {stem} (MCTS), {budget} a move",
                    "strength": strength_text(rating, None),
                    "rating": rating,
                }
            )
    return out


__all__ = ["ladder_ratings", "strength_text", "suggested"]
