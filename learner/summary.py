"""A run's numbers as rows and text: the losses as metrics, the end-of-run summary as a person
reads it (the same facts as ``summary.json``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from learner.losses import Losses


def loss_metrics(losses: Losses | None) -> dict[str, float]:
    """The newest step's losses as metric keys (empty before the first step)."""
    if losses is None:
        return {}
    row = {
        "learner/loss_policy": losses.policy,
        "learner/loss_value": losses.value,
        "learner/loss_total": losses.total,
    }
    if losses.moves_left is not None:  # a network with the moves-left head
        row["learner/loss_moves_left"] = losses.moves_left
    if losses.moves_left_mae is not None and math.isfinite(losses.moves_left_mae):
        row["learner/moves_left_mae_plies"] = losses.moves_left_mae  # over exact targets
    return row


def finite(value: float | None) -> float | None:
    """A number for JSON: None for a missing or infinite one (JSON has no infinity)."""
    return None if value is None or not math.isfinite(value) else float(value)


def _signed(value: float | None) -> str:
    return "?" if value is None else f"{value:+.0f}"


def describe_summary(summary: dict[str, Any], path: Path) -> str:
    """The end of a run as a person reads it (the same facts as summary.json)."""
    minutes, seconds = divmod(int(summary["elapsed_s"]), 60)
    resumed = ""
    if summary["resumed"]:
        run_s = summary.get("run_s")
        resumed = " (resumed)" if run_s is None else f" (resumed, {run_s / 60:.0f} min in all)"
    lines = [
        f"run finished after {minutes} min {seconds:02d} s{resumed}:"
        f" {summary['step']:,} training steps,"
        f" weights version {summary['version']}, {summary['games']:,} self-play games,"
        f" {summary['positions']:,} positions",
    ]
    if losses := summary.get("losses"):
        lines.append(
            f"  last losses: total {losses['total']:.3f}"
            f" (policy {losses['policy']:.3f}, value {losses['value']:.3f})"
        )
    else:
        lines.append("  no training step yet (replay.min_positions not reached)")
    if elo := summary.get("elo"):
        rating, lower, upper = (_signed(elo.get(k)) for k in ("elo", "lower", "upper"))
        lines.append(
            f"  newest Elo: {rating} [{lower}, {upper}] (weights v{elo['version']}, random = 0)"
        )
    lines += [
        f"  network: {summary['model']}",
        f"    play it: python -m evaluation.match {summary['model']} minimax:4 --games 20",
        f"  summary for scripts: {path}",
    ]
    return "\n".join(lines)
