"""A run's numbers as rows and text: the losses as metrics, the end-of-run summary as a person
reads it (the same facts as ``summary.json``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from checkerzero import metric_names as M
from learner.losses import Losses


def loss_metrics(losses: Losses | None) -> dict[str, float]:
    """The newest step's losses as metric keys (empty before the first step)."""
    if losses is None:
        return {}
    row = {
        M.LOSS_POLICY: losses.policy,
        M.LOSS_VALUE: losses.value,
        M.LOSS_TOTAL: losses.total,
    }
    if losses.moves_left is not None:  # a network with the moves-left head
        row[M.LOSS_MOVES_LEFT] = losses.moves_left
    if losses.moves_left_mae is not None and math.isfinite(losses.moves_left_mae):
        row[M.MOVES_LEFT_MAE] = losses.moves_left_mae  # over exact targets
    return row


def finite(value: float | None) -> float | None:
    """A number for JSON: None for a missing or infinite one (JSON has no infinity)."""
    return None if value is None or not math.isfinite(value) else float(value)


def _signed(value: float | None) -> str:
    return "?" if value is None else f"{value:+.0f}"


def _elapsed(seconds: float) -> str:
    """12m03s under an hour, 1h05m from then on."""
    minutes, secs = divmod(max(int(seconds), 0), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def _rate(per_s: float) -> str:
    """0.07, 4.49, 12.6, 1,234: four characters below 100, whole numbers above."""
    if per_s >= 100:
        return f"{per_s:,.0f}"
    return f"{per_s:.1f}" if per_s >= 10 else f"{per_s:.2f}"


def progress_text(
    elapsed_s: float,
    step: int,
    row: dict[str, float],
    waiting: str | None = None,
) -> str:
    """The progress line: elapsed time, self-play's games and positions per second, the step
    and steps per second, the newest total loss, the newest Elo with its interval's half width
    and version, what the learner waits for (``waiting``), two spaces apart. At most 113
    characters with every field at its widest (tests/test_run_outputs.py), so that with the
    log's time, name and level it fits 160; the rest (counts, the loss's parts, the window,
    the actors) is in metrics.csv."""
    parts = [
        _elapsed(elapsed_s),
        f"games {_rate(row.get('selfplay/games_per_s', 0.0))}/s",
        f"pos {_rate(row.get('selfplay/positions_per_s', 0.0))}/s",
        f"step {step:,} ({_rate(row.get('learner/steps_per_s', 0.0))}/s)",
    ]
    if M.LOSS_TOTAL in row:
        parts.append(f"loss {row['learner/loss_total']:.3f}")
    if M.EVAL_ELO in row:  # the newest rated candidate, random = 0
        lower, upper = row.get(M.EVAL_ELO_LOWER, math.nan), row.get(M.EVAL_ELO_UPPER, math.nan)
        half = (upper - lower) / 2
        spread = f"±{half:.0f}" if math.isfinite(half) else ""
        parts.append(f"Elo {row['eval/elo']:+.0f}{spread} v{row.get('eval/version', 0):.0f}")
    if waiting:
        parts.append(waiting)
    return "  ".join(parts)


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
    untrained = summary["step"] == 0 and not summary.get("init_weights")
    if losses := summary.get("losses"):
        lines.append(
            f"  last losses: total {losses['total']:.3f}"
            f" (policy {losses['policy']:.3f}, value {losses['value']:.3f})"
        )
    elif untrained:
        lines.append(
            "  0 training steps: this network is untrained (self-play had not added"
            " replay.min_positions positions yet); run longer before playing it"
        )
    elif summary["step"] == 0:
        lines.append("  0 training steps: the network is the warm start's (learner.init_weights)")
    if elo := summary.get("elo"):
        rating, lower, upper = (_signed(elo.get(k)) for k in ("elo", "lower", "upper"))
        lines.append(
            f"  newest Elo: {rating} [{lower}, {upper}] (weights v{elo['version']}, random = 0)"
        )
    lines.append(f"  network: {summary['model']}")
    if not untrained:
        lines.append(
            f"    play it: python -m evaluation.match {summary['model']} minimax:4 --games 20"
        )
    lines.append(f"  summary for scripts: {path}")
    return "\n".join(lines)
