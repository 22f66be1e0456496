"""The baselines' strength per minute of training, drawn from their match files.

    python scripts/baselines_plot.py docs/results/baselines

Reads ``matches.csv`` in that folder (one row per match: method, how it played, its training
minutes, the opponent and the ``evaluation.match --json`` file) and ``sl-metrics.csv`` (the
supervised run's validation agreement), and writes ``strength.png`` there: one panel per
opponent with each match's Elo and its 95% interval against training minutes, and the
supervised run's validation top-1 against its minutes. An interval with an open end (a match
won or lost outright) is drawn to the edge of the panel.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

OPEN_END = 800  # Elo drawn for an interval's open end


def read_matches(folder: Path) -> list[dict]:
    rows = []
    with (folder / "matches.csv").open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            path = folder / row["file"]
            try:
                match = json.loads(path.read_text())
                row["minutes"] = float(row["minutes"])
            except (OSError, ValueError) as e:
                raise SystemExit(f"matches.csv line {line}: {e}") from e
            rows.append(
                {
                    **row,
                    **{k: match[k] for k in ("games", "score", "elo")},
                    "lower": match["elo_lower"],
                    "upper": match["elo_upper"],
                }
            )
    return rows


def _strength_order(opponent: str) -> tuple[int, str]:
    """random first, then minimax by depth."""
    if opponent.startswith("minimax:") and opponent[8:].isdigit():
        return (int(opponent[8:]), opponent)
    return (-1, opponent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_matches(args.folder)
    opponents = sorted({r["opponent"] for r in rows}, key=_strength_order)
    cols = 3
    panels = len(opponents) + 1
    fig, grid = plt.subplots(
        (panels + cols - 1) // cols,
        cols,
        figsize=(13, 3.6 * ((panels + cols - 1) // cols)),
        squeeze=False,
    )
    axes = list(grid.flat)
    for ax in axes[panels:]:
        ax.set_visible(False)
    axes = axes[:panels]
    labels = list(dict.fromkeys(f"{r['method']} ({r['player']})" for r in rows))
    colours = {label: f"C{i}" for i, label in enumerate(labels)}
    for ax, opponent in zip(axes, opponents, strict=False):
        for label in labels:
            mine = [
                r
                for r in rows
                if r["opponent"] == opponent and f"{r['method']} ({r['player']})" == label
            ]
            if not mine:
                continue
            mine.sort(key=lambda r: r["minutes"])
            x = [r["minutes"] for r in mine]
            y = [r["elo"] for r in mine]
            low = [r["elo"] - (r["lower"] if r["lower"] is not None else -OPEN_END) for r in mine]
            high = [(r["upper"] if r["upper"] is not None else OPEN_END) - r["elo"] for r in mine]
            ax.errorbar(
                x, y, yerr=[low, high], fmt="o-", capsize=3, color=colours[label], label=label
            )
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(f"against {opponent}")
        ax.set_xlabel("training minutes")
        ax.set_ylabel("Elo (95% interval)")
        ax.set_xlim(0, max(r["minutes"] for r in rows) + 5)
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[:-1]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    axes[0].legend(handles.values(), handles.keys(), fontsize=7, loc="lower left")
    with (args.folder / "sl-metrics.csv").open(newline="") as f:
        metrics = list(csv.DictReader(f))
    ax = axes[-1]
    ax.plot(
        [float(m["wall_s"]) / 60 for m in metrics],
        [100 * float(m["val_top1"]) for m in metrics],
        "o-",
        label="validation top-1",
    )
    ax.axhline(66, color="grey", ls=":", label="published 66% (no held-out split)")
    ax.set_title("supervised: agreement with the experts")
    ax.set_xlabel("training minutes")
    ax.set_ylabel("whole-move top-1 %")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = args.folder / "strength.png"
    fig.savefig(out, dpi=100)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
