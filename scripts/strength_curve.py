"""Strength through a run: every K-th saved weights file against the minimax ladder.

    python scripts/strength_curve.py runs/<run> [--snapshots 6] [--games 20] [--sims 100]

The learner keeps the weights of its newest ``learner.keep_weights`` checkpoints (20; 0 keeps
every one) under ``<run>/checkpoints/weights/``. This plays
evenly spaced snapshots (always the last one) against the ladder (``random`` and
``minimax:1..N``) from the ACF deck with colours reversed, plays the rungs against each other
once, fits every rating by maximum likelihood with draws (random anchored at 0), and writes
``strength.csv`` and ``strength.png`` (Elo against training minutes) into the run directory.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from checkerzero.metric_names import WEIGHTS_VERSION
from checkerzero.metrics import read_metrics
from checkerzero.run_files import CHECKPOINT_DIR, METRICS_CSV, STEP_PATTERN, WEIGHTS_DIR
from evaluation.ladder.rungs import pair_results, rung_results
from evaluation.matches.records import MatchResult
from evaluation.matches.workers import run_match
from evaluation.stats.fit import fit_ratings
from game.openings import load_openings


def snapshots(run_dir: Path, count: int) -> list[tuple[int, Path]]:
    files = (
        sorted(
            (int(m.group(1)), p)
            for p in (run_dir / CHECKPOINT_DIR / WEIGHTS_DIR).iterdir()
            if (m := STEP_PATTERN.match(p.name))
        )
        if (run_dir / CHECKPOINT_DIR / WEIGHTS_DIR).is_dir()
        else []
    )
    if not files:
        raise SystemExit(f"error: no weights under {run_dir / CHECKPOINT_DIR / WEIGHTS_DIR}")
    if len(files) <= count:
        return files
    picked = {round(i * (len(files) - 1) / (count - 1)) for i in range(count)}
    return [files[i] for i in sorted(picked)]


def minutes_at(run_dir: Path) -> dict[int, float]:
    """Training step -> minutes since the run's first metrics row."""
    series = read_metrics(run_dir / METRICS_CSV).get(WEIGHTS_VERSION, [])
    if not series:
        return {}
    t0 = series[0][1]
    return {step: (t - t0) / 60 for step, t, _ in series}


def main(argv: list[str] | None = None) -> None:
    # Over 80 lines: the script's steps in order (arguments, matches, fit, table, plot), no logic
    # of its own.
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--snapshots", type=int, default=6)
    parser.add_argument("--games", type=int, default=20, help="games per snapshot and rung")
    parser.add_argument("--sims", type=int, default=100, help="network simulations per decision")
    parser.add_argument("--max-depth", type=int, default=4, help="deepest minimax rung")
    parser.add_argument("--ladder-games", type=int, default=20, help="games between adjacent rungs")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    deck = load_openings("deck")
    ladder = ["random"] + [f"minimax:{d}" for d in range(1, args.max_depth + 1)]
    results = []

    def played(a: str, b: str, games: int, label: str) -> MatchResult:
        match = run_match(a, b, deck, games=games, seed=0, workers=args.workers, ray_mode="off")
        print(
            f"  {label:<14} vs {b:<10} +{match.wins} ={match.draws} -{match.losses} "
            f"({100 * match.score:.0f}%)",
            flush=True,
        )
        return match

    def play(a: str, b: str, games: int, label: str) -> None:
        results.extend(pair_results(played(a, b, games, label).pairs, label, b))

    results.extend(rung_results(ladder, lambda a, b: played(a, b, args.ladder_games, a)))
    steps = snapshots(args.run_dir, args.snapshots)
    for step, path in steps:
        for rung in ladder[1:]:
            play(f"{path}:sims={args.sims}", rung, args.games, f"step {step}")
    ratings = fit_ratings(results, {"random": 0.0}, first_move_advantage=True)
    when = minutes_at(args.run_dir)
    rows = []
    for step, _ in steps:
        r = ratings[f"step {step}"]
        minute = when.get(
            step, min(when.items(), key=lambda kv: abs(kv[0] - step))[1] if when else float("nan")
        )
        rows.append((step, minute, r.elo, r.lower, r.upper))
    out_csv = args.run_dir / "strength.csv"
    with out_csv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "minutes", "elo", "elo_lower", "elo_upper"])
        w.writerows(rows)
        for rung in ladder:
            r = ratings[rung]
            w.writerow([rung, "", r.elo, r.lower, r.upper])
    print("\n| snapshot | minutes | Elo (95%) |\n| --- | --- | --- |")
    for step, minute, elo, lo, hi in rows:
        print(f"| step {step} | {minute:.0f} | {elo:+.0f} [{lo:+.0f}, {hi:+.0f}] |")
    for rung in ladder:
        r = ratings[rung]
        print(f"| {rung} | | {r.elo:+.0f} [{r.lower:+.0f}, {r.upper:+.0f}] |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    xs = [r[1] for r in rows]
    ax.errorbar(
        xs,
        [r[2] for r in rows],
        yerr=[[r[2] - r[3] for r in rows], [r[4] - r[2] for r in rows]],
        marker="o",
        label="network (MCTS)",
    )
    for rung in ladder[1:]:
        ax.axhline(ratings[rung].elo, ls=":", lw=1, color="grey")
        ax.text(max(xs) if xs else 0, ratings[rung].elo, f" {rung}", va="center", fontsize=8)
    ax.set_xlabel("training minutes")
    ax.set_ylabel("Elo (random = 0)")
    ax.set_title("strength through the run")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.run_dir / "strength.png")
    print(f"wrote {out_csv} and {args.run_dir / 'strength.png'}", file=sys.stderr)


if __name__ == "__main__":
    main()
