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


def count_text(n: int) -> str:
    """A count in at most five characters: 9,999, 12.3k, 456k, 1.23M, 100M."""
    if n < 10_000:
        return f"{n:,}"
    for unit, size in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        value = n / size
        if value < 999.5 or unit == "G":
            return f"{value:.3g}{unit}"
    return str(n)


def progress_text(
    elapsed_s: float,
    step: int,
    row: dict[str, float],
    waiting: str | None = None,
    eta_s: float | None = None,
) -> str:
    """The progress line: elapsed time, self-play's positions per second, the step and steps
    per second, the newest total loss, the newest Elo with its interval's half width and
    version, the time left (``eta_s``, with learner.time_limit_min) and what the learner waits
    for (``waiting``, a few words: the line that says why is logged when the wait begins), two
    spaces apart. At most PROGRESS_WIDTH characters with every field at its widest
    (tests/test_run_outputs.py), so that with the terminal's ``HH:MM:SS`` it fits 120; the rest
    (games, counts, the loss's parts, the window, the actors) is in metrics.csv."""
    parts = [
        _elapsed(elapsed_s),
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
    if eta_s is not None:
        parts.append(f"ETA {_elapsed(eta_s)}")
    if waiting:
        parts.append(waiting)
    return "  ".join(parts)


PROGRESS_WIDTH = 111  # 120 characters of terminal less the time stamp (learner.terminal)


def waiting_for_data(have: int, need: int) -> str:
    """The progress line's note while the replay fills up to replay.min_positions."""
    return f"waiting for data {count_text(have)}/{count_text(need)}"


def wait_explained(kind: str, have: int, need: int, ratio: float) -> str:
    """Why the learner waits, in words (logged once when a wait begins): ``kind`` "data" (the
    first step needs ``need`` positions, ``have`` so far) or "self-play" (it trained on every
    position as often as replay.sample_ratio allows)."""
    if kind == "data":
        return (
            f"waiting for self-play: the first training step needs {need:,} positions in the "
            f"replay (replay.min_positions), it has {have:,}; the actors are playing"
        )
    return (
        f"waiting for self-play: each position has been trained on {ratio:g} times on "
        "average (replay.sample_ratio); training goes on as new games arrive"
    )


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
        lines.append(f"    play it on the page: {play_command(summary['model'], path.parent)}")
        lines.append(
            f"    rate it: python -m evaluation.match {summary['model']} minimax:4 --games 20"
        )
    wandb = summary.get("wandb") or {}
    if wandb.get("mode") == "offline":
        where = Path(path.parent) / "wandb"
        lines.append(f"  W&B (offline): its files are in {where}; upload them with")
        lines.append(f"    wandb sync {where}/offline-run-*")
    lines.append(f"  summary for scripts: {path}")
    return "\n".join(lines)


PLAY_SIMULATIONS = 200  # the network's visits a move in the play command the end report names


def play_command(model: str, run_dir: Path) -> str:
    """The command that serves the page with the run's network as the opponent and as the
    network engine of the analysis (a path the server reads from its runs folder)."""
    run_dir = Path(run_dir)
    try:
        relative = Path(model).resolve().relative_to(run_dir.resolve().parent)
    except ValueError:
        relative = Path(model)
    spec = f"{relative}:sims={PLAY_SIMULATIONS}"
    return f"python -m play --runs {run_dir.parent} --player {spec} --network {spec}"
